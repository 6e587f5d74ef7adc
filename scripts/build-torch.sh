#!/usr/bin/env bash
# Builds the PyTorch backend (python/c10d_coord) in place against the C
# library of BUILD_DIR (default: build), where PyTorch is installed; says
# so and exits 0 where it is not.
#   bash scripts/build-torch.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Debian's python3 (PyTorch 1.13 here and in CI); C10D_PYTHON names another
# (the GPU machine's PyTorch 2.x: scripts/gpu-check.sh).
py=${C10D_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch.distributed' 2>/dev/null; then
    echo "build-torch: PyTorch is not installed: skipping the c10d_coord package"
    exit 0
fi
build=$(cd "${1:-$root/build}" && pwd)
cd "$root/python"
C10D_BUILD_DIR="$build" "$py" setup.py -q build_ext --inplace -b "$root/python" \
    -t "$build/python-tmp" >"$build/python-build.log" 2>&1 ||
    { cat "$build/python-build.log" >&2; echo "build-torch: failed" >&2; exit 1; }
echo "build-torch: python/c10d_coord built against $build ($(grep -m1 "^c10d_coord: torch" "$build/python-build.log" || true))"
