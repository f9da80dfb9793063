/*
 * check_driverpool.c - a device arena over the driver's own stream-ordered
 * pool (`pool = driver', lib/providers/driverpool.c) on a real GPU.  Exits
 * 77 (skipped) where the driver or a GPU is missing; check_config tests
 * the key and the failure there, check_direct the block manager's side on
 * a model of a pool.
 *
 * Every test makes its own arena with gpuarena_create() and destroys it.
 * Data is checked by copying patterns in and out on the allocation's
 * stream.  Orderings are checked with slow work: many fills of a block on
 * one stream, then a copy of it into pinned host memory, queued before the
 * block is freed; what another stream (or a block handed out again) writes
 * must not show in that copy.
 */
#include "config.h"

#include "arena.h"
#include "cuda/cuda.h"
#include "gpuarena.h"
#include "hostmem.h"
#include "trace/trace.h"

#include "gputest.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* Fills queued before a copy, to keep a stream busy for tens of
 * milliseconds (a 64 MiB fill takes some 20-40 us). */
#define SLOW_FILLS 1000

static gpuarena_t *pool_arena(const char *options)
{
    gpuarena_t *a = NULL;
    gpuarena_status_t st = gpuarena_create(GPUARENA_DEVICE, 0, options, &a);
    ck_assert_msg(st == GPUARENA_SUCCESS, "gpuarena_create(%s): %s", options,
                  gpuarena_last_error());
    ck_assert(a->settings.pool == GA_POOL_DRIVER);
    ck_assert(ga_provider_is_direct(a->prov));
    return a;
}

static void *stream_new(bool non_blocking)
{
    void *s = NULL;
    OK(ga_cuda_stream_create(non_blocking, &s));
    return s;
}

static gpuarena_stats_t stats(gpuarena_t *a)
{
    gpuarena_stats_t st;
    OK(gpuarena_stats(a, &st));
    return st;
}

static void check_arena(gpuarena_t *a)
{
    OK(gpuarena_check(a));
}

static uint64_t dptr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

static size_t round512(size_t n)
{
    return (n + 511) & ~(size_t)511;
}

/* The byte at offset I of the pattern SEED. */
static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131 + (i >> 12) * 7 + seed * 29 + 1);
}

static void fill_pattern(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(i, seed);
}

/* The first offset of BUF[0..N) that is not V, or N. */
static size_t first_not(const unsigned char *buf, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != v)
            return i;
    return n;
}

/* Fill SIZE bytes at P with BYTE on STREAM, then read them back on it. */
static void fill_and_check(void *p, size_t size, unsigned char byte, void *stream)
{
    unsigned char *buf = malloc(size);
    ck_assert_ptr_nonnull(buf);
    OK(ga_cuda_memset_d8_async(dptr(p), byte, size, stream));
    OK(ga_cuda_memcpy_dtoh_async(buf, dptr(p), size, stream));
    OK(ga_cuda_stream_sync(stream));
    size_t bad = first_not(buf, size, byte);
    ck_assert_msg(bad == size, "byte %zu of %p: %#x, want %#x", bad, p, bad < size ? buf[bad] : 0,
                  byte);
    free(buf);
}

static size_t device_free(void)
{
    size_t f = 0;
    OK(ga_cuda_ctx_sync());
    OK(ga_cuda_mem_info(&f, NULL));
    return f;
}

/* Free memory once it has settled (earlier releases come back
 * asynchronously). */
static size_t settled_free(void)
{
    size_t f = device_free(), g;
    for (int i = 0; i < 40; i++) {
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
        g = device_free();
        if (g == f)
            break;
        f = g;
    }
    return f;
}

/* Keep STREAM busy: SLOW_FILLS fills of SIZE bytes at P, the last with
 * BYTE. */
static void slow_fill(void *p, size_t size, unsigned char byte, void *stream)
{
    for (int i = 0; i < SLOW_FILLS; i++)
        OK(ga_cuda_memset_d8_async(dptr(p), (unsigned char)(i * 7 + 3), size, stream));
    OK(ga_cuda_memset_d8_async(dptr(p), byte, size, stream));
}

/* SIZE bytes of pinned host memory, for copies that do not wait. */
static unsigned char *pinned(size_t size)
{
    void *h = NULL;
    OK(ga_cuda_host_alloc(size, &h));
    return h;
}

static bool stream_busy(void *stream)
{
    return ga_cuda_stream_query(stream) == GA_CUDA_NOT_READY;
}

/* ---------------------------------------------------------------------- */

