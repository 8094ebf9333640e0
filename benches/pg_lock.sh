#!/usr/bin/env bash
# Where the nodes' write batches spend the writers' lock on PostgreSQL (a diagnosis beside
# stores.sh): NODES nodes (3 unless set) over one fresh database take D (12s) of c64 history
# writes to one chat, in stores.sh's PIN=split layout (PostgreSQL alone on core 0, the nodes and
# wrk on core 1). While the load runs, PostgreSQL is sampled 2,000 times 1 ms apart: the share of
# samples in which a node holds the writers' lock (`LOCK TABLE replicad_schema`, pg_locks) and
# the mean number of nodes waiting for it. Then, over 4 s of the load: the batches the nodes
# committed and their writes (each node's `replicad_store_write_batch_size`, /metrics), and the
# nodes' `store-writer` threads' CPU time and run-queue wait per batch (/proc/…/schedstat).
# Usage: eval "$(REPLICAD_TEST_POSTGRES_FSYNC=on bash .ci/install-postgres)"
#        NODES=3 bash benches/pg_lock.sh target/release/replicad
# Benchmarks assert nothing.
set -euo pipefail
BIN=$(realpath "$1"); NODES=${NODES:-3}; D=${D:-12s}
: "${REPLICAD_TEST_POSTGRES:?start PostgreSQL first: eval \"\$(bash .ci/install-postgres)\"}"
cd "$(dirname "$0")/.."
source benches/demo.sh
source benches/pg.sh
TOKEN=pg-lock-metrics-token
POSTMASTER=$(head -1 "$REPLICAD_TEST_POSTGRES_DIR/data/postmaster.pid")
taskset -apc 0 "$POSTMASTER" >/dev/null
XDIRS=(); XPIDS=(); XBASES=()
url=$(fresh_db)
export DEMO_ARGS="--store $url --metrics-token $TOKEN" EXTRA_ARGS="--metrics-token $TOKEN"
demo_start "$BIN" 1
for ((i = 1; i < NODES; i++)); do NODE_CPUS=1 node_start "$url"; done
sleep 2 # the other nodes' search indexes are built from the tables at start
bases=("$BASE" "${XBASES[@]}") loads=()
for base in "${bases[@]}"; do
  taskset -c 1 wrk -t1 -c"$((64 / NODES))" -d"$D" -s "$DIR/history.lua" "$base/v1/replicas/$REPLICA/chat/history" >/dev/null &
  loads+=("$!")
done
sleep 1
# "batches writes" committed so far, summed over the nodes.
batches() {
  for base in "${bases[@]}"; do curl -s "$base/metrics" -H "Authorization: Bearer $TOKEN"; done |
    awk '/^replicad_store_write_batch_size_count/ { n += $NF } /^replicad_store_write_batch_size_sum/ { w += $NF }
         END { print n + 0, w + 0 }'
}
# "run-ns wait-ns" of the nodes' store-writer threads.
writers() {
  for p in "$PID" "${XPIDS[@]}"; do
    for t in /proc/"$p"/task/*; do grep -q store-writer "$t/comm" && cat "$t/schedstat"; done
  done | awk '{ r += $1; w += $2 } END { print r + 0, w + 0 }'
}
read -r b0 w0 < <(batches); read -r r0 q0 < <(writers)
sleep 4
read -r b1 w1 < <(batches); read -r r1 q1 < <(writers)
n=$((b1 - b0))
echo "$NODES node(s): $n batches in 4 s, $(awk "BEGIN { printf \"%.1f\", ($w1 - $w0) / $n }") writes each," \
  "a batch every $(awk "BEGIN { printf \"%.2f\", 4000 / $n }") ms; store-writer threads per batch:" \
  "CPU $(awk "BEGIN { printf \"%.2f\", ($r1 - $r0) / 1e6 / $n }") ms, run-queue wait $(awk "BEGIN { printf \"%.2f\", ($q1 - $q0) / 1e6 / $n }") ms"
"$PSQL" -qAt "$url" -c "DO \$\$ DECLARE held int := 0; waiting int := 0; g int; w int; BEGIN
  FOR i IN 1 .. 2000 LOOP
    SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) INTO g, w FROM pg_locks
      WHERE locktype = 'relation' AND relation = 'replicad_schema'::regclass AND mode = 'ExclusiveLock';
    held := held + (g > 0)::int; waiting := waiting + w;
    PERFORM pg_sleep(0.001);
  END LOOP;
  RAISE NOTICE 'writers'' lock held in % of 2000 samples, % node(s) waiting on average',
    round(held / 2000.0, 3), round(waiting / 2000.0, 2);
END \$\$" 2>&1 | sed -n 's/.*NOTICE: *//p'
wait "${loads[@]}"
for p in "${XPIDS[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
rm -rf "${XDIRS[@]}"
demo_stop
