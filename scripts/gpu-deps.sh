#!/usr/bin/env bash
# For a GPU machine without a package archive (the lent device): downloads
# here the Debian 12 packages the build needs beyond what that machine has
# (CUDA, NCCL headers, a compiler and CMake are there), and unpacks them into
# .deps/ (git-ignored), to be carried there. Then, on the GPU machine:
#   bash scripts/gpu-check.sh
# Idempotent: an existing .deps/ is kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps=$root/.deps
[ -d "$deps/usr/include/nng" ] && { echo "gpu-deps: $deps is ready"; exit 0; }
pkgs=(libnng-dev libnng1 libmbedtls-dev libmbedtls14 libmbedx509-1 libmbedcrypto7
      libprotobuf-c-dev libprotobuf-c1 protobuf-c-compiler libprotoc32 libprotobuf32
      libsqlite3-dev libsqlite3-0 check libsubunit-dev libsubunit0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "${pkgs[@]}" >/dev/null)
mkdir -p "$deps"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$deps"; done
# pkg-config files name /usr as their prefix: point them at .deps.
find "$deps" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$deps/usr|" {} +
echo "gpu-deps: unpacked ${#pkgs[@]} packages into $deps"
