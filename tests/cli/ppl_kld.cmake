# `hqekv ppl` chunked scoring and llama-perplexity's KL statistics (issue 17):
# a base file written once (fixture), scored by several caches; bad base
# files, foreign models and chunk counts beyond the text fail with a message.
include(${CMAKE_CURRENT_LIST_DIR}/scripts/cli_functions.cmake)
set(_root ${PROJECT_SOURCE_DIR})
set(_text ${_root}/data/text/tinystories_val_subset.txt)
set(_kdir ${CMAKE_CURRENT_BINARY_DIR}/ppl_kld)

add_test(NAME cli_ppl_kld_base COMMAND ${CMAKE_COMMAND} -DHQEKV=$<TARGET_FILE:hqekv>
         -DTEXT=${_text} -DDIR=${_kdir} -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/kld_fixture.cmake)
set_tests_properties(cli_ppl_kld_base PROPERTIES FIXTURES_SETUP kld_base)

# The whole block over every chunk of the file; an evicting cache differs.
hqekv_cli_success(NAME cli_ppl_kld_stats ARGS ppl --kl-divergence ${_kdir}/base.kld
  --kv streaming:keep=0.5 -t 1
  REGEX "chunk +PPL.*\n +1 .*\n +2 .*\n +3 .*3 chunk\\(s\\) of 64: prefill 32, scored 96.*Mean PPL\\(Q\\) +: +[0-9.]+ ± +[0-9.]+\nMean PPL\\(base\\).*Mean ln\\(PPL\\(Q\\)/PPL\\(base\\)\\) +: +[0-9.]+ ± +[0-9.]+\nMean PPL\\(Q\\)/PPL\\(base\\) +: +[0-9.]+ ± +[0-9.]+.*Mean    KLD: +[0-9.]+ ± +[0-9.]+\nMaximum KLD.*\n99.9%   KLD.*\n99.0%   KLD.*\n95.0%   KLD.*\n90.0%   KLD.*\nMedian  KLD.*\n10.0%   KLD.*\n 5.0%   KLD.*\n 1.0%   KLD.*\n 0.1%   KLD.*\nMinimum KLD.*Mean    Δp: +-?[0-9.]+ ± +[0-9.]+ %.*Median  Δp.*Same top p: +[0-9.]+ ± +[0-9.]+ %"
  VALUE_REGEX "Mean    KLD: +([0-9.]+)" MIN 0.01 MAX 5)
# The base cache itself: zero divergence, every top token the same.
hqekv_cli_success(NAME cli_ppl_kld_self ARGS ppl --kl-divergence ${_kdir}/base.kld -t 1
  REGEX "Mean    KLD:   0.000000 ±   0.000000.*Same top p: 100.000 ± 0.000 %")
hqekv_cli_success(NAME cli_ppl_kld_json ARGS ppl --kl-divergence ${_kdir}/base.kld --chunks 2
  --kv streaming:keep=0.5 -t 1 --json
  REGEX "\"chunks\": 2,.*\"kld\": {\n +\"se\": [0-9.e-]+,\n +\"value\": [0-9.e-]+")
set_tests_properties(cli_ppl_kld_stats cli_ppl_kld_self cli_ppl_kld_json PROPERTIES
  FIXTURES_REQUIRED kld_base)

# --max-tokens beyond --ctx: more chunks, not a silent cut.
hqekv_cli_success(NAME cli_ppl_compare_chunks ARGS ppl -f ${_text} --kv fp16 --ctx 64
  --max-tokens 200 -t 1
  REGEX "192 tokens in 3 chunk\\(s\\) of 64: prefill 32, scored 96.*KL\\(ref\\|\\|test\\) 0\\.000000")

foreach(case
    "kld_other_model|ppl -m ${_root}/models/refmodel-4l.gguf --kl-divergence ${_kdir}/base.kld|vocabulary of 512 tokens; this model ('refmodel-4l') has 2048"
    "kld_other_weights|ppl -m ${_root}/models/stories260K.bin --tokenizer ${_root}/models/tok512.bin --kl-divergence ${_kdir}/base.kld|pass --kl-any-model"
    "kld_truncated|ppl --kl-divergence ${_kdir}/truncated.kld|is truncated"
    "kld_corrupt|ppl --kl-divergence ${_kdir}/corrupt.kld|checksum mismatch"
    "kld_not_a_base|ppl --kl-divergence ${_text}|not a KL base file"
    "kld_chunks_beyond|ppl --kl-divergence ${_kdir}/base.kld --chunks 4|--chunks 4 is more than the 3 chunk(s)")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 args)
  list(GET parts 2 msg)
  separate_arguments(args UNIX_COMMAND "${args}")
  hqekv_cli_failure(NAME cli_err_ppl_${name} ARGS ${args} MSG "${msg}")
  set_tests_properties(cli_err_ppl_${name} PROPERTIES FIXTURES_REQUIRED kld_base)
endforeach()

hqekv_cli_failure(NAME cli_err_ppl_chunks_beyond_text ARGS ppl -f ${_text} --kv fp16 --ctx 64
  --max-tokens 200 --chunks 4 MSG "--chunks 4 needs 256 tokens (4 x 64), the text has 200 tokens")
hqekv_cli_failure(NAME cli_err_ppl_plain_chunks_beyond_text ARGS ppl -f ${_text} --ctx 64
  --max-tokens 200 --chunks 5 MSG "--chunks 5 is more than the 4 window(s)")
hqekv_cli_failure(NAME cli_err_ppl_two_kld_modes ARGS ppl -f ${_text} --kl-divergence a
  --kl-divergence-base b MSG "give one of them")

# JSON summaries: plain ppl, and run (text + summary as one object, nothing streamed).
hqekv_cli_success(NAME cli_ppl_plain_json ARGS ppl -f ${_text} --ctx 128 --max-tokens 600 -t 1 --json
  REGEX "\"mode\": \"perplexity\".*\"ppl\": {\n +\"se\": [0-9.e-]+,\n +\"value\": 4\\.5[0-9]+.*\"windows\": 5")
hqekv_cli_success(NAME cli_run_json ARGS run -n 8 --temp 0 -t 1 --json
  REGEX "^{\n.*\"generated_tokens\": 8,.*\"text\": \"Once upon a time, there was a\",.*}\n$")
