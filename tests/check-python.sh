#!/bin/sh
# PyTorch and CuPy with gpuarena loaded through their allocator hooks
# (gpuarena_torch_alloc(3), gpuarena_cupy_malloc(3)), each compared with the
# framework's own allocator run in a separate process; and their failures
# (torch_errors.py, cupy_errors.py): raised as exceptions, the process
# still computing after them; CuPy on the per-thread default stream, its
# graph captures there served (cupy_ptds.py); PyTorch's record_stream and
# empty_cache hooks (torch_hooks.py); and CUDA graphs with the graph-pool hooks
# (torch_graphs.py, compared with PyTorch's own allocator too), and
# torch.compile(mode="reduce-overhead"), whose graphs use those hooks
# (torch_compile.py; a script that exits 77, as without Triton, is
# skipped); and, where there are two GPUs, copies between them under the
# defaults (torch_two_gpus.py, cupy_two_gpus.py) and data-parallel
# training with NCCL, a process a GPU, compared with PyTorch's own
# allocator (torch_ddp.py).
# Exits 77 without
# python3, without the framework, or without a GPU; each framework that is
# missing is skipped on its own.
: "${srcdir:=$(dirname "$0")}"
: "${top_builddir:=..}"
lib=$(cd "$top_builddir/lib/.libs" 2> /dev/null && pwd)/libgpuarena.so.0
[ -r "$lib" ] || { echo "SKIP: $lib not built (static-only build?)"; exit 77; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
# One GPU test at a time (see gputest.h): hold gpu-tests.lock from here on.
if command -v flock > /dev/null; then
    exec 9> gpu-tests.lock && flock 9
fi
py=$srcdir/python
tmp=${TMPDIR:-/tmp}/check-python.$$
trap 'rm -f "$tmp".*' EXIT
ran=0 failed=0

# compare NAME: the JSON lines in $tmp.gpuarena and $tmp.native
compare() {
    python3 - "$1" "$tmp.gpuarena" "$tmp.native" << 'PYEOF'
import json, math, sys
name, ga, nat = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def flat(v):
    if isinstance(v, dict):
        return [x for k in sorted(v) for x in flat(v[k])]
    if isinstance(v, list):
        return [x for e in v for x in flat(e)]
    return [float(v)]
key = "losses" if "losses" in ga else "results"
a, b = flat(ga[key]), flat(nat[key])
worst = max((abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b)), default=0.0)
same = len(a) == len(b) and all(x == y for x, y in zip(a, b))
print("%s: %d values, %s (largest relative difference %.3g)" %
      (name, len(a), "bit-identical" if same else "not bit-identical", worst))
print("%s: peak reserved: gpuarena %.1f MiB, native %.1f MiB; gpuarena served %s allocations" %
      (name, ga["peak_reserved"] / 2**20, (nat.get("peak_reserved") or 0) / 2**20, ga["allocs"]))
ok = len(a) == len(b) and worst <= 1e-5 and ga["allocs"] and not any(map(math.isnan, a))
sys.exit(0 if ok else 1)
PYEOF
}

# run NAME SCRIPT MODULE
run() {
    if ! python3 -c "import $3" > /dev/null 2>&1; then
        echo "SKIP: $1: python3 cannot import $3"
        return
    fi
    if ! python3 -c "import $3, sys; sys.exit(0 if $4 else 1)" > /dev/null 2>&1; then
        echo "SKIP: $1: $3 sees no GPU"
        return
    fi
    ran=$((ran + 1))
    for mode in native gpuarena; do
        python3 "$py/$2" $mode "$lib" > "$tmp.$mode" 2> "$tmp.$mode.err"
        rc=$?
        if [ $rc = 77 ]; then
            echo "SKIP: $1: $(tail -1 "$tmp.$mode.err")"
            ran=$((ran - 1))
            return
        elif [ $rc != 0 ]; then
            echo "FAIL: $1 under $mode:"
            tail -20 "$tmp.$mode.err"
            failed=$((failed + 1))
            return
        fi
    done
    if compare "$1"; then
        echo "PASS: $1"
    else
        echo "FAIL: $1: results differ:"
        cat "$tmp.gpuarena" "$tmp.native"
        failed=$((failed + 1))
    fi
}

# alone NAME SCRIPT MODULE COND: SCRIPT under gpuarena only, judged by its
# exit status (the failure paths, which have no native run to compare).
alone() {
    if ! python3 -c "import $3, sys; sys.exit(0 if $4 else 1)" > /dev/null 2>&1; then
        echo "SKIP: $1: not $4"
        return 0
    fi
    ran=$((ran + 1))
    if python3 "$py/$2" "$lib" > "$tmp.alone" 2>&1; then
        echo "PASS: $1"
    else
        echo "FAIL: $1:"
        failed=$((failed + 1))
    fi
    cat "$tmp.alone"
}

run torch torch_train.py torch "torch.cuda.is_available()"
run cupy cupy_ops.py cupy "cupy.cuda.runtime.getDeviceCount() > 0"
run torch-graphs torch_graphs.py torch "torch.cuda.is_available()"
run torch-compile torch_compile.py torch "torch.cuda.is_available()"
alone torch-errors torch_errors.py torch "torch.cuda.is_available()"
alone torch-hooks torch_hooks.py torch "torch.cuda.is_available()"
alone cupy-errors cupy_errors.py cupy "cupy.cuda.runtime.getDeviceCount() > 0"
alone cupy-ptds cupy_ptds.py cupy "cupy.cuda.runtime.getDeviceCount() > 0"
alone torch-two-gpus torch_two_gpus.py torch "torch.cuda.device_count() > 1"
run torch-ddp torch_ddp.py torch "torch.cuda.is_available()"
alone cupy-two-gpus cupy_two_gpus.py cupy "cupy.cuda.runtime.getDeviceCount() > 1"
[ $ran = 0 ] && exit 77
[ $failed = 0 ]
