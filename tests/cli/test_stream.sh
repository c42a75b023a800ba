#!/usr/bin/env bash
# test_stream.sh BUILD — `loom run --mem-budget` on the cached tiny MoE model: the greedy text of the resident run
# (also for the model split in 3 parts, when build/tools/split_model exists); --stats' figures and JSON line, per token too; a
# budget too small refused with its numbers, a malformed one named; a dense model within the budget runs (its text
# the resident run's), over it is refused with the numbers; and a run inside a cgroup v1 memory group
# limited to the budget (created here and removed; skipped where this process cannot create one), the MoE model's
# and the dense model's, that never reaches the limit (memory.failcnt 0, memory.max_usage_in_bytes under it). Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
split=$build/tools/split_model
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35moe-tiny-Q4_K_M.gguf
budget=120M budget_bytes=$((120 << 20))
pass=0 fail=0
dir=$(mktemp -d) out=$(mktemp) err=$(mktemp)
cg=
cleanup() { [ -n "$cg" ] && rmdir "$cg" 2>/dev/null; rm -rf "$dir" "$out" "$err"; }
trap cleanup EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

args=(-p "The quick brown fox" -n 24 --temp 0 -t 2)
"$loom" run -m "$model" "${args[@]}" >"$out" 2>"$err"
resident=$(cat "$out")
"$loom" run -m "$model" "${args[@]}" --mem-budget "$budget" --stats >"$out" 2>"$err"; rc=$?
check "run --mem-budget $budget runs" '[ $rc -eq 0 ]'
check "run --mem-budget prints the resident run's text" '[ "$(cat "$out")" = "$resident" ] && [ -n "$resident" ]'
check "--stats prints the budget's parts" 'grep -qE "^loom run: experts: budget 120 MiB = dense [0-9]+ \+ sessions" "$err"'
check "--stats prints one JSON line with the reads" \
    'grep -E "^\{\"expert_stats\":" "$err" | python3 -c "import json,sys; s=json.load(sys.stdin)[\"expert_stats\"]; sys.exit(0 if s[\"misses\"] > 0 and s[\"bytes_read\"] > 0 and s[\"tokens\"] > 0 else 1)"'
decoded=$(sed -nE 's/^loom run: .*\| decode ([0-9]+) tokens.*/\1/p' "$err")
check "--stats gives the prompt and each decoded token, adding up to the run's figures" \
    'grep -E "^\{\"expert_stats\":" "$err" | python3 -c "import json,sys; s=json.load(sys.stdin)[\"expert_stats\"]; t=[s[\"prompt\"]]+s[\"per_token\"]; sys.exit(0 if len(s[\"per_token\"]) == $decoded > 0 and sum(x[\"hits\"]+x[\"misses\"] for x in t) == s[\"hits\"]+s[\"misses\"] and sum(x[\"bytes_read\"] for x in t) == s[\"bytes_read\"] else 1)" && grep -q "^loom run: experts per decoded token ($decoded): exposed I/O wait p50" "$err"'

for ahead in none history all; do
    "$loom" run -m "$model" "${args[@]}" --mem-budget "$budget" --read-ahead $ahead >"$out" 2>"$err"; rc=$?
    check "--read-ahead $ahead prints the resident run's text" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$resident" ]'
done
"$loom" run -m "$model" "${args[@]}" --mem-budget "$budget" --read-ahead often >"$out" 2>"$err"; rc=$?
check "a malformed --read-ahead is a usage error naming the value" '[ $rc -eq 2 ] && grep -q "read-ahead expects.*often" "$err"'
"$loom" run -m "$model" "${args[@]}" --read-ahead all >"$out" 2>"$err"; rc=$?
check "--read-ahead without a budget is a usage error" '[ $rc -eq 2 ] && grep -q "read-ahead .* needs --mem-budget" "$err"'
"$loom" run -m "$model" "${args[@]}" --stats >"$out" 2>"$err"; rc=$?
check "--stats without a budget is a usage error" '[ $rc -eq 2 ] && grep -q "stats .* needs --mem-budget" "$err"'

"$loom" run -m "$model" "${args[@]}" --mem-budget 40M >"$out" 2>"$err"; rc=$?
check "a budget below the dense part fails" '[ $rc -eq 1 ]'
check "the refusal gives the numbers" \
    'grep -qE "memory budget at load: expected at least [0-9.]+ MiB \(dense part [0-9.]+ MiB.*found 40.0 MiB" "$err"'
