"""torch's own gloo under the coordinator's checks (C10D_DATA_PLANE=cpu:gloo,
docs/pytorch.md "Keep your backend, add the checks"): the backend "coord"
checks each call, then issues it on a ProcessGroupGloo made over the run's
store. The same worker cases as on our own data plane (worker.py), each a
job on the session's coordinator: DDP's weights equal plain gloo's to the
bit, the hang report's six cases (1, 4, 6 finish under c10d_coord.join();
the others raise on every rank within 2 s naming the calls), a desync and
a killed rank named, in SYNC, ASYNC and OFF. torch 2.x only."""

import pytest

from conftest import import_torch_and_c10d_coord, run_worker

torch, c10d_coord = import_torch_and_c10d_coord()
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip(f"torch {torch.__version__}: torch's backends under our checks are torch 2.x's",
                allow_module_level=True)

GLOO = {"C10D_DATA_PLANE": "cpu:gloo"}


@pytest.fixture(autouse=True)
def _the_sessions_coordinator(coordinator):
    global COORD
    COORD = coordinator.url


def run(case, n=2, timeout=180, env=None, args=()):
    return run_worker(COORD, case, n, timeout, {**GLOO, **(env or {})}, args)


@pytest.mark.parametrize("mode", ["sync", "async", "off"])
def test_ddp_over_checked_gloo_equals_plain_gloo_to_the_bit(mode):
    rc, out = run("ddp", env={"C10D_VERIFY": mode})
    assert rc == 0, out


@pytest.mark.parametrize("how", ["wait", "left"])
def test_exit_while_a_callback_runs_does_not_abort(how):
    """gloo frees a finished call on its own thread after its waiter wakes;
    the process ends cleanly however late that thread runs."""
    for _ in range(3):
        rc, out = run("exiting", args=(how,))
        assert rc == 0 and out.count(f"exiting ({how})") == 2, out
        assert "terminate called" not in out, out


@pytest.mark.parametrize("case", ["collectives", "coalesced", "sparse", "ring"])
def test_collectives_over_checked_gloo(case):
    rc, out = run(case)
    assert rc == 0, out


def test_subgroups_over_checked_gloo():
    rc, out = run("subgroups", n=4)
    assert rc == 0, out


def test_an_async_call_returns_before_its_peers_enter_it_under_async():
    """ASYNC reports alongside: the call is gloo's at once. (SYNC checks
    before gloo is entered: an async_op call returns once every rank has
    entered it, docs/pytorch.md.)"""
    rc, out = run("returns_at_once", env={"C10D_VERIFY": "async"})
    assert rc == 0, out


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_desync_over_checked_gloo_raises_on_every_rank(mode):
    rc, out = run("desync", env={"C10D_VERIFY": mode})
    assert rc == 0, out
    assert out.count("raised as expected") == 2, out


def test_a_killed_rank_over_checked_gloo_is_named():
    rc, out = run("killed")
    assert rc == 128 + 9, out
    assert "rank 0: raised as expected" in out, out


# Each case in one mode, and case 4 in both: on our own data plane every
# case runs in every mode (test_torch_backend.py), and the CI's time is short.
@pytest.mark.parametrize("kase,mode", [("1", "async"), ("4", "async"), ("6", "async"),
                                       ("4", "sync")])
def test_six_cases_that_join_finish_over_checked_gloo(kase, mode):
    rc, out = run("six", env={"C10D_VERIFY": mode}, args=(kase,))
    assert rc == 0, out


@pytest.mark.parametrize("kase,mode", [("2", "sync"), ("3", "sync"), ("5", "sync"),
                                       ("4t", "sync"), ("3", "async"), ("5", "async")])
def test_six_cases_without_our_join_raise_over_checked_gloo(kase, mode):
    rc, out = run("six", env={"C10D_VERIFY": mode}, args=(kase,))
    assert rc == 0, out
    assert "raised as expected" in out, out


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("which", ["group", "call"])
def test_timeouts_over_checked_gloo(which, mode):
    """The group's timeout and a call's: SYNC's check times out naming the
    rank that did not come; under ASYNC the coordinator's stall report or
    gloo's own timeout, whichever is first, names it."""
    rc, out = run("timeout", env={"C10D_VERIFY": mode}, args=(which,))
    assert rc == 0, out
    assert f"{which} timeout raised" in out and "rank 1: raised as expected" in out, out


def test_the_data_plane_chosen_in_code_is_the_subgroups_too():
    rc, out = run("options", env={"C10D_DATA_PLANE": ""})
    assert rc == 0, out
    assert out.count("options ok") == 2, out


def test_a_bad_data_plane_is_refused_saying_what_is_wanted():
    rc, out = run("collectives", env={"C10D_DATA_PLANE": "cpu:nccl"})
    assert rc != 0
    assert "nccl moves CUDA tensors only" in out, out
