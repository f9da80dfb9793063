"""What the Python tests of PyTorch share: gpuarena as PyTorch's allocator
for the tests of CUDA graphs (the allocation and free functions through
CUDAPluggableAllocator, and the graph-pool hooks,
gpuarena_torch_begin_allocate_to_pool(3), through its _allocator
attribute, as gpuarena_torch_alloc(3) shows), the settings under
which two runs compute the same values bit for bit, and the training
loop of the tests that compare the losses of two runs.
"""
import ctypes

import torch


def use_gpuarena_with_pools(libpath):
    """Make libgpuarena at LIBPATH PyTorch's allocator, graph pools
    included, before the first CUDA allocation; the library (ctypes)."""
    lib = ctypes.CDLL(libpath)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        libpath, "gpuarena_torch_alloc", "gpuarena_torch_free")

    def addr(fn):
        return ctypes.cast(fn, ctypes.c_void_p).value

    alloc._allocator.set_begin_allocate_to_pool(addr(lib.gpuarena_torch_begin_allocate_to_pool))
    alloc._allocator.set_end_allocate_to_pool_fn(addr(lib.gpuarena_torch_end_allocate_to_pool))
    alloc._allocator.set_release_pool(addr(lib.gpuarena_torch_release_pool))
    torch.cuda.memory.change_current_allocator(alloc)
    return lib


def deterministic():
    """Seed PyTorch's generators with 0 and make its kernels deterministic,
    with no TF32, so that a run under gpuarena and one under PyTorch's own
    allocator compute the same values.  CUBLAS_WORKSPACE_CONFIG must be
    set before CUDA starts (the scripts set it before importing torch)."""
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def train(model, dev, gen, steps, batch):
    """STEPS steps of SGD with momentum training MODEL (on DEV) to classify
    random 3 x 32 x 32 images in 10 classes, drawn from the CPU generator
    GEN, BATCH(step) of them a step (varying sizes: blocks of several
    sizes); the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(steps):
        n = batch(step)
        x = torch.randn(n, 3, 32, 32, generator=gen).to(dev)
        y = torch.randint(0, 10, (n,), generator=gen).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
