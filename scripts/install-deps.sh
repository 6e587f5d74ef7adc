#!/usr/bin/env bash
# Installs the Debian 12 packages c10d-coord builds and tests with.
# Idempotent and quiet when everything is already there, so the README's
# commands and CI can call it every time.
# PyTorch from Debian (python3-torch, libtorch-dev, pybind11-dev, pytest;
# venv, pip and wheel to pip-install c10d_coord offline) comes too: the
# torch backend (python/c10d_coord) is built, installed and tested with
# it, and the benchmarks' anchors run on it.
#   C10D_NO_TORCH=1    leaves PyTorch out (the C build and tests need none
#                      of it; the torch tests then skip, saying why).
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      libnng-dev libmbedtls-dev
      libprotobuf-c-dev protobuf-c-compiler
      libsqlite3-dev sqlite3 check openssl
      libdqlite-dev libraft-dev  # replicas (docs/replication.md); optional to build
      clang)  # libFuzzer for scripts/fuzz.sh
if [ "${C10D_NO_TORCH:-0}" != 1 ]; then
    pkgs+=(python3-torch libtorch-dev pybind11-dev python3-pytest python3-setuptools ninja-build
           # pip install ./python into a venv, offline (docs/pytorch.md; tests/install)
           python3-venv python3-pip python3-wheel)
fi

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
