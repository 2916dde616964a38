"""Builds the Python package tagc (tagc.torch and its extension tagc._C) against the
installed torch, for `pip install --no-build-isolation .` (pyproject.toml).

The extension is tagc's header-only library (include/) plus python/tagc/csrc, compiled
by torch.utils.cpp_extension with torch's own flags. CCCL's headers (Thrust, CUB,
libcu++; host code only, no nvcc) come from TAGC_CCCL_INCLUDE_DIR, else the CUDA toolkit
($CUDA_HOME or /usr/local/cuda).
"""
import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))


def cccl_include_dir():
    candidates = [os.environ.get("TAGC_CCCL_INCLUDE_DIR")]
    for cuda in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if cuda:
            candidates += [os.path.join(cuda, "include", "cccl"), os.path.join(cuda, "include")]
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, "thrust", "version.h")):
            return d
    raise SystemExit("tagc: CCCL headers (thrust/, cub/, cuda/std/) not found; install the CUDA toolkit "
                     "or set TAGC_CCCL_INCLUDE_DIR (tried %s)" % [d for d in candidates if d])


# Relative to setup.py, as setuptools wants them.
sources = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "python", "tagc", "csrc", "*.cpp")))
flags = ["-std=c++20", "-O3", "-fopenmp", "-isystem", cccl_include_dir(),
         "-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP"]  # Thrust's OpenMP system as the "device"

setup(
    packages=["tagc"],
    package_dir={"tagc": "python/tagc"},
    ext_modules=[CppExtension("tagc._C", sources, include_dirs=[os.path.join(HERE, "include")],
                              extra_compile_args=flags, extra_link_args=["-fopenmp"])],
    cmdclass={"build_ext": BuildExtension},
)
