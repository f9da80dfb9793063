/*
 * check_direct.c - the block manager over a direct provider (the shape of
 * the driver-pool provider, `device.pool = driver'), without a GPU: the
 * test provider's direct mode (testprov.h) hands out blocks itself and
 * models the streams, so that every rule of lib/block/direct.c is checked
 * here and check_driverpool only has to show that the real pool does the
 * same.
 *
 * Checked: each request goes to the provider (no caching in the manager,
 * thread caches off), the counters and peaks, bad pointers (interior,
 * double, inside a freed block, foreign, and a remembered address handed
 * out again) get their statuses and change nothing, record_stream makes
 * the free's stream wait for the other streams before the provider's
 * free (and waits on the host when it cannot), trim and max_cached ask the
 * provider to release, the out-of-memory path releases and retries once
 * with the usual message, a failed provider free leaves the block live,
 * and the invariant checker sees a broken count.
 */
#include "block/block.h"
#include "block/internal.h"
#include "checkrun.h"
#include "config/config.h"
#include "errors.h"
#include "gpuarena.h"
#include "hostmem.h"
#include "testprov.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KI ((size_t)1 << 10)
#define MI ((size_t)1 << 20)

static ga_stream_t S(unsigned s)
{
    return (ga_stream_t){tp_handle(s), s};
}

typedef struct fx {
    tp_t tp;
    ga_bm_t *bm;
    ga_settings_t set;
} fx_t;

/* The defaults of a device arena (thread caches on: the manager must turn
 * them off), then OPTS. */
static fx_t *fx_new(const char *opts)
{
    fx_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    tp_init_direct(&f->tp);
    ga_config_defaults(GPUARENA_DEVICE, &f->set);
    if (opts)
        ck_assert_msg(ga_config_apply(&f->set, GPUARENA_DEVICE, opts, "test") == GPUARENA_SUCCESS,
                      "options %s: %s", opts, gpuarena_last_error());
    ck_assert_int_eq(ga_bm_create(&f->tp.base, &f->set, &f->bm), GPUARENA_SUCCESS);
    return f;
}

static gpuarena_stats_t fx_stats(fx_t *f)
{
    gpuarena_stats_t st;
    ga_bm_stats(f->bm, &st);
    return st;
}

static void fx_check(fx_t *f)
{
    ck_assert_msg(ga_bm_check(f->bm) == GPUARENA_SUCCESS, "check: %s", gpuarena_last_error());
}

static void *fx_alloc(fx_t *f, size_t size, unsigned s)
{
    void *p = NULL;
    tp_enqueue(&f->tp, s);
    gpuarena_status_t st = ga_bm_alloc(f->bm, size, S(s), &p);
    ck_assert_msg(st == GPUARENA_SUCCESS, "alloc %zu on %u: %s", size, s, gpuarena_last_error());
    ck_assert_ptr_nonnull(p);
    fx_check(f);
    return p;
}

static void fx_free(fx_t *f, void *p, unsigned s)
{
    tp_enqueue(&f->tp, s);
    ck_assert_msg(ga_bm_free(f->bm, p, S(s)) == GPUARENA_SUCCESS, "free: %s",
                  gpuarena_last_error());
    fx_check(f);
}

/* Nothing live, everything released, every event given back. */
static void fx_done(fx_t *f)
{
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    fx_check(f);
    ck_assert_uint_eq(fx_stats(f).live_blocks, 0);
    ck_assert_uint_eq(f->tp.base.live_maps, 0);
    ck_assert_uint_eq(f->tp.committed, 0);
    ga_bm_destroy(f->bm);
    ck_assert_uint_eq(f->tp.events_live, 0);
    free(f);
}

/* ------------------------------------------------------------------ */

