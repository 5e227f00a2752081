#!/usr/bin/env bash
# make bench-streams: RabbitMQ's stream read-ahead study on this machine.
#
# Builds warren and warren-perf, starts a broker on a fresh data directory,
# and for every message size x chunk size fills one stream with exact chunks
# (warren-perf stream fill --window 1: one publish frame per chunk, the next
# sent once the previous is confirmed), then reads it from the first offset
# with the vhost's read-ahead off and on (switched at runtime through the HTTP
# API), over the stream protocol and over AMQP (prefetch 200). The stream is
# deleted before the next one is filled, so the disk holds one at a time.
# Optionally the same fill and stream-protocol read on RabbitMQ's stream
# plugin (Debian 3.10.8, no read-ahead), and the issue's headline targets.
#
# Results: out/bench-streams.tsv (one line per run), out/bench-streams.json,
# out/bench-streams-<date>.md (tables) and out/bench-streams.png (chart).
#
# Environment:
#   BENCH_STREAM_MESSAGES=1000000  messages per stream
#   BENCH_SIZES=12,48,256,512,1024 message sizes (bytes)
#   BENCH_CHUNKS=1,2,4,6,8,15,32,64,128,384  chunk sizes (messages)
#   BENCH_PROTOCOLS=stream,amqp    protocols read with read-ahead off and on
#   BENCH_AMQP_CLIENT=amqp091      AMQP consumer of the matrix: amqp091
#                                  (amqp091-go) or wire (warren-perf's minimal
#                                  consumer: the broker's rate, not the client's)
#   BENCH_PASSES=3                 reads per stream, protocol and setting
#   BENCH_SAME_TIME_PASSES=24      chunks >= 4096 B: pairs of reads of the two
#                                  settings at the same time (0: none)
#   BENCH_SAME_TIME_PROTOCOLS=amqp  protocols read so (of BENCH_PROTOCOLS);
#                                  stream,amqp with BENCH_LARGE_BYTES (below)
#   BENCH_SAME_TIME_DURATION=1s    how long each such pair reads
#   BENCH_SAME_TIME_MAX_BYTES=4294967296  message bytes up to which those
#                                  streams are lengthened for such reads
#   BENCH_LARGE_PASSES=$BENCH_PASSES  the same for chunks of 4096 B or more
#   BENCH_DEADLINE=                HH:MM (UTC): no pass after the first starts
#                                  after this time (partial passes are in the TSV)
#   BENCH_RABBITMQ=1               also fill and read RabbitMQ's streams
#                                  (stream protocol; 0: skip)
#   BENCH_RABBITMQ_MESSAGES=100000 messages per RabbitMQ stream (it reads
#                                  1-message chunks at a few thousand msg/s)
#   BENCH_RABBITMQ_SIZES=$BENCH_SIZES  message sizes on RabbitMQ
#   BENCH_HEADLINE=1               measure the four headline targets (0: skip)
#   BENCH_DATA_ROOT=/dev/shm       where the matrix's data directories live
#                                  (see docs/benchmarks.md for why tmpfs)
#   BENCH_DISK_ROOT=/tmp           data directory of the headline publish run
#   BENCH_WRITE_DOCS=0             1: write the tables and chart into docs/
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/hack/.cache
OUT=$ROOT/out
mkdir -p "$CACHE" "$OUT"

