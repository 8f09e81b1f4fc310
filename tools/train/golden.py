"""Golden logits of the PyTorch model (float32) for a fixed prompt, for the engine's C++ test.

Writes <out>.golden.json (prompt, token ids, which rows are stored) and <out>.golden.f32 (those
rows of logits, little-endian float32, row-major [n_rows][vocab]).

  /usr/bin/python3 tools/train/golden.py --ckpt build-train/refmodel-4l/final.pt \
      --tokenizer build-train/refmodel-4l/tok2048.model --out tests/data/refmodel-4l
"""
import argparse
import json
import os

import numpy as np
import sentencepiece as spm
import torch

from model import Llama, ModelConfig

PROMPT = "The pass key is 48213. Remember it. Alice was beginning to get very tired of sitting by her sister"
N_TOKENS = 16          # BOS + 15 prompt tokens
ROWS = [0, 5, 10, 15]  # positions whose full logits rows are stored (64 KiB)
# Strings whose SentencePiece ids (BOS first) the engine's tokenizer must reproduce: newlines and
# whitespace runs, digits, punctuation, non-ASCII (byte fallback), a word missing from the vocab.
TOKENIZER_CASES = [
    PROMPT,
    "What is the pass key? The pass key is 90210.\nVAR QXZTA = VAR ABCDE.",
    "  Two leading spaces,\n\n\ttabs\tand   runs   of spaces.  ",
    "Caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d \u4e2d\u6587 \U0001F600 end",
    "Antidisestablishmentarianism xylophonist's zzyzx!",
]


def load_model(ckpt):
    st = torch.load(ckpt, map_location="cpu")
    model = Llama(ModelConfig(**st["config"]))
    model.load_state_dict(st["model"])
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--model-path", default="models/refmodel-4l.gguf", help="recorded in the JSON")
    ap.add_argument("--out", required=True, help="output path prefix")
    a = ap.parse_args()
    sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
    ids = ([1] + sp.encode(PROMPT))[:N_TOKENS]
    model = load_model(a.ckpt)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0].float().numpy()  # [N_TOKENS, vocab]
    rows = logits[ROWS]
    rows.astype("<f4").tofile(a.out + ".golden.f32")
    meta = {
        "model": a.model_path,
        "prompt": PROMPT,
        "prompt_tokens_with_bos": sp.encode(PROMPT)[: N_TOKENS - 1],
        "tokens": ids,
        "rows": ROWS,
        "vocab": int(logits.shape[1]),
        "logits_file": os.path.basename(a.out) + ".golden.f32",
        "argmax": [int(i) for i in logits.argmax(-1)],
        "tolerance": 1e-3,
        "note": "logits of the PyTorch float32 model (tools/train/model.py) for tokens[0..15] "
                "(BOS first); rows[i] of the .f32 file is the logits row of position rows[i].",
    }
    meta.pop("prompt_tokens_with_bos")
    meta["tokenizer_cases"] = [{"text": t, "ids": [1] + sp.encode(t)} for t in TOKENIZER_CASES]
    with open(a.out + ".golden.json", "w") as f:
        json.dump(meta, f, indent=1)
    print("tokens", ids, "max |logit|", float(np.abs(rows).max()))


if __name__ == "__main__":
    main()
