#!/usr/bin/env python3
"""Several `hqekv serve` replicas sharing one KV tier in Redis, behind HAProxy (loopback only).

Starts redis-server, 3 replicas (`--kv-store redis://...`) and HAProxy with deploy/haproxy.cfg,
then checks:
  1. a prompt computed on replica A is loaded on replica B: the shared whole blocks are not
     prefilled again (usage: cached tokens, timings.prompt_n, the replica's prefill counter) and
     the greedy answer is token for token the cold one; entries expire (--kv-store-ttl);
  2. HAProxy routes by the X-Hqekv-Prefix-Hash the replicas echo (the same replica each time);
  3. a corrupted entry is refused (counted, logged) and the answer is still the cold one;
  4. a full store (maxmemory, noeviction) refuses writes: requests still succeed;
  5. Redis killed while requests run: none fails, every answer is the cold one; a restarted
     Redis is used again.
Exit 77 (CTest: skipped) with a message when redis-server or haproxy is missing or cannot start.
Usage: scale_out_test.py HQEKV_BINARY MODEL.gguf
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import free_port, metrics, redis_cmd, wait_until  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE = time.time() + 240  # the whole test, whatever happens
BLOCK = 64
SPEC = 'hqekv:bits=3.4'


def skip(msg):
    print('SKIP: ' + msg)
    sys.exit(77)








def post(port, path, body, headers=None, timeout=60):
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), data=json.dumps(body).encode(),
                                 headers=dict({'Content-Type': 'application/json'}, **(headers or {})))
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read()), r.headers  # case-insensitive (HAProxy sends lowercase names)




def complete(port, prompt, headers=None):
    body = {'prompt': prompt, 'n_predict': 12, 'temperature': 0, 'return_tokens': True,
            'kv': SPEC, 'ignore_eos': True}
    out, h = post(port, '/completion', body, headers)
    return out, h


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, model = sys.argv[1], sys.argv[2]
    for tool in ('redis-server', 'haproxy'):
        if not shutil.which(tool):
            skip(tool + ' is not installed (apt-get install redis-server haproxy)')
    work = tempfile.mkdtemp(prefix='hqekv_scale_out_')
    procs = {}
    logs = {}

    def start(name, cmd, env=None):
        logs[name] = open(os.path.join(work, name + '.log'), 'w+')
        procs[name] = subprocess.Popen(cmd, stdout=logs[name], stderr=subprocess.STDOUT, env=env)

    def log_of(name):
        logs[name].flush()
        with open(logs[name].name) as f:
            return f.read()

    redis_port = free_port()

    def start_redis():
        start('redis', ['redis-server', '--port', str(redis_port), '--bind', '127.0.0.1', '--save', '',
                        '--appendonly', 'no', '--maxmemory-policy', 'noeviction', '--dir', work])
    try:
        start_redis()
        try:
            wait_until(lambda: redis_cmd(redis_port, 'PING') == b'PONG', 'redis-server', 10)
        except AssertionError:
            skip('redis-server did not start: ' + log_of('redis')[-500:])
        ports = [free_port() for _ in range(3)]
        for i, p in enumerate(ports):
            start('r%d' % (i + 1), [binary, 'serve', '-m', model, '--port', str(p), '-np', '2', '--ctx', '1024',
                                    '-t', '1', '--kv', SPEC, '--kv-store',
                                    'redis://127.0.0.1:%d/scaleout' % redis_port, '--kv-store-block',
                                    str(BLOCK), '--kv-store-timeout-ms', '300', '--kv-store-ttl', '600'])
        for p in ports:
            wait_until(lambda p=p: urllib.request.urlopen('http://127.0.0.1:%d/health' % p, timeout=2).status == 200,
                       'replica on port %d' % p, 60)
        lb = free_port()
        env = dict(os.environ, HQEKV_LISTEN='127.0.0.1:%d' % lb,
                   **{'HQEKV_R%d' % (i + 1): '127.0.0.1:%d' % p for i, p in enumerate(ports)})
        start('haproxy', ['haproxy', '-db', '-f', os.path.join(ROOT, 'deploy', 'haproxy.cfg')], env)
        try:
            wait_until(lambda: urllib.request.urlopen('http://127.0.0.1:%d/health' % lb, timeout=2).status == 200,
                       'haproxy', 15)
        except AssertionError:
            skip('haproxy did not start: ' + log_of('haproxy')[-500:])

        def puts(port):
            return metrics(port).get('hqekv_kv_store_puts_total', 0)

        # 1. A on replica 1 (cold), then on replica 2: 4 whole shared blocks loaded.
        shared = [3 + (i * 37) % 2000 for i in range(4 * BLOCK)]
        q1 = [5 + (i * 11) % 1900 for i in range(20)]
        q2 = [7 + (i * 13) % 1900 for i in range(17)]
        cold, _ = complete(ports[0], shared + q1)
        assert cold['tokens_cached'] == 0, cold
        wait_until(lambda: puts(ports[0]) >= 4, 'replica 1 to publish its 4 blocks')
        before = metrics(ports[1])['hqekv_prompt_tokens_evaluated_total']
        warm, _ = complete(ports[1], shared + q1)
        after = metrics(ports[1])['hqekv_prompt_tokens_evaluated_total']
        assert warm['tokens_cached'] == 4 * BLOCK, warm
        assert warm['timings']['prompt_n'] == len(q1), warm['timings']
        assert after - before == len(q1), (before, after)
        assert warm['kv_store_bytes'] > 0, warm
        assert warm['tokens'] == cold['tokens'], (cold['tokens'], warm['tokens'])
        for k in redis_cmd(redis_port, 'KEYS', 'scaleout:*'):  # --kv-store-ttl: SET ... EX
            assert 0 < redis_cmd(redis_port, 'TTL', k) <= 600, k
        # Another question on the same document, on replica 3: the shared part is loaded.
        other, _ = complete(ports[2], shared + q2)
        assert other['tokens_cached'] == 4 * BLOCK, other
        print('reuse across replicas: ok (%d tokens loaded, %d bytes fetched, same %d tokens)'
              % (warm['tokens_cached'], warm['kv_store_bytes'], len(cold['tokens'])))

        # 2. Routing: the echoed hash sends every repeat to one replica.
        doc = [9 + (i * 29) % 2000 for i in range(2 * BLOCK)]
        first, h = complete(lb, doc + q1)
        key = h.get('X-Hqekv-Prefix-Hash')
        assert key and len(key) == 32, h
        served = set()
        for q in (q1, q2, q1[:5]):
            out, h2 = complete(lb, doc + q, {'X-Hqekv-Prefix-Hash': key})
            assert h2.get('X-Hqekv-Prefix-Hash') == key, h2
            served.add(h2.get('X-Hqekv-Replica'))
        assert len(served) == 1 and None not in served, served
        print('routing by X-Hqekv-Prefix-Hash: ok (all on %s)' % served.pop())

        # 3. A corrupted entry: refused, the answer is computed and still the cold one.
        doc3 = [11 + (i * 31) % 2000 for i in range(2 * BLOCK)]
        puts0 = puts(ports[0])
        cold3, _ = complete(ports[0], doc3 + q1)
        wait_until(lambda: puts(ports[0]) >= puts0 + 2, 'replica 1 to publish doc3')
        keys = redis_cmd(redis_port, 'KEYS', 'scaleout:*')
        assert len(keys) >= 6, keys
        for k in keys:  # flip one byte in the middle of every entry
            n = redis_cmd(redis_port, 'STRLEN', k)
            b = redis_cmd(redis_port, 'GETRANGE', k, n // 2, n // 2)
            redis_cmd(redis_port, 'SETRANGE', k, n // 2, bytes([b[0] ^ 0x55]))
        rej0 = metrics(ports[1]).get('hqekv_kv_store_rejected_total', 0)
        again3, _ = complete(ports[1], doc3 + q1)
        assert again3['tokens_cached'] == 0, again3
        assert again3['tokens'] == cold3['tokens']
        assert metrics(ports[1])['hqekv_kv_store_rejected_total'] >= rej0 + 1
        assert '"what":"rejected"' in log_of('r2'), 'no log line for the refused entry'
        print('corrupted entries: refused, answer unchanged')

        # 4. A full store: writes refused, requests served.
        redis_cmd(redis_port, 'FLUSHALL')
        used = int([l for l in redis_cmd(redis_port, 'INFO', 'memory').decode().split('\r\n')
                    if l.startswith('used_memory:')][0].split(':')[1])
        assert redis_cmd(redis_port, 'CONFIG', 'SET', 'maxmemory', used + 4096) == b'OK'
        err0 = metrics(ports[2]).get('hqekv_kv_store_put_errors_total', 0)
        doc4 = [13 + (i * 41) % 2000 for i in range(3 * BLOCK)]
        full, _ = complete(ports[2], doc4 + q1)
        wait_until(lambda: metrics(ports[2])['hqekv_kv_store_put_errors_total'] >= err0 + 1,
                   'a refused write')
        redis_cmd(redis_port, 'CONFIG', 'SET', 'maxmemory', 0)
        print('full store: writes refused, request served (%d tokens)' % len(full['tokens']))

        # 5. Redis killed mid-run: references first (published), then the same prompts
        #    from 6 threads through HAProxy while Redis dies.
        prompts = [[17 + (i * (43 + j)) % 2000 for i in range(2 * BLOCK)] + q1 for j in range(6)]
        refs = [complete(ports[0], p)[0]['tokens'] for p in prompts]
        results, errors, done = [None] * len(prompts), [], []
        rounds = 4

        def run(j):
            try:
                for _ in range(rounds):
                    out, _ = complete(lb, prompts[j])
                    done.append(time.time())
                    if out['tokens'] != refs[j]:
                        errors.append('prompt %d: %r != %r' % (j, out['tokens'], refs[j]))
                results[j] = True
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                errors.append('prompt %d: %r' % (j, e))
        threads = [threading.Thread(target=run, args=(j,)) for j in range(len(prompts))]
        for t in threads:
            t.start()
        wait_until(lambda: len(done) >= 3, 'the first answers')
        procs['redis'].send_signal(signal.SIGKILL)
        procs['redis'].wait()
        killed = time.time()
        for t in threads:
            t.join(max(1, DEADLINE - time.time()))
        assert not errors, errors
        assert all(results), results
        after = sum(1 for d in done if d > killed)
        assert after >= 1, 'every request ended before Redis was killed'
        # Down: still served (computed).
        down, _ = complete(ports[1], prompts[0])
        assert down['tokens'] == refs[0] and down['tokens_cached'] == 0, down
        # Back: a fresh Redis on the same port is used again after the back-off.
        start_redis()
        wait_until(lambda: redis_cmd(redis_port, 'PING') == b'PONG', 'redis-server again', 10)
        time.sleep(1.2)
        complete(ports[0], prompts[1])
        wait_until(lambda: len(redis_cmd(redis_port, 'KEYS', 'scaleout:*')) >= 2, 'entries in the new Redis')
        back, _ = complete(ports[2], prompts[1])
        assert back['tokens'] == refs[1] and back['tokens_cached'] == 2 * BLOCK, back
        print('redis killed mid-run: %d requests (%d answered after the kill), none failed, answers '
              'unchanged; reconnected' % (rounds * len(prompts), after))
        for i in range(3):
            for line in log_of('r%d' % (i + 1)).splitlines():
                assert 'AddressSanitizer' not in line and 'terminate called' not in line, line
        print('PASS')
        return 0
    finally:
        for name, p in procs.items():
            if p.poll() is None:
                p.terminate()
        for name, p in procs.items():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if os.environ.get('HQEKV_KEEP_LOGS'):
            print('logs in ' + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
