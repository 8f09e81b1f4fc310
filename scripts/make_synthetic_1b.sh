#!/usr/bin/env bash
# Writes a random-weight GGUF with the geometry of Llama-3.2-1B (16 layers,
# d_model 2048, 32 query heads / 8 KV heads of head_dim 64, d_ff 8192, tied
# output) for speed measurements only: the weights are pseudo-random (no
# quality can be measured on it) and the vocabulary is a synthetic 32000-piece
# SentencePiece one (Llama-3.2-1B has 128256 tokens: its output matrix costs
# ~4x more per token than this one's). It uses the hidden `hqekv gen-synthetic`
# command (src/io/synthetic.h); the file lands in a gitignored build folder.
#
#   bash scripts/make_synthetic_1b.sh [OUT.gguf] [TYPE]
#   defaults: build-synth/llama-3.2-1b-geometry-q4k.gguf, Q4_K
#   HQEKV=path/to/hqekv overrides the binary (default build/hqekv).
set -euo pipefail
cd "$(dirname "$0")/.."
hqekv=${HQEKV:-build/hqekv}
out=${1:-build-synth/llama-3.2-1b-geometry-q4k.gguf}
type=${2:-Q4_K}
[[ -x $hqekv ]] || { echo "make_synthetic_1b: no $hqekv (build it: cmake --build build --target hqekv)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
# --ctx 32768: room for the 16384-token bench depth plus the timed tokens.
"$hqekv" gen-synthetic -o "$out" --type "$type" --arch llama --layers 16 --dim 2048 \
  --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --ctx 32768 --seed 1 --force
