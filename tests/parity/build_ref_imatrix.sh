#!/usr/bin/env bash
# build_ref_imatrix.sh — build llama.cpp's importance-matrix tool (tools/imatrix, `llama-imatrix`) from the
# reference's source bundle (${LOOM_CACHE:-~/.cache/loom}/ref/src, fetched by scripts/setup.sh) into
# ${LOOM_CACHE:-~/.cache/loom}/ref-imatrix, CPU only, portable (GGML_NATIVE=OFF). Prints the binary's path.
# Only needed to regenerate tests/fixtures/imatrix (see its README); the test suite reads the committed files.
# Many minutes on 2 cores the first time (-j2); a second run finds it built.
set -euo pipefail
cache=${LOOM_CACHE:-$HOME/.cache/loom}
src=$cache/ref/src
out=$cache/ref-imatrix
bin=$out/bin/llama-imatrix
if [ ! -x "$bin" ]; then
    command -v cmake >/dev/null || { echo "build_ref_imatrix: cmake is needed (bash scripts/setup.sh)" >&2; exit 1; }
    [ -f "$src/tools/imatrix/CMakeLists.txt" ] || { echo "build_ref_imatrix: no reference source in $src" >&2; exit 1; }
    cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
          -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >"$out.log" 2>&1 ||
        { tail -20 "$out.log" >&2; exit 1; }
    cmake --build "$out" --target llama-imatrix -j 2 >>"$out.log" 2>&1 || { tail -20 "$out.log" >&2; exit 1; }
fi
echo "$bin"
