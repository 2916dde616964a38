# cmake -DREADME=... -DEXAMPLE=... -P readme_in_sync.cmake
# Fails unless the README contains, verbatim, the example between the markers.
file(READ ${EXAMPLE} example)
string(REGEX MATCH "// \\[readme-begin\\]\n(.*)// \\[readme-end\\]" _ "${example}")
set(snippet "${CMAKE_MATCH_1}")
if(snippet STREQUAL "")
  message(FATAL_ERROR "no [readme-begin]/[readme-end] block in ${EXAMPLE}")
endif()
file(READ ${README} readme)
string(FIND "${readme}" "${snippet}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not show the example of ${EXAMPLE} verbatim; copy it again")
endif()
message(STATUS "README example in sync")
