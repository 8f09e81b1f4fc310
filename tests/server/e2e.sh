#!/usr/bin/env bash
# End-to-end test of `hqekv serve` with curl: raw endpoints, every kind of bad
# input (right status + OpenAI JSON error, and the server keeps serving),
# API key, slot save/restore, client disconnect mid-stream, SIGTERM.
# Usage: e2e.sh HQEKV_BINARY MODEL
set -euo pipefail
[ -n "${E2E_TRACE:-}" ] && set -x
HQEKV=$1
MODEL=$2
. "$(dirname "$0")/lib.sh"
SAVE=$(mktemp -d)
CLEANUP=$SAVE

# status METHOD PATH [curl args...]: prints "STATUS BODY"
req() {
  local method=$1 path=$2
  shift 2
  curl -s -o /tmp/e2e_body.$$ -w '%{http_code}' -X "$method" "$BASE$path" "$@" || true
  echo -n " "
  cat /tmp/e2e_body.$$ 2>/dev/null
  rm -f /tmp/e2e_body.$$
}
# expect STATUS PARAM_OR_EMPTY METHOD PATH [curl args]
expect_error() {
  local want=$1 param=$2
  shift 2
  local out
  out=$(req "$@")
  [ "${out%% *}" = "$want" ] || fail "$* -> ${out:0:300} (want $want)"
  echo "$out" | grep -q '"error":{' || fail "$* -> no OpenAI error object: $out"
  if [ -n "$param" ]; then
    echo "$out" | grep -q "\"param\":\"$param\"" || fail "$* -> param is not $param: $out"
  fi
  echo "ok $want $param"
}
ok_completion() {  # the server still serves
  local out
  out=$(req POST /v1/completions -d '{"prompt":"Once","max_tokens":3,"temperature":0}')
  [ "${out%% *}" = 200 ] || fail "follow-up request: $out"
  echo "$out" | grep -q '"completion_tokens":3' || fail "follow-up usage: $out"
}

start_server "$HQEKV" -m "$MODEL" -np 2 --ctx 256 --api-key sekret --slot-save-path "$SAVE" \
  --max-body-mb 0.01 -t 1
AUTH=(-H "Authorization: Bearer sekret")

# --- raw endpoints
out=$(req GET /health)
[ "$out" = '200 {"status":"ok"}' ] || fail "health: $out"
out=$(req GET /v1/models "${AUTH[@]}")
echo "$out" | grep -q '"object":"list"' || fail "models: $out"
out=$(req GET /metrics "${AUTH[@]}")
for m in requests_total prompt_tokens_total tokens_predicted_total predicted_tokens_seconds \
  kv_bytes_held kv_true_bits slots_busy queue_length; do
  echo "$out" | grep -q "^hqekv_$m " || fail "metrics lack hqekv_$m"
done

# --- API key
expect_error 401 "" GET /v1/models
expect_error 401 "" POST /v1/completions -H "Authorization: Bearer wrong" -d '{"prompt":"x"}'
AUTH_OK=("${AUTH[@]}" -H "Content-Type: application/json")
req() {
  local method=$1 path=$2
  shift 2
  curl -s -o /tmp/e2e_body.$$ -w '%{http_code}' -X "$method" "$BASE$path" "${AUTH_OK[@]}" "$@" || true
  echo -n " "
  cat /tmp/e2e_body.$$ 2>/dev/null
  rm -f /tmp/e2e_body.$$
}

# --- bad input: each a 400 naming the field (or 413 / 404), then a good request
expect_error 400 "" POST /v1/completions -d '{"prompt": "x",'
expect_error 400 "max_tokens" POST /v1/completions -d '{"prompt":"x","max_tokens":"many"}'
expect_error 400 "temperature" POST /v1/completions -d '{"prompt":"x","temperature":[1]}'
expect_error 400 "kv" POST /v1/completions -d '{"prompt":"x","kv":"hqekv:bits=banana"}'
expect_error 400 "kv" POST /v1/completions -d '{"prompt":"x","kv":"nosuch"}'
expect_error 400 "max_tokens" POST /v1/completions -d '{"prompt":"x","max_tokens":1000000000}'
long=$(printf 'Once upon a time %.0s' $(seq 1 200))
expect_error 400 "prompt" POST /v1/completions -d "{\"prompt\":\"$long\"}"
big=$(head -c 20000 /dev/zero | tr '\0' 'a')
expect_error 413 "" POST /v1/completions -d "{\"prompt\":\"$big\"}"
expect_error 400 "messages" POST /v1/chat/completions -d '{"messages":[{"role":"robot","content":"x"}]}'
expect_error 404 "" GET /v1/nothing
ok_completion

