#!/usr/bin/env bash
# Installs the Debian packages c10d-coord builds and tests with, on Debian
# 12 (bookworm) and 13 (trixie); the package list follows the release in
# /etc/os-release (docs/operations.md, "Building it": what each release
# ships). Idempotent and quiet when everything is already there, so the
# README's commands and CI can call it every time.
# PyTorch from Debian (python3-torch, libtorch-dev, pybind11-dev, pytest;
# venv, pip and wheel to pip-install c10d_coord offline) comes too: the
# torch backend (python/c10d_coord) is built, installed and tested with
# it, and the benchmarks' anchors run on it.
#   C10D_NO_TORCH=1    leaves PyTorch out (the C build and tests need none
#                      of it; the torch tests then skip, saying why).
set -euo pipefail

codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)

pkgs=(build-essential cmake pkg-config
      libnng-dev libmbedtls-dev
      libprotobuf-c-dev protobuf-c-compiler
      libsqlite3-dev sqlite3 check openssl
      clang   # libFuzzer for scripts/fuzz.sh
      # Open MPI (bookworm 4.1, trixie 5.0 on PRRTE): mpirun, mpicc and
      # the headers, for the tests that run an MPI job next to the coordinator
      openmpi-bin libopenmpi-dev
      # a headless browser that loads c10d-ctl trace --format chrome's file
      # as the trace viewers read it (tests/integration/test_trace_chrome.sh)
      chromium)
# Installed where the release's archive has them, left out where not:
# c10d-coord builds without dqlite (single-node only, --replica refused).
optional=(libdqlite-dev)  # replicas (docs/replication.md)
case "$codename" in
    bookworm)
        # dqlite 1.11 runs on the separate raft library; from 1.16 on
        # (trixie's 1.18) dqlite carries its own raft.
        optional+=(libraft-dev)
        # clang's sanitizer and libFuzzer runtimes, which clang only
        # recommends (and recommends are not installed here)
        pkgs+=(libclang-rt-14-dev) ;;
    trixie)
        pkgs+=(libclang-rt-19-dev) ;;
esac
if [ "${C10D_NO_TORCH:-0}" != 1 ]; then
    pkgs+=(python3-torch libtorch-dev pybind11-dev python3-pytest python3-setuptools ninja-build
           # pip install ./python into a venv, offline (docs/pytorch.md; tests/install)
           python3-venv python3-pip python3-wheel)
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# Whether the archive (as of the last apt-get update) has the package.
available() {
    local c
    c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$c" ] && [ "$c" != "(none)" ]
}
# Whether apt has ever fetched the archive's lists (not on a fresh root).
have_lists() { compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; }

missing=()
for p in "${pkgs[@]}"; do
    installed "$p" || missing+=("$p")
done
# An optional package the lists do not know is left out without asking the
# archive again, so that a release without it stays quiet.
want_optional=()
for p in "${optional[@]}"; do
    if ! installed "$p" && { ! have_lists || available "$p"; }; then
        want_optional+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && [ ${#want_optional[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null ||
        { echo "install-deps: need root or sudo to install: ${missing[*]} ${want_optional[*]}" >&2; exit 1; }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
for p in "${want_optional[@]}"; do
    if available "$p"; then
        missing+=("$p")
    else
        echo "install-deps: ${codename:-this release} has no $p: building without it"
    fi
done
for p in "${missing[@]}"; do
    available "$p" ||
        { echo "install-deps: ${codename:-this release}'s archive has no package $p" >&2; exit 1; }
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
