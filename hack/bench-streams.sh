#!/usr/bin/env bash
# bench-streams.sh: Warren's version of RabbitMQ's stream read-ahead study.
# For each message size and chunk size it fills a stream with exact chunks
# (warren-perf stream fill, one chunk per confirmed publish frame), then
# reads it from the first offset with read-ahead off and on, over the
# stream protocol (warren-perf stream consume, CREDIT chunks of credit,
# default 100, granted back in batches of half) and over AMQP 0.9.1
# (warren-perf amqp consume, prefetch 200).
# It writes the table between the streams markers of docs/benchmarks.md and
# a chart, docs/bench-streams.png.
#
# Environment: MESSAGES (per stream, default 1000000), MAX_CHUNKS (cap of
# chunks per stream, default 50000: small chunk sizes get fewer messages so
# that a fill, one fsync round trip per chunk, stays bounded), RUNS (each
# consume is run this many times and the best kept, default 3), CREDIT,
# SIZES, CHUNKS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=$ROOT/hack/.cache/bench-streams
MESSAGES=${MESSAGES:-1000000}
MAX_CHUNKS=${MAX_CHUNKS:-50000}
RUNS=${RUNS:-3}
RUNS_AMQP=${RUNS_AMQP:-1}
SIZES=${SIZES:-"12 48 256 512 1024"}
CHUNKS=${CHUNKS:-"1 2 4 6 8 15 32 64 128 384"}
CREDIT=${CREDIT:-100}
mkdir -p "$CACHE"
log() { echo "bench-streams: $*" >&2; }

go build -o "$CACHE/warren-streams-bench" "$ROOT/cmd/warren"
go build -o "$CACHE/warren-perf" "$ROOT/cmd/warren-perf"
PERF=$CACHE/warren-perf

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SPORT=$(free_port); APORT=$(free_port); HPORT=$(free_port)
DATA=$CACHE/data
rm -rf "$DATA"
"$CACHE/warren-streams-bench" serve --data-dir "$DATA" --set stream.listen=127.0.0.1:$SPORT \
  --set amqp.listen=127.0.0.1:$APORT --set http.listen=127.0.0.1:$HPORT --set prometheus.listen= \
  --set cluster.listen=127.0.0.1:0 </dev/null >"$CACHE/warren.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do grep -q "warren started" "$CACHE/warren.log" 2>/dev/null && break; sleep 0.2; done
SURI="rabbitmq-stream://guest:guest@127.0.0.1:$SPORT/%2f"
AURI="amqp://guest:guest@127.0.0.1:$APORT/"
read_ahead() {
  curl -sf -u guest:guest -X PUT -H 'content-type: application/json' \
    -d "{\"storage\": {\"stream-read-ahead\": $1, \"stream-read-ahead-limit\": 4096}}" \
    "http://127.0.0.1:$HPORT/api/vhosts/%2F" >/dev/null
}

RESULTS=$CACHE/results.tsv
: > "$RESULTS"
rate() { python3 -c 'import json,sys; print(int(json.load(sys.stdin)["msg_per_s"]))'; }
# best N CMD...: the highest of N runs of a command printing a JSON result
# (the machine may be shared: the best run is the least disturbed one).
best() {
  local b=0 r runs=$1
  shift
  for _ in $(seq 1 "$runs"); do
    r=$("$@" --progress 0 --json - | tail -1 | rate)
    [ "$r" -gt "$b" ] && b=$r
  done
  echo "$b"
}
for size in $SIZES; do
  # Fills of one message size run in parallel: each costs one fsync round
  # trip per chunk, and streams sync independently.
  pids=()
  for chunk in $CHUNKS; do
    n=$(( MESSAGES < MAX_CHUNKS * chunk ? MESSAGES : MAX_CHUNKS * chunk ))
    log "fill s-$size-$chunk: $n messages of $size bytes, $chunk per chunk"
    "$PERF" stream fill --uri "$SURI" --stream "s-$size-$chunk" --messages "$n" --chunk "$chunk" --size "$size" --progress 0 >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for chunk in $CHUNKS; do
    n=$(( MESSAGES < MAX_CHUNKS * chunk ? MESSAGES : MAX_CHUNKS * chunk ))
    s="s-$size-$chunk"
    for ra in false true; do
      read_ahead $ra
      st=$(best "$RUNS" "$PERF" stream consume --uri "$SURI" --stream "$s" --credit "$CREDIT")
      am=$(best "$RUNS_AMQP" "$PERF" amqp consume --uri "$AURI" --queue "$s" --stream-offset first --qos 200 --messages "$n")
      printf 'warren\t%s\t%s\t%s\t%s\t%s\t%s\n' "$size" "$chunk" "$n" "$ra" "$st" "$am" >> "$RESULTS"
      log "$s read-ahead $ra: stream $st msg/s, amqp $am msg/s"
    done
  done
