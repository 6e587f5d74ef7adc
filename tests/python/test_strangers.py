"""A client pointed at a server that is not a coordinator: told within a
second what it reached, not retried for its whole timeout; and a TCPStore
client on the coordinator's main port, closed with a line that names the
TCPStore port. Real servers: torch's own TCPStore (whichever numbering
this torch speaks), the coordinator's --tcpstore-listen port, Python's
HTTP server."""
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from conftest import BUILD, PKG_PATH, with_pkg_path

torch = pytest.importorskip("torch", reason="PyTorch is not installed (python3-torch)")
import torch.distributed as dist  # noqa: E402

CTL = os.path.join(BUILD, "client", "c10d-ctl")
# Long enough that waiting it out cannot pass for being told: a test that
# takes the whole of it failed.
TIMEOUT_MS = 60000
# What "told at once" may take on a loaded machine (it is ~0.5 s idle).
TOLD_WITHIN_S = 15


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ctl_status(url):
    start = time.monotonic()
    p = subprocess.run([CTL, "--coord", url, "--timeout", str(TIMEOUT_MS), "status"],
                       capture_output=True, text=True, timeout=TIMEOUT_MS / 1000 + 30)
    return p.returncode, p.stderr, time.monotonic() - start


@pytest.fixture
def torch_store():
    port = free_port()
    try:
        s = dist.TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=30),
                          wait_for_workers=False, use_libuv=False)
    except TypeError:  # torch before 2.3
        s = dist.TCPStore("127.0.0.1", port, 1, True, timeout=timedelta(seconds=30),
                          wait_for_workers=False)
    yield port
    del s


@pytest.fixture
def http_port():
    # threaded, as `python3 -m http.server` and any real one: the probe asks
    # on connections of its own while the first is still open
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()


def test_ctl_tells_a_torch_tcpstore(torch_store):
    rc, err, took = ctl_status(f"tcp://127.0.0.1:{torch_store}")
    assert rc == 1, err
    assert "is a PyTorch TCPStore" in err and "not a c10d-coord" in err, err
    assert "C10D_COORD" in err and "MASTER_PORT" in err, err
    assert took < TOLD_WITHIN_S, f"told after {took:.1f} s: {err}"


def test_ctl_tells_the_coordinators_own_tcpstore_port(coordinator):
    rc, err, took = ctl_status(f"tcp://127.0.0.1:{coordinator.tcpstore_port}")
    assert rc == 1, err
    assert "is a PyTorch TCPStore" in err and "--tcpstore-listen" in err, err
    assert took < TOLD_WITHIN_S, f"told after {took:.1f} s: {err}"


def test_ctl_tells_an_http_server(http_port):
    rc, err, took = ctl_status(f"tcp://127.0.0.1:{http_port}")
    assert rc == 1, err
    assert "is an HTTP server (it answered 'HTTP/1." in err, err
    assert took < TOLD_WITHIN_S, f"told after {took:.1f} s: {err}"


def test_a_python_rank_tells_a_tcpstore(torch_store):
    """A rank with C10D_COORD at torchrun's store (the common mix-up):
    init_process_group fails at once, naming it, though its timeout (and
    C10D_TIMEOUT_MS) is a minute."""
    code = ("import torch.distributed as d, c10d_coord\n"
            "d.init_process_group('coord', init_method='env://', rank=0, world_size=1)\n")
    env = with_pkg_path(dict(os.environ))
    env.update(C10D_COORD=f"tcp://127.0.0.1:{torch_store}", C10D_TIMEOUT_MS=str(TIMEOUT_MS),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(torch_store))
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT_MS / 1000 + 60)
    took = time.monotonic() - start
    assert p.returncode != 0
    assert "is a PyTorch TCPStore" in p.stderr, p.stderr[-3000:]
    assert took < TOLD_WITHIN_S + 10, f"told after {took:.1f} s"


def test_a_rank_names_the_timeout_it_runs_under():
    """No coordinator at all: the notice names C10D_TIMEOUT_MS when that
    is the timeout in force, and torch's timeout= when it is not."""
    port = free_port()
    code = ("import datetime, torch.distributed as d, c10d_coord\n"
            "d.init_process_group('coord', init_method='env://', rank=0, world_size=1,\n"
            "                     timeout=datetime.timedelta(seconds=8))\n")
    base = with_pkg_path(dict(os.environ))
    base.update(C10D_COORD=f"tcp://127.0.0.1:{port}", MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port))
    base.pop("C10D_TIMEOUT_MS", None)
    p = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0
    assert "init_process_group's timeout=" in p.stderr, p.stderr[-3000:]
    env = dict(base, C10D_TIMEOUT_MS="11000")
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    took = time.monotonic() - start
    assert p.returncode != 0
    assert "(C10D_TIMEOUT_MS)" in p.stderr, p.stderr[-3000:]
    # C10D_TIMEOUT_MS (11 s) was the rank's timeout, not timeout= (8 s)
    assert took >= 10.5, f"gave up after {took:.1f} s: {p.stderr[-2000:]}"


def test_a_tcpstore_client_on_the_main_port_is_named(coordinator):
    """torchrun's --rdzv-endpoint or a TCPStore at the main port: closed at
    once, and the coordinator's log names --tcpstore-listen. (torch 2.x's
    client dials again until its own timeout, whatever the server does:
    the test gives it 3 s.)"""
    before = coordinator.output().count("speaks PyTorch's TCPStore protocol")
    with pytest.raises(Exception):
        try:
            s = dist.TCPStore("127.0.0.1", coordinator.port, is_master=False,
                              timeout=timedelta(seconds=3), use_libuv=False)
        except TypeError:
            s = dist.TCPStore("127.0.0.1", coordinator.port, is_master=False,
                              timeout=timedelta(seconds=3))
        s.add("k", 1)  # answered, unlike a set (torch 1.13 sends a set and goes on)
    deadline = time.monotonic() + 10
    while coordinator.output().count("speaks PyTorch's TCPStore protocol") <= before:
        assert time.monotonic() < deadline, coordinator.output()[-2000:]
        time.sleep(0.05)
    line = [ln for ln in coordinator.output().splitlines()
            if "speaks PyTorch's TCPStore protocol" in ln][-1]
    assert "--tcpstore-listen" in line and "c10d-ctl status names it" in line, line


def test_a_tls_client_is_told_what_answers_in_plain(http_port, tmp_path):
    """tls+tcp:// at a port that speaks no TLS: the TLS engine's words, and
    what the server is, asked in plain TCP."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a CA with (scripts/install-deps.sh installs it)")
    ca = tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=c10d-test", "-keyout", str(tmp_path / "ca.key"), "-out",
                    str(ca)], check=True, capture_output=True)
    rc, err, took = ctl_status_tls(f"tls+tcp://127.0.0.1:{http_port}", ca)
    assert rc == 6, err
    assert "does not answer in TLS" in err and "It is an HTTP server" in err, err
    assert took < TOLD_WITHIN_S, f"told after {took:.1f} s: {err}"


def ctl_status_tls(url, ca):
    start = time.monotonic()
    p = subprocess.run([CTL, "--coord", url, "--tls-ca", str(ca), "--timeout", str(TIMEOUT_MS),
                        "status"], capture_output=True, text=True, timeout=TIMEOUT_MS / 1000 + 30)
    return p.returncode, p.stderr, time.monotonic() - start
