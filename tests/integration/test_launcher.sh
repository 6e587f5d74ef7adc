#!/usr/bin/env bash
# c10d-run end to end: the documented training examples through the
# launcher (train_linear; train_uneven, ranks with uneven batches under
# join, in every verification mode), a rank that fails (the launcher names
# it and exits with its status; its peers name it too), --help, and bad
# usage; torchrun's habits (--nproc-per-node, --nnodes/--node-rank, its
# environment, "[rankN]:" before each line, whole lines, --log-dir,
# --max-restarts); a desync led by the coordinator's finding.
set -uo pipefail
run=$1 train=$2 uneven=$3 rank=$4
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
# torchrun's spellings and environment: 2 hosts of 2 ranks, this one host 1
# (ranks 2 and 3), each line of a rank after "[rankN]:".
"$run" -q --nproc_per_node 2 --nnodes 2 --node_rank 1 --coord tcp://127.0.0.1:1 --job envjob \
    --max-restarts 3 -- "$rank" env >"$out/env.out" 2>"$out/env.err" || fail "the env ranks failed"
for want in "[rank2]:RANK=2" "[rank2]:LOCAL_RANK=0" "[rank3]:RANK=3" "[rank3]:LOCAL_RANK=1" \
    "[rank3]:WORLD_SIZE=4" "[rank3]:LOCAL_WORLD_SIZE=2" "[rank3]:GROUP_RANK=1" \
    "[rank3]:GROUP_WORLD_SIZE=2" "[rank3]:ROLE_RANK=3" "[rank3]:ROLE_WORLD_SIZE=4" \
    "[rank3]:ROLE_NAME=default" "[rank3]:TORCHELASTIC_RESTART_COUNT=0" \
    "[rank3]:TORCHELASTIC_MAX_RESTARTS=3" "[rank3]:TORCHELASTIC_RUN_ID=envjob" \
    "[rank3]:C10D_JOB=envjob"; do
    grep -qxF "$want" "$out/env.out" || fail "env: no line $want"
done
[ "$(grep -c . "$out/env.out")" = "$(grep -c '^\[rank[23]\]:' "$out/env.out")" ] ||
    fail "env: a line without its rank's prefix"
# whole outputs first: grep -q stops at its match, and a writer still
# writing dies of SIGPIPE (a failed pipeline, under pipefail)
got=$("$run" -q --nproc-per-node 1 --node-rank 0 -- "$rank" env)
grep -qxF "[rank0]:WORLD_SIZE=1" <<<"$got" || fail "--nproc-per-node/--node-rank"
got=$("$run" --no-prefix -q -n 1 -- "$rank" env)
grep -qxF "RANK=0" <<<"$got" || fail "--no-prefix"
# C10D_JOB_KEY: a fresh key for each launch, the same for all its ranks
# (only they join its runs); one already set is kept, as every host of a
# --nnodes job must carry the same; with --nnodes > 1 and none, a warning.
got=$(unset C10D_JOB_KEY; "$run" -q -n 2 -- "$rank" env)
k0=$(sed -n 's/^\[rank0\]:C10D_JOB_KEY=//p' <<<"$got")
k1=$(sed -n 's/^\[rank1\]:C10D_JOB_KEY=//p' <<<"$got")
[[ $k0 =~ ^[0-9a-f]{32}$ ]] || fail "no job key for the ranks: '$k0'"
[ "$k0" = "$k1" ] || fail "the ranks of one launch got different job keys"
got=$(unset C10D_JOB_KEY; "$run" -q -n 1 -- "$rank" env)
[ "$(sed -n 's/^\[rank0\]:C10D_JOB_KEY=//p' <<<"$got")" != "$k0" ] ||
    fail "two launches got one job key"
