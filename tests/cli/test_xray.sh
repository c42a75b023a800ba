#!/usr/bin/env bash
# test_xray.sh BUILD — `loom xray` and `loom certify` against the reference engine on the cached tiny models: the
# edge list; a clean X-ray (every compared edge bitwise, nothing the reference lacks) of each tiny model in both
# schedules; the self-test: a one-ULP fault planted at one edge of every edge kind of both architectures (per-token
# schedule) is named first; canonical numerics diverge where the reference's batched order differs; usage errors;
# a certificate of a tiny model (bitwise, both numerics, the file's digest) and, against the reference's AVX2 build,
# one that is not bitwise in loom's avx512 float orders (the X-ray of its first divergent edge) and one bitwise in its
# haswell orders. The default float-order profile is the one of the build the reference picks for this CPU (haswell
# without AVX-512, avx512 with it). Where loom's profile (LOOM_ORDERS, else the CPU's) is not the reference build's
# (avx512 against a build without AVX-512, haswell against one with it, or LOOM_REF_CPU naming another build), the
# bitwise claims and the fault-planting self-test (which needs a bitwise baseline) are replaced by their "not bitwise"
# forms or skipped, said on one line. xray's header and JSON name the profile and who chose it (LOOM_ORDERS unset,
# avx512, haswell), and the JSON carries the header's note. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
models=${LOOM_CACHE:-$HOME/.cache/loom}/models
dense=$models/qwen35-tiny-F32.gguf moe=$models/qwen35moe-tiny-F32.gguf
pass=0 fail=0
dir=$(mktemp -d) out=$(mktemp) err=$(mktemp)
trap 'rm -rf "$dir" "$out" "$err"' EXIT
prompt="The quick brown fox jumps"

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err" | tail -n 20; fi
}

"$loom" xray --list -m "$dense" >"$out" 2>"$err"; rc=$?
check "xray --list runs" '[ $rc -eq 0 ]'
check "the list counts its edges" 'grep -qE "^.*: $(($(wc -l <"$out") - 1)) edges \(qwen35\)$" "$out"'
check "the list names a DeltaNet conv, its state per step, an attention gate, an FFN output" \
    'grep -qE "^blk\.0\.gdn\.conv +\[512\] +per token$" "$out" && grep -qE "^blk\.0\.gdn\.state +\[4\]\[64\]\[64\] +per step" "$out" &&
     grep -qE "^blk\.3\.attn\.gate " "$out" && grep -qE "^blk\.3\.ffn\.out " "$out" && grep -qE "^logits +\[[0-9]+\]" "$out"'
cp "$out" "$dir/dense.list"
"$loom" xray --list -m "$moe" >"$dir/moe.list" 2>"$err"; rc=$?
check "the MoE list has the router, the selected experts (int32) and the expert output" \
    '[ $rc -eq 0 ] && grep -qE "^blk\.0\.moe\.logits +\[8\]" "$dir/moe.list" && grep -qE "^blk\.0\.moe\.topk .*int32$" "$dir/moe.list" &&
     grep -qE "^blk\.0\.moe\.experts " "$dir/moe.list"'

# match=1: loom's float-order profile is the one of the reference's CPU build (xray's header has a note otherwise:
# avx512 against a build without AVX-512, or haswell against a build other than haswell and alderlake)
"$loom" xray -m "$dense" -p "$prompt" >"$out" 2>"$err"
match=1
grep -qE "^note: (the reference's CPU build has no AVX-512|loom's float-order profile haswell)" "$out" && match=0
[ $match = 1 ] || echo "loom's float orders are not the reference build's: bitwise checks and the planted-fault self-test replaced or skipped"
build_picked=$(sed -n 's/.*(CPU build \([a-z0-9_]*\), the best for this CPU).*/\1/p' "$out" | head -n 1)
check "the default float-order profile is the one of the build the reference picks ($build_picked)" \
    '[ -n "${LOOM_ORDERS:-}${LOOM_REF_CPU:-}" ] || [ $match = 1 ] || grep -qE "^(x64|sse42|sandybridge|ivybridge|piledriver)$" <<<"$build_picked"'
