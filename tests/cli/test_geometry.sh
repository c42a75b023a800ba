#!/usr/bin/env bash
# test_geometry.sh BUILD — the published geometries from the command line: `loom synth --sparse` writes a 27B
# Q4_K_M file and a 397B file in parts that take almost no disk, `loom inspect --ctx N` admits them and prints the
# memory at N positions (K/V = N x the per-token figure), --ctx beyond context_length and malformed values are
# refused, --split needs --sparse; the sparse files carry loom.synth.sparse, which inspect shows and run refuses;
# inspect's grammar at --ctx 8; a vision projector (mmproj) and a llama file are refused by inspect and run
# saying what they are. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
pass=0 fail=0
dir=$(mktemp -d)
out=$dir/stdout err=$dir/stderr
trap 'rm -rf "$dir"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$out" "$err" | tail -5; fi
}

"$loom" synth --help >"$out" 2>"$err"
check "synth --help names --sparse and --split" 'grep -q -- "--sparse" "$out" && grep -q -- "--split N" "$out"'

"$loom" synth --preset 27b --type Q4_K_M --sparse -o "$dir/27b.gguf" >"$out" 2>"$err"; rc=$?
check "synth --sparse 27b Q4_K_M succeeds" '[ $rc -eq 0 ]'
# 16545373536 bytes (the generated file's layout) plus the key loom.synth.sparse: 30 bytes, padded to the alignment 32
check "the 27b file is 16545373568 bytes long and takes under 64 MiB" \
    '[ "$(stat -c %s "$dir/27b.gguf")" = 16545373568 ] && [ $(($(stat -c %b "$dir/27b.gguf") * 512)) -lt $((64 << 20)) ]'
"$loom" inspect --ctx 262144 "$dir/27b.gguf" >"$out" 2>"$err"; rc=$?
check "inspect --ctx 262144 admits the 27b file" '[ $rc -eq 0 ] && grep -q "^architecture: qwen35$" "$out"'
check "inspect prints the 27b hyper-parameters" \
    'grep -q "embedding_length *5120" "$out" && grep -q "block_count (layers run) *64" "$out" &&
     grep -q "attention.head_count / _kv *24 / 4" "$out" && grep -q "ssm.time_step_rank (value heads) *48" "$out"'
# K/V: 16 attention layers x (K + V) x 4 KV heads x 256 x 2 bytes = 65536 B per token; x 262144 = 17179869184
check "inspect's K/V at 262144 positions is 16 GiB (65536 B per token)" \
    'grep -q "memory at a 262144-token context" "$out" && grep -q "KV cache per token (F16 K and V) *65536 B" "$out" &&
     grep -q "KV cache, 16 attention layers *17179869184 B" "$out"'
"$loom" inspect "$dir/27b.gguf" >"$out" 2>"$err"
check "inspect without --ctx gives the memory at 4096 positions" 'grep -q "KV cache, 16 attention layers *268435456 B" "$out"'
check "inspect says the file is sparse synthetic (loom.synth.sparse)" \
    'grep -q "^sparse synthetic file (loom.synth.sparse)" "$out"'
"$loom" run -m "$dir/27b.gguf" -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run refuses the sparse file naming loom.synth.sparse and loom inspect" \
    '[ $rc -ne 0 ] && grep -q "key loom.synth.sparse" "$err" && grep -q "sparse synthetic file" "$err" &&
     grep -q "loom inspect" "$err"'
"$loom" synth --preset tiny --sparse -o "$dir/t1.gguf" >"$out" 2>"$err"
"$loom" inspect --ctx 8 "$dir/t1.gguf" >"$out" 2>"$err"; rc=$?
check "inspect --ctx 8: an 8-token context, 1 attention layer (singular)" \
    '[ $rc -eq 0 ] && grep -q "memory at an 8-token context" "$out" && grep -q "total for an 8-token context" "$out" &&
     grep -q "KV cache, 1 attention layer  " "$out"'
"$loom" synth --preset tiny --sparse --split 100 -o "$dir/t100.gguf" >"$out" 2>"$err"; rc=$?
check "synth --split beyond the tensor count says synth once" \
    '[ $rc -eq 2 ] && grep -q "^loom synth: 100 split parts" "$err" && ! grep -q "synth: synth:" "$err"'
"$loom" inspect --ctx 262145 "$dir/27b.gguf" >"$out" 2>"$err"; rc=$?
check "inspect --ctx beyond context_length: a usage error naming it" \
    '[ $rc -eq 2 ] && grep -q -- "--ctx: expected at most the model.s context_length 262144, found 262145" "$err"'
"$loom" inspect --ctx 0 "$dir/27b.gguf" >"$out" 2>"$err"; rc=$?
check "inspect --ctx 0 is a usage error" '[ $rc -eq 2 ] && grep -q -- "--ctx expects a context length in .*found .0." "$err"'

"$loom" synth --preset 397b-a17b --type Q4_K_M --sparse --split 4 -o "$dir/397b.gguf" >"$out" 2>"$err"; rc=$?
check "synth --sparse --split 4 writes the 397b parts" '[ $rc -eq 0 ] && [ -e "$dir/397b-00004-of-00004.gguf" ]'
check "synth --split names the first part's file" \
    'grep -q "wrote 4 sparse parts, the first $dir/397b-00001-of-00004.gguf" "$err"'
"$loom" inspect "$dir/397b-00001-of-00004.gguf" >"$out" 2>"$err"; rc=$?
check "inspect admits the split 397b model" \
    '[ $rc -eq 0 ] && grep -q "^split model: 4 parts" "$out" && grep -q "expert_count / expert_used_count *512 / 10" "$out"'
"$loom" synth --preset 9b --split 2 -o "$dir/9b.gguf" >"$out" 2>"$err"; rc=$?
check "synth --split without --sparse is a usage error" '[ $rc -eq 2 ] && grep -q "needs --sparse" "$err"'

# printf escapes of the n-byte little-endian value v; a GGUF string
le() { local v=$1 n=$2 i s=; for ((i = 0; i < n; i++)); do s+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done; printf '%s' "$s"; }
gstr() { printf "$(le ${#1} 8)"; printf '%s' "$1"; }
# A GGUF v3 file with general.architecture = $2 (and, for clip, clip.projector_type as mmproj files carry it), no
# tensors.
foreign() {
    local n=1; [ "$2" = clip ] && n=2
    {
        printf 'GGUF'; printf "$(le 3 4)$(le 0 8)$(le $n 8)"
        gstr general.architecture; printf "$(le 8 4)"; gstr "$2"
        if [ "$2" = clip ]; then gstr clip.projector_type; printf "$(le 8 4)"; gstr qwen3vl_merger; fi
    } >"$1"
}
foreign "$dir/mmproj.gguf" clip
"$loom" inspect "$dir/mmproj.gguf" >"$out" 2>"$err"; rc=$?
check "inspect refuses an mmproj file as a vision projector" \
    '[ $rc -eq 1 ] && grep -q "vision projector (an mmproj file)" "$err" && grep -q "text model" "$err"'
"$loom" run -m "$dir/mmproj.gguf" -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run refuses an mmproj file as a vision projector" '[ $rc -ne 0 ] && grep -q "vision projector" "$err"'
foreign "$dir/llama.gguf" llama
"$loom" inspect "$dir/llama.gguf" >"$out" 2>"$err"; rc=$?
check "inspect refuses a llama file naming what loom runs" \
    '[ $rc -eq 1 ] && grep -q "found .llama." "$err" && grep -q "runs only .qwen35. and .qwen35moe." "$err"'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
