"""One rank of a torch job on the coord backend, run by test_torch_backend.py
through c10d-run (which sets C10D_COORD, RANK, WORLD_SIZE). argv[1] names
the case; a rank exits 0 when its checks held and prints why otherwise.

One file of ~650 lines on purpose: each case_* is one rank's side of one
test in test_torch_backend.py, which c10d-run starts as `worker.py CASE`;
a module per case would only multiply the imports and the entry point."""
import os
import re
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord

rank = int(os.environ["RANK"])
if os.environ.get("WORKER_DUMP_AFTER"):  # debugging a hang: every thread's stack
    import faulthandler
    faulthandler.dump_traceback_later(int(os.environ["WORKER_DUMP_AFTER"]), exit=True)
world = int(os.environ["WORLD_SIZE"])


def fail(msg):
    print(f"rank {rank}: {msg}", flush=True)
    sys.exit(3)


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


# gloo groups a case is done with, freed only when the process exits (let_go)
KEPT = []


def let_go(group):
    """Destroys a gloo group and keeps it until the process exits. torch's
    gloo group destroys itself on its own worker thread when a then()
    callback there drops the last reference (PowerSGD's callbacks hold their
    group), and that aborts: "Resource deadlock avoided" (torch 1.13); so
    this waits until only the caller refers to it. Freed by the caller's
    `del`, it would deadlock now and then (torch 2.6): the freeing thread
    holds the GIL while it joins gloo's worker threads, and one of them may
    still be freeing the last collective's tensors, which needs the GIL.
    Kept, it is freed at exit, gloo's threads long idle."""
    dist.destroy_process_group(group)
    deadline = time.monotonic() + 60
    # the caller's name, this parameter, getrefcount's argument
    while sys.getrefcount(group) > 3:
        if time.monotonic() > deadline:
            fail(f"gloo's callbacks still hold its group: {sys.getrefcount(group)} references")
        time.sleep(0.001)  # gloo's threads need the GIL to let go
    KEPT.append(group)


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


def case_collectives():
    gloo = dist.new_group(backend="gloo")
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8, torch.int8):
        base = (torch.arange(6, dtype=torch.float64) + rank * 3 + 1).to(dt)
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
            a, b = base.clone(), base.clone()
            dist.all_reduce(a, op=op)
            dist.all_reduce(b, op=op, group=gloo)
            if not torch.equal(a, b):
                fail(f"all_reduce {dt} {op}: {a.tolist()} vs gloo {b.tolist()}")
        a, b = base.clone(), base.clone()
        dist.broadcast(a, src=world - 1)
        dist.broadcast(b, src=world - 1, group=gloo)
        if not torch.equal(a, b):
            fail(f"broadcast {dt}")
        outs_a = [torch.empty_like(base) for _ in range(world)]
        outs_b = [torch.empty_like(base) for _ in range(world)]
        dist.all_gather(outs_a, base)
        dist.all_gather(outs_b, base, group=gloo)
        if any(not torch.equal(x, y) for x, y in zip(outs_a, outs_b)):
            fail(f"all_gather {dt}")
    flags = torch.tensor([rank == 0, True, False])
    dist.all_reduce(flags)  # bool SUM: a logical or
    if flags.tolist() != [True, True, False]:
        fail(f"bool all_reduce: {flags.tolist()}")
    # non-contiguous: a column of a matrix
    m = torch.arange(12, dtype=torch.float32).reshape(4, 3) * (rank + 1)
    col = m[:, 1]
    dist.all_reduce(col)
    want = torch.arange(12, dtype=torch.float32).reshape(4, 3)[:, 1] * sum(range(1, world + 1))
    # (gloo, under our checks or not, takes a non-contiguous tensor's
    # storage as contiguous: its result is gloo's, wrong alike)
    if "cpu:gloo" not in c10d_coord.data_plane() and not torch.equal(m[:, 1], want):
        fail(f"non-contiguous all_reduce: {m[:, 1].tolist()} vs {want.tolist()}")
    out = torch.empty(world * 2)
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)))
    if out.tolist() != [float(r) for r in range(world) for _ in range(2)]:
        fail(f"all_gather_into_tensor: {out.tolist()}")
    rs = torch.empty(2)
    dist.reduce_scatter_tensor(rs, torch.arange(world * 2, dtype=torch.float32))
    if rs.tolist() != [float(world * (rank * 2 + k)) for k in range(2)]:
        fail(f"reduce_scatter_tensor: {rs.tolist()}")
    w = dist.all_reduce(torch.ones(3), async_op=True)
    w.wait()
    if not w.is_completed() or w.get_future().value()[0].tolist() != [float(world)] * 3:
        fail("async all_reduce: future")
    if rank == 0:
        dist.send(torch.tensor([7.0]), dst=1)
    elif rank == 1:
        t = torch.zeros(1)
        dist.recv(t, src=0)
        if t.item() != 7.0:
            fail(f"recv: {t.item()}")
    dist.barrier()


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


