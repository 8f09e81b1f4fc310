#!/usr/bin/env bash
# The output-path rule (docs/reliability.md, "Files"), checked for every CLI
# writer over every kind of existing target (tests/cli/output_paths.cmake runs
# one writer per test):
#   missing name      -> a regular file is created;
#   regular file      -> replaced (new content, still a regular file);
#   link -> regular   -> the link stays a link, its target gets the content;
#   dangling link     -> the link stays, its target is created;
#   character device  -> written through, still a device (mknod c 1 3: a
#                        /dev/null of our own, root only; else a link to /dev/null);
#   FIFO              -> a reader gets the bytes, still a FIFO.
#   output_paths.sh HQEKV ROOT WORKDIR WRITER
set -u
HQEKV=$1 ROOT=$2 WORK=$3 WRITER=$4
MODEL=$ROOT/models/stories260K.gguf
TEXT=$ROOT/data/text/wiki.valid.raw
D=$WORK/$WRITER
rm -rf "$D" && mkdir -p "$D"
fail() { echo "FAIL [$WRITER/$KIND]: $*" >&2; exit 1; }
KIND=setup

# Writers that take a directory write a fixed file name in it: the kinds
# below apply to that file.
case "$WRITER" in
  eval_report)
    mkdir -p "$D/dir"
    printf '{"format": "hqekv-eval-results v1", "suite": "quick", "model": "m", "cells": []}\n' \
      > "$D/dir/results.json" ;;
  pareto_report)
    timeout 120 "$HQEKV" study pareto -m "$MODEL" -f "$ROOT/data/text/tinystories_val_subset.txt" \
      --kv fp16 --prefill 32 --max-tokens 64 --ctx 64 -t 1 -o "$D/seed" >/dev/null 2>&1 ||
      fail "pareto seed run failed"
    mkdir -p "$D/dir" && cp "$D/seed/results.json" "$D/dir/results.json" ;;
esac

# write TARGET: runs the writer so that its output lands on TARGET.
write() {
  local t=$1
  case "$WRITER" in
    bench) "$HQEKV" bench -m "$MODEL" -t 1 -p 16 -n 4 --out "$t" ;;
    ppl_kld_base) "$HQEKV" ppl -m "$MODEL" -f "$TEXT" --ctx 64 --chunks 1 -t 1 --kl-divergence-base "$t" ;;
    calibrate) "$HQEKV" calibrate -m "$MODEL" -f "$TEXT" --bits 3 --bits-mode nominal --trials 4 \
                 --tokens 512 --window 128 -t 1 -q --force -o "$t" ;;
    gen_synthetic) "$HQEKV" gen-synthetic --force -o "$t" --layers 1 --dim 64 --heads 2 --kv-heads 2 \
                     --ff 128 --vocab 300 ;;
    prompt_cache) "$HQEKV" run -m "$MODEL" -p "Once upon a time" -n 2 -t 1 --prompt-cache "$t" ;;
    eval_report) "$HQEKV" eval --report-only -o "$D/dir" ;;
    pareto_report) "$HQEKV" study pareto --report-only -o "$D/dir" ;;
    *) echo "unknown writer $WRITER" >&2; exit 2 ;;
  esac
}

# The path each kind is set up at.
if [ "$WRITER" = eval_report ] || [ "$WRITER" = pareto_report ]; then
  T=$D/dir/report.md
else
  T=$D/out
fi
TDIR=$(dirname "$T")

run_writer() {
  local rc=0
  # The prompt cache is read back when it exists: a fresh file each time for
  # that writer, except the kinds that must exist beforehand.
  timeout 120 bash -c "$(declare -f write); $(declare -p HQEKV MODEL TEXT WRITER D ROOT); write '$T'" \
    >"$D/stdout" 2>"$D/stderr" </dev/null || rc=$?
  [ "$rc" -eq 124 ] && fail "hung"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(tail -c 400 "$D/stderr")"
}

clean() { rm -f "$T" "$TDIR/real" "$TDIR/made" "$TDIR/got"; }
no_temporaries() { ! ls -a "$TDIR" | grep -q '\.tmp\.' || fail "temporary files left: $(ls -a "$TDIR")"; }

KIND=missing; clean
run_writer
[ -f "$T" ] && [ ! -L "$T" ] && [ -s "$T" ] || fail "no regular file written"
no_temporaries

if [ "$WRITER" != prompt_cache ]; then  # an existing prompt cache is read, not replaced
  KIND=regular; clean
  printf 'old\n' > "$T"
  run_writer
  [ -f "$T" ] && [ ! -L "$T" ] || fail "not a regular file afterwards"
  [ "$(cat "$T")" != old ] || fail "content not replaced"
  no_temporaries

  KIND=link_to_regular; clean
  printf 'old\n' > "$TDIR/real" && ln -s real "$T"
  run_writer
  [ -L "$T" ] || fail "the link was replaced by a file"
  [ "$(cat "$TDIR/real")" != old ] || fail "the link's target was not written"
  no_temporaries
fi

KIND=dangling_link; clean
ln -s made "$T"
run_writer
[ -L "$T" ] || fail "the link was replaced by a file"
[ -s "$TDIR/made" ] || fail "the link's target was not created"
no_temporaries

if [ "$WRITER" != prompt_cache ]; then  # a device or FIFO cannot be read back as a cache
  KIND=char_device; clean
  if [ "$(id -u)" = 0 ] && mknod "$T" c 1 3 2>/dev/null; then
    run_writer
    [ -c "$T" ] || fail "the device node was replaced: $(ls -l "$T")"
  else
    ln -s /dev/null "$T"
    run_writer
    [ -L "$T" ] && [ -c /dev/null ] || fail "the link to /dev/null was replaced"
  fi
  no_temporaries

  KIND=fifo; clean
  mkfifo "$T"
  timeout 120 cat "$T" > "$D/got" & reader=$!
  run_writer
  wait $reader || fail "the reader failed"
  [ -p "$T" ] || fail "the FIFO was replaced: $(ls -l "$T")"
  [ -s "$D/got" ] || fail "the reader got no bytes"
  no_temporaries
fi
echo "ok: $WRITER: every kind of target"
