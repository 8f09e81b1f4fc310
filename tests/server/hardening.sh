#!/usr/bin/env bash
# Hostile clients and flags against `hqekv serve` (loopback only, a few
# seconds): counts from flags refused before the server listens; Range
# ignored (a many-range /metrics repeated the body ~700x); header floods,
# a huge Content-Length and client-named profile paths refused with the
# right status while the server keeps serving; /health answers throughout.
# Usage: hardening.sh HQEKV_BINARY MODEL
set -euo pipefail
HQEKV=$1
MODEL=$2
. "$(dirname "$0")/lib.sh"

# --- counts from flags: refused before "listening", a nonzero exit, a message naming the flag
refused_flag() {
  local words=$1; shift
  local rc=0 out
  out=$(timeout 30 "$HQEKV" serve --port 0 -m "$MODEL" "$@" 2>&1) || rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "serve $* exited $rc (want an error): $out"
  echo "$out" | grep -qF -- "$words" || fail "serve $*: message lacks '$words': $out"
  ! echo "$out" | grep -q listening || fail "serve $* listened before refusing"
  echo "ok refused: serve $*"
}
refused_flag "--queue must be in [0, 1024]" --queue 100000
refused_flag "--max-tokens must be in [1," --max-tokens 0
refused_flag "--max-tokens must be in [1," --max-tokens -5
refused_flag "--max-body-mb must be in (0, 1024]" --max-body-mb 1e30
refused_flag "--kv-budget-mb" --kv-budget-mb nan
refused_flag "--kv-budget-mb must be in [0," --kv-budget-mb 1e30
refused_flag "-np must be in [1, 256]" -np 100000
refused_flag "--profile-dir" --profile-dir /nonexistent/dir

start_server "$HQEKV" -m "$MODEL" -np 2 --ctx 128 -t 1
status() { curl -s -o /dev/null -w '%{http_code}' "$@" || true; }
health_ok() { [ "$(status -m 5 "$BASE/health")" = 200 ] || fail "/health did not answer"; }
ok_completion() {
  local out
  out=$(curl -s -m 30 "$BASE/v1/completions" -H "Content-Type: application/json" \
    -d '{"prompt":"Once","max_tokens":3,"temperature":0}')
  echo "$out" | grep -q '"completion_tokens":3' || fail "follow-up request: $out"
}

# --- Range: ignored (the whole body once, 200), never amplified
ranges="bytes=0-"
for _ in $(seq 1 50); do ranges="$ranges,0-"; done
plain=$(curl -s "$BASE/metrics" | wc -c)
got=$(status -H "Range: $ranges" "$BASE/metrics")
[ "$got" = 200 ] || fail "multi-range /metrics -> $got (want 200, Range ignored)"
bytes=$(curl -s -H "Range: $ranges" "$BASE/metrics" | wc -c)
[ "$bytes" -le $(( plain * 2 )) ] || fail "a Range request got $bytes bytes (plain: $plain)"
echo "ok range ignored ($bytes bytes, plain $plain)"

# --- header flood: more than 100 fields -> 431, the server keeps serving
hdrs=()
for i in $(seq 1 150); do hdrs+=(-H "X-Flood-$i: $i"); done
got=$(status "${hdrs[@]}" "$BASE/v1/models")
[ "$got" = 431 ] || fail "150 headers -> $got (want 431)"
health_ok
echo "ok header flood refused"

# --- a Content-Length far past --max-body-mb: 413 without reading it
got=$(curl -s -o /dev/null -w '%{http_code}' -m 10 -X POST "$BASE/v1/completions" \
  -H "Content-Type: application/json" -H "Content-Length: 1000000000000" --data-binary '{}' || true)
[ "$got" = 413 ] || fail "huge Content-Length -> $got (want 413)"
health_ok
echo "ok huge Content-Length refused"

# --- profile paths from a client: one 400 whatever the path is
for p in /etc/passwd /nonexistent /tmp; do
  out=$(curl -s -w ' %{http_code}' "$BASE/v1/completions" -H "Content-Type: application/json" \
    -d "{\"prompt\":\"x\",\"max_tokens\":2,\"kv\":\"hqekv:profile=$p\"}")
  [ "${out##* }" = 400 ] || fail "profile=$p -> $out"
  echo "$out" | grep -q "takes no profile=" || fail "profile=$p message: $out"
done
echo "ok profile paths refused"

# --- normal traffic while 20 idle connections sit open (bounded: 3 s)
pids=()
for _ in $(seq 1 20); do
  (exec 3<>/dev/tcp/127.0.0.1/"$PORT"; printf 'GET /health HTTP/1.1\r\n' >&3; sleep 3) &
  pids+=($!)
done
sleep 0.3
t0=$(date +%s%N)
health_ok
ok_completion
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
[ "$ms" -lt 2500 ] || fail "health + a completion took $ms ms beside 20 idle connections"
echo "ok normal traffic beside idle connections: $ms ms"
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
stop_server
echo "server hardening: all ok"
