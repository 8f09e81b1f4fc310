#!/usr/bin/env bash
# `hqekv serve` as a llama-server / vLLM user meets it, with curl: a busy port
# refused, bodies without Content-Type, unsupported OpenAI parameters (400
# naming each), n / stop / seed / logit_bias / penalties / echo, token-array
# prompts, /completion (plain and streamed, stopping_word, llama-server's error
# shape), /tokenize, /detokenize, /props (POST: read-only 501),
# /apply-template, GET /slots, action=erase, CORS preflight, the request log,
# and 503 past the connection cap while /health still answers.
# Usage: llama_api.sh HQEKV_BINARY MODEL
set -euo pipefail
[ -n "${E2E_TRACE:-}" ] && set -x
HQEKV=$1
MODEL=$2
. "$(dirname "$0")/lib.sh"
# The interpreter itself, not a version-manager shim (~2 s a start on a busy
# machine, and this script starts it ~50 times).
PY=$(python3 -c 'import sys; print(sys.executable)')

req() { http_req "$@"; }
# json EXPR < "STATUS BODY": evaluates a Python expression over the body (d)
json() {
  "$PY" -c 'import json,sys
s=sys.stdin.read(); d=json.loads(s.split(" ",1)[1])
print(eval(sys.argv[1]))' "$1"
}
status() { echo "${1%% *}"; }
expect_status() {  # WANT OUT WHAT
  [ "$(status "$2")" = "$1" ] || fail "$3 -> ${2:0:400} (want $1)"
}
post() { req POST "$1" -H "Content-Type: application/json" -d "$2"; }

start_server "$HQEKV" -m "$MODEL" -np 2 --ctx 256 -t 1 --threads-http 3

# --- a busy port: a second server on it fails at once with a clear error
set +e
"$HQEKV" serve -m "$MODEL" --port "$PORT" -t 1 >/tmp/llama_api_second.$$ 2>&1 &
second=$!
for _ in $(seq 1 100); do kill -0 "$second" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$second" 2>/dev/null; then
  kill -KILL "$second"
  fail "a second server on busy port $PORT kept running: $(cat /tmp/llama_api_second.$$)"
fi
wait "$second"
rc=$?
set -e
[ "$rc" = 1 ] || fail "second server on a busy port exited $rc, want 1"
grep -q "cannot bind.*$PORT.*in use" /tmp/llama_api_second.$$ ||
  fail "busy-port message: $(cat /tmp/llama_api_second.$$)"
rm -f /tmp/llama_api_second.$$
echo "ok busy port refused (exit 1)"

# --- Content-Type: a 9 KB body without one (curl -d: form-urlencoded) is
# read as JSON, not refused with 413; multipart is 415
pad=$(head -c 9000 /dev/zero | tr '\0' 'a')
out=$(req POST /v1/completions -d "{\"prompt\":\"Once\",\"max_tokens\":2,\"temperature\":0,\"user\":\"$pad\"}")
expect_status 200 "$out" "9 KB body without Content-Type"
out=$(req POST /v1/completions -H "Content-Type: text/plain" -d '{"prompt":"Once","max_tokens":2}')
expect_status 200 "$out" "text/plain body"
out=$(req POST /v1/completions -F "prompt=Once")
expect_status 415 "$out" "multipart body"
echo "ok Content-Type: none/text -> JSON, multipart -> 415"

# --- unsupported parameters: 400 naming each; neutral values accepted
for p in '"tools":[{"type":"function","function":{"name":"f"}}]' '"tool_choice":"auto"' \
  '"response_format":{"type":"json_object"}' '"grammar":"root ::= \"a\""' '"suffix":"end"' \
  '"json_schema":{"type":"object"}' '"functions":[{"name":"f"}]' '"mirostat":2' \
  '"best_of":3' '"logprobs":2,"echo":true'; do
  name=$(echo "$p" | sed 's/^"\([a-z_]*\)".*/\1/')
  [ "$name" = logprobs ] && name=echo
  out=$(post /v1/completions "{\"prompt\":\"x\",$p}")
  expect_status 400 "$out" "$p"
  [ "$(echo "$out" | json 'd["error"]["param"]')" = "$name" ] || fail "$p: param: $out"
  echo "$out" | json 'd["error"]["message"]' | grep >/dev/null "not supported" || fail "$p: message: $out"
