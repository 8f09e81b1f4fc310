#!/usr/bin/env bash
# First README command: install what is missing, build, and run the main job
# on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# The main job on a prompt long enough for compression to pay: the opening of
# Alice in Wonderland (~1750 tokens) through the bundled reference model
# (head_dim 64), its KV cache compressed by HqeKV to 3.4 TRUE bits per
# element (every byte counted). The last line reports the memory held, e.g.
# "KV 0.7 MiB, 5.0x smaller than fp16, 3.17 bits/element".
./build/hqekv run -m models/refmodel-4l.gguf --ctx 2048 --temp 0 -n 128 --kv hqekv:bits=3.4 \
  -p "$(head -c 5000 data/text/pg11_alice_in_wonderland.txt)"
