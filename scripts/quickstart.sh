#!/usr/bin/env bash
# First README command: install what is missing, build the `hqekv` program
# only (tests, benchmarks and Python are the second command's), and run the
# main job on the bundled reference model: a long prompt whose KV cache HqeKV
# compresses to 3.4 true bits per element, the memory headline first, then a
# short generation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON >/dev/null
# The compiler's progress and warnings go to a log, so the answer below is
# what the terminal shows; on a failure its last lines are printed.
log=build/quickstart-build.log
echo "Building hqekv (the program only; about 4 minutes of 2 idle cores). Log: $log"
if ! cmake --build build -j"$(nproc)" --target hqekv >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "quickstart: the build failed; the whole log is $log" >&2
  exit 1
fi
echo
echo "Model: models/refmodel-4l.gguf, a 2.9M-parameter, 4-layer Llama this project trained as a test"
echo "fixture (head_dim 64, 2048-token context). Its text is not meant to be good; the KV memory is the point."
echo "Prompt: the opening of Alice in Wonderland (about 1,750 tokens). KV policy: hqekv:bits=3.4."
echo
# --json: one object on stdout (text, tokens, speed, KV bytes), printed here
# headline first.
./build/hqekv run -m models/refmodel-4l.gguf --ctx 2048 --temp 0 -n 48 --kv hqekv:bits=3.4 \
  -p "$(head -c 5000 data/text/pg11_alice_in_wonderland.txt)" --json |
  python3 -c '
import json, sys
r = json.load(sys.stdin)
b = r["bits_per_original_element"]
mib = r["kv_bytes"] / 1048576
tokens = r["prompt_tokens"] + r["generated_tokens"]
print("KV cache: %.2f MiB for %d tokens, %.1fx smaller than fp16 (%.2f bits per element, every byte counted)" % (mib, tokens, 16 / b, b))
print("Speed: prefill %.0f tok/s, decode %.0f tok/s" % (r["prefill_tok_s"], r["decode_tok_s"]))
print("Generated:", " ".join(r["text"].split())[:300])
if r["note"]:
    print("Note:", r["note"])
'
echo
echo "Your own model: ./build/hqekv run -m MODEL.gguf -p \"...\" --kv hqekv:bits=3.4   (docs/models.md)"
