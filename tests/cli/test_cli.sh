#!/usr/bin/env bash
# test_cli.sh BUILD — the `loom` command's user-facing contract on the cached tiny model: kernel choice from
# $LOOM_KERNELS (bit-identical output in every set), option range messages (integer and float, a float's checked
# as the float stored: --top-p 1.00000001 is 1), run's context bound, the thread-count warning, the token-id
# message of `tokenize --decode`, a chat's second turn reusing the first, a metadata key the reference refuses
# (refused) or only the GGUF convention forbids (warned about), the
# expert plan `inspect` shows for the cached qwen35moe model, conflicting or empty options refused by name,
# output that cannot be written (status 1, its path and reason named), a chat answer cut at the context's end
# (said), a peak RSS that is loom's own, `loom help [COMMAND]`, --numerics (both values taken, a bad one named,
# bench saying which it used and the float-order profile it ran in), one number syntax in every option (no blanks, "+", hex, inf or nan), an option
# that conflicts with the model exiting 2, and chat's
# sampler options (run's names, messages and defaults), --stop and --chat-template-file; GNU-style --NAME=VALUE
# refused by every command knowing its own options (how to write a value option, a flag taking no value, the
# nearest option of a misspelled name, never serve's --api-key value), a value glued onto an option (-tX) and an
# unexpected operand's after '=' never shown, an unexpected argument named with what the command takes, and each
# command's option table equal to its --help; serve refusing a bad LOOM_KERNELS before it takes its port; bench's
# busy-machine warning naming the reference only when it ran; xray's and certify's model options; an output
# file in a missing directory, a directory or an input refused alike in quantize, synth and certify, named as given;
# certify's header naming the K/V cache types; run's own words for a missing -p or -n; and Ctrl+C during a long
# prefill (0.8b model) saying how far it got, with no speed when nothing was prefilled. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf
pass=0 fail=0
out=$(mktemp) err=$(mktemp) edited=$(mktemp) fifo=$(mktemp -u)
trap 'rm -f "$out" "$err" "$edited" "$fifo"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

# wait_until CONDITION: poll it (every 50 ms, for at most 600 s: the 0.8b model under the sanitizers); false on
# timeout
wait_until() {
    local end=$((SECONDS + 600))
    until eval "$1"; do
        [ $SECONDS -lt $end ] || { echo "timed out waiting for: $1"; return 1; }
        sleep 0.05
    done
}

# $LOOM_KERNELS: an unknown value fails before anything runs, naming what it expects
LOOM_KERNELS=bogus "$loom" run -m "$model" -p hi -n 2 >"$out" 2>"$err"; rc=$?
check "LOOM_KERNELS=bogus exits 2" '[ $rc -eq 2 ]'
check "LOOM_KERNELS=bogus names the choices" 'grep -q "expected auto, scalar, avx2 or avx512, found .bogus." "$err"'
LOOM_KERNELS=Scalar "$loom" run -m "$model" -p hi -n 2 >"$out" 2>"$err"; rc=$?
check "LOOM_KERNELS takes its values in any case" '[ $rc -eq 0 ]'
# ... but only where a model would run (bench: its --mem probes too): help, version and the commands that run none
# work whatever the environment says
for v in LOOM_KERNELS LOOM_ORDERS; do
    for c in "run -m $model -p hi -n 1" "chat -m $model" "bench -m $model -p 8 -n 2 -r 1" "bench --mem" \
        "xray -m $model -p hi" "certify -m $model -o $edited"; do
        env $v=bogus "$loom" $c >"$out" 2>"$err" </dev/null; rc=$?
        check "$v=bogus loom ${c%% *}: refused before it runs" '[ $rc -eq 2 ] && grep -q "^loom: $v: expected .*, found .bogus.$" "$err"'
    done
    for c in "run --help" "help run" "serve -h" "bench --help" "--help" "help" "version" "--version" "version --help" \
        "inspect $model" "tokenize -m $model" "synth --help" "quantize --help"; do
        # stdin from a here-string, not a pipe: with pipefail, echo's SIGPIPE (a command that reads no stdin and
        # exits first) would be the status
        env $v=bogus "$loom" $c <<<hi >"$out" 2>"$err"; rc=$?
        check "$v=bogus loom $c: works (runs no model)" '[ $rc -eq 0 ] && [ -s "$out" ] && ! grep -q "$v" "$err"'
    done
    env $v=avx512 "$loom" run --help >"$out" 2>"$err"; rc=$? # a value this CPU may not run: help all the same
    check "$v=avx512 loom run --help: the help, whatever the CPU" '[ $rc -eq 0 ] && grep -q "^usage: loom run" "$out"'
    # an empty value is as unset (the convention for an empty environment variable), which loom --help says
    env $v= "$loom" run -m "$model" -p hi -n 1 >"$out" 2>"$err"; rc=$?
    check "$v= (empty) is as unset" '[ $rc -eq 0 ]'
done
check "loom --help says an empty value is as unset" '"$loom" --help | grep -q "^environment (an empty value is as unset"'
# serve checks the environment before it takes its port: with the port held by another listener, the bad value is
# what it names (status 2), not the port in use, and the listener stays
python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(600)' >"$edited" &
holder=$!
wait_until '[ -s "$edited" ]'
for v in LOOM_KERNELS LOOM_ORDERS; do
    env $v=bogus "$loom" serve -m "$model" --port "$(cat "$edited")" >"$out" 2>"$err" </dev/null; rc=$?
    check "$v=bogus loom serve: refused before it binds (its port held by another listener, not named)" \
        '[ $rc -eq 2 ] && grep -q "^loom: $v: expected .*, found .bogus.$" "$err" && ! grep -q "cannot listen" "$err" &&
         kill -0 $holder'
done
kill $holder
wait $holder 2>/dev/null
# a set this CPU cannot run is refused with those it can (scalar always; each listed one runs)
runs=scalar
for k in avx2 avx512; do
    LOOM_KERNELS=$k "$loom" run -m "$model" -p hi -n 1 >"$out" 2>"$err" && runs="$runs $k" && continue
    check "LOOM_KERNELS=$k on a CPU without it: refused, naming the sets it runs" \
        'grep -q "^loom: LOOM_KERNELS=$k: .*; this CPU runs ${runs// / and } (auto: the widest)$" "$err"'
done
# bench --mem -m FILE names a file that does not open before probing the machine (seconds)
"$loom" bench --mem -m /nonexistent/x.gguf >"$out" 2>"$err"; rc=$?
check "bench --mem names a missing model before the probe" \
    '[ $rc -eq 1 ] && grep -q "/nonexistent/x.gguf: open: No such file" "$err" && ! grep -q "^machine:" "$out"'
"$loom" run -m "$model" -p "" -n 2 >"$out" 2>"$err"; rc=$?
check "run -p '': a usage error, before the model loads" '[ $rc -eq 2 ] && grep -q -- "-p expects a prompt of at least one token, found ..$" "$err"'
# a bad option value shows the command's synopsis everywhere; an option before the command is named as one
"$loom" bench -m "$model" -t 0 >"$out" 2>"$err"; rc=$?
check "bench -t 0 shows bench's synopsis" '[ $rc -eq 2 ] && grep -q "^usage: loom bench -m FILE" "$err" && grep -q "loom bench --help for details" "$err"'
for v in version --version; do
    "$loom" $v extra >"$out" 2>"$err"; rc=$?
    check "loom $v extra is refused, then version's help" \
        '[ $rc -eq 2 ] && grep -q "^loom $v: unexpected argument .extra. (loom $v takes no arguments, only -h or --help)$" "$err" && grep -q "^usage: loom version" "$err"'
done
"$loom" --bogus >"$out" 2>"$err"; rc=$?
check "loom --bogus is an unknown option, not a command" '[ $rc -eq 2 ] && grep -q "^loom: unknown option .--bogus. (options come after the command" "$err"'
# loom help [COMMAND]: the general help, or the command's own; anything else refused with the nearest command
"$loom" help >"$out" 2>"$err"; rc=$?
check "loom help prints the general help" '[ $rc -eq 0 ] && "$loom" --help | cmp -s - "$out"'
for c in run inspect synth tokenize chat quantize bench serve xray certify; do
    "$loom" help $c >"$out" 2>"$err"; rc=$?
    check "loom help $c prints $c --help" '[ $rc -eq 0 ] && "$loom" $c --help | cmp -s - "$out"'
done
# help and version answer as every command does, with their own short help: loom help CMD, CMD --help, CMD -h
for c in help --help -h version --version; do
    "$loom" help $c >"$out" 2>"$err"; rc=$?
    own=help; case $c in *version) own=version ;; esac
    check "loom help $c prints $own's own help" '[ $rc -eq 0 ] && head -1 "$out" | grep -q "^usage: loom $own " && ! "$loom" --help | cmp -s - "$out"'
done
for c in version --version help; do
    for h in --help -h; do
        "$loom" $c $h >"$err" 2>&1; rc=$?
        check "loom $c $h is loom help ${c#--}" '[ $rc -eq 0 ] && "$loom" help ${c#--} | cmp -s - "$err"'
    done
done
check "the general help lists help and version" \
    '"$loom" --help | grep -q "^  help     this help, or a command.s options" && "$loom" --help | grep -q "^  version  print loom.s version"'
# a help that cannot be written is the failure of the command that ran, named as given: help's (status 1, also
# for xray's and certify's help, whose own 2 is for trouble beside a result), --help's, -h's, version's
for a in "help run:help:1" "help xray:help:1" "help help:help:1" "help:help:1" "run --help:run:1" "xray -h:xray:2" \
    "--help:--help:1" "-h:-h:1" "version:version:1" "--version:--version:1" "help version:help:1" \
    "version --help:version:1" "--version -h:--version:1"; do
    IFS=: read -r args name st <<<"$a"
    "$loom" $args >/dev/full 2>"$err"; rc=$?
    check "loom $args >/dev/full: named as loom $name, status $st" \
        '[ $rc -eq $st ] && [ "$(cat "$err")" = "loom $name: writing standard output (/dev/full): No space left on device" ]'
done
"$loom" help rnu >"$out" 2>"$err"; rc=$?
check "loom help rnu: refused, the nearest command named" '[ $rc -eq 2 ] && grep -q "^loom help: expects a command, found .rnu. (did you mean run?)$" "$err"'
"$loom" help run serve >"$out" 2>"$err"; rc=$?
check "loom help run serve: one command at most" '[ $rc -eq 2 ] && grep -q "^loom help: expects at most one command, found .serve. after .run.$" "$err"'
for a in "run --pasword=s3cr3t" "--pasword=s3cr3t run" "version --pasword=s3cr3t" "--version --pasword=s3cr3t"; do
    "$loom" help $a >"$out" 2>"$err"; rc=$?
    check "loom help $a: the option named, its value not shown" \
        '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom help: unknown option .--pasword=VALUE. (its value is not shown" "$err"'
done
# an unknown command: the nearest command when one is obvious, as for an option
for a in "srve serve" "sreve serve" "Run run" "tok tokenize" "quantise quantize" "chta chat" "verison version" \
    "hlep help"; do
    "$loom" ${a% *} >"$out" 2>"$err"; rc=$?
    check "loom ${a% *}: did you mean ${a#* }?" \
        '[ $rc -eq 2 ] && grep -q "^loom: unknown command .${a% *}. (did you mean ${a#* }?)$" "$err" && grep -q "^usage: loom COMMAND" "$err"'
done
"$loom" frobnicate >"$out" 2>"$err"; rc=$?
check "loom frobnicate: no command near it" '[ $rc -eq 2 ] && grep -q "^loom: unknown command .frobnicate.$" "$err"'
"$loom" --verison >"$out" 2>"$err"; rc=$?
check "loom --verison: did you mean --version?" \
    '[ $rc -eq 2 ] && grep -q "^loom: unknown option .--verison. (did you mean --version? Options come after the command: loom COMMAND --help lists them)$" "$err"'
"$loom" help --hlep >"$out" 2>"$err"; rc=$?
check "loom help --hlep: did you mean --help?, then a sentence of its own" \
    '[ $rc -eq 2 ] && grep -q "^loom help: unknown option .--hlep. (did you mean --help? One COMMAND is all loom help takes)$" "$err"'
