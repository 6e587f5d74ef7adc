#!/usr/bin/env bash
# torch's gloo under our checks (backend "coord", C10D_DATA_PLANE=cpu:gloo)
# against plain gloo, gloo with TORCH_DISTRIBUTED_DEBUG=DETAIL and our own
# data plane (C10D_DATA_PLANE=coord), world 2, alternating in one run, three
# rounds (tests/bench/torch_checked_bench.py: a control round trip to the
# coordinator, a 4 B and a 1 MiB all_reduce per call, a DDP step). Then a
# table of the medians over the rounds, with ratios to plain gloo, and the
# goals checked: ASYNC <= 1.05x plain gloo per call; SYNC <= plain gloo +
# 1.5 control round trips; a DDP step under ASYNC <= 1.05x plain gloo.
# Usage: tests/bench/run_checked_bench.sh [BUILD_DIR] [PYTHON] [ROUNDS]
#   PYTHON: default the torch 2.13 venv of scripts/torch-venv.sh where it
#   exists (its c10d_coord installed), else /usr/bin/python3 (in-place build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
py=${2:-}
rounds=${3:-3}
if [ -z "$py" ]; then
    if [ -x "$build/venv-torch-2.13/bin/python" ]; then py=$build/venv-torch-2.13/bin/python
    else py=/usr/bin/python3; export PYTHONPATH=$root/python; fi
fi
bench=$root/tests/bench/torch_checked_bench.py
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# A run that fails is said and left out of its round (the others go on).
run() {
    local rc=0
    "$build/client/c10d-run" -q -n 2 -- "$py" "$bench" "$@" | tee -a "$out" || rc=$?
    if [ "$rc" != 0 ]; then echo "$2: failed (exit $rc), left out of this round"; fi
}
"$py" -c 'import torch; print("torch", torch.__version__)'
for round in $(seq "$rounds"); do
    echo "== round $round"
    run gloo gloo
    TORCH_DISTRIBUTED_DEBUG=DETAIL run gloo gloo-detail
    C10D_DATA_PLANE=cpu:gloo C10D_VERIFY=off run coord checked-off
    C10D_DATA_PLANE=cpu:gloo C10D_VERIFY=async run coord checked-async
    C10D_DATA_PLANE=cpu:gloo C10D_VERIFY=sync run coord checked-sync
    C10D_DATA_PLANE=coord C10D_VERIFY=async run coord coord-async
    C10D_DATA_PLANE=coord C10D_VERIFY=sync run coord coord-sync
done
"$py" - "$out" <<'EOF'
import statistics, sys
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    label, metric, us = line.split()
    v[label, metric].append(float(us))
labels = ["gloo", "gloo-detail", "checked-off", "checked-async", "checked-sync",
          "coord-async", "coord-sync"]
names = {"gloo": "plain gloo", "gloo-detail": "gloo, TORCH_DISTRIBUTED_DEBUG=DETAIL",
         "checked-off": "coord over gloo, OFF", "checked-async": "coord over gloo, ASYNC",
         "checked-sync": "coord over gloo, SYNC", "coord-async": "our data plane, ASYNC",
         "coord-sync": "our data plane, SYNC"}
metrics = [("ar4B", "4 B all_reduce"), ("ar1MiB", "1 MiB all_reduce"),
           ("ddp", "DDP step"), ("rtt", "control round trip")]
med = {k: statistics.median(x) for k, x in v.items()}
rounds = max(len(x) for x in v.values())
def fmt(us):
    return f"{us / 1e3:.2f} ms" if us >= 1000 else f"{us:.1f} us"
print(f"\nmedians of {rounds} rounds (ratio to plain gloo):")
print("| | " + " | ".join(m[1] for m in metrics) + " |")
print("|---" * (len(metrics) + 1) + "|")
for lab in labels:
    cells = []
    for m, _ in metrics:
        if (lab, m) not in med:
            cells.append("-")
            continue
        x, g = med[lab, m], med["gloo", m]
        cells.append(fmt(x) + ("" if lab == "gloo" or m == "rtt" else f" ({x / g:.2f}x)") +
                     (f" [{len(v[lab, m])} of {rounds}]" if len(v[lab, m]) < rounds else ""))
    print(f"| {names[lab]} | " + " | ".join(cells) + " |")
# the coordinator's round trip does not depend on the backend: all of them
rtt = statistics.median(x for (_, m), xs in v.items() if m == "rtt" for x in xs)
print(f"\ngoals (medians; control round trip {rtt:.1f} us, all configurations):")
for m, name in metrics[:2]:
    g, a, s = med["gloo", m], med["checked-async", m], med["checked-sync", m]
    print(f"  ASYNC {name}: {a / g:.2f}x plain gloo (<= 1.05x): "
          f"{'met' if a <= 1.05 * g else 'NOT met'}")
    print(f"  SYNC {name}: plain gloo + {(s - g) / rtt:.2f} round trips (<= 1.5): "
          f"{'met' if s <= g + 1.5 * rtt else 'NOT met'}")
g, a = med["gloo", "ddp"], med["checked-async", "ddp"]
print(f"  ASYNC DDP step: {a / g:.2f}x plain gloo (<= 1.05x): "
      f"{'met' if a <= 1.05 * g else 'NOT met'}")
EOF
