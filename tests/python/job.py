"""One rank of a small torch job on the coord backend, as users write one:
init_process_group, an all_reduce, a subgroup, destroy. Run by
test_torch_jobs.py under c10d-run, torchrun, or by hand with coord://.

    job.py [--init URL] [--rank R --world N] [--hold DIR] [--timeout S]

--init: the init_method (default env://). --hold DIR: once the job has
formed, rank 0 writes DIR/formed and every rank waits for DIR/release
(so a test can start a second job while this one runs).
--fail-first-attempt: under torchrun, rank 1 dies in attempt 0 (so
torchrun restarts the job). Exit 0 when the checks held; the reason on
stdout otherwise."""
import argparse
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import c10d_coord  # noqa: F401 (registers "coord", coord:// and env:// with C10D_COORD)

p = argparse.ArgumentParser()
p.add_argument("--init", default="env://")
p.add_argument("--rank", type=int)
p.add_argument("--world", type=int)
p.add_argument("--hold")
p.add_argument("--timeout", type=float, default=30)
p.add_argument("--fail-first-attempt", action="store_true",
               help="under torchrun: rank 1 dies in the first attempt (restart count 0)")
a = p.parse_args()

kw = {} if a.rank is None else {"rank": a.rank, "world_size": a.world}
dist.init_process_group("coord", init_method=a.init, timeout=timedelta(seconds=a.timeout), **kw)
rank, world = dist.get_rank(), dist.get_world_size()


def fail(msg):
    print(f"rank {rank}: {msg}", flush=True)
    sys.exit(3)


# torch's store for this run: nothing an earlier run of the job, or another
# job, wrote may be seen here.
if rank == 0:
    runs = dist.distributed_c10d._get_default_store().add("runs that counted here", 1)
    if runs != 1:
        fail(f"an earlier run's key is visible: {runs - 1} runs counted before this one")

t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
if t.tolist() != [world * (world + 1) / 2] * 4:
    fail(f"all_reduce: {t.tolist()}")
if a.fail_first_attempt and rank == 1 and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
    print(f"rank {rank}: dying in attempt 0", flush=True)
    os._exit(1)
sub = dist.new_group(list(range(world)), backend="coord")
dist.all_reduce(t, group=sub)
if t.tolist() != [world * world * (world + 1) / 2] * 4:
    fail(f"all_reduce on a subgroup: {t.tolist()}")

if a.hold:
    if rank == 0:
        open(os.path.join(a.hold, "formed"), "w").close()
    release = os.path.join(a.hold, "release")
    deadline = time.monotonic() + 120
    while not os.path.exists(release):  # held by the test, not synchronisation between ranks
        if time.monotonic() > deadline:
            fail("never released")
        time.sleep(0.05)
    dist.barrier()

job = c10d_coord.job()
print(f"rank {rank}: ok, job {job}", flush=True)
dist.destroy_process_group()
