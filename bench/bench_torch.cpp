/*
 * bench_torch.cpp - issue 5's (a), (b) and (c) against PyTorch's own caching
 * allocator, in one process on GPU 0.
 *
 * DESIGN.md's anchors give PyTorch 2.11's allocator on an H200: 350-600 ns
 * a cached pair, 814 ns an operation of the random churn (b).  The lent
 * hosts run at different speeds (bench_device's header), so an absolute
 * figure of gpuarena measured on one host says little against an anchor
 * measured on another; PyTorch's allocator measured in the same process,
 * in the same rounds, says how that host compares with the anchors' host.
 * bench_device does the same with the driver's pool; this program asks
 * PyTorch's allocator, through its C++ entry points
 * (c10::cuda::CUDACachingAllocator::raw_alloc_with_stream, raw_delete: no
 * Python in the loop), which bench_device cannot link.  bench-torch.sh
 * builds it with the compiler flags of the PyTorch that python3 imports.
 *
 * Three allocators, each with the settings it has by default (gpuarena's
 * from gpuarena.conf and GPUARENA_OPTIONS, PyTorch's from
 * PYTORCH_CUDA_ALLOC_CONF), on the same streams:
 *   gpuarena  the default device arena (gpuarena_get), gpuarena_alloc and
 *             gpuarena_free;
 *   pytorch   PyTorch's caching allocator;
 *   pool      the driver's pool, cuMemAllocFromPoolAsync and
 *             cuMemFreeAsync, release threshold max (what bench_device's
 *             pool column measures).
 *   (a) a cached alloc+free pair of 512 B and of 1 MiB, ns per pair;
 *   (b) churn.h's sequence: a free of a random one of 256 live blocks and
 *       an allocation of a new one, ns per operation;
 * each on a created non-blocking stream and on the legacy default stream
 * (what PyTorch uses unless a program sets another); and
 *   (c) THREADS threads, each on a created stream of its own, doing cached
 *       pairs of 4 KiB for CONC_S seconds: million pairs per second, all
 *       threads together, median of 3 runs (anchors: PyTorch 0.30, the
 *       pool 0.15; target 30).  ROUNDS rounds of one
 * run of each allocator in turn, the median of each: a slow spell of the
 * host falls on all alike.  Last, gpuarena's figures over PyTorch's and the
 * pool's, beside the anchors' ratios.  It judges no target (bench_device
 * does); exit 0, 1 on an error, 77 without a GPU.
 */
#include "churn.h"

#include <cuda.h>
#include <gpuarena.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <thread>
#include <vector>

#define ROUNDS  15
#define RUN_S   0.02 /* seconds per timed run; (b)'s twice that */
#define WARM    (CHURN_LIVE * 64L)
#define THREADS 16
#define CONC_S  0.25

enum { A_GPUARENA, A_TORCH, A_POOL, A_COUNT };
static const char *const names[A_COUNT] = {"gpuarena", "pytorch", "pool"};

