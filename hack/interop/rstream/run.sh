#!/usr/bin/env bash
# rstream (Python stream client, PyPI) against the broker that
# hack/interop/run.sh started (WARREN_STREAM_HOST/PORT). Installs the pinned
# client (requirements.txt) into a venv cached under
# $INTEROP_CACHE/rstream-<version>, then runs scenarios.py.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_STREAM_HOST:?run me through hack/interop/run.sh}" "${WARREN_STREAM_PORT:?}"
source ../lib.sh
VENV=$(install_venv rstream)
"$VENV/bin/python" scenarios.py
fail_on_broker_errors rstream
