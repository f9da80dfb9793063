"""Failures under gpuarena in CuPy (gpuarena_cupy_malloc(3)): an array
larger than the GPU must raise MemoryError with gpuarena's reason; the
arrays made inside a CUDA graph capture come from the capture's own pool,
which nothing made after the capture gets and which goes with the graph
(and a capture that allocates nothing works too); and CuPy must go on
computing correct results afterwards (CuPy does not
check the allocator's pointer: a NULL would have become an array without
memory and an illegal address that ends the CUDA context).

Usage: cupy_errors.py LIBGPUARENA; exit status 0 when all hold.
"""
import ctypes
import sys

import gacupy
import gastats
from gacheck import check, done

import cupy

lib = ctypes.CDLL(sys.argv[1])
gacupy.use_gpuarena(lib)
too_big = 4 * cupy.cuda.Device(0).mem_info[1]
for attempt in range(2):
    try:
        a = cupy.empty(too_big, dtype=cupy.uint8)
        check("cupy.empty of 4 x the GPU", False, "no exception, ptr %#x" % a.data.ptr)
    except MemoryError as e:
        check("cupy.empty of 4 x the GPU", "gpuarena" in str(e) and "out of memory" in str(e),
              str(e)[:300])
    x = cupy.arange(1000, dtype=cupy.float64)
    check("computing after it", float((x * 2).sum()) == 999000.0)


# A CUDA graph capture (cupy.cuda.Stream.begin_capture) that allocates
# (gacupy.capture_round): on a non-blocking stream, and on a blocking one
# (CuPy's default), whose capture forbids the use of the legacy stream
# where the capture's pool is made.
x = cupy.ones(1 << 20, dtype=cupy.float32)
y = cupy.empty_like(x)
s = cupy.cuda.Stream(non_blocking=True)
gacupy.capture_round(lib, s, x)
gacupy.capture_round(lib, cupy.cuda.Stream(), x)
x.fill(1)
cupy.cuda.Device(0).synchronize()
check("computing after the capture", float((x * 2).sum()) == 2.0 * (1 << 20), "sum of 2x")

# The same in global capture mode, where a call that the driver deems
# unsafe, from any thread, breaks the capture (the pool's arena and its
# tie to the graph are made inside it).
with s:
    s.begin_capture(mode=getattr(cupy.cuda.runtime, "streamCaptureModeGlobal", 0))
    out = x * 2 + 1
    g = s.end_capture()
g.launch(stream=s)
s.synchronize()
check("a capture in global mode that allocates, launched", bool((out == 3).all()),
      "out == 1 * 2 + 1")
del out, g

# One that allocates nothing (results written with out=) is captured and
# launched, and writes what it computed.
with s:
    s.begin_capture()
    cupy.multiply(x, 5, out=y)
    g = s.end_capture()
y.fill(0)
cupy.cuda.Device(0).synchronize()
g.launch(stream=s)
s.synchronize()
check("capture with out= only, launched", bool((y == 5).all()), "y == 5 after the launch")

# An array released during a capture on a blocking stream, whose free
# must reach the driver (a use on another stream was recorded with
# gpuarena_record_stream, so the free records an event): the legacy
# stream, which CuPy's hook frees on, may not be used then.  CuPy believes
# the memory freed; gpuarena keeps the free and makes it at the first
# hook call after the capture (deferred.c), without breaking the capture.
arena = gastats.default_arena(lib)


def live():
    return gastats.stats(lib, arena).live_blocks


z = cupy.empty(1 << 20, dtype=cupy.uint8)
other = cupy.cuda.Stream(non_blocking=True)
st = lib.gpuarena_record_stream(arena, ctypes.c_void_p(z.data.ptr), ctypes.c_void_p(other.ptr))
check("record_stream of an array", st == 0, "status %d" % st)
cupy.cuda.Device(0).synchronize()
before = live()
blocking = cupy.cuda.Stream()
with blocking:
    blocking.begin_capture()
    cupy.multiply(x, 7, out=y)
    del z
    during = live()
    g = blocking.end_capture()
w = cupy.empty(16, dtype=cupy.uint8)  # a hook call after the capture
del w
after = live()
check("free during a blocking capture made after it",
      after == before - 1, "live blocks %d before, %d during, %d after (%s)"
      % (before, during, after, "kept for after the capture" if during == before else "made at once"))
y.fill(0)
g.launch(stream=blocking)
blocking.synchronize()
check("that capture, launched", bool((y == 7).all()), "y == 7 after the launch")
done()
