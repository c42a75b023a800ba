#!/usr/bin/env bash
# setup.sh — install what loom builds and tests with on a fresh Debian machine (run as root), and fetch
# the reference engine (llama.cpp v0.5.0 as shipped in npm node-llama-cpp@3.22.1) into the cache folder
# this script owns: ${LOOM_CACHE:-~/.cache/loom}/ref, and the npm packages the web tests drive `loom serve` with
# (playwright-core, which drives Debian's chromium and downloads no browser, and the official openai client) into
# ${LOOM_CACHE:-~/.cache/loom}/node. cmake and curl are for bench/serve_load.sh (it builds llama.cpp's server);
# python3-torch runs the reference's convert_hf_to_gguf.py for tools/hf (the converted test models).
# Idempotent: a second run does nothing new.
set -euo pipefail

LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
REF=$LOOM_CACHE/ref
NLC_VERSION=3.22.1
NODE_PACKAGES=(playwright-core@1.65.1 openai@6.49.0)

packages=(build-essential make git ca-certificates libutf8proc-dev libxxhash-dev libjansson-dev libevent-dev liburing-dev
          clang libclang-rt-dev python3 python3-numpy python3-jinja2 python3-torch chromium cmake curl)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$REF/.complete-$NLC_VERSION" ]; then
    echo "setup: fetching the reference engine (node-llama-cpp@$NLC_VERSION) into $REF"
    rm -rf "$REF"
    mkdir -p "$REF/pkg" "$REF/bins"
    (cd "$REF" && npm pack --silent "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/linux-x64@$NLC_VERSION" >/dev/null)
    tar xzf "$REF/node-llama-cpp-$NLC_VERSION.tgz" -C "$REF/pkg"
    tar xzf "$REF/node-llama-cpp-linux-x64-$NLC_VERSION.tgz" -C "$REF/bins"
    git -c advice.detachedHead=false clone -q "$REF/pkg/package/llama/gitRelease.bundle" "$REF/src"
    rm -f "$REF"/*.tgz
    test -f "$REF/bins/package/bins/linux-x64/libllama.v0.5.0.so"
    test -f "$REF/src/models/ggml-vocab-qwen35.gguf"
    touch "$REF/.complete-$NLC_VERSION"
fi
NODE=$LOOM_CACHE/node
stamp="$NODE/.complete-$(IFS=-; echo "${NODE_PACKAGES[*]}")"
if [ ! -f "$stamp" ]; then
    echo "setup: installing ${NODE_PACKAGES[*]} into $NODE"
    rm -rf "$NODE"
    mkdir -p "$NODE"
    npm install --prefix "$NODE" --silent --no-audit --no-fund "${NODE_PACKAGES[@]}" >/dev/null
    touch "$stamp"
fi
echo "setup: ready (reference in $REF, web test packages in $NODE)"
