/*
 * bench_managed.c - a kernel over a 1 GiB managed block against the same
 * over plain device memory, on GPU 0 (issue 7).
 *
 * The work over a block: cuMemsetD32Async of the block with a 32-bit
 * value V, then a reading kernel (ga_bench_read of bench_kernels.cu) that
 * sums the block's words in 16-byte loads and writes one partial sum per
 * thread block.  The host adds the partial sums and checks them against
 * size / 4 * V, with a new V every run: each run proves that the kernel
 * read what the memset wrote.  Times are GPU times between events
 * recorded on one stream around the memset and the kernel: median of
 * REPEAT runs, the first run of a fresh block reported apart (first
 * touch).  What has to happen before the work (allocation, prefetch, the
 * host writing the block) is timed apart on the host's clock, around the
 * call and a cuStreamSynchronize, never inside the work's time.
 *
 *   (a) device memory: cuMemAlloc, before the timing.
 *   (b) managed, prefetch=on-alloc and no advice: gpuarena_alloc
 *       prefetches the block to the GPU on the stream (timed apart as
 *       "alloc + prefetch"), then the work.  Three states of the block:
 *         new segment    the first allocation: cuMemAllocManaged, the
 *                        prefetch populates the pages on the GPU;
 *         pooled, on the GPU
 *                        the block back from the arena's cache with its
 *                        pages still on the GPU; issue 7's target: the
 *                        work within 1.1 times (a);
 *         pooled, the host wrote it last
 *                        the host wrote the block before it was freed, so
 *                        the prefetch on the next allocation moves 1 GiB
 *                        back to the GPU.
 *   (c) managed, no hints (prefetch=none, no advice): the fault-driven
 *       time, for comparison.
 *         first touch    a new block: the GPU's memset faults its pages in;
 *         the host wrote it last
 *                        the host wrote the block (moving its pages to the
 *                        host; timed apart), then the work, whose memset
 *                        faults them back: the fault-driven figure;
 *         on the GPU     the work again, the pages already on the GPU.
 *
 * A second table runs other work over the same memory, to tell where a
 * difference comes from: a writing kernel (ga_bench_fill) + the reading
 * kernel, and cuMemcpyDtoDAsync of the block into device memory (the
 * reading pass of earlier versions of this benchmark), and the wall time
 * of the memset + read (enqueue to cuStreamSynchronize).
 *
 * Memory: the block, the copy's destination and the prefetch headroom
 * must fit in the device's free memory (the copy is left out, then the
 * block shrinks, if they do not); managed memory is never allocated
 * beyond what the GPU has free.  The host-written states need as much
 * host memory available as the block.
 *
 * Exit: 0 target met, 2 missed, 77 no GPU (or no managed memory), 1 error.
 */
#include "bench_kernels_ptx.h"
#include "gpubench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPEAT    7
#define THREADS   256  /* GA_BENCH_THREADS of bench_kernels.cu */
#define HOST_BYTE 0xa5 /* what the host writes */
#define MARGIN    (1024 * MiB)

static size_t size = GiB;
static void *stream;
static void *module, *fn_read, *fn_fill;
static unsigned grid;    /* thread blocks of a launch */
static uint64_t partial; /* GRID partial sums (device memory) */
static uint64_t *partial_host;
static uint64_t copy_dst; /* the copy's destination; 0: no room for it */
static void *ev[3];       /* timing events */
static uint32_t seq;
static uint32_t block_value; /* what the last pass wrote into the block */

/* ---------------------------------------------------------------------- */
/* One pass of work. */

/* A new fill value: never 0 nor the host's pattern. */
static uint32_t next_value(void)
{
    uint32_t v;
    do
        v = 0x9e3779b9u * ++seq;
    while (v == 0 || v == HOST_BYTE * 0x01010101u);
    return v;
}

static void record(int i)
{
    GB_CHECK("cuEventRecord (timing)", ga_cuda_event_record(ev[i], stream));
}

static double between(int a, int b)
{
    float ms = 0;
    GB_CHECK("cuEventElapsedTime", ga_cuda_event_elapsed(ev[a], ev[b], &ms));
    return ms;
}

static void sync_stream(void)
{
    GB_CHECK("cuStreamSynchronize", ga_cuda_stream_sync(stream));
}

