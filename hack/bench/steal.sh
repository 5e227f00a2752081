# Sourced by the benchmark scripts (bash).
#
# cpu_ticks prints the steal and total ticks of /proc/stat's cpu line. On a
# virtual machine steal is time the hypervisor ran others while this one
# wanted the CPU: a read with much of it measured a slower machine than its
# neighbours (the scripts log it per measurement, and for the run in the report).
cpu_ticks() { awk '/^cpu /{t=0; for (i=2; i<=NF; i++) t+=$i; print $9, t}' /proc/stat; }
# stolen T0: the percentage of CPU time stolen since cpu_ticks printed T0.
stolen() {
  local s0 t0 s1 t1
  read -r s0 t0 <<<"$1"; read -r s1 t1 <<<"$(cpu_ticks)"
  [ "$t1" -gt "$t0" ] && echo $(( (s1 - s0) * 100 / (t1 - t0) )) || echo 0
}
