# Sourced by hack/bench.sh (bash): where the CPU goes per message.
#
# cpu_sample BROKER_PID CLIENT_PID prints one line of clock ticks (USER_HZ):
#   broker  the broker process, all its threads (utime + stime; the kernel
#           work a thread's system calls do, loopback TCP included, counts)
#   client  PerfTest's producer, consumer and connection threads (not the
#           JVM's compiler and GC threads, which are busy at start-up)
#   busy    the machine's non-idle ticks (all CPUs), and
#   total   all ticks (all CPUs)
# Two samples, each taken as PerfTest prints a per-second line
# (await_report), and the messages those lines report received between
# them give CPU microseconds per message (cpu_per_message).
cpu_sample() {
  local bpid=$1 cpid=$2 b c
  b=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$bpid/stat" 2>/dev/null) || b=0
  # /proc/PID/task/TID/stat: the thread's name is in parentheses and may
  # hold spaces ("AMQP Connection"); fields after it start at the state.
  c=$(cat /proc/"$cpid"/task/*/stat 2>/dev/null | awk '
    { name = $0; sub(/^[^(]*\(/, "", name); sub(/\) [^)]*$/, "", name)
      rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
      if (name ~ /^(perf-test-consu|perf-test-produ|AMQP Connection)/) t += f[12] + f[13] }
    END { print t + 0 }') || c=0
  awk -v b="${b:-0}" -v c="${c:-0}" '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print b, c, t - $5 - $6, t }' /proc/stat
}

# cpu_per_message SAMPLE0 SAMPLE1 MESSAGES prints broker and client CPU
# microseconds per message and the machine's idle percentage between the
# two samples ("- - -" when no message was received).
cpu_per_message() {
  awk -v a="$1" -v b="$2" -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    if (n <= 0 || y[4] <= x[4]) { print "- - -"; exit }
    us = 1e6 / hz
    printf "%.2f %.2f %.0f\n", (y[1] - x[1]) * us / n, (y[2] - x[2]) * us / n, 100 - 100 * (y[3] - x[3]) / (y[4] - x[4]) }'
}

# received_between OUTPUT T1 T2 prints the messages PerfTest reported
# received (sent, for a run without consumers) in its per-second lines
# stamped after T1 and up to T2 seconds.
received_between() {
  awk -v t1="$2" -v t2="$3" '
    / time [0-9.]+ s, sent: / {
      t = $0; sub(/.* time /, "", t); sub(/ s,.*/, "", t)
      s = $0; sub(/.*sent: /, "", s); sub(/ msg\/s.*/, "", s)
      r = $0; if (r ~ /received: /) { sub(/.*received: /, "", r); sub(/ msg\/s.*/, "", r) } else r = 0
      if (t + 0 > t1 && t + 0 <= t2) { n += (r > 0 ? r : s) * (t - last) }
      last = t }
    END { printf "%d\n", n }' "$1"
}

# await_report OUTPUT PID T STARTED waits until PerfTest (process PID,
# launched at STARTED, date +%s.%N, writing OUTPUT) has printed its
# per-second line for T seconds or later, and prints that line's time; it
# prints nothing if PerfTest ended first. It sleeps until a second before
# that line is due (PerfTest's clock starts after the JVM's), then looks ten
# times a second: the run is not disturbed by it.
await_report() {
  local t give_up=$(( SECONDS + $3 + 60 ))
  sleep "$(awk -v s="$4" -v t="$3" -v now="$(date +%s.%N)" 'BEGIN { d = s + t - 1 - now; printf "%.2f", (d > 0 ? d : 0) }')"
  while kill -0 "$2" 2>/dev/null && [ "$SECONDS" -lt "$give_up" ]; do
    t=$(awk -v w="$3" '/ time [0-9.]+ s, sent: / { t = $0; sub(/.* time /, "", t); sub(/ s,.*/, "", t) }
      END { if (t != "" && t + 0 >= w + 0) print t }' "$1" 2>/dev/null) || t=""
    if [ -n "$t" ]; then echo "$t"; return; fi
    sleep 0.1
  done
}
