#!/usr/bin/env bash
# First README command: install what is missing, build, and run the main job
# on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# Tell a story with the bundled stories260K model, its KV cache compressed by
# HqeKV at a 2-bit budget; the last line reports the true bits per element.
./build/hqekv run --kv hqekv:nominal_bits=2 -n 256
