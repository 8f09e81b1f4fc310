# bits=B is TRUE bits per original element for every policy (issue 12):
# infeasible budgets exit nonzero with the achievable range; the quickstart's
# main job holds less than fp16 and says so.
set(_root ${PROJECT_SOURCE_DIR})
set(_ref ${_root}/models/refmodel-4l.gguf)
set(_alice ${_root}/data/text/pg11_alice_in_wonderland.txt)
foreach(case
    "hqekv_bits_infeasible|ppl -m ${_ref} -f ${_alice} --kv hqekv:bits=0.2 --prefill 64 --max-tokens 128 --ctx 2048|achievable ["
    "kivi_bits_infeasible|ppl -m ${_ref} -f ${_alice} --kv kivi:bits=3,residual=32 --prefill 64 --max-tokens 128 --ctx 2048|2-bit codes hold"
    "hqekv_nominal_unknown|run --kv hqekv:nominal_bits=2.5 -n 1|no built-in tier ratios for nominal_bits=2.5"
    "hqekv_bits_and_nominal|run --kv hqekv:bits=3,nominal_bits=2 -n 1|at most one of"
    "fp8_bits_key|run --kv fp8:bits=4 -n 1|unknown key 'bits'")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 args)
  list(GET parts 2 msg)
  separate_arguments(args UNIX_COMMAND "${args}")
  add_test(NAME cli_err_${name} COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv> "-DARGS=${args}" "-DMSG=${msg}"
           -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_failure.cmake.in)
endforeach()

# The quickstart's command (scripts/quickstart.sh), shorter.
add_test(NAME cli_run_quickstart_saves_memory COMMAND sh -c
  "\"$1\" run -m \"$2\" --ctx 2048 --temp 0 -n 8 -t 1 --kv hqekv:bits=3.4 -p \"$(head -c 5000 \"$3\")\""
  sh $<TARGET_FILE:hqekv> ${_ref} ${_alice})
set_tests_properties(cli_run_quickstart_saves_memory PROPERTIES
  PASS_REGULAR_EXPRESSION "x smaller than fp16, 3\\.[0-3][0-9] bits/element")

# ppl --kv-report: the bits split after prefill and at the end.
add_test(NAME cli_ppl_kv_report COMMAND hqekv ppl -m ${_ref} -f ${_alice} --kv hqekv:bits=3.4
  --prefill 512 --max-tokens 640 --ctx 2048 -t 1 --kv-report)
set_tests_properties(cli_ppl_kv_report PROPERTIES
  PASS_REGULAR_EXPRESSION "after prefill:.*bits/original element: payload [0-9.]+ \\+ metadata [0-9.]+ \\+ bookkeeping [0-9.]+ \\+ residual [0-9.]+ = [0-9.]+.*at end:")

# ppl and calibrate report the same memory figure for the same state (KIVI's
# residual cycle made them differ: calibrate measured after the last token).
foreach(spec "kivi:nominal_bits=2" "hqekv:nominal_bits=2")
  string(REGEX REPLACE "[^a-z0-9]" "_" name "${spec}")
  add_test(NAME cli_memory_figure_${name} COMMAND ${CMAKE_COMMAND} -DHQEKV=$<TARGET_FILE:hqekv>
           -DTEXT=${_root}/data/text/tinystories_val_subset.txt "-DSPEC=${spec}"
           -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/memory_figure_check.cmake)
endforeach()
