#!/usr/bin/env bash
# On a GPU machine, with .deps/ from scripts/gpu-deps.sh: builds against the
# unpacked packages, runs the NCCL tests (which skip nothing there) and the
# NCCL benchmark. One call does the whole cycle, since GPU time is short.
# Usage: bash scripts/gpu-check.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
deps=$root/.deps
export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=$deps/usr/bin:$PATH
cmake -S "$root" -B "$build" -DC10D_WITH_NCCL=ON -DCMAKE_PREFIX_PATH="$deps/usr" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
nvidia-smi -L || true
"$build/tests/test_gpu_logic"
"$build/tests/test_nccl"
"$build/tests/test_nccl" --gpu
(cd "$build" && ctest -R 'test_collectives|test_verify|test_liveness' --output-on-failure) || true
bash "$root/tests/bench/run_nccl_bench.sh" "$build"
# The PyTorch backend on CUDA tensors, with the machine's own PyTorch 2.x
# (its python3): built against this build, then its tests (the CUDA ones
# skip nothing here; world 2 on one GPU needs NCCL_MULTI_RANK_GPU_ENABLE=1
# and an NCCL >= 2.30, C10D_NCCL_LIBRARY).
export C10D_PYTHON=${C10D_PYTHON:-python3}
if bash "$root/scripts/build-torch.sh" "$build"; then
    if "$C10D_PYTHON" -c 'import pytest' 2>/dev/null; then
        C10D_BUILD_DIR=$build "$C10D_PYTHON" -m pytest -q -rs "$root/tests/python" || true
    else
        echo "gpu-check: no pytest for $C10D_PYTHON: the CUDA case alone, through c10d-run"
        PYTHONPATH=$root/python "$build/client/c10d-run" -n 1 -- "$C10D_PYTHON" \
            "$root/tests/python/worker.py" cuda || true
    fi
    # CUDA tensors on each data plane by name: torch's nccl under our
    # checks (the default) and our own NCCL path (docs/pytorch.md).
    for plane in cpu:gloo,cuda:nccl cpu:coord,cuda:coord; do
        echo "gpu-check: worker.py cuda over C10D_DATA_PLANE=$plane"
        C10D_DATA_PLANE=$plane PYTHONPATH=$root/python "$build/client/c10d-run" -n 1 -- \
            "$C10D_PYTHON" "$root/tests/python/worker.py" cuda || true
    done
fi
