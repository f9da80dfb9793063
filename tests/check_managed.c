/*
 * check_managed.c - the managed arena on a real GPU: advice read back with
 * cuMemRangeGetAttribute, prefetch on alloc and on request
 * (LAST_PREFETCH_LOCATION), data written by the host read by the GPU and
 * back, the oversubscription guard.  Exits 77 (skipped) where the driver
 * or a GPU is missing.
 *
 * Never asks for more managed memory than the GPU has free: blocks are a
 * few MiB; the guard is triggered by a headroom larger than the device,
 * not by a large allocation.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"

#include "gputest.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static int concurrent; /* CONCURRENT_MANAGED_ACCESS of device 0 */

static gpuarena_t *managed_arena(const char *options)
{
    gpuarena_t *a = NULL;
    OK(gpuarena_create(GPUARENA_MANAGED, 0, options, &a));
    return a;
}

static int range_attr(void *p, size_t size, ga_cuda_range_attr_t attr)
{
    int v = -99;
    OK(ga_cuda_mem_range_attr((uint64_t)(uintptr_t)p, size, attr, &v, 1));
    return v;
}

static gpuarena_stats_t stats(gpuarena_t *a)
{
    gpuarena_stats_t st;
    OK(gpuarena_stats(a, &st));
    return st;
}

static void print_stats(const char *what, gpuarena_t *a)
{
    gpuarena_stats_t st = stats(a);
    printf("check_managed: %s: advice applied %llu skipped %llu, prefetches %llu skipped %llu\n",
           what, (unsigned long long)st.advice_applied, (unsigned long long)st.advice_skipped,
           (unsigned long long)st.prefetches, (unsigned long long)st.prefetches_skipped);
}

/* ---------------------------------------------------------------------- */

START_TEST(advice_read_back)
{
    gpuarena_t *a =
        managed_arena("advise_preferred=device,advise_accessed_by=device,cpu,read_mostly=true");
    void *p;
    size_t size = 8 * MiB;
    OK(gpuarena_alloc(a, size, NULL, &p));
    print_stats("device/device,cpu/read-mostly", a);
    gpuarena_stats_t st = stats(a);
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_READ_MOSTLY), 1);
    int acc[8];
    OK(ga_cuda_mem_range_attr((uint64_t)(uintptr_t)p, size, GA_CUDA_RANGE_ACCESSED_BY, acc, 8));
    bool dev = false, cpu = false;
    for (int i = 0; i < 8; i++) {
        dev |= acc[i] == 0;
        cpu |= acc[i] == -1;
    }
    ck_assert_msg(dev, "accessed-by lacks device 0 (%d %d %d)", acc[0], acc[1], acc[2]);
    if (concurrent) {
        ck_assert_msg(cpu, "accessed-by lacks the CPU (%d %d %d)", acc[0], acc[1], acc[2]);
        ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_PREFERRED_TYPE), GA_CUDA_LOCTYPE_DEVICE);
        ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_PREFERRED_ID), 0);
        ck_assert_uint_eq(st.advice_skipped, 0);
        ck_assert_uint_eq(st.advice_applied, 4);
    } else {
        ck_assert_uint_eq(st.advice_skipped, 2); /* preferred device, CPU accessed-by */
    }
    OK(gpuarena_free(a, p, NULL));
    OK(gpuarena_destroy(a));

    a = managed_arena("advise_preferred=cpu");
    OK(gpuarena_alloc(a, size, NULL, &p));
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_PREFERRED_TYPE), GA_CUDA_LOCTYPE_HOST);
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_READ_MOSTLY), 0);
    OK(gpuarena_free(a, p, NULL));
    OK(gpuarena_destroy(a));

    /* A host NUMA node: applied, or skipped and counted, never an error. */
    a = managed_arena("advise_preferred=node:0");
    OK(gpuarena_alloc(a, size, NULL, &p));
    print_stats("node:0", a);
    st = stats(a);
    int type = range_attr(p, size, GA_CUDA_RANGE_PREFERRED_TYPE);
    if (st.advice_applied) {
        ck_assert_int_eq(type, GA_CUDA_LOCTYPE_HOST_NUMA);
        ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_PREFERRED_ID), 0);
    } else {
        ck_assert_uint_eq(st.advice_skipped, 1);
    }
    OK(gpuarena_free(a, p, NULL));
    OK(gpuarena_destroy(a));
}
END_TEST

