#!/usr/bin/env bash
# pika (Python AMQP client, PyPI) against the broker that hack/interop/run.sh
# started (WARREN_AMQP_URL): blocking and select connections, see
# scenarios.py. Installs the pinned client (requirements.txt) into a venv
# cached under $INTEROP_CACHE/pika-<version>, then runs scenarios.py.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_AMQP_URL:?run me through hack/interop/run.sh}"
source ../lib.sh
VENV=$(install_venv pika)
"$VENV/bin/python" scenarios.py
fail_on_broker_errors pika
