#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a user's program
# against it twice: with pkg-config and with CMake's find_package.
#   test_install.sh BUILD_DIR THIS_DIR
set -euo pipefail
build=$1 here=$2
prefix=$(mktemp -d /tmp/c10d-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/c10d-coord bin/c10d-ctl include/c10d/c10d.h include/c10d/store.h; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libc10dclient.so' | head -n1)")
# Only the public API leaves the shared library.
if nm -D --defined-only "$libdir/libc10dclient.so" | awk '{print $3}' | grep -v '^c10d_' | grep -v '^_' | grep .; then
    echo "FAIL: symbols other than c10d_* exported (above)"; exit 1
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"
"${CC:-cc}" -Wall -Werror -o "$prefix/prog" "$here/user_prog.c" $(pkg-config --cflags --libs c10dclient)
# No LD_LIBRARY_PATH: the run path comes with pkg-config's flags and with
# CMake's imported target.
"$prefix/prog" | grep -q "c10d 0\." || { echo "FAIL: pkg-config build (run path?)"; exit 1; }
mkdir "$prefix/cm"
cmake -S "$here" -B "$prefix/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/cm" >/dev/null
"$prefix/cm/user_prog" | grep -q "c10d 0\." || { echo "FAIL: find_package build (run path?)"; exit 1; }
"$prefix/bin/c10d-ctl" --version | grep -q "c10d-ctl 0\." || { echo "FAIL: installed c10d-ctl does not run"; exit 1; }
"$prefix/bin/c10d-run" --help | grep -q "Usage: c10d-run" || { echo "FAIL: installed c10d-run does not run"; exit 1; }
echo "install: ok (pkg-config and find_package)"
