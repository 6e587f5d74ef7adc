"""The coord backend through torch.distributed, one rank of it (run by
tests/bench/run_torch_bench.sh through c10d-run): a 4 B and a 64 MiB
all_reduce, printed as bench_coll prints the C library's, so the two
(and the gloo anchor) compare line by line; and the 4 B one with
async_op=True and a wait at once."""
import os
import time

import torch
import torch.distributed as dist

import c10d_coord  # noqa: F401

dist.init_process_group("coord")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.ones(1)
for _ in range(50):
    dist.all_reduce(x)
n = 2000
t0 = time.perf_counter()
for _ in range(n):
    dist.all_reduce(x)
small = (time.perf_counter() - t0) / n
# The same with async_op=True and a wait at once: on torch 2.x this call
# is queued (a plain call, asyncOp=False, runs now), so the difference is
# the hand-off to the lane and back.
t0 = time.perf_counter()
for _ in range(n):
    dist.all_reduce(x, async_op=True).wait()
queued = (time.perf_counter() - t0) / n
y = torch.ones((1 << 26) // 4)
for _ in range(2):
    dist.all_reduce(y)
t0 = time.perf_counter()
for _ in range(5):
    dist.all_reduce(y)
big = (time.perf_counter() - t0) / 5
if rank == world - 1:
    mode = os.environ.get("C10D_VERIFY", "sync")
    print(f"torch coord world={world} verify={mode} allreduce(4B)={small * 1e6:.1f}us "
          f"async+wait(4B)={queued * 1e6:.1f}us allreduce(64MiB)={big * 1e3:.2f}ms")
dist.destroy_process_group()
