#!/usr/bin/env bash
# test_signals.sh BUILD — Ctrl+C (SIGINT), SIGTERM and SIGHUP in every long-running `loom` command, on the cached
# tiny models: run stops with its text and timing line (status 130 / 143 / 129); chat stops an answer and keeps the
# part printed (a turn stopped before its answer began is dropped, saying how far its prefill, in requests of 512
# tokens, got), and leaves on a signal at the prompt, a second one, or SIGTERM / SIGHUP, saying so; bench, quantize,
# synth and the default model's preparation stop with no temporary or half-written file, the preparation also when
# loom is SIGKILLed (its child ends by its parent-death signal); a second loom waits for the first's preparation, a
# signal stopping the wait; a signal ignored on entry (SIGHUP under nohup, SIGINT, SIGTERM) stays ignored in run and
# chat (serve_test.py checks serve); chat refuses a line holding a NUL byte; a reader that closes its pipe early
# (SIGPIPE ignored): standard output named, status 1 (2 in xray and certify), while a closed standard error stops no
# GGUF write (synth and quantize finish their file, no temporary file left).
# Signals are sent once the command has shown it reached the step under test (an output marker, or for chat's
# prefill the bytes it has read); every wait is bounded. Prints "N passed, N failed".
set -uo pipefail
# A shell that inherited SIGHUP ignored (nohup) passes it on to every command and cannot reset it: run again
# without it (env does reset it), so that the SIGHUP cases test loom's handling rather than nohup's.
if [ $((0x$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 1)) -ne 0 ]; then
    exec env --default-signal=HUP bash "$0" "$@"
fi
# A shell that inherited SIGINT ignored (a background job without job control: `nohup CMD &`, `CMD &` in a
# script) passes it on to every command: their Ctrl+C would never arrive, so say so instead of waiting.
if [ $((0x$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 2)) -ne 0 ]; then
    echo "FAIL: SIGINT is ignored in this shell (started as a background job without job control?)"
    echo "0 passed, 1 failed"
    exit 1
fi
set -m # background jobs in their own process groups: SIGINT not ignored, and `kill -INT -PID` reaches a group
build=${1:-build}
loom=$(realpath "$build/loom")
cache=${LOOM_CACHE:-$HOME/.cache/loom}
tiny=$cache/models/qwen35-tiny-Q4_K_M.gguf tiny_f16=$cache/models/qwen35-tiny-F16.gguf
ref=${LOOM_REF:-$cache/ref}
vocab=$ref/src/models/ggml-vocab-qwen35.gguf
pass=0 fail=0
tmp=$(mktemp -d /tmp/loom-test-signals-XXXXXX)
out=$tmp/out err=$tmp/err fifo=$tmp/fifo
trap '[ $BASHPID = $$ ] && rm -rf "$tmp"' EXIT # the main shell only: not a job's fork signalled before its exec

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

# rchar PID: bytes the process has read through read() so far
rchar() { awk '/^rchar:/ {print $2}' "/proc/$1/io"; }

# ---- run ----------------------------------------------------------------------------------------------------
for sig in INT TERM HUP; do
    rm -f "$out" "$err"
    "$loom" run -m "$tiny" -p "The quick brown fox" -n 4000 --temp 0 -t 1 >"$out" 2>"$err" &
    pid=$!
    wait_until "[ -s '$out' ]"
    kill -$sig $pid
    finish $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    check "run: SIG$sig during generation exits $want" '[ $rc -eq $want ]'
    check "run: SIG$sig prints the timing line" 'grep -q "^loom run: prompt .* generated) | peak RSS" "$err"'
    check "run: SIG$sig says it was interrupted" 'grep -q "^loom run: interrupted (SIG$sig)" "$err"'
    check "run: SIG$sig ends the text with a newline" '[ "$(tail -c 1 "$out" | od -An -c | tr -d " ")" = "\n" ]'
    check "run: SIG$sig stopped early" '[ $(grep -o "decode [0-9]*" "$err" | cut -d" " -f2) -lt 3999 ]'
done

