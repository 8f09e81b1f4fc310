#!/usr/bin/env bash
# Builds the libFuzzer target for the GGUF reader with clang (ASan + UBSan)
# into build-fuzz/ and runs it briefly on the committed seed corpus.
#   FUZZ_SECONDS=60 (default)  bash scripts/fuzz.sh
# New inputs go to build-fuzz/corpus-gguf (kept between runs, never into the
# committed fuzz/corpus/); a crash leaves its input in build-fuzz/artifacts/
# and makes this script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${FUZZ_SECONDS:-60}

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
rt=$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)
if [[ ! -f "$rt" ]]; then
  echo "fuzz.sh: libFuzzer runtime missing ($rt); install libclang-rt-14-dev" >&2
  exit 1
fi

CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHQEKV_BUILD_FUZZ=ON \
  -DHQEKV_BUILD_TESTS=OFF -DHQEKV_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target fuzz_gguf -j"$(nproc)"

mkdir -p build-fuzz/corpus-gguf build-fuzz/artifacts
echo "fuzz.sh: fuzz_gguf for ${SECONDS_TO_RUN}s on fuzz/corpus/gguf"
# -rss_limit_mb catches huge allocations; -timeout catches hangs (per input).
status=0
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
  build-fuzz/fuzz/fuzz_gguf -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/ \
  build-fuzz/corpus-gguf fuzz/corpus/gguf >build-fuzz/fuzz_gguf.log 2>&1 || status=$?
grep -E "INITED|DONE|stat::number_of_executed_units|stat::new_units|stat::peak_rss|ERROR|SUMMARY" \
  build-fuzz/fuzz_gguf.log || true
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: fuzz_gguf FAILED (exit $status); see build-fuzz/fuzz_gguf.log and build-fuzz/artifacts/" >&2
  exit 1
fi
echo "fuzz.sh: no crash"
