# `hqekv run` past --ctx: llama.cpp-style context shift (model/generate_step.h),
# on by default; --no-context-shift stops with exit 1.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)

hqekv_cli_success(NAME cli_run_context_shift ARGS run --ctx 64 -n 200 --temp 0 -t 1
  REGEX "prompt 1 tok, generated 200 tok \\(5 context shifts\\)")

# The issue's case: streaming generates far past its context with bounded memory.
# (8440 bytes: 7800 before the 24-byte chunk records, whose per-stream side
# table header adds 32 bytes to each of the 20 streams; no chunk is held here.)
hqekv_cli_success(NAME cli_run_context_shift_streaming ARGS run --ctx 128 -n 600 --temp 0 -t 1
  --kv streaming:bits=2
  REGEX "generated 600 tok \\([0-9]+ context shifts\\).*8440 bytes held")

hqekv_cli_success(NAME cli_run_keep_prompt ARGS run --ctx 64 -n 100 --temp 0 -t 1 --keep -1
  -p "Once upon a time"
  REGEX "generated 100 tok \\([0-9]+ context shifts\\)")

hqekv_cli_failure(NAME cli_run_no_context_shift ARGS run --ctx 64 -n 200 -t 1 --no-context-shift
  MSG "context of 64 tokens is full after 64 of 200 tokens")

hqekv_cli_failure(NAME cli_run_keep_too_large ARGS run --ctx 15 -n 100 -t 1 --keep -1
  -p "Once upon a time there was a little girl named Lily"
  MSG "leaves nothing to discard")