"$loom" inspect >"$out" 2>"$err"; rc=$?
check "inspect without FILE says so" '[ $rc -eq 2 ] && grep -q "^loom inspect: expected a GGUF FILE, found none$" "$err" && grep -q "^usage: loom inspect" "$err"'
"$loom" inspect --ctx 16777217 "$model" >"$out" 2>"$err"; rc=$?
check "inspect --ctx has -c's bound" '[ $rc -eq 2 ] && grep -q -- "--ctx expects a context length in \[1, 16777216\], found .16777217.$" "$err"'
# a value spelled exactly as one of the command's options (or -h, --help): its value is missing, more likely than
# meant; refused in every command, a secret's not shown; a value that only starts like one is taken
for a in "run -p -n 4" "xray -p --json" "run -p -h" "tokenize -m --ids" "quantize --imatrix -t a b Q8_0" \
    "inspect --ctx --check-tensors f" "bench -m --mem" "certify -o -n 1" "synth --preset -o x" "chat --stop --temp 1" \
    "serve --host --port 1"; do
    read -r c o v _ <<<"$a"
    "$loom" $a >"$out" 2>"$err" </dev/null; rc=$?
    check "$a: $o's value is missing, said so" \
        '[ $rc -eq 2 ] && grep -q -- "^loom $c: $o expects a value, found the option .$v. (give $o.s value right after it; loom $c takes no value spelled exactly as one of its options)$" "$err"'
done
"$loom" serve --api-key --port 1 >"$out" 2>"$err"; rc=$?
check "serve --api-key --port: the value is missing, not shown" \
    '[ $rc -eq 2 ] && ! head -1 "$err" | grep -q -- "--port" && grep -q "^loom serve: --api-key expects a value, found an option (not shown)" "$err"'
"$loom" run -m "$model" -p "-x" -n 1 >"$out" 2>"$err"; rc=$?
check "run -p -x: no option of run's, a prompt" '[ $rc -eq 0 ]'
"$loom" run -m "$model" -n 2 >"$out" 2>"$err"; rc=$?
check "run without -p names -p alone" '[ $rc -eq 2 ] && grep -q "^loom run: -p TEXT is required (the prompt)$" "$err"'
"$loom" run -m "$model" -p hi >"$out" 2>"$err"; rc=$?
check "run without -n names -n alone, in its own words" \
    '[ $rc -eq 2 ] && grep -q "^loom run: -n N is required (how many tokens to generate)$" "$err"'
"$loom" run -m "$model" >"$out" 2>"$err"; rc=$?
check "run without -p and -n names both" \
    '[ $rc -eq 2 ] && grep -q "^loom run: -p TEXT and -n N are required (the prompt, and how many tokens to generate)$" "$err"'
# -t has one bound in every command
for c in run chat serve bench certify xray; do
    "$loom" $c -m "$model" -t 2000 >"$out" 2>"$err" </dev/null; rc=$?
    check "$c -t 2000 names the bound every command has" '[ $rc -ne 0 ] && grep -q -- "-t expects an integer in \[1, 1024\], found .2000." "$err"'
done
# the machine probe measures the kernel set loom runs: a forced scalar set has no FMA peak to compare with
LOOM_KERNELS=scalar "$loom" bench --mem -t 1 >"$out" 2>"$err"; rc=$?
check "bench --mem under LOOM_KERNELS=scalar probes the scalar set" \
    '[ $rc -eq 0 ] && grep -q "^machine: 1 thread, scalar: streaming read" "$out" && ! grep -q "FMA peak" "$out"'
# a roofline is set against, and its note printed, only where its peak is shown (the int8 dot peak: AVX-512 VNNI)
for k in scalar auto; do
    LOOM_KERNELS=$k "$loom" bench --mem -t 1 -m "$model" -p 8 -n 2 -r 1 >"$out" 2>"$err"; rc=$?
    for a in "FP32 FMA:FP32 FMA peak:of FP32 FMA peak" "int8 dot:int8 dot (VNNI) peak:of int8 dot peak\|the int8 dot peak"; do
        IFS=: read -r fig peak use <<<"$a"
        shown=$(grep -c "^machine: .*$peak" "$out") used=$(grep -c "$use" "$out")
        check "bench --mem, LOOM_KERNELS=$k: the $fig peak used ($used lines) only where shown ($shown)" \
            '[ $rc -eq 0 ] && { [ $shown -eq 1 ] || [ $used -eq 0 ]; }'
    done
done
# inspect's note on a session's scratch names the bench that prints the arena (without --mem: every model run)
note=$("$loom" inspect "$model" | grep -c "\`loom bench -m FILE\`$")
"$loom" bench -m "$model" -p 8 -n 2 -r 1 -t 1 >"$out" 2>"$err"; rc=$?
check "inspect points to loom bench -m FILE for the session arena, which bench without --mem prints" \
    '[ $rc -eq 0 ] && [ "$note" = 1 ] && grep -q "^peak RSS: .*session arena: state and scratch" "$out"'
# bench warns when the load average exceeds the thread count (-t 1: whenever this machine is busy), naming the
# reference's barriers only when the reference ran (--ref); else no warning
# load_warning_ok REF: bench's output in $out warns (or not) as its load line says, the reference named iff REF=1
load_warning_ok() {
    local busy want
    busy=$(sed -n 's/^load average: \([0-9.]*\) before, \([0-9.]*\) after (\([0-9]*\) thread.*/\1 \2 \3/p' "$out" |
        awk '{ print ($1 > $3 || $2 > $3) }')
    want="^warning: the load average exceeds the thread count: the machine is shared and these figures are noisy"
    [ "$1" = 1 ] && want="$want (the reference's threads spin at barriers and suffer most)"
    case $busy in
        1) grep -q "$want\$" "$out" ;;
        0) ! grep -q "^warning: the load average" "$out" ;;
        *) false ;;
    esac
}
check "bench without --ref: a busy machine's warning (if any) is about loom's figures alone" 'load_warning_ok 0'

# every kernel set the CPU runs gives the same greedy text (Q4_K is repacked at load only for avx512)
ref_text=
for k in scalar avx2 avx512; do
    case $k in
        avx2) grep -q avx2 /proc/cpuinfo || continue ;;
        avx512) grep -q avx512_vnni /proc/cpuinfo || continue ;;
    esac
    LOOM_KERNELS=$k "$loom" run -m "$model" -p "The quick brown fox" -n 24 --temp 0 -t 2 >"$out" 2>"$err"; rc=$?
    check "LOOM_KERNELS=$k runs" '[ $rc -eq 0 ]'
    text=$(cat "$out")
    [ -z "$ref_text" ] && ref_text=$text
    check "LOOM_KERNELS=$k gives the scalar kernels' text" '[ "$text" = "$ref_text" ]'
done

# option ranges are named
"$loom" run -m "$model" -p hi -n 2 -t 100000 >"$out" 2>"$err"; rc=$?
check "run -t 100000 exits 2" '[ $rc -eq 2 ]'
check "run -t 100000 names the range" 'grep -q -- "-t expects an integer in \[1, 1024\], found .100000." "$err"'
"$loom" chat -m "$model" -c 0 </dev/null >"$out" 2>"$err"; rc=$?
check "chat -c 0 names the range" '[ $rc -eq 2 ] && grep -q -- "-c expects an integer in \[1, " "$err"'
for o in "--top-p 2:\[0, 1\]" "--repeat-penalty 0:(0, 100\]" "--presence-penalty -101:\[-100, 100\]"; do
    "$loom" run -m "$model" -p hi -n 2 ${o%%:*} >"$out" 2>"$err"; rc=$?
    check "run ${o%%:*} names the range" '[ $rc -eq 2 ] && grep -q -- "${o%% *} expects a number in ${o#*:}, found" "$err"'
done
"$loom" chat -m "$model" --temp -1 </dev/null >"$out" 2>"$err"; rc=$?
check "chat --temp -1 names the range" '[ $rc -eq 2 ] && grep -q -- "--temp expects a number in \[0, 100\], found .-1." "$err"'
# without -c, the model's context length bounds generation; with -c beyond it, -c is named
"$loom" run -m "$model" -p hi -n 16000000 -c 1 >"$out" 2>"$err"; rc=$?
check "run -c 1 limits generation to 1 token" '[ $rc -eq 0 ] && grep -q "limits generation to 1 token$" "$err"'
"$loom" run -m "$model" -p hi -n 2 -c 16000000 >"$out" 2>"$err"; rc=$?
check "run -c beyond context_length: a usage error naming -c" '[ $rc -eq 2 ] && grep -q -- "-c: expected at most the model.s context_length" "$err"'
"$loom" chat -m "$model" -c 16000000 </dev/null >"$out" 2>"$err"; rc=$?
check "chat -c beyond context_length: a usage error naming -c" '[ $rc -eq 2 ] && grep -q -- "-c: expected at most the model.s context_length" "$err"'
"$loom" serve -m "$model" -c 16000000 --port 0 </dev/null >"$out" 2>"$err"; rc=$?
check "serve -c beyond context_length: a usage error naming -c" '[ $rc -eq 2 ] && grep -q -- "-c: expected at most the model.s context_length" "$err"'
"$loom" run -m "$model" -p "one two three four" -n 2 -c 2 >"$out" 2>"$err"; rc=$?
check "run -c below the prompt: a usage error naming both" \
    '[ $rc -eq 2 ] && grep -q -- "-c: expected at least the prompt.s [0-9]* tokens, found 2$" "$err"'
# one number syntax everywhere (loom_cli_parse_int/_real): no blanks, '+', base prefix, suffix, inf or nan
for v in "' 2'" "+2" "0x2" "2k" "''"; do
    for c in "run -p hi -n 2" "chat" "serve" "bench" "xray" "certify"; do
        eval "\"\$loom\" $c -m \"\$model\" -t $v" >"$out" 2>"$err" </dev/null; rc=$?
        check "$c -t $v is refused" '[ $rc -eq 2 ] && grep -q -- "-t expects an integer in \[1, 1024\], found" "$err"'
    done
done
for v in "+0.5" "' 0.5'" "inf" "nan" "0x1p-1"; do
    eval "\"\$loom\" run -m \"\$model\" -p hi -n 2 --temp $v" >"$out" 2>"$err"; rc=$?
    check "run --temp $v is refused" '[ $rc -eq 2 ] && grep -q -- "--temp expects a number in \[0, 100\], found" "$err"'
done
stops=$(for i in $(seq 17); do printf -- "--stop s%d " $i; done)
"$loom" run -m "$model" -p hi -n 1 $stops >"$out" 2>"$err"; rc=$?
check "a 17th --stop is named" '[ $rc -eq 2 ] && grep -q -- "--stop expects at most 16 strings, found another: .s17.$" "$err"'
"$loom" run -m "$model" -p hi -n 1 --read-ahead NONE >"$out" 2>"$err"; rc=$?
check "--read-ahead takes its value in any case (then needs --mem-budget)" '[ $rc -eq 2 ] && grep -q "it needs --mem-budget" "$err"'
# --stats and --read-ahead need --mem-budget: said alike by --help (its synopsis nests them) and the refusal
for c in run bench; do
    check "$c --help: --stats and --read-ahead need --mem-budget" \
        '"$loom" $c --help | grep -q -- "\[--mem-budget SIZE \[--read-ahead MODE\] \[--stats\]\]" &&
         "$loom" $c --help | grep -q -- "^  --stats  *needs --mem-budget: " && "$loom" $c --help | grep -q -- "^  --read-ahead MODE  *needs --mem-budget: "'
done
"$loom" run -m "$model" -p hi -n 1 --stats >"$out" 2>"$err"; rc=$?
check "run --stats without --mem-budget: refused, it needs --mem-budget" \
    '[ $rc -eq 2 ] && grep -q "^loom run: --stats reports what the expert cache did: it needs --mem-budget$" "$err"'
"$loom" run -m "$model" -p hi -n 1 --repeat-penalty 1e-39 >"$out" 2>"$err"; rc=$?
check "a value a float holds only as a subnormal is refused" \
    '[ $rc -eq 2 ] && grep -q -- "--repeat-penalty expects a number in (0, 100\], found .1e-39., which a float holds only as a subnormal or 0" "$err"'
# a number too small for a double is the 0 or subnormal it rounds to (strtod's ERANGE is no range error), then
# refused as any number a float holds only as a subnormal or 0; one too large for a double is out of range
for v in 1e-400 -1e-400 1e-320; do
    "$loom" run -m "$model" -p hi -n 1 --temp $v >"$out" 2>"$err"; rc=$?
    check "run --temp $v: a float's 0 or subnormal, not out of range" \
        '[ $rc -eq 2 ] && grep -q -- "--temp expects a number in \[0, 100\], found .$v., which a float holds only as a subnormal or 0" "$err"'
