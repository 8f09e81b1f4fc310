#!/usr/bin/env bash
# Configures and builds hqekv into build/ (Release). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
