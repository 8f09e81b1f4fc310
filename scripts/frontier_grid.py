#!/usr/bin/env python3
"""KL of hqekv:bits=B against every competitor KV cache, over a grid of windows.

Two steps:

  run     For each text window: one fp16 reference pass (the KL base, the whole
          vocabulary), then every competitor spec against it, then
          `hqekv:bits=<b>` for every distinct end-of-window true bits b of the
          competitors (2 to 12.5 bits) on that window. One JSON per cell under
          WORK/<tag>/<window>/; cells already there are skipped (resumable), each
          process is bounded by --timeout, -j runs that many windows at once.
  report  Reads one or more WORK/<tag> directories and writes the markdown
          report, the JSON of every cell and an SVG plot of KL against true bits.

The hqekv processes run with the repository root as the current directory (hqekv
finds the per-layer budgets shipped under profiles/<model>/ from any directory; the
relative model and text paths need the root).

Example (the runs of docs/results/frontier-grid.md):
  python3 scripts/frontier_grid.py run --tag refmodel-4l-ctx2048 --model models/refmodel-4l.gguf \\
      --ctx 2048 --prefill 1536 --ref-top-k 2048 --text data/text/wiki.test.raw \\
      --text data/text/wiki.valid.raw --text data/text/pg11_alice_in_wonderland.txt \\
      --text data/text/tinystories_val_subset.txt
  python3 scripts/frontier_grid.py report build/frontier-grid/refmodel-4l-ctx2048 ...
"""

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frontier import windows_of  # noqa: E402  (one home for the window slicing)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA_TYPES = ["f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"]
EVICTION = ["h2o", "snapkv", "pyramid", "streaming"]
EVICTION_BITS = [2.5, 3.4, 5, 8]
# Competitor points whose hqekv counterpart is run and reported (true bits).
BITS_LO, BITS_HI = 2.0, 12.5


def default_competitors():
    out = [f"llama:ctk={k},ctv={v}" for k in LLAMA_TYPES for v in LLAMA_TYPES]
    out += [f"kivi:nominal_bits={n},group={g},residual={r}"
            for n in (2, 4) for g in (32, 64) for r in (32, 128)]
    out += ["int8", "fp8", "fp8:format=e5m2"]
    out += [f"{p}:bits={b:g}" for p in EVICTION for b in EVICTION_BITS]
    return out


def family(spec):
    """The plot/report family of a competitor spec."""
    name = spec.split(":", 1)[0]
    if name == "fp8" and "e5m2" in spec:
        return "fp8-e5m2"
    return name


def cell_file(spec):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", spec) + ".json"


def hqekv_spec(bits):
    return f"hqekv:bits={bits:.3f}"


# --- frontier arithmetic (tested by tests/scripts/frontier_grid_test.py) ---

def pareto(points):
    """Points (bits, kl) not dominated by another (fewer or equal bits and lower
    or equal KL, one of them strictly), sorted by bits."""
    pts = sorted(set(points), key=lambda p: (p[0], p[1]))
    out = []
    for b, k in pts:
        if out and k >= out[-1][1]:
            continue  # a point with fewer (or equal) bits already has a KL this low
        while out and out[-1][0] == b:
            out.pop()
        out.append((b, k))
    return out


def envelope_at(front, bits):
    """KL of the lower envelope at `bits`: the Pareto points joined by straight
    lines in (bits, log KL); None outside [first, last] bits. Past the last
    point the frontier is flat (more bits cannot cost quality), so the last KL
    is returned there."""
    if not front or bits < front[0][0]:
        return None
    if bits >= front[-1][0]:
        return front[-1][1]
    for (b0, k0), (b1, k1) in zip(front, front[1:]):
        if b0 <= bits <= b1:
            if b1 == b0:
                return min(k0, k1)
            t = (bits - b0) / (b1 - b0)
            return math.exp(math.log(k0) + t * (math.log(k1) - math.log(k0)))
    return None


def mean(xs):
    return sum(xs) / len(xs)


# --- running ---

class Progress:
    def __init__(self, total):
        self.total, self.done, self.lock = total, 0, threading.Lock()
        self.tty = sys.stderr.isatty()
        self.t0 = time.time()

    def step(self, msg):
        with self.lock:
            self.done += 1
            line = f"[{self.done}/{self.total} {time.time() - self.t0:.0f}s] {msg}"
            if self.tty:
                sys.stderr.write("\r\033[K" + line[:160])
            else:
                sys.stderr.write(line + "\n")
            sys.stderr.flush()


