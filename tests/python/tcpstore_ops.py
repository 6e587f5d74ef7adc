"""Every TCPStore operation of this torch's own client against a TCPStore
server at 127.0.0.1:PORT, with TCPStore's answers asserted; prints "ok".
test_tcpstore.py runs it against the coordinator's --tcpstore-listen port
with each torch CI tests (Debian's and 2.13's in a venv).
Usage: tcpstore_ops.py PORT"""
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

port = int(sys.argv[1])
try:  # a torch built without libuv (Debian 13's 2.6) must say so
    s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10),
                      use_libuv=False)
except TypeError:
    s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10))
n0 = s.num_keys()
s.set("t2/k", b"hello")
assert s.get("t2/k") == b"hello"
assert s.add("t2/cnt", 5) == 5 and s.add("t2/cnt", -7) == -2 and s.get("t2/cnt") == b"-2"
assert s.compare_set("t2/cs", "", "new") == b"new"
assert s.compare_set("t2/cs2", "exp", "new") == b"exp"
assert s.compare_set("t2/cs", "new", "newer") == b"newer"
assert s.compare_set("t2/cs", "zzz", "o") == b"newer"
if hasattr(s, "check"):
    assert s.check(["t2/k", "t2/cnt"]) and not s.check(["t2/k", "t2/nope"]) and s.check([])
s.wait(["t2/k", "t2/cnt"])
try:
    s.wait(["t2/never"], timedelta(seconds=1))
    raise AssertionError("a wait for a missing key returned")
except RuntimeError:
    pass
assert s.get("t2/cs") == b"newer"  # after a timed-out wait the connection is usable
assert s.delete_key("t2/k") is True and s.delete_key("t2/k") is False
if hasattr(s, "append"):
    s.append("t2/ap", "abc")
    s.append("t2/ap", "def")
    assert s.get("t2/ap") == b"abcdef"
    s.multi_set(["t2/m1", "t2/m2"], ["v1", "vv2"])
    assert s.multi_get(["t2/m1", "t2/m2"]) == [b"v1", b"vv2"]
assert s.num_keys() >= n0 + 2  # t2/cnt, t2/cs (and more where append exists)
big = b"x" * 1000000
s.set("t2/big", big)
assert s.get("t2/big") == big
print("ok", torch.__version__)
