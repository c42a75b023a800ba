#!/usr/bin/env bash
# test_default_model.sh BUILD — the default model's preparation when its models directory is removed meanwhile: a
# loom process waiting for another's preparation starts over once (makes the directory anew, locks it, prepares),
# and fails naming the directory when it is removed a second time; the preparing one stops, naming the directory.
# Another preparation is played by a process holding the directory's flock (as a preparing loom does), or is a
# real one; every preparation started here is stopped by SIGTERM once it shows it began. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$(realpath "$build/loom")
cache=${LOOM_CACHE:-$HOME/.cache/loom}
ref=${LOOM_REF:-$cache/ref}
pass=0 fail=0
tmp=$(mktemp -d /tmp/loom-test-default-model-XXXXXX)
err=$tmp/err
holders=()
trap 'for h in "${holders[@]}"; do kill "$h" 2>/dev/null; done; rm -rf "$tmp"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# wait_until CONDITION: poll it (every 20 ms, for at most 60 s); false on timeout
wait_until() {
    local end=$((SECONDS + 60))
    until eval "$1"; do
        if [ $SECONDS -ge $end ]; then
            echo "timed out waiting for: $1"
            return 1
        fi
        sleep 0.02
    done
}

# finish PID: its exit status, once it ends (killed after 60 s: status 137)
finish() {
    wait_until "! kill -0 $1 2>/dev/null" || kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# hold DIR: a process holding DIR's flock, as a loom process preparing the default model in it does; holder=its pid
hold() {
    (exec 9<"$1" && flock 9 && exec sleep 300) &
    holder=$!
    holders+=("$holder")
    wait_until "! flock -n '$1' true"
}

# start CACHE NAME: `loom run` of the default model in $tmp/CACHE, stderr in $tmp/NAME.err; pid=its pid
start() {
    LOOM_CACHE=$tmp/$1 LOOM_REF=$ref "$loom" run -p hi -n 1 >/dev/null 2>"$tmp/$2.err" &
    pid=$!
}

said() { grep -qF -- "$1" "$err"; } # said TEXT: the current stderr ($err) holds TEXT

# ---- the directory removed while loom waits for another process's preparation: it starts over once ----
models=$tmp/wait/models
mkdir -p "$models"
hold "$models"
start wait wait
err=$tmp/wait.err
wait_until "grep -qs '^loom: waiting for another loom process preparing the default model in ' '$err'"
rm -rf "$models"
wait_until "grep -qs '^loom: synthesizing default model' '$err'"
check "waiting: says the models directory was removed and it starts over" \
    'said "loom: the models directory $models was removed while waiting; preparing the default model from the start"'
check "waiting: makes the directory anew and prepares the model in it" \
    '[ -d "$models" ] && said "loom: preparing the default model $models/qwen35-0.8b-synth-Q4_K_M.gguf (once)"'
kill -TERM $pid
finish $pid; rc=$?
check "waiting, then preparing: SIGTERM exits 143 and leaves nothing" '[ $rc -eq 143 ] && [ -z "$(ls -A "$models")" ]'
kill "$holder"

# ---- removed twice while waiting (replaced by a directory another process holds): fails naming it ----
models=$tmp/twice/models
mkdir -p "$models"
hold "$models"
start twice twice
err=$tmp/twice.err
wait_until "grep -qs '^loom: waiting for another loom process' '$err'"
for k in 1 2; do # each time a new directory, locked, takes the place of the one loom waits on
    mkdir "$models.new"
    hold "$models.new"
    mv -T "$models.new" "$models"
    [ $k -eq 1 ] && wait_until "[ \$(grep -cs '^loom: waiting for another loom process' '$err') -eq 2 ]"
done
finish $pid; rc=$?
check "removed twice while waiting: exits 1" '[ $rc -eq 1 ]'
check "removed twice while waiting: said it starts over once, then fails naming the directory" \
    '[ $(grep -c "was removed while waiting; preparing the default model from the start" "$err") -eq 1 ] &&
     said "loom run: default model: the models directory $models was removed twice while waiting for other loom processes preparing the default model"'
check "removed twice while waiting: prepares nothing" '! said "(once)" && [ -z "$(ls -A "$models")" ]'

# ---- removed while one loom prepares and another waits: the first fails naming it, the second starts over ----
models=$tmp/both/models
mkdir -p "$models"
start both first
first=$pid
wait_until "grep -qs '^loom: synthesizing default model' '$tmp/first.err'"
start both second
second=$pid
wait_until "grep -qs '^loom: waiting for another loom process' '$tmp/second.err'"
rm -rf "$models"
finish $first; rc=$?
err=$tmp/first.err
check "preparing: exits 1 when its directory is removed" '[ $rc -eq 1 ]'
check "preparing: its preparation says the directory was removed" \
    'said "loom: the models directory $models was removed while the default model was being prepared in it"'
check "preparing: its error names the directory" \
    'said "loom run: default model: preparing $models/qwen35-0.8b-synth-Q4_K_M.gguf failed: the models directory $models was removed meanwhile"'
err=$tmp/second.err
wait_until "grep -qs '^loom: synthesizing default model' '$err'"
check "waiting: starts over in a new directory once the first one's is removed" \
    'said "was removed while waiting; preparing the default model from the start" && [ -d "$models" ] &&
     said "loom: preparing the default model $models/qwen35-0.8b-synth-Q4_K_M.gguf (once)"'
kill -TERM $second
finish $second; rc=$?
check "waiting, then preparing: SIGTERM exits 143 and leaves nothing" '[ $rc -eq 143 ] && [ -z "$(ls -A "$models")" ]'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
