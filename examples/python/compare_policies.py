#!/usr/bin/env python3
"""Runs one prompt under several KV policies and prints a memory / quality
table: KV bytes held, true bits per element, and how far each policy's
next-token distributions drift from the fp16 cache's (mean KL divergence over
the generated tokens, teacher-forced on the fp16 text) and the greedy text.

    PYTHONPATH=build/python python3 examples/python/compare_policies.py \
        [-m models/stories260K.gguf] [-p PROMPT] [-n 300] [--kv fp16 kivi:nominal_bits=2 hqekv:nominal_bits=3.2]
"""
import argparse

import numpy as np

import hqekv


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default="models/stories260K.gguf")
    ap.add_argument("-p", "--prompt", default="Once upon a time")
    ap.add_argument("-n", type=int, default=300, help="tokens to generate")
    ap.add_argument("--kv", nargs="+", default=["fp16", "kivi:nominal_bits=2", "hqekv:nominal_bits=3.2"])
    ap.add_argument("-t", "--threads", type=int, default=1)
    a = ap.parse_args()

    hqekv.set_threads(a.threads)
    model = hqekv.Model(a.model)
    prompt = model.tokenize(a.prompt, add_bos=True)
    n_ctx = len(prompt) + a.n + 1

    # The reference: greedy tokens and distributions with the uncompressed cache.
    ref = model.context(kv="fp16", n_ctx=n_ctx)
    ref.decode(prompt)
    ref_tokens, ref_logp = [], []
    for _ in range(a.n):
        lp = log_softmax(ref.logits())
        t = int(np.argmax(lp))
        ref_logp.append(lp)
        ref_tokens.append(t)
        ref.decode([t])

    print(f"{'kv':16s} {'KV bytes':>10s} {'true bits':>9s} {'mean KL':>9s} {'top-1 agree':>11s}  text")
    for spec in a.kv:
        ctx = model.context(kv=spec, n_ctx=n_ctx)
        ctx.decode(prompt)
        kl, agree = 0.0, 0
        for i, t in enumerate(ref_tokens):  # teacher-forced on the reference text
            lp = log_softmax(ctx.logits())
            p = np.exp(ref_logp[i])
            kl += float(np.sum(p * (ref_logp[i] - lp)))
            agree += int(np.argmax(lp)) == t
            ctx.decode([t])
        st = ctx.kv_stats()
        text = model.context(kv=spec, n_ctx=n_ctx).generate(a.prompt, max_new=a.n)
        print(f"{spec:16s} {st['bytes_total']:10d} {st['true_bits']:9.3f} {kl / a.n:9.5f} "
              f"{agree / a.n:11.3f}  {text[:48]!r}")


if __name__ == "__main__":
    main()