for f in qwen35-tiny-F32 qwen35-tiny-F16 qwen35-tiny-Q4_K_M qwen35moe-tiny-F32 qwen35moe-tiny-Q4_K_M; do
    for sched in "" --per-token; do
        "$loom" xray -m "$models/$f.gguf" -p "$prompt" -n 3 $sched >"$out" 2>"$err"; rc=$?
        if [ $match = 1 ]; then
            check "xray $f ${sched:-batched prompt}: exit 0, every compared row bitwise, no edge missing" \
                '[ $rc -eq 0 ] && grep -qE "^all [0-9]+ compared rows bitwise equal$" "$out" && ! grep -q "not in the reference" "$out"'
        else
            check "xray $f ${sched:-batched prompt} against a build without AVX-512: exit 1, a first divergent edge named" \
                '[ $rc -eq 1 ] && grep -qE "^first divergent: [a-z0-9_.]+ pos [0-9]+: " "$out" && ! grep -q "not in the reference" "$out"'
        fi
    done
done
check "the header names the reference's CPU build it picked (LOOM_REF_CPU unset)" \
    '[ -n "${LOOM_REF_CPU:-}" ] || grep -qE "\(CPU build [a-z0-9_]+, the best for this CPU\)" "$out"'
n_edges=$(($(wc -l <"$dir/dense.list") - 1))
"$loom" xray -m "$dense" -p "$prompt" -n 2 --per-token >"$out" 2>"$err"
rows=$(sed -n 's/^all \([0-9]*\) compared rows.*/\1/p; s/^\([0-9]*\) compared rows.*/\1/p' "$out")
# per-token schedule over 7 positions: every edge at every position (the edges per token, plus states per step)
check "per token, every edge of the list is compared at every position ($rows rows, $n_edges edges x 7)" '[ "$rows" = $((n_edges * 7)) ]'

"$loom" xray -m "$dense" -p "$prompt" --json >"$out" 2>"$err"; rc=$?
check "--json is one JSON object with the rows and no divergence (one, without AVX-512)" \
    '[ $rc -eq $((1 - match)) ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert (d[\"first_divergent\"] is None) == (sys.argv[2] == \"1\") and d[\"reference_avx512\"] in (True, False) and len(d[\"rows\"]) > 0" "$out" $match'
# the float-order profile and who chose it, in the header and the JSON: LOOM_ORDERS unset (the CPU's), then each value
cpu_orders=haswell
grep -qw avx512f /proc/cpuinfo && cpu_orders=avx512
for v in "" avx512 haswell; do
    want=${v:-$cpu_orders} from=cpu said="float orders ${v:-$cpu_orders} (the CPU's)" envs=(env -u LOOM_ORDERS)
    [ -z "$v" ] || from=LOOM_ORDERS said="float orders $v (LOOM_ORDERS)" envs=(env LOOM_ORDERS=$v)
    "${envs[@]}" "$loom" xray -m "$dense" -p hi >"$out" 2>"$err"
    check "LOOM_ORDERS=${v:-(unset)}: the header names $said next to the kernel set" \
        'head -n 1 "$out" | grep -qE "; loom: reference numerics, kernels [a-z0-9]+, ${said//[()]/.}; reference: "'
    "${envs[@]}" "$loom" xray -m "$dense" -p hi --json >"$out" 2>"$err"
    check "LOOM_ORDERS=${v:-(unset)}: the JSON's orders $want, orders_from $from" \
        'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"orders\"] == sys.argv[2] and d[\"orders_from\"] == sys.argv[3] and d[\"kernels\"]" "$out" $want $from'
done
"$loom" xray -m "$dense" -p "$prompt" --layers 3 --edges 'blk.3.attn.*' --json >"$out" 2>"$err"; rc=$?
check "--layers 3 --edges 'blk.3.attn.*' compares only those edges" \
    '[ $rc -eq 0 ] || [ $rc -eq $((1 - match)) ] && python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"rows\"]; assert r and all(x[\"edge\"].startswith(\"blk.3.attn.\") for x in r)" "$out"'

# The self-test: each edge kind once (its first layer), both architectures, a fault planted at position 2.
planted() { # model, list file
    local model=$1 list=$2 seen=" " name kind n=0 ok=0
    while read -r name shape rest; do
        kind=${name#blk.*.}
        case "$seen" in *" $kind "*) continue ;; esac
        case "$rest" in *int32*) continue ;; esac
        seen="$seen$kind "
        n=$((n + 1))
        "$loom" xray -m "$model" -p "$prompt" -n 1 --per-token --perturb "$name@2" >"$out" 2>"$err"
        if [ $? -eq 1 ] && grep -qE "^first divergent: $name pos 2: 1 of [0-9]+ differ, .*max ULP 1$" "$out"; then
            ok=$((ok + 1))
        else
            echo "planted at $name: $(grep -E '^first divergent' "$out")" >>"$dir/planted.log"
        fi
    done < <(tail -n +2 "$list")
    echo "$ok $n"
}
if [ $match = 1 ]; then # a planted fault is named first only where everything else is bitwise
    read -r ok n < <(planted "$dense" "$dir/dense.list")
    check "qwen35: a fault planted at each of the $n edge kinds is named first ($ok)" '[ "$ok" = "$n" ] && [ "$n" -ge 30 ]'
    read -r ok n < <(planted "$moe" "$dir/moe.list")
    check "qwen35moe: a fault planted at each of the $n edge kinds is named first ($ok)" '[ "$ok" = "$n" ] && [ "$n" -ge 38 ]'
    [ -f "$dir/planted.log" ] && cat "$dir/planted.log"
