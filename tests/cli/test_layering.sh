#!/usr/bin/env bash
# test_layering.sh [BUILD] — the public boundary (issue 9): the command-line client in src/cli/ is a client of
# include/loom.h only, so every `#include "..."` there names loom.h or one of src/cli's own headers (offending
# lines are listed); and loom.h is self-contained: it compiles alone as C11 (cc, and clang when present) with
# -Wall -Wextra -Werror, and as C++ when g++ is present. Needs no model. Prints "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
pass=0 fail=0
log=$(mktemp) src=$(mktemp --suffix=.c)
trap 'rm -f "$log" "$src"' EXIT

check() { # description, condition (evaluated); on failure prints $log
    if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; sed 's/^/    | /' "$log"; fi
}

# Every quoted include in src/cli/ names loom.h or an existing src/cli/ header (as "cli/NAME.h"), and no <...>
# include names a file of src/ (the build's -Isrc would find it).
: >"$log"
while IFS= read -r line; do
    inc=$(sed -E 's/.*#[[:space:]]*include[[:space:]]*["<]([^">]*)[">].*/\1/' <<<"${line#*:*:}")
    case $line in
        *'<'*) [ -e "src/$inc" ] || continue ;;
        *) [ "$inc" = loom.h ] && continue
           [ "${inc%/*}" = cli ] && [ -f "src/$inc" ] && continue ;;
    esac
    echo "$line" >>"$log"
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' src/cli/*.c src/cli/*.h)
check "src/cli/ includes only loom.h and src/cli/*.h ($(wc -l <"$log") offending lines)" '[ ! -s "$log" ]'

# loom.h alone, first in a translation unit.
printf '#include "loom.h"\nint main(void) { return LOOM_OK; }\n' >"$src"
for c in ${CC:-cc} clang; do
    command -v "$c" >/dev/null || continue
    "$c" -std=c11 -Wall -Wextra -Werror -Wpedantic -Iinclude -fsyntax-only "$src" >"$log" 2>&1; rc=$?
    check "loom.h compiles alone as C11 with $c" '[ $rc -eq 0 ]'
done
if command -v g++ >/dev/null; then
    g++ -x c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -fsyntax-only "$src" >"$log" 2>&1; rc=$?
    check "loom.h compiles alone as C++11 with g++" '[ $rc -eq 0 ]'
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
