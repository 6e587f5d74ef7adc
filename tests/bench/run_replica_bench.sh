#!/usr/bin/env bash
# A replicated coordinator (three replicas on loopback, --replica) beside
# the single-node one, in the same run: store operations at 1
# and 8 clients, what SYNC verification costs an all_reduce, and the
# failover a store writer sees when the leader goes (killed, stopped,
# its engine killed, frozen), with the median and the longest over the
# rounds.
# Usage: tests/bench/run_replica_bench.sh [BUILD_DIR] [OPS] [ROUNDS]
# (RAFT_LATENCY_MS, default 50, is the replicas' --raft-latency-ms; OPS 0
# measures the failovers only.)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ops=${2:-2000}
rounds=${3:-2}
lat=${RAFT_LATENCY_MS:-50}
coord=$build/server/c10d-coord
dir=$(mktemp -d /tmp/c10d-replica-bench.XXXXXX)
cleanup() {
    for f in "$dir"/pid*; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
    for f in "$dir"/pid*; do wait "$(cat "$f")" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
base=$((20000 + RANDOM % 20000))
peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"
url_of() { echo "tcp://127.0.0.1:$((base + 10 + $1))"; }
urls="$(url_of 1),$(url_of 2),$(url_of 3)"

start_replica() {
    "$coord" --replica "$1" --peers "$peers" --listen "$(url_of "$1")" --data-dir "$dir/d$1" \
        --raft-latency-ms "$lat" 2>>"$dir/log$1" &
    echo $! >"$dir/pid$1"
}
# The running replica whose engine last said it serves as the leader.
leader() {
    for i in 1 2 3; do
        kill -0 "$(cat "$dir/pid$i")" 2>/dev/null || continue
        if grep "serving on" "$dir/log$i" 2>/dev/null | tail -1 | grep -q leading; then
            echo "$i"
            return
        fi
    done
}
wait_for() { # seconds, command...
    local t=$1
    shift
    for _ in $(seq $((t * 20))); do "$@" && return 0; sleep 0.05; done
    echo "timed out waiting for: $*" >&2
    return 1
}
serving() { [ "$(grep -c "serving on" "$dir/log$1" 2>/dev/null)" -ge "${2:-1}" ]; }
has_leader() { [ -n "$(leader)" ]; }
all_serving() { serving 1 && serving 2 && serving 3 && [ -n "$(leader)" ]; }
voters() { [ "$(cat "$dir"/log* | grep -c "is a voter")" -ge 2 ]; }

"$coord" --listen "tcp://127.0.0.1:$((base + 20))" --db "$dir/single.db" \
    --ready-file "$dir/single.ready" 2>>"$dir/log.single" &
echo $! >"$dir/pid.single"
single=tcp://127.0.0.1:$((base + 20))
for i in 1 2 3; do start_replica "$i"; done
wait_for 30 all_serving
wait_for 30 voters
wait_for 10 test -f "$dir/single.ready"
echo "three replicas on loopback (--raft-latency-ms $lat), replica $(leader) leads; single node beside"

sync_allreduce() { # URL -> the 4 B all_reduce time under SYNC, us
    C10D_VERIFY=sync "$build/client/c10d-run" -q --no-prefix -n 2 --coord "$1" -- \
        "$build/tests/bench/bench_coll" 2000 |
        awk 'NR == 1 {for (i = 1; i <= NF; i++) if ($i ~ /^allreduce\(4B\)=/) {
                 sub(/^allreduce\(4B\)=/, "", $i); sub(/us$/, "", $i); print $i } }'
}
for r in $(seq "$rounds"); do
    [ "$ops" -gt 0 ] || break
    lead=$(url_of "$(leader)")
    for n in 1 8; do
        echo "== round $r, $n client(s), $ops ops each"
        echo "-- single node"
        "$build/tests/bench/bench_store" -c "$n" -n "$ops" --coord "$single"
        echo "-- replicated (3 replicas)"
        "$build/tests/bench/bench_store" -c "$n" -n "$ops" --coord "$lead"
    done
    echo "== round $r, SYNC all_reduce of 4 B, world 2: single node $(sync_allreduce "$single") us," \
         "replicated $(sync_allreduce "$urls") us"
done

# How the leader goes: SIGKILL to the replica (a host's death: an
# election), SIGTERM (a stop: it hands the lead over), SIGKILL to its
# engine process only (its node still leads: the engine restarts),
# SIGSTOP to the replica and its engine for 4 s (a hung host, a
# partition: its connections stay open, silent).
engine_of() { pgrep -P "$(cat "$dir/pid$1")" | head -1; }
freeze() { # replica signal: its supervisor and its engine, as a hung host
    kill "-$2" "$(cat "$dir/pid$1")" "$(engine_of "$1")" 2>/dev/null || true
}
failover() { # round how
    local was how=$2
    was=$(leader)
    rm -f "$dir/mark"
    "$build/tests/bench/bench_failover" "$urls" 6 "$dir/mark" >"$dir/failover.out" &
    bench=$!
    wait_for 30 test -f "$dir/mark"
    n=$(grep -c "serving on" "$dir/log$was")
    case $how in
    kill) kill -9 "$(cat "$dir/pid$was")" ;;
    term) kill -TERM "$(cat "$dir/pid$was")" ;;
    engine) kill -9 "$(engine_of "$was")" ;;
    stop) freeze "$was" STOP ;;
    esac
    case $how in
    kill | term) wait "$(cat "$dir/pid$was")" 2>/dev/null || true ;;
    stop) sleep 4 && freeze "$was" CONT ;;
    esac
    wait "$bench" || { cat "$dir/failover.out"; echo "bench_failover failed"; exit 1; }
    awk '/^longest gap between/ {print $7}' "$dir/failover.out" >>"$dir/gaps.$how"
    wait_for 10 has_leader
    echo "== failover $1 ($how): replica $was led; replica $(leader) leads now"
    sed 's/^/  /' "$dir/failover.out"
    case $how in kill | term) start_replica "$was" ;; esac
    wait_for 30 serving "$was" $((n + 1))
}
for r in $(seq "$rounds"); do
    for how in kill term engine stop; do failover "$r" "$how"; done
done
for how in kill term engine stop; do
    sort -n "$dir/gaps.$how" | awk -v how="$how" '{g[NR] = $1}
        END {printf "== %s: a writer stalled median %d ms, at most %d ms, over %d failovers\n",
                    how, (NR % 2 ? g[(NR + 1) / 2] : (g[NR / 2] + g[NR / 2 + 1]) / 2), g[NR], NR}'
done
