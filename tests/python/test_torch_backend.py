"""The torch.distributed backend "coord" (python/c10d_coord) with PyTorch's
own DDP, ranks as real processes (tests/python/worker.py) launched by
c10d-run, every test a job of its own on the session's one long-lived
coordinator (conftest.py), as users run job after job. Skipped, with the
reason, where PyTorch or the built extension is missing; scripts/test.sh
builds it first."""
import os

import pytest

from conftest import import_torch_and_c10d_coord, run_worker

torch, c10d_coord = import_torch_and_c10d_coord()



@pytest.fixture(autouse=True)
def _the_sessions_coordinator(coordinator):
    global COORD
    COORD = coordinator.url


def run(case, n=2, timeout=180, env=None, args=()):
    return run_worker(COORD, case, n, timeout, env, args)


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
def test_ddp_matches_gloo(mode):
    rc, out = run("ddp", env={"C10D_VERIFY": mode})
    assert rc == 0, out


def test_ddp_world4_matches_gloo():
    rc, out = run("ddp", n=4)
    assert rc == 0, out


def test_ddp_powersgd_hook_matches_gloo():
    rc, out = run("powersgd")
    assert rc == 0, out


def test_subgroups_all_to_all_and_monitored_barrier():
    rc, out = run("subgroups", n=4)
    assert rc == 0, out


@pytest.mark.parametrize("n", [2, 3])
def test_all_to_all_of_different_sizes(n):
    rc, out = run("alltoall", n=n)
    assert rc == 0, out
    assert out.count("raised as expected") == 1, out


@pytest.mark.parametrize("which", ["group", "call"])
def test_timeouts_of_the_group_and_of_a_call(which):
    rc, out = run("timeout", args=(which,))
    assert rc == 0, out
    assert f"{which} timeout raised" in out and "rank 1: raised as expected" in out, out


@pytest.mark.parametrize("n", [1, 2])
def test_cuda_collectives_and_ddp_match_nccl(n):
    """On a GPU machine (scripts/gpu-check.sh): CUDA tensors through the C
    library's NCCL data plane, equal to torch's nccl backend."""
    if not c10d_coord._C.has_cuda:
        pytest.skip(f"torch {torch.__version__} has no CUDA: c10d_coord takes CPU tensors only")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if n > torch.cuda.device_count() and os.environ.get("NCCL_MULTI_RANK_GPU_ENABLE") != "1":
        pytest.skip(f"world {n} on {torch.cuda.device_count()} GPU(s) needs NCCL >= 2.30 "
                    "with NCCL_MULTI_RANK_GPU_ENABLE=1")
    rc, out = run("cuda", n=n)
    assert rc == 0, out
    assert out.count("equal nccl's") == n, out


@pytest.mark.parametrize("n", [2, 3])
def test_batch_isend_irecv_ring_of_large_messages(n):
    rc, out = run("ring", n=n)
    assert rc == 0, out


def test_subgroups_of_a_named_default_group():
    """A default group named by the user used to leave torch's group count
    at 0, so the first subgroup met as the world's job."""
    rc, out = run("named", n=3)
    assert rc == 0, out


def test_store_jobs_health_and_trace_from_python():
    rc, out = run("ops")
    assert rc == 0, out


def test_collectives_match_gloo():
    rc, out = run("collectives")
    assert rc == 0, out


def test_all_gather_coalesced_matches_gloo():
    rc, out = run("coalesced", n=3)
    assert rc == 0, out


@pytest.mark.parametrize("n", [2, 3])
def test_recv_from_any_source_names_the_sender(n):
    rc, out = run("anysource", n=n)
    assert rc == 0, out


@pytest.mark.parametrize("n", [2, 3])
def test_batch_isend_irecv_irecv_first_with_and_without_tags(n):
    """torch 1.13's batch_isend_irecv issues irecv before isend on every
    rank: every rank's irecv waited for a send issued after it (a stall
    until the timeout, 20 s here)."""
    rc, out = run("batchtags", n=n)
    assert rc == 0, out


def test_irecv_holds_nothing_up_and_honours_its_wait_limit():
    """irecv; all_reduce; send on both ranks stalled until the timeout; a
    Work's wait(timeout) ignored the limit and get_future() blocked."""
    rc, out = run("posted", n=2)
    assert rc == 0, out


def test_sparse_all_reduce_matches_gloo():
    rc, out = run("sparse", n=3)
    assert rc == 0, out


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
def test_join_with_a_barrier_every_step(mode):
    """The hang report's case 4: DDP, uneven inputs, a barrier each step."""
    rc, out = run("join", env={"C10D_VERIFY": mode})
    assert rc == 0, out


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
def test_a_desync_raises_on_every_rank(mode):
    rc, out = run("desync", env={"C10D_VERIFY": mode})
    assert rc == 0, out
    assert out.count("raised as expected") == 2, out


def test_a_killed_rank_is_named():
    rc, out = run("killed")
    assert rc == 128 + 9, out  # c10d-run reports the rank that went first
    assert "rank 0: raised as expected" in out, out


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
@pytest.mark.parametrize("kase", ["1", "4", "6"])
def test_six_cases_that_join_finish(kase, mode):
    rc, out = run("six", env={"C10D_VERIFY": mode}, args=(kase,))
    assert rc == 0, out


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
@pytest.mark.parametrize("kase", ["2", "3", "5", "4t"])
def test_six_cases_without_our_join_raise(kase, mode):
    """2, 3, 5: no join; 4t: torch's model.join() with a barrier each step,
    where torch's extra all_reduces pair with the barrier."""
    rc, out = run("six", env={"C10D_VERIFY": mode}, args=(kase,))
    assert rc == 0, out
    assert "raised as expected" in out, out


def test_a_call_returns_before_its_peers_enter_it():
    """The default: a call is queued and returns at once with a Work that
    completes later, as gloo's does (rank 0's all_reduce is not completed
    while rank 1, waiting on rank 0's word through the store, has not
    called its own; calls that complete before they return never get
    there)."""
    rc, out = run("returns_at_once", timeout=120)
    assert rc == 0, out
    assert out.count("returned at once") == 2, out


@pytest.mark.parametrize("case", ["powersgd", "collectives", "join", "desync"])
def test_calls_completed_before_return(case):
    """C10D_TORCH_ASYNC=0: every call runs to completion before it returns
    (the other tests run the default, queued calls)."""
    rc, out = run(case, env={"C10D_TORCH_ASYNC": "0", "C10D_VERIFY": "async"})
    assert rc == 0, out


def test_queued_call_drops_the_last_reference_to_its_group():
    """The lane's thread that runs a then() callback holding the last
    reference to a group destroys the group there (torch's PowerSGD hook
    captures its group this way): the process must go on, not abort."""
    rc, out = run("lastref")
    assert rc == 0, out