# a signal ignored on entry (SIGHUP under nohup, SIGINT in a script's background job, `trap '' TERM`) stays ignored:
# the other signal after it stops the run (were the ignored one handled, it would stop the work first: SIGTERM and
# SIGHUP rank before SIGINT, and SIGINT came first)
for pair in HUP:INT TERM:INT INT:TERM; do
    ign=${pair%:*} by=${pair#*:}
    rm -f "$out" "$err"
    env --ignore-signal=$ign "$loom" run -m "$tiny" -p "The quick brown fox" -n 4000 --temp 0 -t 1 >"$out" 2>"$err" &
    pid=$!
    wait_until "[ -s '$out' ]"
    kill -$ign $pid
    kill -$by $pid
    finish $pid; rc=$?
    want=$((128 + $(kill -l $by)))
    check "run: SIG$ign ignored on entry stays ignored (SIG$ign, then SIG$by: exits $want)" '[ $rc -eq $want ]'
    check "run: SIG$ign ignored on entry: interrupted by SIG$by" 'grep -q "^loom run: interrupted (SIG$by)" "$err"'
done

# during the prompt: a long prompt's prefill stops at the next layer, with a timing line saying how much of the
# prompt was evaluated (whole requests of 512 tokens; test_cli.sh checks the count on a prompt stopped mid-way)
long=$(for i in $(seq 4000); do printf 'word%d ' $i; done)
rm -f "$out" "$err"
"$loom" run -m "$tiny" -p "$long" -n 4 --temp 0 -t 1 >"$out" 2>"$err" &
pid=$!
wait_until "grep -qs '^loom run: context' '$err'"
kill -INT $pid
finish $pid; rc=$?
check "run: SIGINT during the prompt exits 130" '[ $rc -eq 130 ]'
check "run: SIGINT during the prompt prints the timing line" 'grep -q "^loom run: prompt interrupted after [0-9]* of [0-9]* tokens, .* decode 0 tokens" "$err"'
check "run: SIGINT during the prompt prints no text" '[ ! -s "$out" ]'

# ---- chat (piped stdin, fed line by line through a FIFO) -------------------------------------------------
# start_chat: loom chat on the FIFO, which this script holds open read-write on fd 3 (so that writing never
# blocks); closing fd 3 is the end of input
start_chat() {
    rm -f "$fifo" "$out" "$err" && mkfifo "$fifo" && exec 3<>"$fifo"
    "$loom" chat -m "$tiny" --temp 0 -t 1 -n 4000 -c 32768 <"$fifo" >"$out" 2>"$err" 3>&- &
    pid=$!
}
stop_chat() { exec 3>&-; finish $pid; }

# mid-answer: the part printed stays in the conversation, the next message is answered after it (and stopped too)
start_chat
echo "hello there" >&3
wait_until "[ -s '$out' ]"
kill -INT $pid
wait_until "grep -qs '^(stopped' '$err'"
partial=$(cat "$out")
echo "/history" >&3
wait_until "grep -qs '^(2 messages)' '$err'"
echo "and then?" >&3
wait_until "[ \$(wc -c <'$out') -gt $(wc -c <"$out") ]"
kill -INT $pid
wait_until "[ \$(grep -c '^(stopped' '$err') -eq 2 ]"
echo "/history" >&3
wait_until "grep -qs '^(4 messages)' '$err'"
stop_chat; rc=$?
check "chat: SIGINT mid-answer is reported as kept" 'grep -q "^(stopped: the answer so far stays in the conversation)" "$err"'
check "chat: the partial answer is printed and in the history" '[ -n "$partial" ] && [[ "$(cat "$err")" == *"[assistant] $partial"* ]]'
check "chat: the conversation continues after the partial answer" 'grep -q "^\[user\] and then?" "$err"'
check "chat: SIGINT mid-answer, then end of input: status 0" '[ $rc -eq 0 ]'

# during the prefill of a long message: the turn is dropped, the chat goes on
start_chat
echo "/history" >&3
wait_until "grep -qs '^(0 messages)' '$err'"
read0=$(rchar $pid)
printf '%s\n' "$long" >&3
wait_until "[ \$(rchar $pid) -ge $((read0 + ${#long} + 1)) ]" # the whole line is read: the turn has begun
kill -INT $pid
wait_until "grep -qs '^(stopped' '$err'"
echo "/timing" >&3
echo "/history" >&3
wait_until "[ \$(grep -c '^(0 messages)' '$err') -eq 2 ]"
stop_chat; rc=$?
stopped=$(grep -o '^(stopped before the answer began: prefill stopped after [0-9]* of [0-9]* tokens; the message was dropped)$' "$err")
k=$(echo "$stopped" | grep -o 'after [0-9]*' | cut -d' ' -f2) n=$(echo "$stopped" | grep -o 'of [0-9]*' | cut -d' ' -f2)
check "chat: SIGINT during the prefill drops the turn, saying how far the prefill got" '[ -n "$stopped" ]'
check "chat: the prefill runs in requests of 512 tokens (stopped after K of N: K a multiple of 512, below N)" \
    '[ -n "$k" ] && [ $((k % 512)) -eq 0 ] && [ "$k" -lt "$n" ]'
check "chat: /timing says the same of the last turn" \
    'grep -q "^last turn: prefill stopped after $k of $n tokens in [0-9.]* s, 0 reused" "$err"'
check "chat: SIGINT during the prefill, then end of input: status 0" '[ $rc -eq 0 ]'

# at the prompt: ends the chat
start_chat
echo "/history" >&3
wait_until "grep -qs '^(0 messages)' '$err'"
kill -INT $pid
stop_chat; rc=$?
check "chat: SIGINT at the prompt exits 130" '[ $rc -eq 130 ]'

# SIGTERM or SIGHUP during an answer: ends the chat once the answer has stopped
for sig in TERM HUP; do
    start_chat
    echo "hello there" >&3
    wait_until "[ -s '$out' ]"
    kill -$sig $pid
    finish $pid; rc=$? # input still open: the signal alone ends the chat
    exec 3>&-
    want=$((128 + $(kill -l $sig)))
    check "chat: SIG$sig during an answer exits $want" '[ $rc -eq $want ]'
    check "chat: SIG$sig during an answer stops it, saying the chat ends" 'grep -q "^(stopped by SIG$sig: the chat ends)$" "$err"'
done

# SIGHUP during the prefill: the turn stops where the prefill got to, and the chat ends
start_chat
echo "/history" >&3
wait_until "grep -qs '^(0 messages)' '$err'"
read0=$(rchar $pid)
printf '%s\n' "$long" >&3
wait_until "[ \$(rchar $pid) -ge $((read0 + ${#long} + 1)) ]"
kill -HUP $pid
finish $pid; rc=$?
exec 3>&-
check "chat: SIGHUP during the prefill exits 129" '[ $rc -eq 129 ]'
check "chat: SIGHUP during the prefill says how far it got and that the chat ends" \
    'grep -q "^(stopped by SIGHUP before the answer began: prefill stopped after [0-9]* of [0-9]* tokens; the chat ends)$" "$err"'

# SIGINT ignored on entry (a script's background job) stays ignored: the answer goes on; SIGTERM then ends the chat
rm -f "$fifo" "$out" "$err" && mkfifo "$fifo" && exec 3<>"$fifo"
env --ignore-signal=INT "$loom" chat -m "$tiny" --temp 0 -t 1 -n 4000 -c 32768 <"$fifo" >"$out" 2>"$err" 3>&- &
pid=$!
echo "hello there" >&3
wait_until "[ -s '$out' ]"
kill -INT $pid
size=$(wc -c <"$out")
wait_until "[ \$(wc -c <'$out') -gt $((size + 64)) ]" # still answering
kill -TERM $pid
stop_chat; rc=$?
check "chat: SIGINT ignored on entry stays ignored (the answer goes on; SIGTERM then exits 143)" \
    '[ $rc -eq 143 ] && grep -q "^(stopped by SIGTERM: the chat ends)$" "$err" && ! grep -q "^(stopped:" "$err"'

# a line holding a NUL byte is refused whole, not cut at the NUL; the chat goes on (status 1 at the end)
printf 'ab\0cd\n/history\n' | "$loom" chat -m "$tiny" --temp 0 -t 1 -n 4 >"$out" 2>"$err"; rc=$?
check "chat: a line with a NUL byte is refused naming where, nothing sent, an empty answer line, status 1" \
    '[ $rc -eq 1 ] && grep -q "^loom chat: input line 1: expected text, found a NUL byte at offset 2 (the line was not sent)$" "$err" && grep -q "^(0 messages)$" "$err" && [ "$(cat "$out")" = "" ] && [ "$(wc -c <"$out")" -eq 1 ]'

# a real terminal: Ctrl+C (^C through a pty) stops the answer, the prompt returns, ^C at the prompt leaves
python3 - "$loom" "$tiny" >"$err" 2>&1 <<'EOF'
import os, pty, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "chat", "-m", sys.argv[2], "--temp", "0", "-t", "1", "-n", "4000"])
seen = b""
def wait_for(marker, after=0):  # the end of marker's first occurrence at or past `after`; b"": any new byte
    global seen
    end = time.time() + 60
    while marker not in seen[after:] or len(seen) <= after:
        if time.time() > end:  # (a chat that inherited SIGINT ignored, e.g. from `nohup ... &`, never stops)
            os.kill(pid, signal.SIGKILL)
            sys.exit("timed out waiting for %r; seen %r" % (marker, seen[-300:]))
        if not select.select([fd], [], [], 1.0)[0]:
            continue
        try:
            seen += os.read(fd, 4096)
        except OSError:
            sys.exit("the chat ended early; seen %r" % seen[-300:])
    return seen.index(marker, after) + len(marker) if marker else len(seen)
