# llama.cpp's cache types as a policy (policy/llama_cache.h): listed, usable
# from ppl and run, and bad input exits nonzero with a clear message.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_llama_ref ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)
set(_llama_text ${PROJECT_SOURCE_DIR}/data/text/pg11_alice_in_wonderland.txt)
hqekv_cli_failure(NAME cli_err_llama_unknown_type
  ARGS ppl -m ${_llama_ref} -f ${_llama_text} --kv llama:ctk=q3_0 --prefill 64 --max-tokens 128
  MSG "ctk=q3_0: must be one of f16|q8_0|q5_1|q5_0|q4_1|q4_0")
hqekv_cli_failure(NAME cli_err_llama_bits_infeasible
  ARGS ppl -m ${_llama_ref} -f ${_llama_text} --kv llama:bits=3 --prefill 64 --max-tokens 128 --ctx 2048
  MSG "below the cheapest llama.cpp cache types: the K/V pairs hold [")
hqekv_cli_failure(NAME cli_err_llama_small_head
  ARGS run --kv llama:ctk=q8_0 -n 1
  MSG "head_dim % 32 == 0")
hqekv_cli_success(NAME cli_ppl_llama_q8_0_q4_0
  ARGS ppl -m ${_llama_ref} -f ${_llama_text} --kv llama:ctk=q8_0,ctv=q4_0 --ref fp16 --prefill 256
       --max-tokens 320 --ctx 2048 -t 1 --kv-report
  REGEX "K q8_0=[0-9]+ .*V q4_0=[0-9]+ .*bits/original element: payload")
hqekv_cli_success(NAME cli_run_llama_bits
  ARGS run -m ${_llama_ref} --kv llama:bits=7 -p "Alice was" -n 4 --temp 0 -t 1
  REGEX "bits/element")
hqekv_cli_success(NAME cli_policies_lists_llama ARGS policies REGEX "llama\n.*ctk +f16\\|q8_0")