START_TEST(every_request_goes_to_the_provider)
{
    fx_t *f = fx_new(NULL);
    ck_assert(f->bm->direct);
    ck_assert(!f->bm->set.thread_cache);
    /* Rounded to `round' (512) before the provider sees it. */
    void *a = fx_alloc(f, 100, 1);
    ck_assert_uint_eq(f->tp.direct_allocs, 1);
    ck_assert_uint_eq(f->tp.used, 512);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 100);
    ck_assert_uint_eq(st.in_use, 512);
    ck_assert_uint_eq(st.allocs, 1);
    ck_assert_uint_eq(st.live_blocks, 1);
    ck_assert_uint_eq(st.reserved, 0); /* the provider's figure (its stats hook) */
    ck_assert_uint_eq(st.cached, 0);
    ck_assert_uint_eq(st.segments, 0);
    /* Same-stream free then alloc: both reach the provider, which reuses. */
    for (int i = 0; i < 10; i++) {
        fx_free(f, a, 1);
        void *b = fx_alloc(f, 100, 1);
        ck_assert_ptr_eq(b, a);
    }
    ck_assert_uint_eq(f->tp.direct_allocs, 11);
    ck_assert_uint_eq(f->tp.direct_frees, 10);
    void *big = fx_alloc(f, 3 * MI + 1, 2);
    st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 100 + 3 * MI + 1);
    ck_assert_uint_eq(st.in_use, 512 + 3 * MI + 512);
    ck_assert_uint_eq(st.requested_peak, st.requested);
    ck_assert_uint_eq(st.in_use_peak, st.in_use);
    ck_assert_uint_eq(st.cache_hits + st.cache_misses, 0);
    fx_free(f, big, 2);
    fx_free(f, a, 1);
    st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.in_use_peak, 512 + 3 * MI + 512);
    ck_assert_uint_eq(st.allocs, 12);
    ck_assert_uint_eq(st.frees, 12);
    ck_assert_uint_eq(st.live_blocks, 0);
    ga_bm_reset_peaks(f->bm);
    st = fx_stats(f);
    ck_assert_uint_eq(st.in_use_peak, 0);
    ck_assert_uint_eq(st.cached_peak, 0);
    fx_done(f);
}
END_TEST

/* Statuses of bad pointers, and nothing changes: not the statistics, not
 * the provider. */
#define UNCHANGED(f, call, want)                                                                   \
    do {                                                                                           \
        gpuarena_stats_t before_ = fx_stats(f);                                                    \
        uint64_t calls_ = (f)->tp.calls;                                                           \
        gpuarena_status_t st_ = (call);                                                            \
        ck_assert_msg(st_ == (want), "%s: %d, want %d (%s)", #call, (int)st_, (int)(want),         \
                      gpuarena_last_error());                                                      \
        gpuarena_stats_t after_ = fx_stats(f);                                                     \
        ck_assert_msg(memcmp(&before_, &after_, sizeof after_) == 0, "%s changed the stats",       \
                      #call);                                                                      \
        ck_assert_uint_eq((f)->tp.calls, calls_);                                                  \
        fx_check(f);                                                                               \
    } while (0)

START_TEST(bad_pointers_change_nothing)
{
    fx_t *f = fx_new(NULL);
    char *x = fx_alloc(f, 4 * KI, 1), *y = fx_alloc(f, 8 * KI, 1);
    UNCHANGED(f, ga_bm_free(f->bm, x + 512, S(1)), GPUARENA_ERR_INTERIOR_POINTER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "inside a block"));
    UNCHANGED(f, ga_bm_free(f->bm, y + 1, S(2)), GPUARENA_ERR_INTERIOR_POINTER);
    UNCHANGED(f, ga_bm_record_stream(f->bm, x + 8, S(2)), GPUARENA_ERR_INTERIOR_POINTER);
    UNCHANGED(f, ga_bm_free(f->bm, (void *)0x1234000, S(1)), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "not handed out"));
    UNCHANGED(f, ga_bm_record_stream(f->bm, (void *)0x1234000, S(1)), GPUARENA_ERR_INVALID_POINTER);
    size_t req;
    UNCHANGED(f, ga_bm_lookup(f->bm, x + 4, &req, "t"), GPUARENA_ERR_INTERIOR_POINTER);
    ck_assert_int_eq(ga_bm_lookup(f->bm, x, &req, "t"), GPUARENA_SUCCESS);
    ck_assert_uint_eq(req, 4 * KI);

    fx_free(f, x, 1);
    UNCHANGED(f, ga_bm_free(f->bm, x, S(1)), GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "already freed"));
    UNCHANGED(f, ga_bm_free(f->bm, x, S(2)), GPUARENA_ERR_DOUBLE_FREE);
    UNCHANGED(f, ga_bm_record_stream(f->bm, x, S(2)), GPUARENA_ERR_DOUBLE_FREE);
    UNCHANGED(f, ga_bm_free(f->bm, x + 512, S(1)), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "freed block"));

    /* The provider hands the address out again: it is live, and a free of
     * it is good once, then a double free again. */
    char *z = fx_alloc(f, 4 * KI, 3);
    ck_assert_ptr_eq(z, x);
    UNCHANGED(f, ga_bm_free(f->bm, z + 100, S(3)), GPUARENA_ERR_INTERIOR_POINTER);
    fx_free(f, z, 3);
    UNCHANGED(f, ga_bm_free(f->bm, z, S(3)), GPUARENA_ERR_DOUBLE_FREE);

    /* Only the last GA_DIRECT_FREED frees are remembered: older ones read
     * as foreign. */
    for (unsigned i = 0; i < GA_DIRECT_FREED; i++)
        fx_free(f, fx_alloc(f, 512, 1), 1);
    UNCHANGED(f, ga_bm_free(f->bm, x, S(1)), GPUARENA_ERR_INVALID_POINTER);
    fx_free(f, y, 1);
    fx_done(f);
}
END_TEST

