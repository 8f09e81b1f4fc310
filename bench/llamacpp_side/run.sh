#!/usr/bin/env bash
# llama.cpp side by side, one command (from the repository root):
#   bash bench/llamacpp_side/run.sh [OUT_DIR]
# Installs node-llama-cpp into bench/llamacpp_side/node/ (install.sh), then on
# models/refmodel-4l.gguf (WikiText-2 test, the `ppl --ref fp16` protocol:
# --ctx 2048 --prefill 1536 --max-tokens 2048) and models/stories260K.gguf
# (TinyStories, --ctx 512 --prefill 256):
#   1. hqekv's fp16 run written as a KL base with the whole vocabulary;
#   2. llama.cpp (f16 KV) on the same tokens: the protocol with and without
#      flash attention, the whole window as one batch, and token by token
#      -> forward parity;
#   3. llama.cpp with each KV type (q8_0 q5_1 q5_0 q4_1 q4_0, f16/q4_0,
#      q8_0/q4_0), rotation on and off (LLAMA_ATTN_ROT_DISABLE=1), and
#      hqekv's `llama:` rows (per-token cache, and the residual=32 variant)
#      -> the KV-type KL table; every one of the 35 quantized pairs with
#      rotation on -> pair_table.json (the sensitivity table of llama:bits=);
#   4. report.md / report.json (side_report.mjs).
# Env: HQEKV (default build/hqekv), THREADS (1), SKIP_DECODE=1 skips the
# token-by-token parity run (the slowest), CTX / PREFILL (2048 / 1536: a
# shorter window checks the plumbing in minutes).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE/out/$(date -u +%Y%m%dT%H%M%SZ)}
HQEKV=${HQEKV:-$ROOT/build/hqekv}
THREADS=${THREADS:-1}
mkdir -p "$OUT"
bash "$HERE/install.sh"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
CMDS=()
run() { CMDS+=("$*"); echo "+ $*" >&2; "$@"; }
dump() { run node "$HERE/llama_dump.mjs" --threads "$THREADS" "$@"; }
dump_norot() { CMDS+=("LLAMA_ATTN_ROT_DISABLE=1 node llama_dump.mjs $*"); echo "+ LLAMA_ATTN_ROT_DISABLE=1 $*" >&2
  LLAMA_ATTN_ROT_DISABLE=1 node "$HERE/llama_dump.mjs" --threads "$THREADS" "$@"; }

# --- refmodel-4l
M=$ROOT/models/refmodel-4l.gguf
T=$ROOT/data/text/wiki.test.raw
CTX=${CTX:-2048} PREFILL=${PREFILL:-1536}
P=(--ctx "$CTX" --prefill "$PREFILL" --max-tokens "$CTX" -t "$THREADS")
run "$HQEKV" ppl -m "$M" -f "$T" "${P[@]}" --kv fp16 --kl-divergence-base "$OUT/ref_base.kld" --ref-top-k 2048
B=(--model "$M" --tokens-from "$OUT/ref_base.kld")
dump "${B[@]}" --mode protocol --fa on --out "$OUT/ref_protocol_f16_fa"
dump "${B[@]}" --mode protocol --fa off --out "$OUT/ref_protocol_f16_nofa"
dump "${B[@]}" --mode batch --fa on --out "$OUT/ref_batch_f16_fa"
REF_PARITY='"ref_protocol_f16_fa","ref_protocol_f16_nofa","ref_batch_f16_fa"'
if [ "${SKIP_DECODE:-0}" != 1 ]; then
  dump "${B[@]}" --mode decode --fa on --out "$OUT/ref_decode_f16_fa"
  REF_PARITY="$REF_PARITY,\"ref_decode_f16_fa\""
fi
PAIRS="q8_0/q8_0 q5_1/q5_1 q5_0/q5_0 q4_1/q4_1 q4_0/q4_0 f16/q4_0 q8_0/q4_0 ${EXTRA_PAIRS:-}"
# Every K/V pair of llama.cpp's six types, rotation on (its default): the
# table's rows and bits='s sensitivity table (pair_table.mjs). In the
# background while the rest runs.
ALL=""
for k in f16 q8_0 q5_1 q5_0 q4_1 q4_0; do for v in f16 q8_0 q5_1 q5_0 q4_1 q4_0; do
  [ $k/$v = f16/f16 ] || ALL="$ALL${ALL:+,}$k/$v"; done; done
