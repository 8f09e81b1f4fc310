#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/CMakeLists.txt: GGUF reader, --kv spec and
# number parser, profile JSON, tokenizers, chat templates, llama2.c reader,
# cached eval cells, KV state loader, server request path) briefly on their
# committed seed corpus, FUZZ_SECONDS in all (split as TARGETS says). They are
# built in the clang ASan + UBSan tree (scripts/configure_sanitized.sh), the
# one scripts/test.sh also tests: FUZZ_BUILD names it (default build-asan;
# configured here when it is not yet).
#   FUZZ_SECONDS=60 (default, CI)  bash scripts/fuzz.sh
#   FUZZ_SECONDS=3600              bash scripts/fuzz.sh   # a longer manual run
# New inputs go to $FUZZ_BUILD/corpus-NAME (kept between runs, never into the
# committed fuzz/corpus/); a crash leaves its input in $FUZZ_BUILD/artifacts/
# and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}
B=${FUZZ_BUILD:-build-asan}

if ! grep -qs "^HQEKV_BUILD_FUZZ:BOOL=ON" "$B/CMakeCache.txt"; then
  bash scripts/configure_sanitized.sh "$B"
fi

# target  corpus  share of the time (percent)  max input bytes. The total stays
# FUZZ_SECONDS (60 s in CI): GGUF keeps the most (27 s), the model-file and
# results readers 4-5 s each, the KV state loader and the server request path
# 4 s each, the four text parsers 3-4 s each.
TARGETS=(
  "fuzz_gguf gguf 46 65536"
  "fuzz_spec spec 6 4096"
  "fuzz_profile profile 6 65536"
  "fuzz_tokenizer tokenizer 6 8192"
  "fuzz_chat chat 6 16384"
  "fuzz_llama2c llama2c 8 65536"
  "fuzz_results results 8 16384"
  "fuzz_state state 7 65536"
  "fuzz_server server 7 16384"
)
names=()
for t in "${TARGETS[@]}"; do names+=("${t%% *}"); done
cmake --build "$B" --target "${names[@]}" -j"$(nproc)"

mkdir -p "$B/artifacts"
failed=0
for t in "${TARGETS[@]}"; do
  read -r name corpus share max_len <<<"$t"
  secs=$(( SECONDS_TO_RUN * share / 100 )); (( secs >= 1 )) || secs=1
  mkdir -p "$B/corpus-$corpus"
  echo "fuzz.sh: $name for ${secs}s on fuzz/corpus/$corpus"
  # -rss_limit_mb catches huge allocations; -timeout catches hangs (per input).
  status=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
    "$B/fuzz/$name" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=10 -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$B/artifacts/" \
    "$B/corpus-$corpus" "fuzz/corpus/$corpus" >"$B/$name.log" 2>&1 || status=$?
  grep -E "INITED|DONE|stat::number_of_executed_units|stat::new_units|stat::peak_rss|ERROR|SUMMARY" \
    "$B/$name.log" || true
  if [[ $status -ne 0 ]]; then
    echo "fuzz.sh: $name FAILED (exit $status); see $B/$name.log and $B/artifacts/" >&2
    failed=1
  fi
done
(( failed == 0 )) || exit 1
echo "fuzz.sh: no crash"
