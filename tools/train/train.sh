#!/usr/bin/env bash
# Retrains the reference model from the corpus with the recorded hyper-parameters, then exports it,
# writes the golden logits and evaluates it. Resumable: rerun after an interruption to continue.
#   bash tools/train/train.sh            # CPU: run with `nice -n 15` on a shared machine
# Env: CONFIG (default tools/train/configs/refmodel-4l.json), WORK (default build-train/refmodel-4l),
#      THREADS (default 2), FORCE=1 to overwrite models/<name>.gguf and the golden files.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3  # Debian's python3-torch (tools/train/setup.sh); a pyenv python3 would not see it
CONFIG=${CONFIG:-tools/train/configs/refmodel-4l.json}
WORK=${WORK:-build-train/refmodel-4l}
THREADS=${THREADS:-2}
NAME=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['name'])" "$CONFIG")
VOCAB=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$CONFIG")
$PY -c "import torch, sentencepiece" 2>/dev/null || bash tools/train/setup.sh
$PY tools/train/train.py --config "$CONFIG" --out "$WORK" --threads "$THREADS"
FORCE_FLAG=""
if [ "${FORCE:-0}" = "1" ]; then FORCE_FLAG="--force"; fi
$PY tools/train/export_gguf.py --ckpt "$WORK/final.pt" --tokenizer "$WORK/tok$VOCAB.model" \
    --name "$NAME" --out "models/$NAME.gguf" $FORCE_FLAG
$PY tools/train/golden.py --ckpt "$WORK/final.pt" --tokenizer "$WORK/tok$VOCAB.model" \
    --model-path "models/$NAME.gguf" --out "tests/data/$NAME"
$PY tools/train/evaluate.py --ckpt "$WORK/final.pt" --tokenizer "$WORK/tok$VOCAB.model" \
    --out "$WORK/eval.json" --threads "$THREADS"
$PY tools/train/make_card.py --config "$CONFIG" --work "$WORK" --out "models/$NAME.md"