done
"$loom" run -m "$model" -p hi -n 1 --repeat-penalty 1e-400 >"$out" 2>"$err"; rc=$?
check "run --repeat-penalty 1e-400: a float's 0, said so (not only the range)" \
    '[ $rc -eq 2 ] && grep -q -- "found .1e-400., which a float holds only as a subnormal or 0" "$err"'
# the check is on the float the sampler stores: 1.1754943e-38 rounds to its least normal number (taken), 1.175494e-38
# to a subnormal (refused, the least normal shown with every digit it needs, not as the value refused)
for o in --temp --top-p --min-p; do
    "$loom" run -m "$model" -p hi -n 1 $o 1.1754943e-38 >"$out" 2>"$err"; rc=$?
    check "run $o 1.1754943e-38 (a float's least normal number) is taken" '[ $rc -eq 0 ]'
    "$loom" run -m "$model" -p hi -n 1 $o 1.175494e-38 >"$out" 2>"$err"; rc=$?
    check "run $o 1.175494e-38 (a float's subnormal) is refused, as written" '[ $rc -eq 2 ] && grep -q -- "found .1.175494e-38., which a float holds only as a subnormal or 0 (its least normal number is 1.17549435e-38)$" "$err"'
done
# at every bound, the value is checked as the float loom stores, not as written: 1.00000001 is the float 1 (taken),
# 1.0000001 is a float above 1 (refused, as written); in run and chat alike
for a in "run:--top-p 1.00000001" "run:--min-p 1.00000001" "run:--temp 100.000001" "chat:--presence-penalty -100.000001" \
    "chat:--repeat-penalty 100.000001" "chat:--frequency-penalty 100.000001"; do
    c=${a%%:*} o=${a#*:}
    if [ $c = run ]; then "$loom" run -m "$model" -p hi -n 1 $o >"$out" 2>"$err"; rc=$?
    else echo hi | "$loom" chat -m "$model" -n 1 $o >"$out" 2>"$err"; rc=$?; fi
    check "$c $o: the float stored is at the bound, taken" '[ $rc -eq 0 ]'
done
"$loom" run -m "$model" -p hi -n 1 --top-p 1.0000001 >"$out" 2>"$err"; rc=$?
check "run --top-p 1.0000001: a float above 1, refused as written" \
    '[ $rc -eq 2 ] && grep -q -- "--top-p expects a number in \[0, 1\], found .1.0000001.$" "$err"'
# --mem-budget beyond 64 bits of bytes: named with the value as written and its bound, one number in both spellings
# (2^64 bytes = 16777216T, refused in every spelling; whatever is below it taken)
for v in 99999999T 16777216T 18446744073709551616 17179869184G; do
    "$loom" run -m "$model" -p hi -n 1 --mem-budget $v >"$out" 2>"$err"; rc=$?
    check "run --mem-budget $v names its bound" \
        '[ $rc -eq 2 ] && grep -q -- "--mem-budget expects .*, found .$v. (it must be below 16777216T: 2^64 bytes, 18446744073709551616)$" "$err"'
done
for v in 16777215T 18446744073709551615 17179869183G; do
    "$loom" run -m "$model" -p hi -n 1 --mem-budget $v >"$out" 2>"$err"; rc=$?
    check "run --mem-budget $v (below the bound) is taken" '[ $rc -eq 0 ]'
done
"$loom" run -m "$model" -p hi -n 1 --temp 0e-400 >"$out" 2>"$err"; rc=$?
check "run --temp 0e-400 is 0" '[ $rc -eq 0 ]'
"$loom" run -m "$model" -p hi -n 1 --temp 1e999 >"$out" 2>"$err"; rc=$?
check "run --temp 1e999 is out of range" '[ $rc -eq 2 ] && grep -q -- "--temp expects a number in \[0, 100\], found .1e999.$" "$err"'
"$loom" run -m "$model" -p hi -n 1 --temp .5 -n 010 >"$out" 2>"$err"; rc=$?
check "run takes --temp .5 and -n 010 (ten)" '[ $rc -eq 0 ] && grep -q "(10 generated)" "$err"'
"$loom" quantize -t +2 a b Q4_K_M >"$out" 2>"$err"; rc=$?
check "quantize -t +2 is refused as the others" '[ $rc -eq 2 ] && grep -q -- "-t expects an integer in \[1, 1024\], found .+2.$" "$err"'
"$loom" quantize -t >"$out" 2>"$err"; rc=$?
check "quantize -t without its value" '[ $rc -eq 2 ] && grep -q -- "-t expects .*found the end of the command line$" "$err"'
"$loom" quantize a.gguf b.gguf >"$out" 2>"$err"; rc=$?
check "quantize without TYPE names it" '[ $rc -eq 2 ] && grep -q "^loom quantize: TYPE is missing (expected IN.gguf OUT.gguf TYPE)$" "$err"'
"$loom" quantize --bogus a.gguf b.gguf Q4_K_M >"$out" 2>"$err"; rc=$?
check "quantize names an unknown option" '[ $rc -eq 2 ] && grep -q "^loom quantize: unknown option .--bogus." "$err"'
"$loom" quantize a.gguf b.gguf Q9_K >"$out" 2>"$err"; rc=$?
check "quantize names an unknown TYPE and lists the types" \
    '[ $rc -eq 2 ] && grep -q "TYPE expects one of the types listed below, found .Q9_K." "$err" && grep -q "TYPE:.* Q4_K_M" "$err"'
"$loom" quantize "${model%-Q4_K_M.gguf}-F16.gguf" "" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize to '' is refused before any work" '[ $rc -eq 2 ] && grep -q "^loom quantize: OUT.gguf expects a file name, found ..$" "$err"'
"$loom" synth --preset micro -o "" >"$out" 2>"$err"; rc=$?
check "synth -o '' is refused before any work" '[ $rc -eq 2 ] && grep -q "^loom synth: -o expects a file name, found ..$" "$err"'
echo precious >"$edited.gguf.tmp"
"$loom" synth --preset micro -o "$edited.gguf" >"$out" 2>"$err"; rc=$?
check "the writer's temporary file never replaces a file of that name" \
    '[ $rc -eq 0 ] && [ "$(cat "$edited.gguf.tmp")" = precious ] && ! ls "$edited".gguf.*.tmp >/dev/null 2>&1'
rm -f "$edited.gguf" "$edited.gguf.tmp"
"$loom" synth --preset micro --type IQ2_XXS -o "$edited.gguf" >"$out" 2>"$err"; rc=$?
check "synth --type IQ2_XXS (importance weights only) is refused, not a crash" \
    '[ $rc -eq 2 ] && grep -q "goes to IQ2_XXS, which needs an importance matrix" "$err" && ! ls "$edited".gguf* >/dev/null 2>&1'
printf 'old' >"$edited.gguf" && chmod 600 "$edited.gguf"
"$loom" synth --preset micro -o "$edited.gguf" >"$out" 2>"$err"; rc=$?
check "a replaced output keeps its mode" '[ $rc -eq 0 ] && [ "$(stat -c %a "$edited.gguf")" = 600 ]'
rm -f "$edited.gguf"
"$loom" synth --preset tiny --seed 0x10 -o /dev/null >"$out" 2>"$err"; rc=$?
check "synth --seed takes decimal only" '[ $rc -eq 2 ] && grep -q -- "--seed expects an integer in \[0, 2^64), found .0x10.$" "$err"'
"$loom" xray -m "$model" -p hi --layers 1-+2 >"$out" 2>"$err"; rc=$?
check "xray --layers 1-+2 is refused" '[ $rc -eq 2 ] && grep -q -- "--layers expects A-B or A" "$err"'
"$loom" xray -m "$model" -p hi --layers 3-1 >"$out" 2>"$err"; rc=$?
check "xray --layers 3-1 is refused" '[ $rc -eq 2 ] && grep -q -- "--layers expects A-B or A" "$err"'
for ids in "12,,34" "12," ",12" "+12" "12abc"; do
    eval "printf %s $ids" | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
    check "tokenize --decode refuses $ids" '[ $rc -eq 1 ] && grep -q "expected a token id" "$err"'
done
printf '12, 34\n 56 ,78\n' | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
check "tokenize --decode takes commas and blanks around ids" '[ $rc -eq 0 ]'

# chat: the second turn reuses the tokens the session holds from the first (through its prompt cache)
printf 'Hello there\nTell me more\n/timing\n' | "$loom" chat -m "$model" --temp 0 -n 8 -t 2 >"$out" 2>"$err"; rc=$?
check "chat of two turns runs" '[ $rc -eq 0 ] && [ $(wc -l <"$out") -eq 2 ]'
reuse='^last turn: prefill [0-9]* tokens .*, [1-9][0-9]* reused from the session'
check "chat's second turn reuses the first" 'grep -q "$reuse" "$err"'

# when stdin is not a terminal, a message refused or failed still prints one line, empty (answers stay aligned with
# the messages; status 1), as loom help chat says
long=$(printf 'word %.0s' $(seq 80))
printf 'hi\n%s\nhello\n' "$long" | "$loom" chat -m "$model" -c 64 -n 4 --temp 0 >"$out" 2>"$err"; rc=$?
check "chat: a message beyond -c leaves its line empty, the next answered on the next line" \
    '[ $rc -eq 1 ] && [ $(wc -l <"$out") -eq 3 ] && [ -n "$(sed -n 1p "$out")" ] && [ -z "$(sed -n 2p "$out")" ] && [ -n "$(sed -n 3p "$out")" ]'
printf 'hi\n/usr/bin is a path\nhello\n/timing\n' | "$loom" chat -m "$model" -n 4 --temp 0 >"$out" 2>"$err"; rc=$?
check "chat: a line starting with / that is no command leaves its line empty (status 1); a command prints nothing" \
    '[ $rc -eq 1 ] && [ $(wc -l <"$out") -eq 3 ] && [ -z "$(sed -n 2p "$out")" ] && grep -q "^unknown command ./usr/bin is a path." "$err"'
check "loom help chat says a refused or failed message prints an empty line" \
    '"$loom" help chat | tr "\n" " " | grep -q "a message refused or failed (a NUL byte in it, a conversation beyond -c) still prints one line, empty, so that each message has its answer"'

# chat takes run's sampler options (one table: the same names, ranges, messages and defaults), --stop and
# --chat-template-file
echo hi | "$loom" chat -m "$model" -n 8 -t 1 --temp 0.5 --seed 7 --top-k 5 --top-p 0.9 --min-p 0.1 \
    --repeat-penalty 1.3 --repeat-last-n 32 --presence-penalty 0.5 --frequency-penalty 0.5 --stop zzz --stop yyy \
    >"$out" 2>"$err"; rc=$?
check "chat takes every sampler option and --stop twice" '[ $rc -eq 0 ] && [ $(wc -l <"$out") -eq 1 ]'
for a in "--temp -1" "--top-k -1" "--top-p 1.5" "--min-p x" "--repeat-penalty 0" "--repeat-last-n 2000000" \
    "--presence-penalty 101" "--frequency-penalty nan" "--seed -1" "--stop ''"; do
    eval "\"\$loom\" run -m \"\$model\" -p hi -n 1 $a" >"$out" 2>"$err"
    want=$(head -n 1 "$err" | sed 's/^loom run: /loom chat: /')
    eval "\"\$loom\" chat -m \"\$model\" $a" </dev/null >"$out" 2>"$err"; rc=$?
    check "chat $a: exit 2, run's message" '[ $rc -eq 2 ] && [ -n "$want" ] && [ "$(head -n 1 "$err")" = "$want" ]'
done
sampler_help='^  --\(temp\|seed\|top-k\|top-p\|min-p\|repeat-\|presence-\|frequency-\|stop\) '
check "chat's sampler options and defaults read as run's (temperature 0.8)" \
    '[ "$("$loom" chat --help | grep -- "$sampler_help")" = "$("$loom" run --help | grep -- "$sampler_help")" ] &&
     "$loom" chat --help | grep -q -- "--temp T .*(default 0.8)$"'
# --stop: the greedy answer ends before the first occurrence of a piece of it, which is not printed
echo hi | "$loom" chat -m "$model" -n 12 -t 1 --temp 0 >"$out" 2>"$err"
full=$(cat "$out") stop=${full:5:3}
printf 'hi\n/history\n' | "$loom" chat -m "$model" -n 12 -t 1 --temp 0 --stop "$stop" >"$out" 2>"$err"; rc=$?
check "chat --stop '$stop' cuts the answer '${full:0:24}...' before it" \
    '[ $rc -eq 0 ] && [ ${#stop} -eq 3 ] && [ "$(cat "$out")" = "${full%%"$stop"*}" ] && [ ${#full} -gt 8 ]'
check "chat --stop: the conversation keeps the answer as printed" 'grep -qx "\[assistant\] ${full%%"$stop"*}" "$err"'
# --chat-template-file: the file renders the chat (a ChatML one answers; one that raises names the message)
printf '%s\n' "{%- for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}" \
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" >"$edited"
echo hi | "$loom" chat -m "$model" -n 4 -t 1 --temp 0 --chat-template-file "$edited" >"$out" 2>"$err"; rc=$?
check "chat --chat-template-file with a ChatML file answers" '[ $rc -eq 0 ] && [ $(wc -l <"$out") -eq 1 ] && [ ! -s "$err" ]'
printf '{{ raise_exception("the file renders: " + messages[0].content) }}' >"$edited"
echo hi | "$loom" chat -m "$model" -n 4 -t 1 --chat-template-file "$edited" >"$out" 2>"$err"; rc=$?
check "chat --chat-template-file renders with the file" '[ $rc -eq 1 ] && grep -q "^loom chat: the file renders: hi$" "$err"'
printf '%s' '{% for m in messages %}{{ m.content }}{% endfor %}' >"$edited"
echo hi | "$loom" chat -m "$model" -n 2 --chat-template-file "$edited" >"$out" 2>"$err"; rc=$?
check "chat: a template that renders 1 token is named as such, not as a full context" \
    '[ $rc -eq 1 ] && grep -q "the chat template rendered the conversation as 1 token, expected at least 2" "$err"'
"$loom" chat -m "$model" --chat-template-file /nonexistent/t.jinja </dev/null >"$out" 2>"$err"; rc=$?
check "chat --chat-template-file names a file it cannot read" \
    '[ $rc -eq 1 ] && grep -q "^loom chat: --chat-template-file /nonexistent/t.jinja: No such file" "$err"'
"$loom" chat -m "$model" --chat-template-file "$edited" --chat-template-file "$edited"x </dev/null >"$out" 2>"$err"; rc=$?
check "chat --chat-template-file given twice: exit 2, both named" \
    '[ $rc -eq 2 ] && grep -q "^loom chat: --chat-template-file expects one value, found .$edited. and then .${edited}x. (given twice; loom chat takes one)$" "$err"'

# a message with bytes that are not UTF-8 renders them as U+FFFD (as run's prompt reads them), not "out of memory"
printf 'caf\xe9 au lait\n' | "$loom" chat -m "$model" -n 6 -t 1 --temp 0 >"$out" 2>"$err"; rc=$?
bad=$(cat "$out")
printf 'caf\xef\xbf\xbd au lait\n' | "$loom" chat -m "$model" -n 6 -t 1 --temp 0 >"$out" 2>>"$err"
check "chat: a byte that is not UTF-8 is read as U+FFFD" '[ $rc -eq 0 ] && [ -n "$bad" ] && [ "$bad" = "$(cat "$out")" ]'

# more threads than CPUs: allowed, with a warning
cpus=$(getconf _NPROCESSORS_ONLN)
"$loom" run -m "$model" -p hi -n 1 --temp 0 -t $((cpus + 1)) >"$out" 2>"$err"; rc=$?
check "run -t CPUs+1 runs" '[ $rc -eq 0 ]'
check "run -t CPUs+1 warns" 'grep -q "is more than the $cpus online CPUs" "$err"'
"$loom" run -m "$model" -p hi -n 1 --temp 0 -t 1 >"$out" 2>"$err"
check "run -t 1 does not warn" '! grep -q "online CPUs" "$err"'

# tokenize --decode: into a pipe or file the text byte for byte (no newline added: only a terminal gets one)
echo "9707 11" | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
check "tokenize --decode writes the text byte for byte" '[ $rc -eq 0 ] && [ "$(od -An -c "$out" | tr -d " ")" = "Hello," ]'
# tokenize --decode: a token that is not a number is named alone, without the separator after it
echo "1 2 x 3" | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
check "tokenize --decode of a non-number fails" '[ $rc -ne 0 ]'
check "tokenize --decode names the bad token" 'grep -q "expected a token id (an integer in \[0, [0-9]*)), found .x.$" "$err"'
echo "9707,11 12abc" | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
check "tokenize --decode: commas separate, a word that starts with digits is named whole" \
    '[ $rc -ne 0 ] && grep -q "found .12abc.$" "$err"'
echo "9707,11" | "$loom" tokenize -m "$model" --decode >"$out" 2>"$err"; rc=$?
check "tokenize --decode reads comma-separated ids (as its help says)" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "Hello," ]'
# synth's option values are checked before anything is written; quantize never overwrites its input
for o in "--router bogus:--router expects uniform or skewed, found .bogus." "--seed -1:--seed expects an integer in \[0, 2^64), found .-1."; do
    "$loom" synth --preset tiny-moe ${o%%:*} -o "$edited" >"$out" 2>"$err"; rc=$?
    check "synth ${o%%:*} is refused" '[ $rc -eq 2 ] && grep -q -- "${o#*:}" "$err"'
