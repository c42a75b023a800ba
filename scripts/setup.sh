#!/usr/bin/env bash
# setup.sh — install what loom builds and tests with on a fresh Debian machine (run as root), and fetch
# the reference engine (llama.cpp v0.5.0 as shipped in npm node-llama-cpp@3.22.1) into the cache folder
# this script owns: ${LOOM_CACHE:-~/.cache/loom}/ref. Idempotent: a second run does nothing new.
set -euo pipefail

LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
REF=$LOOM_CACHE/ref
NLC_VERSION=3.22.1

packages=(build-essential make git ca-certificates libutf8proc-dev libxxhash-dev libjansson-dev libevent-dev liburing-dev
          clang libclang-rt-dev python3 python3-numpy python3-jinja2)
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
echo "setup: ready (reference in $REF)"
