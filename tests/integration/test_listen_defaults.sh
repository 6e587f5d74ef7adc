#!/usr/bin/env bash
# Where a coordinator listens when nothing is said, and what it says when
# it listens beyond this host without a token: the default collides with
# none of torchrun's ports (29500, 29400) and reaches this host only; a
# non-loopback address with no token (or client CA) is warned about.
#   test_listen_defaults.sh C10D_COORD C10D_CTL
set -uo pipefail
coord=$1 ctl=$2
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

# the whole help first: grep -q stops reading at its match, and a writer
# still writing then dies of SIGPIPE (a failed pipeline, under pipefail)
help=$("$coord" --help) && grep -q "default tcp://127.0.0.1:29700" <<<"$help" ||
    fail "--help does not give the default"
help=$("$ctl" --help) && grep -q "else tcp://127.0.0.1:29700" <<<"$help" ||
    fail "c10d-ctl --help does not give the default"

# start NAME ENV... -- ARGS...: a coordinator, until it is ready, then stopped
start() {
    local name=$1; shift
    env "$@" --ready-file "$out/$name.ready" --db :memory: 2>"$out/$name.log" &
    pid=$!
    for _ in $(seq 100); do [ -s "$out/$name.ready" ] && break; sleep 0.1; done
    [ -s "$out/$name.ready" ] || fail "$name: the coordinator did not become ready"
    kill "$pid"; wait "$pid"; pid=
}
start open -u C10D_TOKEN "$coord" --listen tcp://0.0.0.0:0
grep -q "with no token: every host that reaches this port" "$out/open.log" ||
    fail "no warning for 0.0.0.0 without a token"
echo secret >"$out/token"
start token -u C10D_TOKEN "$coord" --listen tcp://0.0.0.0:0 --token-file "$out/token"
grep -q "with no token" "$out/token.log" && fail "a warning although a token is required"
start loop -u C10D_TOKEN "$coord" --listen tcp://127.0.0.1:0
grep -q "with no token" "$out/loop.log" && fail "a warning for a loopback address"
start ts -u C10D_TOKEN "$coord" --listen tcp://127.0.0.1:0 --tcpstore-listen 0.0.0.0:0
grep -q "the TCPStore port tcp://0.0.0.0:.* takes no token" "$out/ts.log" ||
    fail "no warning for a TCPStore port beyond this host"
echo "PASS"
