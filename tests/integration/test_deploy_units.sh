#!/usr/bin/env bash
# deploy/'s systemd units as `cmake --install` puts them, and the
# coordinator's side of Type=notify:
#   - the installed units name the installed c10d-coord and pass
#     `systemd-analyze verify` (which checks ExecStart= exists and runs);
#   - `systemd-analyze security --offline=true` scores each 3.0 at most;
#   - with $NOTIFY_SOCKET set (a path, and an @abstract name), c10d-coord
#     sends READY=1 once its port accepts connections, and STOPPING=1 on
#     SIGTERM (no systemd runs here: a datagram socket stands in for it).
# Without systemd-analyze the first two are skipped (exit 77 after the
# third passes).
#   test_deploy_units.sh BUILD_DIR C10D_COORD
set -uo pipefail
build=$1 coord=$2
out=$(mktemp -d /tmp/c10d-units-XXXXXX)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
units="c10d-coord.service c10d-coord-replica.service"

# --- sd_notify: first, as it needs nothing but python3
notify_check() { /usr/bin/python3 - "$coord" "$1" "$out" <<'PY'
import os, re, signal, socket, subprocess, sys, time
coord, kind, out = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
if kind == "abstract":
    name = "@c10d-notify-test-%d" % os.getpid()
    s.bind("\0" + name[1:])
else:
    name = os.path.join(out, "notify.sock")
    s.bind(name)
s.settimeout(10)
log = open(os.path.join(out, "coord-%s.log" % kind), "w")
p = subprocess.Popen([coord, "--listen", "tcp://127.0.0.1:0", "--db", ":memory:"],
                     stderr=log, env=dict(os.environ, NOTIFY_SOCKET=name))
try:
    msg = s.recv(4096).decode()
    assert "READY=1" in msg.split("\n"), "first notification: %r" % msg
    m = re.search(r"STATUS=serving on tcp://([0-9.]+):([0-9]+)", msg)
    assert m, "READY=1 without the URL in STATUS=: %r" % msg
    # READY=1 means serving: the port takes a connection at once
    socket.create_connection((m.group(1), int(m.group(2))), timeout=2).close()
    assert p.poll() is None, "the coordinator exited"
    p.send_signal(signal.SIGTERM)
    msg = s.recv(4096).decode()
    assert "STOPPING=1" in msg.split("\n"), "on SIGTERM: %r" % msg
    assert p.wait(timeout=15) == 0, "exit status %s" % p.returncode
finally:
    if p.poll() is None:
        p.kill()
print("sd_notify (%s socket): READY=1 once serving, STOPPING=1 on SIGTERM" % kind)
PY
}
notify_check path || fail "sd_notify to a path socket"
notify_check abstract || fail "sd_notify to an abstract socket"
# a socket that nobody listens on: a warning, and it serves all the same
NOTIFY_SOCKET=$out/nobody.sock "$coord" --listen tcp://127.0.0.1:0 --db :memory: \
    --ready-file "$out/ready" 2>"$out/nobody.log" &
pid=$!
for _ in $(seq 100); do [ -s "$out/ready" ] && break; sleep 0.1; done
kill -TERM $pid; wait $pid || fail "without a listener on NOTIFY_SOCKET, exit status $?"
grep -q "cannot tell the service manager" "$out/nobody.log" || fail "no warning for an unheard NOTIFY_SOCKET"

if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: no systemd-analyze: the units' verify and security checks did not run"
    exit 77
fi
# --- the units as installed
cmake --install "$build" --prefix "$out/prefix" >"$out/install.log" 2>&1 || fail "cmake --install"
dir=$out/prefix/share/c10d-coord/deploy
for u in $units; do
    [ -f "$dir/$u" ] || fail "$u not installed in share/c10d-coord/deploy"
    grep -q "^ExecStart=$out/prefix/bin/c10d-coord " "$dir/$u" ||
        fail "$u: ExecStart= does not name the installed c10d-coord: $(grep ^ExecStart= "$dir/$u")"
    grep -q "^Type=notify" "$dir/$u" || fail "$u is not Type=notify"
done
[ -f "$dir/c10d-coord.env" ] || fail "c10d-coord.env not installed"
# verify: a clean bill, no warning either (it prints them but exits 0)
(cd "$dir" && systemd-analyze verify $units) >"$out/verify.log" 2>&1 || fail "systemd-analyze verify"
grep -q . "$out/verify.log" && fail "systemd-analyze verify warned"
for u in $units; do
    systemd-analyze security --offline=true "$dir/$u" >"$out/security-$u.log" 2>&1 ||
        fail "systemd-analyze security --offline=true $u"
    score=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$out/security-$u.log")
    [ -n "$score" ] || fail "no exposure score for $u"
    awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "$u: exposure $score, over 3.0"
    echo "$u: exposure $score"
done
echo "deploy units: ok"
