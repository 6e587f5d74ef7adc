"""Builds c10d_coord, the torch.distributed backend over libc10dclient.

    C10D_BUILD_DIR=build /usr/bin/python3 python/setup.py build_ext --inplace

(scripts/build-torch.sh does this; docs/pytorch.md). The extension links
the libc10dclient of C10D_BUILD_DIR (default: ../build) and finds it there
at run time (rpath), so a build tree works without installing.
"""
import os

import torch
from setuptools import setup
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build = os.path.abspath(os.environ.get("C10D_BUILD_DIR", os.path.join(root, "build")))
libdir = os.path.join(build, "client")

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


# torch 2.x reads a group's name and description from its first registered
# Backend; a ProcessGroup subclass such as ours has none, so both are kept
# here where the methods are virtual (destroy_process_group(group) reads
# the name: "ProcessGroup name not set" otherwise).
macros = [("C10D_TORCH_CUDA", "1")] if cuda else []
if header_has(os.path.join("torch", "csrc", "distributed", "c10d", "ProcessGroup.hpp"),
              "virtual const std::string& getGroupName()"):
    macros.append(("C10D_TORCH_GROUP_NAME", "1"))
print(f"c10d_coord: torch {torch.__version__}, CUDA tensors "
      f"{'on (' + torch.version.cuda + ')' if cuda else 'off (CPU tensors only)'}")

setup(
    name="c10d_coord",
    version="0.1.0",
    packages=["c10d_coord"],
    package_dir={"c10d_coord": os.path.join(here, "c10d_coord")},
    ext_modules=[
        Extension(
            "c10d_coord._C",
            [os.path.join(here, "csrc", "coord.cpp")],
            include_dirs=[os.path.join(root, "client", "include"),
                          os.path.join(build, "client", "include")],  # c10d/version.h
            library_dirs=[libdir],
            libraries=["c10dclient"],
            define_macros=macros,
            extra_link_args=["-Wl,-rpath," + libdir],
            extra_compile_args={"cxx": ["-O2"]} if cuda else ["-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
