#!/usr/bin/env bash
# bench/stream.sh MODEL [LIMIT] [BUDGET] — a mixture-of-experts model larger than memory: loom with
# --mem-budget BUDGET and the reference (llama.cpp, mmap, its defaults) each in its own process inside the same
# cgroup v1 memory group limited to LIMIT (created here, removed at the end; the page cache dropped before each
# run), same prompt tokens; prints the disk's read bandwidth (O_DIRECT, 16 MiB reads), both engines' bench
# tables, loom's expert cache figures (bytes read per token: the roofline at that bandwidth; the exposed I/O
# wait) and each run's peak cgroup usage. A benchmark, not a test: minutes per run on a 20 GB file.
# Environment: BUILD (default build), P (prompt tokens, default 32), N (decoded tokens, default 16), T (threads,
# default 2), R (repetitions, default 1), ENGINES (default "loom ref-mmap ref": ref is the reference at its
# defaults, whose CPU_REPACK buffer copies the Q4_K weights into anonymous memory; ref-mmap the reference with
# LOOM_REF_REPACK=0, its weights left in the file map). Run as root on a quiet machine.
set -euo pipefail
model=${1:?usage: bench/stream.sh MODEL [LIMIT] [BUDGET]}
limit=${2:-8G}
build=${BUILD:-build}
p=${P:-32} n=${N:-16} t=${T:-2} r=${R:-1}
to_bytes() { numfmt --from=iec "$1"; }
limit_bytes=$(to_bytes "$limit")
budget=${3:-$(( limit_bytes - (256 << 20) ))} # the cgroup also counts the kernel's own pages of the process
self=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
cg=/sys/fs/cgroup/memory$self/loom-stream-bench-$$
mkdir "$cg"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
echo "$limit_bytes" >"$cg/memory.limit_in_bytes"

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

drop_caches
bw=$(dd if="$model" of=/dev/null bs=16M count=128 iflag=direct 2>&1 | sed -n 's/.*, \([0-9.]* [GM]B\/s\)$/\1/p')
echo "model: $model ($(du -h --apparent-size "$model" | cut -f1)); cgroup limit $limit ($limit_bytes bytes); loom" \
     "budget $budget bytes; disk read (O_DIRECT, 16 MiB reads, 2 GiB): $bw; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

run_in_cgroup() { # name, command...
    local name=$1; shift
    drop_caches
    echo 0 >"$cg/memory.max_usage_in_bytes"
    local failcnt0 status=0
    failcnt0=$(cat "$cg/memory.failcnt")
    echo; echo "== $name: $*"
    (echo $BASHPID >"$cg/cgroup.procs" && exec "$@") || status=$?
    echo "== $name: exit $status, cgroup peak usage $(( $(cat "$cg/memory.max_usage_in_bytes") >> 20 )) MiB of" \
         "$(( limit_bytes >> 20 )), limit reached $(( $(cat "$cg/memory.failcnt") - failcnt0 )) times"
}

# decode and prefill in separate runs, so that loom's per-token expert figures are those of one kind of step
for test in "-p 0 -n $n" "-p $p -n 0"; do
    for engine in ${ENGINES:-loom ref-mmap ref}; do
        case $engine in
        loom) run_in_cgroup loom "$build/loom" bench -m "$model" $test -t "$t" -r "$r" --mem-budget "$budget" \
                  --stats ;;
        ref) run_in_cgroup "reference (defaults)" "$build/loom" bench -m "$model" $test -t "$t" -r "$r" --ref-only ;;
        ref-mmap) LOOM_REF_REPACK=0 run_in_cgroup "reference (no repacking: weights stay in the map)" \
                      "$build/loom" bench -m "$model" $test -t "$t" -r "$r" --ref-only ;;
        esac
    done
done
