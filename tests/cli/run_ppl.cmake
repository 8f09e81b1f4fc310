# CLI tests of `hqekv run` and `hqekv ppl` (included from tests/CMakeLists.txt).
# Success tests check exit 0 and the output; failure tests a nonzero exit and
# the message (tests/cli/scripts/cli_functions.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_root ${PROJECT_SOURCE_DIR})

hqekv_cli_success(NAME cli_run_default ARGS run -n 20 -t 1
  REGEX "prompt 1 tok, generated 20 tok.*bits/element")

hqekv_cli_success(NAME cli_run_greedy_story ARGS run -n 20 --temp 0 -t 1
  REGEX "Once upon a time, there was a little girl named Lily")

hqekv_cli_success(NAME cli_run_prompt_llama2c ARGS run -m ${_root}/models/stories260K.bin
  --tokenizer ${_root}/models/tok512.bin -p "Once upon a time" -n 8 --temp 0 --kv fp32
  REGEX "Once upon a time, there was a little girl")

# Bad input: nonzero exit and a clear message.
foreach(case
    "missing_model|run -m /nonexistent/model.gguf|nonexistent"
    "bad_top_p|run --top-p 1.5|top-p"
    "bad_temp|run --temp -1|temp"
    "bad_kv|run --kv nonsense -n 1|nonsense"
    "flag_with_value|run -n 1 --kv-report=3|kv-report"
    "prompt_too_long|run --ctx 4 -p \"Once upon a time there was a dog\"|context"
    "ppl_missing_text|ppl -f /nonexistent.txt|does not exist"
    "ppl_bad_stride|ppl -f ${_root}/data/text/tinystories_val_subset.txt --ctx 64 --stride 65 --max-tokens 200|stride")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 args)
  list(GET parts 2 msg)
  separate_arguments(args UNIX_COMMAND "${args}")
  # A failing command whose message matches -> the test passes.
  add_test(NAME cli_err_${name} COMMAND ${CMAKE_COMMAND} -DCMD=$<TARGET_FILE:hqekv> "-DARGS=${args}" "-DMSG=${msg}"
           -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_failure.cmake.in)
endforeach()

# Perplexity of the bundled model on 595 scored tokens: 4.5386 when pinned
# (2026-11), band +-1%.
hqekv_cli_success(NAME cli_ppl_plain ARGS ppl -f ${_root}/data/text/tinystories_val_subset.txt
  --ctx 128 --max-tokens 600 -t 1
  REGEX "5 windows, 595 tokens scored.*perplexity [0-9]+\\.[0-9]+ \\(mean NLL"
  VALUE_REGEX "perplexity ([0-9]+\\.[0-9]+)" MIN 4.493 MAX 4.584)

hqekv_cli_success(NAME cli_ppl_compare ARGS ppl -f ${_root}/data/text/tinystories_val_subset.txt
  --kv fp16 --ref fp16 --max-tokens 128 --prefill 64 -t 1
  REGEX "KL\\(ref\\|\\|test\\) 0\\.000000 nats/token \\| top-1 agreement 1\\.0000")
