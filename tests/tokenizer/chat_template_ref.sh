#!/usr/bin/env bash
# hqekv's chat renderings against a reference Jinja engine: every template in
# tests/data/chat_templates/ (real templates, see SOURCES.md) is rendered by
# @huggingface/jinja on the conversations conversations.json lists for it,
# and by `hqekv chat-template --chat-template FILE` (hqekv's Jinja engine);
# the texts must be equal byte for byte. The package is
# installed from the npm registry into NODE_DIR; exit 77 (CTest: skipped)
# when node/npm is missing or the registry cannot be reached.
# Usage: chat_template_ref.sh HQEKV_BINARY DATA_DIR NODE_DIR
set -euo pipefail
HQEKV=$1
DATA=$2
NODE_DIR=$3
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/npm_install.sh"
npm_install "$NODE_DIR" @huggingface/jinja
# The renderer runs from NODE_DIR so that its import finds node_modules there.
cp "$HERE/chat_template_ref.mjs" "$NODE_DIR/render.mjs"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pairs=$(node -e '
const c = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
for (const [t, names] of Object.entries(c.templates))
  for (const n of names) {
    require("fs").writeFileSync(process.argv[2] + "/" + n + ".json", JSON.stringify(c.conversations[n]));
    console.log(t + " " + n);
  }' "$DATA/conversations.json" "$WORK")
checked=0
failed=0
while read -r tmpl conv; do
  node "$NODE_DIR/render.mjs" "$DATA/$tmpl" "$WORK/$conv.json" >"$WORK/ref.txt"
  "$HQEKV" chat-template --chat-template "$DATA/$tmpl" --messages "$WORK/$conv.json" >"$WORK/got.txt"
  if cmp -s "$WORK/ref.txt" "$WORK/got.txt"; then
    checked=$((checked + 1))
  else
    failed=$((failed + 1))
    echo "MISMATCH $tmpl on $conv:"
    echo "  jinja: $(od -c "$WORK/ref.txt" | head -20)"
    echo "  hqekv: $(od -c "$WORK/got.txt" | head -20)"
  fi
done <<<"$pairs"
echo "chat templates: $checked renderings equal to @huggingface/jinja, $failed differ"
[ "$failed" -eq 0 ] && [ "$checked" -gt 0 ]