static double now()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double median(double *v, int n)
{
    std::sort(v, v + n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] static void die(const char *what, const char *why)
{
    std::fprintf(stderr, "bench_torch: %s: %s\n", what, why);
    std::exit(1);
}

static void cu_check(const char *what, CUresult r)
{
    if (r != CUDA_SUCCESS) {
        const char *s = "unknown";
        cuGetErrorName(r, &s);
        die(what, s);
    }
}

/* One allocator on one stream. */
struct target {
    int kind;
    gpuarena_t *arena;
    CUmemoryPool pool;
    CUstream stream;
};

/* Allocation and free of each allocator; the kind is a constant in the
 * loops below (one instance each), so the switch costs nothing. */
static inline __attribute__((always_inline)) void *t_alloc(int kind, const target &t, size_t size)
{
    void *p = nullptr;
    if (kind == A_GPUARENA) {
        gpuarena_status_t st = gpuarena_alloc(t.arena, size, t.stream, &p);
        if (st != GPUARENA_SUCCESS)
            die("gpuarena_alloc", gpuarena_last_error());
    } else if (kind == A_TORCH) {
        p = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(size, t.stream);
    } else {
        CUdeviceptr d;
        cu_check("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(&d, size, t.pool, t.stream));
        p = (void *)d;
    }
    return p;
}

static inline __attribute__((always_inline)) void t_free(int kind, const target &t, void *p)
{
    if (kind == A_GPUARENA) {
        if (gpuarena_free(t.arena, p, t.stream) != GPUARENA_SUCCESS)
            die("gpuarena_free", gpuarena_last_error());
    } else if (kind == A_TORCH) {
        c10::cuda::CUDACachingAllocator::raw_delete(p);
    } else {
        cu_check("cuMemFreeAsync", cuMemFreeAsync((CUdeviceptr)p, t.stream));
    }
}

/* (a): pairs of SIZE for about RUN_S seconds; ns per pair. */
template <int K> static double pairs(const target &t, size_t size)
{
    long n = 0;
    double t0 = now(), el;
    do {
        for (int i = 0; i < 256; i++)
            t_free(K, t, t_alloc(K, t, size));
        n += 256;
    } while ((el = now() - t0) < RUN_S);
    return el / (double)n * 1e9;
}

/* (b): operations AT.. of SEQ on LIVE for about BUDGET seconds (or
 * COUNT operations, when not 0); ns per operation, *AT moved on. */
template <int K>
static double churn(const target &t, const churn_seq_t *seq, void **live, long *at, double budget,
                    long count)
{
    long i = *at, start = *at;
    double t0 = now(), el;
    for (;;) {
        for (int j = 0; j < 64; j++, i++) {
            long k = i % CHURN_OPS;
            void **slot = &live[seq->victim[k]];
            t_free(K, t, *slot);
            *slot = t_alloc(K, t, seq->size[k]);
        }
        el = now() - t0;
        if (count ? i - start >= count : el >= budget)
            break;
    }
    *at = i;
    return el / (double)(i - start) * 1e9;
}

static double pairs_of(const target &t, size_t size)
{
    switch (t.kind) {
    case A_GPUARENA:
        return pairs<A_GPUARENA>(t, size);
    case A_TORCH:
        return pairs<A_TORCH>(t, size);
    default:
        return pairs<A_POOL>(t, size);
    }
}

static double churn_of(const target &t, const churn_seq_t *seq, void **live, long *at,
                       double budget, long count)
{
    switch (t.kind) {
    case A_GPUARENA:
        return churn<A_GPUARENA>(t, seq, live, at, budget, count);
    case A_TORCH:
        return churn<A_TORCH>(t, seq, live, at, budget, count);
    default:
        return churn<A_POOL>(t, seq, live, at, budget, count);
    }
}

/* A row of (a): V[k], allocator K's median ns per pair of SIZE. */
static void row_pairs(const target *t, size_t size, double *v)
{
    double runs[A_COUNT][ROUNDS];
    for (int k = 0; k < A_COUNT; k++)
        pairs_of(t[k], size); /* the first block of this size and stream */
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < A_COUNT; k++)
            runs[k][r] = pairs_of(t[k], size);
    for (int k = 0; k < A_COUNT; k++)
        v[k] = median(runs[k], ROUNDS);
}

/* A row of (b): each allocator holds 256 blocks of its own, warms up, then
 * ROUNDS rounds of one run each; V[k] the median ns per operation. */
static void row_churn(const target *t, const churn_seq_t *seq, double *v)
{
    static void *live[A_COUNT][CHURN_LIVE];
    double runs[A_COUNT][ROUNDS];
    long at[A_COUNT];
    for (int k = 0; k < A_COUNT; k++) {
        for (int i = 0; i < CHURN_LIVE; i++)
            live[k][i] = t_alloc(t[k].kind, t[k], seq->init[i]);
        at[k] = 0;
        churn_of(t[k], seq, live[k], &at[k], 0, WARM);
    }
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < A_COUNT; k++)
            runs[k][r] = churn_of(t[k], seq, live[k], &at[k], 2 * RUN_S, 0);
    for (int k = 0; k < A_COUNT; k++) {
        for (int i = 0; i < CHURN_LIVE; i++)
            t_free(t[k].kind, t[k], live[k][i]);
        v[k] = median(runs[k], ROUNDS);
    }
}

/* A row of (c): V[k], allocator K's million pairs of SIZE a second on
 * THREADS threads, each on its stream of STREAMS, in CTX. */
static void row_threads(const target *t, CUcontext ctx, const CUstream *streams, size_t size,
                        double *v)
{
    for (int k = 0; k < A_COUNT; k++) {
        double runs[3];
        for (int r = 0; r < 3; r++) {
            std::atomic<bool> stop{false};
            std::barrier go(THREADS + 1);
            std::vector<long> done(THREADS, 0);
            std::vector<std::thread> th;
            for (int i = 0; i < THREADS; i++)
                th.emplace_back([&, i] {
                    try {
                        cuCtxSetCurrent(ctx);
                        target mine = t[k];
                        mine.stream = streams[i];
                        pairs_of(mine, size); /* this stream's first block */
                        go.arrive_and_wait();
                        long n = 0;
                        while (!stop.load(std::memory_order_relaxed)) {
                            for (int j = 0; j < 64; j++)
                                t_free(mine.kind, mine, t_alloc(mine.kind, mine, size));
                            n += 64;
                        }
                        done[i] = n;
                    } catch (const std::exception &e) {
                        die("PyTorch, in a thread", e.what());
                    }
                });
            go.arrive_and_wait();
            double t0 = now();
            std::this_thread::sleep_for(std::chrono::duration<double>(CONC_S));
            stop.store(true);
            long total = 0;
            for (int i = 0; i < THREADS; i++) {
                th[i].join();
                total += done[i];
            }
            runs[r] = (double)total / (now() - t0) / 1e6;
        }
        v[k] = median(runs, 3);
    }
}

