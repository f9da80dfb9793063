"""Data-parallel training on two GPUs (torch.distributed, NCCL), one
process a GPU, each with gpuarena as its allocator or each with
PyTorch's own: DistributedDataParallel's gradient buckets and NCCL's
all-reduce of them, and a broadcast and an all-gather, read and write
memory that gpuarena hands out, on two GPUs at once, as an MPI-style
PyTorch program does.  The losses of both ranks must be the same under
either allocator (check-python.sh compares the two runs).

Usage: torch_ddp.py gpuarena|native LIBGPUARENA
Prints one JSON line: the mode, each rank's losses followed by the
collectives' results, rank 0's peak reserved bytes and how many
allocations gpuarena served in the two processes.  Exits 77 with fewer
than two GPUs or without NCCL.
"""
import ctypes
import json
import os
import socket
import sys
import tempfile

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# The lent machines ask that NVLink multicast (NVLS) stay off.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import gastats  # noqa: E402
import gatorch  # noqa: E402

STEPS = 20


def rank_main(rank, mode, libpath, port, outdir):
    # Before the rank's first CUDA allocation: the allocator cannot change
    # after it.
    if mode == "gpuarena":
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            libpath, "gpuarena_torch_alloc", "gpuarena_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev)

    gatorch.deterministic()  # the same initial weights on both ranks
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 16 * 16, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).to(dev)
    # Small buckets: several all-reduces a step, of blocks of several sizes.
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank], bucket_cap_mb=1)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    losses = gatorch.train(ddp, dev, gen, STEPS, lambda step: 16 + 8 * (step % 3))

    # The collectives on tensors of their own: rank 0's broadcast, and
    # each rank's slice gathered on both.
    b = torch.arange(1 << 16, dtype=torch.float32, device=dev) * (rank + 1)
    dist.broadcast(b, src=0)
    mine = torch.full((1 << 12,), float(rank + 1), device=dev)
    parts = [torch.empty_like(mine) for _ in range(2)]
    dist.all_gather(parts, mine)
    params = sum(float(p.detach().double().sum()) for p in model.parameters())
    results = losses + [float(b.sum()), float(parts[0].sum()), float(parts[1].sum()), params]
    torch.cuda.synchronize()

    out = {"results": results}
    if mode == "gpuarena":
        lib = ctypes.CDLL(libpath)
        stats = gastats.stats(lib, gastats.default_arena(lib, rank))
        out["peak_reserved"] = stats.reserved_peak
        out["allocs"] = stats.allocs
    else:
        out["peak_reserved"] = int(torch.cuda.max_memory_reserved(dev))
        out["allocs"] = None
    dist.destroy_process_group()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(out, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mode, libpath = sys.argv[1], sys.argv[2]
    if torch.cuda.device_count() < 2:
        print("fewer than two GPUs", file=sys.stderr)
        sys.exit(77)
    if not dist.is_available() or not dist.is_nccl_available():
        print("no NCCL in this PyTorch", file=sys.stderr)
        sys.exit(77)
    with tempfile.TemporaryDirectory() as outdir:
        mp.spawn(rank_main, args=(mode, libpath, free_port(), outdir), nprocs=2, join=True)
        ranks = [json.load(open(os.path.join(outdir, "rank%d.json" % r))) for r in range(2)]
    allocs = None
    if mode == "gpuarena":
        allocs = sum(r["allocs"] for r in ranks)
        # Each rank's arena served it: none may be left out.
        if not all(r["allocs"] for r in ranks):
            print("a rank's arena served nothing: %s" % ranks, file=sys.stderr)
            sys.exit(1)
    print(json.dumps({"mode": mode, "losses": [r["results"] for r in ranks],
                      "peak_reserved": ranks[0]["peak_reserved"], "allocs": allocs}))
