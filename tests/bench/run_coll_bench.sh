#!/usr/bin/env bash
# Collectives of the host backend beside PyTorch's gloo, alternating in one
# run, at world sizes 2 and 4; then the rendezvous scale curve.
# Usage: tests/bench/run_coll_bench.sh [BUILD_DIR]
# Needs python3-torch for the anchor (scripts/install-deps.sh
# installs it unless C10D_NO_TORCH=1); without it only our figures are printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
anchor=$root/tests/bench/anchors/torch_gloo_bench.py
have_torch=0
if [ -f "$anchor" ] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    have_torch=1
else
    echo "(PyTorch or the anchor is missing: printing c10d figures only)"
fi
for world in 2 4; do
    for round in 1 2; do
        echo "== world $world, round $round"
        "$build/client/c10d-run" -q -n "$world" -- "$build/tests/bench/bench_coll"
        if [ $have_torch = 1 ]; then
            /usr/bin/python3 "$anchor" "$world" 2>/dev/null
        fi
    done
done
echo "== rendezvous scale (one load generator process, simulated ranks)"
"$build/tests/bench/bench_rendezvous" 64 256 1024 4096