done
out=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}')
expect_status 400 "$out" "chat tools"
out=$(post /v1/completions '{"prompt":"x","max_tokens":1,"tools":[],"response_format":{"type":"text"},"suffix":"","grammar":null}')
expect_status 200 "$out" "neutral values of unsupported parameters"
echo "ok unsupported parameters: 400 naming each"

# --- n: n choices, each its own sequence (seed + index); usage sums them
out=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":1,"seed":5,"n":3}')
expect_status 200 "$out" "n=3"
[ "$(echo "$out" | json 'sorted(c["index"] for c in d["choices"])')" = "[0, 1, 2]" ] || fail "n=3 indexes: $out"
[ "$(echo "$out" | json 'd["usage"]["completion_tokens"]')" = 18 ] || fail "n=3 usage: $out"
[ "$(echo "$out" | json 'len(set(c["text"] for c in d["choices"]))')" -ge 2 ] ||
  fail "n=3 at temperature 1 gave one text thrice: $out"
out=$(post /v1/completions '{"prompt":"Once","max_tokens":2,"n":2,"id_slot":0}')
expect_status 400 "$out" "n with id_slot"
echo "ok n"

# --- seed: same seed, same text; another seed, another text (temperature 1)
S='"prompt":"Once upon a time","max_tokens":16,"temperature":1'
a=$(post /v1/completions "{$S,\"seed\":11}" | json 'd["choices"][0]["text"]')
b=$(post /v1/completions "{$S,\"seed\":11}" | json 'd["choices"][0]["text"]')
c=$(post /v1/completions "{$S,\"seed\":12}" | json 'd["choices"][0]["text"]')
[ "$a" = "$b" ] || fail "seed 11 twice: '$a' vs '$b'"
[ "$a" != "$c" ] || fail "seeds 11 and 12 gave the same 16 tokens: '$a'"
echo "ok seed"

# --- stop: several strings, text ends before the first
out=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":80,"temperature":0,"stop":["zzz","."]}')
[ "$(echo "$out" | json 'd["choices"][0]["finish_reason"]')" = stop ] || fail "stop: $out"
[ "$(echo "$out" | json '"." in d["choices"][0]["text"]')" = False ] || fail "stop kept: $out"
echo "ok stop"

# --- logit_bias: ban the greedy first token (OpenAI form) / force a token
# (llama-server form); penalties change a greedy text that repeats
G='"prompt":"Once upon a time","max_tokens":1,"temperature":0'
tok=$(post /completion "{$G,\"return_tokens\":true}" | json 'd["tokens"][0]')
out=$(post /v1/completions "{$G,\"logit_bias\":{\"$tok\":-100},\"logprobs\":0}")
expect_status 200 "$out" "logit_bias ban"
t1=$(post /completion "{$G,\"return_tokens\":true,\"logit_bias\":{\"$tok\":-100}}" | json 'd["tokens"][0]')
[ "$t1" != "$tok" ] || fail "logit_bias -100 on $tok still chose it"
t2=$(post /completion "{$G,\"return_tokens\":true,\"logit_bias\":[[42,100]]}" | json 'd["tokens"][0]')
[ "$t2" = 42 ] || fail "logit_bias +100 on 42 chose $t2"
t3=$(post /completion "{$G,\"return_tokens\":true,\"logit_bias\":[[$tok,false]]}" | json 'd["tokens"][0]')
[ "$t3" != "$tok" ] || fail "logit_bias false on $tok still chose it"
expect_status 400 "$(post /v1/completions '{"prompt":"x","logit_bias":{"abc":1}}')" "logit_bias key"
expect_status 400 "$(post /v1/completions '{"prompt":"x","logit_bias":{"1":500}}')" "logit_bias range"
expect_status 400 "$(post /v1/completions '{"prompt":"x","logit_bias":{"99999999":1}}')" "logit_bias id"
R='"prompt":"Once upon a time","max_tokens":48,"temperature":0'
plain=$(post /completion "{$R,\"return_tokens\":true}" | json 'd["tokens"]')
freq=$(post /completion "{$R,\"return_tokens\":true,\"frequency_penalty\":2}" | json 'd["tokens"]')
pres=$(post /completion "{$R,\"return_tokens\":true,\"presence_penalty\":2}" | json 'd["tokens"]')
[ "$plain" != "$freq" ] || fail "frequency_penalty 2 changed nothing: $plain"
[ "$plain" != "$pres" ] || fail "presence_penalty 2 changed nothing: $plain"
distinct() { "$PY" -c "import sys,ast; print(len(set(ast.literal_eval(sys.argv[1]))))" "$1"; }
[ "$(distinct "$freq")" -ge "$(distinct "$plain")" ] || fail "frequency_penalty repeated more"
expect_status 400 "$(post /v1/completions '{"prompt":"x","presence_penalty":3}')" "presence range"
echo "ok logit_bias, penalties ($(distinct "$plain") -> $(distinct "$freq") distinct tokens of 48)"

