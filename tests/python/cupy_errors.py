"""Failures under gpuarena in CuPy (gpuarena_cupy_malloc(3)): an array
larger than the GPU must raise MemoryError with gpuarena's reason, and
CuPy must go on computing correct results afterwards (CuPy does not check
the allocator's pointer: a NULL would have become an array without
memory and an illegal address that ends the CUDA context).

Usage: cupy_errors.py LIBGPUARENA; exit status 0 when all hold.
"""
import ctypes
import sys

import cupy

lib = ctypes.CDLL(sys.argv[1])
malloc = ctypes.cast(lib.gpuarena_cupy_malloc, ctypes.c_void_p).value
free = ctypes.cast(lib.gpuarena_cupy_free, ctypes.c_void_p).value
allocator = cupy.cuda.memory.CFunctionAllocator(0, malloc, free, lib)
cupy.cuda.set_allocator(allocator.malloc)
failures = 0
too_big = 4 * cupy.cuda.Device(0).mem_info[1]
for attempt in range(2):
    try:
        a = cupy.empty(too_big, dtype=cupy.uint8)
        print("FAIL: cupy.empty of 4 x the GPU: no exception, ptr %#x" % a.data.ptr)
        failures += 1
    except MemoryError as e:
        ok = "gpuarena" in str(e) and "out of memory" in str(e)
        print("%s: cupy.empty of 4 x the GPU: %s" % ("ok" if ok else "FAIL", str(e)[:300]))
        failures += not ok
    x = cupy.arange(1000, dtype=cupy.float64)
    ok = float((x * 2).sum()) == 999000.0
    print("%s: computing after it" % ("ok" if ok else "FAIL"))
    failures += not ok
sys.exit(1 if failures else 0)