static void launch_read(uint64_t p, size_t n)
{
    unsigned long long words = n / 16;
    void *args[] = {&p, &words, &partial};
    GB_CHECK("launching ga_bench_read", ga_cuda_launch(fn_read, grid, THREADS, 0, stream, args));
}

static void launch_fill(uint64_t p, size_t n, uint32_t v)
{
    unsigned long long words = n / 16;
    void *args[] = {&p, &words, &v};
    GB_CHECK("launching ga_bench_fill", ga_cuda_launch(fn_fill, grid, THREADS, 0, stream, args));
}

/* The reading kernel's sum (the stream synchronised) against N bytes of
 * the 32-bit value V. */
static void check_sum(size_t n, uint32_t v, const char *what)
{
    GB_CHECK("cuMemcpyDtoH (partial sums)",
             ga_cuda_memcpy_dtoh(partial_host, partial, grid * sizeof *partial_host));
    uint64_t sum = 0;
    for (unsigned i = 0; i < grid; i++)
        sum += partial_host[i];
    uint64_t want = (uint64_t)(n / 4) * v;
    if (sum != want) {
        fflush(stdout);
        fprintf(stderr,
                "bench_managed: %s: the reading kernel summed %#" PRIx64 ", expected %#" PRIx64
                " (%zu words of %#x): it did not read what was written\n",
                what, sum, want, n / 4, v);
        exit(GB_EXIT_ERROR);
    }
}

/* Times of one pass, ms: the writing part, the reading part (GPU), and
 * the wall time from the first enqueue to the end of the synchronise. */
typedef struct pass {
    double write, read, wall;
} pass_t;

/* cuMemsetD32Async + reading kernel over N bytes at P. */
static pass_t pass_memset(uint64_t p, size_t n, const char *what)
{
    uint32_t v = next_value();
    double t0 = gb_now();
    record(0);
    GB_CHECK("cuMemsetD32Async", ga_cuda_memset_d32_async(p, v, n / 4, stream));
    record(1);
    launch_read(p, n);
    record(2);
    sync_stream();
    double t1 = gb_now();
    check_sum(n, v, what);
    block_value = v;
    return (pass_t){between(0, 1), between(1, 2), (t1 - t0) * 1e3};
}

/* Writing kernel + reading kernel over N bytes at P. */
static pass_t pass_fill(uint64_t p, size_t n, const char *what)
{
    uint32_t v = next_value();
    double t0 = gb_now();
    record(0);
    launch_fill(p, n, v);
    record(1);
    launch_read(p, n);
    record(2);
    sync_stream();
    double t1 = gb_now();
    check_sum(n, v, what);
    block_value = v;
    return (pass_t){between(0, 1), between(1, 2), (t1 - t0) * 1e3};
}

/* cuMemcpyDtoDAsync of the block into device memory (timed), then the
 * reading kernel over the copy (not timed) to check it. */
static pass_t pass_copy(uint64_t p, const char *what)
{
    double t0 = gb_now();
    record(0);
    GB_CHECK("cuMemcpyDtoDAsync", ga_cuda_memcpy_dtod_async(copy_dst, p, size, stream));
    record(1);
    sync_stream();
    double t1 = gb_now();
    launch_read(copy_dst, size);
    sync_stream();
    check_sum(size, block_value, what);
    return (pass_t){between(0, 1), 0, (t1 - t0) * 1e3};
}

/* ---------------------------------------------------------------------- */
/* Rows of results. */

typedef struct acc {
    int n, nsetup, nfill, ncopy;
    double setup[REPEAT], memset[REPEAT], read[REPEAT], work[REPEAT], wall[REPEAT];
    double fill[REPEAT], copy[REPEAT];
} acc_t;

typedef struct row {
    const char *name;
    const char *setup_what; /* NULL: nothing before the work */
    int runs;
    double setup, memset, read, work, wall; /* ms, medians */
    double fill, copy;                      /* ms, medians; < 0: not measured */
} row_t;

static row_t rows[12];
static int nrows;

static void add_setup(acc_t *a, double ms)
{
    a->setup[a->nsetup++] = ms;
}

static void add_pass(acc_t *a, pass_t p)
{
    a->memset[a->n] = p.write;
    a->read[a->n] = p.read;
    a->work[a->n] = p.write + p.read;
    a->wall[a->n] = p.wall;
    a->n++;
}

static void add_fill(acc_t *a, pass_t p)
{
    a->fill[a->nfill++] = p.write + p.read;
}

