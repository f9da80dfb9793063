/*
 * check_pinned.c - the pinned arena on a real GPU: NUMA placement of every
 * page, data through async copies, and the reuse rule for host-visible
 * memory: a block freed on a stream whose async copy is still queued
 * behind slow work is not handed out again before the copy has finished;
 * and growable pinned segments (expandable = true: cuMemCreate on a host
 * NUMA node where the driver can, else the fixed ones, with the reason).
 * Exits 77 (skipped) where the driver or a GPU is missing.
 *
 * Slow work without a kernel: many large cuMemsetD8Async on a big device
 * buffer, queued ahead of the copy on the same stream.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"

#include "gputest.h"
#include "memline.h"

#include <check.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static gpuarena_t *pinned_arena(const char *options)
{
    gpuarena_t *a = NULL;
    OK(gpuarena_create(GPUARENA_PINNED, 0, options, &a));
    return a;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Queue about SECONDS of work on STREAM: 1 GiB memsets of BIG, timed once
 * to know how many. */
static size_t slow_work(uint64_t big, size_t big_size, void *stream, double seconds)
{
    double t0 = now();
    for (int i = 0; i < 4; i++)
        OK(ga_cuda_memset_d8_async(big, (unsigned char)i, big_size, stream));
    OK(ga_cuda_stream_sync(stream));
    double one = (now() - t0) / 4;
    size_t n = one > 0 ? (size_t)(seconds / one) : 1000;
    if (n < 16)
        n = 16;
    if (n > 20000)
        n = 20000;
    for (size_t i = 0; i < n; i++)
        OK(ga_cuda_memset_d8_async(big, (unsigned char)i, big_size, stream));
    return n;
}

static void check_bytes(const unsigned char *p, size_t n, unsigned char want, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != want)
            ck_abort_msg("%s: byte %zu is %#x, want %#x", what, i, p[i], want);
}

/* ---------------------------------------------------------------------- */

START_TEST(placement_every_page)
{
    hwloc_topology_t topo;
    ck_assert_int_eq(hwloc_topology_init(&topo), 0);
    ck_assert_int_eq(hwloc_topology_load(topo), 0);
    hwloc_const_nodeset_t all = hwloc_topology_get_topology_nodeset(topo);
    int first = hwloc_bitmap_first(all);
    char opt[64];
    snprintf(opt, sizeof opt, "numa=%d", first);
    const char *const options[] = {NULL, opt, "numa=interleave"};
    for (int k = 0; k < 3; k++) {
        gpuarena_t *a = pinned_arena(options[k]);
        void *p;
        size_t size = 24 * MiB + 4096;
        OK(gpuarena_alloc(a, size, NULL, &p));
        gpuarena_stats_t st;
        OK(gpuarena_stats(a, &st));
        printf("check_pinned: numa=%s: nodes %#llx%s\n", options[k] ? options[k] + 5 : "(default)",
               (unsigned long long)st.numa_nodes,
               st.numa_fallbacks ? " (locality unknown: interleaved)" : "");
        ck_assert_uint_ne(st.numa_nodes, 0);
        memset(p, 0x5a, size);
        long page = sysconf(_SC_PAGESIZE);
        hwloc_nodeset_t where = hwloc_bitmap_alloc();
        size_t bad = 0, pages = 0, unknown = 0;
        char *c = p;
        for (size_t off = 0; off < size; off += (size_t)page, pages++) {
            if (hwloc_get_area_memlocation(topo, c + off, 1, where, HWLOC_MEMBIND_BYNODESET) != 0 ||
                hwloc_bitmap_iszero(where)) {
                unknown++;
                continue;
            }
            int node = hwloc_bitmap_first(where);
            if (node < 0 || node >= 64 || !(st.numa_nodes >> node & 1)) {
                if (bad++ < 4)
                    printf("check_pinned: page at +%zu is on node %d\n", off, node);
            }
        }
        hwloc_bitmap_free(where);
        if (unknown == pages)
            printf("check_pinned: hwloc_get_area_memlocation cannot tell here: placement not "
                   "checked\n");
        ck_assert_msg(bad == 0, "%zu of %zu pages off the nodes %#llx", bad, pages,
                      (unsigned long long)st.numa_nodes);
        OK(gpuarena_free(a, p, NULL));
        OK(gpuarena_destroy(a));
    }
    hwloc_topology_destroy(topo);
}
END_TEST

