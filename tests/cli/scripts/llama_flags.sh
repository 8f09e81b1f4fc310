#!/usr/bin/env bash
# llama.cpp habits on the command line (tests/cli/llama_flags.cmake runs one
# case per CTest test): llama.cpp's multi-letter flags, "did you mean", exit
# codes (0 ok, 1 runtime error, 2 usage error) and `--json` purity.
#   llama_flags.sh HQEKV SOURCE_ROOT CASE
set -uo pipefail
bin=$1 root=$2 case=$3
model=$root/models/stories260K.gguf
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
run() { "$bin" "$@" >"$out" 2>"$err"; rc=$?; }
fail() { echo "FAIL ($case): $*"; echo "--- stdout"; head -c 2000 "$out"; echo "--- stderr"; head -c 2000 "$err"; exit 1; }
expect_rc() { [[ $rc == "$1" ]] || fail "exit $rc, expected $1"; }
expect_err() { grep -qF -- "$1" "$err" || fail "stderr lacks: $1"; }
case $case in
  gpu_flags_warn)  # -ngl 99 -fa on: accepted, one warning each that names the flag; -ngl is not `-n gl`
    run run -m "$model" -t 1 -n 4 -p Once -ngl 99 -fa on -sm none --no-display-prompt
    expect_rc 0
    expect_err "warning: --n-gpu-layers/-ngl ignored (hqekv runs on the CPU)"
    expect_err "warning: --split-mode/-sm ignored"
    expect_err "generated 4 tok" ;;
  flash_attn_bad_value)
    run run -m "$model" -t 1 -n 1 -fa sometimes
    expect_rc 2 ;;
  system_prompt_and_conversation)  # -sys / -cnv are run's --system / --chat
    run run -m "$model" -t 1 -n 2 -p hi -cnv -sys "Be brief" --chat-template chatml
    expect_rc 0
    expect_err "generated 2 tok" ;;
  reverse_prompt_is_stop)  # -r TEXT stops as --stop does
    run run -m "$model" -t 1 -n 64 -p "Once upon a time" -r " " --no-display-prompt --temp 0
    expect_rc 0
    [[ $(wc -c <"$out") -le 40 ]] || fail "-r ' ' did not stop early"
    expect_err "generated" ;;
  no_display_prompt)
    run run -m "$model" -t 1 -n 2 -p "ZZQQ prompt text" --no-display-prompt
    expect_rc 0
    grep -q "ZZQQ" "$out" && fail "the prompt was printed" ;;
  json_only_json)  # stdout is one JSON object, nothing before it
    run run -m "$model" -t 1 -n 3 -p "Once upon" --json
    expect_rc 0
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["generated_tokens"]==3, j' "$out" \
      || fail "stdout is not one JSON object" ;;
  typo_flag_suggests)
    run run -m "$model" --tmep 0.5
    expect_rc 2
    expect_err "unknown flag --tmep; did you mean --temp?" ;;
  typo_command_suggests)
    run rn -m "$model"
    expect_rc 2
    expect_err "unknown command rn; did you mean run?" ;;
  typo_kv_suggests)  # a mistyped --kv key or policy name: the error names it and the close one
    run run -m "$model" -t 1 -n 1 -p Once --kv hqekv:bist=3.4
    expect_err "unknown key 'bist' (did you mean 'bits'?"
    [[ $rc == 1 || $rc == 2 ]] || fail "exit $rc"
    run run -m "$model" -t 1 -n 1 -p Once --kv kivy:nominal_bits=2
    expect_err "unknown KV policy 'kivy' in 'kivy:nominal_bits=2' (did you mean 'kivi'?"
    run run -m "$model" -t 1 -n 1 -p Once --kv zzzzzz
    grep -q "did you mean" "$err" && fail "a suggestion for a name close to nothing" ;;
  usage_error_exit_2)
    run run -m "$model" -n notanumber
    expect_rc 2 ;;
  runtime_error_exit_1)
    run run -m "$root/no/such/model.gguf" -n 1
    expect_rc 1
    expect_err "no/such/model.gguf" ;;
  bench_kv_columns)  # bench: KV bytes per row; default threads = all cores
    run bench -m "$model" -p 8 -n 2 -r 1 --kv fp16 --kv kivi:nominal_bits=2
    expect_rc 0
    grep -q "| kv MiB | kv bits/elem | threads |" "$out" || fail "no KV columns"
    cores=$(nproc)
    grep -q "| fp16 | [0-9.]* | [0-9.]* | $cores | pp8 |" "$out" || fail "threads default is not $cores" ;;
  uncompressed_headline)  # fp16 is not "larger than fp16"
    run run -m "$model" -t 1 -n 2 -p Once --kv fp16
    expect_rc 0
    grep -q "LARGER\|the bytes of fp16" "$err" && fail "fp16 reported against itself"
    expect_err "uncompressed" ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
echo "ok ($case)"
