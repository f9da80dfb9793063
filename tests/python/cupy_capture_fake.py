"""gpuarena_cupy_malloc while CuPy's current stream is being captured into
a CUDA graph (lib/cupystream.c), without a GPU or CuPy: a stand-in
cupy.cuda.stream module exports get_current_stream_ptr as CuPy 14 does
(a capsule in __pyx_capi__), and the fake driver (tests/fakecuda) says
which stream is captured.  An allocation while the current stream is
captured must come from the capture's own pool (lib/graphpool.c), whose
blocks the capture reuses and nothing after it gets, and which goes once
the fake driver says the graph is destroyed and its blocks are freed; on
the legacy stream otherwise.

With "off" (and GPUARENA_OPTIONS=device.cupy_capture_check=false) the
check is off: the allocation is served and CuPy's stream never asked.

Usage: cupy_capture_fake.py LIBGPUARENA FAKE_LIBCUDA [off] (with
LD_LIBRARY_PATH at the fake's directory, so that the library opens the
same one).
"""
import ctypes
import sys
import types

import gastats
from gacheck import check, done

lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the GIL held, errors checked
fake = ctypes.CDLL(sys.argv[2])
lib.gpuarena_cupy_malloc.restype = ctypes.c_void_p
lib.gpuarena_cupy_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
lib.gpuarena_cupy_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
fake.fakecuda_capture.argtypes = [ctypes.c_void_p]
fake.fakecuda_blocking_capture.argtypes = [ctypes.c_int]
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
PER_THREAD = 0x2  # CU_STREAM_PER_THREAD
if sys.argv[3:] == ["off"]:
    current[0] = STREAM
    fake.fakecuda_capture(STREAM)
    served("a captured current stream, the check off")
    check("CuPy's stream not asked with the check off", asked[0] == 0, "%d calls" % asked[0])
    done()

served("the legacy stream current")  # makes the arena and its first segment
check("CuPy's stream asked", asked[0] == 1, "%d calls" % asked[0])
checks = fake.fakecuda_count(b"cuStreamIsCapturing")
served("the legacy stream current, a cached block")
check("no capture check for the legacy stream (a cached block)",
      fake.fakecuda_count(b"cuStreamIsCapturing") == checks)

fake.fakecuda_graph.restype = ctypes.c_void_p
fake.fakecuda_graph_destroyed.argtypes = [ctypes.c_void_p]


def pools():
    """The live blocks of each capture pool's arena: the device arenas
    besides the default one, which was made first and is listed last
    (gpuarena_stats_print lists the newest arena first)."""
    return [a["live_blocks"] for a in gastats.device_arenas(lib)[:-1]]


def malloc(what):
    try:
        return lib.gpuarena_cupy_malloc(None, 4096, 0)
    except Exception as e:  # noqa: BLE001 - any exception is the failure
        check(what, False, "%s: %s" % (type(e).__name__, e))
        return None


# A capture of CuPy's current stream: its allocations come from a pool of
# the capture's own, which its frees go back to, reused by the capture in
# stream order, and which lives as long as the graph.  On a created
# stream; on a blocking one, whose capture forbids the legacy stream,
# where the pool's arena is made; and on the per-thread default stream,
# CuPy's current stream under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1, a
# blocking stream whose id the driver cannot give while it is captured.
# The fake counts a refused call as a disturbed capture, which the
# driver invalidates.
def capture_round(stream, name, blocking):
    global checks
    current[0] = stream
    fake.fakecuda_capture(stream)
    fake.fakecuda_blocking_capture(blocking)  # the legacy stream refused then
    graph = fake.fakecuda_graph()
    disturbed = fake.fakecuda_count(b"disturbed")
    p1 = malloc("an allocation during a capture of " + name)
    check("an allocation during a capture of %s is served" % name, bool(p1),
          "block %#x" % (p1 or 0))
    check("the stream was asked", fake.fakecuda_count(b"cuStreamIsCapturing") > checks)
    check("from a pool of the capture's own", pools() == [1], "pools' live blocks %s" % pools())
    lib.gpuarena_cupy_free(None, p1, 0)
    p2 = malloc("a second allocation of the capture")
    check("a block freed in the capture serves it again", p2 == p1,
          "%#x, then %#x" % (p1 or 0, p2 or 0))
    check("the capture of %s not disturbed" % name,
          fake.fakecuda_count(b"disturbed") == disturbed,
          "%d calls the capture refuses" % (fake.fakecuda_count(b"disturbed") - disturbed))
    fake.fakecuda_capture(None)
    fake.fakecuda_blocking_capture(0)
    q = malloc("an allocation after the capture")
    check("the capture's blocks are not handed out after it", q and q != p2 and len(pools()) == 1,
          "block %#x; %d pools" % (q or 0, len(pools())))
    lib.gpuarena_cupy_free(None, q, 0)
    lib.gpuarena_cupy_free(None, p2, 0)
    check("the pool outlives its blocks while the graph lives", pools() == [0], "%s" % pools())
    check("the graph's destruction is told once", fake.fakecuda_graph_destroyed(graph) == 1)
    lib.gpuarena_cupy_free(None, None, 0)  # any hook call collects
    check("the pool goes with its graph", pools() == [], "%s" % pools())
    checks = fake.fakecuda_count(b"cuStreamIsCapturing")


