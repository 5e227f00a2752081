#!/usr/bin/env bash
# hack/local-cluster.sh: a real single-node Kubernetes v1.37.1 on this machine,
# with no Docker and no registry: Debian packages and the Go module proxy only.
#
# Usage: hack/local-cluster.sh COMMAND
#   build               install containerd, runc, CNI plugins, iptables, conntrack
#                       (apt-get) and build kubelet and friends, CoreDNS and the
#                       pause image (cached; see hack/k8s-build.sh)
#   up                  build, then start the cluster; idempotent; returns when the
#                       node is Ready and cluster DNS answers
#   down                stop everything and remove what up created: processes,
#                       containers, mounts, network namespaces, the bridge,
#                       iptables rules, conntrack entries, cgroups, files;
#                       sysctls restored
#   status              what runs, the node and the pods
#   load IMAGE-ARCHIVE  import an image archive (make images) into the node's
#                       containerd (ctr -n k8s.io images import)
#   check               prove the running cluster works: in a scratch namespace, a
#                       non-root pod resolves kubernetes.default, writes to a volume
#                       of the default StorageClass and reaches another pod through
#                       its Service by DNS name; then the namespace is deleted
#   kubeconfig          print the admin kubeconfig's path
#
# Needs root on Linux (cgroup v1 or v2), about 1 GiB of memory. Components:
# etcd, kube-apiserver, kube-controller-manager (with the host-path
# provisioner behind the default StorageClass "standard"), kube-scheduler,
# kubelet, kube-proxy (iptables mode) run as host processes; containerd and
# runc from Debian with bridge + host-local + portmap CNI; CoreDNS and a
# pause image built from Go source and imported with ctr.
#
# Images for pods must be imported (load) and referenced by their fully
# qualified name with imagePullPolicy Never or IfNotPresent: nothing is pulled.
# Host-path volumes are created by the controller manager running as uid 65532
# (the non-root user of Warren's images), so those pods can write to them.
#
# Measured on this machine (2 cores, shared with other builds): build cold
# 15 min (kubelet and friends 9 min, CoreDNS 6 min; the envtest binaries were
# already built), warm 4 s; up 24-26 s; down 17-19 s; the cluster's processes
# use about 0.8 GiB (kube-apiserver 280 MiB, controller manager 120 MiB,
# kubelet 90 MiB, CoreDNS 60 MiB, ...).
#
# Environment:
#   WARREN_CLUSTER_DIR=/var/lib/warren-cluster   state, certificates, logs
#   WARREN_CACHE_DIR=$HOME/.cache/warren         built binaries and images
#   WARREN_CLUSTER_TIMEOUT=180                   seconds up waits for readiness
set -euo pipefail

HACK=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HACK/.." && pwd)
# shellcheck source=hack/k8s-build.sh
. "$HACK/k8s-build.sh"

DIR=${WARREN_CLUSTER_DIR:-/var/lib/warren-cluster}
RUN=/run/warren-cluster
TIMEOUT=${WARREN_CLUSTER_TIMEOUT:-180}
CACHE=$(k8s_cache_dir)
BIN=$CACHE/bin
IMAGES=$CACHE/images
PKI=$DIR/pki
LOGS=$DIR/logs
NODE=warren-node
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
POD_CIDR=10.244.0.0/16
POD_SUBNET=10.244.0.0/24
BRIDGE=warren0
ETCD_PORT=12379
ETCD_PEER_PORT=12380
API_PORT=6443
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
PAUSE_IMAGE=docker.io/warrenmq/pause:local
COREDNS_IMAGE=docker.io/warrenmq/coredns:$COREDNS_VERSION
NETCHECK_IMAGE=docker.io/warrenmq/netcheck:local
PV_UID=65532
HOSTPATH_PV_DIR=/tmp/hostpath_pv
CONTAINER_LOG_LINKS=/var/log/containers
# The kubelet, kube-proxy and our own setup change these; up records them, down restores them.
SYSCTLS="net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.netfilter.nf_conntrack_max
net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait"
COMPONENTS="etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet kube-proxy"

