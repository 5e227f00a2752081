#!/usr/bin/env bash
# hack/interop/run.sh: the interoperability suite. Builds warren once, then
# for each client directory hack/interop/<client>/ that has a run.sh (all of
# them, or those named as arguments) starts a fresh broker on free loopback
# ports with a temporary data directory, runs that run.sh against it, stops
# the broker and reports. Exits non-zero if any client failed.
#
# A client's run.sh gets the broker in the environment:
#   WARREN_AMQP_URL     amqp://guest:guest@127.0.0.1:<port>/
#   WARREN_AMQP_HOST, WARREN_AMQP_PORT
#   WARREN_STREAM_URL   rabbitmq-stream://guest:guest@127.0.0.1:<port>/%2f
#   WARREN_STREAM_HOST, WARREN_STREAM_PORT
#   WARREN_HTTP_URL     http://127.0.0.1:<port> (the HTTP API, guest/guest)
#   WARREN_PROMETHEUS_URL http://127.0.0.1:<port>
#   WARREN_BIN          the warren binary (for `warren ctl`)
#   WARREN_DATA_DIR, WARREN_LOG  the broker's data directory and log file
#   INTEROP_CACHE       where to cache client installs (~/.cache/warren/interop),
#                       one directory per <client>-<version>
# and runs with the client's directory as working directory. It installs its
# client (pinned, cached), runs its scenarios and exits non-zero naming what
# differed. An optional <client>/broker-args file adds serve flags, one per
# line (e.g. --set stream.heartbeat=5s).
#
# Usage: hack/interop/run.sh [client...]   (INTEROP_TIMEOUT: seconds per client, default 600)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export INTEROP_CACHE=${INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/warren/interop}
TIMEOUT=${INTEROP_TIMEOUT:-600}
mkdir -p "$INTEROP_CACHE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/warren-interop.XXXXXX")
BROKER_PID=""
cleanup() {
  stop_broker
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "interop: building warren"
if ! (cd "$ROOT" && go build -o "$WORK/warren" ./cmd/warren); then
  echo "interop: FAIL: warren does not build" >&2
  exit 1
fi
export WARREN_BIN="$WORK/warren"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_broker <client dir>: a fresh broker for one client; sets the WARREN_* variables.
start_broker() {
  local dir=$1 extra=()
  export WARREN_DATA_DIR="$WORK/data-$(basename "$dir")"
  export WARREN_LOG="$WORK/warren-$(basename "$dir").log"
  mkdir -p "$WARREN_DATA_DIR"
  local amqp stream http prom
  amqp=$(free_port) stream=$(free_port) http=$(free_port) prom=$(free_port)
  if [ -f "$dir/broker-args" ]; then
    mapfile -t extra < <(grep -v '^[[:space:]]*\(#\|$\)' "$dir/broker-args")
  fi
  "$WARREN_BIN" serve --data-dir "$WARREN_DATA_DIR" \
    --set amqp.listen=127.0.0.1:$amqp --set stream.listen=127.0.0.1:$stream \
    --set http.listen=127.0.0.1:$http --set prometheus.listen=127.0.0.1:$prom \
    --set cluster.listen=127.0.0.1:0 "${extra[@]}" >"$WARREN_LOG" 2>&1 &
  BROKER_PID=$!
  export WARREN_AMQP_HOST=127.0.0.1 WARREN_AMQP_PORT=$amqp
  export WARREN_AMQP_URL="amqp://guest:guest@127.0.0.1:$amqp/"
  export WARREN_STREAM_HOST=127.0.0.1 WARREN_STREAM_PORT=$stream
  export WARREN_STREAM_URL="rabbitmq-stream://guest:guest@127.0.0.1:$stream/%2f"
  export WARREN_HTTP_URL="http://127.0.0.1:$http"
  export WARREN_PROMETHEUS_URL="http://127.0.0.1:$prom"
  for _ in $(seq 1 300); do
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
      echo "interop: the broker exited at start:" >&2
      tail -20 "$WARREN_LOG" >&2
      BROKER_PID=""
      return 1
    fi
    if port_open "$amqp" && port_open "$stream" && port_open "$http" && port_open "$prom"; then
      return 0
    fi
    sleep 0.1
  done
  echo "interop: the broker did not listen within 30s:" >&2
  tail -20 "$WARREN_LOG" >&2
  return 1
}

stop_broker() {
  [ -n "$BROKER_PID" ] || return 0
  kill -TERM "$BROKER_PID" 2>/dev/null
  for _ in $(seq 1 100); do
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$BROKER_PID" 2>/dev/null
  wait "$BROKER_PID" 2>/dev/null
  BROKER_PID=""
}

clients=()
if [ $# -gt 0 ]; then
  for c in "$@"; do clients+=("$HERE/$c"); done
else
  for d in "$HERE"/*/; do [ -f "$d/run.sh" ] && clients+=("${d%/}"); done
fi

passed=() failed=()
for dir in "${clients[@]}"; do
  name=$(basename "$dir")
  if [ ! -f "$dir/run.sh" ]; then
    echo "interop: FAIL $name: no $dir/run.sh" >&2
    failed+=("$name")
    continue
  fi
  echo "interop: $name: starting a fresh broker"
  if ! start_broker "$dir"; then
    stop_broker
    failed+=("$name")
    continue
  fi
  start=$(date +%s)
  (cd "$dir" && timeout --kill-after=10 "$TIMEOUT" bash ./run.sh)
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 124 ]; then
    echo "interop: $name: timed out after ${TIMEOUT}s" >&2
  fi
  if ! kill -0 "$BROKER_PID" 2>/dev/null; then
    echo "interop: $name: the broker died during the run" >&2
    rc=1
  fi
  stop_broker
  if [ $rc -eq 0 ]; then
    echo "interop: ok   $name (${secs}s)"
    passed+=("$name")
  else
    echo "interop: FAIL $name (exit $rc, ${secs}s); the broker's log ends:" >&2
    tail -30 "$WARREN_LOG" >&2
    failed+=("$name")
  fi
done

echo "interop: passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
echo "interop: ${#passed[@]} passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