def case_alltoall():
    """all_to_all of lists of different sizes (gloo has no all_to_all of
    lists, so against what each rank sent): rank r sends (r + i + 1, 2)
    elements of value 10r + i to rank i; then a rank that expects another
    size than its peer sends is told which, and the peer completes."""
    for dt in (torch.float32, torch.int64, torch.uint8, torch.bool):
        ins = [torch.full((rank + i + 1, 2), rank * 10 + i).to(dt) for i in range(world)]
        outs = [torch.empty((r + rank + 1, 2), dtype=dt) for r in range(world)]
        dist.all_to_all(outs, ins)
        want = [torch.full((r + rank + 1, 2), r * 10 + rank).to(dt) for r in range(world)]
        if any(not torch.equal(a, b) for a, b in zip(outs, want)):
            fail(f"all_to_all {dt}: {[o.tolist() for o in outs]}")
    # a rank sending nothing to some peers, and a non-contiguous output
    ins = [torch.arange(3.0) + rank if i != rank else torch.empty(0) for i in range(world)]
    big = torch.empty(3, world)
    outs = [big[:, r] if r != rank else torch.empty(0) for r in range(world)]
    dist.all_to_all(outs, ins)
    for r in range(world):
        if r != rank and big[:, r].tolist() != (torch.arange(3.0) + r).tolist():
            fail(f"all_to_all into columns: {big.tolist()}")
    # rank 0 expects 3 elements from the last rank, which sends 2
    last = world - 1
    ins = [torch.ones(2) for _ in range(world)]
    outs = [torch.empty(3 if rank == 0 and r == last else 2) for r in range(world)]
    try:
        dist.all_to_all(outs, ins)
    except RuntimeError as e:
        if rank != 0 or f"rank {last} sent 2 elements to rank 0, which expected 3" not in str(e):
            fail(f"the size mismatch was reported as: {e}")
        print(f"rank {rank}: raised as expected: {e}", flush=True)
    else:
        if rank == 0:
            fail("rank 0 expected 3 elements and got 2 without an error")
    dist.barrier()  # everyone's call completed: the group is still usable


def case_timeout(which):
    """Timeouts: the group's (init_process_group(timeout=2 s) here) or a
    per-call one (an options struct's timeout, 1 s). Rank 1 arrives late;
    rank 0 raises within the timeout (+1 s), naming rank 1 and the call.
    The group is unusable after (as NCCL's after an abort): rank 1's late
    call raises too."""
    if rank == 1:
        time.sleep(4)  # past the timeout: rank 0 has given up by now
        try:
            dist.all_reduce(torch.ones(1))
        except RuntimeError as e:
            print(f"rank {rank}: raised as expected: {str(e)[:200]}", flush=True)
            os._exit(0)
        fail("the late all_reduce returned after rank 0 timed out")
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    opts.timeout = timedelta(seconds=1)
    budget, call = {"call": (1.0, lambda: pg.allreduce([torch.ones(1)], opts).wait()),
                    "group": (2.0, lambda: dist.all_reduce(torch.ones(1)))}[which]
    t0 = time.time()
    try:
        call()
    except RuntimeError as e:
        took = time.time() - t0
        msg = str(e)
        if "rank 1" not in msg or "ALL_REDUCE" not in msg or "ETIMEDOUT" not in msg:
            fail(f"{which} timeout: the report names no rank or call: {msg}")
        if not re.search(" (Timed out|closed|timeout) ", msg):  # what torch's own tests look for
            fail(f"{which} timeout: the report does not say 'Timed out' as gloo's: {msg}")
        if not budget - 0.05 <= took <= budget + 1.0:
            fail(f"{which} timeout of {budget} s raised after {took:.2f} s: {msg}")
        print(f"rank {rank}: {which} timeout raised after {took:.2f} s: {msg[:200]}",
              flush=True)
        os._exit(0)
    fail(f"{which}: the all_reduce returned without rank 1")


