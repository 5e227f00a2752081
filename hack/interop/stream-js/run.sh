#!/usr/bin/env bash
# rabbitmq-stream-js-client (the Node stream client, npm) against the broker
# that hack/interop/run.sh started (WARREN_STREAM_HOST/PORT). Installs the
# client pinned by package-lock.json with npm ci into
# $INTEROP_CACHE/stream-js-<version>, then runs scenarios.js.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_STREAM_HOST:?run me through hack/interop/run.sh}" "${WARREN_STREAM_PORT:?}"
source ../lib.sh
DIR=$(install_npm stream-js rabbitmq-stream-js-client)
NODE_PATH="$DIR/node_modules" node scenarios.js
fail_on_broker_errors stream-js
