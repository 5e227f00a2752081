#!/usr/bin/env bash
# amqplib (Node AMQP client, npm) against the broker that hack/interop/run.sh
# started (WARREN_AMQP_URL), see scenarios.js. Installs the client pinned by
# package-lock.json with npm ci into $INTEROP_CACHE/amqplib-<version>.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_AMQP_URL:?run me through hack/interop/run.sh}"
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
VERSION=$(node -p 'require("./package.json").dependencies.amqplib')
DIR=$CACHE/amqplib-$VERSION
mkdir -p "$CACHE"
(
  flock 9
  if ! cmp -s package-lock.json "$DIR/.package-lock.json"; then
    echo "amqplib: installing amqplib $VERSION into $DIR"
    rm -rf "$DIR"
    mkdir -p "$DIR"
    cp package.json package-lock.json "$DIR/"
    (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error)
    cp package-lock.json "$DIR/.package-lock.json"
  fi
) 9>"$CACHE/.amqplib.lock"
AMQPLIB_VERSION=$VERSION NODE_PATH="$DIR/node_modules" node scenarios.js
if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
  echo "amqplib: FAIL the broker logged errors:" >&2
  grep 'level=ERROR' "$WARREN_LOG" | head -5 >&2
  exit 1
fi
