#!/usr/bin/env bash
# rabbitmqadmin v2 (RabbitMQ's HTTP API CLI, crates.io) against the broker
# that hack/interop/run.sh started (WARREN_HTTP_URL, WARREN_AMQP_URL): every
# list, show, declare, delete, publish, get, close, definitions and
# health_check command, checking exit codes and the values that matter.
# What Warren does not have (runtime parameters, operator policies, limits,
# shovels) must be refused with a clear reason, not break the tool.
#
# Installs the pinned rabbitmqadmin with cargo into
# $INTEROP_CACHE/rabbitmqadmin-<version> (a cold build takes minutes; then
# it is cached). A small AMQP client (holdconn/, amqp091-go) holds the
# connections, channels and consumers the commands list and close.
set -euo pipefail
cd "$(dirname "$0")"
: "${WARREN_HTTP_URL:?run me through hack/interop/run.sh}" "${WARREN_AMQP_URL:?}" "${WARREN_AMQP_PORT:?}"
VERSION=2.35.0
CACHE=${INTEROP_CACHE:-$HOME/.cache/warren/interop}
ROOT=$CACHE/rabbitmqadmin-$VERSION
RA=$ROOT/bin/rabbitmqadmin
mkdir -p "$CACHE"
(
  flock 9
  if [ ! -x "$RA" ]; then
    command -v cargo >/dev/null || { echo "rabbitmqadmin: FAIL cargo is needed to install rabbitmqadmin $VERSION" >&2; exit 1; }
    echo "rabbitmqadmin: installing rabbitmqadmin $VERSION into $ROOT (cargo, a few minutes once)"
    cargo install rabbitmqadmin --version "$VERSION" --locked --quiet --root "$ROOT"
  fi
) 9>"$CACHE/.rabbitmqadmin.lock"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rabbitmqadmin-interop.XXXXXX")
HOLDERS=()
cleanup() {
  for p in "${HOLDERS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
(cd ../../.. && go build -o "$WORK/holdconn" ./hack/interop/rabbitmqadmin/holdconn)
# From here on a failed check is counted and the run goes on, so one run
# names every command that misbehaves.
set +e

hostport=${WARREN_HTTP_URL#http://}
export RABBITMQADMIN_TARGET_HOST=${hostport%:*} RABBITMQADMIN_TARGET_PORT=${hostport##*:}
export RABBITMQADMIN_USERNAME=guest RABBITMQADMIN_PASSWORD=guest RABBITMQADMIN_NON_INTERACTIVE_MODE=true

failures=0
fail() {
  echo "rabbitmqadmin: FAIL $*" >&2
  failures=$((failures + 1))
}
# ok DESC ARGS...: the command succeeds; its output is in $out.
ok() {
  local desc=$1
  shift
  if ! out=$("$RA" "$@" 2>&1); then
    fail "$desc: rabbitmqadmin $* failed: $out"
    return 1
  fi
}
# has DESC TEXT...: the last output contains each TEXT.
has() {
  local desc=$1
  shift
  for want in "$@"; do
    grep -qF -- "$want" <<<"$out" || fail "$desc: output lacks '$want': $(head -c 600 <<<"$out")"
  done
}
# lacks DESC TEXT: the last output does not contain TEXT.
lacks() {
  grep -qF -- "$2" <<<"$out" && fail "$1: output still has '$2'" || true
}
# refused DESC REASON ARGS...: the command fails, and says REASON.
refused() {
  local desc=$1 reason=$2
  shift 2
  if out=$("$RA" "$@" 2>&1); then
    fail "$desc: rabbitmqadmin $* succeeded, want a refusal: $out"
  elif ! grep -qF -- "$reason" <<<"$out"; then
    fail "$desc: rabbitmqadmin $* failed without saying '$reason': $out"
  fi
}
# until_has DESC TEXT ARGS...: the command's output comes to contain TEXT (10 s).
until_has() {
  local desc=$1 want=$2
  shift 2
  for _ in $(seq 1 100); do
    if out=$("$RA" "$@" 2>&1) && grep -qF -- "$want" <<<"$out"; then
      return 0
    fi
    sleep 0.1
  done
  fail "$desc: rabbitmqadmin $* never showed '$want': $out"
}
# hold NAME USER PASS VHOST QUEUE TAG: a held AMQP connection in the background.
hold() {
  local name=$1 user=$2 pass=$3 vh=$4 queue=$5 tag=$6
  "$WORK/holdconn" "amqp://$user:$pass@127.0.0.1:$WARREN_AMQP_PORT/$vh" "$name" "$queue" "$tag" >"$WORK/$name.out" 2>&1 &
  HOLDERS+=($!)
  eval "PID_${name//-/_}=$!"
}

echo "rabbitmqadmin: $("$RA" --version)"
node=$(curl -sf -u guest:guest "$WARREN_HTTP_URL/api/overview" | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"])')

# declare
ok "declare vhost" declare vhost --name interop --description "interop tests" --default-queue-type classic
ok "declare user" declare user --name ops --password ops-pw --tags administrator
ok "declare user" declare user --name app --password app-pw --tags management
for u in guest ops app; do
  ok "declare permissions for $u" declare permissions --vhost interop --username "$u" --configure '.*' --write '.*' --read '.*'
done
ok "declare queue" declare queue --vhost interop --name orders --type classic --durable true
ok "declare queue with arguments" declare queue --vhost interop --name capped --durable true --arguments '{"x-max-length": 10}'
ok "declare stream" declare stream --vhost interop --name events --expiration 1D --max-length-bytes 10000000
ok "declare exchange" declare exchange --vhost interop --name shop --type topic --durable true
ok "declare exchange" declare exchange --vhost interop --name fanin --type fanout --durable true
ok "declare binding to a queue" declare binding --vhost interop --source shop --destination-type queue --destination orders --routing-key 'order.*'
ok "declare binding to an exchange" declare binding --vhost interop --source fanin --destination-type exchange --destination shop --routing-key ''
ok "declare policy" declare policy --vhost interop --name cap --pattern '^capped$' --apply-to queues --definition '{"max-length": 5}'
refused "declare parameter" "runtime parameters are not supported by Warren" declare parameter --vhost interop --component federation-upstream --name up --value '{"uri": "amqp://localhost"}'
refused "declare operator_policy" "operator policies are not supported by Warren" declare operator_policy --vhost interop --name op --pattern '.*' --apply-to queues --definition '{"max-length": 5}'
refused "declare vhost_limit" "virtual host limits are not supported by Warren" declare vhost_limit --vhost interop --name max-connections --value 10
refused "declare user_limit" "user limits are not supported by Warren" declare user_limit --username app --name max-connections --value 10

# publish and get
ok "publish through a topic exchange" publish message --vhost interop --exchange shop --routing-key order.created --payload created
has "publish through a topic exchange" "routed successfully"
ok "publish to the default exchange" publish message --vhost interop --routing-key orders --payload direct
has "publish to the default exchange" "routed successfully"
ok "publish through an exchange-to-exchange binding" publish message --vhost interop --exchange fanin --routing-key order.x --payload fanned
ok "get messages" get messages --vhost interop --queue orders --count 3 --ack-mode ack_requeue_false
has "get messages" created direct fanned

# clients to list, show and close
hold interop-guest guest guest interop orders ctag-guest
hold interop-ops ops ops-pw interop orders ctag-ops
until_has "list consumers" ctag-guest list consumers
until_has "list consumers" ctag-ops list consumers

# list
ok "list nodes" list nodes && has "list nodes" "$node"
ok "list users" list users && has "list users" guest ops app
ok "list vhosts" list vhosts && has "list vhosts" interop "interop tests"
ok "list permissions" list permissions && has "list permissions" ops
ok "list connections" list connections && has "list connections" "AMQP 0-9-1  ops" "AMQP 0-9-1  guest"
ok "list user_connections" list user_connections --username ops && has "list user_connections" "ops  interop"
lacks "list user_connections" guest
conns=$(curl -sf -u guest:guest "$WARREN_HTTP_URL/api/connections" | python3 -c 'import json,sys; print(" ".join(sorted(c["client_properties"].get("connection_name", "") for c in json.load(sys.stdin))))')
[ "$conns" = "interop-guest interop-ops" ] || fail "the connections' client_properties.connection_name: '$conns', want 'interop-guest interop-ops'"
ok "list channels" list channels && has "list channels" "(1)"
ok "list queues" list queues --vhost interop && has "list queues" orders capped events
ok "list exchanges" list exchanges --vhost interop && has "list exchanges" shop fanin
ok "list bindings" list bindings && has "list bindings" "order.*"
ok "list consumers" list consumers && has "list consumers" ctag-guest ctag-ops
ok "list parameters" list parameters --vhost interop
ok "list policies" list policies && has "list policies" cap
ok "list operator_policies" list operator_policies
ok "list vhost_limits" list vhost_limits --vhost interop
ok "list user_limits" list user_limits
ok "list feature_flags" list feature_flags && has "list feature_flags" stream_queue
ok "list deprecated_features" list deprecated_features
ok "list deprecated_features_in_use" list deprecated_features_in_use
ok "queues show" queues show --vhost interop --name orders && has "queues show" orders
ok "bindings list" bindings list && has "bindings list" "order.*"
ok "global_parameters list" global_parameters list && has "global_parameters list" cluster_name
ok "vhosts list" vhosts list && has "vhosts list" interop

# show
ok "show overview" show overview && has "show overview" Warren
ok "show churn" show churn && has "show churn" "connections opened"
opened=$(awk '/connections opened/ {print $NF}' <<<"$out")
[ "${opened:-0}" -ge 2 ] 2>/dev/null || fail "show churn: connections opened is '$opened', want at least the 2 held ones: $out"
ok "show memory_breakdown_in_bytes" show memory_breakdown_in_bytes --node "$node"
ok "show memory_breakdown_in_percent" show memory_breakdown_in_percent --node "$node"
ok "show endpoint" show endpoint

# health checks
ok "health_check local_alarms" health_check local_alarms
ok "health_check cluster_wide_alarms" health_check cluster_wide_alarms
ok "health_check node_is_quorum_critical" health_check node_is_quorum_critical
ok "health_check port_listener" health_check port_listener --port "$WARREN_AMQP_PORT"
ok "health_check protocol_listener" health_check protocol_listener --protocol amqp
refused "health_check port_listener on a closed port" "" health_check port_listener --port 1

# definitions
ok "definitions export" definitions export --file "$WORK/all.json"
grep -q '"orders"' "$WORK/all.json" || fail "definitions export: no queue 'orders' in $WORK/all.json"
ok "definitions export_from_vhost" definitions export_from_vhost --vhost interop --file "$WORK/interop.json"
ok "declare vhost for the import" declare vhost --name interop-copy
ok "definitions import_into_vhost" definitions import_into_vhost --vhost interop-copy --file "$WORK/interop.json"
ok "imported queues" list queues --vhost interop-copy && has "imported queues" orders capped
ok "definitions import" definitions import --file "$WORK/all.json"
python3 - "$WORK/all.json" "$WORK/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["queues"].insert(0, {"name": "fresh", "vhost": "interop", "durable": True, "auto_delete": False, "arguments": {}})
d["queues"].insert(1, {"name": "odd", "vhost": "interop", "durable": True, "auto_delete": False, "arguments": {"x-queue-type": "delayed"}})
json.dump(d, open(sys.argv[2], "w"))
PY
refused "definitions import of a file with a bad queue" "queues[1] 'odd'" definitions import --file "$WORK/bad.json"
ok "after a refused import" list queues --vhost interop && lacks "a refused import creates nothing" fresh

# close
ok "close connection" close connection --name "$(curl -sf -u guest:guest "$WARREN_HTTP_URL/api/connections/username/guest" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["name"])')"
ok "close user_connections" close user_connections --username ops
for h in interop-guest interop-ops; do
  pid_var=PID_${h//-/_}
  for _ in $(seq 1 100); do kill -0 "${!pid_var}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${!pid_var}" 2>/dev/null; then
    fail "close: the connection $h is still open"
  elif ! grep -q "closed by the broker" "$WORK/$h.out"; then
    fail "close: $h ended without the broker closing it: $(cat "$WORK/$h.out")"
  fi
done
ok "no connections left" list connections && lacks "no connections left" "AMQP 0-9-1"
ok "show churn after closes" show churn

# delete
ok "delete vhost" delete vhost --name interop-copy
ok "delete binding" delete binding --vhost interop --source shop --destination-type queue --destination orders --routing-key 'order.*'
ok "delete binding" delete binding --vhost interop --source fanin --destination-type exchange --destination shop --routing-key ''
ok "bindings deleted" list bindings && lacks "bindings deleted" "order.*"
ok "delete exchange" delete exchange --vhost interop --name fanin
ok "delete queue" delete queue --vhost interop --name capped
ok "delete stream" delete stream --vhost interop --name events
ok "delete policy" delete policy --vhost interop --name cap
ok "delete permissions" delete permissions --vhost interop --username app
ok "delete user" delete user --name app
refused "delete parameter" "Not Found" delete parameter --vhost interop --component federation-upstream --name up
ok "delete parameter idempotently" delete parameter --vhost interop --component federation-upstream --name up --idempotently
refused "delete operator_policy" "Not Found" delete operator_policy --vhost interop --name op
ok "delete vhost_limit (none set)" delete vhost_limit --vhost interop --name max-connections
ok "delete user_limit (none set)" delete user_limit --username ops --name max-connections
refused "delete shovel" "Not Found" delete shovel --vhost interop --name nope
ok "queues after deletes" list queues --vhost interop && lacks "queues after deletes" capped
ok "delete vhost" delete vhost --name interop
ok "vhosts after deletes" list vhosts && lacks "vhosts after deletes" interop

if [ -n "${WARREN_LOG:-}" ] && grep -q 'level=ERROR' "$WARREN_LOG"; then
  fail "the broker logged errors: $(grep 'level=ERROR' "$WARREN_LOG" | head -5)"
fi
if [ "$failures" -gt 0 ]; then
  echo "rabbitmqadmin: $failures check(s) failed" >&2
  exit 1
fi
echo "rabbitmqadmin: every command behaved"
