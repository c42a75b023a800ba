#!/usr/bin/env bash
# test_check.sh BUILD — tensor data validation from the command line: `loom quantize` refuses values its
# output type's F16 scales cannot hold (exit 1, the tensor, row and block named, no output or temporary file
# left), and --check-tensors on `loom inspect`, `run`, `chat` and `bench` refuses a damaged copy of the cached
# tiny Q4_K_M model that loads without the flag; without it, NaN weights that reach the hidden state get an
# error pointing at --check-tensors. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf
pass=0 fail=0
dir=$(mktemp -d)
out=$dir/stdout err=$dir/stderr
trap 'rm -rf "$dir"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# printf escapes of the n-byte little-endian value v (escapes, not bytes: shell strings cannot hold NUL)
le() { local v=$1 n=$2 i s=; for ((i = 0; i < n; i++)); do s+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done; printf '%s' "$s"; }
gstr() { printf "$(le ${#1} 8)"; printf '%s' "$1"; }

# A GGUF v3 file with general.architecture = llama, llama.block_count = 1 and one F32 tensor
# blk.0.ffn_up.weight [256, 2]: row 0 all 1.0, row 1 all the float with bits $2. (An architecture loom does not
# run: quantize admits files of the ones it runs first, and this file is no whole model.)
make_f32() {
    {
        printf 'GGUF'; printf "$(le 3 4)$(le 1 8)$(le 2 8)"
        gstr general.architecture; printf "$(le 8 4)"; gstr llama
        gstr llama.block_count; printf "$(le 4 4)$(le 1 4)"
        gstr blk.0.ffn_up.weight; printf "$(le 2 4)$(le 256 8)$(le 2 8)$(le 0 4)$(le 0 8)"
    } >"$1"
    local size one big i
    size=$(stat -c %s "$1")
    head -c $(((32 - size % 32) % 32)) /dev/zero >>"$1"
    one=$(le $((0x3f800000)) 4) big=$(le $(($2)) 4)
    { for ((i = 0; i < 256; i++)); do printf "$one"; done; for ((i = 0; i < 256; i++)); do printf "$big"; done; } >>"$1"
}

# 1e6 (bits 0x49742400) overflows Q4_0's scale (d = 1e6 / -8) but not Q8_0's (d = 1e6 / 127 = 7874); 1e9
# (0x4e6e6b28) overflows Q8_0's too. llama_model_quantize decides the same (tests/parity/test_ref_validate.c).
make_f32 "$dir/1e6.gguf" 0x49742400
"$loom" quantize -t 2 "$dir/1e6.gguf" "$dir/q4_0.gguf" Q4_0 >"$out" 2>"$err"; rc=$?
check "quantize Q4_0 of 1e6 weights exits 1" '[ $rc -eq 1 ]'
check "quantize Q4_0 names tensor, row, block and the inf scale" \
    'grep -q "tensor .blk.0.ffn_up.weight. row 1: quantized Q4_0 block 0 scale d is inf, expected finite" "$err"'
check "quantize Q4_0 leaves no output and no temporary" '[ ! -e "$dir/q4_0.gguf" ] && ! ls "$dir"/q4_0.gguf.*tmp >/dev/null 2>&1'
"$loom" quantize -t 2 "$dir/1e6.gguf" "$dir/q8_0.gguf" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize Q8_0 of 1e6 weights (scale 7874 fits F16) succeeds" '[ $rc -eq 0 ] && [ -s "$dir/q8_0.gguf" ]'
make_f32 "$dir/1e9.gguf" 0x4e6e6b28
"$loom" quantize -t 2 "$dir/1e9.gguf" "$dir/q8_0b.gguf" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize Q8_0 of 1e9 weights exits 1 naming the row" \
    '[ $rc -eq 1 ] && grep -q "row 1: quantized Q8_0 block 0 scale d is inf" "$err" && [ ! -e "$dir/q8_0b.gguf" ]'

# a copy of the tiny Q4_K_M model with a NaN dmin in row 5 of blk.0.ffn_up.weight (rows of 256 = one
# 144-byte Q4_K block; dmin is bytes 2..3 of the block); the file offset comes from `loom inspect`
bad=$dir/damaged.gguf
cp "$model" "$bad"
off=$("$loom" inspect "$bad" | awk '$1 == "blk.0.ffn_up.weight" { print $NF }')
printf '\x00\x7e' | dd of="$bad" bs=1 seek=$((off + 5 * 144 + 2)) conv=notrunc status=none
want="tensor 'blk.0.ffn_up.weight' row 5: Q4_K block 0 scale dmin is nan, expected finite"
"$loom" inspect "$bad" >"$out" 2>"$err"; rc=$?
check "inspect without --check-tensors reads no tensor data" '[ $rc -eq 0 ]'
"$loom" inspect --check-tensors "$bad" >"$out" 2>"$err"; rc=$?
check "inspect --check-tensors refuses the damaged file" '[ $rc -eq 1 ] && grep -qF "$want" "$err"'
"$loom" run -m "$bad" --check-tensors -p hi -n 1 -t 2 >"$out" 2>"$err"; rc=$?
check "run --check-tensors refuses the damaged file" '[ $rc -eq 1 ] && grep -qF "$want" "$err"'
"$loom" run -m "$bad" -p hi -n 1 -t 2 >"$out" 2>"$err"
check "run without --check-tensors does not check at load" '! grep -q "expected finite" "$err"'
# NaNs in the last 4 KiB of the F32 model (its last tensor's data) reach the hidden state: the error says where
# to look
nan=$dir/nan.gguf
cp "${model%-Q4_K_M.gguf}-F32.gguf" "$nan"
python3 -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.seek(-4096,2); f.write(struct.pack("<f",float("nan"))*1024)' "$nan"
"$loom" run -m "$nan" -p hi -n 1 -t 2 >"$out" 2>"$err"; rc=$?
check "run without --check-tensors points at it when NaN weights reach the hidden state" \
    '[ $rc -eq 1 ] && grep -q "non-finite.*check_tensors, .--check-tensors., names the tensor" "$err"'
"$loom" chat -m "$bad" --check-tensors -t 2 </dev/null >"$out" 2>"$err"; rc=$?
check "chat --check-tensors refuses the damaged file" '[ $rc -eq 1 ] && grep -qF "$want" "$err"'
"$loom" bench -m "$bad" --check-tensors -p 0 -n 1 -r 1 -t 2 >"$out" 2>"$err"; rc=$?
check "bench --check-tensors refuses the damaged file" '[ $rc -ne 0 ] && grep -qF "$want" "$err"'
"$loom" run -m "$model" --check-tensors -p hi -n 1 --temp 0 -t 2 >"$out" 2>"$err"; rc=$?
check "run --check-tensors accepts the intact model" '[ $rc -eq 0 ]'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
