"""gpuarena_cupy_malloc while CuPy's current stream is being captured into
a CUDA graph (lib/cupystream.c), without a GPU or CuPy: a stand-in
cupy.cuda.stream module exports get_current_stream_ptr as CuPy 14 does
(a capsule in __pyx_capi__), and the fake driver (tests/fakecuda) says
which stream is captured.  An allocation must be refused with gpuarena's
reason while the current stream is captured, and served on the legacy
stream otherwise.

With "off" (and GPUARENA_OPTIONS=device.cupy_capture_check=false) the
check is off: the allocation is served and CuPy's stream never asked.

Usage: cupy_capture_fake.py LIBGPUARENA FAKE_LIBCUDA [off] (with
LD_LIBRARY_PATH at the fake's directory, so that the library opens the
same one).
"""
import ctypes
import sys
import types

lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL held, errors checked
fake = ctypes.CDLL(sys.argv[2])
lib.gpuarena_cupy_malloc.restype = ctypes.c_void_p
lib.gpuarena_cupy_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
lib.gpuarena_cupy_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
fake.fakecuda_capture.argtypes = [ctypes.c_void_p]
fake.fakecuda_count.restype = ctypes.c_long
fake.fakecuda_count.argtypes = [ctypes.c_char_p]

current = [0]  # CuPy's current stream, as the stand-in reports it
asked = [0]  # calls of the stand-in


def current_ptr():
    asked[0] += 1
    return current[0]


CURRENT_PTR = ctypes.CFUNCTYPE(ctypes.c_ssize_t)(current_ptr)
NAME = b"intptr_t (void)"
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
stream_module = types.ModuleType("cupy.cuda.stream")
stream_module.__pyx_capi__ = {
    "get_current_stream_ptr": capsule_new(ctypes.cast(CURRENT_PTR, ctypes.c_void_p), NAME, None)}
sys.modules["cupy.cuda.stream"] = stream_module

failures = 0


def check(what, ok, detail=""):
    global failures
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, ": " + detail if detail else ""))
    failures += not ok


def served(what):
    try:
        p = lib.gpuarena_cupy_malloc(None, 4096, 0)
    except Exception as e:  # noqa: BLE001 - any exception is the failure
        check(what, False, "%s: %s" % (type(e).__name__, e))
        return
    check(what, bool(p) and p != ctypes.c_void_p(-1).value, "block %#x" % (p or 0))
    if p:
        lib.gpuarena_cupy_free(None, p, 0)


STREAM = 0x5000  # a created stream of the fake driver
if sys.argv[3:] == ["off"]:
    current[0] = STREAM
    fake.fakecuda_capture(STREAM)
    served("a captured current stream, the check off")
    check("CuPy's stream not asked with the check off", asked[0] == 0, "%d calls" % asked[0])
    sys.exit(1 if failures else 0)

served("the legacy stream current")  # makes the arena and its first segment
check("CuPy's stream asked", asked[0] == 1, "%d calls" % asked[0])
checks = fake.fakecuda_count(b"cuStreamIsCapturing")
served("the legacy stream current, a cached block")
check("no capture check for the legacy stream (a cached block)",
      fake.fakecuda_count(b"cuStreamIsCapturing") == checks)

current[0] = STREAM
fake.fakecuda_capture(STREAM)
try:
    p = lib.gpuarena_cupy_malloc(None, 4096, 0)
    check("a captured current stream refuses", False, "no exception, block %#x" % (p or 0))
except RuntimeError as e:
    check("a captured current stream refuses", "gpuarena" in str(e) and "captur" in str(e), str(e))
check("the stream was asked", fake.fakecuda_count(b"cuStreamIsCapturing") > checks)

fake.fakecuda_capture(None)
served("the same stream once its capture ended")
sys.exit(1 if failures else 0)
