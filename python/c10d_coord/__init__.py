"""c10d-coord for PyTorch (docs/pytorch.md).

    import c10d_coord
    dist.init_process_group("coord", rank=r, world_size=n)   # C10D_COORD set

registers the backend "coord": every collective is checked by the
coordinator (SYNC, ASYNC or OFF: C10D_VERIFY) and moves its data directly
between ranks. A desync, a dead rank or a stall raises RuntimeError with
the coordinator's report, naming ranks and collectives, instead of hanging.

    with c10d_coord.join() as j:      # uneven inputs
        for batch in my_batches: ...
    j.last_joiner
"""
import atexit
import os
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
import sys
import torch.distributed.rendezvous  # noqa: F401 (the module; dist.rendezvous is its function)
_rdzv = sys.modules["torch.distributed.rendezvous"]

from . import _C

__all__ = ["join", "active_ranks", "monitored_barrier", "job", "data_plane", "Options",
           "ProcessGroupCoord", "StoreCoord"]

ProcessGroupCoord = _C.ProcessGroupCoord

# The data planes a device may have: torch's own (under our checks) or ours.
_PLANES = ("coord", "gloo", "nccl")


class Options:
    """The coord backend's options, for those who set them in code:

        dist.init_process_group("coord", pg_options=c10d_coord.Options(
            data_plane="cpu:gloo,cuda:nccl"))

    data_plane: which backend moves each device's tensors, in torch's own
    syntax ("cpu:gloo,cuda:nccl"; "gloo" alone: every device); "coord" is
    ours. Unset: C10D_DATA_PLANE, else the default (docs/pytorch.md)."""

    def __init__(self, data_plane=None):
        self.data_plane = data_plane


def _default_plane():
    # CUDA: torch's nccl under our checks until our own NCCL path has run
    # on a GPU; CPU: ours (docs/pytorch.md, "Which data plane").
    return {"cpu": "coord", "cuda": "nccl"}


def _parse_plane(text, where):
    """{"cpu": ..., "cuda": ...} from torch's syntax, naming `where` in errors."""
    plane = _default_plane()
    text = (text or "").strip()
    if not text:
        return plane
    if ":" not in text and "," not in text:
        name = text.lower()
        if name not in _PLANES:
            raise ValueError(f"c10d_coord: {where}={text!r}: the data plane is one of "
                             f"{', '.join(_PLANES)}, or per device: cpu:gloo,cuda:nccl")
        return {"cpu": "gloo" if name == "nccl" else name, "cuda": name}
    for part in text.split(","):
        dev, sep, name = part.strip().partition(":")
        dev, name = dev.strip().lower(), name.strip().lower()
        if not sep or dev not in ("cpu", "cuda") or name not in _PLANES:
            raise ValueError(f"c10d_coord: {where}={text!r}: want DEVICE:BACKEND pairs, "
                             f"DEVICE cpu or cuda, BACKEND one of {', '.join(_PLANES)} "
                             f"(e.g. cpu:gloo,cuda:nccl)")
        if dev == "cpu" and name == "nccl":
            raise ValueError(f"c10d_coord: {where}={text!r}: nccl moves CUDA tensors only")
        plane[dev] = name
    return plane


# The default group's Options.data_plane: its subgroups' too, unless theirs say otherwise.
_world_plane = None


def _chosen_plane(pg_options, default_group):
    """The data plane a group gets: its own Options', else the default
    group's, else C10D_DATA_PLANE's, else the default."""
    global _world_plane
    given = getattr(pg_options, "data_plane", None)
    if given:
        plane = _parse_plane(given, "Options.data_plane")
        if default_group:
            _world_plane = given
        return plane
    if _world_plane and not default_group:
        return _parse_plane(_world_plane, "the default group's Options.data_plane")
    return _parse_plane(os.environ.get("C10D_DATA_PLANE", ""), "C10D_DATA_PLANE")


def _inner(name, dev, store, rank, size, timeout):
    """torch's own backend `name` for `dev`, over the group's store."""
    from torch.distributed import PrefixStore
    prefix = PrefixStore(f"c10d_coord/{dev}/{name}/", store)
    if name == "gloo":
        return dist.ProcessGroupGloo(prefix, rank, size, timeout)
    if not dist.is_nccl_available():
        return None
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = timeout
    return dist.ProcessGroupNCCL(prefix, rank, size, opts)


