#!/usr/bin/env bash
# Runs the side-by-side modes of the harness built by build.sh into $OUT (one text file per mode)
# and prints the markdown tables (summarize.py). ggml spins in OpenMP by default, which
# collapses on an oversubscribed 2-core machine: passive waiting is kinder to it.
# Env: ANCHORS (default ./anchors), OUT (default ./results-<UTC time>), ROUNDS (default 3),
#      MODES (default "peak gemv gemm attn pattn"), ANCHOR_TYPES (weight types, see anchors.cc).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
A=${ANCHORS:-$PWD/anchors}
OUT=${OUT:-$PWD/results-$(date -u +%Y%m%dT%H%M)}
R=${ROUNDS:-3}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"
log() { echo "[$(date -u +%T)] $* | $(uptime | sed 's/.*load/load/')" | tee -a "$OUT/log.txt"; }
# Each result file appears whole or not at all (written beside, then renamed).
for mode in ${MODES:-peak gemv gemm attn pattn}; do
  case $mode in
    peak) args=(peak "$R"); f=peak.txt ;;
    gemv) args=(gemv "$R"); f=gemv.txt ;;
    gemm) args=(gemm 512 1); f=gemm.txt ;;
    attn) args=(attn 32768 "$R"); f=attn_32768.txt ;;
    pattn) args=(pattn 4096 512 1); f=pattn_4096.txt ;;
    *) echo "run.sh: unknown mode '$mode' in MODES (peak gemv gemm attn pattn)" >&2; exit 2 ;;
  esac
  log "$mode"
  "$A" "${args[@]}" > "$OUT/$f.part"
  mv "$OUT/$f.part" "$OUT/$f"
done
log done
python3 "$HERE/summarize.py" "$OUT"/*.txt > "$OUT/tables.md.part"
mv "$OUT/tables.md.part" "$OUT/tables.md"
cat "$OUT/tables.md"
