#!/bin/sh
# bench-torch.sh - build and run bench_torch (bench_torch.cpp): gpuarena,
# PyTorch's own caching allocator and the driver's pool on issue 5's (a),
# (b) and (c), in one process.  It is built here, not by Automake: it needs
# the C++ headers and libraries of the PyTorch that python3 imports (its
# include and library paths, its C++ ABI), which gpuarena does not depend
# on.  `make -C bench bench-torch' runs it with the arguments below.
#
# Usage: bench-torch.sh SRCDIR INCLUDEDIR LIBDIR CUDADIR
#   SRCDIR      bench/ of the source tree (bench_torch.cpp, churn.h)
#   INCLUDEDIR  gpuarena's include/ (gpuarena.h)
#   LIBDIR      where the built libgpuarena.so is (lib/.libs)
#   CUDADIR     the CUDA Toolkit (include/cuda.h; lib64/stubs/libcuda.so
#               where the driver's own libcuda.so is not found)
# Exit: bench_torch's (0, or 1 on an error); 77 without python3, PyTorch,
# a C++ compiler or a GPU.
set -u
[ $# -eq 4 ] || { echo "usage: $0 SRCDIR INCLUDEDIR LIBDIR CUDADIR" >&2; exit 1; }
src=$1 inc=$2 libdir=$(cd "$3" && pwd) cuda=$4
cxx=${CXX:-g++}
command -v "$cxx" > /dev/null || { echo "bench-torch: SKIP: no $cxx"; exit 77; }
command -v python3 > /dev/null || { echo "bench-torch: SKIP: no python3"; exit 77; }
# PyTorch's header and library paths and its C++ ABI, one per line.
paths=$(python3 - << 'PYEOF' 2> /dev/null
import torch
from torch.utils import cpp_extension as c
print(" ".join("-I" + p for p in c.include_paths()))
print(c.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
PYEOF
) || { echo "bench-torch: SKIP: python3 cannot import torch"; exit 77; }
tinc=$(echo "$paths" | sed -n 1p)
tlib=$(echo "$paths" | sed -n 2p)
abi=$(echo "$paths" | sed -n 3p)
out=${TMPDIR:-/tmp}/bench_torch.$$
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086 # $tinc is a list of -I options
"$cxx" -std=c++20 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$src" -I"$inc" -I"$cuda/include" $tinc \
    "$src/bench_torch.cpp" -o "$out" -L"$libdir" -lgpuarena -L"$tlib" -lc10_cuda -lc10 \
    -L"$cuda/lib64/stubs" -lcuda -Wl,-rpath,"$libdir:$tlib" \
    || { echo "bench-torch: building bench_torch failed" >&2; exit 1; }
"$out"
