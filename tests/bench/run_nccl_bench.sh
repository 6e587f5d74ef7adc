#!/usr/bin/env bash
# The NCCL data plane against raw NCCL (bench_nccl), at world size 1, and 2
# where this machine allows it: two GPUs, or one GPU with an NCCL that
# accepts several ranks on it (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL >= 2.30).
# Without a GPU each run says why it skipped.
# Usage: tests/bench/run_nccl_bench.sh [BUILD_DIR] [MAX_BYTES]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
max=${2:-268435456}
bench=$build/tests/bench/bench_nccl
if [ ! -x "$bench" ]; then
    echo "bench_nccl was not built (no CUDA/NCCL headers at configure time)"
    exit 0
fi
echo "== world 1"
"$build/client/c10d-run" -q -n 1 -- "$bench" "$max"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -ge 2 ]; then
    echo "== world 2 (two GPUs)"
    "$build/client/c10d-run" -q -n 2 -- "$bench" "$max"
elif [ "${gpus:-0}" -eq 1 ]; then
    echo "== world 2 on one GPU (needs NCCL >= 2.30)"
    NCCL_MULTI_RANK_GPU_ENABLE=1 "$build/client/c10d-run" -q -n 2 -- "$bench" "$max" ||
        echo "(world 2 on one GPU did not run: see above)"
fi
