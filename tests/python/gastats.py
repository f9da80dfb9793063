"""gpuarena_stats_t for the Python tests, by field name.

Each script used to hand gpuarena_stats a ctypes array of its own size
and read fields by index: two gave 36 uint64 for the 40 of the
structure, and the call wrote past them.  The fields below follow
include/gpuarena.h in order (check-python-stats.sh compares them with
the header on every make check).
"""
import ctypes

FIELDS = (
    "requested", "requested_peak", "in_use", "in_use_peak", "reserved", "reserved_peak",
    "cached", "cached_peak", "allocs", "frees", "cache_hits", "cache_misses", "provider_maps",
    "provider_unmaps", "cross_stream_waits", "oom_retries", "oom_failures", "last_oom_request",
    "segments", "live_blocks", "free_blocks", "pending_frees", "events_recorded", "trims",
    "numa_nodes", "numa_fallbacks", "prefetches", "prefetches_skipped", "advice_applied",
    "advice_skipped", "device_free", "stream_pools", "stream_cached", "retired_cached",
    "deferred_frees", "numa_unbound")
SPARE = 4


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in FIELDS] + [("spare_", ctypes.c_uint64 * SPARE)]


class Total(ctypes.Structure):
    """gpuarena_total_t (gpuarena_stats_total(3)), as in include/gpuarena.h."""
    _fields_ = [("arenas", ctypes.c_uint64), ("reserved", ctypes.c_uint64),
                ("reserved_peak", ctypes.c_uint64), ("spare_", ctypes.c_uint64 * 5)]


def total(lib, kind=0, device=0):
    """Every arena of KIND (default GPUARENA_DEVICE) on DEVICE together: a
    Total, whose reserved_peak is the peak of the sum of their reserved
    bytes (PyTorch's max_memory_reserved), graph pools included."""
    t = Total()
    st = lib.gpuarena_stats_total(kind, device, ctypes.byref(t))
    assert st == 0, "gpuarena_stats_total: status %d" % st
    return t


def default_arena(lib, device=0):
    """The default device arena of DEVICE (gpuarena_get)."""
    arena = ctypes.c_void_p()
    st = lib.gpuarena_get(0, device, ctypes.byref(arena))  # GPUARENA_DEVICE
    assert st == 0, "gpuarena_get: status %d" % st
    return arena


def stats(lib, arena):
    """ARENA's statistics (gpuarena_stats), a Stats."""
    s = Stats()
    st = lib.gpuarena_stats(arena, ctypes.byref(s))
    assert st == 0, "gpuarena_stats: status %d" % st
    return s


def arenas(lib):
    """Every live arena, as gpuarena_stats_print(3) writes them in JSON: a
    list of dicts with "kind", "device" and the statistics.  Graph pools'
    private arenas are among them."""
    import json
    import os
    import tempfile
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    lib.gpuarena_stats_print.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        f = libc.fopen(path.encode(), b"w")
        assert f, "fopen %s failed" % path
        st = lib.gpuarena_stats_print(f, b"json")
        libc.fclose(f)
        assert st == 0, "gpuarena_stats_print: status %d" % st
        with open(path) as j:
            return json.load(j)["arenas"]
    finally:
        os.unlink(path)


def device_arenas(lib):
    """The device arenas of gastats.arenas, newest first: in a test that
    made its default arena first, that one is last and the rest are pool
    arenas (PyTorch's graph pools, CuPy's capture pools)."""
    return [a for a in arenas(lib) if a["kind"] == "device"]
