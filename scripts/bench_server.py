#!/usr/bin/env python3
"""Throughput and capacity of `hqekv serve` (docs/server.md).

decode: aggregate decode tokens/s with 1, 2, 4, 8 concurrent sequences
  (-np = N, N requests of max_tokens at once, greedy, ignore nothing), read
  from the server's own counters (hqekv_decode_seconds_total and the rows of
  the batched steps: HTTP excluded). Rounds interleave N = 1, 2, 4, 8 and
  repeat, and every figure is a ratio to N = 1 of the same round (the
  machine is shared: absolute numbers drift, ratios much less).
capacity: with a fixed --kv-budget-mb and 64 slots, 64 streamed requests of
  PROMPT + max_tokens positions are sent per policy; the peak of
  hqekv_slots_busy is how many sequences the budget admits at once. Then the
  clients disconnect (which frees the slots).
Usage: bench_server.py HQEKV MODEL [--rounds R] [--tokens T] [--budget-mb M]
                       [--skip-decode] [--specs S1,S2 | --specs ""]  ("" skips capacity)
"""
import argparse
import concurrent.futures as cf
import json
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request


def start(binary, model, *args):
    log = tempfile.NamedTemporaryFile(mode="w+", delete=False)
    p = subprocess.Popen([binary, "serve", "--port", "0", "-m", model, *args], stdout=log,
                         stderr=subprocess.STDOUT)
    for _ in range(600):
        m = re.search(r"listening on http://[0-9.]+:(\d+)", open(log.name).read())
        if m:
            return p, "http://127.0.0.1:" + m.group(1)
        if p.poll() is not None:
            raise SystemExit(open(log.name).read())
        time.sleep(0.05)
    raise SystemExit("server did not start")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def metrics(base):
    out = {}
    with urllib.request.urlopen(base + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
    return out


def complete(base, body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def decode_rate(binary, model, n, tokens, threads):
    p, base = start(binary, model, "-np", str(n), "--ctx", "1024", "-t", str(threads))
    try:
        body = {"prompt": "Once upon a time", "max_tokens": tokens, "temperature": 0,
                "ignore_eos": True}
        complete(base, dict(body, max_tokens=8))  # warm up
        m0 = metrics(base)
        with cf.ThreadPoolExecutor(n) as ex:
            list(ex.map(lambda _: complete(base, body), range(n)))
        # The counters may land just after the last response: wait for all
        # n * tokens predictions (ignore_eos makes the count exact).
        for _ in range(100):
            m1 = metrics(base)
            if m1["hqekv_tokens_predicted_total"] - m0["hqekv_tokens_predicted_total"] >= n * tokens:
                break
            time.sleep(0.05)
        secs = m1["hqekv_decode_seconds_total"] - m0["hqekv_decode_seconds_total"]
        toks = m1["hqekv_tokens_predicted_total"] - m0["hqekv_tokens_predicted_total"]
        return toks / secs
    finally:
        stop(p)


def capacity(binary, model, spec, budget_mb, prompt_words, tokens):
    p, base = start(binary, model, "-np", "64", "--ctx", "2048", "--kv", spec, "--kv-budget-mb",
                    str(budget_mb), "--queue", "128", "-t", "1")
    peak = 0
    stop_flag = threading.Event()
    prompt = " ".join(["Once upon a time there was a little dog."] * prompt_words)

    def client():
        req = urllib.request.Request(
            base + "/v1/completions",
            data=json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0,
                             "stream": True}).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                for _ in r:
                    if stop_flag.is_set():
                        return  # closing the connection cancels the request
        except Exception:
            pass

    threads = [threading.Thread(target=client) for _ in range(64)]
    for t in threads:
        t.start()
    t_end = time.time() + 6
    m = {}
    while time.time() < t_end:
        m = metrics(base)
        peak = max(peak, m["hqekv_slots_busy"])
        time.sleep(0.1)
    stop_flag.set()
    for t in threads:
        t.join()
    stop(p)
    return int(peak), m.get("hqekv_kv_bytes_peak", 0), m.get("hqekv_kv_true_bits", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget-mb", type=float, default=16)
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--specs", default="fp16,kivi:bits=2,hqekv:bits=3.4")
    a = ap.parse_args()
    if not a.skip_decode:
        ns = [1, 2, 4, 8]
        ratios = {n: [] for n in ns}
        best = {n: 0.0 for n in ns}
        for r in range(a.rounds):
            rate = {n: decode_rate(a.binary, a.model, n, a.tokens, a.threads) for n in ns}
            for n in ns:
                ratios[n].append(rate[n] / rate[1])
                best[n] = max(best[n], rate[n])
            print(f"round {r}: " + ", ".join(f"N={n} {rate[n]:.3g} tok/s" for n in ns), flush=True)
        print("| concurrent sequences | 1 | 2 | 4 | 8 |\n|---|---|---|---|---|")
        print("| aggregate decode tok/s vs 1 (median of rounds) | " + " | ".join(
            f"{sorted(ratios[n])[len(ratios[n]) // 2]:.2f}x" for n in ns) + " |")
        print("| best tok/s of the rounds | " + " | ".join(f"{best[n]:.3g}" for n in ns) + " |")
        print("| best vs best of 1 | " + " | ".join(f"{best[n] / best[1]:.2f}x" for n in ns) + " |")
    if not a.specs:
        return
    print(f"\ncapacity: --kv-budget-mb {a.budget_mb}, 64 slots, prompt ~430 tokens + 1024 new")
    print("| policy | peak sequences admitted | KV bytes peak | true bits |\n|---|---|---|---|")
    for spec in a.specs.split(","):
        peak, b, bits = capacity(a.binary, a.model, spec, a.budget_mb, 40, 1024)
        print(f"| {spec} | {peak} | {b:.0f} | {bits:.2f} |", flush=True)


main()
