"""CuPy on two GPUs with gpuarena as its allocator, the defaults untouched:
arrays made on each device (under cupy.cuda.Device) come from that
device's default arena, on the device's null stream and on a stream
made current there (CuPy's hooks name no stream: gpuarena asks CuPy for
the current one, gpuarena_cupy_malloc(3)); arrays copied from one GPU to
the other (cupy.asarray under the other device, a peer copy) and
computed on there give the values numpy computes.

Usage: cupy_two_gpus.py LIBGPUARENA; exits 77 with fewer than two GPUs.
"""
import ctypes
import sys

import numpy

import cupy

import gacupy
import gastats
from gacheck import check, done

if cupy.cuda.runtime.getDeviceCount() < 2:
    print("fewer than two GPUs", file=sys.stderr)
    sys.exit(77)
lib = ctypes.CDLL(sys.argv[1])
gacupy.use_gpuarena(lib)

def allocs(device):
    return gastats.stats(lib, gastats.default_arena(lib, device)).allocs


host = numpy.random.default_rng(7).standard_normal(1 << 21)  # 16 MiB
before = [allocs(0), allocs(1)]
with cupy.cuda.Device(0):
    x0 = cupy.asarray(host)
    y0 = cupy.sqrt(cupy.abs(x0)) + 1
with cupy.cuda.Device(1):
    x1 = cupy.asarray(x0)  # a peer copy from GPU 0
    check("an array of GPU 0 copied to GPU 1", x1.device.id == 1
          and numpy.array_equal(cupy.asnumpy(x1), host))
    y1 = cupy.sqrt(cupy.abs(x1)) + 1
    s = cupy.cuda.Stream(non_blocking=True)
    with s:  # a stream of device 1 made current: the hooks pass it
        z1 = x1 * 3 - 2
        t1 = z1.sum()
    s.synchronize()
    check("computed on GPU 1, on a stream of its own",
          numpy.allclose(cupy.asnumpy(z1), host * 3 - 2)
          and numpy.isclose(float(t1), float((host * 3 - 2).sum())))
with cupy.cuda.Device(0):
    back = cupy.asarray(y1)  # and back to GPU 0
    check("an array of GPU 1 copied back to GPU 0, equal to GPU 0's own",
          back.device.id == 0 and bool((back == y0).all()))
after = [allocs(0), allocs(1)]
check("each device's arena served its arrays", after[0] > before[0] and after[1] > before[1],
      "allocations on GPU 0: %d, GPU 1: %d" % (after[0] - before[0], after[1] - before[1]))
check("the values", numpy.allclose(cupy.asnumpy(back), numpy.sqrt(numpy.abs(host)) + 1))
done()