list() { tr ',' ' ' <<<"$1"; }
MESSAGES=${BENCH_STREAM_MESSAGES:-1000000}
SIZES=$(list "${BENCH_SIZES:-12,48,256,512,1024}")
CHUNKS=$(list "${BENCH_CHUNKS:-1,2,4,6,8,15,32,64,128,384}")
PROTOCOLS=$(list "${BENCH_PROTOCOLS:-stream,amqp}")
PASSES=${BENCH_PASSES:-3}
AMQP_CLIENT=${BENCH_AMQP_CLIENT:-amqp091}
# Credit of the stream-protocol consumer, in chunks. The official clients
# start with 10, which for 1-message chunks keeps under a kilobyte in flight:
# the consumer's credit round trip, not the broker's reads, then sets the
# rate. The study gives the broker room to run ahead; 12 B x 1 is also read
# with credit 10 (protocol "stream-credit10") to show the clients' default.
# Over AMQP the consumer is amqp091-go, which costs several times what the
# broker does per message; 12 B x 1 is also read with warren-perf's minimal
# consumer (--client wire, protocol "amqp-wire") to show the broker's rate.
CREDIT=${BENCH_STREAM_CREDIT:-65535}
# Cells whose chunks are at least BENCH_MIN_CHUNK_BYTES (default 0: all).
MIN_CHUNK_BYTES=${BENCH_MIN_CHUNK_BYTES:-0}
# Chunks of 4096 bytes or more are never read ahead, so read-ahead on and off
# must read them alike; 1,000,000 small messages in such chunks read in tens
# of milliseconds, too short to tell. With BENCH_LARGE_BYTES (e.g. 1073741824)
# those streams get that many bytes of messages (at least
# BENCH_STREAM_MESSAGES) and the stream protocol reads them whole; the AMQP
# consumer still reads the first BENCH_STREAM_MESSAGES.
LARGE_BYTES=${BENCH_LARGE_BYTES:-0}
# Passes for those cells (default BENCH_PASSES): the two settings differ by
# less than a read's run-to-run spread on a shared machine, so telling them
# apart within 5% takes the median of more interleaved reads.
LARGE_PASSES=${BENCH_LARGE_PASSES:-$PASSES}
# A read of 1-2 s on this shared machine varies by some 12% from the next
# (the host's speed, not the broker's: its CPU time per read varies alike),
# more than the 5% the two settings must stay within at chunks >= 4096 B.
# So those cells are also read "at the same time": the stream is filled
# twice, in / and in the vhost bench-twin, one vhost gets read-ahead on and
# the other off, and two consumers (stream protocol, or AMQP --client wire)
# read them together for BENCH_SAME_TIME_DURATION; which vhost is "on"
# alternates between passes.
# The host's drift then falls on both reads of a pair alike. (The two
# consumers share the machine, so a real difference between the settings
# shows smaller than in reads one after the other: 256 B x 4 reads 1.2-1.3x
# faster "on" at the same time against ~1.5x in turn. The check is of
# settings that must read alike.)
# A pair's ratio still spreads by 3-7% (which consumer the scheduler favours
# is settled when the pair starts: 3 s pairs spread as much as 1 s ones,
# 0.5 s ones more), so the median of 8 pairs is only good to about +-3%;
# 24 pairs make it about +-1.5%.
SAME_PASSES=${BENCH_SAME_TIME_PASSES:-24}
SAME_DURATION=${BENCH_SAME_TIME_DURATION:-1s}
# A consumer of a pair that reaches the end of its stream stops early, and
# one AMQP consumer reads 1-2 million messages a second here: before the
# pairs, the stream is doubled until one consumer alone (faster than either
# of a pair) reading for BENCH_SAME_TIME_DURATION gets through less than
# two thirds of it, up to BENCH_SAME_TIME_MAX_BYTES of messages.
SAME_MAX_BYTES=${BENCH_SAME_TIME_MAX_BYTES:-4294967296}
# The stream protocol reads these cells at 1.5-3 GB/s, so its pairs need
# streams of gigabytes, which take minutes per cell to fill with exact
# chunks; by default only AMQP is read in pairs (BENCH_LARGE_BYTES gives
# the streams most of that length already).
SAME_PROTOCOLS=""
for p in stream amqp; do
  [[ ",${BENCH_SAME_TIME_PROTOCOLS:-amqp}," == *",$p,"* ]] && [[ " $PROTOCOLS " == *" $p "* ]] && SAME_PROTOCOLS="$SAME_PROTOCOLS $p"
