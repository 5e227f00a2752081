# Sourced by hack/bench.sh and hack/bench-cluster.sh (bash): the RabbitMQ
# they measure Warren against, on the same machine.
#
# rabbitmq_install installs rabbitmq-server from Debian when it is missing
# and stops the instance Debian starts (the benchmarks run their own)
# (root). Returns 1 when it could not install it.
rabbitmq_install() {
  if ! command -v rabbitmq-server >/dev/null; then
    log "installing rabbitmq-server from Debian"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null; } ||
      { log "could not install rabbitmq-server"; return 1; }
  fi
  (service rabbitmq-server stop || true) >/dev/null 2>&1
}

# rabbitmq_version prints the installed RabbitMQ's version (e.g. 3.10.8).
rabbitmq_version() {
  dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null | sed 's/-.*//'
}

# rabbitmq_cluster_start DIR N: N nodes rabbit1@localhost .. rabbitN@localhost,
# each with its data (and its pid file) under DIR/nI, AMQP on
# 127.0.0.1:(6671 + 1000 (I - 1)) and Erlang distribution on 25672 + I,
# clustered with rabbit1 (plugins
# off: PerfTest needs none). DIR's parents must be open to the rabbitmq
# user (rabbitmq-server drops root for it). Returns 1 when a node did not
# start or join.
rabbitmq_cluster_start() {
  local dir=$1 n=$2 i d ok
  RABBITMQ_CLUSTER_DIR=$dir RABBITMQ_CLUSTER_NODES=$n
  for i in $(seq 1 "$n"); do
    d=$dir/n$i
    rm -rf "$d"; mkdir -p "$d"
    echo "[]." >"$d/enabled_plugins"
    printf 'listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\n' "$(rabbitmq_cluster_port "$i")" >"$d/rabbitmq.conf"
  done
  chown -R rabbitmq:rabbitmq "$dir" 2>/dev/null || true
  for i in $(seq 1 "$n"); do
    d=$dir/n$i
    (cd "$d" && env RABBITMQ_NODENAME="rabbit$i@localhost" RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" \
      RABBITMQ_CONFIG_FILE="$d/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_PID_FILE="$d/pid" \
      RABBITMQ_DIST_PORT=$((25672 + i)) setsid -f rabbitmq-server </dev/null >"$d/out.log" 2>&1)
  done
  for i in $(seq 1 "$n"); do
    ok=""
    for _ in $(seq 1 60); do
      if timeout 10 rabbitmqctl -n "rabbit$i@localhost" await_startup >/dev/null 2>&1; then ok=1; break; fi
      sleep 1
    done
    if [ -z "$ok" ]; then log "rabbit$i@localhost did not start"; tail -5 "$dir/n$i/out.log" >&2; return 1; fi
  done
  for i in $(seq 2 "$n"); do
    rabbitmqctl -n "rabbit$i@localhost" stop_app >/dev/null &&
      rabbitmqctl -n "rabbit$i@localhost" join_cluster rabbit1@localhost >/dev/null &&
      rabbitmqctl -n "rabbit$i@localhost" start_app >/dev/null || { log "rabbit$i@localhost did not join"; return 1; }
  done
}

# rabbitmq_cluster_port I: node I's AMQP port.
rabbitmq_cluster_port() { echo $((6671 + 1000 * ($1 - 1))); }

# rabbitmq_cluster_pids prints the started nodes' process ids (from their
# pid files).
rabbitmq_cluster_pids() {
  local i
  for i in $(seq 1 "${RABBITMQ_CLUSTER_NODES:-0}"); do
    # The file holds the id without a newline.
    [ -s "$RABBITMQ_CLUSTER_DIR/n$i/pid" ] && printf '%s ' "$(cat "$RABBITMQ_CLUSTER_DIR/n$i/pid")"
  done
  echo
}

# rabbitmq_cluster_stop stops the nodes rabbitmq_cluster_start started
# (killed if rabbitmqctl could not stop them).
rabbitmq_cluster_stop() {
  local i pids
  pids=$(rabbitmq_cluster_pids)
  for i in $(seq 1 "${RABBITMQ_CLUSTER_NODES:-0}"); do timeout 60 rabbitmqctl -n "rabbit$i@localhost" stop >/dev/null 2>&1 || true; done
  sleep 1
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  RABBITMQ_CLUSTER_NODES=0
}
