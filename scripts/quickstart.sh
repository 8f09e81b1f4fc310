#!/usr/bin/env bash
# First README command: install what is missing, build, and run the main job
# on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/hqekv study quant
