#!/usr/bin/env bash
# RSS under a write load: the demo server (core 0) takes SECONDS of c64
# history writes of ~100 B from wrk (core 1); prints RSS idle, after the writes (with the
# store's size) and after a few reads.
# Usage: bash benches/rss_load.sh BINARY SECONDS
set -uo pipefail
cd "$(dirname "$0")/.."
source benches/demo.sh
demo_start "$1" 0
cat > "$DIR/h.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-ORGANIZATION-SECRET"] = "$KEY"
local n = 0
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, '{"content": "a durable history item of about one hundred bytes, number ' .. n .. ', to grow the store"}')
end
LUA
rss() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }
echo "idle $(rss) MB"
taskset -c 1 wrk -t1 -c64 -d"$2"s -s "$DIR/h.lua" "$BASE/v1/replicas/$REPLICA/chat/history" | grep Requests
echo "after writes: RSS $(rss) MB, store $(du -m "$DIR"/replicad.redb | cut -f1) MB"
for i in 1 2 3; do curl -s -o /dev/null "$BASE/v1/replicas/$REPLICA/chat/history?limit=100" -H "X-ORGANIZATION-SECRET: $KEY"; done
echo "after reads: RSS $(rss) MB"
demo_stop