static void add_copy(acc_t *a, pass_t p)
{
    a->copy[a->ncopy++] = p.write;
}

static row_t *add_row(acc_t *a, const char *name, const char *setup_what)
{
    row_t *r = &rows[nrows++];
    r->name = name;
    r->setup_what = setup_what;
    r->runs = a->n;
    r->setup = a->nsetup ? gb_median(a->setup, a->nsetup) : -1;
    r->memset = gb_median(a->memset, a->n);
    r->read = gb_median(a->read, a->n);
    r->work = gb_median(a->work, a->n);
    r->wall = gb_median(a->wall, a->n);
    r->fill = a->nfill ? gb_median(a->fill, a->nfill) : -1;
    r->copy = a->ncopy ? gb_median(a->copy, a->ncopy) : -1;
    return r;
}

/* ---------------------------------------------------------------------- */
/* Setting up. */

static void load_kernels(void)
{
    double t0 = gb_now();
    GB_CHECK("loading the benchmark's kernels (cuModuleLoadDataEx of bench_kernels_ptx.h)",
             ga_cuda_module_load(ga_bench_kernels_ptx, &module));
    double t1 = gb_now();
    GB_CHECK("cuModuleGetFunction", ga_cuda_function_get(module, "ga_bench_read", &fn_read));
    GB_CHECK("cuModuleGetFunction", ga_cuda_function_get(module, "ga_bench_fill", &fn_fill));
    int sms = 0;
    GB_CHECK("device attribute MULTIPROCESSOR_COUNT",
             ga_cuda_device_attr(0, GA_CUDA_ATTR_MULTIPROCESSOR_COUNT, &sms));
    /* 2048 threads per multiprocessor on the GPUs of interest: 8 blocks
     * of 256 each (the kernels use at most 32 registers a thread). */
    grid = sms > 0 ? (unsigned)sms * 8 : 1024;
    partial_host = calloc(grid, sizeof *partial_host);
    if (!partial_host) {
        fprintf(stderr, "bench_managed: no host memory for %u partial sums\n", grid);
        exit(GB_EXIT_ERROR);
    }
    GB_CHECK("cuMemAlloc (partial sums)", ga_cuda_mem_alloc(grid * sizeof(uint64_t), &partial));
    for (int i = 0; i < 3; i++)
        GB_CHECK("cuEventCreate (timing)", ga_cuda_timing_event_create(&ev[i]));
    /* Warm up and check both kernels on a small buffer (odd length in
     * 16-byte words, so the tail loops run too). */
    uint64_t w;
    size_t n = 64 * MiB + 48;
    GB_CHECK("cuMemAlloc (warm-up buffer)", ga_cuda_mem_alloc(n, &w));
    for (int i = 0; i < 2; i++) {
        pass_memset(w, n, "warm-up, memset + read");
        pass_fill(w, n, "warm-up, fill + read");
    }
    GB_CHECK("cuMemFree (warm-up buffer)", ga_cuda_mem_free(w));
    const char *v = strstr(ga_bench_kernels_ptx, ".version");
    int vlen = v ? (int)strcspn(v, "\n") : 0;
    printf("kernels: PTX (%.*s) compiled by the driver in %.1f ms; %u blocks of %d threads (%d "
           "multiprocessors); checked on a warm-up buffer\n",
           vlen, v ? v : "", (t1 - t0) * 1e3, grid, THREADS, sms);
}

/* Room on the device for managed SIZE (plus the arena's default prefetch
 * headroom and a margin)?  Says so when not. */
static bool room_for(const char *what)
{
    size_t f = gb_device_free();
    if (f >= size + 256 * MiB + 256 * MiB)
        return true;
    printf("note: %s left out: %.2f GiB free on the device, less than the block and the "
           "prefetch headroom\n",
           what, (double)f / (double)GiB);
    return false;
}

static double host_write(void *p)
{
    sync_stream();
    double t0 = gb_now();
    memset(p, HOST_BYTE, size);
    return (gb_now() - t0) * 1e3;
}

static void *arena_alloc(gpuarena_t *a, double *ms)
{
    void *p = NULL;
    double t0 = gb_now();
    GB_CHECK("gpuarena_alloc (managed)", gpuarena_alloc(a, size, stream, &p));
    sync_stream();
    if (ms)
        *ms = (gb_now() - t0) * 1e3;
    return p;
}

static void arena_free(gpuarena_t *a, void *p)
{
    GB_CHECK("gpuarena_free (managed)", gpuarena_free(a, p, stream));
}