else
    echo "skipped (float orders not the reference build's): the planted-fault self-test"
fi

"$loom" xray -m "$models/qwen35-tiny-Q4_K_M.gguf" -p "$prompt" --numerics canonical >"$out" 2>"$err"; rc=$?
check "canonical numerics on Q4_K_M: exit 1, the first divergence at a batched matmul of position 0" \
    '[ $rc -eq 1 ] && grep -qE "^first divergent: blk\.0\.gdn\.qkv pos 0: " "$out"'
"$loom" xray -m "$dense" -p "$prompt" --perturb blk.0.nothing >"$out" 2>"$err"; rc=$?
check "--perturb of an edge the model lacks: exit 2, named" '[ $rc -eq 2 ] && grep -q "found .blk.0.nothing." "$err"'
"$loom" xray -m "$moe" -p "$prompt" --perturb blk.0.moe.topk >"$out" 2>"$err"; rc=$?
check "--perturb of an int32 edge: exit 2, named" '[ $rc -eq 2 ] && grep -q "expected an edge of floats" "$err"'
"$loom" xray -m "$dense" -p "$prompt" --perturb blk.3.attn.gate@99 >"$out" 2>"$err"; rc=$?
check "--perturb past the evaluated positions: exit 2" '[ $rc -eq 2 ] && grep -q "expected a position below" "$err"'
"$loom" xray -m "$dense" -p "$prompt" --edges 'nomatch*' >"$out" 2>"$err"; rc=$?
check "--edges matching nothing: exit 2, said" '[ $rc -eq 2 ] && grep -q "no edge of this model matches it" "$err"'
"$loom" xray -m "$dense" -p "$prompt" --layers 10 >"$out" 2>"$err"; rc=$?
check "--layers past the model's layers: exit 2, naming the count" '[ $rc -eq 2 ] && grep -q "the model has 4" "$err"'
"$loom" xray --list -m "$dense" --layers 3 --edges '*.attn.*' >"$out" 2>"$err"; rc=$?
check "--list shows what --layers and --edges select" '[ $rc -eq 0 ] && [ $(grep -c "^blk\.3\.attn\." "$out") -eq 7 ] && [ $(wc -l <"$out") -eq 8 ]'
for a in "-t 2" "--numerics canonical" "-n 1"; do
    "$loom" xray --list -m "$dense" $a >"$out" 2>"$err"; rc=$?
    check "--list with ${a% *}: a usage error" '[ $rc -eq 2 ] && grep -q -- "--list prints the model.s edges only: ${a% *} does not apply" "$err"'
done
for a in "" "@0" "embed@16777216"; do
    "$loom" xray -m "$dense" -p "$prompt" --perturb "$a" >"$out" 2>"$err"; rc=$?
    check "--perturb '$a': a usage error before anything runs" \
        '[ $rc -eq 2 ] && grep -q -- "--perturb expects EDGE or EDGE@POS (an edge name, a position in \[0, 16777215\]), found .$a.$" "$err"'
done
"$loom" xray --list -m "$dense" -p hi >"$out" 2>"$err"; rc=$?
check "--list with -p: a usage error saying -p does not apply" '[ $rc -eq 2 ] && grep -q -- "--list prints the model.s edges only: -p does not apply" "$err"'
"$loom" xray -m "$dense" -p "$prompt" --perturb embed@1 --edges logits >"$out" 2>"$err"; rc=$?
check "--perturb of an edge --edges leaves out is still compared and named first (without AVX-512: exit 1)" \
    '[ $rc -eq 1 ] && { [ $match = 0 ] || grep -qE "^first divergent: embed pos 1: 1 of 256 differ" "$out"; }'
