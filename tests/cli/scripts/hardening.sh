#!/usr/bin/env bash
# CLI hardening cases of issue 19 (tests/cli/hardening.cmake runs one per
# test): special files as inputs must be refused at once (a FIFO must not
# block, /dev/zero must not be read without end), output that cannot be
# written must give a nonzero exit and keep what was there, and numbers that
# would start unbounded work must be refused before it starts.
#   hardening.sh HQEKV ROOT WORKDIR CASE
# Every command runs under `timeout`: a hang is exit 124, a failure here.
set -u
HQEKV=$1 ROOT=$2 WORK=$3 CASE=$4
MODEL=$ROOT/models/stories260K.gguf
TEXT=$ROOT/data/text/wiki.valid.raw
D=$WORK/$CASE
rm -rf "$D" && mkdir -p "$D"
FIFO=$D/fifo
mkfifo "$FIFO"

fail() { echo "FAIL [$CASE]: $*" >&2; exit 1; }

# expect_error MESSAGE CMD...: exits nonzero within 20 s, stderr has MESSAGE.
expect_error() {
  local msg=$1; shift
  local rc=0
  timeout 20 "$@" >"$D/out" 2>"$D/err" </dev/null || rc=$?
  [ "$rc" -eq 124 ] && fail "hung (killed after 20 s): $*"
  [ "$rc" -eq 0 ] && fail "exit 0, expected an error: $*"
  grep -qF -- "$msg" "$D/err" || fail "stderr lacks '$msg': $(cat "$D/err")"
  echo "ok: exit $rc: $(head -c 300 "$D/err")"
}

# expect_full_stdout CMD...: stdout on /dev/full gives a nonzero exit.
expect_full_stdout() {
  local rc=0
  timeout 60 "$@" >/dev/full 2>"$D/err" </dev/null || rc=$?
  [ "$rc" -eq 124 ] && fail "hung: $*"
  [ "$rc" -eq 0 ] && fail "exit 0 with stdout on /dev/full: $*"
  grep -qF "cannot write standard output" "$D/err" || fail "stderr lacks the reason: $(cat "$D/err")"
  echo "ok: exit $rc: $(tail -c 200 "$D/err")"
}

