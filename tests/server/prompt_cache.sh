#!/usr/bin/env bash
# `hqekv run --prompt-cache FILE`: the first run saves the prompt's KV state,
# the second restores it (no prefill) and prints the same greedy text; a
# truncated file and an unsupported policy are clear errors.
# Usage: prompt_cache.sh HQEKV_BINARY MODEL
set -euo pipefail
HQEKV=$1
MODEL=$2
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
run() { "$HQEKV" run -m "$MODEL" -p "Once upon a time, there was a dog" -n 16 --temp 0 -t 1 "$@"; }
first=$(run --prompt-cache "$D/p.kv" 2>"$D/err1")
[ -s "$D/p.kv" ] || { echo "no prompt cache written"; exit 1; }
second=$(run --prompt-cache "$D/p.kv" 2>"$D/err2")
grep -q "prompt cache: 11 of 11 prompt tokens restored" "$D/err2" || { cat "$D/err2"; exit 1; }
[ "$first" = "$second" ] || { echo "restored run differs:"; echo "$first"; echo "$second"; exit 1; }
plain=$(run 2>/dev/null)
[ "$first" = "$plain" ] || { echo "prompt-cache run differs from a plain run"; exit 1; }
head -c 500 "$D/p.kv" >"$D/cut.kv"
if run --prompt-cache "$D/cut.kv" 2>"$D/err3" >/dev/null; then echo "truncated file accepted"; exit 1; fi
grep -q "checksum mismatch" "$D/err3" || { cat "$D/err3"; exit 1; }
if run --kv kivi:nominal_bits=4 --prompt-cache "$D/k.kv" 2>"$D/err4" >/dev/null; then
  echo "kivi prompt cache accepted"; exit 1
fi
grep -q "cannot be saved yet" "$D/err4" || { cat "$D/err4"; exit 1; }
echo "prompt cache: passed"
