"""One rank of the flat-list benchmark (run by tests/bench/run_flat_list_bench.sh
through c10d-run): `torch_flat_list_bench.py BACKEND LABEL OP TOTAL_MIB REPS`,
BACKEND gloo or coord (the data plane from C10D_DATA_PLANE), OP all_gather
or reduce_scatter. The list is made of views of one flat buffer of TOTAL_MIB
(`list(flat.chunk(world))`): all_gather's output, reduce_scatter's input.
Plain gloo's list path copies through a flat buffer of its own; coord over
gloo hands such a list to gloo's _allgather_base / _reduce_scatter_base as
the flat tensor it is. One call to warm up, then REPS timed calls (a barrier
before each), the median on rank 0; the peak memory is ru_maxrss's increase
over its value once the buffers are allocated and written (the largest over
the ranks); then the last result is checked, on every rank, against the
exact values it must have (integers in float32, so the order of the sums
does not matter), and rank 0's crc32 printed, to compare across backends.
Rank 0 prints one line: `LABEL OP WORLD TOTAL_MIB MEDIAN_MS EXTRA_MIB OK CRC`
(or `LABEL OP WORLD TOTAL_MIB raises ERROR` where the call raises)."""
import os
import resource
import statistics
import sys
import time
import zlib

import torch
import torch.distributed as dist

import c10d_coord

backend, label, op, total_mib, reps = sys.argv[1], sys.argv[2], sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(1)
dist.init_process_group(backend)
rank, world = dist.get_rank(), dist.get_world_size()
if backend == "coord":
    want = os.environ.get("C10D_DATA_PLANE", "coord")
    got = c10d_coord.data_plane()
    assert got.startswith(f"cpu:{want.split(':')[-1]}"), (want, got)

W = 4096  # values repeat with this period: exact in float32, no temporaries to make them
total = total_mib << 20 >> 2  # float32 elements
n = total // world
assert n % W == 0
row = torch.arange(W, dtype=torch.float32)
flat = torch.empty(total)
if op == "all_gather":
    inp = torch.empty(n)
    inp.view(-1, W).copy_(row + rank * W)
    flat.fill_(-1)

    def call():
        dist.all_gather(list(flat.chunk(world)), inp)

    def correct():
        return all(bool((c.view(-1, W) == row + j * W).all())
                   for j, c in enumerate(flat.chunk(world)))
    result = flat
elif op == "reduce_scatter":
    out = torch.empty(n)
    out.fill_(-1)
    for j, c in enumerate(flat.chunk(world)):
        c.view(-1, W).copy_(row * (rank + 1) + j)

    def call():
        dist.reduce_scatter(out, list(flat.chunk(world)))

    def correct():
        s = world * (world + 1) // 2
        return bool((out.view(-1, W) == row * s + world * rank).all())
    result = out
else:
    raise SystemExit(f"unknown op {op}")

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, buffers in
dist.barrier()
try:
    call()
except Exception as e:  # noqa: BLE001 (plain gloo may not have it)
    if rank == 0:
        msg = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        print(f"{label} {op} {world} {total_mib} raises {type(e).__name__}: {msg}", flush=True)
    sys.exit(0)
times = []
for _ in range(reps):
    dist.barrier()
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
ok = correct()
t = torch.tensor([extra, 0.0 if ok else 1.0], dtype=torch.float64)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
if rank == 0:
    crc = zlib.crc32(result.numpy().data) & 0xFFFFFFFF
    print(f"{label} {op} {world} {total_mib} {statistics.median(times) * 1e3:.1f} "
          f"{t[0].item():.0f} {int(t[1].item() == 0)} {crc:08x}", flush=True)
dist.destroy_process_group()
