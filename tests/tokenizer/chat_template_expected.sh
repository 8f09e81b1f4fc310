#!/usr/bin/env bash
# Regenerates tests/data/chat_templates/chat_template_expected.json with
# @huggingface/jinja (chat_template_expected.mjs) and compares it with the
# committed file, which test_tokenizer (jinja_test.cc) checks hqekv's engine
# against offline. --write replaces the committed file instead (after a
# template or conversation is added). The package is installed from the npm
# registry into NODE_DIR; exit 77 (CTest: skipped) when node/npm is missing
# or the registry cannot be reached.
# Usage: chat_template_expected.sh DATA_DIR NODE_DIR [--write]
set -euo pipefail
DATA=$1
NODE_DIR=$2
MODE=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/npm_install.sh"
npm_install "$NODE_DIR" @huggingface/jinja
# Run from NODE_DIR so that the import finds node_modules there.
cp "$HERE/chat_template_expected.mjs" "$NODE_DIR/expected.mjs"
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
node "$NODE_DIR/expected.mjs" "$DATA" "$OUT"
echo "@huggingface/jinja $(node -p "require('$NODE_DIR/node_modules/@huggingface/jinja/package.json').version")"
if [ "$MODE" = "--write" ]; then
  cp "$OUT" "$DATA/chat_template_expected.json"
  echo "wrote $DATA/chat_template_expected.json"
  exit 0
fi
if cmp -s "$OUT" "$DATA/chat_template_expected.json"; then
  echo "chat_template_expected.json: equal to @huggingface/jinja's renderings now"
else
  echo "chat_template_expected.json differs from @huggingface/jinja's renderings now:"
  diff <(tr ',' '\n' <"$DATA/chat_template_expected.json") <(tr ',' '\n' <"$OUT") | head -20
  echo "(rerun with --write if the package or the data changed on purpose)"
  exit 1
fi
