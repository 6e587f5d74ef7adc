"""torch 2.x's distributed API on coord groups, on a CPU DeviceMesh
(modern.py, one rank each, started by c10d-run on the session's
coordinator): all_gather_into_tensor, reduce_scatter_tensor,
_coalescing_manager, barrier(device_ids), init_device_mesh, DTensor
redistribution, new_group and split_group, FSDP2 (fully_shard), eager init
and destroy_process_group. The same program on gloo groups is the
reference: FSDP2's weights after training must be the same bits, and
torch must refuse on coord exactly what it refuses on gloo for a CPU mesh
(docs/pytorch.md, "torch 2.x")."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, import_torch_and_c10d_coord, with_pkg_path

torch, c10d_coord = import_torch_and_c10d_coord()
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip(f"torch {torch.__version__}: DeviceMesh, DTensor and FSDP2 are torch 2.x's",
                allow_module_level=True)

RUN = os.path.join(BUILD, "client", "c10d-run")
MODERN = os.path.join(ROOT, "tests", "python", "modern.py")


def run_modern(coordinator, backend, out, n=2):
    e = with_pkg_path(dict(os.environ))
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        e.pop(k, None)
    p = subprocess.run([RUN, "-q", "-n", str(n), "--coord", coordinator.url, "--",
                        sys.executable, MODERN, backend, out],
                       env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("modern API ok") == n, p.stdout + p.stderr
    return torch.load(out)


def test_modern_api_and_fsdp2_match_gloo(coordinator, tmp_path):
    ours = run_modern(coordinator, "coord", str(tmp_path / "coord.pt"))
    ref = run_modern(coordinator, "gloo", str(tmp_path / "gloo.pt"))
    assert sorted(ours["weights"]) == sorted(ref["weights"])
    for k, w in ref["weights"].items():
        assert torch.equal(ours["weights"][k], w), (k, ours["weights"][k], w)
    assert ours["loss"] == ref["loss"]
    # What torch refuses for a CPU group, it refuses alike on both, with
    # the same words (listed in docs/pytorch.md).
    assert ours["refused"] == ref["refused"], (ours["refused"], ref["refused"])
