"""c10d_coord installed with pip as a user installs it, offline,
into fresh venvs made with --system-site-packages (torch is Debian's), and
used from outside the checkout: no PYTHONPATH, the working directory a
temporary one, the launcher and coordinator those of an installed prefix.

- From an installed prefix: `cmake --install` of the build tree into a
  temporary prefix, pip finding the library through pkg-config, from a copy
  of python/ (so nothing of the checkout is at hand). The one compile of
  the extension (a couple of minutes).
- From the build tree (C10D_BUILD_DIR): a wheel of ./python, which bundles
  libc10dclient. It reuses the objects scripts/build-torch.sh left in the
  build tree, so after it this is a link.

Each then runs a 2-rank job (the prefix's c10d-run starting the prefix's
c10d-coord; init_process_group("coord"), an all_reduce) and checks where
the module, its library and the coordinator came from, and the module's
RUNPATH.

    /usr/bin/python3 -m pytest -q -rs tests/install     (C10D_BUILD_DIR: default build)

Skipped, saying why, where PyTorch, venv, pip, a compiler or the built
library is missing.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("C10D_BUILD_DIR", os.path.join(ROOT, "build")))
SONAME = "libc10dclient.so.1"
PIP = ["-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]
PIP_OFFLINE = ["--no-index", "--no-build-isolation", "-v"]

pytest.importorskip("torch", reason="PyTorch is not installed (python3-torch)")
for tool, pkg in [("cmake", "cmake"), ("pkg-config", "pkg-config"), ("c++", "g++"),
                  ("readelf", "binutils")]:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed ({pkg})", allow_module_level=True)
if not os.path.exists(os.path.join(BUILD, "client", SONAME)):
    pytest.skip(f"{BUILD} has no client/{SONAME}: build it first (cmake --build)",
                allow_module_level=True)
with open(os.path.join(BUILD, "CMakeCache.txt"), encoding="utf-8", errors="replace") as _f:
    if re.search(r"^C10D_SANITIZE:\w+=(ON|thread)$", _f.read(), re.M):
        pytest.skip(f"{BUILD} is a sanitizer build: python cannot load its library",
                    allow_module_level=True)

# The rank: an all_reduce through the coord backend, then where things came from.
JOB = r'''
import importlib.metadata, os
import torch, torch.distributed as dist
import c10d_coord

dist.init_process_group("coord")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [float(sum(range(1, world + 1)))] * 4, t
lib = [l.split()[-1] for l in open("/proc/self/maps") if "libc10dclient" in l][0]
coord = "?"  # the c10d-coord that c10d-run (this rank's parent) started
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        comm, rest = open(f"/proc/{pid}/stat").read().rsplit(")", 1)
        if rest.split()[1] == str(os.getppid()) and comm.endswith("(c10d-coord"):
            coord = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        pass
line = (f"rank {rank}: all_reduce ok; version {importlib.metadata.version('c10d_coord')}; "
        f"module {c10d_coord.__file__}; library {lib}; coordinator {coord}\n")
os.write(1, line.encode())  # one write, so the ranks' lines do not interleave
dist.destroy_process_group()
'''


def clean_env(**extra):
    """This environment less whatever could point into the checkout or a job."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "C10D_BUILD_DIR", "PKG_CONFIG_PATH",
                        "C10D_COORD", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                        "PIP_INDEX_URL", "PIP_FIND_LINKS")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no index or find-links from a pip.conf either
    env.update(extra)
    return env


