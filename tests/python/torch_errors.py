"""Failures under gpuarena in PyTorch (gpuarena_torch_alloc(3)): an
allocation larger than the GPU must raise a RuntimeError that says "CUDA
out of memory." with gpuarena's reason, a CUDA graph capture that
allocates must raise one that says the stream is captured, and after each
the process must go on computing correct results on the GPU (PyTorch
does not check the allocator's pointer: a NULL would have become a tensor
without memory and an illegal address that ends the CUDA context).  A
tensor released inside a capture whose free gpuarena must refuse then
(an event on the capturing stream) is freed after it, not kept live.
PyTorch's memory statistics and its sharing of a CUDA tensor with
another process raise for any loaded allocator; gpuarena's statistics
give the figures, and the refused share changes nothing.

Usage: torch_errors.py LIBGPUARENA; exit status 0 when all hold.
"""
import ctypes
import sys

import gastats
from gacheck import check, done

import torch

alloc = torch.cuda.memory.CUDAPluggableAllocator(
    sys.argv[1], "gpuarena_torch_alloc", "gpuarena_torch_free")
torch.cuda.memory.change_current_allocator(alloc)
dev = torch.device("cuda:0")
def still_computes(after):
    x = torch.arange(1000, device=dev, dtype=torch.float64)
    check("computing after " + after, float((x * 2).sum()) == 999000.0, "sum of 2x")


too_big = 4 * torch.cuda.get_device_properties(0).total_memory
for what, fn in [("torch.empty", lambda: torch.empty(too_big, dtype=torch.uint8, device=dev)),
                 ("torch.ones", lambda: torch.ones(too_big // 4, device=dev))]:
    try:
        t = fn()
        check(what + " of 4 x the GPU", False, "no exception, data_ptr %#x" % t.data_ptr())
    except RuntimeError as e:
        msg = str(e)
        check(what + " of 4 x the GPU",
              "CUDA out of memory." in msg and "gpuarena" in msg and str(too_big) in msg,
              msg.splitlines()[0][:300])
    still_computes("out of memory")

x = torch.ones(1 << 16, device=dev)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g, stream=s):
        y = x * 3
    check("capture that allocates", False, "no exception")
except RuntimeError as e:
    msg = str(e)
    check("capture that allocates", "gpuarena" in msg and "captur" in msg, msg.splitlines()[0][:300])
torch.cuda.synchronize()
still_computes("the capture")

# A tensor released inside a capture on S2, with a use on S2 recorded
# (gpuarena_record_stream, as Tensor.record_stream's hook does): its free
# would record an event on S2, which the capture forbids, so gpuarena
# refuses it; the free hook keeps it, and the first hook call after the
# capture makes it (deferred.c).  The capture itself is not broken.
lib = ctypes.CDLL(sys.argv[1])
arena = gastats.default_arena(lib)


def live():
    return gastats.stats(lib, arena).live_blocks


a = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
z = torch.zeros(1 << 16, device=dev)
s2 = torch.cuda.Stream()
s2.wait_stream(torch.cuda.current_stream())
st = lib.gpuarena_record_stream(arena, ctypes.c_void_p(a.data_ptr()),
                               ctypes.c_void_p(s2.cuda_stream))
check("record_stream of a tensor", st == 0, "status %d" % st)
torch.cuda.synchronize()
before = live()
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2, stream=s2):
    del a
    during = live()
    z.add_(1)
w = torch.empty(16, device=dev)  # a hook call after the capture
del w
after = live()
check("free during a capture made after it", after == before - 1,
      "live blocks %d before, %d during, %d after (%s)"
      % (before, during, after, "kept for after the capture" if during == before else "made at once"))
g2.replay()
torch.cuda.synchronize()
check("that capture, replayed", float(z.sum()) == float(1 << 16), "sum of z after one replay")

# What CUDAPluggableAllocator answers itself for any allocator it loads
# (gpuarena_torch_alloc(3), "What PyTorch does not ask of a loaded
# allocator"): its memory statistics and the sharing of a CUDA tensor with
# another process raise.  gpuarena's statistics give the figures instead,
# and the refused share changes nothing.  Should a PyTorch answer these
# one day, the check fails and the man page is to be updated.
t = torch.full((1 << 18,), 2.0, device=dev)
torch.cuda.synchronize()
s0 = gastats.stats(lib, arena)
for what, fn in [("torch.cuda.memory_allocated", torch.cuda.memory_allocated),
                 ("torch.cuda.max_memory_reserved", torch.cuda.max_memory_reserved),
                 ("torch.cuda.reset_peak_memory_stats", torch.cuda.reset_peak_memory_stats)]:
    try:
        v = fn()
        check(what + " raises", False, "returned %r: update gpuarena_torch_alloc(3)" % (v,))
    except RuntimeError as e:
        check(what + " raises", "does not yet support" in str(e), str(e).splitlines()[0][:200])
tot = gastats.total(lib)
check("gpuarena's figures instead", s0.in_use >= t.numel() * 4 and s0.in_use_peak >= s0.in_use
      and s0.reserved >= s0.in_use and tot.reserved >= s0.reserved
      and tot.reserved_peak >= tot.reserved,
      "in use %d (peak %d), reserved %d; all device arenas %d (peak %d)"
      % (s0.in_use, s0.in_use_peak, s0.reserved, tot.reserved, tot.reserved_peak))

from torch.multiprocessing.reductions import reduce_tensor  # noqa: E402

try:
    reduce_tensor(t)
    check("sharing a CUDA tensor with another process raises", False,
          "it was pickled: update gpuarena_torch_alloc(3)")
except RuntimeError as e:
    check("sharing a CUDA tensor with another process raises", "does not yet support" in str(e),
          str(e).splitlines()[0][:200])
s1 = gastats.stats(lib, arena)
check("the refused share changes nothing",
      (s1.live_blocks, s1.in_use, s1.allocs, s1.frees) ==
      (s0.live_blocks, s0.in_use, s0.allocs, s0.frees) and float(t.sum()) == 2.0 * (1 << 18),
      "live blocks %d -> %d, in use %d -> %d" % (s0.live_blocks, s1.live_blocks, s0.in_use,
                                                 s1.in_use))
still_computes("the refused share")
done()
