/*
 * bench_managed.c - a 1 GiB managed block against plain device memory on
 * GPU 0 (issue 7's target).
 *
 * The work over a block of SIZE bytes is a driver memset of the block
 * (cuMemsetD8Async) followed by a reading pass (cuMemcpyDtoD of the block
 * into a device buffer of the same size), then cuCtxSynchronize; all on
 * the legacy stream.  Each case runs REPEAT times, median in ms:
 *
 *   device      cuMemAlloc memory allocated once, before the timing;
 *   managed, prefetch on alloc, pooled block
 *               a managed arena with prefetch=on-alloc; the timing
 *               includes gpuarena_alloc (which prefetches the block to the
 *               GPU) and gpuarena_free, the block coming from the arena's
 *               cache after the first run.  Target: within 1.1 times device;
 *   managed, prefetch on alloc, fresh arena
 *               the same in a new arena each run, so the block's pages are
 *               populated by the prefetch (first use; reported);
 *   managed, no hints
 *               a new arena each run with prefetch=none and no advice; the
 *               host touches the block first (memset), then the GPU reads
 *               it (the copy), which the UVM driver serves by faults and
 *               migration: host memset + GPU read are timed (reported).
 *
 * Free device memory is checked first: the block, the device source and
 * the destination need 3 x SIZE plus the arena's prefetch headroom; with
 * less free, SIZE shrinks to fit (and says so).  Managed memory is never
 * allocated beyond what the GPU has free.
 *
 * Exit: 0 target met, 2 missed, 77 no GPU, 1 error.
 */
#include "gpubench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPEAT 5

static size_t size = GiB;
static uint64_t dst; /* the reading pass's destination */

/* Memset + reading pass over SIZE bytes at P; seconds. */
static double work(uint64_t p)
{
    double t0 = gb_now();
    GB_CHECK("cuMemsetD8Async", ga_cuda_memset_d8_async(p, 0x5a, size, NULL));
    GB_CHECK("cuMemcpyDtoD (reading pass)", ga_cuda_memcpy_dtod(dst, p, size));
    GB_CHECK("cuCtxSynchronize", ga_cuda_ctx_sync());
    return gb_now() - t0;
}

/* Check that the reading pass saw the memset's bytes (a few spots). */
static void verify(unsigned char want, const char *what)
{
    unsigned char b[4096];
    const size_t at[] = {0, size / 2, size - sizeof b};
    for (int i = 0; i < 3; i++) {
        GB_CHECK("cuMemcpyDtoH (verifying)", ga_cuda_memcpy_dtoh(b, dst + at[i], sizeof b));
        for (size_t j = 0; j < sizeof b; j++)
            if (b[j] != want) {
                fprintf(stderr, "bench_managed: %s: byte %zu read %#x, expected %#x\n", what,
                        at[i] + j, b[j], want);
                exit(GB_EXIT_ERROR);
            }
    }
}

static const char *const prefetch_opts = "prefetch=on-alloc";
static const char *const no_hint_opts = "prefetch=none,advise_preferred=none,"
                                        "advise_accessed_by=none,read_mostly=false";

static void print_row(const char *what, double ms, double dev_ms, const char *target)
{
    printf("%-46s | %10.3f | %8.2f | %s\n", what, ms, ms / dev_ms, target);
}

