# CLI tests of `hqekv run` and `hqekv ppl` (included from tests/CMakeLists.txt).
set(_root ${PROJECT_SOURCE_DIR})

add_test(NAME cli_run_default COMMAND hqekv run -n 20 -t 1)
set_tests_properties(cli_run_default PROPERTIES
  PASS_REGULAR_EXPRESSION "prompt 1 tok, generated 20 tok.*bits/element")

add_test(NAME cli_run_greedy_story COMMAND hqekv run -n 20 --temp 0 -t 1)
set_tests_properties(cli_run_greedy_story PROPERTIES
  PASS_REGULAR_EXPRESSION "Once upon a time, there was a little girl named Lily")

add_test(NAME cli_run_prompt_llama2c COMMAND hqekv run -m ${_root}/models/stories260K.bin
  --tokenizer ${_root}/models/tok512.bin -p "Once upon a time" -n 8 --temp 0 --kv fp32)
set_tests_properties(cli_run_prompt_llama2c PROPERTIES
  PASS_REGULAR_EXPRESSION "Once upon a time, there was a little girl")

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

add_test(NAME cli_ppl_plain COMMAND hqekv ppl -f ${_root}/data/text/tinystories_val_subset.txt
  --ctx 128 --max-tokens 600 -t 1)
set_tests_properties(cli_ppl_plain PROPERTIES PASS_REGULAR_EXPRESSION "perplexity [0-9]+\\.[0-9]+")

add_test(NAME cli_ppl_compare COMMAND hqekv ppl -f ${_root}/data/text/tinystories_val_subset.txt
  --kv fp16 --ref fp16 --max-tokens 128 --prefill 64 -t 1)
set_tests_properties(cli_ppl_compare PROPERTIES
  PASS_REGULAR_EXPRESSION "KL\\(ref\\|\\|test\\) 0\\.000000 nats/token \\| top-1 agreement 1\\.0000")
