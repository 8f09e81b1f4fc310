#!/usr/bin/env bash
# Configures the AddressSanitizer + UBSan tree that scripts/test.sh tests and
# scripts/fuzz.sh fuzzes: clang (libFuzzer ships with it), the libFuzzer
# targets built in the same tree, so CI compiles the project twice (Release,
# this), not three times (docs/CONTRIBUTING.md "CI time").
#   bash scripts/configure_sanitized.sh build-asan [more cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: configure_sanitized.sh BUILD_DIR [cmake arguments]}
shift
for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "configure_sanitized.sh: $tool not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
done
rt=$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)
if [[ ! -f "$rt" ]]; then
  echo "configure_sanitized.sh: libFuzzer runtime missing ($rt); apt-get install libclang-rt-14-dev" >&2
  exit 1
fi
# -O1 with line tables (-g1): sanitizer reports still name file:line, and the
# build takes about a third of -O2 -g's compile time. Unity batches as in the
# Release tree (the fuzz targets link the module libraries, nothing compiled twice).
SAN_FLAGS="-O1 -g1 -DNDEBUG"
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHQEKV_SANITIZE=ON \
  -DHQEKV_BUILD_FUZZ=ON -DHQEKV_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$SAN_FLAGS" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$SAN_FLAGS" "$@" >/dev/null
