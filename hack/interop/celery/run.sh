#!/usr/bin/env bash
# Celery (PyPI; its AMQP transport is py-amqp through kombu) against the
# broker that hack/interop/run.sh started (WARREN_AMQP_URL): a worker process
# (prefork, four processes) with the rpc:// result backend, and a client
# running scenarios.py (round trips, a failure, tasks in parallel, a group, a
# chain; the rpc backend does not support chords). Installs the pinned
# packages (requirements.txt, every dependency pinned) into a venv cached
# under $INTEROP_CACHE/celery-<version>.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_AMQP_URL:?run me through hack/interop/run.sh}"
source ../lib.sh
VENV=$(install_venv celery)
LOG=$(mktemp "${TMPDIR:-/tmp}/celery-worker.XXXXXX")
"$VENV/bin/celery" -A tasks worker --loglevel=INFO --concurrency=4 --pool=prefork \
  --hostname "interop@%h" >"$LOG" 2>&1 &
WORKER=$!
stop_worker() {
  kill -TERM "$WORKER" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$WORKER" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$WORKER" 2>/dev/null || true
  wait "$WORKER" 2>/dev/null || true
}
trap 'stop_worker; rm -f "$LOG"' EXIT
if ! "$VENV/bin/python" scenarios.py; then
  echo "celery: FAIL; the worker's log ends:" >&2
  tail -40 "$LOG" >&2
  exit 1
fi
stop_worker
# Errors the worker logged, but the task that fails on purpose.
ERRORS=$(grep 'CRITICAL\|ERROR/\|Unrecoverable error\|Cannot connect' "$LOG" | grep -v 'Task tasks\.fail\[' || true)
if [ -n "$ERRORS" ]; then
  echo "celery: FAIL the worker logged errors:" >&2
  echo "$ERRORS" | head -20 >&2
  exit 1
fi
fail_on_broker_errors celery