done
DEADLINE=${BENCH_DEADLINE:-}
RABBIT=${BENCH_RABBITMQ:-1}
RABBIT_MESSAGES=${BENCH_RABBITMQ_MESSAGES:-100000}
RABBIT_SIZES=$(list "${BENCH_RABBITMQ_SIZES:-${BENCH_SIZES:-12,48,256,512,1024}}")
HEADLINE=${BENCH_HEADLINE:-1}
DATA_ROOT=${BENCH_DATA_ROOT:-/dev/shm}
DISK_ROOT=${BENCH_DISK_ROOT:-/tmp}
STAMP=$(date -u +%Y%m%d-%H%M)
RESULTS=$OUT/bench-streams.tsv
: > "$RESULTS"
PERF=$ROOT/bin/warren-perf

# Ports of the private brokers, away from the defaults so that a broker
# someone else runs on this machine is neither hit nor in the way.
W_AMQP=5682 W_STREAM=5562 W_HTTP=15682 W_PROM=15702 W_CLUSTER=25682
R_AMQP=5683 R_STREAM=5563 R_DIST=25683 R_NODE=benchstreams@localhost
W_STREAM_URI=rabbitmq-stream://guest:guest@127.0.0.1:$W_STREAM/%2f
W_AMQP_URI=amqp://guest:guest@127.0.0.1:$W_AMQP/
R_STREAM_URI=rabbitmq-stream://guest:guest@127.0.0.1:$R_STREAM/%2f

log() { printf '%s %s\n' "$(date -u +%T)" "$*" >&2; }

install_deps() {
  if [ ! -x "$CACHE/venv/bin/python" ] || ! "$CACHE/venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib from PyPI into hack/.cache/venv"
    python3 -m venv "$CACHE/venv"
    "$CACHE/venv/bin/pip" install -q matplotlib
  fi
  if [ "$RABBIT" = 1 ] && ! command -v rabbitmq-server >/dev/null; then
    log "installing rabbitmq-server from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
    (service rabbitmq-server stop || true) >/dev/null 2>&1
  fi
  log "building warren and warren-perf"
  go build -o "$ROOT/bin/" ./cmd/warren ./cmd/warren-perf
  # The broker runs under a name of its own: on a shared machine, scripts
  # that stop "their" broker by process name must not stop this one.
  mkdir -p "$CACHE/bin"
  cp "$ROOT/bin/warren" "$CACHE/bin/bs-broker"
}

BROKER_PID=""
start_warren() {
  local dir=$1
  rm -rf "$dir"; mkdir -p "$dir"
  "$CACHE/bin/bs-broker" serve --data-dir "$dir" --set amqp.listen=127.0.0.1:$W_AMQP \
    --set stream.listen=127.0.0.1:$W_STREAM --set http.listen=127.0.0.1:$W_HTTP \
    --set prometheus.listen=127.0.0.1:$W_PROM --set cluster.listen=127.0.0.1:$W_CLUSTER \
    ${BENCH_WARREN_ARGS:-} </dev/null >"$dir.log" 2>&1 &
  BROKER_PID=$!
  for _ in $(seq 1 100); do
    grep -q "warren started" "$dir.log" 2>/dev/null && return
    kill -0 "$BROKER_PID" 2>/dev/null || break
    sleep 0.2
  done
  log "warren did not start"; cat "$dir.log"; exit 1
}
stop_warren() {
  [ -n "$BROKER_PID" ] || return 0
  kill "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true
  BROKER_PID=""
}

