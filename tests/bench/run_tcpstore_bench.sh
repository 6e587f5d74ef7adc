#!/usr/bin/env bash
# c10d-coord's TCPStore port (--tcpstore-listen) against PyTorch's own
# TCPStore server, driven by TCPStore's own client, alternating in one run,
# at 1 and 8 clients. Needs python3-torch.
# Usage: tests/bench/run_tcpstore_bench.sh [BUILD_DIR] [OPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ops=${2:-2000}
if ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
    echo "run_tcpstore_bench: needs python3-torch"; exit 0
fi
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$build/server/c10d-coord" --listen tcp://127.0.0.1:0 --db "$dir/coord.db" \
    --ready-file "$dir/ready" --tcpstore-listen 0 --log-level warn &
pid=$!
for _ in $(seq 200); do [ -s "$dir/ready" ] && break; sleep 0.05; done
url=$(cat "$dir/ready")
port=$("$build/client/c10d-ctl" --coord "$url" --json status |
       /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["coordinator"]["tcpstore"].rsplit(":",1)[1])')
for n in 1 8; do
    /usr/bin/python3 "$root/tests/bench/tcpstore_bench.py" "$port" "$n" "$ops" 2
done