"$loom" run -m "$model" "${args[@]}" --mem-budget 1K >"$out" 2>"$err"; rc=$?
check "a budget under 1 MiB is said in bytes" '[ $rc -eq 1 ] && grep -q "found 1024 bytes;" "$err"'
"$loom" run -m "$model" "${args[@]}" --mem-budget 12X >"$out" 2>"$err"; rc=$?
check "a malformed budget is a usage error naming the value" '[ $rc -eq 2 ] && grep -q "mem-budget expects.*12X" "$err"'
dense=${model/qwen35moe/qwen35}
"$loom" run -m "$dense" "${args[@]}" >"$out" 2>"$err"
dense_text=$(cat "$out")
"$loom" run -m "$dense" "${args[@]}" --mem-budget "$budget" >"$out" 2>"$err"; rc=$?
check "a dense model within the budget runs (nothing to stream) and prints the resident run's text" \
    '[ $rc -eq 0 ] && [ -n "$dense_text" ] && [ "$(cat "$out")" = "$dense_text" ]'
"$loom" run -m "$dense" "${args[@]}" --mem-budget "$budget" --stats >"$out" 2>"$err"; rc=$?
check "--stats of a dense model: one line, nothing to stream, the budget's parts, and the JSON line" \
    '[ $rc -eq 0 ] && grep -qE "^loom run: experts: none to stream \(a dense model\): budget [0-9]+ MiB = dense [0-9]+ \+ sessions [0-9]+ \+ reserve 64 \+ [0-9]+ MiB unused$" "$err" &&
     ! grep -q "hit rate" "$err" && grep -q "^{\"expert_stats\":{.*\"slot_bytes\":0," "$err"'
"$loom" run -m "$dense" "${args[@]}" --mem-budget 80M >"$out" 2>"$err"; rc=$?
check "a dense model over the budget is refused with the numbers, saying it is dense" \
    '[ $rc -eq 1 ] && grep -qE "memory budget at load: expected at least [0-9.]+ MiB \(dense part [0-9.]+ MiB .*; a dense model: every weight is in the dense part, nothing streams\), found 80.0 MiB" "$err"'

if [ -x "$split" ]; then
    "$split" "$model" "$dir/moe" 3 2>"$err"
    "$loom" run -m "$dir/moe-00001-of-00003.gguf" "${args[@]}" --mem-budget "$budget" >"$out" 2>"$err"; rc=$?
    check "a split model streams its experts from every part" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$resident" ]'
fi

# the run inside a memory cgroup of the budget's size
mem_root=/sys/fs/cgroup/memory
self=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
if [ -w "$mem_root$self" ] && mkdir "$mem_root$self/loom-stream-$$" 2>/dev/null; then
    cg=$mem_root$self/loom-stream-$$
    echo "$budget_bytes" >"$cg/memory.limit_in_bytes"
    sync; echo 1 >/proc/sys/vm/drop_caches 2>/dev/null # the file's pages must not be charged from an earlier run
    (echo $BASHPID >"$cg/cgroup.procs" && exec "$loom" run -m "$model" "${args[@]}" --mem-budget "$budget") \
        >"$out" 2>"$err"; rc=$?
    failcnt=$(cat "$cg/memory.failcnt") max=$(cat "$cg/memory.max_usage_in_bytes")
    echo "cgroup run: limit $budget_bytes, max usage $max, failcnt $failcnt"
    check "the run inside a $budget memory cgroup succeeds" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$resident" ]'
    check "it never reached the limit (failcnt $failcnt, max usage $max of $budget_bytes)" \
        '[ "$failcnt" -eq 0 ] && [ "$max" -lt "$budget_bytes" ]'
    echo 0 >"$cg/memory.max_usage_in_bytes"
    sync; echo 1 >/proc/sys/vm/drop_caches 2>/dev/null
    (echo $BASHPID >"$cg/cgroup.procs" && exec "$loom" run -m "$dense" "${args[@]}" --mem-budget "$budget") \
        >"$out" 2>"$err"; rc=$?
    failcnt=$(cat "$cg/memory.failcnt") max=$(cat "$cg/memory.max_usage_in_bytes")
    echo "cgroup run of the dense model: limit $budget_bytes, max usage $max, failcnt $failcnt"
    check "the dense model's run inside it succeeds and never reaches the limit (failcnt $failcnt, max usage $max)" \
        '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$dense_text" ] && [ "$failcnt" -eq 0 ] && [ "$max" -lt "$budget_bytes" ]'
else
    echo "memory cgroup (v1) not writable here: the cgroup run is skipped"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
