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
# Compressed policies: the cache is saved compressed and restored without a
# prefill; the text equals the plain run of the same policy.
for kv in kivi:nominal_bits=2 hqekv:nominal_bits=2 h2o:keep=0.5 snapkv:keep=0.6; do
  ref=$(run --kv "$kv" 2>/dev/null)
  a=$(run --kv "$kv" --prompt-cache "$D/$kv.kv" 2>"$D/err4")
  b=$(run --kv "$kv" --prompt-cache "$D/$kv.kv" 2>"$D/err5")
  grep -q "prompt cache: 11 of 11 prompt tokens restored" "$D/err5" || { cat "$D/err5"; exit 1; }
  [ "$a" = "$ref" ] && [ "$b" = "$ref" ] || { echo "$kv: restored run differs"; echo "$ref"; echo "$b"; exit 1; }
  echo "ok $kv: $(wc -c <"$D/$kv.kv") bytes"
done
# A file of one policy is not used for another (the prompt is run again).
other=$(run --kv kivi:nominal_bits=2 --prompt-cache "$D/hqekv:nominal_bits=2.kv" 2>"$D/err6")
grep -q "restored" "$D/err6" && { echo "another policy's file was restored"; cat "$D/err6"; exit 1; }
[ "$other" = "$(run --kv kivi:nominal_bits=2 2>/dev/null)" ] || { echo "policy switch changed the text"; exit 1; }
echo "prompt cache: passed"
