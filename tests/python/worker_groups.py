"""worker.py's cases of groups and what the coordinator shows of them:
subgroups on the coord backend, torch's group names as jobs, the store
and c10d-ctl's views from Python, and the data plane chosen in code."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

import c10d_coord
from worker_common import fail, rank, world


def case_subgroups():
    """new_group with the coord backend: the even ranks and the odd ones
    (world 4), each its own group; all_to_all of lists; monitored_barrier."""
    evens = dist.new_group(ranks=[0, 2], backend="coord")
    odds = dist.new_group(ranks=[1, 3], backend="coord")
    mine = evens if rank % 2 == 0 else odds
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    want = 2.0 if rank % 2 == 0 else 4.0
    if t.item() != want:
        fail(f"subgroup all_reduce: {t.item()}, want {want}")
    dist.barrier(group=mine)
    ins = [torch.full((2,), float(rank * 10 + i)) for i in range(world)]
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, ins)
    if [o[0].item() for o in outs] != [float(r * 10 + rank) for r in range(world)]:
        fail(f"all_to_all: {[o.tolist() for o in outs]}")
    # split sizes: rank r sends r+1+i rows to rank i
    ins_sizes = [rank + 1 + i for i in range(world)]
    outs_sizes = [r + 1 + rank for r in range(world)]
    inp = torch.cat([torch.full((k, 3), float(rank * 100 + i)) for i, k in enumerate(ins_sizes)])
    out = torch.empty(sum(outs_sizes), 3)
    dist.all_to_all_single(out, inp, outs_sizes, ins_sizes)
    want = torch.cat([torch.full((k, 3), float(r * 100 + rank)) for r, k in enumerate(outs_sizes)])
    if not torch.equal(out, want):
        fail(f"all_to_all_single with split sizes: {out[:, 0].tolist()}")
    # rank 0 sends nothing at all (its input has no rows)
    ins_sizes = [0 if rank == 0 else 2] * world
    outs_sizes = [0 if r == 0 else 2 for r in range(world)]
    inp = torch.full((sum(ins_sizes), 3), float(rank))
    out = torch.empty(sum(outs_sizes), 3)
    dist.all_to_all_single(out, inp, outs_sizes, ins_sizes)
    if out[:, 0].tolist() != [float(r) for r in range(1, world) for _ in range(2)]:
        fail(f"all_to_all_single, rank 0 sending nothing: {out[:, 0].tolist()}")
    c10d_coord.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=True)


def case_named():
    """init_process_group(group_name="main"), then two subgroups: each
    meets on the coordinator as its own job, named by torch's group name,
    never the world's (the world is C10D_JOB itself)."""
    a = dist.new_group(ranks=list(range(world)), backend="coord")
    b = dist.new_group(ranks=[0, 1], backend="coord")
    for g, want in ((None, world), (a, world), (b, 2)):
        if g is b and rank > 1:
            continue
        t = torch.ones(1)
        dist.all_reduce(t, group=g)
        if t.item() != want:
            fail(f"all_reduce in {g}: {t.item()}, want {want}")
    dist.barrier()
    job = os.environ["C10D_JOB"]
    s = c10d_coord.StoreCoord(os.environ["C10D_COORD"])
    names = sorted(j["job"] for j in s.jobs() if j["job"].startswith(job))
    if len(names) != 3 or job not in names or \
            any(not n.startswith(job + ".g") for n in names if n != job):
        fail(f"jobs on the coordinator: {names}")
    sizes = {j["job"]: j["world_size"] for j in s.jobs()}
    if sorted(sizes[n] for n in names) != sorted([world, world, 2]):
        fail(f"job sizes: {sizes}")
    dist.barrier()


def case_ops():
    """The store and what c10d-ctl shows, from Python."""
    s = c10d_coord.StoreCoord(os.environ["C10D_COORD"])
    s.set(f"test/{rank}", b"x")
    try:  # a key with a NUL byte is refused, not cut at the NUL
        s.set("test/a\0b", b"y")
        fail("a key with a NUL byte was taken")
    except ValueError as e:
        if "NUL" not in str(e):
            fail(f"NUL key refused with: {e}")
    if s.add("test/count", 1) < 1:
        fail("store add")
    s.wait([f"test/{r}" for r in range(world)])
    dist.all_reduce(torch.ones(1))
    dist.barrier()
    job = os.environ["C10D_JOB"]
    jobs = s.jobs(job)
    if len(jobs) != 1 or jobs[0]["world_size"] != world or \
            any(m["state"] != "alive" for m in jobs[0]["members"]):
        fail(f"jobs: {jobs}")
    h = s.health(job, "world")
    if not h or h[0]["status"] != "OK" or len(h[0]["ranks"]) != world:
        fail(f"health: {h}")
    t = s.trace(job, "world", rank)
    if not any("ALL_REDUCE" in r["what"] for r in t):
        fail(f"trace: {t}")
    dist.barrier()


def case_options():
    """The data plane chosen in code (Options.data_plane, no
    C10D_DATA_PLANE): the default group's is its subgroups' too."""
    sub = dist.new_group(list(range(world)))
    for g, name in ((None, "world"), (sub, "subgroup")):
        if not c10d_coord.data_plane(g).startswith("cpu:gloo"):
            fail(f"{name}: data plane {c10d_coord.data_plane(g)}")
        t = torch.ones(3)
        dist.all_reduce(t, group=g)
        if t.tolist() != [float(world)] * 3:
            fail(f"{name}: all_reduce {t.tolist()}")
    print(f"rank {rank}: options ok", flush=True)
