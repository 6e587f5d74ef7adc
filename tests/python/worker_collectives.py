"""worker.py's cases of collectives, each against what torch's own
backend makes of the same call (gloo, or nccl on CUDA tensors): every
collective on several dtypes, all_to_all of lists, all_gather_coalesced,
sparse all_reduce, and CUDA tensors."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import c10d_coord
from worker_common import fail, let_go, rank, world


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
