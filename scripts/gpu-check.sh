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
(cd "$build" && ctest -R 'test_collectives|test_verify|test_liveness' --output-on-failure) || true
bash "$root/tests/bench/run_nccl_bench.sh" "$build"
