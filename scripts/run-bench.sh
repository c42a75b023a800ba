#!/usr/bin/env bash
# run-bench.sh BUILD [LOOM BENCH OPTIONS] — the benchmarks (`make bench`): makes sure the default model exists
# (loom prepares it on first use), then `loom bench --mem --ref` on it: the machine's streaming read bandwidth
# and FMA peak, then loom against the reference engine in one process (pp512 and tg128 at 2 threads, 5
# repetitions, runs alternated A/B/B/A) with the ratios; extra options override those defaults (e.g. -t 1 -r 3).
# Then every other benchmark binary built from bench/*.c.
set -euo pipefail
build=${1:-build}
shift || true
export LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
export LOOM_REF=${LOOM_REF:-$LOOM_CACHE/ref}
model=$LOOM_CACHE/models/qwen35-0.8b-synth-Q4_K_M.gguf

echo "== loom run -n 1 -p hi (prepares the default model once)"
"$build/loom" run -n 1 -p hi >/dev/null
[ -f "$model" ] || { echo "run-bench: $model is missing after loom run" >&2; exit 1; }

echo "== loom bench --mem --ref"
"$build/loom" bench --mem --ref -m "$model" -p 512 -n 128 -t 2 -r 5 "$@"
for b in "$build"/bench/*; do
    name=$(basename "$b")
    [ -x "$b" ] && [ -f "bench/$name.c" ] || continue
    echo "== $name"
    "$b"
done
