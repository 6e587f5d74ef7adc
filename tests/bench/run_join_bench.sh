#!/usr/bin/env bash
# What a join region costs per step: bench_join under each verification
# mode, beside torch's Join on gloo (tests/bench/anchors/torch_join_bench.py),
# alternating, in one run.
# Usage: tests/bench/run_join_bench.sh [BUILD_DIR] [STEPS] [WORLD]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
steps=${2:-2000}
world=${3:-2}
anchor=$root/tests/bench/anchors/torch_join_bench.py
have_torch=0
if [ -f "$anchor" ] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    have_torch=1
else
    echo "(PyTorch or the anchor is missing: printing c10d figures only)"
fi
for round in 1 2; do
    echo "== round $round"
    for mode in sync async off; do
        C10D_VERIFY=$mode "$build/client/c10d-run" -q -n "$world" -- \
            "$build/tests/bench/bench_join" "$steps"
    done
    if [ $have_torch = 1 ]; then
        /usr/bin/python3 "$anchor" "$world" 200 2>/dev/null
    fi
done
