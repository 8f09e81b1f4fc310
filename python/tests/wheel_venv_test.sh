#!/usr/bin/env bash
# CTest python_wheel_venv: `pip install <source tree>` into a fresh venv
# (no system site-packages, no network: --no-index), then the acceptance
# one-liner, the installed `hqekv` program and the bundled data, from a
# folder outside the tree. The wheel is built from the build folder CTest
# already built (HQEKV_BUILD_DIR), so no second compile.
#   wheel_venv_test.sh SRC BUILD PYTHON WORK
set -euo pipefail
SRC=$1 BUILD=$2 PY=$3 WORK=$4
rm -rf "$WORK"
mkdir -p "$WORK"
if ! "$PY" -m venv "$WORK/venv" >"$WORK/venv.log" 2>&1; then
  echo "SKIP: $PY -m venv failed (Debian: apt-get install python3-venv):"; cat "$WORK/venv.log"
  exit 77
fi
export HQEKV_BUILD_DIR=$BUILD PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1
unset PYTHONPATH HQEKV_MODEL HQEKV_DATA_DIR HQEKV_SOURCE_DIR
"$WORK/venv/bin/pip" install -q "$SRC"
cd "$WORK"
out=$("$WORK/venv/bin/python" -c "import hqekv; print(hqekv.Model(hqekv.default_model()).generate('Once', max_tokens=8))")
model=$("$WORK/venv/bin/python" -c "import hqekv; print(hqekv.default_model())")
case $model in "$WORK"/venv/*) ;; *) echo "default_model() is $model, not inside the venv"; exit 1;; esac
# The same text as the CLI of the build tree (greedy), and from the installed script.
want=$("$BUILD/hqekv" run -m "$SRC/models/refmodel-4l.gguf" -p Once -n 8 --temp 0 2>/dev/null)
[[ "Once$out" == "$want" ]] || { echo "python printed [Once$out], hqekv run [$want]"; exit 1; }
got=$("$WORK/venv/bin/hqekv" run -m "$model" -p Once -n 8 --temp 0 2>/dev/null)
[[ "$got" == "$want" ]] || { echo "the installed hqekv printed [$got], want [$want]"; exit 1; }
# Type information ships with the package.
for f in py.typed _hqekv.pyi __init__.py; do
  [[ -f $("$WORK/venv/bin/python" -c "import hqekv, os; print(os.path.dirname(hqekv.__file__))")/$f ]] ||
    { echo "the installed package lacks $f"; exit 1; }
done
echo "venv install: generate('Once') = [$out]; default_model() = $model"
