#!/usr/bin/env python3
"""Compares KV policies on a text, the few lines a kvpress user writes to
compare presses: per policy, KV bytes held, true bits per element (every
byte counted), times smaller than fp16, KL(fp16 || policy) of the next-token
distributions after compression, top-1 agreement, and a greedy continuation.

    python3 examples/python/compare_policies.py            # bundled refmodel-4l, wiki.test.raw
        [-m MODEL.gguf] [-f TEXT] [--ctx 512] [--chunks 2] [--kv fp16 llama:bits=8.5 ...]

(From the build tree: PYTHONPATH=build/python; after `pip install .`: as is.)
"""
import argparse

import hqekv

DEFAULT_KV = ["fp16", "llama:ctk=q8_0,ctv=q8_0", "llama:ctk=q4_0,ctv=q4_0", "kivi:nominal_bits=2",
              "hqekv:bits=3.4"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=None, help="GGUF (default: the bundled refmodel-4l)")
    ap.add_argument("-f", "--file", default=None, help="text file (default: the bundled wiki.test.raw)")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk (half prefilled, half scored)")
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("-p", "--prompt", default="The history of")
    ap.add_argument("-n", type=int, default=24, help="tokens of greedy text per policy")
    ap.add_argument("--kv", nargs="+", default=DEFAULT_KV)
    ap.add_argument("-t", "--threads", type=int, default=0)
    a = ap.parse_args()

    hqekv.set_threads(a.threads)
    model = hqekv.Model(a.model)
    text = open(a.file, encoding="utf-8").read() if a.file else hqekv.bundled_text("wiki.test.raw")
    rows = hqekv.pareto(model, text, a.kv, n_ctx=a.ctx, n_chunks=a.chunks, progress=True)
    if not isinstance(rows, list):  # a pandas DataFrame
        rows = rows.to_dict("records")
    print(f"{model!r}, {a.chunks} chunk(s) of {a.ctx} tokens")
    print(f"{'kv':26s} {'KV bytes':>9s} {'bits/elem':>9s} {'x smaller':>9s} {'KL':>9s} {'top-1':>6s}  text")
    for r in rows:
        gen = model.generate(a.prompt, kv=r["spec"], max_tokens=a.n)
        mark = "*" if r["on_frontier"] else " "
        print(f"{r['spec']:26s} {r['bytes']:9d} {r['bits']:9.3f} {r['x_smaller']:9.2f} {r['kl']:9.5f} "
              f"{r['top1']:6.3f}{mark} {gen[:40]!r}")
    print("* on the bits/KL frontier (no policy with fewer bits has a lower KL)")


if __name__ == "__main__":
    main()
