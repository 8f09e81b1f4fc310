# Sourced by the npm-backed tests: npm_install NODE_DIR PACKAGE... installs
# the packages missing from NODE_DIR/node_modules, or exits 77 (CTest:
# skipped) with the reason when node/npm is missing or the registry cannot be
# reached.
npm_install() {
  local dir=$1
  shift
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIPPED: node or npm is not installed"
    exit 77
  fi
  local missing=() p
  for p in "$@"; do
    [ -d "$dir/node_modules/$p" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  mkdir -p "$dir"
  if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --silent "${missing[@]}" \
    >"$dir/npm.log" 2>&1; then
    echo "SKIPPED: npm could not install ${missing[*]} (offline?):"
    tail -3 "$dir/npm.log"
    exit 77
  fi
}
