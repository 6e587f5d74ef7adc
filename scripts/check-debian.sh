#!/usr/bin/env bash
# A developer's check that c10d-coord sets up, builds and passes its tests
# on a fresh Debian machine of a given release: Debian 12 (bookworm, what
# CI runs) or 13 (trixie: NNG 1.10, mbed TLS 3, dqlite 1.18, GCC 14,
# PyTorch 2.6). The first run makes a minimal root of that release with
# debootstrap (a few minutes, ~1 GB once the packages are in; the mirror
# is the one this machine's own apt sources name); every run then, in
# it, installs the packages with scripts/install-deps.sh as a fresh
# machine would, builds with warnings as errors and runs ctest.
# Needs root (debootstrap, chroot, bind mounts). Not part of CI: it
# downloads from the archive.
#
#   bash scripts/check-debian.sh RELEASE [DIR] [--asan] [--torch | --full]
#     RELEASE  bookworm or trixie (or 12, 13)
#     DIR      the root to make or reuse (default /srv/RELEASE-ci)
#     --asan   also the ASan+UBSan build and its ctest (build-RELEASE-asan)
#     --torch  also PyTorch, the torch backend built against build-RELEASE
#              (scripts/build-torch.sh) and its tests (pytest tests/python):
#              on trixie, PyTorch 2.6
#     --full   instead, the whole `bash scripts/test.sh` (PyTorch, the pip
#              install, PyTorch's own suite, fuzzing, ASan)
#   C10D_MIRROR=URL   the Debian mirror, where this machine's sources name none
#
# Plainly (and with --asan) the checkout is bind-mounted at its own path
# inside the root and builds in build-RELEASE (and build-RELEASE-asan),
# beside the host's build trees, without PyTorch (C10D_NO_TORCH=1: the C
# build and its tests need none of it). --torch and --full work in a copy
# of the checkout at /c10d-coord inside the root instead (what git tracks,
# and new files it does not ignore, copied again each run): the torch
# backend is built in place, and test.sh builds in build/ and build-asan/,
# which must not be the host's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

release="" dir="" asan=0 torch=0 full=0
for a in "$@"; do
    case "$a" in
        --asan) asan=1 ;;
        --torch) torch=1 ;;
        --full) full=1 ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "check-debian: unknown option $a" >&2; exit 2 ;;
        *) if [ -z "$release" ]; then release=$a; elif [ -z "$dir" ]; then dir=$a
           else echo "check-debian: one RELEASE and one DIR at most" >&2; exit 2; fi ;;
    esac
done
case "$release" in
    12|bookworm) release=bookworm ;;
    13|trixie) release=trixie ;;
    *) echo "usage: bash scripts/check-debian.sh bookworm|trixie [DIR] [--asan] [--torch | --full]" >&2
       exit 2 ;;
esac
dir=${dir:-/srv/$release-ci}
[ "$(id -u)" -eq 0 ] || { echo "check-debian: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

# The Debian mirror this machine installs from: the first URI of its apt
# sources (deb822 .sources or one-line .list) for its own release's main
# suite, so the root comes from wherever this machine is allowed to reach.
host_mirror() {
    local codename
    codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
    {
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -r "$f" ] || continue
            awk -v cn="$codename" '
                function flush() {
                    if (uris != "" && (cn == "" || (" " suites " ") ~ (" " cn " "))) {
                        split(uris, u, " "); print u[1]
                    }
                    uris = ""; suites = ""
                }
                /^[ \t]*#/ { next }
                /^[ \t]*$/ { flush(); next }
                tolower($1) == "uris:" { $1 = ""; uris = $0 }
                tolower($1) == "suites:" { $1 = ""; suites = $0 }
                END { flush() }' "$f"
        done
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -r "$f" ] || continue
            awk -v cn="$codename" '
                $1 == "deb" {
                    i = 2
                    if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if (cn == "" || $(i + 1) == cn) print $i
                }' "$f"
        done
    } | sed 's:/*$::' | head -1
}

