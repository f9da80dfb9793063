/*
 * check_device.c - the device provider and the device arena on a real GPU.
 * Exits 77 (skipped) where the driver or a GPU is missing.
 *
 * The provider tests talk to the provider table directly and need nothing
 * else; the arena tests go through the public API and the block manager,
 * and say they are skipped while the block manager is not built (alloc
 * answers GPUARENA_ERR_NOT_SUPPORTED).  Data is checked with fill
 * patterns: cuMemsetD8Async on a stream, then a copy back to the host.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"
#include "providers/providers.h"

#include "forkrun.h"
#include "gputest.h"

#include <check.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static ga_provider_t *device_provider(bool expandable)
{
    ga_settings_t s;
    memset(&s, 0, sizeof s);
    s.expandable = expandable;
    ga_provider_t *p = NULL;
    ck_assert_msg(ga_gpu_provider_create(GPUARENA_DEVICE, 0, &s, &p) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    return p;
}

/* Fill SIZE bytes at PTR with BYTE on STREAM, wait, check a few spots. */
static void fill_and_check(void *ptr, size_t size, unsigned char byte, void *stream)
{
    uint64_t d = (uint64_t)(uintptr_t)ptr;
    ck_assert_int_eq(ga_cuda_memset_d8_async(d, byte, size, stream), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(stream), GPUARENA_SUCCESS);
    size_t n = size < 4096 ? size : 4096;
    const size_t at[] = {0, size / 2 - n / 2, size - n};
    for (int i = 0; i < 3; i++)
        gpu_expect_bytes(d + at[i], n, byte);
}

static size_t device_free(void)
{
    size_t f = 0;
    /* Memory released while queued work still uses it is freed by the
     * driver when that work ends: wait for it before reading. */
    ck_assert_int_eq(ga_cuda_ctx_sync(), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_mem_info(&f, NULL), GPUARENA_SUCCESS);
    return f;
}

/* Free memory once it has settled: what earlier tests released comes
 * back asynchronously, and must not be taken for this test's doing. */
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

/* ---------------------------------------------------------------------- */
/* Provider. */

START_TEST(fixed_segments)
{
    ga_provider_t *p = device_provider(false);
    ck_assert(!p->growable);
    ck_assert_uint_ge(p->granule, 4096);
    void *s;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    void *seg;
    size_t size = 8 * p->granule;
    ck_assert_int_eq(p->ops->map(p, size, &seg), GPUARENA_SUCCESS);
    ck_assert_uint_eq(p->live_maps, 1);
    fill_and_check(seg, size, 0xab, s);
    ck_assert_int_eq(p->ops->memzero(p, seg, size, s), GPUARENA_SUCCESS);
    fill_and_check(seg, size, 0x00, NULL);
    ck_assert_int_eq(p->ops->unmap(p, seg, size), GPUARENA_SUCCESS);
    ck_assert_uint_eq(p->live_maps, 0);
    /* More than the device has: out of memory, with the call named. */
    size_t total;
    ck_assert_int_eq(ga_cuda_device_total_mem(0, &total), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->map(p, total + total / 2, &seg), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "cuMemAlloc"));
    ck_assert_uint_eq(p->live_maps, 0);
    ga_cuda_stream_destroy(s);
    p->ops->destroy(p);
}
END_TEST

START_TEST(growable_segments_return_memory)
{
    ga_provider_t *p = device_provider(true);
    if (!p->growable) {
        printf("check_device: device 0 has no virtual memory management: growable not run\n");
        p->ops->destroy(p);
        return;
    }
    size_t g = p->granule, size = 512 * MiB / g * g;
    ck_assert_uint_ge(p->va_size, size);
    void *va;
    ck_assert_int_eq(p->ops->reserve(p, p->va_size, &va), GPUARENA_SUCCESS);
    size_t before = settled_free();
    ck_assert_int_eq(p->ops->commit(p, va, size), GPUARENA_SUCCESS);
    ck_assert_uint_eq(p->live_maps, size / g);
    size_t during = device_free();
    ck_assert_msg(during + size - 64 * MiB <= before, "free %zu -> %zu after committing %zu",
                  before, during, size);
    fill_and_check(va, size, 0x5c, NULL);
    /* Committing the same granule twice is refused, nothing changes. */
    ck_assert_int_eq(p->ops->commit(p, va, g), GPUARENA_ERR_INVALID_ARGUMENT);
    /* Decommit in other pieces than committed: the tail, then the head. */
    char *c = va;
    ck_assert_int_eq(p->ops->decommit(p, c + size / 2, size / 2), GPUARENA_SUCCESS);
    fill_and_check(va, size / 2, 0x3c, NULL);
    ck_assert_int_eq(p->ops->decommit(p, c, size / 2), GPUARENA_SUCCESS);
    ck_assert_uint_eq(p->live_maps, 0);
    /* The driver gives released memory back asynchronously: up to 2 s. */
    size_t after = device_free();
    for (int i = 0; i < 40 && after + 64 * MiB < before; i++) {
        struct timespec t = {0, 50 * 1000 * 1000};
        nanosleep(&t, NULL);
        after = device_free();
    }
    ck_assert_msg(after + 64 * MiB >= before, "free %zu -> %zu -> %zu: not returned", before,
                  during, after);
    /* Grow again at the end of the range. */
    ck_assert_int_eq(p->ops->commit(p, c + p->va_size - 2 * g, 2 * g), GPUARENA_SUCCESS);
    fill_and_check(c + p->va_size - 2 * g, 2 * g, 0x11, NULL);
    /* Release with granules committed still gives everything back. */
    ck_assert_int_eq(p->ops->release(p, va, p->va_size), GPUARENA_SUCCESS);
    ck_assert_uint_eq(p->live_maps, 0);
    p->ops->destroy(p);
    printf("check_device: growable: free %zu MiB -> %zu MiB -> %zu MiB\n", before / MiB,
           during / MiB, after / MiB);
}
END_TEST