done
read_ahead true

python3 - "$RESULTS" "$ROOT/docs/benchmarks.md" "$ROOT/docs/bench-streams.png" "$MESSAGES" "$MAX_CHUNKS" <<'PY'
import sys, collections, platform, os, datetime
res, doc, png, messages, max_chunks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
rows = collections.OrderedDict()
for line in open(res):
    b, size, chunk, n, ra, st, am = line.split()
    rows.setdefault((int(size), int(chunk), int(n)), {})[ra] = (int(st), int(am))
def ratio(a, b):
    return f"{a / b:.1f}×" if b else "-"
out = ["<!-- streams:begin -->", "## Streams: read-ahead", "",
       f"`make bench-streams` ({datetime.date.today()}, {os.cpu_count()} CPUs, {platform.machine()}): "
       f"streams of up to {messages} messages (at most {max_chunks} chunks each) read from the first offset "
       "by one consumer (stream protocol: `warren-perf stream consume --credit 100`; AMQP: `warren-perf amqp consume "
       "--qos 200`); msg/s with read-ahead off and on (limit 4096 bytes), best of 3 runs over the stream protocol, one run over AMQP. Measured on a machine "
       "shared with other work: compare rows of one run, not runs.", "",
       "| size | msgs/chunk | messages | stream off | stream on | ratio | AMQP off | AMQP on | ratio |",
       "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for (size, chunk, n), v in rows.items():
    off, on = v.get("false", (0, 0)), v.get("true", (0, 0))
    out.append(f"| {size} | {chunk} | {n} | {off[0]:,} | {on[0]:,} | {ratio(on[0], off[0])} | {off[1]:,} | {on[1]:,} | {ratio(on[1], off[1])} |")
out += ["", "![stream consume rate by chunk size](bench-streams.png)", "<!-- streams:end -->"]
section = "\n".join(out) + "\n"
text = open(doc).read() if os.path.exists(doc) else "# Benchmarks\n"
if "<!-- streams:begin -->" in text:
    a = text.index("<!-- streams:begin -->"); b = text.index("<!-- streams:end -->") + len("<!-- streams:end -->\n")
    text = text[:a] + section + text[b:]
else:
    text = text.rstrip("\n") + "\n\n" + section
open(doc, "w").write(text)
try:
    import matplotlib
except ImportError:
    import subprocess
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"], check=False)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, idx, title in ((axes[0], 0, "stream protocol"), (axes[1], 1, "AMQP 0.9.1, prefetch 200")):
        for size in sorted({k[0] for k in rows}):
            ks = [k for k in rows if k[0] == size]
            xs = [k[1] for k in ks]
            ax.plot(xs, [rows[k].get("true", (0, 0))[idx] for k in ks], marker="o", label=f"{size} B, read-ahead on")
            ax.plot(xs, [rows[k].get("false", (0, 0))[idx] for k in ks], marker="x", linestyle="--", label=f"{size} B, off")
        ax.set_xscale("log"); ax.set_yscale("log"); ax.set_title(title); ax.set_xlabel("messages per chunk")
    axes[0].set_ylabel("msg/s"); axes[1].legend(fontsize=7)
    fig.tight_layout(); fig.savefig(png, dpi=100)
except Exception as e:
    print("bench-streams: no chart:", e, file=sys.stderr)
PY
log "table written to docs/benchmarks.md"
