#!/usr/bin/env bash
# Builds the PyTorch backend (python/c10d_coord) in place against the C
# library of BUILD_DIR (default: build), where PyTorch is installed; says
# so and exits 0 where it is not. (Users install it with pip instead:
# docs/pytorch.md, Install.)
#   bash scripts/build-torch.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Debian's python3 (PyTorch 1.13 here and in CI); C10D_PYTHON names another
# (the GPU machine's PyTorch 2.x: scripts/gpu-check.sh).
py=${C10D_PYTHON:-/usr/bin/python3}
if ! tv=$("$py" -c 'import torch.distributed, torch; print(torch.__version__)' 2>/dev/null); then
    echo "build-torch: PyTorch is not installed: skipping the c10d_coord package"
    exit 0
fi
build=$(cd "${1:-$root/build}" && pwd)
log=$build/python-build.log
# The compile is python/csrc's C++ files against torch's headers (setup.py):
# minutes on a small machine, and silent (its output goes to the log), so
# say so first.
echo "build-torch: compiling python/c10d_coord against $build and torch $tv" \
     "($py); a couple of minutes unless nothing changed (log: $log)"
start=$SECONDS
cd "$root/python"
C10D_BUILD_DIR="$build" "$py" setup.py -q build_ext --inplace -b "$root/python" \
    >"$log" 2>&1 ||
    { cat "$log" >&2; echo "build-torch: failed after $((SECONDS - start)) s" >&2; exit 1; }
echo "build-torch: python/c10d_coord built in $((SECONDS - start)) s against $build" \
     "($(grep -m1 "^c10d_coord: torch" "$log" || true))"