at = wait_for(b"> ")
os.write(fd, b"hello there\r")
at = wait_for(b"hello there\r\n", at)
at = wait_for(b"", at)             # the answer is streaming
os.write(fd, b"\x03")
at = wait_for(b"(stopped: the answer so far stays in the conversation)", at)
at = wait_for(b"> ", at)
os.write(fd, b"\x03")
for _ in range(600):  # at most 60 s for the chat to end
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
else:
    os.kill(pid, signal.SIGKILL)
    sys.exit("the chat did not end on ^C at the prompt")
print("pty: exit signal %d" % (os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1))
EOF
check "chat on a terminal: ^C stops the answer, ^C at the prompt leaves (by SIGINT)" 'grep -q "^pty: exit signal 2$" "$err"'

# ---- bench ----------------------------------------------------------------------------------------------------
for sig in INT HUP; do
    rm -f "$out" "$err"
    "$loom" bench -m "$tiny" -p 16 -n 256 -r 100 -t 1 >"$out" 2>"$err" &
    pid=$!
    sleep 1 # any point of a run of minutes: warm-up or measurement
    kill -$sig $pid
    finish $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    check "bench: SIG$sig exits $want" '[ $rc -eq $want ]'
    check "bench: SIG$sig says it was interrupted" 'grep -q "^loom bench: interrupted (SIG$sig)" "$err"'
    check "bench: SIG$sig prints nothing or the rows measured" '[ ! -s "$out" ] || grep -q "^| model" "$out"'