START_TEST(record_stream_waits_before_the_free)
{
    fx_t *f = fx_new(NULL);
    void *p = fx_alloc(f, 64 * KI, 1);
    tp_enqueue(&f->tp, 2);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(3)), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(1)), GPUARENA_SUCCESS); /* its own */
    tp_enqueue(&f->tp, 2);
    tp_enqueue(&f->tp, 3);
    uint64_t pos2 = f->tp.enqueued[2], pos3 = f->tp.enqueued[3];
    /* A recorded stream being captured: its event would go into the
     * graph; refused, before anything changes. */
    f->tp.capturing = 1u << 3;
    UNCHANGED(f, ga_bm_free(f->bm, p, S(1)), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    f->tp.capturing = 0;
    fx_free(f, p, 1);
    /* When the provider's free was enqueued on stream 1, stream 1 waited
     * for all work of streams 2 and 3 so far. */
    ck_assert_uint_eq(f->tp.free_waited[2], pos2);
    ck_assert_uint_eq(f->tp.free_waited[3], pos3);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.events_recorded, 2);
    ck_assert_uint_eq(st.cross_stream_waits, 2);
    ck_assert_uint_eq(f->tp.syncs, 0); /* the host never waited */
    ck_assert_uint_eq(f->tp.events_live, 0);
    /* Without record_stream, no wait and no event. */
    void *q = fx_alloc(f, 64 * KI, 4);
    tp_enqueue(&f->tp, 5);
    fx_free(f, q, 4);
    ck_assert_uint_eq(f->tp.free_waited[5], 0);
    ck_assert_uint_eq(fx_stats(f).events_recorded, 2);
    fx_done(f);
}
END_TEST

/* An event that cannot be created, recorded or waited on, or a stream
 * that record_stream had no host memory to note: the block is held from
 * the pool, never an early reuse, and given to it once trim (or the
 * out-of-memory path) has waited for the device.  The free itself waits
 * for nothing: a wait for the device there blocked the host and broke
 * any capture in progress (the driver refuses cuCtxSynchronize then). */
