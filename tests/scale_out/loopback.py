"""Helpers of the loopback scale-out tests and benchmark (tests/scale_out/, bench/scale_out/):
free ports, polling, a minimal Redis (RESP) client, and a replica's /metrics as numbers."""
import socket
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_until(pred, what, limit=60, deadline=None):
    """Polls pred() every 0.1 s (OSError counts as not yet) until true; raises AssertionError
    after `limit` seconds, or at `deadline` (time.time()) when that comes first."""
    end = time.time() + limit if deadline is None else min(time.time() + limit, deadline)
    while time.time() < end:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError('timed out waiting for ' + what)


def redis_cmd(port, *args):
    """One RESP command over a fresh connection to 127.0.0.1:port. Replies: bytes (simple and
    bulk strings), int, list, None (nil), or an Exception instance (an error reply)."""
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        out = b'*%d\r\n' % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b'$%d\r\n%s\r\n' % (len(a), a)
        s.sendall(out)
        f = s.makefile('rb')

        def read():
            line = f.readline()
            t, rest = line[:1], line[1:-2]
            if t == b'+':
                return rest
            if t == b'-':
                return Exception(rest.decode())
            if t == b':':
                return int(rest)
            if t == b'$':
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2]
            if t == b'*':
                return [read() for _ in range(int(rest))]
            raise AssertionError('bad RESP reply %r' % line)
        return read()


def metrics(port):
    """A replica's /metrics: {name: value}."""
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith('#'):
                k, v = line.split()
                out[k] = float(v)
        return out
