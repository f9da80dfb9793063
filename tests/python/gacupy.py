"""gpuarena as CuPy's allocator for the Python tests, as
gpuarena_cupy_malloc(3) shows: its two hooks, by address, through
CFunctionAllocator.
"""
import ctypes

import cupy


def use_gpuarena(lib):
    """Make the libgpuarena LIB (a ctypes.CDLL) CuPy's allocator; CuPy
    keeps the allocator, which keeps LIB."""
    malloc = ctypes.cast(lib.gpuarena_cupy_malloc, ctypes.c_void_p).value
    free = ctypes.cast(lib.gpuarena_cupy_free, ctypes.c_void_p).value
    allocator = cupy.cuda.memory.CFunctionAllocator(0, malloc, free, lib)
    cupy.cuda.set_allocator(allocator.malloc)
