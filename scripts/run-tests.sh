#!/usr/bin/env bash
# run-tests.sh BUILD SANBUILD — run every loom test binary and print one closing line "N passed, N failed".
# Unit tests run twice (plain and under ASan/UBSan); parity tests run against the reference engine on
# synthetic models that scripts/prepare-models.sh generates once and caches under $LOOM_CACHE/models, and
# the command-line tests (tests/cli/) run `loom` on those models.
set -uo pipefail
build=${1:-build}
san=${2:-build-san}
export LOOM_CACHE=${LOOM_CACHE:-$HOME/.cache/loom}
export LOOM_REF=${LOOM_REF:-$LOOM_CACHE/ref}
total_pass=0
total_fail=0
log=$(mktemp)

run_one() { # name, command...
    local name=$1; shift
    local t0=$SECONDS
    "$@" >"$log" 2>&1
    local rc=$?
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p f
    p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
    p=${p:-0}; f=${f:-0}
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-44s %5d passed %3d failed  %4ds\n' "$name" "$p" "$f" $((SECONDS - t0))
    if [ "$f" -ne 0 ]; then sed 's/^/    | /' "$log" | tail -n 40; fi
}

# the models first: some unit tests (test_state) also run on them, and skip them when they are missing
models_ok=0
if [ -d "$build/tests/parity" ]; then
    if scripts/prepare-models.sh "$build" >"$log" 2>&1; then
        models_ok=1
    else
        echo "prepare-models failed:"; tail -n 40 "$log"; total_fail=$((total_fail + 1))
    fi
fi
for t in "$build"/tests/test_*; do
    [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in "$san"/tests/test_*; do
    [ -x "$t" ] && run_one "asan/$(basename "$t")" "$t"
done
if [ $models_ok -eq 1 ]; then
    for t in "$build"/tests/parity/*; do
        [ -x "$t" ] && run_one "parity/$(basename "$t")" "$t"
    done
    for t in tests/cli/test_*.sh; do # the `loom` command itself, on the prepared tiny model
        run_one "cli/$(basename "$t")" bash "$t" "$build"
    done
fi
rm -f "$log"
echo "${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
