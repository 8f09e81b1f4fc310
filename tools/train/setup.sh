#!/usr/bin/env bash
# Installs the Python training stack from Debian 12 packages (no pip downloads).
# python3-torch 1.13 with the reference BLAS is ~10x slower than with OpenBLAS;
# installing libopenblas0-pthread makes the alternatives system select OpenBLAS.
set -euo pipefail
# Debian's python3-torch lives in /usr/bin/python3 (a pyenv python on PATH would not see it).
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
  python3-torch python3-numpy python3-sentencepiece sentencepiece libopenblas0-pthread
/usr/bin/python3 - <<'PY'
import torch, time
print("torch", torch.__version__)
torch.set_num_threads(2)
a = torch.randn(1024, 1024); b = torch.randn(1024, 1024)
t = time.time()
for _ in range(10): a @ b
dt = time.time() - t
print(f"matmul 1024^3 x10: {dt:.2f}s ({20*1024**3/dt/1e9:.1f} GFLOP/s; reference BLAS gives ~1-3, OpenBLAS ~20+)")
PY
