#!/usr/bin/env bash
# Installs what the fault harness (make test-faults, e2e/faults) runs from
# Debian when missing: ip and tc (iproute2) and iptables. Idempotent.
set -euo pipefail

missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v tc >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -ne 0 ]]; then
	if sudo -n true 2>/dev/null; then
		exec sudo -n "$0" "$@"
	fi
	echo "install-fault-tools: ${pkgs[*]} missing and this is not root; run: apt-get install ${pkgs[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; then
	apt-get update >&2
	apt-get install -y --no-install-recommends "${pkgs[@]}" >&2
fi