done
"$loom" synth --preset micro --router skewed -o "$edited" >"$out" 2>"$err"; rc=$?
check "synth --router on a dense preset is refused before it starts" \
    '[ $rc -eq 2 ] && grep -q "expected none for the dense preset" "$err" && ! grep -q "^synth: preset" "$err"'
cp "$model" "$edited"
"$loom" quantize "$edited" "$edited" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize onto its own input is refused" '[ $rc -eq 2 ] && cmp -s "$model" "$edited"'
cp tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf "$edited"
"$loom" quantize --imatrix "$edited" "${model%-Q4_K_M.gguf}-F16.gguf" "$edited" Q4_K_M >"$out" 2>"$err"; rc=$?
check "quantize onto its own importance matrix is refused" \
    '[ $rc -eq 2 ] && cmp -s tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf "$edited" && grep -q "found the importance matrix itself" "$err"'
echo 1 | "$loom" tokenize -m "$model" --decode --pieces >"$out" 2>"$err"; rc=$?
check "tokenize --decode --pieces is refused" '[ $rc -eq 2 ] && grep -q "apply to encoding only" "$err"'
echo hi | "$loom" tokenize -m "$model" --ids --pieces >"$out" 2>"$err"; rc=$?
check "tokenize --ids --pieces is refused" '[ $rc -eq 2 ] && grep -q "give one of them" "$err"'
"$loom" run -m "$model" -p hi -n 2 --seed -1 >"$out" 2>"$err"; rc=$?
check "run --seed -1 names the range" '[ $rc -eq 2 ] && grep -q -- "--seed expects an integer in \[0, [0-9]*\], found .-1." "$err"'
"$loom" run -m "$model" -p hi -n 2 --stop '' >"$out" 2>"$err"; rc=$?
check "run --stop '' names the length" '[ $rc -eq 2 ] && grep -q -- "--stop expects a string of 1 to 256 bytes, found 0 bytes" "$err"'
"$loom" quantize "${model%-Q4_K_M.gguf}-F16.gguf" "$edited" q8_0 >"$out" 2>"$err"; rc=$?
check "quantize takes a type name in any case" '[ $rc -eq 0 ] && grep -q "(Q8_0)" "$err"'
# output that cannot be written: the output named (its path) and the reason (ENOSPC's text), never "write error"
full='writing standard output (/dev/full): No space left on device$'
"$loom" run -m "$model" -p hi -n 4 >/dev/full 2>"$err"; rc=$?
check "run to a full disk fails, naming stdout and ENOSPC" '[ $rc -eq 1 ] && grep -q "^loom run: $full" "$err"'
"$loom" inspect "$model" >/dev/full 2>"$err"; rc=$?
check "inspect to a full disk fails, naming stdout and ENOSPC" '[ $rc -eq 1 ] && grep -q "^loom inspect: $full" "$err"'
"$loom" --help >/dev/full 2>"$err"; rc=$?
check "--help to a full disk fails, naming stdout and ENOSPC" '[ $rc -eq 1 ] && grep -q "^loom --help: $full" "$err"'
# the peak RSS run reports is loom's own, not that of a program that exec'd it holding 300 MiB
python3 -c 'import os,sys; b=bytearray(300 << 20); b[::4096] = b"\1" * len(b[::4096]); os.execv(sys.argv[1], sys.argv[1:])' \
    "$loom" run -m "$model" -p hi -n 2 >"$out" 2>"$err"; rc=$?
rss=$(sed -n 's/.*peak RSS \([0-9]*\)\..*/\1/p' "$err")
check "run's peak RSS is its own after an exec" '[ $rc -eq 0 ] && [ -n "$rss" ] && [ "$rss" -lt 250 ]'
echo hi | "$loom" tokenize -m "$model" >/dev/full 2>"$err"; rc=$?
check "tokenize to a full disk fails, naming stdout and ENOSPC" '[ $rc -eq 1 ] && grep -q "^loom tokenize: $full" "$err"'
"$loom" bench --mem -t 1 >/dev/full 2>"$err"; rc=$?
check "bench --mem to a full disk fails, naming stdout and ENOSPC (its line comes from a child process)" \
    '[ $rc -eq 1 ] && grep -q "^loom bench: $full" "$err"'
printf 'hello there friend\n' | "$loom" chat -m "$model" -c 40 -n 100 --temp 0 >"$out" 2>"$err"; rc=$?
check "chat says when an answer is cut at the context's end" '[ $rc -eq 0 ] && grep -q "cut where the context ends (-c 40 positions" "$err"'
"$loom" bench -m "$model" -p 8 -n 40000 -r 1 >"$out" 2>"$err"; rc=$?
check "bench -n beyond context_length: a usage error naming -d + -p + -n" '[ $rc -eq 2 ] && grep -q -- "-d + -p + -n: expected at most the model.s context_length" "$err"'
# bench --ref with one CPU build of the reference (LOOM_REF_CPU), named in the header; a missing one refused
# (in any case), said to be forced; a missing one refused with the builds there and those this CPU can load; one
# that needs AVX-512 on a CPU without it refused saying so; xray and certify say which chose the build
LOOM_REF_CPU=HasWell "$loom" bench -m "$model" -p 8 -n 4 -r 1 --ref >"$out" 2>"$err"; rc=$?
check "bench --ref with LOOM_REF_CPU=HasWell runs the haswell build, forced" \
    '[ $rc -eq 0 ] && grep -q "CPU build haswell, forced by LOOM_REF_CPU" "$out" && grep -q "reference" "$out"'
LOOM_REF_CPU=nosuch "$loom" bench -m "$model" -p 8 -n 4 -r 1 --ref >"$out" 2>"$err"; rc=$?
check "bench --ref with a missing LOOM_REF_CPU build: named, with the builds there and those this CPU loads" \
    '[ $rc -eq 1 ] && grep -q "LOOM_REF_CPU=nosuch: expected the NAME of a libggml-cpu-NAME.so in .* (any case), found none of that name; there: .*haswell.*; this CPU can load: .*x64" "$err"'
if ! grep -q avx512f /proc/cpuinfo; then
    LOOM_REF_CPU=zen4 "$loom" xray -m "$model" -p hi >"$out" 2>"$err"; rc=$?
    check "xray with LOOM_REF_CPU=zen4 on a CPU without AVX-512: the file is there, the CPU lacks AVX-512" \
        '[ $rc -eq 2 ] && grep -q "LOOM_REF_CPU=zen4: the reference.s CPU build .*libggml-cpu-zen4.so is there but did not load: it needs AVX-512, which this CPU lacks; this CPU can load: .*haswell" "$err" && ! grep -q "zen4" <<<"$(sed "s/.*can load: //" "$err")"'
fi
LOOM_REF_CPU=x64 "$loom" xray -m "$model" -p hi >"$out" 2>"$err"
check "xray's header: a build forced by LOOM_REF_CPU said so" 'grep -q "(CPU build x64, forced by LOOM_REF_CPU)" "$out"'
LOOM_REF_CPU=x64 "$loom" xray -m "$model" -p hi --json >"$out" 2>"$err"
check "xray --json: reference_cpu_build_forced true under LOOM_REF_CPU" 'grep -q "\"reference_cpu_build_forced\": true" "$out"'
"$loom" xray -m "$model" -p hi --json >"$out" 2>"$err"
check "xray --json: reference_cpu_build_forced false without it" 'grep -q "\"reference_cpu_build_forced\": false" "$out"'
"$loom" xray -m "$model" -p hi --json >/dev/full 2>"$err"; rc=$?
check "xray --json to a full disk: one message, standard output and ENOSPC named once (no doubled 'xray: ')" \
    '[ $rc -eq 2 ] && [ "$(cat "$err")" = "loom xray: writing standard output (/dev/full): No space left on device" ]'
