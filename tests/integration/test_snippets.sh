#!/usr/bin/env bash
# The README's store snippet is docs/examples/store_basics.c's marked
# region, word for word, and that program runs clean through the launcher
# (the ASan build runs it under ASan): its failure paths included (a get
# that times out leaves v NULL, so c10d_free(v) is safe).
#   test_snippets.sh C10D_RUN STORE_BASICS SOURCE_DIR
set -uo pipefail
run=$1 prog=$2 src=$3
fail() { echo "FAIL: $*"; exit 1; }
region=$(sed -n "/the README's snippet, from here/,/--- to here ---/p" \
    "$src/docs/examples/store_basics.c" | sed '1d;$d' | sed 's/^    //')
readme=$(awk '/^#include <c10d\/c10d.h>   \/\* cc prog.c/{on=1; next} on && /^```/{exit} on' \
    "$src/README.md" | sed '1{/^$/d}')
[ "$region" = "$readme" ] || {
    diff <(echo "$region") <(echo "$readme")
    fail "README's store snippet differs from docs/examples/store_basics.c"
}
out=$("$run" -q -n 1 -- "$prog" 2>&1) || fail "store_basics failed: $out"
echo "$out" | grep -q "got 10.0.0.1:4000 back" || fail "store_basics: $out"
echo "$out" | grep -q "timed out" || fail "store_basics: the get of addr/1 did not time out: $out"
echo "ok: README's store snippet is store_basics.c's and runs clean"
