"""worker.py's cases of point-to-point calls: batch_isend_irecv rings
larger than a link holds, receives from any source, torch 1.13's
batch_isend_irecv with tags, and receives posted before their sends."""
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from worker_common import fail, rank, world


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