START_TEST(prefetch_on_alloc_and_on_request)
{
    if (!concurrent) {
        printf("check_managed: no concurrent managed access: prefetches are skipped\n");
        gpuarena_t *a = managed_arena("prefetch=on-alloc");
        void *p;
        OK(gpuarena_alloc(a, MiB, NULL, &p));
        ck_assert_uint_ge(stats(a).prefetches_skipped, 1);
        OK(gpuarena_free(a, p, NULL));
        OK(gpuarena_destroy(a));
        return;
    }
    void *s = NULL;
    OK(ga_cuda_stream_create(true, &s));
    /* Small pieces: 64 MiB in 2 MiB prefetches. */
    gpuarena_t *a = managed_arena("prefetch=on-alloc,prefetch_chunk=2M");
    size_t size = 64 * MiB;
    void *p;
    OK(gpuarena_alloc(a, size, s, &p));
    OK(ga_cuda_stream_sync(s));
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_LAST_PREFETCH_TYPE), GA_CUDA_LOCTYPE_DEVICE);
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_LAST_PREFETCH_ID), 0);
    ck_assert_uint_eq(stats(a).prefetches, 1);
    /* To the CPU and back, on the stream. */
    OK(gpuarena_prefetch(a, p, 0, GPUARENA_CPU, s));
    OK(ga_cuda_stream_sync(s));
    ck_assert_int_eq(range_attr(p, size, GA_CUDA_RANGE_LAST_PREFETCH_TYPE), GA_CUDA_LOCTYPE_HOST);
    OK(gpuarena_prefetch(a, p, size / 2, 0, s));
    OK(ga_cuda_stream_sync(s));
    ck_assert_int_eq(range_attr(p, size / 2, GA_CUDA_RANGE_LAST_PREFETCH_TYPE),
                     GA_CUDA_LOCTYPE_DEVICE);
    ck_assert_uint_eq(stats(a).prefetches, 3);
    ck_assert_uint_eq(stats(a).prefetches_skipped, 0);
    print_stats("prefetch", a);
    /* Bad destinations and a capturing stream change nothing. */
    ck_assert_int_eq(gpuarena_prefetch(a, p, 0, 4096, s), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_int_eq(gpuarena_prefetch(a, p, size + 1, 0, s), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_prefetch(a, (char *)p + 64, 0, 0, s), GPUARENA_ERR_INTERIOR_POINTER);
    OK(ga_cuda_capture_begin(s));
    ck_assert_int_eq(gpuarena_prefetch(a, p, 0, 0, s), GPUARENA_ERR_STREAM_CAPTURE);
    OK(ga_cuda_capture_end(s));
    ck_assert_uint_eq(stats(a).prefetches, 3);
    OK(gpuarena_free(a, p, s));
    OK(ga_cuda_stream_sync(s));
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    OK(ga_cuda_stream_destroy(s));
}
END_TEST