def _wrapped(coord, opts, pg_options):
    """coord, or torch's backends under coord's checks where the chosen
    data plane is torch's (torch 2.x)."""
    default_group = not opts.global_ranks_in_group
    plane = _chosen_plane(pg_options, default_group)
    chosen = bool(getattr(pg_options, "data_plane", None) or _world_plane or
                  os.environ.get("C10D_DATA_PLANE"))
    cuda = torch.cuda.is_available()
    # Where there is no GPU no CUDA tensor comes: no CUDA data plane to make.
    wanted = {d: n for d, n in plane.items() if n != "coord" and (d == "cpu" or cuda)}
    if not wanted:
        return coord
    if not getattr(_C, "has_checked", False):
        if not chosen:  # the default's nccl: torch 1.13 has only ours
            return coord
        raise RuntimeError(
            f"c10d_coord: data plane {_plane_text(plane)}: torch's own backends under our "
            f"checks need torch 2.x (this is {torch.__version__}); set C10D_DATA_PLANE=coord")
    timeout = opts.timeout if isinstance(opts.timeout, timedelta) else timedelta(minutes=30)
    inner = {}
    for dev, name in wanted.items():
        b = _inner(name, dev, opts.store, opts.group_rank, opts.group_size, timeout)
        if b is None:
            if not chosen:
                continue
            raise RuntimeError(f"c10d_coord: data plane {dev}:{name}: this torch has no "
                               f"{name} (built without it)")
        inner[dev] = b
    if not inner:
        return coord
    global _releases_hooked
    if not _releases_hooked:
        # torch's gloo frees a finished call on its own thread just after
        # its waiter wakes; freed once the interpreter has begun to exit,
        # a tensor's Python object aborts the process. Exit hooks run
        # while it is whole.
        atexit.register(_await_releases)
        _releases_hooked = True
    return _C.ProcessGroupChecked(coord, inner.get("cpu"), inner.get("cuda"))


_releases_hooked = False


def _await_releases():
    if not _C.await_releases():
        print("c10d_coord: exiting with calls on torch's backends not yet ended: they may "
              "abort the process as the interpreter goes", file=sys.stderr, flush=True)


def _plane_text(plane):
    return ",".join(f"{d}:{plane[d]}" for d in ("cpu", "cuda"))


def data_plane(group=None):
    """Which backend moves each device's tensors in a coord group, as
    chosen: "cpu:gloo,cuda:nccl" ("coord": ours)."""
    pg = group or dist.distributed_c10d._get_default_group()
    try:
        be = pg._get_backend(torch.device("cpu"))
    except Exception:  # noqa: BLE001 (torch 1.13: no per-device backends)
        return "cpu:coord,cuda:coord"
    return getattr(be, "data_plane", "cpu:coord,cuda:coord")


def _timeout_ms(timeout):
    """The one timeout rule of a rank (docs/pytorch.md): C10D_TIMEOUT_MS
    when it is set, for every call and the rendezvous (0 here: the library
    reads it, and names it in its messages); else torch's timeout (the
    timeout= of init_process_group, torch's default if none was given)."""
    if os.environ.get("C10D_TIMEOUT_MS"):
        return 0
    return int(timeout.total_seconds() * 1000) if isinstance(timeout, timedelta) else 0


def _create(opts, pg_options=None):
    """The backend's creator (torch calls it from init_process_group and
    new_group, with the extended API's options). The rendezvous is
    c10d-coord's, at C10D_COORD: a server that is not a coordinator is
    refused at once by the library rather than waited for. Where torch's
    store is a run's (coord://, env:// with C10D_COORD), that rendezvous
    already formed the world: the default group is that world group."""
    ms = _timeout_ms(opts.timeout)
    if not opts.global_ranks_in_group:  # the default group
        world = _C.formed_world(opts.store, opts.group_rank, opts.group_size)
        if world is not None:
            return _wrapped(world, opts, pg_options)
    url = os.environ.get("C10D_COORD", "")
    if not url:
        raise RuntimeError(
            "c10d_coord: set C10D_COORD to the coordinator's URL (tcp://HOST:PORT); "
            "c10d-run sets it for every rank")
    # The run's job where torch's store is a run's, else the library's
    # default (C10D_JOB, torchrun's run id, ...), as the world was named.
    # The default group is the job's world; torch calls this for a new group
    # on its members only, with the name torch gave it alike on every rank
    # (group_id): each subgroup meets as a job of its own, "<job>.g<id>",
    # with its own verification and liveness.
    job = _C.run_job(opts.store)
    if opts.global_ranks_in_group:
        job = f"{job or _C.default_job()}.g{opts.group_id}"
    coord = _C.ProcessGroupCoord(opts.group_rank, opts.group_size, url, job, ms)
    return _wrapped(coord, opts, pg_options)


# torch 2.x asks which devices a backend serves (and warns without).
try:
    dist.Backend.register_backend("coord", _create, extended_api=True,
                                  devices=["cpu", "cuda"] if _C.has_cuda else ["cpu"])
except TypeError:  # torch 1.13: no `devices`
    dist.Backend.register_backend("coord", _create, extended_api=True)

StoreCoord = _C.StoreCoord


