#!/usr/bin/env bash
# pp/tg side by side, llama-bench style, interleaved. In each round, for each
# planned depth, hqekv (`hqekv bench`, one repetition) and llama.cpp
# (llama_bench.mjs) runs alternate (H L H L ...), and every second round runs
# that list backwards, so each engine sees the machine state of the other
# (ABBA over rounds). Every sample records the load averages before and
# after it and its wall time; speed_report.mjs turns rounds.jsonl into
# speed.md / speed.json (median, min–max, and hqekv ÷ llama.cpp per depth,
# thread count, hqekv spec and llama.cpp KV type).
#   bash bench/llamacpp_side/speed.sh [MODEL] [OUT_DIR]
# Env:
#   ROUNDS   (3); FIRST_ROUND (1): the number of the first round, to add rounds
#            to an OUT_DIR later (rounds.jsonl is appended to)
#   THREADS  ("1")
#   PLAN     ("0:512:128 4096:0:128 16384:0:128"): depth:pp:tg per entry; at a
#            depth > 0 the cache is filled once per engine, KV type and round
#            (not timed; the fill time is recorded) before the timed tests
#   LLAMA_KV ("f16/f16 q8_0/q8_0 q4_0/q4_0"): llama.cpp -ctk/-ctv at depth 0
#   HQ_KV    ("fp16 kivi:nominal_bits=2 hqekv:bits=3.4 llama:ctk=q4_0,ctv=q4_0")
#   DEEP_LLAMA_KV ("f16/f16 q4_0/q4_0"), DEEP_HQ_KV ("fp16 kivi:nominal_bits=2
#            hqekv:bits=3.4"): the same at depths > 0 (hqekv's `llama:` cache is
#            scalar reference code, minutes per thousand tokens of fill: left
#            out of the deep runs by default). Each list may be set empty
#            (e.g. DEEP_LLAMA_KV="" to run only hqekv samples); unset = default
#   HQEKV    (build/hqekv)
#   FILL_THREADS (empty: each sample's own thread count): threads for the
#            untimed fill at depths > 0, the same for both engines (hqekv:
#            `bench -t FILL,T` fills at its first thread count; its extra
#            FILL-thread rows are dropped; llama.cpp: --fill-threads)
#   STATE_DIR ($OUT/state): filled depths kept on disk, one file per engine,
#            model, depth and KV type (llama_bench.mjs --state, `hqekv bench
#            --state`), written by the first sample and loaded by later rounds,
#            so a depth is filled once per KV type for the whole run (the
#            sample that fills records fill_s, the others restored: true).
#            Delete the folder to refill.
# Default model: the synthetic Llama-3.2-1B-geometry Q4_K file of
# scripts/make_synthetic_1b.sh (made when missing).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
HQEKV=${HQEKV:-$ROOT/build/hqekv}
MODEL=${1:-$ROOT/build-synth/llama-3.2-1b-geometry-q4k.gguf}
OUT=${2:-$HERE/out/speed-$(date -u +%Y%m%dT%H%M%SZ)}
ROUNDS=${ROUNDS:-3} FIRST_ROUND=${FIRST_ROUND:-1} THREADS=${THREADS:-1}
PLAN=${PLAN:-"0:512:128 4096:0:128 16384:0:128"}
LLAMA_KV=${LLAMA_KV-"f16/f16 q8_0/q8_0 q4_0/q4_0"}
HQ_KV=${HQ_KV-"fp16 kivi:nominal_bits=2 hqekv:bits=3.4 llama:ctk=q4_0,ctv=q4_0"}
DEEP_LLAMA_KV=${DEEP_LLAMA_KV-"f16/f16 q4_0/q4_0"}
DEEP_HQ_KV=${DEEP_HQ_KV-"fp16 kivi:nominal_bits=2 hqekv:bits=3.4"}
FILL_THREADS=${FILL_THREADS:-}
STATE_DIR=${STATE_DIR:-$OUT/state}
bash "$HERE/install.sh"
[ -f "$MODEL" ] || HQEKV=$HQEKV bash "$ROOT/scripts/make_synthetic_1b.sh" "$MODEL"
mkdir -p "$OUT"
J=$OUT/rounds.jsonl
: >>"$J"
{
  echo "model $MODEL"
  echo "hqekv $HQEKV sha256 $(sha256sum "$HQEKV" | cut -d' ' -f1)"
  echo "$(date -u +%FT%TZ) ROUNDS=$ROUNDS FIRST_ROUND=$FIRST_ROUND THREADS=$THREADS PLAN=$PLAN"
  echo "LLAMA_KV=$LLAMA_KV HQ_KV=$HQ_KV DEEP_LLAMA_KV=$DEEP_LLAMA_KV DEEP_HQ_KV=$DEEP_HQ_KV"
  echo "FILL_THREADS=${FILL_THREADS:-same as timed} STATE_DIR=$STATE_DIR"
  grep -m1 'model name' /proc/cpuinfo
  echo "nproc $(nproc)"
} >>"$OUT/setup.txt"

load() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' ','; }

