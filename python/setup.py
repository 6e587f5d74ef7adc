"""Builds c10d_coord, the torch.distributed backend "coord" over libc10dclient.

Users (docs/pytorch.md, Install), in a venv made with --system-site-packages
where torch comes from Debian:

    pip install --no-build-isolation ./python

Developers: scripts/build-torch.sh [BUILD_DIR], i.e.

    C10D_BUILD_DIR=build /usr/bin/python3 python/setup.py build_ext --inplace

Where libc10dclient comes from, the first that applies:

1. C10D_BUILD_DIR=PATH: that CMake build tree of c10d-coord (headers from
   its source tree and its generated c10d/version.h; the library from
   PATH/client). An explicit choice wins over anything installed. Give
   pip an absolute PATH: it runs this file in python/.
2. pkg-config c10dclient (`pkg-config --cflags --libs c10dclient`, so
   PKG_CONFIG_PATH is honoured): an installed prefix, e.g. after
   `cmake --install build --prefix /opt/c10d`.
3. ../build beside this directory: the checkout's own build tree, built
   with the README's commands.

Otherwise the build stops, naming both ways. setup.py prints which one it
took (pip shows it with -v).

Where the installed module finds the library at run time:

- from a prefix: a RUNPATH to the prefix's libdir, so the library is used
  where it was installed (and the prefix must stay);
- from a build tree, installed (pip install, bdist_wheel): the library
  (libc10dclient.so.1) is copied into the package beside _C, whose RUNPATH
  is $ORIGIN, so the build tree is not needed once installed;
- from a build tree, in place (build_ext --inplace: scripts/build-torch.sh):
  a RUNPATH to the build tree's client/, so a rebuilt library is used
  without rebuilding the extension.

The package's version is the library's (pkg-config --modversion, or the
build tree's c10d/version.h), both from project(VERSION) in CMakeLists.txt:
one source of truth.

CUDA tensors are built where torch has CUDA and its toolkit's headers are
found (C10D_TORCH_CUDA=0: not), and C10D_TORCH_STORE_CLONE where torch's
Store has clone() (2.x); both below.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

import torch
from setuptools import setup
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
SONAME = "libc10dclient.so.1"


def fail(msg):
    sys.exit("c10d_coord: " + msg)


def pkg_config(*args):
    """pkg-config's answer for c10dclient, or None where it has none."""
    try:
        p = subprocess.run(["pkg-config", *args, "c10dclient"], capture_output=True, text=True)
    except OSError:  # no pkg-config
        return None
    return p.stdout.strip() if p.returncode == 0 else None


class Lib:
    """Where libc10dclient and its headers are, and how to link it."""

    def __init__(self, kind, where, version, include_dirs, library_dir, libraries=("c10dclient",),
                 extra_compile=(), extra_link=()):
        self.kind, self.where, self.version = kind, where, version
        self.include_dirs, self.library_dir = list(include_dirs), library_dir
        self.libraries, self.extra_compile, self.extra_link = (list(libraries), list(extra_compile),
                                                               list(extra_link))


def from_build_tree(build):
    """The library of a CMake build tree of this project."""
    libdir = os.path.join(build, "client")
    version_h = os.path.join(build, "client", "include", "c10d", "version.h")
    if not (os.path.exists(os.path.join(libdir, SONAME)) and os.path.exists(version_h)):
        fail(f"{build} is not a built c10d-coord build tree (no client/{SONAME} or "
             "client/include/c10d/version.h): build it (cmake --build), or point "
             "PKG_CONFIG_PATH at an installed prefix's lib/pkgconfig instead")
    with open(version_h, encoding="utf-8") as f:
        version = re.search(r'#define C10D_VERSION "([^"]+)"', f.read()).group(1)
    # The headers of the source tree this build tree was configured from
    # (which need not be this checkout).
    src = root
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache, encoding="utf-8", errors="replace") as f:
            m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", f.read(), re.M)
        src = m.group(1) if m else src
    return Lib("build tree", build, version,
               [os.path.join(src, "client", "include"), os.path.join(build, "client", "include")],
               libdir)


