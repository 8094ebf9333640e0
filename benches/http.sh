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
DIR=$(mktemp -d); trap 'kill $PID 2>/dev/null; rm -rf "$DIR"' EXIT
./target/release/replicad serve --demo --listen 127.0.0.1:0 --data-dir "$DIR" --log warn \
  > "$DIR/out" 2> "$DIR/err" & PID=$!
until grep -q listening "$DIR/out" 2>/dev/null; do sleep 0.1; done
BASE=$(sed -n 's/^listening on //p' "$DIR/out")
KEY=$(grep -o 'rpl_[0-9a-f]*' "$DIR/err")
REPLICA=$(grep -o 'replica [0-9a-f-]*' "$DIR/err" | cut -d' ' -f2)
# wait until the sample knowledge base is indexed
until curl -s "$BASE/v1/replicas/$REPLICA/knowledge-base?status=READY&pageSize=100" \
  -H "X-ORGANIZATION-SECRET: $KEY" | grep -q '"total":17'; do sleep 0.2; done
cat > "$DIR/chat.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-ORGANIZATION-SECRET"] = "$KEY"
local qs = {"What is a module?", "How do I handle exceptions?", "Can strings be changed?",
            "What does the pass statement do?", "How are floating point numbers represented?"}
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, nil, nil, '{"content": "' .. qs[(i % #qs) + 1] .. '"}')
end
LUA
echo "== GET /v1/replicas/{id}  ($THREADS threads, $CONNECTIONS connections, $DURATION)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "X-ORGANIZATION-SECRET: $KEY" \
  "$BASE/v1/replicas/$REPLICA" | grep -E "Requests/sec|50%|99%|Non-2xx"
echo "== POST /v1/replicas/{id}/chat/completions"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$DIR/chat.lua" \
  "$BASE/v1/replicas/$REPLICA/chat/completions" | grep -E "Requests/sec|50%|99%|Non-2xx"
