#!/usr/bin/env bash
# test_cache_type_k.sh BUILD — the K cache type option from the command line on the cached tiny F16 model:
# --cache-type-k / -ctk is taken by run, chat, serve, bench, xray and inspect; anything but f16 or q8_0 is
# refused (exit 2) naming the option, the expected values and the value found; `run -ctk q8_0` generates
# text; `inspect --ctx 1000` prints the per-token K/V bytes of each type (the tiny model: one attention layer,
# one KV head of 256: F16 K 512 + V 512 = 1024 B, Q8_0 K 8 blocks x 34 = 272 + 512 = 784 B). Prints
# "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-F16.gguf
pass=0 fail=0
dir=$(mktemp -d)
out=$dir/stdout err=$dir/stderr
trap 'rm -rf "$dir"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# refusals: every subcommand names the option as given, the values it takes and the one found
for cmd in run chat serve bench xray; do
    "$loom" $cmd -m "$model" --cache-type-k q4_0 -p hi -n 1 </dev/null >"$out" 2>"$err"; rc=$?
    check "$cmd --cache-type-k q4_0 exits 2" '[ $rc -eq 2 ]'
    check "$cmd --cache-type-k q4_0 names the values" \
        'grep -q "loom $cmd: --cache-type-k expects f16 or q8_0 (the K cache; V stays f16), found .q4_0." "$err"'
done
"$loom" run -m "$model" -ctk BF16 -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -ctk BF16 is refused with the spelling given" \
    '[ $rc -eq 2 ] && grep -q "loom run: -ctk expects f16 or q8_0 (the K cache; V stays f16), found .BF16." "$err"'
"$loom" inspect -ctk q5_1 "$model" >"$out" 2>"$err"; rc=$?
check "inspect -ctk q5_1 is refused" \
    '[ $rc -eq 2 ] && grep -q "loom inspect: -ctk expects f16 or q8_0 (the K cache; V stays f16), found .q5_1." "$err"'

# accepted spellings: q8_0 in any case
"$loom" run -m "$model" -ctk Q8_0 -p "The lighthouse keeper" -n 6 -t 1 >"$out" 2>"$err"; rc=$?
check "run -ctk Q8_0 generates" '[ $rc -eq 0 ] && [ -s "$out" ] && grep -q "decode" "$err"'
"$loom" run -m "$model" --cache-type-k f16 -p "The lighthouse keeper" -n 6 -t 1 >"$out" 2>"$err"; rc=$?
check "run --cache-type-k f16 generates" '[ $rc -eq 0 ] && [ -s "$out" ]'

# sizes: inspect's memory section with each K type
"$loom" inspect --ctx 1000 "$model" >"$out" 2>"$err"; rc=$?
check "inspect F16 K: 1024 B per token" \
    '[ $rc -eq 0 ] && grep -Eq "KV cache per token \(F16 K and V\) +1024 B" "$out" && grep -Eq "attention layer +1024000 B" "$out"'
"$loom" inspect --ctx 1000 --cache-type-k q8_0 "$model" >"$out" 2>"$err"; rc=$?
check "inspect Q8_0 K: 784 B per token" \
    '[ $rc -eq 0 ] && grep -Eq "KV cache per token \(Q8_0 K, F16 V\) +784 B" "$out" && grep -q "KV rows above in F16; with the q8_0 K cache the K rows are q8_0" "$out" && grep -Eq "attention layer +784000 B" "$out"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
