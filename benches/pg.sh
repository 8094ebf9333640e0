# Sourced by the benchmark scripts on PostgreSQL (after benches/demo.sh, with BIN set and the
# server of `.ci/install-postgres` in REPLICAD_TEST_POSTGRES): `fresh_db` creates a database and
# prints its URL; `node_start URL` starts one more node on it, on the cores NODE_CPUS (0 unless set), with the demo node's
# secrets key, and adds its directory, PID and base URL to XDIRS, XPIDS and XBASES.
PSQL=$(ls /usr/lib/postgresql/*/bin/psql | head -1)

fresh_db() {
  local name="bench_$RANDOM$RANDOM"
  "$PSQL" -q "$REPLICAD_TEST_POSTGRES" -c "CREATE DATABASE $name" >/dev/null
  echo "${REPLICAD_TEST_POSTGRES%/*}/$name"
}

node_start() {
  local dir; dir=$(mktemp -d)
  install -m 600 "$DIR/secrets.key" "$dir/secrets.key"
  # shellcheck disable=SC2086 # EXTRA_ARGS: extra `serve` flags, split on spaces
  taskset -c "${NODE_CPUS:-0}" "$BIN" serve --listen 127.0.0.1:0 --data-dir "$dir" --store "$1" --log warn ${EXTRA_ARGS:-} \
    > "$dir/out" 2> "$dir/err" & XPIDS+=("$!")
  until grep -q listening "$dir/out" 2>/dev/null; do sleep 0.05; done
  XDIRS+=("$dir"); XBASES+=("$(sed -n 's/^listening on //p' "$dir/out")")
}
