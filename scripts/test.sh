#!/usr/bin/env bash
# Sets up everything and runs every test: the Debian packages, a build with
# warnings as errors, the test suite, the PyTorch tests (ours, a pip install
# into a venv, PyTorch's own distributed suite) on Debian's torch and again
# on torch 2.13 from PyPI in a venv, a bounded fuzzing
# run of the coordinator; then the suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer with leak detection, built without NCCL.
#   scripts/test.sh            both builds
#   C10D_SKIP_SANITIZE=1 ...   the plain build only (quicker)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh
jobs=$(nproc)
# Each step's line says when it began (minutes into the run): where CI's
# time goes.
say() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

run_suite() { # build-dir, extra cmake args...
    local dir=$1; shift
    say "configure $dir $*"
    cmake -S . -B "$dir" -DC10D_WERROR=ON "$@" >/dev/null
    say "build $dir"
    cmake --build "$dir" -j "$jobs" >/dev/null
    say "test $dir"
    (cd "$dir" && ctest --output-on-failure --timeout 600)
}

run_suite build
# The torch backend, with PyTorch's DDP, against the plain build (skipped,
# saying why, where PyTorch is missing).
bash scripts/build-torch.sh build
say "test python/c10d_coord (pytest)"
/usr/bin/python3 -m pytest -q -rs tests/python
# pip install of c10d_coord into fresh venvs (offline), from an installed
# prefix and from this build tree, each running a 2-rank job from outside
# the checkout (after build-torch.sh: the build-tree case reuses its objects).
say "test pip install of c10d_coord (venv, offline, from a prefix and a build tree)"
/usr/bin/python3 -m pytest -q -rs tests/install
# PyTorch's own distributed suite (distributed_test.py, shipped with
# python3-torch) on coord groups, one coordinator for all of it: the tests
# that pass on gloo here, at world 2 and 3 (tests/torch_suite/ci-world*.txt).
if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    say "test PyTorch's own distributed_test.py on coord groups (tests/torch_suite)"
    /usr/bin/python3 tests/torch_suite/run.py
else
    say "PyTorch is not installed: skipping PyTorch's own distributed tests"
fi
# The PyTorch users install today: torch 2.13.0 (CPU) in a venv, c10d_coord
# pip-installed into it from this build tree (scripts/torch-venv.sh), the
# same tests and PyTorch's own suite of that release (its CI lists under
# tests/torch_suite/torch2.13/). C10D_NO_TORCH2=1 leaves it out.
if [ "${C10D_NO_TORCH2:-0}" != 1 ]; then
    say "torch 2.13 in a venv: pip install of c10d_coord, tests/python, PyTorch's own suite"
    rc=0
    venv_py=$(bash scripts/torch-venv.sh build | tail -n 1) || rc=$?
    if [ $rc = 3 ]; then
        say "no Python 3.11 for torch 2.13's wheel here: skipping the torch 2.13 run"
    elif [ $rc != 0 ]; then
        exit $rc
    else
        C10D_PYTHONPATH= "$venv_py" -m pytest -q -rs tests/python
        C10D_PYTHONPATH= "$venv_py" tests/torch_suite/run.py
        # The lists' ranks are forked from the runner (a second a test); a
        # few spawned, as torch's own runner starts them, keep that path
        # proven (docs/pytorch.md, "PyTorch's own test suite").
        C10D_PYTHONPATH= "$venv_py" tests/torch_suite/run.py --start spawn \
            test_DistributedDataParallelCPU test_all_reduce_sum test_barrier
        # The same lists on coord over torch's own gloo, under our checks
        # (docs/pytorch.md, "Keep your backend, add the checks").
        say "PyTorch's own suite on coord over torch's gloo (C10D_DATA_PLANE=cpu:gloo)"
        C10D_DATA_PLANE=cpu:gloo C10D_PYTHONPATH= "$venv_py" tests/torch_suite/run.py
    fi
fi
# The coordinator's decoder and handlers under libFuzzer, for a bounded
# time from the committed corpus (C10D_FUZZ_SECONDS, default 60).
bash scripts/fuzz.sh
if [ "${C10D_SKIP_SANITIZE:-0}" != 1 ]; then
    # Leaks are errors; NNG's own process-wide allocations are suppressed
    # (tests/lsan.supp). Built without NCCL, as on a machine with no CUDA:
    # the plain build above has the NCCL data plane, this one proves the
    # build a user without CUDA gets compiles (warnings as errors) and
    # passes too.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        run_suite build-asan -DC10D_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DC10D_WITH_NCCL=OFF
fi
if [ "${C10D_TSAN:-0}" = 1 ]; then
    # Optional (not in CI): the threaded tests under ThreadSanitizer.
    TSAN_OPTIONS="halt_on_error=1 suppressions=$root/tests/tsan.supp" \
        run_suite build-tsan -DC10D_SANITIZE=thread \
        -DCMAKE_BUILD_TYPE=Debug
fi
say "all tests passed"
