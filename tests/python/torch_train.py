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

import gastats  # noqa: E402
import gatorch  # noqa: E402
import torch  # noqa: E402

mode, libpath = sys.argv[1], sys.argv[2]
if mode == "gpuarena":
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        libpath, "gpuarena_torch_alloc", "gpuarena_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)

gatorch.deterministic()

dev = torch.device("cuda:0")
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10)).to(dev)
gen = torch.Generator().manual_seed(1)
losses = gatorch.train(model, dev, gen, 30, lambda step: 32 + 16 * (step % 4))
torch.cuda.synchronize()

out = {"mode": mode, "losses": losses}
if mode == "gpuarena":
    lib = ctypes.CDLL(libpath)
    stats = gastats.stats(lib, gastats.default_arena(lib))
    out["peak_reserved"] = stats.reserved_peak
    out["allocs"] = stats.allocs
else:
    out["peak_reserved"] = int(torch.cuda.max_memory_reserved(dev))
    out["allocs"] = None
print(json.dumps(out))
