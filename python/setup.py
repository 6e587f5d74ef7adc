"""Builds c10d_coord, the torch.distributed backend over libc10dclient.

    C10D_BUILD_DIR=build /usr/bin/python3 python/setup.py build_ext --inplace

(scripts/build-torch.sh does this; docs/pytorch.md). The extension links
the libc10dclient of C10D_BUILD_DIR (default: ../build) and finds it there
at run time (rpath), so a build tree works without installing.
"""
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
build = os.path.abspath(os.environ.get("C10D_BUILD_DIR", os.path.join(root, "build")))
libdir = os.path.join(build, "client")

setup(
    name="c10d_coord",
    version="0.1.0",
    packages=["c10d_coord"],
    package_dir={"c10d_coord": os.path.join(here, "c10d_coord")},
    ext_modules=[
        CppExtension(
            "c10d_coord._C",
            [os.path.join(here, "csrc", "coord.cpp")],
            include_dirs=[os.path.join(root, "client", "include")],
            library_dirs=[libdir],
            libraries=["c10dclient"],
            extra_link_args=["-Wl,-rpath," + libdir],
            extra_compile_args=["-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
