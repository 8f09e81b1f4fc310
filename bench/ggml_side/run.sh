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
for mode in ${MODES:-peak gemv gemm attn pattn}; do
  log "$mode"
  case $mode in
    peak) "$A" peak "$R" > "$OUT/peak.txt" ;;
    gemv) "$A" gemv "$R" > "$OUT/gemv.txt" ;;
    gemm) "$A" gemm 512 1 > "$OUT/gemm.txt" ;;
    attn) "$A" attn 32768 "$R" > "$OUT/attn_32768.txt" ;;
    pattn) "$A" pattn 4096 512 1 > "$OUT/pattn_4096.txt" ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
done
log done
python3 "$HERE/summarize.py" "$OUT"/*.txt | tee "$OUT/tables.md"