def atomic_write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def run_cell(a, wdir, wname, spec, prog):
    out = os.path.join(wdir, cell_file(spec))
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            rec = json.load(f)
        if rec.get("error") != "timeout":
            prog.step(f"{wname} {spec}: kept")
            return rec
    cmd = [a.binary, "ppl", "-m", a.model, "--kl-divergence", os.path.join(wdir, "ref.kld"),
           "-t", "1", "--json", "--kv", spec]
    t0 = time.time()
    rec = {"window": wname, "spec": spec}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, cwd=ROOT)
        if p.returncode != 0:
            # A refusal (e.g. a block type that does not fit the head dimension) is a result.
            rec["error"] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:400]
        else:
            j = json.loads(p.stdout)
            rec["kl"] = j["statistics"]["kld"]["value"]
            rec["bits_end"] = j["kv_end"]["bits_per_original_element"]
            rec["bits_prefill"] = j["kv_after_prefill"]["bits_per_original_element"]
    except subprocess.TimeoutExpired:
        rec["error"] = "timeout"
    rec["seconds"] = round(time.time() - t0, 2)
    atomic_write(out, json.dumps(rec) + "\n")
    if "error" in rec:
        prog.step(f"{wname} {spec}: {rec['error'][:80]}")
    else:
        prog.step(f"{wname} {spec}: KL {rec['kl']:.4g} bits {rec['bits_end']:.3f}")
    return rec


def phase_of(spec):
    """Run order, so that a stopped run still covers every window with the
    points that matter most: every window gets one phase before any window
    starts the next. 0: the llama.cpp pairs with K at least as precise as V
    (the competitors' frontier: K error costs ~10x more than V error) and the
    other quantizers; 1: eviction at 3.4 and 5 bits; 2: pairs with V more
    precise than K; 3: eviction at 2.5 and 8 bits; 4: quantized K with f16 V
    (the slowest runs, ~60 s each on a loaded machine) and f16/f16 (16 bits)."""
    name, _, keys = spec.partition(":")
    if name == "llama":
        kv = dict(kv.split("=", 1) for kv in keys.split(","))
        rank = {t: i for i, t in enumerate(reversed(LLAMA_TYPES))}  # q4_0 lowest
        k, v = kv.get("ctk", "f16"), kv.get("ctv", "f16")
        if v == "f16":
            return 4
        return 0 if rank[k] >= rank[v] else 2
    if name in EVICTION:
        return 1 if any(f"bits={b:g}" == keys for b in (3.4, 5)) else 3
    return 0


