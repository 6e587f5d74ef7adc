#!/usr/bin/env bash
# A replicated coordinator on this one machine (docs/replication.md): three
# replicas on loopback, a 4-rank training job and a store writer through
# the list of their URLs, the leader killed with SIGKILL halfway, the job
# finishing on the new leader, the killed replica back as a follower, and
# a backup taken with --export. Ports 29610-29613 and 29620-29623 (set
# C10D_DEMO_BASE to move them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
if ! build/server/c10d-coord --version | grep -q "replicas (--replica): on"; then
    echo "demo-replicas: this build has no dqlite (libdqlite-dev): $(build/server/c10d-coord --version | tail -1)"
    exit 1
fi
work=$root/_work/replicas
rm -rf "$work" && mkdir -p "$work" && cd "$work"
base=${C10D_DEMO_BASE:-29610}
peers="1=127.0.0.1:$((base + 1)),2=127.0.0.1:$((base + 2)),3=127.0.0.1:$((base + 3))"
url_of() { echo "tcp://127.0.0.1:$((base + 10 + $1))"; }
urls="$(url_of 1),$(url_of 2),$(url_of 3)"
export C10D_COORD=$urls
pids=()
start() {
    "$root/build/server/c10d-coord" --replica "$1" --peers "$peers" --listen "$(url_of "$1")" \
        --data-dir "data$1" --raft-latency-ms 50 2>>"replica$1.log" &
    pids[$1]=$!
}
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
ctl() { "$root/build/client/c10d-ctl" "$@"; }
leader() { ctl status | awk '/^database/ {print $4}'; }

for i in 1 2 3; do start "$i"; done
# the cluster survives its leader once the others are voters
voters() { [ "$(cat replica*.log | grep -c "is a voter")" -ge 2 ]; }
for _ in $(seq 600); do voters && break; sleep 0.05; done
voters || { echo "demo-replicas: the replicas did not form a cluster:"; cat replica*.log; exit 1; }
echo "== three replicas; clients name them all: C10D_COORD=$urls"
ctl status | head -3

echo "== a 4-rank training job and a store writer; the leader (replica $(leader)) is killed with SIGKILL halfway"
"$root/build/client/c10d-run" -n 4 --job train -- "$root/build/docs/examples/train_linear" 4000 \
    >train.log 2>&1 &
job=$!
"$root/build/tests/bench/bench_failover" "$urls" 6 mark >writer.log &
writer=$!
for _ in $(seq 200); do [ -f mark ] && break; sleep 0.05; done
was=$(leader)
kill -9 "${pids[$was]}"
wait "${pids[$was]}" 2>/dev/null || true
wait "$writer"
wait "$job" && echo "the job finished: $(tail -1 train.log)"
sed 's/^/  writer: /' writer.log
echo "== replica $(leader) leads now; replica $was comes back as a follower"
start "$was"
for _ in $(seq 200); do grep -q "following" "replica$was.log" && break; sleep 0.05; done
grep "serving on" "replica$was.log" | tail -1
ctl status | head -3
echo "== a backup of the replicated database (--export), a SQLite file c10d-coord --db serves"
"$root/build/server/c10d-coord" --export backup.db --peers "$peers"
echo "== done (logs and data in $work)"
