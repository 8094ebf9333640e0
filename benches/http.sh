#!/usr/bin/env bash
# Load benchmark of two operations on the demo replica, with wrk (Debian package `wrk`):
#   GET  /v1/replicas/{id}                    (auth + one store read)
#   POST /v1/replicas/{id}/chat/completions   (auth + BM25 retrieval + extractive answer,
#                                              skip_chat_history=false: two durable writes)
# Usage: bash benches/http.sh [DURATION=10s] [CONNECTIONS=32] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}; CONNECTIONS=${2:-32}; THREADS=${3:-2}
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
cargo build --release -q
source benches/demo.sh
trap demo_stop EXIT
demo_start ./target/release/replicad
echo "== GET /v1/replicas/{id}  ($THREADS threads, $CONNECTIONS connections, $DURATION)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "X-ORGANIZATION-SECRET: $KEY" \
  "$BASE/v1/replicas/$REPLICA" | grep -E "Requests/sec|50%|99%|Non-2xx"
echo "== POST /v1/replicas/{id}/chat/completions"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$DIR/chat.lua" \
  "$BASE/v1/replicas/$REPLICA/chat/completions" | grep -E "Requests/sec|50%|99%|Non-2xx"