def make_reference(a, wdir, window_file):
    ref = os.path.join(wdir, "ref.kld")
    if os.path.exists(ref):
        return
    cmd = [a.binary, "ppl", "-m", a.model, "-f", window_file, "--ctx", str(a.ctx), "--prefill",
           str(a.prefill), "--max-tokens", str(a.ctx), "-t", "1", "--kv", "fp16",
           "--kl-divergence-base", ref + ".part", "--ref-top-k", str(a.ref_top_k)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout * 4, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    os.replace(ref + ".part", ref)


SATURATION_GAP = 1.0


def saturation(wdir):
    """(asked, record) of the lowest hqekv run on this window from which the
    cache no longer grows: two runs asked for different bits, both well above
    what they hold and at least SATURATION_GAP bits apart, that hold the same
    bits with the same KL. None until two such runs exist."""
    runs = []
    for name in os.listdir(wdir):
        if name.startswith("hqekv_bits_") and name.endswith(".json"):
            with open(os.path.join(wdir, name), encoding="utf-8") as f:
                r = json.load(f)
            if "error" not in r and "copied_from" not in r:
                asked = float(r["spec"].split("bits=", 1)[1])
                if asked > r["bits_end"] + 0.3:
                    runs.append((asked, r))
    runs.sort(key=lambda x: x[0])
    # The asks must lie >= SATURATION_GAP bits apart: a plateau narrower than
    # that is not a cap (stories260K ctx 512: 4.159 and 4.175 both hold 3.697
    # bits, where 5.9 holds 5.68).
    for i, (a0, r0) in enumerate(runs):
        for a1, r1 in runs[i + 1:]:
            if (a1 - a0 >= SATURATION_GAP and r0["bits_end"] == r1["bits_end"]
                    and r0["kl"] == r1["kl"]):
                return a0, r0
    return None


def run_window_phase(a, wdir, wname, specs, prog):
    """The phase's competitors on one window, then hqekv at each distinct end
    bits. Past the saturation point (see saturation()) an hqekv cell is a copy
    of the saturated run, marked copied_from."""
    recs = [run_cell(a, wdir, wname, s, prog) for s in specs]
    bits = sorted({round(r["bits_end"], 3) for r in recs
                   if "error" not in r and BITS_LO <= r["bits_end"] <= BITS_HI})
    with prog.lock:
        prog.total += len(bits)
    for b in bits:
        spec = hqekv_spec(b)
        sat = saturation(wdir)
        out = os.path.join(wdir, cell_file(spec))
        if sat and b > sat[0] and not os.path.exists(out):
            rec = dict(sat[1], spec=spec, copied_from=sat[1]["spec"], seconds=0)
            atomic_write(out, json.dumps(rec) + "\n")
            prog.step(f"{wname} {spec}: as {sat[1]['spec']} (saturated)")
            continue
        run_cell(a, wdir, wname, spec, prog)


def cmd_run(a):
    competitors = (a.competitor or default_competitors()) + [
        s for s in a.extra if s not in (a.competitor or default_competitors())]
    tagdir = os.path.join(a.work, a.tag)
    os.makedirs(tagdir, exist_ok=True)
    meta = {"tag": a.tag, "model": a.model, "ctx": a.ctx, "prefill": a.prefill,
            "ref_top_k": a.ref_top_k, "chars": a.chars, "windows": a.windows,
            "texts": a.text, "competitors": competitors, "tuning_windows": a.tuning,
            "command": "python3 scripts/frontier_grid.py " + shlex.join(sys.argv[1:])}
    meta_path = os.path.join(tagdir, "meta.json")
    if os.path.exists(meta_path):  # keep the load seen by earlier (resumed) invocations
        with open(meta_path, encoding="utf-8") as f:
            meta["load"] = json.load(f).get("load", [])
    meta.setdefault("load", []).append(
        {"start": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "loadavg": os.getloadavg()})
    atomic_write(meta_path, json.dumps(meta, indent=1) + "\n")
    jobs = []
    for text in a.text:
        base = os.path.basename(text)
        base = base[:-4] if base.endswith((".raw", ".txt")) else base
        wins_dir = os.path.join(tagdir, "_windows")
        os.makedirs(wins_dir, exist_ok=True)
        files = windows_of(os.path.join(ROOT, text), a.windows, a.chars, wins_dir)
        for i, f in enumerate(files):
            wname = f"{base} w{i}"
            wdir = os.path.join(tagdir, f"{base}_w{i}")
            os.makedirs(wdir, exist_ok=True)
            jobs.append((wdir, wname, f))
    prog = Progress(len(jobs) * (1 + len(competitors)))
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for fu in [ex.submit(make_reference, a, wdir, f) for wdir, _, f in jobs]:
            fu.result()
            prog.step("reference")
        for ph in sorted({phase_of(s) for s in competitors}):
            specs = [s for s in competitors if phase_of(s) == ph]
            # Interleave the texts (w0 of every text, then w1, ...).
            order = sorted(jobs, key=lambda j: (j[1].rsplit(" w", 1)[1], j[1]))
            futs = [ex.submit(run_window_phase, a, wdir, wname, specs, prog)
                    for wdir, wname, _ in order]
            for fu in futs:
                fu.result()
    if prog.tty:
        sys.stderr.write("\n")

def sweep_bits(lo, hi, step):
    """The asked budgets of a sweep: lo, lo + step, ... up to hi (inclusive
    within rounding), at the 3 decimals of a cell's spec."""
    n = int(math.floor((hi - lo) / step + 1e-9)) + 1
    return [round(lo + i * step, 3) for i in range(max(0, n))]


def sweep_args_error(lo, hi, step):
    """Why --lo/--hi/--step cannot make a sweep (None when they can)."""
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(step)):
        return "--lo, --hi and --step must be finite numbers"
    if step <= 0:
        return f"--step must be > 0 (got {step:g})"
    if lo <= 0 or hi < lo:
        return f"need 0 < --lo <= --hi (got --lo {lo:g}, --hi {hi:g})"
    if len(sweep_bits(lo, hi, step)) > 10000:
        return f"--lo {lo:g} .. --hi {hi:g} in steps of {step:g} is over 10000 budgets"
    return None


def rises(curve):
    """For a curve [(asked bits, mean KL)] sorted by bits: every pair where
    more bits give a higher KL, as (ratio, bits_lo, bits_hi), largest first
    (the smoothness check: KL should fall, within noise, as the budget
    grows)."""
    out = []
    for i, (b0, k0) in enumerate(curve):
        for b1, k1 in curve[i + 1:]:
            if k1 > k0 > 0:
                out.append((k1 / k0, b0, b1))
    return sorted(out, reverse=True)


def sweep_curve(meta, cells):
    """(asked bits, mean KL over the windows, mean held bits) of the sweep's
    budgets that ran on every window."""
    sw = meta.get("sweep")
    if not sw:
        return []
    windows = sorted({c["window"] for c in cells})
    by = {(c["window"], c["spec"]): c for c in cells if "kl" in c and not c.get("copied_from")}
    curve = []
    for b in sweep_bits(sw["lo"], sw["hi"], sw["step"]):
        spec = hqekv_spec(b)
        got = [by.get((w, spec)) for w in windows]
        if windows and all(got):
            curve.append((b, mean([g["kl"] for g in got]), mean([g["bits_end"] for g in got])))
    return curve