START_TEST(record_stream_failure_holds_the_block)
{
    /* Unnoted, another thread's stream (a handle whose id is not the one
     * recorded: CU_STREAM_PER_THREAD freed on another thread), then
     * event_create, event_record, stream_wait failing. */
    for (unsigned nth = 0; nth <= 4; nth++) {
        fx_t *f = fx_new(NULL);
        void *p = fx_alloc(f, 64 * KI, 1), *q = fx_alloc(f, 64 * KI, 1);
        ck_assert_int_eq(ga_bm_record_stream(f->bm, q, S(2)), GPUARENA_SUCCESS);
        atomic_store(&ga_hostmem_fail, nth == 0);
        ga_stream_t use = nth == 1 ? (ga_stream_t){tp_handle(2), 77} : S(2);
        ck_assert_int_eq(ga_bm_record_stream(f->bm, p, use), GPUARENA_SUCCESS);
        atomic_store(&ga_hostmem_fail, false);
        tp_enqueue(&f->tp, 2);
        uint64_t frees = f->tp.direct_frees;
        f->tp.fail_at = nth > 1 ? f->tp.calls + nth - 1 : 0;
        f->tp.capturing = 1u << 3; /* a capture elsewhere, undisturbed */
        fx_free(f, p, 1);
        f->tp.capturing = 0;
        f->tp.fail_at = 0;
        ck_assert_uint_eq(f->tp.disturbed, 0);
        ck_assert_uint_eq(f->tp.syncs, 0);
        ck_assert_uint_eq(f->tp.direct_frees, frees); /* held */
        ck_assert_uint_eq(f->tp.events_live, 0);
        gpuarena_stats_t st = fx_stats(f);
        ck_assert_uint_eq(st.live_blocks, 1);
        ck_assert_uint_eq(st.retired_cached, 64 * KI);
        /* A trim that a capture refuses keeps it held. */
        f->tp.capturing = 1u << 3;
        ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_ERR_STREAM_CAPTURE);
        f->tp.capturing = 0;
        f->tp.disturbed = 0;
        ck_assert_uint_eq(f->tp.direct_frees, frees);
        fx_check(f);
        ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
        ck_assert_msg(f->tp.direct_frees == frees + 1 && f->tp.completed[2] == f->tp.enqueued[2],
                      "held block not given back after the wait (case %u)", nth);
        ck_assert_uint_eq(fx_stats(f).retired_cached, 0);
        /* Released by that trim: the device was waited for again once
         * the held block's free was queued. */
        ck_assert_uint_eq(f->tp.committed, 64 * KI);
        ck_assert_uint_eq(f->tp.syncs, 2);
        fx_check(f);
        fx_free(f, q, 1);
        fx_done(f);
    }
}
END_TEST

/* A block of SIZE bytes on stream 1, recorded on stream 2 with no host
 * memory to note it, and freed on stream 1: held. */
static void *held_block(fx_t *f, size_t size)
{
    void *p = fx_alloc(f, size, 1);
    atomic_store(&ga_hostmem_fail, true);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
    atomic_store(&ga_hostmem_fail, false);
    fx_free(f, p, 1);
    ck_assert_uint_eq(fx_stats(f).retired_cached, size);
    return p;
}

/* The out-of-memory path gives the held blocks to the pool after its
 * wait for the device, before it releases the pool's cache and retries. */
START_TEST(out_of_memory_frees_the_held_blocks)
{
    fx_t *f = fx_new(NULL);
    f->tp.capacity = 2 * MI;
    (void)held_block(f, 2 * MI);
    void *q = fx_alloc(f, 3 * MI / 2, 3); /* only with the held block's memory */
    ck_assert_uint_eq(f->tp.syncs, 2);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.retired_cached, 0);
    ck_assert_uint_eq(st.oom_retries, 1);
    fx_free(f, q, 3);
    fx_done(f);
}
END_TEST

/* A held block is this arena's however many frees came since: a second
 * free of it is a double free, not a foreign pointer (the ring of the
 * last frees forgets it). */
