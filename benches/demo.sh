# Sourced by the benchmark scripts: `demo_start BINARY [TASKSET_CPUS]` starts BINARY's
# `serve --demo` (with the flags in DEMO_ARGS, if set) on a fresh data directory, waits until the
# sample knowledge base is indexed, and sets DIR, PID, BASE, KEY, REPLICA, $DIR/chat.lua (a wrk
# script asking five questions in turn) and $DIR/history.lua (a wrk script storing one chat
# history item per request); `demo_stop` ends it and removes DIR.
demo_start() {
  local bin=$1 cpus=${2:-}
  DIR=$(mktemp -d)
  # shellcheck disable=SC2086 # DEMO_ARGS: extra `serve` flags, split on spaces
  ${cpus:+taskset -c "$cpus"} "$bin" serve --demo --listen 127.0.0.1:0 --data-dir "$DIR" --log warn ${DEMO_ARGS:-} \
    > "$DIR/out" 2> "$DIR/err" & PID=$!
  until grep -q listening "$DIR/out" 2>/dev/null; do sleep 0.1; done
  BASE=$(sed -n 's/^listening on //p' "$DIR/out")
  KEY=$(grep -o 'rpl_[0-9a-f]*' "$DIR/err")
  REPLICA=$(grep -o 'replica [0-9a-f-]*' "$DIR/err" | cut -d' ' -f2)
  # The listing is read whole before grep (a `grep -q` closing the pipe early fails under pipefail).
  until [[ $(curl -s "$BASE/v1/replicas/$REPLICA/knowledge-base?status=READY&pageSize=100" \
    -H "X-ORGANIZATION-SECRET: $KEY") == *'"total":17'* ]]; do sleep 0.2; done
  cat > "$DIR/history.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-ORGANIZATION-SECRET"] = "$KEY"
wrk.body = '{"content": "a durable history item"}'
LUA
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
}

demo_stop() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  rm -rf "$DIR"
}
