#!/usr/bin/env bash
# pika (Python AMQP client, PyPI) against the broker that hack/interop/run.sh
# started (WARREN_AMQP_URL): blocking and select connections, see
# scenarios.py. Installs the pinned client (requirements.txt) into a venv
# cached under $INTEROP_CACHE/pika-<version>, then runs scenarios.py.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_AMQP_URL:?run me through hack/interop/run.sh}"
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
VERSION=$(sed -n 's/^pika==//p' requirements.txt)
VENV=$CACHE/pika-$VERSION
mkdir -p "$CACHE"
(
  flock 9
  if ! cmp -s requirements.txt "$VENV/.requirements"; then
    echo "pika: installing pika $VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.txt
    cp requirements.txt "$VENV/.requirements"
  fi
) 9>"$CACHE/.pika.lock"
"$VENV/bin/python" scenarios.py
if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
  echo "pika: FAIL the broker logged errors:" >&2
  grep 'level=ERROR' "$WARREN_LOG" | head -5 >&2
  exit 1
fi
