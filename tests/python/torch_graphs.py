"""CUDA graphs under gpuarena with its graph-pool hooks
(gpuarena_torch_begin_allocate_to_pool(3)): a small model's forward
captured with torch.cuda.graph, a second graph sharing its pool, and a few
training steps of a module made with torch.cuda.make_graphed_callables,
all replayed with new inputs.  Under PyTorch's own allocator the same
program gives the results to compare with.

Usage: torch_graphs.py gpuarena|native LIBGPUARENA
Prints one JSON line: the mode, the results (sums of the replays' outputs
and the training losses), the peak reserved bytes (gpuarena's: the peak of
all its device arenas together, graph pools included, from
gpuarena_stats_total) and how many
allocations gpuarena served; exits non-zero if a replay differs from the
same computation made eagerly.
"""
import json
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import gastats  # noqa: E402
import gatorch  # noqa: E402
import torch  # noqa: E402

mode, libpath = sys.argv[1], sys.argv[2]
if mode == "gpuarena":
    lib = gatorch.use_gpuarena_with_pools(libpath)

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda:0")
gen = torch.Generator().manual_seed(1)
failures = 0


def fresh(*shape):
    return torch.randn(*shape, generator=gen).to(dev)


model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10)).to(dev)
static_x = fresh(32, 64)
# Warm up on a side stream, as PyTorch's documentation of graphs asks.
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side), torch.no_grad():
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(side)

g = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(g):
    static_y = model(static_x)  # its temporaries come from the graph's pool
g2 = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(g2, pool=g.pool()):
    static_z = torch.relu(static_y * 2 + 1).sum(dim=1)
results = []
for i in range(6):
    static_x.copy_(fresh(32, 64))
    g.replay()
    g2.replay()
    with torch.no_grad():
        eager = torch.relu(model(static_x) * 2 + 1).sum(dim=1)
    if not torch.equal(eager, static_z):
        print("replay %d differs from the eager computation" % i, file=sys.stderr)
        failures += 1
    results.append(float(static_z.sum()))

# Training steps of a graphed module: forward and backward captured.
net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                          torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
graphed = torch.cuda.make_graphed_callables(net, (fresh(16, 64),))
for step in range(8):
    x, y = fresh(16, 64), torch.randint(0, 10, (16,), generator=gen).to(dev)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(graphed(x), y)
    loss.backward()
    opt.step()
    results.append(loss.item())
torch.cuda.synchronize()
# The graphs' pools are arenas of their own, alive until the graphs go:
# gpuarena's peak is that of all of them together (gpuarena_stats_total),
# which lies between the largest arena's peak and the sum of their peaks.
if mode == "gpuarena":
    devices = gastats.device_arenas(lib)
    total = gastats.total(lib)
    peak_all = total.reserved_peak
    peaks = [a["reserved_peak"] for a in devices]
    if total.arenas != len(devices) or not max(peaks) <= peak_all <= sum(peaks):
        print("the device total (%d arenas, peak %d) does not fit the arenas' peaks %s" %
              (total.arenas, peak_all, peaks), file=sys.stderr)
        failures += 1
del g, g2, static_y, static_z, graphed
torch.cuda.synchronize()

out = {"mode": mode, "results": results}
if mode == "gpuarena":
    stats = gastats.stats(lib, gastats.default_arena(lib))
    out["peak_reserved"] = peak_all
    out["allocs"] = stats.allocs
else:
    out["peak_reserved"] = int(torch.cuda.max_memory_reserved(dev))
    out["allocs"] = None
print(json.dumps(out))
sys.exit(1 if failures else 0)
