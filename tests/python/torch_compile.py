"""torch.compile(mode="reduce-overhead") under gpuarena: Inductor's CUDA
graph trees capture the compiled model's kernels into graphs whose memory
comes from graph pools (gpuarena_torch_begin_allocate_to_pool(3)), and
replay them for the later calls.  A small model's inference, then a few
training steps of another (forward and backward compiled, both graphed),
each call with new inputs; under PyTorch's own allocator the same program
gives the results to compare with.

Usage: torch_compile.py gpuarena|native LIBGPUARENA
Prints one JSON line: the mode, the results (sums of the outputs and the
training losses), the peak reserved bytes (gpuarena's: the peak of all
its device arenas together, graph pools included, from
gpuarena_stats_total; also the sum of their peaks) and how many allocations
gpuarena's default arena served; exits non-zero if an output differs from the same
computation made eagerly, and 77 when this PyTorch cannot compile here
(no Triton, no C compiler): that is the host's, not gpuarena's.
"""
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import gastats  # noqa: E402
import gatorch  # noqa: E402
import torch  # noqa: E402

mode, libpath = sys.argv[1], sys.argv[2]
try:
    import triton  # noqa: F401
except ImportError:
    print("torch_compile.py: no Triton: Inductor cannot compile for the GPU here", file=sys.stderr)
    sys.exit(77)

if mode == "gpuarena":
    lib = gatorch.use_gpuarena_with_pools(libpath)

# Inductor's CUDA graph trees (its default for reduce-overhead) take
# checkpoints of the allocator's state (getCheckpointState), which
# PyTorch's CUDAPluggableAllocator refuses for any allocator it loads
# ("does not yet support"): with gpuarena the first compiled call raises
# that RuntimeError.  Without trees, Inductor captures each compiled graph
# with torch.cuda.graph into a pool of its own, which gpuarena's pool hooks
# serve.  Both modes run without trees, so that they compute alike.
import torch._dynamo.utils  # noqa: E402
import torch._inductor.config  # noqa: E402
torch._inductor.config.triton.cudagraph_trees = False

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda:0")
gen = torch.Generator().manual_seed(1)
failures = 0
results = []


def fresh(*shape):
    return torch.randn(*shape, generator=gen).to(dev)


def close(a, b):
    # Inductor fuses what eager mode computes op by op: the two agree to
    # rounding, not bit for bit.
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                            torch.nn.Linear(256, 256), torch.nn.GELU(),
                            torch.nn.Linear(256, 10)).to(dev)
compiled = torch.compile(model, mode="reduce-overhead")
with torch.no_grad():
    for i in range(8):
        x = fresh(32, 64)
        y = compiled(x)
        eager = model(x)
        if not close(y, eager):
            print("inference call %d differs from the eager computation" % i, file=sys.stderr)
            failures += 1
        results.append(float(y.sum()))
        del y

net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                          torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(net.parameters(), lr=0.05)


@torch.compile(mode="reduce-overhead")
def step_loss(x, y):
    return torch.nn.functional.cross_entropy(net(x), y)


for step in range(8):
    x, y = fresh(16, 64), torch.randint(0, 10, (16,), generator=gen).to(dev)
    opt.zero_grad(set_to_none=True)
    loss = step_loss(x, y)
    with torch.no_grad():
        eager = torch.nn.functional.cross_entropy(net(x), y)
    if not close(loss.detach(), eager):
        print("training step %d: loss differs from the eager one" % step, file=sys.stderr)
        failures += 1
    loss.backward()
    opt.step()
    results.append(loss.item())
torch.cuda.synchronize()
skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
if skips:
    print("Inductor skipped CUDA graphs %d times: the test did not test them" % skips,
          file=sys.stderr)
    failures += 1

out = {"mode": mode, "results": results}
if mode == "gpuarena":
    stats = gastats.stats(lib, gastats.default_arena(lib))
    devices = gastats.device_arenas(lib)
    # The graphs' pools are arenas of their own: gpuarena's peak is that
    # of all of them together (gpuarena_stats_total), which lies between
    # the largest arena's peak and the sum of their peaks.
    total = gastats.total(lib)
    peaks = [a["reserved_peak"] for a in devices]
    out["peak_reserved"] = total.reserved_peak
    out["peak_reserved_sum"] = sum(peaks)
    if total.arenas != len(devices) or not max(peaks) <= total.reserved_peak <= sum(peaks):
        print("the device total (%d arenas, peak %d) does not fit the arenas' peaks %s" %
              (total.arenas, total.reserved_peak, peaks), file=sys.stderr)
        failures += 1
    out["allocs"] = stats.allocs
    # The compiled functions still hold their graphs, whose pools are
    # private device arenas besides the default one.
    pools = len(devices) - 1
    if pools < 1:
        print("no graph pool arena: the graphs' memory did not come from "
              "gpuarena's pool hooks", file=sys.stderr)
        failures += 1
    out["graph_pools"] = pools
else:
    out["peak_reserved"] = int(torch.cuda.max_memory_reserved(dev))
    out["allocs"] = None
print(json.dumps(out))
sys.exit(1 if failures else 0)