def case_cuda():
    """CUDA tensors (the NCCL data plane), against torch's nccl backend in
    the same job: collectives with data checks, then DDP's weights. Each
    rank uses GPU rank % device_count (one GPU with world 2 needs an NCCL
    that allows several ranks per GPU)."""
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    nccl = dist.new_group(backend="nccl")
    for dt in (torch.float32, torch.float16, torch.int64):
        base = (torch.arange(8, dtype=torch.float64, device=dev) + rank + 1).to(dt)
        a, b = base.clone(), base.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=nccl)
        if not torch.equal(a, b):
            fail(f"cuda all_reduce {dt}: {a.tolist()} vs nccl {b.tolist()}")
        a, b = base.clone(), base.clone()
        dist.broadcast(a, src=world - 1)
        dist.broadcast(b, src=world - 1, group=nccl)
        if not torch.equal(a, b):
            fail(f"cuda broadcast {dt}")
        oa = torch.empty(world * 8, dtype=dt, device=dev)
        ob = torch.empty_like(oa)
        dist.all_gather_into_tensor(oa, base)
        dist.all_gather_into_tensor(ob, base, group=nccl)
        if not torch.equal(oa, ob):
            fail(f"cuda all_gather_into_tensor {dt}")
        ra = torch.empty(8 // world if 8 % world == 0 else 0, dtype=dt, device=dev)
        if ra.numel():
            rb = torch.empty_like(ra)
            dist.reduce_scatter_tensor(ra, base)
            dist.reduce_scatter_tensor(rb, base, group=nccl)
            if not torch.equal(ra, rb):
                fail(f"cuda reduce_scatter_tensor {dt}")
    w = dist.all_reduce(torch.ones(4, device=dev), async_op=True)
    w.wait()
    # DDP on CUDA: coord against nccl
    def train(pg):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(dev)
        ddp = DDP(model, device_ids=[dev], process_group=pg)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(6):
            loss = ddp(torch.randn(32, 8, generator=g).to(dev)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return torch.cat([p.detach().flatten() for p in model.parameters()])
    ours, theirs = train(None), train(nccl)
    if not torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6):
        fail(f"CUDA DDP weights differ from nccl's: max |diff| "
             f"{(ours - theirs).abs().max().item()}")
    print(f"rank {rank}: CUDA collectives and DDP equal nccl's", flush=True)


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


def case_lastref():
    """A then() callback holds the last reference to a group, and the
    group's lane thread runs it (the call was queued and ran there while
    the main thread went on): the group is destroyed on that thread. Its
    destructor stops the lane, the thread it runs on (before, it joined
    itself: "Resource deadlock avoided")."""
    import threading
    job = os.environ["C10D_JOB"]
    s = c10d_coord.StoreCoord(os.environ["C10D_COORD"])
    sub = dist.new_group(backend="coord")
    sub_job = [j["job"] for j in s.jobs() if j["job"].startswith(job + ".g")]
    t = torch.ones(4)
    if rank == 1:  # rank 0's call completes on its lane thread only after this
        s.wait(["lastref-dropped"])
    work = dist.all_reduce(t, group=sub, async_op=True)
    ran = threading.Event()
    work.get_future().then(lambda f, g=sub: ran.set())
    dist.destroy_process_group(sub)
    del sub
    if rank == 0:
        s.set("lastref-dropped", "1")
    work.wait()
    if not ran.wait(60) or t.tolist() != [float(world)] * 4:
        fail(f"the callback ran: {ran.is_set()}, all_reduce gave {t.tolist()}")
    # the group's destructor ran on the lane thread: this rank left its job
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = [m for j in s.jobs() if j["job"] in sub_job for m in j["members"]
                if m["rank"] == rank and m["state"] == "left"]
        if left:
            break
        time.sleep(0.01)
    else:
        fail(f"rank {rank} never left the subgroup's job {sub_job}")
    dist.barrier()


def case_ring():
    """batch_isend_irecv around a ring with messages larger than a link
    holds: every isend waits on a rank that is itself sending (gloo's
    don't deadlock; ours did before sends read while they wait)."""
    for numel in (16, 1 << 16, 1 << 22):
        out = torch.arange(numel, dtype=torch.float32) + rank
        got = torch.empty(numel)
        ops = [dist.P2POp(dist.isend, out, (rank + 1) % world),
               dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        if not torch.equal(got, torch.arange(numel, dtype=torch.float32) + (rank - 1) % world):
            fail(f"ring of {numel} floats: got {got[:4].tolist()}...")
    dist.barrier()


def case_coalesced():
    """all_gather_coalesced (torch's deprecated API; gloo runs it) against
    gloo: lists of tensors of different shapes, empty ones among them,
    float and int64, one collective on coord."""
    gloo = dist.new_group(backend="gloo")
    for dt in (torch.float32, torch.int64):
        ins = [torch.full((2, 2), rank + 1).to(dt), torch.ones(0, dtype=dt),
               torch.arange(5, dtype=dt) * (rank + 1), torch.full((1, 3, 1), 7 * rank).to(dt)]
        ours = [[torch.full_like(t, -1) for t in ins] for _ in range(world)]
        theirs = [[torch.full_like(t, -1) for t in ins] for _ in range(world)]
        dist.all_gather_coalesced(ours, ins)
        dist.all_gather_coalesced(theirs, ins, group=gloo)
        for r in range(world):
            for a, b in zip(ours[r], theirs[r]):
                if not torch.equal(a, b):
                    fail(f"all_gather_coalesced {dt} from rank {r}: {a.tolist()} vs gloo "
                         f"{b.tolist()}")
    let_go(gloo)


def case_anysource():
    """Receives from any source (torch's recv without src): the last rank
    receives from every other, sync (dist.recv returns the sender) and
    async (the Work's _source_rank()), and each message names its sender."""
    last = world - 1
    if rank == last:
        senders = []
        for i in range(2 * (world - 1)):
            t = torch.full((10,), -1.0)
            if i % 2 == 0:
                sender = dist.recv(t)
            else:
                w = dist.irecv(t)
                w.wait()
                sender = w._source_rank()
            if not (0 <= sender < last) or not t.eq(sender).all():
                fail(f"recv from any source: sender {sender}, tensor {t.tolist()}")
            senders.append(sender)
        if sorted(senders) != sorted(list(range(last)) * 2):
            fail(f"senders {senders}")
    else:
        for _ in range(2):
            dist.send(torch.full((10,), float(rank)), last)
    dist.barrier()


def case_batchtags():
    """torch 1.13's batch_isend_irecv as its own test calls it: for every
    peer an irecv first, then an isend, with tags and without, small and
    larger than a link holds (it stalled: each rank's irecv waited for a
    send the peer would only make after its own irecv)."""
    for tags in (False, True):
        for numel in (10, 1 << 20):
            ops, got = [], {}
            for peer in range(world):
                if peer == rank:
                    continue
                got[peer] = torch.full((numel,), -1.0)
                ops.append(dist.P2POp(dist.irecv, got[peer], peer, tag=peer if tags else 0))
                ops.append(dist.P2POp(dist.isend, torch.arange(numel, dtype=torch.float32) + rank,
                                      peer, tag=rank if tags else 0))
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            for peer, t in got.items():
                if not torch.equal(t, torch.arange(numel, dtype=torch.float32) + peer):
                    fail(f"batch_isend_irecv (tags {tags}, {numel}) from {peer}: "
                         f"{t[:4].tolist()}...")
    dist.barrier()


def case_posted():
    """An irecv holds nothing up, as on gloo: irecv, all_reduce, then a
    sync send on both ranks (it stalled until the timeout); is_completed()
    and get_future() never block; wait(timeout) past its limit raises
    "Timed out" and leaves the receive posted, which then completes."""
    peer = 1 - rank
    got = torch.full((4,), -1.0)
    w = dist.irecv(got, peer)
    t = torch.ones(1)
    dist.all_reduce(t)
    dist.send(torch.full((4,), float(rank)), peer)
    w.wait()
    if t.item() != 2 or not got.eq(peer).all():
        fail(f"irecv, all_reduce, send: {t.item()}, {got.tolist()}")
    late = torch.full((3,), -1.0)
    w = dist.irecv(late, peer, tag=7)
    fut = w.get_future()  # returns at once: a thread completes it
    if w.is_completed() or fut.done():
        fail("a receive completed before its message was sent")
    t0 = time.monotonic()
    try:
        w.wait(timeout=timedelta(milliseconds=300))
        fail("wait(300 ms) returned without a message")
    except RuntimeError as e:
        if "Timed out" not in str(e) or time.monotonic() - t0 > 5:
            fail(f"wait(300 ms): {e} after {time.monotonic() - t0:.1f} s")
    dist.barrier()
    dist.send(torch.full((3,), 10.0 + rank), peer, tag=7)
    if not fut.wait()[0].eq(10.0 + peer).all() or not w.is_completed():
        fail(f"the receive after its wait timed out: {late.tolist()}")
    w.wait()
    dist.barrier()


def case_sparse():
    """Sparse COO all_reduce (SUM) against gloo: indices that overlap and
    that do not, sparse and dense dimensions, float values that round:
    the same result, bit for bit, as gloo's."""
    gloo = dist.new_group(backend="gloo")
    g = torch.Generator().manual_seed(7 + rank)
    shapes = [((6,), 1), ((4, 3), 2), ((5, 2, 3), 1), ((3, 4, 2), 2)]
    for size, sparse_dims in shapes:
        nnz = 2 + rank
        idx = torch.stack([torch.randint(0, size[d], (nnz,), generator=g)
                           for d in range(sparse_dims)])
        val = torch.randn((nnz,) + size[sparse_dims:], generator=g)
        base = torch.sparse_coo_tensor(idx, val, size)
        a, b = base.clone(), base.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        if not (a.is_sparse and torch.equal(a._indices(), b._indices()) and
                torch.equal(a._values(), b._values()) and a.is_coalesced() == b.is_coalesced()):
            fail(f"sparse all_reduce {size}: {a} vs gloo {b}")
    try:
        dist.all_reduce(torch.ones(3).to_sparse(), op=dist.ReduceOp.MAX)
        fail("a sparse MAX all_reduce ran")
    except (RuntimeError, ValueError) as e:
        if "SUM" not in str(e):
            fail(f"sparse MAX refused with: {e}")
    let_go(gloo)


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


def case_desync():
    """Rank 0 calls barrier, the others all_reduce (case 3's kind of
    mistake): every rank raises, naming the collectives, within 2 s."""
    t0 = time.time()
    try:
        if rank == 0:
            dist.barrier()
        else:
            dist.all_reduce(torch.ones(4))
    except RuntimeError as e:
        took = time.time() - t0
        msg = str(e)
        if "desync" not in msg or "BARRIER" not in msg or "ALL_REDUCE" not in msg:
            fail(f"the report does not name the desync: {msg}")
        if took > 2.0:
            fail(f"raised after {took:.1f} s")
        if hasattr(dist, "DistBackendError") and not isinstance(e, dist.DistBackendError):
            fail(f"torch {torch.__version__} has DistBackendError, but {type(e)} was raised")
        print(f"rank {rank}: raised as expected: {msg[:200]}", flush=True)
        os._exit(0)  # the group is unusable now: leave without destroy
    fail("the mismatched collective returned")


def case_killed():
    """Rank 1 is SIGKILLed in the middle of training: the others raise
    within 2 s, naming it."""
    if rank == 1:
        dist.all_reduce(torch.ones(1))
        os.kill(os.getpid(), 9)
    dist.all_reduce(torch.ones(1))
    t0 = time.time()
    try:
        for _ in range(1000):
            dist.all_reduce(torch.ones(1))
            time.sleep(0.001)
    except RuntimeError as e:
        took = time.time() - t0
        if "rank 1" not in str(e):
            fail(f"the report does not name rank 1: {e}")
        if took > 2.0:
            fail(f"raised after {took:.1f} s")
        print(f"rank {rank}: raised as expected: {str(e)[:200]}", flush=True)
        os._exit(0)
    fail("no error after rank 1 died")


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


def case_exiting(how):
    """The program ends while a finished call's then() callback still runs
    on the data plane's thread (a Python one: it needs the GIL). Freed
    or run after the interpreter has begun to exit, it would abort the
    process ("terminate called without an active exception"). "wait":
    wait() returns once the callbacks have run, as on gloo; "left": the
    program leaves the group and exits, the call's work dropped unwaited."""
    t = torch.ones(1 << 16)
    w = dist.all_reduce(t, async_op=True)
    ran = []

    def slow(f):
        time.sleep(0.3)
        ran.append(f.value()[0][0].item())
        return f.value()

    w.get_future().then(slow)
    if how == "wait":
        w.wait()
        if ran != [float(world)]:
            fail(f"wait() returned before the future's callbacks ran: {ran}")
    print(f"rank {rank}: exiting ({how})", flush=True)


def case_returns_at_once():
    """A call returns before its peers have entered it (the default): rank
    0's async all_reduce is not completed while rank 1 has not called
    its own, which rank 1 does only once rank 0 says so through the store
    (with calls that complete before they return, rank 0 would never get
    there). A plain call after it waits for both, in order."""
    store = dist.distributed_c10d._get_default_store()
    t = torch.tensor([float(rank + 1)])
    if rank == 0:
        w = dist.all_reduce(t, async_op=True)
        if w.is_completed():
            fail("all_reduce completed before rank 1 entered it")
        u = torch.ones(1)
        w2 = dist.all_reduce(u, async_op=True)  # queued behind the first
        store.set("returned", "1")
        w2.wait()
        if not w.is_completed() or t.item() != 3.0 or u.item() != world:
            fail(f"after wait: {t.item()}, {u.item()}")
    else:
        store.wait(["returned"])
        dist.all_reduce(t)
        u = torch.ones(1)
        dist.all_reduce(u)
        if t.item() != 3.0 or u.item() != world:
            fail(f"rank 1: {t.item()}, {u.item()}")
    print(f"rank {rank}: returned at once", flush=True)


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
