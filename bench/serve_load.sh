#!/usr/bin/env bash
# bench/serve_load.sh [MODEL] — `loom serve` against llama.cpp's own server (llama-server, built from the reference
# source by bench/build_ref_server.sh), same model and settings: 8 slots of CTX positions each, T threads, greedy,
# thinking off, N tokens per request. bench/serve_load.py measures aggregate tokens/s and time to first token
# p50/p95 at 1, 4 and 8 concurrent clients (R requests each). Each engine runs alone on the machine, in the order
# loom, reference, reference, loom; the table gives the mean of both runs. Environment: BUILD (default build),
# T (2), N (64), R (2), CTX (1024), LEVELS ("1 4 8"). A benchmark, not a test: run it on a quiet machine.
set -euo pipefail
cache=${LOOM_CACHE:-$HOME/.cache/loom}
model=${1:-$cache/models/qwen35-0.8b-synth-Q4_K_M.gguf}
build=${BUILD:-build}
t=${T:-2} n=${N:-64} r=${R:-2} ctx=${CTX:-1024} levels=${LEVELS:-1 4 8}
here=$(cd "$(dirname "$0")" && pwd)
ref=$(bash "$here/build_ref_server.sh")
logs=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$logs"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# up ENGINE: start it on a free port and wait until it answers /health; sets pid and port
up() {
    port=$(free_port)
    if [ "$1" = loom ]; then
        "$build/loom" serve -m "$model" --port "$port" --parallel 8 -c "$ctx" -t "$t" 2>"$logs/$1.log" &
    else
        "$ref" -m "$model" --port "$port" -np 8 -c $((8 * ctx)) -t "$t" -tb "$t" --jinja --no-webui \
            >"$logs/$1.log" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return
        sleep 0.5
    done
    echo "serve_load: $1 did not start:" >&2
    tail -5 "$logs/$1.log" >&2
    exit 1
}
down() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

echo "model: $model; 8 slots of $ctx positions, -t $t, $n tokens per request, $r requests per client"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for engine in loom ref ref loom; do
    up "$engine"
    python3 "$here/serve_load.py" "http://127.0.0.1:$port/" 1 1 8 >/dev/null # warm-up
    for c in $levels; do
        echo "$engine $(python3 "$here/serve_load.py" "http://127.0.0.1:$port/" "$c" "$r" "$n")" | tee -a "$logs/results"
    done
    down
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$logs/results" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    eng, js = line.split(" ", 1)
    d = json.loads(js)
    rows.setdefault((d["clients"], eng), []).append(d)
mean = lambda v, k: sum(x[k] for x in v) / len(v)
print("| clients | loom tok/s | reference tok/s | loom / reference | loom TTFT p50 / p95 (s) | reference TTFT p50 / p95 (s) |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for c in sorted({k[0] for k in rows}):
    a, b = rows[(c, "loom")], rows[(c, "ref")]
    print(f"| {c} | {mean(a, 'tok_s'):.1f} | {mean(b, 'tok_s'):.1f} | {mean(a, 'tok_s') / mean(b, 'tok_s'):.2f}x | "
          f"{mean(a, 'ttft_p50_s'):.3f} / {mean(a, 'ttft_p95_s'):.3f} | {mean(b, 'ttft_p50_s'):.3f} / {mean(b, 'ttft_p95_s'):.3f} |")
PY
