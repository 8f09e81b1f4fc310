#!/usr/bin/env bash
# Builds ggml (CPU backend, llama.cpp's defaults) from a local copy of its public repository and
# links anchors.cc against it and hqekv's static libraries. ggml's code stays outside this
# repository: GGML_SRC is an extracted source tree (for example
# `git --git-dir=<ggml git dir> archive HEAD | tar -x -C $GGML_SRC`).
# Env: GGML_SRC (required), HQEKV_BUILD (default ./build, a Release build of this project),
#      OUT (default ./anchors: the harness binary).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
G=${GGML_SRC:?extracted ggml source tree}
HQB=${HQEKV_BUILD:-$ROOT/build}
OUT=${OUT:-$PWD/anchors}
if [[ ! -f "$G/build/src/libggml-cpu.a" ]]; then
  # llama.cpp's CPU defaults: native, OpenMP, LLAMAFILE (tinyBLAS sgemm) on
  cmake -S "$G" -B "$G/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_LLAMAFILE=ON >/dev/null
  cmake --build "$G/build" -j"$(nproc)" >/dev/null
fi
GL="$G/build/src"
L=""
for m in eval calib lm model policy cache io tokenizer quant core; do L+=" $HQB/libhqekv_$m.a"; done
# shellcheck disable=SC2086
g++ -O3 -march=native -std=c++20 -fopenmp -I"$G/include" -I"$ROOT/src" -I"$ROOT/bench" "$HERE/anchors.cc" -o "$OUT" \
  "$GL/libggml.a" "$GL/libggml-cpu.a" "$GL/libggml-base.a" $L -lhwy -lpthread -lm
echo "built $OUT"