/* Blocks of many sizes on every kind of stream: data written with copies
 * and read back, no two overlap, the counters, the checker, the printed
 * statistics, the trace. */
START_TEST(alloc_write_read_free)
{
    gpuarena_total_t t0, t1;
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 0, &t0));
    gpuarena_t *a = pool_arena("pool=driver");
    void *s1 = stream_new(true), *s2 = stream_new(false);
    void *const streams[] = {NULL, GA_CUDA_STREAM_LEGACY, GA_CUDA_STREAM_PER_THREAD, s1, s2};
    const size_t sizes[] = {1, 512, 4096, MiB + 3, 20 * MiB, 100 * MiB};
    enum { NS = 5, NZ = 6 };
    unsigned char *in = malloc(100 * MiB), *out = malloc(100 * MiB);
    ck_assert(in && out);

    char trace_path[] = "/tmp/check_driverpool_XXXXXX";
    int fd = mkstemp(trace_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    OK(ga_trace_open(trace_path));

    void *live[NS][NZ];
    uint64_t requested = 0, in_use = 0;
    for (int i = 0; i < NS; i++) {
        for (int j = 0; j < NZ; j++) {
            OK(gpuarena_alloc(a, sizes[j], streams[i], &live[i][j]));
            ck_assert_ptr_nonnull(live[i][j]);
            requested += sizes[j];
            in_use += round512(sizes[j]);
            fill_pattern(in, sizes[j], (unsigned)(i * NZ + j));
            OK(ga_cuda_memcpy_htod_async(dptr(live[i][j]), in, sizes[j], streams[i]));
            memset(out, 0, sizes[j]);
            OK(ga_cuda_memcpy_dtoh_async(out, dptr(live[i][j]), sizes[j], streams[i]));
            OK(ga_cuda_stream_sync(streams[i]));
            ck_assert_msg(memcmp(in, out, sizes[j]) == 0, "block of %zu bytes on stream %d",
                          sizes[j], i);
        }
        check_arena(a);
    }
    /* Every block kept its own pattern: none overlaps another. */
    OK(ga_cuda_ctx_sync());
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < NZ; j++) {
            fill_pattern(in, sizes[j], (unsigned)(i * NZ + j));
            OK(ga_cuda_memcpy_dtoh(out, dptr(live[i][j]), sizes[j]));
            ck_assert_msg(memcmp(in, out, sizes[j]) == 0, "block %d/%d was overwritten", i, j);
        }
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.allocs, NS * NZ);
    ck_assert_uint_eq(st.live_blocks, NS * NZ);
    ck_assert_uint_eq(st.requested, requested);
    ck_assert_uint_eq(st.in_use, in_use);
    ck_assert_uint_eq(st.requested_peak, requested);
    ck_assert_uint_ge(st.reserved, in_use); /* the pool's own figure */
    ck_assert_uint_ge(st.reserved_peak, st.reserved);
    ck_assert_uint_eq(st.cached, st.reserved - st.in_use);
    ck_assert_uint_eq(st.segments, 0);
    ck_assert_uint_eq(st.cache_hits + st.cache_misses, 0);

    /* record_stream on a live block, then frees on every stream. */
    OK(gpuarena_record_stream(a, live[0][2], s1));
    for (int i = 0; i < NS; i++)
        for (int j = 0; j < NZ; j++)
            OK(gpuarena_free(a, live[i][j], streams[i]));
    ga_trace_stop();
    check_arena(a);
    st = stats(a);
    ck_assert_uint_eq(st.frees, NS * NZ);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.requested, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.in_use_peak, in_use);
    ck_assert_uint_eq(st.events_recorded, 1);
    ck_assert_uint_eq(st.cross_stream_waits, 1);

    /* The trace holds the arena's requests. */
    FILE *f = fopen(trace_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    unsigned na = 0, nf = 0, nr = 0, nk = 0;
    while (fgets(line, sizeof line, f)) {
        na += line[0] == 'a';
        nf += line[0] == 'f';
        nr += line[0] == 'r';
        nk += strncmp(line, "k device 0", 10) == 0;
    }
    fclose(f);
    unlink(trace_path);
    ck_assert_uint_eq(na, NS * NZ);
    ck_assert_uint_eq(nf, NS * NZ);
    ck_assert_uint_eq(nr, 1);
    ck_assert_uint_ge(nk, 1);

    /* Not in the device's total (gpuarena_stats_total(3)): the driver's
     * pool reserves for it. */
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 0, &t1));
    ck_assert_uint_eq(t1.arenas, t0.arenas);
    ck_assert_uint_eq(t1.reserved, t0.reserved);

    /* Printed as the driver's pool, as a table and as JSON. */
    FILE *t = tmpfile();
    ck_assert_ptr_nonnull(t);
    OK(gpuarena_stats_print(t, NULL));
    OK(gpuarena_stats_print(t, "json"));
    rewind(t);
    char *text = calloc(1, 1 << 16);
    ck_assert_ptr_nonnull(text);
    size_t n = fread(text, 1, (1 << 16) - 1, t);
    fclose(t);
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_nonnull(strstr(text, "arena device.0 (the driver's stream-ordered pool)"));
    ck_assert_ptr_nonnull(strstr(text, "\"kind\": \"device\""));
    /* The memory line in both. */
    ck_assert_ptr_nonnull(strstr(text, "  memory: the driver's pool (cuMemPoolCreate), "));
    ck_assert_ptr_nonnull(strstr(text, "\"memory\": \"the driver's pool (cuMemPoolCreate), "));
    free(text);

    /* Peaks restart from the values now. */
    OK(gpuarena_stats_reset_peaks(a));
    st = stats(a);
    ck_assert_uint_eq(st.in_use_peak, 0);
    ck_assert_uint_ge(st.reserved_peak, st.reserved);
    ck_assert_uint_ge(st.cached_peak, st.cached);

    OK(ga_cuda_ctx_sync());
    OK(gpuarena_destroy(a));
    /* With peer access asked for (a call of cuMemPoolSetAccess where this
     * machine has peers that can reach GPU 0). */
    a = pool_arena("pool=driver,peer_access=true");
    void *p;
    OK(gpuarena_alloc(a, 4096, s1, &p));
    fill_and_check(p, 4096, 0x3d, s1);
    OK(gpuarena_free(a, p, s1));
    OK(ga_cuda_ctx_sync());
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s1));
    OK(ga_cuda_stream_destroy(s2));
    free(in);
    free(out);
}
END_TEST

