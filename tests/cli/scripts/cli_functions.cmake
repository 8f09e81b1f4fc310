# Test helpers of tests/cli/*.cmake (in scripts/, so the *.cmake glob of
# tests/CMakeLists.txt does not take it for a test file).
#
# hqekv_cli_success(NAME <test> ARGS <hqekv args...> REGEX <re>
#                   [VALUE_REGEX <re with one group> MIN <x> MAX <y>]
#                   [FILE <path> FILE_REGEX <re>])
#   hqekv exits 0, its stdout + stderr match REGEX (and the optional value /
#   file checks of expect_success.cmake.in hold).
# hqekv_cli_failure(NAME <test> ARGS <hqekv args...> MSG <text>)
#   hqekv exits nonzero and its stderr contains MSG.
include_guard(GLOBAL)
set(_hqekv_cli_dir ${CMAKE_CURRENT_LIST_DIR}/..)

function(hqekv_cli_success)
  cmake_parse_arguments(T "" "NAME;REGEX;VALUE_REGEX;MIN;MAX;FILE;FILE_REGEX" "ARGS" ${ARGN})
  set(extra "")
  if(DEFINED T_VALUE_REGEX)
    list(APPEND extra "-DVALUE_REGEX=${T_VALUE_REGEX}" "-DMIN=${T_MIN}" "-DMAX=${T_MAX}")
  endif()
  if(DEFINED T_FILE)
    list(APPEND extra "-DFILE=${T_FILE}" "-DFILE_REGEX=${T_FILE_REGEX}")
  endif()
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv> "-DARGS=${T_ARGS}"
           "-DREGEX=${T_REGEX}" ${extra} -P ${_hqekv_cli_dir}/expect_success.cmake.in)
endfunction()

function(hqekv_cli_failure)
  cmake_parse_arguments(T "" "NAME;MSG" "ARGS" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv> "-DARGS=${T_ARGS}"
           "-DMSG=${T_MSG}" -P ${_hqekv_cli_dir}/expect_failure.cmake.in)
endfunction()