done

# ---- quantize and synth: no output, no temporary file -----------------------------------------------------
mkdir "$tmp/q"
echo old >"$tmp/q/existing.gguf"
for sig in INT HUP; do
    for target in new existing; do
        rm -f "$out" "$err"
        "$loom" quantize -t 1 "$tiny_f16" "$tmp/q/$target.gguf" Q4_K_M >"$out" 2>"$err" &
        pid=$!
        wait_until "grep -qs '^quantize: ' '$err'"
        kill -$sig $pid
        finish $pid; rc=$?
        want=$((128 + $(kill -l $sig)))
        check "quantize to a $target file: SIG$sig exits $want" '[ $rc -eq $want ]'
        check "quantize to a $target file: SIG$sig says nothing was written" \
            'grep -q "^loom quantize: interrupted (SIG$sig): .* not written" "$err"'
    done
done
check "quantize: no temporary file, no new output, the existing file untouched" \
    '[ "$(ls -A "$tmp/q")" = existing.gguf ] && [ "$(cat "$tmp/q/existing.gguf")" = old ]'

mkdir "$tmp/s"
for sig in TERM HUP; do
    rm -f "$out" "$err"
    "$loom" synth --preset tiny --vocab "$vocab" -o "$tmp/s/tiny.gguf" >"$out" 2>"$err" &
    pid=$!
    wait_until "grep -qs '^synth:   0%' '$err'"
    kill -$sig $pid
    finish $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    check "synth: SIG$sig exits $want" '[ $rc -eq $want ]'
    check "synth: SIG$sig says nothing was written" 'grep -q "^loom synth: interrupted (SIG$sig): .* not written" "$err"'
    check "synth: SIG$sig leaves no temporary file, no output" '[ -z "$(ls -A "$tmp/s")" ]'
