#!/usr/bin/env bash
# The table engines side by side, in one run (ROUNDS rounds, alternating): the demo server with
# its tables in redb; in PostgreSQL, one node; and in PostgreSQL, three nodes over one database,
# the load split between them. The replicad processes and the PostgreSQL server are pinned to
# core 0 (the server side shares one core whatever its shape), wrk (1 thread per node) to core 1.
#   POST …/chat/history at c64 in all (one durable write each, in group commits)
#   POST …/chat/completions at c32 in all (embedded generator, two history items and the usage)
#   GET  …/replicas/{id} at c32 in all (a hot read: the read cache's, unless EXTRA_ARGS turns it
#        off with --read-cache-bytes 0)
# Reported per run: requests/s, and CPU per request in µs of the replicad processes and of the
# PostgreSQL server (utime+stime from /proc over the load, divided by the requests answered).
# Usage: eval "$(REPLICAD_TEST_POSTGRES_FSYNC=on bash .ci/install-postgres)"
#        bash benches/stores.sh target/release/replicad     (ROUNDS=2, D=5s and EXTRA_ARGS, flags
#        of every node, in the environment)
# Benchmarks assert nothing.
set -euo pipefail
BIN=$(realpath "$1"); ROUNDS=${ROUNDS:-2}; D=${D:-5s}; EXTRA_ARGS=${EXTRA_ARGS:-}
: "${REPLICAD_TEST_POSTGRES:?start PostgreSQL first: eval \"\$(bash .ci/install-postgres)\"}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
source benches/demo.sh
source benches/pg.sh
TICK=$(getconf CLK_TCK)
POSTMASTER=$(head -1 "$REPLICAD_TEST_POSTGRES_DIR/data/postmaster.pid")

# CPU ticks (utime+stime) of the given PIDs and of every PostgreSQL process.
ticks() { for p in "$@"; do cat "/proc/$p/stat" 2>/dev/null; done | awk '{ t += $14 + $15 } END { print t + 0 }'; }
pg_ticks() { ticks $(pgrep -P "$POSTMASTER") "$POSTMASTER"; }

# "req/s replicad-µs pg-µs" of wrk at $1 connections in all with script $2 on path $3, against
# every base URL that follows (the connections split between them).
measure() {
  local conns=$1 script=$2 path=$3; shift 3
  local pids=("$PID" "${XPIDS[@]}") r0 p0 r1 p1 n=0 rps=0 out
  r0=$(ticks "${pids[@]}"); p0=$(pg_ticks)
  local outs=()
  for base in "$@"; do
    out=$(mktemp); outs+=("$out")
    taskset -c 1 wrk -t1 -c"$((conns / $#))" -d"$D" -s "$script" "$base$path" > "$out" &
  done
  wait # (measure runs in a subshell: its jobs are the wrk processes)
  r1=$(ticks "${pids[@]}"); p1=$(pg_ticks)
  for out in "${outs[@]}"; do
    n=$((n + $(awk '/requests in/ { print $1 }' "$out")))
    rps=$((rps + $(awk '/Requests\/sec/ { printf "%d", $2 }' "$out")))
    rm -f "$out"
  done
  echo "$rps $(awk "BEGIN { printf \"%.0f %.0f\", ($r1 - $r0) / $TICK * 1e6 / $n, ($p1 - $p0) / $TICK * 1e6 / $n }")"
}

run() {
  local mode=$1 url=""
  XDIRS=(); XPIDS=(); XBASES=()
  case $mode in
    redb) DEMO_ARGS="$EXTRA_ARGS" ;;
    *) url=$(fresh_db); DEMO_ARGS="--store $url $EXTRA_ARGS" ;;
  esac
  taskset -apc 0 "$POSTMASTER" >/dev/null
  export DEMO_ARGS
  demo_start "$BIN" 0
  printf 'wrk.headers["X-ORGANIZATION-SECRET"] = "%s"\n' "$KEY" > "$DIR/get.lua"
  if [ "$mode" = pg3 ]; then
    node_start "$url"; node_start "$url"
    sleep 3 # their search indexes are built from the tables at start
  fi
  local bases=("$BASE" "${XBASES[@]}")
  read -r hrps hcpu hpg < <(measure 64 "$DIR/history.lua" "/v1/replicas/$REPLICA/chat/history" "${bases[@]}")
  read -r crps ccpu cpg < <(measure 32 "$DIR/chat.lua" "/v1/replicas/$REPLICA/chat/completions" "${bases[@]}")
  read -r grps gcpu gpg < <(measure 32 "$DIR/get.lua" "/v1/replicas/$REPLICA" "${bases[@]}")
  echo "round $r $mode: history c64 $hrps req/s, CPU µs each: replicad $hcpu, PostgreSQL $hpg;" \
    "completions c32 $crps req/s, replicad $ccpu, PostgreSQL $cpg; GET replica c32 $grps req/s, replicad $gcpu, PostgreSQL $gpg"
  for p in "${XPIDS[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
  rm -rf "${XDIRS[@]}"
  demo_stop
}

for r in $(seq "$ROUNDS"); do
  for mode in redb pg1 pg3; do run "$mode"; done
done