RABBIT_DIR=""
rabbit_env() {
  export RABBITMQ_MNESIA_BASE=$RABBIT_DIR/mnesia RABBITMQ_LOG_BASE=$RABBIT_DIR/log \
    RABBITMQ_NODENAME=$R_NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_DIST_PORT=$R_DIST \
    RABBITMQ_ENABLED_PLUGINS_FILE=$RABBIT_DIR/enabled_plugins RABBITMQ_CONFIG_FILE=$RABBIT_DIR/rabbitmq.conf
}
start_rabbitmq() {
  RABBIT_DIR=$1
  rm -rf "$RABBIT_DIR"; mkdir -p "$RABBIT_DIR"
  # A private instance: its own plugins file (the stream plugin), ports and
  # data, so the system's /etc/rabbitmq is left alone.
  echo '[rabbitmq_stream].' > "$RABBIT_DIR/enabled_plugins"
  printf 'listeners.tcp.default = %s\nstream.listeners.tcp.1 = %s\n' "$R_AMQP" "$R_STREAM" > "$RABBIT_DIR/rabbitmq.conf"
  chown -R rabbitmq:rabbitmq "$RABBIT_DIR" 2>/dev/null || true
  rabbit_env
  (cd "$RABBIT_DIR" && setsid -f rabbitmq-server </dev/null >"$RABBIT_DIR/out.log" 2>&1)
  for _ in $(seq 1 90); do
    if timeout 10 rabbitmqctl -n "$R_NODE" await_startup >/dev/null 2>&1; then return; fi
    sleep 1
  done
  log "rabbitmq did not start"; tail -20 "$RABBIT_DIR/out.log"; exit 1
}
stop_rabbitmq() {
  [ -n "$RABBIT_DIR" ] || return 0
  rabbit_env
  timeout 60 rabbitmqctl -n "$R_NODE" stop >/dev/null 2>&1 || true
  RABBIT_DIR=""
}
cleanup() { stop_warren; stop_rabbitmq; }
trap cleanup EXIT

# set_read_ahead on|off [VHOST]: the vhost's stream-read-ahead (default /),
# at runtime.
set_read_ahead() {
  local v=true vh=${2:-%2F}; [ "$1" = off ] && v=false
  curl -sf -u guest:guest -X PUT -H 'content-type: application/json' \
    -d "{\"storage\": {\"stream-read-ahead\": $v}}" "http://127.0.0.1:$W_HTTP/api/vhosts/$vh" >/dev/null || true
  local got
  got=$(curl -sf -u guest:guest "http://127.0.0.1:$W_HTTP/api/vhosts/$vh" | python3 -c 'import json,sys; print(str(json.load(sys.stdin)["storage"]["stream-read-ahead"]).lower())' || true)
  [ "$got" = "$v" ] || { log "vhost $vh read-ahead is ${got:-unknown}, wanted $v"; return 1; }
}

# json_field FILE FIELD
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2], ""))' "$1" "$2"; }

source "$ROOT/hack/bench/steal.sh"
RUN_TICKS=$(cpu_ticks)
READ_TICKS=$RUN_TICKS

# record BROKER PROTOCOL SIZE CHUNK SETTING PASS JSONFILE WANT (after a
# read that started at READ_TICKS)
record() {
  local rate n err
  rate=$(json_field "$7" msg_per_s); n=$(json_field "$7" messages); err=$(json_field "$7" error)
  if [ "$n" != "$8" ] || [ -n "$err" ]; then
    log "$1 $2 size $3 chunk $4 $5: read $n of $8 messages ${err:+($err)}"; rate=0
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$rate" "$n" >> "$RESULTS"
  local st; st=$(stolen "$READ_TICKS")
  log "$1 $2 size $3 chunk $4 read-ahead $5 pass $6: $(printf '%.0f' "$rate") msg/s$([ "$st" -ge 5 ] && echo " ($st% of the CPU stolen by the hypervisor)")"
}

# fill URI STREAM SIZE CHUNK MESSAGES: exact chunks; checks the chunk count.
# Fails (the cell is skipped) if the fill fails or the chunks are not exact.
fill() {
  local j=$OUT/.fill.json chunks want
  rm -f "$j"
  if ! "$PERF" stream fill --uri "$1" --stream "$2" --size "$3" --chunk "$4" --messages "$5" \
    --window 1 --progress 0 --json "$j" >/dev/null; then
    log "fill $2 failed"; return 1
  fi
  chunks=$(json_field "$j" chunks); want=$(( ($5 + $4 - 1) / $4 ))
  [ "$chunks" = "$want" ] || { log "fill $2: $chunks chunks, wanted $want"; return 1; }
  log "filled $2: $5 messages of $3 bytes in $chunks chunks at $(printf '%.0f' "$(json_field "$j" msg_per_s)") msg/s"
}

