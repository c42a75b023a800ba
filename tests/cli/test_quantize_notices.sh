#!/usr/bin/env bash
# test_quantize_notices.sh BUILD — what `loom quantize` tells its user beyond the conversion (issue 14): a
# tensor the --imatrix file has no entry for is named (llama-quantize's "did not find weights for"), an entry of
# another size is refused naming the tensor, and the end says how many tensors took importance weights; a
# --tensor-type pattern that chooses no tensor's type is named; each block-size fallback is named with its
# replacement, and counted at the end (as tensor_type_fallback warns), but held back when the types are refused
# (a recipe that needs an importance matrix, none given: the refusal comes alone); a malformed --tensor-type (no
# '=', unknown type, bad regular expression) is refused with exit status 2 before the input is read (a missing
# input is not even opened). The written bytes are unchanged by any of it (tests/parity/test_ref_quantize compares them with
# the reference). Needs the cached tiny models (scripts/run-tests.sh prepares them). Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$(realpath "$build/loom")
cache=${LOOM_CACHE:-$HOME/.cache/loom}
dense=$cache/models/qwen35-tiny-F16.gguf
im_dense=tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf
im_moe=tests/fixtures/imatrix/qwen35moe-tiny.imatrix.gguf
cd "$(dirname "$0")/../.."
pass=0 fail=0
dir=$(mktemp -d) err=$(mktemp)
trap 'rm -rf "$dir" "$err"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# The dense model's own importance matrix: every converted tensor but the token embedding (llama-imatrix
# collects none for it) takes weights, and the end says so.
"$loom" quantize -t 2 --imatrix "$im_dense" "$dense" "$dir/a.gguf" Q4_K_M >/dev/null 2>"$err"; rc=$?
check "quantize with the model's own imatrix succeeds" '[ $rc -eq 0 ] && [ -s "$dir/a.gguf" ]'
check "the token embedding, which has no entry, is named" \
    'grep -q "^loom quantize: tensor .token_embd.weight.: the importance matrix has no entry for it, quantized to Q6_K without one$" "$err"'
check "only the token embedding is named" '[ "$(grep -c "has no entry" "$err")" -eq 1 ]'
check "the end counts the tensors that took its weights" \
    'grep -q "^loom quantize: importance matrix .*qwen35-tiny.imatrix.gguf: 31 of 32 converted tensors quantized with its weights (31 of its 31 entries matched a tensor)$" "$err"'

# Under Q8_0 the entries are found but the quantizer ignores them (as the reference's): counted apart.
"$loom" quantize -t 2 --imatrix "$im_dense" "$dense" "$dir/q8.gguf" Q8_0 >/dev/null 2>"$err"; rc=$?
check "under Q8_0 the end says the types ignore the weights" \
    '[ $rc -eq 0 ] && grep -q ": 0 of 32 converted tensors quantized with its weights (31 of its 31 entries matched a tensor; the others. types ignore them)$" "$err"'

# The mixture-of-experts model's matrix on the dense model: the dense ffn tensors have no entry (named, each),
# the shared attention ones do.
"$loom" quantize -t 2 --imatrix "$im_moe" "$dense" "$dir/b.gguf" Q4_K_M >/dev/null 2>"$err"; rc=$?
check "quantize with another model's imatrix still succeeds (as the reference)" '[ $rc -eq 0 ]'
check "each tensor without an entry is named" \
    '[ "$(grep -c "has no entry for it" "$err")" -eq 13 ] && grep -q "tensor .blk.3.ffn_up.weight.: the importance matrix has no entry" "$err"'
check "the end counts 19 of 32" 'grep -q "19 of 32 converted tensors quantized with its weights (19 of its 51 entries matched a tensor)" "$err"'

# A model whose rows are 128 or 64 long: the dense matrix's 256-wide entries do not fit, refused naming the
# tensor; without an imatrix each block-size fallback is named, then counted.
"$loom" synth --preset micro -o "$dir/micro.gguf" >/dev/null 2>&1
"$loom" quantize -t 2 --imatrix "$im_dense" "$dir/micro.gguf" "$dir/c.gguf" Q4_K_M >/dev/null 2>"$err"; rc=$?
check "an imatrix entry of another size is refused naming the tensor and both sizes" \
    '[ $rc -eq 1 ] && grep -q "tensor .blk.0.attn_gate.weight.: the imatrix has 256 weights (1 x 256), expected ne\[0\] \* ne\[2\] = 128" "$err" && [ ! -e "$dir/c.gguf" ]'
"$loom" quantize -t 2 --tensor-type 'nomatch=q8_0' --tensor-type 'ATTN_QKV=q8_0' --tensor-type 'blk\.0\.attn_qkv=q6_k' \
    --tensor-type 'ffn_\D=q8_0' "$dir/micro.gguf" "$dir/d.gguf" Q4_K_M >/dev/null 2>"$err"; rc=$?
check "quantize with overrides that choose nothing succeeds" '[ $rc -eq 0 ]'
check "a pattern matching no tensor is named" \
    'grep -q "^loom quantize: --tensor-type pattern .nomatch. chose the type of no tensor: it matches no quantizable tensor name$" "$err"'
check "a pattern whose tensors an earlier one took is named" \
    'grep -q "pattern .blk\\\\.0\\\\.attn_qkv. chose the type of no tensor: it matches only tensors an earlier pattern took" "$err"'
check "a pattern is shown as compiled when that differs" "grep -q \"pattern 'ffn_\\\\\\\\D' (as compiled: 'ffn_\\[0-9\\]')\" \"\$err\""
check "a pattern that took a tensor is not named" '! grep -q "pattern .ATTN_QKV." "$err"'
check "each fallback is named with the type used instead" \
    'grep -q "^loom quantize: tensor .blk.0.ssm_out.weight.: row length 64 is not a multiple of Q4_K.s block size 256, using Q5_0 instead$" "$err" && grep -q "tensor .blk.1.attn_k.weight.: row length 128 is not a multiple of Q4_K.s block size 256, using Q5_0 instead" "$err"'
check "the overridden tensor (Q8_0 fits) does not fall back" '! grep -q "tensor .blk.0.attn_qkv.weight.: row length" "$err"'
check "the fallbacks are counted at the end" \
    'grep -q "^loom quantize: 12 of 27 tensors fell back to another type" "$err"'
"$loom" quantize -t 2 "$dir/micro.gguf" "$dir/f.gguf" IQ2_XXS >/dev/null 2>"$err"; rc=$?
check "a recipe that needs an imatrix, none given: the refusal alone, no fallback notices before it" \
    '[ $rc -eq 1 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "recipe IQ2_XXS: tensor .blk.0.ffn_down.weight. goes to IQ2_XXS, which needs an importance matrix, found none" "$err"'

# A malformed --tensor-type: exit 2 before the input is read (the input here does not exist).
for spec in 'attn_q' '=q8_0' 'attn_q=' 'attn_q=q9_9' 'attn[=q8_0' 'attn(=q8_0'; do
    "$loom" quantize --tensor-type "$spec" /nonexistent/in.gguf "$dir/e.gguf" Q4_K_M >/dev/null 2>"$err"; rc=$?
    check "--tensor-type '$spec' refused with exit 2 before the input is read" \
        '[ $rc -eq 2 ] && grep -qF "loom quantize: --tensor-type: tensor type '"'"'$spec'"'"'" "$err" && ! grep -q nonexistent "$err"'
done
"$loom" quantize --tensor-type 'attn_q=q9_9' "$dense" "$dir/e.gguf" Q4_K_M >/dev/null 2>"$err"
check "an unknown type is named as such" 'grep -q "type .q9_9., expected one loom quantizes to" "$err"'
"$loom" quantize --tensor-type 'attn[=q8_0' "$dense" "$dir/e.gguf" Q4_K_M >/dev/null 2>"$err"
check "a bad pattern is named with regcomp's reason" \
    'grep -q "pattern .attn\[. is not a POSIX extended regular expression: " "$err"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