START_TEST(held_block_freed_again)
{
    fx_t *f = fx_new(NULL);
    void *p = held_block(f, 64 * KI);
    for (unsigned i = 0; i < GA_DIRECT_FREED + 8; i++)
        fx_free(f, fx_alloc(f, 4 * KI, 1), 1);
    ck_assert_int_eq(ga_bm_free(f->bm, p, S(1)), GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_int_eq(ga_bm_free(f->bm, (char *)p + 512, S(1)), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "inside a freed block"));
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_ERR_DOUBLE_FREE);
    fx_done(f);
}
END_TEST

/* Held blocks at the manager's destruction go to the pool (after a wait
 * for the device): the pool gives its memory back only once every block
 * is freed. */
START_TEST(held_blocks_go_at_destroy)
{
    fx_t *f = fx_new(NULL);
    (void)held_block(f, 64 * KI);
    ck_assert_uint_eq(f->tp.base.live_maps, 1);
    ga_bm_destroy(f->bm);
    ck_assert_uint_eq(f->tp.base.live_maps, 0);
    ck_assert_uint_eq(f->tp.syncs, 1);
    free(f);
}
END_TEST

START_TEST(failed_provider_free_leaves_the_block_live)
{
    fx_t *f = fx_new(NULL);
    void *p = fx_alloc(f, 64 * KI, 1);
    gpuarena_stats_t before = fx_stats(f);
    f->tp.fail_at = f->tp.calls + 1;
    tp_enqueue(&f->tp, 1);
    ck_assert_int_eq(ga_bm_free(f->bm, p, S(1)), GPUARENA_ERR_DRIVER);
    f->tp.fail_at = 0;
    gpuarena_stats_t after = fx_stats(f);
    ck_assert(memcmp(&before, &after, sizeof after) == 0);
    fx_check(f);
    fx_free(f, p, 1);
    fx_done(f);
}
END_TEST

START_TEST(trim_and_max_cached_release_the_pool)
{
    fx_t *f = fx_new(NULL);
    void *v[8];
    for (int i = 0; i < 8; i++)
        v[i] = fx_alloc(f, (size_t)(i + 1) * MI, 1);
    for (int i = 0; i < 8; i++)
        fx_free(f, v[i], 1);
    ck_assert_uint_eq(f->tp.committed, 36 * MI); /* the pool caches */
    ck_assert_uint_eq(f->tp.trims, 0);
    /* trim waits for the GPU, then releases down to KEEP cached bytes. */
    uint64_t syncs = f->tp.syncs;
    ck_assert_int_eq(ga_bm_trim(f->bm, 20 * MI, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.syncs, syncs + 1);
    ck_assert_uint_eq(f->tp.trims, 1);
    ck_assert_uint_le(f->tp.committed, 20 * MI);
    /* Live blocks are never released. */
    void *live = fx_alloc(f, 5 * MI, 1);
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.committed, 5 * MI);
    ck_assert_uint_ge(fx_stats(f).trims, 2);
    fx_free(f, live, 1);
    fx_done(f);

    /* max_cached: a free beyond the cap releases at once, no waiting. */
    f = fx_new("max_cached=2M");
    for (int i = 0; i < 4; i++)
        v[i] = fx_alloc(f, MI, 1);
    syncs = f->tp.syncs;
    for (int i = 0; i < 4; i++) {
        fx_free(f, v[i], 1);
        ck_assert_uint_le(f->tp.committed - f->tp.used, 2 * MI);
    }
    ck_assert_uint_eq(f->tp.syncs, syncs);
    ck_assert_uint_ge(f->tp.trims, 1);
    fx_done(f);
}
END_TEST

/* Out of memory: what the pool caches of completed frees is released and
 * the request retried, with no wait; where that is not enough (a free
 * the pool has not seen complete), once every stream's work is waited
 * for, again; then the status and the message. */