def cmd_sweep(a):
    """hqekv:bits=B for every B of the sweep on every window of a run (its
    reference passes made by `run`); resumable like `run`."""
    err = sweep_args_error(a.lo, a.hi, a.step)
    meta_path = os.path.join(a.dir, "meta.json")
    if err is None and not os.path.isfile(meta_path):
        err = f"{meta_path}: no such file (make the run directory with `run` first)"
    if err:
        sys.exit(f"frontier_grid.py sweep: {err}")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    a.model, a.binary = meta["model"], a.binary
    meta["sweep"] = {"lo": a.lo, "hi": a.hi, "step": a.step,
                     "command": "python3 scripts/frontier_grid.py " + shlex.join(sys.argv[1:])}
    atomic_write(meta_path, json.dumps(meta, indent=1) + "\n")
    wins = []
    for sub_ in sorted(os.listdir(a.dir)):
        wdir = os.path.join(a.dir, sub_)
        if not sub_.startswith("_") and os.path.exists(os.path.join(wdir, "ref.kld")):
            base, i = sub_.rsplit("_w", 1)
            wins.append((wdir, f"{base} w{i}"))
    bits = sweep_bits(a.lo, a.hi, a.step)
    prog = Progress(len(wins) * len(bits))
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = [ex.submit(run_cell, a, wdir, wname, hqekv_spec(b), prog)
                for b in bits for wdir, wname in wins]
        for fu in futs:
            fu.result()
    if prog.tty:
        sys.stderr.write("\n")


# --- report ---

