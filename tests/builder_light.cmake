# cmake -DCXX=... -DINCLUDE=... -DSCRATCH=... -P builder_light.cmake
# Fails unless tagc/builder.hpp (the builder's light half) includes no Reducer, stage/,
# detail/ (kernels) or intrinsics header: a file that picks a reducer at run time must
# not pay for compiling them (docs/design.md, "Light and heavy halves").
file(WRITE ${SCRATCH}/builder_light.cpp "#include <tagc/builder.hpp>\n")
execute_process(COMMAND ${CXX} -std=c++20 -I${INCLUDE} -M ${SCRATCH}/builder_light.cpp
                OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling a TU of tagc/builder.hpp alone failed:\n${err}")
endif()
string(REGEX MATCHALL "[^ \\\n]*(/stage/|/detail/|intrin|/reducer\\.hpp|/thrust/)[^ \\\n]*" heavy "${deps}")
if(heavy)
  list(REMOVE_DUPLICATES heavy)
  string(REPLACE ";" "\n  " heavy "${heavy}")
  message(FATAL_ERROR "tagc/builder.hpp pulls heavy headers:\n  ${heavy}")
endif()
string(REGEX MATCHALL "include/tagc/[^ \\\n]*" tagc "${deps}")
list(LENGTH tagc n)
message(STATUS "tagc/builder.hpp includes ${n} tagc headers, none of them heavy")