START_TEST(copies_both_ways)
{
    gpuarena_t *a = pinned_arena(NULL);
    void *s;
    OK(ga_cuda_stream_create(true, &s));
    size_t size = 16 * MiB;
    unsigned char *h;
    OK(gpuarena_alloc(a, size, s, (void **)&h));
    uint64_t d;
    OK(ga_cuda_mem_alloc(size, &d));
    memset(h, 0x42, size);
    OK(ga_cuda_memcpy_htod_async(d, h, size, s));
    OK(ga_cuda_memset_d8_async(d + size / 2, 0x24, size / 2, s));
    OK(ga_cuda_stream_sync(s));
    memset(h, 0, size); /* only after the copy has read it */
    OK(ga_cuda_memcpy_dtoh_async(h, d, size, s));
    OK(ga_cuda_stream_sync(s));
    check_bytes(h, size / 2, 0x42, "first half back from the GPU");
    check_bytes(h + size / 2, size / 2, 0x24, "second half back from the GPU");
    OK(gpuarena_free(a, h, s));
    OK(ga_cuda_mem_free(d));
    OK(gpuarena_check(a));
    OK(ga_cuda_stream_destroy(s));
    OK(gpuarena_destroy(a));
}
END_TEST

/* The heart of the pinned rules.  For each way of asking again (the same
 * stream, another stream, the legacy stream), a block P whose async H2D
 * copy is queued behind slow work is freed on the copy's stream; the next
 * allocations must not overlap P while the copy is pending.  They are
 * filled with another pattern at once; the copy's destination must hold
 * P's pattern only. */
START_TEST(freed_block_waits_for_its_copy)
{
    size_t big_size = 1024 * MiB, size = 8 * MiB;
    uint64_t big, dst;
    OK(ga_cuda_mem_alloc(big_size, &big));
    OK(ga_cuda_mem_alloc(size, &dst));
    void *s, *s2;
    OK(ga_cuda_stream_create(true, &s));
    OK(ga_cuda_stream_create(true, &s2));
    void *const again[] = {s, s2, NULL};
    const char *const names[] = {"the same stream", "another stream", "the legacy stream"};
    for (int k = 0; k < 3; k++) {
        gpuarena_t *a = pinned_arena(k == 2 ? "cross_stream=wait" : NULL);
        unsigned char *p;
        OK(gpuarena_alloc(a, size, s, (void **)&p));
        memset(p, 0xa1, size);
        size_t n = slow_work(big, big_size, s, 0.5);
        OK(ga_cuda_memcpy_htod_async(dst, p, size, s));
        OK(gpuarena_free(a, p, s));
        bool busy = ga_cuda_stream_query(s) == GA_CUDA_NOT_READY;
        unsigned char *q[4];
        for (int i = 0; i < 4; i++) {
            OK(gpuarena_alloc(a, size, again[k], (void **)&q[i]));
            ck_assert_msg(q[i] + size <= p || q[i] >= p + size,
                          "%s got block %p overlapping the freed %p while its copy was %s",
                          names[k], (void *)q[i], (void *)p, busy ? "pending" : "done");
            memset(q[i], 0x5b, size);
        }
        bool still = ga_cuda_stream_query(s) == GA_CUDA_NOT_READY;
        printf("check_pinned: %s: %zu memsets queued, stream busy at free: %s, after the "
               "allocations: %s\n",
               names[k], n, busy ? "yes" : "NO", still ? "yes" : "NO");
        if (!still)
            printf("check_pinned: warning: the slow work finished too early to prove the rule\n");
        gpuarena_stats_t st;
        OK(gpuarena_stats(a, &st));
        ck_assert_uint_ge(st.events_recorded, 1);
        OK(ga_cuda_stream_sync(s));
        unsigned char *back = malloc(size);
        ck_assert_ptr_nonnull(back);
        OK(ga_cuda_memcpy_dtoh(back, dst, size));
        check_bytes(back, size, 0xa1, "the copy's destination");
        free(back);
        for (int i = 0; i < 4; i++)
            OK(gpuarena_free(a, q[i], again[k]));
        OK(ga_cuda_stream_sync(NULL));
        OK(ga_cuda_stream_sync(s2));
        /* Everything is complete: trim unpins every segment. */
        OK(gpuarena_trim(a, 0));
        OK(gpuarena_check(a));
        OK(gpuarena_destroy(a));
    }
    OK(ga_cuda_mem_free(big));
    OK(ga_cuda_mem_free(dst));
    OK(ga_cuda_stream_destroy(s));
    OK(ga_cuda_stream_destroy(s2));
}
END_TEST