got=$(C10D_JOB_KEY=given "$run" -q -n 1 -- "$rank" env)
grep -qxF "[rank0]:C10D_JOB_KEY=given" <<<"$got" || fail "a C10D_JOB_KEY already set was not kept"
got=$(unset C10D_JOB_KEY; "$run" -n 1 --nnodes 2 --coord tcp://127.0.0.1:1 --job keyless -- "$rank" env 2>&1)
grep -qxF "[rank0]:C10D_JOB_KEY=(unset)" <<<"$got" || fail "--nnodes 2: a key one host made alone"
grep -qF "no C10D_JOB_KEY: with --nnodes 2" <<<"$got" || fail "--nnodes 2 without a key: no warning"
"$run" -n 2 --nnodes 2 -- true >/dev/null 2>"$out/nnodes.err"
[ $? = 2 ] || fail "--nnodes 2 without --coord/--job was accepted"
grep -q -- "--coord URL --job NAME" "$out/nnodes.err" || fail "--nnodes 2: no reason"
"$run" -n 2 --nnodes 2 --node-rank 2 --coord tcp://127.0.0.1:1 --job j -- true >/dev/null 2>&1
[ $? = 2 ] || fail "--node-rank 2 of --nnodes 2 was accepted"
for opt in --master-addr --master_port; do
    "$run" -n 1 "$opt" 1 -- true >/dev/null 2>"$out/master.err"
    [ $? = 2 ] || fail "$opt was accepted"
    grep -q -- "$opt: c10d-run has no master.*--coord URL" "$out/master.err" || fail "$opt: no reason"
done

# --coord at a server that is no coordinator (an HTTP port): refused at
# once, saying what it is, before any rank starts.
/usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 >"$out/http.log" 2>&1 &
http=$!
for _ in $(seq 100); do grep -q "Serving HTTP" "$out/http.log" && break; sleep 0.1; done
hport=$(grep -o "port [0-9]*" "$out/http.log" | awk '{print $2}')
"$run" -n 1 --coord "tcp://127.0.0.1:$hport" -- true >/dev/null 2>"$out/http.err"
hrc=$?
kill "$http" 2>/dev/null
[ "$hrc" = 2 ] || fail "--coord at an HTTP port: exit $hrc"
grep -q "is an HTTP server" "$out/http.err" || fail "--coord at an HTTP port: $(cat "$out/http.err")"

# A rank's partial line waits for its end: rank 1's whole lines, printed
# meanwhile, do not cut into it.
"$run" -q -n 2 -- "$rank" partial >"$out/partial.out" 2>"$out/partial.err" ||
    fail "the partial-line ranks failed"
grep -qxF "[rank0]:part-0-end-0" "$out/partial.out" || fail "rank 0's line was cut"
grep -qxF "[rank1]:line-1-a" "$out/partial.out" || fail "rank 1's line was glued to another"

# A desync: every rank fails of it, but the first word of the launcher is
# the coordinator's finding, naming rank 1 (it called BARRIER where rank 0
# called ALL_REDUCE), not whichever rank exited first; then the exit codes.
"$run" -q -n 2 -- "$rank" desync >"$out/desync.out" 2>"$out/desync.err"
rc=$?
[ "$rc" = 1 ] || fail "desync: launcher exited $rc, expected 1"
first=$(grep -m1 "^c10d-run:" "$out/desync.err")
grep -q "the coordinator found (EDESYNC): desync in group world .* at collective #2: rank 0 called ALL_REDUCE.*, rank 1 called BARRIER" \
    <<<"$first" || fail "desync: the first line is not the coordinator's finding: $first"
grep -qx "c10d-run: exit codes: rank 0: 1, rank 1: 1" "$out/desync.err" || fail "desync: no exit codes"

# --max-restarts: rank 1 fails attempt 0; every rank is started again and
# they meet again (a new generation of the same job); --log-dir keeps each
# attempt's output, rank by rank, without the prefix.
"$run" -q -n 3 --max-restarts 2 --job rs --log-dir "$out/logs" -- "$rank" restart \
    >"$out/restart.out" 2>"$out/restart.err" || fail "the restarted job failed"
grep -q "c10d-run: rank 1 (pid [0-9]*) exited with status 3" "$out/restart.err" ||
    fail "restart: attempt 0's failure not said"
grep -q "c10d-run: restarting the job's 3 ranks here (restart 1 of 2)" "$out/restart.err" ||
    fail "restart: no word of the restart"
for r in 0 1 2; do
    grep -qxF "[rank$r]:sum 3 attempt 1" "$out/restart.out" || fail "restart: rank $r did not meet again"
    grep -qxF "sum 3 attempt 1" "$out/logs/rs/attempt_1/$r/stdout.log" ||
        fail "restart: no $out/logs/rs/attempt_1/$r/stdout.log"
done
grep -qxF "launcher_rank: rank 1 fails attempt 0" "$out/logs/rs/attempt_0/1/stderr.log" ||
    fail "restart: attempt 0's stderr not in its log"
[ "$(grep -c "restarting" "$out/restart.err")" = 1 ] || fail "restart: restarted more than once"
# A --log-dir that cannot be made is a launch failure, said, with no rank run.
"$run" -q -n 1 --log-dir /dev/null/logs -- touch "$out/ran" 2>"$out/logdir.err"
[ $? = 1 ] || fail "a --log-dir under a file: launcher did not exit 1"
grep -q "cannot create /dev/null/logs/" "$out/logdir.err" || fail "a bad --log-dir: no reason"
[ -e "$out/ran" ] && fail "a bad --log-dir: the rank ran anyway"
# Without restarts left, the failure is the job's.
"$run" -q -n 2 -- "$rank" restart >/dev/null 2>"$out/norestart.err"
[ $? = 3 ] || fail "no --max-restarts: the launcher did not exit with rank 1's 3"
grep -q restarting "$out/norestart.err" && fail "restarted without --max-restarts"

got=$("$run" --version)
grep -q "^c10d-run [0-9]" <<<"$got" || fail "--version"
"$run" --help >"$out/help.out" || fail "--help"
grep -q "Usage: c10d-run" "$out/help.out" || fail "--help: no usage"
for opt in --nproc --nproc-per-node --nnodes --node-rank --coord --job --db --coord-bin --grace \
    --max-restarts --log-dir --no-prefix --quiet --help --version --master-addr; do
    grep -q -- "$opt" "$out/help.out" || fail "--help does not mention $opt"
done
"$run" -n 2 >/dev/null 2>&1
[ $? = 2 ] || fail "missing program is not a usage error"

# A terminal's ^C (in a pty): every rank gets it once, from the terminal,
# not again from the launcher; the coordinator it started still serves.
ctl="$(dirname "$run")/c10d-ctl"
timeout 120 /usr/bin/python3 "$(dirname "$0")/launcher_tty.py" "$run" "$ctl" >"$out/tty.out" 2>&1 ||
    fail "^C in a terminal: $(cat "$out/tty.out")"
echo "launcher: ok"
