#!/usr/bin/env bash
# How long a new node takes to catch up with a database that holds CHUNKS knowledge-base chunks
# (default 100,000): the demo server on PostgreSQL is given ENTRIES text entries of 1,000 short
# sections each (a section is a chunk), then a node on an empty data directory is started on
# the same database. Reported: the load's time, the new node's time to its `listening` line and
# to the moment its `/readyz` says its index has applied every outbox change, and the answer
# of a question about the last entry asked on the new node (its source must be that entry).
# Usage: eval "$(REPLICAD_TEST_POSTGRES_FSYNC=on bash .ci/install-postgres)"
#        bash benches/catch_up.sh target/release/replicad        (CHUNKS in the environment)
# Benchmarks assert nothing.
set -euo pipefail
BIN=$(realpath "$1"); CHUNKS=${CHUNKS:-100000}; ENTRIES=$(( (CHUNKS + 999) / 1000 ))
: "${REPLICAD_TEST_POSTGRES:?start PostgreSQL first: eval \"\$(bash .ci/install-postgres)\"}"
cd "$(dirname "$0")/.."
source benches/demo.sh
source benches/pg.sh
now() { date +%s.%N; }

URL=$(fresh_db)
DEMO_ARGS="--store $URL" demo_start "$BIN"
XDIRS=(); XPIDS=(); XBASES=()
trap 'for p in "${XPIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "${XDIRS[@]}"; demo_stop' EXIT

# Entry $1: 1,000 sections, each its own chunk ("# Depot E-I" and one sentence).
entry() {
  python3 - "$1" <<'PY'
import json, sys
e = int(sys.argv[1])
text = "\n\n".join(f"# Depot {e}-{i}\n\nCrate {e}-{i} of the catalogue weighs {i} grams and ships from depot {e}."
                   for i in range(1000))
print(json.dumps({"title": f"Catalogue {e}", "text": text}))
PY
}

started=$(now)
for e in $(seq 1 "$ENTRIES"); do
  entry "$e" | curl -sf -o /dev/null "$BASE/v1/replicas/$REPLICA/knowledge-base" \
    -H "X-ORGANIZATION-SECRET: $KEY" -H 'Content-Type: application/json' --data-binary @-
done
until [[ $(curl -s "$BASE/v1/replicas/$REPLICA/knowledge-base?status=READY&pageSize=1" \
  -H "X-ORGANIZATION-SECRET: $KEY") == *"\"total\":$((ENTRIES + 17))"* ]]; do sleep 1; done
loaded=$(now)
chunks=$(curl -s "$BASE/v1/replicas/$REPLICA/knowledge-base?pageSize=100&search=Catalogue" -H "X-ORGANIZATION-SECRET: $KEY" |
  python3 -c 'import json,sys; v=json.load(sys.stdin); print(sum(e["chunkCount"] for e in v["items"]), "in", v["total"])')
echo "loaded $ENTRIES entries ($chunks entries, counted by the server) in $(echo "$loaded - $started" | bc) s"

t0=$(now)
node_start "$URL"
t_listen=$(now)
until curl -s "${XBASES[0]}/readyz" | grep -Eq 'applied ([0-9]+) of \1 outbox'; do sleep 0.05; done
t_ready=$(now)
echo "new node: listening after $(echo "$t_listen - $t0" | bc) s, index caught up after $(echo "$t_ready - $t0" | bc) s"
echo "new node's /readyz: $(curl -s "${XBASES[0]}/readyz")"
curl -s "${XBASES[0]}/v1/replicas/$REPLICA/chat/completions/test" -H "X-ORGANIZATION-SECRET: $KEY" \
  -H 'Content-Type: application/json' -d "{\"content\": \"How much does crate $ENTRIES-999 weigh?\"}" |
  python3 -c 'import json,sys; v=json.load(sys.stdin); print("asked on the new node:", v["content"][:120], "| first source:", v["sources"][0]["name"])'