/* A block freed on a stream is handed out again on that stream at once
 * (the pool reserves nothing more), and stream order keeps the old
 * contents for the work queued before the free. */
START_TEST(same_stream_reuse)
{
    gpuarena_t *a = pool_arena("pool=driver,release_threshold=max");
    void *s = stream_new(true);
    const size_t size = 64 * MiB;
    unsigned char *h = pinned(size);
    memset(h, 0, size);
    void *x, *y;
    OK(gpuarena_alloc(a, size, s, &x));
    slow_fill(x, size, 0x11, s);
    OK(ga_cuda_memcpy_dtoh_async(h, dptr(x), size, s));
    OK(gpuarena_free(a, x, s));
    bool busy = stream_busy(s);
    uint64_t reserved = stats(a).reserved;
    OK(gpuarena_alloc(a, size, s, &y));
    ck_assert_uint_eq(stats(a).reserved, reserved);
    OK(ga_cuda_memset_d8_async(dptr(y), 0x22, size, s));
    OK(ga_cuda_stream_sync(s));
    size_t bad = first_not(h, size, 0x11);
    ck_assert_msg(bad == size, "the copy queued before the free saw %#x at %zu", h[bad], bad);
    fill_and_check(y, size, 0x22, s);
    printf("check_driverpool: same stream: %s address, stream %s at the free\n",
           x == y ? "same" : "another", busy ? "busy" : "idle");
    OK(gpuarena_free(a, y, s));
    check_arena(a);
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_host_free(h));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

/* A block freed on stream A behind slow work is not used by stream B
 * before that work is done, under each cross_stream policy. */
