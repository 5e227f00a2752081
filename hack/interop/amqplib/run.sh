#!/usr/bin/env bash
# amqplib (Node AMQP client, npm) against the broker that hack/interop/run.sh
# started (WARREN_AMQP_URL), see scenarios.js. Installs the client pinned by
# package-lock.json with npm ci into $INTEROP_CACHE/amqplib-<version>.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_AMQP_URL:?run me through hack/interop/run.sh}"
source ../lib.sh
DIR=$(install_npm amqplib amqplib)
AMQPLIB_VERSION=${DIR##*-} NODE_PATH="$DIR/node_modules" node scenarios.js
fail_on_broker_errors amqplib
