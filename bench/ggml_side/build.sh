#!/usr/bin/env bash
# Builds the harness `anchors` through CMake (the optional target of bench/ggml_side/CMakeLists.txt):
# ggml's CPU backend (llama.cpp's defaults) from a local copy of its public repository, linked with
# hqekv's module targets. ggml's code stays outside this repository: GGML_SRC is an extracted
# source tree (for example `git --git-dir=<ggml git dir> archive HEAD | tar -x -C $GGML_SRC`).
# Env: GGML_SRC (required), HQEKV_BUILD (default ./build: the hqekv build tree to add the target
#      to; configured Release if new), OUT (default ./anchors: a copy of the harness binary).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
G=$(cd "${GGML_SRC:?extracted ggml source tree}" && pwd)
HQB=${HQEKV_BUILD:-$ROOT/build}
OUT=${OUT:-$PWD/anchors}
args=(-DHQEKV_BUILD_GGML_SIDE=ON -DHQEKV_GGML_SRC="$G")
[[ -f "$HQB/CMakeCache.txt" ]] || args+=(-DCMAKE_BUILD_TYPE=Release)
cmake -S "$ROOT" -B "$HQB" "${args[@]}" >/dev/null
cmake --build "$HQB" -j"$(nproc)" --target anchors
cp "$HQB/bench/ggml_side/anchors" "$OUT.part"
mv "$OUT.part" "$OUT"
echo "built $OUT"
