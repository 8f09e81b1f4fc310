#!/usr/bin/env python3
"""Compares two JSON arrays of token-id arrays (hqekv's and a reference's) text
by text; prints the mismatch count per corpus category and the first
mismatches with the ids around the first difference. Exit 1 on a mismatch.
Usage: tokenizer_parity_compare.py FAMILY TEXTS.json KINDS.json HQEKV.json REF.json
"""
import collections
import json
import sys


def main():
    family, texts_p, kinds_p, got_p, ref_p = sys.argv[1:6]
    texts = json.load(open(texts_p, encoding="utf-8"))
    kinds = json.load(open(kinds_p))
    got = json.load(open(got_p))
    ref = json.load(open(ref_p))
    if not (len(texts) == len(kinds) == len(got) == len(ref)):
        sys.exit(f"{family}: lengths differ: {len(texts)} texts, {len(got)} hqekv, {len(ref)} reference")
    bad = collections.Counter()
    total = collections.Counter(kinds)
    shown = 0
    n_tokens = 0
    for t, k, g, r in zip(texts, kinds, got, ref):
        n_tokens += len(r)
        if g == r:
            continue
        bad[k] += 1
        if shown < 3:
            shown += 1
            i = next((j for j in range(min(len(g), len(r))) if g[j] != r[j]), min(len(g), len(r)))
            print(f"  MISMATCH ({k}) at token {i}: hqekv {g[max(0, i - 2):i + 4]} reference "
                  f"{r[max(0, i - 2):i + 4]}; text {t[:160]!r}")
    per_kind = ", ".join(f"{k} {bad[k]}/{total[k]}" for k in sorted(total))
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    print(f"{family}: {len(texts)} texts, {nbytes} bytes, {n_tokens} reference tokens: "
          f"{sum(bad.values())} texts differ ({per_kind})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
