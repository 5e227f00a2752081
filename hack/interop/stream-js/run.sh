#!/usr/bin/env bash
# rabbitmq-stream-js-client (the Node stream client, npm) against the broker
# that hack/interop/run.sh started (WARREN_STREAM_HOST/PORT). Installs the
# client pinned by package-lock.json with npm ci into
# $INTEROP_CACHE/stream-js-<version>, then runs scenarios.js.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_STREAM_HOST:?run me through hack/interop/run.sh}" "${WARREN_STREAM_PORT:?}"
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
VERSION=$(node -p 'require("./package.json").dependencies["rabbitmq-stream-js-client"]')
DIR=$CACHE/stream-js-$VERSION
mkdir -p "$CACHE"
(
  flock 9
  if ! cmp -s package-lock.json "$DIR/.package-lock.json"; then
    echo "stream-js: installing rabbitmq-stream-js-client $VERSION into $DIR"
    rm -rf "$DIR"
    mkdir -p "$DIR"
    cp package.json package-lock.json "$DIR/"
    (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error)
    cp package-lock.json "$DIR/.package-lock.json"
  fi
) 9>"$CACHE/.stream-js.lock"
NODE_PATH="$DIR/node_modules" node scenarios.js
if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
  echo "stream-js: FAIL the broker logged errors:" >&2
  grep 'level=ERROR' "$WARREN_LOG" | head -5 >&2
  exit 1
fi
