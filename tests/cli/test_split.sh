#!/usr/bin/env bash
# test_split.sh BUILD — `loom` on a split model: the cached tiny model split in 3 by build/tools/split_model (the
# gguf-split layout); run and inspect name its first part: run prints the unsplit file's greedy text (also with
# a first part of metadata only), split_model writes all its parts or none (a file size limit), inspect
# lists the parts (file names, bytes, tensors per part) and each tensor's part; naming the second part fails with
# the name of the first; a missing part is named; tokenize reads the first part; synth --sparse --split writes all
# its parts or none. Prints "N passed, N failed".
set -uo pipefail
build=${1:-build}
loom=$build/loom
split=$build/tools/split_model
model=${LOOM_CACHE:-$HOME/.cache/loom}/models/qwen35-tiny-Q4_K_M.gguf
pass=0 fail=0
dir=$(mktemp -d) out=$(mktemp) err=$(mktemp)
trap 'rm -rf "$dir" "$out" "$err"' EXIT

check() { # description, condition (evaluated)
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$err"; fi
}

"$split" "$model" "$dir/tiny" 3 2>"$err"; rc=$?
check "split_model writes 3 parts" '[ $rc -eq 0 ] && [ -f "$dir/tiny-00003-of-00003.gguf" ]'
first=$dir/tiny-00001-of-00003.gguf second=$dir/tiny-00002-of-00003.gguf

"$loom" run -m "$model" -p "The quick brown fox" -n 16 --temp 0 -t 2 >"$out" 2>"$err"
whole_text=$(cat "$out")
"$loom" run -m "$first" -p "The quick brown fox" -n 16 --temp 0 -t 2 >"$out" 2>"$err"; rc=$?
check "run -m FIRST-PART runs" '[ $rc -eq 0 ]'
check "run on the split model prints the unsplit file's text" '[ "$(cat "$out")" = "$whole_text" ]'

# --no-tensor-first-split (gguf-split's option): the first part holds only the metadata; then a file size limit
# (ulimit -f) between the first part's size and the second's fails the second part after the first was written:
# split_model exits 1 naming it, and neither part nor any temporary file is left (all parts or none)
mkdir "$dir/meta"
"$split" --no-tensor-first-split "$model" "$dir/meta/m" 3 2>"$err"; rc=$?
check "split_model --no-tensor-first-split writes 3 parts" '[ $rc -eq 0 ] && [ "$(ls "$dir/meta" | wc -l)" -eq 3 ]'
"$loom" run -m "$dir/meta/m-00001-of-00003.gguf" -p "The quick brown fox" -n 16 --temp 0 -t 2 >"$out" 2>"$err"; rc=$?
check "... and run on it prints the unsplit file's text" '[ $rc -eq 0 ] && [ "$(cat "$out")" = "$whole_text" ]'
meta_kb=$(( ($(stat -c %s "$dir/meta/m-00001-of-00003.gguf") + 1023) / 1024 ))
second_kb=$(( $(stat -c %s "$dir/meta/m-00002-of-00003.gguf") / 1024 ))
rm -rf "$dir/meta" && mkdir "$dir/meta"
(ulimit -f "$meta_kb" && trap '' XFSZ && exec "$split" --no-tensor-first-split "$model" "$dir/meta/m" 3) >"$out" 2>"$err"; rc=$?
check "under ulimit -f $meta_kb (part 2 needs $second_kb KiB) split_model exits 1 naming part 2, too large" \
    '[ $second_kb -gt $meta_kb ] && [ $rc -eq 1 ] && grep -qF "'"'"'$dir/meta/m-00002-of-00003.gguf'"'"': File too large" "$err"'
check "... and leaves no part and no temporary file" '[ -z "$(ls -A "$dir/meta")" ]'

"$loom" inspect "$first" >"$out" 2>"$err"; rc=$?
check "inspect FIRST-PART runs" '[ $rc -eq 0 ]'
check "inspect says the model has 3 parts" 'grep -q "^split model: 3 parts" "$out"'
for k in 1 2 3; do
    f=$dir/tiny-0000$k-of-00003.gguf
    check "inspect lists part $k with its bytes" 'grep -qE "^  $k +$f +$(stat -c %s "$f") +[0-9]+ +[0-9]+$" "$out"'