# --- per-request policy: usage reports its bytes and true bits
fp16=$(req POST /v1/completions -d '{"prompt":"Once upon a time","max_tokens":200,"temperature":0}')
kivi=$(req POST /v1/completions -d '{"prompt":"Once upon a time","max_tokens":200,"temperature":0,"kv":"kivi:nominal_bits=2"}')
b16=$(echo "$fp16" | grep -o '"kv_bytes":[0-9]*' | cut -d: -f2)
b2=$(echo "$kivi" | grep -o '"kv_bytes":[0-9]*' | cut -d: -f2)
[ -n "$b16" ] && [ -n "$b2" ] && [ "$b2" -lt "$b16" ] || fail "kivi bytes $b2 (kivi:nominal_bits=2) not below fp16 $b16"
echo "ok per-request kv: fp16 $b16 bytes, kivi:nominal_bits=2 $b2 bytes"

# --- logprobs
out=$(req POST /v1/completions -d '{"prompt":"Once","max_tokens":2,"temperature":0,"logprobs":3}')
echo "$out" | grep -q '"token_logprobs":\[' || fail "logprobs: $out"

# --- stop string: the text ends before it
out=$(req POST /v1/completions -d '{"prompt":"Once upon a time","max_tokens":60,"temperature":0,"stop":"."}')
echo "$out" | grep -q '"finish_reason":"stop"' || fail "stop: $out"
echo "$out" | grep -q '"text":"[^".]*"' || fail "stop text contains the stop: $out"

