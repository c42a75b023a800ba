#!/usr/bin/env bash
# bench/build_ref_server.sh — build llama.cpp's own server (tools/server, `llama-server`) from the reference's
# source bundle (${LOOM_CACHE:-~/.cache/loom}/ref/src, fetched by scripts/setup.sh) into
# ${LOOM_CACHE:-~/.cache/loom}/ref-server, CPU only, for bench/serve_load.sh. Prints the binary's path. Minutes
# on 2 cores the first time; a second run finds it built.
set -euo pipefail
cache=${LOOM_CACHE:-$HOME/.cache/loom}
src=$cache/ref/src
out=$cache/ref-server
bin=$out/bin/llama-server
if [ ! -x "$bin" ]; then
    command -v cmake >/dev/null || { echo "build_ref_server: cmake is needed (bash scripts/setup.sh)" >&2; exit 1; }
    [ -f "$src/tools/server/CMakeLists.txt" ] || { echo "build_ref_server: no reference source in $src" >&2; exit 1; }
    cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
          -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >"$out.log" 2>&1 ||
        { tail -20 "$out.log" >&2; exit 1; }
    cmake --build "$out" --target llama-server -j "$(nproc)" >>"$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
fi
echo "$bin"
