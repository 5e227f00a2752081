#!/usr/bin/env bash
# rstream (Python stream client, PyPI) against the broker that
# hack/interop/run.sh started (WARREN_STREAM_HOST/PORT). Installs the pinned
# client (requirements.txt) into a venv cached under
# $INTEROP_CACHE/rstream-<version>, then runs scenarios.py.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_STREAM_HOST:?run me through hack/interop/run.sh}" "${WARREN_STREAM_PORT:?}"
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
VERSION=$(sed -n 's/^rstream==//p' requirements.txt)
VENV=$CACHE/rstream-$VERSION
mkdir -p "$CACHE"
(
  flock 9
  if ! cmp -s requirements.txt "$VENV/.requirements"; then
    echo "rstream: installing rstream $VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements.txt
    cp requirements.txt "$VENV/.requirements"
  fi
) 9>"$CACHE/.rstream.lock"
"$VENV/bin/python" scenarios.py
if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
  echo "rstream: FAIL the broker logged errors:" >&2
  grep 'level=ERROR' "$WARREN_LOG" | head -5 >&2
  exit 1
fi
