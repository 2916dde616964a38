# ctest tagc_install_consumer: `cmake --install` this build into a scratch prefix,
# then configure, build and run examples/01_reduce_scatter_threads as an out-of-tree
# project that finds tagc with find_package(tagc CONFIG) through CMAKE_PREFIX_PATH
# (what a user does). Fails if any step fails, or the example's own check fails.
#   cmake -DBUILD_DIR=<this build> -DEXAMPLE=<example source dir> -DSCRATCH=<dir> -DGENERATOR=<gen> -P consumer.cmake
foreach(v BUILD_DIR EXAMPLE SCRATCH GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer.cmake: -D${v}=... missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${SCRATCH}")
set(prefix "${SCRATCH}/prefix")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("install into ${prefix}" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
if(NOT EXISTS "${prefix}/include/tagc/tagc.hpp")
  message(FATAL_ERROR "the install holds no ${prefix}/include/tagc/tagc.hpp")
endif()
# Nothing from the source tree may leak in: only the prefix is on the search path.
step("configure the consumer" ${CMAKE_COMMAND} -S "${EXAMPLE}" -B "${SCRATCH}/consumer" -G "${GENERATOR}"
     -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}")
step("build the consumer" ${CMAKE_COMMAND} --build "${SCRATCH}/consumer")
step("run the consumer" "${SCRATCH}/consumer/tagc_example_01" 2 100000 2)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "ok: 2 ranks")
  message(FATAL_ERROR "the consumer did not report success:\n${step_output}")
endif()
