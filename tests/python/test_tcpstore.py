"""c10d-coord --tcpstore-listen: PyTorch's own TCPStore client,
torchrun's c10d rendezvous and raw byte sequences of torch 2.2+'s protocol
against the coordinator's TCPStore port. The session's coordinator serves
them beside the other tests' jobs; the kill -9 cases start their own.
docs/tcpstore.md has the protocol, docs/pytorch.md how torchrun uses it."""
import os
import re
import signal
import sqlite3
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

import pytest

from conftest import BUILD, ROOT, Coordinator

torch = pytest.importorskip("torch", reason="PyTorch is not installed (python3-torch)")
import torch.distributed as dist  # noqa: E402

CTL = os.path.join(BUILD, "client", "c10d-ctl")
TRAIN = os.path.join(ROOT, "tests", "python", "tcpstore_train.py")
MAGIC = 0x3C85F7CE
# torch 2.2+'s query types (TCPStoreBackend.hpp)
VALIDATE, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, NUM_KEYS, DELETE_KEY, APPEND, MULTI_GET, \
    MULTI_SET, CANCEL_WAIT, PING = range(14)


def client(port, timeout=10):
    try:  # a torch built without libuv (Debian 13's 2.6) needs it said
        return dist.TCPStore("127.0.0.1", port, is_master=False,
                             timeout=timedelta(seconds=timeout), use_libuv=False)
    except TypeError:  # torch before 2.3 has no such argument
        return dist.TCPStore("127.0.0.1", port, is_master=False,
                             timeout=timedelta(seconds=timeout))


def torchrun_can_connect():
    """torchrun's rendezvous makes its TCPStore with the default use_libuv:
    a torch built without libuv (Debian 13's 2.6) fails before a byte."""
    try:
        dist.TCPStore("127.0.0.1", 1, is_master=False, timeout=timedelta(milliseconds=1))
    except Exception as e:  # nobody listens on port 1: a timeout, unless libuv is missing
        return "libuv" not in str(e)
    return True


NO_TORCHRUN = ("this torch's TCPStore asks for libuv by default and was built without it "
               "(torchrun fails before sending a byte, to any store: docs/pytorch.md)")


