#!/usr/bin/env bash
# torch 2.x's own TCPStore client against c10d-coord --tcpstore-listen: a
# coordinator of this build on the host, tests/python/tcpstore_ops.py run by
# torch 2.6 in the Debian 13 chroot that scripts/check-torch2.sh makes (it
# shares the host's network). Every operation, with TCPStore's answers.
# Needs root and the chroot. Not part of CI.
#   bash scripts/check-tcpstore-torch2.sh [BUILD_DIR] [CHROOT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
dir=${2:-/srv/trixie}
[ -x "$dir/usr/bin/python3" ] || { echo "no chroot at $dir: run scripts/check-torch2.sh once"; exit 1; }
tmp=$(mktemp -d)
mounted=0
cleanup() {
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ $mounted = 1 ] && umount "$dir/proc"
    rm -rf "$tmp" "$dir/tmp/tcpstore_ops.py"
}
"$build/server/c10d-coord" --listen tcp://127.0.0.1:0 --db "$tmp/coord.db" \
    --ready-file "$tmp/ready" --tcpstore-listen 0 --log-level warn &
pid=$!
trap cleanup EXIT
for _ in $(seq 200); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$("$build/client/c10d-ctl" --coord "$(cat "$tmp/ready")" --json status |
       /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["coordinator"]["tcpstore"].rsplit(":",1)[1])')
if ! mountpoint -q "$dir/proc"; then mount --bind /proc "$dir/proc"; mounted=1; fi
cp "$root/tests/python/tcpstore_ops.py" "$dir/tmp/"
chroot "$dir" /usr/bin/python3 /tmp/tcpstore_ops.py "$port" 2>&1 | grep -v '^\[W'
