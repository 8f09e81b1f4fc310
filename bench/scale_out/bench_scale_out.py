#!/usr/bin/env python3
"""Benchmark of the shared KV tier: 3 `hqekv serve` replicas behind HAProxy, K shared prefixes,
N users (docs/scale-out.md, report in docs/results/scale-out/).

For each KV cache (fp16, hqekv:bits=3.4) and each tier setting (none; redis://): starts a fresh
redis-server, 3 replicas and HAProxy (deploy/haproxy.cfg) on loopback, then sends N requests one
after another: request u asks prefix u % K followed by its own question (20 tokens), max 1 token.
The first request of each prefix is "cold", the others are "repeats"; the cold ones go first and
the tier's writes are awaited before the repeats. Requests carry the X-Hqekv-Prefix-Hash their
prefix's first answer echoed, so HAProxy sends a prefix's repeats to one replica.
Reports per setting: prompt tokens computed (the replicas' hqekv_prompt_tokens_evaluated_total),
median and mean request time of cold requests and of repeats (a 1-token request: the time to
the first token as the client sees it), tier bytes, and the store's bytes per cached token
(every entry's bytes over the tokens it holds).

Usage: bench_scale_out.py --hqekv build/hqekv --model models/refmodel-4l.gguf
       [--prefixes 8] [--prefix-tokens 1500] [--users 64] [--block 128] [--out DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'scale_out'))
from loopback import free_port, metrics, redis_cmd, wait_until  # noqa: E402










def run_setting(a, kv, tier, prefixes, questions, work):
    procs, logs = [], []

    def start(name, cmd, env=None):
        f = open(os.path.join(work, name + '.log'), 'w')
        logs.append(f)
        procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env))
    try:
        rport = free_port()
        if tier:
            start('redis', ['redis-server', '--port', str(rport), '--bind', '127.0.0.1', '--save', '',
                            '--appendonly', 'no', '--dir', work])
            wait_until(lambda: redis_cmd(rport, 'PING') == b'PONG', 'redis')
        ports = [free_port() for _ in range(3)]
        for i, p in enumerate(ports):
            cmd = [a.hqekv, 'serve', '-m', a.model, '--port', str(p), '-np', '1', '--ctx', '2048',
                   '-t', str(a.threads), '--kv', kv, '--kv-store-block', str(a.block), '--no-request-log']
            if tier:
                cmd += ['--kv-store', 'redis://127.0.0.1:%d/bench' % rport]
            start('r%d' % i, cmd)
        for p in ports:
            wait_until(lambda p=p: urllib.request.urlopen('http://127.0.0.1:%d/health' % p).status == 200, 'replica')
        lb = free_port()
        env = dict(os.environ, HQEKV_LISTEN='127.0.0.1:%d' % lb,
                   **{'HQEKV_R%d' % (i + 1): '127.0.0.1:%d' % p for i, p in enumerate(ports)})
        start('haproxy', ['haproxy', '-db', '-f', os.path.join(ROOT, 'deploy', 'haproxy.cfg')], env)
        wait_until(lambda: urllib.request.urlopen('http://127.0.0.1:%d/health' % lb).status == 200, 'haproxy')

        route = {}
        rows = []

        def ask(u):
            k = u % len(prefixes)
            body = {'prompt': prefixes[k] + questions[u], 'n_predict': 1, 'temperature': 0,
                    'ignore_eos': True, 'kv': kv}
            headers = {'Content-Type': 'application/json'}
            if k in route:
                headers['X-Hqekv-Prefix-Hash'] = route[k]
            req = urllib.request.Request('http://127.0.0.1:%d/completion' % lb, data=json.dumps(body).encode(),
                                         headers=headers)
            t0 = time.perf_counter()
            with urllib.request.urlopen(req, timeout=300) as r:
                out = json.loads(r.read())
                h = r.headers  # case-insensitive
            dt = time.perf_counter() - t0
            route.setdefault(k, h.get('X-Hqekv-Prefix-Hash'))
            rows.append({'user': u, 'prefix': k, 'cold': u < len(prefixes), 'ms': dt * 1000,
                         'cached': out['tokens_cached'], 'computed': out['timings']['prompt_n'],
                         'store_bytes': out.get('kv_store_bytes', 0), 'replica': h.get('X-Hqekv-Replica')})

        for u in range(len(prefixes)):
            ask(u)
        if tier:  # the cold requests' entries are written before the repeats come
            def stored(k_max):  # kvtier::PublishBlock: the last two blocks and powers of two
                return sum(1 for k in range(1, k_max + 1) if k + 1 >= k_max or k & (k - 1) == 0)
            want = sum(stored((len(p) + len(questions[u])) // a.block) for u, p in enumerate(prefixes))
            wait_until(lambda: sum(metrics(p).get('hqekv_kv_store_puts_total', 0) for p in ports) >= want,
                       'tier writes', 120)
        for u in range(len(prefixes), a.users):
            ask(u)
        evaluated = sum(metrics(p)['hqekv_prompt_tokens_evaluated_total'] for p in ports)
        out = {'kv': kv, 'tier': tier, 'requests': len(rows), 'prompt_tokens': sum(
            len(prefixes[r['prefix']]) + len(questions[r['user']]) for r in rows),
            'prompt_tokens_computed': int(evaluated)}
        for name, sel in (('cold', True), ('repeat', False)):
            ms = [r['ms'] for r in rows if r['cold'] == sel]
            out[name + '_ms_median'] = statistics.median(ms) if ms else None
            out[name + '_ms_mean'] = statistics.mean(ms) if ms else None
            out[name + '_computed'] = sum(r['computed'] for r in rows if r['cold'] == sel)
        out['repeat_cached_tokens'] = sum(r['cached'] for r in rows if not r['cold'])
        out['fetched_bytes'] = sum(r['store_bytes'] for r in rows)
        if tier:
            keys = redis_cmd(rport, 'KEYS', 'bench:*')
            total_b = total_t = 0
            for key in keys:
                n = redis_cmd(rport, 'STRLEN', key)
                head = redis_cmd(rport, 'GETRANGE', key, 0, 600)
                hlen = int.from_bytes(head[12:16], 'little')
                total_t += json.loads(head[16:16 + hlen])['n_tokens']
                total_b += n
            out['store_entries'] = len(keys)
            out['store_bytes'] = total_b
            out['store_bytes_per_token'] = total_b / total_t if total_t else None
            m = [metrics(p) for p in ports]
            out['tier_hits'] = int(sum(x.get('hqekv_kv_store_hits_total', 0) for x in m))
            out['tier_misses'] = int(sum(x.get('hqekv_kv_store_misses_total', 0) for x in m))
        out['replicas_used_by_repeats'] = len({r['replica'] for r in rows if not r['cold']})
        return out
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--hqekv', default=os.path.join(ROOT, 'build', 'hqekv'))
    ap.add_argument('--model', default=os.path.join(ROOT, 'models', 'refmodel-4l.gguf'))
    ap.add_argument('--prefixes', type=int, default=8)
    ap.add_argument('--prefix-tokens', type=int, default=1500)
    ap.add_argument('--question-tokens', type=int, default=20)
    ap.add_argument('--users', type=int, default=64)
    ap.add_argument('--block', type=int, default=128)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--kv', default='fp16,hqekv:bits=3.4')
    ap.add_argument('--out', default='')
    a = ap.parse_args()
    for tool in ('redis-server', 'haproxy'):
        if not shutil.which(tool):
            sys.exit(tool + ' is not installed (apt-get install redis-server haproxy)')
    # Token ids of the model's vocabulary (refmodel-4l: 2048), deterministic per prefix and user.
    prefixes = [[1] + [3 + (i * (97 + 2 * k) + 31 * k) % 2000 for i in range(a.prefix_tokens - 1)]
                for k in range(a.prefixes)]
    questions = [[5 + (i * (13 + u) + 7 * u) % 1900 for i in range(a.question_tokens)] for u in range(a.users)]
    work = tempfile.mkdtemp(prefix='hqekv_bench_scale_')
    results = []
    try:
        for kv in a.kv.split(','):
            for tier in (False, True):
                r = run_setting(a, kv, tier, prefixes, questions, work)
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {'setup': vars(a), 'results': results}
    for kv in a.kv.split(','):
        off = next(r for r in results if r['kv'] == kv and not r['tier'])
        on = next(r for r in results if r['kv'] == kv and r['tier'])
        summary.setdefault('ratios', {})[kv] = {
            'prefill_tokens_cut': 1 - on['prompt_tokens_computed'] / off['prompt_tokens_computed'],
            'repeat_prefill_tokens_cut': 1 - on['repeat_computed'] / off['repeat_computed'],
            'repeat_ttft_speedup_median': off['repeat_ms_median'] / on['repeat_ms_median'],
        }
    per_token = {r['kv']: r['store_bytes_per_token'] for r in results if r['tier']}
    if 'fp16' in per_token:  # each cache's store bytes per cached token over fp16's
        summary['bytes_per_token_vs_fp16'] = {kv: b / per_token['fp16'] for kv, b in per_token.items()}
    print(json.dumps(summary, indent=1))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, 'results.json'), 'w') as f:
            json.dump(summary, f, indent=1)
            f.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