def sh(cmd, timeout=120, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p.returncode, p.stdout + p.stderr


def runpath(so):
    rc, out = sh(["readelf", "-d", so])
    assert rc == 0, out
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The build tree installed into a temporary prefix."""
    p = str(tmp_path_factory.mktemp("prefix"))
    rc, out = sh(["cmake", "--install", BUILD, "--prefix", p])
    assert rc == 0, out
    pc = [d for d, _, fs in os.walk(p) if "c10dclient.pc" in fs]
    assert pc, f"no c10dclient.pc installed under {p}"
    return {"dir": p, "pkgconfig": pc[0], "libdir": os.path.dirname(pc[0])}


def make_venv(where):
    """A venv over the system's packages (torch), with pip; skips where none can be made."""
    rc, out = sh([sys.executable, "-m", "venv", "--system-site-packages", where])
    if rc != 0:
        pytest.skip(f"{sys.executable} -m venv failed (python3-venv?): {out.strip()[-300:]}")
    py = os.path.join(where, "bin", "python")
    rc, out = sh([py, *PIP, "--version"])
    if rc != 0:
        pytest.skip(f"no pip in a venv of {sys.executable} (python3-pip): {out.strip()[-300:]}")
    if sh([py, "-c", "import torch"])[0] != 0:
        pytest.skip(f"a venv of {sys.executable} does not see its torch (is it a venv itself?)")
    return py


def run_job(py, prefix, cwd):
    """2 ranks of JOB with the venv's python, launched by the prefix's c10d-run."""
    script = os.path.join(cwd, "job.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(JOB)
    rc, out = sh([os.path.join(prefix["dir"], "bin", "c10d-run"), "-n", "2", "--", py, script],
                 timeout=180, cwd=cwd, env=clean_env())
    assert rc == 0, out
    # c10d-run prefixes each rank line "[rankN]:"
    ranks = dict(re.findall(r"^(?:\[rank\d+\]:)?rank (\d): all_reduce ok; (.*)$", out, re.M))
    assert sorted(ranks) == ["0", "1"], out
    return [dict(re.findall(r"(\w+) (\S+?)(?:;|$)", r)) for r in ranks.values()], out


def installed(py, cwd):
    """The installed package's directory and its _C*.so (imported from cwd)."""
    code = "import os, c10d_coord; print(os.path.dirname(c10d_coord._C.__file__))"
    rc, out = sh([py, "-c", code], cwd=cwd, env=clean_env())
    assert rc == 0, out
    pkg = out.strip().splitlines()[-1]
    return pkg, [os.path.join(pkg, n) for n in os.listdir(pkg) if n.startswith("_C")][0]


def test_pip_install_against_an_installed_prefix(prefix, tmp_path):
    py = make_venv(str(tmp_path / "venv"))
    # python/ alone, as a user might have it: the checkout's headers and
    # build tree are nowhere near.
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src,
                    ignore=shutil.ignore_patterns("*.so", "*.so.*", "__pycache__", "build",
                                                  "dist", "*.egg-info"))
    env = clean_env(PKG_CONFIG_PATH=prefix["pkgconfig"])
    rc, out = sh([py, *PIP, "install", *PIP_OFFLINE, str(src)], timeout=1200,
                 cwd=str(tmp_path), env=env)
    assert rc == 0, out
    assert re.search(r"libc10dclient \S+ from pkg-config: " + re.escape(prefix["dir"]), out), out
    rc, version = sh(["pkg-config", "--modversion", "c10dclient"], env=env)
    assert rc == 0, version

    pkg, so = installed(py, str(tmp_path))
    assert pkg.startswith(str(tmp_path / "venv")), pkg
    assert runpath(so) == prefix["libdir"]
    rc, out = sh(["ldd", so])
    assert re.search(rf"{SONAME} => {re.escape(prefix['libdir'])}/{SONAME} ", out), out
    # Nothing installed names the checkout (its build tree included).
    for d, _, names in os.walk(pkg):
        for name in names:
            with open(os.path.join(d, name), "rb") as f:
                assert ROOT.encode() not in f.read(), f"{name} names {ROOT}"

    ranks, out = run_job(py, prefix, str(tmp_path))
    lib = os.path.realpath(os.path.join(prefix["libdir"], SONAME))
    for r in ranks:
        assert r["version"] == version.strip(), out
        assert r["module"].startswith(pkg + "/"), out
        assert r["library"] == lib, out
        assert r["coordinator"] == os.path.join(prefix["dir"], "bin", "c10d-coord"), out


def test_wheel_of_a_build_tree_bundles_the_library(prefix, tmp_path):
    # Built with this python's pip where it has one: its compile is
    # build-torch.sh's, whose objects in the build tree it reuses (a venv's
    # python adds an include directory, so it would compile again).
    builder = sys.executable
    if sh([builder, *PIP, "--version"])[0] != 0:
        builder = make_venv(str(tmp_path / "builder"))
    wheels = tmp_path / "wheels"
    rc, out = sh([builder, *PIP, "wheel", "--no-deps", *PIP_OFFLINE, "-w", str(wheels),
                  os.path.join(ROOT, "python")], timeout=1200, cwd=str(tmp_path),
                 env=clean_env(C10D_BUILD_DIR=BUILD))
    assert rc == 0, out
    assert f"from build tree: {BUILD}" in out, out
    whl = [str(w) for w in wheels.iterdir() if w.name.endswith(".whl")]
    assert len(whl) == 1, whl

    py = make_venv(str(tmp_path / "venv"))
    rc, out = sh([py, *PIP, "install", "--no-index", whl[0]], timeout=300, cwd=str(tmp_path),
                 env=clean_env())
    assert rc == 0, out
    pkg, so = installed(py, str(tmp_path))
    assert runpath(so) == "$ORIGIN"
    rc, out = sh(["ldd", so])
    assert re.search(rf"{SONAME} => {re.escape(pkg)}/{SONAME} ", out), out

    ranks, out = run_job(py, prefix, str(tmp_path))
    for r in ranks:
        assert r["module"].startswith(pkg + "/"), out
        assert r["library"] == os.path.join(pkg, SONAME), out  # not the build tree's