/* The same through record_stream: the copy runs on S2, the block was
 * allocated and is freed on S (idle). */
START_TEST(record_stream_holds_the_block)
{
    size_t big_size = 1024 * MiB, size = 4 * MiB;
    uint64_t big, dst;
    OK(ga_cuda_mem_alloc(big_size, &big));
    OK(ga_cuda_mem_alloc(size, &dst));
    void *s, *s2;
    OK(ga_cuda_stream_create(true, &s));
    OK(ga_cuda_stream_create(true, &s2));
    gpuarena_t *a = pinned_arena(NULL);
    unsigned char *p;
    OK(gpuarena_alloc(a, size, s, (void **)&p));
    memset(p, 0xc3, size);
    slow_work(big, big_size, s2, 0.5);
    OK(ga_cuda_memcpy_htod_async(dst, p, size, s2));
    OK(gpuarena_record_stream(a, p, s2));
    OK(gpuarena_free(a, p, s));
    unsigned char *q[4];
    for (int i = 0; i < 4; i++) {
        OK(gpuarena_alloc(a, size, s, (void **)&q[i]));
        ck_assert_msg(q[i] + size <= p || q[i] >= p + size,
                      "block %p overlaps %p, still read by a copy on a recorded stream",
                      (void *)q[i], (void *)p);
        memset(q[i], 0x3c, size);
    }
    OK(ga_cuda_stream_sync(s2));
    unsigned char *back = malloc(size);
    ck_assert_ptr_nonnull(back);
    OK(ga_cuda_memcpy_dtoh(back, dst, size));
    check_bytes(back, size, 0xc3, "the recorded stream's copy");
    free(back);
    for (int i = 0; i < 4; i++)
        OK(gpuarena_free(a, q[i], s));
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_mem_free(big));
    OK(ga_cuda_mem_free(dst));
    OK(ga_cuda_stream_destroy(s));
    OK(ga_cuda_stream_destroy(s2));
}
END_TEST

/* With the GPU idle, a block comes back at once: the cache works. */
START_TEST(cache_reuses_when_idle)
{
    gpuarena_t *a = pinned_arena(NULL);
    void *p, *q;
    OK(gpuarena_alloc(a, MiB, NULL, &p));
    OK(gpuarena_free(a, p, NULL));
    OK(ga_cuda_stream_sync(NULL));
    OK(gpuarena_alloc(a, MiB, NULL, &q));
    ck_assert_ptr_eq(p, q);
    OK(gpuarena_free(a, q, NULL));
    gpuarena_stats_t st;
    OK(gpuarena_stats(a, &st));
    ck_assert_uint_eq(st.provider_maps, 1);
    ck_assert_uint_ge(st.cache_hits, 1);
    OK(gpuarena_destroy(a));
}
END_TEST

