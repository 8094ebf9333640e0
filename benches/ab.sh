#!/usr/bin/env bash
# Before/after benchmark on the demo replica: two replicad binaries measured in one run,
# alternately (ROUNDS each), the server pinned to core 0 and wrk (1 thread) to core 1.
# OPS picks the operations:
#   OPS=replica (default)
#     GET  /v1/replicas/{id}                    (auth + the replica view's reads)
#     POST /v1/replicas/{id}/chat/completions   (auth + BM25 retrieval + extractive answer + two
#                                                durable history writes)
#   OPS=lists (the query strings read into typed structs, `api::query`)
#     GET  /v1/replicas?page=1&page_size=24&sort=name
#     GET  /v1/replicas/{id}/knowledge-base?status=READY&type=text&pageSize=24&sortBy=title&sortOrder=asc
# Usage: [OPS=lists] bash benches/ab.sh BEFORE_BINARY AFTER_BINARY [DURATION=8s] [CONNECTIONS=32] [ROUNDS=3]
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2"); DURATION=${3:-8s}; CONNECTIONS=${4:-32}; ROUNDS=${5:-3}
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cd "$(dirname "$0")/.."
source benches/demo.sh
load() {
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "$@" \
    | grep -E "Requests/sec|50%|99%|Non-2xx" | tr -s ' ' | paste -sd' '
}
run() {
  demo_start "$1" 0
  local auth=(-H "X-ORGANIZATION-SECRET: $KEY")
  case "${OPS:-replica}" in
    replica)
      echo "GET replica: $(load "${auth[@]}" "$BASE/v1/replicas/$REPLICA")"
      echo "    completions: $(load -s "$DIR/chat.lua" "$BASE/v1/replicas/$REPLICA/chat/completions")"
      ;;
    lists)
      echo "replica list: $(load "${auth[@]}" "$BASE/v1/replicas?page=1&page_size=24&sort=name")"
      echo "    entry list: $(load "${auth[@]}" \
        "$BASE/v1/replicas/$REPLICA/knowledge-base?status=READY&type=text&pageSize=24&sortBy=title&sortOrder=asc")"
      ;;
    *) echo "OPS must be replica or lists" >&2; exit 2 ;;
  esac
  demo_stop
}
for r in $(seq "$ROUNDS"); do
  echo "round $r before: $(run "$BEFORE")"
  echo "round $r after:  $(run "$AFTER")"
done
