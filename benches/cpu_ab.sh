#!/usr/bin/env bash
# CPU per request of replicad binaries, measured alternately in one run: the demo server pinned to
# core 0, wrk (1 thread) to core 1; the server's utime+stime (/proc/PID/stat) over the load divided
# by the requests answered. Steadier than req/s on this shared machine (a request's CPU does not
# depend on how long another process holds the other core or the disk).
#   POST …/chat/history at c64 (one durable write each, in group commits)
#   POST …/chat/completions at c32 (embedded generator, two history items and the token usage)
# Usage: bash benches/cpu_ab.sh BINARY... (ROUNDS=2 and D=5s in the environment)
# Prints per round and binary: req/s and µs of CPU per request. Benchmarks assert nothing.
set -euo pipefail
ROUNDS=${ROUNDS:-2}; D=${D:-5s}
BINS=(); for b in "$@"; do BINS+=("$(realpath "$b")"); done
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
source benches/demo.sh
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }
# "req/s µs-per-request" of wrk at $1 connections with script $2 against URL $3.
measure() {
  local before after out n rps
  before=$(cpu_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$1" -d"$D" -s "$2" "$3")
  after=$(cpu_ticks)
  n=$(awk '/requests in/ { print $1 }' <<< "$out")
  rps=$(awk '/Requests\/sec/ { printf "%d", $2 }' <<< "$out")
  echo "$rps $(awk "BEGIN { printf \"%.0f\", ($after - $before) / $TICK * 1e6 / $n }")"
}
for r in $(seq "$ROUNDS"); do
  for bin in "${BINS[@]}"; do
    demo_start "$bin" 0
    read -r hrps hcpu < <(measure 64 "$DIR/history.lua" "$BASE/v1/replicas/$REPLICA/chat/history")
    read -r crps ccpu < <(measure 32 "$DIR/chat.lua" "$BASE/v1/replicas/$REPLICA/chat/completions")
    echo "round $r $bin: history c64 $hrps req/s, $hcpu µs CPU each; completions c32 $crps req/s, $ccpu µs CPU each"
    demo_stop
  done
done