CMDS+=("node llama_dump.mjs ${B[*]} --mode protocol --pairs $ALL --out \$OUT/pair")
node "$HERE/llama_dump.mjs" --threads "$THREADS" "${B[@]}" --mode protocol --pairs "$ALL" --out "$OUT/pair" &
ALL_PID=$!
dump_norot "${B[@]}" --mode protocol --pairs "$(echo $PAIRS | tr ' ' ',')" --out "$OUT/norot"
# hqekv's rows, scored against its fp16 base (the whole vocabulary: the same
# KL as `--ref fp16`, without recomputing the reference each time).
K=(-m "$M" --kl-divergence "$OUT/ref_base.kld" -t "$THREADS" --json)
ROWS=""
RUNS="$REF_PARITY"
for pair in $PAIRS; do
  k=${pair%/*} v=${pair#*/}
  for rot in on off; do
    run "$HQEKV" ppl "${K[@]}" --kv "llama:ctk=$k,ctv=$v,rot=$rot" >"$OUT/hq_${k}_${v}_rot${rot}.json"
    hq="\"hqekv llama:\":\"hq_${k}_${v}_rot${rot}.json\""
    if [ $rot = on ]; then
      run "$HQEKV" ppl "${K[@]}" --kv "llama:ctk=$k,ctv=$v,residual=32" >"$OUT/hq_${k}_${v}_res32.json"
      hq="$hq,\"hqekv llama:residual=32\":\"hq_${k}_${v}_res32.json\""
      name=pair_${k}_${v}
    else
      name=norot_${k}_${v}
    fi
    RUNS="$RUNS,\"$name\""
    ROWS="$ROWS${ROWS:+,}{\"ctk\":\"$k\",\"ctv\":\"$v\",\"rot\":\"$rot\",\"llama\":\"$name\",\"hqekv\":{$hq}}"
  done
done
wait $ALL_PID
node "$HERE/pair_table.mjs" "$OUT" pair ref_protocol_f16_fa >"$OUT/pair_table.txt"

# --- stories260K (head_dim 8: llama.cpp's quantized types need 32 | head_dim, f16 only)
M2=$ROOT/models/stories260K.gguf
T2=$ROOT/data/text/tinystories_val_subset.txt
run "$HQEKV" ppl -m "$M2" -f "$T2" --ctx 512 --prefill 256 --max-tokens 512 -t "$THREADS" --kv fp16 \
  --kl-divergence-base "$OUT/st_base.kld" --ref-top-k 512
B2=(--model "$M2" --tokens-from "$OUT/st_base.kld")
dump "${B2[@]}" --mode protocol --fa on --out "$OUT/st_protocol_f16_fa"
dump "${B2[@]}" --mode protocol --fa off --out "$OUT/st_protocol_f16_nofa"
dump "${B2[@]}" --mode batch --fa on --out "$OUT/st_batch_f16_fa"
dump "${B2[@]}" --mode decode --fa on --out "$OUT/st_decode_f16_fa"

LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
META=$(node -e 'const m=require(process.argv[1]);console.log(JSON.stringify({l:m.llama_cpp.release,n:m.node_llama_cpp,b:m.cpu_backend.join(","),c:m.cpu}))' "$OUT/ref_protocol_f16_fa.json")
node - "$OUT" "$META" "$LOAD0" "$LOAD1" "$REF_PARITY" "$RUNS" "$ROWS" "$(git -C "$ROOT" rev-parse --short HEAD)" "${CMDS[@]}" <<'JS'
const [out, meta, l0, l1, parity, runs, rows, commit, ...cmds] = process.argv.slice(2);
const m = JSON.parse(meta);
const manifest = {title: "refmodel-4l (WikiText-2 test) and stories260K (TinyStories)",
  llama_cpp: m.l, node_llama_cpp: m.n, cpu_backend: m.b, cpu: m.c, hqekv_commit: commit,
  loadavg_start: l0.split(" ").map(Number), loadavg_end: l1.split(" ").map(Number),
  commands: cmds.map((c) => c.replaceAll(out + "/", "$OUT/")),
  models: [
    {name: "refmodel-4l", hqekv_base: "ref_base.kld", llama_runs: JSON.parse(`[${runs}]`),
     parity_runs: JSON.parse(`[${parity}]`), kv_ref: "ref_protocol_f16_fa", kv_rows: JSON.parse(`[${rows}]`)},
    {name: "stories260K", hqekv_base: "st_base.kld",
     llama_runs: ["st_protocol_f16_fa", "st_protocol_f16_nofa", "st_batch_f16_fa", "st_decode_f16_fa"],
     parity_runs: ["st_protocol_f16_fa", "st_protocol_f16_nofa", "st_batch_f16_fa", "st_decode_f16_fa"]}]};
require("fs").writeFileSync(out + "/manifest.json", JSON.stringify(manifest, null, 1));
JS
node "$HERE/side_report.mjs" "$OUT"