# read_stream URI STREAM MESSAGES JSON / read_amqp URI QUEUE MESSAGES JSON
read_stream() {
  "$PERF" stream consume --uri "$1" --stream "$2" --offset first --messages "$3" \
    --credit "${5:-$CREDIT}" --progress 0 --json "$4" >/dev/null 2>&1 || true
}
read_amqp() {
  "$PERF" amqp consume --uri "$1" --queue "$2" --stream-offset first --qos 200 --messages "$3" \
    --client "${5:-amqp091}" --idle 10s --progress 0 --json "$4" >/dev/null 2>&1 || true
}

past_deadline() {
  [ -n "$DEADLINE" ] || return 1
  [ "$(date -u +%H%M)" \> "${DEADLINE/:/}" ] || [ "$(date -u +%H%M)" = "${DEADLINE/:/}" ]
}

# same_time SIZE CHUNK NAME N PROTOCOL...: for each protocol (stream, amqp),
# BENCH_SAME_TIME_PASSES pairs of reads of NAME in / and in bench-twin at
# the same time, one vhost with read-ahead on and the other off
# (alternating), recorded as protocol stream-same-time or amqp-same-time.
same_time() {
  local size=$1 chunk=$2 name=$3 n=$4 pass on off pa pb ja=$OUT/.read-a.json jb=$OUT/.read-b.json
  shift 4
  local protos=("$@") proto
  curl -sf -u guest:guest -X PUT -H 'content-type: application/json' -d '{}' \
    "http://127.0.0.1:$W_HTTP/api/vhosts/bench-twin" >/dev/null &&
  curl -sf -u guest:guest -X PUT -H 'content-type: application/json' \
    -d '{"configure":".*","write":".*","read":".*"}' "http://127.0.0.1:$W_HTTP/api/permissions/bench-twin/guest" >/dev/null ||
    { log "cannot create the vhost bench-twin"; return 0; }
  # Lengthen the stream for the fastest of the protocols (the first: the
  # stream protocol when it is read).
  local add got
  while set_read_ahead on; do
    rm -f "$ja"
    read_for "${protos[0]}" %2F "$name" "$ja"
    got=$(json_field "$ja" messages 2>/dev/null || true)
    # A margin: a pair's reads vary, and one may run faster than this one.
    [ -n "$got" ] && [ $((3 * got)) -ge $((2 * n)) ] || break
    if [ $((2 * n * size)) -gt "$SAME_MAX_BYTES" ]; then
      log "$name: read mostly in $SAME_DURATION, and doubling it would pass BENCH_SAME_TIME_MAX_BYTES"
      break
    fi
    add=$(( (n + chunk - 1) / chunk * chunk ))
    fill "$W_STREAM_URI" "$name" "$size" "$chunk" "$add" || return 0
    n=$((n + add))
  done
  fill "${W_STREAM_URI%/*}/bench-twin" "$name" "$size" "$chunk" "$n" || return 0
  for proto in "${protos[@]}"; do
    for pass in $(seq 1 "$SAME_PASSES"); do
      if [ "$pass" -gt 1 ] && past_deadline; then break; fi
      on=%2F off=bench-twin; [ $((pass % 2)) = 0 ] && on=bench-twin off=%2F
      if set_read_ahead on "$on" && set_read_ahead off "$off"; then
        rm -f "$ja" "$jb"
        READ_TICKS=$(cpu_ticks)
        read_for "$proto" "$on" "$name" "$ja" & pa=$!
        read_for "$proto" "$off" "$name" "$jb" & pb=$!
        wait "$pa" "$pb" # not the broker's pid
      fi
      for j in "$ja" "$jb"; do
        [ -f "$j" ] || echo '{}' > "$j"
        # A read that reached the end of the stream stopped early: not a pair.
        [ "$(json_field "$j" messages)" != "$n" ] || echo '{"error": "read to the end: lower BENCH_SAME_TIME_DURATION"}' > "$j"
      done
      record_for warren "$proto-same-time" "$size" "$chunk" on "$pass" "$ja"
      record_for warren "$proto-same-time" "$size" "$chunk" off "$pass" "$jb"
    done
  done
  set_read_ahead on bench-twin || true
  curl -sf -u guest:guest -X DELETE "http://127.0.0.1:$W_HTTP/api/queues/bench-twin/$name" >/dev/null || true
}

