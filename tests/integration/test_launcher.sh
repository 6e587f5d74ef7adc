#!/usr/bin/env bash
# c10d-run end to end: the documented training examples through the
# launcher (train_linear; train_uneven, ranks with uneven batches under
# join, in every verification mode), a rank that fails (the launcher names
# it and exits with its status; its peers name it too), --help, and bad
# usage.
set -uo pipefail
run=$1 train=$2 uneven=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*; do echo "--- $f"; cat "$f"; done; exit 1; }

"$run" -n 4 -- "$train" 100 >"$out/ok.out" 2>"$out/ok.err" || fail "a healthy job failed"
grep -q "weights identical on 4 of 4 ranks" "$out/ok.out" || fail "no agreement line"
grep -q "all 4 ranks finished" "$out/ok.err" || fail "launcher did not report success"

for mode in sync async off; do
    C10D_VERIFY=$mode "$run" -n 4 -- "$uneven" 2 >"$out/uneven-$mode.out" 2>"$out/uneven-$mode.err" ||
        fail "the uneven-inputs example failed under $mode"
    grep -q "weights identical on 4 of 4 ranks" "$out/uneven-$mode.out" ||
        fail "uneven inputs under $mode: no agreement line"
    grep -q "rank 3 joined last" "$out/uneven-$mode.out" ||
        fail "uneven inputs under $mode: rank 3 was not the last joiner"
done

TRAIN_FAIL_RANK=2 "$run" -n 3 -- "$train" 400 >"$out/bad.out" 2>"$out/bad.err"
rc=$?
[ "$rc" = 3 ] || fail "launcher exited $rc, expected rank 2's status 3"
grep -q "c10d-run: rank 2 (pid [0-9]*) exited with status 3" "$out/bad.err" ||
    fail "launcher did not name rank 2 as the first failure"
grep -q "EPEERLOST.*rank 2 (host .*, pid [0-9]*) died" "$out/bad.err" ||
    fail "the peers did not name rank 2"

# SIGTERM to the launcher reaches the ranks; it exits 128+15.
"$run" -n 2 -- sleep 30 >"$out/sig.out" 2>"$out/sig.err" &
lp=$!
sleep 0.5
kill -TERM "$lp"
wait "$lp"
rc=$?
[ "$rc" = 143 ] || fail "after SIGTERM the launcher exited $rc, expected 143"
grep -q "forwarding to the ranks" "$out/sig.err" || fail "no word about forwarding"
pgrep -f "^sleep 30$" >/dev/null && fail "a rank outlived the launcher"

"$run" --help | grep -q "Usage: c10d-run" || fail "--help"
"$run" -n 2 >/dev/null 2>&1
[ $? = 2 ] || fail "missing program is not a usage error"
echo "launcher: ok"
