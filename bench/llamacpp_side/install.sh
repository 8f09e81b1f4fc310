#!/usr/bin/env bash
# Installs node-llama-cpp (llama.cpp's prebuilt CPU build) from the npm
# registry into bench/llamacpp_side/node/ (git-ignored). No build and no
# download beyond the npm packages: install scripts are off, optional
# dependencies (CUDA / Vulkan / ARM builds) are left out and only the x64 CPU
# binaries package is added. Exit 77 when npm cannot install (offline).
# Usage: install.sh [NODE_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NODE_DIR=${1:-${HQEKV_LLAMACPP_NODE_DIR:-$HERE/node}}
VERSION=${NODE_LLAMA_CPP_VERSION:-3.22.1}
if [ -f "$NODE_DIR/node_modules/node-llama-cpp/package.json" ] &&
  [ -d "$NODE_DIR/node_modules/@node-llama-cpp/linux-x64/bins" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "SKIPPED: npm is not installed"; exit 77; }
mkdir -p "$NODE_DIR"
if ! NODE_LLAMA_CPP_SKIP_DOWNLOAD=true timeout 600 npm install --prefix "$NODE_DIR" --no-audit \
  --no-fund --ignore-scripts --omit=optional "node-llama-cpp@$VERSION" \
  "@node-llama-cpp/linux-x64@$VERSION" >"$NODE_DIR/npm.log" 2>&1; then
  echo "SKIPPED: npm could not install node-llama-cpp@$VERSION (offline?):"
  tail -3 "$NODE_DIR/npm.log"
  exit 77
fi