log() { printf '%s local-cluster: %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'local-cluster: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; }

need_root() {
	[ "$(id -u)" = 0 ] || die "$1 needs root (it runs containerd and the kubelet)"
	[ "$(uname -s)" = Linux ] || die "Linux only"
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$DIR/admin.kubeconfig" "$@"; }
ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

node_ip() {
	local ip
	ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
	[ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
	[ -n "$ip" ] || die "no global IPv4 address on this machine for the node"
	printf '%s' "$ip"
}

# ---------------------------------------------------------------- build

cmd_build() {
	local missing=() t0
	t0=$(date +%s)
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	command -v openssl >/dev/null || missing+=(openssl)
	command -v setpriv >/dev/null || missing+=(util-linux)
	command -v ip >/dev/null || missing+=(iproute2)
	if [ ${#missing[@]} -gt 0 ]; then
		need_root build
		log "apt-get install ${missing[*]}"
		apt-get update -qq >&2 || die "apt-get update failed"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
			die "apt-get install ${missing[*]} failed"
	fi
	k8s_build kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kubelet kube-proxy coredns >/dev/null
	build_images
	log "build done in $(($(date +%s) - t0))s (binaries in $BIN, images in $IMAGES)"
}

# build_images: the pause, CoreDNS and netcheck images as archives (rebuilt when missing).
build_images() {
	local work stamp
	mkdir -p "$IMAGES"
	# Rebuilt when their sources or the CoreDNS binary change.
	stamp=$(cat "$ROOT"/hack/pause/*.go "$ROOT"/hack/netcheck/*.go "$ROOT"/hack/imagebuild/*.go "$BIN/.ok" | sha256sum | cut -c1-16)
	if [ "$(cat "$IMAGES/.ok" 2>/dev/null)" = "$stamp" ]; then
		return
	fi
	rm -f "$IMAGES/.ok"
	log "building the pause, CoreDNS and netcheck images"
	work=$(mktemp -d)
	(cd "$ROOT" && go build -o "$work/imagebuild" ./hack/imagebuild &&
		CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$work/pause" ./hack/pause &&
		CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$work/netcheck" ./hack/netcheck) ||
		{ rm -rf "$work"; die "building the image programs failed"; }
	"$work/imagebuild" -binary "$work/pause" -path /pause -user 65535:65535 -ref "$PAUSE_IMAGE" -out "$IMAGES/pause.tar" &&
		"$work/imagebuild" -binary "$work/netcheck" -arg serve -ref "$NETCHECK_IMAGE" -out "$IMAGES/netcheck.tar" &&
		"$work/imagebuild" -binary "$BIN/coredns" -path /coredns -ref "$COREDNS_IMAGE" -out "$IMAGES/coredns.tar" ||
		{ rm -rf "$work"; die "building the images failed"; }
	cp "$work/netcheck" "$IMAGES/netcheck"
	rm -rf "$work"
	echo "$stamp" >"$IMAGES/.ok"
}

# ---------------------------------------------------------------- processes

pid_of() {
	local f=$RUN/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	# An exited process nobody reaped yet (a zombie) is not running.
	[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
	printf '%s' "$pid"
}

running() { pid_of "$1" >/dev/null; }

# start NAME COMMAND...: run in its own session, output to $LOGS/NAME.log.
start() {
	local name=$1
	shift
	if running "$name"; then
		return
	fi
	log "starting $name"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# stop NAME...: SIGTERM them together, SIGKILL what is left after 10 s.
stop() {
	local name pid pids=()
	for name in "$@"; do
		pid=$(pid_of "$name") && { kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); }
	done
	for _ in $(seq 100); do
		for pid in ${pids[@]+"${pids[@]}"}; do
			kill -0 "$pid" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ] && break
			pid=
		done
		[ -n "${pid:-}" ] || break
		sleep 0.1
	done
	for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL "$pid" 2>/dev/null || true; done
	for name in "$@"; do rm -f "$RUN/$name.pid"; done
}

# wait_for WHAT SECONDS COMMAND...: retry COMMAND until it succeeds.
wait_for() {
	local what=$1 secs=$2 deadline
	shift 2
	deadline=$(($(date +%s) + secs))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "timed out after ${secs}s waiting for $what; last log lines:"
			tail -n 20 "$LOGS"/*.log >&2 2>/dev/null || true
			die "timed out waiting for $what"
		fi
		sleep 0.5
	done
}

# ---------------------------------------------------------------- certificates

# cert NAME CN ORG SANS [CA]: a key and a certificate signed by CA (default ca).
cert() {
	local name=$1 cn=$2 org=$3 sans=$4 ca=${5:-ca} subj ext
	[ -f "$PKI/$name.crt" ] && return
	subj="/CN=$cn"
	[ -z "$org" ] || subj="/O=$org$subj"
	ext=$PKI/$name.ext
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$sans" ]; then
			echo "extendedKeyUsage=serverAuth,clientAuth"
			echo "subjectAltName=$sans"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$ext"
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
		-days 3650 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null || die "signing $name failed"
	rm -f "$PKI/$name.csr" "$ext"
}

ca() {
	local name=$1 cn=$2
	[ -f "$PKI/$name.crt" ] && return
	openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
	openssl req -x509 -new -key "$PKI/$name.key" -subj "/CN=$cn" -days 3650 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$PKI/$name.crt" 2>/dev/null || die "creating CA $name failed"
}

kubeconfig() {
	local name=$1 user=$2 server=$3
	[ -f "$DIR/$name.kubeconfig" ] && return
	cat >"$DIR/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: warren-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$user.crt")
    client-key-data: $(base64 -w0 "$PKI/$user.key")
contexts:
- name: warren-local
  context: {cluster: warren-local, user: $user}
current-context: warren-local
EOF
	chmod 600 "$DIR/$name.kubeconfig"
}

gen_pki() {
	local ip=$1
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	ca ca warren-local-ca
	ca front-proxy-ca warren-local-front-proxy-ca
	cert apiserver kube-apiserver "" \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE,IP:127.0.0.1,IP:$API_SERVICE_IP,IP:$ip"
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
	cert front-proxy-client front-proxy-client "" "" front-proxy-ca
	cert admin kubernetes-admin system:masters ""
	cert controller-manager system:kube-controller-manager "" ""
	cert scheduler system:kube-scheduler "" ""
	cert kubelet "system:node:$NODE" system:nodes ""
	cert kube-proxy system:kube-proxy "" ""
	[ -f "$PKI/sa.key" ] || {
		openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
		openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	}
	local server=https://127.0.0.1:$API_PORT
	kubeconfig admin admin "$server"
	kubeconfig controller-manager controller-manager "$server"
	kubeconfig scheduler scheduler "$server"
	kubeconfig kubelet kubelet "https://$ip:$API_PORT"
	kubeconfig kube-proxy kube-proxy "https://$ip:$API_PORT"
	# The controller manager runs as $PV_UID (see the header): it reads its own files.
	mkdir -p "$DIR/controller-manager"
	cp "$PKI/ca.crt" "$PKI/ca.key" "$PKI/sa.key" "$DIR/controller-manager.kubeconfig" "$DIR/controller-manager/"
	chown -R "$PV_UID:$PV_UID" "$DIR/controller-manager"
	chmod 700 "$DIR/controller-manager"
}

# ---------------------------------------------------------------- host state

# record_host_state: before the first up, note what down must restore.
record_host_state() {
	local s v
	[ -f "$DIR/host-state" ] && return
	{
		for s in $SYSCTLS; do
			v=$(sysctl -n "$s" 2>/dev/null | tr '\t' ' ') || continue
			printf 'sysctl %s=%s\n' "$s" "$v"
		done
		[ -e "$HOSTPATH_PV_DIR" ] && echo "exists $HOSTPATH_PV_DIR"
		[ -e "$CONTAINER_LOG_LINKS" ] && echo "exists $CONTAINER_LOG_LINKS"
		for s in /var/run/netns/*; do [ -e "$s" ] && echo "netns $s"; done
		true
	} >"$DIR/host-state.tmp"
	mv "$DIR/host-state.tmp" "$DIR/host-state"
}

# ---------------------------------------------------------------- configuration

# put FILE: write stdin to FILE unless FILE already holds it (kube-proxy exits
# when its configuration file changes, so an idempotent up must not touch it).
put() {
	cat >"$1.new"
	if cmp -s "$1.new" "$1"; then rm -f "$1.new"; else mv -f "$1.new" "$1"; fi
}

write_configs() {
	local ip=$1 resolv=/etc/resolv.conf
	mkdir -p "$DIR/cni/net.d" "$DIR/cni/ipam" "$DIR/containerd" "$RUN/containerd" "$DIR/kubelet" "$LOGS/pods"
	put "$DIR/cni/net.d/10-warren.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "warren-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	put "$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The shell lacks CAP_SYS_RESOURCE: lowering oom_score_adj fails, so don't try.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
	# A resolver on loopback would not answer inside pods: give CoreDNS none then.
	if grep -Eq '^nameserver[[:space:]]+(127\.|::1)' /etc/resolv.conf; then
		{ grep -Ev '^nameserver[[:space:]]+(127\.|::1)' /etc/resolv.conf || true; } | put "$DIR/resolv.conf"
		resolv=$DIR/resolv.conf
	fi
	put "$DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
oomScoreAdj: 0
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $resolv
podLogsDir: $LOGS/pods
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
failSwapOn: false
serializeImagePulls: false
# Imported images cannot be pulled again: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
maxPods: 110
EOF
	put "$DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $DIR/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE
oomScoreAdj: 0
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the host's conntrack table settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: [primary]
EOF
	: "$ip"
}

# ---------------------------------------------------------------- addons

addons_yaml() {
	cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        forward . /etc/resolv.conf
        cache 30
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        # Non-root CoreDNS listens on port 53.
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "0"}]
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        resources:
          requests: {cpu: 50m, memory: 40Mi}
          limits: {memory: 170Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: config, mountPath: /etc/coredns, readOnly: true}
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          initialDelaySeconds: 10
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
      volumes:
      - name: config
        configMap: {name: coredns}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: $DNS_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

# ---------------------------------------------------------------- up

node_ready() {
	[ "$(kubectl_ get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

dns_answers() {
	"$IMAGES/netcheck" lookup -server "$DNS_IP:53" -timeout 2s kubernetes.default.svc.cluster.local
}

healthy() {
	local c
	for c in $COMPONENTS; do running "$c" || return 1; done
	node_ready && dns_answers
}

cmd_up() {
	need_root up
	local ip t0
	cmd_build
	t0=$(date +%s)
	mkdir -p "$DIR" "$RUN" "$LOGS"
	if [ -f "$DIR/admin.kubeconfig" ] && healthy >/dev/null 2>&1; then
		import_images # they may have been rebuilt
		log "already up (KUBECONFIG=$DIR/admin.kubeconfig)"
		return
	fi
	ip=$(node_ip)
	if [ -f "$DIR/node-ip" ] && [ "$(cat "$DIR/node-ip")" != "$ip" ]; then
		die "the node IP changed ($(cat "$DIR/node-ip") -> $ip): run down first"
	fi
	echo "$ip" >"$DIR/node-ip"
	record_host_state
	gen_pki "$ip"
	write_configs "$ip"

	# Pods reach services and each other through the bridge: forwarding and
	# bridge netfilter on (down restores the recorded values).
	sysctl -qw net.ipv4.ip_forward=1
	[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || sysctl -qw net.bridge.bridge-nf-call-iptables=1
	[ ! -e /proc/sys/net/bridge/bridge-nf-call-ip6tables ] || sysctl -qw net.bridge.bridge-nf-call-ip6tables=1

	start etcd "$BIN/etcd" --name warren-local --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "warren-local=http://127.0.0.1:$ETCD_PEER_PORT" --log-level warn
	start kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--advertise-address "$ip" --bind-address 0.0.0.0 --secure-port "$API_PORT" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
		--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
		--requestheader-extra-headers-prefix X-Remote-Extra- --requestheader-group-headers X-Remote-Group \
		--requestheader-username-headers X-Remote-User \
		--proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key"
	start containerd containerd --config "$DIR/containerd/config.toml"
	wait_for "kube-apiserver" "$TIMEOUT" kubectl_ get --raw /readyz
	wait_for "containerd" 60 ctr_ version
	import_images

	start kube-controller-manager setpriv --reuid "$PV_UID" --regid "$PV_UID" --clear-groups \
		"$BIN/kube-controller-manager" \
		--kubeconfig "$DIR/controller-manager/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$DIR/controller-manager/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$DIR/controller-manager/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false \
		--cluster-signing-cert-file "$DIR/controller-manager/ca.crt" --cluster-signing-key-file "$DIR/controller-manager/ca.key" \
		--root-ca-file "$DIR/controller-manager/ca.crt" \
		--service-account-private-key-file "$DIR/controller-manager/sa.key" \
		--use-service-account-credentials=true --service-cluster-ip-range "$SERVICE_CIDR" \
		--allocate-node-cidrs=false --enable-hostpath-provisioner=true
	start kube-scheduler "$BIN/kube-scheduler" \
		--kubeconfig "$DIR/scheduler.kubeconfig" \
		--authentication-kubeconfig "$DIR/scheduler.kubeconfig" --authorization-kubeconfig "$DIR/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false
	start kubelet "$BIN/kubelet" --config "$DIR/kubelet.yaml" --kubeconfig "$DIR/kubelet.kubeconfig" \
		--root-dir "$DIR/kubelet" --hostname-override "$NODE" --node-ip "$ip"
	start kube-proxy "$BIN/kube-proxy" --config "$DIR/kube-proxy.yaml"

	wait_for "the kube-system namespace" 60 kubectl_ get namespace kube-system
	addons_yaml | kubectl_ apply --server-side --force-conflicts -f - >/dev/null ||
		die "applying the cluster addons (CoreDNS, StorageClass) failed"
	wait_for "node $NODE Ready" "$TIMEOUT" node_ready
	wait_for "CoreDNS ready" "$TIMEOUT" kubectl_ -n kube-system rollout status deployment/coredns --timeout=5s
	wait_for "cluster DNS answering on $DNS_IP" "$TIMEOUT" dns_answers
	log "up in $(($(date +%s) - t0))s; export KUBECONFIG=$DIR/admin.kubeconfig"
}

import_images() {
	local a
	for a in "$IMAGES/pause.tar" "$IMAGES/coredns.tar" "$IMAGES/netcheck.tar"; do
		ctr_ images import "$a" >/dev/null || die "importing $a into containerd failed"
	done
}

cmd_load() {
	need_root load
	local archive=${1:-}
	[ -n "$archive" ] || die "load needs an image archive (e.g. out/images/warren.tar from make images)"
	[ -f "$archive" ] || die "no such image archive: $archive"
	running containerd || die "the cluster is not up (hack/local-cluster.sh up)"
	ctr_ images import "$archive" >&2 || die "ctr images import $archive failed"
}

# ---------------------------------------------------------------- check

check_yaml() {
	cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $1}
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: $1, labels: {app: netcheck-server}}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532}
  containers:
  - name: serve
    image: $NETCHECK_IMAGE
    imagePullPolicy: Never
    args: [serve, -listen, ":8080"]
    ports: [{containerPort: 8080}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: server, namespace: $1}
spec:
  selector: {app: netcheck-server}
  ports: [{port: 8080}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: $1}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
EOF
}

check_client_yaml() {
	cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: $1}
spec:
  restartPolicy: OnFailure
  securityContext: {runAsNonRoot: true, runAsUser: 65532}
  initContainers:
  - {name: dns, image: $NETCHECK_IMAGE, imagePullPolicy: Never, args: [lookup, kubernetes.default]}
  - name: volume
    image: $NETCHECK_IMAGE
    imagePullPolicy: Never
    args: [write, /data/probe]
    volumeMounts: [{name: data, mountPath: /data}]
  containers:
  - {name: service, image: $NETCHECK_IMAGE, imagePullPolicy: Never, args: [connect, "server:8080"]}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
EOF
}

cmd_check() {
	local ns=warren-cluster-check t0 c
	t0=$(date +%s)
	[ -f "$DIR/admin.kubeconfig" ] && running kube-apiserver || die "the cluster is not up (hack/local-cluster.sh up)"
	kubectl_ delete namespace "$ns" --ignore-not-found --wait=true >/dev/null
	check_yaml "$ns" | kubectl_ apply -f - >/dev/null || die "creating the check's objects failed"
	if ! kubectl_ -n "$ns" wait --for=condition=Ready pod/server --timeout=120s >/dev/null ||
		! check_client_yaml "$ns" | kubectl_ apply -f - >/dev/null ||
		! kubectl_ -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/client --timeout=120s >/dev/null; then
		kubectl_ -n "$ns" get pods,pvc,svc,endpointslices -o wide >&2 || true
		kubectl_ -n "$ns" describe pod client >&2 || true
		kubectl_ -n "$ns" get events --sort-by=.lastTimestamp >&2 || true
		for c in dns volume service; do kubectl_ -n "$ns" logs client -c "$c" >&2 || true; done
		kubectl_ delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
		die "check failed (details above)"
	fi
	for c in dns volume service; do printf 'check %-8s %s\n' "$c:" "$(kubectl_ -n "$ns" logs client -c "$c")"; done
	kubectl_ delete namespace "$ns" --wait=true --timeout=120s >/dev/null || log "warning: deleting namespace $ns timed out"
	log "check passed in $(($(date +%s) - t0))s"
}

# ---------------------------------------------------------------- status

cmd_status() {
	local c pid up=0
	for c in $COMPONENTS; do
		if pid=$(pid_of "$c"); then
			printf '%-24s running (pid %s, %s MiB)\n' "$c" "$pid" "$(($(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status") / 1024))"
			up=$((up + 1))
		else
			printf '%-24s stopped\n' "$c"
		fi
	done
	if running kube-apiserver; then
		kubectl_ get nodes -o wide || true
		kubectl_ get pods -A -o wide || true
		echo "KUBECONFIG=$DIR/admin.kubeconfig"
	fi
	[ "$up" -gt 0 ] || echo "the cluster is down"
}

# ---------------------------------------------------------------- down

# cleanup_iptables: drop every rule and chain the kube-proxy, the portmap and
# bridge CNI plugins made (KUBE-*, CNI-*, the bridge's own rules).
cleanup_iptables() {
	local cmd save
	for cmd in iptables ip6tables; do
		command -v "$cmd-save" >/dev/null || continue
		save=$("$cmd-save" 2>/dev/null) || continue
		if printf '%s\n' "$save" | grep -Eq 'KUBE-|CNI-|'"$BRIDGE"'|'"$POD_SUBNET"; then
			printf '%s\n' "$save" | grep -Ev 'KUBE-|CNI-|'"$BRIDGE"'|'"${POD_SUBNET%/*}" | "$cmd-restore" ||
				log "warning: restoring $cmd rules failed"
		fi
	done
}

# kubepods_cgroups: the cgroups the kubelet made (cgroupfs driver; v1 and v2).
kubepods_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[ -d "$d" ] && [ ! -L "$d" ] && printf '%s\n' "$d"
	done
	true
}

# kill_kubepods: SIGKILL every process still in a kubepods cgroup.
kill_kubepods() {
	local d pid
	for d in $(kubepods_cgroups); do
		for pid in $(find "$d" \( -name tasks -o -name cgroup.procs \) -exec cat {} + 2>/dev/null | sort -u); do
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
}

# cleanup_cgroups: remove the kubepods cgroups, deepest first, once their processes are gone.
cleanup_cgroups() {
	local d
	for _ in $(seq 20); do
		for d in $(kubepods_cgroups); do
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
		[ -z "$(kubepods_cgroups)" ] && return
		kill_kubepods
		sleep 0.5
	done
	log "warning: cgroups still busy: $(kubepods_cgroups | tr '\n' ' ')"
}

unmount_under() {
	local prefix=$1 m
	# Deepest first.
	awk -v p="$prefix" '$5 == p || index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
	done
}

cmd_down() {
	need_root down
	local c pid s line n
	[ -d "$DIR" ] || [ -d "$RUN" ] || { log "already down"; return; }
	log "stopping the kubelet and the controllers"
	stop kubelet kube-proxy kube-scheduler kube-controller-manager
	# Containers: kill every task, then stop containerd and any shim left.
	log "stopping the containers and containerd"
	if running containerd; then
		for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
		for c in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
	fi
	stop containerd
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	# Container processes left without their shim.
	kill_kubepods
	log "stopping kube-apiserver and etcd"
	stop kube-apiserver
	stop etcd
	log "cleaning up the host"

	unmount_under "$RUN"
	unmount_under "$DIR"
	# Network namespaces the runtime made (those not there before up).
	for n in /var/run/netns/cni-*; do
		[ -e "$n" ] || continue
		grep -qx "netns $n" "$DIR/host-state" 2>/dev/null && continue
		umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null || true
		rm -f "$n"
	done
	ip link del "$BRIDGE" 2>/dev/null || true
	cleanup_iptables
	# Connection tracking entries of pods and Services.
	if command -v conntrack >/dev/null; then
		conntrack -D -s "$POD_SUBNET" >/dev/null 2>&1 || true
		conntrack -D -d "$POD_SUBNET" >/dev/null 2>&1 || true
		conntrack -D -d "$SERVICE_CIDR" >/dev/null 2>&1 || true
	fi
	cleanup_cgroups
	# Files outside $DIR: host-path volumes and the kubelet's log links.
	if [ -f "$DIR/host-state" ]; then
		grep -qx "exists $HOSTPATH_PV_DIR" "$DIR/host-state" || rm -rf "$HOSTPATH_PV_DIR"
		if grep -qx "exists $CONTAINER_LOG_LINKS" "$DIR/host-state"; then
			find "$CONTAINER_LOG_LINKS" -maxdepth 1 -type l -lname "$LOGS/*" -delete 2>/dev/null || true
		else
			rm -rf "$CONTAINER_LOG_LINKS"
		fi
		while read -r line; do
			case "$line" in
			sysctl\ *)
				s=${line#sysctl }
				sysctl -qw "${s%%=*}=${s#*=}" 2>/dev/null || log "warning: cannot restore ${s%%=*}"
				;;
			esac
		done <"$DIR/host-state"
	fi
	rm -rf "$RUN" "$DIR"
	log "down"
}

main() {
	case "${1:-}" in
	build) cmd_build ;;
	up) cmd_up ;;
	down) cmd_down ;;
	status) cmd_status ;;
	load) shift; cmd_load "$@" ;;
	check) cmd_check ;;
	kubeconfig) echo "$DIR/admin.kubeconfig" ;;
	-h | --help | help) usage ;;
	"") usage; exit 2 ;;
	*) printf 'local-cluster: unknown command %s\n' "$1" >&2; usage; exit 2 ;;
	esac
}

# One line, read whole before it runs: editing this file while it runs is safe.
main "$@"; exit $?