def load_run(d):
    with open(os.path.join(d, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    cells = []
    for sub in sorted(os.listdir(d)):
        wdir = os.path.join(d, sub)
        if sub.startswith("_") or not os.path.isdir(wdir):
            continue
        for name in sorted(os.listdir(wdir)):
            if name.endswith(".json"):
                with open(os.path.join(wdir, name), encoding="utf-8") as f:
                    cells.append(json.load(f))
    return meta, cells


def text_of(window):
    return window.rsplit(" w", 1)[0]


def compare(cells, tuning=()):
    """Per competitor point: the competitor's and hqekv's KL per window (hqekv
    run at that window's competitor end bits), means, ratios and spread.
    Returns (points, infeasible) where infeasible maps spec -> error."""
    by = {(c["window"], c["spec"]): c for c in cells}
    windows = sorted({c["window"] for c in cells})
    specs = []
    for c in cells:
        if not c["spec"].startswith("hqekv:") and c["spec"] not in specs:
            specs.append(c["spec"])
    points, infeasible = [], {}
    for spec in specs:
        rows = []
        for w in windows:
            c = by.get((w, spec))
            if c is None:
                continue
            if "error" in c:
                infeasible.setdefault(spec, c["error"])
                continue
            h = by.get((w, hqekv_spec(round(c["bits_end"], 3))))
            row = {"window": w, "tuning": w in tuning, "kl": c["kl"], "bits": c["bits_end"],
                   "bits_prefill": c["bits_prefill"]}
            if h is not None and "error" not in h:
                row.update(h_kl=h["kl"], h_bits=h["bits_end"], h_bits_prefill=h["bits_prefill"],
                           ratio=h["kl"] / c["kl"] if c["kl"] > 0 else math.inf)
            rows.append(row)
        if not rows:
            continue
        pt = {"spec": spec, "family": family(spec), "rows": rows,
              "bits": mean([r["bits"] for r in rows]), "kl": mean([r["kl"] for r in rows])}
        paired = [r for r in rows if "h_kl" in r]
        if paired:
            pt["h_kl"] = mean([r["h_kl"] for r in paired])
            pt["h_bits"] = mean([r["h_bits"] for r in paired])
            pt["kl_paired"] = mean([r["kl"] for r in paired])
            pt["ratio"] = pt["h_kl"] / pt["kl_paired"]
            pt["worst"] = max(paired, key=lambda r: r["ratio"])
            held = [r for r in paired if not r["tuning"]]
            if held and len(held) < len(paired):
                pt["ratio_held_out"] = mean([r["h_kl"] for r in held]) / mean([r["kl"] for r in held])
            pt["by_text"] = {}
            for t in sorted({text_of(r["window"]) for r in paired}):
                tr = [r for r in paired if text_of(r["window"]) == t]
                ck, hk = mean([r["kl"] for r in tr]), mean([r["h_kl"] for r in tr])
                pt["by_text"][t] = {"kl": ck, "h_kl": hk, "ratio": hk / ck, "n": len(tr)}
        points.append(pt)
    points.sort(key=lambda p: (p["bits"], p["kl"]))
    return points, infeasible


def hqekv_groups(cells):
    """hqekv's cells grouped by the asked bits rounded to 0.1 (the eviction
    policies end a few hundredths apart on different windows): per group the
    cells and the mean end bits and mean KL over them."""
    acc = {}
    for c in cells:
        if c["spec"].startswith("hqekv:") and "error" not in c:
            asked = float(c["spec"].split("bits=", 1)[1])
            acc.setdefault(round(asked, 1), []).append(c)
    out = []
    for key, cs in sorted(acc.items()):
        out.append({"asked": key, "cells": cs, "bits": mean([c["bits_end"] for c in cs]),
                    "kl": mean([c["kl"] for c in cs]), "n": len(cs),
                    "windows": sorted({c["window"] for c in cs})})
    return out


def envelope_clamped(front, bits):
    """envelope_at, with bits below the first competitor point read at that
    point (a competitor holding more bits: the comparison is harder for hqekv)."""
    if front and bits < front[0][0]:
        return front[0][1], True
    return envelope_at(front, bits), False


def frontier_rows(cells):
    """hqekv's KL against the competitors' lower envelope at hqekv's bits: on the
    means (competitors: mean over the group's windows; hqekv: mean over the
    group's cells), and per cell against its window's own envelope."""
    comp = [c for c in cells if not c["spec"].startswith("hqekv:") and "error" not in c]
    out = []
    for g in hqekv_groups(cells):
        per_spec = {}
        for c in comp:
            if c["window"] in g["windows"]:
                per_spec.setdefault(c["spec"], []).append(c)
        front = pareto([(mean([c["bits_end"] for c in cs]), mean([c["kl"] for c in cs]))
                        for cs in per_spec.values() if len(cs) == len(g["windows"])])
        env, clamped = envelope_clamped(front, g["bits"])
        row = {"asked": g["asked"], "bits": g["bits"], "kl": g["kl"], "n": g["n"],
               "windows": len(g["windows"]), "envelope": env, "clamped": clamped,
               "ratio": g["kl"] / env if env else None}
        worst = None
        for hc in g["cells"]:
            fw = pareto([(c["bits_end"], c["kl"]) for c in comp if c["window"] == hc["window"]])
            e, _ = envelope_clamped(fw, hc["bits_end"])
            if e:
                r = hc["kl"] / e
                if worst is None or r > worst[1]:
                    worst = (hc["window"], r, hc["spec"])
        row["worst_window"] = worst
        out.append(row)
    return out


def fmt_e(x):
    return "—" if x is None else f"{x:.2e}"


def svg_plot(path, title, points, hcurve, front):
    """KL (log) against true bits: every competitor family, hqekv's curve and the
    competitors' envelope. Plain SVG (no plotting library needed)."""
    W, H, L, R, T, B = 900, 560, 70, 190, 40, 50
    pts = [(p["bits"], p["kl"]) for p in points] + [(h["bits"], h["kl"]) for h in hcurve]
    pts = [(b, k) for b, k in pts if k > 0]
    if not pts:
        return
    x0, x1 = min(b for b, _ in pts) - 0.2, max(b for b, _ in pts) + 0.2
    y0 = math.floor(math.log10(min(k for _, k in pts)))
    y1 = math.ceil(math.log10(max(k for _, k in pts)))
    y1 = max(y1, y0 + 1)

    def X(b):
        return L + (b - x0) / (x1 - x0) * (W - L - R)

    def Y(k):
        return T + (y1 - math.log10(k)) / (y1 - y0) * (H - T - B)

    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#d62728"]
    fams = sorted({p["family"] for p in points})
    col = {f: colours[i % len(colours)] for i, f in enumerate(fams)}
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="22" font-size="14">{title}</text>']
    for e in range(y0, y1 + 1):
        y = Y(10 ** e)
        o.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
    for b in range(math.ceil(x0), math.floor(x1) + 1):
        x = X(b)
        o.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#eee"/>')
        o.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{b}</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" '
             f'stroke="black"/>')
    o.append(f'<text x="{(L + W - R) / 2:.0f}" y="{H - 12}" text-anchor="middle">true bits per '
             f'original element (end of window)</text>')
    o.append(f'<text x="16" y="{(T + H - B) / 2:.0f}" transform="rotate(-90 16 '
             f'{(T + H - B) / 2:.0f})" text-anchor="middle">mean KL(fp16 ‖ cache)</text>')
    if len(front) > 1:
        d = " ".join(f"{X(b):.1f},{Y(k):.1f}" for b, k in front)
        o.append(f'<polyline points="{d}" fill="none" stroke="#999" stroke-dasharray="5,4"/>')
    for p in points:
        if p["kl"] > 0:
            o.append(f'<circle cx="{X(p["bits"]):.1f}" cy="{Y(p["kl"]):.1f}" r="3.5" '
                     f'fill="{col[p["family"]]}"><title>{p["spec"]}: {p["bits"]:.3f} b, '
                     f'KL {p["kl"]:.3g}</title></circle>')
    hc = [h for h in hcurve if h["kl"] > 0]
    if hc:
        d = " ".join(f"{X(h['bits']):.1f},{Y(h['kl']):.1f}" for h in hc)
        o.append(f'<polyline points="{d}" fill="none" stroke="#d62728" stroke-width="2"/>')
        for h in hc:
            o.append(f'<rect x="{X(h["bits"]) - 3:.1f}" y="{Y(h["kl"]) - 3:.1f}" width="6" '
                     f'height="6" fill="#d62728"><title>hqekv:bits={h["asked"]:.1f}: {h["bits"]:.3f} b, '
                     f'KL {h["kl"]:.3g}</title></rect>')
    ly = T + 10
    for label, c, shape in ([("hqekv:bits=B", "#d62728", "rect"),
                             ("competitors' envelope", "#999", "dash")] +
                            [(f, col[f], "dot") for f in fams]):
        x = W - R + 14
        if shape == "rect":
            o.append(f'<rect x="{x - 3}" y="{ly - 3}" width="6" height="6" fill="{c}"/>')
        elif shape == "dash":
            o.append(f'<line x1="{x - 8}" y1="{ly}" x2="{x + 8}" y2="{ly}" stroke="{c}" '
                     f'stroke-dasharray="5,4"/>')
        else:
            o.append(f'<circle cx="{x}" cy="{ly}" r="3.5" fill="{c}"/>')
        o.append(f'<text x="{x + 14}" y="{ly + 4}">{label}</text>')
        ly += 18
    o.append("</svg>")
    atomic_write(path, "\n".join(o) + "\n")


def report_run(meta, cells, svg_path, md_dir, target=0.8):
    """Markdown lines for one run; also writes its plot."""
    tuning = set(meta.get("tuning_windows") or [])
    points, infeasible = compare(cells, tuning)
    windows = sorted({c["window"] for c in cells})
    texts = sorted({text_of(w) for w in windows})
    lines = [f"## {meta['tag']}: `{meta['model']}`, ctx {meta['ctx']}, prefill {meta['prefill']}",
             "",
             f"{len(windows)} windows ({', '.join(windows)})"
             + (f"; tuning window(s): {', '.join(sorted(tuning))} (in every mean below; "
                f"the column 'held out' leaves it out)" if tuning else "") + ".",
             ""]
    if infeasible:
        lines += ["**Refused on this model** (the competitor cannot run; not compared), with "
                  "one of the messages per family:", ""]
        fams = {}
        for spec, err in infeasible.items():
            fams.setdefault(family(spec), []).append((spec, err))
        for fam, items in fams.items():
            lines.append(f"- {fam}, {len(items)} specs ({', '.join(f'`{sp}`' for sp, _ in items)})"
                         f": \"{items[0][1]}\"")
        lines.append("")
    copied = [c for c in cells if c.get("copied_from")]
    if copied:
        tops = sorted({round(c["bits_end"], 3) for c in copied})
        lines += [f"{len(copied)} hqekv cells asked for more bits than hqekv's cache can hold "
                  f"on this model (it saturates at {', '.join(f'{t:.3f}' for t in tops)} true "
                  f"bits): on each window, once two runs asked for different bits above that "
                  f"held the same bits with the same KL, the higher asks were not run again but "
                  f"copied from the lowest saturated run (`copied_from` in the JSON).", ""]
    inrange = [p for p in points if BITS_LO <= p["bits"] <= BITS_HI]
    outside = [p for p in points if not BITS_LO <= p["bits"] <= BITS_HI]
    lines += ["### Every competitor point against `hqekv:bits=<its end bits>`", "",
              "÷ = hqekv's mean KL ÷ the competitor's mean KL over the same windows (hqekv run "
              "per window at that window's competitor end bits); worst = the single window "
              "with the highest ratio; spread = min..max over the windows. Per text: "
              "competitor KL → hqekv KL (÷), means over that text's windows.", "",
              "| competitor | windows | true bits | competitor KL, mean (min..max) | hqekv KL, "
              "mean (min..max) at bits | ÷ | ÷ held out | worst window (÷) | "
              + " | ".join(texts) + " |",
              "|---|---:|---:|---|---|---:|---:|---|" + "---|" * len(texts)]
    for p in inrange:
        if "ratio" not in p:
            lines.append(f"| `{p['spec']}` | {len(p['rows'])} | {p['bits']:.3f} | {p['kl']:.2e} | "
                         f"not run | | | |" + " |" * len(texts))
            continue
        rows = [r for r in p["rows"] if "h_kl" in r]
        ck = [r["kl"] for r in rows]
        hk = [r["h_kl"] for r in rows]
        flag = "**" if p["ratio"] > target else ""
        above = " (above 12)" if p["bits"] > 12 else ""
        per_text = []
        for t in texts:
            bt = p["by_text"].get(t)
            per_text.append("" if bt is None else
                            f"{bt['kl']:.2e} → {bt['h_kl']:.2e} ({bt['ratio']:.2f})")
        held = p.get("ratio_held_out")
        lines.append(
            f"| `{p['spec']}` | {len(rows)} | {p['bits']:.3f}{above} | {p['kl_paired']:.2e} "
            f"({min(ck):.2e}..{max(ck):.2e}) | {p['h_kl']:.2e} ({min(hk):.2e}..{max(hk):.2e}) "
            f"at {p['h_bits']:.3f} | {flag}{p['ratio']:.2f}{flag} | "
            f"{'' if held is None else f'{held:.2f}'} | {p['worst']['window']} "
            f"({p['worst']['ratio']:.2f}) | " + " | ".join(per_text) + " |")
    lines.append("")
    if outside:
        lines.append("Outside 2-12.5 bits (hqekv not run): " + ", ".join(
            f"`{p['spec']}` {p['bits']:.2f} b KL {p['kl']:.2e}" for p in outside) + ".")
        lines.append("")
    fr = frontier_rows(cells)
    lines += ["### hqekv against the competitors' frontier", "",
              "hqekv's runs grouped by the asked bits rounded to 0.1 (cells = runs in the "
              "group). Envelope = the competitors' Pareto points (mean end bits, mean KL over "
              "the group's windows) joined by straight lines in (bits, log KL), flat past the "
              "last one; where hqekv holds fewer bits than the lowest competitor point, that "
              "point is used (marked ≥). ÷ = hqekv's mean KL ÷ the envelope at hqekv's mean "
              "end bits. Worst cell: one run against its own window's envelope.", "",
              "| asked bits | cells (windows) | true bits | hqekv KL | envelope KL | ÷ | worst "
              "cell (÷) |",
              "|---:|---:|---:|---:|---:|---:|---|"]
    for r in fr:
        ww = r["worst_window"]
        ratio = r["ratio"]
        if ratio is None:
            rtext = "—"
        else:
            flag = "**" if ratio > target else ""
            rtext = f"{flag}{ratio:.2f}{flag}"
        wtext = "" if ww is None else f"{ww[0]}, `{ww[2]}` ({ww[1]:.2f})"
        lines.append(f"| {r['asked']:.1f} | {r['n']} ({r['windows']}) | {r['bits']:.3f} | "
                     f"{r['kl']:.2e} | {'≥ ' if r['clamped'] else ''}{fmt_e(r['envelope'])} | "
                     f"{rtext} | {wtext} |")
    lines.append("")
    miss_mean = [p for p in inrange if p.get("ratio", 0) > target]
    miss_win = [(p, r) for p in inrange for r in p["rows"]
                if r.get("ratio", 0) > target]
    lines += [f"### Misses (÷ > {target})", "",
              f"Mean over the windows: {len(miss_mean)} of {len(inrange)} competitor points in "
              f"2-12.5 bits" + (":" if miss_mean else "."), ""]
    for p in miss_mean:
        lines.append(f"- `{p['spec']}` at {p['bits']:.3f} b: {p['ratio']:.2f}× "
                     f"(competitor {p['kl_paired']:.2e}, hqekv {p['h_kl']:.2e} at "
                     f"{p['h_bits']:.3f} b)")
    miss_text = [(p, t, v) for p in inrange for t, v in sorted(p.get("by_text", {}).items())
                 if v["ratio"] > target]
    lines += ["", f"Mean over one text's windows: {len(miss_text)} of "
              f"{sum(len(p.get('by_text', {})) for p in inrange)} (text, competitor) cells"
              + (":" if miss_text else "."), ""]
    for p, t, v in miss_text:
        lines.append(f"- `{p['spec']}` at {p['bits']:.3f} b on {t} ({v['n']} windows): "
                     f"{v['ratio']:.2f}× ({v['kl']:.2e} → {v['h_kl']:.2e})")
    lines += ["", f"Single windows: {len(miss_win)} of "
              f"{sum(1 for p in inrange for r in p['rows'] if 'ratio' in r)} (window, "
              f"competitor) cells" + (":" if miss_win else "."), ""]
    for p, r in sorted(miss_win, key=lambda x: (x[0]["bits"], x[1]["window"])):
        lines.append(f"- `{p['spec']}` ({r['bits']:.3f} b) on {r['window']}"
                     f"{' (tuning)' if r['tuning'] else ''}: {r['ratio']:.2f}× "
                     f"({r['kl']:.2e} → {r['h_kl']:.2e} at {r['h_bits']:.3f} b)")
    lines.append("")
    curve = sweep_curve(meta, cells)
    if curve:
        sw = meta["sweep"]
        ups = rises([(b, k) for b, k, _ in curve])
        lines += ["### Smoothness (hqekv's own curve)", "",
                  f"`hqekv:bits=B` for B = {sw['lo']:g} to {sw['hi']:g} in steps of "
                  f"{sw['step']:g} on every window (`{sw['command']}`); mean KL over the "
                  f"{len(windows)} windows. Largest rise of the mean KL with more bits: "
                  + (f"**{ups[0][0]:.2f}×** ({ups[0][1]:g} → {ups[0][2]:g} bits)"
                     if ups else "none (the mean KL falls at every step)")
                  + f"; rises over 1.2×: {sum(1 for u in ups if u[0] > 1.2)}.", "",
                  "| asked bits | held bits | mean KL |", "|---:|---:|---:|"]
        lines += [f"| {b:g} | {h:.3f} | {fmt_e(k)} |" for b, k, h in curve]
        lines.append("")
    hc = hqekv_groups(cells)
    allcomp = pareto([(p["bits"], p["kl"]) for p in points])
    svg_plot(svg_path, f"{meta['tag']}: KL against true bits, mean over {len(windows)} windows",
             points, hc, allcomp)
    lines += [f"![KL against true bits]({os.path.relpath(svg_path, md_dir)})", ""]
    summary = {"tag": meta["tag"], "model": meta["model"], "ctx": meta["ctx"],
               "prefill": meta["prefill"], "windows": windows, "tuning_windows": sorted(tuning),
               "infeasible": infeasible,
               "points": [{k: v for k, v in p.items() if k != "rows"} for p in points],
               "frontier": fr}
    if curve:
        summary["sweep"] = [{"asked": b, "kl": k, "bits_end": h} for b, k, h in curve]
    return lines, summary


def cmd_report(a):
    out_lines, runs = [], []
    if a.header:
        with open(a.header, encoding="utf-8") as f:
            out_lines.append(f.read().rstrip("\n"))
            out_lines.append("")
    metas = [load_run(d) for d in a.dirs]
    out_lines += ["## Reproduce", "",
                  "From the repository root (the model and text paths are relative to it), with "
                  "`build/hqekv` built:", "", "```"]
    for meta, _ in metas:
        out_lines.append(meta.get("command", f"(run command not recorded for {meta['tag']})"))
    out_lines.append("python3 scripts/frontier_grid.py " + shlex.join(sys.argv[1:]))
    out_lines += ["```", "",
                  "Per window the script runs `hqekv ppl -m M -f WINDOW --ctx C --prefill P "
                  "--max-tokens C -t 1 --kv fp16 --kl-divergence-base ref.kld --ref-top-k V` "
                  "once, then `hqekv ppl -m M --kl-divergence ref.kld -t 1 --json --kv SPEC` "
                  "per cell (KL = statistics.kld.value, true bits = kv_end / kv_after_prefill "
                  "bits_per_original_element). Windows: scripts/frontier.py's "
                  "`windows_of(TEXT, 4, 24000)`; a run uses the first C tokens of a window.", ""]
    for meta, _ in metas:
        loads = "; ".join(f"{l['start']} UTC load {l['loadavg'][0]:.1f}"
                          for l in meta.get("load", []))
        if loads:
            out_lines.append(f"- {meta['tag']}: invoked (resumed runs keep the cells done) "
                             f"{loads}. 2 cores shared with other work; KL and bits do not "
                             f"depend on the load, only the time.")
    out_lines.append("")
    for meta, cells in metas:
        lines, summary = report_run(meta, cells, f"{a.svg}-{meta['tag']}.svg",
                                    os.path.dirname(os.path.abspath(a.md)))
        out_lines += lines
        summary["cells"] = [{k: c[k] for k in ("window", "spec", "kl", "bits_prefill",
                                               "bits_end", "error", "copied_from") if k in c}
                            for c in cells]
        runs.append(summary)
    atomic_write(a.md, "\n".join(out_lines) + "\n")
    # One cell per line keeps the JSON diffable.
    parts = []
    for r in runs:
        cells = r.pop("cells")
        head = json.dumps(r, indent=None, default=str)
        parts.append(head[:-1] + ', "cells": [\n' + ",\n".join(json.dumps(c) for c in cells)
                     + "\n]}")
    atomic_write(a.json, "{\"runs\": [\n" + ",\n".join(parts) + "\n]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure the grid (resumable)")
    r.add_argument("--tag", required=True, help="name of this run (model and context)")
    r.add_argument("--binary", default=os.path.join(ROOT, "build", "hqekv"))
    r.add_argument("--model", default="models/refmodel-4l.gguf")
    r.add_argument("--text", action="append", required=True)
    r.add_argument("--windows", type=int, default=4)
    r.add_argument("--chars", type=int, default=24000,
                   help="characters per window (must hold --ctx tokens)")
    r.add_argument("--ctx", type=int, default=2048)
    r.add_argument("--prefill", type=int, default=1536)
    r.add_argument("--ref-top-k", type=int, required=True, help="the model's vocabulary size")
    r.add_argument("--competitor", action="append", help="competitor spec (repeatable; "
                   "default: the full grid)")
    r.add_argument("--extra", action="append", default=[],
                   help="a competitor spec added to the grid (repeatable)")
    r.add_argument("--tuning", action="append", default=[],
                   help="a window a policy choice was tuned on, e.g. 'wiki.test w0' (reported apart)")
    r.add_argument("--work", default=os.path.join(ROOT, "build", "frontier-grid"))
    r.add_argument("--timeout", type=int, default=300, help="seconds per process")
    r.add_argument("-j", "--jobs", type=int, default=1, help="windows measured at once")
    s = sub.add_parser("sweep", help="hqekv:bits=B over a range of B on a run's windows "
                       "(the smoothness check of the report)")
    s.add_argument("dir", help="WORK/<tag> directory made by run")
    s.add_argument("--lo", type=float, required=True)
    s.add_argument("--hi", type=float, required=True)
    s.add_argument("--step", type=float, default=0.05)
    s.add_argument("--binary", default=os.path.join(ROOT, "build", "hqekv"))
    s.add_argument("--timeout", type=int, default=300, help="seconds per process")
    s.add_argument("-j", "--jobs", type=int, default=1, help="cells measured at once")
    p = sub.add_parser("report", help="write the report from run directories")
    p.add_argument("dirs", nargs="+", help="WORK/<tag> directories")
    p.add_argument("--md", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--svg", required=True, help="plot path prefix: <prefix>-<tag>.svg per run")
    p.add_argument("--header", help="markdown file put at the top of the report")
    a = ap.parse_args()
    if a.cmd == "run":
        cmd_run(a)
    elif a.cmd == "sweep":
        cmd_sweep(a)
    else:
        cmd_report(a)


if __name__ == "__main__":
    main()