def until(what, cond, timeout=20):
    """Waits for cond() (a state of the coordinator's), failing with what."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def parked(coord):
    return coord.status()["coordinator"]["parked"]


def keys(coord, prefix):
    p = subprocess.run([CTL, "--coord", coord.url, "keys", prefix], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_every_op_of_torchs_own_client(coordinator):
    s = client(coordinator.tcpstore_port)
    n0 = s.num_keys()
    s.set("ops/k", b"hello")
    assert s.get("ops/k") == b"hello"
    s.set("ops/empty", b"")
    assert s.get("ops/empty") == b""
    # ADD keeps decimal text: a counter reads as TCPStore's does
    assert s.add("ops/cnt", 5) == 5
    assert s.add("ops/cnt", -7) == -2
    assert s.get("ops/cnt") == b"-2"
    s.set("ops/dec", b"41")
    assert s.add("ops/dec", 1) == 42 and s.get("ops/dec") == b"42"
    assert s.add("ops/big", 2**40) == 2**40
    # COMPARE_SET's four cases
    assert s.compare_set("ops/cs", "", "new") == b"new"          # missing, expected empty: set
    assert s.compare_set("ops/cs2", "exp", "new") == b"exp"      # missing: what was expected
    assert s.compare_set("ops/cs", "new", "newer") == b"newer"   # present, matches: set
    assert s.compare_set("ops/cs", "zzz", "other") == b"newer"   # mismatch: the value
    assert s.compare_set("ops/cs", "", "other") == b"newer"
    s.wait(["ops/k", "ops/cnt"])
    with pytest.raises(RuntimeError):
        s.wait(["ops/never"], timedelta(seconds=1))
    assert s.get("ops/cs") == b"newer"  # the connection is still usable
    assert s.num_keys() == n0 + 6       # k, empty, cnt, dec, big, cs
    assert s.delete_key("ops/k") is True
    assert s.delete_key("ops/k") is False
    assert s.num_keys() == n0 + 5
    big = os.urandom(1 << 20)
    s.set("ops/value", big)
    assert s.get("ops/value") == big
    listed = keys(coordinator, "tcpstore/")
    # tcpstore/<the plain run>/ + the key, which torch's client begins with '/'
    assert re.search(r"tcpstore/[0-9a-f]{16}//ops/cs ", listed), listed
    assert re.search(r"tcpstore/[0-9a-f]{16}//ops/value", listed), listed
    assert "//ops/cs2" not in listed, "a compare_set on a missing key stored something"


def test_a_parked_wait_is_woken_by_set_and_compare_set(coordinator):
    waiter, writer = client(coordinator.tcpstore_port), client(coordinator.tcpstore_port)
    for i, write in enumerate([lambda k: writer.set(k, b"v"),
                               lambda k: writer.compare_set(k, "", "v")]):
        key = f"wake/{i}"
        done = threading.Event()
        p0 = parked(coordinator)
        t = threading.Thread(target=lambda: (waiter.wait([key]), done.set()))
        t.start()
        until("the wait never parked", lambda: parked(coordinator) > p0)
        assert not done.is_set(), "the wait returned before the key existed"
        write(key)
        assert done.wait(10), f"a wait for {key} was not woken by the write"
        t.join()
    # a get parks too (its client waits first, then gets)
    got = []
    p0 = parked(coordinator)
    t = threading.Thread(target=lambda: got.append(waiter.get("wake/late")))
    t.start()
    until("the get never parked", lambda: parked(coordinator) > p0)
    writer.set("wake/late", b"LATE")
    t.join(10)
    assert got == [b"LATE"]


def test_torch_113_opens_two_connections_and_both_are_held(coordinator):
    before = coordinator.status()["coordinator"]["clients"]
    s = client(coordinator.tcpstore_port)
    s.set("conns/k", b"1")
    held = coordinator.status()["coordinator"]["clients"] - before
    # torch 1.13 opens a second (callback) connection that sends nothing;
    # later versions open one
    assert held in (1, 2), held
    assert s.get("conns/k") == b"1"
    del s


class Raw:
    """A TCPStore connection spoken by hand (torch 2.2+'s numbering)."""

    def __init__(self, port, validate=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if validate:
            self.send(struct.pack("<BI", VALIDATE, MAGIC))

    def send(self, b):
        self.sock.sendall(b)

    def recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
            buf += chunk
        return buf

    def closed(self, timeout=10):
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def value(self):
        (n,) = struct.unpack("<Q", self.recv(8))
        return self.recv(n)

    def i64(self):
        return struct.unpack("<q", self.recv(8))[0]


def s(x):
    x = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(x)) + x


def keylist(*ks):
    return struct.pack("<Q", len(ks)) + b"".join(s(k) for k in ks)


def test_torch_2x_byte_sequences(coordinator):
    """What torch 2.2+'s client sends (captured from torch 2.6's, and in its
    TCPStore.cpp): a connection opens with VALIDATE and PING."""
    r = Raw(coordinator.tcpstore_port)
    r.send(struct.pack("<BI", PING, 0x7BD5))
    assert r.recv(4) == struct.pack("<I", 0x7BD5)
    r.send(bytes([SET]) + s("/b2/k") + s(b"v1"))                 # no reply
    r.send(bytes([GET]) + s("/b2/k"))
    assert r.value() == b"v1"
    r.send(bytes([ADD]) + s("/b2/n") + struct.pack("<q", 3))
    assert r.i64() == 3
    r.send(bytes([CHECK]) + keylist("/b2/k", "/b2/n"))
    assert r.recv(1) == b"\x00"                                   # READY
    r.send(bytes([CHECK]) + keylist("/b2/k", "/b2/none"))
    assert r.recv(1) == b"\x01"                                   # NOT_READY
    r.send(bytes([CHECK]) + keylist())
    assert r.recv(1) == b"\x00"                                   # no keys: ready
    r.send(bytes([APPEND]) + s("/b2/a") + s("abc"))
    r.send(bytes([APPEND]) + s("/b2/a") + s("def"))
    r.send(bytes([GET]) + s("/b2/a"))
    assert r.value() == b"abcdef"
    r.send(bytes([MULTI_SET]) + struct.pack("<Q", 2) + s("/b2/m1") + s("v1") + s("/b2/m2") +
           s("vv2"))
    r.send(bytes([MULTI_GET]) + keylist("/b2/m1", "/b2/m2"))
    assert r.value() == b"v1" and r.value() == b"vv2"
    r.send(bytes([COMPARE_SET]) + s("/b2/cs") + s("") + s("x"))
    assert r.value() == b"x"
    r.send(bytes([DELETE_KEY]) + s("/b2/cs"))
    assert r.i64() == 1
    r.send(bytes([NUM_KEYS]))
    assert r.i64() >= 5
    # A WAIT given up: CANCEL_WAIT is answered WAIT_CANCELED alone...
    p0 = parked(coordinator)
    r.send(bytes([WAIT]) + keylist("/b2/never"))
    until("the WAIT never parked", lambda: parked(coordinator) > p0)
    r.send(bytes([CANCEL_WAIT]))
    assert r.recv(1) == b"\x01"
    until("the cancelled WAIT stayed parked", lambda: parked(coordinator) <= p0)
    # ...and the cancelled WAIT is not answered when its key comes later
    r.send(bytes([SET]) + s("/b2/never") + s("x"))
    r.send(struct.pack("<BI", PING, 7))
    assert r.recv(4) == struct.pack("<I", 7)
    # A WAIT answered before the cancel: STOP_WAITING, then WAIT_CANCELED
    r.send(bytes([WAIT]) + keylist("/b2/k"))
    assert r.recv(1) == b"\x00"
    r.send(bytes([CANCEL_WAIT]))
    assert r.recv(1) == b"\x01"
    # A query sent a byte at a time, as torch 1.13 splits its writes (the
    # pause is pacing, so that the coordinator reads the bytes apart)
    r.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for b in bytes([GET]) + s("/b2/k"):
        r.send(bytes([b]))
        time.sleep(0.001)
    assert r.value() == b"v1"


def test_pipelined_queries_are_answered_in_order(coordinator):
    """A client may send queries without waiting: the answers come in the
    order of the queries (a PING answered at once must not pass an ADD
    the engine still runs), but a parked WAIT holds nothing up."""
    # another client keeps the engine busy, so that the ADDs queue
    busy = Raw(coordinator.tcpstore_port)
    big = bytes([SET]) + s("/pipe/busy") + s(b"x" * (1 << 20))
    flood = threading.Thread(target=lambda: [busy.send(big) for _ in range(100)])
    flood.start()
    r = Raw(coordinator.tcpstore_port)
    batch = b""
    for i in range(50):
        batch += bytes([ADD]) + s("/pipe/n") + struct.pack("<q", 1)
        batch += struct.pack("<BI", PING, i)
    r.send(bytes([WAIT]) + keylist("/pipe/later") + batch)
    for i in range(50):
        assert r.i64() == i + 1
        assert r.recv(4) == struct.pack("<I", i)
    r.send(bytes([SET]) + s("/pipe/later") + s("x"))
    assert r.recv(1) == b"\x00"  # the WAIT, once its key came
    flood.join()


def test_abandoned_waits_do_not_pile_up(coordinator):
    """torch 1.13's client gives up on a wait without telling the server.
    A client doing that in a loop keeps being served, and the coordinator
    keeps at most 16 of its WAITs parked."""
    s113 = client(coordinator.tcpstore_port)
    parked0 = coordinator.status()["coordinator"]["parked"]
    for i in range(40):
        with pytest.raises(RuntimeError):
            s113.wait([f"abandon/{i}"], timedelta(milliseconds=50))
    s113.set("abandon/ok", b"1")
    assert coordinator.status()["coordinator"]["parked"] - parked0 <= 16
    del s113


def test_connections_of_both_ports_are_told_apart():
    """A TCPStore client hanging up must not be taken for one of ours:
    the two listeners once numbered their connections each from 1, and the
    engine dropped the parked get of our connection of the same number."""
    c = Coordinator("--tcpstore-listen", "0")
    try:
        getter = subprocess.Popen([CTL, "--coord", c.url, "get", "apart/k", "--wait", "20000"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        until("the get never parked", lambda: parked(c) >= 1)
        clients = c.status()["coordinator"]["clients"]  # the getter's, and this status's
        for _ in range(6):  # whatever number the getter's connection has
            r = Raw(c.tcpstore_port)
            r.send(struct.pack("<BI", PING, 1))
            r.recv(4)
            r.sock.close()
        # every close seen (and its event queued before this status runs)
        until("the TCPStore connections were not seen closing",
              lambda: c.status()["coordinator"]["clients"] == clients)
        assert parked(c) >= 1, "a TCPStore close dropped our get"
        subprocess.run([CTL, "--coord", c.url, "set", "--write", "apart/k", "here"], check=True,
                       timeout=30)
        out = getter.communicate(timeout=30)[0]
        assert getter.returncode == 0 and "here" in out, out
    finally:
        assert c.stop() == 0, c.output()


def test_torch_20_numbering_without_validate(coordinator):
    """torch 2.0/2.1: no VALIDATE; SET 0 ... DELETE_KEY 8, APPEND 9,
    MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12."""
    r = Raw(coordinator.tcpstore_port, validate=False)
    r.send(bytes([0]) + s("/b1/k") + s("old"))          # SET
    r.send(bytes([2]) + s("/b1/k"))                     # GET
    assert r.value() == b"old"
    r.send(bytes([9]) + s("/b1/k") + s("er"))           # APPEND
    r.send(bytes([10]) + keylist("/b1/k"))              # MULTI_GET
    assert r.value() == b"older"
    r.send(bytes([5]) + keylist("/b1/nope"))            # WAIT
    r.send(bytes([12]))                                 # CANCEL_WAIT
    assert r.recv(1) == b"\x01"


def test_bad_queries_close_that_connection_only(coordinator):
    good = client(coordinator.tcpstore_port)
    good.set("bad/k", b"fine")
    cases = {
        "query type 99": struct.pack("<BI", VALIDATE, MAGIC) + bytes([99]),
        "magic": struct.pack("<BI", VALIDATE, MAGIC) + struct.pack("<BI", VALIDATE, 1234),
        "--max-key-bytes": struct.pack("<BI", VALIDATE, MAGIC) + bytes([GET]) +
        struct.pack("<Q", 1 << 40),
        "NUL byte": struct.pack("<BI", VALIDATE, MAGIC) + bytes([GET]) + s(b"a\0b"),
        "not a decimal integer": struct.pack("<BI", VALIDATE, MAGIC) + bytes([SET]) +
        s("/bad/x") + s("xyz") + bytes([ADD]) + s("/bad/x") + struct.pack("<q", 1),
        "no such key": struct.pack("<BI", VALIDATE, MAGIC) + bytes([GET]) + s("/bad/none"),
        "watch": bytes([7]) + s("/bad/k"),
    }
    for why, payload in cases.items():
        r = Raw(coordinator.tcpstore_port, validate=False)
        r.send(payload)
        assert r.closed(), f"a connection that sent a query with {why} was not closed"
        assert good.get("bad/k") == b"fine", f"after {why}"
    log = coordinator.output()
    for why in cases:
        assert why in log, f"the log does not say why ({why}):\n{log[-3000:]}"
    assert "TCPStore client 127.0.0.1:" in log


def db_keys(db, like):
    """The keys in a coordinator's database file (none running on it)."""
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT key, value FROM kv WHERE key LIKE ?", (like,)))
    finally:
        con.close()


def test_an_acknowledged_set_survives_kill_9_and_a_restart_starts_fresh():
    """A SET is not answered in TCPStore's protocol; the reply to the query
    after it on the connection is its acknowledgement: by then it is
    committed (read in the database file after kill -9). No TCPStore client
    redials, so a restart ends every TCPStore run: the next client finds an
    empty store, as on a restarted TCPStore server, and the old run's keys
    are deleted (docs/tcpstore.md, "Runs")."""
    d = tempfile.mkdtemp(prefix="c10d-tcpstore-")
    db = os.path.join(d, "coord.db")
    c = Coordinator("--tcpstore-listen", "0", "--db", db)
    port = c.tcpstore_port
    try:
        st = client(port)
        for i in range(50):
            st.set(f"durable/{i}", str(i).encode())
        assert st.add("durable/n", 50) == 50  # answered: the sets before it are committed
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        on_disk = {k.split("//", 1)[1]: v for k, v in db_keys(db, "tcpstore/%").items()}
        assert all(on_disk.get(f"durable/{i}") == str(i).encode() for i in range(50)), on_disk
        assert on_disk.get("durable/n") == b"50", on_disk
        c2 = Coordinator("--tcpstore-listen", str(port), "--db", db)
        try:
            st = client(port)
            assert st.num_keys() == 0
            assert st.add("durable/n", 1) == 1, "a client after the restart saw the old run's keys"
            until("the old run's keys were not deleted",
                  lambda: "durable/0" not in keys(c2, "tcpstore/"))
            assert "TCPStore keys of an earlier coordinator's runs are deleted" in c2.output()
        finally:
            assert c2.stop() == 0, c2.output()
    finally:
        c.stop()


def job_of_plain_clients(port, *lines):
    """A process of TCPStore clients (its connections close when it exits)
    running lines with s, a client of the coordinator's port."""
    code = "\n".join(["import sys", "from datetime import timedelta",
                       "import torch.distributed as dist",
                       f"s = dist.TCPStore('127.0.0.1', {port}, is_master=False, "
                       "timeout=timedelta(seconds=20))", *lines])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def runs_over(coord):
    return coord.output().count("TCPStore run ")


def soon(cond, timeout=20):
    """Waits for cond() up to timeout; whether it held (the caller asserts
    what it means)."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def test_a_finished_jobs_keys_are_not_the_next_ones():
    """TCPStore clients get runs (docs/tcpstore.md, "Runs"): a job of plain
    clients writes text at a key and ends; the next job's add at that key
    starts from 0 (it found the text and was refused before), and
    num_keys counts its own keys only, not a torchrun rendezvous's beside
    it."""
    c = Coordinator("--tcpstore-listen", "0")
    try:
        port = c.tcpstore_port
        job_of_plain_clients(port, "s.set('reuse/k', 'value')", "s.set('reuse/other', '1')",
                             "assert s.num_keys() == 2")
        soon(lambda: runs_over(c) >= 1)
        assert "reuse/k" not in keys(c, "tcpstore/"), "the finished run's keys are still there"
        rdzv = client(port)  # a torchrun agent's keys, beside the next job
        rdzv.set("torch.rendezvous.r1", b"state")
        rdzv.set("torch.rendezvous.r1.0/MASTER_ADDR", b"host")
        out = job_of_plain_clients(port, "print('add', s.add('reuse/k', 1))",
                                   "print('num_keys', s.num_keys())")
        assert "add 1" in out and "num_keys 1" in out, out
        assert rdzv.get("torch.rendezvous.r1") == b"state"
    finally:
        assert c.stop() == 0, c.output()


INIT_JOB = """
import os, sys
from datetime import timedelta
import torch, torch.distributed as dist
rank, port = int(sys.argv[1]), int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=20))
dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                        timeout=timedelta(seconds=20))
t = torch.ones(1) * (rank + 1)
dist.all_reduce(t)
print("sum", t.item())
dist.destroy_process_group()
"""


def test_init_process_group_on_the_port_twice():
    """Two jobs, one after the other, each init_process_group(store=
    TCPStore(coordinator, is_master=False)): the second no longer waits out
    its timeout in torch's store-based barrier on the first one's keys."""
    c = Coordinator("--tcpstore-listen", "0")
    try:
        for job in range(2):
            procs = [subprocess.Popen([sys.executable, "-c", INIT_JOB, str(r),
                                       str(c.tcpstore_port)], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for r in range(2)]
            outs = [p.communicate(timeout=120)[0] for p in procs]
            assert [p.returncode for p in procs] == [0, 0], f"job {job}:\n" + "\n".join(outs)
            assert all("sum 3.0" in o for o in outs), outs
            soon(lambda: runs_over(c) >= job + 1)
    finally:
        assert c.stop() == 0, c.output()


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def agent(port, run_id, *args, env_extra=None):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_extra or {}))
    env.pop("C10D_COORD", None)
    # torch 1.13's torchrun needs --redirects/--tee on Python 3.11
    # (docs/launcher.md)
    cmd = TORCHRUN + ["--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d",
                      f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id={run_id}",
                      "--rdzv_conf=is_host=false", "--redirects", "2", "--tee", "2",
                      *args, TRAIN]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


@pytest.mark.skipif(not torchrun_can_connect(), reason=NO_TORCHRUN)
def test_torchrun_rendezvous_on_the_coordinator_and_a_relaunch_under_its_id(coordinator):
    """A torchrun job's rendezvous on the coordinator, then the same job
    relaunched under the same --rdzv_id (a supervisor's or Slurm's
    requeue): the finished run's rendezvous was closed, and the relaunch
    failed with RendezvousClosedError in 2 s; it is a new run now, its
    rendezvous fresh (docs/tcpstore.md, "Runs")."""
    run_id = f"rdzv{os.getpid()}"
    for launch in range(2):
        agents = [agent(coordinator.tcpstore_port, run_id) for _ in range(2)]
        outs = [a.communicate(timeout=180)[0] for a in agents]
        assert [a.returncode for a in agents] == [0, 0], f"launch {launch}:\n" + "\n".join(outs)
        assert all("sum 3.0" in o for o in outs), "\n".join(outs)
        # The workers' store: torch 1.13's c10d rendezvous has rank 0's
        # worker host one (TORCHELASTIC_USE_AGENT_STORE=False) at the
        # address the agents published through the coordinator.
        if torch.__version__.startswith("1."):
            assert all("use_agent_store False" in o for o in outs), "\n".join(outs)
        # the run is over with its last agent: its keys go
        until("the rendezvous's keys outlived its run",
              lambda: f"torch.rendezvous.{run_id}" not in keys(coordinator, "tcpstore/"))


@pytest.mark.skipif(not torchrun_can_connect(), reason=NO_TORCHRUN)
def test_elastic_job_rerendezvouses_after_coordinator_and_agent_loss():
    """The elastic case: an agent waits in the rendezvous; the coordinator
    is killed with -9 and restarted on its database. torch's TCPStore
    client does not dial again, so that agent fails (as it would with any
    store). Its replacement and a second agent, started at once, within
    the dead agent's keep-alive (torch 1.13: 3 x 5 s), rendezvous afresh
    and the job runs: the restart ended the old run, so no round of the
    dead agent's is there to join (that round stalled for minutes, then
    closed the run id)."""
    d = tempfile.mkdtemp(prefix="c10d-elastic-")
    db = os.path.join(d, "coord.db")
    c = Coordinator("--tcpstore-listen", "0", "--db", db)
    port, run_id = c.tcpstore_port, f"elastic{os.getpid()}"
    first = agent(port, run_id, "--max_restarts=1")
    try:
        deadline = time.monotonic() + 60
        while f"torch.rendezvous.{run_id}" not in keys(c, "tcpstore/"):
            assert time.monotonic() < deadline, c.output()
            time.sleep(0.1)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        c = Coordinator("--tcpstore-listen", str(port), "--db", db)
        started = time.monotonic()
        agents = [agent(port, run_id, "--max_restarts=1") for _ in range(2)]
        out = first.communicate(timeout=120)[0]
        assert first.returncode != 0, f"the agent outlived its store's connection:\n{out}"
        assert "RendezvousConnectionError" in out, out
        outs = [a.communicate(timeout=180)[0] for a in agents]
        print(f"relaunched agents done {time.monotonic() - started:.1f} s after the restart")
        assert [a.returncode for a in agents] == [0, 0], "\n".join(outs) + c.output()[-3000:]
        assert all("sum 3.0" in o for o in outs), "\n".join(outs)
    finally:
        if first.poll() is None:
            first.kill()
        assert c.stop() == 0, c.output()


def test_every_op_of_this_torchs_own_client(coordinator):
    """tests/python/tcpstore_ops.py: every operation of this torch's own
    TCPStore client (1.13's, 2.13's in scripts/test.sh's venv) against the
    coordinator, with TCPStore's answers."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", "tcpstore_ops.py"),
                        str(coordinator.tcpstore_port)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr
