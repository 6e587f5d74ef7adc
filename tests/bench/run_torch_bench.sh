#!/usr/bin/env bash
# The coord backend through torch against the C library it wraps and
# against gloo, world 2, alternating in one run: for each verification
# mode, bench_coll (C) then torch_coord_bench.py (torch); then the gloo
# anchor (tests/bench/anchors/torch_gloo_bench.py). The shim's cost per call
# is torch's 4 B time minus C's in the same mode.
# Usage: tests/bench/run_torch_bench.sh [BUILD_DIR] (after scripts/build-torch.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
py=/usr/bin/python3
if ! "$py" -c 'import torch.distributed' 2>/dev/null; then
    echo "run_torch_bench: PyTorch is not installed"; exit 0
fi
export PYTHONPATH=$root/python
for round in 1 2; do
    echo "== round $round"
    for mode in off async sync; do
        C10D_VERIFY=$mode "$build/client/c10d-run" -q --no-prefix -n 2 -- "$build/tests/bench/bench_coll" 2000 |
            grep -E "^c10d|64MiB"
        C10D_VERIFY=$mode "$build/client/c10d-run" -q -n 2 -- "$py" "$root/tests/bench/torch_coord_bench.py"
    done
    anchor=$root/tests/bench/anchors/torch_gloo_bench.py
    [ -f "$anchor" ] && "$py" "$anchor" 2 2>/dev/null | grep -E "^gloo|64MiB"
done
