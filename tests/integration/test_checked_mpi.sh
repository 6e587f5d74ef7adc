#!/usr/bin/env bash
# Checked calls over Open MPI (c10d/checked.h, docs/checked.md): the example
# docs/examples/checked_mpi run by mpirun on loopback, two ranks, against one
# real c10d-coord for every run. MPI moves the bytes; the coordinator checks
# each call:
#   ok      SYNC and ASYNC: exit 0 with MPI's own sums (the program checks them)
#   desync  rank 0's MPI_Barrier against rank 1's MPI_Allreduce, SYNC and
#           ASYNC: both ranks told, naming both calls, within 2 s
#   killed  rank 1 SIGKILLed inside its MPI_Allreduce, SYNC and ASYNC: rank
#           0, waiting inside MPI, told that rank 1 died
# Skipped (77) where mpirun or the example (not built without MPI) is missing.
#   test_checked_mpi.sh C10D_COORD CHECKED_MPI
set -uo pipefail
coord=$1 prog=$2
command -v mpirun >/dev/null || { echo "skipped: no mpirun (Debian: openmpi-bin)"; exit 77; }
[ -x "$prog" ] || {
    echo "skipped: $prog was not built (no MPI at configure time; Debian: libopenmpi-dev)"
    exit 77
}
out=$(mktemp -d)
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; rm -rf "$out"' EXIT
fail() {
    echo "FAIL: $*"
    for f in "$out"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done
    exit 1
}

# Root in containers and CI; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# An ASan build: Open MPI leaves thousands of allocations at exit, most
# from components whose stacks LSan cannot name (so no suppression file
# can), so leaks are not looked for here; the library's own are, over the
# same calls, in test_checked_calls and test_checked_failures. ASan's and
# UBSan's other checks stay on.
if [[ "${ASAN_OPTIONS:-}" == *detect_leaks=1* ]]; then
    export ASAN_OPTIONS=${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}
fi
# A TSan build: Open MPI's TCP transport takes two of its locks in either
# order (mca_btl_tcp_add_procs, _proc_remove); its reports only are hidden.
if [ -n "${TSAN_OPTIONS:-}" ]; then
    supp=$(sed -n 's/.*suppressions=\([^: ]*\).*/\1/p' <<<"$TSAN_OPTIONS")
    { [ -n "$supp" ] && cat "$supp"; echo "deadlock:mca_btl_tcp_*"; } >"$out/tsan.supp"
    TSAN_OPTIONS=$(sed 's/suppressions=[^: ]*//' <<<"$TSAN_OPTIONS")
    export TSAN_OPTIONS="$TSAN_OPTIONS suppressions=$out/tsan.supp"
fi

version=$(mpirun --version 2>&1 | sed -n 's/.*Open MPI) \([0-9][0-9.]*\).*/\1/p' | head -1)
[ -n "$version" ] || {
    echo "skipped: mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -1)"
    exit 77
}
# Loopback only, TCP between the ranks, more ranks than cores allowed.
mpi=(mpirun --oversubscribe -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo --mca pml ob1)
# When a rank exits (killed, or done after being told), the others must be
# told before Open MPI ends them. 4.x: mpirun ends them a second later,
# odls_base_sigkill_timeout s with this. 5.x: each rank aborts itself as
# soon as its TCP peer disconnects (MPI_ERRORS_ARE_FATAL, "Socket
# closed"), often before the coordinator's word (~10 ms); under ULFM the
# failure returns from MPI instead (the example sets MPI_ERRORS_RETURN)
# and mpirun lets the survivors run on.
case $version in
    [0-4].*) grace=(--mca odls_base_sigkill_timeout 3) ;;
    *) grace=(--with-ft ulfm) ;;
esac

"$coord" --listen tcp://127.0.0.1:0 --db "$out/coord.db" --ready-file "$out/ready" \
    >"$out/coord.log" 2>&1 &
cpid=$!
for _ in $(seq 200); do
    [ -s "$out/ready" ] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.05
done
[ -s "$out/ready" ] || fail "the coordinator did not start"
url=$(head -1 "$out/ready")

# run NAME MODE VERIFY [mpirun options...]: the example, each run a job of
# its own, bounded so that a hang fails the test; its status in $rc.
run() {
    local name=$1 mode=$2 verify=$3
    shift 3
    local t0=$SECONDS
    timeout -k 5 60 "${mpi[@]}" "$@" -x C10D_COORD="$url" -x C10D_JOB="mpi-$name" \
        -x C10D_VERIFY="$verify" "$prog" "$mode" >"$out/$name.log" 2>&1
    rc=$?
    took=$((SECONDS - t0))
    # (mpirun itself exits 137 when a rank was SIGKILLed)
    [ $took -ge 60 ] && fail "$name: mpirun still ran after 60 s (exit $rc)"
    echo "$name: exit $rc after ${took}s"
}
# named NAME RANK: how long after entering the call RANK was told (ms), its line in $line.
named() {
    # (Open MPI 5 may begin a forwarded line with a space)
    line=$(grep -a -m1 -o "rank $2: named: .*" "$out/$1.log") || fail "$1: rank $2 was not told"
    ms=$(sed -n 's/^rank [0-9]*: named: [A-Z]* after \([0-9]*\) ms: .*/\1/p' <<<"$line")
    [ -n "$ms" ] || fail "$1: rank $2's line has no time: $line"
    [ "$ms" -lt 2000 ] || fail "$1: rank $2 was told after $ms ms (want < 2000): $line"
}
summary=

for v in sync async; do
    run ok-$v ok $v
    [ $rc = 0 ] || fail "ok-$v: exit $rc"
    grep -aq "20 all_reduces on 2 ranks, each checked; the last gave 60 63 66 69$" \
        "$out/ok-$v.log" || fail "ok-$v: not MPI's sums"
    grep -aq "named:" "$out/ok-$v.log" && fail "ok-$v: a correct run was told something"

    run desync-$v desync $v "${grace[@]}"
    # SYNC refuses the call on both ranks before MPI is entered: MPI ends cleanly.
    [ $v = async ] || [ $rc = 0 ] || fail "desync-$v: exit $rc (SYNC: both refused before MPI)"
    for r in 0 1; do
        named desync-$v $r
        for want in "EDESYNC" "at collective #4" "rank 0 called BARRIER" \
                    "rank 1 called ALL_REDUCE float64\[4\] SUM"; do
            grep -q "$want" <<<"$line" || fail "desync-$v: rank $r's report lacks '$want': $line"
        done
        summary+=" desync-$v rank $r: $ms ms;"
    done

    run killed-$v killed $v "${grace[@]}"
    named killed-$v 0
    for want in "EPEERLOST" "#4 ALL_REDUCE" "rank 1 (host .*, pid [0-9]*) died"; do
        grep -q "$want" <<<"$line" || fail "killed-$v: rank 0's report lacks '$want': $line"
    done
    grep -aq "rank 1: named" "$out/killed-$v.log" && fail "killed-$v: rank 1 outlived its SIGKILL"
    summary+=" killed-$v rank 0: $ms ms;"
done

kill -0 "$cpid" 2>/dev/null || fail "the coordinator died"
echo "checked over Open MPI $version: ok;$summary"
