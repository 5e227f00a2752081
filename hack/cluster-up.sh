#!/usr/bin/env bash
# cluster-up.sh N: start an N-node Warren cluster on this machine for trying
# it out (make cluster-up N=3). Node i (1..N) listens on AMQP 5671+i, stream
# 5551+i, HTTP 15671+i, Prometheus 15691+i and cluster 25671+i, keeps its
# data in $DATA_DIR/cluster/n<i> and logs to $DATA_DIR/cluster/n<i>.log.
# Every node lists every node as a seed: they form one cluster. Ctrl-C
# stops them all (SIGTERM: each drains, then stops); starting again keeps
# the data (rm -rf $DATA_DIR/cluster for a new cluster).
set -euo pipefail
n=${1:-3}
data=${DATA_DIR:-./data}/cluster
bin=${BIN:-./bin}
if ! [[ $n =~ ^[1-9]$ ]]; then
	echo "cluster-up: N must be 1 to 9, got '$n'" >&2
	exit 2
fi
go build -o "$bin/" ./cmd/warren
mkdir -p "$data"
seeds=""
for i in $(seq 1 "$n"); do
	seeds+="${seeds:+,}127.0.0.1:$((25671 + i))"
done
pids=()
stop() {
	trap - INT TERM EXIT
	echo "cluster-up: stopping ${#pids[@]} nodes"
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT
for i in $(seq 1 "$n"); do
	"$bin/warren" serve --data-dir "$data/n$i" \
		--set cluster.node_name="warren-$i@localhost" \
		--set cluster.listen="127.0.0.1:$((25671 + i))" \
		--set cluster.seeds="$seeds" \
		--set amqp.listen="127.0.0.1:$((5671 + i))" \
		--set stream.listen="127.0.0.1:$((5551 + i))" \
		--set http.listen="127.0.0.1:$((15671 + i))" \
		--set prometheus.listen="127.0.0.1:$((15691 + i))" \
		>"$data/n$i.log" 2>&1 &
	pids+=($!)
done
echo "cluster-up: waiting for $n nodes to form a cluster (logs: $data/n*.log)"
for _ in $(seq 1 120); do
	if out=$("$bin/warren" ctl --url "http://127.0.0.1:15672" cluster-status 2>/dev/null) &&
		[[ $(grep -v "not running" <<<"$out" | grep -c "running$") -ge $n ]]; then
		echo "$out"
		echo
		echo "cluster-up: $n nodes; AMQP on 127.0.0.1:5672..$((5671 + n)), HTTP API on 127.0.0.1:15672..$((15671 + n)) (guest/guest)"
		echo "cluster-up: Ctrl-C stops them"
		wait "${pids[@]}"
		exit 0
	fi
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "cluster-up: a node exited; its log:" >&2
			tail -20 "$data"/n*.log >&2
			exit 1
		fi
	done
	sleep 1
done
echo "cluster-up: no cluster of $n within 120 s; logs in $data" >&2
exit 1