/* ---------------------------------------------------------------------- */
/* The cases. */

static row_t *case_device(void)
{
    uint64_t d;
    double t0 = gb_now();
    GB_CHECK("cuMemAlloc (device block)", ga_cuda_mem_alloc(size, &d));
    double ms = (gb_now() - t0) * 1e3;
    acc_t a = {0};
    add_setup(&a, ms);
    add_pass(&a, pass_memset(d, size, "device memory, first touch"));
    add_row(&a, "device memory: first touch", "cuMemAlloc");
    acc_t b = {0};
    for (int r = 0; r < REPEAT; r++) {
        add_pass(&b, pass_memset(d, size, "device memory"));
        add_fill(&b, pass_fill(d, size, "device memory"));
        if (copy_dst)
            add_copy(&b, pass_copy(d, "device memory, copy"));
    }
    row_t *row = add_row(&b, "(a) device memory", NULL);
    GB_CHECK("cuMemFree (device block)", ga_cuda_mem_free(d));
    return row;
}

/* Every key that would change what is measured is set here, so that a
 * gpuarena.conf or GPUARENA_OPTIONS cannot (prefetch_headroom and
 * prefetch_chunk are left to them). */
static const char *const prefetch_opts = "prefetch=on-alloc,advise_preferred=none,"
                                         "advise_accessed_by=none,read_mostly=false,zero=false,"
                                         "max_cached=none";
static const char *const no_hint_opts = "prefetch=none,advise_preferred=none,"
                                        "advise_accessed_by=none,read_mostly=false,zero=false,"
                                        "max_cached=none";

static const char *location_name(int type, int id, char buf[32])
{
    if (type == GA_CUDA_LOCTYPE_DEVICE)
        snprintf(buf, 32, "device %d", id);
    else if (type == GA_CUDA_LOCTYPE_HOST)
        snprintf(buf, 32, "the host");
    else if (type == GA_CUDA_LOCTYPE_HOST_NUMA)
        snprintf(buf, 32, "host NUMA node %d", id);
    else
        snprintf(buf, 32, "none (type %d)", type);
    return buf;
}

static void print_arena(const char *what, gpuarena_t *a)
{
    gpuarena_stats_t st;
    GB_CHECK("gpuarena_stats", gpuarena_stats(a, &st));
    printf("%s: prefetches issued %" PRIu64 ", skipped %" PRIu64 "; advice applied %" PRIu64
           ", skipped %" PRIu64 "; segments mapped %" PRIu64 "\n",
           what, st.prefetches, st.prefetches_skipped, st.advice_applied, st.advice_skipped,
           st.provider_maps);
    if (st.prefetches_skipped)
        printf("  WARNING: prefetches were skipped (the guard or the device): the rows of this "
               "arena then measure fault-driven paging\n");
    if (st.provider_maps > 1)
        printf("  WARNING: %" PRIu64 " segments were mapped: the block was not always the "
               "pooled one\n",
               st.provider_maps);
}

