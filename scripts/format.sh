#!/usr/bin/env bash
# Formats the project's C++ with .clang-format (Debian's clang-format).
#   bash scripts/format.sh          rewrite every file in place
#   bash scripts/format.sh --check  list the files that differ; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null || { echo "format.sh: $CF not found (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- 'src/*.h' 'src/*.cc' 'tests/*.h' 'tests/*.cc' 'bench/*.h' \
  'bench/*.cc' 'fuzz/*.h' 'fuzz/*.cc' 'tools/*.h' 'tools/*.cc' 'include/*.h' 'python/*.cc' \
  'examples/*.c' 'tests/*.c' | grep -v 'unicode_tables\.h$' || true)
if [[ ${1:-} == --check ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$CF" --style=file "$f" | cmp -s - "$f"; then echo "format.sh: $f is not formatted" >&2; bad=1; fi
  done
  ((bad == 0)) && echo "format.sh: ${#files[@]} files formatted"
  exit $bad
fi
"$CF" --style=file -i "${files[@]}"
echo "format.sh: formatted ${#files[@]} files"