def from_pkg_config():
    """The installed library pkg-config knows of, or None."""
    version = pkg_config("--modversion")
    if version is None:
        return None
    libdir = os.path.normpath(pkg_config("--variable=libdir"))
    cflags = shlex.split(pkg_config("--cflags"))
    libs = shlex.split(pkg_config("--libs"))
    # The run path is added once, normalized (the .pc file is relocatable,
    # so its paths read PREFIX/lib/pkgconfig/../../lib).
    return Lib("pkg-config", os.path.normpath(pkg_config("--variable=prefix")), version,
               [os.path.normpath(a[2:]) for a in cflags if a.startswith("-I")], libdir,
               [a[2:] for a in libs if a.startswith("-l")],
               [a for a in cflags if not a.startswith("-I")],
               [a for a in libs if not a.startswith(("-l", "-L", "-Wl,-rpath"))])


def find_lib():
    given = os.environ.get("C10D_BUILD_DIR")
    if given:
        if not os.path.isabs(given) and not os.path.exists(os.path.join(given, "client", SONAME)):
            fail(f"C10D_BUILD_DIR={given} is relative and {os.path.abspath(given)} is no "
                 "build tree; pip runs setup.py in python/: give an absolute path")
        return from_build_tree(os.path.abspath(given))
    lib = from_pkg_config()
    if lib is not None:
        return lib
    if os.path.exists(os.path.join(root, "build", "client", SONAME)):
        return from_build_tree(os.path.join(root, "build"))
    fail("libc10dclient not found. Either install it and let pkg-config find it "
         "(cmake --install build --prefix PREFIX; PKG_CONFIG_PATH=PREFIX/lib/pkgconfig), "
         "or name a build tree (C10D_BUILD_DIR=path/to/build); "
         f"{os.path.join(root, 'build')} has no client/{SONAME} either")


lib = find_lib()

# CUDA tensors (the C library's NCCL data plane) where torch was built with
# CUDA and its toolkit's headers are here; C10D_TORCH_CUDA=0 leaves them out.
# No nvcc is needed: the extension is C++ that asks torch for its streams.
cuda = (torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None and
        os.environ.get("C10D_TORCH_CUDA", "1") != "0")
Extension = CUDAExtension if cuda else CppExtension


