#!/usr/bin/env bash
# prepare-models.sh BUILD — generate (once) the synthetic qwen35 / qwen35moe test models the parity tests use,
# cached under $LOOM_CACHE/models, with BUILD/loom synth and BUILD/loom quantize, and the files llama.cpp's own
# converter makes from synthetic Hugging Face checkpoints (tools/hf/qwen35_hf.py; hf-qwen35-*.gguf).
# Each model has a stamp (FILE.stamp) naming the generator version, seed and inputs: a model whose stamp
# differs (e.g. after a generator change) is regenerated; otherwise nothing is done.
set -euo pipefail

build=${1:-build}
export LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
export LOOM_REF=${LOOM_REF:-$LOOM_CACHE/ref}
loom=$build/loom
vocab=$LOOM_REF/src/models/ggml-vocab-qwen35.gguf
models=$LOOM_CACHE/models
seed=1234

[ -x "$loom" ] || { echo "prepare-models: $loom not found (run: make BUILD=$build all)" >&2; exit 1; }
[ -f "$vocab" ] || { echo "prepare-models: vocabulary $vocab not found (run scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$models"

gen_version=$("$loom" synth --generator-version)
vocab_id=$(stat -c %s "$vocab")-$(cksum <"$vocab" | cut -d' ' -f1)
base="synth-v$gen_version seed=$seed vocab=$vocab_id"

# fresh FILE KEY: the model exists and its stamp holds KEY
fresh() { [ -f "$1" ] && [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$2" ]; }

# synth PRESET TYPE [STEM] (the file is STEM-TYPE.gguf; STEM defaults to qwen35-PRESET)
synth() {
    local out=$models/${3:-qwen35-$1}-$2.gguf key="$base preset=$1 type=$2"
    fresh "$out" "$key" && return 0
    echo "prepare-models: generating $out"
    rm -f "$out.stamp"
    "$loom" synth --preset "$1" --type "${2,,}" --seed "$seed" --vocab "$vocab" -o "$out"
    echo "$key" >"$out.stamp"
}

# quantize PRESET TYPE [STEM] (from the preset's F16 model STEM-F16.gguf; STEM defaults to qwen35-PRESET)
quantize() {
    local src=$models/${3:-qwen35-$1}-F16.gguf out=$models/${3:-qwen35-$1}-$2.gguf
    local key
    key="$(cat "$src.stamp") quant=$2 quantizer=loom"
    fresh "$out" "$key" && return 0
    echo "prepare-models: quantizing $src -> $out"
    rm -f "$out.stamp" "$out.tmp"
    "$loom" quantize "$src" "$out" "$2" >"$out.log" 2>&1 || { tail -n 20 "$out.log" >&2; exit 1; }
    rm -f "$out.log"
    echo "$key" >"$out.stamp"
}

synth tiny F32
synth tiny F16
quantize tiny Q4_K_M
synth 0.8b F16
quantize 0.8b Q4_K_M
synth tiny-moe F32 qwen35moe-tiny
synth tiny-moe F16 qwen35moe-tiny
quantize tiny-moe Q4_K_M qwen35moe-tiny
synth tiny-moe-fused F32 qwen35moe-tiny-fused
synth tiny-moe-e16 F16 qwen35moe-tiny-e16

# Files made by llama.cpp's own converter: tools/hf/qwen35_hf.py writes a small synthetic Hugging Face checkpoint
# of each variant and runs the reference's convert_hf_to_gguf.py on it (needs python3-torch), two at a time.
hf=$(dirname "$0")/../tools/hf/qwen35_hf.py
hf_convert() { # VARIANT: $models/hf-qwen35-VARIANT.gguf
    local out=$models/hf-qwen35-$1.gguf key="$hf_base variant=$1"
    fresh "$out" "$key" && return 0
    echo "prepare-models: converting $out"
    rm -f "$out.stamp" "$out.tmp"
    /usr/bin/python3 "$hf" convert "$1" "$out.tmp" --seed "$seed" && mv "$out.tmp" "$out" && echo "$key" >"$out.stamp"
}
if /usr/bin/python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null; then
    src=$LOOM_REF/src
    hf_base="hf-$(/usr/bin/python3 "$hf" version) seed=$seed converter=$(cat "$src/convert_hf_to_gguf.py" \
        "$src"/conversion/*.py "$src"/gguf-py/gguf/*.py | cksum | cut -d' ' -f1)"
    mapfile -t variants < <(/usr/bin/python3 "$hf" list | cut -d' ' -f1)
    hf_lane() { for ((i = $1; i < ${#variants[@]}; i += 2)); do hf_convert "${variants[i]}" || return 1; done; }
    hf_lane 0 & lane=$!
    hf_ok=1
    hf_lane 1 || hf_ok=0
    wait "$lane" || hf_ok=0
    [ "$hf_ok" = 1 ] || { echo "prepare-models: converting the tools/hf variants failed" >&2; exit 1; }
else
    echo "prepare-models: python3-torch missing: the converted models (hf-qwen35-*) are skipped (run scripts/setup.sh)"
fi
echo "prepare-models: models ready in $models"
