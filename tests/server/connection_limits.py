#!/usr/bin/env python3
"""Hostile clients against `hqekv serve` on loopback, one case per class.

Usage: connection_limits.py HQEKV_BINARY MODEL CASE
  header_deadline    slowloris: a header byte every 0.4 s; the server must
                     close the connection within --header-timeout (2 s) + 1 s
  body_deadline      a declared 4000-byte body sent a byte every 0.4 s: closed
                     within 3 x --header-timeout + 1 s
  header_flood       header lines sent as fast as possible: the server closes
                     the connection after ~1 MiB, and its peak RSS grows by
                     less than 64 MiB (before: 600k lines cost ~150 MB)
  abandoned_request  a non-streamed request whose client closes after 0.3 s is
                     cancelled: far fewer tokens generated than the same
                     request run to its end, and the slot is free at once
                     (on models/refmodel-4l.gguf beside MODEL: it is slower)
  hostile_load       all at once for 6 s: 30 slowloris connections from
                     127.0.0.2 (reconnecting when cut), header floods from
                     127.0.0.3, and a normal client on 127.0.0.1 whose
                     /health and short completions must all answer 200, each
                     within 3 s (slowest seen: 0.12 s; without the limits /health
                     took 7 s)
Every case is bounded in time; each fails on a server without the limit it
tests (the old server kept every such connection open, or ran the abandoned
request to its end).
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIN, MODEL, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
HEADER_TIMEOUT = 2


def start(*extra, model=None):
    log = tempfile.NamedTemporaryFile(mode="w+", delete=False)
    p = subprocess.Popen([BIN, "serve", "--port", "0", "-m", model or MODEL, "-t", "1",
                          "--header-timeout", str(HEADER_TIMEOUT), "--no-request-log", *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        with open(log.name) as f:
            m = re.search(r"listening on http://[0-9.]+:(\d+)", f.read())
        if m:
            return p, int(m.group(1)), log.name
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit("server did not start: " + open(log.name).read())


def stop(p, log):
    p.terminate()
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit("FAIL: the server did not stop within 30 s of SIGTERM")
    if rc != 0:
        sys.exit("FAIL: the server exited %d:\n%s" % (rc, open(log).read()[-2000:]))


def connect(port, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def closed_by_server(s):
    """True when the server has closed (a read gives end-of-stream or reset)."""
    s.setblocking(False)
    try:
        data = s.recv(65536)
        return data == b"" or data.startswith(b"HTTP/1.1 4")
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def trickle(s, data, every, limit):
    """Sends `data` a byte every `every` s; returns the seconds until the
    server closed the connection, or None when it had not after `limit` s."""
    t0 = time.monotonic()
    for b in data:
        if closed_by_server(s):
            return time.monotonic() - t0
        try:
            s.send(bytes([b]))
        except OSError:
            return time.monotonic() - t0
        if time.monotonic() - t0 > limit:
            return None
        time.sleep(every)
    return None


def http(port, method, path, body=None, timeout=30):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metrics(port):
    out = {}
    for line in http(port, "GET", "/metrics")[1].decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def closed_for(port, cause):
    return metrics(port).get('hqekv_http_connections_closed_total{cause="%s"}' % cause, 0)


def peak_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))


def case_header_deadline():
    p, port, log = start()
    s = connect(port)
    took = trickle(s, b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 200, 0.4,
                   HEADER_TIMEOUT + 4)
    if took is None or took > HEADER_TIMEOUT + 1.5:
        sys.exit("FAIL: a header sent a byte every 0.4 s was still open after %s s" %
                 (took or HEADER_TIMEOUT + 4))
    # A normal request on a new connection still works.
    if http(port, "GET", "/health")[0] != 200:
        sys.exit("FAIL: /health after the slow header")
    if closed_for(port, "header_deadline") != 1:
        sys.exit("FAIL: /metrics does not count the closed connection")
    stop(p, log)
    print("header_deadline: closed after %.1f s (deadline %d s)" % (took, HEADER_TIMEOUT))


def case_body_deadline():
    p, port, log = start()
    s = connect(port)
    s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 4000\r\n\r\n")
    limit = 3 * HEADER_TIMEOUT
    took = trickle(s, b'{"content": "' + b"a" * 3980 + b'"}', 0.4, limit + 4)
    if took is None or took > limit + 1.5:
        sys.exit("FAIL: a body sent a byte every 0.4 s was still open after %s s" %
                 (took or limit + 4))
    stop(p, log)
    print("body_deadline: closed after %.1f s (deadline %d s)" % (took, limit))


def case_header_flood():
    p, port, log = start()
    http(port, "GET", "/health")
    before = peak_rss_kb(p.pid)
    s = connect(port)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    line = b"X-Flood: 0123456789\r\n"
    chunk = line * 4096
    sent, cut = 0, False
    t0 = time.monotonic()
    while sent < 64 << 20 and time.monotonic() - t0 < 20:
        try:
            s.sendall(chunk)
        except OSError:
            cut = True
            break
        sent += len(chunk)
    after = peak_rss_kb(p.pid)
    if not cut:
        sys.exit("FAIL: the server read %d MiB of header lines without closing" % (sent >> 20))
    grew = (after - before) / 1024
    if grew > 64:
        sys.exit("FAIL: a header flood grew the server's peak RSS by %.0f MiB" % grew)
    if http(port, "GET", "/health")[0] != 200:
        sys.exit("FAIL: /health after the flood")
    stop(p, log)
    print("header_flood: cut after %.1f MiB sent, peak RSS +%.1f MiB" % (sent / 2**20, grew))


def case_abandoned_request():
    # The bundled 4-layer reference model: slow enough that a request of 16
    # choices x 400 tokens takes seconds (stories260K finishes in < 1 s).
    p, port, log = start("-np", "1", model=os.path.join(os.path.dirname(MODEL), "refmodel-4l.gguf"))
    body = {"prompt": "Once upon a time", "max_tokens": 400, "n": 16, "temperature": 0,
            "ignore_eos": True}
    g0 = metrics(port)["hqekv_tokens_predicted_total"]
    t0 = time.monotonic()
    if http(port, "POST", "/v1/completions", body, timeout=300)[0] != 200:
        sys.exit("FAIL: the reference request")
    full_s = time.monotonic() - t0
    full = metrics(port)["hqekv_tokens_predicted_total"] - g0
    if full_s < 1.0:
        sys.exit("FAIL: the reference request took %.2f s, too fast to abandon" % full_s)
    g1 = metrics(port)["hqekv_tokens_predicted_total"]
    s = connect(port)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    time.sleep(0.3)
    s.close()
    t1 = time.monotonic()
    while time.monotonic() - t1 < full_s + 5:
        m = metrics(port)
        if m.get("hqekv_slots_busy", 0) == 0 and m.get("hqekv_queue_length", 0) == 0:
            break
        time.sleep(0.05)
    freed = time.monotonic() - t1
    done = metrics(port)["hqekv_tokens_predicted_total"] - g1
    if done > full / 2:
        sys.exit("FAIL: the abandoned request generated %d tokens, the full one %d" % (done, full))
    stop(p, log)
    print("abandoned_request: %d of %d tokens generated, slot free %.2f s after the close "
          "(full request %.2f s)" % (done, full, freed, full_s))


def case_hostile_load():
    p, port, log = start("-np", "2", "--threads-http", "16")
    stop_at = time.monotonic() + 6
    cut = {"slow": 0, "flood": 0}

    def slowloris():
        while time.monotonic() < stop_at:
            try:
                s = connect(port, "127.0.0.2")
                s.send(b"GET /health HTTP/1.1\r\n")
                while time.monotonic() < stop_at:
                    if closed_by_server(s):
                        cut["slow"] += 1
                        break
                    s.send(b"X")
                    time.sleep(0.5)
                s.close()
            except OSError:
                time.sleep(0.1)

    def flood():
        while time.monotonic() < stop_at:
            try:
                s = connect(port, "127.0.0.3")
                s.sendall(b"GET /health HTTP/1.1\r\n")
                while time.monotonic() < stop_at:
                    s.sendall(b"X-Flood: 0123456789\r\n" * 4096)
            except OSError:
                cut["flood"] += 1
                time.sleep(0.05)

    attackers = [threading.Thread(target=slowloris) for _ in range(30)]
    attackers += [threading.Thread(target=flood) for _ in range(2)]
    for t in attackers:
        t.start()
    time.sleep(1)
    worst, n, bad = 0.0, 0, []
    while time.monotonic() < stop_at - 0.5:
        for method, path, body in (("GET", "/health", None),
                                   ("POST", "/v1/completions",
                                    {"prompt": "Once", "max_tokens": 4, "temperature": 0})):
            t0 = time.monotonic()
            try:
                status = http(port, method, path, body, timeout=10)[0]
            except OSError as e:
                status = str(e)
            took = time.monotonic() - t0
            worst = max(worst, took)
            n += 1
            if status != 200 or took > 3.0:
                bad.append("%s %s: %s in %.2f s" % (method, path, status, took))
        time.sleep(0.1)
    for t in attackers:
        t.join()
    if bad:
        sys.exit("FAIL: normal requests under attack: " + "; ".join(bad[:5]))
    unwatched = metrics(port).get("hqekv_http_connections_unwatched_total", -1)
    if unwatched != 0:
        sys.exit("FAIL: %s connections were served without deadlines" % unwatched)
    stop(p, log)
    print("hostile_load: %d normal requests all 200, slowest %.2f s; slow connections cut %d, "
          "floods cut %d" % (n, worst, cut["slow"], cut["flood"]))


{"header_deadline": case_header_deadline, "body_deadline": case_body_deadline,
 "header_flood": case_header_flood, "abandoned_request": case_abandoned_request,
 "hostile_load": case_hostile_load}[CASE]()
