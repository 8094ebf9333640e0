#!/usr/bin/env bash
# The benchmark table (docs/benchmarks.md), in one run: replicad (`serve --demo`,
# release) pinned to core 0, wrk (1 thread) pinned to core 1; each read is measured beside the
# minimal hyper server (examples/hyper_ceiling.rs, same core) answering the same bytes, and its
# ratio printed.
#   reads:  replica read, replica list (24 items), history list (20 items), knowledge-base entry,
#           each with the read cache off (the handler) and on (the answer kept until a commit)
#   writes: POST …/chat/history at c1 and c64, beside SQLite (WAL, synchronous=FULL, one row
#           per transaction, same filesystem; benches/sqlite_rows.py) with one writer: SQLite
#           takes one writer at a time, and more writer threads only add lock waits (64 threads
#           measured 10× slower than one here)
#   completions (embedded), RSS idle (after the demo's first start, which ingests and indexes the
#   sample; and after a restart on the same data), and after the load
# Usage: bash benches/table.sh [DURATION=8s] [CONNECTIONS=32]
# Prints Markdown table rows. Benchmarks assert nothing about time.
set -euo pipefail
DURATION=${1:-8s}; CONNECTIONS=${2:-32}
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
[ -n "${NO_BUILD:-}" ] || cargo build --release -q --bin replicad --example hyper_ceiling
source benches/demo.sh
trap 'demo_stop; [ -n "${CEIL:-}" ] && kill "$CEIL" 2>/dev/null; true' EXIT

# wrk's figures as "req/s p50 p99" (latencies in ms).
wrk_row() {
  local c=$1; shift
  taskset -c 1 wrk -t1 -c"$c" -d"$DURATION" --latency "$@" | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 } / 50%/ { p50 = ms($2) } / 99%/ { p99 = ms($2) } /Non-2xx/ { bad = $NF }
    END { if (bad) { print "non-2xx answers: " bad > "/dev/stderr"; exit 1 } printf "%d %.2f %.2f\n", rps, p50, p99 }'
}
rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

api() { curl -sf "$BASE$1" "${AUTH[@]}" "${@:2}"; }
# The demo plus 23 replicas (a list of 24), 20 history items and the first entry's id.
start_with_data() {
  demo_start ./target/release/replicad 0
  AUTH=(-H "X-ORGANIZATION-SECRET: $KEY")
  sleep 6 # idle: the indexer closes the index writer after 5 s without work (search::WRITER_IDLE)
  RSS_IDLE=$(rss_mb "$PID")
  for i in $(seq 23); do
    api /v1/replicas -H 'content-type: application/json' -o /dev/null -d "{\"name\":\"Bench $i\",\"slug\":\"bench-$i\",
      \"shortDescription\":\"bench\",\"greeting\":\"Hi\",\"ownerID\":\"owner@demo.replicad.local\",\"llm\":{\"model\":\"replicad-extractive\"}}" \
      || { echo "replica $i not made" >&2; exit 1; }
  done
  for i in $(seq 20); do
    api "/v1/replicas/$REPLICA/chat/history" -H 'content-type: application/json' -o /dev/null \
      -d "{\"content\":\"history item $i of the list benchmark\"}"
  done
  ENTRY=$(api "/v1/replicas/$REPLICA/knowledge-base?pageSize=1" | python3 -c 'import sys,json; print(json.load(sys.stdin)["items"][0]["id"])')
}

# The idle RSS of the server restarted on the same data directory (nothing to ingest or index).
restart_rss() {
  kill "$PID"; wait "$PID" 2>/dev/null || true
  : > "$DIR/out"
  taskset -c 0 ./target/release/replicad serve --listen 127.0.0.1:0 --data-dir "$DIR" --log warn > "$DIR/out" 2>> "$DIR/err" & PID=$!
  until grep -q listening "$DIR/out" 2>/dev/null; do sleep 0.1; done
  sleep 1
  rss_mb "$PID"
}

read_row() {
  local name=$1 path=$2 body="$DIR/body.json"
  api "$path" -o "$body"
  read -r rps p50 p99 < <(wrk_row "$CONNECTIONS" "${AUTH[@]}" "$BASE$path")
  local out; out=$(mktemp -p "$DIR")
  taskset -c 0 ./target/release/examples/hyper_ceiling --body "$body" > "$out" & CEIL=$!
  until grep -q listening "$out" 2>/dev/null; do sleep 0.05; done
  read -r crps cp50 _ < <(wrk_row "$CONNECTIONS" "$(sed -n 's/^listening on //p' "$out")$path")
  kill "$CEIL"; wait "$CEIL" 2>/dev/null || true; CEIL=
  echo "| $name ($(wc -c < "$body") B) | $rps | $p50 | $p99 | $crps | $cp50 | $(awk "BEGIN { printf \"%.0f %%\", 100 * $rps / $crps }") |"
}
read_rows() {
  read_row "GET replica$1" "/v1/replicas/$REPLICA"
  read_row "GET replica list (24)$1" "/v1/replicas?pageSize=24"
  read_row "GET history (20)$1" "/v1/replicas/$REPLICA/chat/history?limit=20"
  read_row "GET knowledge-base entry$1" "/v1/replicas/$REPLICA/knowledge-base/$ENTRY"
}

echo "| operation | replicad req/s | p50 ms | p99 ms | hyper server req/s | p50 ms | ratio |"
echo "|---|---|---|---|---|---|---|"
# First with the read cache off (every read runs its handler: what a read costs right after a
# commit), then with it on (the default: answers kept until the next commit, http::read_cache).
DEMO_ARGS="--read-cache-bytes 0" start_with_data
read_rows ", handler"
demo_stop
start_with_data
read_rows ", kept answer"

echo
SQLITE=$(taskset -c 0 python3 benches/sqlite_rows.py --dir "$DIR" --writers 1 --seconds "${DURATION%s}")
echo "| durable write | rows/s | p50 ms | ratio to SQLite ($SQLITE rows/s) |"
echo "|---|---|---|---|"
for c in 1 64; do
  read -r rps p50 _ < <(wrk_row "$c" -s "$DIR/history.lua" "$BASE/v1/replicas/$REPLICA/chat/history")
  echo "| POST …/chat/history c$c | $rps | $p50 | $(awk "BEGIN { printf \"%.1f×\", $rps / $SQLITE }") |"
  [ "$c" = 1 ] && C1=$rps
done
echo "(group commit: c64 / c1 = $(awk "BEGIN { printf \"%.1f×\", $rps / $C1 }"))"

read -r rps p50 p99 < <(wrk_row "$CONNECTIONS" -s "$DIR/chat.lua" "$BASE/v1/replicas/$REPLICA/chat/completions")
echo
echo "completions (embedded, two durable history writes each): $rps req/s, p50 $p50 ms, p99 $p99 ms"
echo "RSS: idle $RSS_IDLE MB, after the load $(rss_mb "$PID") MB, idle after a restart $(restart_rss) MB"