static row_t *case_prefetch(bool host_ok, row_t **first)
{
    gpuarena_t *m;
    GB_CHECK("creating a managed arena (prefetch=on-alloc)",
             gpuarena_create(GPUARENA_MANAGED, 0, prefetch_opts, &m));
    acc_t a = {0};
    double ms;
    void *p = arena_alloc(m, &ms);
    uint64_t d = (uint64_t)(uintptr_t)p;
    add_setup(&a, ms);
    add_pass(&a, pass_memset(d, size, "managed, prefetch on alloc, new segment"));
    *first = add_row(&a, "(b) managed, prefetch on alloc: new segment", "alloc+prefetch");
    int type = -1, id = -1;
    char loc[32];
    GB_CHECK("cuMemRangeGetAttribute (last prefetch location)",
             ga_cuda_mem_range_attr(d, size, GA_CUDA_RANGE_LAST_PREFETCH_TYPE, &type, 1));
    GB_CHECK("cuMemRangeGetAttribute (last prefetch location)",
             ga_cuda_mem_range_attr(d, size, GA_CUDA_RANGE_LAST_PREFETCH_ID, &id, 1));
    printf("prefetch-on-alloc arena: the block's last prefetch location: %s\n",
           location_name(type, id, loc));
    arena_free(m, p);

    acc_t b = {0};
    for (int r = 0; r < REPEAT; r++) {
        p = arena_alloc(m, &ms);
        d = (uint64_t)(uintptr_t)p;
        add_setup(&b, ms);
        add_pass(&b, pass_memset(d, size, "managed, prefetch on alloc, pooled"));
        add_fill(&b, pass_fill(d, size, "managed, prefetch on alloc, pooled"));
        if (copy_dst)
            add_copy(&b, pass_copy(d, "managed, prefetch on alloc, pooled, copy"));
        arena_free(m, p);
    }
    row_t *row = add_row(&b, "(b) managed, prefetch on alloc: pooled, on GPU", "alloc+prefetch");

    if (host_ok) {
        acc_t c = {0};
        for (int r = 0; r < REPEAT; r++) {
            p = arena_alloc(m, NULL);
            host_write(p);
            arena_free(m, p);
            p = arena_alloc(m, &ms); /* the prefetch moves it back */
            add_setup(&c, ms);
            add_pass(&c, pass_memset((uint64_t)(uintptr_t)p, size,
                                     "managed, prefetch on alloc, host wrote it"));
            arena_free(m, p);
        }
        add_row(&c, "(b) managed, prefetch on alloc: host wrote it", "alloc+prefetch");
    }
    print_arena("prefetch-on-alloc arena", m);
    GB_CHECK("cuStreamSynchronize", ga_cuda_stream_sync(stream));
    GB_CHECK("destroying the managed arena", gpuarena_destroy(m));
    return row;
}

static row_t *case_no_hints(bool host_ok)
{
    gpuarena_t *m;
    GB_CHECK("creating a managed arena (no hints)",
             gpuarena_create(GPUARENA_MANAGED, 0, no_hint_opts, &m));
    acc_t a = {0};
    double ms;
    void *p = arena_alloc(m, &ms);
    uint64_t d = (uint64_t)(uintptr_t)p;
    add_setup(&a, ms);
    add_pass(&a, pass_memset(d, size, "managed, no hints, first touch"));
    add_row(&a, "(c) managed, no hints: first touch (faults)", "alloc");

    row_t *row = NULL;
    if (host_ok) {
        acc_t b = {0};
        for (int r = 0; r < REPEAT; r++) {
            add_setup(&b, host_write(p));
            add_pass(&b, pass_memset(d, size, "managed, no hints, host wrote it"));
            host_write(p);
            add_fill(&b, pass_fill(d, size, "managed, no hints, host wrote it"));
        }
        row = add_row(&b, "(c) managed, no hints: host wrote it (faults)", "host write");
    }

    acc_t c = {0};
    for (int r = 0; r < REPEAT; r++) {
        add_pass(&c, pass_memset(d, size, "managed, no hints, on the GPU"));
        add_fill(&c, pass_fill(d, size, "managed, no hints, on the GPU"));
        if (copy_dst)
            add_copy(&c, pass_copy(d, "managed, no hints, on the GPU, copy"));
    }
    row_t *on_gpu = add_row(&c, "(c) managed, no hints: on the GPU", NULL);
    print_arena("no-hints arena", m);
    arena_free(m, p);
    GB_CHECK("cuStreamSynchronize", ga_cuda_stream_sync(stream));
    GB_CHECK("destroying the managed arena", gpuarena_destroy(m));
    return row ? row : on_gpu;
}

/* ---------------------------------------------------------------------- */
/* Printing. */

/* " %9.3f", or a dash where nothing was measured. */
static void print_ms(double ms)
{
    if (ms < 0)
        printf(" %9s", "-");
    else
        printf(" %9.3f", ms);
}