# --- echo: the prompt before the completion
out=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true}')
echo "$out" | json 'd["choices"][0]["text"]' | grep >/dev/null '^Once upon a time' || fail "echo: $out"
echo "ok echo"

# --- token-array prompts: the same answer as the text they encode
ids=$(post /tokenize '{"content":"Once upon a time","add_special":true}' | json 'd["tokens"]')
[ "$(echo "$ids" | "$PY" -c 'import sys,ast; print(len(ast.literal_eval(sys.stdin.read())))')" -ge 4 ] ||
  fail "tokenize: $ids"
t_text=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}' | json 'd["choices"][0]["text"]')
t_ids=$(post /v1/completions "{\"prompt\":$ids,\"max_tokens\":8,\"temperature\":0}" | json 'd["choices"][0]["text"]')
t_ids2=$(post /v1/completions "{\"prompt\":[$ids],\"max_tokens\":8,\"temperature\":0}" | json 'd["choices"][0]["text"]')
[ "$t_text" = "$t_ids" ] && [ "$t_text" = "$t_ids2" ] || fail "token prompt '$t_ids' / '$t_ids2' vs text '$t_text'"
expect_status 400 "$(post /v1/completions '{"prompt":[1,2,99999999]}')" "token id out of range"
expect_status 400 "$(post /v1/completions '{"prompt":["a","b"]}')" "two prompts"
echo "ok token-array prompts"

# --- /tokenize with pieces, /detokenize round trip
out=$(post /tokenize '{"content":"Once upon a time","with_pieces":true}')
expect_status 200 "$out" "tokenize with_pieces"
echo "$out" | json '"".join(t["piece"] for t in d["tokens"])' | grep >/dev/null 'Once upon a time' ||
  fail "pieces: $out"
back=$(post /detokenize "{\"tokens\":$ids}" | json 'd["content"]')
echo "$back" | grep >/dev/null 'Once upon a time' || fail "detokenize: '$back'"
expect_status 400 "$(post /detokenize '{"tokens":[-1]}')" "detokenize bad id"
expect_status 400 "$(post /tokenize '{"content":5}')" "tokenize bad content"
echo "ok tokenize / detokenize"

# --- /completion: llama-server's native form, plain and streamed
out=$(post /completion '{"prompt":"Once upon a time","n_predict":6,"temperature":0}')
expect_status 200 "$out" "/completion"
[ "$(echo "$out" | json 'd["stop"] and d["tokens_predicted"] == 6 and d["stop_type"] == "limit" and d["timings"]["predicted_n"] == 6')" = True ] ||
  fail "/completion fields: $out"
