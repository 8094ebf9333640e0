#!/usr/bin/env bash
# The table engines side by side, in one run (ROUNDS rounds, alternating): the demo server with
# its tables in redb; in PostgreSQL, one node; and in PostgreSQL, three nodes over one database,
# the load split between them. Pinning (PIN, the same in every mode, so the ratios stay fair):
#   PIN=shared (the default): the replicad processes and the PostgreSQL server on core 0 (the
#     server side shares one core whatever its shape), wrk (1 thread per node) on core 1;
#   PIN=split: the PostgreSQL server alone on core 0 (the database on its own core), the
#     replicad processes and wrk on core 1 (on redb, core 0 is then idle).
#   POST …/chat/history at c64 in all (one durable write each, in group commits)
#   POST …/chat/completions at c32 in all (embedded generator, two history items and the usage)
#   GET  …/replicas/{id} at c32 in all (a hot read: the read cache's, unless EXTRA_ARGS turns it
#        off with --read-cache-bytes 0)
# Reported per run: requests/s, and CPU per request in µs of the replicad processes and of the
# PostgreSQL server (utime+stime from /proc over the load, divided by the requests answered).
# Then PostgreSQL's own rate for the rows of a history write, without replicad (pgbench, on the
# same cores, `pg_own` below): one write per transaction from 64 clients, and the writer's shape,
# one connection committing 64 writes per transaction.
# Usage: eval "$(REPLICAD_TEST_POSTGRES_FSYNC=on bash .ci/install-postgres)"
#        bash benches/stores.sh target/release/replicad [OLD_BINARY]  (ROUNDS=2, D=5s, EXTRA_ARGS,
#        flags of every node, MODES="redb pg1 pg3", PIN, and PG_OWN=0 to skip pg_own, in the
#        environment; with OLD_BINARY, each round runs every mode with it too, alternated
#        with BINARY, labelled "old")
# Benchmarks assert nothing.
set -euo pipefail
BIN=$(realpath "$1"); ROUNDS=${ROUNDS:-2}; D=${D:-5s}; EXTRA_ARGS=${EXTRA_ARGS:-}
case ${PIN:-shared} in
  shared) PG_CPUS=0 NODE_CPUS=0 WRK_CPUS=1 ;;
  split) PG_CPUS=0 NODE_CPUS=1 WRK_CPUS=1 ;;
  *) echo "PIN is shared or split" >&2; exit 1 ;;
esac
: "${REPLICAD_TEST_POSTGRES:?start PostgreSQL first: eval \"\$(bash .ci/install-postgres)\"}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
source benches/demo.sh
source benches/pg.sh
TICK=$(getconf CLK_TCK)
POSTMASTER=$(head -1 "$REPLICAD_TEST_POSTGRES_DIR/data/postmaster.pid")

# CPU ticks (utime+stime) of the given PIDs and of every PostgreSQL process.
ticks() { for p in "$@"; do cat "/proc/$p/stat" 2>/dev/null; done | awk '{ t += $14 + $15 } END { print t + 0 }'; }
# PostgreSQL's: its live processes', and (cutime+cstime of the postmaster) those of the backends
# that ended, which it waited for (pgbench's connections end with it).
pg_ticks() {
  echo $(($(ticks $(pgrep -P "$POSTMASTER") "$POSTMASTER") + $(awk '{ print $16 + $17 }' "/proc/$POSTMASTER/stat")))
}

