#!/usr/bin/env bash
# llama.cpp's KV types against `hqekv:bits=B` on several text windows, each
# engine scored against its own f16/fp16 run on the same token ids:
#   bash bench/llamacpp_side/windows_kl.sh OUT_DIR
# Windows: scripts/frontier.py's windows_of(TEXT, 4, 24000) (WINDOWS entries
# "TEXT:W", e.g. data/text/wiki.valid.raw:0). Per window:
#   1. hqekv fp16 KL base (whole vocabulary, --ref-top-k = vocabulary);
#   2. llama.cpp (llama_dump.mjs --mode protocol, flash attention, rotation
#      as llama.cpp's default) on the base's tokens, f16/f16 then each TYPES
#      entry as K and V; KL(f16 ‖ type) by pair_table.mjs;
#   3. `hqekv ppl --kv hqekv:bits=B` against the base, B = BITS of the type.
# Env: HQEKV (build/hqekv), CTX / PREFILL (2048 / 1536), TYPES, BITS (same
# order), WINDOWS, TLIMIT (seconds per process, 1200), THREADS (1).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:?OUT_DIR}
HQEKV=${HQEKV:-$ROOT/build/hqekv}
CTX=${CTX:-2048} PREFILL=${PREFILL:-1536} THREADS=${THREADS:-1} TLIMIT=${TLIMIT:-1200}
TYPES=(${TYPES:-q8_0 q5_0 q4_1 q4_0})
# True bits per element of llama.cpp's cache: block bytes * 8 / 32.
BITS=(${BITS:-8.5 5.5 5.0 4.5})
WINDOWS=(${WINDOWS:-data/text/wiki.valid.raw:0 data/text/wiki.valid.raw:1 data/text/pg11_alice_in_wonderland.txt:1 data/text/tinystories_val_subset.txt:1})
M=$ROOT/models/refmodel-4l.gguf
mkdir -p "$OUT"
PAIRS=f16/f16
for t in "${TYPES[@]}"; do PAIRS="$PAIRS,$t/$t"; done
for w in "${WINDOWS[@]}"; do
  text=${w%:*} idx=${w##*:}
  name=$(basename "$text"); name=${name%.raw}; name=${name%.txt}_w$idx
  D=$OUT/$name
  mkdir -p "$D"
  f=$(python3 - "$ROOT" "$ROOT/$text" "$idx" "$D" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/scripts")
import frontier
print(frontier.windows_of(sys.argv[2], 4, 24000, sys.argv[4])[int(sys.argv[3])])
PY
)
  echo "+ $name: $f" >&2
  [ -f "$D/base.kld" ] || timeout "$TLIMIT" "$HQEKV" ppl -m "$M" -f "$f" --ctx "$CTX" --prefill "$PREFILL" \
    --max-tokens "$CTX" -t "$THREADS" --kv fp16 --kl-divergence-base "$D/base.kld" --ref-top-k 2048 >"$D/base.txt" 2>&1
  # llama.cpp in the background while hqekv's rows run.
  ( [ -f "$D/pair_table.json" ] || { timeout "$TLIMIT" node "$HERE/llama_dump.mjs" --threads "$THREADS" \
      --model "$M" --tokens-from "$D/base.kld" --mode protocol --pairs "$PAIRS" --out "$D/pair" >"$D/llama.log" 2>&1 &&
    node "$HERE/pair_table.mjs" "$D" pair pair_f16_f16 >"$D/pair_table.txt"; } ) &
  LPID=$!
  for i in "${!TYPES[@]}"; do
    o=$D/hq_bits${BITS[$i]}.json
    [ -s "$o" ] || timeout "$TLIMIT" "$HQEKV" ppl -m "$M" --kl-divergence "$D/base.kld" -t "$THREADS" --json \
      --kv "hqekv:bits=${BITS[$i]}" >"$o" 2>"${o%.json}.log"
  done
  wait $LPID
  # Drop the logits dumps (vocabulary x positions x 4 bytes each), keep the metadata.
  rm -f "$D"/pair_*.f32
done
node - "$OUT" "${TYPES[*]}" "${BITS[*]}" <<'JS'
const fs = require("fs"), path = require("path");
const [out, types, bits] = process.argv.slice(2);
const T = types.split(" "), B = bits.split(" ");
const rows = [];
for (const d of fs.readdirSync(out).sort()) {
  const p = path.join(out, d, "pair_table.json");
  if (!fs.existsSync(p)) continue;
  const lt = JSON.parse(fs.readFileSync(p, "utf8"));
  T.forEach((t, i) => {
    const l = lt.find((r) => r.ctk === t && r.ctv === t);
    const hf = path.join(out, d, `hq_bits${B[i]}.json`);
    if (!l || !fs.existsSync(hf)) return;
    const h = JSON.parse(fs.readFileSync(hf, "utf8"));
    const hk = h.statistics.kld.value;
    rows.push({window: d, type: t, bits: +B[i], llama_kl: l.kl, hqekv_kl: hk, hqekv_kv_end: h.kv_end.bits_per_original_element,
      ratio: hk / l.kl, rot_log: l.rot_log});
  });
}
fs.writeFileSync(path.join(out, "table.json"), JSON.stringify(rows, null, 1));
for (const r of rows) console.log(`${r.window}\t${r.type}\t${r.bits}\t${r.llama_kl.toExponential(3)}\t${r.hqekv_kl.toExponential(3)}\t${r.ratio.toFixed(2)}\t${r.hqekv_kv_end}`);
JS