def header_has(name, text):
    """Whether torch's installed C++ header `name` contains `text`."""
    for d in cpp_extension.include_paths():
        path = os.path.join(d, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                return text in f.read()
    return False


macros = [("C10D_TORCH_CUDA", "1")] if cuda else []
# torch 2.x's Store has clone() (a second handle on the same store).
if header_has(os.path.join("torch", "csrc", "distributed", "c10d", "Store.hpp"),
              "virtual c10::intrusive_ptr<Store> clone()"):
    macros.append(("C10D_TORCH_STORE_CLONE", "1"))
# What torch's Backend and gloo have (2.6 has none of these; 2.13 all).
C10D_H = os.path.join("torch", "csrc", "distributed", "c10d")
for macro, header, text in [
        ("C10D_TORCH_BACKEND_ABORT", "Backend.hpp", "virtual void abort()"),
        ("C10D_TORCH_BACKEND_SHUTDOWN", "Backend.hpp", "virtual void shutdown()"),
        ("C10D_TORCH_BACKEND_SET_TIMEOUT", "Backend.hpp", "virtual void setTimeout("),
        ("C10D_TORCH_BACKEND_SUPPORTS_COALESCING", "Backend.hpp",
         "virtual bool supportsCoalescing()"),
        ("C10D_TORCH_GLOO_ALLTOALL", "ProcessGroupGloo.hpp",
         "c10::intrusive_ptr<Work> alltoall(")]:
    if header_has(os.path.join(C10D_H, header), text):
        macros.append((macro, "1"))
print(f"c10d_coord: torch {torch.__version__}, CUDA tensors "
      f"{'on (' + torch.version.cuda + ')' if cuda else 'off (CPU tensors only)'}")
print(f"c10d_coord: libc10dclient {lib.version} from {lib.kind}: {lib.where}")


# The extension's files (python/csrc), one concern each, as torch's own
# backends are split (docs/pytorch.md, "Source layout"). Only module.cpp
# includes <torch/extension.h>, the slowest header; ninja (torch's
# BuildExtension uses it where installed) compiles the files in parallel
# and, after a change, only those it touches. The headers are listed so a
# source distribution carries them and a change to one rebuilds.
SOURCES = ["module.cpp", "process_group.cpp", "composed.cpp", "work.cpp", "recv.cpp",
           "store.cpp", "inspect.cpp", "join.cpp", "tensors.cpp", "errors.cpp",
           "checked.cpp", "checked_describe.cpp", "checked_work.cpp", "checked_collectives.cpp",
           "releases.cpp"]
HEADERS = ["process_group.hpp", "checked.hpp", "checked_internal.hpp", "work.hpp", "recv.hpp",
           "store.hpp", "inspect.hpp", "join.hpp", "tensors.hpp", "errors.hpp", "releases.hpp"]


class build_ext(BuildExtension):
    """torch's BuildExtension, linking the run path the install needs (see
    the module's docstring) and bundling a build tree's library."""

    def run(self):
        # setuptools clears inplace while it builds (then copies the result
        # into the source tree), so remember it here.
        self.c10d_inplace = self.inplace
        super().run()

    def build_extension(self, ext):
        bundle = lib.kind == "build tree" and not self.c10d_inplace
        runpath = "$ORIGIN" if bundle else lib.library_dir
        ext.extra_link_args = lib.extra_link + ["-Wl,-rpath," + runpath]
        print(f"c10d_coord: compiling {ext.name} against torch {torch.__version__} and "
              f"libc10dclient {lib.version} (run path {runpath}); a couple of minutes "
              "unless already compiled", flush=True)
        super().build_extension(ext)
        dest = os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), SONAME)
        if bundle:
            # The file the soname names, not the link (a wheel keeps no links).
            shutil.copyfile(os.path.realpath(os.path.join(lib.library_dir, SONAME)), dest)
            print(f"c10d_coord: bundled {SONAME} from {lib.library_dir}")
        elif not self.c10d_inplace and os.path.exists(dest):
            os.remove(dest)  # an earlier build tree's, left in pip's build/lib


setup(
    name="c10d_coord",
    version=lib.version,
    packages=["c10d_coord"],
    # setuptools takes relative paths only (relative to the working
    # directory: pip's is this one, build-torch.sh's too).
    package_dir={"c10d_coord": os.path.relpath(os.path.join(here, "c10d_coord"))},
    ext_modules=[
        Extension(
            "c10d_coord._C",
            [os.path.relpath(os.path.join(here, "csrc", f)) for f in SOURCES],
            depends=[os.path.relpath(os.path.join(here, "csrc", f)) for f in HEADERS],
            include_dirs=lib.include_dirs,
            library_dirs=[lib.library_dir],
            libraries=lib.libraries,
            define_macros=macros,
            extra_compile_args={"cxx": ["-O2"] + lib.extra_compile} if cuda else
            ["-O2"] + lib.extra_compile,
        )
    ],
    cmdclass={"build_ext": build_ext},
    # A build tree's objects stay in it (scripts/build-torch.sh's place too),
    # so a pip build after build-torch.sh only links; -t overrides it.
    # One per torch release: objects compiled against one torch's headers
    # are never linked against another's (CI builds for two).
    options={"build_ext": {"build_temp": os.path.join(
        lib.where, "python-tmp-" + re.sub(r"[^0-9A-Za-z.]+", "_", torch.__version__))}}
    if lib.kind == "build tree" else {},
)
