"""docs/examples/uneven_hang.py, the demo's first act, as the README runs it:
DDP with uneven inputs and no join on the coord backend, launched by
c10d-run on the session's long-lived coordinator. Both ranks must fail at
once (not after the example's 60 s timeout), each told the collective
number, who called what, where the ranks run, and to use join()."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, RUN, import_torch_and_c10d_coord, with_pkg_path

import_torch_and_c10d_coord()
EXAMPLE = os.path.join(ROOT, "docs", "examples", "uneven_hang.py")


def test_the_hang_is_named_on_every_rank_at_once(coordinator):
    env = with_pkg_path(dict(os.environ))
    env["UNEVEN_TIMEOUT_S"] = "60"
    p = subprocess.run([RUN, "-n", "2", "--coord", coordinator.url, "--job", "uneven-hang",
                        "--", sys.executable, EXAMPLE, "coord"],
                       env=env, capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    for rank, where in ((0, "step 3"), (1, "the barrier after the loop")):
        m = re.search(rf"\[rank{rank}\]:rank {rank}: failed in {where} after ([0-9.]+) s: (.*)",
                      out)
        assert m, out
        took, msg = float(m.group(1)), m.group(2)
        assert took < 30, f"rank {rank} waited {took} s: {msg}"  # 60 s: it waited it out
        assert "EDESYNC" in msg and "at collective #" in msg, msg
        assert "called BARRIER" in msg and "called ALL_REDUCE" in msg, msg
        assert re.search(r"rank 0: host \S+ pid \d+", msg), msg
        assert "join()" in msg, msg
    # c10d-run leads with the coordinator's finding
    first = [ln for ln in out.splitlines() if ln.startswith("c10d-run:") and "failed" in ln][0]
    assert "the coordinator found (EDESYNC)" in first, out