plain_text=$(echo "$out" | json 'd["content"]')
sse=$(curl -sN "$BASE/completion" -d '{"prompt":"Once upon a time","n_predict":6,"temperature":0,"stream":true}')
streamed=$(echo "$sse" | "$PY" -c 'import sys,json
t=""; last=None
for l in sys.stdin:
    if l.startswith("data: "):
        last=json.loads(l[6:]); t+=last["content"]
assert last["stop"] is True, last
print(t)')
[ "$streamed" = "$plain_text" ] || fail "/completion stream '$streamed' vs '$plain_text'"
echo "$sse" | grep >/dev/null 'DONE' && fail "/completion stream sent [DONE] (llama-server does not)"
[ "$(echo "$out" | json 'd["stopping_word"] == ""')" = True ] || fail "/completion stopping_word at a limit: $out"
# A stop string ends it: stopping_word names that string (the earliest in the text).
out=$(post /completion '{"prompt":"Once upon a time","n_predict":80,"temperature":0,"stop":["zzz","."]}')
[ "$(echo "$out" | json 'd["stop_type"] == "word" and d["stopping_word"] == "." and "." not in d["content"]')" = True ] ||
  fail "/completion stopping_word: $out"
# Errors in llama-server's shape: {"error": {"code": 400, "message", "type"}}.
out=$(post /completion '{"prompt":"x","n_predict":"many"}')
expect_status 400 "$out" "/completion bad n_predict"
[ "$(echo "$out" | json 'd["error"]["code"] == 400 and d["error"]["type"] == "invalid_request_error" and "n_predict" in d["error"]["message"] and "param" not in d["error"]')" = True ] ||
  fail "/completion error shape: $out"
echo "ok /completion plain + stream, stopping_word, error shape"

# --- /props, /apply-template
out=$(req GET /props)
[ "$(echo "$out" | json 'd["total_slots"] == 2 and d["default_generation_settings"]["n_ctx"] == 256')" = True ] ||
  fail "props: $out"
out=$(post /apply-template '{"messages":[{"role":"user","content":"Hi there"}]}')
echo "$out" | json 'd["prompt"]' | grep >/dev/null 'Hi there' || fail "apply-template: $out"
# POST /props: read-only, llama-server's 501 for a server without --props.
out=$(post /props '{"default_generation_settings":{"n_ctx":8}}')
expect_status 501 "$out" "POST /props"
[ "$(echo "$out" | json 'd["error"]["code"] == 501 and d["error"]["type"] == "not_supported_error" and "read-only" in d["error"]["message"]')" = True ] ||
  fail "POST /props: $out"
[ "$(req GET /props | json 'd["default_generation_settings"]["n_ctx"]')" = 256 ] || fail "POST /props changed n_ctx"
echo "ok /props (GET; POST read-only), /apply-template"

# --- GET /slots, action=erase
post /v1/completions '{"prompt":"Once upon a time","max_tokens":2,"temperature":0,"id_slot":1}' >/dev/null
out=$(req GET /slots)
[ "$(echo "$out" | json 'len(d) == 2 and d[1]["n_cached"] > 0 and d[1]["kv_bytes"] > 0')" = True ] ||
  fail "slots: $out"
out=$(req POST "/slots/1?action=erase")
expect_status 200 "$out" "erase"
[ "$(echo "$out" | json 'd["n_erased"] > 0')" = True ] || fail "erase: $out"
[ "$(req GET /slots | json 'd[1]["n_cached"] == 0 and d[1]["kv_bytes"] == 0')" = True ] ||
  fail "slot 1 not empty after erase"
expect_status 404 "$(req POST "/slots/9?action=erase")" "erase unknown slot"
echo "ok GET /slots, erase"

# --- /v1/embeddings: unit vectors of n_embd, one per input, in order; a
# repeated input gives the same vector; the llama-server spellings answer too
out=$(post /v1/embeddings '{"input":["Once upon a time","The cat sat","Once upon a time"]}')
expect_status 200 "$out" "embeddings"
echo "$out" | "$PY" -c '
import json, math, sys
d = json.loads(sys.stdin.read().split(" ", 1)[1])
v = [x["embedding"] for x in sorted(d["data"], key=lambda x: x["index"])]
assert d["object"] == "list" and len(v) == 3 and d["usage"]["prompt_tokens"] > 3, d["usage"]
assert all(len(e) == len(v[0]) > 0 for e in v)
assert all(abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-4 for e in v)
assert max(abs(a - b) for a, b in zip(v[0], v[2])) < 1e-6
assert max(abs(a - b) for a, b in zip(v[0], v[1])) > 1e-3
' || fail "embeddings: $out"
for p in /embeddings /embedding; do
  expect_status 200 "$(post $p '{"input":[1,2,3],"kv":"kivi:nominal_bits=2"}')" "$p with token ids"
done
expect_status 400 "$(post /v1/embeddings '{"input":"x","encoding_format":"base64"}')" "base64 embeddings"
expect_status 400 "$(post /v1/embeddings '{"input":[]}')" "empty embedding input"
expect_status 400 "$(post /v1/embeddings '{"input":"x","kv":"kivi:bitz=2"}')" "embedding kv spec"
echo "ok /v1/embeddings"
# --- routes of llama-server / OpenAI not implemented: 501, not 404
out=$(post /infill '{"input_prefix":"x"}')
expect_status 501 "$out" "infill"
echo "$out" | json 'd["error"]["message"]' | grep "not implemented" >/dev/null || fail "501 message: $out"
echo "ok /infill 501"

# --- CORS
hdr=$(curl -s -D - -o /dev/null -X OPTIONS "$BASE/v1/chat/completions" \
  -H "Origin: http://example.com" -H "Access-Control-Request-Method: POST")
echo "$hdr" | grep -qi '^HTTP/1.1 204' || fail "OPTIONS: $hdr"
echo "$hdr" | grep -qi '^Access-Control-Allow-Origin: \*' || fail "preflight origin: $hdr"
echo "$hdr" | grep -qi '^Access-Control-Allow-Headers:.*Authorization' || fail "preflight headers: $hdr"
curl -s -D - -o /dev/null "$BASE/health" | grep -qi '^Access-Control-Allow-Origin: \*' ||
  fail "no CORS header on GET"
echo "ok CORS"

# --- the request log: one JSON line per request with the fields
sleep 0.2
"$PY" - "$SERVER_LOG" <<'EOF' || fail "request log"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"')]
reqs = [l for l in lines if l.get("event") == "request"]
assert len(reqs) >= 40, len(reqs)
for l in reqs:
    assert {"method", "path", "status", "time"} <= set(l), l
done = [l for l in reqs if l["path"] == "/completion" and l["status"] == 200]
assert done and all(l["completion_tokens"] >= 1 and l["prompt_tokens"] >= 1 and l["ms"] >= 0
                    for l in done), done[:3]
assert any(l["status"] == 415 for l in reqs)
print("ok request log:", len(reqs), "lines, e.g.", json.dumps(done[0]))
EOF

# --- past the connection cap (--threads-http 3): 503 at once, /health still
# answered, the held connections time out, then normal service
exec 5<>/dev/tcp/127.0.0.1/"$PORT" 6<>/dev/tcp/127.0.0.1/"$PORT" 7<>/dev/tcp/127.0.0.1/"$PORT"
printf 'GET /health HTTP/1.1\r\n' >&5
printf 'GET /health HTTP/1.1\r\n' >&6
printf 'GET /health HTTP/1.1\r\n' >&7
sleep 0.3
t0=$(date +%s%N)
out=$(req GET /v1/models)
expect_status 503 "$out" "request past the connection cap"
out=$(req GET /health)
expect_status 200 "$out" "/health past the connection cap"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 2000 ] || fail "503 + /health took $ms ms"
exec 5>&- 6>&- 7>&-
for _ in $(seq 1 100); do
  [ "$(status "$(req GET /v1/models)")" = 200 ] && break
  sleep 0.1
done
expect_status 200 "$(req GET /v1/models)" "after the slow clients left"
echo "ok connection cap: 503 and /health in $ms ms beside 3 held connections"

stop_server
echo "llama_api: all passed"
