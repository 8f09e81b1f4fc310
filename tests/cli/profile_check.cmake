# A calibration profile is refused for a model it was not made for (clear
# error naming the override), and accepted for its own model.
add_test(NAME cli_run_profile_own_model COMMAND hqekv run -n 20 --temp 0 -t 1
  --kv hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json)
set_tests_properties(cli_run_profile_own_model PROPERTIES PASS_REGULAR_EXPRESSION "bits/element")
add_test(NAME cli_run_profile_other_model COMMAND hqekv run -m ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf -n 2
  --kv hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json)
set_tests_properties(cli_run_profile_other_model PROPERTIES WILL_FAIL TRUE)
# `eval` checks every policy's profile against the model before running any cell.
add_test(NAME cli_eval_profile_other_model COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv>
  "-DARGS=eval;-m;${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf;--suite;quick;--no-progress;-o;${CMAKE_CURRENT_BINARY_DIR}/eval-profile-other;--kv;hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json"
  "-DMSG=force=1" -P ${PROJECT_SOURCE_DIR}/tests/cli/expect_failure.cmake.in)
