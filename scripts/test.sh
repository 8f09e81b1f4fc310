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

echo "== ASan + UBSan build (clang, with the libFuzzer targets) and tests"
# One sanitized tree for the tests and the fuzz targets (scripts/configure_sanitized.sh).
bash scripts/configure_sanitized.sh build-asan
cmake --build build-asan -j"$J"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$J" -LE no_sanitize

echo "== Fuzzing (short run on the seed corpus)"
FUZZ_BUILD=build-asan bash scripts/fuzz.sh
echo "== all tests passed"
