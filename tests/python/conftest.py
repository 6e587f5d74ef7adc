"""What the PyTorch tests share: the build's paths, torch and the extension
or the reason they are skipped, and one coordinator for the whole session,
as users run it (job after job, jobs side by side, on one long-lived
c10d-coord with its SQLite file), not a fresh one per test."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("C10D_BUILD_DIR", os.path.join(ROOT, "build"))
COORD_BIN = os.path.join(BUILD, "server", "c10d-coord")
# Where the ranks import c10d_coord from: the checkout's in-place build
# (scripts/build-torch.sh) unless C10D_PYTHONPATH says otherwise; set empty,
# the package installed in the running Python (scripts/test.sh's torch 2.13
# venv, pip-installed as users install it).
PKG_PATH = os.environ.get("C10D_PYTHONPATH", os.path.join(ROOT, "python"))


def with_pkg_path(env):
    """env (a dict) with PYTHONPATH naming where c10d_coord comes from."""
    env.pop("PYTHONPATH", None)
    if PKG_PATH:
        env["PYTHONPATH"] = PKG_PATH
    return env


RUN = os.path.join(BUILD, "client", "c10d-run")
WORKER = os.path.join(ROOT, "tests", "python", "worker.py")


def run_worker(coord, case, n=2, timeout=180, env=None, args=()):
    """One job of n ranks of worker.py's case on the coordinator at coord,
    launched by c10d-run: (exit status, what the ranks printed)."""
    e = with_pkg_path(dict(os.environ))
    e.pop("MASTER_ADDR", None)
    e.update(env or {})
    p = subprocess.run([RUN, "-q", "-n", str(n), "--coord", coord, "--", sys.executable, WORKER,
                        case, *args],
                       env=e, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def import_torch_and_c10d_coord():
    """torch and the built extension (python/c10d_coord), for a test module
    to call as it is imported: where either is missing, the whole module is
    skipped with the reason (reported at the caller's line)."""
    __tracebackhide__ = True
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (python3-torch)")
    try:
        if PKG_PATH:
            sys.path.insert(0, PKG_PATH)
        import c10d_coord
    except ImportError as e:  # pragma: no cover
        pytest.skip(f"c10d_coord is not built ({e}): bash scripts/build-torch.sh",
                    allow_module_level=True)
    return torch, c10d_coord


class Coordinator:
    """A c10d-coord on a free loopback port, its database in a temp dir."""

    def __init__(self, *args):
        self.dir = tempfile.TemporaryDirectory(prefix="c10d-pytest-")
        ready = os.path.join(self.dir.name, "ready")
        self.log = open(os.path.join(self.dir.name, "coord.log"), "w+")
        self.proc = subprocess.Popen(
            [COORD_BIN, "--listen", "tcp://127.0.0.1:0", "--db",
             os.path.join(self.dir.name, "coord.db"), "--ready-file", ready, *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not (os.path.exists(ready) and os.path.getsize(ready)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"c10d-coord did not start: {self.output()}")
            time.sleep(0.02)
        with open(ready) as f:
            self.url = f.read().strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        self.tcpstore_port = None
        if "--tcpstore-listen" in args:
            self.tcpstore_port = self.status()["coordinator"]["tcpstore"].rsplit(":", 1)[1]
            self.tcpstore_port = int(self.tcpstore_port)

    def status(self):
        """c10d-ctl --json status, parsed."""
        import json
        p = subprocess.run([os.path.join(BUILD, "client", "c10d-ctl"), "--coord", self.url,
                            "--json", "status"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stdout + p.stderr
        return json.loads(p.stdout)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        """SIGTERM: a coordinator that served every test shuts down cleanly."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture(scope="session")
def coordinator():
    if not os.access(COORD_BIN, os.X_OK):
        pytest.skip(f"{COORD_BIN} is not built")
    # It also speaks TCPStore's protocol, as a coordinator serving torchrun's
    # rendezvous beside its own jobs does (test_tcpstore.py).
    c = Coordinator("--tcpstore-listen", "0")
    yield c
    alive = c.proc.poll() is None
    rc = c.stop()
    assert alive, f"the session's coordinator died during the tests:\n{c.output()[-4000:]}"
    assert rc == 0, f"the session's coordinator exited {rc} on SIGTERM:\n{c.output()[-4000:]}"