# --- the root, once
if [ ! -f "$dir/etc/c10d-check-debian" ]; then
    mirror=${C10D_MIRROR:-$(host_mirror)}
    [ -n "$mirror" ] || { echo "check-debian: no Debian mirror in this machine's apt sources; set C10D_MIRROR" >&2; exit 1; }
    command -v debootstrap >/dev/null || {
        echo "check-debian: installing debootstrap"
        apt-get install -y -qq debootstrap >/dev/null
    }
    [ -e "/usr/share/debootstrap/scripts/$release" ] ||
        { echo "check-debian: this debootstrap does not know $release" >&2; exit 1; }
    echo "check-debian: debootstrap $release into $dir from $mirror (minutes)"
    mkdir -p "$dir"
    debootstrap --variant=minbase --include=ca-certificates "$release" "$dir" "$mirror" \
        >"$dir.debootstrap.log" 2>&1 || { tail -20 "$dir.debootstrap.log" >&2; exit 1; }
    # The release's point updates as well as the release itself.
    printf 'deb %s %s main\ndeb %s %s-updates main\n' "$mirror" "$release" "$mirror" "$release" \
        >"$dir/etc/apt/sources.list"
    echo "$release from $mirror, $(date -u +%F)" >"$dir/etc/c10d-check-debian"
fi
cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true

# --- mounts for this run, undone on the way out
mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true
    done
}
trap cleanup EXIT
bind() { # host path, path inside the root
    mkdir -p "$dir$2"
    if ! mountpoint -q "$dir$2"; then
        mount --bind "$1" "$dir$2"
        mounted+=("$dir$2")
    fi
}
for d in /proc /sys /dev /dev/pts /dev/shm; do
    bind "$d" "$d"
done

env=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
if [ "$torch" = 1 ] || [ "$full" = 1 ]; then
    src=/c10d-coord
    mkdir -p "$dir$src"
    git -C "$root" ls-files -z -co --exclude-standard |
        (cd "$root" && tar -c --null -T - -f -) | tar -x -C "$dir$src" -f -
    where="a copy of the checkout at $src"
else
    src=$root
    bind "$root" "$root"
    where="the checkout, bound at $src"
    env+=(C10D_NO_TORCH="${C10D_NO_TORCH:-1}")
fi
for v in C10D_SKIP_SANITIZE C10D_FUZZ_SECONDS C10D_TSAN; do # for test.sh
    if [ -n "${!v:-}" ]; then env+=("$v=${!v}"); fi
done

if [ "$full" = 1 ]; then
    echo "check-debian: $release ($dir, $where): bash scripts/test.sh"
    chroot "$dir" /usr/bin/env -i "${env[@]}" bash -euc "cd '$src' && bash scripts/test.sh"
    echo "check-debian: $release: scripts/test.sh passed"
    exit 0
fi

echo "check-debian: $release ($dir, $where): install-deps, build-$release (-Werror), ctest"
chroot "$dir" /usr/bin/env -i "${env[@]}" bash -euc "
    cd '$src'
    bash scripts/install-deps.sh
    run_suite() { # build-dir, extra cmake args...
        local b=\$1; shift
        echo \"== configure \$b \$*\"
        cmake -S . -B \"\$b\" -DC10D_WERROR=ON \"\$@\" >/dev/null
        echo \"== build \$b\"
        cmake --build \"\$b\" -j \"\$(nproc)\" >/dev/null
        echo \"== test \$b\"
        (cd \"\$b\" && ctest --output-on-failure --timeout 600)
    }
    run_suite build-$release
    if [ $torch = 1 ]; then
        bash scripts/build-torch.sh build-$release
        echo '== test python/c10d_coord (pytest)'
        C10D_BUILD_DIR='$src/build-$release' /usr/bin/python3 -m pytest -q -rs tests/python
    fi
    if [ $asan = 1 ]; then
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            LSAN_OPTIONS=suppressions='$src/tests/lsan.supp' \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            run_suite build-$release-asan -DC10D_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
                -DC10D_WITH_NCCL=OFF
    fi"
echo "check-debian: $release: build and tests passed"
