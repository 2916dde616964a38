# tagc_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] [LABELS <labels...>])
# One doctest executable per component, registered with ctest under its name.
include_guard(GLOBAL)
find_package(doctest REQUIRED)

if(NOT TARGET tagc_doctest_main)
  add_library(tagc_doctest_main STATIC ${PROJECT_SOURCE_DIR}/tests/doctest_main.cpp)
  target_link_libraries(tagc_doctest_main PUBLIC doctest::doctest)
endif()

function(tagc_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE tagc_doctest_main ${T_LIBS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  # Tests run several ranks as threads, each with its own OpenMP team: passive
  # waiting keeps oversubscribed teams from spinning against each other.
  set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
