"""CuPy with CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1 under gpuarena
(gpuarena_cupy_malloc(3)): CuPy's current stream is then the per-thread
default stream (CU_STREAM_PER_THREAD), one handle for each thread's own
stream, which CuPy captures CUDA graphs on.  Arrays computed there must
be right; a capture there that allocates must be served from the
capture's own pool (gacupy.capture_round), not refused, in a thread of
the program and in another thread, whose per-thread stream is another.

Usage: cupy_ptds.py LIBGPUARENA; exit status 0 when all hold.
"""
import ctypes
import os
import sys
import threading

os.environ["CUPY_CUDA_PER_THREAD_DEFAULT_STREAM"] = "1"  # read when cupy is imported

import gacupy  # noqa: E402 - after the environment it reads
from gacheck import check, done  # noqa: E402

import cupy  # noqa: E402

lib = ctypes.CDLL(sys.argv[1])
gacupy.use_gpuarena(lib)
s = cupy.cuda.get_current_stream()
check("CuPy's current stream is the per-thread stream", s.ptr == 2, "stream %#x" % s.ptr)
x = cupy.arange(1000, dtype=cupy.float64)
check("computing on it", float((x * 2).sum()) == 999000.0)

x = cupy.ones(1 << 20, dtype=cupy.float32)
gacupy.capture_round(lib, s, x)
x.fill(1)
check("computing after the capture", float((x * 2).sum()) == 2.0 * (1 << 20), "sum of 2x")


def other_thread():
    try:
        cupy.cuda.Device(0).use()
        t = cupy.cuda.get_current_stream()
        check("another thread's current stream is its per-thread stream", t.ptr == 2,
              "stream %#x" % t.ptr)
        gacupy.capture_round(lib, t, cupy.ones(1 << 16, dtype=cupy.float32))
    except Exception as e:  # noqa: BLE001 - any exception is the failure
        check("a capture in another thread", False, "%s: %s" % (type(e).__name__, e))


th = threading.Thread(target=other_thread)
th.start()
th.join()
done()