done

# ---- the default model's preparation (a child process): Ctrl+C to the group, SIGTERM or SIGHUP to loom alone --
for how in INT-group TERM HUP; do
    mkdir -p "$tmp/cache-$how/models"
    rm -f "$out" "$err"
    LOOM_CACHE=$tmp/cache-$how LOOM_REF=$ref "$loom" run -p hi -n 1 >"$out" 2>"$err" &
    pid=$!
    wait_until "grep -qs '^loom: synthesizing default model' '$err'"
    sig=${how%-group}
    if [ $how = INT-group ]; then kill -INT -- -$pid; to="SIGINT to the group"; else kill -$sig $pid; to="SIG$sig to loom"; fi
    finish $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    check "default model ($to): exits $want" '[ $rc -eq $want ]'
    check "default model ($to): says its temporary files were removed" \
        'grep -q "^loom run: default model: preparing .* was interrupted (SIG$sig); its temporary files were removed" "$err"'
    check "default model ($to): nothing left in the models directory" '[ -z "$(ls -A "$tmp/cache-$how/models")" ]'
done

# refused before any preparation: a models path that is a file, a missing vocabulary (named, with how to get it)
mkdir -p "$tmp/cache-file" "$tmp/noref"
echo x >"$tmp/cache-file/models"
LOOM_CACHE=$tmp/cache-file LOOM_REF=$ref "$loom" run -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "default model: a models path that is a file exits 1" '[ $rc -eq 1 ]'
check "default model: a models path that is a file is named as such" \
    'grep -q "^loom run: default model: .$tmp/cache-file/models. exists and is not a directory$" "$err"'
check "default model: a models path that is a file is left as it was, nothing prepared" \
    '[ "$(cat "$tmp/cache-file/models")" = x ] && ! grep -q "preparing" "$err"'
LOOM_CACHE=$tmp/cache-noref LOOM_REF=$tmp/noref "$loom" run -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "default model: a missing vocabulary exits 1, naming it and scripts/setup.sh" \
    '[ $rc -eq 1 ] && grep -q "vocabulary .$tmp/noref/src/models/ggml-vocab-qwen35.gguf. (No such file or directory), which .bash scripts/setup.sh. fetches" "$err"'
check "default model: a missing vocabulary makes no directory" '[ ! -e "$tmp/cache-noref" ]'

# gone PID: the process has ended (a zombie counts: an orphan's reaper need not reap it at once)
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" = Z ]; }

# start_default CACHE NAME: `loom run` of the default model in $tmp/CACHE, stderr in $tmp/NAME.err; pid=its pid
start_default() {
    mkdir -p "$tmp/$1/models"
    LOOM_CACHE=$tmp/$1 LOOM_REF=$ref "$loom" run -p hi -n 1 >/dev/null 2>"$tmp/$2.err" &
    pid=$!
}

# SIGKILL to loom: its child (the preparation) stops too, by its parent-death signal, and removes its files
start_default cache-kill kill
wait_until "grep -qs '^loom: synthesizing default model' '$tmp/kill.err'"
child=$(pgrep -P $pid)
sigign=$(awk '/^SigIgn:/ {print $2}' "/proc/$child/status" 2>/dev/null)
kill -KILL $pid
finish $pid
wait_until "gone $child"
err=$tmp/kill.err
check "default model: its preparing child ignores SIGPIPE (main's setting, kept across fork)" \
    '[ -n "$sigign" ] && [ $(( 0x$sigign >> 12 & 1 )) -eq 1 ]'
