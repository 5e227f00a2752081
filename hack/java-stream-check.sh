#!/usr/bin/env bash
# java-stream-check.sh: run hack/java-stream/Check.java, which drives Warren
# with the official RabbitMQ Java stream client (fetched from Maven Central,
# version pinned in hack/java-stream/pom.xml), against a broker it starts
# on free loopback ports (or against URI, if given).
# Usage: hack/java-stream-check.sh [rabbitmq-stream://guest:guest@host:5552/%2f]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CACHE:-$ROOT/hack/.cache/java-stream}
mkdir -p "$CACHE"
cp "$ROOT/hack/java-stream/pom.xml" "$CACHE/pom.xml"
if [ ! -d "$CACHE/lib" ] || ! cmp -s "$ROOT/hack/java-stream/pom.xml" "$CACHE/lib/.pom"; then
  (cd "$CACHE" && mvn -q dependency:copy-dependencies -DoutputDirectory=lib)
  cp "$ROOT/hack/java-stream/pom.xml" "$CACHE/lib/.pom"
fi
javac -d "$CACHE" -cp "$CACHE/lib/*" "$ROOT/hack/java-stream/Check.java"
URI=${1:-}
PID=""
if [ -z "$URI" ]; then
  go build -o "$CACHE/warren" "$ROOT/cmd/warren"
  DATA=$(mktemp -d)
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$CACHE/warren" serve --data-dir "$DATA" --set stream.listen=127.0.0.1:$PORT \
    --set amqp.listen=127.0.0.1:0 --set http.listen= --set prometheus.listen= --set cluster.listen=127.0.0.1:0 \
    >"$DATA/warren.log" 2>&1 &
  PID=$!
  trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
  URI="rabbitmq-stream://guest:guest@127.0.0.1:$PORT/%2f"
fi
java -cp "$CACHE/lib/*:$CACHE" Check "$URI"