printf 'hello\n' >"$edited"
for how in "haswell (forced by LOOM_REF_CPU):true" "[a-z0-9]* (the best for this CPU):false"; do
    set_cpu=$([ "${how##*:}" = true ] && echo LOOM_REF_CPU=haswell || echo LOOM_REF_CPU=)
    env "$set_cpu" "$loom" certify -m "$model" --prompts "$edited" -n 1 -o "$edited.cert" >"$out" 2>"$err"
    check "certify: its CPU build said as ${how%:*}" \
        'grep -q "CPU build: ${how%:*}, weight" "$edited.cert.md" && grep -q "\"cpu_build_forced\": ${how##*:}" "$edited.cert.json"'
done
check "certify's progress and method: singular forms for one token" \
    'grep -q "prompt 1 of 1 (1 token, then 1 generated)" "$err" && grep -q "then 1 token of the reference" "$edited.cert.md"'
rm -f "$edited.cert.md" "$edited.cert.json"
# bench -d: both tests measured after the depth is filled, named as llama-bench names them
"$loom" bench -m "$model" -p 8 -n 4 -d 40 -r 2 >"$out" 2>"$err"; rc=$?
check "bench -d measures at depth" '[ $rc -eq 0 ] && grep -q "pp8 @ d40" "$out" && grep -q "tg4 @ d40" "$out" && grep -q "K/V rows" "$out"'
# the tiny file's peak RSS: within a bound that allows a small file's fixed costs (64 MiB, said), not OVER
check "bench on a small file: peak RSS within file + state + the fixed costs" \
    'grep -q "+ 64 MiB (the process.s fixed costs: tokenizer, libraries; more than 10% here) = .* MiB: within" "$out"'
"$loom" bench -m "$model" -p 8 -n 4 -d 40 -r 2 -t 1 --ref --ref-fa off >"$out" 2>"$err"; rc=$?
check "bench --ref -d: the reference back at the depth from its saved state, flash attention off said" \
    '[ $rc -eq 0 ] && [ $(grep -c "reference .*@ d40" "$out") -eq 2 ] && grep -q "flash attention off" "$out"'
check "bench --ref: a busy machine's warning (if any) names the reference's barriers" 'load_warning_ok 1'
for v in "+5" " 5" ""; do
    "$loom" bench -m "$model" -p 8 -n 4 -d "$v" -r 1 >"$out" 2>"$err"; rc=$?
    check "bench -d '$v' is refused (digits only)" '[ $rc -eq 2 ] && grep -q -- "-d expects an integer" "$err"'
done

# --numerics: run takes both values (their greedy texts may differ) and, in reference numerics, gives the same
# text twice; chat takes it; a bad value is named by run, chat and bench; bench says which numerics it used
fox=(-m "$model" -p "The quick brown fox" -n 16 --temp 0 -t 2)
for n in canonical reference; do
    "$loom" run "${fox[@]}" --numerics $n >"$out" 2>"$err"; rc=$?
    check "run --numerics $n runs" '[ $rc -eq 0 ] && grep -q "^loom run: prompt 4 tokens" "$err"'
done
text=$(cat "$out")
"$loom" run "${fox[@]}" --numerics reference >"$out" 2>"$err"; rc=$?
check "run --numerics reference gives the same text twice" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$text" ]'
echo hi | "$loom" chat -m "$model" -n 4 --temp 0 -t 2 --numerics reference >"$out" 2>"$err"; rc=$?
check "chat --numerics reference runs" '[ $rc -eq 0 ] && [ $(wc -l <"$out") -eq 1 ]'
for cmd in "run -p hi -n 2" chat "bench -p 8 -n 4 -r 1"; do
    "$loom" $cmd -m "$model" --numerics bogus </dev/null >"$out" 2>"$err"; rc=$?
    check "${cmd%% *} --numerics bogus is refused, naming the option" \
        '[ $rc -eq 2 ] && grep -q -- "--numerics expects reference or canonical, found .bogus.$" "$err"'
done
for n in canonical reference; do
    "$loom" bench -m "$model" -p 8 -n 4 -r 1 -t 2 --numerics $n >"$out" 2>"$err"; rc=$?
    check "bench --numerics $n says so" '[ $rc -eq 0 ] && grep -q "^loom bench: .*, numerics $n, F16 K cache$" "$out"'
done
cpu_orders=haswell # the float-order profile bench ran in, and who chose it: LOOM_ORDERS unset (the CPU's), each value
grep -qw avx512f /proc/cpuinfo && cpu_orders=avx512
for v in "" avx512 haswell; do
    said="float orders $cpu_orders (the CPU's)" envs=(env -u LOOM_ORDERS)
    [ -z "$v" ] || said="float orders $v (LOOM_ORDERS)" envs=(env LOOM_ORDERS=$v)
    "${envs[@]}" "$loom" bench -m "$model" -p 8 -n 4 -r 1 -t 2 >"$out" 2>"$err"; rc=$?
    check "bench with LOOM_ORDERS=${v:-(unset)} names $said next to the kernel set" \
        '[ $rc -eq 0 ] && grep -qE "^loom bench: .*, loom kernels [a-z0-9]+, ${said//[()]/.}, numerics canonical, " "$out"'
done
"$loom" bench -m "$model" -p 8 -n 4 -r 1 --ref-only --numerics reference >"$out" 2>"$err"; rc=$?
check "bench --ref-only refuses --numerics (a loom option)" '[ $rc -eq 2 ] && grep -q -- "--numerics) do not apply" "$err"'
"$loom" bench -m "$model" -p 8 -n 4 -r 1 --ref --ref-fa sometimes >"$out" 2>"$err"; rc=$?
check "bench --ref-fa names its values" '[ $rc -eq 2 ] && grep -q -- "--ref-fa expects auto, on or off, found .sometimes." "$err"'
"$loom" bench -m "$model" -p 8 -n 4 -r 1 --ref-fa off >"$out" 2>"$err"; rc=$?
check "bench --ref-fa without the reference is refused" '[ $rc -eq 2 ] && grep -q -- "give --ref or --ref-only" "$err"'