START_TEST(stream_identity)
{
    ga_provider_t *p = device_provider(true);
    uint64_t null_id, legacy_id, ptd_id, a_id, a_again, b_id;
    void *a, *b;
    ck_assert_int_eq(ga_cuda_stream_create(true, &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(false, &b), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, NULL, &null_id), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, GA_CUDA_STREAM_LEGACY, &legacy_id), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, GA_CUDA_STREAM_PER_THREAD, &ptd_id), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, a, &a_id), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, a, &a_again), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_id(p, b, &b_id), GPUARENA_SUCCESS);
    ck_assert_uint_eq(null_id, legacy_id);
    ck_assert_uint_ne(ptd_id, legacy_id);
    ck_assert_uint_eq(a_id, a_again);
    ck_assert_uint_ne(a_id, b_id);
    ck_assert_uint_ne(a_id, legacy_id);
    ck_assert_uint_ne(a_id, GA_STREAM_ANY);
    /* A stream of another context of the same device is refused. */
    void *other = NULL;
    if (ga_cuda_ctx_create(0, &other) == GPUARENA_SUCCESS) {
        ck_assert_int_eq(ga_cuda_set_current(other), GPUARENA_SUCCESS);
        void *foreign;
        ck_assert_int_eq(ga_cuda_stream_create(true, &foreign), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_set_current(gpu_ctx), GPUARENA_SUCCESS);
        uint64_t id;
        ck_assert_int_eq(p->ops->stream_id(p, foreign, &id), GPUARENA_ERR_INVALID_STREAM);
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "another"));
        /* Even with that context current, the arena's context rules. */
        ck_assert_int_eq(ga_cuda_set_current(other), GPUARENA_SUCCESS);
        ck_assert_int_eq(p->ops->stream_id(p, foreign, &id), GPUARENA_ERR_INVALID_STREAM);
        ck_assert_int_eq(p->ops->stream_id(p, a, &id), GPUARENA_SUCCESS);
        ck_assert_uint_eq(id, a_id);
        ga_cuda_stream_destroy(foreign);
        ck_assert_int_eq(ga_cuda_set_current(gpu_ctx), GPUARENA_SUCCESS);
        ga_cuda_ctx_destroy(other);
    }
    /* A stream of another device, where there is one. */
    int n = 0;
    ck_assert_int_eq(ga_cuda_device_count(&n), GPUARENA_SUCCESS);
    if (n > 1) {
        void *ctx1, *s1;
        ck_assert_int_eq(ga_cuda_primary_retain(1, &ctx1), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_set_current(ctx1), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_stream_create(true, &s1), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_set_current(gpu_ctx), GPUARENA_SUCCESS);
        uint64_t id;
        ck_assert_int_eq(p->ops->stream_id(p, s1, &id), GPUARENA_ERR_INVALID_STREAM);
        ga_cuda_stream_destroy(s1);
        ga_cuda_primary_release(1);
    }
    ga_cuda_stream_destroy(a);
    ga_cuda_stream_destroy(b);
    p->ops->destroy(p);
}
END_TEST

START_TEST(events_and_waits)
{
    ga_provider_t *p = device_provider(true);
    void *a, *b;
    ck_assert_int_eq(ga_cuda_stream_create(true, &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &b), GPUARENA_SUCCESS);
    ga_event_t ev, ev2;
    ck_assert_int_eq(p->ops->event_create(p, &ev), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_query(p, ev), GPUARENA_SUCCESS); /* never recorded */
    void *seg;
    ck_assert_int_eq(p->ops->map(p, 64 * p->granule, &seg), GPUARENA_SUCCESS);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(
            ga_cuda_memset_d8_async((uint64_t)(uintptr_t)seg, (unsigned char)i, 64 * p->granule, a),
            GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_record(p, ev, a), GPUARENA_SUCCESS);
    gpuarena_status_t q = p->ops->event_query(p, ev);
    ck_assert(q == GPUARENA_SUCCESS || q == GA_NOT_READY);
    /* B waits for A's work on the GPU, then overwrites: B's value wins. */
    ck_assert_int_eq(p->ops->stream_wait(p, b, ev), GPUARENA_SUCCESS);
    fill_and_check(seg, 64 * p->granule, 0xee, b);
    ck_assert_int_eq(p->ops->event_sync(p, ev), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_query(p, ev), GPUARENA_SUCCESS);
    /* Legacy and per-thread default streams take events too. */
    ck_assert_int_eq(p->ops->event_record(p, ev, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_sync(p, ev), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_record(p, ev, GA_CUDA_STREAM_PER_THREAD), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->event_sync(p, ev), GPUARENA_SUCCESS);
    /* The pool hands a destroyed event out again. */
    p->ops->event_destroy(p, ev);
    ck_assert_int_eq(p->ops->event_create(p, &ev2), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(ev2, ev);
    p->ops->event_destroy(p, ev2);
    ck_assert_int_eq(p->ops->unmap(p, seg, 64 * p->granule), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(a);
    ga_cuda_stream_destroy(b);
    p->ops->destroy(p);
}
END_TEST

START_TEST(capture_is_refused)
{
    ga_provider_t *p = device_provider(true);
    void *s;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_check(p, s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_capture_begin(s), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_check(p, s), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "captured"));
    /* The capture is intact: it ends cleanly. */
    ck_assert_int_eq(ga_cuda_capture_end(s), GPUARENA_SUCCESS);
    ck_assert_int_eq(p->ops->stream_check(p, s), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
    p->ops->destroy(p);
}
END_TEST

START_TEST(mem_free_reports)
{
    ga_provider_t *p = device_provider(true);
    uint64_t f = 0;
    ck_assert_int_eq(p->ops->mem_free(p, &f), GPUARENA_SUCCESS);
    size_t total;
    ck_assert_int_eq(ga_cuda_device_total_mem(0, &total), GPUARENA_SUCCESS);
    ck_assert_uint_gt(f, 0);
    ck_assert_uint_le(f, total);
    p->ops->destroy(p);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Arena (public API, through the block manager). */

static bool block_manager_built(gpuarena_t *a)
{
    void *x = NULL;
    gpuarena_status_t st = gpuarena_alloc(a, 1, NULL, &x);
    if (st == GPUARENA_ERR_NOT_SUPPORTED) {
        printf("check_device: block manager not built yet: arena test skipped\n");
        return false;
    }
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, x, NULL), GPUARENA_SUCCESS);
    return true;
}

START_TEST(arena_alloc_free_on_streams)
{
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    if (!block_manager_built(a))
        return;
    void *s1, *s2;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s1), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &s2), GPUARENA_SUCCESS);
    void *const streams[] = {NULL, GA_CUDA_STREAM_LEGACY, GA_CUDA_STREAM_PER_THREAD, s1, s2};
    const size_t sizes[] = {1, 512, 4096, MiB + 3, 20 * MiB, 100 * MiB};
    void *live[5][6];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            ck_assert_int_eq(gpuarena_alloc(a, sizes[j], streams[i], &live[i][j]),
                             GPUARENA_SUCCESS);
            fill_and_check(live[i][j], sizes[j], (unsigned char)(16 * i + j + 1), streams[i]);
        }
    /* Every block kept its own pattern: no two overlap. */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            unsigned char b;
            ck_assert_int_eq(ga_cuda_memcpy_dtoh(&b, (uint64_t)(uintptr_t)live[i][j], 1),
                             GPUARENA_SUCCESS);
            ck_assert_uint_eq(b, (unsigned char)(16 * i + j + 1));
        }
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++)
            ck_assert_int_eq(gpuarena_free(a, live[i][j], streams[i]), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    /* A stream the driver does not know, or freeing twice, changes nothing. */
    void *x;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, s1, &x), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, x, s1), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, x, s1), GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_int_eq(ga_cuda_stream_sync(s1), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s1);
    ga_cuda_stream_destroy(s2);
}
END_TEST

