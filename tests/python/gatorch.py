"""gpuarena as PyTorch's allocator for the Python tests of CUDA graphs:
the allocation and free functions through CUDAPluggableAllocator, and the
graph-pool hooks (gpuarena_torch_begin_allocate_to_pool(3)) through its
_allocator attribute, as gpuarena_torch_alloc(3) shows.
"""
import ctypes

import torch


def use_gpuarena_with_pools(libpath):
    """Make libgpuarena at LIBPATH PyTorch's allocator, graph pools
    included, before the first CUDA allocation; the library (ctypes)."""
    lib = ctypes.CDLL(libpath)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        libpath, "gpuarena_torch_alloc", "gpuarena_torch_free")

    def addr(fn):
        return ctypes.cast(fn, ctypes.c_void_p).value

    alloc._allocator.set_begin_allocate_to_pool(addr(lib.gpuarena_torch_begin_allocate_to_pool))
    alloc._allocator.set_end_allocate_to_pool_fn(addr(lib.gpuarena_torch_end_allocate_to_pool))
    alloc._allocator.set_release_pool(addr(lib.gpuarena_torch_release_pool))
    torch.cuda.memory.change_current_allocator(alloc)
    return lib