"$loom" xray -m "$dense" -p "$prompt" --perturb blk.0.gdn.state@1 >"$out" 2>"$err"; rc=$?
check "--perturb of a state inside the batched prompt: exit 2, pointing at --per-token" '[ $rc -eq 2 ] && grep -q -- "--per-token" "$err"'
"$loom" xray -m "$dense" -p "$prompt" >/dev/full 2>"$err"; rc=$?
check "standard output that cannot be written: exit 2 (trouble), not 1 (divergent)" '[ $rc -eq 2 ]'
"$loom" xray -m "$dense" --layers 5-2 -p x >"$out" 2>"$err"; rc=$?
check "--layers 5-2: usage error naming the option" '[ $rc -eq 2 ] && grep -q -- "--layers expects" "$err"'
"$loom" xray -m "$dense" >"$out" 2>"$err"; rc=$?
check "xray without -p: usage error" '[ $rc -eq 2 ] && grep -q -- "-p TEXT is required" "$err"'

printf 'Once upon a time\n\n  \nint main(void) {\n' >"$dir/prompts.txt"
"$loom" certify -m "$models/qwen35-tiny-Q4_K_M.gguf" --prompts "$dir/prompts.txt" -n 8 -o "$dir/cert" >"$out" 2>"$err"; rc=$?
if [ $match = 1 ]; then
    check "certify a tiny Q4_K_M: exit 0, both files written" '[ $rc -eq 0 ] && [ -s "$dir/cert.md" ] && [ -s "$dir/cert.json" ]'
    check "the certificate says bitwise and prints the same Markdown" \
        'grep -q "^\*\*Bitwise equal in reference numerics" "$dir/cert.md" && cmp -s "$out" "$dir/cert.md"'
else
    check "certify a tiny Q4_K_M against a build of other float orders: exit 1, both files written" \
        '[ $rc -eq 1 ] && [ -s "$dir/cert.md" ] && [ -s "$dir/cert.json" ]'
    check "the certificate says not bitwise, says why, and prints the same Markdown" \
        'grep -q "^\*\*Not bitwise in reference numerics" "$dir/cert.md" && grep -qE "^Expected to differ: (the reference.s CPU build has no AVX-512|loom.s float-order profile haswell)" "$dir/cert.md" && cmp -s "$out" "$dir/cert.md"'
fi
check "the JSON: 2 prompts in both numerics, every reference row bitwise (orders matching), the reference's settings, the digest" \
    'python3 - "$dir/cert.json" $match <<"PY"
import json, os, sys
c = json.load(open(sys.argv[1]))
ref, can = c["reference"], c["canonical"]
r = c["identity"]["reference"]
assert len(ref) == 2 and len(can) == 2
assert all(p["rows"] == p["prompt_tokens"] + 8 for p in ref)
assert sys.argv[2] == "0" or all(p["bitwise_rows"] == p["rows"] and p["top1_agree"] == p["rows"] for p in ref)
assert c["identity"]["loom"]["orders"] in ("avx512", "haswell")
assert c["identity"]["loom"]["orders_from"] == ("LOOM_ORDERS" if os.environ.get("LOOM_ORDERS") else "cpu")
assert r["flash_attention"] == "off" and r["kv_type"] == "F16" and "llama.cpp v0.5.0" in r["engine"]
assert len(c["identity"]["model"]["xxh3_128"]) == 32 and c["identity"]["loom"]["version"]
PY'
if command -v xxhsum >/dev/null; then
    want=$(xxhsum -H2 "$models/qwen35-tiny-Q4_K_M.gguf" | awk '{print $1}')
    check "the certificate's digest is xxhsum -H2 of the file" 'grep -q "$want" "$dir/cert.md"'
fi
LOOM_ORDERS=avx512 LOOM_REF_CPU=haswell "$loom" certify -m "$models/qwen35-tiny-Q4_K_M.gguf" --prompts "$dir/prompts.txt" \
    -n 2 -o "$dir/cert2" >"$out" 2>"$err"; rc=$?
check "loom's AVX-512 orders against the reference's AVX2 build: exit 1, not bitwise, why, the first divergent edge" \
    '[ $rc -eq 1 ] && grep -q "^\*\*Not bitwise in reference numerics" "$dir/cert2.md" && grep -q "^Expected to differ: the reference.s CPU build has no AVX-512 (haswell); .*(LOOM_ORDERS=haswell reproduces it;" "$dir/cert2.md" &&
     python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"identity\"][\"reference\"][\"avx512\"] is False" "$dir/cert2.json" &&
     grep -qE "X-ray: blk\.[0-9]+\.[a-z_.]+ pos [0-9]+: [0-9]+ of" "$dir/cert2.md"'
