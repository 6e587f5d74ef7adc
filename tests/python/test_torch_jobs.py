"""Jobs as teams run them: one long-lived coordinator (conftest.py's, for
the whole session) serving torch jobs one after another and side by side,
launched by c10d-run, by torchrun, or by hand with coord://. Real torch
processes (tests/python/job.py, docs/examples/train_linear.c for C ranks)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BUILD, ROOT, import_torch_and_c10d_coord, with_pkg_path

torch, c10d_coord = import_torch_and_c10d_coord()

RUN = os.path.join(BUILD, "client", "c10d-run")
CTL = os.path.join(BUILD, "client", "c10d-ctl")
JOB = os.path.join(ROOT, "tests", "python", "job.py")
TRAIN_C = os.path.join(BUILD, "docs", "examples", "train_linear")
# The running Python's torchrun (a venv's torch, not Debian's /usr/bin/torchrun).
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def env(coord=None, **extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("C10D_", "MASTER_", "TORCHELASTIC_")) and
         k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    with_pkg_path(e)
    if coord:
        e["C10D_COORD"] = coord.url
    e.update(extra)
    return e


def by_hand(init, world=2, hold=None, timeout=20, extra_env=None):
    """world ranks of job.py started by hand (no launcher), each told its
    rank: the way a script with coord://HOST:PORT is run."""
    args = ["--init", init, "--world", str(world), "--timeout", str(timeout)]
    if hold:
        args += ["--hold", hold]
    return [subprocess.Popen([sys.executable, JOB, *args, "--rank", str(r)],
                             env=env(**(extra_env or {})), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
            for r in range(world)]


def finish(procs, timeout=90):
    outs, rcs = [], []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(killed: still running after the test's deadline)"
        outs.append(out)
        rcs.append(p.returncode)
    return rcs, "\n".join(outs)


def launch(coord, n=2, job=None, hold=None, timeout=20):
    cmd = [RUN, "-q", "-n", str(n), "--coord", coord.url]
    if job:
        cmd += ["--job", job]
    cmd += ["--", sys.executable, JOB, "--timeout", str(timeout)]
    if hold:
        cmd += ["--hold", hold]
    return subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def wait_for(path, procs, what, timeout=60):
    """Waits until path exists (a job reached a state), failing early with
    the processes' output if one of them ended first."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        done = [p for p in procs if p.poll() is not None]
        if done or time.monotonic() > deadline:
            rcs, out = finish(procs, timeout=5)
            pytest.fail(f"{what} never happened (exit {rcs}):\n{out}")
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["coord-named", "coord-unnamed", "c10d-run-same-job",
                                 "c10d-run-new-job"])
def test_runs_in_a_row_on_one_coordinator(coordinator, how):
    """The same job three times on one coordinator: each run gets a store of
    its own (before, the second run waited in torch's store-based barrier
    until its timeout: the first run's counter was still there)."""
    for i in range(3):
        if how.startswith("coord"):
            name = "/in-a-row" if how == "coord-named" else ""
            rcs, out = finish(by_hand(f"coord://127.0.0.1:{coordinator.port}{name}"))
        else:
            p = launch(coordinator, job="in-a-row-c10d-run" if how.endswith("same-job") else None)
            rcs, out = finish([p])
        assert rcs == [0] * len(rcs), f"run {i + 1}:\n{out}"
        assert out.count(": ok, job ") == 2, out
    if how == "coord-named":
        assert "job in-a-row" in out, out


def run_keys(coordinator, job):
    """c10d-ctl keys --job: the keys of job's current run."""
    p = subprocess.run([CTL, "--coord", coordinator.url, "keys", "--job", job],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_a_runs_store_is_on_the_coordinator_until_the_run_is_over(coordinator):
    """torch's keys are the run's on the coordinator (c10d-ctl keys --job
    shows them while it runs) and are removed once every rank has left."""
    hold = tempfile.mkdtemp()
    try:
        a = by_hand(f"coord://127.0.0.1:{coordinator.port}/visible", hold=hold)
        wait_for(os.path.join(hold, "formed"), a, "the job formed")
        during = run_keys(coordinator, "visible")
        open(os.path.join(hold, "release"), "w").close()
        rcs, out = finish(a)
    finally:
        shutil.rmtree(hold)
    assert rcs == [0, 0], out
    assert "jobs/visible/" in during and "runs that counted here" in during, during
    deadline = time.monotonic() + 30
    while "jobs/visible/" in run_keys(coordinator, "visible"):  # removed within a sweep or so
        assert time.monotonic() < deadline, run_keys(coordinator, "visible")
        time.sleep(0.1)


def test_two_jobs_at_once(coordinator):
    """Two jobs side by side on one coordinator, each with its own name (the
    launcher's: c10d-run's run-<pid>), both held running at once."""
    d1, d2 = tempfile.mkdtemp(), tempfile.mkdtemp()
    try:
        a = launch(coordinator, hold=d1)
        b = launch(coordinator, hold=d2)
        wait_for(os.path.join(d1, "formed"), [a, b], "job A formed")
        wait_for(os.path.join(d2, "formed"), [a, b], "job B formed")
        open(os.path.join(d1, "release"), "w").close()
        open(os.path.join(d2, "release"), "w").close()
        rcs, out = finish([a, b])
        assert rcs == [0, 0], out
        assert out.count(": ok, job run-") == 4, out
    finally:
        shutil.rmtree(d1)
        shutil.rmtree(d2)


@pytest.mark.parametrize("world_b", [2, 3])
def test_a_second_unnamed_job_is_refused_saying_how_to_name_it(coordinator, world_b):
    """Two scripts with coord://HOST:PORT and no name are both job
    "default": the second is refused at once, told how to name jobs, and
    the first runs on undisturbed (world 3: a rank the running job does not
    have must not start a new generation under it)."""
    hold = tempfile.mkdtemp()
    url = f"coord://127.0.0.1:{coordinator.port}"
    try:
        a = by_hand(url, hold=hold)
        wait_for(os.path.join(hold, "formed"), a, "the first job formed")
        t0 = time.monotonic()
        rcs_b, out_b = finish(by_hand(url, world=world_b, timeout=60), timeout=30)
        took = time.monotonic() - t0
        open(os.path.join(hold, "release"), "w").close()
        rcs_a, out_a = finish(a)
    finally:
        shutil.rmtree(hold)
    assert rcs_a == [0, 0], f"the running job was disturbed:\n{out_a}"
    assert all(rc != 0 for rc in rcs_b), out_b
    assert took < 20, f"the second job took {took:.1f} s to be refused:\n{out_b}"
    assert "C10D_JOB" in out_b and "coord://HOST:PORT/NAME" in out_b, out_b


def torch_tcpstore_works():
    """Whether this PyTorch can make the TCPStore torchrun's rendezvous
    makes: from 2.4 it asks for libuv, and one built without it (Debian
    13's 2.6) fails, whatever USE_LIBUV says (docs/launcher.md)."""
    try:
        torch.distributed.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    except RuntimeError as e:
        if "libuv" in str(e):
            return False
        raise
    return True


TCPSTORE_WORKS = torch_tcpstore_works()
NO_TCPSTORE = ("torchrun's static rendezvous always makes a TCPStore with libuv, which this "
               "PyTorch was built without (USE_LIBUV is not read there: pytorch/pytorch#148283)")


def torchrun(coord, rdzv, prog, *args, n=2, no_python=False, port=None, restarts=0):
    cmd = TORCHRUN + [f"--nproc_per_node={n}", f"--max_restarts={restarts}"]
    extra, rdzv_file = {}, None
    if rdzv == "standalone" and TCPSTORE_WORKS:
        cmd.append("--standalone")
    elif rdzv == "standalone":
        # What --standalone is (the c10d rendezvous, a fresh uuid for the
        # run id) on a file store: torchrun's one rendezvous that makes no
        # TCPStore, so it runs on a PyTorch built without libuv. A rank's
        # env:// without C10D_COORD is then torch's own store, which reads
        # USE_LIBUV, at --local_addr (else the host's name, which a chroot
        # may not resolve).
        import uuid
        run_id = str(uuid.uuid4())
        rdzv_file = os.path.join(tempfile.gettempdir(), f"rdzv-{run_id}")
        cmd += ["--rdzv_backend=c10d", f"--rdzv_id={run_id}", "--rdzv_conf=store_type=file",
                f"--rdzv_endpoint={rdzv_file}", "--local_addr=127.0.0.1"]
        extra.update(TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1", USE_LIBUV="0")
    elif TCPSTORE_WORKS:
        cmd += ["--rdzv_backend=static", f"--master_port={port or free_port()}"]
    else:
        pytest.skip(NO_TCPSTORE)
    # torch 1.13's torchrun fails on Python 3.11 without these (its own bug:
    # docs/launcher.md)
    cmd += ["--redirects", "2", "--tee", "2"]
    if no_python:
        cmd.append("--no_python")
    cmd += [prog, *args]
    try:
        return subprocess.run(cmd, env=env(coord, **extra), capture_output=True, text=True,
                              timeout=180)
    finally:
        if rdzv_file and os.path.exists(rdzv_file):
            os.unlink(rdzv_file)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("rdzv", ["standalone", "static"])
def test_torchrun_runs_python_and_c_ranks(coordinator, rdzv):
    """torchrun with the coordinator named in the environment (C10D_COORD):
    Python ranks on the coord backend, twice in a row, then C ranks. The job
    is named after torchrun's run (its --standalone uuid, or, for the static
    rendezvous, its store's port on this host: a run in a row on the same
    port is the job's next generation, with a fresh store)."""
    import socket
    port = free_port()
    for _ in range(2):
        p = torchrun(coordinator, rdzv, JOB, port=port)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.count(": ok, job ") == 2, p.stdout + p.stderr
        if rdzv == "static":
            assert f": ok, job torchrun-{socket.gethostname()}:{port}" in p.stdout, p.stdout
    c = torchrun(coordinator, rdzv, TRAIN_C, "50", no_python=True)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "weights identical on 2 of 2 ranks" in c.stdout, c.stdout + c.stderr


def test_torchrun_restarts_a_failed_job_as_a_new_run(coordinator):
    """torchrun --max_restarts: rank 1 dies in the first attempt, torchrun
    restarts both ranks under the same run id; the restarted ranks meet as
    the job's next generation, with a store of their own (the first
    attempt's keys are not seen), and finish."""
    p = torchrun(coordinator, "standalone", JOB, "--fail-first-attempt", restarts=1)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "rank 1: dying in attempt 0" in out, out
    assert p.stdout.count(": ok, job ") == 2, out


def test_torchrun_without_a_coordinator_says_so_at_once():
    """No C10D_COORD under torchrun: MASTER_ADDR:MASTER_PORT is torchrun's
    TCPStore. Both kinds of rank say so at once instead of retrying it."""
    t0 = time.monotonic()
    py = torchrun(None, "standalone", JOB)
    c = torchrun(None, "standalone", TRAIN_C, "50", no_python=True)
    took = time.monotonic() - t0
    assert py.returncode != 0 and "set C10D_COORD" in py.stdout + py.stderr, py.stdout + py.stderr
    assert c.returncode != 0 and "torchrun's own store" in c.stdout + c.stderr, \
        c.stdout + c.stderr
    assert took < 60, f"{took:.0f} s"