START_TEST(other_stream_not_early)
{
    static const char *const options[] = {"pool=driver", "pool=driver,cross_stream=wait",
                                          "pool=driver,cross_stream=never"};
    const size_t size = 64 * MiB;
    unsigned char *h = pinned(size);
    for (size_t k = 0; k < sizeof options / sizeof options[0]; k++) {
        gpuarena_t *a = pool_arena(options[k]);
        void *sa = stream_new(true), *sb = stream_new(true);
        memset(h, 0, size);
        void *x, *y;
        OK(gpuarena_alloc(a, size, sa, &x));
        slow_fill(x, size, 0x5a, sa);
        OK(ga_cuda_memcpy_dtoh_async(h, dptr(x), size, sa));
        OK(gpuarena_free(a, x, sa));
        bool busy = stream_busy(sa);
        OK(gpuarena_alloc(a, size, sb, &y));
        OK(ga_cuda_memset_d8_async(dptr(y), 0xc3, size, sb));
        OK(ga_cuda_stream_sync(sb));
        OK(ga_cuda_stream_sync(sa));
        size_t bad = first_not(h, size, 0x5a);
        ck_assert_msg(bad == size,
                      "%s: stream B wrote into the block before stream A was done "
                      "with it: %#x at %zu",
                      options[k], h[bad], bad);
        fill_and_check(y, size, 0xc3, sb);
        printf("check_driverpool: %s: %s address on the other stream, stream A %s at the free\n",
               options[k], x == y ? "same" : "another", busy ? "busy" : "idle");
        OK(gpuarena_free(a, y, sb));
        check_arena(a);
        OK(ga_cuda_ctx_sync());
        OK(gpuarena_destroy(a));
        OK(ga_cuda_stream_destroy(sa));
        OK(ga_cuda_stream_destroy(sb));
    }
    OK(ga_cuda_host_free(h));
}
END_TEST

/* record_stream: a block allocated and freed on A but used by slow work
 * on B; a block handed out again on A (at once, by stream order) is not
 * written before B's work is done. */
START_TEST(record_stream_waits)
{
    gpuarena_t *a = pool_arena("pool=driver");
    void *sa = stream_new(true), *sb = stream_new(true);
    const size_t size = 64 * MiB;
    unsigned char *h = pinned(size);
    memset(h, 0, size);
    void *x, *y;
    OK(gpuarena_alloc(a, size, sa, &x));
    OK(ga_cuda_stream_sync(sa)); /* the allocation is done before B uses it */
    slow_fill(x, size, 0x77, sb);
    OK(ga_cuda_memcpy_dtoh_async(h, dptr(x), size, sb));
    OK(gpuarena_record_stream(a, x, sb));
    OK(gpuarena_free(a, x, sa));
    bool busy = stream_busy(sb);
    OK(gpuarena_alloc(a, size, sa, &y));
    OK(ga_cuda_memset_d8_async(dptr(y), 0x99, size, sa));
    OK(ga_cuda_stream_sync(sa));
    OK(ga_cuda_stream_sync(sb));
    size_t bad = first_not(h, size, 0x77);
    ck_assert_msg(bad == size, "the block was written on A while B still used it: %#x at %zu",
                  h[bad], bad);
    fill_and_check(y, size, 0x99, sa);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.events_recorded, 1);
    ck_assert_uint_eq(st.cross_stream_waits, 1);
    printf("check_driverpool: record_stream: %s address on A, B %s at the free\n",
           x == y ? "same" : "another", busy ? "busy" : "idle");
    OK(gpuarena_free(a, y, sa));
    check_arena(a);
    OK(ga_cuda_ctx_sync());
    OK(gpuarena_destroy(a));
    OK(ga_cuda_host_free(h));
    OK(ga_cuda_stream_destroy(sa));
    OK(ga_cuda_stream_destroy(sb));
}
END_TEST

/* record_stream with no host memory to note the stream: the block's uses
 * are unknown, and its free holds it from the pool, waiting for nothing
 * (a wait for the device there broke any capture in progress); the next
 * trim waits for the device, gives the held block to the pool and
 * releases it in the same call (the pool counts a free as outstanding
 * until the host has seen it complete). */
