"""PyTorch's optional allocator hooks with gpuarena, installed from Python
as gpuarena_torch_alloc(3) shows: record_stream, empty_cache and
set_per_process_memory_fraction.

- Tensor.record_stream: a block freed while a side stream still uses it
  must not be handed out again before that work is done.  Without the
  hook PyTorch tells the allocator nothing, and the next allocation of
  the size on the same stream takes the block at once (checked too, so
  that the test shows the hook is what makes the difference).
- torch.cuda.empty_cache: the cached memory goes back to the driver.
- torch.cuda.set_per_process_memory_fraction: a tensor larger than the
  fraction of the GPU is refused with PyTorch's out-of-memory words, one
  below it is not, and a fraction of 1 lifts the cap.

Usage: torch_hooks.py LIBGPUARENA; exit status 0 when all hold.
"""
import ctypes
import sys

import torch

from gacheck import check, done

lib = ctypes.CDLL(sys.argv[1])
alloc = torch.cuda.memory.CUDAPluggableAllocator(
    sys.argv[1], "gpuarena_torch_alloc", "gpuarena_torch_free")
torch.cuda.memory.change_current_allocator(alloc)
dev = torch.device("cuda:0")


def addr(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def freed_while_busy():
    """Free a tensor that a busy side stream uses (record_stream), then
    allocate its size again: (same block?, side stream still busy?)."""
    side = torch.cuda.Stream()
    a = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU time
        a.fill_(7)
    a.record_stream(side)
    pa = a.data_ptr()
    del a
    b = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    busy = not side.query()
    same = b.data_ptr() == pa
    torch.cuda.synchronize()
    return same, busy


# Once for nothing: the first launch of a kernel loads its module (lazy
# loading), which waits for the side stream, so the first run never finds
# it busy.
freed_while_busy()
same, busy = freed_while_busy()
check("without the hook the block is taken again at once", same and busy,
      "(same block: %s, side stream busy: %s)" % (same, busy))

alloc._allocator.set_record_stream_fn(addr(lib.gpuarena_torch_record_stream))
alloc._allocator.set_reset_fn(addr(lib.gpuarena_torch_empty_cache))
same, busy = freed_while_busy()
check("with the hook the block waits for the side stream", busy and not same,
      "(same block: %s, side stream busy: %s)" % (same, busy))

x = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
del x
torch.cuda.synchronize()
before = torch.cuda.mem_get_info()[0]
torch.cuda.empty_cache()
after = torch.cuda.mem_get_info()[0]
check("empty_cache gives cached memory back", after - before >= 1 << 30,
      "(driver free memory +%d MiB)" % ((after - before) >> 20))
alloc._allocator.set_memory_fraction_fn(
    addr(lib.gpuarena_torch_set_memory_fraction))
total = torch.cuda.mem_get_info()[1]
torch.cuda.set_per_process_memory_fraction(0.25)
try:
    x = torch.empty(total // 10 * 3, dtype=torch.uint8, device=dev)
    refused, why = False, ""
except RuntimeError as e:
    refused, why = True, str(e)
check("a tensor above the fraction is refused",
      refused and "CUDA out of memory" in why and "max_reserved" in why,
      "(%s)" % why.splitlines()[0][:160] if why else "")
x = torch.empty(total // 10, dtype=torch.uint8, device=dev)
check("a tensor below the fraction is not", x.numel() == total // 10)
del x
torch.cuda.set_per_process_memory_fraction(1.0)
x = torch.empty(total // 10 * 3, dtype=torch.uint8, device=dev)
check("a fraction of 1 lifts the cap", x.numel() == total // 10 * 3)
del x
torch.cuda.empty_cache()
done()