check "default model (SIGKILL to loom): its preparing child ends too" '[ -n "$child" ] && gone $child'
check "default model (SIGKILL to loom): nothing left in the models directory" '[ -z "$(ls -A "$tmp/cache-kill/models")" ]'

# two loom processes at once: the second waits for the first (one preparation at a time), says so once, and takes
# over when the first is stopped; a third one, waiting too, is stopped alone by Ctrl+C (SIGINT to its group)
start_default cache-two first
first=$pid
wait_until "grep -qs '^loom: synthesizing default model' '$tmp/first.err'"
start_default cache-two second
second=$pid
start_default cache-two third
third=$pid
wait_until "grep -qs '^loom: waiting for another loom process preparing the default model in ' '$tmp/second.err'"
wait_until "grep -qs '^loom: waiting for another loom process' '$tmp/third.err'"
kill -INT -- -$third
finish $third; rc=$?
err=$tmp/third.err
check "default model: Ctrl+C while waiting for another loom process exits 130" '[ $rc -eq 130 ]'
check "default model: Ctrl+C while waiting says it was interrupted while waiting" \
    'grep -q "^loom run: default model: interrupted (SIGINT) while waiting for another loom process preparing" "$err"'
check "default model: Ctrl+C while waiting stops no preparation" '! grep -q "temporary files" "$err" && kill -0 $first'
kill -TERM $first
finish $first; rc=$?
err=$tmp/first.err
check "default model, the first of two: SIGTERM exits 143" '[ $rc -eq 143 ]'
check "default model, the first of two: its temporary files were removed" \
    'grep -q "^loom run: default model: preparing .* was interrupted (SIGTERM); its temporary files were removed" "$err"'
wait_until "grep -qs '^loom: synthesizing default model' '$tmp/second.err'"
kill -TERM $second
finish $second; rc=$?
err=$tmp/second.err
check "default model, the second of two: said once that it waits" '[ $(grep -c "^loom: waiting for another" "$err") -eq 1 ]'
check "default model, the second of two: prepares once the first has stopped" \
    'grep -q "^loom: preparing the default model .* (once)" "$err"'
check "default model, the second of two: SIGTERM exits 143" '[ $rc -eq 143 ]'
check "default model, the second of two: nothing left in the models directory" '[ -z "$(ls -A "$tmp/cache-two/models")" ]'

# SIGPIPE: loom ignores it, so a reader that closes its end early makes a write fail (EPIPE) instead of ending loom
# silently. closed FD CMD...: CMD with FD (1: stdout, 2: stderr) a pipe whose reader is gone (SIGPIPE at its
# default, as a shell leaves it); its status
closed() {
    python3 -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r); fd = int(sys.argv[1])
