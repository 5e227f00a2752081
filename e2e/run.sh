#!/usr/bin/env bash
# e2e/run.sh (make e2e): Warren's end-to-end suite on a real Kubernetes.
#
#   make e2e                          local single-node cluster (hack/local-cluster.sh;
#                                     root, Linux, about 1 GiB free; no Docker)
#   E2E_CLUSTER=kind make e2e         a kind cluster from e2e/kind.yaml (needs Docker and kind)
#   KUBECONFIG=... make e2e           the cluster of $KUBECONFIG, as it is (E2E_CLUSTER=existing);
#                                     the images must be there already: push them and set
#                                     IMAGE_REGISTRY and IMAGE_TAG
#
# Steps: bring the cluster up, build the images (make images: warren,
# warren-operator, warren-perf; plus the suite's warren-e2e-client) and load
# them, then `go test -tags e2e ./e2e/` (Helm install of the operator, the
# sample Broker, client Jobs; see e2e/doc.go), and tear the cluster down at the
# end, whatever happened (on a signal too). A local cluster that was already up
# before the run is used and left up (it is not ours to stop), as is a kind
# cluster of that name.
#
# Environment:
#   E2E_CLUSTER=local|kind|existing   default: existing when KUBECONFIG is set, else local
#   E2E_KEEP_CLUSTER=1                leave the cluster (and the suite's objects) up
#   E2E_TIMEOUT=45m                   go test -timeout
#   E2E_RUN=regexp                    go test -run
#   E2E_BROKER_IMAGE, E2E_READY_TIMEOUT (10m)   passed to the suite (e2e/doc.go)
#   E2E_KIND_NAME=warren-e2e          kind cluster name
#   IMAGE_REGISTRY=docker.io/warrenmq IMAGE_TAG=dev   image names (as make images)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
if [ -n "${E2E_CLUSTER:-}" ]; then
	MODE=$E2E_CLUSTER
elif [ -n "${KUBECONFIG:-}" ]; then
	MODE=existing
else
	MODE=local
fi
REGISTRY=${IMAGE_REGISTRY:-docker.io/warrenmq}
TAG=${IMAGE_TAG:-dev}
KIND_NAME=${E2E_KIND_NAME:-warren-e2e}
OUT=${IMAGES_OUT:-out/images}
T0=$(date +%s)
STARTED=

log() { printf '%s e2e: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
elapsed() { echo "$(($(date +%s) - T0))s"; }

# memory: what the machine and (on the local cluster) the pods use.
memory() {
	local used peak
	used=$(free -m | awk '/^Mem:/ { print $3 }')
	peak=
	for f in /sys/fs/cgroup/memory/kubepods/memory.max_usage_in_bytes /sys/fs/cgroup/kubepods/memory.peak; do
		[ -r "$f" ] && peak=$(($(cat "$f") / 1048576)) && break
	done
	log "memory: ${used} MiB used on the machine${peak:+, pods peaked at $peak MiB}"
}

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [ -n "$STARTED" ] && [ -z "${E2E_KEEP_CLUSTER:-}" ]; then
		case $MODE in
		local)
			memory
			hack/local-cluster.sh status >&2
			log "tearing down the local cluster"
			hack/local-cluster.sh down
			;;
		kind)
			log "deleting kind cluster $KIND_NAME"
			kind delete cluster --name "$KIND_NAME"
			rm -f "$KIND_KUBECONFIG"
			;;
		esac
	elif [ -n "$STARTED" ]; then
		log "E2E_KEEP_CLUSTER set: the cluster stays up (KUBECONFIG=$KUBECONFIG)"
	fi
	log "done in $(elapsed), exit $rc"
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- cluster
case $MODE in
local)
	[ "$(uname -s)" = Linux ] || die "the local cluster needs Linux (use E2E_CLUSTER=kind or KUBECONFIG)"
	[ "$(id -u)" = 0 ] || die "the local cluster needs root (it runs containerd and the kubelet); or use E2E_CLUSTER=kind or KUBECONFIG"
	if [ -e /run/warren-cluster/kube-apiserver.pid ]; then
		log "the local cluster is already up: using it, and leaving it up"
	else
		STARTED=1
	fi
	log "bringing up the local cluster (hack/local-cluster.sh up; built binaries cached in ~/.cache/warren)"
	hack/local-cluster.sh up
	KUBECONFIG=$(hack/local-cluster.sh kubeconfig)
	memory
	;;
kind)
	command -v kind >/dev/null || die "kind is not on PATH"
	KIND_KUBECONFIG=$(mktemp)
	KUBECONFIG=$KIND_KUBECONFIG
	if kind get clusters 2>/dev/null | grep -qx "$KIND_NAME"; then
		log "kind cluster $KIND_NAME exists: using it, and leaving it up"
		kind export kubeconfig --name "$KIND_NAME" --kubeconfig "$KUBECONFIG"
	else
		STARTED=1
		log "creating kind cluster $KIND_NAME (e2e/kind.yaml)"
		kind create cluster --name "$KIND_NAME" --config e2e/kind.yaml --kubeconfig "$KUBECONFIG" --wait 5m
	fi
	;;
existing)
	[ -n "${KUBECONFIG:-}" ] || die "E2E_CLUSTER=existing needs KUBECONFIG"
	log "using the cluster of KUBECONFIG=$KUBECONFIG; images $REGISTRY/*:$TAG must be pullable there"
	;;
*) die "E2E_CLUSTER=$MODE: want local, kind or existing" ;;
esac
export KUBECONFIG
log "cluster ready at $(elapsed)"

# ---- images
log "building images (make images, and the suite's client)"
IMAGE_REGISTRY=$REGISTRY IMAGE_TAG=$TAG IMAGES_OUT=$OUT hack/images.sh warren warren-operator warren-perf
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$OUT/bin/warren-e2e-client" ./e2e/cmd/warren-e2e-client
"$OUT/bin/imagebuild" -binary "$OUT/bin/warren-e2e-client" -path /usr/local/bin/warren-e2e-client -user 65532:65532 \
	-ref "$REGISTRY/warren-e2e-client:$TAG" -out "$OUT/warren-e2e-client.tar"
archives=("$OUT/warren.tar" "$OUT/warren-operator.tar" "$OUT/warren-perf.tar" "$OUT/warren-e2e-client.tar")
case $MODE in
local) for a in "${archives[@]}"; do hack/local-cluster.sh load "$a" >/dev/null; done ;;
kind) for a in "${archives[@]}"; do kind load image-archive "$a" --name "$KIND_NAME"; done ;;
esac
log "images built and loaded at $(elapsed)"

# ---- the suite
HELM=$(make -s --no-print-directory helm-path | tail -n 1)
log "running the suite (helm $HELM)"
args=(-tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-45m}")
[ -z "${E2E_RUN:-}" ] || args+=(-run "$E2E_RUN")
E2E_HELM=$HELM E2E_IMAGE_REGISTRY=$REGISTRY E2E_IMAGE_TAG=$TAG \
	E2E_KEEP=${E2E_KEEP_CLUSTER:-} go test "${args[@]}" ./e2e/
log "suite passed at $(elapsed)"
