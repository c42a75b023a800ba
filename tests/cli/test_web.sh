#!/usr/bin/env bash
# test_web.sh BUILD — `loom serve` from the clients people use: its chat page in Debian's chromium driven by npm
# playwright-core (tests/web/page_test.cjs), the official OpenAI client from npm (tests/web/openai_test.cjs) and
# curl, against servers of their own on free loopback ports with the cached tiny model. The npm packages are the
# ones scripts/setup.sh installs in ${LOOM_CACHE:-~/.cache/loom}/node. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
cache=${LOOM_CACHE:-$HOME/.cache/loom}
model=$cache/models/qwen35-tiny-Q4_K_M.gguf
export NODE_PATH=$cache/node/node_modules
here=$(cd "$(dirname "$0")/.." && pwd)
pass=0 fail=0
logs=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$logs"; }
trap cleanup EXIT

if [ ! -d "$NODE_PATH/playwright-core" ] || [ ! -d "$NODE_PATH/openai" ] || ! command -v chromium >/dev/null; then
    echo "FAIL: chromium and the npm packages playwright-core and openai are needed (bash scripts/setup.sh)"
    echo "0 passed, 1 failed"
    exit 1
fi

# The tiny model carries the vocabulary file's ChatML template; the page's thinking and the clients' tool calls
# are about the Qwen3.5 format, so the servers render with the official template (the reference's copy).
official=${LOOM_CACHE:-$HOME/.cache/loom}/ref/src/models/templates/Qwen3.5-4B.jinja

# start NAME ARGS...: a server on a free port; sets url (empty when it did not start)
start() {
    local name=$1 port=
    shift
    env "${server_env[@]}" "$build/loom" serve -m "$model" --port 0 -t 1 --chat-template-file "$official" "$@" \
        >/dev/null 2>"$logs/$name" &
    pids+=($!)
    url=
    for _ in $(seq 100); do
        port=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+) .*/\1/p' "$logs/$name")
        [ -n "$port" ] && { url="http://127.0.0.1:$port/"; return; }
        sleep 0.2
    done
}

# run NAME SCRIPT ARGS...: a node test script; adds its counts
run() {
    local name=$1 out
    shift
    out=$(timeout 300 node "$@" 2>&1)
    echo "$out" | grep -v "passed, .* failed$"
    local p f
    p=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p' | tail -1)
    f=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p' | tail -1)
    if [ -z "$p" ]; then
        echo "FAIL: $name gave no counts"
        fail=$((fail + 1))
    else
        pass=$((pass + p)) fail=$((fail + f))
    fi
}

server_env=()
start page --parallel 1 -c 4096
if [ -n "$url" ]; then run page "$here/web/page_test.cjs" "$url"; else echo "FAIL: the server did not start"; cat "$logs/page"; fail=$((fail + 1)); fi
server_env=(LOOM_SERVE_FORCED_OUTPUT=1)
start openai --parallel 2 -c 1024 --api-key test-key-web
if [ -n "$url" ]; then run openai "$here/web/openai_test.cjs" "$url" test-key-web; else echo "FAIL: the server did not start"; cat "$logs/openai"; fail=$((fail + 1)); fi

# and curl, as people try a server first: one answer, and a stream of events ending with [DONE]
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
req='{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"temperature":0}'
hdr=(-H "Authorization: Bearer test-key-web" -H "Content-Type: application/json")
check "curl: a chat completion" '[ -n "$url" ] && curl -sf "${hdr[@]}" -d "$req" "${url}v1/chat/completions" |
    python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"usage\"][\"completion_tokens\"] == 4 else 1)"'
check "curl -N: a streamed chat completion ending with [DONE]" '[ -n "$url" ] &&
    curl -sfN "${hdr[@]}" -d "${req%\}},\"stream\":true}" "${url}v1/chat/completions" | grep "^data: " | tail -1 |
    grep -qx "data: \[DONE\]"'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
