#!/usr/bin/env bash
# run-tests.sh BUILD SANBUILD — run every loom test binary and print one closing line "N passed, N failed".
# Unit tests run twice (plain and under ASan/UBSan); parity tests run against the reference engine on
# synthetic models that scripts/prepare-models.sh generates once and caches under $LOOM_CACHE/models, and
# the command-line tests (tests/cli/) run `loom` on those models. The tests that time things, send signals
# or start servers (SOLO: the command-line tests with polls, signals or servers) run first, one at a time; the
# others then run two at a time (LOOM_TEST_JOBS, default 2: the machine's two cores), the longest (LONG,
# minutes each) started first so the shorter ones fill the other core: they keep their files in private
# temporary folders and measure no time. Each test writes its own log; the lines are printed in the suite's
# order.
set -uo pipefail
build=${1:-build}
san=${2:-build-san}
export LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
export LOOM_REF=${LOOM_REF:-$LOOM_CACHE/ref}
max_jobs=${LOOM_TEST_JOBS:-2}
SOLO='^cli/test_(cli|chat_cache|default_model|serve|serve_templates|signals|web)\.sh$'
LONG='^parity/test_(ref_quantize|parity_ubatch|parity_qwen35|parity_qwen35moe)$'
total_pass=0
total_fail=0
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=() cmds=() class=() # class: 0 SOLO, 1 LONG, 2 the others
declare -A running=() # pid -> job index
printed=0

add() { # name, command (words quoted for eval)
    names+=("$1") cmds+=("$2")
    if [[ $1 =~ $SOLO ]]; then class+=(0); elif [[ $1 =~ $LONG ]]; then class+=(1); else class+=(2); fi
}

start() { # job index: the command in the background, its log in $logs/i.log, "rc seconds" in $logs/i.rc
    local i=$1
    ( t0=$SECONDS; eval "${cmds[i]}" >"$logs/$i.log" 2>&1
      echo "$? $((SECONDS - t0))" >"$logs/$i.tmp" && mv "$logs/$i.tmp" "$logs/$i.rc" ) & # whole when seen
    running[$!]=$i
}

reap() { # wait for one running job, then print every finished job not yet printed, in the suite's order
    local pid=
    wait -n -p pid "${!running[@]}"
    if [ -n "$pid" ]; then unset "running[$pid]"; else running=(); fi # none left to wait for
    while [ "$printed" -lt "${#names[@]}" ] && [ -f "$logs/$printed.rc" ]; do
        report "$printed"
        printed=$((printed + 1))
    done
}

report() { # job index: its counts into the totals, its line, and its log's tail when it failed
    local i=$1 rc secs line p f
    read -r rc secs <"$logs/$i.rc"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logs/$i.log" | tail -n 1)
    p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
    p=${p:-0}; f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-44s %5d passed %3d failed  %4ds\n' "${names[i]}" "$p" "$f" "$secs"
    if [ "$f" -ne 0 ]; then sed 's/^/    | /' "$logs/$i.log" | tail -n 40; fi
}

# the models first: some unit tests (test_state) also run on them, and skip them when they are missing
models_ok=0
if [ -d "$build/tests/parity" ]; then
    if scripts/prepare-models.sh "$build" >"$logs/models.log" 2>&1; then
        models_ok=1
    else
        echo "prepare-models failed:"; tail -n 40 "$logs/models.log"; total_fail=$((total_fail + 1))
    fi
fi
for t in "$build"/tests/test_*; do
    [ -x "$t" ] && add "$(basename "$t")" "$(printf '%q' "$t")"
done
for t in "$san"/tests/test_*; do
    [ -x "$t" ] && add "asan/$(basename "$t")" "$(printf '%q' "$t")"
done
if [ $models_ok -eq 1 ]; then
    for t in "$build"/tests/parity/*; do
        [ -x "$t" ] && add "parity/$(basename "$t")" "$(printf '%q' "$t")"
    done
    for t in tests/cli/test_*.sh; do # the `loom` command itself, on the prepared tiny model
        add "cli/$(basename "$t")" "bash $(printf '%q %q' "$t" "$build")"
    done
fi
for c in 0 1 2; do # the SOLO tests one at a time, then the LONG ones and the others max_jobs at a time
    for i in "${!names[@]}"; do
        [ "${class[i]}" -eq "$c" ] || continue
        while [ "${#running[@]}" -ge $((c ? max_jobs : 1)) ]; do reap; done
        start "$i"
    done
    [ "$c" -ne 0 ] || while [ "${#running[@]}" -gt 0 ]; do reap; done
done
while [ "${#running[@]}" -gt 0 ]; do reap; done
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
