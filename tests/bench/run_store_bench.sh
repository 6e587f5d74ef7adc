#!/usr/bin/env bash
# Store benchmark beside PyTorch's TCPStore, alternating in one run, with 1
# and 8 clients. Usage: tests/bench/run_store_bench.sh [BUILD_DIR] [OPS]
# Needs python3-torch for the anchor (scripts/install-deps.sh
# installs it unless C10D_NO_TORCH=1); without it only our figures are printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ops=${2:-2000}
anchor=$root/tests/bench/anchors/torch_store_bench.py
have_torch=0
if [ -f "$anchor" ] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    have_torch=1
else
    echo "(PyTorch or the anchor is missing: printing c10d figures only)"
fi
for round in 1 2; do
    for n in 1 8; do
        echo "== round $round, $n client(s), $ops ops each"
        [ "$n" = 1 ] && "$build/tests/bench/bench_rtt" "$ops" 1
        "$build/tests/bench/bench_store" -c "$n" -n "$ops"
        if [ $have_torch = 1 ]; then
            /usr/bin/python3 "$anchor" "$n" "$ops" | grep -v '^counter'
        fi
    done
done
