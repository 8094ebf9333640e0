#!/usr/bin/env bash
# Embedded completions (BM25 alone) of replicad binaries beside the minimal hyper server
# (examples/hyper_ceiling.rs), alternated in one run: each server pinned to core 0, wrk (1 thread,
# 32 connections) to core 1. Per round and binary: the demo (`benches/demo.sh`) answers
# `POST …/chat/completions` (its five questions in turn, stored in the history) for D; the
# server's utime+stime (/proc/PID/stat) over the load divided by the completions answered; then
# the hyper server answers GETs with a completion's bytes (as benches/table.sh measures it).
# Usage: bash benches/completion_ab.sh BINARY... (ROUNDS=3 and D=8s in the environment; CEILING,
# the hyper_ceiling binary, defaults to target/release/examples/hyper_ceiling)
# Prints per round: each binary's req/s and µs of CPU per completion, the hyper server's req/s
# and µs of CPU per request. Benchmarks assert nothing.
set -euo pipefail
ROUNDS=${ROUNDS:-3}; D=${D:-8s}
BINS=(); for b in "$@"; do BINS+=("$(realpath "$b")"); done
cd "$(dirname "$0")/.."
CEILING=$(realpath "${CEILING:-target/release/examples/hyper_ceiling}")
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
source benches/demo.sh
TICK=$(getconf CLK_TCK)
KEEP=$(mktemp -d) # a completion's bytes, for the hyper server
trap 'rm -rf "$KEEP"' EXIT
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# "req/s µs-per-request" of wrk (32 connections, script $2 if any) against URL $3, server process $1.
measure() {
  local before after out n rps
  before=$(cpu_ticks "$1")
  out=$(taskset -c 1 wrk -t1 -c32 -d"$D" ${2:+-s "$2"} "$3")
  after=$(cpu_ticks "$1")
  if grep -q Non-2xx <<< "$out"; then echo "non-2xx answers" >&2; exit 1; fi
  n=$(awk '/requests in/ { print $1 }' <<< "$out")
  rps=$(awk '/Requests\/sec/ { printf "%d", $2 }' <<< "$out")
  echo "$rps $(awk "BEGIN { printf \"%.0f\", ($after - $before) / $TICK * 1e6 / $n }")"
}
for r in $(seq "$ROUNDS"); do
  line="round $r:"
  for bin in "${BINS[@]}"; do
    demo_start "$bin" 0
    read -r rps cpu < <(measure "$PID" "$DIR/chat.lua" "$BASE/v1/replicas/$REPLICA/chat/completions")
    curl -s "$BASE/v1/replicas/$REPLICA/chat/completions" -H "X-ORGANIZATION-SECRET: $KEY" \
      -H 'content-type: application/json' -d '{"content": "What is a module?"}' > "$DIR/body.json"
    cp "$DIR/body.json" "$KEEP/"
    line="$line $bin $rps req/s $cpu µs;"
    demo_stop
  done
  out=$(mktemp)
  taskset -c 0 "$CEILING" --body "$KEEP/body.json" > "$out" & CEIL=$!
  until grep -q listening "$out" 2>/dev/null; do sleep 0.05; done
  # a GET without a wrk script, as benches/table.sh measures the hyper server (wrk's Lua
  # `request` function, which the completions need, caps wrk itself well below the server)
  read -r crps ccpu < <(measure "$CEIL" "" "$(sed -n 's/^listening on //p' "$out")/v1/replicas/x/chat/completions")
  kill "$CEIL"; wait "$CEIL" 2>/dev/null || true; rm -f "$out"
  echo "$line hyper_ceiling $crps req/s $ccpu µs"
done
