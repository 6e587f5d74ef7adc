#!/usr/bin/env bash
# all_gather into, and reduce_scatter from, a list of views of one flat
# buffer (`list(flat.chunk(world))`), 64 MiB and 1 GiB in all, world 2 and
# 4: plain gloo (its list path copies through a flat buffer of its own)
# against coord over gloo (C10D_DATA_PLANE=cpu:gloo, C10D_VERIFY=async),
# which hands such a list to gloo's _allgather_base / _reduce_scatter_base
# as the flat tensor it is (tests/bench/torch_flat_list_bench.py). One
# process per backend, op, size and world, so peaks do not mix; the two
# backends alternate, ROUNDS rounds. Then a table of medians over the
# rounds: time per call, the peak memory a rank adds over its buffers
# (ru_maxrss), and whether the results are right and the same on both.
# Goal: coord over gloo >= 1.5x faster, no extra peak memory.
# 1 GiB at world 4 needs ~3 GiB a rank: it is skipped (and said) unless
# MemAvailable has 14 GiB.
# Usage: tests/bench/run_flat_list_bench.sh [BUILD_DIR] [PYTHON] [ROUNDS] [REPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
py=${2:-}
rounds=${3:-3}
reps=${4:-3}
if [ -z "$py" ]; then
    if [ -x "$build/venv-torch-2.13/bin/python" ]; then py=$build/venv-torch-2.13/bin/python
    else py=/usr/bin/python3; export PYTHONPATH=$root/python; fi
fi
bench=$root/tests/bench/torch_flat_list_bench.py
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # WORLD BACKEND LABEL OP MIB
    local w=$1; shift
    local rc=0
    "$build/client/c10d-run" -q -n "$w" -- "$py" "$bench" "$@" "$reps" 2>&1 |
        grep -v -e Warning -e 'return func' | tee -a "$out" || rc=$?
    if [ "$rc" != 0 ]; then echo "$2 $3 $w $4: failed (exit $rc), left out of this round"; fi
}
"$py" -c 'import torch; print("torch", torch.__version__)'
for round in $(seq "$rounds"); do
    echo "== round $round"
    for w in 2 4; do
        for mib in 64 1024; do
            if [ "$w" -ge 4 ] && [ "$mib" -ge 1024 ]; then
                avail=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
                if [ "$avail" -lt 14 ]; then
                    echo "skipped: 1 GiB at world 4: ${avail} GiB available, 14 wanted"
                    continue
                fi
            fi
            for op in all_gather reduce_scatter; do
                run "$w" gloo gloo "$op" "$mib"
                C10D_DATA_PLANE=cpu:gloo C10D_VERIFY=async run "$w" coord checked "$op" "$mib"
            done
        done
    done
done
"$py" - "$out" <<'EOF'
import statistics, sys
from collections import defaultdict
t, mem, ok, crc, raised = defaultdict(list), defaultdict(list), defaultdict(set), \
    defaultdict(set), {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 5 or f[0] not in ("gloo", "checked"):
        continue
    key = (f[1], int(f[2]), int(f[3]))
    if f[4] == "raises":
        raised[f[0], key] = " ".join(f[5:])
        continue
    t[f[0], key].append(float(f[4]))
    mem[f[0], key].append(float(f[5]))
    ok[f[0], key].add(f[6] == "1")
    crc[f[0], key].add(f[7])
keys = sorted({k for _, k in list(t) + list(raised)}, key=lambda k: (k[0], k[1], k[2]))
print("\nmedians (time per call; peak a rank adds over its buffers, MiB):")
print("| op | world | total | plain gloo | coord over gloo, ASYNC | speed-up | "
      "peak added: gloo | coord | results |")
print("|---|---|---|---|---|---|---|---|---|")
def cell(side, k):
    if (side, k) in raised:
        return "raises: " + raised[side, k], "-"
    if (side, k) not in t:
        return "-", "-"
    return (f"{statistics.median(t[side, k]):.1f} ms",
            f"{statistics.median(mem[side, k]):.0f}")
for k in keys:
    (gt, gm), (ct, cm) = cell("gloo", k), cell("checked", k)
    sp = "-"
    if ("gloo", k) in t and ("checked", k) in t:
        sp = f"{statistics.median(t['gloo', k]) / statistics.median(t['checked', k]):.2f}x"
    right = ok["gloo", k] | ok["checked", k]
    same = len(crc["gloo", k] | crc["checked", k]) == 1
    res = ("right, equal" if right == {True} and same else
           "right" if right == {True} else "WRONG" if right else "-")
    total = f"{k[2] // 1024} GiB" if k[2] >= 1024 else f"{k[2]} MiB"
    print(f"| {k[0]} | {k[1]} | {total} | {gt} | {ct} | {sp} | {gm} | {cm} | {res} |")
EOF
