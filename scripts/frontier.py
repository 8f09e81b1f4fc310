#!/usr/bin/env python3
"""KL frontier of hqekv:bits=B against other KV caches, at the others' exact bits.

For each text, W windows (character slices spread over the text, each scored
with `hqekv ppl --ref fp16 --prefill P --max-tokens C --ctx C --json`), every
competitor spec is run first; its true bits (bits per original element at the
end of the window, every byte held) are then given to hqekv:bits=<that>, so
both sides hold the same memory. Extra hqekv budgets (--bits) trace the curve.
Prints a markdown table: spec, true bits (mean over windows), mean KL over the
windows, spread (min..max of the per-window KL), and for each hqekv row matched
to a competitor the ratio of the mean KLs.

Example (refmodel-4l, the protocol of docs/results/frontier.md):
  python3 scripts/frontier.py --model models/refmodel-4l.gguf \
      --text data/text/wiki.test.raw --text data/text/pg11_alice_in_wonderland.txt \
      --windows 4 --out docs/results/frontier.md
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_COMPETITORS = [
    "llama:ctk=q8_0,ctv=q8_0",
    "llama:ctk=q8_0,ctv=q5_1",
    "llama:ctk=q8_0,ctv=q4_0",
    "llama:ctk=q5_1,ctv=q5_1",
    "llama:ctk=q5_0,ctv=q5_0",
    "llama:ctk=q5_1,ctv=q4_0",
    "llama:ctk=q5_0,ctv=q4_0",
    "llama:ctk=q4_1,ctv=q4_1",
    "llama:ctk=q4_0,ctv=q4_0",
    "int8",
    "fp8",
    "kivi:nominal_bits=4",
    "kivi:nominal_bits=2",
]


def run_ppl(binary, model, text_file, spec, ctx, prefill, threads):
    cmd = [binary, "ppl", "-m", model, "-f", text_file, "--ref", "fp16", "--kv", spec,
           "--prefill", str(prefill), "--max-tokens", str(ctx), "--ctx", str(ctx), "--json",
           "-t", str(threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    j = json.loads(p.stdout)
    return j["statistics"]["kld"]["value"], j["kv_end"]["bits_per_original_element"]


def windows_of(path, n, chars, tmpdir):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if len(text) < chars:
        raise RuntimeError(f"{path}: {len(text)} characters, fewer than one window ({chars})")
    out = []
    span = len(text) - chars
    for w in range(n):
        start = span * w // max(1, n - 1) if n > 1 else 0
        # Start at a line boundary so that a window does not open mid-word.
        nl = text.find("\n", start)
        if nl != -1 and nl < start + 2000 and nl + chars <= len(text):
            start = nl + 1
        name = os.path.join(tmpdir, f"{os.path.basename(path)}.w{w}.txt")
        with open(name, "w", encoding="utf-8") as f:
            f.write(text[start:start + chars])
        out.append(name)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default="build/hqekv")
    ap.add_argument("--model", default="models/refmodel-4l.gguf")
    ap.add_argument("--text", action="append", required=True)
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--prefill", type=int, default=1536)
    ap.add_argument("--chars", type=int, default=24000,
                    help="characters per window (must hold --ctx tokens)")
    ap.add_argument("--competitor", action="append", help="competitor spec (repeatable)")
    ap.add_argument("--bits", action="append", type=float, default=[],
                    help="extra hqekv:bits=B points of the curve")
    ap.add_argument("--hqekv", default="hqekv", help="the hqekv spec prefix (e.g. hqekv:menu=off)")
    ap.add_argument("--variant", action="append",
                    help="extra keys appended to each hqekv:bits=B row (repeatable; each gives one "
                         "more row per competitor), e.g. ,layer_bits=0/0.3/-0.2/-0.1")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="also write the markdown here")
    a = ap.parse_args()
    competitors = a.competitor or DEFAULT_COMPETITORS
    sep = "," if ":" in a.hqekv else ":"
    lines = [f"model `{a.model}`, ctx {a.ctx}, prefill {a.prefill}, {a.windows} windows per "
             f"text of {a.chars} characters, reference fp16; true bits = bits per original "
             f"element at the end of the window (mean over the windows)", ""]
    with tempfile.TemporaryDirectory(prefix="frontier") as tmp:
        for text in a.text:
            wins = windows_of(text, a.windows, a.chars, tmp)

            def measure(spec):
                kl, bits = [], []
                for w in wins:
                    k, b = run_ppl(a.binary, a.model, w, spec, a.ctx, a.prefill, a.threads)
                    kl.append(k)
                    bits.append(b)
                    print(f"  {os.path.basename(w)} {spec}: KL {k:.6g} bits {b:.3f}",
                          file=sys.stderr, flush=True)
                return statistics.mean(bits), statistics.mean(kl), min(kl), max(kl)

            lines += [f"### {os.path.basename(text)}", "",
                      "| spec | true bits | mean KL | spread (min..max) | hqekv ÷ competitor |",
                      "|---|---:|---:|---|---:|"]
            for spec in competitors:
                b, kl, lo, hi = measure(spec)
                lines.append(f"| `{spec}` | {b:.3f} | {kl:.3e} | {lo:.2e}..{hi:.2e} | |")
                for variant in [""] + (a.variant or []):
                    hs = f"{a.hqekv}{sep}bits={b:.3f}{variant}"
                    hb, hkl, hlo, hhi = measure(hs)
                    lines.append(f"| `{hs}` | {hb:.3f} | {hkl:.3e} | {hlo:.2e}..{hhi:.2e} | "
                                 f"{hkl / kl:.2f} |")
            for bits in a.bits:
                hs = f"{a.hqekv}{sep}bits={bits:g}"
                hb, hkl, hlo, hhi = measure(hs)
                lines.append(f"| `{hs}` | {hb:.3f} | {hkl:.3e} | {hlo:.2e}..{hhi:.2e} | |")
            lines.append("")
    md = "\n".join(lines) + "\n"
    print(md)
    if a.out:
        tmp_out = a.out + ".tmp"
        with open(tmp_out, "w", encoding="utf-8") as f:
            f.write(md)
        os.replace(tmp_out, a.out)


if __name__ == "__main__":
    main()
