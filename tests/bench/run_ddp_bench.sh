#!/usr/bin/env bash
# A DDP training step (eight 1 MiB buckets, world 2) on coord groups against
# gloo's, alternating in one run, three rounds: coord with queued calls
# (the default) under SYNC and ASYNC verification, coord with calls that
# complete before they return (C10D_TORCH_ASYNC=0), and gloo (its store on
# the same coordinator). Then the cost of handing a call to the lane: a
# 4 B all_reduce under OFF with and without the lane, plain and with
# async_op=True and a wait at once (torch_coord_bench.py; on torch 1.13
# every call is queued, on 2.x a plain one runs now).
# Usage: tests/bench/run_ddp_bench.sh [BUILD_DIR] [PYTHON]
#   PYTHON: default the torch 2.13 venv of scripts/torch-venv.sh where it
#   exists (its c10d_coord installed), else /usr/bin/python3 (in-place build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
py=${2:-}
if [ -z "$py" ]; then
    if [ -x "$build/venv-torch-2.13/bin/python" ]; then py=$build/venv-torch-2.13/bin/python
    else py=/usr/bin/python3; export PYTHONPATH=$root/python; fi
fi
run() { "$build/client/c10d-run" -q -n 2 -- "$py" "$@"; }
"$py" -c 'import torch; print("torch", torch.__version__)'
for round in 1 2 3; do
    echo "== round $round"
    C10D_VERIFY=sync run "$root/tests/bench/torch_ddp_bench.py" coord
    C10D_VERIFY=async run "$root/tests/bench/torch_ddp_bench.py" coord
    C10D_VERIFY=sync C10D_TORCH_ASYNC=0 run "$root/tests/bench/torch_ddp_bench.py" coord
    run "$root/tests/bench/torch_ddp_bench.py" gloo
    C10D_VERIFY=off run "$root/tests/bench/torch_coord_bench.py" | sed 's/^/lane: /'
    C10D_VERIFY=off C10D_TORCH_ASYNC=0 run "$root/tests/bench/torch_coord_bench.py" |
        sed 's/^/no lane (C10D_TORCH_ASYNC=0): /'
done