# read_for PROTOCOL VHOST STREAM JSON: a read from the first offset for
# BENCH_SAME_TIME_DURATION (or to the end), over the stream protocol or
# AMQP (--client wire); VHOST is %2F or bench-twin.
read_for() {
  if [ "$1" = stream ]; then
    "$PERF" stream consume --uri "${W_STREAM_URI%/*}/$2" --stream "$3" --offset first --messages 0 \
      --duration "$SAME_DURATION" --credit "$CREDIT" --progress 0 --json "$4" >/dev/null 2>&1 || true
  else
    "$PERF" amqp consume --uri "$W_AMQP_URI${2/\%2F/}" --queue "$3" --stream-offset first --qos 200 --messages 0 \
      --duration "$SAME_DURATION" --client wire --idle 10s --progress 0 --json "$4" >/dev/null 2>&1 || true
  fi
}

# record_for BROKER PROTOCOL SIZE CHUNK SETTING PASS JSONFILE: record for a
# read of a set duration (any count of messages).
record_for() {
  record "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$(json_field "$7" messages)"
}

warren_matrix() {
  log "warren: $MESSAGES messages per stream; sizes $SIZES; chunks $CHUNKS; $PROTOCOLS; $PASSES passes"
  start_warren "$DATA_ROOT/bench-streams"
  local size chunk pass passes proto ra name j=$OUT/.read.json order n want
  for size in $SIZES; do
    for chunk in $CHUNKS; do
      name=bench-s$size-c$chunk
      [ $((size * chunk)) -ge "$MIN_CHUNK_BYTES" ] || continue
      n=$MESSAGES passes=$PASSES
      if [ $((size * chunk)) -ge 4096 ]; then
        passes=$LARGE_PASSES
        if [ $((LARGE_BYTES / size)) -gt "$n" ]; then n=$(( LARGE_BYTES / size / chunk * chunk )); fi
      fi
      if ! kill -0 "$BROKER_PID" 2>/dev/null; then
        log "warren stopped (see $DATA_ROOT/bench-streams.log): starting a new one"
        start_warren "$DATA_ROOT/bench-streams"
      fi
      if ! fill "$W_STREAM_URI" "$name" "$size" "$chunk" "$n"; then
        curl -sf -u guest:guest -X DELETE "http://127.0.0.1:$W_HTTP/api/queues/%2F/$name" >/dev/null || true
        continue
      fi
      for pass in $(seq 1 "$passes"); do
        if [ "$pass" -gt 1 ] && past_deadline; then log "past $DEADLINE: no pass $pass"; break; fi
        # Alternate which setting goes first, so a drift in background load
        # falls on both.
        order="off on"; [ $((pass % 2)) = 0 ] && order="on off"
        for proto in $PROTOCOLS; do
          for ra in $order; do
            rm -f "$j"
            set_read_ahead "$ra" || echo '{}' > "$j"
            READ_TICKS=$(cpu_ticks)
            [ -f "$j" ] || \
            if [ "$proto" = stream ]; then read_stream "$W_STREAM_URI" "$name" "$n" "$j"
            else read_amqp "$W_AMQP_URI" "$name" "$MESSAGES" "$j" "$AMQP_CLIENT"; fi
            [ -f "$j" ] || echo '{}' > "$j"
            if [ "$proto" = stream ]; then want=$n; else want=$MESSAGES; fi
            record warren "$proto" "$size" "$chunk" "$ra" "$pass" "$j" "$want"
            if [ "$proto" = stream ] && [ "$size" = 12 ] && [ "$chunk" = 1 ] && [ "$CREDIT" != 10 ]; then
              READ_TICKS=$(cpu_ticks)
              rm -f "$j"
              read_stream "$W_STREAM_URI" "$name" "$MESSAGES" "$j" 10
              [ -f "$j" ] || echo '{}' > "$j"
              record warren stream-credit10 "$size" "$chunk" "$ra" "$pass" "$j" "$MESSAGES"
            fi
            if [ "$proto" = amqp ] && [ "$size" = 12 ] && [ "$chunk" = 1 ] && [ "$AMQP_CLIENT" != wire ]; then
              READ_TICKS=$(cpu_ticks)
              rm -f "$j"
              read_amqp "$W_AMQP_URI" "$name" "$MESSAGES" "$j" wire
              [ -f "$j" ] || echo '{}' > "$j"
              record warren amqp-wire "$size" "$chunk" "$ra" "$pass" "$j" "$MESSAGES"
            fi
          done
        done
      done
      if [ $((size * chunk)) -ge 4096 ] && [ "$SAME_PASSES" -gt 0 ] && [ -n "$SAME_PROTOCOLS" ]; then
        # shellcheck disable=SC2086 # a list
        same_time "$size" "$chunk" "$name" "$n" $SAME_PROTOCOLS
      fi
      curl -sf -u guest:guest -X DELETE "http://127.0.0.1:$W_HTTP/api/queues/%2F/$name" >/dev/null || true
    done
  done
  set_read_ahead on || true
  stop_warren
  rm -rf "$DATA_ROOT/bench-streams"
}

