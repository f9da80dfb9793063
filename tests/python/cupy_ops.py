"""Array operations with CuPy on GPU 0, under gpuarena or CuPy's own pool.

Usage: cupy_ops.py gpuarena|native LIBGPUARENA
Prints one JSON line with the results and, under gpuarena, how many
allocations the default device arena served.
"""
import ctypes
import json
import sys

import gacupy
import gastats

import cupy

mode, libpath = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(libpath)
if mode == "gpuarena":
    gacupy.use_gpuarena(lib)

rs = cupy.random.RandomState(seed=0)
res = {}
a = cupy.arange(1 << 20, dtype=cupy.float64)
res["elementwise"] = float((cupy.sin(a) * 2 + cupy.sqrt(a)).sum())
m = rs.standard_normal((512, 512), dtype=cupy.float64)
res["matmul"] = float((m @ m.T).trace())
res["sort"] = [float(v) for v in cupy.sort(rs.standard_normal(100000))[::20000].get()]
res["fft"] = float(cupy.abs(cupy.fft.fft(a[:65536])).max())
arrays = [cupy.full(n, n, dtype=cupy.int32) for n in (1, 100, 10000, 1000000, 3000000)]
res["sums"] = [int(x.sum()) for x in arrays]
del arrays
cupy.cuda.Device(0).synchronize()

out = {"mode": mode, "results": res}
if mode == "gpuarena":
    stats = gastats.stats(lib, gastats.default_arena(lib))
    out["allocs"] = stats.allocs
    out["peak_reserved"] = stats.reserved_peak
print(json.dumps(out))
