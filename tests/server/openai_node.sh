#!/usr/bin/env bash
# `hqekv serve` driven by the official `openai` npm client on Debian's nodejs:
# completions, chat, streaming, n, seed, stop, an unsupported parameter, API
# errors. The client is installed from the
# npm registry into NODE_DIR (default: a node/ folder next to this build's
# test, given by CMake); exit 77 (CTest: skipped) when npm cannot reach it.
# Usage: openai_node.sh HQEKV_BINARY MODEL [NODE_DIR]
set -euo pipefail
HQEKV=$1
MODEL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
NODE_DIR=${3:-${HQEKV_NODE_DIR:-$HERE/node}}
. "$HERE/lib.sh"
if [ ! -d "$NODE_DIR/node_modules/openai" ]; then
  mkdir -p "$NODE_DIR"
  if ! timeout 180 npm install --prefix "$NODE_DIR" --no-audit --no-fund --silent openai@4 \
    >"$NODE_DIR/npm.log" 2>&1; then
    echo "SKIPPED: npm could not install the openai package (offline?):"
    tail -3 "$NODE_DIR/npm.log"
    exit 77
  fi
fi
start_server "$HQEKV" -m "$MODEL" -np 2 --ctx 256 --api-key node-key -t 1
NODE_PATH="$NODE_DIR/node_modules" BASE="$BASE" node "$HERE/openai_client.js"
stop_server
