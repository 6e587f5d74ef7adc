#!/usr/bin/env bash
# The cost of collective-sequence verification: bench_coll with C10D_VERIFY
# off, async and sync, beside gloo with TORCH_DISTRIBUTED_DEBUG=OFF and
# DETAIL, alternating in one run, at world 2 and 4, each after the raw TCP
# and control-plane round trips (bench_rtt) that SYNC is measured against.
# Usage: tests/bench/run_verify_bench.sh [BUILD_DIR] [ITERS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
iters=${2:-20000}
anchor=$root/tests/bench/anchors/torch_gloo_bench.py
have_torch=0
if [ -f "$anchor" ] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    have_torch=1
else
    echo "(PyTorch or the anchor is missing: printing c10d figures only)"
fi
for world in 2 4; do
    echo "== world $world"
    # the floor SYNC is measured against, in the same run
    "$build/tests/bench/bench_rtt" 2000 1 | grep -E "raw TCP|c10d control tcp"
    for mode in off async sync; do
        C10D_VERIFY=$mode "$build/client/c10d-run" -q -n "$world" -- \
            "$build/tests/bench/bench_coll" "$iters" | grep -v all_gather
    done
    if [ $have_torch = 1 ]; then
        for dbg in OFF DETAIL; do
            TORCH_DISTRIBUTED_DEBUG=$dbg /usr/bin/python3 "$anchor" "$world" 2>/dev/null |
                grep -v all_gather
        done
    fi
done
