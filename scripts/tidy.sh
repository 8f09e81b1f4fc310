#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) over the given files, or every src/ .cc file,
# using build/compile_commands.json (configure the build first). Not run by
# CI (slow on 2 cores); run it before sending a change that adds code.
#   bash scripts/tidy.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/compile_commands.json ]] || { echo "tidy.sh: configure first: cmake -S . -B build" >&2; exit 2; }
if (($#)); then files=("$@"); else mapfile -t files < <(git ls-files -- 'src/*.cc'); fi
clang-tidy -p build --quiet "${files[@]}"
