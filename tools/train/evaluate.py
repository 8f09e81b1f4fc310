"""Evaluates a checkpoint in PyTorch (float32, full attention) on held-out text and long-range tasks.

  /usr/bin/python3 tools/train/evaluate.py --ckpt build-train/refmodel-4l/final.pt \
      --tokenizer build-train/refmodel-4l/tok2048.model --out build-train/refmodel-4l/eval.json

Tasks (filler and passages come from the held-out book pg11, never trained on):
  passkey  - the eval harness's prompt (src/eval/tasks.cc): head, needle "The pass key is K. Remember
             it. K is the pass key." at a depth, tail "What is the pass key? The pass key is"; exact
             match of the 5 digits under greedy decoding (checked teacher-forced: greedy reproduces the
             answer iff every answer token is the argmax given the previous ones).
  multikey - "The special magic number for NAME is V." x n_keys, one asked.
  copy     - a 200-token passage at a random depth, repeated at the end of the context; top-1
             accuracy over the repeat's tokens 2..200 (the first cannot be known to be a repeat).
  ppl      - non-overlapping windows of context tokens (BOS + window), every token scored; reported
             per token, per byte (bits) and per character.
"""
import os

# On a CPU shared with other jobs, OpenMP threads that spin while waiting burn the small share the
# scheduler gives a niced process. Measured here (2 cores, load ~20, nice 15): ~100 tokens/s before,
# ~1,000 after setting it (a niced build of ours also ended then; passive waiting is most of the
# gain). Must be set before torch starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import argparse
import json
import sys
import math
import re
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

from corpus import DEFAULT_DATA_DIR, HELD_OUT_FILES, read_text
from golden import load_model

HEAD = ("There is an important piece of information hidden inside a lot of irrelevant text. "
        "Find it and remember it.")
KEY_NAMES = ["apple", "river", "candle", "garden", "mirror", "pocket", "basket", "window", "ladder",
             "button", "rocket", "pillow", "carpet", "hammer", "feather", "bottle"]


class Haystack:
    def __init__(self, sp, text):
        self.sp = sp
        flat = " ".join(text.split())
        self.sentences = [s for s in re.split(r"(?<=[.!?])\s+", flat) if s]
        self.counts = [len(sp.encode(s)) for s in self.sentences]

    def take(self, rng, budget):
        """Consecutive sentences from a random start with about `budget` tokens in total."""
        start = int(rng.integers(0, len(self.sentences)))
        out, used, k = [], 0, 0
        while k < len(self.sentences):
            i = (start + k) % len(self.sentences)
            if used + self.counts[i] > budget:
                break
            out.append(self.sentences[i])
            used += self.counts[i]
            k += 1
        return out

    def build(self, rng, ctx, head, inserts, tail, answer):
        """Prompt ids (BOS first) of at most ctx tokens including the answer; inserts = [(depth, text)]."""
        fixed = len(self.sp.encode(" ".join([head] + [t for _, t in inserts] + [tail]) + answer)) + 1
        budget = ctx - fixed - 8
        while True:
            sents = self.take(rng, budget)
            parts = [head] if head else []
            pos = sorted(inserts, key=lambda x: x[0])
            k = 0
            for d, t in pos:
                cut = int(round(d * len(sents)))
                parts += sents[k:cut] + [t]
                k = max(k, cut)
            parts += sents[k:] + [tail]
            prompt = [1] + self.sp.encode(" ".join(parts))
            ans = self.sp.encode(" ".join(parts) + answer)[len(prompt) - 1:]
            if len(prompt) + len(ans) <= ctx:
                return prompt, ans
            budget -= 16


@torch.no_grad()
def answer_correct(model, prompt, ans):
    x = torch.tensor([prompt + ans[:-1]])
    pred = model(x)[0, len(prompt) - 1:].argmax(-1).tolist()
    return pred == ans


def passkey(model, hay, ctx, depths, trials, seed):
    res = {}
    for d in depths:
        ok = 0
        for t in range(trials):
            rng = np.random.default_rng([seed, int(d * 1000), t])
            key = str(int(rng.integers(10000, 100000)))
            needle = f"The pass key is {key}. Remember it. {key} is the pass key."
            p, a = hay.build(rng, ctx, HEAD, [(d, needle)], "What is the pass key? The pass key is", " " + key)
            ok += answer_correct(model, p, a_digits(hay.sp, a))
        res[f"{d:.2f}"] = ok / trials
    return res


def a_digits(sp, ans):
    """Answer tokens up to and including the last digit ('▁', digits; drops a trailing '.' etc.)."""
    last = max(i for i, t in enumerate(ans) if sp.id_to_piece(t).strip("\u2581").isdigit())
    return ans[:last + 1]