START_TEST(bad_input)
{
    gpuarena_t *a = pinned_arena(NULL), *b;
    void *p;
    OK(gpuarena_alloc(a, 4096, NULL, &p));
    char local[64];
    ck_assert_int_eq(gpuarena_free(a, local, NULL), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_int_eq(gpuarena_free(a, (char *)p + 8, NULL), GPUARENA_ERR_INTERIOR_POINTER);
    ck_assert_int_eq(gpuarena_prefetch(a, p, 0, 0, NULL), GPUARENA_ERR_NOT_SUPPORTED);
    ck_assert_int_eq(gpuarena_alloc(a, SIZE_MAX / 2, NULL, &p), GPUARENA_ERR_SIZE_OVERFLOW);
    gpuarena_stats_t st;
    OK(gpuarena_stats(a, &st));
    ck_assert_uint_eq(st.live_blocks, 1);
    OK(gpuarena_free(a, p, NULL));
    ck_assert_int_eq(gpuarena_free(a, p, NULL), GPUARENA_ERR_DOUBLE_FREE);
    /* A capturing stream is refused; the capture survives. */
    void *s;
    OK(ga_cuda_stream_create(true, &s));
    OK(ga_cuda_capture_begin(s));
    ck_assert_int_eq(gpuarena_alloc(a, 4096, s, &p), GPUARENA_ERR_STREAM_CAPTURE);
    OK(ga_cuda_capture_end(s));
    OK(ga_cuda_stream_destroy(s));
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    /* A node that does not exist is a config error naming the key. */
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 0, "numa=63", &b), GPUARENA_ERR_CONFIG);
    ck_assert_msg(strstr(gpuarena_last_error(), "numa") != NULL, "message: %s",
                  gpuarena_last_error());
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 63, NULL, &b), GPUARENA_ERR_INVALID_DEVICE);
}
END_TEST

/* The memory line of the newest pinned arena (memline.h). */
static void memory_line(char *line, size_t size)
{
    ga_memory_line("pinned", line, size);
}

/* Growable pinned segments (expandable = true): through cuMemCreate on a
 * host NUMA node where the driver can, else the fixed segments with the
 * reason in the statistics.  Either way the data must make the round trip
 * and trim must give everything back. */