rabbit_matrix() {
  log "rabbitmq: $RABBIT_MESSAGES messages per stream; sizes $RABBIT_SIZES; chunks $CHUNKS; stream protocol"
  start_rabbitmq "$DATA_ROOT/bench-streams-rabbitmq"
  local size chunk pass name j=$OUT/.read.json
  for size in $RABBIT_SIZES; do
    for chunk in $CHUNKS; do
      name=bench-s$size-c$chunk
      fill "$R_STREAM_URI" "$name" "$size" "$chunk" "$RABBIT_MESSAGES" || continue
      for pass in $(seq 1 "$PASSES"); do
        if [ "$pass" -gt 1 ] && past_deadline; then break; fi
        READ_TICKS=$(cpu_ticks)
        rm -f "$j"
        # RabbitMQ 3.10 has no stream stats command: read a known count.
        read_stream "$R_STREAM_URI" "$name" "$RABBIT_MESSAGES" "$j"
        [ -f "$j" ] || echo '{}' > "$j"
        record rabbitmq stream "$size" "$chunk" - "$pass" "$j" "$RABBIT_MESSAGES"
      done
      rabbit_env; timeout 60 rabbitmqctl -n "$R_NODE" delete_queue "$name" >/dev/null 2>&1 || true
    done
  done
  stop_rabbitmq
  rm -rf "$DATA_ROOT/bench-streams-rabbitmq"
}

