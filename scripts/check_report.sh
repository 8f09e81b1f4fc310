#!/usr/bin/env bash
# Renders an hqekv eval report.html in headless Debian chromium and fails on
# JavaScript/console errors, on an empty render, or when the SVG plots are
# missing from the rendered DOM. Also checks that the file is self-contained
# (no script, no external stylesheet, image or font).
#
#   bash scripts/check_report.sh DIR|DIR/report.html [--screenshot OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/check_report.sh DIR|report.html [--screenshot OUT.png]}
shot=""
if [[ ${2:-} == --screenshot ]]; then shot=${3:?--screenshot needs a file}; fi
html=$target
[[ -d $target ]] && html=$target/report.html
[[ -f $html ]] || { echo "check_report: no such file: $html" >&2; exit 2; }
html=$(realpath "$html")

bash scripts/install-deps.sh chromium
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "check_report: chromium not found after install" >&2; exit 2; }

fail() { echo "check_report: FAIL: $*" >&2; exit 1; }

# Static: self-contained.
if grep -qi '<script' "$html"; then fail "report contains a <script> element"; fi
if grep -Eio '(src|href)="(https?:)?//[^"]*' "$html" | grep -q .; then fail "report references an external resource"; fi
if grep -Eio "@import|url\(['\"]?https?:" "$html" | grep -q .; then fail "report CSS loads an external resource"; fi
src_svgs=$(grep -o '<svg' "$html" | wc -l)
(( src_svgs >= 1 )) || fail "report has no <svg> plot"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-sync --no-first-run --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0
       --virtual-time-budget=5000)
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$html" >"$tmp/dom.html" 2>"$tmp/log.txt" \
  || { cat "$tmp/log.txt" >&2; fail "chromium exited with an error"; }

# Console messages of the page (chromium logs them as ...:CONSOLE(line)] "msg").
if grep -E 'CONSOLE|Uncaught|SyntaxError|TypeError|ReferenceError' "$tmp/log.txt" >"$tmp/js.txt"; then
  cat "$tmp/js.txt" >&2
  fail "JavaScript / console errors while rendering"
fi
dom_svgs=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
[[ $dom_svgs -eq $src_svgs ]] || fail "rendered DOM has $dom_svgs <svg> elements, the file has $src_svgs"
dom_polys=$(grep -Eo '<(polyline|circle)' "$tmp/dom.html" | wc -l)
(( dom_polys >= 1 )) || fail "no plotted series (polyline/circle) in the rendered DOM"
grep -q '<table' "$tmp/dom.html" || fail "no table in the rendered DOM"
grep -qi 'parsererror' "$tmp/dom.html" && fail "an SVG failed to parse"

if [[ -n $shot ]]; then
  timeout 120 "$browser" "${flags[@]}" --window-size=1400,3000 --screenshot="$(realpath -m "$shot")" "file://$html" \
    >/dev/null 2>"$tmp/shot.txt" || { cat "$tmp/shot.txt" >&2; fail "screenshot failed"; }
  [[ -s $shot ]] || fail "empty screenshot"
fi
echo "check_report: OK: $html renders in $("$browser" --version 2>/dev/null | head -1): $dom_svgs SVG plots," \
     "$dom_polys plotted marks, no console errors"