int main(void)
{
    gb_open("bench_managed");
    int managed = 0, concurrent = 0;
    GB_CHECK("device attribute MANAGED_MEMORY",
             ga_cuda_device_attr(0, GA_CUDA_ATTR_MANAGED_MEMORY, &managed));
    GB_CHECK("device attribute CONCURRENT_MANAGED_ACCESS",
             ga_cuda_device_attr(0, GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, &concurrent));
    printf("managed memory: %s; concurrent managed access: %s\n", managed ? "yes" : "no",
           concurrent ? "yes" : "no (prefetch to the GPU is a counted no-op)");
    if (!managed) {
        printf("bench_managed: skipped: device 0 has no managed memory\n");
        return GB_EXIT_NO_GPU;
    }
    size_t free_b = gb_device_free(), headroom = 256 * MiB + 512 * MiB;
    if (free_b < 3 * size + headroom) {
        size_t fit =
            free_b > headroom + 3 * 64 * MiB ? (free_b - headroom) / 3 / (64 * MiB) * 64 * MiB : 0;
        if (fit == 0) {
            printf("bench_managed: skipped: only %.2f GiB of device memory free\n",
                   (double)free_b / (double)GiB);
            return GB_EXIT_NO_GPU;
        }
        printf("note: %.2f GiB free on the device: blocks of %zu MiB instead of 1 GiB\n",
               (double)free_b / (double)GiB, fit / MiB);
        size = fit;
    }
    size_t avail = gb_host_available();
    if (avail && avail < size + 512 * MiB) {
        printf("bench_managed: skipped: %.2f GiB of host memory available\n",
               (double)avail / (double)GiB);
        return GB_EXIT_NO_GPU;
    }
    char b[32];
    printf("work: cuMemsetD8Async of %s + cuMemcpyDtoD of it into device memory + "
           "cuCtxSynchronize (median of %d, ms)\n\n",
           gb_size(size, b), REPEAT);

    GB_CHECK("cuMemAlloc (destination)", ga_cuda_mem_alloc(size, &dst));

    /* Device memory. */
    uint64_t src;
    double v[REPEAT];
    GB_CHECK("cuMemAlloc (device block)", ga_cuda_mem_alloc(size, &src));
    work(src); /* warm */
    for (int r = 0; r < REPEAT; r++)
        v[r] = work(src);
    double dev = gb_median(v, REPEAT) * 1e3;
    verify(0x5a, "device memory");
    GB_CHECK("cuMemFree (device block)", ga_cuda_mem_free(src));

    /* Managed, prefetch on alloc, pooled block. */
    gpuarena_t *a;
    void *p;
    gpuarena_stats_t st;
    GB_CHECK("creating a managed arena (prefetch=on-alloc)",
             gpuarena_create(GPUARENA_MANAGED, 0, prefetch_opts, &a));
    GB_CHECK("gpuarena_alloc (managed, first)", gpuarena_alloc(a, size, NULL, &p));
    GB_CHECK("gpuarena_free (managed, first)", gpuarena_free(a, p, NULL));
    for (int r = 0; r < REPEAT; r++) {
        double t0 = gb_now();
        GB_CHECK("gpuarena_alloc (managed)", gpuarena_alloc(a, size, NULL, &p));
        double w = work((uint64_t)(uintptr_t)p);
        GB_CHECK("gpuarena_free (managed)", gpuarena_free(a, p, NULL));
        (void)w;
        v[r] = gb_now() - t0;
    }
    verify(0x5a, "managed memory, pooled");
    double pooled = gb_median(v, REPEAT) * 1e3;
    GB_CHECK("gpuarena_stats", gpuarena_stats(a, &st));
    uint64_t pf = st.prefetches, pf_skip = st.prefetches_skipped;
    GB_CHECK("cuCtxSynchronize", ga_cuda_ctx_sync());
    GB_CHECK("destroying the managed arena", gpuarena_destroy(a));

    /* Managed, prefetch on alloc, fresh arena each run. */
    for (int r = 0; r < REPEAT; r++) {
        GB_CHECK("creating a managed arena (prefetch=on-alloc)",
                 gpuarena_create(GPUARENA_MANAGED, 0, prefetch_opts, &a));
        double t0 = gb_now();
        GB_CHECK("gpuarena_alloc (managed, fresh)", gpuarena_alloc(a, size, NULL, &p));
        work((uint64_t)(uintptr_t)p);
        v[r] = gb_now() - t0;
        GB_CHECK("gpuarena_stats", gpuarena_stats(a, &st));
        pf += st.prefetches;
        pf_skip += st.prefetches_skipped;
        GB_CHECK("gpuarena_free (managed, fresh)", gpuarena_free(a, p, NULL));
        GB_CHECK("cuCtxSynchronize", ga_cuda_ctx_sync());
        GB_CHECK("destroying the managed arena", gpuarena_destroy(a));
    }
    double fresh = gb_median(v, REPEAT) * 1e3;

    /* No hints: host first touch, then the GPU reads. */
    double host_v[REPEAT], gpu_v[REPEAT];
    for (int r = 0; r < REPEAT; r++) {
        GB_CHECK("creating a managed arena (no hints)",
                 gpuarena_create(GPUARENA_MANAGED, 0, no_hint_opts, &a));
        GB_CHECK("gpuarena_alloc (managed, no hints)", gpuarena_alloc(a, size, NULL, &p));
        double t0 = gb_now();
        memset(p, 0x3c, size);
        double t1 = gb_now();
        GB_CHECK("cuMemcpyDtoD (reading pass, no hints)",
                 ga_cuda_memcpy_dtod(dst, (uint64_t)(uintptr_t)p, size));
        GB_CHECK("cuCtxSynchronize", ga_cuda_ctx_sync());
        double t2 = gb_now();
        host_v[r] = t1 - t0;
        gpu_v[r] = t2 - t1;
        v[r] = t2 - t0;
        if (r == 0)
            verify(0x3c, "managed memory, no hints");
        GB_CHECK("gpuarena_free (managed, no hints)", gpuarena_free(a, p, NULL));
        GB_CHECK("cuCtxSynchronize", ga_cuda_ctx_sync());
        GB_CHECK("destroying the managed arena", gpuarena_destroy(a));
    }
    double nohint = gb_median(v, REPEAT) * 1e3;

    printf("%-46s | %10s | %8s | %s\n", "memory", "ms", "x device", "target");
    print_row("device memory (cuMemAlloc)", dev, dev, "");
    bool ok = pooled <= 1.1 * dev;
    gb_target(ok);
    char tgt[64];
    snprintf(tgt, sizeof tgt, "<= 1.1 x device: %s", ok ? "met" : "MISSED");
    print_row("managed, prefetch on alloc, pooled block", pooled, dev, tgt);
    print_row("managed, prefetch on alloc, fresh arena", fresh, dev,
              "(first use: pages populated)");
    print_row("managed, no hints (host memset + GPU read)", nohint, dev, "(fault-driven)");
    printf("  no hints, parts: host memset %.3f ms, GPU read %.3f ms\n",
           gb_median(host_v, REPEAT) * 1e3, gb_median(gpu_v, REPEAT) * 1e3);
    printf("prefetches issued: %llu, skipped by the guard or the device: %llu%s\n",
           (unsigned long long)pf, (unsigned long long)pf_skip,
           pf_skip ? " (the prefetch rows then measure fault-driven paging)" : "");
    GB_CHECK("cuMemFree (destination)", ga_cuda_mem_free(dst));
    return gb_finish();
}
