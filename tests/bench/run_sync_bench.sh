#!/usr/bin/env bash
# SYNC's cost against the control plane's floors, side by side.
# Each round runs bench_rtt (raw TCP, NNG's stream ping-pong, our control
# round trip), then bench_coll at world 2 under C10D_VERIFY=off and sync,
# and prints what SYNC adds to a 4 B all_reduce, in control round trips
# of the same round, and SYNC against OFF at 64 MiB.
# Usage: tests/bench/run_sync_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
rounds=${2:-3}
coll() { # verify level -> "4B_us 64MiB_ms"
    C10D_VERIFY=$1 "$build/client/c10d-run" -q --no-prefix -n 2 -- "$build/tests/bench/bench_coll" 3000 |
        awk 'NR == 1 {for (i = 1; i <= NF; i++) if ($i ~ /^allreduce\(4B\)=/) {
                 sub(/^allreduce\(4B\)=/, "", $i); sub(/us$/, "", $i); small = $i } }
             /allreduce 64MiB/ {big = $3} END {print small, big}'
}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
for r in $(seq "$rounds"); do
    rtt_out=$("$build/tests/bench/bench_rtt" 2000 1)
    echo "== round $r"
    echo "$rtt_out" | grep -E "raw TCP ping|nng stream tcp|c10d control tcp" | cut -c1-90
    rtt=$(echo "$rtt_out" | awk '/c10d control tcp/ {print $4}')
    read -r off_small off_big < <(coll off)
    read -r sync_small sync_big < <(coll sync)
    awk -v rtt="$rtt" -v os="$off_small" -v ss="$sync_small" -v ob="$off_big" \
        -v sb="$sync_big" -v out="$summary" 'BEGIN {
        printf "  4 B all_reduce: OFF %.1f us, SYNC %.1f us: SYNC adds %.2f control round trips\n",
               os, ss, (ss - os) / rtt
        printf "  64 MiB all_reduce: OFF %.2f ms, SYNC %.2f ms: %.2fx\n", ob, sb, sb / ob
        printf "%f %f\n", (ss - os) / rtt, sb / ob >> out }'
done
# Medians over the rounds: one round's 64 MiB pair swings with the machine
# (an OFF run of 34 ms beside 17 ms ones), and a median of alternating
# pairs is what the goals are read from.
median() { # column -> the median of that column of the summary
    sort -g -k"$1","$1" "$summary" | awk -v k="$1" '{ v[NR] = $k } END {
        printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo "== median of $rounds rounds: SYNC adds $(median 1) control round trips;" \
     "64 MiB SYNC/OFF $(median 2)x"
