# A calibration profile is refused for a model it was not made for (clear
# error naming the override), and accepted for its own model.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
hqekv_cli_success(NAME cli_run_profile_own_model ARGS run -n 20 --temp 0 -t 1
  --kv hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json
  REGEX "kv hqekv.*bits/element")
hqekv_cli_failure(NAME cli_run_profile_other_model ARGS run -m ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf -n 2
  --kv hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json
  MSG "was calibrated for model 'llama'")
# `eval` checks every policy's profile against the model before running any cell.
hqekv_cli_failure(NAME cli_eval_profile_other_model
  ARGS eval -m ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf --suite quick --no-progress
  -o ${CMAKE_CURRENT_BINARY_DIR}/eval-profile-other
  --kv hqekv:profile=${PROJECT_SOURCE_DIR}/profiles/stories260K/hqekv-2-nominal.json
  MSG "force=1")