START_TEST(expandable_pinned)
{
    char how[512];
    gpuarena_t *a = pinned_arena(NULL);
    memory_line(how, sizeof how);
    printf("check_pinned: default: %s\n", how);
    ck_assert_msg(strstr(how, "cuMemHostRegister") && strstr(how, "expandable = false"),
                  "the default pinned arena is not fixed: %s", how);
    OK(gpuarena_destroy(a));

    a = pinned_arena("expandable=true");
    memory_line(how, sizeof how);
    bool vmm = strstr(how, "cuMemCreate on host NUMA node") != NULL;
    int sup = 0, numa_id = -1;
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_HOST_NUMA_VMM_SUPPORTED, &sup));
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_HOST_NUMA_ID, &numa_id));
    printf("check_pinned: expandable=true: %s (HOST_NUMA VMM attribute %d, GPU's node %d)\n", how,
           sup, numa_id);
    if (!vmm) {
        ck_assert_msg(strstr(how, "cuMemHostRegister") && strstr(how, "(expandable: "),
                      "fallback without a reason: %s", how);
        printf("check_pinned: growable pinned path NOT active here; checking the fallback\n");
    }
    gpuarena_stats_t st;
    void *s;
    OK(ga_cuda_stream_create(true, &s));
    /* Blocks of both classes, past several 2 MiB granules in all. */
    const size_t sizes[] = {4096, 512 * 1024, MiB + 4096, 3 * MiB, 5 * MiB + 12345, 9 * MiB};
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *h[N];
    size_t total = 0, biggest = 0;
    for (int i = 0; i < N; i++) {
        OK(gpuarena_alloc(a, sizes[i], s, (void **)&h[i]));
        total += sizes[i];
        biggest = sizes[i] > biggest ? sizes[i] : biggest;
    }
    OK(gpuarena_stats(a, &st));
    ck_assert_uint_ge(st.reserved, total);
    ck_assert_uint_gt(st.reserved, 2 * MiB);
    printf("check_pinned: expandable=true: %zu bytes in %d blocks, reserved %llu, segments %llu, "
           "provider maps %llu\n",
           total, N, (unsigned long long)st.reserved, (unsigned long long)st.segments,
           (unsigned long long)st.provider_maps);
    uint64_t d;
    OK(ga_cuda_mem_alloc(biggest, &d));
    for (int i = 0; i < N; i++) {
        size_t n = sizes[i];
        unsigned char pat = (unsigned char)(0x11 * (i + 1));
        memset(h[i], pat, n); /* the host writes */
        OK(ga_cuda_memcpy_htod_async(d, h[i], n, s));
        OK(ga_cuda_memset_d8_async(d + n / 2, 0xe7, n - n / 2, s));
        OK(ga_cuda_stream_sync(s));
        memset(h[i], 0, n);
        OK(ga_cuda_memcpy_dtoh_async(h[i], d, n, s));
        OK(ga_cuda_stream_sync(s));
        check_bytes(h[i], n / 2, pat, "first half back from the GPU");
        check_bytes(h[i] + n / 2, n - n / 2, 0xe7, "second half back from the GPU");
    }
    OK(ga_cuda_mem_free(d));
    /* Where the pages are (the placement's node), when hwloc can tell. */
    OK(gpuarena_stats(a, &st));
    hwloc_topology_t topo;
    ck_assert_int_eq(hwloc_topology_init(&topo), 0);
    ck_assert_int_eq(hwloc_topology_load(topo), 0);
    hwloc_nodeset_t where = hwloc_bitmap_alloc();
    size_t pages = 0, unknown = 0, bad = 0;
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < sizes[N - 1]; off += (size_t)page, pages++) {
        if (hwloc_get_area_memlocation(topo, h[N - 1] + off, 1, where, HWLOC_MEMBIND_BYNODESET) !=
                0 ||
            hwloc_bitmap_iszero(where)) {
            unknown++;
            continue;
        }
        int node = hwloc_bitmap_first(where);
        if ((node < 0 || node >= 64 || !(st.numa_nodes >> node & 1)) && bad++ < 4)
            printf("check_pinned: expandable=true: page at +%zu is on node %d\n", off, node);
    }
    hwloc_bitmap_free(where);
    hwloc_topology_destroy(topo);
    printf("check_pinned: expandable=true: nodes %#llx, %zu of %zu pages unknown to hwloc\n",
           (unsigned long long)st.numa_nodes, unknown, pages);
    ck_assert_msg(bad == 0, "%zu of %zu pages off the nodes %#llx", bad, pages,
                  (unsigned long long)st.numa_nodes);
    for (int i = 0; i < N; i++)
        OK(gpuarena_free(a, h[i], s));
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_check(a));
    /* Everything is free and complete: trim gives every granule back. */
    OK(gpuarena_trim(a, 0));
    OK(gpuarena_stats(a, &st));
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.in_use, 0);
    /* And it grows again after the trim. */
    void *p;
    OK(gpuarena_alloc(a, 6 * MiB, s, &p));
    memset(p, 0x77, 6 * MiB);
    check_bytes(p, 6 * MiB, 0x77, "a block after the trim");
    OK(gpuarena_free(a, p, s));
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_check(a));
    OK(ga_cuda_stream_destroy(s));
    OK(gpuarena_destroy(a));
}
END_TEST

