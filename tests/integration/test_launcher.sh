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
# A process that has exited (a zombie of a reaper that does not reap, such
# as a container's init, counts: it runs nothing).
gone() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null); [ -z "$s" ] || [ "${s#Z}" != "$s" ]; }
# Waits up to 5 s for every pid given to be gone; the first still there, if any.
wait_gone() {
    local p
    for _ in $(seq 100); do
        for p in "$@"; do gone "$p" || break; done
        gone "$p" && return 0
        sleep 0.05
    done
    for p in "$@"; do gone "$p" || { echo "$p"; return 1; }; done
}

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

# SIGTERM (and SIGINT) to the launcher reaches the ranks; it exits 128+N,
# and its temporary directory goes with it.
ranks() { pgrep -P "$lp" -fc "^sleep 30$"; }
mkdir -p "$out/sigtmp"
for sig in TERM INT; do
    TMPDIR=$out/sigtmp "$run" -n 2 -- sleep 30 >"$out/sig.out" 2>"$out/sig.err" &
    lp=$!
    # once both ranks run (children of the launcher), not after a guessed pause
    for _ in $(seq 200); do [ "$(ranks)" = 2 ] && break; sleep 0.05; done
    [ "$(ranks)" = 2 ] || fail "the launcher did not start its 2 ranks within 10 s"
    rpids=$(pgrep -P "$lp" -f "^sleep 30$") # this launcher's ranks, not anyone's sleep
    [ -n "$(ls -A "$out/sigtmp")" ] || fail "no temporary directory under TMPDIR"
    kill -"$sig" "$lp"
    wait "$lp"
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    [ "$rc" = "$want" ] || fail "after SIG$sig the launcher exited $rc, expected $want"
    grep -q "forwarded to the ranks" "$out/sig.err" || fail "no word about forwarding"
    p=$(wait_gone $rpids) || fail "rank pid $p outlived the launcher (SIG$sig)"
    [ -z "$(ls -A "$out/sigtmp")" ] || fail "SIG$sig left $(ls "$out/sigtmp") behind"
done

# Bad values are refused; a coordinator that does not
# start says why and leaves no temporary directory.
"$run" -n 2 --grace abc -- true >/dev/null 2>"$out/grace.err"
[ $? = 2 ] || fail "--grace abc was accepted"
grep -q -- "--grace abc: want a whole number" "$out/grace.err" || fail "--grace abc: no reason"
"$run" -n 1x -- true >/dev/null 2>&1
[ $? = 2 ] || fail "-n 1x was accepted"
mkdir -p "$out/tmp"
TMPDIR=$out/tmp "$run" -n 1 --coord-bin /nonexistent -- true >/dev/null 2>"$out/bin.err"
[ $? = 1 ] || fail "a coordinator that cannot start: launcher did not exit 1"
grep -q "cannot run /nonexistent" "$out/bin.err" || fail "--coord-bin /nonexistent: no reason given"
[ -z "$(ls -A "$out/tmp")" ] || fail "a failed start left $(ls "$out/tmp") behind"
TMPDIR=$out/tmp "$run" -n 1 --db /nonexistent/dir/x.db -- true >/dev/null 2>"$out/db.err"
[ $? = 1 ] || fail "a bad --db: launcher did not exit 1"
grep -q "/nonexistent/dir/x.db" "$out/db.err" || fail "a bad --db: the reason does not name it"
[ -z "$(ls -A "$out/tmp")" ] || fail "a bad --db left $(ls "$out/tmp") behind"
# Finding 29: the coordinator the launcher started goes with it, even when
# the launcher is killed with SIGKILL: so do its
# ranks, and the next launcher removes the temporary directory it left.
TMPDIR=$out/tmp "$run" -n 2 -- sleep 30 >/dev/null 2>"$out/k9.err" &
lp=$!
for _ in $(seq 100); do grep -q "coordinator tcp" "$out/k9.err" && break; sleep 0.05; done
cpid=$(sed -n 's/.*coordinator tcp:[^ ]* (pid \([0-9]*\).*/\1/p' "$out/k9.err")
[ -n "$cpid" ] || fail "no coordinator pid in the launcher's output"
for _ in $(seq 200); do [ "$(ranks)" = 2 ] && break; sleep 0.05; done
kpids=$(pgrep -P "$lp" -f "^sleep 30$")
[ "$(echo $kpids | wc -w)" = 2 ] || fail "the launcher did not start its 2 ranks"
stale=$(ls "$out/tmp")
kill -9 "$lp"
wait "$lp" 2>/dev/null
wait_gone "$cpid" >/dev/null || { kill "$cpid"; fail "the coordinator outlived a killed launcher"; }
if p=$(wait_gone $kpids); then :; else
    kill $kpids 2>/dev/null # by pid, not every sleep 30
    fail "rank pid $p outlived a launcher killed with SIGKILL"
