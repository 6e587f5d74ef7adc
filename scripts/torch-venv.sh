#!/usr/bin/env bash
# Makes (once) a venv with the PyTorch users install today, torch 2.13.0
# (CPU), and pip-installs c10d_coord into it from BUILD_DIR, as users
# install it (docs/pytorch.md, Install); prints the venv's python on the
# last line. scripts/test.sh runs tests/python and PyTorch's own suite
# with it, beside Debian's python3-torch.
#   bash scripts/torch-venv.sh [BUILD_DIR]      (default: build)
# The venv is BUILD_DIR/venv-torch-2.13. Its Python is a 3.11 (the
# release torch 2.13.0's CPU wheel is here for): C10D_VENV_PYTHON, else
# python3.11 on PATH, else pyenv's, else Debian 12's /usr/bin/python3.
# torch is pinned: an unpinned `pip install torch` takes a CUDA build of
# several GB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
torch_pin=torch==2.13.0
venv=$build/venv-torch-2.13

find_python() {
    local c
    for c in "${C10D_VENV_PYTHON:-}" "$(command -v python3.11 || true)" \
             "$HOME"/.pyenv/versions/3.11*/bin/python3.11 /usr/bin/python3; do
        [ -n "$c" ] && [ -x "$c" ] || continue
        if "$c" -c 'import sys, venv; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch, expecttest' 2>/dev/null; then
    # Exit 3: no Python for it here (scripts/test.sh then says so and goes on).
    py=$(find_python) || { echo "torch-venv: no Python 3.11 here (set C10D_VENV_PYTHON)" >&2; exit 3; }
    echo "torch-venv: making $venv with $py and $torch_pin (a minute or two)" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv"
    # pytest and expecttest for the tests (torch's suite imports expecttest),
    # numpy because torch's test utilities use it, the rest to build the
    # extension without build isolation.
    "$venv/bin/pip" install -q --disable-pip-version-check "$torch_pin" pytest expecttest numpy \
        setuptools wheel ninja >"$build/venv-torch-2.13.log" 2>&1 ||
        { tail -20 "$build/venv-torch-2.13.log" >&2; rm -rf "$venv"; exit 1; }
fi
# The same command a user runs (pip install --no-build-isolation ./python),
# against this build tree; the objects are kept in it per torch release,
# so after the first time only what changed is compiled.
echo "torch-venv: pip install ./python into $venv (torch" \
     "$("$venv/bin/python" -c 'import torch; print(torch.__version__)'); minutes the first time)" >&2
start=$SECONDS
(cd "$root/python" && C10D_BUILD_DIR="$build" "$venv/bin/pip" install -q --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall . >"$build/venv-torch-2.13-pip.log" 2>&1) ||
    { cat "$build/venv-torch-2.13-pip.log" >&2; echo "torch-venv: pip install failed" >&2; exit 1; }
echo "torch-venv: c10d_coord installed in $((SECONDS - start)) s" >&2
echo "$venv/bin/python"
