"""worker.py's cases of training: DDP against gloo (with PowerSGD too),
uneven inputs under c10d_coord.join(), and the DDP-join hang report's
cases, joined or not."""
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord
from worker_common import fail, let_go, rank, world


def train(pg, steps, hook=None):
    """A small DDP model, the same seed everywhere and different data per
    rank; returns the flattened weights after `steps` steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp = DDP(model, process_group=pg)
    if hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as P
        state = P.PowerSGDState(process_group=pg, matrix_approximation_rank=1,
                                start_powerSGD_iter=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, P.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g)
        loss = ddp(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def case_ddp(hook=None):
    gloo = dist.new_group(backend="gloo")  # over the coord store: checks it too
    ours = train(None, 6, hook)
    theirs = train(gloo, 6, hook)
    let_go(gloo)
    # gloo under our checks: gloo's own sums, to the bit
    if "cpu:gloo" in c10d_coord.data_plane() and not torch.equal(ours, theirs):
        fail(f"DDP weights over checked gloo differ from gloo's: max |diff| "
             f"{(ours - theirs).abs().max().item()}")
    if not torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6):
        fail(f"DDP weights differ from gloo's: max |diff| {(ours - theirs).abs().max().item()}")
    every = [torch.empty_like(ours) for _ in range(world)]
    dist.all_gather(every, ours)
    if any(not torch.equal(every[0], w) for w in every):
        fail("DDP weights differ between ranks")


def case_join():
    """Uneven inputs with DDP and a barrier after every step (the hang
    report's case 4): rank r has 5 + r batches; under c10d_coord.join() every
    rank finishes, the last joiner is the last rank, weights agree."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    with c10d_coord.join(modules=[ddp]) as j:
        for i in range(5 + rank):
            loss = ddp(torch.full((3, 4), float(rank + i))).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            dist.barrier()
    if j.last_joiner != world - 1:
        fail(f"last joiner {j.last_joiner}")
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.empty_like(w) for _ in range(world)]
    dist.all_gather(every, w)
    if any(not torch.equal(every[0], x) for x in every):
        fail("weights differ after the join region")


def case_six(kase):
    """The DDP-join hang report, world 2: rank 0 has 5 batches, rank 1 has 6,
    one gradient all_reduce per step (docs/join.md). With c10d_coord.join()
    (cases 1, 4, 6) both ranks finish with the same weights and last joiner
    1. Without it (2, 3, 5) and with torch's model.join() plus a barrier (4t),
    every rank still waiting raises within 2 s, naming ranks and
    collectives; gloo hangs in each until its timeout."""
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    batches = 5 + rank

    def step(i, barrier_each):
        loss = ddp(torch.full((3, 4), float(rank + i))).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if barrier_each:
            dist.barrier()

    if kase in ("1", "4", "6"):
        with c10d_coord.join(modules=[ddp]) as j:
            for i in range(batches):
                step(i, kase == "4")
        if kase == "6":
            dist.barrier()
        if j.last_joiner != 1:
            fail(f"case {kase}: last joiner {j.last_joiner}")
        w = torch.cat([p.detach().flatten() for p in model.parameters()])
        every = [torch.empty_like(w) for _ in range(world)]
        dist.all_gather(every, w)
        if not torch.equal(every[0], every[1]):
            fail(f"case {kase}: weights differ")
        return
    t0 = None
    try:
        if kase == "4t":  # torch's own Join, with a barrier each step
            with ddp.join():
                for i in range(batches):
                    step(i, True)
                    t0 = time.time()
        else:
            for i in range(batches):
                step(i, kase == "3")
                t0 = time.time()
            if kase == "5":
                dist.barrier()
            t0 = time.time()
    except RuntimeError as e:
        took = time.time() - (t0 or time.time())
        msg = str(e)
        if "rank" not in msg or "#" not in msg:
            fail(f"case {kase}: the report names no rank or collective: {msg}")
        if took > 2.0:
            fail(f"case {kase}: raised {took:.1f} s after the last step")
        print(f"rank {rank}: case {kase} raised as expected: {msg[:240]}", flush=True)
        os._exit(0)
    if rank == 0 and kase in ("2", "3"):
        # Rank 0 is done and leaves; rank 1's extra step must fail, not hang.
        dist.destroy_process_group()
        print(f"rank {rank}: case {kase} left after its last step", flush=True)
        os._exit(0)
    fail(f"case {kase}: finished, but rank 1 has one step more")
