"""A few training steps of a small CNN, deterministic, on GPU 0.

Usage: torch_train.py gpuarena|native LIBGPUARENA
Prints one JSON line: the mode, the losses, the peak reserved bytes and
whether gpuarena served the memory.  The allocator can only be changed
before PyTorch's first CUDA allocation, so each mode runs in its own
process (check-python.sh runs both and compares).
"""
import ctypes
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402

mode, libpath = sys.argv[1], sys.argv[2]
if mode == "gpuarena":
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        libpath, "gpuarena_torch_alloc", "gpuarena_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

dev = torch.device("cuda:0")
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
gen = torch.Generator().manual_seed(1)
losses = []
for step in range(30):
    batch = 32 + 16 * (step % 4)  # varying sizes: blocks of several sizes
    x = torch.randn(batch, 3, 32, 32, generator=gen).to(dev)
    y = torch.randint(0, 10, (batch,), generator=gen).to(dev)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
torch.cuda.synchronize()

out = {"mode": mode, "losses": losses}
if mode == "gpuarena":
    lib = ctypes.CDLL(libpath)
    arena = ctypes.c_void_p()
    stats = (ctypes.c_uint64 * 40)()  # gpuarena_stats_t: 40 fields
    assert lib.gpuarena_get(0, 0, ctypes.byref(arena)) == 0
    assert lib.gpuarena_stats(arena, ctypes.byref(stats)) == 0
    # gpuarena_stats_t: requested, requested_peak, in_use, in_use_peak,
    # reserved, reserved_peak, cached, cached_peak, allocs, ...
    out["peak_reserved"] = int(stats[5])
    out["allocs"] = int(stats[8])
else:
    out["peak_reserved"] = int(torch.cuda.max_memory_reserved(dev))
    out["allocs"] = None
print(json.dumps(out))