START_TEST(host_and_gpu_see_the_same_data)
{
    gpuarena_t *a = managed_arena("prefetch=on-alloc");
    size_t size = 16 * MiB;
    unsigned char *p;
    OK(gpuarena_alloc(a, size, NULL, (void **)&p));
    OK(ga_cuda_stream_sync(NULL));
    for (size_t i = 0; i < size; i++)
        p[i] = (unsigned char)(i * 7 + 3);
    uint64_t d = 0;
    OK(ga_cuda_mem_alloc(size, &d));
    OK(ga_cuda_memcpy_dtod(d, (uint64_t)(uintptr_t)p, size)); /* the GPU reads it */
    unsigned char *back = malloc(size);
    ck_assert_ptr_nonnull(back);
    OK(ga_cuda_memcpy_dtoh(back, d, size));
    for (size_t i = 0; i < size; i++)
        if (back[i] != (unsigned char)(i * 7 + 3))
            ck_abort_msg("byte %zu read by the GPU: %#x, want %#x", i, back[i],
                         (unsigned char)(i * 7 + 3));
    /* The GPU writes, the host reads. */
    OK(ga_cuda_memset_d8_async((uint64_t)(uintptr_t)p + size / 2, 0x77, size / 2, NULL));
    OK(ga_cuda_stream_sync(NULL));
    for (size_t i = size / 2; i < size; i++)
        if (p[i] != 0x77)
            ck_abort_msg("byte %zu read by the host: %#x, want 0x77", i, p[i]);
    ck_assert_uint_eq(p[0], 3);
    free(back);
    OK(ga_cuda_mem_free(d));
    OK(gpuarena_free(a, p, NULL));
    OK(gpuarena_destroy(a));
}
END_TEST

/* The guard: a headroom larger than the device makes every prefetch to
 * it too large; they are skipped and counted, and succeed. */
START_TEST(guard_skips_and_counts)
{
    size_t total;
    OK(ga_cuda_device_total_mem(0, &total));
    char opt[128];
    snprintf(opt, sizeof opt, "prefetch=on-alloc,prefetch_headroom=%zuM", total / MiB + 1024);
    gpuarena_t *a = managed_arena(opt);
    void *p;
    OK(gpuarena_alloc(a, 4 * MiB, NULL, &p));
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.prefetches, 0);
    ck_assert_uint_eq(st.prefetches_skipped, 1);
    OK(gpuarena_prefetch(a, p, 0, 0, NULL));
    st = stats(a);
    ck_assert_uint_eq(st.prefetches, 0);
    ck_assert_uint_eq(st.prefetches_skipped, 2);
    int type = range_attr(p, 4 * MiB, GA_CUDA_RANGE_LAST_PREFETCH_TYPE);
    ck_assert_int_ne(type, GA_CUDA_LOCTYPE_DEVICE);
    print_stats("guard", a);
    OK(gpuarena_free(a, p, NULL));
    OK(gpuarena_destroy(a));
    /* The same with the default headroom: issued. */
    if (concurrent) {
        a = managed_arena("prefetch=on-alloc");
        OK(gpuarena_alloc(a, 4 * MiB, NULL, &p));
        ck_assert_uint_eq(stats(a).prefetches, 1);
        OK(gpuarena_free(a, p, NULL));
        OK(gpuarena_destroy(a));
    }
}
END_TEST

/* MemFree and MemAvailable of /proc/meminfo, bytes (0 when unknown). */
static void host_memory(size_t *free_b, size_t *avail)
{
    *free_b = *avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return;
    char line[128];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemFree: %llu kB", &kb) == 1)
            *free_b = (size_t)kb * 1024;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            *avail = (size_t)kb * 1024;
    }
    fclose(f);
}

/* The guard of a prefetch to the CPU counts the host's available memory
 * (page cache included), not only its free pages: with a headroom between
 * the two, a small prefetch to the CPU is issued.  Needs 1 GiB of
 * reclaimable page cache: made by writing a file when there is less. */
