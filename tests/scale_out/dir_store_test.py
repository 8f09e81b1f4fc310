#!/usr/bin/env python3
"""Two `hqekv serve` replicas sharing a `--kv-store dir:PATH` (no Redis, no proxy needed).

Checks: a prompt computed on replica A is loaded on replica B (cached tokens, prefill counter,
same greedy tokens, fp16 and hqekv:bits=3.4); entries are files PATH/<32 hex>.kv and no temporary
file is left; a truncated entry and an entry overwritten with another one's bytes are refused
(logged, counted) and the answer is still the cold one. (The byte-bounded LRU is tested in
tests/kvtier/kvtier_test.cc.)
Usage: dir_store_test.py HQEKV_BINARY MODEL.gguf
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import free_port, wait_until  # noqa: E402

BLOCK = 64




def post(port, body):
    req = urllib.request.Request('http://127.0.0.1:%d/completion' % port, data=json.dumps(body).encode(),
                                 headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def metric(port, name):
    with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
    return 0.0




def main():
    binary, model = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix='hqekv_dir_store_')
    store = os.path.join(work, 'store')
    procs, logs = [], []
    try:
        ports = [free_port() for _ in range(2)]
        for i, p in enumerate(ports):
            logs.append(open(os.path.join(work, 'r%d.log' % i), 'w+'))
            procs.append(subprocess.Popen(
                [binary, 'serve', '-m', model, '--port', str(p), '-np', '1', '--ctx', '1024', '-t', '1',
                 '--kv-store', 'dir:' + store, '--kv-store-block', str(BLOCK), '--kv-store-mb', '64'],
                stdout=logs[-1], stderr=subprocess.STDOUT))
        for p in ports:
            wait_until(lambda p=p: urllib.request.urlopen('http://127.0.0.1:%d/health' % p).status == 200,
                       'replica %d' % p)
        q = [5 + (i * 11) % 1900 for i in range(10)]
        answers = {}
        for j, kv in enumerate(('fp16', 'hqekv:bits=3.4')):
            doc = [3 + (i * (37 + j)) % 2000 for i in range(3 * BLOCK)]
            body = {'prompt': doc + q, 'n_predict': 8, 'temperature': 0, 'return_tokens': True,
                    'ignore_eos': True, 'kv': kv}
            puts0 = metric(ports[0], 'hqekv_kv_store_puts_total')
            cold = post(ports[0], body)
            wait_until(lambda: metric(ports[0], 'hqekv_kv_store_puts_total') >= puts0 + 3, 'entries written')
            ev0 = metric(ports[1], 'hqekv_prompt_tokens_evaluated_total')
            warm = post(ports[1], body)
            assert warm['tokens_cached'] == 3 * BLOCK, (kv, warm)
            assert metric(ports[1], 'hqekv_prompt_tokens_evaluated_total') - ev0 == len(q)
            assert warm['tokens'] == cold['tokens'], (kv, cold['tokens'], warm['tokens'])
            answers[kv] = (body, cold['tokens'])
            print('%s: %d tokens loaded from dir:, %d bytes, same answer' % (kv, warm['tokens_cached'],
                                                                               warm['kv_store_bytes']))
        names = os.listdir(store)
        assert names and all(len(n) == 35 and n.endswith('.kv') for n in names), names
        # Refused entries: every file truncated, or all given one file's bytes.
        files = sorted(os.path.join(store, n) for n in names)
        donor = open(files[0], 'rb').read()
        for k, f in enumerate(files):
            data = open(f, 'rb').read()
            with open(f, 'wb') as out:
                out.write(data[:len(data) // 2] if k % 2 or k == 0 else donor)
        rej0 = metric(ports[1], 'hqekv_kv_store_rejected_total')
        for kv, (body, tokens) in answers.items():  # the prompts whose entries were damaged
            again = post(ports[1], body)
            assert again['tokens'] == tokens, (kv, again['tokens'], tokens)
            assert again['tokens_cached'] == 0, again
        assert metric(ports[1], 'hqekv_kv_store_rejected_total') >= rej0 + 2
        logs[1].flush()
        assert '"what":"rejected"' in open(logs[1].name).read()
        print('corrupt entries refused, answer unchanged')
        print('PASS')
        return 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
