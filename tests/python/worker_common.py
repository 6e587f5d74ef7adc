"""What worker.py's cases share: this rank and its world (from c10d-run's
environment), how a rank fails, and how a case lets go of a gloo group."""
import os
import sys
import time

import torch.distributed as dist


rank = int(os.environ["RANK"])
if os.environ.get("WORKER_DUMP_AFTER"):  # debugging a hang: every thread's stack
    import faulthandler
    faulthandler.dump_traceback_later(int(os.environ["WORKER_DUMP_AFTER"]), exit=True)
world = int(os.environ["WORLD_SIZE"])


def fail(msg):
    print(f"rank {rank}: {msg}", flush=True)
    sys.exit(3)


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
