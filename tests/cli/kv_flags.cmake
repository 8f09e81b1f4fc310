# Other engines' KV-cache and context flags (cli/kv_flags.h, issue 14):
# llama.cpp's -ctk/-ctv, vLLM's --kv-cache-dtype, -c/--ctx-size, -s/--seed,
# on run, ppl, bench and serve; conflicts name both flags; --ctx past the
# trained context warns, past memory is refused before allocating.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_kvf_ref ${PROJECT_SOURCE_DIR}/models/refmodel-4l.gguf)  # head_dim 64: q8_0/q4_0 blocks fit
set(_kvf_text ${PROJECT_SOURCE_DIR}/data/text/pg11_alice_in_wonderland.txt)

hqekv_cli_success(NAME cli_run_ctk_ctv
  ARGS run -m ${_kvf_ref} -ctk q8_0 -ctv q4_0 -p "Alice was" -n 4 --temp 0 -t 1
  REGEX "kv llama:ctk=q8_0,ctv=q4_0 ")
hqekv_cli_success(NAME cli_run_ctk_only
  ARGS run -m ${_kvf_ref} --cache-type-k q4_0 -p "Alice was" -n 2 --temp 0 -t 1
  REGEX "kv llama:ctk=q4_0,ctv=f16 ")
hqekv_cli_success(NAME cli_run_ctk_f16_is_fp16 ARGS run -ctk f16 -ctv f16 -n 2 -t 1
  REGEX "kv fp16 ")
hqekv_cli_success(NAME cli_run_kv_cache_dtype_fp8 ARGS run --kv-cache-dtype fp8_e4m3 -n 2 -t 1
  REGEX "kv fp8 ")
hqekv_cli_success(NAME cli_run_kv_cache_dtype_auto ARGS run --kv-cache-dtype auto -n 2 -t 1
  REGEX "kv fp16 ")
hqekv_cli_success(NAME cli_ppl_ctk_ctv
  ARGS ppl -m ${_kvf_ref} -f ${_kvf_text} -ctk q8_0 -ctv q4_0 --prefill 64 --max-tokens 128
       -c 128 -t 1 --kv-report
  REGEX "K q8_0=[0-9]+ .*V q4_0=[0-9]+")
hqekv_cli_success(NAME cli_bench_kv_cache_dtype ARGS bench -p 0 -n 4 -r 1 -t 1 --kv-cache-dtype fp8
  REGEX "\\| fp8 \\| [0-9.]+ \\| [0-9.]+ \\| 1 \\| tg4 \\|")
hqekv_cli_failure(NAME cli_err_kv_and_ctk ARGS run --kv fp16 -ctk q8_0 -n 1
  MSG "--kv and -ctk/--cache-type-k both choose the KV cache")
hqekv_cli_failure(NAME cli_err_kv_and_dtype ARGS ppl -f ${_kvf_text} --kv fp8 --kv-cache-dtype fp8
  MSG "--kv and --kv-cache-dtype both choose the KV cache")
hqekv_cli_failure(NAME cli_err_dtype_and_ctv ARGS bench -n 1 --kv-cache-dtype fp8 -ctv q4_0
  MSG "--kv-cache-dtype and -ctv/--cache-type-v both choose the KV cache")
hqekv_cli_failure(NAME cli_err_serve_kv_and_ctk ARGS serve --kv fp8 -ctk q8_0 --port 0
  MSG "--kv and -ctk/--cache-type-k both choose the KV cache")
hqekv_cli_success(NAME cli_run_kv_cache_dtype_e5m2 ARGS run --kv-cache-dtype fp8_e5m2 -n 2 -t 1
  REGEX "kv fp8:format=e5m2 ")
hqekv_cli_failure(NAME cli_err_kv_cache_dtype_inc ARGS run --kv-cache-dtype fp8_inc -n 1
  MSG "--kv-cache-dtype fp8_inc is not supported")
hqekv_cli_failure(NAME cli_err_kv_cache_dtype_unknown ARGS run --kv-cache-dtype int3 -n 1
  MSG "--kv-cache-dtype: unknown dtype 'int3' (supported: auto, fp8, fp8_e4m3, fp8_e5m2)")
hqekv_cli_failure(NAME cli_err_ctk_bf16 ARGS run -ctk bf16 -n 1
  MSG "-ctk/--cache-type-k bf16 is not supported (supported: f16, q8_0")

# -c/--ctx-size and -s/--seed (-1 = random) as llama.cpp.
hqekv_cli_success(NAME cli_run_ctx_size_seed ARGS run -c 64 -s -1 --temp 1 -n 100 -t 1
  REGEX "generated [0-9]+ tok")
hqekv_cli_success(NAME cli_ppl_ctx_size ARGS ppl -f ${_kvf_text} --ctx-size 64 --max-tokens 256 -t 1
  REGEX "[Pp]erplexity")

# Past the trained context (2048): a warning naming both numbers, then the run.
hqekv_cli_success(NAME cli_run_ctx_over_trained ARGS run --ctx 4096 -n 2 -t 1
  REGEX "warning: --ctx 4096 is more than the model's trained context of 2048 tokens.*generated 2 tok")
# Past memory: refused before allocating, on every command with --ctx.
hqekv_cli_failure(NAME cli_err_serve_ctx_huge ARGS serve --ctx 1000000000 --port 0
  MSG "--ctx 1000000000 needs")
