"""PyTorch on two GPUs with gpuarena as its allocator, the defaults
untouched: tensors copied from one GPU to the other and back
(x.to("cuda:1"), copy_), and a layer on each GPU fed from the other,
give the values computed on the CPU.  Growable segments are reachable
from their own GPU only unless peer access is given (key peer_access in
gpuarena.conf(5)): before it was on by default, every copy here failed
with "CUDA error: invalid argument".

Usage: torch_two_gpus.py LIBGPUARENA; exits 77 with fewer than two GPUs.
"""
import ctypes
import sys

import torch

import gastats

if torch.cuda.device_count() < 2:
    print("fewer than two GPUs", file=sys.stderr)
    sys.exit(77)
libpath = sys.argv[1]
lib = ctypes.CDLL(libpath)
alloc = torch.cuda.memory.CUDAPluggableAllocator(libpath, "gpuarena_torch_alloc",
                                                 "gpuarena_torch_free")
torch.cuda.memory.change_current_allocator(alloc)

failures = 0


def check(what, got, want):
    global failures
    ok = torch.equal(got.cpu(), want)
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    failures += not ok


gen = torch.Generator().manual_seed(7)
host = torch.randn(1 << 22, generator=gen)  # 16 MiB
x0 = host.to("cuda:0")
x1 = x0.to("cuda:1")
check("cuda:0 -> cuda:1 (x.to)", x1, host)
back = (x1 * 2).to("cuda:0")
check("cuda:1 -> cuda:0 (x.to)", back, host * 2)
y1 = torch.empty(1 << 22, device="cuda:1")
y1.copy_(x0)
check("copy_ from cuda:0 into cuda:1", y1, host)
y1.copy_(x0, non_blocking=True)
torch.cuda.synchronize("cuda:1")
check("copy_(non_blocking) from cuda:0 into cuda:1", y1, host)

# A layer on each GPU, the activations crossing between them.
w0 = torch.randn(64, 64, generator=gen)
w1 = torch.randn(64, 64, generator=gen)
a = torch.randn(32, 64, generator=gen)
want = torch.relu(torch.relu(a @ w0) @ w1)
h0 = torch.relu(a.to("cuda:0") @ w0.to("cuda:0"))
out = torch.relu(h0.to("cuda:1") @ w1.to("cuda:1")).to("cuda:0")
got = out.cpu()
close = torch.allclose(got, want, rtol=1e-4, atol=1e-4)
print("%s: a layer on each GPU, activations crossing (largest difference %.3g)" %
      ("ok" if close else "FAIL", float((got - want).abs().max())))
failures += not close

# Each GPU has its own arena: both totals count memory.
for d in (0, 1):
    t = gastats.total(lib, 0, d)
    if t.arenas < 1 or t.reserved == 0:
        print("FAIL: device %d's total: %d arenas, %d bytes" % (d, t.arenas, t.reserved))
        failures += 1
    else:
        print("ok: device %d: %d arena(s), %d MiB reserved" % (d, t.arenas, t.reserved >> 20))
sys.exit(1 if failures else 0)