def _meet(coord, query, timeout, job=""):
    """torch's store and this rank's identity, on the coordinator at
    `coord` (any URL the library takes: tcp://, ipc://, tls+tcp://). The
    world group forms here, so the store torch gets is this run's only
    (jobs/<job>/<generation>/ on the coordinator): a run never sees what an
    earlier run of the job or another job wrote, and the coordinator
    removes it when the run is over. The job is `job`, else the library's
    default (C10D_JOB, torchrun's run id, ...: docs/pytorch.md)."""
    from urllib.parse import parse_qs
    q = {k: v[0] for k, v in parse_qs(query).items()}
    rank = int(q.get("rank", os.environ.get("RANK", -1)))
    size = int(q.get("world_size", os.environ.get("WORLD_SIZE", -1)))
    if rank < 0 or size < 1:
        raise ValueError("c10d_coord: the rendezvous needs rank and world_size (arguments of "
                         "init_process_group, or RANK and WORLD_SIZE)")
    os.environ["C10D_COORD"] = coord  # where subgroups meet too
    ms = _timeout_ms(timeout)
    world = _C.ProcessGroupCoord(rank, size, coord, job, ms)
    # torch's store wants a number: the library checked C10D_TIMEOUT_MS above
    env_ms = os.environ.get("C10D_TIMEOUT_MS")
    store_ms = ms or (int(env_ms) if env_ms else 300000)
    return (_C.StoreCoord.run(world, store_ms), rank, size)


def _coord_rendezvous(url, timeout=timedelta(minutes=5), **kwargs):
    """coord://HOST:PORT[/JOB]?rank=R&world_size=N: torch's store is the
    run's on c10d-coord (no TCPStore on rank 0); the process group meets
    there too, as job JOB (else the library's default). For ipc:// or
    tls+tcp:// coordinators, use env:// with C10D_COORD."""
    from urllib.parse import unquote, urlparse
    u = urlparse(url)
    yield _meet("tcp://" + u.netloc, u.query, timeout, unquote(u.path.strip("/")))


dist.register_rendezvous_handler("coord", _coord_rendezvous)

# env:// with C10D_COORD set: the same, from the environment (c10d-run,
# torchrun with C10D_COORD exported), so no TCPStore is needed: under
# torchrun MASTER_ADDR:MASTER_PORT is torchrun's own, and the run's store
# on the coordinator replaces it. C10D_COORD is used as it is (tls+tcp://
# and ipc:// too).
_env_handler = _rdzv._rendezvous_handlers["env"]


def _env_or_coord(url, timeout=timedelta(minutes=5), **kwargs):
    if os.environ.get("C10D_COORD"):
        from urllib.parse import urlparse
        yield _meet(os.environ["C10D_COORD"], urlparse(url).query, timeout)
        return
    yield from _env_handler(url, timeout=timeout, **kwargs)


_rdzv._rendezvous_handlers["env"] = _env_or_coord


class _Joined:
    last_joiner = -1


@contextmanager
def join(process_group=None, throw_on_early_termination=False,
         divide_by_initial_world_size=True, modules=()):
    """A join region for uneven inputs (docs/join.md). Ranks that run out of
    data leave the block and shadow, through the coordinator's bookkeeping,
    every collective the others still issue (DDP's gradient all_reduces,
    barriers, ...), contributing identities, so no extra collective runs per
    step. On leaving, j.last_joiner is the last rank to run out, and each of
    `modules` (a DDP model, say) gets the last joiner's parameters and
    buffers, as torch's Join does for DDP: a rank that joined early skipped
    the last optimizer steps."""
    pg = process_group or dist.distributed_c10d._get_default_group()
    _C.join_begin(pg, bool(throw_on_early_termination), bool(divide_by_initial_world_size))
    j = _Joined()
    yield j
    j.last_joiner = _C.join_end(pg)
    src = dist.get_global_rank(pg, j.last_joiner) if process_group is not None \
        else j.last_joiner
    with torch.no_grad():
        for m in modules:
            for t in list(m.parameters()) + list(m.buffers()):
                dist.broadcast(t, src=src, group=process_group)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch's monitored_barrier on a coord group (torch 1.13 refuses any
    backend but gloo in dist.monitored_barrier): rank 0 names the ranks that
    did not arrive within timeout."""
    pg = group or dist.distributed_c10d._get_default_group()
    t = timeout if timeout is not None else timedelta(minutes=30)
    pg.monitored_barrier(t, wait_all_ranks=wait_all_ranks)


def active_ranks(process_group=None):
    """How many ranks contributed to this rank's last collective."""
    pg = process_group or dist.distributed_c10d._get_default_group()
    return _C.active_ranks(pg)


def job(group=None):
    """The job a coord group meets as on the coordinator (what c10d-ctl
    status --job names): the world's, or "<job>.g<id>" for a subgroup."""
    pg = group or dist.distributed_c10d._get_default_group()
    return _C.coord_of(pg).job