/* WHAT's figures V, with DIGITS after the point, and gpuarena's over the
 * others'. */
static void print_row(const char *what, const double *v, int digits)
{
    std::printf("%-34s", what);
    for (int k = 0; k < A_COUNT; k++)
        std::printf(" %10.*f", digits, v[k]);
    std::printf("   %6.3f %6.3f\n", v[A_GPUARENA] / v[A_TORCH], v[A_GPUARENA] / v[A_POOL]);
}

int main()
{
    try {
        if (cuInit(0) != CUDA_SUCCESS || c10::cuda::device_count() < 1) {
            std::printf("bench_torch: no GPU: skipped\n");
            return 77;
        }
        /* PyTorch's allocator first: raw_alloc needs it set up for the
         * devices, as torch.cuda's lazy initialisation does in Python; it
         * makes device 0's primary context current, which gpuarena and the
         * driver's pool then share. */
        c10::cuda::CUDACachingAllocator::init(c10::cuda::device_count());
        c10::cuda::CUDACachingAllocator::emptyCache();
        CUdevice dev;
        CUcontext ctx;
        cu_check("cuDeviceGet", cuDeviceGet(&dev, 0));
        cu_check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&ctx, dev));
        cu_check("cuCtxSetCurrent", cuCtxSetCurrent(ctx));
        char gpu[128] = "?";
        cuDeviceGetName(gpu, sizeof gpu, dev);
        int drv = 0;
        cuDriverGetVersion(&drv);

        gpuarena_t *arena;
        if (gpuarena_get(GPUARENA_DEVICE, 0, &arena) != GPUARENA_SUCCESS)
            die("gpuarena_get", gpuarena_last_error());
        CUmemPoolProps props = {};
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = 0;
        CUmemoryPool pool;
        cu_check("cuMemPoolCreate", cuMemPoolCreate(&pool, &props));
        cuuint64_t max = UINT64_MAX;
        cu_check("cuMemPoolSetAttribute",
                 cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
        CUstream created;
        cu_check("cuStreamCreate", cuStreamCreate(&created, CU_STREAM_NON_BLOCKING));

        churn_seq_t seq;
        if (!churn_seq_init(&seq))
            die("the sequence", "out of host memory");

        std::printf("bench_torch: %s, driver %d.%d, %s\n", gpu, drv / 1000, drv % 1000 / 10,
                    gpuarena_version());
        std::printf("%-34s %10s %10s %10s   %6s %6s\n", "", names[0], names[1], names[2], "/torch",
                    "/pool");
        double v[A_COUNT];
        const char *streams[2] = {"created stream", "legacy stream"};
        target t[A_COUNT] = {{A_GPUARENA, arena, pool, nullptr},
                             {A_TORCH, arena, pool, nullptr},
                             {A_POOL, arena, pool, nullptr}};
        for (int s = 0; s < 2; s++) {
            CUstream st = s == 0 ? created : nullptr;
            for (target &x : t)
                x.stream = st;
            char what[64];
            std::snprintf(what, sizeof what, "(a) 512 B pair, %s (ns)", streams[s]);
            row_pairs(t, 512, v);
            print_row(what, v, 1);
            std::snprintf(what, sizeof what, "(a) 1 MiB pair, %s (ns)", streams[s]);
            row_pairs(t, 1 << 20, v);
            print_row(what, v, 1);
            std::snprintf(what, sizeof what, "(b) churn, %s (ns/op)", streams[s]);
            row_churn(t, &seq, v);
            print_row(what, v, 1);
            cu_check("cuStreamSynchronize", cuStreamSynchronize(st));
        }
        CUstream conc[THREADS];
        for (int i = 0; i < THREADS; i++)
            cu_check("cuStreamCreate", cuStreamCreate(&conc[i], CU_STREAM_NON_BLOCKING));
        /* Each thread of (c) puts its own stream in its copy. */
        row_threads(t, ctx, conc, 4096, v);
        print_row("(c) 16 threads, 4 KiB (M pairs/s)", v, 3);
        std::printf("anchors (DESIGN.md, H200): targets over PyTorch: (a) 60 / 350-600 = "
                    "0.100-0.171, (b) 100 / 814 = 0.123, (c) 30 / 0.30 = 100; over the pool: "
                    "(a) 60 / 700 = 0.086, (b) 100 / 1937 = 0.052, (c) 30 / 0.15 = 200\n");
        return 0;
    } catch (const std::exception &e) {
        die("PyTorch", e.what());
    }
}