LOOM_ORDERS=haswell LOOM_REF_CPU=haswell "$loom" certify -m "$models/qwen35-tiny-Q4_K_M.gguf" --prompts "$dir/prompts.txt" \
    -n 2 -o "$dir/cert3" >"$out" 2>"$err"; rc=$?
check "loom's haswell orders against the reference's AVX2 build: exit 0, bitwise, no note, the profile in the JSON" \
    '[ $rc -eq 0 ] && grep -q "^\*\*Bitwise equal in reference numerics" "$dir/cert3.md" && ! grep -q "AVX-512" "$dir/cert3.md" &&
     grep -q "float orders haswell (LOOM_ORDERS)" "$dir/cert3.md" &&
     python3 -c "import json,sys; l = json.load(open(sys.argv[1]))[\"identity\"][\"loom\"]; assert l[\"orders\"] == \"haswell\" and l[\"orders_from\"] == \"LOOM_ORDERS\"" "$dir/cert3.json"'
LOOM_ORDERS=haswell LOOM_REF_CPU=sse42 "$loom" xray -m "$dense" -p "$prompt" >"$out" 2>"$err"; rc=$?
check "loom's haswell orders against another build (sse42): a note naming it, not bitwise" \
    '[ $rc -eq 1 ] && grep -q "^note: loom.s float-order profile haswell reproduces the reference.s haswell and alderlake builds, so expect differences from this one (sse42; docs/" "$out"'
LOOM_ORDERS=avx512 LOOM_REF_CPU=sse42 "$loom" xray -m "$dense" -p "$prompt" >"$out" 2>"$err"; rc=$?
check "loom's avx512 orders against a build other than haswell without AVX-512: the note names it, no false pointer" \
    '[ $rc -eq 1 ] && grep -q "^note: the reference.s CPU build has no AVX-512 (sse42); .*(LOOM_ORDERS=haswell reproduces its haswell and alderlake builds;" "$out"'
# --json carries the text report's note in the same words (null when the text has none)
for orders in avx512 haswell; do
    for cpu in sse42 haswell; do
        text=$(LOOM_ORDERS=$orders LOOM_REF_CPU=$cpu "$loom" xray -m "$dense" -p "$prompt" 2>"$err" | sed -n 's/^note: //p')
        LOOM_ORDERS=$orders LOOM_REF_CPU=$cpu "$loom" xray -m "$dense" -p "$prompt" --json >"$out" 2>"$err"
        check "xray --json under LOOM_ORDERS=$orders LOOM_REF_CPU=$cpu: the note of its text report${text:+ (one)}" \
            'python3 -c "import json,sys; n = json.load(open(sys.argv[1]))[\"note\"]; assert n == (sys.argv[2] or None), n" "$out" "$text"'
    done
done
"$loom" certify -m "$dense" --prompts "$dir/none.txt" >"$out" 2>"$err"; rc=$?
check "certify --prompts of a missing file: usage error naming it" '[ $rc -eq 2 ] && grep -q "none.txt: No such file" "$err"'
printf 'one\n\xff\xfe not UTF-8\r\nthree | four\n' >"$dir/odd.txt"
"$loom" certify -m "$dense" --prompts "$dir/odd.txt" -n 1 -o "$dir/odd" >"$out" 2>"$err"; rc=$?
check "certify keeps a prompt that is not UTF-8 (as U+FFFD), drops the CR, escapes | in the table" \
    '[ $rc -eq $((1 - match)) ] || [ $rc -eq 0 ] && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert [p[\"prompt\"] for p in d[\"reference\"]] == [\"one\", \"\ufffd\ufffd not UTF-8\", \"three | four\"] and (d[\"bitwise\"] or sys.argv[2] == \"0\")" "$dir/odd.json" $match &&
     grep -qF "| three \| four |" "$dir/odd.md"'
seq 1 70 | sed 's/^/prompt /' >"$dir/many.txt"
"$loom" certify -m "$dense" --prompts "$dir/many.txt" >"$out" 2>"$err"; rc=$?
check "certify --prompts of 70 lines: refused, naming the limit" '[ $rc -eq 2 ] && grep -q "at most 64 prompts" "$err"'
"$loom" certify -m "$dense" -o "$dir/missing/cert" >"$out" 2>"$err"; rc=$?
check "certify -o into a missing folder: refused before running" '[ $rc -eq 2 ] && grep -q "output .$dir/missing/cert.json.: directory .$dir/missing. does not exist$" "$err" && ! grep -q "prompt 1" "$err"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
