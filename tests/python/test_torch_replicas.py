"""The PyTorch package and c10d-run on a replicated coordinator
(docs/replication.md): three real `c10d-coord --replica` processes on
loopback; torch ranks name all three (coord://H1:P1,H2:P2,H3:P3 or
C10D_COORD=LIST under c10d-run), are sent to the leader, and a job that
formed before the leader was killed with SIGKILL finishes after it."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BUILD, COORD_BIN
from test_torch_jobs import JOB, RUN, by_hand, env, finish, wait_for

CTL = os.path.join(BUILD, "client", "c10d-ctl")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replicas:
    """Three replicas, their data and logs in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="c10d-pytest-replicas-")
        self.ports = [free_port() for _ in range(3)]
        self.peers = ",".join(f"{i + 1}=127.0.0.1:{free_port()}" for i in range(3))
        self.urls = ",".join(f"tcp://127.0.0.1:{p}" for p in self.ports)
        self.procs = {}
        for i in (1, 2, 3):
            self.start(i)

    def start(self, i):
        log = open(os.path.join(self.dir.name, f"log{i}"), "a")
        self.procs[i] = subprocess.Popen(
            [COORD_BIN, "--replica", str(i), "--peers", self.peers,
             "--listen", f"tcp://127.0.0.1:{self.ports[i - 1]}",
             "--data-dir", os.path.join(self.dir.name, f"data{i}"), "--raft-latency-ms", "50"],
            stdout=log, stderr=subprocess.STDOUT)

    def leader(self, timeout=30):
        """The replica that leads, as c10d-ctl status says through the list."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = subprocess.run([CTL, "--coord", self.urls, "status"], capture_output=True,
                               text=True, timeout=30, env={**os.environ, "C10D_TIMEOUT_MS": "2000"})
            for line in p.stdout.splitlines():
                if line.startswith("database") and "leading" in line:
                    return int(line.split("replica ", 1)[1].split()[0])
            time.sleep(0.05)
        pytest.fail(f"no replica leads:\n{self.logs()}")

    def logs(self):
        out = []
        for i in (1, 2, 3):
            with open(os.path.join(self.dir.name, f"log{i}")) as f:
                out.append(f"--- replica {i}\n{f.read()[-3000:]}")
        return "\n".join(out)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.dir.cleanup()


@pytest.fixture(scope="module")
def replicas():
    if not os.access(COORD_BIN, os.X_OK):
        pytest.skip(f"{COORD_BIN} is not built")
    probe = subprocess.run([COORD_BIN, "--version"], capture_output=True, text=True)
    if "replicas (--replica): on" not in probe.stdout:
        pytest.skip("c10d-coord was built without dqlite (libdqlite-dev)")
    r = Replicas()
    r.leader()
    yield r
    r.stop()


def coord_list(r, name):
    return "coord://" + ",".join(u.split("://", 1)[1] for u in r.urls.split(",")) + "/" + name


def test_torch_ranks_reach_the_leader_through_the_list(replicas):
    rcs, out = finish(by_hand(coord_list(replicas, "replicated-by-hand")))
    assert rcs == [0, 0], out
    assert out.count(": ok, job replicated-by-hand") == 2, out


def test_c10d_run_takes_the_list(replicas):
    p = subprocess.run([RUN, "-q", "-n", "2", "--coord", replicas.urls, "--job", "replicated-run",
                        "--", sys.executable, JOB, "--timeout", "30"],
                       env=env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": ok, job replicated-run") == 2, p.stdout


def test_a_torch_job_finishes_after_the_leader_is_killed(replicas):
    old = replicas.leader()
    with tempfile.TemporaryDirectory() as hold:
        procs = by_hand(coord_list(replicas, "replicated-failover"), hold=hold, timeout=60)
        wait_for(os.path.join(hold, "formed"), procs, "the job forming")
        replicas.procs[old].kill()  # SIGKILL: its engine process dies with it
        replicas.procs[old].wait()
        new = replicas.leader()
        open(os.path.join(hold, "release"), "w").close()
        rcs, out = finish(procs)
    replicas.start(old)  # back as a follower, for the tests after
    assert new != old
    assert rcs == [0, 0], f"{out}\n{replicas.logs()}"
    assert out.count(": ok, job replicated-failover") == 2, out