/* Through the arena: an allocation on a capturing stream is refused and
 * changes nothing, cached sizes (thread caches, large slot) included, and
 * so is a free that would record an event on it; a free into the thread
 * cache is made, and the block goes to the stream's next allocation after
 * the capture.  The legacy stream cannot be captured; while a blocking
 * stream is (the driver's implicit dependency), a pair that the thread
 * cache serves on it still goes through, touching nothing, and so does
 * an allocation that the pools serve; anything that would reach the
 * driver is refused and changes nothing.  Neither capture breaks. */
START_TEST(arena_refuses_capturing_streams)
{
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_SUCCESS);
    void *s, *blocking, *big;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(false, &blocking), GPUARENA_SUCCESS);
    /* What the arena relies on to name the legacy stream unchecked: the
     * driver will not capture it (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
     * on the H100, CUDA 13). */
    void *const legacy[] = {NULL, (void *)0x1};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ga_cuda_capture_begin(legacy[i]), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "cuStreamBeginCapture"));
    }
    /* Above thread_cache_large: its free always takes the locked path.
     * Used on S too: its free records events, so the legacy stream is
     * asked first (a free that needs none goes through: check_block). */
    ck_assert_int_eq(gpuarena_alloc(a, 256 * MiB, NULL, &big), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_record_stream(a, big, s), GPUARENA_SUCCESS);
    const size_t sizes[] = {512, 32 * MiB};
    for (int i = 0; i < 2; i++) {
        void *p, *q, *r = NULL;
        /* A pair first, so that the size is cached for S (in a slot, or
         * in the large slot for 32 MiB). */
        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], s, &p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], s, &p), GPUARENA_SUCCESS);
        gpuarena_stats_t before, after;
        ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_capture_begin(s), GPUARENA_SUCCESS);
        /* Refused: an allocation, and a free that records events. */
        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], s, &r), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(gpuarena_free(a, big, s), GPUARENA_ERR_STREAM_CAPTURE);
        /* Nor on another stream: its event on S would go into the graph. */
        ck_assert_int_eq(gpuarena_free(a, big, NULL), GPUARENA_ERR_STREAM_CAPTURE);
        /* A free into the thread cache puts nothing on S: it is made, and
         * the capture goes on. */
        ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_capture_end(s), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_stats(a, &after), GPUARENA_SUCCESS);
        ck_assert_uint_eq(after.live_blocks, before.live_blocks - 1);
        ck_assert_uint_eq(after.allocs, before.allocs);
        ck_assert_uint_eq(after.frees, before.frees + 1);
        ck_assert_uint_eq(after.requested, before.requested - sizes[i]);
        /* The capture over, S's next allocation takes the block. */
        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], s, &r), GPUARENA_SUCCESS);
        ck_assert_ptr_eq(r, p);

        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], NULL, &q), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, q, NULL), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_capture_begin(blocking), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_alloc(a, sizes[i], NULL, &r), GPUARENA_SUCCESS);
        ck_assert_ptr_eq(r, q); /* the thread cache's */
        ck_assert_int_eq(gpuarena_free(a, r, NULL), GPUARENA_SUCCESS);
        /* A size no thread cache holds, that a free block of the pools
         * serves (the rest of a segment): it goes through too. */
        ck_assert_int_eq(gpuarena_alloc(a, 4096 * (i + 1), NULL, &r), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, r, NULL), GPUARENA_SUCCESS);
        /* New memory would reach the driver. */
        ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
        r = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 1024 * MiB, NULL, &r), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_ptr_null(r);
        ck_assert_int_eq(gpuarena_free(a, big, NULL), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_int_eq(gpuarena_record_stream(a, p, NULL), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_int_eq(ga_cuda_capture_end(blocking), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_stats(a, &after), GPUARENA_SUCCESS);
        ck_assert_uint_eq(after.live_blocks, before.live_blocks);
        ck_assert_uint_eq(after.allocs, before.allocs);
        ck_assert_uint_eq(after.frees, before.frees);
        ck_assert_uint_eq(after.requested, before.requested);

        /* P is still live, and goes as usual after the captures. */
        ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
    }
    ck_assert_int_eq(gpuarena_free(a, big, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(s), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
    ga_cuda_stream_destroy(blocking);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A zero fill with no stream goes on the legacy stream, which a capture
 * of a blocking stream forbids: device and managed arenas refuse the
 * allocation before taking a block (nothing mapped or counted, *PTR as
 * it was), the capture intact; served once it has ended. */
START_TEST(zero_fill_with_no_stream_during_a_blocking_capture)
{
    const gpuarena_kind_t kinds[] = {GPUARENA_DEVICE, GPUARENA_MANAGED};
    void *blocking;
    ck_assert_int_eq(ga_cuda_stream_create(false, &blocking), GPUARENA_SUCCESS);
    for (int i = 0; i < 2; i++) {
        gpuarena_t *a = NULL;
        ck_assert_int_eq(gpuarena_create(kinds[i], 0, "zero=true", &a), GPUARENA_SUCCESS);
        gpuarena_stats_t before, after;
        ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_capture_begin(blocking), GPUARENA_SUCCESS);
        void *p = (void *)0x1;
        ck_assert_int_eq(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p),
                         GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_ptr_eq(p, (void *)0x1);
        ck_assert_msg(ga_cuda_capture_end(blocking) == GPUARENA_SUCCESS, "the capture broke: %s",
                      gpuarena_last_error());
        ck_assert_int_eq(gpuarena_stats(a, &after), GPUARENA_SUCCESS);
        ck_assert_uint_eq(after.reserved, before.reserved);
        ck_assert_uint_eq(after.provider_maps, before.provider_maps);
        ck_assert_uint_eq(after.allocs, before.allocs);
        ck_assert_uint_eq(after.frees, before.frees);
        ck_assert_int_eq(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
    ga_cuda_stream_destroy(blocking);
}
END_TEST

/* Another thread's capture in global mode survives what arenas do
 * meanwhile on other streams.  Measured (../shared/notes): a cuEventQuery,
 * cuStreamQuery or cuStreamSynchronize that a thread makes in global mode
 * invalidates any capture in progress; in relaxed mode it does not.  Here
 * a pinned free on a stream asks whether that stream is idle, and device
 * allocations that miss query the events of pending frees. */
typedef struct {
    gpuarena_t *pin, *dev; /* made before the capture begins */
    void *s2, *s3;
    gpuarena_status_t st;
    char what[300];
} side_t;

#define SIDE(call)                                                                                 \
    do {                                                                                           \
        if ((w->st = (call)) != GPUARENA_SUCCESS) {                                                \
            snprintf(w->what, sizeof w->what, "%s: %s", #call, gpuarena_last_error());             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static void *side_work(void *arg)
{
    side_t *w = arg;
    gpuarena_t *pin = w->pin, *dev = w->dev;
    void *p, *q[2] = {NULL, NULL};
    SIDE(gpuarena_alloc(pin, 4096, w->s2, &p));
    SIDE(gpuarena_free(pin, p, w->s2)); /* is S2 idle? */
    SIDE(gpuarena_alloc(dev, MiB, w->s2, &p));
    SIDE(gpuarena_free(dev, p, w->s2));
    SIDE(gpuarena_alloc(dev, MiB, w->s3, &q[0])); /* a miss: S2's pool is wanted */
    SIDE(gpuarena_alloc(dev, MiB, w->s2, &p));
    SIDE(gpuarena_free(dev, p, w->s2));           /* records the sweep of S2's pool */
    SIDE(gpuarena_alloc(dev, MiB, w->s3, &q[1])); /* a miss: queries that sweep */
out:
    for (int i = 0; i < 2; i++)
        if (q[i])
            (void)gpuarena_free(dev, q[i], w->s3);
    return NULL;
}

START_TEST(capture_in_another_thread_survives)
{
    void *cap;
    side_t w = {.st = GPUARENA_SUCCESS};
    ck_assert_int_eq(ga_cuda_stream_create(true, &cap), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &w.s2), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &w.s3), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 0, "thread_cache=false", &w.pin),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(
        gpuarena_create(GPUARENA_DEVICE, 0, "thread_cache=false,cross_stream=wait", &w.dev),
        GPUARENA_SUCCESS);
    /* Their first segments (an address range reserved, pages registered)
     * before the capture too: this test is about the operations after. */
    void *warm_pin, *warm_dev;
    ck_assert_int_eq(gpuarena_alloc(w.pin, 4096, w.s3, &warm_pin), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(w.dev, MiB, w.s3, &warm_dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_capture_begin(cap), GPUARENA_SUCCESS);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, side_work, &w), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    gpuarena_status_t end = ga_cuda_capture_end(cap);
    ck_assert_msg(w.st == GPUARENA_SUCCESS, "the other thread failed: %s", w.what);
    ck_assert_msg(end == GPUARENA_SUCCESS, "the capture broke: %s", gpuarena_last_error());
    ck_assert_int_eq(ga_cuda_stream_sync(w.s2), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(w.pin, warm_pin, w.s3), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(w.dev, warm_dev, w.s3), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(w.s3), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(w.dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(w.pin), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(cap);
    ga_cuda_stream_destroy(w.s2);
    ga_cuda_stream_destroy(w.s3);
}
END_TEST

/* A retry after running out of memory (here: of max_reserved) and a trim
 * while a stream is captured in global mode.  The memory the retry needs
 * was freed on its own stream, and the trim's on no stream: neither waits
 * for the whole device (cuCtxSynchronize), which would invalidate the
 * capture.  A trim that needs that wait (a block freed on a stream, which
 * no event covers) fails with GPUARENA_ERR_STREAM_CAPTURE, and the capture
 * is invalidated, as gpuarena_trim(3) says. */
START_TEST(out_of_memory_and_trim_during_a_capture)
{
    gpuarena_t *a;
    void *s, *cap, *p, *q, *b;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0,
                                     "thread_cache=false,expandable=true,max_reserved=256M", &a),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &cap), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 192 * MiB, s, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MiB, s, &b), GPUARENA_SUCCESS); /* P cannot grow */
    fill_and_check(p, 192 * MiB, 0x5a, s);
    ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);

    ck_assert_int_eq(ga_cuda_capture_begin(cap), GPUARENA_SUCCESS);
    gpuarena_status_t st = gpuarena_alloc(a, 224 * MiB, s, &q);
    ck_assert_msg(st == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    gpuarena_stats_t t;
    ck_assert_int_eq(gpuarena_stats(a, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.oom_retries, 1);
    ck_assert_uint_eq(t.oom_failures, 0);
    ck_assert_uint_le(t.reserved, 256 * MiB);
    ck_assert_int_eq(gpuarena_free(a, q, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, b, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.reserved, 0);
    st = ga_cuda_capture_end(cap);
    ck_assert_msg(st == GPUARENA_SUCCESS, "the capture broke: %s", gpuarena_last_error());

    /* A block freed on S, which no event covers: the trim must wait for
     * the device, which the capture refuses. */
    ck_assert_int_eq(gpuarena_alloc(a, 64 * MiB, s, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_capture_begin(cap), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_ne(ga_cuda_capture_end(cap), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.reserved, 64 * MiB);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.reserved, 0);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
    ga_cuda_stream_destroy(cap);
}
END_TEST

/* GPUARENA_STREAM_HOST on device and pinned arenas: a block freed with no
 * stream is taken at once by a stream that is busy, with no event; a
 * pinned block freed on a busy stream is not handed to "no stream" before
 * that stream passes the free; a device block allocated with no stream is
 * usable on any stream. */
START_TEST(host_stream_device_and_pinned)
{
    const gpuarena_kind_t kinds[] = {GPUARENA_DEVICE, GPUARENA_PINNED};
    void *s;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    uint64_t work;
    const size_t wsize = 256 * MiB;
    ck_assert_int_eq(ga_cuda_mem_alloc(wsize, &work), GPUARENA_SUCCESS);
    for (int k = 0; k < 2; k++) {
        gpuarena_t *a;
        ck_assert_int_eq(gpuarena_create(kinds[k], 0, NULL, &a), GPUARENA_SUCCESS);
        const size_t size = 64 * 1024;
        void *p;
        ck_assert_int_eq(gpuarena_alloc(a, size, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
        if (kinds[k] == GPUARENA_DEVICE)
            fill_and_check(p, size, 0x5a, s); /* usable on a stream */
        else
            memset(p, 0x5a, size);
        gpuarena_stats_t st0, st1;
        ck_assert_int_eq(gpuarena_stats(a, &st0), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
        for (int i = 0; i < 200; i++) /* the stream busy for a while */
            ck_assert_int_eq(ga_cuda_memset_d8_async(work, (unsigned char)i, wsize, s),
                             GPUARENA_SUCCESS);
        void *q;
        ck_assert_int_eq(gpuarena_alloc(a, size, s, &q), GPUARENA_SUCCESS);
        ck_assert_ptr_eq(q, p);
        ck_assert_int_eq(gpuarena_stats(a, &st1), GPUARENA_SUCCESS);
        ck_assert_uint_eq(st1.events_recorded, st0.events_recorded);
        /* Freed on the busy stream: not for "no stream" yet (pinned: the
         * host may write it; device: any stream may use it). */
        ck_assert_int_eq(gpuarena_free(a, q, s), GPUARENA_SUCCESS);
        bool busy = ga_cuda_stream_query(s) != GPUARENA_SUCCESS;
        void *r;
        ck_assert_int_eq(gpuarena_alloc(a, size, GPUARENA_STREAM_HOST, &r), GPUARENA_SUCCESS);
        ck_assert_msg(!busy || r != q, "kind %d: a block freed on a busy stream went to no stream",
                      (int)kinds[k]);
        printf("check_device: host stream, kind %d: the stream was %s at the alloc\n",
               (int)kinds[k], busy ? "busy" : "idle (weak check)");
        ck_assert_int_eq(gpuarena_record_stream(a, r, GPUARENA_STREAM_HOST),
                         GPUARENA_ERR_INVALID_STREAM);
        ck_assert_int_eq(gpuarena_free(a, r, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_stream_sync(s), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
    ck_assert_int_eq(ga_cuda_mem_free(work), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
}
END_TEST

START_TEST(arena_trim_returns_memory)
{
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    if (!block_manager_built(a))
        return;
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    size_t before = settled_free();
    void *p[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(gpuarena_alloc(a, 128 * MiB, NULL, &p[i]), GPUARENA_SUCCESS);
    size_t during = device_free();
    ck_assert_uint_le(during + 1024 * MiB - 64 * MiB, before);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(gpuarena_free(a, p[i], NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(NULL), GPUARENA_SUCCESS);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_ge(st.cached, 1024 * MiB);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    size_t after = device_free();
    ck_assert_msg(after + 64 * MiB >= before, "free %zu -> %zu -> %zu MiB", before / MiB,
                  during / MiB, after / MiB);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.cached, 0);
    printf("check_device: trim: free %zu MiB -> %zu MiB -> %zu MiB\n", before / MiB, during / MiB,
           after / MiB);
}
END_TEST

START_TEST(arena_out_of_memory_then_trim)
{
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    if (!block_manager_built(a))
        return;
    size_t total;
    ck_assert_int_eq(ga_cuda_device_total_mem(0, &total), GPUARENA_SUCCESS);
    size_t chunk = (size_t)1 << 30, max = total / chunk + 8, n = 0;
    void **v = calloc(max, sizeof *v);
    ck_assert_ptr_nonnull(v);
    gpuarena_status_t st = GPUARENA_SUCCESS;
    while (n < max && (st = gpuarena_alloc(a, chunk, NULL, &v[n])) == GPUARENA_SUCCESS)
        n++;
    ck_assert_int_eq(st, GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_uint_gt(n, 0);
    gpuarena_stats_t s;
    ck_assert_int_eq(gpuarena_stats(a, &s), GPUARENA_SUCCESS);
    ck_assert_uint_ge(s.oom_failures, 1);
    ck_assert_uint_eq(s.last_oom_request, chunk);
    ck_assert_uint_ge(s.in_use, n * chunk);
    ck_assert_int_eq(gpuarena_stats_print(stdout, NULL), GPUARENA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(gpuarena_free(a, v[i], NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    /* The room is back: the same requests fit again. */
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(gpuarena_alloc(a, chunk, NULL, &v[i]), GPUARENA_SUCCESS);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(gpuarena_free(a, v[i], NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    free(v);
    printf("check_device: out of memory after %zu GiB of %zu GiB\n", n, total >> 30);
}
END_TEST

/* max_reserved on the device: with fixed and with growable segments the
 * driver hands the arena no more than the cap (its free memory says so),
 * a request past it fails as out of memory naming the cap, and lifting
 * the cap on the live arena (gpuarena_set) lets the request through. */
START_TEST(arena_max_reserved)
{
    static const char *const opts[] = {"expandable=false,max_reserved=256M",
                                       "expandable=true,max_reserved=256M"};
    const size_t cap = 256 * MiB, chunk = 48 * MiB;
    for (int k = 0; k < 2; k++) {
        gpuarena_t *a;
        ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, opts[k], &a), GPUARENA_SUCCESS);
        size_t before = settled_free();
        void *p[16];
        size_t n = 0;
        gpuarena_status_t st = GPUARENA_SUCCESS;
        while (n < 16 && (st = gpuarena_alloc(a, chunk, NULL, &p[n])) == GPUARENA_SUCCESS)
            n++;
        ck_assert_int_eq(st, GPUARENA_ERR_OUT_OF_MEMORY);
        ck_assert_msg(strstr(gpuarena_last_error(), "max_reserved"), "%s", gpuarena_last_error());
        ck_assert_msg(n >= 4, "%s: %zu blocks of 48 MiB under 256 MiB", opts[k], n);
        gpuarena_stats_t s;
        ck_assert_int_eq(gpuarena_stats(a, &s), GPUARENA_SUCCESS);
        ck_assert_uint_le(s.reserved_peak, cap);
        size_t during = device_free();
        size_t given = before > during ? before - during : 0;
        ck_assert_msg(given <= cap + 32 * MiB && given + 32 * MiB >= n * chunk,
                      "%s: the driver gave %zu MiB for %zu blocks", opts[k], given / MiB, n);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(gpuarena_free(a, p[i], NULL), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_set(a, "max_reserved=none"), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_alloc(a, 8 * chunk, NULL, &p[0]), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p[0], NULL), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_cuda_stream_sync(NULL), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
        printf("check_device: %s: %zu blocks of 48 MiB, driver gave %zu MiB\n", opts[k], n,
               given / MiB);
    }
}
END_TEST

/* fork(2): a child of this process, which initialized CUDA, has its
 * device and pinned arenas refuse every call with
 * GPUARENA_ERR_NOT_SUPPORTED (the thread cache's block too), cannot make
 * a new one, reads their statistics, and allocates from a host arena;
 * nothing hangs.  The parent's arenas go on.  Whether the parent's pinned
 * block is mapped in the child (a copy, pinned no more) is printed: the
 * driver decides, and it is not what the test is about. */
static sigjmp_buf probe_env;

static void probe_fault(int sig)
{
    siglongjmp(probe_env, sig);
}

static bool readable(const volatile unsigned char *p)
{
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = probe_fault;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    bool ok = false;
    if (sigsetjmp(probe_env, 1) == 0) {
        (void)p[0];
        ok = true;
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return ok;
}

/* What forked_child hands its child. */
typedef struct {
    gpuarena_t *dev, *pin, *host;
    void *s;
    const unsigned char *pinned, *hosted;
} in_child_t;

static int in_the_child(void *arg)
{
    const in_child_t *c = arg;
    gpuarena_t *dev = c->dev, *pin = c->pin, *host = c->host;
    const unsigned char *hosted = c->hosted;
    void *p = NULL;
    if (gpuarena_alloc(dev, 4096, NULL, &p) != GPUARENA_ERR_NOT_SUPPORTED || p)
        return 1;
    if (gpuarena_alloc(dev, 4096, c->s, &p) != GPUARENA_ERR_NOT_SUPPORTED || p)
        return 2;
    if (gpuarena_alloc(pin, 4096, GPUARENA_STREAM_HOST, &p) != GPUARENA_ERR_NOT_SUPPORTED)
        return 3;
    if (gpuarena_trim(dev, 0) != GPUARENA_ERR_NOT_SUPPORTED)
        return 4;
    gpuarena_t *n = NULL;
    if (gpuarena_create(GPUARENA_DEVICE, 0, NULL, &n) != GPUARENA_ERR_NOT_SUPPORTED)
        return 5;
    gpuarena_stats_t st;
    if (gpuarena_stats(dev, &st) != GPUARENA_SUCCESS || st.live_blocks != 1)
        return 6;
    if (hosted[0] != 0x5a || hosted[4095] != 0x5a)
        return 7;
    if (gpuarena_alloc(host, 8192, GPUARENA_STREAM_HOST, &p) != GPUARENA_SUCCESS)
        return 8;
    memset(p, 1, 8192);
    if (gpuarena_free(host, p, GPUARENA_STREAM_HOST) != GPUARENA_SUCCESS)
        return 9;
    printf("check_device: fork: the parent's pinned block is %s in the child\n",
           readable(c->pinned) ? "mapped" : "not mapped");
    fflush(stdout);
    return 0;
}

START_TEST(forked_child)
{
    gpuarena_t *dev, *pin, *host;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 0, NULL, &pin), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &host), GPUARENA_SUCCESS);
    void *s;
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    void *live, *cached, *pinned, *hosted;
    ck_assert_int_eq(gpuarena_alloc(dev, MiB, s, &live), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(dev, 4096, NULL, &cached), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(dev, cached, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(pin, 4096, GPUARENA_STREAM_HOST, &pinned), GPUARENA_SUCCESS);
    memset(pinned, 0x5a, 4096);
    ck_assert_int_eq(gpuarena_alloc(host, 4096, GPUARENA_STREAM_HOST, &hosted), GPUARENA_SUCCESS);
    memset(hosted, 0x5a, 4096);
    in_child_t c = {dev, pin, host, s, pinned, hosted};
    ga_require_child_ok(ga_fork_run(in_the_child, &c, 30), "the child");
    /* The parent's arenas go on. */
    void *q;
    ck_assert_int_eq(gpuarena_alloc(dev, 4096, NULL, &q), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(q, cached);
    fill_and_check(q, 4096, 0x3c, s);
    ck_assert_int_eq(gpuarena_free(dev, q, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(dev, live, s), GPUARENA_SUCCESS);
    ck_assert_int_eq(((unsigned char *)pinned)[4095], 0x5a);
    ck_assert_int_eq(gpuarena_free(pin, pinned, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(host, hosted, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(s), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(pin), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(host), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
}
END_TEST

/* Key ipc: a block of a growable segment is reached from another process.
 * The granule that holds it is exported as a POSIX file descriptor
 * (cuMemExportToShareableHandle), which a child process started afresh
 * (this program, "--import": CUDA does not survive fork) inherits,
 * imports and maps; it reads the parent's bytes and writes its own, which
 * the parent then reads through the block: one memory, two processes.
 * With ipc = false the driver refuses the export. */
static const char *self_path;

/* The child: --import FD SIZE OFFSET EXPECT WRITE (bytes as numbers). */
static int import_child(char **argv)
{
    int fd = atoi(argv[2]);
    size_t size = strtoull(argv[3], NULL, 10), off = strtoull(argv[4], NULL, 10);
    unsigned char expect = (unsigned char)atoi(argv[5]), write = (unsigned char)atoi(argv[6]);
    uint64_t va = 0;
    int rc = gpu_child_begin();
    if (rc)
        return rc;
    if (ga_cuda_vmm_import_fd(0, fd, size, &va) != GPUARENA_SUCCESS) {
        fprintf(stderr, "import: %s\n", gpuarena_last_error());
        return 3;
    }
    rc = gpu_child_read_write(va + off, expect, write);
    if (rc)
        return rc;
    if (ga_cuda_vmm_unmap(va, size) != GPUARENA_SUCCESS ||
        ga_cuda_vmm_free(va, size) != GPUARENA_SUCCESS)
        return 7;
    return 0;
}

START_TEST(blocks_reach_another_process)
{
    int vmm = 0, fdok = 0;
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_VMM_SUPPORTED, &vmm));
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_POSIX_FD_SUPPORTED, &fdok));
    if (!vmm || !fdok) {
        printf("blocks_reach_another_process: no growable segments or file descriptor "
               "handles on device 0: not tested\n");
        return;
    }
    gpuarena_t *a;
    OK(gpuarena_create(GPUARENA_DEVICE, 0, "expandable=true", &a));
    void *p;
    OK(gpuarena_alloc(a, MiB, GPUARENA_STREAM_HOST, &p));
    OK(ga_cuda_memset_d8((uint64_t)(uintptr_t)p, 0x5a, MiB));
    OK(ga_cuda_ctx_sync());
    int fd = -1;
    uint64_t base = 0;
    size_t size = 0;
    OK(ga_cuda_vmm_export_fd((uint64_t)(uintptr_t)p, &fd, &base, &size));
    uint64_t u = (uint64_t)(uintptr_t)p;
    ck_assert(base <= u && u + GPU_CHILD_BYTES <= base + size);
    char sfd[16], ssize[32], soff[32];
    snprintf(sfd, sizeof sfd, "%d", fd);
    snprintf(ssize, sizeof ssize, "%zu", size);
    snprintf(soff, sizeof soff, "%llu", (unsigned long long)(u - base));
    char *argv[] = {(char *)self_path, "--import", sfd, ssize, soff, "90", "165", NULL};
    gpu_spawn_self(argv, fd);
    gpu_expect_bytes(u, GPU_CHILD_BYTES, 165); /* what the other process wrote */
    OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
    OK(gpuarena_destroy(a));

    OK(gpuarena_create(GPUARENA_DEVICE, 0, "expandable=true,ipc=false", &a));
    OK(gpuarena_alloc(a, MiB, GPUARENA_STREAM_HOST, &p));
    ck_assert_int_ne(ga_cuda_vmm_export_fd((uint64_t)(uintptr_t)p, &fd, &base, &size),
                     GPUARENA_SUCCESS);
    printf("blocks_reach_another_process: with ipc = false: %s\n", gpuarena_last_error());
    OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
    OK(gpuarena_destroy(a));
}
END_TEST

/* Two GPUs, where there are: each device has its own default arena and
 * its own total; a stream of one device is refused by the other's arena
 * with nothing changed; by default (peer_access) the other GPU has access
 * to a growable segment (the driver's word, cuMemGetAccess) and copies
 * the block's bytes in its own context; with peer_access = false it has
 * no access and the driver refuses that copy, which is why the key is on
 * by default. */
START_TEST(two_gpus)
{
    if (!gpus_at_least(2, "check_device: two_gpus"))
        return;
    gpuarena_t *a0, *a1;
    OK(gpuarena_get(GPUARENA_DEVICE, 0, &a0));
    OK(gpuarena_get(GPUARENA_DEVICE, 1, &a1));
    ck_assert_ptr_ne(a0, a1);
    gpuarena_total_t t0, t1, u0, u1;
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 0, &t0));
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 1, &t1));
    void *ctx1, *s1;
    OK(ga_cuda_primary_retain(1, &ctx1));
    OK(ga_cuda_set_current(ctx1));
    OK(ga_cuda_stream_create(true, &s1));
    void *p1;
    OK(gpuarena_alloc(a1, 64 * MiB, s1, &p1));
    fill_and_check(p1, 64 * MiB, 0x11, s1);
    OK(ga_cuda_set_current(gpu_ctx));
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 0, &u0));
    OK(gpuarena_stats_total(GPUARENA_DEVICE, 1, &u1));
    ck_assert_uint_eq(u0.reserved, t0.reserved);
    ck_assert_uint_ge(u1.reserved, t1.reserved + 64 * MiB);

    /* Device 1's stream on device 0's arena: refused, nothing changed. */
    void *p0, *q = (void *)0x1234;
    OK(gpuarena_alloc(a0, MiB, NULL, &p0));
    gpuarena_stats_t before, after;
    OK(gpuarena_stats(a0, &before));
    ck_assert_int_eq(gpuarena_alloc(a0, MiB, s1, &q), GPUARENA_ERR_INVALID_STREAM);
    ck_assert_ptr_eq(q, (void *)0x1234);
    ck_assert_int_eq(gpuarena_free(a0, p0, s1), GPUARENA_ERR_INVALID_STREAM);
    OK(gpuarena_stats(a0, &after));
    ck_assert_uint_eq(after.live_blocks, before.live_blocks);
    ck_assert_uint_eq(after.allocs, before.allocs);
    ck_assert_uint_eq(after.frees, before.frees);
    OK(gpuarena_free(a0, p0, NULL));
    OK(gpuarena_free(a1, p1, s1));

    bool can = false;
    OK(ga_cuda_can_access_peer(1, 0, &can));
    int vmm = 0;
    OK(ga_cuda_device_attr(0, GA_CUDA_ATTR_VMM_SUPPORTED, &vmm));
    if (can && vmm) {
        const char *opts[2] = {"expandable=true,peer_access=false", "expandable=true"};
        for (int k = 0; k < 2; k++) {
            gpuarena_t *a;
            OK(gpuarena_create(GPUARENA_DEVICE, 0, opts[k], &a));
            void *p;
            OK(gpuarena_alloc(a, 4 * MiB, GPUARENA_STREAM_HOST, &p));
            OK(ga_cuda_memset_d8((uint64_t)(uintptr_t)p, 0x77, 4 * MiB));
            OK(ga_cuda_ctx_sync());
            bool rw0 = false, rw1 = true;
            OK(ga_cuda_vmm_access((uint64_t)(uintptr_t)p, 0, &rw0));
            OK(ga_cuda_vmm_access((uint64_t)(uintptr_t)p, 1, &rw1));
            ck_assert(rw0);
            ck_assert_msg(rw1 == (k == 1), "%s: device 1 %s access", opts[k],
                          rw1 ? "has" : "has no");
            /* Device 1 copies the block into its own memory. */
            OK(ga_cuda_set_current(ctx1));
            void *d1;
            OK(gpuarena_alloc(a1, 4 * MiB, GPUARENA_STREAM_HOST, &d1));
            gpuarena_status_t st =
                ga_cuda_memcpy_dtod((uint64_t)(uintptr_t)d1, (uint64_t)(uintptr_t)p, 4 * MiB);
            if (k == 0) {
                ck_assert_int_ne(st, GPUARENA_SUCCESS);
                printf("two_gpus: without peer_access, device 1's copy: %s\n",
                       gpuarena_last_error());
            } else {
                OK(st);
                gpu_expect_bytes((uint64_t)(uintptr_t)d1 + 4 * MiB - 4096, 4096, 0x77);
            }
            OK(gpuarena_free(a1, d1, GPUARENA_STREAM_HOST));
            OK(ga_cuda_set_current(gpu_ctx));
            OK(gpuarena_free(a, p, GPUARENA_STREAM_HOST));
            OK(gpuarena_destroy(a));
        }
    } else {
        printf("two_gpus: device 1 cannot reach device 0's memory: peer_access not tested\n");
    }
    OK(ga_cuda_set_current(ctx1));
    ga_cuda_stream_destroy(s1);
    OK(ga_cuda_set_current(gpu_ctx));
    ga_cuda_primary_release(1);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--import") == 0)
        return import_child(argv);
    self_path = argv[0];
    if (!gpu_tests_begin("check_device"))
        return 77;
    Suite *s = suite_create("device");
    TCase *prov = tcase_create("provider");
    tcase_add_checked_fixture(prov, gpu_setup, gpu_teardown);
    tcase_add_test(prov, fixed_segments);
    tcase_add_test(prov, growable_segments_return_memory);
    tcase_add_test(prov, stream_identity);
    tcase_add_test(prov, events_and_waits);
    tcase_add_test(prov, capture_is_refused);
    tcase_add_test(prov, mem_free_reports);
    tcase_set_timeout(prov, 120);
    suite_add_tcase(s, prov);
    TCase *api = tcase_create("arena");
    tcase_add_checked_fixture(api, gpu_setup, gpu_teardown);
    tcase_add_test(api, arena_alloc_free_on_streams);
    tcase_add_test(api, arena_refuses_capturing_streams);
    tcase_add_test(api, zero_fill_with_no_stream_during_a_blocking_capture);
    tcase_add_test(api, capture_in_another_thread_survives);
    tcase_add_test(api, host_stream_device_and_pinned);
    tcase_add_test(api, arena_trim_returns_memory);
    tcase_add_test(api, arena_out_of_memory_then_trim);
    tcase_add_test(api, out_of_memory_and_trim_during_a_capture);
    tcase_add_test(api, arena_max_reserved);
    tcase_add_test(api, forked_child);
    tcase_add_test(api, blocks_reach_another_process);
    tcase_add_test(api, two_gpus);
    tcase_set_timeout(api, 300);
    suite_add_tcase(s, api);
    return gpu_tests_run(s);
}
