"""One rank of a DDP training step benchmark (run by
tests/bench/run_ddp_bench.sh through c10d-run): `torch_ddp_bench.py
BACKEND [STEPS]`, BACKEND coord or gloo. A model of eight 512x512 linear
layers (1 MiB of float32 weights each) with 1 MiB buckets and a batch of
16, so DDP issues eight gradient all_reduces per step as backward
produces them, and they weigh in the step; a queued call lets them overlap
the rest of backward (where a core is free for it). Rank 0 prints the median
step time and the mean of the fastest half."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord  # noqa: F401

backend = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.set_num_threads(1)  # two ranks on two cores: one thread each
dist.init_process_group(backend)
rank = dist.get_rank()
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [nn.Linear(512, 512), nn.ReLU()]
model = DDP(nn.Sequential(*layers), bucket_cap_mb=1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
g = torch.Generator().manual_seed(rank)
x = torch.randn(16, 512, generator=g)
times = []
for i in range(steps + 5):
    t0 = time.perf_counter()
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i >= 5:
        times.append(time.perf_counter() - t0)
times.sort()
if rank == 0:
    mode = os.environ.get("C10D_VERIFY", "sync") if backend == "coord" else "-"
    queued = os.environ.get("C10D_TORCH_ASYNC", "1") != "0" if backend == "coord" else True
    fast = statistics.mean(times[:len(times) // 2])
    print(f"ddp {backend} verify={mode} queued={int(queued)} step median="
          f"{statistics.median(times) * 1e3:.2f}ms fastest-half={fast * 1e3:.2f}ms", flush=True)
dist.destroy_process_group()
