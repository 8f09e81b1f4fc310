#!/usr/bin/env python3
"""Bounded load test of `hqekv serve` on loopback (stories260K, 8 slots).

1. Every distinct request (12 prompts x 3 KV policies, greedy) is run ALONE
   first: its text is the reference.
2. 144 requests (each distinct one 4 times, a third of them streamed) are
   sent by 16 client threads at once, with a KV budget small enough that
   requests wait for bytes. Every answer must equal its reference exactly
   (greedy: batched decode changes only fp32 summation order; a flipped
   argmax would show here), no request may fail, and /metrics must show the
   KV budget was never exceeded and every slot free at the end.
3. SIGTERM: the server exits 0.
Usage: load_test.py HQEKV_BINARY MODEL
"""
import concurrent.futures as cf
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN, MODEL = sys.argv[1], sys.argv[2]
BUDGET_MB = 0.6
POLICIES = ["fp16", "kivi:nominal_bits=4", "hqekv:nominal_bits=2"]
PROMPTS = [
    "Once upon a time", "The little dog", "Lily and Ben went", "One day, a big",
    "Tom had a red ball", "The sun was hot", "In the park there", "Mom said to Sue",
    "A bird sat on", "The cat was sad", "They found a box", "At night the moon",
]


def start():
    log = tempfile.NamedTemporaryFile(mode="w+", delete=False)
    p = subprocess.Popen([BIN, "serve", "--port", "0", "-m", MODEL, "-np", "8", "--ctx", "256",
                          "--kv-budget-mb", str(BUDGET_MB), "--queue", "256", "-t", "2"],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(400):
        with open(log.name) as f:
            m = re.search(r"listening on http://[0-9.]+:(\d+)", f.read())
        if m:
            return p, "http://127.0.0.1:" + m.group(1), log.name
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit("server did not start: " + open(log.name).read())


def post(base, body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        if not body.get("stream"):
            return json.loads(r.read())["choices"][0]["text"]
        text, done = "", False
        for line in r:
            line = line.decode().strip()
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    raise RuntimeError(chunk["error"]["message"])
                text += chunk["choices"][0]["text"]
        if not done:
            raise RuntimeError("stream ended without [DONE]")
        return text


def metrics(base):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
        return out


def main():
    proc, base, log = start()
    try:
        cases = [(p, kv, 16 + 4 * (i % 3)) for i, p in enumerate(PROMPTS) for kv in POLICIES]
        body = lambda c, stream=False: {"prompt": c[0], "kv": c[1], "max_tokens": c[2],
                                        "temperature": 0, "stream": stream}
        t0 = time.time()
        ref = {c: post(base, body(c)) for c in cases}
        t_alone = time.time() - t0
        jobs = [(c, n % 3 == 0) for n in range(4) for c in cases]
        peak_busy = peak_queue = 0
        t0 = time.time()
        with cf.ThreadPoolExecutor(16) as ex:
            futs = {ex.submit(post, base, body(c, s)): (c, s) for c, s in jobs}
            pending = set(futs)
            while pending:
                done, pending = cf.wait(pending, timeout=0.02)
                m = metrics(base)
                peak_busy = max(peak_busy, m["hqekv_slots_busy"])
                peak_queue = max(peak_queue, m["hqekv_queue_length"])
            bad = 0
            for f, (c, s) in futs.items():
                got = f.result()  # raises on any HTTP error
                if got != ref[c]:
                    bad += 1
                    print(f"MISMATCH {c} stream={s}:\n  alone: {ref[c]!r}\n  batch: {got!r}")
        t_load = time.time() - t0
        m = metrics(base)
        print(f"{len(cases)} requests alone in {t_alone:.2f} s; {len(jobs)} concurrent in "
              f"{t_load:.2f} s; peak slots busy {peak_busy:.0f}, peak queue {peak_queue:.0f}; "
              f"KV peak {m['hqekv_kv_bytes_peak']:.0f} B of budget {m['hqekv_kv_budget_bytes']:.0f} B")
        assert bad == 0, f"{bad} answers differ from the same request alone"
        assert m["hqekv_kv_bytes_peak"] <= m["hqekv_kv_budget_bytes"], "KV budget exceeded"
        assert m["hqekv_slots_busy"] == 0 and m["hqekv_queue_length"] == 0
        assert m["hqekv_kv_bytes_reserved"] == 0, "reservations leaked"
        assert m["hqekv_requests_total"] == len(cases) + len(jobs)
        assert peak_busy >= 2, "requests never ran together"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, f"server exit status {rc} after SIGTERM:\n" + open(log).read()
    print("load test: passed")


main()