# metadata keys: the tiny model with one more STRING key right after the header, 32 bytes in all so that the
# tensor data keeps its alignment. An empty key is refused by the reference (gguf.cpp: "key ... is empty"), so
# loom refuses it; 'Bad.Key' only breaks the GGUF convention (lower_snake_case), so loom warns and runs.
le64() { local i; for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"; done; }
with_key() { # KEY (at most 12 bytes): writes $edited
    local n_kv vlen=$((12 - ${#1}))
    n_kv=$(od -An -tu8 -j16 -N8 "$model" | tr -d ' ')
    { head -c 16 "$model"; le64 $((n_kv + 1)); le64 ${#1}; printf '%s' "$1"; printf '\x08\0\0\0'; le64 $vlen
      printf '%*s' $vlen ''; tail -c +25 "$model"; } >"$edited"
}
with_key ""
for cmd in "inspect $edited" "run -m $edited -p hi -n 1 --temp 0 -t 1"; do
    "$loom" $cmd >"$out" 2>"$err"; rc=$?
    check "${cmd%% *} refuses an empty key" '[ $rc -eq 1 ] && grep -q "key #0 at offset 24: name is empty, expected 1 or more bytes" "$err"'
done
with_key "Bad.Key"
for cmd in "inspect $edited" "run -m $edited -p hi -n 1 --temp 0 -t 1"; do
    "$loom" $cmd >"$out" 2>"$err"; rc=$?
    check "${cmd%% *} accepts key 'Bad.Key' with a warning" \
        '[ $rc -eq 0 ] && grep -q "warning: $edited: key #0 .Bad.Key. has byte 0x42 at 0, outside" "$err"'
done
"$loom" inspect "$model" >"$out" 2>"$err"
check "inspect of the tiny model warns about nothing" '! grep -q warning "$err"'

# the expert plan of the cached qwen35moe model (preset tiny-moe, F16: 8 experts, 2 used per token; one routed
# expert is 3 matrices of 256 x 256 F16 = 393216 B; the shared expert the same plus its F32 gate [256] = 394240 B)
moe=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35moe-tiny-F16.gguf
"$loom" inspect "$moe" >"$out" 2>"$err"; rc=$?
check "inspect admits the MoE model" '[ $rc -eq 0 ] && grep -q "^architecture: qwen35moe$" "$out"'
check "inspect shows the expert counts" \
    'grep -q "^expert plan: 8 routed experts per layer, 2 used per token, plus 1 shared expert$" "$out"'
check "inspect shows the bytes per expert" \
    'grep -q "one routed expert (gate, up, down) *393216 B" "$out" && grep -q "shared expert per layer *394240 B" "$out"'
check "inspect shows what a token reads" 'grep -q "one token reads per layer *1180672 B" "$out"'

# chat renders the file's own template (the tiny models carry a ChatML one) through the Jinja interpreter
echo hi | "$loom" chat -m "$model" -n 2 -t 1 >"$out" 2>"$err"; rc=$?
check "chat renders the file's own template" '[ $rc -eq 0 ] && ! grep -q "warning" "$err"'

# the version; help that points at each command's; inspect and quantize naming what is wrong
"$loom" --version >"$out" 2>"$err"; rc=$?
check "--version prints the version" '[ $rc -eq 0 ] && grep -qE "^loom [0-9]+\.[0-9]+\.[0-9]+$" "$out"'
"$loom" --help >"$out" 2>"$err"
check "--help points at each command's --help" 'grep -q "loom COMMAND --help" "$out"'
"$loom" inspect -m "$model" >"$out" 2>"$err"; rc=$?
check "inspect -m FILE names the option it does not take" '[ $rc -eq 2 ] && grep -q "unknown option .-m." "$err"'
# an option a command does not take is named as unknown wherever it stands (the last one too: not as an option
# missing its value), before the model loads; a known option at the end is named as missing its value
for c in run chat serve certify xray; do
    "$loom" $c -m "$model" -t 1 --check-tensor >"$out" 2>"$err" </dev/null; rc=$?
    check "$c names an unknown last option" '[ $rc -ne 0 ] && grep -q "loom $c: unknown option .--check-tensor." "$err"'
    "$loom" $c --bogus 1 -m "$model" >"$out" 2>"$err" </dev/null; rc=$?
    check "$c names an unknown option before the others" '[ $rc -ne 0 ] && grep -q "loom $c: unknown option .--bogus.$" "$err"'
    check "$c points to --help at most once after an unknown option" '[ "$(grep -c -- "--help" "$err")" -le 1 ]'
    "$loom" $c -m "$model" -t >"$out" 2>"$err" </dev/null; rc=$?
    check "$c names a last option without its value" '[ $rc -ne 0 ] && grep -q "loom $c: option .-t. expects a value" "$err"'
done
# GNU-style --NAME=VALUE is not taken (a value may itself start with "--" and hold '='), but each command's
# unknown-option message knows the command's own options (its table): for one that takes a value, how to write it
# (-X=VALUE too); for a flag, that it takes none; for a name the command does not take, no hint (its synopsis or
# usage follows), or the nearest option when one is obvious, the value not shown (a misspelt name's may be a
# secret: --pasword=...); a prompt spelled so stays -p's value
declare -A args=([run]="-m $model -p hi -n 1" [chat]="-m $model" [serve]="-m $model" [bench]="-m $model"
    [certify]="-m $model" [xray]="-m $model -p hi" [synth]="--preset micro" [tokenize]="" [inspect]="$model"
    [quantize]="")
declare -A value=([run]=--temp [chat]=--top-k [serve]=--port [bench]=-r [certify]=--prompts [xray]=--layers
    [synth]=--seed [tokenize]=-m [inspect]=--ctx [quantize]=--imatrix)
declare -A flag=([run]=--check-tensors [chat]=--stats [serve]=--check-tensors [bench]=--ref [certify]=--check-tensors
    [xray]=--json [synth]=--sparse [tokenize]=--bos [inspect]=--check-tensors)
for c in run chat serve bench certify xray synth tokenize inspect quantize; do
    o=${value[$c]}
    "$loom" $c ${args[$c]} "$o=0.5" >"$out" 2>"$err" </dev/null; rc=$?
    check "$c $o=0.5: unknown, with how to write it" \
        '[ $rc -eq 2 ] && grep -q "^loom $c: unknown option .$o=0.5. (options take their value as the next argument: $o 0.5)$" "$err"'
    "$loom" $c ${args[$c]} --zzz=zvalue >"$out" 2>"$err" </dev/null; rc=$?
    check "$c --zzz=zvalue (no option of $c): unknown, without a hint or the value, then its synopsis or usage" \
        '[ $rc -eq 2 ] && grep -q "^loom $c: unknown option .--zzz=VALUE. (its value is not shown)$" "$err" &&
         ! grep -q zvalue "$err" && grep -q "^usage: loom $c" "$err"'
    [ -n "${flag[$c]:-}" ] || continue
    o=${flag[$c]}
    "$loom" $c ${args[$c]} "$o=1" >"$out" 2>"$err" </dev/null; rc=$?
    check "$c $o=1: a flag, which takes no value" '[ $rc -eq 2 ] && grep -q "^loom $c: unknown option .$o=1. ($o takes no value)$" "$err"'
done
for c in run chat serve bench certify xray quantize; do
    "$loom" $c ${args[$c]} -t=2 >"$out" 2>"$err" </dev/null; rc=$?
    check "$c -t=2: the hint of the long form" \
        '[ $rc -eq 2 ] && grep -q "^loom $c: unknown option .-t=2. (options take their value as the next argument: -t 2)$" "$err"'
done
# a secret option's value (serve --api-key) is in no message, the hint neither; chat's sampler options are in its
# table, as run's
"$loom" serve -m "$model" --api-key=s3cr3t >"$out" 2>"$err"; rc=$?
check "serve --api-key=SECRET: the hint, never the secret" \
    '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom serve: unknown option .--api-key=VALUE. (its value is not shown; options take their value as the next argument: --api-key VALUE)$" "$err"'
"$loom" serve -m "$model" --api-kye=s3cr3t >"$out" 2>"$err"; rc=$?
check "serve --api-kye=SECRET: the nearest option, never the secret" \
    '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom serve: unknown option .--api-kye=VALUE. (its value is not shown; did you mean --api-key? Options take their value as the next argument: --api-key VALUE)$" "$err"'
# a secret is a secret whichever command it was given to, before a command too: a name some command takes as a
# secret (or near one), or any name holding key, token, passw or secret, never has its value shown
for c in "" run chat serve bench certify xray synth tokenize inspect quantize help version; do
    for a in --api-key=s3cr3t --api-kye=s3cr3t --API-KEY=s3cr3t --token=s3cr3t --db-password=s3cr3t -secret=s3cr3t \
        --pasword=s3cr3t --api_key=s3cr3t --zzz=s3cr3t -x=s3cr3t --=s3cr3t -=s3cr3t; do
        "$loom" $c $a >"$out" 2>"$err" </dev/null; rc=$?
        check "loom $c $a: unknown, its value not shown" \
            '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom${c:+ $c}: unknown option .${a%%=*}=VALUE. (its value is not shown" "$err"'
    done
done
"$loom" xray --per-token=1 >"$out" 2>"$err"; rc=$?
check "xray --per-token=1: a flag of xray's own takes no secret, said plainly" \
    '[ $rc -eq 2 ] && grep -q "^loom xray: unknown option .--per-token=1. (--per-token takes no value)$" "$err"'
# a key no request could send back (the server trims the header's value), or a second key: refused before loading
for key in " s3cr3t" "s3cr3t " "$(printf 's3\tcr3t')"; do
    "$loom" serve -m "$model" --api-key "$key" >"$out" 2>"$err"; rc=$?
    check "serve --api-key with white space at an end or a control character: refused, the key not shown" \
        '[ $rc -eq 2 ] && ! grep -q cr3t "$err" && grep -q "^loom serve: --api-key: expected a key without spaces at either end or control characters" "$err"'
done
"$loom" serve -m "$model" --api-key s3cr3t --api-key other >"$out" 2>"$err"; rc=$?
check "serve --api-key twice: refused, neither key shown" \
    '[ $rc -eq 2 ] && ! grep -q -e s3cr3t -e other "$err" && grep -q "^loom serve: --api-key expects one value, found two different ones (not shown; loom serve takes one)$" "$err"'
"$loom" serve -m "$model" --api-key s3cr3t other >"$out" 2>"$err" </dev/null; rc=$?
check "serve --api-key s3cr3t other: the word after a key is not shown (the rest of a key with a space)" \
    '[ $rc -eq 2 ] && ! grep -q -e s3cr3t -e other "$err" && grep -q "unexpected argument right after --api-key.s value (not shown" "$err"'
# an option given twice takes its last value (loom --help says so), but a second, different file, prompt or key is
# refused naming both, whichever of its names it is given by; the same one again is taken
"$loom" --help >"$out"
check "loom --help says an option given twice takes its last value, a second file refused" \
    'grep -q "^An option given twice takes its last value" "$out" && grep -q "^second, different file, prompt or key" "$out"'
"$loom" run -m "$model" -p hi -n 4 -n 2 >"$out" 2>"$err"; rc=$?
check "run -n 4 -n 2: the last one counts" '[ $rc -eq 0 ] && grep -q "(2 generated)" "$err"'
"$loom" run -m "$model" -m "$model" -p hi -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -m F -m F -p hi -p hi: the same file and prompt again, taken" '[ $rc -eq 0 ]'
im=tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf
"$loom" quantize --imatrix "$im" --imatrix "$im" "${model%-Q4_K_M.gguf}-F16.gguf" "$edited" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize --imatrix F --imatrix F: the same matrix again, taken" '[ $rc -eq 0 ] && [ -s "$edited" ]'
# a file is compared as a file, not as its spelling: the same file by another path is the same one (an output not
# yet written: the same name in the same directory); a prompt is its text
mdir=$(dirname "$model") mbase=$(basename "$model")
"$loom" run -m "$model" -m "$mdir/./$mbase" -m "$mdir/../$(basename "$mdir")/$mbase" -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -m F -m DIR/./F -m DIR/../D/F: one file by three paths, taken" '[ $rc -eq 0 ]'
"$loom" quantize --imatrix "$im" --imatrix "./$im" "${model%-Q4_K_M.gguf}-F16.gguf" "$edited" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize --imatrix F --imatrix ./F: the same matrix, taken" '[ $rc -eq 0 ] && [ -s "$edited" ]'
rm -f "$edited.gguf"
"$loom" synth --preset micro -o "$edited.gguf" --output "$(dirname "$edited")/./$(basename "$edited").gguf" >"$out" 2>"$err"; rc=$?
check "synth -o F --output DIR/./F (F not yet written): the same output, taken" '[ $rc -eq 0 ] && [ -s "$edited.gguf" ]'
rm -f "$edited.gguf"
"$loom" run -m "$model" -m "$mdir/./nonexistent.gguf" -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -m F -m DIR/./OTHER: another file, refused naming both" \
    '[ $rc -eq 2 ] && grep -q -- "^loom run: -m expects one value, found .$model. and then .$mdir/./nonexistent.gguf. (given twice" "$err"'
"$loom" run -m "$model" -p hi -p ./hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -p hi -p ./hi: a prompt is its text, refused naming both" \
    '[ $rc -eq 2 ] && grep -q -- "^loom run: -p expects one value, found .hi. and then .\./hi. (given twice" "$err"'
for a in "run -m a.gguf -p hi -m b.gguf -n 1:-m:a.gguf:b.gguf" "run -p one -p two -n 1:-p:one:two" \
    "xray -p one -p two:-p:one:two" "bench -m a.gguf -m b.gguf:-m:a.gguf:b.gguf" \
    "certify --prompts a -o x --prompts b:--prompts:a:b" "certify -o x -o y:-o:x:y" \
    "synth -o a.gguf --output b.gguf:--output:a.gguf:b.gguf" \
    "tokenize --model a.gguf -m b.gguf:-m:a.gguf:b.gguf" "quantize --imatrix a --imatrix b:--imatrix:a:b" \
    "serve -m a.gguf -m b.gguf:-m:a.gguf:b.gguf" "serve --chat-template-file a --chat-template-file b:--chat-template-file:a:b"; do
    IFS=: read -r args o v1 v2 <<<"$a"
    c=${args%% *}
    "$loom" $args >"$out" 2>"$err" </dev/null; rc=$?
    check "$args: refused naming both" \
        '[ $rc -eq 2 ] && grep -q -- "^loom $c: $o expects one value, found .$v1. and then .$v2. (given twice; loom $c takes one)$" "$err"'
done
"$loom" chat -m "$model" --temp=0.5 >"$out" 2>"$err" </dev/null; rc=$?
check "chat --temp=0.5: the hint of a sampler option" \
    '[ $rc -eq 2 ] && grep -q "^loom chat: unknown option .--temp=0.5. (options take their value as the next argument: --temp 0.5)$" "$err" && grep -q "^usage: loom chat" "$err"'
"$loom" run -m "$model" -p hi -n 1 --check-tensors 1 >"$out" 2>"$err"; rc=$?
check "run --check-tensors 1: the 1 is after a flag, said with what run takes" \
    '[ $rc -eq 2 ] && grep -q "^loom run: unexpected argument .1. (--check-tensors takes no value; loom run takes only the options -m, -p, .*, each with a value, and the flags --check-tensors and --stats)$" "$err"'
"$loom" certify -m "$model" --out=x >"$out" 2>"$err"; rc=$?
check "certify --out=x: unknown, no option near it" \
    '[ $rc -eq 2 ] && grep -q "^loom certify: unknown option .--out=VALUE. (its value is not shown)$" "$err"'
"$loom" synth --preset micro --out=x >"$out" 2>"$err"; rc=$?
check "synth --out=x: the start of --output" \
    '[ $rc -eq 2 ] && grep -q "^loom synth: unknown option .--out=VALUE. (its value is not shown; did you mean --output? Options take their value as the next argument: --output VALUE)$" "$err"'
"$loom" run -m "$model" -p hi -n 1 --check-tensor=1 >"$out" 2>"$err"; rc=$?
check "run --check-tensor=1: the nearest option, a flag" \
    '[ $rc -eq 2 ] && grep -q "^loom run: unknown option .--check-tensor=VALUE. (its value is not shown; did you mean --check-tensors? It takes no value)$" "$err"'
"$loom" run -m "$model" -p hi -n 1 --temprature=0.5 >"$out" 2>"$err"; rc=$?
check "run --temprature=0.5: --temp with text glued on, none of it shown (it might be a value: --temphunter2)" \
    '[ $rc -eq 2 ] && ! grep -q rature "$err" && grep -q "^loom run: .--temp. with a value glued on (not shown): give it as the next argument, --temp VALUE$" "$err"'
"$loom" run -m "$model" -p hi -n 1 -temp 1 >"$out" 2>"$err"; rc=$?
check "run -temp: -t with text glued on (not shown), then did you mean --temp? (the same letters)" \
    '[ $rc -eq 2 ] && grep -q -- "^loom run: .-t. with a value glued on (not shown): give it as the next argument, -t VALUE (did you mean --temp?)$" "$err"'
for a in "--t:-t" "--Seed:--seed" "--mem:--mem-budget" "--temperature:--temp" "--ctk:-ctk" \
    "--model:-m" "--prompt:-p" "--threads:-t" "--ctx-size:-c" "--n-predict:-n"; do # the last: llama.cpp's long names
    "$loom" run -m "$model" -p hi -n 1 "${a%%:*}" 1 >"$out" 2>"$err"; rc=$?
    check "run ${a%%:*}: did you mean ${a#*:}?" '[ $rc -eq 2 ] && grep -q -- "unknown option .${a%%:*}. (did you mean ${a#*:}?)$" "$err"'
done
for a in --rep --out -x --zzz; do
    "$loom" run -m "$model" -p hi -n 1 $a 1 >"$out" 2>"$err"; rc=$?
    check "run $a: no option is the obvious one" '[ $rc -eq 2 ] && grep -q -- "unknown option .$a.$" "$err"'
done
"$loom" run -m "$model" -p hi -n 1 "--stop=a b" >"$out" 2>"$err"; rc=$?
check "run --stop='a b': the hint quotes the value for the shell" \
    '[ $rc -eq 2 ] && grep -q "(options take their value as the next argument: --stop .a b.)$" "$err"'
"$loom" quantize --threads=2 a.gguf b.gguf Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize --threads=2: the hint, then its usage" \
    '[ $rc -eq 2 ] && grep -q "(options take their value as the next argument: --threads 2)$" "$err" && grep -q "^usage: loom quantize" "$err"'
"$loom" run -m "$model" -p "--temp=0.5" -n 1 >"$out" 2>"$err"; rc=$?
check "run -p --temp=0.5: a prompt of that spelling is -p's value" '[ $rc -eq 0 ] && grep -q "^loom run: prompt [0-9]* tokens" "$err"'
"$loom" run -m "$model" -p hi -n 1 --bogus >"$out" 2>"$err"; rc=$?
check "run --bogus: no hint without '='" '[ $rc -eq 2 ] && grep -q "unknown option .--bogus.$" "$err"'
"$loom" quantize a.gguf b.gguf Q8_0 extra >"$out" 2>"$err"; rc=$?
check "quantize with a fourth operand: named, with what quantize takes" \
    '[ $rc -eq 2 ] && grep -q "^loom quantize: unexpected argument .extra. (IN.gguf OUT.gguf TYPE are .a.gguf. .b.gguf. .Q8_0. already; loom quantize takes IN.gguf OUT.gguf TYPE and the options -t, --threads, --imatrix and --tensor-type, each with a value)$" "$err"'
"$loom" inspect "$model" "$model" >"$out" 2>"$err"; rc=$?
check "inspect with a second FILE: named, with what inspect takes" \
    '[ $rc -eq 2 ] && grep -q "^loom inspect: unexpected argument .$model. (FILE is .$model. already; loom inspect takes one FILE and the options --ctx, --cache-type-k and -ctk, each with a value, and the flag --check-tensors)$" "$err"'
# every command's table (which its parser goes by, and which its message for an unexpected argument lists) holds
# the options its --help lists, no more, no fewer
names() { grep -o -- '\(^\|[][ (|,]\)--\?[a-z][a-z0-9-]*' | sed 's/^[][ (|,]//' | grep -v -- '^\(-h\|--help\)$' | sort -u; }
for c in "run stray" "chat stray" "serve stray" "bench stray" "certify stray" "xray stray" "synth stray" \
    "tokenize stray" "inspect a b" "quantize a b c d"; do
    help=$("$loom" ${c%% *} --help | names | tr '\n' ' ')
    "$loom" $c >"$out" 2>"$err" </dev/null; rc=$?
    table=$(sed -n 's/^loom [a-z]*: unexpected argument .* takes //p' "$err" | names | tr '\n' ' ')
    check "${c%% *}: the options of its table are those of its --help ($help)" \
        '[ $rc -eq 2 ] && [ -n "$table" ] && [ "$table" = "$help" ] || { echo "    table: $table"; false; }'
    # a value glued onto a single-dash option of the table (-tSECRET) is not shown, only the option: it may be a
    # secret or a prompt (-ctkX is -ctk's, the longest)
    for o in $(sed -n 's/^loom [a-z]*: unexpected argument .* the options\? \(.*\), \(each \)\?with a value.*/\1/p' "$err" |
        names | grep '^-[a-z]'); do
        "$loom" ${c%% *} "${o}s3cr3t" >"$out" 2>"$err" </dev/null; rc=$?
        check "${c%% *} ${o}s3cr3t: the option named, the glued value not shown" \
            '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q -- "^usage: loom ${c%% *}" "$err" &&
             grep -q -- "^loom ${c%% *}: .$o. with a value glued on (not shown): give it as the next argument, $o VALUE$" "$err"'
    done
done
for a in "serve:--api-keys3cr3t:--api-key" "serve:--api-key-s3cr3t:--api-key" "run:-ts3cr3t=1:-t" "run:-cs3cr3t:-c"; do
    IFS=: read -r c a o <<<"$a"
    "$loom" $c "$a" >"$out" 2>"$err" </dev/null; rc=$?
    check "$c $a: glued onto $o, not shown (a secret option's even where its name is near)" \
        '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q -- "^loom $c: .$o. with a value glued on (not shown)" "$err"'
done
# an argument no command's option is, named only up to a safe point, in every command and before one: a secret's
# name with more after it (up to the end of key, token, passw(ord) or secret, then "..."; serve's own --api-key as
# glued on), and a short option some command takes, glued on (this command's: give it as the next argument; a
# flag's: it takes no value; another command's: this one takes none)
for c in "" run chat serve bench certify xray synth tokenize inspect quantize help version; do
    for a in -api-keys3cr3t -api-keys3cr3t= --api-keys3cr3t --tokens3cr3t --passwords3cr3t --apikeys3cr3t \
        --api_keys3cr3t --Api-Keys3cr3t; do
        want="unknown option .${a%%s3cr3t*}\.\.\.. (the rest is not shown"
        [ "$c" = serve ] && [ "${a#-api-key}" != "$a" -o "${a#--api-key}" != "$a" ] &&
            want=".${a%%s3cr3t*}. with a value glued on (not shown): give it as the next argument, --api-key VALUE$"
        "$loom" $c $a >"$out" 2>"$err" </dev/null; rc=$?
        check "loom $c $a: named up to the secret's name, the rest not shown" \
            '[ $rc -eq 2 ] && ! grep -q s3cr3t "$out" "$err" && grep -q -- "^loom${c:+ $c}: $want" "$err"'
    done
    before=$([ -n "$c" ] || echo " before a command")
    for o in -c -d -m -n -o -p -t; do
        "$loom" $c "${o}s3cr3t" >"$out" 2>"$err" </dev/null; rc=$?
        check "loom $c ${o}s3cr3t: only $o named, with what to write" \
            '[ $rc -eq 2 ] && ! grep -q s3cr3t "$out" "$err" && grep -q -- "^loom${c:+ $c}: .$o. with \(a value glued on (not shown): give it as the next argument, $o VALUE$\|text glued on (not shown): \($o takes no value\|loom${c:+ $c} takes no $o$before\)\)" "$err"'
    done
    "$loom" $c --hlep >"$out" 2>"$err" </dev/null; rc=$?
    check "loom $c --hlep: did you mean --help?" '[ $rc -eq 2 ] && grep -q -- "^loom${c:+ $c}: unknown option .--hlep. (did you mean --help?" "$err"'
done
"$loom" chat -ps3cr3t >"$out" 2>"$err" </dev/null; rc=$?
check "chat -ps3cr3t: chat takes no -p, the text not shown" \
    '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q -- "^loom chat: .-p. with text glued on (not shown): loom chat takes no -p$" "$err"'
"$loom" -ts3cr3t >"$out" 2>"$err" </dev/null; rc=$?
check "loom -ts3cr3t: before a command, the text not shown" \
    '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q -- "^loom: .-t. with text glued on (not shown): loom takes no -t before a command (options come after the command" "$err"'
# a glued value that looks like an option's name is no misspelling of it: only the option it is glued onto is
# named (-temphunter2 is --temp's, other dashes), no "did you mean" from the value
for a in "run:-temphunter2:-temp:--temp:hunter2" "run:--temphunter2:--temp:--temp:hunter2" \
    "run:--stophunter2:--stop:--stop:hunter2" "serve:--porthunter2:--port:--port:hunter2" "run:-pstop:-p:-p:stop" \
    "run:-mtats:-m:-m:tats"; do
    IFS=: read -r c a shown o v <<<"$a"
    "$loom" $c "$a" >"$out" 2>"$err" </dev/null; rc=$?
    check "$c $a: $shown named, the rest ($v) not shown" \
        '[ $rc -eq 2 ] && ! head -1 "$err" | grep -q -- "$v" && ! grep -q -- "$a" "$out" "$err" &&
         grep -q -- "^loom $c: .$shown. with a value glued on (not shown): give it as the next argument, $o VALUE$" "$err"'
done
# an unexpected operand spelled NAME=VALUE is named without its value, as an unknown --NAME=VALUE is (it may be a
# secret: api_key=...); one without '=' in full
for c in run chat serve bench certify xray synth tokenize "inspect $model" "quantize a b c"; do
    "$loom" $c api_key=s3cr3t >"$out" 2>"$err" </dev/null; rc=$?
    check "${c%% *} api_key=s3cr3t: the operand named without its value" \
        '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom ${c%% *}: unexpected argument .api_key=VALUE. (its value is not shown; .*loom ${c%% *} takes " "$err"'
done
"$loom" run -m "$model" --stats key=s3cr3t >"$out" 2>"$err" </dev/null; rc=$?
check "run --stats key=s3cr3t: after a flag, named without its value" \
    '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^loom run: unexpected argument .key=VALUE. (its value is not shown; --stats takes no value; loom run takes " "$err"'
for a in "version:loom version: unexpected argument .api_key=VALUE. (its value is not shown; loom version takes no arguments, only -h or --help)" \
    ":loom: unknown command .api_key=VALUE. (its value is not shown)" \
    "help:loom help: expects a command, found .api_key=VALUE. (its value is not shown)" \
    "help run:loom help: expects at most one command, found .api_key=VALUE. after .run. (a value is not shown)"; do
    "$loom" ${a%%:*} api_key=s3cr3t >"$out" 2>"$err" </dev/null; rc=$?
    check "loom ${a%%:*} api_key=s3cr3t: named without its value" '[ $rc -eq 2 ] && ! grep -q s3cr3t "$err" && grep -q "^${a#*:}$" "$err"'
done
# every option of every table has a branch that applies it: each given once (a value "1", then an unknown option
# ends the parse before any work), none is an internal error (an option added to a table alone)
for c in run chat serve bench certify xray synth tokenize inspect quantize; do
    n=0
    for o in $("$loom" $c --help | names); do
        "$loom" $c $o 1 --zz-end >"$out" 2>"$err" </dev/null; rc=$?
        grep -q "internal error" "$err" && { echo "    $c $o: $(cat "$err" | head -1)"; n=$((n + 1)); }
    done
    check "$c: every option of its table is applied by a branch of its parser" '[ $n -eq 0 ]'
done
# xray and certify take (and list) the model options of loading, not --stats (they report no expert cache)
for c in xray certify; do
    check "$c --help lists -m and the model options of loading" \
        '"$loom" $c --help | grep -q -- "^  -m FILE" && "$loom" $c --help | grep -q -- "^  --mem-budget SIZE" &&
         "$loom" $c --help | grep -q -- "^  --read-ahead MODE" && "$loom" $c --help | grep -q -- "^  --check-tensors"'
    "$loom" $c -m "$model" --stats >"$out" 2>"$err"; rc=$?
    check "$c --stats: not an option of $c" '[ $rc -eq 2 ] && grep -q "^loom $c: unknown option .--stats.$" "$err"'
done
# an option with a value, last without one, says so (not "found 'nothing'", not its own name as the value)
"$loom" inspect "$model" --ctx >"$out" 2>"$err"; rc=$?
check "inspect --ctx last: found the end of the command line" '[ $rc -eq 2 ] && grep -q "loom inspect: --ctx expects a context length in \[1, [0-9]*\], found the end of the command line" "$err"'
"$loom" inspect "$model" -ctk >"$out" 2>"$err"; rc=$?
check "inspect -ctk last: found the end of the command line" '[ $rc -eq 2 ] && grep -q "found the end of the command line" "$err"'
"$loom" inspect "$model" --bogus >"$out" 2>"$err"; rc=$?
check "inspect --bogus: unknown, no word about -m" '[ $rc -eq 2 ] && grep -q "unknown option .--bogus.$" "$err"'
"$loom" bench -m "$model" --ref-fa >"$out" 2>"$err"; rc=$?
check "bench --ref-fa last: found the end of the command line" '[ $rc -ne 0 ] && grep -q "found the end of the command line" "$err"'
"$loom" run -m "" -p hi -n 1 >"$out" 2>"$err"; rc=$?
check "run -m '': an empty file name named" '[ $rc -eq 2 ] && grep -q "loom run: -m expects a GGUF file, found ..$" "$err"'
"$loom" inspect "" >"$out" 2>"$err"; rc=$?
check "inspect '': an empty file name named, a usage error" '[ $rc -eq 2 ] && grep -q "loom inspect: expected a GGUF file, found ..$" "$err"'
printf 'hello this is a text\n' >"$edited"
"$loom" inspect "$edited" >"$out" 2>"$err"; rc=$?
check "inspect of a short text file: not a GGUF file (its magic), not a truncated one" \
    '[ $rc -eq 1 ] && grep -q "magic: expected .GGUF., found bytes 68 65 6c 6c (.hell.): not a GGUF file" "$err"'
"$loom" tokenize -m >"$out" 2>"$err" </dev/null; rc=$?
check "tokenize -m last: found the end of the command line" '[ $rc -ne 0 ] && grep -q "loom tokenize: -m expects a GGUF file, found the end of the command line" "$err"'
"$loom" tokenize hello >"$out" 2>"$err" </dev/null; rc=$?
check "tokenize with a word: the text comes on stdin" '[ $rc -ne 0 ] && grep -q "unexpected argument .hello. (the text comes on stdin; " "$err"'
"$loom" bench -m "$model" stray >"$out" 2>"$err"; rc=$?
check "bench with a word: an unexpected argument, not an option" '[ $rc -ne 0 ] && grep -q "loom bench: unexpected argument .stray." "$err"'
"$loom" bench -m "$model" --check-tensor >"$out" 2>"$err"; rc=$?
check "bench names an unknown option" '[ $rc -ne 0 ] && grep -q "loom bench: unknown option .--check-tensor." "$err"'
"$loom" bench -m >"$out" 2>"$err"; rc=$?
check "bench names -m without its file" '[ $rc -ne 0 ] && grep -q "loom bench: -m expects a GGUF file" "$err"'
"$loom" quantize /nonexistent/in.gguf "$out.gguf" Q4_K_M >"$out" 2>"$err"; rc=$?
check "quantize names an input it cannot open" '[ $rc -eq 1 ] && grep -q "/nonexistent/in.gguf: open: No such file" "$err"'
# an output file that cannot be created is named as given, with its directory (not the writer's temporary file),
# before any tensor is converted or generated
"$loom" quantize "${model%-Q4_K_M.gguf}-F16.gguf" /nonexistent/dir/out.gguf Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize into a missing directory names the output and the directory, before any work" \
    '[ $rc -eq 1 ] && grep -q "output ./nonexistent/dir/out.gguf.: directory ./nonexistent/dir. does not exist$" "$err" &&
     ! grep -q "\.tmp" "$err" && ! grep -q "^quantize: .*tensor" "$err"'
"$loom" synth --preset micro -o /nonexistent/dir/out.gguf >"$out" 2>"$err"; rc=$?
check "synth -o into a missing directory names the output and the directory, before any work" \
    '[ $rc -eq 1 ] && grep -q "^loom synth: output ./nonexistent/dir/out.gguf.: directory ./nonexistent/dir. does not exist$" "$err" &&
     ! grep -q "\.tmp" "$err" && ! grep -q "^synth: preset" "$err"'
"$loom" synth --preset tiny --sparse --split 2 -o /nonexistent/dir/out.gguf >"$out" 2>"$err"; rc=$?
check "synth --split into a missing directory names the first part and the directory" \
    '[ $rc -eq 1 ] && grep -q "output ./nonexistent/dir/out-00001-of-00002.gguf.: directory ./nonexistent/dir. does not exist$" "$err"'
printf 'a file' >"$edited"
"$loom" synth --preset micro -o "$edited/out.gguf" >"$out" 2>"$err"; rc=$?
check "synth -o under a file names the output and why" \
    '[ $rc -eq 1 ] && grep -q "output .$edited/out.gguf.: cannot create a file in directory .$edited.: Not a directory$" "$err"'

# an output path that is a directory: the same status in quantize and synth (1: the file system refuses it, as an
# input that does not open), in the writer's words; one that names an input: 2 (the command line names one file
# twice), the input untouched; certify's files checked in the same words (status 2 for both: its 1 is a difference)
mkdir -p "$edited.d" "$edited.d/cert.md"
"$loom" quantize "${model%-Q4_K_M.gguf}-F16.gguf" "$edited.d" Q8_0 >"$out" 2>"$err"; rc=$?
check "quantize to a directory: status 1, named" \
    '[ $rc -eq 1 ] && grep -q "^loom quantize: output .$edited.d.: expected a regular file or a new path, found a directory$" "$err"'
"$loom" synth --preset micro -o "$edited.d" >"$out" 2>"$err"; rc=$?
check "synth to a directory: status 1, as quantize" \
    '[ $rc -eq 1 ] && grep -q "^loom synth: output .$edited.d.: expected a regular file or a new path, found a directory$" "$err"'
printf 'vocabulary' >"$edited"
"$loom" synth --preset micro --vocab "$edited" -o "$edited" >"$out" 2>"$err"; rc=$?
check "synth onto its own vocabulary is refused (status 2, as quantize onto its input)" \
    '[ $rc -eq 2 ] && [ "$(cat "$edited")" = vocabulary ] && grep -q "^loom synth: output .$edited.: expected a file other than the vocabulary, found the vocabulary itself$" "$err"'
# certify -o takes a PREFIX: one that names no file to add .md and .json to is refused before any work, saying so
for o in /dev/null "$edited.d/" ""; do
    "$loom" certify -m "$model" -o "$o" >"$out" 2>"$err"; rc=$?
    check "certify -o '$o': -o takes a prefix, said before any work" \
        '[ $rc -eq 2 ] && grep -q "^loom certify: -o .$o.: expected a file name PREFIX (-o takes a prefix: PREFIX.json and PREFIX.md are written), found " "$err" && [ ! -s "$out" ]'
done
check "certify -o /dev/null wrote no /dev/null.md" '[ ! -e /dev/null.md ] && [ ! -e /dev/null.json ]'
"$loom" certify -m "$model" -o /nonexistent/dir/cert >"$out" 2>"$err"; rc=$?
check "certify -o into a missing directory: quantize's and synth's words" \
    '[ $rc -eq 2 ] && grep -q "^loom certify: output ./nonexistent/dir/cert.json.: directory ./nonexistent/dir. does not exist$" "$err"'
"$loom" certify -m "$model" -o "$edited.d/cert" >"$out" 2>"$err"; rc=$?
check "certify -o PREFIX where PREFIX.md is a directory: named" \
    '[ $rc -eq 2 ] && grep -q "^loom certify: output .$edited.d/cert.md.: expected a regular file or a new path, found a directory$" "$err"'
printf 'hi\n' >"$edited.d/p.md"
"$loom" certify -m "$model" --prompts "$edited.d/p.md" -o "$edited.d/p" >"$out" 2>"$err"; rc=$?
check "certify onto its own prompts file is refused" \
    '[ $rc -eq 2 ] && [ "$(cat "$edited.d/p.md")" = hi ] && grep -q "expected a file other than the prompts file, found the prompts file itself$" "$err"'
# certify's header says the K/V cache types in words (it said "K/V K Q8_0, V F16")
for k in "q8_0:K cache Q8_0, V cache F16" "f16:F16 K/V"; do
    "$loom" certify -m "$model" --prompts "$edited.d/p.md" -n 1 -t 2 -ctk ${k%%:*} -o "$edited.d/c" >"$out" 2>"$err"; rc=$?
    check "certify -ctk ${k%%:*}: the header says '${k#*:}'" \
        '[ $rc -le 1 ] && grep -q "^- Reference: .*; flash attention off, ${k#*:}, n_ubatch" "$edited.d/c.md"'
done
rm -rf "$edited.d"

# Ctrl+C while a long prompt prefills (the 0.8b model, 12 requests of 512 tokens): the timing line says the prompt
# was interrupted and how many of its tokens the finished requests evaluated (it said "prompt 0 tokens"). SIGINT
# comes once the process has spent 2.5 requests' CPU time (a 250-token prompt's prefill, timed first) past the
# line that ends its setup; env restores SIGINT, which a script's background job inherits ignored.
big=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-0.8b-Q4_K_M.gguf
sentences() { for i in $(seq "$1"); do printf 'The quick brown fox jumps over the lazy dog number %d. ' "$i"; done; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
"$loom" run -m "$big" -p "$(sentences 17)" -n 1 -t 1 >"$out" 2>"$err"; rc=$?
tps=$(sed -n 's/^loom run: prompt [0-9]* tokens, \([0-9.]*\) tok\/s .*/\1/p' "$err")
check "run on the 0.8b model times a 250-token prefill" '[ $rc -eq 0 ] && [ -n "$tps" ]'
long=$(sentences 400)
n_long=$(printf %s "$long" | "$loom" tokenize -m "$big" | wc -w)
ticks=$(awk -v t="${tps:-100}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%d", 2.5 * 512 / t * hz }')
: >"$err" # the setup line waited for is this run's
env --default-signal=INT "$loom" run -m "$big" -p "$long" -n 4 --temp 0 -t 1 >"$out" 2>"$err" &
pid=$!
wait_until "grep -q '^loom run: context' '$err' || ! kill -0 $pid 2>/dev/null"
c0=$(cpu_ticks $pid)
wait_until "[ \$((\$(cpu_ticks $pid) - c0)) -ge $ticks ] || ! kill -0 $pid 2>/dev/null"
kill -INT $pid 2>/dev/null
wait $pid; rc=$?
k=$(sed -n "s/^loom run: prompt interrupted after \([0-9]*\) of $n_long tokens, [0-9.]* tok\/s | decode 0 tokens (0 generated) .*/\1/p" "$err")
check "run: Ctrl+C during a $n_long-token prefill exits 130 without text" '[ $rc -eq 130 ] && [ ! -s "$out" ]'
check "run: Ctrl+C during the prefill says the prompt was interrupted after ${k:-?} of its $n_long tokens" \
    '[ -n "$k" ] && [ "$k" -gt 0 ] && [ "$k" -lt "$n_long" ] && [ $((k % 512)) -eq 0 ]'
# stopped before its first request finished, nothing was prefilled: no speed (it said "0.00 tok/s")
: >"$err" # the setup line waited for is this run's
env --default-signal=INT "$loom" run -m "$big" -p "$long" -n 4 --temp 0 -t 1 >"$out" 2>"$err" &
pid=$!
wait_until "grep -q '^loom run: context' '$err' || ! kill -0 $pid 2>/dev/null"
kill -INT $pid 2>/dev/null
wait $pid; rc=$?
check "run: Ctrl+C before the first prefill request finished says so, with no speed" \
    '[ $rc -eq 130 ] && ! grep -q "tok/s" "$err" &&
     grep -q "^loom run: prompt interrupted after 0 of $n_long tokens, before its first request (512 tokens) finished: no speed | decode 0 tokens (0 generated) | peak RSS" "$err"'
# chat: Ctrl+C while a long message prefills (its render is one request, all or nothing): /timing says the last
# turn's prefill stopped and what it kept, not the whole render at a speed made of the time it ran. Its stdin is a
# FIFO this script holds open on fd 3; SIGINT comes once chat has read the whole line (rchar of /proc/PID/io).
rchar() { awk '/^rchar:/ {print $2}' "/proc/$1/io"; }
rm -f "$fifo" && mkfifo "$fifo" && exec 3<>"$fifo"
env --default-signal=INT "$loom" chat -m "$big" -t 1 -c 8192 -n 4 <"$fifo" >"$out" 2>"$err" 3>&- &
pid=$!
echo /history >&3
wait_until "grep -q '^(0 messages)' '$err' || ! kill -0 $pid 2>/dev/null"
read0=$(rchar $pid)
long=$(sentences 200)
printf '%s\n' "$long" >&3
wait_until "[ \$(rchar $pid) -ge $((read0 + ${#long} + 1)) ] || ! kill -0 $pid 2>/dev/null"
kill -INT $pid 2>/dev/null
wait_until "grep -q '^(stopped' '$err' || ! kill -0 $pid 2>/dev/null"
echo /timing >&3
exec 3>&-
wait $pid; rc=$?
check "chat: Ctrl+C during a long message's prefill: /timing says the prefill stopped, with no speed" \
    '[ $rc -eq 0 ] && grep -q "^last turn: prefill stopped after 0 of [0-9]* tokens in [0-9.]* s, 0 reused from the session" "$err"'
check "chat: /timing gives no speed for zero tokens (the prefill stopped, nothing decoded)" \
    '! grep "^last turn: prefill stopped" "$err" | grep -q "tok/s" && ! grep "^conversation: prefill 0 tokens" "$err" | grep -q "prefill 0 tokens in [0-9.]* s ("'

# a file name past NAME_MAX: refused before any work by quantize, synth (status 1) and certify (2), naming the limit
long=$(printf 'a%.0s' $(seq 1 256))
"$loom" synth --preset micro --sparse -o "$(dirname "$out")/$long" >"$out" 2>"$err"; rc=$?
check "synth -o NAME past NAME_MAX: status 1, the limit named" '[ $rc -eq 1 ] && grep -q "file name of 256 bytes, expected at most [0-9]* (NAME_MAX)" "$err"'
"$loom" certify -m "$model" -n 1 -o "$(dirname "$out")/$long" >"$out" 2>"$err"; rc=$?
check "certify -o PREFIX past NAME_MAX: status 2 before running, the limit named" \
    '[ $rc -eq 2 ] && grep -q "file name of 261 bytes, expected at most [0-9]* (NAME_MAX)" "$err" && ! grep -q "prompt 1" "$err"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
