"""One rank of the checked-gloo benchmark (run by
tests/bench/run_checked_bench.sh through c10d-run, world 2):
`torch_checked_bench.py BACKEND LABEL`, BACKEND gloo or coord (the data
plane from C10D_DATA_PLANE, verification from C10D_VERIFY). In one process,
one after the other: a control round trip to the coordinator (the median
`get` of an existing key on the default store, which under c10d-run is the
run's store on the coordinator, both ranks getting at once), the time per
call of a 4 B all_reduce (2,000 calls after 50) and of a 1 MiB one (200
after 10), and a DDP step (the model of torch_ddp_bench.py: eight 512x512
linear layers, 1 MiB buckets, a batch of 16, 30 steps after 5, median).
Rank 0 prints one line per metric: `LABEL METRIC VALUE_US` (a note: `# ...`).
Under TORCH_DISTRIBUTED_DEBUG=DETAIL there is no DDP step: torch 2.13's DDP
segfaults there as it is constructed, on plain gloo too."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord

backend, label = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)  # two ranks on two cores: one thread each
dist.init_process_group(backend)
rank = dist.get_rank()
if backend == "coord":
    # the data plane asked for is the one in use
    want = os.environ.get("C10D_DATA_PLANE", "coord")
    got = c10d_coord.data_plane()
    assert got.startswith(f"cpu:{want.split(':')[-1]}"), (want, got)


def out(metric, seconds):
    if rank == 0:
        print(f"{label} {metric} {seconds * 1e6:.2f}", flush=True)


# Control round trip: a get of a key that is there.
store = dist.distributed_c10d._get_default_store()
if rank == 0:
    store.set("checked_bench/key", b"x" * 16)
dist.barrier()
for _ in range(100):
    store.get("checked_bench/key")
rtts = []
for _ in range(1000):
    t0 = time.perf_counter()
    store.get("checked_bench/key")
    rtts.append(time.perf_counter() - t0)
out("rtt", statistics.median(rtts))
dist.barrier()


def per_call(t, warm, n):
    for _ in range(warm):
        dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(t)
    return (time.perf_counter() - t0) / n


out("ar4B", per_call(torch.ones(1), 50, 2000))
out("ar1MiB", per_call(torch.ones((1 << 20) // 4), 10, 200))

if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
    # torch 2.13's DDP segfaults under DETAIL (c10d::Logger::set_env_variables,
    # constructing DDP), on gloo with torch's own TCPStore too
    if rank == 0:
        print(f"# {label}: no DDP step: torch's DDP segfaults under "
              f"TORCH_DISTRIBUTED_DEBUG=DETAIL", flush=True)
    dist.destroy_process_group()
    sys.exit(0)
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [nn.Linear(512, 512), nn.ReLU()]
model = DDP(nn.Sequential(*layers), bucket_cap_mb=1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(rank)
x = torch.randn(16, 512, generator=g)
times = []
for i in range(35):
    t0 = time.perf_counter()
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i >= 5:
        times.append(time.perf_counter() - t0)
out("ddp", statistics.median(times))
dist.destroy_process_group()