done
n_tensors=$(sed -n 's/^tensors: \([0-9]*\)$/\1/p' "$out")
sum=$(awk '/^split model:/ {on=1; next} on && NF == 5 && $1 ~ /^[0-9]+$/ {s += $4} on && NF == 0 {on=0} END {print s}' "$out")
check "the tensors per part add up to the tensor count ($sum of $n_tensors)" '[ -n "$n_tensors" ] && [ "$sum" = "$n_tensors" ]'
parts=$(awk '/^tensors:/ {on=1; getline; next} on && NF == 0 {on=0} on {print $NF}' "$out" | uniq | tr '\n' ' ')
check "the tensor table gives each tensor's part, in order (parts: $parts)" '[ "$parts" = "1 2 3 " ]'

"$loom" run -m "$second" -p hi -n 2 >"$out" 2>"$err"; rc=$?
check "run -m SECOND-PART exits 1 naming the first part" '[ $rc -eq 1 ] && grep -qF "name its first part instead: $first" "$err"'
"$loom" inspect "$second" >"$out" 2>"$err"; rc=$?
check "inspect SECOND-PART exits 1 naming the first part" '[ $rc -eq 1 ] && grep -qF "name its first part instead: $first" "$err"'
echo "hello world" | "$loom" tokenize -m "$first" --ids >"$out" 2>"$err"; rc=$?
check "tokenize -m FIRST-PART runs" '[ $rc -eq 0 ] && [ -s "$out" ]'

rm -f "$dir/tiny-00003-of-00003.gguf"
"$loom" run -m "$first" -p hi -n 2 >"$out" 2>"$err"; rc=$?
check "a missing part is named" '[ $rc -eq 1 ] && grep -qF "expected file '"'"'$dir/tiny-00003-of-00003.gguf'"'"'" "$err"'

# synth --sparse --split writes every part or none: a part's path that cannot be written (a directory there, a
# name past NAME_MAX) is refused before any part is written, naming it and leaving no part and no temporary file
mkdir "$dir/sparse" "$dir/sparse/out-00002-of-00002.gguf"
"$loom" synth --preset micro --sparse --split 2 -o "$dir/sparse/out.gguf" >"$out" 2>"$err"; rc=$?
check "synth --sparse --split 2 with part 2's path a directory fails naming it" \
    '[ $rc -ne 0 ] && grep -qF "output '"'"'$dir/sparse/out-00002-of-00002.gguf'"'"': expected a regular file or a new path, found a directory" "$err"'
check "... and leaves no part 1 and no temporary file" '[ "$(ls -A "$dir/sparse")" = out-00002-of-00002.gguf ]'
rmdir "$dir/sparse/out-00002-of-00002.gguf"
long=$(printf 'n%.0s' $(seq 236)) # + "-00001-of-00002.gguf": 256 bytes
"$loom" synth --preset micro --sparse --split 2 -o "$dir/sparse/$long.gguf" >"$out" 2>"$err"; rc=$?
check "synth --sparse --split 2 with part names past NAME_MAX fails naming the limit, writing nothing" \
    '[ $rc -ne 0 ] && grep -qF "file name of 256 bytes, expected at most 255 (NAME_MAX" "$err" && [ -z "$(ls -A "$dir/sparse")" ]'
long=$(printf 'n%.0s' $(seq 235)) # parts of 255 bytes: written, through temporary files of shortened names
"$loom" synth --preset micro --sparse --split 2 -o "$dir/sparse/$long.gguf" >"$out" 2>"$err"; rc=$?
check "synth --sparse --split 2 with part names of 255 bytes writes both, nothing else" \
    '[ $rc -eq 0 ] && [ "$(ls -A "$dir/sparse" | wc -l)" -eq 2 ] && [ -f "$dir/sparse/$long-00002-of-00002.gguf" ]'
"$loom" inspect "$dir/sparse/$long-00001-of-00002.gguf" >"$out" 2>"$err"; rc=$?
check "... and inspect reads them as one model" '[ $rc -eq 0 ] && grep -q "^split model: 2 parts" "$out"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