START_TEST(out_of_memory_releases_and_retries_once)
{
    fx_t *f = fx_new(NULL);
    f->tp.capacity = 8 * MI;
    void *a = fx_alloc(f, 4 * MI, 1), *b = fx_alloc(f, 2 * MI, 1);
    fx_free(f, b, 1); /* 2M cached, 2M never mapped */
    /* 4M fits only once the cached 2M is released: no wait for that. */
    uint64_t syncs = f->tp.syncs;
    void *c = fx_alloc(f, 4 * MI, 2);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_uint_eq(st.oom_failures, 0);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    ck_assert_uint_eq(f->tp.trims, 1);
    /* 6M, with C's 4M free (seen complete) and A's 4M freed with no
     * stream, which the test pool sees complete only after a wait for
     * every stream: the first release is not enough, the wait is made. */
    fx_free(f, c, 2);
    ck_assert_int_eq(ga_bm_free(f->bm, a, (ga_stream_t){GPUARENA_STREAM_HOST, GA_STREAM_ANY}),
                     GPUARENA_SUCCESS);
    void *e = fx_alloc(f, 6 * MI, 1);
    ck_assert_uint_ge(f->tp.syncs, syncs + 1);
    st = fx_stats(f);
    ck_assert_uint_eq(st.oom_retries, 2);
    ck_assert_uint_eq(st.oom_failures, 0);
    fx_free(f, e, 1);
    a = fx_alloc(f, 4 * MI, 1); /* E's 6M released first, no wait */
    c = fx_alloc(f, 4 * MI, 2);
    /* Nothing left to release: one retry, then the status and message. */
    void *d = (void *)0x1;
    tp_enqueue(&f->tp, 1);
    ck_assert_int_eq(ga_bm_alloc(f->bm, MI, S(1), &d), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_eq(d, (void *)0x1);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "test pool: out of memory allocating "
                                                        "1048576 bytes: 8388608 in use, 8388608 "
                                                        "reserved, 0 cached"));
    st = fx_stats(f);
    ck_assert_uint_eq(st.oom_retries, 4);
    ck_assert_uint_eq(st.oom_failures, 1);
    ck_assert_uint_eq(st.last_oom_request, MI);
    ck_assert_uint_eq(st.live_blocks, 2);
    fx_check(f);
    fx_free(f, a, 1);
    fx_free(f, c, 2);
    fx_done(f);
}
END_TEST

START_TEST(checker_sees_a_broken_count)
{
    fx_t *f = fx_new(NULL);
    void *p = fx_alloc(f, 4 * KI, 1);
    f->tp.base.live_maps++;
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "provider holds"));
    f->tp.base.live_maps--;
    f->bm->c.in_use += 512;
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_ERR_CORRUPT);
    f->bm->c.in_use -= 512;
    fx_check(f);
    fx_free(f, p, 1);
    fx_done(f);
}
END_TEST

/* Every provider call of a short sequence made to fail in turn: each
 * operation either succeeds or fails with nothing changed, the checker
 * passes after every step, and at the end nothing is left with the
 * provider.  Returns the number of calls the sequence makes. */
