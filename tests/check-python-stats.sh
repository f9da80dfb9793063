#!/bin/sh
# check-python-stats.sh - the Python tests' view of gpuarena_stats_t
# (python/gastats.py) names the header's fields in the header's order (of
# gpuarena_total_t too), and
# a sim arena's statistics read through it (and through gastats.arenas,
# from gpuarena_stats_print's JSON) say what the arena did.  Skips
# (77) without python3 or the shared library.
. "${srcdir:-$(dirname "$0")}/libdir.sh"
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
[ -r "$libdir/libgpuarena.so.0" ] || { echo "SKIP: no shared library"; exit 77; }
PYTHONPATH="$srcdir/python" python3 - "$srcdir/../include/gpuarena.h" "$libdir/libgpuarena.so.0" << 'PYEOF'
import ctypes, re, sys
import gastats
body = re.search(r"typedef struct gpuarena_stats_s \{(.*?)\} gpuarena_stats_t;",
                 open(sys.argv[1]).read(), re.S).group(1)
body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
names = re.findall(r"uint64_t\s+([^;]+);", body)
fields = [n.strip() for decl in names for n in decl.split(",")]
spare = [f for f in fields if f.startswith("spare_")]
header = [f for f in fields if not f.startswith("spare_")]
ok = True
if tuple(header) != gastats.FIELDS:
    print("FAIL: gastats.FIELDS differ from gpuarena.h: %s" % header)
    ok = False
if spare != ["spare_[%d]" % gastats.SPARE]:
    print("FAIL: gpuarena.h has %s, gastats.SPARE is %d" % (spare, gastats.SPARE))
    ok = False
tbody = re.search(r"typedef struct gpuarena_total \{(.*?)\} gpuarena_total_t;",
                  open(sys.argv[1]).read(), re.S).group(1)
tbody = re.sub(r"/\*.*?\*/", "", tbody, flags=re.S)
tfields = [n.strip() for decl in re.findall(r"uint64_t\s+([^;]+);", tbody) for n in decl.split(",")]
mine = [n if not isinstance(t(), ctypes.Array) else "%s[%d]" % (n, t._length_)
        for n, t in gastats.Total._fields_]
if tfields != mine:
    print("FAIL: gastats.Total has %s, gpuarena.h's gpuarena_total_t %s" % (mine, tfields))
    ok = False
lib = ctypes.CDLL(sys.argv[2])
arena = ctypes.c_void_p()
assert lib.gpuarena_create(4, 0, None, ctypes.byref(arena)) == 0  # GPUARENA_SIM
p = ctypes.c_void_p()
assert lib.gpuarena_alloc(arena, 4096, ctypes.c_void_p(-1), ctypes.byref(p)) == 0
s = gastats.stats(lib, arena)
if (s.allocs, s.live_blocks, s.requested, s.deferred_frees) != (1, 1, 4096, 0):
    print("FAIL: a sim arena after one 4 KiB allocation reads allocs %d, live_blocks %d, "
          "requested %d, deferred_frees %d" % (s.allocs, s.live_blocks, s.requested,
                                               s.deferred_frees))
    ok = False
# gastats.total: the one sim arena's reserved bytes.
t = gastats.total(lib, 4)
if (t.arenas, t.reserved) != (1, s.reserved) or t.reserved_peak < t.reserved or s.reserved == 0:
    print("FAIL: the sim total reads %d arenas, %d bytes, peak %d; the arena reserves %d" %
          (t.arenas, t.reserved, t.reserved_peak, s.reserved))
    ok = False
# gastats.arenas: the same arena, one of the list that stats_print writes.
sims = [a for a in gastats.arenas(lib) if a["kind"] == "sim"]
if len(sims) != 1 or sims[0]["live_blocks"] != 1 or sims[0]["requested"] != 4096:
    print("FAIL: gastats.arenas lists the sim arenas as %s" % sims)
    ok = False
assert lib.gpuarena_free(arena, p, ctypes.c_void_p(-1)) == 0
assert lib.gpuarena_destroy(arena) == 0
if any(a["kind"] == "sim" for a in gastats.arenas(lib)):
    print("FAIL: gastats.arenas lists a destroyed arena")
    ok = False
if (gastats.total(lib, 4).arenas, gastats.total(lib, 4).reserved) != (0, 0):
    print("FAIL: the sim total still counts a destroyed arena")
    ok = False
print("%d fields as in gpuarena.h; a sim arena reads as it should" % len(gastats.FIELDS) if ok else "")
sys.exit(0 if ok else 1)
PYEOF
