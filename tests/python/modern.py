"""torch 2.x's distributed API on a CPU DeviceMesh, one rank of a job that
c10d-run starts (test_torch2.py): `modern.py BACKEND OUT`, BACKEND coord or
gloo (gloo under c10d-run keeps its store on the coordinator). Each step
checks its own result and raises on a wrong one; rank 0 writes to OUT (a
torch.save'd dict) the FSDP2 model's final full weights, which the test
compares bit for bit between the two backends, and what torch said where
it refuses a feature on a CPU mesh."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

import c10d_coord  # noqa: F401 (registers "coord", coord:// and env:// with C10D_COORD)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

backend, out_path = sys.argv[1], sys.argv[2]
# Eager init: device_id makes torch form the group at once (and bind the
# default group to that device, which split_group asks for); torch 2.13
# takes an accelerator's only, whatever the backend.
refused = {}
try:
    dist.init_process_group(backend, device_id=torch.device("cpu"))
except ValueError as e:  # after the rendezvous: the world formed is let go with e
    refused["init_process_group(device_id=cpu)"] = str(e).splitlines()[0]
if "init_process_group(device_id=cpu)" in refused:
    dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()


def check(cond, what):
    if not cond:
        raise AssertionError(f"rank {rank}: {what}")


# all_gather_into_tensor and reduce_scatter_tensor, flat.
x = torch.arange(4, dtype=torch.float32) + 10 * rank
g = torch.empty(4 * world)
dist.all_gather_into_tensor(g, x)
check(torch.equal(g, torch.cat([torch.arange(4.0) + 10 * r for r in range(world)])),
      f"all_gather_into_tensor: {g}")
rs = torch.empty(2)
dist.reduce_scatter_tensor(rs, torch.arange(2.0 * world) + rank)
want = sum(torch.arange(2.0 * world) + r for r in range(world))[2 * rank:2 * rank + 2]
check(torch.equal(rs, want), f"reduce_scatter_tensor: {rs}, want {want}")

# _coalescing_manager: all_reduces and all_gather_into_tensors in one block.
from torch.distributed.distributed_c10d import _coalescing_manager  # noqa: E402
ts = [torch.full((3,), float(rank + i)) for i in range(3)]
with _coalescing_manager(async_ops=True) as cm:
    for t in ts:
        dist.all_reduce(t)
cm.wait()
for i, t in enumerate(ts):
    check(torch.equal(t, torch.full((3,), float(sum(r + i for r in range(world))))),
          f"coalesced all_reduce {i}: {t}")
outs = [torch.empty(2 * world) for _ in range(2)]
with _coalescing_manager():
    for i, o in enumerate(outs):
        dist.all_gather_into_tensor(o, torch.full((2,), float(rank * 10 + i)))
for i, o in enumerate(outs):
    check(torch.equal(o, torch.cat([torch.full((2,), float(r * 10 + i)) for r in range(world)])),
          f"coalesced all_gather_into_tensor {i}: {o}")

# barrier(device_ids): torch 2.13 takes device ids for an accelerator only.
try:
    dist.barrier(device_ids=[0])
except (RuntimeError, ValueError) as e:
    refused["barrier(device_ids)"] = str(e).splitlines()[0]
dist.barrier()

# A DeviceMesh and DTensor redistribution.
mesh = init_device_mesh("cpu", (world,))
full = torch.arange(4.0 * world * 3).reshape(4 * world, 3)
d = distribute_tensor(full, mesh, [Shard(0)])
check(d.to_local().shape == (4, 3), f"Shard(0) local shape {d.to_local().shape}")
r = d.redistribute(mesh, [Replicate()])
check(torch.equal(r.to_local(), full), "Shard(0) -> Replicate")
p = DTensor.from_local(torch.ones(2, 2) * (rank + 1), mesh, [Partial()])
pr = p.redistribute(mesh, [Replicate()])
check(torch.equal(pr.to_local(), torch.ones(2, 2) * sum(range(1, world + 1))),
      f"Partial -> Replicate: {pr.to_local()}")
s1 = r.redistribute(mesh, [Shard(1)])
check(torch.equal(s1.full_tensor(), full), "Replicate -> Shard(1) -> full")

# new_group, and split_group where torch takes it for a CPU group.
sub = dist.new_group([0, 1])
t = torch.tensor([float(rank)])
dist.all_reduce(t, group=sub)
check(t.item() == 1.0, f"new_group all_reduce: {t}")
try:
    sg = dist.split_group(split_ranks=[[0], [1]] if world == 2 else [list(range(world))])
    t = torch.ones(1)
    dist.all_reduce(t, group=sg)
except RuntimeError as e:
    refused["split_group"] = str(e).splitlines()[0]

# FSDP2: a small model sharded over the mesh, trained a few steps on each
# rank's own data; the final full weights are the test's to compare.
# torch 2.6's fully_shard fails on a CPU mesh in its own all-gather, before
# any collective ("'Stream' object has no attribute 'record_event'"), on
# any backend: there the rest is checked without it.
weights, loss = {}, None
if tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) < (2, 7):
    refused["fully_shard on a CPU mesh (torch < 2.7)"] = "'Stream' object has no attribute " \
        "'record_event'"
    dist.destroy_process_group()
    if rank == 0:
        torch.save({"weights": weights, "refused": refused, "loss": loss}, out_path)
    print(f"rank {rank}: modern API ok on {backend} (refused: {sorted(refused)})", flush=True)
    sys.exit(0)
from torch.distributed.fsdp import fully_shard  # noqa: E402
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                      nn.Linear(16, 4))
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
gen = torch.Generator().manual_seed(100 + rank)
for step in range(5):
    inp = torch.randn(6, 8, generator=gen)
    tgt = torch.randn(6, 4, generator=gen)
    loss = nn.functional.mse_loss(model(inp), tgt)
    loss.backward()
    opt.step()
    opt.zero_grad()
weights = {k: v.full_tensor() for k, v in model.state_dict().items()}
loss = loss.item()

dist.destroy_process_group()
if rank == 0:
    torch.save({"weights": weights, "refused": refused, "loss": loss}, out_path)
print(f"rank {rank}: modern API ok on {backend} (refused: {sorted(refused)})", flush=True)