def multikey(model, hay, ctx, n_keys, trials, seed):
    ok = 0
    for t in range(trials):
        rng = np.random.default_rng([seed, 77, t])
        names = list(rng.choice(KEY_NAMES, size=n_keys, replace=False))
        vals = [str(int(rng.integers(10000, 100000))) for _ in names]
        ins = [(rng.random(), f"The special magic number for {n} is {v}.") for n, v in zip(names, vals)]
        tail = f"What is the special magic number for {names[0]}? The special magic number for {names[0]} is"
        p, a = hay.build(rng, ctx, "Some special magic numbers are hidden inside the following text. Remember them.",
                         ins, tail, " " + vals[0])
        ok += answer_correct(model, p, a_digits(hay.sp, a))
    return ok / trials


@torch.no_grad()
def copy_task(model, ids, ctx, span, trials, seed):
    hits = hits_all = n = n_all = 0
    for t in range(trials):
        rng = np.random.default_rng([seed, 99, t])
        s = int(rng.integers(0, len(ids) - span))
        passage = ids[s:s + span]
        room = ctx - 1 - 2 * span
        pre = int(rng.integers(0, room + 1))
        def window(n):
            while True:
                o = int(rng.integers(0, len(ids) - n))
                if n == 0 or o + n <= s or o >= s + span:
                    return ids[o:o + n]
        seq = [1] + window(pre) + passage + window(room - pre) + passage
        logits = model(torch.tensor([seq[:-1]]))[0]
        pred = logits[len(seq) - 1 - span:].argmax(-1).tolist()  # predictions of the repeat's tokens
        good = [p == q for p, q in zip(pred, passage)]
        hits += sum(good[1:]); n += span - 1
        hits_all += sum(good); n_all += span
    return hits / n, hits_all / n_all


@torch.no_grad()
def perplexity(model, sp, text, ctx, max_tokens=0):
    """max_tokens > 0: score only a prefix of the text (cut at a line end), for a quicker estimate."""
    ids = sp.encode(text)
    if max_tokens and len(ids) > max_tokens:
        cut = text.rfind("\n", 0, int(len(text) * max_tokens / len(ids)))
        text = text[:cut + 1]
        ids = sp.encode(text)
    nll, cnt = 0.0, 0
    for s in range(0, len(ids), ctx - 1):
        chunk = ids[s:s + ctx - 1]
        x = torch.tensor([[1] + chunk])
        logits = model(x[:, :-1])[0]
        nll += F.cross_entropy(logits, x[0, 1:], reduction="sum").item()
        cnt += len(chunk)
    nbytes, nchars = len(text.encode("utf-8")), len(text)
    return {"tokens": cnt, "ppl_token": math.exp(nll / cnt), "bits_per_byte": nll / math.log(2) / nbytes,
            "ppl_char": math.exp(nll / nchars), "bytes": nbytes, "chars": nchars}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=20, help="passkey trials per depth (5 depths: 100)")
    ap.add_argument("--depths", default="0,0.25,0.5,0.75,1")
    ap.add_argument("--copy-trials", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--ppl-max-tokens", type=int, default=0, help="score only a prefix of each text")
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
    model = load_model(a.ckpt)
    alice = read_text(a.data_dir, HELD_OUT_FILES["alice"])
    hay = Haystack(sp, alice)
    out = {"ckpt": a.ckpt, "ctx": a.ctx, "seed": a.seed, "ppl_max_tokens": a.ppl_max_tokens,
           "command": "evaluate.py " + " ".join(sys.argv[1:])}
    t0 = time.time()
    depths = [float(x) for x in a.depths.split(",")]
    out["passkey"] = passkey(model, hay, a.ctx, depths, a.trials, a.seed)
    out["passkey_mean"] = float(np.mean(list(out["passkey"].values())))
    out["passkey_trials_per_depth"] = a.trials
    print("passkey", out["passkey"], f"{time.time() - t0:.0f}s", flush=True)
    c1, call = copy_task(model, sp.encode(alice), a.ctx, 200, a.copy_trials, a.seed)
    out["copy_top1_from2"], out["copy_top1_all"], out["copy_trials"] = c1, call, a.copy_trials
    print("copy", c1, call, f"{time.time() - t0:.0f}s", flush=True)
    out["multikey4"] = multikey(model, hay, a.ctx, 4, max(20, a.trials // 2), a.seed)
    print("multikey4", out["multikey4"], flush=True)
    for ctx in (512,):
        out[f"passkey_ctx{ctx}"] = passkey(model, hay, ctx, depths, max(20, a.trials // 5), a.seed)
        print(f"passkey ctx{ctx}", out[f"passkey_ctx{ctx}"], flush=True)
    if not a.skip_ppl:
        out["ppl"] = {}
        for k in ("alice", "wiki_test", "tinystories"):
            out["ppl"][k] = perplexity(model, sp, read_text(a.data_dir, HELD_OUT_FILES[k]), a.ctx,
                                       a.ppl_max_tokens)
            print(k, out["ppl"][k], flush=True)
    out["eval_seconds"] = round(time.time() - t0)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
