#!/usr/bin/env bash
# Runs what CI runs (.ci/run, on a clean clone of this checkout's HEAD)
# beside busy processes that each keep a core busy, to prove that every
# test's budget holds on a loaded machine (tests/README.md, "Budgets").
#   scripts/load-check.sh            two busy processes
#   C10D_LOAD_HOGS=N ...             N of them
#   C10D_LOAD_DIR=DIR ...            where the clone goes (default: a mktemp dir)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hogs=${C10D_LOAD_HOGS:-2}
dir=${C10D_LOAD_DIR:-$(mktemp -d /tmp/c10d-load.XXXXXX)}
rm -rf "$dir/clone"
git clone -q "$root" "$dir/clone"
# .ci/run reads the team's shared folder beside the checkout.
[ -e "$dir/shared" ] || [ ! -d "$root/../shared" ] || ln -s "$root/../shared" "$dir/shared"
pids=()
stop_hogs() { [ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for _ in $(seq "$hogs"); do
    # A busy loop in its own process: one core's worth of competition.
    sh -c 'while :; do :; done' &
    pids+=($!)
done
echo "load-check: .ci/run in $dir/clone beside $hogs busy processes"
start=$SECONDS
rc=0
(cd "$dir/clone" && CI=true bash .ci/run) || rc=$?
echo "load-check: rc $rc after $((SECONDS - start)) s beside $hogs busy processes"
exit $rc