# "${FULL_DISK[@]}" CMD... runs CMD with a 1 KiB file size limit (a full disk for any bigger file;
# SIGXFSZ ignored so writes fail with EFBIG instead of killing the process).
FULL_DISK=(bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' full_disk)

# no_temporaries DIR: no temporary file was left behind.
no_temporaries() { ! ls -a "$1" | grep -q '\.tmp\.' || fail "temporary files left in $1: $(ls -a "$1")"; }

case "$CASE" in
  # ---- class 1: special files as inputs ----
  fifo_model)        expect_error "is a FIFO, not a regular file" "$HQEKV" run -m "$FIFO" -n 1 ;;
  devzero_model)     expect_error "is a character device" "$HQEKV" inspect -m /dev/zero ;;
  fifo_tokenizer)    expect_error "is a FIFO" "$HQEKV" run -m "$ROOT/models/stories260K.bin" --tokenizer "$FIFO" -n 1 ;;
  fifo_profile)      expect_error "is a FIFO" "$HQEKV" run -n 1 -t 1 --kv "hqekv:profile=$FIFO" ;;
  devzero_profile)   expect_error "is a character device" "$HQEKV" run -n 1 -t 1 --kv "hqekv:profile=/dev/zero" ;;
  fifo_prompt)       expect_error "is a FIFO" "$HQEKV" run -f "$FIFO" -n 1 ;;
  fifo_ppl_text)     expect_error "is a FIFO" "$HQEKV" ppl -f "$FIFO" ;;
  devzero_ppl_text)  expect_error "is a character device" "$HQEKV" ppl -f /dev/zero ;;
  fifo_calib_text)   expect_error "is a FIFO" "$HQEKV" calibrate -f "$FIFO" --bits 3 -o "$D/p.json" ;;
  fifo_study_text)   expect_error "is a FIFO" "$HQEKV" study quant --from-model "$MODEL" -f "$FIFO" ;;
  fifo_results_json)
    mkdir -p "$D/ev" && mkfifo "$D/ev/results.json"
    expect_error "is a FIFO" "$HQEKV" eval --report-only -o "$D/ev" ;;
  dir_results_json)
    mkdir -p "$D/ev/results.json"
    expect_error "$D/ev/results.json' is a directory" "$HQEKV" eval --report-only -o "$D/ev" ;;

  # ---- class 3: lost output ----
  stdout_full_run)      expect_full_stdout "$HQEKV" run -n 50 -t 1 ;;
  stdout_full_ppl)      expect_full_stdout "$HQEKV" ppl -f "$TEXT" --max-tokens 100 --ctx 64 -t 1 ;;
  stdout_full_inspect)  expect_full_stdout "$HQEKV" inspect ;;
  stdout_full_policies) expect_full_stdout "$HQEKV" policies ;;
  stdout_full_help)     expect_full_stdout "$HQEKV" run --help ;;
  calibrate_full_disk)
    printf '{"old": "good profile"}\n' > "$D/existing.json"
    cp "$D/existing.json" "$D/expected.json"
    expect_error "existing.json" "${FULL_DISK[@]}" "$HQEKV" calibrate -m "$MODEL" -f "$TEXT" --bits 3 \
      --bits-mode nominal --trials 4 --tokens 512 --window 128 -t 1 -q --force -o "$D/existing.json"
    cmp -s "$D/existing.json" "$D/expected.json" || fail "the old profile was changed: $(head -c 200 "$D/existing.json")"
    no_temporaries "$D" ;;
  gen_synthetic_full_disk)
    printf 'old model\n' > "$D/old.gguf"
    expect_error "old.gguf" "${FULL_DISK[@]}" "$HQEKV" gen-synthetic --force -o "$D/old.gguf"
    [ "$(cat "$D/old.gguf")" = "old model" ] || fail "the old file was changed"
    no_temporaries "$D" ;;
  eval_report_full_disk)
    # Reports of an empty run (report.md and .html > 1 KiB), then a rewrite on a
    # "full disk": the old report.html must survive whole.
    mkdir -p "$D/ev" && printf '{"format": "hqekv-eval-results v1", "suite": "quick", "model": "m", "cells": []}\n' > "$D/ev/results.json"
    "$HQEKV" eval --report-only -o "$D/ev" >/dev/null || fail "eval --report-only failed"
    [ "$(stat -c %s "$D/ev/report.html")" -gt 1024 ] || fail "report.html too small for this test"
    cp "$D/ev/report.html" "$D/report.before"
    cp "$D/ev/report.md" "$D/report_md.before"
    expect_error "report" "${FULL_DISK[@]}" "$HQEKV" eval --report-only -o "$D/ev"
    cmp -s "$D/ev/report.html" "$D/report.before" || fail "report.html was changed by a failed write"
    cmp -s "$D/ev/report.md" "$D/report_md.before" || fail "report.md was changed by a failed write"
    no_temporaries "$D/ev" ;;
  calibrate_unwritable_output)
    start=$(date +%s)
    expect_error "cannot write '/proc/hqekv-x.json'" "$HQEKV" calibrate -m "$MODEL" -f "$TEXT" --bits 3 \
      --trials 200 -o /proc/hqekv-x.json
    [ $(( $(date +%s) - start )) -le 5 ] || fail "the output path was checked only after the search" ;;

  prompt_cache_unwritable)
    # Refused before the generation: nothing on stdout, and fast.
    start=$(date +%s)
    expect_error "--prompt-cache: cannot write '/proc/hqekv-x.kv'" "$HQEKV" run -m "$MODEL" \
      -p "Once upon a time" -n 2000 --ignore-eos -t 1 --prompt-cache /proc/hqekv-x.kv
    # stdout holds at most the echoed prompt, no generated token.
    [ "$(tr -d '\n' <"$D/out")" = "" ] || [ "$(tr -d '\n' <"$D/out")" = "Once upon a time" ] ||
      fail "the generation ran before the check: $(head -c 200 "$D/out")"
    [ $(( $(date +%s) - start )) -le 5 ] || fail "checked only after the generation" ;;
  chat_endless_line)
    # A 3 MiB line without end, then a real turn: the long one is dropped
    # with a message (memory stays bounded), the session goes on.
    { head -c 3145728 /dev/zero | tr '\0' 'a'; printf '\nHello\n'; } >"$D/in"
    rc=0
    timeout 60 "$HQEKV" chat -m "$MODEL" --chat-template chatml -n 4 -t 1 --temp 0 <"$D/in" >"$D/out" 2>"$D/err" || rc=$?
    [ "$rc" -eq 0 ] || fail "chat exited $rc: $(tail -c 300 "$D/err")"
    grep -q "longer than 1048576 bytes" "$D/err" || fail "no message for the long line: $(tail -c 300 "$D/err")"
    [ -s "$D/out" ] || fail "no answer to the turn after the long line" ;;
  chat_turn_past_ctx)
    # A turn longer than the context is refused; the next turn is answered.
    long=$(printf 'the cat sat on the mat %.0s' $(seq 1 100))
    printf '%s\nHello\n' "$long" >"$D/in"
    rc=0
    timeout 60 "$HQEKV" chat -m "$MODEL" --chat-template chatml -n 4 -t 1 --temp 0 --ctx 64 <"$D/in" >"$D/out" 2>"$D/err" || rc=$?
    [ "$rc" -eq 0 ] || fail "chat exited $rc after an over-long turn: $(tail -c 300 "$D/err")"
    grep -q "more than the context" "$D/err" || fail "no message: $(tail -c 300 "$D/err")"
    [ -s "$D/out" ] || fail "no answer to the turn after the over-long one" ;;

  snapkv_keep_context_shift)
    # keep=f at a context shift: the re-prefilled window (33 tokens of a
    # 64-token context) holds less than keep x window; the generation goes on
    # (before: "budget of 16 tokens ... smaller than the observation window").
    rc=0
    timeout 120 "$HQEKV" run -m "$MODEL" -t 1 --temp 0 -p "Once upon a time" -n 200 --ctx 64 \
      --kv snapkv:keep=0.5 >"$D/out" 2>"$D/err" || rc=$?
    [ "$rc" -eq 0 ] || fail "run exited $rc at a context shift: $(tail -c 300 "$D/err")"
    [ "$(wc -w <"$D/out")" -gt 60 ] || fail "too little text across the shift: $(cat "$D/out")" ;;

  # ---- class 4: unbounded work from a number ----
  threads_huge_run)   expect_error "-t 10000 is more than" "$HQEKV" run -n 1 -t 10000 ;;
  threads_huge_ppl)   expect_error "-t 10000 is more than" "$HQEKV" ppl -f "$TEXT" -t 10000 ;;
  threads_huge_eval)  expect_error "-t 10000 is more than" "$HQEKV" eval --suite quick -t 10000 -o "$D/ev" ;;
  threads_huge_calib) expect_error "-t 10000 is more than" "$HQEKV" calibrate --bits 3 -t 10000 -o "$D/p.json" ;;
  threads_negative)   expect_error "-t must be >= 0" "$HQEKV" run -n 1 -t -3 ;;
  # Past the trained context is a warning (as llama.cpp); past memory is an error before allocating.
  ctx_huge_ppl)       expect_error "--ctx 1000000000 needs" "$HQEKV" ppl -f "$TEXT" --ctx 1000000000 ;;
  ctx_huge_run)       expect_error "--ctx 1000000000 needs" "$HQEKV" run -n 1 --ctx 1000000000 ;;
  ctx_huge_eval)      expect_error "--ctx 1000000000 needs" "$HQEKV" eval --suite quick --ctx 1000000000 -o "$D/ev" ;;

  # ---- class 5: late or unclear validation (checked before any work) ----
  calib_bits_nan)     expect_error "--bits: 'nan' is not a finite number" "$HQEKV" calibrate --bits nan -o "$D/p.json" ;;
  calib_bits_zero)    expect_error "--bits: '0' is out of range (0, 64]" "$HQEKV" calibrate --bits 0 -o "$D/p.json" ;;
  calib_trials_zero)  expect_error "--trials: '0' is out of range [1, 1000000]" "$HQEKV" calibrate --bits 3 --trials 0 -o "$D/p.json" ;;
  calib_tokens_zero)  expect_error "--tokens: '0' is out of range [1, 2147483648]" "$HQEKV" calibrate --bits 3 --tokens 0 -o "$D/p.json" ;;

  # ---- class 6: accepted nonsense (one checked parser for every number, core/number.h) ----
  seed_negative)      expect_error "--seed: '-2' is out of range [0, 18446744073709551615]" "$HQEKV" run -n 1 --seed -2 ;;  # -1 = random, as llama.cpp
  seed_overflow)      expect_error "--seed: '99999999999999999999' is out of range" "$HQEKV" run -n 1 --seed 99999999999999999999 ;;
  threads_trailing)   expect_error "'4x' is not a decimal integer" "$HQEKV" run -n 1 -t 4x ;;
  ctx_hex_ppl)        expect_error "--ctx: '0x40' is not a decimal integer" "$HQEKV" ppl -f "$TEXT" --ctx 0x40 ;;
  temp_nan)           expect_error "--temp: 'nan' is not a finite number" "$HQEKV" run -n 1 --temp nan ;;
  top_p_zero)         expect_error "--top-p: '0' is out of range (0, 1]" "$HQEKV" run -n 1 --top-p 0 ;;
  n_predict_negative) expect_error "--n-predict: '-5' is out of range [0, 1073741824]" "$HQEKV" run -n -5 ;;
  spec_hex)           expect_error "'kivi': bits=0x2: not a number" "$HQEKV" run -n 1 --kv kivi:bits=0x2 ;;
  spec_inf)           expect_error "'hqekv': bits=inf: not a number" "$HQEKV" policies --check hqekv:bits=inf ;;
  eval_bits_inf)      expect_error "--bits: 'inf' is not a number of bits in (0, 32]" "$HQEKV" eval --suite quick --bits inf -o "$D/ev" ;;
  calib_seed_garbage) expect_error "--seed: '12abc' is not a decimal integer" "$HQEKV" calibrate --bits 3 --seed 12abc -o "$D/p.json" ;;
  study_vectors_hex)  expect_error "--vectors: '0x100' is not a decimal integer" "$HQEKV" study quant --vectors 0x100 ;;
  gen_layers_overflow) expect_error "--layers: '99999999999' is out of range" "$HQEKV" gen-synthetic -o "$D/x.gguf" --layers 99999999999 ;;

  # ---- signals and concurrent runs: no partial or temporary files ----
  sigterm_writer|sigint_writer)
    sig=TERM; [ "$CASE" = sigint_writer ] && sig=INT
    # A model big enough that the write takes a while (about 100 MB).
    # (env --default-signal: a non-interactive shell starts background jobs with SIGINT ignored.)
    env --default-signal=INT "$HQEKV" gen-synthetic -o "$D/big.gguf" --layers 12 --dim 768 --ff 2048 \
      --vocab 32000 2>"$D/err" &
    pid=$!
    seen=0
    for _ in $(seq 1 1000); do
      if ls -a "$D" | grep -q '\.tmp\.'; then seen=1; break; fi
      sleep 0.01
    done
    [ "$seen" = 1 ] || { kill -KILL $pid 2>/dev/null; fail "no temporary file seen while writing"; }
    kill -$sig $pid
    rc=0; wait $pid || rc=$?
    [ "$rc" -ne 0 ] || fail "exit 0 after SIG$sig"
    no_temporaries "$D"
    [ ! -e "$D/big.gguf" ] || fail "a partial big.gguf was installed"
    echo "ok: SIG$sig during the write: exit $rc, no temporary file, no output" ;;
  concurrent_writers)
    # Two processes write the same output at once, five times: the file is
    # always one complete version (byte-equal to a run alone), never a mix.
    common=(--layers 4 --dim 256 --ff 512 --vocab 4096)
    "$HQEKV" gen-synthetic -o "$D/ref1.gguf" "${common[@]}" --seed 1 || fail "ref1"
    "$HQEKV" gen-synthetic -o "$D/ref2.gguf" "${common[@]}" --seed 2 || fail "ref2"
    for round in 1 2 3 4 5; do
      "$HQEKV" gen-synthetic --force -o "$D/out.gguf" "${common[@]}" --seed 1 & a=$!
      "$HQEKV" gen-synthetic --force -o "$D/out.gguf" "${common[@]}" --seed 2 & b=$!
      wait $a || fail "writer 1 failed in round $round"
      wait $b || fail "writer 2 failed in round $round"
      cmp -s "$D/out.gguf" "$D/ref1.gguf" || cmp -s "$D/out.gguf" "$D/ref2.gguf" ||
        fail "round $round: out.gguf is neither complete version"
      no_temporaries "$D"
    done
    "$HQEKV" inspect -m "$D/out.gguf" >/dev/null || fail "the result does not load"
    echo "ok: 5 rounds of two concurrent writers, always one complete file" ;;
  *) fail "unknown case" ;;
esac
