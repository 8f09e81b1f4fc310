#!/usr/bin/env bash
# pp/tg side by side, llama-bench style, interleaved: each round runs hqekv
# (`hqekv bench`, one repetition) then llama.cpp (llama_bench.mjs) for every
# configuration, so that both see the same machine state; the spread over
# rounds is reported with the load averages of each round.
#   bash bench/llamacpp_side/speed.sh [MODEL] [OUT_DIR]
# Env: ROUNDS (3), DEPTHS ("0"), THREADS ("1"), PP (512), TG (128),
#      KV ("f16/f16 q4_0/q4_0": llama.cpp's -ctk/-ctv; hqekv runs llama:ctk=..,ctv=..
#      for each, and fp16 for f16/f16), HQ_EXTRA ("kivi:nominal_bits=2 hqekv:bits=3.4":
#      hqekv-only caches, in the same rounds).
# Default model: the synthetic Llama-3.2-1B-geometry Q4_K file of
# scripts/make_synthetic_1b.sh (made when missing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
HQEKV=${HQEKV:-$ROOT/build/hqekv}
MODEL=${1:-$ROOT/build-synth/llama-3.2-1b-geometry-q4k.gguf}
OUT=${2:-$HERE/out/speed-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${ROUNDS:-3} DEPTHS=${DEPTHS:-0} THREADS=${THREADS:-1} PP=${PP:-512} TG=${TG:-128}
KV=${KV:-"f16/f16 q4_0/q4_0"}
HQ_EXTRA=${HQ_EXTRA:-"kivi:nominal_bits=2 hqekv:bits=3.4"}
bash "$HERE/install.sh"
[ -f "$MODEL" ] || HQEKV=$HQEKV bash "$ROOT/scripts/make_synthetic_1b.sh" "$MODEL"
mkdir -p "$OUT"
J=$OUT/rounds.jsonl
: >"$J"
for r in $(seq 1 "$ROUNDS"); do
  for d in $DEPTHS; do for t in $THREADS; do
    for pair in $KV; do
      k=${pair%/*} v=${pair#*/}
      spec=$([ "$pair" = f16/f16 ] && echo fp16 || echo "llama:ctk=$k,ctv=$v")
      "$HQEKV" bench -m "$MODEL" -p "$PP" -n "$TG" -d "$d" -t "$t" -r 1 --kv "$spec" -o json 2>/dev/null |
        node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{for(const x of JSON.parse(s))
          console.log(JSON.stringify({round:+process.argv[1],engine:"hqekv",kv:process.argv[2],depth:x.depth,
          threads:x.threads,test:x.test,ts:x.avg_ts,loadavg:require("os").loadavg()}))})' "$r" "$pair" >>"$J"
      node "$HERE/llama_bench.mjs" --model "$MODEL" --pp "$PP" --tg "$TG" --depth "$d" --ctk "$k" --ctv "$v" \
        --threads "$t" | node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{const x=JSON.parse(s);
          for(const test of Object.keys(x).filter(k=>/^(pp|tg)\d+$/.test(k)))
          console.log(JSON.stringify({round:+process.argv[1],engine:"llama.cpp",kv:process.argv[2],depth:x.depth,
          threads:x.threads,test,ts:x[test],loadavg:x.loadavg}))})' "$r" "$pair" >>"$J"
    done
    for spec in $HQ_EXTRA; do
      "$HQEKV" bench -m "$MODEL" -p "$PP" -n "$TG" -d "$d" -t "$t" -r 1 --kv "$spec" -o json 2>/dev/null |
        node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{for(const x of JSON.parse(s))
          console.log(JSON.stringify({round:+process.argv[1],engine:"hqekv",kv:process.argv[2],depth:x.depth,
          threads:x.threads,test:x.test,ts:x.avg_ts,loadavg:require("os").loadavg()}))})' "$r" "$spec" >>"$J"
    done
  done; done
done
# Median and range per (engine, kv, depth, threads, test); ratio hqekv / llama.cpp on the same kv.
node - "$J" "$OUT" "$MODEL" <<'JS'
const fs = require("fs");
const [j, out, model] = process.argv.slice(2);
const rows = fs.readFileSync(j, "utf8").trim().split("\n").filter(Boolean).map(JSON.parse);
const key = (r) => [r.engine, r.kv, r.depth, r.threads, r.test].join("|");
const g = new Map();
for (const r of rows) (g.get(key(r)) || g.set(key(r), []).get(key(r))).push(r.ts);
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
let md = `# pp/tg side by side (${model})\n\n${rows.length} samples, rounds interleaved (hqekv then llama.cpp per configuration); load averages per sample in rounds.jsonl (range ${Math.min(...rows.map((r) => r.loadavg[0])).toFixed(1)}–${Math.max(...rows.map((r) => r.loadavg[0])).toFixed(1)}).\n\n| engine | kv | depth | threads | test | median t/s | min–max | hqekv ÷ llama.cpp |\n|---|---|---|---|---|---|---|---|\n`;
const summary = [];
for (const [k, v] of g) {
  const [engine, kv, depth, threads, test] = k.split("|");
  const other = g.get(["llama.cpp", kv, depth, threads, test].join("|"));
  const ratio = engine === "hqekv" && other ? med(v) / med(other) : null;
  summary.push({engine, kv, depth: +depth, threads: +threads, test, median: med(v), min: Math.min(...v), max: Math.max(...v), ratio});
  md += `| ${engine} | ${kv} | ${depth} | ${threads} | ${test} | ${med(v).toFixed(2)} | ${Math.min(...v).toFixed(2)}–${Math.max(...v).toFixed(2)} | ${ratio ? ratio.toFixed(2) : "–"} |\n`;
}
fs.writeFileSync(out + "/speed.json", JSON.stringify({model, summary, samples: rows}, null, 1));
fs.writeFileSync(out + "/speed.md", md);
console.log(md);
JS
