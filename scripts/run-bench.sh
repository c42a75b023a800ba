#!/usr/bin/env bash
# run-bench.sh BUILD — the benchmarks (`make bench`): makes sure the default model exists (loom prepares it on
# first use), then runs the end-to-end benchmark of loom against the reference on it, then any other benchmark
# binaries in BUILD/bench.
set -euo pipefail
build=${1:-build}
export LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
export LOOM_REF=${LOOM_REF:-$LOOM_CACHE/ref}
model=$LOOM_CACHE/models/qwen35-0.8b-synth-Q4_K_M.gguf

echo "== loom run -n 1 -p hi (prepares the default model once)"
"$build/loom" run -n 1 -p hi >/dev/null
[ -f "$model" ] || { echo "run-bench: $model is missing after loom run" >&2; exit 1; }

echo "== bench_e2e"
"$build/bench/bench_e2e" "$model"
for b in "$build"/bench/*; do
    [ -x "$b" ] && [ "$(basename "$b")" != bench_e2e ] || continue
    echo "== $(basename "$b")"
    "$b"
done
