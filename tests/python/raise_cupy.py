"""gpuarena_cupy_malloc in a Python process, called as CuPy's Cython code
calls it (the GIL held, the error indicator checked when it returns -1):
a failure must be a Python exception with gpuarena's reason, MemoryError
when out of memory, RuntimeError otherwise; a success must set none.
Runs on a sim arena, with no GPU and no CuPy.

Usage: raise_cupy.py LIBGPUARENA
"""
import ctypes
import sys

lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL held, errors checked
lib.gpuarena_cupy_malloc.restype = ctypes.c_void_p
lib.gpuarena_cupy_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
lib.gpuarena_cupy_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
SIM = 4
arena = ctypes.c_void_p()
assert lib.gpuarena_create(SIM, 0, b"sim_capacity=4M", ctypes.byref(arena)) == 0

p = lib.gpuarena_cupy_malloc(arena, 1 << 20, 0)
assert p, "a 1 MiB block of a 4 MiB sim arena"
failures = 0


def expect(exc, call, words):
    global failures
    try:
        r = call()
        print("FAIL: %s expected, got %r" % (exc.__name__, r))
        failures += 1
    except exc as e:
        ok = all(w in str(e) for w in words)
        print("%s: %s: %s" % ("ok" if ok else "FAIL", type(e).__name__, e))
        failures += not ok


expect(MemoryError, lambda: lib.gpuarena_cupy_malloc(arena, 64 << 20, 0),
       ["gpuarena", "67108864", "out of memory"])
expect(RuntimeError, lambda: lib.gpuarena_cupy_malloc(None, 4096, -1), ["gpuarena", "-1"])
q = lib.gpuarena_cupy_malloc(arena, 1 << 20, 0)  # the arena still serves
print("%s: a block after the failures" % ("ok" if q else "FAIL"))
failures += not q
lib.gpuarena_cupy_free(arena, p, 0)
lib.gpuarena_cupy_free(arena, q, 0)
assert lib.gpuarena_destroy(arena) == 0
sys.exit(1 if failures else 0)
