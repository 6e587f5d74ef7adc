"""PyTorch DDP on the coord backend, with uneven inputs (docs/pytorch.md).

    c10d-run -n 4 -- /usr/bin/python3 docs/examples/train_ddp.py
    C10D_COORD=tcp://HOST:PORT torchrun --standalone --nproc_per_node=2 docs/examples/train_ddp.py

Each rank has a different number of batches (8 + 3*rank); under
c10d_coord.join() the ranks that run out shadow the others' gradient
all_reduces, and at the end every rank prints the same checksum of the
weights (the last joiner's, which join() hands to everyone).
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord

dist.init_process_group("coord")  # env://: C10D_COORD, RANK, WORLD_SIZE (c10d-run, torchrun)
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
g = torch.Generator().manual_seed(rank)
w_true = torch.arange(8, dtype=torch.float32) / 8
batches = 8 + 3 * rank
with c10d_coord.join(modules=[model]) as j:
    for step in range(batches):
        x = torch.randn(32, 8, generator=g)
        loss = (model(x).squeeze(1) - x @ w_true).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
total = sum(p.detach().double().sum().item() for p in model.parameters())
# one write of the whole line: ranks sharing a terminal do not glue lines
sys.stdout.write(f"rank {rank}: {batches} batches, last loss {loss.item():.4f}, last joiner "
                 f"{j.last_joiner}, weights checksum {total:.6f}\n")
sys.stdout.flush()
dist.destroy_process_group()
