"""The hang c10d-coord exists to end: DDP with uneven inputs and no join.

Rank 1 runs out of data one step before rank 0 and goes on to the barrier
after its loop, while rank 0 is still in its last step's backward, whose
gradient all_reduce rank 1 will never join. On gloo or nccl the two wait
on each other until the timeout, and the error names no rank and no
collective. On the coord backend the coordinator sees BARRIER against
ALL_REDUCE at the same collective number and fails both ranks at once,
naming them, their calls, their hosts and pids.

    c10d-run -n 2 --coord tcp://127.0.0.1:29700 --job hang -- python3 uneven_hang.py coord
    torchrun --standalone --nproc_per_node 2 uneven_hang.py gloo

The fix for the job itself is join (c10d_coord.join(), or torch's Join),
which lets a rank that ran out of data shadow the others' collectives
(docs/join.md). BACKEND is coord (default) or gloo; UNEVEN_TIMEOUT_S is
init_process_group's timeout (default 10 s, to keep gloo's wait short)."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

backend = sys.argv[1] if len(sys.argv) > 1 else "coord"
if backend == "coord":
    import c10d_coord  # noqa: F401  (registers the backend and coord's env://)
timeout = datetime.timedelta(seconds=float(os.environ.get("UNEVEN_TIMEOUT_S", "10")))
dist.init_process_group(backend, timeout=timeout)
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = 4 if rank == 0 else 3  # rank 1's data ends a step early
where, since = "", time.monotonic()
try:
    for step in range(batches):
        where, since = f"step {step}", time.monotonic()
        loss = model(torch.randn(32, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP's gradient all_reduce
        opt.step()
    where, since = "the barrier after the loop", time.monotonic()
    dist.barrier()
    sys.stdout.write(f"rank {rank}: finished\n")
except Exception as e:  # what the user sees
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    # one write of the whole line: ranks sharing a terminal do not glue lines
    sys.stdout.write(f"rank {rank}: failed in {where} after {time.monotonic() - since:.2f} s: "
                     f"{first[:600]}\n")
    sys.stdout.flush()
    sys.exit(1)
finally:
    try:
        dist.destroy_process_group()
    except Exception:
        pass
