#!/usr/bin/env bash
# make bench: Warren vs RabbitMQ on the same machine, back to back, with
# RabbitMQ PerfTest. Installs what it needs (rabbitmq-server from Debian,
# PerfTest 2.22.1 from Maven Central), runs every scenario BENCH_PASSES times
# per broker, and prints one Markdown table with both brokers and the ratio,
# a second one with the CPU each message cost the broker and PerfTest
# (hack/bench/cpu.sh), then the broker issue's targets with this run's
# figures (hack/bench/table.py).
#
# Environment:
#   BENCH_DURATION=20     seconds per timed scenario
#   BENCH_PASSES=2        passes per scenario and broker
#   BENCH_BROKERS=both    warren | rabbitmq | both
#   BENCH_SCENARIOS=all   comma list, e.g. s1,s5,backlog
#   BENCH_BACKLOG=1000000 messages in the backlog scenario
#   BENCH_BIG=0           1: also fill and drain 10,000,000 messages on Warren
#   BENCH_WRITE_DOCS=0    1: write the table into docs/benchmarks.md
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/hack/.cache
OUT=$ROOT/out
mkdir -p "$CACHE" "$OUT"
DURATION=${BENCH_DURATION:-20}
PASSES=${BENCH_PASSES:-2}
BROKERS=${BENCH_BROKERS:-both}
SCENARIOS=${BENCH_SCENARIOS:-all}
BACKLOG=${BENCH_BACKLOG:-1000000}
RESULTS=$OUT/bench-results.tsv
: > "$RESULTS"

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
source "$ROOT/hack/bench/steal.sh"
source "$ROOT/hack/bench/cpu.sh"
source "$ROOT/hack/bench/rabbitmq.sh"

install_deps() {
  rabbitmq_install
  if [ ! -f "$CACHE/perftest/lib/perf-test-2.22.1.jar" ]; then
    log "fetching PerfTest 2.22.1 from Maven Central"
    mkdir -p "$CACHE/perftest"
    cp "$ROOT/hack/bench/pom.xml" "$CACHE/perftest/pom.xml"
    (cd "$CACHE/perftest" && mvn -q dependency:copy-dependencies -DoutputDirectory=lib)
  fi
  log "building warren"
  go build -o "$ROOT/bin/warren" ./cmd/warren
}

BROKER_PID=""
start_rabbitmq() {
  local dir=$1
  rm -rf "$dir"; mkdir -p "$dir"; chown -R rabbitmq:rabbitmq "$dir" 2>/dev/null || true
  export RABBITMQ_MNESIA_BASE=$dir/mnesia RABBITMQ_LOG_BASE=$dir/log RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  (cd "$dir" && setsid -f rabbitmq-server </dev/null >"$dir/out.log" 2>&1)
  local ok=""
  for _ in $(seq 1 90); do
    if timeout 10 rabbitmqctl -n rabbit@localhost await_startup >/dev/null 2>&1; then ok=1; break; fi
    sleep 1
  done
  BROKER_PID=$(pgrep -n -x beam.smp || true)
  if [ -z "$ok" ] || [ -z "$BROKER_PID" ]; then log "rabbitmq did not start"; tail -20 "$dir/out.log"; exit 1; fi
}
stop_rabbitmq() {
  timeout 60 rabbitmqctl -n rabbit@localhost stop >/dev/null 2>&1 || true
  sleep 1; pkill -x beam.smp 2>/dev/null || true
  pkill -x epmd 2>/dev/null || true
}
start_warren() {
  local dir=$1
  rm -rf "$dir"; mkdir -p "$dir"
  "$ROOT/bin/warren" serve --data-dir "$dir" --set amqp.listen=127.0.0.1:5672 \
    --set http.listen=127.0.0.1:15672 --set prometheus.listen=127.0.0.1:15692 \
    --set stream.listen=127.0.0.1:5552 </dev/null >"$dir.log" 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 50); do
    grep -q "warren started" "$dir.log" 2>/dev/null && return
    sleep 0.2
  done
  log "warren did not start"; cat "$dir.log"; exit 1
}
stop_warren() { kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; }

# rss_watch PID FILE: record the peak resident set size (KiB) until killed.
rss_watch() {
  local pid=$1 file=$2 peak=0 cur
  while kill -0 "$pid" 2>/dev/null; do
    cur=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    [ "${cur:-0}" -gt "$peak" ] && peak=$cur && echo "$peak" > "$file"
    sleep 0.2
  done
}

