#!/bin/sh
# cupy-capture.sh - gpuarena_cupy_malloc serves an allocation made while
# CuPy's current stream is being captured into a CUDA graph
# (lib/cupystream.c) from a pool of the capture's own (lib/graphpool.c),
# shown with no GPU and no CuPy: python3 with a
# stand-in cupy.cuda.stream module and the fake driver (fakecuda/).
# Then again with device.cupy_capture_check=false: served, CuPy not
# asked.  Skips (77) without python3, the shared library or the fake
# driver.
. "${srcdir:-$(dirname "$0")}/libdir.sh"
fake=$(cd fakecuda 2> /dev/null && pwd)
[ -n "$fake" ] && [ -r "$fake/libcuda.so.1" ] ||
    { echo "SKIP: fakecuda/libcuda.so.1 not built (no Check?)"; exit 77; }
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
script="$srcdir/python/cupy_capture_fake.py"
unset GPUARENA_OPTIONS GPUARENA_CONF
rc=0
python3 "$script" "$libdir/libgpuarena.so.0" "$fake/libcuda.so.1" || rc=1
# The key that turns the check off (gpuarena.conf(5)), in a process of its own.
GPUARENA_OPTIONS=device.cupy_capture_check=false \
    python3 "$script" "$libdir/libgpuarena.so.0" "$fake/libcuda.so.1" off || rc=1
exit $rc
