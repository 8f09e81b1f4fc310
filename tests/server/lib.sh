# Shared by the server tests: start `hqekv serve` on a free port (the server
# picks it: --port 0) and stop it with SIGTERM, checking it exits 0.
#   start_server HQEKV ARGS...   sets PORT, SERVER_PID, BASE, SERVER_LOG
#   stop_server                  SIGTERM; fails unless the exit status is 0
#   http_req METHOD PATH [curl args...]   prints "STATUS BODY"
SERVER_LOG=""
start_server() {
  local bin=$1
  shift
  SERVER_LOG=$(mktemp)
  "$bin" serve --port 0 "$@" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  trap 'kill -KILL "$SERVER_PID" 2>/dev/null || true; rm -rf "${CLEANUP:-/nonexistent}"' EXIT
  for _ in $(seq 1 200); do
    PORT=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$SERVER_LOG" | sed 's/.*://' || true)
    [ -n "$PORT" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG"; echo "server died at start"; exit 1; }
    sleep 0.05
  done
  [ -n "$PORT" ] || { cat "$SERVER_LOG"; echo "server did not start"; exit 1; }
  BASE="http://127.0.0.1:$PORT"
}
stop_server() {
  kill -TERM "$SERVER_PID"
  local rc=0
  wait "$SERVER_PID" || rc=$?
  if [ "$rc" != 0 ]; then cat "$SERVER_LOG"; echo "server exited with $rc after SIGTERM"; exit 1; fi
  grep -q "stopped" "$SERVER_LOG" || { cat "$SERVER_LOG"; echo "no clean stop"; exit 1; }
}
fail() { echo "FAIL: $*"; [ -n "$SERVER_LOG" ] && tail -5 "$SERVER_LOG"; exit 1; }
http_req() {
  local method=$1 path=$2 body
  shift 2
  body=$(mktemp)
  curl -s -o "$body" -w '%{http_code}' -X "$method" "$BASE$path" "$@" || true
  echo -n " "
  cat "$body"
  rm -f "$body"
}
