#!/usr/bin/env bash
# The read cache under writes: GET history (20) of the demo replica under wrk
# (1 thread, 32 connections, 8 s, core 1) while another user's history is written WRITES_PER_S
# times a second by a curl loop, on a release server (core 0) with `--read-cache-bytes
# CACHE_BYTES` (0: off); prints req/s and the cache's hit and miss counts from /metrics.
# Usage: bash benches/mixed_reads.sh BINARY CACHE_BYTES WRITES_PER_S
set -uo pipefail
cd "$(dirname "$0")/.."
source benches/demo.sh
DEMO_ARGS="--read-cache-bytes $2 --metrics-token metrics-token-0123456789" demo_start "$1" 0
H=(-H "X-ORGANIZATION-SECRET: $KEY" -H 'content-type: application/json')
for i in $(seq 20); do curl -s -o /dev/null "${H[@]}" "$BASE/v1/replicas/$REPLICA/chat/history" -d "{\"content\":\"item $i\"}"; done
W=0
if [ "$3" != 0 ]; then
  (while :; do curl -s -o /dev/null "${H[@]}" -H 'X-USER-ID: writer' -H 'X-USER-ID-TYPE: messengerA' "$BASE/v1/replicas/$REPLICA/chat/history" -d '{"content":"w"}'; sleep "$(awk "BEGIN{print 1/$3}")"; done) & W=$!
fi
taskset -c 1 wrk -t1 -c32 -d8s -H "X-ORGANIZATION-SECRET: $KEY" "$BASE/v1/replicas/$REPLICA/chat/history?limit=20" | grep -E "Requests/sec"
[ "$W" != 0 ] && kill $W
curl -s "$BASE/metrics" -H 'Authorization: Bearer metrics-token-0123456789' | grep -E "^replicad_read_cache_total|^replicad_http_requests_total.*POST.*history" | tr '\n' ' '; echo
demo_stop