START_TEST(record_stream_without_host_memory_holds)
{
    gpuarena_t *a = pool_arena("pool=driver,release_threshold=max");
    void *sa = stream_new(true), *sb = stream_new(true);
    const size_t size = 256 * MiB;
    unsigned char *h = pinned(size);
    memset(h, 0, size);
    void *x, *y;
    OK(gpuarena_alloc(a, size, sa, &x));
    OK(ga_cuda_stream_sync(sa));
    slow_fill(x, size, 0x77, sb);
    OK(ga_cuda_memcpy_dtoh_async(h, dptr(x), size, sb));
    atomic_store(&ga_hostmem_fail, true);
    gpuarena_status_t st = gpuarena_record_stream(a, x, sb);
    atomic_store(&ga_hostmem_fail, false);
    OK(st);
    OK(gpuarena_free(a, x, sa));
    gpuarena_stats_t s1 = stats(a);
    ck_assert_uint_eq(s1.retired_cached, size);
    ck_assert_uint_eq(s1.live_blocks, 0);
    ck_assert_uint_eq(s1.events_recorded, 0);
    OK(gpuarena_alloc(a, size, sa, &y));
    ck_assert_ptr_ne(y, x); /* held: not the pool's to hand out */
    OK(ga_cuda_memset_d8_async(dptr(y), 0x99, size, sa));
    OK(ga_cuda_stream_sync(sa));
    OK(ga_cuda_stream_sync(sb));
    size_t bad = first_not(h, size, 0x77);
    ck_assert_msg(bad == size, "the block was written while B still used it: %#x at %zu", h[bad],
                  bad);
    OK(gpuarena_free(a, y, sa));
    OK(ga_cuda_stream_sync(sa));
    check_arena(a);
    OK(gpuarena_trim(a, 0));
    gpuarena_stats_t s2 = stats(a);
    ck_assert_uint_eq(s2.retired_cached, 0);
    ck_assert_msg(s2.reserved < 64 * MiB, "reserved %llu bytes after trim(0)",
                  (unsigned long long)s2.reserved);
    printf("check_driverpool: held block: %llu MiB retired, reserved %llu MiB after trim(0)\n",
           (unsigned long long)(s1.retired_cached / MiB), (unsigned long long)(s2.reserved / MiB));
    check_arena(a);
    OK(gpuarena_destroy(a));
    OK(ga_cuda_host_free(h));
    OK(ga_cuda_stream_destroy(sa));
    OK(ga_cuda_stream_destroy(sb));
}
END_TEST

