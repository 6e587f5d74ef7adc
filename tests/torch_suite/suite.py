"""PyTorch's own distributed tests as torch's test/distributed/
test_distributed_spawn.py runs them (a class over TestDistBackend and
DistributedTest._DistTestBase; each test spawns WORLD_SIZE fresh ranks),
with c10d-coord's groups where C10D_SUITE_GROUPS=coord. run.py sets the
environment and runs it; the ranks, spawned, import this module again, so
everything they need is decided here from the environment:

  BACKEND=gloo            the suite's own feature gating (what it keeps for
                          gloo runs), whatever backend the groups use
  WORLD_SIZE, TEMP_DIR,   as torch's run_test.py sets them (TEMP_DIR and
  INIT_METHOD             INIT_METHOD per test, by TestDistBackend.setUp)
  C10D_SUITE_GROUPS       coord: init_process_group and new_group make coord
                          groups where the suite asks for gloo; gloo: torch's
  C10D_SUITE_INIT         file: torch's own per-test file:// rendezvous;
                          coord: the coordinator's store (coord://HOST:PORT)
  C10D_COORD              the coordinator every test's ranks meet on
  C10D_SUITE_START        spawn: each test's ranks spawned, as torch's
                          test_distributed_spawn.py does; fork: forked from
                          the runner, which imported torch once
"""
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# c10d_coord: the checkout's in-place build, or with C10D_PYTHONPATH set
# empty the running Python's installed package (a venv's).
PKG_PATH = os.environ.get("C10D_PYTHONPATH", os.path.join(ROOT, "python"))
for p in [PKG_PATH, HERE] if PKG_PATH else [HERE]:
    if p not in sys.path:
        sys.path.insert(0, p)
try:
    import expecttest  # noqa: F401 (torch's test utilities import it)
except ImportError:  # Debian 12 packages none for its torch 1.13: a stand-in
    sys.path.append(os.path.join(HERE, "torch1.13"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

GROUPS = os.environ.get("C10D_SUITE_GROUPS", "coord")
INIT = os.environ.get("C10D_SUITE_INIT", "file")
START = os.environ.get("C10D_SUITE_START", "spawn")

# torch 1.13's TestDistBackend._run turns DDP's ReplicatedTensor on, which
# breaks under Python 3.11 for every backend (gloo's DDP tests included):
# the suite runs without it. (2.x has no ReplicatedTensor.)
try:
    import torch.nn.parallel._replicated_tensor_ddp_utils as replicated  # noqa: E402
except ImportError:
    replicated = None
if replicated is not None:
    _set_replicated = replicated._set_ddp_with_replicated_tensor
    replicated._set_ddp_with_replicated_tensor = lambda value: _set_replicated(False)

if GROUPS == "coord":
    import c10d_coord  # noqa: F401,E402  (registers "coord" and coord://)

    def _ours(backend):
        return "coord" if backend is not None and str(backend).lower() == "gloo" else backend

    _init_process_group, _new_group = c10d.init_process_group, c10d.new_group

    def init_process_group(backend, *args, **kwargs):
        r = _init_process_group(_ours(backend), *args, **kwargs)
        # C10D_DATA_PLANE=cpu:gloo: coord over torch's gloo, or the run is void
        want = os.environ.get("C10D_DATA_PLANE")
        if want and _ours(backend) == "coord":
            import c10d_coord
            if not c10d_coord.data_plane().startswith(want):
                raise RuntimeError(f"suite: the data plane is {c10d_coord.data_plane()}, "
                                   f"not {want}")
        return r

    def new_group(ranks=None, timeout=c10d.default_pg_timeout, backend=None, pg_options=None):
        return _new_group(ranks, timeout, _ours(backend), pg_options)

    # dist.* for the tests, distributed_c10d's own for new_subgroups and
    # the model averagers, which call it by its module's name.
    dist.init_process_group = c10d.init_process_group = init_process_group
    dist.new_group = c10d.new_group = new_group

import torch.testing._internal.distributed.distributed_test as distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

torch.backends.cuda.matmul.allow_tf32 = False

_runs = itertools.count(1)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Each test is a run of its own on the one coordinator, as jobs
        # launched one after another by c10d-run are (run-<pid>).
        os.environ["C10D_JOB"] = f"torch-suite-{os.getpid()}-{next(_runs)}"
        if START == "fork":
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        # A spawned rank imports distributed_test after setUp named this
        # test's own file in INIT_METHOD; a forked one inherited the
        # module as the runner imported it, before any setUp.
        distributed_test.INIT_METHOD = os.environ.get("INIT_METHOD", "env://")
        super()._run(rank, test_name, file_name, pipe, **kwargs)

    @property
    def init_method(self):
        if INIT == "coord":
            return "coord://" + os.environ["C10D_COORD"].split("://", 1)[1]
        return super().init_method  # file://<a file of this test's>