static void print_tables(const row_t *dev)
{
    printf("\n%-46s %4s  %-14s %9s %9s %9s %9s %8s\n", "memory (1: the first run, else median)",
           "runs", "before work", "ms", "memset", "read", "total", "x (a)");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        printf("%-46s %4d  %-14s", r->name, r->runs, r->setup_what ? r->setup_what : "-");
        print_ms(r->setup);
        printf(" %9.3f %9.3f %9.3f %8.2f\n", r->memset, r->read, r->work, r->work / dev->work);
    }
    printf("\nthe same memory, other work (ms, median; x (a) against the same work on (a)):\n");
    printf("%-46s %12s %8s %12s %8s %12s\n", "memory", "fill+read", "x (a)", "DtoD copy", "x (a)",
           "wall m+r");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        if (r->runs < 2)
            continue;
        printf("%-46s", r->name);
        if (r->fill >= 0)
            printf(" %12.3f %8.2f", r->fill, r->fill / dev->fill);
        else
            printf(" %12s %8s", "-", "-");
        if (r->copy >= 0 && dev->copy > 0)
            printf(" %12.3f %8.2f", r->copy, r->copy / dev->copy);
        else
            printf(" %12s %8s", "-", "-");
        printf(" %12.3f\n", r->wall);
    }
    printf("  fill+read: writing kernel + reading kernel instead of the driver's memset; DtoD "
           "copy: cuMemcpyDtoDAsync of the block into device memory; wall m+r: memset + read "
           "from the first enqueue to the end of cuStreamSynchronize\n");
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
    GB_CHECK("cuStreamCreate", ga_cuda_stream_create(true, &stream));
    load_kernels();

    /* The block and the copy's destination, with the margin. */
    size_t free_b = gb_device_free();
    if (free_b >= 2 * size + MARGIN) {
        GB_CHECK("cuMemAlloc (the copy's destination)", ga_cuda_mem_alloc(size, &copy_dst));
    } else {
        printf("note: %.2f GiB free on the device: the DtoD copy column is left out\n",
               (double)free_b / (double)GiB);
        if (free_b < size + MARGIN) {
            size_t fit = free_b > MARGIN ? (free_b - MARGIN) / (64 * MiB) * 64 * MiB : 0;
            if (fit == 0) {
                printf("bench_managed: skipped: only %.2f GiB of device memory free\n",
                       (double)free_b / (double)GiB);
                return GB_EXIT_NO_GPU;
            }
            printf("note: blocks of %zu MiB instead of 1 GiB\n", fit / MiB);
            size = fit;
        }
    }
    size_t avail = gb_host_available();
    bool host_ok = avail >= size + MARGIN;
    if (!host_ok)
        printf("note: %.2f GiB of host memory available: the rows where the host writes the "
               "block are left out\n",
               (double)avail / (double)GiB);
    char b[32];
    printf("work: cuMemsetD32Async of %s + reading kernel (16-byte loads, sum checked), GPU time "
           "between events on one stream; median of %d runs, the first run of a new block "
           "apart; 'before work' is timed apart (host clock, to the end of a stream sync)\n",
           gb_size(size, b), REPEAT);

    row_t *dev = case_device();
    row_t *pref = NULL, *pref_first = NULL, *faults = NULL;
    if (room_for("managed, prefetch on alloc"))
        pref = case_prefetch(host_ok, &pref_first);
    if (room_for("managed, no hints"))
        faults = case_no_hints(host_ok);
    print_tables(dev);

    printf("\nissue 7 (%s, memset + reading kernel):\n", gb_size(size, b));
    printf("  (a) device memory:                        %9.3f ms\n", dev->work);
    if (pref) {
        double x = pref->work / dev->work;
        bool ok = x <= 1.1;
        gb_target(ok);
        printf("  (b) managed, prefetch on alloc (pooled):  %9.3f ms = %.2f x (a)  target <= 1.1 "
               "x: %s\n",
               pref->work, x, ok ? "met" : "MISSED");
        printf("      its on-alloc prefetch, not in that time: %.3f ms (block already on the "
               "GPU); prefetch + work %.3f ms = %.2f x (a)\n",
               pref->setup, pref->setup + pref->work, (pref->setup + pref->work) / dev->work);
        printf("      first use of a new segment: alloc + prefetch %.3f ms, then the work %.3f ms "
               "= %.2f x (a)\n",
               pref_first->setup, pref_first->work, pref_first->work / dev->work);
    }
    if (faults)
        printf("  (c) managed, no hints (%s): %9.3f ms = %.2f x (a)\n",
               faults->setup_what ? "fault-driven, the host wrote it last" : "on the GPU",
               faults->work, faults->work / dev->work);

    if (copy_dst)
        GB_CHECK("cuMemFree (the copy's destination)", ga_cuda_mem_free(copy_dst));
    GB_CHECK("cuMemFree (partial sums)", ga_cuda_mem_free(partial));
    for (int i = 0; i < 3; i++)
        ga_cuda_event_destroy(ev[i]);
    GB_CHECK("cuModuleUnload", ga_cuda_module_unload(module));
    GB_CHECK("cuStreamDestroy", ga_cuda_stream_destroy(stream));
    free(partial_host);
    return gb_finish();
}
