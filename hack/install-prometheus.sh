#!/usr/bin/env bash
# Installs Prometheus from Debian (the `prometheus` package) for the test that
# scrapes a broker with a real Prometheus (broker/mgmt TestPrometheusScrape),
# and prints the binary's path. Idempotent: an installed prometheus is used as
# is. Never leaves the packaged service running: the package's postinst is
# told not to start it (policy-rc.d), and systemd is not involved.
set -euo pipefail

if bin=$(command -v prometheus); then
	echo "$bin"
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	if sudo -n true 2>/dev/null; then
		exec sudo -n "$0" "$@"
	fi
	echo "install-prometheus: prometheus is not installed and this is not root; run: apt-get install prometheus" >&2
	exit 1
fi
# Keep invoke-rc.d from starting the packaged daemon (it would listen on :9090).
policy=/usr/sbin/policy-rc.d
made_policy=
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	made_policy=1
fi
cleanup() { if [[ -n $made_policy ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends prometheus >&2; then
	apt-get update >&2
	apt-get install -y --no-install-recommends prometheus >&2
fi
command -v prometheus
