#!/usr/bin/env bash
# Sets up everything and runs the main job on one coordinator (its default
# SQLite file, ./c10d-coord.db under _work/; port $C10D_DEMO_PORT, default
# 29700):
#  1. the hang it prevents: PyTorch DDP with uneven inputs and no join
#     (docs/examples/uneven_hang.py), on the coord backend (both ranks told
#     at once, naming who called what), then on gloo under torchrun (it
#     waits out its timeout and names nobody), then c10d-ctl desync and
#     trace (and a timeline for Perfetto) on what the coordinator found;
#  2. the jobs it runs: a 4-rank data-parallel training job launched with
#     c10d-run (gradients averaged with all_reduce on the host backend),
#     the same with uneven inputs under join (12 to 27 batches a rank),
#     PyTorch's DDP on the coord backend under join (by c10d-run and by
#     torchrun), a 4-rank store demo, and c10d-ctl showing the jobs'
#     members, join regions and what the ranks left in the store.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
mkdir -p _work && cd _work
rm -f c10d-coord.db c10d-coord.db-wal c10d-coord.db-shm coord.log  # a fresh demo each time
port=${C10D_DEMO_PORT:-29700}
url=tcp://127.0.0.1:$port
ctl() { ../build/client/c10d-ctl --coord "$url" "$@"; }

../build/server/c10d-coord --listen "$url" --ready-file coord.ready 2>>coord.log &
coord=$!
trap 'kill $coord 2>/dev/null; wait $coord 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s coord.ready ] && break; sleep 0.05; done
[ -s coord.ready ] || { cat coord.log; echo "demo: the coordinator did not start (is port $port taken? set C10D_DEMO_PORT)"; exit 1; }
echo "== a coordinator on $url, database $PWD/c10d-coord.db (its log: $PWD/coord.log)"

have_torch=0
if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    have_torch=1
    # Says what it compiles first (a couple of minutes the first time) and
    # how long it took.
    bash ../scripts/build-torch.sh ../build
fi

if [ "$have_torch" = 1 ]; then
    echo
    echo "== 1. The hang c10d-coord ends: PyTorch DDP, uneven inputs, no join (docs/examples/uneven_hang.py)"
    echo "   rank 1 runs out of data a step early and goes on to the barrier after its loop;"
    echo "   rank 0 is still in that step's gradient all_reduce, which rank 1 never joins."
    echo "-- on the coord backend (c10d-run -n 2): both ranks fail at once, told who called what"
    PYTHONPATH=../python ../build/client/c10d-run -n 2 --coord "$url" --job hang -- \
        /usr/bin/python3 ../docs/examples/uneven_hang.py coord || true
    echo "-- the same on gloo, under torchrun, with a 10 s timeout (torch's default: 30 minutes)"
    # torch 1.13's torchrun needs --redirects/--tee on Python 3.11 (docs/launcher.md)
    UNEVEN_TIMEOUT_S=10 /usr/bin/python3 -m torch.distributed.run --standalone \
        --nproc_per_node=2 --redirects 2 --tee 2 ../docs/examples/uneven_hang.py gloo 2>&1 |
        grep "rank [0-9]: " || true
    echo "-- c10d-ctl desync --job hang: the coordinator's finding (exit 7: not healthy)"
    ctl desync --job hang || echo "(c10d-ctl desync exited $?)"
    echo "-- c10d-ctl trace --job hang --rank 1: where rank 1 was"
    ctl trace --job hang --rank 1 -n 4
    ctl trace --job hang --format chrome -o hang-trace.json
    echo "-- c10d-ctl trace --job hang --format chrome -o hang-trace.json: every rank's collectives"
    echo "   as a timeline; open $PWD/hang-trace.json in ui.perfetto.dev or chrome://tracing"
    echo "   The fix for the job: run the loop under join() (docs/join.md), as below."
    echo
    echo "== 2. The jobs it runs"
fi

echo "== c10d-run: a 4-rank data-parallel training job (docs/examples/train_linear.c)"
../build/client/c10d-run -n 4 --coord "$url" --job train -- ../build/docs/examples/train_linear 200

echo "== c10d-run: uneven inputs, 12 to 27 batches a rank, under join (docs/examples/train_uneven.c)"
../build/client/c10d-run -n 4 --coord "$url" --job uneven -- ../build/docs/examples/train_uneven 3

if [ "$have_torch" = 1 ]; then
    echo "== PyTorch DDP on the coord backend, uneven inputs under c10d_coord.join() (docs/examples/train_ddp.py)"
    PYTHONPATH=../python ../build/client/c10d-run -n 4 --coord "$url" --job torch-ddp -- \
        /usr/bin/python3 ../docs/examples/train_ddp.py
    echo "== the same again under torch's own torchrun, on the same coordinator (its own run, its own store)"
    # torch 1.13's torchrun needs --redirects/--tee on Python 3.11 (docs/launcher.md)
    C10D_COORD=$url PYTHONPATH=../python /usr/bin/python3 -m torch.distributed.run --standalone \
        --nproc_per_node=2 --redirects 2 --tee 2 ../docs/examples/train_ddp.py 2>&1 |
        grep -v "^\*\|OMP_NUM_THREADS\|^WARNING:"
fi

echo "== a job of 4 ranks meets through the store"
world=4
pids=()
for rank in $(seq 0 $((world - 1))); do
    ../build/examples/store_demo "$url" "$rank" "$world" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

echo "== c10d-ctl status"
ctl status
echo "== c10d-ctl keys demo/"
ctl keys demo/
echo "== c10d-ctl add --write demo/arrived 0 (the ranks counted themselves in)"
ctl add --write demo/arrived 0
echo "== c10d-ctl --json get demo/ready"
ctl --json get demo/ready
echo "== the store is durable: restart the coordinator on the same database"
kill "$coord"; wait "$coord" || true
../build/server/c10d-coord --listen "$url" --ready-file coord.ready 2>>coord.log &
coord=$!
for _ in $(seq 100); do [ -s coord.ready ] && break; sleep 0.05; done
ctl get demo/addr/0; echo
echo "== done (database: $PWD/c10d-coord.db)"
