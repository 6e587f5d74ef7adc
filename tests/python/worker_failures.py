"""worker.py's cases of a rank told what went wrong: a group's or a
call's timeout, a desync, and a peer SIGKILLed, each named within its
limit."""
import os
import re
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from worker_common import fail, rank


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
