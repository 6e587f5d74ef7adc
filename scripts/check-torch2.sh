#!/usr/bin/env bash
# Runs the PyTorch backend's tests against PyTorch 2.x on a CPU machine:
# Debian 13 (trixie) ships python3-torch 2.6, so a trixie chroot (made once
# with debootstrap from Debian's archive, ~1 GB) builds the C library and
# the extension there and runs tests/python. Debian 12's PyTorch 1.13 is
# what CI tests; this is the check for the other API generation (docs/
# pytorch.md, "Versions"). Needs root. Not part of CI (it downloads).
#   bash scripts/check-torch2.sh [CHROOT_DIR]     (default /srv/trixie)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/srv/trixie}
pkgs=python3,python3-torch,libtorch-dev,python3-pytest,python3-dev,python3-setuptools,pybind11-dev
pkgs=$pkgs,cmake,gcc,g++,make,ninja-build,pkg-config,libnng-dev,libprotobuf-c-dev
pkgs=$pkgs,protobuf-c-compiler,libsqlite3-dev,check
if [ ! -x "$dir/usr/bin/python3" ]; then
    command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
    echo "check-torch2: debootstrap trixie into $dir (minutes)"
    debootstrap --variant=minbase --include="$pkgs" trixie "$dir" \
        http://deb.debian.org/debian >"$dir.debootstrap.log" 2>&1 ||
        { tail -20 "$dir.debootstrap.log"; exit 1; }
fi
# The checkout appears at the same path inside, so build trees agree.
mkdir -p "$dir$root"
mountpoint -q "$dir$root" || mount --bind "$root" "$dir$root"
for d in proc sys dev dev/shm; do
    mountpoint -q "$dir/$d" || mount --bind "/$d" "$dir/$d"
done
chroot "$dir" bash -euc "
    cd '$root'
    cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    ninja -C build-torch2 >/dev/null
    bash scripts/build-torch.sh build-torch2
    C10D_BUILD_DIR='$root/build-torch2' python3 -m pytest -q -rs tests/python"