# --- slots: traversal refused; save, restore, answer from the restored state
expect_error 400 "filename" POST "/slots/0?action=save" -d '{"filename":"../evil"}'
expect_error 400 "filename" POST "/slots/0?action=save" -d '{"filename":"/etc/passwd"}'
expect_error 400 "filename" POST "/slots/0?action=restore" -d '{"filename":".."}'
expect_error 404 "" POST "/slots/7?action=save" -d '{"filename":"x"}'
expect_error 400 "action" POST "/slots/0?action=explode" -d '{"filename":"x"}'
[ -z "$(ls -A "$SAVE")" ] || fail "a refused save wrote a file"
P='{"prompt":"Once upon a time, there was a little dog","max_tokens":1,"temperature":0,"id_slot":0}'
req POST /v1/completions -d "$P" >/dev/null
out=$(req POST "/slots/0?action=save" -d '{"filename":"dog.kv"}')
[ "${out%% *}" = 200 ] || fail "save: $out"
echo "ok save: $out"
[ -s "$SAVE/dog.kv" ] || fail "no file"
ref=$(req POST /v1/completions -d '{"prompt":"Once upon a time, there was a little dog","max_tokens":12,"temperature":0,"id_slot":1}')
req POST /v1/completions -d '{"prompt":"something else entirely","max_tokens":2,"id_slot":0}' >/dev/null
out=$(req POST "/slots/0?action=restore" -d '{"filename":"dog.kv"}')
[ "${out%% *}" = 200 ] || fail "restore: $out"
echo "ok restore: $out"
# The restored slot answers the saved prompt from its state: no prefill
# (every prompt token cached) and the same greedy text as a fresh slot.
n_saved=$(echo "$out" | grep -o '"n_restored":[0-9]*' | cut -d: -f2)
got=$(req POST /v1/completions -d '{"prompt":"Once upon a time, there was a little dog","max_tokens":12,"temperature":0,"id_slot":0}')
echo "$got" | grep -q "\"cached_tokens\":$n_saved}" || fail "restored slot re-ran the prompt: $got"
echo "$got" | grep -q "\"prompt_tokens\":$n_saved," || fail "saved $n_saved tokens, prompt differs: $got"
t_ref=$(echo "$ref" | grep -o '"text":"[^"]*"')
t_got=$(echo "$got" | grep -o '"text":"[^"]*"')
[ -n "$t_ref" ] && [ "$t_ref" = "$t_got" ] || fail "restored answer '$t_got' differs from '$t_ref'"
echo "ok restored slot answers with $n_saved cached tokens: $t_got"
# --- compressed slot: compress once, ask many. The slot file holds the
# HqeKV cache as held (tiers, policy state); each restore answers with no
# prefill (the evaluated-prompt counter does not move) and the same text as a
# fresh slot of the same policy.
evaluated() { req GET /metrics | grep '^hqekv_prompt_tokens_evaluated_total ' | cut -d' ' -f2; }
for KV in hqekv:nominal_bits=2 h2o:keep=0.5; do
  PK="{\"prompt\":\"Once upon a time, there was a little dog who liked to run in the big green park with his friends\",\"temperature\":0,\"kv\":\"$KV\""
  req POST /v1/completions -d "$PK,\"max_tokens\":1,\"id_slot\":0}" >/dev/null
  out=$(req POST "/slots/0?action=save" -d '{"filename":"dog-c.kv"}')
  [ "${out%% *}" = 200 ] || fail "$KV save: $out"
  echo "ok $KV save: $out"
  ref=$(req POST /v1/completions -d "$PK,\"max_tokens\":12,\"id_slot\":1}")
  t_ref=$(echo "$ref" | grep -o '"text":"[^"]*"')
  for ask in 1 2; do
    req POST /v1/completions -d '{"prompt":"something else entirely","max_tokens":2,"id_slot":1}' >/dev/null
    out=$(req POST "/slots/1?action=restore" -d '{"filename":"dog-c.kv"}')
    [ "${out%% *}" = 200 ] || fail "$KV restore: $out"
    n_saved=$(echo "$out" | grep -o '"n_restored":[0-9]*' | cut -d: -f2)
    e0=$(evaluated)
    got=$(req POST /v1/completions -d "$PK,\"max_tokens\":12,\"id_slot\":1}")
    e1=$(evaluated)
    [ "$e0" = "$e1" ] || fail "$KV: the restored slot ran a prefill ($e0 -> $e1 tokens)"
    echo "$got" | grep -q "\"cached_tokens\":$n_saved}" || fail "$KV: restored slot re-ran the prompt: $got"
    t_got=$(echo "$got" | grep -o '"text":"[^"]*"')
    [ -n "$t_ref" ] && [ "$t_ref" = "$t_got" ] || fail "$KV: restored answer '$t_got' differs from '$t_ref'"
  done
  echo "ok $KV restored twice, no prefill ($n_saved cached tokens): $t_got"
done
printf 'garbage' >"$SAVE/bad.kv"
expect_error 400 "filename" POST "/slots/1?action=restore" -d '{"filename":"bad.kv"}'
expect_error 404 "filename" POST "/slots/1?action=restore" -d '{"filename":"missing.kv"}'
ok_completion

# --- disconnect mid-stream frees the slot; the server keeps serving
curl -sN -m 0.3 "$BASE/v1/completions" "${AUTH_OK[@]}" \
  -d '{"prompt":"Once","max_tokens":250,"temperature":0,"stream":true}' >/dev/null || true
curl -sN -m 0.3 "$BASE/v1/completions" "${AUTH_OK[@]}" \
  -d '{"prompt":"Once","max_tokens":250,"temperature":0,"stream":true}' >/dev/null || true
for _ in $(seq 1 100); do
  busy=$(req GET /metrics | grep '^hqekv_slots_busy ' | cut -d' ' -f2)
  [ "$busy" = 0 ] && break
  sleep 0.05
done
[ "$busy" = 0 ] || fail "slots still busy after the clients left: $busy"
ok_completion
echo "ok disconnect"

# --- streaming shape
out=$(curl -sN "$BASE/v1/chat/completions" "${AUTH_OK[@]}" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"stream":true}')
echo "$out" | head -1 | grep -q '^data: {.*"role":"assistant"' || fail "stream start: $out"
echo "$out" | grep -q '^data: \[DONE\]' || fail "stream end: $out"

stop_server
echo "e2e: all passed"