# One hqekv sample: `hqekv bench` with one repetition; its stderr names the
# fill time at a depth.
run_hq() {  # round depth pp tg threads spec
  local err=$OUT/hq.err l0 t0 t1 tl=$5 ft=$5 extra=() state
  if [ "$2" -gt 0 ]; then
    mkdir -p "$STATE_DIR"
    state=$STATE_DIR/$(basename "$MODEL" .gguf)-d$2-hq-${6//[^A-Za-z0-9.]/-}.state
    extra=(--state "$state")
    # A filled file is loaded: no fill, so no FILL-thread rows to run.
    if [ ! -f "$state" ] && [ -n "$FILL_THREADS" ] && [ "$FILL_THREADS" != "$5" ]; then
      tl=$FILL_THREADS,$5 ft=$FILL_THREADS
    fi
  fi
  l0=$(load)
  t0=$(date +%s.%N)
  "$HQEKV" bench -m "$MODEL" -p "$3" -n "$4" -d "$2" -t "$tl" -r 1 --kv "$6" "${extra[@]}" -o json 2>"$err" >"$OUT/hq.json" ||
    { echo "hqekv bench failed ($6 d=$2):" >&2; tail -3 "$err" >&2; return 0; }
  t1=$(date +%s.%N)
  node -e '
const fs = require("fs");
const [r, spec, l0, l1, wall, errPath, jsonPath, t, ft] = process.argv.slice(1);
const m = /filled depth \d+ in ([\d.]+) s/.exec(fs.readFileSync(errPath, "utf8"));
for (const x of JSON.parse(fs.readFileSync(jsonPath, "utf8"))) {
  if (x.threads !== +t) continue;  // the fill-thread rows of `-t FILL,T`
  console.log(JSON.stringify({round: +r, engine: "hqekv", kv: spec, depth: x.depth, threads: x.threads,
    test: x.test, ts: x.avg_ts, cpu_ts: x.avg_cpu_ts ?? null, fill_s: m ? +m[1] : null, fill_threads: x.depth && m ? +ft : null,
    restored: x.depth > 0 && !m, wall_s: +wall,
    kv_bits: x.kv_bits_per_element, load_before: l0.split(",").map(Number),
    load_after: l1.split(",").map(Number)}));
}
' "$1" "$6" "$l0" "$(load)" "$(echo "$t1 - $t0" | bc)" "$err" "$OUT/hq.json" "$5" "$ft" >>"$J"
}

# One llama.cpp sample: llama_bench.mjs (ppN and tgN, each after its own fill).
run_ll() {  # round depth pp tg threads k/v
  local k=${6%/*} v=${6#*/} l0 t0 t1 extra=()
  if [ "$2" -gt 0 ]; then
    mkdir -p "$STATE_DIR"
    extra=(--state "$STATE_DIR/$(basename "$MODEL" .gguf)-d$2-$k-$v.state" --fill-threads "${FILL_THREADS:-$5}")
  fi
  l0=$(load)
  t0=$(date +%s.%N)
  node "$HERE/llama_bench.mjs" --model "$MODEL" --pp "$3" --tg "$4" --depth "$2" --ctk "$k" --ctv "$v" \
    --threads "$5" "${extra[@]}" >"$OUT/ll.json" 2>"$OUT/ll.err" ||
    { echo "llama_bench failed ($6 d=$2):" >&2; tail -3 "$OUT/ll.err" >&2; return 0; }
  t1=$(date +%s.%N)
  node -e '
const fs = require("fs");
const [r, kv, l0, l1, wall, jsonPath] = process.argv.slice(1);
const x = JSON.parse(fs.readFileSync(jsonPath, "utf8"));
for (const test of Object.keys(x).filter((k) => /^(pp|tg)\d+$/.test(k)))
  console.log(JSON.stringify({round: +r, engine: "llama.cpp", kv, depth: x.depth, threads: x.threads, test,
    ts: x[test], cpu_ts: x.cpu_ts ? x.cpu_ts[test] ?? null : null, fill_s: (x.fill_s && x.fill_s[test]) ?? x.fill_first_s ?? null,
    fill_threads: x.depth ? x.fill_threads ?? x.threads : null,
    restored: x.restore_s && x.restore_s[test] != null && x.fill_first_s == null, wall_s: +wall,
    load_before: l0.split(",").map(Number), load_after: l1.split(",").map(Number), version: x.version}));
' "$1" "$6" "$l0" "$(load)" "$(echo "$t1 - $t0" | bc)" "$OUT/ll.json" >>"$J"
}

for r in $(seq "$FIRST_ROUND" $((FIRST_ROUND + ROUNDS - 1))); do
  for entry in $PLAN; do
    IFS=: read -r d pp tg <<<"$entry"
    if [ "$d" -gt 0 ]; then hq=($DEEP_HQ_KV) ll=($DEEP_LLAMA_KV); else hq=($HQ_KV) ll=($LLAMA_KV); fi
    jobs=()
    n=$((${#hq[@]} > ${#ll[@]} ? ${#hq[@]} : ${#ll[@]}))
    for ((i = 0; i < n; i++)); do
      [ $i -lt ${#hq[@]} ] && jobs+=("H ${hq[$i]}")
      [ $i -lt ${#ll[@]} ] && jobs+=("L ${ll[$i]}")
    done
    if [ $((r % 2)) -eq 0 ]; then  # every second round backwards
      rev=()
      for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do rev+=("${jobs[$i]}"); done
      jobs=("${rev[@]}")
    fi
    for t in $THREADS; do
      for job in "${jobs[@]}"; do
        echo "$(date -u +%H:%M:%S) round $r depth $d threads $t: $job (load $(load))"
        case $job in
          H\ *) run_hq "$r" "$d" "$pp" "$tg" "$t" "${job#H }" ;;
          L\ *) run_ll "$r" "$d" "$pp" "$tg" "$t" "${job#L }" ;;
        esac
      done
    done
  done
done
node "$HERE/speed_report.mjs" "$OUT" "$MODEL"
