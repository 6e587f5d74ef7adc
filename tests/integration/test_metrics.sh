#!/usr/bin/env bash
# --metrics-listen end to end: a real coordinator with the endpoint on a
# port it picks (read from its log), store operations through c10d-ctl,
# then GET /metrics: the counters moved, and the text is Prometheus'
# exposition format 0.0.4 (every sample "name{labels} value", every
# family a # TYPE before its samples).
#   test_metrics.sh C10D_COORD C10D_CTL
set -uo pipefail
coord=$1 ctl=$2
out=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log "$out"/*.txt; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }

help=$("$coord" --help) && grep -q -- "--metrics-listen \[HOST:\]PORT" <<<"$help" || fail "--help does not list --metrics-listen"
"$coord" --listen tcp://127.0.0.1:0 --db :memory: --metrics-listen 0 \
    --ready-file "$out/ready" 2>"$out/coord.log" &
pid=$!
for _ in $(seq 100); do [ -s "$out/ready" ] && break; sleep 0.1; done
[ -s "$out/ready" ] || fail "the coordinator did not become ready"
url=$(grep -o 'Prometheus metrics on http://127\.0\.0\.1:[0-9]*/metrics' "$out/coord.log" | awk '{print $4}')
[ -n "$url" ] || fail "the log does not say where the metrics are (loopback by default)"
export C10D_COORD
C10D_COORD=$(cat "$out/ready")

fetch() { /usr/bin/python3 - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    ctype = r.headers.get("Content-Type", "")
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    sys.stdout.write(r.read().decode())
PY
}
fetch "$url" >"$out/before.txt" || fail "GET $url failed"
for i in 1 2 3; do "$ctl" set --write "k$i" "v$i" >/dev/null || fail "c10d-ctl set"; done
"$ctl" get k2 >/dev/null || fail "c10d-ctl get"
"$ctl" add --write n 5 >/dev/null || fail "c10d-ctl add"
sleep 1.2 # the gauges are read at most once a second
fetch "$url" >"$out/after.txt" || fail "GET $url failed (second time)"

/usr/bin/python3 - "$out/before.txt" "$out/after.txt" <<'PY' || fail "the exposition is wrong (above)"
import re, sys
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
                    r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*\})? (-?[0-9.eE+-]+|\+Inf|NaN)$')
def parse(path):
    types, vals = {}, {}
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary"), line
            assert name not in types, "two TYPE lines for " + name
            types[name] = kind
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = sample.match(line)
        assert m, "not a sample line: %r" % line
        name = m.group(1)
        family = re.sub(r'_(bucket|sum|count)$', '', name) if name not in types else name
        assert family in types, "no TYPE before " + line
        vals[name + (m.group(2) or "")] = float(m.group(4))
    return types, vals
t0, before = parse(sys.argv[1])
t1, after = parse(sys.argv[2])
def v(key): return after.get(key, -1) - before.get(key, 0)
for fam, kind in [("c10d_requests_total", "counter"), ("c10d_request_duration_seconds", "histogram"),
                  ("c10d_jobs_live", "gauge"), ("c10d_ranks_alive", "gauge"), ("c10d_findings", "gauge"),
                  ("c10d_replica_role", "gauge"), ("c10d_connections_open", "gauge"),
                  ("c10d_uptime_seconds", "gauge")]:
    assert t1.get(fam) == kind, "%s: TYPE %s, want %s" % (fam, t1.get(fam), kind)
assert v('c10d_requests_total{op="set"}') == 3, "set counted %s" % v('c10d_requests_total{op="set"}')
assert v('c10d_requests_total{op="get"}') == 1, "get counted"
assert v('c10d_requests_total{op="add"}') == 1, "add counted"
assert v('c10d_request_duration_seconds_count') >= 5, "latency count did not move"
assert after['c10d_request_duration_seconds_bucket{le="+Inf"}'] == after['c10d_request_duration_seconds_count']
assert after['c10d_request_duration_seconds_sum'] > 0
assert after['c10d_replica_role{role="single"}'] == 1 and after['c10d_replica_role{role="leader"}'] == 0
for kind in ("desync", "lost_rank", "stall"):
    assert after['c10d_findings{kind="%s"}' % kind] == 0
assert after['c10d_jobs_live'] == 0 and after['c10d_ranks_alive'] == 0
assert after['c10d_uptime_seconds'] > before['c10d_uptime_seconds']
print("metrics: %d samples, requests and latency moved" % len(after))
PY
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[ "$rc" = 0 ] || fail "the coordinator exited $rc on SIGTERM with the endpoint on"
"$coord" --listen tcp://127.0.0.1:0 --db :memory: --metrics-listen nohost: 2>"$out/bad.log" &&
    fail "--metrics-listen nohost: was accepted"
echo "metrics: ok"