sys.exit(subprocess.call(sys.argv[2:], stdout=w if fd == 1 else None, stderr=w if fd == 2 else None))' "$@"
}
# the product on standard output (text, ids, a report, a table, JSON) not delivered: status 1 (2 for xray and
# certify, where 1 is a difference), naming standard output; run stops generating
for c in "1:run -m $tiny -p hi -n 40 --temp 0" "1:tokenize -m $tiny" "1:tokenize -m $tiny --decode" "1:inspect $tiny" \
    "1:bench -m $tiny -p 8 -n 2 -r 1" "2:xray -m $tiny -p hi" "2:xray -m $tiny -p hi --json" \
    "2:certify -m $tiny -n 1 -o $tmp/cert" "1:synth --generator-version" "1:--version" "1:run --help"; do
    echo 11 22 | closed 1 "$loom" ${c#*:} >/dev/null 2>"$err"; rc=$?
    check "${c#*:} | (reader gone): status ${c%%:*}, standard output named" \
        '[ $rc -eq ${c%%:*} ] && grep -q "^loom [-a-z]*: writing standard output: Broken pipe$" "$err"'
done
closed 1 "$loom" run -m "$tiny" -p hi -n 40 --temp 0 2>"$err"
check "run | (reader gone): stops generating at the first text it cannot deliver" \
    'n=$(sed -n "s/.*(\([0-9]*\) generated).*/\1/p" "$err") && [ -n "$n" ] && [ "$n" -lt 40 ]'
# diagnostics and progress on standard error not delivered stop no GGUF write: the file is finished (status 0,
# as with stderr open), no temporary file left
rm -f "$tmp"/piped*.gguf
closed 2 "$loom" synth --preset micro --vocab "$vocab" -o "$tmp/piped.gguf"; rc=$?
check "synth 2>| (reader gone): finishes its file, no temporary file" \
    '[ $rc -eq 0 ] && "$loom" inspect "$tmp/piped.gguf" >/dev/null 2>&1 && [ -z "$(ls "$tmp" | grep "\.tmp")" ]'
closed 2 "$loom" quantize "$tmp/piped.gguf" "$tmp/piped-q.gguf" Q4_K_M; rc=$?
check "quantize 2>| (reader gone): finishes its file, no temporary file" \
    '[ $rc -eq 0 ] && "$loom" inspect "$tmp/piped-q.gguf" >/dev/null 2>&1 && [ -z "$(ls "$tmp" | grep "\.tmp")" ]'
# the same through a shell pipeline whose reader stops after one line
"$loom" synth --preset micro --vocab "$vocab" -o "$tmp/piped2.gguf" 2>&1 >/dev/null | head -1 >/dev/null
rc=${PIPESTATUS[0]}
check "synth 2>&1 >/dev/null | head -1: status 0, its file whole, no temporary file" \
    '[ $rc -eq 0 ] && "$loom" inspect "$tmp/piped2.gguf" >/dev/null 2>&1 && [ -z "$(ls "$tmp" | grep "\.tmp")" ]'
"$loom" quantize "$tmp/piped2.gguf" "$tmp/piped2-q.gguf" Q8_0 2>&1 >/dev/null | head -1 >/dev/null
rc=${PIPESTATUS[0]}
check "quantize 2>&1 >/dev/null | head -1: status 0, its file whole, no temporary file" \
    '[ $rc -eq 0 ] && "$loom" inspect "$tmp/piped2-q.gguf" >/dev/null 2>&1 && [ -z "$(ls "$tmp" | grep "\.tmp")" ]'
# a closed standard error (2>&-): the descriptor stays taken, so the GGUF's temporary cannot open as descriptor 2
# and receive the diagnostics (the file was written with progress lines inside, status 0); the same bytes as with
# standard error open
"$loom" synth --preset micro --vocab "$vocab" -o "$tmp/closed.gguf" 2>&-; rc=$?
check "synth 2>&-: status 0, the same file as with standard error open, no temporary file" \
    '[ $rc -eq 0 ] && cmp -s "$tmp/closed.gguf" "$tmp/piped2.gguf" && [ -z "$(ls "$tmp" | grep "\.tmp")" ]'
"$loom" quantize "$tmp/piped2.gguf" "$tmp/closed-q.gguf" Q8_0 2>&-; rc=$?
check "quantize 2>&-: status 0, the same file as with standard error open" \
    '[ $rc -eq 0 ] && cmp -s "$tmp/closed-q.gguf" "$tmp/piped2-q.gguf"'
"$loom" run -m "$tiny" -p hi -n 4 --temp 0 >&- 2>"$err"; rc=$?
check "run >&-: status 1, standard output named, not the /dev/null held in its place (a closed descriptor still fails)" \
    '[ $rc -eq 1 ] && grep -q "writing standard output: Bad file descriptor" "$err" && ! grep -q /dev/null "$err"'
"$loom" run -m "$tiny" -p hi -n 40 --temp 0 2>"$err" | head -c 2 >/dev/null
rc=${PIPESTATUS[0]}
check "run | head -c 2: status 1, standard output named" '[ $rc -eq 1 ] && grep -q "writing standard output: Broken pipe" "$err"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