static uint64_t fault_run(uint64_t fail_at, const char *opts)
{
    fx_t *f = fx_new(opts);
    f->tp.capacity = 64 * MI;
    f->tp.fail_at = fail_at ? f->tp.calls + fail_at : 0;
    uint64_t start = f->tp.calls;
    void *live[16] = {0};
    unsigned stream[16] = {0};
    static const size_t sizes[] = {100, 4 * KI, MI, 3 * MI + 1, 512, 40 * MI, 8 * KI, 2 * MI};
    for (unsigned i = 0; i < 16; i++) {
        unsigned s = 1 + i % 3;
        tp_enqueue(&f->tp, s);
        gpuarena_stats_t before = fx_stats(f);
        gpuarena_status_t st = ga_bm_alloc(f->bm, sizes[i % 8], S(s), &live[i]);
        if (st != GPUARENA_SUCCESS) {
            gpuarena_stats_t after = fx_stats(f);
            /* Only the out-of-memory counters may move. */
            after.oom_retries = before.oom_retries;
            after.oom_failures = before.oom_failures;
            after.last_oom_request = before.last_oom_request;
            after.device_free = before.device_free;
            after.trims = before.trims;
            ck_assert(memcmp(&before, &after, sizeof after) == 0);
            live[i] = NULL;
        }
        stream[i] = s;
        fx_check(f);
        if (live[i] && i % 4 == 1)
            (void)ga_bm_record_stream(f->bm, live[i], S(s % 3 + 1));
        if (i % 3 == 2 && live[i - 1]) {
            tp_enqueue(&f->tp, stream[i - 1]);
            if (ga_bm_free(f->bm, live[i - 1], S(stream[i - 1])) == GPUARENA_SUCCESS)
                live[i - 1] = NULL;
            fx_check(f);
        }
        if (i == 9)
            (void)ga_bm_trim(f->bm, MI, true);
        fx_check(f);
    }
    uint64_t calls = f->tp.calls - start;
    f->tp.fail_at = 0;
    for (unsigned i = 0; i < 16; i++)
        if (live[i])
            fx_free(f, live[i], stream[i]);
    fx_done(f);
    return calls;
}

START_TEST(every_provider_call_fails_in_turn)
{
    static const char *const opts[] = {NULL, "max_cached=1M", "round=4K,zero=true"};
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        uint64_t n = fault_run(0, opts[o]);
        ck_assert_uint_gt(n, 20);
        for (uint64_t k = 1; k <= n; k++)
            fault_run(k, opts[o]);
    }
}
END_TEST

/* The manager is destroyed with blocks live (what gpuarena_destroy
 * refuses, and what happens to default arenas at exit): nothing leaks on
 * the host (the sanitizer builds check). */
START_TEST(destroy_with_live_blocks)
{
    fx_t *f = fx_new(NULL);
    void *p = fx_alloc(f, 4 * KI, 1);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
    (void)fx_alloc(f, 8 * KI, 2);
    ga_bm_destroy(f->bm);
    free(f);
}
END_TEST

/* The legacy stream, named without a capture check (GA_UNCHECKED): every
 * direct allocation and free reaches the driver's pool on it, so each
 * asks stream_check first, and a refusal leaves the pool untouched. */
START_TEST(unchecked_stream_is_checked_first)
{
    fx_t *f = fx_new(NULL);
    void *p = NULL, *r = NULL;
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 64 * KI, S(1), &p, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 1);
    f->tp.capturing = 1u << 1;
    uint64_t allocs = f->tp.direct_allocs, frees = f->tp.direct_frees;
    gpuarena_stats_t before = fx_stats(f);
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 64 * KI, S(1), &r, true), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, S(1), true), GPUARENA_ERR_STREAM_CAPTURE);
    gpuarena_stats_t after = fx_stats(f);
    ck_assert_uint_eq(after.live_blocks, before.live_blocks);
    ck_assert_uint_eq(after.allocs, before.allocs);
    ck_assert_uint_eq(after.frees, before.frees);
    ck_assert_uint_eq(f->tp.direct_allocs, allocs);
    ck_assert_uint_eq(f->tp.direct_frees, frees);
    ck_assert_uint_eq(f->tp.checks, 3);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, S(1), true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.direct_frees, frees + 1);
    fx_done(f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {every_request_goes_to_the_provider,
                            bad_pointers_change_nothing,
                            record_stream_waits_before_the_free,
                            record_stream_failure_holds_the_block,
                            held_blocks_go_at_destroy,
                            out_of_memory_frees_the_held_blocks,
                            held_block_freed_again,
                            failed_provider_free_leaves_the_block_live,
                            trim_and_max_cached_release_the_pool,
                            out_of_memory_releases_and_retries_once,
                            checker_sees_a_broken_count,
                            every_provider_call_fails_in_turn,
                            destroy_with_live_blocks,
                            unchecked_stream_is_checked_first};
    return ga_check_tests("direct", 0, tests, sizeof tests / sizeof tests[0]);
}
