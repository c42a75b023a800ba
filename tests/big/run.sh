#!/bin/bash
# run.sh — opt-in check of the real 9B and 27B geometries (not part of `make test`: 5.6 and 16.5 GB files, about
# 15 and 40 minutes of one core to generate, single-threaded): each preset written at Q4_K_M directly by `loom synth` (tensor by
# tensor, never an F16 file) into $LOOM_BIG_DIR (default $LOOM_CACHE/models), then `loom xray` runs the prompt one
# token per step and greedy tokens after it in loom and in llama.cpp, teacher-forced (the same ids in both), and
# compares every logits row and every circuit edge bitwise. Prints PASS or FAIL per preset; exit status 0 when
# every preset passed.
#   usage: tests/big/run.sh [PRESET...]          (default: 9b 27b; any synth preset that runs works)
#   env:   LOOM (default build/loom), LOOM_BIG_DIR, LOOM_BIG_KEEP=0 (delete each file after its check),
#          LOOM_BIG_N (greedy tokens after the prompt, default 2), LOOM_BIG_PROMPT
# A file larger than half the memory runs loom's scalar kernels (LOOM_KERNELS=scalar: loom reads the mapped file,
# no repacked copy) beside the reference at its defaults, whose repacked copy of the Q4_K/Q6_K weights is then the
# only large allocation (the file's pages are read again each token when they do not stay cached). The reference
# must keep repacking: loom's reference numerics are its default configuration's float orders (a Q4_K gemv in
# the repacked kernel's order), which LOOM_REF_REPACK=0 changes (its one-token Q4_K dot is then vec_dot's).
set -u
loom=${LOOM:-build/loom}
cache=${LOOM_CACHE:-$HOME/.cache/loom}
dir=${LOOM_BIG_DIR:-$cache/models}
keep=${LOOM_BIG_KEEP:-1}
n=${LOOM_BIG_N:-2}
prompt=${LOOM_BIG_PROMPT:-The quick brown fox}
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(9b 27b)
[ -x "$loom" ] || { echo "run.sh: $loom not found (make, or set LOOM)" >&2; exit 2; }
mkdir -p "$dir" || exit 2
mem_kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
failed=0
for p in "${presets[@]}"; do
    f=$dir/qwen35-$p-synth-Q4_K_M.gguf
    if [ ! -s "$f" ]; then
        # the exact size, from a sparse file of the same preset and type (metadata only, instant)
        probe=$dir/.probe-$p.gguf
        "$loom" synth --preset "$p" --type Q4_K_M --sparse -o "$probe" 2>/dev/null || { echo "FAIL $p: no such preset"; failed=1; continue; }
        need=$(stat -c %s "$probe"); rm -f "$probe"
        free=$(df -B1 --output=avail "$dir" | tail -1)
        if [ "$free" -lt $((need + (1 << 30))) ]; then
            echo "FAIL $p: $need bytes needed in $dir, $free free"; failed=1; continue
        fi
        t0=$(date +%s)
        if ! "$loom" synth --preset "$p" --type Q4_K_M -o "$f" >"$dir/.synth-$p.log" 2>&1; then
            echo "FAIL $p: synth; see $dir/.synth-$p.log"; tail -2 "$dir/.synth-$p.log"; failed=1; continue
        fi
        tail -1 "$dir/.synth-$p.log"
        echo "$p: synth $(($(date +%s) - t0)) s, $(stat -c %s "$f") bytes"
    fi
    envs=()
    if [ $(($(stat -c %s "$f") / 1024)) -gt $((mem_kib / 2)) ]; then envs=(LOOM_KERNELS=scalar); fi
    log=$dir/.xray-$p.log
    t0=$(date +%s)
    env "${envs[@]}" "$loom" xray -m "$f" -p "$prompt" -n "$n" --per-token >"$log" 2>&1; rc=$?
    secs=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then echo "PASS $p: $(tail -1 "$log") (xray $secs s${envs[*]:+, ${envs[*]}})"
    else echo "FAIL $p: xray exit $rc after $secs s${envs[*]:+ (${envs[*]})}; see $log"; tail -3 "$log"; failed=1; fi
    [ "$keep" = 0 ] && rm -f "$f"
done
exit $failed
