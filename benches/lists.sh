#!/usr/bin/env bash
# Before/after benchmark of the list operations, whose query strings are read into typed
# structs (`api::query`): two replicad binaries measured in one run, alternately (ROUNDS each),
# on the demo data, the server pinned to core 0 and wrk (1 thread) to core 1.
#   GET /v1/replicas?page=1&page_size=24&sort=name                  (the replica list)
#   GET /v1/replicas/{id}/knowledge-base?status=READY&type=text&pageSize=24&sortBy=title&sortOrder=asc
# Usage: bash benches/lists.sh BEFORE_BINARY AFTER_BINARY [DURATION=8s] [CONNECTIONS=32] [ROUNDS=3]
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); DURATION=${3:-8s}; CONNECTIONS=${4:-32}; ROUNDS=${5:-3}
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
source benches/demo.sh
load() {
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency -H "X-ORGANIZATION-SECRET: $KEY" "$1" \
    | grep -E "Requests/sec|50%|99%|Non-2xx" | tr -s ' ' | paste -sd' '
}
run() {
  demo_start "$1" 0
  echo "replica list: $(load "$BASE/v1/replicas?page=1&page_size=24&sort=name")"
  echo "    entry list: $(load "$BASE/v1/replicas/$REPLICA/knowledge-base?status=READY&type=text&pageSize=24&sortBy=title&sortOrder=asc")"
  demo_stop
}
for r in $(seq "$ROUNDS"); do
  echo "round $r before: $(run "$BEFORE")"
  echo "round $r after:  $(run "$AFTER")"
done