PERFTEST=(java -Xms256m -Xmx1g -cp "$CACHE/perftest/lib/*" com.rabbitmq.perf.PerfTest -h amqp://guest:guest@127.0.0.1:5672)
perftest() { "${PERFTEST[@]}" "$@"; }

declare -A SCEN=(
  [s1]="-x 1 -y 1 -s 12 -a"
  [s2]="-x 2 -y 0 -s 12"
  [s3]="-x 1 -y 1 -s 12 -a -f mandatory"
  [s4]="-x 1 -y 1 -q 100"
  [s5]="-x 1 -y 1 -q 100 -c 100"
  [s6]="-x 1 -y 1 -q 100 -c 100 -f persistent"
  [s7]="-x 1 -y 1 -s 5000 -a"
  [s8]="-x 1 -y 1 -q 1"
  [s9]="-x 1 -y 1 -q 10"
  [s10]="-x 1 -y 1 -q 100"
  [s11]="-x 1 -y 1 -q 1000"
  [s12]="-x 1 -y 1 -s 100 -c 1"
  [s13]="-x 5 -y 5 -r 10000 --queue-pattern perf-test-%d --queue-pattern-from 1 --queue-pattern-to 5"
)
ORDER="s1 s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 s12 s13"
want() { [ "$SCENARIOS" = all ] || [[ ",$SCENARIOS," == *",$1,"* ]]; }

# run_timed BROKER SCENARIO PASS: one PerfTest run; appends a result line.
# Between the per-second reports at a third of the run and two seconds
# before its end (warmed up, still running) it measures the CPU per message
# of the broker and of PerfTest's working threads (hack/bench/cpu.sh).
run_timed() {
  local broker=$1 sc=$2 pass=$3 out rate sent lat clat t0 st pt ta tb ca cb n cpu started
  local file=$OUT/perftest-$broker-$sc.out
  t0=$(cpu_ticks)
  started=$(date +%s.%N)
  "${PERFTEST[@]}" ${SCEN[$sc]} -z "$DURATION" >"$file" 2>&1 &
  pt=$!
  ta=$(await_report "$file" "$pt" $(( DURATION / 3 > 2 ? DURATION / 3 : 2 )) "$started")
  ca=$(cpu_sample "$BROKER_PID" "$pt")
  tb=$(await_report "$file" "$pt" $(( DURATION - 2 )) "$started")
  cb=$(cpu_sample "$BROKER_PID" "$pt")
  wait "$pt" || true
  out=$(cat "$file")
  st=$(stolen "$t0")
  cpu="- - -"
  if [ -n "$ta" ] && [ -n "$tb" ]; then
    n=$(received_between "$file" "$ta" "$tb")
    cpu=$(cpu_per_message "$ca" "$cb" "$n")
  fi
  sent=$(grep -o 'sending rate avg: [0-9]*' <<<"$out" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'receiving rate avg: [0-9]*' <<<"$out" | grep -o '[0-9]*$' || echo 0)
  [ "$rate" = 0 ] && rate=$sent
  lat=$(grep 'consumer latency' <<<"$out" | tail -1 | sed -E 's#.* ([0-9]+)/([0-9]+)/([0-9]+)/([0-9]+)/([0-9]+) µs#\2#' || true)
  clat=$(grep 'confirm latency' <<<"$out" | tail -1 | sed -E 's#.* ([0-9]+)/([0-9]+)/([0-9]+)/([0-9]+)/([0-9]+) µs#\2#' || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$broker" "$sc" "$pass" "${rate:-0}" "${lat:--}" "${clat:--}" "${cpu// /$'\t'}" >> "$RESULTS"
  local cpulog="CPU not measured (run too short)"
  [ "$cpu" != "- - -" ] && cpulog="CPU µs/msg broker ${cpu%% *} PerfTest $(cut -d' ' -f2 <<<"$cpu"), ${cpu##* }% idle"
  log "$broker $sc pass $pass: ${rate} msg/s, consumer latency median ${lat:--} µs, confirm latency median ${clat:--} µs, $cpulog$([ "$st" -ge 5 ] && echo ", $st% of the CPU stolen by the hypervisor")"
}

# run_backlog BROKER PASS N: fill N persistent 100-byte messages by two
# producers into one durable queue, then drain with one consumer (qos 1000).
run_backlog() {
  local broker=$1 pass=$2 n=$3 t0 t1 t2 per=$(( $3 / 2 ))
  t0=$(date +%s.%N)
  perftest -x 2 -y 0 -C "$per" -s 100 -f persistent -u backlog -ad false --id fill >/dev/null 2>&1 || true
  t1=$(date +%s.%N)
  perftest -x 0 -y 1 -q 1000 -u backlog -ad false -f persistent --predeclared --exit-when empty --id drain >/dev/null 2>&1 || true
  local left
  left=$(curl -s -u guest:guest http://127.0.0.1:15672/api/queues/%2F/backlog 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("messages", "?"))' 2>/dev/null || echo "?")
  [ "$broker" = rabbitmq ] && left=$(timeout 30 rabbitmqctl -n rabbit@localhost list_queues name messages 2>/dev/null | awk '$1=="backlog" {print $2}')
  log "$broker backlog: ${left:-?} messages left after the drain"
  t2=$(date +%s.%N)
  local fill drain
  fill=$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN{printf "%d", n/(b-a)}')
  drain=$(awk -v a="$t1" -v b="$t2" -v n="$n" 'BEGIN{printf "%d", n/(b-a)}')
  printf '%s\tbacklog-fill-%s\t%s\t%s\t-\t-\n' "$broker" "$n" "$pass" "$fill" >> "$RESULTS"
  printf '%s\tbacklog-drain-%s\t%s\t%s\t-\t-\n' "$broker" "$n" "$pass" "$drain" >> "$RESULTS"
  log "$broker backlog $n pass $pass: fill $fill msg/s, drain $drain msg/s"
}

# run_scenario BROKER SCENARIO PASS: one timed scenario on a fresh broker.
run_scenario() {
  local broker=$1 sc=$2 pass=$3 dir=/tmp/warren-bench-$1
  "start_$broker" "$dir"; rss_watch "$BROKER_PID" "$OUT/rss-$broker-$sc" &
  run_timed "$broker" "$sc" "$pass"
  "stop_$broker"
}

# run_backlog_scenario BROKER PASS: the backlog on a fresh broker, with peak RSS.
run_backlog_scenario() {
  local broker=$1 pass=$2 dir=/tmp/warren-bench-$1
  "start_$broker" "$dir"; rss_watch "$BROKER_PID" "$OUT/rss-$broker-backlog" &
  run_backlog "$broker" "$pass" "$BACKLOG"
  "stop_$broker"
  printf '%s\tbacklog-peak-rss-kib\t%s\t%s\t-\t-\n' "$broker" "$pass" "$(cat "$OUT/rss-$broker-backlog" 2>/dev/null || echo 0)" >> "$RESULTS"
}

case "$BROKERS" in
  both) BROKER_LIST="warren rabbitmq" ;;
  warren|rabbitmq) BROKER_LIST=$BROKERS ;;
  *) echo "BENCH_BROKERS must be warren, rabbitmq or both" >&2; exit 2 ;;
esac

install_deps
RUN_TICKS=$(cpu_ticks)
# The brokers take turns on each scenario, so a change in the machine's
# background load during the run falls on both rather than on one.
for pass in $(seq 1 "$PASSES"); do
  for sc in $ORDER; do
    want "$sc" || continue
    for broker in $BROKER_LIST; do run_scenario "$broker" "$sc" "$pass"; done
  done
  if want backlog; then
    for broker in $BROKER_LIST; do run_backlog_scenario "$broker" "$pass"; done
  fi
done
if [[ " $BROKER_LIST " == *" warren "* ]] && [ "${BENCH_BIG:-0}" = 1 ]; then
  start_warren /tmp/warren-bench-warren; rss_watch "$BROKER_PID" "$OUT/rss-warren-big" &
  run_backlog warren 1 10000000
  stop_warren
  printf 'warren\tbacklog-peak-rss-kib-10M\t1\t%s\t-\t-\n' "$(cat "$OUT/rss-warren-big")" >> "$RESULTS"
fi

# bench_command is the command line that reproduces this run: every setting
# that differs from its default is in it.
bench_command() {
  local c="BENCH_DURATION=$DURATION BENCH_PASSES=$PASSES BENCH_SCENARIOS=$SCENARIOS"
  [ "$BROKERS" != both ] && c+=" BENCH_BROKERS=$BROKERS"
  [ "$BACKLOG" != 1000000 ] && c+=" BENCH_BACKLOG=$BACKLOG"
  [ "${BENCH_BIG:-0}" = 1 ] && c+=" BENCH_BIG=1"
  echo "$c make bench"
}

table=$(python3 "$ROOT/hack/bench/table.py" "$RESULTS" \
  --machine "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); CPU stolen by the hypervisor during the run: $(stolen "$RUN_TICKS")%" \
  --command "$(bench_command)")
echo "$table"
echo "$table" > "$OUT/bench-$(date +%Y%m%d-%H%M).md"
if [ "${BENCH_WRITE_DOCS:-0}" = 1 ]; then
  python3 "$ROOT/hack/bench/table.py" --write-docs "$ROOT/docs/benchmarks.md" --table-file "$OUT/bench-$(date +%Y%m%d-%H%M).md"
fi