# "req/s replicad-µs pg-µs" of wrk at $1 connections in all with script $2 on path $3, against
# every base URL that follows (the connections split between them).
measure() {
  local conns=$1 script=$2 path=$3; shift 3
  local pids=("$PID" "${XPIDS[@]}") r0 p0 r1 p1 n=0 rps=0 out
  r0=$(ticks "${pids[@]}"); p0=$(pg_ticks)
  local outs=()
  for base in "$@"; do
    out=$(mktemp); outs+=("$out")
    taskset -c "$WRK_CPUS" wrk -t1 -c"$((conns / $#))" -d"$D" -s "$script" "$base$path" > "$out" &
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
  local mode=$1 url="" BIN=${2:-$BIN} label=${3:-}
  XDIRS=(); XPIDS=(); XBASES=()
  case $mode in
    redb) DEMO_ARGS="$EXTRA_ARGS" ;;
    *) url=$(fresh_db); DEMO_ARGS="--store $url $EXTRA_ARGS" ;;
  esac
  taskset -apc "$PG_CPUS" "$POSTMASTER" >/dev/null
  export DEMO_ARGS
  demo_start "$BIN" "$NODE_CPUS"
  printf 'wrk.headers["X-ORGANIZATION-SECRET"] = "%s"\n' "$KEY" > "$DIR/get.lua"
  if [ "$mode" = pg3 ]; then
    node_start "$url"; node_start "$url"
    sleep 3 # their search indexes are built from the tables at start
  fi
  local bases=("$BASE" "${XBASES[@]}")
  read -r hrps hcpu hpg < <(measure 64 "$DIR/history.lua" "/v1/replicas/$REPLICA/chat/history" "${bases[@]}")
  read -r crps ccpu cpg < <(measure 32 "$DIR/chat.lua" "/v1/replicas/$REPLICA/chat/completions" "${bases[@]}")
  read -r grps gcpu gpg < <(measure 32 "$DIR/get.lua" "/v1/replicas/$REPLICA" "${bases[@]}")
  echo "round $r $mode$label (PIN=${PIN:-shared}): history c64 $hrps req/s, CPU µs each: replicad $hcpu, PostgreSQL $hpg;" \
    "completions c32 $crps req/s, replicad $ccpu, PostgreSQL $cpg; GET replica c32 $grps req/s, replicad $gcpu, PostgreSQL $gpg"
  for p in "${XPIDS[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
  rm -rf "${XDIRS[@]}"
  demo_stop
}

# PostgreSQL's own rate for the rows one history write changes (what `tests/it/postgres_round_trips.rs`
# and the stored rows show: three new rows of 40-byte keys, the item ~80 bytes; eight rows
# updated, the chat ~100 bytes; a popularity key deleted; six point reads), in a fresh database
# holding replicad's table: "alone", each write its own SERIALIZABLE transaction, 64 clients
# (each with its own chat's rows, so no two wait on one row's lock); "batched", one client
# committing 64 writes per transaction (the new rows of 64 writes, the hot rows once), the
# shape of replicad's writer. Prints writes/s and PostgreSQL's CPU µs per write.
pg_own() {
  local url pgbench dir
  url=$(fresh_db); pgbench=$(dirname "$PSQL")/pgbench; dir=$(mktemp -d)
  "$PSQL" -q "$url" -c "CREATE TABLE replicad_rows (tbl text NOT NULL, sk bytea NOT NULL, k bytea NOT NULL,
                         v bytea NOT NULL, PRIMARY KEY (tbl, sk))" >/dev/null
  local key="decode(repeat('ab', 32), 'hex')" item="decode(repeat('cd', 80), 'hex')"
  local hot="('sequences'), ('replicachat_chat'), ('replicachatconv_conversation'), ('open_conversation'),
             ('usersource_chat'), ('user_chat'), ('replica_messagecount'), ('org_replicaorder')"
  cat > "$dir/alone.sql" <<SQL
