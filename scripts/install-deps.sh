#!/usr/bin/env bash
# Installs the Debian 12 packages hqekv needs to build, test and benchmark.
# Only what is missing is installed; run as root (or with sudo available).
set -euo pipefail
PKGS=(build-essential cmake g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      libhwy-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev clang libclang-rt-14-dev
      python3 clang-format curl nodejs
      pybind11-dev python3-pybind11 python3-dev python3-numpy python3-pytest python3-venv python3-build
      libhiredis-dev redis-server haproxy)
# libhiredis-dev: --kv-store redis:// (optional: the build goes on without it);
# redis-server, haproxy: the multi-replica test (tests/scale_out; skipped without them).
PKGS+=("$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "hqekv: installing ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