headlines() {
  local j=$OUT/.read.json n=$MESSAGES best=0 rate pass
  # One stream-protocol consumer, 12-byte messages in 300-message chunks
  # (read-ahead at its default, on; the chunks are far above its limit).
  start_warren "$DATA_ROOT/bench-streams"
  fill "$W_STREAM_URI" bench-c300 12 300 "$n" || true
  for pass in $(seq 1 "$PASSES"); do
    READ_TICKS=$(cpu_ticks)
    rm -f "$j"; read_stream "$W_STREAM_URI" bench-c300 "$n" "$j"; [ -f "$j" ] || echo '{}' > "$j"
    record warren stream-c300 12 300 on "$pass" "$j" "$n"
  done
  stop_warren
  rm -rf "$DATA_ROOT/bench-streams"
  # Publishing with confirms, one publisher, 12-byte messages, on a data
  # directory on disk (every confirm waits for its group-commit fsync).
  start_warren "$DISK_ROOT/bench-streams-disk"
  for pass in $(seq 1 "$PASSES"); do
    rm -f "$j"
    "$PERF" stream publish --uri "$W_STREAM_URI" --stream "bench-publish-$pass" --size 12 \
      --messages "$((n * 5))" --progress 0 --json "$j" >/dev/null 2>&1 || true
    [ -f "$j" ] || echo '{}' > "$j"
    rate=$(json_field "$j" msg_per_s)
    printf 'warren\tstream-publish\t12\t-\t-\t%s\t%.0f\t%s\n' "$pass" "${rate:-0}" "$(json_field "$j" messages)" >> "$RESULTS"
    log "warren stream publish with confirms pass $pass: $(printf '%.0f' "${rate:-0}") msg/s"
  done
  stop_warren
  rm -rf "$DISK_ROOT/bench-streams-disk"
}

install_deps
warren_matrix
if [ "$HEADLINE" = 1 ]; then headlines; fi
if [ "$RABBIT" = 1 ]; then rabbit_matrix; fi

machine="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
machine="$machine; CPU stolen by the hypervisor during the run: $(stolen "$RUN_TICKS")%"
[ "$RABBIT" = 1 ] && machine="$machine; RabbitMQ $(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null) (Debian)"
cmd="BENCH_STREAM_MESSAGES=$MESSAGES BENCH_STREAM_CREDIT=$CREDIT BENCH_SIZES=${SIZES// /,} BENCH_CHUNKS=${CHUNKS// /,} BENCH_PROTOCOLS=${PROTOCOLS// /,} BENCH_PASSES=$PASSES${DEADLINE:+ BENCH_DEADLINE=$DEADLINE} BENCH_RABBITMQ=$RABBIT"
[ "$LARGE_BYTES" != 0 ] && cmd="$cmd BENCH_LARGE_BYTES=$LARGE_BYTES"
[ "$LARGE_PASSES" != "$PASSES" ] && cmd="$cmd BENCH_LARGE_PASSES=$LARGE_PASSES"
[ "$MIN_CHUNK_BYTES" != 0 ] && cmd="$cmd BENCH_MIN_CHUNK_BYTES=$MIN_CHUNK_BYTES"
[ "$AMQP_CLIENT" != amqp091 ] && cmd="$cmd BENCH_AMQP_CLIENT=$AMQP_CLIENT"
[ "$SAME_PASSES" != 24 ] && cmd="$cmd BENCH_SAME_TIME_PASSES=$SAME_PASSES"
[ "$SAME_DURATION" != 1s ] && cmd="$cmd BENCH_SAME_TIME_DURATION=$SAME_DURATION"
[ "$SAME_MAX_BYTES" != 4294967296 ] && cmd="$cmd BENCH_SAME_TIME_MAX_BYTES=$SAME_MAX_BYTES"
[ "${BENCH_SAME_TIME_PROTOCOLS:-amqp}" != amqp ] && cmd="$cmd BENCH_SAME_TIME_PROTOCOLS=$BENCH_SAME_TIME_PROTOCOLS"
[ "$RABBIT" = 1 ] && cmd="$cmd BENCH_RABBITMQ_MESSAGES=$RABBIT_MESSAGES BENCH_RABBITMQ_SIZES=${RABBIT_SIZES// /,}"
cmd="$cmd make bench-streams"
args=(--results "$RESULTS" --machine "$machine" --command "$cmd" --json "$OUT/bench-streams.json"
      --chart "$OUT/bench-streams.png" --table "$OUT/bench-streams-$STAMP.md")
[ "${BENCH_WRITE_DOCS:-0}" = 1 ] && args+=(--write-docs "$ROOT/docs/benchmarks.md" --docs-chart "$ROOT/docs/bench-streams.png")
"$CACHE/venv/bin/python" "$ROOT/hack/bench/streams.py" "${args[@]}"
