#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) over the given files, or every src/ .cc file,
# with the compile commands of a configured (not built) per-file tree,
# build-tidy/ (a unity build lists its batch files instead). Not run by CI
# (slow on 2 cores); run it before sending a change that adds code.
#   bash scripts/tidy.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tidy -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=OFF >/dev/null
if (($#)); then files=("$@"); else mapfile -t files < <(git ls-files -- 'src/*.cc'); fi
clang-tidy -p build-tidy --quiet "${files[@]}"
