#!/usr/bin/env bash
# Second README command (and what CI runs): install what is missing, build and
# run the whole test suite, then again under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
J=$(nproc)
# Unity builds (CMake batches of 8 files per translation unit; Highway dispatch
# files stay alone) take about half the cold compile time, which is most of CI's
# time (docs/CONTRIBUTING.md "CI time"); incremental work may leave them off.
UNITY=-DCMAKE_UNITY_BUILD=ON

echo "== Module layers, doc paths and formatting"
python3 scripts/check_layers.py
python3 scripts/check_docs.py
bash scripts/format.sh --check

echo "== Release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$UNITY" >/dev/null
cmake --build build -j"$J"
ctest --test-dir build --output-on-failure -j"$J"

echo "== ASan + UBSan build and tests"
# -O1 with line tables (-g1): sanitizer reports still name file:line, and the
# build takes about a third of -O2 -g's compile time (src/quant/multi_query.cc:
# 336 s -> 112 s on a loaded 2-vCPU machine; docs/CONTRIBUTING.md "CI time").
SAN_FLAGS="-O1 -g1 -DNDEBUG"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHQEKV_SANITIZE=ON -DHQEKV_BUILD_BENCH=OFF "$UNITY" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SAN_FLAGS" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$SAN_FLAGS" >/dev/null
cmake --build build-asan -j"$J"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$J" -LE no_sanitize

if [[ -x scripts/fuzz.sh ]]; then
  echo "== Fuzzing (short run on the seed corpus)"
  bash scripts/fuzz.sh
fi
echo "== all tests passed"