#define UNCHANGED(a, before, call, want)                                                           \
    do {                                                                                           \
        gpuarena_status_t st_ = (call);                                                            \
        ck_assert_msg(st_ == (want), "%s: %s, want %s (%s)", #call, gpuarena_strerror(st_),        \
                      gpuarena_strerror(want), gpuarena_last_error());                             \
        gpuarena_stats_t after_ = stats(a);                                                        \
        ck_assert_msg(memcmp(&(before), &after_, sizeof after_) == 0, "%s changed the stats",      \
                      #call);                                                                      \
        check_arena(a);                                                                            \
    } while (0)

/* Interior, foreign and twice-freed pointers: their statuses, and nothing
 * changes. */
START_TEST(bad_pointers_change_nothing)
{
    gpuarena_t *a = pool_arena("pool=driver,release_threshold=max");
    void *s = stream_new(true);
    void *xv, *zv, *q = (void *)0x1234;
    int local;
    OK(gpuarena_alloc(a, 4096, s, &xv));
    OK(gpuarena_alloc(a, MiB, s, &zv));
    char *x = xv, *z = zv;
    OK(ga_cuda_stream_sync(s));
    gpuarena_stats_t before = stats(a);
    UNCHANGED(a, before, gpuarena_free(a, x + 512, s), GPUARENA_ERR_INTERIOR_POINTER);
    UNCHANGED(a, before, gpuarena_free(a, z + 4096, s), GPUARENA_ERR_INTERIOR_POINTER);
    UNCHANGED(a, before, gpuarena_record_stream(a, x + 8, s), GPUARENA_ERR_INTERIOR_POINTER);
    UNCHANGED(a, before, gpuarena_free(a, &local, s), GPUARENA_ERR_INVALID_POINTER);
    UNCHANGED(a, before, gpuarena_free(a, (void *)0x10, s), GPUARENA_ERR_INVALID_POINTER);
    UNCHANGED(a, before, gpuarena_record_stream(a, &local, s), GPUARENA_ERR_INVALID_POINTER);
    UNCHANGED(a, before, gpuarena_alloc(a, SIZE_MAX, s, &q), GPUARENA_ERR_SIZE_OVERFLOW);
    ck_assert_ptr_eq(q, (void *)0x1234);
    fill_and_check(x, 4096, 0x42, s);
    OK(gpuarena_free(a, x, s));
    OK(ga_cuda_stream_sync(s));
    before = stats(a);
    UNCHANGED(a, before, gpuarena_free(a, x, s), GPUARENA_ERR_DOUBLE_FREE);
    UNCHANGED(a, before, gpuarena_free(a, x, NULL), GPUARENA_ERR_DOUBLE_FREE);
    UNCHANGED(a, before, gpuarena_record_stream(a, x, s), GPUARENA_ERR_DOUBLE_FREE);
    fill_and_check(z, MiB, 0x24, s);
    OK(gpuarena_free(a, z, s));
    check_arena(a);
    ck_assert_uint_eq(stats(a).live_blocks, 0);
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

/* Trim gives the pool's cached memory back to the device, whether the
 * pool is exportable (ipc, the default) or not; max_cached does at the
 * free. */
static void trim_case(const char *opts, void *s)
{
    gpuarena_t *a = pool_arena(opts);
    size_t before = settled_free();
    void *p[8];
    for (int i = 0; i < 8; i++) {
        OK(gpuarena_alloc(a, 64 * MiB, s, &p[i]));
        OK(ga_cuda_memset_d8_async(dptr(p[i]), 0xaa, 64 * MiB, s));
    }
    size_t during = device_free();
    ck_assert_msg(during + 512 * MiB <= before + 64 * MiB, "free %zu -> %zu MiB", before / MiB,
                  during / MiB);
    for (int i = 0; i < 8; i++)
        OK(gpuarena_free(a, p[i], s));
    OK(ga_cuda_stream_sync(s));
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_ge(st.reserved, 512 * MiB); /* release_threshold = max: all kept */
    ck_assert_uint_eq(st.cached, st.reserved);
    uint64_t full = st.reserved;
    /* Keep 128 MiB: the driver keeps at least that much. */
    OK(gpuarena_trim(a, 128 * MiB));
    st = stats(a);
    ck_assert_uint_ge(st.reserved, 128 * MiB);
    ck_assert_uint_le(st.reserved, full);
    uint64_t kept = st.reserved;
    OK(gpuarena_trim(a, 0));
    st = stats(a);
    ck_assert_msg(st.reserved < 64 * MiB, "reserved %llu bytes after trim(0)",
                  (unsigned long long)st.reserved);
    ck_assert_uint_eq(st.cached, st.reserved);
    ck_assert_uint_ge(st.trims, 2);
    ck_assert_uint_ge(st.reserved_peak, full);
    size_t after = device_free();
    for (int i = 0; i < 40 && after + 64 * MiB < before; i++) {
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
        after = device_free();
    }
    ck_assert_msg(after + 64 * MiB >= before, "free %zu -> %zu -> %zu MiB: not returned",
                  before / MiB, during / MiB, after / MiB);
    printf("check_driverpool: trim (%s): reserved %llu -> %llu -> %llu MiB, free %zu -> %zu -> "
           "%zu MiB\n",
           opts, (unsigned long long)(full / MiB), (unsigned long long)(kept / MiB),
           (unsigned long long)(st.reserved / MiB), before / MiB, during / MiB, after / MiB);
    check_arena(a);
    OK(gpuarena_destroy(a));
}

START_TEST(trim_lowers_reserved)
{
    void *s = stream_new(true);
    trim_case("pool=driver,release_threshold=max", s);
    trim_case("pool=driver,release_threshold=max,ipc=false", s);

    /* max_cached = 0: once a free has completed, the next free releases
     * its memory without a trim call.  The small block comes first, so
     * that the big one cannot share memory the pool mapped for it. */
    gpuarena_t *a = pool_arena("pool=driver,release_threshold=max,max_cached=0");
    void *big, *small;
    OK(gpuarena_alloc(a, 16 * MiB, s, &small));
    OK(gpuarena_alloc(a, 256 * MiB, s, &big));
    ck_assert_uint_ge(stats(a).reserved, 272 * MiB);
    OK(gpuarena_free(a, big, s));
    OK(ga_cuda_stream_sync(s)); /* the free is seen complete */
    OK(gpuarena_free(a, small, s));
    gpuarena_stats_t st = stats(a);
    ck_assert_msg(st.reserved < 128 * MiB, "reserved %llu bytes with max_cached = 0",
                  (unsigned long long)st.reserved);
    ck_assert_uint_ge(st.trims, 1);
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

/* zero = true: every block reads zeros, also one handed out again. */
START_TEST(zero_fill)
{
    gpuarena_t *a = pool_arena("pool=driver,zero=true");
    void *s = stream_new(true);
    void *p;
    for (int i = 0; i < 2; i++) {
        OK(gpuarena_alloc(a, MiB + 5, s, &p));
        unsigned char *buf = malloc(MiB + 5);
        ck_assert_ptr_nonnull(buf);
        memset(buf, 0xee, MiB + 5);
        OK(ga_cuda_memcpy_dtoh_async(buf, dptr(p), MiB + 5, s));
        OK(ga_cuda_stream_sync(s));
        size_t bad = first_not(buf, MiB + 5, 0);
        ck_assert_msg(bad == MiB + 5, "pass %d: byte %zu is %#x", i, bad, buf[bad]);
        free(buf);
        OK(ga_cuda_memset_d8_async(dptr(p), 0xff, MiB + 5, s));
        OK(gpuarena_free(a, p, s));
    }
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

/* A capturing stream is refused before anything changes, and the capture
 * stays intact. */
START_TEST(capture_is_refused)
{
    gpuarena_t *a = pool_arena("pool=driver");
    void *s = stream_new(true);
    void *x, *p = (void *)0x1234;
    OK(gpuarena_alloc(a, 4096, s, &x));
    OK(ga_cuda_stream_sync(s));
    gpuarena_stats_t before = stats(a);
    OK(ga_cuda_capture_begin(s));
    ck_assert_int_eq(gpuarena_alloc(a, 4096, s, &p), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_eq(p, (void *)0x1234);
    ck_assert_int_eq(gpuarena_free(a, x, s), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_eq(gpuarena_record_stream(a, x, s), GPUARENA_ERR_STREAM_CAPTURE);
    OK(ga_cuda_capture_end(s));
    gpuarena_stats_t after = stats(a);
    ck_assert(memcmp(&before, &after, sizeof after) == 0);
    OK(gpuarena_free(a, x, s));
    check_arena(a);
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

/* Out of memory: the device filled with 1 GiB blocks, then a request the
 * device cannot hold; the status, the message, the counters; after the
 * frees and a trim the same blocks fit again. */
START_TEST(out_of_memory)
{
    gpuarena_t *a = pool_arena("pool=driver");
    size_t total;
    OK(ga_cuda_device_total_mem(0, &total));
    size_t max = total / GiB + 8, n = 0;
    void **v = calloc(max, sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpuarena_status_t st = GPUARENA_SUCCESS;
    while (n < max && (st = gpuarena_alloc(a, GiB, NULL, &v[n])) == GPUARENA_SUCCESS)
        n++;
    ck_assert_msg(st == GPUARENA_ERR_OUT_OF_MEMORY, "after %zu GiB: %s: %s", n,
                  gpuarena_strerror(st), gpuarena_last_error());
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "out of memory allocating 1073741824 "
                                                        "bytes"));
    gpuarena_stats_t s = stats(a);
    ck_assert_uint_eq(s.oom_failures, 1);
    ck_assert_uint_eq(s.oom_retries, 1);
    ck_assert_uint_eq(s.last_oom_request, GiB);
    ck_assert_uint_eq(s.in_use, n * GiB);
    ck_assert_uint_eq(s.live_blocks, n);
    OK(gpuarena_stats_print(stdout, NULL));
    check_arena(a);
    for (size_t i = 0; i < n; i++)
        OK(gpuarena_free(a, v[i], NULL));
    OK(gpuarena_trim(a, 0));
    for (size_t i = 0; i < n; i++)
        OK(gpuarena_alloc(a, GiB, NULL, &v[i]));
    for (size_t i = 0; i < n; i++)
        OK(gpuarena_free(a, v[i], NULL));
    OK(gpuarena_trim(a, 0));

    /* More than the device has, at once. */
    void *p = (void *)0x1234;
    st = gpuarena_alloc(a, total + total / 2, NULL, &p);
    ck_assert_msg(st == GPUARENA_ERR_OUT_OF_MEMORY, "%zu bytes: %s: %s", total + total / 2,
                  gpuarena_strerror(st), gpuarena_last_error());
    ck_assert_ptr_eq(p, (void *)0x1234);
    s = stats(a);
    ck_assert_uint_eq(s.oom_failures, 2);
    ck_assert_uint_eq(s.last_oom_request, total + total / 2);
    ck_assert_uint_eq(s.live_blocks, 0);
    /* The arena still works. */
    OK(gpuarena_alloc(a, MiB, NULL, &p));
    fill_and_check(p, MiB, 0x5f, NULL);
    OK(gpuarena_free(a, p, NULL));
    check_arena(a);
    OK(ga_cuda_ctx_sync());
    OK(gpuarena_destroy(a));
    free(v);
    printf("check_driverpool: out of memory after %zu GiB of %zu GiB\n", n, total >> 30);
}
END_TEST

/* Key ipc: a block of the pool reaches another process.  The arena's pool
 * is exported as a POSIX file descriptor (cuMemPoolExportToShareableHandle)
 * and the block named in it (cuMemPoolExportPointer); a child started
 * afresh (this program, "--import-pool": CUDA does not survive fork)
 * inherits the descriptor, imports the pool and the block, reads the
 * parent's bytes and writes its own, which the parent then reads: one
 * memory, two processes.  With ipc = false the pool cannot be exported. */
static const char *self_path;

/* The child: --import-pool FD DATA EXPECT WRITE (DATA in hex). */
static int import_child(char **argv)
{
    int fd = atoi(argv[2]);
    unsigned char data[GA_CUDA_POOL_PTR_DATA];
    const char *hex = argv[3];
    if (strlen(hex) != 2 * sizeof data)
        return 2;
    for (size_t i = 0; i < sizeof data; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return 2;
        data[i] = (unsigned char)v;
    }
    unsigned char expect = (unsigned char)atoi(argv[4]), write = (unsigned char)atoi(argv[5]);
    void *pool = NULL;
    uint64_t ptr = 0;
    int rc = gpu_child_begin();
    if (rc)
        return rc;
    if (ga_cuda_pool_import(fd, data, &pool, &ptr) != GPUARENA_SUCCESS) {
        fprintf(stderr, "import: %s\n", gpuarena_last_error());
        return 3;
    }
    rc = gpu_child_read_write(ptr, expect, write);
    if (rc)
        return rc;
    /* The imported block is given up before the exporter frees it. */
    if (ga_cuda_mem_free_async(ptr, NULL) != GPUARENA_SUCCESS ||
        ga_cuda_ctx_sync() != GPUARENA_SUCCESS || ga_cuda_pool_destroy(pool) != GPUARENA_SUCCESS) {
        fprintf(stderr, "import: %s\n", gpuarena_last_error());
        return 7;
    }
    return 0;
}

START_TEST(blocks_reach_another_process)
{
    int fdok = 0;
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_POOL_POSIX_FD_SUPPORTED, &fdok));
    if (!fdok) {
        printf("check_driverpool: blocks_reach_another_process: device 0 cannot export pools "
               "as file descriptors: not tested\n");
        return;
    }
    gpuarena_t *a = pool_arena("pool=driver");
    void *p;
    OK(gpuarena_alloc(a, MiB, GPUARENA_STREAM_HOST, &p));
    OK(ga_cuda_memset_d8(dptr(p), 0x5a, MiB));
    OK(ga_cuda_ctx_sync());
    int fd = -1;
    unsigned char data[GA_CUDA_POOL_PTR_DATA];
    OK(ga_cuda_pool_export(dptr(p), &fd, data));
    char sfd[16], hex[2 * GA_CUDA_POOL_PTR_DATA + 1];
    snprintf(sfd, sizeof sfd, "%d", fd);
    for (size_t i = 0; i < sizeof data; i++)
        snprintf(hex + 2 * i, 3, "%02x", data[i]);
    char *argv[] = {(char *)self_path, "--import-pool", sfd, hex, "90", "165", NULL};
    gpu_spawn_self(argv, fd);
    gpu_expect_bytes(dptr(p), GPU_CHILD_BYTES, 165); /* what the other process wrote */
    OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
    check_arena(a);
    OK(gpuarena_destroy(a));

    a = pool_arena("pool=driver,ipc=false");
    OK(gpuarena_alloc(a, MiB, GPUARENA_STREAM_HOST, &p));
    ck_assert_int_ne(ga_cuda_pool_export(dptr(p), &fd, data), GPUARENA_SUCCESS);
    printf("check_driverpool: blocks_reach_another_process: with ipc = false: %s\n",
           gpuarena_last_error());
    OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
    OK(gpuarena_destroy(a));
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--import-pool") == 0)
        return import_child(argv);
    self_path = argv[0];
    if (!gpu_tests_begin("check_driverpool"))
        return 77;
    int ok = 0;
    if (ga_cuda_device_attr(0, GA_CUDA_ATTR_MEMORY_POOLS_SUPPORTED, &ok) != GPUARENA_SUCCESS ||
        !ok) {
        printf("check_driverpool: device 0 has no memory pools: skipped\n");
        return 77;
    }
    Suite *s = suite_create("driverpool");
    TCase *tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, gpu_setup, gpu_teardown);
    tcase_add_test(tc, alloc_write_read_free);
    tcase_add_test(tc, same_stream_reuse);
    tcase_add_test(tc, other_stream_not_early);
    tcase_add_test(tc, record_stream_waits);
    tcase_add_test(tc, record_stream_without_host_memory_holds);
    tcase_add_test(tc, bad_pointers_change_nothing);
    tcase_add_test(tc, trim_lowers_reserved);
    tcase_add_test(tc, zero_fill);
    tcase_add_test(tc, capture_is_refused);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, blocks_reach_another_process);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return gpu_tests_run(s);
}
