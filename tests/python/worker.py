"""One rank of a torch job on the coord backend, run by test_torch_backend.py
and test_checked_torch.py through c10d-run (which sets C10D_COORD, RANK,
WORLD_SIZE). argv[1] names the case; a rank exits 0 when its checks held and
prints why otherwise.

c10d-run starts each rank as `worker.py CASE [ARG]`; each case_* is one
rank's side of one test, kept beside this file by theme: worker_training.py
(DDP, join), worker_collectives.py, worker_p2p.py, worker_groups.py,
worker_failures.py (timeouts, desyncs, a killed rank) and
worker_completion.py (when calls complete, what outlives them); what they
share is worker_common.py."""
import os
import sys
from datetime import timedelta

import torch.distributed as dist

import c10d_coord
from worker_collectives import (case_alltoall, case_coalesced, case_collectives, case_cuda,
                                case_sparse)
from worker_common import fail
from worker_completion import case_exiting, case_lastref, case_returns_at_once
from worker_failures import case_desync, case_killed, case_timeout
from worker_groups import case_named, case_ops, case_options, case_subgroups
from worker_p2p import case_anysource, case_batchtags, case_posted, case_ring
from worker_training import case_ddp, case_join, case_six


def main():
    case = sys.argv[1]
    kw = {"timeout": {"timeout": timedelta(seconds=2)},
          "batchtags": {"timeout": timedelta(seconds=20)},  # a stall fails, not hangs
          "named": {"group_name": "main"},
          "options": {"pg_options": c10d_coord.Options(data_plane="cpu:gloo")}}.get(case, {})
    dist.init_process_group("coord", **kw)  # env:// with C10D_COORD: the coordinator's store
    if dist.get_backend() != "coord":
        fail(f"backend {dist.get_backend()}")
    plane = os.environ.get("C10D_DATA_PLANE")
    if plane and not c10d_coord.data_plane().startswith(plane):  # "cpu:gloo": checked gloo
        fail(f"data plane {c10d_coord.data_plane()}, not {plane}")
    {"ddp": case_ddp, "powersgd": lambda: case_ddp("powersgd"),
     "collectives": case_collectives, "subgroups": case_subgroups, "alltoall": case_alltoall, "ring": case_ring, "lastref": case_lastref, "named": case_named, "cuda": case_cuda, "timeout": lambda: case_timeout(sys.argv[2]), "ops": case_ops, "join": case_join, "desync": case_desync,
     "killed": case_killed, "coalesced": case_coalesced, "anysource": case_anysource,
     "batchtags": case_batchtags, "sparse": case_sparse, "posted": case_posted,
     "six": lambda: case_six(sys.argv[2]), "returns_at_once": case_returns_at_once,
     "options": case_options, "exiting": lambda: case_exiting(sys.argv[2])}[case]()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
