#!/usr/bin/env bash
# c10d-ctl trace --format chrome, opened as the trace viewers open it: a
# real c10d-coord, a 2-rank job that desynchronises at its 11th collective
# (desync_job), the trace written with -o, then loaded in a headless
# Chromium by tests/trace_check.html (the trace inlined in the page), which
# checks it as chrome://tracing and Perfetto read the format and writes its
# verdict and a line per rank's track into the DOM, grepped here. A broken
# trace must read BAD (the check can fail).
#   test_trace_chrome.sh C10D_COORD C10D_CTL DESYNC_JOB CHECK_HTML
set -uo pipefail
coord=$1 ctl=$2 job=$3 check=$4
out=$(mktemp -d)
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; for f in "$out"/*.log "$out"/*.dom; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "skipped: no chromium (scripts/install-deps.sh installs it)"; exit 77; }

"$coord" --listen "tcp://127.0.0.1:0" --db "$out/coord.db" --ready-file "$out/ready" \
    >"$out/coord.log" 2>&1 &
cpid=$!
for _ in $(seq 200); do [ -s "$out/ready" ] && break; kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
[ -s "$out/ready" ] || fail "the coordinator did not start"
url=$(head -1 "$out/ready")

"$job" "$url" chrome-job 10 >"$out/job.log" 2>&1 || fail "the desync job did not run as planned"
"$ctl" --coord "$url" trace --format chrome --job chrome-job -o "$out/trace.json" \
    >"$out/ctl.log" 2>&1 || fail "c10d-ctl trace --format chrome failed"
grep -q "wrote $out/trace.json: job chrome-job generation [0-9]*, group world, 2 ranks" \
    "$out/ctl.log" || fail "no word of the file written"
"$ctl" --coord "$url" trace --format chrome --job chrome-job >"$out/stdout.json" 2>"$out/stdout.log" ||
    fail "trace --format chrome to stdout failed"
cmp -s <(grep -c '"ph":"X"' "$out/trace.json") <(grep -c '"ph":"X"' "$out/stdout.json") ||
    fail "stdout and -o differ"
"$ctl" --coord "$url" trace --format chrome --job nosuch >"$out/nosuch.log" 2>&1
[ $? = 3 ] || fail "an unknown job's trace was not 'not found' (3)"

# The page: the template with the trace inlined as JSON text ("</" escaped
# as "<\/", which JSON reads as the same string, so no "</script>" ends it).
page() { # TRACE_FILE PAGE
    awk -v f="$1" '/<!--TRACE-->/ {
            printf "<script type=\"application/json\" id=\"trace\">"
            while ((getline l < f) > 0) { gsub(/<\//, "<\\/", l); print l }
            print "</script>"; next } { print }' "$check" >"$2"
}
load() { # PAGE DOM
    timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --user-data-dir="$out/profile" --dump-dom "file://$1" >"$2" 2>"$out/chromium.log"
}
page "$out/trace.json" "$out/check.html"
load "$out/check.html" "$out/check.dom" || fail "chromium did not load the page"
grep -q "VERDICT: OK" "$out/check.dom" || fail "the trace viewer's checks failed"
# Each rank: its 11 collectives (10 together, the 11th the desync, failed
# on both and never completed: open, drawn until the rank left).
for r in 0 1; do
    grep -Eq "(^|>)rank $r: [0-9]+ events, 11 collectives, 1 failed, 1 open" "$out/check.dom" ||
        fail "rank $r's track is not its 11 collectives with the failed one"
done
grep -q '"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"rank 1"}' "$out/trace.json" ||
    fail "no thread_name metadata for rank 1"

# A trace the viewers would refuse (a ts that is no number) reads BAD.
sed 's/"ts":\([0-9]*\)/"ts":"\1"/' "$out/trace.json" >"$out/broken.json"
page "$out/broken.json" "$out/broken.html"
load "$out/broken.html" "$out/broken.dom" || fail "chromium did not load the broken page"
grep -q "VERDICT: BAD" "$out/broken.dom" || fail "a broken trace passed the check"
echo "trace --format chrome: ok"