fi
[ -d "$out/tmp/$stale" ] || fail "expected the killed launcher's $stale (nobody could remove it)"
# A live launcher's directory stays; the dead one's goes at the next start.
TMPDIR=$out/tmp "$run" -n 1 -- sleep 30 >/dev/null 2>"$out/live.err" &
lp=$!
for _ in $(seq 200); do [ "$(ranks)" = 1 ] && break; sleep 0.05; done
TMPDIR=$out/tmp "$run" -q -n 1 -- true || fail "a launcher after a killed one failed"
[ -d "$out/tmp/$stale" ] && fail "the next launcher left the killed one's $stale"
[ "$(ls "$out/tmp" | wc -l)" = 1 ] || fail "the live launcher's directory went: $(ls "$out/tmp")"
kill -TERM "$lp"
wait "$lp"
[ -z "$(ls -A "$out/tmp")" ] || fail "left behind: $(ls "$out/tmp")"

# Finding 20: an unreachable --coord is said at once (the launcher) and
# while the ranks keep trying (the library), not waited out in silence.
C10D_TIMEOUT_MS=5500 "$run" -q -n 1 --coord tcp://127.0.0.1:1 -- "$train" 10 \
    >/dev/null 2>"$out/unreach.err"
grep -q "c10d-run: warning: no coordinator answered at tcp://127.0.0.1:1" "$out/unreach.err" ||
    fail "the launcher did not say the coordinator is unreachable"
grep -q "c10d: pid [0-9]*: no coordinator answers at tcp://127.0.0.1:1 yet" "$out/unreach.err" ||
    fail "the rank did not say it keeps trying"

# A server that takes the connection and hangs up on the handshake (as
# torchrun's TCPStore does) is said to be some other server, not waited
# for in silence as though the coordinator were down.
if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.recv(64); c.close()' >"$out/hangup.port" &
    hp=$!
    for _ in $(seq 100); do [ -s "$out/hangup.port" ] && break; sleep 0.05; done
    C10D_TIMEOUT_MS=5500 "$run" -q -n 1 --coord "tcp://127.0.0.1:$(cat "$out/hangup.port")" -- \
        "$train" 10 >/dev/null 2>"$out/hangup.err"
    kill $hp
    grep -q "closes them without answering.*another server, such as torchrun's TCPStore" \
        "$out/hangup.err" || fail "a server that hangs up was not said to be another server"
fi

# A --coord that is no URL and a --job longer than
# C10D_MAX_JOB_BYTES are refused at once, not warned about and retried.
"$run" -n 1 --coord tcp://bogus -- true >/dev/null 2>"$out/bogus.err"
[ $? = 2 ] || fail "--coord tcp://bogus was not refused as bad usage"
grep -q "c10d-run: --coord: bad coordinator URL 'tcp://bogus'" "$out/bogus.err" ||
    fail "--coord tcp://bogus: no reason given"
"$run" -n 1 --job "$(printf 'j%.0s' $(seq 200))" -- true >/dev/null 2>"$out/job.err"
[ $? = 2 ] || fail "a 200-byte --job was accepted"
grep -q "C10D_MAX_JOB_BYTES); this one is 200" "$out/job.err" || fail "long --job: no reason"
"$run" --version | grep -q "^c10d-run [0-9]" || fail "--version"
"$run" --help | grep -q "Usage: c10d-run" || fail "--help"
"$run" -n 2 >/dev/null 2>&1
[ $? = 2 ] || fail "missing program is not a usage error"
echo "launcher: ok"
