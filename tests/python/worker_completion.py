"""worker.py's cases of when calls complete and what outlives them: a
then() callback holding the last reference to its group, the program
exiting while a callback runs, and calls that return before their peers
have entered them."""
import os
import time

import torch
import torch.distributed as dist

import c10d_coord
from worker_common import fail, rank, world


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