START_TEST(cpu_guard_counts_page_cache)
{
    if (!concurrent) {
        printf("check_managed: no concurrent managed access: CPU guard not tested\n");
        return;
    }
    size_t free_b, avail;
    host_memory(&free_b, &avail);
    char path[] = "check_managed-cache-XXXXXX";
    int fd = -1;
    if (avail < free_b + 1024 * MiB && avail > 3072 * MiB) {
        /* Page cache: 1.5 GiB written to a file (dirty or clean, it is
         * reclaimable and counted in MemAvailable). */
        fd = mkstemp(path);
        ck_assert_msg(fd >= 0, "mkstemp");
        unlink(path); /* gone even if an assertion fails; its pages stay while it is open */
        static char buf[1 << 20];
        memset(buf, 0x5a, sizeof buf);
        for (int i = 0; i < 1536; i++)
            ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
        host_memory(&free_b, &avail);
    }
    if (avail < free_b + 768 * MiB) {
        printf("check_managed: MemFree %zu MiB, MemAvailable %zu MiB: too little page cache to "
               "test the CPU guard\n",
               free_b / MiB, avail / MiB);
    } else {
        /* Headroom halfway between the two, less the block: room for the
         * block by MemAvailable, none by MemFree. */
        size_t block = 4 * MiB, headroom = free_b + (avail - free_b) / 2 - block;
        char opt[128];
        snprintf(opt, sizeof opt, "prefetch_headroom=%zuK", headroom / 1024);
        printf("check_managed: MemFree %zu MiB, MemAvailable %zu MiB, headroom %zu MiB\n",
               free_b / MiB, avail / MiB, headroom / MiB);
        gpuarena_t *a = managed_arena(opt);
        void *p;
        OK(gpuarena_alloc(a, block, NULL, &p));
        OK(gpuarena_prefetch(a, p, 0, GPUARENA_CPU, NULL));
        OK(ga_cuda_stream_sync(NULL));
        gpuarena_stats_t st = stats(a);
        ck_assert_uint_eq(st.prefetches_skipped, 0);
        ck_assert_uint_eq(st.prefetches, 1);
        ck_assert_int_eq(range_attr(p, block, GA_CUDA_RANGE_LAST_PREFETCH_TYPE),
                         GA_CUDA_LOCTYPE_HOST);
        OK(gpuarena_free(a, p, NULL));
        OK(gpuarena_destroy(a));
    }
    if (fd >= 0)
        close(fd);
}
END_TEST

START_TEST(segments_come_and_go)
{
    gpuarena_t *a = managed_arena("advise_preferred=cpu");
    void *p[4];
    for (int i = 0; i < 4; i++)
        OK(gpuarena_alloc(a, 30 * MiB, NULL, &p[i]));
    for (int i = 0; i < 4; i++)
        OK(gpuarena_free(a, p[i], NULL));
    OK(gpuarena_trim(a, 0));
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.provider_maps, st.provider_unmaps);
    ck_assert_uint_eq(st.advice_applied, st.provider_maps);
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    gpuarena_t *d;
    OK(gpuarena_get(GPUARENA_MANAGED, 0, &d));
    OK(gpuarena_alloc(d, 1000, NULL, &p[0]));
    OK(gpuarena_free(d, p[0], NULL));
}
END_TEST

int main(void)
{
    if (!gpu_tests_begin("check_managed"))
        return 77;
    int managed = 0, pageable = 0, tables = 0, direct = 0;
    ga_cuda_device_attr(0, GA_CUDA_ATTR_MANAGED_MEMORY, &managed);
    ga_cuda_device_attr(0, GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, &concurrent);
    ga_cuda_device_attr(0, GA_CUDA_ATTR_PAGEABLE_MEMORY_ACCESS, &pageable);
    ga_cuda_device_attr(0, GA_CUDA_ATTR_PAGEABLE_USES_HOST_PAGE_TABLES, &tables);
    ga_cuda_device_attr(0, GA_CUDA_ATTR_DIRECT_MANAGED_ACCESS_FROM_HOST, &direct);
    printf("check_managed: device 0: managed %d, concurrent %d, pageable %d, host page tables %d, "
           "direct host access %d\n",
           managed, concurrent, pageable, tables, direct);
    if (!managed) {
        printf("check_managed: device 0 has no managed memory: skipped\n");
        return 77;
    }
    Suite *s = suite_create("managed");
    TCase *tc = tcase_create("managed");
    tcase_add_checked_fixture(tc, gpu_setup, gpu_teardown);
    tcase_add_test(tc, advice_read_back);
    tcase_add_test(tc, prefetch_on_alloc_and_on_request);
    tcase_add_test(tc, host_and_gpu_see_the_same_data);
    tcase_add_test(tc, guard_skips_and_counts);
    tcase_add_test(tc, cpu_guard_counts_page_cache);
    tcase_add_test(tc, segments_come_and_go);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return gpu_tests_run(s);
}
