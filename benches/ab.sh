#!/usr/bin/env bash
# Before/after benchmark on the demo replica: two replicad binaries measured in one run,
# alternately (ROUNDS each), the server pinned to core 0 and wrk (1 thread) to core 1.
#   GET  /v1/replicas/{id}                    (auth + the replica view's reads)
#   POST /v1/replicas/{id}/chat/completions   (auth + BM25 retrieval + extractive answer + two
#                                              durable history writes)
# Usage: bash benches/ab.sh BEFORE_BINARY AFTER_BINARY [DURATION=8s] [CONNECTIONS=32] [ROUNDS=3]
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
  echo "GET replica: $(load -H "X-ORGANIZATION-SECRET: $KEY" "$BASE/v1/replicas/$REPLICA")"
  echo "    completions: $(load -s "$DIR/chat.lua" "$BASE/v1/replicas/$REPLICA/chat/completions")"
  demo_stop
}
for r in $(seq "$ROUNDS"); do
  echo "round $r before: $(run "$BEFORE")"
  echo "round $r after:  $(run "$AFTER")"
done
