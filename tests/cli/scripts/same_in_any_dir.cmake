# A result must not depend on the directory the command starts in: runs
# HQEKV with ARGS (a ;-list) in ROOT (the repository, whose profiles/ a
# working-directory lookup would find) and in WORK (an empty scratch folder),
# and requires the same standard output from both. Then, when NOT_ARGS is
# given, requires that command's output to differ (the check can fail: the
# shipped per-layer budgets do change the result).
# Usage: cmake -DHQEKV=<binary> -DROOT=<dir> -DWORK=<dir> "-DARGS=a;b" ["-DNOT_ARGS=a;b"]
#        -P same_in_any_dir.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
function(run_in dir args out_var)
  execute_process(COMMAND "${HQEKV}" ${args} WORKING_DIRECTORY "${dir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "hqekv ${args} in ${dir} failed (${rc}): ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
run_in("${ROOT}" "${ARGS}" in_root)
run_in("${WORK}" "${ARGS}" in_work)
if(NOT in_root STREQUAL in_work)
  message(FATAL_ERROR "hqekv ${ARGS}: the output in ${ROOT} and in ${WORK} differ:\n${in_root}\n---\n${in_work}")
endif()
if(DEFINED NOT_ARGS)
  run_in("${WORK}" "${NOT_ARGS}" other)
  if(other STREQUAL in_work)
    message(FATAL_ERROR "hqekv ${NOT_ARGS} gave the same output as hqekv ${ARGS}: the check cannot tell them apart")
  endif()
endif()
message(STATUS "same output in ${ROOT} and ${WORK}")