\set m random(1, 1000000000000)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT v FROM replicad_rows WHERE tbl = 'sequences' AND sk = int8send(:client_id);
SELECT v FROM replicad_rows WHERE tbl = 'replicachat_chat' AND sk = int8send(:client_id);
SELECT v FROM replicad_rows WHERE tbl = 'replicachatconv_conversation' AND sk = int8send(:client_id);
SELECT v FROM replicad_rows WHERE tbl = 'replica_messagecount' AND sk = int8send(:client_id);
SELECT v FROM replicad_rows WHERE tbl = 'replicaid_replica' AND sk = int8send(:client_id);
SELECT v FROM replicad_rows WHERE tbl = 'replicachatkey_chat' AND sk = int8send(:client_id);
INSERT INTO replicad_rows (tbl, sk, k, v)
  SELECT t, $key || int8send(:m), $key || int8send(:m), $item
    FROM unnest(ARRAY['replicausermsg_message', 'chatmsg_userconv', 'convmsg_user']) t
  UNION ALL
  SELECT t, int8send(:client_id), int8send(:client_id), decode(repeat('ef', 50), 'hex')
    FROM (VALUES $hot) h(t)
  ON CONFLICT (tbl, sk) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v;
DELETE FROM replicad_rows WHERE tbl = 'org_replicaorder' AND sk = int8send(-(:client_id)::bigint);
COMMIT;
SQL
  cat > "$dir/batched.sql" <<SQL
\set m random(1, 1000000000)
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT v FROM replicad_rows WHERE tbl = 'sequences' AND sk = '\x00';
SELECT v FROM replicad_rows WHERE tbl = 'replicachat_chat' AND sk = '\x00';
SELECT v FROM replicad_rows WHERE tbl = 'replicachatconv_conversation' AND sk = '\x00';
SELECT v FROM replicad_rows WHERE tbl = 'replica_messagecount' AND sk = '\x00';
SELECT v FROM replicad_rows WHERE tbl = 'replicaid_replica' AND sk = '\x00';
SELECT v FROM replicad_rows WHERE tbl = 'replicachatkey_chat' AND sk = '\x00';
WITH gone AS (DELETE FROM replicad_rows WHERE tbl = 'org_replicaorder' AND sk = '\x01')
INSERT INTO replicad_rows (tbl, sk, k, v)
  SELECT t, $key || int8send(:m::bigint * 1000 + g), $key || int8send(:m::bigint * 1000 + g), $item
    FROM unnest(ARRAY['replicausermsg_message', 'chatmsg_userconv', 'convmsg_user']) t, generate_series(1, 64) g
  UNION ALL
  SELECT t, '\x00', '\x00', decode(repeat('ef', 50), 'hex') FROM (VALUES $hot) h(t)
  ON CONFLICT (tbl, sk) DO UPDATE SET k = EXCLUDED.k, v = EXCLUDED.v;
COMMIT;
SQL
  local shape conns per p0 p1 tps
  for shape in alone batched; do
    case $shape in alone) conns=64 per=1 ;; batched) conns=1 per=64 ;; esac
    p0=$(pg_ticks)
    tps=$(taskset -c "$WRK_CPUS" "$pgbench" -n -M prepared -T "${D%s}" -c "$conns" -j 1 -f "$dir/$shape.sql" "$url" 2>"$dir/err" \
      | awk '/^tps/ { printf "%d", $3 }' || true)
    p1=$(pg_ticks)
    [ -n "$tps" ] && [ "$tps" -gt 0 ] || { echo "pgbench $shape failed:" >&2; tail -3 "$dir/err" >&2; continue; }
    echo "PostgreSQL alone, history rows $shape (c$conns, $per per transaction): $((tps * per)) writes/s," \
      "PostgreSQL CPU µs each: $(awk "BEGIN { printf \"%.0f\", ($p1 - $p0) / $TICK * 1e6 / ($tps * $per * ${D%s}) }")"
  done
  rm -rf "$dir"
}

for r in $(seq "$ROUNDS"); do
  for mode in ${MODES-redb pg1 pg3}; do
    [ -n "${2:-}" ] && run "$mode" "$(realpath "$2")" " old"
    run "$mode"
  done
  taskset -apc "$PG_CPUS" "$POSTMASTER" >/dev/null
  [ "${PG_OWN:-1}" = 0 ] || pg_own
done
