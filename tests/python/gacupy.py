"""gpuarena as CuPy's allocator for the Python tests, as
gpuarena_cupy_malloc(3) shows: its two hooks, by address, through
CFunctionAllocator; and a CUDA graph capture that the tests make on more
than one kind of stream.
"""
import ctypes
import time

import gastats
from gacheck import check

import cupy


def use_gpuarena(lib):
    """Make the libgpuarena LIB (a ctypes.CDLL) CuPy's allocator; CuPy
    keeps the allocator, which keeps LIB."""
    malloc = ctypes.cast(lib.gpuarena_cupy_malloc, ctypes.c_void_p).value
    free = ctypes.cast(lib.gpuarena_cupy_free, ctypes.c_void_p).value
    allocator = cupy.cuda.memory.CFunctionAllocator(0, malloc, free, lib)
    cupy.cuda.set_allocator(allocator.malloc)


def capture_round(lib, s, x):
    """A CUDA graph capture on stream S that allocates, under the
    libgpuarena LIB: its arrays must come from a pool of the capture's own
    (lib/graphpool.c), which the arrays made after the capture never get,
    so that the graph's launches write nothing of theirs, and the pool
    must go once the graph is destroyed and its arrays freed.  X, an
    array of float32 made before, is overwritten."""
    def pools():
        """Device arenas besides the default one (made first, listed last)."""
        return len(gastats.device_arenas(lib)) - 1

    cupy.cuda.Device(0).synchronize()
    with s:
        s.begin_capture()
        out = x * 3 + 1  # x * 3 a temporary, freed in the capture; out lives on
        g = s.end_capture()
    check("capture that allocates", pools() == 1, "%d pool arenas" % pools())
    after = [cupy.full(x.size, 9, dtype=cupy.float32) for _ in range(4)]
    x.fill(2)
    cupy.cuda.Device(0).synchronize()
    for launch in range(3):
        g.launch(stream=s)
    s.synchronize()
    check("that capture, launched three times", bool((out == 7).all()), "out == 2 * 3 + 1")
    check("arrays made after the capture untouched by its launches",
          all(bool((a == 9).all()) for a in after), "four arrays of 9")
    del after, out, g
    ok = False
    for attempt in range(100):  # the driver destroys the graph's objects on its own thread
        cupy.empty(16, dtype=cupy.uint8)  # a hook call, which collects
        if pools() == 0:
            ok = True
            break
        time.sleep(0.02)
    check("the capture's pool goes with its graph", ok, "%d pool arenas left" % pools())