capture_round(STREAM, "a created stream", 0)
capture_round(STREAM, "a blocking created stream", 1)
capture_round(PER_THREAD, "the per-thread stream", 1)

# A graph destroyed while an array made in its capture is still alive:
# the pool stays until that block is freed.
current[0] = STREAM
fake.fakecuda_capture(STREAM)
graph = fake.fakecuda_graph()
r = malloc("an allocation of a second capture")
fake.fakecuda_capture(None)
fake.fakecuda_graph_destroyed(graph)
lib.gpuarena_cupy_free(None, None, 0)
check("a pool with a live block stays after its graph", pools() == [1], "%s" % pools())
lib.gpuarena_cupy_free(None, r, 0)
check("and goes with the block", pools() == [], "%s" % pools())

# A graph destroyed, its pool's blocks all freed, and the next hook call
# made during another capture: destroying the pool's arena waits for the
# whole device, which the capture forbids (and the driver invalidates it),
# so the pool waits for a hook call after the capture.
def graph_gone_with_its_blocks(what):
    """A capture on STREAM that allocates and frees, its graph then
    destroyed: its pool waits for the next hook call that can give it
    back."""
    current[0] = STREAM
    fake.fakecuda_capture(STREAM)
    graph = fake.fakecuda_graph()
    r = malloc("an allocation of " + what)
    fake.fakecuda_capture(None)
    lib.gpuarena_cupy_free(None, r, 0)
    fake.fakecuda_graph_destroyed(graph)


def malloc_keeps_the_pool(what, claim):
    """An allocation (WHAT) during another capture: CLAIM is that it
    disturbs nothing and the pool given back is still there (two pools)."""
    disturbed = fake.fakecuda_count(b"disturbed")
    p = malloc(what)
    check(claim, fake.fakecuda_count(b"disturbed") == disturbed and len(pools()) == 2,
          "%d calls the capture refuses; pools' live blocks %s"
          % (fake.fakecuda_count(b"disturbed") - disturbed, pools()))
    return p


graph_gone_with_its_blocks("a third capture")
fake.fakecuda_capture(STREAM)  # a fourth capture, allocating
r = malloc_keeps_the_pool("an allocation of a fourth capture",
                          "a pool given back is not destroyed during another capture")
graph = fake.fakecuda_graph()
fake.fakecuda_capture(None)
lib.gpuarena_cupy_free(None, r, 0)
fake.fakecuda_graph_destroyed(graph)
lib.gpuarena_cupy_free(None, None, 0)
check("both go at the first hook call after it", pools() == [], "%s" % pools())

# A graph destroyed, its pool's blocks freed, and the next hook call made
# by a thread whose current stream is the legacy one, while another
# thread captures on its own (non-blocking) stream with a pool of its
# own: that capture is under way, so the pool waits (destroying it waited
# for the whole device: the driver invalidated the other capture).
OTHER = 0x7000
graph_gone_with_its_blocks("a fifth capture")
current[0] = OTHER  # the other thread begins its capture, and allocates
fake.fakecuda_capture(OTHER)
other_graph = fake.fakecuda_graph()
r = malloc("an allocation of the other thread's capture")
current[0] = 0  # this thread: the legacy stream
q = malloc_keeps_the_pool(
    "an allocation on the legacy stream during the other capture",
    "a pool given back is not destroyed while another thread's capture goes on")
lib.gpuarena_cupy_free(None, q, 0)
current[0] = OTHER
lib.gpuarena_cupy_free(None, r, 0)
fake.fakecuda_capture(None)  # its capture ends; its graph lives on
current[0] = 0
lib.gpuarena_cupy_free(None, None, 0)
check("the first pool goes at a hook call after that capture, the other's stays",
      pools() == [0], "%s" % pools())
fake.fakecuda_graph_destroyed(other_graph)
lib.gpuarena_cupy_free(None, None, 0)
check("and the other with its graph", pools() == [], "%s" % pools())

# A graph captured on the per-thread stream and kept (replayed later),
# then another graph destroyed with its blocks freed: the next hook call
# of the thread that captured asks the driver about its own per-thread
# stream, sees that capture over and gives the other pool back.  The
# per-thread handle names another stream in every thread, so it was never
# asked, and the kept graph held every pool back for as long as it lived.
current[0] = PER_THREAD
fake.fakecuda_capture(PER_THREAD)
fake.fakecuda_blocking_capture(1)
kept_graph = fake.fakecuda_graph()
k = malloc("an allocation of a capture of the per-thread stream")
lib.gpuarena_cupy_free(None, k, 0)
fake.fakecuda_capture(None)
fake.fakecuda_blocking_capture(0)
current[0] = 0
graph_gone_with_its_blocks("a capture while the per-thread stream's graph lives")
current[0] = 0
lib.gpuarena_cupy_free(None, None, 0)
check("a pool given back goes while a graph of the per-thread stream lives",
      pools() == [0], "%s" % pools())
fake.fakecuda_graph_destroyed(kept_graph)
lib.gpuarena_cupy_free(None, None, 0)
check("and that graph's pool with it", pools() == [], "%s" % pools())

current[0] = STREAM
served("the same stream once its capture ended")
done()
