"""TCPStore's own client against two servers, alternating in one run:
PyTorch's TCPStore server (is_master=True in this process) and c10d-coord's
TCPStore port (--tcpstore-listen). The same client code drives both, as
tests/bench/anchors/torch_store_bench.py drives TCPStore.
Usage: tcpstore_bench.py COORD_TCPSTORE_PORT NCLIENTS OPS [ROUNDS]"""
import multiprocessing as mp
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def client(port, n, idx, q):
    s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=60))
    t = [time.perf_counter()]
    for i in range(n):
        s.set(f"b{idx}_{i}", b"v" * 16)
    t.append(time.perf_counter())
    for i in range(n):
        s.get(f"b{idx}_{i}")
    t.append(time.perf_counter())
    for i in range(n):
        s.add("bctr", 1)
    t.append(time.perf_counter())
    # set() is not acknowledged: the last set's add above is what ends it
    q.put(t)


def run(port, nc, n):
    q = mp.Queue()
    ps = [mp.Process(target=client, args=(port, n, i, q)) for i in range(nc)]
    for p in ps:
        p.start()
    res = [q.get() for _ in ps]
    for p in ps:
        p.join()
    out = {}
    for name, k in (("set", 0), ("get", 1), ("add", 2)):
        span = max(r[k + 1] for r in res) - min(r[k] for r in res)
        out[name] = nc * n / span
    return out


if __name__ == "__main__":
    coord_port, nc, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=60))
    for r in range(rounds):
        torch_ops = run(master.port, nc, n)
        coord_ops = run(coord_port, nc, n)
        for op in ("set", "get", "add"):
            print(f"round {r + 1}, {nc} client(s), {op}: TCPStore server "
                  f"{torch_ops[op]:,.0f}/s, c10d-coord {coord_ops[op]:,.0f}/s, "
                  f"{coord_ops[op] / torch_ops[op]:.2f}x")
