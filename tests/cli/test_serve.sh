#!/usr/bin/env bash
# test_serve.sh BUILD — `loom serve` on the cached tiny model, driven over HTTP by tests/cli/serve_test.py
# (Python's standard library only): endpoints, streaming, errors, concurrency, disconnects, SIGTERM, SIGHUP.
# Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf
exec timeout 600 python3 "$(dirname "$0")/serve_test.py" "$(realpath "$build/loom")" "$model"