START_TEST(default_arena_per_gpu)
{
    gpuarena_t *a, *a2;
    OK(gpuarena_get(GPUARENA_PINNED, 0, &a));
    OK(gpuarena_get(GPUARENA_PINNED, 0, &a2));
    ck_assert_ptr_eq(a, a2);
    gpuarena_kind_t k = GPUARENA_DEVICE;
    int dev = -1;
    OK(gpuarena_kind(a, &k, &dev));
    ck_assert_int_eq(k, GPUARENA_PINNED);
    ck_assert_int_eq(dev, 0);
    void *p;
    OK(gpuarena_alloc(a, 100, NULL, &p));
    OK(gpuarena_free(a, p, NULL));
}
END_TEST

/* Growable pinned segments on a machine of two GPUs or more: memory made
 * with cuMemCreate is mapped only for the GPUs it is opened to, where
 * registered memory (the fixed segments: portable, device-mapped) is
 * every GPU's, so the arena opens its granules to every GPU: the driver
 * says GPU 1 may read and write a block of GPU 0's pinned arena
 * (cuMemGetAccess), and GPU 1 copies it into its own memory and back in
 * its own context.  (The copies alone worked on two H200s with the
 * granules opened to GPU 0 only; direct access by GPU 1's kernels is what
 * the opening gives.) */
START_TEST(growable_pinned_on_every_gpu)
{
    if (!gpus_at_least(2, "check_pinned: growable pinned memory on two GPUs"))
        return;
    int n = 0;
    OK(ga_cuda_device_count(&n));
    gpuarena_t *a = pinned_arena("expandable=true");
    char how[512];
    memory_line(how, sizeof how);
    if (!strstr(how, "cuMemCreate on host NUMA node")) {
        printf("check_pinned: growable pinned path not active here (%s): not tested\n", how);
        OK(gpuarena_destroy(a));
        return;
    }
    char want[64];
    snprintf(want, sizeof want, "opened to all %d GPUs", n);
    ck_assert_msg(strstr(how, want), "memory line: %s", how);
    unsigned char *p;
    OK(gpuarena_alloc(a, 4 * MiB, GPUARENA_STREAM_HOST, (void **)&p));
    memset(p, 0x3c, 4 * MiB);
    bool rw = false;
    OK(ga_cuda_vmm_access((uint64_t)(uintptr_t)p, 1, &rw));
    ck_assert_msg(rw, "GPU 1 may not read and write GPU 0's growable pinned block");
    void *ctx1;
    OK(ga_cuda_primary_retain(1, &ctx1));
    OK(ga_cuda_set_current(ctx1));
    uint64_t d1;
    OK(ga_cuda_mem_alloc(4 * MiB, &d1));
    OK(ga_cuda_memcpy_dtod(d1, (uint64_t)(uintptr_t)p, 4 * MiB));
    OK(ga_cuda_memset_d8(d1, 0xc3, 2 * MiB));
    OK(ga_cuda_memcpy_dtod((uint64_t)(uintptr_t)p, d1, 4 * MiB));
    OK(ga_cuda_ctx_sync());
    OK(ga_cuda_mem_free(d1));
    OK(ga_cuda_set_current(gpu_ctx));
    ga_cuda_primary_release(1);
    check_bytes(p, 2 * MiB, 0xc3, "written by GPU 1");
    check_bytes(p + 2 * MiB, 2 * MiB, 0x3c, "the round trip through GPU 1");
    OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
    OK(gpuarena_destroy(a));
}
END_TEST

int main(void)
{
    if (!gpu_tests_begin("check_pinned"))
        return 77;
    Suite *s = suite_create("pinned");
    TCase *tc = tcase_create("pinned");
    tcase_add_checked_fixture(tc, gpu_setup, gpu_teardown);
    tcase_add_test(tc, placement_every_page);
    tcase_add_test(tc, copies_both_ways);
    tcase_add_test(tc, freed_block_waits_for_its_copy);
    tcase_add_test(tc, record_stream_holds_the_block);
    tcase_add_test(tc, cache_reuses_when_idle);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, expandable_pinned);
    tcase_add_test(tc, default_arena_per_gpu);
    tcase_add_test(tc, growable_pinned_on_every_gpu);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return gpu_tests_run(s);
}
