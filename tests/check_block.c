/*
 * check_block.c - unit tests of the block manager: fit, split, merge,
 * rounding, size classes, max_split, the stream-ordered reuse rules,
 * trim and the caps, zero-fill, statistics, the out-of-memory path,
 * provider faults, and bad input through the public API.
 *
 * Most tests drive ga_bm_* over the test provider (testprov.h), where the
 * test decides when stream work completes; the rest go through the public
 * API with sim and host arenas.  Every test asserts on addresses and on
 * statistics, so that a change of behaviour fails it.
 */
#include "arena.h"
#include "block/block.h"
#include "block/internal.h"
#include "block/tcache.h"
#include "checkrun.h"
#include "config/config.h"
#include "errors.h"
#include "gpuarena.h"
#include "hostmem.h"
#include "testprov.h"
#include "testrand.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KI ((size_t)1 << 10)
#define MI ((size_t)1 << 20)

/* Stream number HOST is GPUARENA_STREAM_HOST, as ga_arena_stream makes it. */
/* The block records' slabs come from aligned_alloc: a test can make
 * the next ones fail (every other caller is served as usual). */
static bool records_fail;
void *aligned_alloc(size_t alignment, size_t size)
{
    void *p = NULL;
    if (records_fail)
        return NULL;
    return posix_memalign(&p, alignment < sizeof p ? sizeof p : alignment, size) ? NULL : p;
}

/* Whether records_fail works here: valgrind replaces this aligned_alloc
 * with its own, which never fails. */
static bool records_can_fail(void)
{
    records_fail = true;
    void *p = aligned_alloc(64, 64);
    records_fail = false;
    free(p);
    return p == NULL;
}

#define HOST 99u

static ga_stream_t S(unsigned s)
{
    if (s == HOST)
        return (ga_stream_t){GPUARENA_STREAM_HOST, GA_STREAM_ANY};
    return (ga_stream_t){tp_handle(s), s};
}

/* A block manager over the test provider. */
typedef struct fx {
    tp_t tp;
    ga_bm_t *bm;
    ga_settings_t set;
} fx_t;

/* Defaults of a sim arena, fixed segments, no thread cache, then OPTS,
 * over a test provider whose memory is host-visible or not (the manager
 * reads that once, at creation, as from a real provider). */
static fx_t *fx_new_memory(bool growable, size_t granule, const char *opts, bool host_visible)
{
    fx_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    tp_init(&f->tp, growable, granule);
    f->tp.base.host_visible = host_visible;
    ga_config_defaults(GPUARENA_SIM, &f->set);
    f->set.expandable = growable;
    f->set.thread_cache = false;
    if (opts)
        ck_assert_msg(ga_config_apply(&f->set, GPUARENA_SIM, opts, "test") == GPUARENA_SUCCESS,
                      "options %s: %s", opts, gpuarena_last_error());
    ck_assert_int_eq(ga_bm_create(&f->tp.base, &f->set, &f->bm), GPUARENA_SUCCESS);
    return f;
}

/* The same over device-like memory. */
static fx_t *fx_new(bool growable, size_t granule, const char *opts)
{
    return fx_new_memory(growable, granule, opts, false);
}

static void *fx_alloc(fx_t *f, size_t size, unsigned s)
{
    void *p = NULL;
    if (s != HOST)
        tp_enqueue(&f->tp, s);
    gpuarena_status_t st = ga_bm_alloc(f->bm, size, S(s), &p);
    ck_assert_msg(st == GPUARENA_SUCCESS, "alloc %zu on %u: %s", size, s, gpuarena_last_error());
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    return p;
}

static void fx_free(fx_t *f, void *p, unsigned s)
{
    if (s != HOST)
        tp_enqueue(&f->tp, s);
    ck_assert_msg(ga_bm_free(f->bm, p, S(s)) == GPUARENA_SUCCESS, "free: %s",
                  gpuarena_last_error());
    ck_assert_msg(ga_bm_check(f->bm) == GPUARENA_SUCCESS, "check: %s", gpuarena_last_error());
}

static gpuarena_stats_t fx_stats(fx_t *f)
{
    gpuarena_stats_t st;
    ga_bm_stats(f->bm, &st);
    return st;
}

/* Free everything the test left, trim to nothing, and verify that the
 * provider got every mapping and event back. */
static void fx_done(fx_t *f)
{
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(f->tp.base.live_maps, 0);
    ck_assert_uint_eq(f->tp.committed, 0);
    ck_assert_int_eq(ga_bm_destroy(f->bm), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.events_live, 0);
    ck_assert_uint_eq(f->tp.bad_handles, 0); /* nothing queued on "no stream" */
    free(f);
}

#define U(p) ((uintptr_t)(p))

/* ------------------------------------------------------------------ */
/* Fit, split, merge, rounding, classes, max_split.                    */

START_TEST(best_fit_picks_smallest_adequate)
{
    fx_t *f = fx_new(false, 64 * KI, NULL);
    /* Free holes of 1K, 4K and 2K separated by live blocks. */
    void *a = fx_alloc(f, 1 * KI, 1), *x1 = fx_alloc(f, 512, 1);
    void *b = fx_alloc(f, 4 * KI, 1), *x2 = fx_alloc(f, 512, 1);
    void *c = fx_alloc(f, 2 * KI, 1), *x3 = fx_alloc(f, 512, 1);
    ck_assert_uint_eq(U(x1), U(a) + 1 * KI); /* carved in address order */
    ck_assert_uint_eq(U(c), U(b) + 4 * KI + 512);
    ck_assert_uint_eq(U(x2), U(b) + 4 * KI);
    ck_assert_uint_eq(U(x3), U(c) + 2 * KI);
    fx_free(f, a, 1);
    fx_free(f, b, 1);
    fx_free(f, c, 1);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 4); /* three holes and the tail */
    ck_assert_ptr_eq(fx_alloc(f, 2 * KI, 1), c);
    ck_assert_ptr_eq(fx_alloc(f, 700, 1), a); /* rounds to 1K: the 1K hole */
    /* 3K from the 4K hole: split, and the 1K remainder is free and
     * reusable right behind it. */
    void *b3 = fx_alloc(f, 3 * KI, 1);
    ck_assert_ptr_eq(b3, b);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 2);
    ck_assert_uint_eq(U(fx_alloc(f, 1 * KI, 1)), U(b) + 3 * KI);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 1);
    ga_bm_destroy(f->bm);
    free(f);
}
END_TEST

START_TEST(merge_on_free)
{
    fx_t *f = fx_new(false, 64 * KI, NULL);
    void *a = fx_alloc(f, 512, 1), *b = fx_alloc(f, 512, 1), *c = fx_alloc(f, 512, 1);
    void *d = fx_alloc(f, 512, 1);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 1);
    fx_free(f, a, 1);
    fx_free(f, c, 1);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 3);
    fx_free(f, b, 1); /* joins a and c */
    ck_assert_uint_eq(fx_stats(f).free_blocks, 2);
    ck_assert_ptr_eq(fx_alloc(f, 1536, 1), a);
    ck_assert_uint_eq(fx_stats(f).free_blocks, 1);
    /* Freeing everything leaves the segment whole. */
    fx_free(f, a, 1);
    fx_free(f, d, 1);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.free_blocks, 1);
    ck_assert_ptr_eq(fx_alloc(f, 1 * MI, 1), a);
    fx_free(f, a, 1);
    fx_done(f);
}
END_TEST

START_TEST(rounding)
{
    fx_t *f = fx_new(false, 64 * KI, "round=4K");
    void *a = fx_alloc(f, 1, 1), *b = fx_alloc(f, 4097, 1), *c = fx_alloc(f, 4096, 1);
    ck_assert_uint_eq(U(b) - U(a), 4 * KI);
    ck_assert_uint_eq(U(c) - U(b), 8 * KI);
    ck_assert_uint_eq(U(a) % (4 * KI), 0);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 1 + 4097 + 4096);
    ck_assert_uint_eq(st.in_use, 16 * KI);
    fx_free(f, a, 1);
    fx_free(f, b, 1);
    fx_free(f, c, 1);
    fx_done(f);
}
END_TEST

START_TEST(small_and_large_segments)
{
    fx_t *f = fx_new(false, 64 * KI,
                     "small_max=64K,thread_cache_max=64K,small_segment=256K,large_segment=1M");
    void *s1 = fx_alloc(f, 64 * KI, 1);
    void *l1 = fx_alloc(f, 64 * KI + 512, 1);
    void *s2 = fx_alloc(f, 512, 1);
    void *l2 = fx_alloc(f, 128 * KI, 1);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.segments, 2);
    ck_assert_uint_eq(st.reserved, 256 * KI + 1 * MI);
    /* Each class fills its own segment in address order. */
    ck_assert_uint_eq(U(s2), U(s1) + 64 * KI);
    ck_assert_uint_eq(U(l2), U(l1) + 64 * KI + 512);
    ck_assert(U(l1) >= U(s1) + 256 * KI || U(l1) + 1 * MI <= U(s1));
    /* A large request never takes small-segment space, even when the
     * small segment has room for it. */
    fx_free(f, s1, 1);
    fx_free(f, s2, 1);
    void *big = fx_alloc(f, 192 * KI, 1); /* large: 192K > small_max */
    ck_assert(U(big) >= U(l1) && U(big) < U(l1) + 1 * MI);
    fx_free(f, big, 1);
    fx_free(f, l1, 1);
    fx_free(f, l2, 1);
    fx_done(f);
}
END_TEST

/* Fixed segments, the large ones 4M, and max_split 1M. */
#define SPLIT_OPTS                                                                                 \
    "small_max=64K,thread_cache_max=64K,small_segment=256K,large_segment=4M,max_split=1M"

START_TEST(max_split_blocks_are_whole)
{
    fx_t *f = fx_new(false, 64 * KI, SPLIT_OPTS);
    /* A request above max_split gets a segment of its own size, taken
     * whole; when freed, it is not split for a smaller request. */
    void *big = fx_alloc(f, 3 * MI, 1);
    fx_free(f, big, 1);
    gpuarena_stats_t st = fx_stats(f);
    uint64_t reserved = st.reserved;
    void *m = fx_alloc(f, 512 * KI, 1); /* <= max_split: not from the big block */
    ck_assert(U(m) < U(big) || U(m) >= U(big) + 3 * MI);
    st = fx_stats(f);
    ck_assert_uint_gt(st.reserved, reserved);
    /* ... and a request above max_split takes it whole, unsplit. */
    void *big2 = fx_alloc(f, 2 * MI, 1);
    ck_assert_ptr_eq(big2, big);
    gpuarena_stats_t st2 = fx_stats(f);
    ck_assert_uint_eq(st2.in_use - st.in_use, reserved);
    ck_assert_uint_eq(st2.free_blocks, st.free_blocks - 1);
    fx_free(f, big2, 1);
    fx_free(f, m, 1);
    fx_done(f);
}
END_TEST

/* A request at most max_split must not be given a whole segment larger
 * than max_split: it would pin a large_segment for a small block. */
START_TEST(max_split_small_request_on_new_segment)
{
    fx_t *f = fx_new(
        false, 64 * KI,
        "small_max=64K,thread_cache_max=64K,small_segment=256K,large_segment=8M,max_split=1M");
    void *m = fx_alloc(f, 256 * KI, 1);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_le(st.in_use, 1 * MI);
    ck_assert_uint_le(st.reserved, 1 * MI);
    void *n = fx_alloc(f, 256 * KI, 1);
    st = fx_stats(f);
    ck_assert_uint_eq(st.in_use, 512 * KI);
    fx_free(f, m, 1);
    fx_free(f, n, 1);
    fx_done(f);
}
END_TEST

/* On a growable segment, a request at most max_split that no free block
 * serves grows the segment; the new memory merges with the free block
 * before it (above max_split), and the request took the merged block
 * whole: 3M asked, 14M handed out.  It gets the new memory instead. */
START_TEST(max_split_growable_request_takes_new_memory)
{
    fx_t *f = fx_new(true, 2 * MI, "max_split=4M");
    void *big = fx_alloc(f, 10 * MI, HOST);
    fx_free(f, big, HOST);
    void *m = fx_alloc(f, 3 * MI, HOST);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.in_use, 3 * MI);
    ck_assert_uint_eq(st.reserved, 14 * MI);
    /* Not carved from the cached block above max_split. */
    ck_assert(U(m) >= U(big) + 10 * MI);
    /* Which a request above max_split still takes whole. */
    void *b2 = fx_alloc(f, 8 * MI, HOST);
    ck_assert_ptr_eq(b2, big);
    ck_assert_uint_eq(fx_stats(f).in_use, 13 * MI);
    fx_free(f, b2, HOST);
    fx_free(f, m, HOST);
    fx_done(f);
}
END_TEST

/* A request above max_split takes a free block above it whole, so only
 * one at most max_split bytes larger: a 3M request under max_split 1M
 * took a free 16M block whole (fixed segments), and a 6M request under 4M
 * a free 64M one (growable segments, where the new memory merged into it
 * is carved as for a smaller request). */
START_TEST(max_split_large_request_takes_a_close_block)
{
    fx_t *f = fx_new(false, 64 * KI, SPLIT_OPTS);
    void *big = fx_alloc(f, 16 * MI, 1);
    fx_free(f, big, 1);
    void *m = fx_alloc(f, 3 * MI, 1);
    ck_assert_uint_eq(fx_stats(f).in_use, 3 * MI);
    ck_assert(U(m) < U(big) || U(m) >= U(big) + 16 * MI);
    void *b2 = fx_alloc(f, 15 * MI + 512 * KI, 1); /* within 1M of 16M: taken whole */
    ck_assert_ptr_eq(b2, big);
    ck_assert_uint_eq(fx_stats(f).in_use, 19 * MI);
    fx_free(f, b2, 1);
    fx_free(f, m, 1);
    fx_done(f);

    f = fx_new(true, 2 * MI, "max_split=4M");
    big = fx_alloc(f, 64 * MI, HOST);
    fx_free(f, big, HOST);
    m = fx_alloc(f, 6 * MI, HOST);
    ck_assert_uint_eq(fx_stats(f).in_use, 6 * MI);
    ck_assert(U(m) >= U(big) + 64 * MI);
    fx_free(f, m, HOST);
    fx_done(f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Stream-ordered reuse.                                               */

/* 64K segments of two 32K blocks: an allocation that misses maps a new
 * segment, so addresses tell where a block came from. */
#define SEG_OPTS "small_max=64K,thread_cache_max=64K,small_segment=64K,large_segment=64K"

/* P on stream 1 freed, with stream 1 asked for a sweep by a miss on
 * stream 2, which got Q in a new segment; the sweep is then recorded by
 * a free on stream 1.  Returns P. */
static void *freed_on_1_then_swept(fx_t *f, void **keep, void **q, void **q2)
{
    void *p = fx_alloc(f, 32 * KI, 1);
    *keep = fx_alloc(f, 32 * KI, 1); /* segment 1 full */
    fx_free(f, p, 1);
    *q = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_ne(*q, p); /* the free on 1 has not completed */
    *q2 = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_ne(*q2, p);
    /* Same stream: reuse at once, with no event. */
    uint64_t events = fx_stats(f).events_recorded;
    void *r = fx_alloc(f, 32 * KI, 1);
    ck_assert_ptr_eq(r, p);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    fx_free(f, r, 1); /* stream 1 was wanted: the sweep is recorded here */
    ck_assert_uint_eq(fx_stats(f).events_recorded, events + 1);
    return p;
}

/* Growable segments: an allocation on a stream takes a fit from its own
 * pool before one of ANY, even a closer one, and leaves ANY to the
 * streams that cannot use its pool (and to no stream).  Best fit across
 * both drained ANY into the busiest stream's pool, and the others grew
 * the arena: one stream and no stream mixed at random, frees on the
 * allocation's stream, reserved 2.99 GiB for a peak request near 100 MiB
 * after 3 million operations, against 320 MiB now. */
START_TEST(own_pool_before_any)
{
    fx_t *f = fx_new(true, 2 * MI, NULL);
    void *x = fx_alloc(f, 4 * MI, HOST);
    void *k1 = fx_alloc(f, 2 * MI, HOST);
    void *y = fx_alloc(f, 8 * MI, 1);
    void *k2 = fx_alloc(f, 2 * MI, HOST);
    fx_free(f, x, HOST); /* ANY: 4M */
    fx_free(f, y, 1);    /* stream 1's pool: 8M */
    uint64_t reserved = fx_stats(f).reserved;
    void *a = fx_alloc(f, 3 * MI, 1);
    ck_assert(U(a) >= U(y) && U(a) < U(y) + 8 * MI);
    void *b = fx_alloc(f, 3 * MI, HOST);
    ck_assert(U(b) >= U(x) && U(b) < U(x) + 4 * MI);
    ck_assert_uint_eq(fx_stats(f).reserved, reserved);
    fx_free(f, a, 1);
    fx_free(f, b, HOST);
    fx_free(f, k1, HOST);
    fx_free(f, k2, HOST);
    tp_complete(&f->tp, 1);
    fx_done(f);
}
END_TEST

START_TEST(reuse_same_stream_at_once)
{
    fx_t *f = fx_new(false, 64 * KI, NULL);
    void *p = fx_alloc(f, 4 * KI, 3);
    fx_free(f, p, 3);
    ck_assert_ptr_eq(fx_alloc(f, 4 * KI, 3), p);
    ck_assert_uint_eq(fx_stats(f).events_recorded, 0);
    fx_free(f, p, 3);
    fx_done(f);
}
END_TEST

START_TEST(reuse_other_stream_after_event)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *keep, *q, *q2;
    void *p = freed_on_1_then_swept(f, &keep, &q, &q2);
    /* Before stream 1 completes: stream 2 gets other memory. */
    void *x = fx_alloc(f, 32 * KI, 2), *y = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_ne(x, p);
    ck_assert_ptr_ne(y, p);
    ck_assert_uint_eq(fx_stats(f).cross_stream_waits, 0);
    tp_complete(&f->tp, 1);
    /* After: the block is everyone's. */
    void *z = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_eq(z, p);
    for (unsigned t = 0; t < TP_STREAMS; t++)
        ck_assert_uint_eq(f->tp.waited[2][t], 0);
    void *all[] = {keep, q, q2, x, y, z};
    for (unsigned i = 0; i < 6; i++)
        fx_free(f, all[i], 2);
    fx_done(f);
}
END_TEST

START_TEST(reuse_other_stream_wait_policy)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",cross_stream=wait");
    void *keep, *q, *q2;
    void *p = freed_on_1_then_swept(f, &keep, &q, &q2);
    uint64_t pos = f->tp.enqueued[1];  /* where the sweep was recorded */
    void *x = fx_alloc(f, 32 * KI, 2); /* not complete: taken by waiting */
    ck_assert_ptr_eq(x, p);
    ck_assert_uint_eq(fx_stats(f).cross_stream_waits, 1);
    ck_assert_uint_eq(f->tp.waited[2][1], pos);
    ck_assert_uint_eq(f->tp.completed[1], 0); /* the host did not wait */
    void *all[] = {keep, q, q2, x};
    for (unsigned i = 0; i < 4; i++)
        fx_free(f, all[i], 1);
    fx_done(f);
}
END_TEST

/* GPUARENA_STREAM_HOST: a block freed with no stream is everyone's at once,
 * with no event and no wait, for every policy; a block freed on a stream
 * is never handed to an allocation with no stream before that stream has
 * passed the free; recorded uses are still watched. */
static void host_stream_case(const char *policy, bool host_visible)
{
    char opts[160];
    snprintf(opts, sizeof opts, "%s,cross_stream=%s", SEG_OPTS, policy);
    fx_t *f = fx_new_memory(false, 64 * KI, opts, host_visible);
    void *p = fx_alloc(f, 32 * KI, 1);
    void *keep = fx_alloc(f, 32 * KI, 1); /* segment 1 full */
    uint64_t events = fx_stats(f).events_recorded, syncs = f->tp.syncs;
    fx_free(f, p, HOST); /* stream 1 still has work queued */
    void *q = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    ck_assert_uint_eq(fx_stats(f).cross_stream_waits, 0);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    /* Freed on stream 2, whose work is pending: not for "no stream". */
    fx_free(f, q, 2);
    void *h = fx_alloc(f, 32 * KI, HOST);
    ck_assert_ptr_ne(h, p);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    /* A use recorded on stream 3 is waited for even after a host free. */
    ck_assert_int_eq(ga_bm_record_stream(f->bm, h, S(3)), GPUARENA_SUCCESS);
    tp_enqueue(&f->tp, 3);
    fx_free(f, h, HOST);
    if (!host_visible) /* device memory: recorded use, one event */
        ck_assert_uint_eq(fx_stats(f).events_recorded, events + 1);
    void *r = fx_alloc(f, 32 * KI, 4);
    ck_assert_ptr_ne(r, h);
    void *all[] = {keep, r};
    for (unsigned i = 0; i < 2; i++)
        fx_free(f, all[i], HOST);
    tp_complete(&f->tp, 2);
    tp_complete(&f->tp, 3);
    fx_done(f);
}

START_TEST(host_stream_frees_need_no_event)
{
    static const char *const policies[] = {"event", "wait", "never"};
    for (int hv = 0; hv < 2; hv++)
        for (unsigned i = 0; i < 3; i++)
            host_stream_case(policies[i], hv);
}
END_TEST

/* Through the public API: GPUARENA_STREAM_HOST is no stream to record,
 * and the refusal changes nothing. */
START_TEST(host_stream_public_api)
{
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, NULL, &a), GPUARENA_SUCCESS);
    void *p;
    ck_assert_int_eq(gpuarena_alloc(a, 1000, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
    gpuarena_stats_t before, after;
    ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_record_stream(a, p, GPUARENA_STREAM_HOST),
                     GPUARENA_ERR_INVALID_STREAM);
    ck_assert_int_eq(gpuarena_stats(a, &after), GPUARENA_SUCCESS);
    ck_assert_mem_eq(&before, &after, sizeof before);
    ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    void *q;
    ck_assert_int_eq(gpuarena_alloc(a, 1000, (gpuarena_stream_t)7, &q), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(q, p); /* no stream's block: stream 7 takes it at once */
    ck_assert_int_eq(gpuarena_free(a, q, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A host arena whose granule is larger than the range it would reserve
 * for twice the host's memory (granule = 1T is allowed): the range
 * holds a granule now.  It held none: every allocation failed for
 * memory, and gpuarena_check then reported a corrupt arena. */
START_TEST(host_granule_larger_than_its_range)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "granule=1T,expandable=true", &a),
                     GPUARENA_SUCCESS);
    void *p = NULL;
    gpuarena_status_t st = gpuarena_alloc(a, 1, GPUARENA_STREAM_HOST, &p);
    /* The system may refuse a terabyte of address space (an rlimit,
     * valgrind): a clear status then, and a sound arena either way. */
    ck_assert_msg(st == GPUARENA_SUCCESS || st == GPUARENA_ERR_SYSTEM ||
                      st == GPUARENA_ERR_OUT_OF_MEMORY,
                  "%s", gpuarena_last_error());
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    if (st == GPUARENA_SUCCESS) {
        *(volatile char *)p = 1;
        ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    }
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A locked free on an unchecked stream (the legacy one) whose pool is
 * wanted while its last sweep is still out: if that sweep has completed
 * by the free, the free records the next one on the stream, so it asks
 * first (during a capture it is refused, and names nothing). */
START_TEST(unchecked_free_asks_before_a_second_sweep)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",cross_stream=wait");
    void *keep, *q, *q2;
    (void)freed_on_1_then_swept(f, &keep, &q, &q2); /* a sweep is out on 1 */
    fx_free(f, keep, 1);                            /* newer than the sweep */
    /* Stream 2 misses: stream 1's pool is wanted again, its sweep out. */
    void *r = fx_alloc(f, 64 * KI, 2);
    void *x = fx_alloc(f, 32 * KI, 1);
    tp_complete(&f->tp, 1); /* the sweep completes */
    f->tp.capturing = 1u << 1;
    uint64_t events = fx_stats(f).events_recorded;
    ck_assert_int_eq(ga_bm_free_on(f->bm, x, S(1), true), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_free_on(f->bm, x, S(1), true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events + 1);
    void *all[] = {q, q2, r};
    for (unsigned i = 0; i < 3; i++)
        fx_free(f, all[i], 2);
    fx_done(f);
}
END_TEST

/* The free of a block with recorded streams records an event on each:
 * while one of them is being captured, the event would go into its graph,
 * so the free is refused first, changes nothing and names nothing, on a
 * checked stream and an unchecked one alike. */
START_TEST(free_refused_while_a_recorded_stream_captures)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *p = fx_alloc(f, 32 * KI, 1);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(3)), GPUARENA_SUCCESS);
    tp_enqueue(&f->tp, 3);
    f->tp.capturing = 1u << 3;
    gpuarena_stats_t before = fx_stats(f);
    for (int unchecked = 0; unchecked < 2; unchecked++)
        ck_assert_int_eq(ga_bm_free_on(f->bm, p, S(1), unchecked), GPUARENA_ERR_STREAM_CAPTURE);
    gpuarena_stats_t after = fx_stats(f);
    ck_assert_uint_eq(after.frees, before.frees);
    ck_assert_uint_eq(after.live_blocks, before.live_blocks);
    ck_assert_uint_eq(after.events_recorded, before.events_recorded);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    /* The capture over, the free records an event on each recorded
     * stream but its own (3). */
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, S(3), false), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fx_stats(f).events_recorded, before.events_recorded + 1);
    fx_done(f);
}
END_TEST

/* A stream asked for a sweep records it at its next free even when that
 * free would fit its thread cache (a cache never records events). */
START_TEST(wanted_sweep_skips_thread_cache)
{
    /* No large slot: the 32K free must reach stream 1's pool at once. */
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",thread_cache_max=8K,thread_cache_large=0");
    f->set.thread_cache = true;
    ga_bm_destroy(f->bm);
    ck_assert_int_eq(ga_bm_create(&f->tp.base, &f->set, &f->bm), GPUARENA_SUCCESS);
    void *h = fx_alloc(f, 4 * KI, 1), *fill = fx_alloc(f, 60 * KI, 1); /* one segment */
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    fx_free(f, p, 1); /* above thread_cache_max: into stream 1's pool */
    void *q = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_ne(q, p); /* stream 1 is asked for a sweep */
    uint64_t events = fx_stats(f).events_recorded;
    fx_free(f, h, 1); /* would fit the thread cache: goes locked instead */
    ck_assert_uint_eq(fx_stats(f).events_recorded, events + 1);
    tp_complete(&f->tp, 1);
    /* The sweep released it: stream 2 gets it before it maps anything
     * (the other half of q's segment may come first). */
    uint64_t maps = fx_stats(f).provider_maps;
    void *r = fx_alloc(f, 32 * KI, 2), *r2 = fx_alloc(f, 32 * KI, 2);
    ck_assert(r == p || r2 == p);
    ck_assert_uint_eq(fx_stats(f).provider_maps, maps);
    void *all[] = {keep, q, r, r2, fill};
    for (unsigned i = 0; i < 5; i++)
        fx_free(f, all[i], 2);
    fx_done(f);
}
END_TEST

/* Another thread's allocation on stream 1 (ck asserts work in any
 * thread of the test process). */
typedef struct other_alloc {
    fx_t *f;
    size_t size;
    void *p;
} other_alloc_t;

static void *other_alloc_run(void *arg)
{
    other_alloc_t *o = arg;
    o->p = fx_alloc(o->f, o->size, 1);
    return NULL;
}

static void *alloc_in_other_thread(fx_t *f, size_t size)
{
    other_alloc_t o = {f, size, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, other_alloc_run, &o), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    return o.p;
}

/* The end of the large-slot tests: P is held in this thread's large slot,
 * Q was mapped for another thread meanwhile.  The slot is taken, so the
 * free of KEEP goes locked and gives P back first, which then merges with
 * KEEP: another thread's allocation of SIZE gets P's address with no new
 * map.  Frees the rest and F. */
static void locked_free_gives_back(fx_t *f, void *p, void *keep, void *q, size_t size)
{
    fx_free(f, keep, 1);
    uint64_t maps = fx_stats(f).provider_maps;
    void *r = alloc_in_other_thread(f, size);
    ck_assert_ptr_eq(r, p);
    ck_assert_uint_eq(fx_stats(f).provider_maps, maps);
    fx_free(f, q, 1);
    fx_free(f, r, 1);
    fx_done(f);
}

/* thread_cache_large: a block above thread_cache_max freed on a stream is
 * held in the thread's cache of that stream, out of other threads' reach,
 * until the thread's next locked allocation or free gives it back;
 * with 0 it goes to the stream's pool at once. */
START_TEST(large_slot_held_until_next_locked_op)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",thread_cache=true,thread_cache_max=8K");
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1); /* one segment */
    fx_free(f, p, 1);
    uint64_t maps = fx_stats(f).provider_maps;
    void *q = alloc_in_other_thread(f, 32 * KI);
    ck_assert_ptr_ne(q, p); /* held by this thread */
    ck_assert_uint_eq(fx_stats(f).provider_maps, maps + 1);
    locked_free_gives_back(f, p, keep, q, 64 * KI);

    f = fx_new(false, 64 * KI,
               SEG_OPTS ",thread_cache=true,thread_cache_max=8K,thread_cache_large=0");
    p = fx_alloc(f, 32 * KI, 1);
    keep = fx_alloc(f, 32 * KI, 1);
    fx_free(f, p, 1);
    maps = fx_stats(f).provider_maps;
    q = alloc_in_other_thread(f, 32 * KI);
    ck_assert_ptr_eq(q, p); /* in stream 1's pool at once */
    ck_assert_uint_eq(fx_stats(f).provider_maps, maps);
    fx_free(f, q, 1);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* Two managers with the same OPTS, for the tests of one thread's caches
 * of several arenas; fx_done_pair ends them. */
static void fx_pair(const char *opts, fx_t **f, fx_t **g)
{
    *f = fx_new(false, 64 * KI, opts);
    *g = fx_new(false, 64 * KI, opts);
}

static void fx_done_pair(fx_t *f, fx_t *g)
{
    fx_done(f);
    fx_done(g);
}

/* How many large slots may hold a block is one count per thread, for
 * every arena: a locked operation on another arena finds the block and
 * leaves it counted, so the next locked operation on the first still
 * gives the block back. */
START_TEST(large_slot_hint_spans_arenas)
{
    fx_t *f, *g;
    fx_pair(SEG_OPTS ",thread_cache=true,thread_cache_max=8K", &f, &g);
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    fx_free(f, p, 1); /* into F's large slot */
    ck_assert_uint_eq(f->bm->c.live, 2);
    void *x = fx_alloc(g, 32 * KI, 1); /* locked, on G */
    ck_assert_uint_eq(f->bm->c.live, 2);
    fx_free(f, keep, 1); /* the slot is taken: locked, and P goes back first */
    ck_assert_uint_eq(f->bm->c.live, 0);
    fx_free(g, x, 1);
    fx_done_pair(f, g);
}
END_TEST

/* The hint counts the large slots of the thread's caches, one per arena
 * and stream: a locked operation on one arena gives back that arena's
 * block and leaves the others', without a walk of the thread's caches
 * when the cache used last holds the only one, and with one when
 * another cache of the arena (another stream's) was used since. */
START_TEST(large_slots_of_two_arenas)
{
    fx_t *f, *g;
    fx_pair(SEG_OPTS ",thread_cache=true,thread_cache_max=8K", &f, &g);
    void *w = fx_alloc(f, 4 * KI, 2);
    fx_free(f, w, 2); /* F's cache of stream 2, in a slot */
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    void *x = fx_alloc(g, 32 * KI, 1), *y = fx_alloc(g, 32 * KI, 1);
    fx_free(f, p, 1); /* F's large slot */
    fx_free(g, x, 1); /* G's */
    ck_assert_uint_eq(ga_tc_parked, 2);
    uint64_t ff = f->bm->c.frees, gf = g->bm->c.frees;
    void *q = fx_alloc(f, 16 * KI, 1); /* locked on F: a walk */
    ck_assert_uint_eq(f->bm->c.frees, ff + 1);
    ck_assert_uint_eq(g->bm->c.frees, gf);
    ck_assert_uint_eq(ga_tc_parked, 1);
    void *r = fx_alloc(g, 16 * KI, 1); /* locked on G: its cache was used last */
    ck_assert_uint_eq(g->bm->c.frees, gf + 1);
    ck_assert_uint_eq(ga_tc_parked, 0);
    ck_assert_ptr_null(ga_tcache_find(g->bm, 1)->large);

    /* Parked by F's cache of stream 1; then F's cache of stream 2 is the
     * one used last when a locked operation on F comes. */
    fx_free(f, keep, 1);
    ck_assert_uint_eq(ga_tc_parked, 1);
    ff = f->bm->c.frees;
    void *z = fx_alloc(f, 16 * KI, 2);
    ck_assert_ptr_eq(ga_tc_last, ga_tcache_find(f->bm, 2));
    ck_assert_uint_eq(f->bm->c.frees, ff + 1);
    ck_assert_ptr_null(ga_tcache_find(f->bm, 1)->large);
    ck_assert_uint_eq(ga_tc_parked, 0);
    fx_free(f, q, 1);
    fx_free(f, z, 2);
    fx_free(g, y, 1);
    fx_free(g, r, 1);
    fx_done_pair(f, g);
}
END_TEST

/* The peaks of a locked allocation count the blocks this thread's cache
 * holds as free, also where the thread has caches of other arenas: the
 * cache of the arena, its only one in the thread, has those corrections
 * all, and those of the other arenas' caches do not count. */
START_TEST(requested_peak_with_other_arenas_cached)
{
    fx_t *f, *g;
    fx_pair(SEG_OPTS ",thread_cache=true", &f, &g);
    void *x = fx_alloc(g, 24 * KI, 1);
    fx_free(g, x, 1); /* G's cache holds 24K: minus 24K for G's user */
    void *p = fx_alloc(f, 48 * KI, 1);
    fx_free(f, p, 1); /* F's cache holds 48K */
    ck_assert(ga_tcache_find(f->bm, 1)->alone);
    ga_bm_reset_peaks(f->bm);
    ck_assert_uint_eq(fx_stats(f).requested_peak, 0);
    void *q = fx_alloc(f, 40 * KI, 1); /* another size: locked */
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 40 * KI);
    ck_assert_uint_eq(st.requested_peak, 40 * KI); /* not 88K, nor 64K */
    ck_assert_uint_eq(st.in_use_peak, 40 * KI);
    fx_free(f, q, 1);
    fx_done_pair(f, g);
}
END_TEST

/* size_classes: a request that a thread cache may hold is rounded up to
 * its size class, so that a block freed for one size serves the next
 * request of any size of its class from the cache.  Above
 * thread_cache_max, with the thread cache off, or with size_classes = 0,
 * requests are rounded to round alone. */
static size_t in_use_of(const char *opts, size_t size)
{
    fx_t *f = fx_new(false, 64 * KI, opts);
    void *p = fx_alloc(f, size, 1);
    size_t v = fx_stats(f).in_use;
    ck_assert_uint_eq(fx_stats(f).requested, size);
    fx_free(f, p, 1);
    fx_done(f);
    return v;
}

START_TEST(size_classes_round_cached_requests)
{
    const char *four = "thread_cache=true,size_classes=4";
    ck_assert_uint_eq(in_use_of(four, 1), 512);
    ck_assert_uint_eq(in_use_of(four, 2048), 2048);
    ck_assert_uint_eq(in_use_of(four, 2049), 2560); /* 512 apart up to 4K */
    ck_assert_uint_eq(in_use_of(four, 4096), 4096);
    ck_assert_uint_eq(in_use_of(four, 4608), 5120);  /* 5, 6, 7, 8 KiB */
    ck_assert_uint_eq(in_use_of(four, 8193), 10240); /* 10, 12, 14, 16 KiB */
    ck_assert_uint_eq(in_use_of(four, 100 * KI), 112 * KI);
    ck_assert_uint_eq(in_use_of(four, MI), MI);           /* thread_cache_max */
    ck_assert_uint_eq(in_use_of(four, MI + 1), MI + 512); /* above it */
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=1", 4608), 8 * KI);
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=16", 4608), 4608);
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=16", 100 * KI + 1), 104 * KI);
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=0", 4608), 4608);
    ck_assert_uint_eq(in_use_of("thread_cache=false,size_classes=4", 4608), 4608);
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=4,round=4K", 4097), 8 * KI);
    ck_assert_uint_eq(in_use_of("thread_cache=true,size_classes=4,round=4K", 20 * KI + 1), 24 * KI);

    /* A block freed for 4.5 KiB serves 4.6 KiB from the cache, with no
     * locked operation; then the stats count the new size. */
    fx_t *f = fx_new(false, 64 * KI, four);
    void *keep = fx_alloc(f, 16 * KI, 1);
    void *p = fx_alloc(f, 4608, 1);
    fx_free(f, p, 1);
    uint64_t allocs = f->bm->c.allocs;
    void *q = fx_alloc(f, 4700, 1);
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(f->bm->c.allocs, allocs); /* the cache's hit */
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.requested, 16 * KI + 4700);
    ck_assert_uint_eq(st.in_use, 16 * KI + 5120);
    /* Another class is not served from it. */
    fx_free(f, q, 1);
    void *r = fx_alloc(f, 6 * KI + 1, 1);
    ck_assert_ptr_ne(r, p);
    fx_free(f, r, 1);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* A block at or below thread_cache_max that the slots refuse (their byte
 * budget is full) waits in the large slot too, so that a free followed by
 * an allocation takes the lock once; it is out of other threads' reach
 * until the thread's next locked allocation or free.  With
 * thread_cache_large = 0 it goes to the stream's pool at once. */
START_TEST(slots_full_block_waits_in_large_slot)
{
    for (int held = 1; held >= 0; held--) {
        fx_t *f = fx_new(false, 64 * KI,
                         held ? SEG_OPTS ",thread_cache=true,thread_cache_max=16K,"
                                         "thread_cache_bytes=16K"
                              : SEG_OPTS ",thread_cache=true,thread_cache_max=16K,"
                                         "thread_cache_bytes=16K,thread_cache_large=0");
        void *s = fx_alloc(f, 16 * KI, 1), *p = fx_alloc(f, 16 * KI, 1);
        void *keep = fx_alloc(f, 32 * KI, 1); /* segment 1 full */
        fx_free(f, s, 1);                     /* the slots' budget is full */
        fx_free(f, p, 1);
        uint64_t maps = fx_stats(f).provider_maps;
        void *q = alloc_in_other_thread(f, 16 * KI);
        if (!held) {
            ck_assert_ptr_eq(q, p); /* in stream 1's pool at once */
            ck_assert_uint_eq(fx_stats(f).provider_maps, maps);
            fx_free(f, q, 1);
            fx_free(f, keep, 1);
            fx_done(f);
            continue;
        }
        ck_assert_ptr_ne(q, p); /* held by this thread */
        ck_assert_uint_eq(fx_stats(f).provider_maps, maps + 1);
        locked_free_gives_back(f, p, keep, q, 48 * KI);
    }
}
END_TEST

/* The large slot serves an allocation of its block's size whatever that
 * size: a block the full slots sent there comes back to the thread's next
 * allocation of its size from the cache, as the slot's own blocks do,
 * without the manager (whose own count of allocations stays). */
START_TEST(large_slot_serves_small_size)
{
    fx_t *f = fx_new(false, 64 * KI,
                     SEG_OPTS ",thread_cache=true,thread_cache_max=16K,thread_cache_bytes=16K");
    void *s = fx_alloc(f, 16 * KI, 1), *p = fx_alloc(f, 16 * KI, 1);
    void *keep = fx_alloc(f, 32 * KI, 1);
    fx_free(f, s, 1); /* the slots' budget is full */
    fx_free(f, p, 1); /* the large slot */
    uint64_t manager_allocs = f->bm->c.allocs;
    void *a = fx_alloc(f, 16 * KI, 1), *b = fx_alloc(f, 16 * KI, 1);
    ck_assert_ptr_eq(a, p); /* the large slot is asked first */
    ck_assert_ptr_eq(b, s);
    ck_assert_uint_eq(f->bm->c.allocs, manager_allocs);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.live_blocks, 3);
    ck_assert_uint_eq(st.in_use, 64 * KI);
    fx_free(f, a, 1);
    fx_free(f, b, 1);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* The cold-cache tests miss with sizes 512 bytes apart, which size
 * classes would put into one class, and hit. */
#define NO_CLASSES ",size_classes=0"

/* Make the thread cache of stream 1 cold: misses, of sizes it never
 * held, until a window of them closes (the first allocation, before the
 * cache is made, is not one).  The manager counts what the cache holds
 * as live: warm, the cache holds blocks freed so far; cold, its large
 * slot holds the one freed after the miss that made it cold.  That
 * block's address. */
static void *make_cold(fx_t *f)
{
    /* Each size its own key: no size classes (NO_CLASSES). */
    ck_assert_uint_eq(f->bm->class_max, 0);
    void *last = NULL;
    ga_tcache_t *t = NULL;
    for (unsigned i = 0; i <= TC_WINDOW && !(t && t->cold); i++) {
        last = fx_alloc(f, (i + 9) * 512, 1);
        fx_free(f, last, 1);
        t = ga_tcache_find(f->bm, 1);
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_ge(f->bm->c.live, 1); /* the cache holds a block */
    }
    ck_assert(t->cold);
    return last;
}

/* A thread cache whose probes nearly all miss goes cold: it is flushed
 * once, its slots take no more blocks, and only its large slot holds a
 * freed block until the thread's next locked operation.  It warms again
 * when half of a window of its probes ask for sizes that were just freed
 * (tcache.c, "Cold caches").  A block held by a cache is live to the
 * manager: its count of live blocks tells whether a free kept it. */
START_TEST(cache_goes_cold_and_warms_again)
{
    fx_t *f = fx_new(false, 64 * KI, "thread_cache=true" NO_CLASSES);
    void *p = fx_alloc(f, 4 * KI, 1);
    fx_free(f, p, 1);
    ck_assert_uint_eq(f->bm->c.live, 1); /* held by the cache */
    uint64_t allocs = f->bm->c.allocs;
    ck_assert_ptr_eq(fx_alloc(f, 4 * KI, 1), p);
    ck_assert_uint_eq(f->bm->c.allocs, allocs); /* a hit */
    fx_free(f, p, 1);

    /* Sizes the cache never held: every probe misses.  The window's
     * last miss makes it cold and gives every block back; the free after
     * it parks its block in the large slot. */
    void *last = make_cold(f);
    ga_tcache_t *t = ga_tcache_find(f->bm, 1);
    ck_assert_ptr_nonnull(t);
    ck_assert(t->cold);
    ck_assert_uint_eq(t->bytes, 0); /* the slots are empty */
    ck_assert_ptr_nonnull(t->large);
    ck_assert_ptr_eq((void *)t->large->addr, last);
    ck_assert_uint_eq(f->bm->c.live, 1);

    /* Cold: the same size freed and allocated again goes through the
     * manager, the free parking the block and the allocation giving it
     * back, until the window of probes closes with every one of them a
     * size just freed; from then the cache's slots hold and serve it. */
    for (unsigned i = 0; i < TC_WINDOW; i++) {
        allocs = f->bm->c.allocs;
        uint64_t frees = f->bm->c.frees;
        void *q = fx_alloc(f, 4 * KI, 1);
        ck_assert_uint_eq(f->bm->c.allocs, allocs + 1); /* from the manager */
        ck_assert_uint_eq(f->bm->c.frees, frees + 1);   /* the parked block back */
        ck_assert_ptr_null(t->large);
        fx_free(f, q, 1);
        ck_assert_uint_eq(f->bm->c.live, 1);
        ck_assert_uint_eq(t->cold, i + 1 < TC_WINDOW);
        ck_assert_ptr_eq(t->large ? (void *)t->large->addr : NULL, i + 1 < TC_WINDOW ? q : NULL);
        ck_assert_uint_eq(t->bytes, i + 1 < TC_WINDOW ? 0 : 4 * KI);
    }
    allocs = f->bm->c.allocs;
    void *q = fx_alloc(f, 4 * KI, 1);
    ck_assert_uint_eq(f->bm->c.allocs, allocs); /* a hit again */

    /* Warm at half its probes hitting, window after window: the
     * quarter that makes a cache cold leaves room.  The misses are of
     * blocks kept live, so that they fill no slot.  (Whether a free is
     * held no longer tells: a new segment asks the stream's pool for a
     * sweep, and its next free takes the lock.) */
    void *r[4 * TC_WINDOW];
    for (unsigned i = 0; i < 4 * TC_WINDOW; i++) {
        fx_free(f, q, 1);
        q = fx_alloc(f, 4 * KI, 1);           /* a hit */
        r[i] = fx_alloc(f, (i + 9) * 512, 1); /* a miss */
        ck_assert_msg(!t->cold, "cold after %u pairs", i + 1);
    }
    for (unsigned i = 0; i < 4 * TC_WINDOW; i++)
        fx_free(f, r[i], 1);
    fx_free(f, q, 1);
    fx_done(f);
}
END_TEST

/* Sizes above thread_cache_max, which no slot holds, do not count for
 * going cold: a thread whose allocations are mostly of such sizes keeps
 * the cache of its small ones (here four misses of 12K to each hit of
 * 4K; counted, they made the cache cold within 32 hits). */
START_TEST(large_misses_leave_the_cache_warm)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",thread_cache=true,thread_cache_max=8K");
    void *q = fx_alloc(f, 4 * KI, 1);
    fx_free(f, q, 1);
    ga_tcache_t *t = ga_tcache_find(f->bm, 1);
    ck_assert_ptr_nonnull(t);
    enum { N = 2 * TC_WINDOW };
    static void *r[4 * N];
    for (unsigned i = 0; i < N; i++) {
        uint64_t allocs = f->bm->c.allocs;
        q = fx_alloc(f, 4 * KI, 1);
        ck_assert_uint_eq(f->bm->c.allocs, allocs); /* a hit */
        fx_free(f, q, 1);
        for (unsigned k = 0; k < 4; k++)
            r[4 * i + k] = fx_alloc(f, 12 * KI, 1); /* kept live: a miss */
        ck_assert_msg(!t->cold, "cold after %u hits", i + 1);
    }
    for (unsigned i = 0; i < 4 * N; i++)
        fx_free(f, r[i], 1);
    fx_done(f);
}
END_TEST

/* Before a growable segment grows for a thread, the thread's caches of
 * the arena give their blocks back when they hold as much as the
 * request: a block cached for another size class then serves it, with
 * nothing mapped.  Fixed segments keep the cache as it is. */
START_TEST(caches_give_back_before_growing)
{
    for (int growable = 1; growable >= 0; growable--) {
        fx_t *f = fx_new(growable, 64 * KI, SEG_OPTS ",thread_cache=true");
        void *p = fx_alloc(f, 64 * KI, 1), *keep = fx_alloc(f, 64 * KI, 1);
        fx_free(f, p, 1); /* into the thread cache */
        ck_assert_uint_eq(f->bm->c.live, 2);
        uint64_t maps = fx_stats(f).provider_maps;
        void *q = fx_alloc(f, 48 * KI, 1); /* another class: a miss */
        if (growable) {
            ck_assert_ptr_eq(q, p);
            ck_assert_uint_eq(fx_stats(f).provider_maps, maps);
        } else {
            ck_assert_ptr_ne(q, p);
            ck_assert_uint_eq(fx_stats(f).provider_maps, maps + 1);
        }
        /* A request larger than what the cache holds leaves it be. */
        void *r = fx_alloc(f, 16 * KI, 1);
        fx_free(f, r, 1); /* cached: 16K */
        uint64_t live = f->bm->c.live;
        void *big = fx_alloc(f, 192 * KI, 1);
        ck_assert_uint_eq(f->bm->c.live, live + 1); /* the 16K block still cached */
        fx_free(f, big, 1);
        fx_free(f, q, 1);
        fx_free(f, keep, 1);
        fx_done(f);
    }
}
END_TEST

/* A cold cache's large slot: one block of at most thread_cache_large,
 * held from its free to the thread's next locked operation (an
 * allocation that misses, or a free the cache does not take), which
 * gives it back first; a larger block, or a second one, goes to the
 * manager at once.  The user sees each free at once; trim gives the
 * parked block back too. */
START_TEST(cold_cache_parks_one_block)
{
    fx_t *f = fx_new(false, 64 * KI, "thread_cache=true,thread_cache_large=128K" NO_CLASSES);
    void *keep[3] = {fx_alloc(f, 40 * KI, 1), fx_alloc(f, 192 * KI, 1), fx_alloc(f, 8 * KI, 1)};
    void *last = make_cold(f);
    ga_tcache_t *t = ga_tcache_find(f->bm, 1);
    ck_assert(t && t->cold && t->large && (void *)t->large->addr == last);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.live_blocks, 3); /* the parked one is freed to the user */

    /* A second free while one is parked: both go to the manager. */
    uint64_t frees = f->bm->c.frees, live = f->bm->c.live;
    fx_free(f, keep[0], 1);
    ck_assert_uint_eq(f->bm->c.frees, frees + 2);
    ck_assert_uint_eq(f->bm->c.live, live - 2);
    ck_assert_ptr_null(t->large);

    /* Above thread_cache_large: to the manager, the slot left empty. */
    frees = f->bm->c.frees;
    fx_free(f, keep[1], 1);
    ck_assert_uint_eq(f->bm->c.frees, frees + 1);
    ck_assert_ptr_null(t->large);

    /* Parked, then given back by trim. */
    fx_free(f, keep[2], 1);
    ck_assert_ptr_eq(t->large ? (void *)t->large->addr : NULL, keep[2]);
    ck_assert_uint_eq(f->bm->c.live, 1);
    st = fx_stats(f);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_ptr_null(t->large);
    ck_assert_uint_eq(f->bm->c.live, 0);
    ck_assert(t->cold); /* trim does not warm it */
    fx_done(f);
}
END_TEST

START_TEST(reuse_other_stream_never_policy)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS ",cross_stream=never");
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    fx_free(f, p, 1);
    void *got[16];
    for (unsigned i = 0; i < 16; i++) {
        for (unsigned s = 0; s < TP_STREAMS; s++)
            tp_complete(&f->tp, s);
        got[i] = fx_alloc(f, 32 * KI, 2);
        ck_assert_ptr_ne(got[i], p);
        if (i % 2) /* frees on 1 would record a sweep if one were asked */
            fx_free(f, fx_alloc(f, 64 * KI, 1), 1);
    }
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.cross_stream_waits, 0);
    ck_assert_uint_eq(st.events_recorded, 0);
    ck_assert_ptr_eq(fx_alloc(f, 32 * KI, 1), p); /* its own stream still may */
    fx_free(f, p, 1);
    fx_free(f, keep, 1);
    for (unsigned i = 0; i < 16; i++)
        fx_free(f, got[i], 2);
    fx_done(f);
}
END_TEST

/* A block of 32 KiB allocated on stream 1 (and *KEEP after it, so that
 * it merges with nothing), recorded on stream REC, which then works on
 * it, and freed on stream ON: it waits for that work. */
static void *pending_block(fx_t *f, unsigned rec, unsigned on, void **keep)
{
    void *p = fx_alloc(f, 32 * KI, 1);
    *keep = fx_alloc(f, 32 * KI, 1);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(rec)), GPUARENA_SUCCESS);
    tp_enqueue(&f->tp, rec);
    fx_free(f, p, on);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 1);
    return p;
}

START_TEST(record_stream_keeps_block_pending)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *keep, *p = pending_block(f, 2, 1, &keep);
    /* Not even its own stream may take it while stream 2 runs. */
    tp_complete(&f->tp, 1);
    void *x = fx_alloc(f, 32 * KI, 1), *y = fx_alloc(f, 32 * KI, 1);
    ck_assert_ptr_ne(x, p);
    ck_assert_ptr_ne(y, p);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 1);
    tp_complete(&f->tp, 2);
    void *z = fx_alloc(f, 32 * KI, 1);
    ck_assert_ptr_eq(z, p);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 0);
    void *all[] = {keep, x, y, z};
    for (unsigned i = 0; i < 4; i++)
        fx_free(f, all[i], 1);
    fx_done(f);
}
END_TEST

/* The allocation's own stream recorded, the block freed on another: it
 * waits for the work of its own stream too (the record was dropped, and
 * stream 2 took the block while stream 1 still ran); freed on the
 * recorded stream itself, nothing is waited for. */
START_TEST(record_stream_of_the_allocation_stream)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *keep, *p = pending_block(f, 1, 2, &keep);
    void *x = fx_alloc(f, 32 * KI, 2);
    ck_assert_ptr_ne(x, p);
    tp_complete(&f->tp, 1);
    fx_free(f, x, 2); /* a free polls the waiting blocks */
    ck_assert_uint_eq(fx_stats(f).pending_frees, 0);
    x = fx_alloc(f, 32 * KI, 2);
    /* Recorded, and freed on that stream: no event, at once its own. */
    void *z = fx_alloc(f, 32 * KI, 2);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, z, S(2)), GPUARENA_SUCCESS);
    uint64_t events = fx_stats(f).events_recorded;
    tp_enqueue(&f->tp, 2);
    fx_free(f, z, 2);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 0);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    void *all[] = {keep, x};
    for (unsigned i = 0; i < 2; i++)
        fx_free(f, all[i], i == 0 ? 1 : 2);
    fx_done(f);
}
END_TEST

/* Host-visible memory (pinned, managed) freed on an idle stream: its free
 * has passed, so it is reusable by every stream at once, with no event and
 * without synchronising the device; freed behind work, it waits for an
 * event and still synchronises nothing. */
START_TEST(host_visible_idle_free_does_not_sync)
{
    fx_t *f = fx_new_memory(false, 64 * KI, NULL, true);
    void *p = fx_alloc(f, 1 * MI, 1);
    tp_complete(&f->tp, 1);
    uint64_t syncs = f->tp.syncs, events = fx_stats(f).events_recorded;
    ck_assert_int_eq(ga_bm_free(f->bm, p, S(1)), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    ck_assert_ptr_eq(fx_alloc(f, 1 * MI, 2), p); /* another stream, at once */
    /* Behind work: an event, pending, no synchronisation either. */
    tp_enqueue(&f->tp, 2);
    ck_assert_int_eq(ga_bm_free(f->bm, p, S(2)), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events + 1);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 1);
    void *q = fx_alloc(f, 1 * MI, 2);
    ck_assert_ptr_ne(q, p);
    tp_complete(&f->tp, 2);
    fx_free(f, q, 2); /* behind its own unit of work; P's event has completed */
    ck_assert_uint_eq(fx_stats(f).pending_frees, 1);
    ck_assert_uint_eq(f->tp.syncs, syncs);
    tp_complete(&f->tp, 2);
    fx_done(f);
}
END_TEST

/* When the event for a record_stream use cannot be recorded, the free
 * must not make the block reusable before that use is known complete;
 * nor may it wait for the device there (the host would block on a free,
 * and another thread's capture break): the block goes to limbo, for no
 * stream until a trim or the out-of-memory path waits for the device. */
START_TEST(record_stream_event_failure_is_safe)
{
    for (unsigned nth = 1; nth <= 2; nth++) { /* event_create, event_record */
        fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
        void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
        ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
        tp_enqueue(&f->tp, 2);
        uint64_t use_pos = f->tp.enqueued[2];
        f->tp.fail_at = f->tp.calls + nth;
        fx_free(f, p, 1);
        f->tp.fail_at = 0;
        ck_assert_uint_eq(f->tp.device_syncs, 0);
        ck_assert_uint_eq(fx_stats(f).retired_cached, 32 * KI);
        void *x = fx_alloc(f, 32 * KI, 1);
        ck_assert_msg(x != p || f->tp.completed[2] >= use_pos,
                      "block handed out while a recorded use may still run (fault %u)", nth);
        fx_free(f, x, 1);
        fx_free(f, keep, 1);
        ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
        ck_assert_uint_eq(f->tp.device_syncs, 1); /* the trim's drain */
        ck_assert_uint_eq(fx_stats(f).retired_cached, 0);
        fx_done(f);
    }
}
END_TEST

/* A recorded use whose handle names another stream from the freeing
 * thread than from the recording one (CUDA's per-thread default stream,
 * CU_STREAM_PER_THREAD, recorded by one thread and freed by another; here
 * a handle whose id is not the one recorded): no event on it, which would
 * watch the wrong stream's work; the block goes to limbo.  It was handed
 * out again once the freeing thread's stream was idle. */
START_TEST(record_stream_of_another_threads_stream)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    ga_stream_t theirs = {tp_handle(2), 77}; /* handle 2 is stream 2 here */
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, theirs), GPUARENA_SUCCESS);
    uint64_t events = fx_stats(f).events_recorded;
    fx_free(f, p, 1);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events);
    ck_assert_uint_eq(fx_stats(f).pending_frees, 0);
    ck_assert_uint_eq(fx_stats(f).retired_cached, 32 * KI);
    tp_complete(&f->tp, 1);
    tp_complete(&f->tp, 2);
    void *x = fx_alloc(f, 32 * KI, 1);
    ck_assert_ptr_ne(x, p);
    fx_free(f, x, 1);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* record_stream with no host memory left to note the stream (the uses'
 * array cannot grow) still succeeds: the block counts as used by every
 * stream, and its free keeps it from all of them, its own included,
 * until a drain has waited for the device.  PyTorch's record_stream hook
 * returns nothing, and a stream forgotten there let another stream take
 * the block while the recorded one still worked on it. */
START_TEST(record_stream_without_host_memory)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *p = fx_alloc(f, 32 * KI, 1), *keep = fx_alloc(f, 32 * KI, 1);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(2)), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(3)), GPUARENA_SUCCESS);
    atomic_store(&ga_hostmem_fail, true);
    gpuarena_status_t st = ga_bm_record_stream(f->bm, p, S(4)); /* a third: the array grows */
    atomic_store(&ga_hostmem_fail, false);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_record_stream(f->bm, p, S(5)), GPUARENA_SUCCESS);
    tp_enqueue(&f->tp, 4); /* the stream that could not be noted works on P */
    uint64_t events = fx_stats(f).events_recorded;
    fx_free(f, p, 1);
    ck_assert_uint_eq(fx_stats(f).events_recorded, events); /* names no stream */
    ck_assert_uint_eq(f->tp.device_syncs, 0);
    ck_assert_uint_eq(fx_stats(f).retired_cached, 32 * KI);
    void *got[3];
    for (unsigned s = 1; s <= 3; s++) {
        got[s - 1] = fx_alloc(f, 32 * KI, s);
        ck_assert_ptr_ne(got[s - 1], p);
    }
    tp_complete(&f->tp, 4);
    ck_assert_int_eq(ga_bm_trim(f->bm, SIZE_MAX - 1, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fx_stats(f).retired_cached, 32 * KI); /* no drain asked */
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.device_syncs, 1);
    ck_assert_uint_eq(fx_stats(f).retired_cached, 0);
    for (unsigned s = 1; s <= 3; s++)
        fx_free(f, got[s - 1], s);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Trim, caps, zero-fill, hits.                                        */

START_TEST(trim_keeps_at_most_keep)
{
    fx_t *f = fx_new(true, 64 * KI, NULL);
    void *p[32];
    for (unsigned i = 0; i < 32; i++)
        p[i] = fx_alloc(f, (i % 4 + 1) * 64 * KI, i % 3 + 1);
    gpuarena_stats_t st = fx_stats(f);
    uint64_t full = st.reserved, maps = f->tp.base.live_maps;
    ck_assert_uint_eq(maps * 64 * KI, full); /* reserved counts mapped granules */
    uint64_t live = 0;
    for (unsigned i = 0; i < 32; i++) {
        if (i % 4 == 3)
            live += (i % 4 + 1) * 64 * KI; /* kept: the free space is in pieces */
        else
            fx_free(f, p[i], i % 3 + 1);
    }
    st = fx_stats(f);
    ck_assert_uint_eq(st.in_use, live);
    ck_assert_uint_eq(st.cached, full - live);
    ck_assert_uint_eq(st.reserved, full);
    size_t keeps[] = {full - 64 * KI, full / 2, 300 * KI, 64 * KI, 0};
    for (unsigned i = 0; i < 5; i++) {
        ck_assert_int_eq(ga_bm_trim(f->bm, keeps[i], true), GPUARENA_SUCCESS);
        ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
        gpuarena_stats_t t = fx_stats(f);
        ck_assert_uint_le(t.cached, keeps[i]);
        ck_assert_uint_le(t.reserved, st.reserved);
        ck_assert_uint_eq(f->tp.base.live_maps * 64 * KI, t.reserved); /* shrunk in place */
        ck_assert_uint_eq(t.segments, 1);                              /* one growable segment */
        ck_assert_uint_eq(t.in_use, live);
        st = t;
    }
    ck_assert_uint_eq(st.reserved, live);
    ck_assert_uint_lt(f->tp.base.live_maps, maps);
    for (unsigned i = 3; i < 32; i += 4)
        fx_free(f, p[i], 1);
    /* It serves again after the trim. */
    fx_free(f, fx_alloc(f, 100 * KI, 1), 1);
    fx_done(f);
}
END_TEST

START_TEST(trim_fixed_segments)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *p[8];
    for (unsigned i = 0; i < 8; i++)
        p[i] = fx_alloc(f, 64 * KI, 1);
    ck_assert_uint_eq(f->tp.base.live_maps, 8);
    for (unsigned i = 0; i < 8; i++)
        fx_free(f, p[i], 1);
    ck_assert_int_eq(ga_bm_trim(f->bm, 3 * 64 * KI, true), GPUARENA_SUCCESS);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.reserved, 3 * 64 * KI);
    ck_assert_uint_eq(st.provider_unmaps, 5);
    ck_assert_uint_eq(f->tp.base.live_maps, 3);
    ck_assert_uint_eq(st.trims, 1); /* the call; its release pass is part of it */
    fx_done(f);
}
END_TEST

/* A pending block (freed, waiting for a recorded stream) is a free
 * block: free_blocks counts "reusable or pending" (gpuarena_stats(3)). */
START_TEST(free_blocks_count_pending)
{
    fx_t *f = fx_new(false, 64 * KI, SEG_OPTS);
    void *keep, *p = pending_block(f, 2, 1, &keep);
    (void)p;
    /* The segment is P, pending, and KEEP, live. */
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.pending_frees, 1);
    ck_assert_uint_eq(st.free_blocks, 1);
    tp_complete(&f->tp, 2);
    fx_free(f, keep, 1);
    fx_done(f);
}
END_TEST

/* A program that makes a stream per step (torch.cuda.Stream() in a loop)
 * leaves a pool per stream with what it freed there; gpuarena cannot
 * learn that the stream is gone.  The manager keeps GA_POOLS_MAX pools
 * at most: the one used longest ago is retired, its blocks to limbo,
 * where no stream may take them, its own included, until trim has waited
 * for the device; then they are every stream's (limbo.c). */
START_TEST(stream_pools_bounded)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=false", &a), GPUARENA_SUCCESS);
    ga_bm_t *bm = a->bm;
    enum { N = GA_POOLS_MAX + 40 };
    void *first = NULL;
    for (uintptr_t i = 1; i <= N; i++) {
        gpuarena_stream_t s = (gpuarena_stream_t)(1000 + i);
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 4096, s, &p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
        if (i == 1)
            first = p;
        ck_assert_uint_le(bm->npools, GA_POOLS_MAX);
    }
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_uint_eq(bm->npools, GA_POOLS_MAX);
    ck_assert(ga_pool_holds(&bm->limbo));
    /* The statistics tell apart what the live pools hold, what limbo
     * holds (at least the retired streams' blocks) and the rest, ANY's. */
    gpuarena_stats_t sp;
    ck_assert_int_eq(gpuarena_stats(a, &sp), GPUARENA_SUCCESS);
    ck_assert_uint_eq(sp.stream_pools, GA_POOLS_MAX);
    ck_assert_uint_ge(sp.retired_cached, (N - GA_POOLS_MAX) * 4096);
    /* Each stream's free took in the free rest of its granule; the next
     * stream's miss gave back what no stream used (ga_pool_reclaim), and
     * the retired pools left in limbo only what their streams freed: the
     * 296 blocks of 4 KiB fit one granule of 2 MiB, not one each. */
    ck_assert_uint_le(sp.reserved, 2 * MI);
    ck_assert_uint_le(sp.retired_cached, 2 * (N - GA_POOLS_MAX) * 4096);
    ck_assert_uint_ge(sp.stream_cached, GA_POOLS_MAX * 4096);
    uint64_t nany = 0, any = 0;
    for (int cls = 0; cls < CLASS_COUNT; cls++)
        ga_fit_tally(&bm->any.fit[cls], &nany, &any);
    ck_assert_uint_eq(sp.stream_cached + sp.retired_cached + any, sp.cached);
    /* The first stream's pool went first: its block is in limbo, and
     * neither a new stream nor the first one again gets it. */
    ga_lock(&bm->lock);
    ga_block_t *b = NULL;
    for (ga_segment_t *g = bm->segs; g && !b; g = g->next)
        for (ga_block_t *x = g->first; x; x = x->next)
            if (x->addr <= (uintptr_t)first && (uintptr_t)first < x->addr + x->size)
                b = x;
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(b->pool, &bm->limbo);
    ga_unlock(&bm->lock);
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, (gpuarena_stream_t)(1000 + N + 1), &p),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, (gpuarena_stream_t)1001, &q), GPUARENA_SUCCESS);
    ck_assert_ptr_ne(p, first);
    ck_assert_ptr_ne(q, first);
    ck_assert_int_eq(gpuarena_free(a, p, (gpuarena_stream_t)(1000 + N + 1)), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, q, (gpuarena_stream_t)1001), GPUARENA_SUCCESS);
    /* Trim waits for the device: limbo goes back, and with it every byte. */
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert(!ga_pool_holds(&bm->limbo));
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.retired_cached, 0);
    ck_assert_uint_eq(st.stream_cached, 0);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A stream pool takes in the free memory of ANY around what its stream
 * frees; when the pool is retired, that memory goes back to ANY, and
 * limbo keeps only what the stream used (sweep.c, part_out): here each
 * pool holds its stream's 4 KiB and the 4 KiB after it, freed with no
 * stream, and no allocation misses in between to give those back. */
START_TEST(retired_pools_keep_only_what_streams_used)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=false", &a), GPUARENA_SUCCESS);
    enum { N = GA_POOLS_MAX + 40 };
    static void *p[N], *q[N];
    for (unsigned i = 0; i < N; i++) {
        ck_assert_int_eq(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p[i]), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &q[i]), GPUARENA_SUCCESS);
    }
    for (unsigned i = 0; i < N; i++) {
        ck_assert_int_eq(gpuarena_free(a, q[i], GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p[i], (gpuarena_stream_t)(uintptr_t)(7000 + i)),
                         GPUARENA_SUCCESS);
    }
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.stream_pools, GA_POOLS_MAX);
    ck_assert_uint_eq(st.retired_cached, (N - GA_POOLS_MAX) * 4096);
    ck_assert_uint_ge(st.stream_cached, GA_POOLS_MAX * 4096);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* This thread's caches of BM. */
static unsigned own_caches(ga_bm_t *bm)
{
    unsigned n = 0;
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next)
        n += t->bm == bm;
    return n;
}

/* Whether this thread has a cache of BM for stream ID (no walk of
 * ga_tcache_find, which would count as a use). */
static bool has_cache(ga_bm_t *bm, uint64_t id)
{
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next)
        if (t->bm == bm && t->stream.id == id)
            return true;
    return false;
}

/* A thread that frees on a new stream for each step (torch.cuda.Stream()
 * in a loop) keeps at most TC_PER_ARENA caches of the arena.  The pools
 * that the retired caches' blocks go to want a sweep that never comes;
 * they do not send the frees of the new streams past their caches
 * (wanted_map), where each new stream's pool took in the free memory
 * around its block: the arena grows by what the dead streams' blocks
 * hold, not by a granule per stream. */
START_TEST(stream_caches_bounded)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "expandable=true", &a), GPUARENA_SUCCESS);
    ga_bm_t *bm = a->bm;
    enum { N = 1200 }; /* more than two granules of 2 MiB in 4 KiB blocks */
    void *first = NULL;
    for (uintptr_t i = 1; i <= N; i++) {
        gpuarena_stream_t s = (gpuarena_stream_t)(5000 + i);
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 4096, s, &p), GPUARENA_SUCCESS);
        for (int k = 0; k < 4; k++) {
            ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_alloc(a, 4096, s, &p), GPUARENA_SUCCESS);
        }
        ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
        if (i == 1)
            first = p;
        ck_assert_uint_le(own_caches(bm), TC_PER_ARENA);
    }
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_uint_eq(own_caches(bm), TC_PER_ARENA);
    /* The cache retired is the one used longest ago, not the one made
     * first: the oldest stream, used again, keeps its cache, and the
     * next oldest's goes. */
    const uint64_t old = 5000 + N - TC_PER_ARENA + 1;
    ck_assert(has_cache(bm, old));
    ck_assert(has_cache(bm, old + 1));
    void *u = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 8192, (gpuarena_stream_t)old, &u), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, u, (gpuarena_stream_t)old), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 8192, (gpuarena_stream_t)(5000 + N + 1), &u),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, u, (gpuarena_stream_t)(5000 + N + 1)), GPUARENA_SUCCESS);
    ck_assert(has_cache(bm, old));
    ck_assert(!has_cache(bm, old + 1));
    ck_assert_uint_eq(own_caches(bm), TC_PER_ARENA);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    /* 1200 blocks of 4 KiB: three granules (a granule per stream once
     * the first was full, with one wanted bit per id % 64). */
    ck_assert_uint_le(st.reserved, 3 * 2 * MI);
    /* The first stream's block left its cache for good: the stream gets
     * no other block back while it sits in its pool or in limbo. */
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, (gpuarena_stream_t)(5000 + N + 2), &p),
                     GPUARENA_SUCCESS);
    ck_assert_ptr_ne(p, first);
    ck_assert_int_eq(gpuarena_free(a, p, (gpuarena_stream_t)(5000 + N + 2)), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

static gpuarena_t *arena(gpuarena_kind_t kind, const char *opts)
{
    gpuarena_t *a = NULL;
    ck_assert_msg(gpuarena_create(kind, 0, opts, &a) == GPUARENA_SUCCESS, "create %s: %s", opts,
                  gpuarena_last_error());
    return a;
}

static gpuarena_stats_t stats(gpuarena_t *a)
{
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    return st;
}

static void *aalloc(gpuarena_t *a, size_t size, gpuarena_stream_t s)
{
    void *p = NULL;
    ck_assert_msg(gpuarena_alloc(a, size, s, &p) == GPUARENA_SUCCESS, "alloc %zu: %s", size,
                  gpuarena_last_error());
    ck_assert_ptr_nonnull(p);
    return p;
}

static void afree(gpuarena_t *a, void *p, gpuarena_stream_t s)
{
    ck_assert_msg(gpuarena_free(a, p, s) == GPUARENA_SUCCESS, "free: %s", gpuarena_last_error());
}

/* Retiring a pool to make room for a new stream's skipped every pool
 * whose sweep was out; with every pool's out, the manager took a
 * GA_POOLS_MAX + 1st (gpuarena_stats(3) says at most GA_POOLS_MAX, and
 * ga_bm_check refused it).  The oldest goes all the same. */
START_TEST(stream_pools_bounded_with_sweeps_out)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "thread_cache=false,sim_event_delay=1000000");
    ga_bm_t *bm = a->bm;
    enum { N = GA_POOLS_MAX };
    void *p[N + 1];
    for (uintptr_t i = 1; i <= N; i++) {
        p[i - 1] = aalloc(a, 4096, (gpuarena_stream_t)i);
        afree(a, p[i - 1], (gpuarena_stream_t)i);
    }
    /* A miss on another stream asks every pool for a sweep... */
    void *big = aalloc(a, 1 * MI, (gpuarena_stream_t)1000);
    /* ... which the next free of each stream records, and which the
     * simulated GPU does not reach. */
    for (uintptr_t i = 1; i <= N; i++) {
        void *r = aalloc(a, 4096, (gpuarena_stream_t)i);
        afree(a, r, (gpuarena_stream_t)i);
    }
    ck_assert_uint_eq(bm->npools, GA_POOLS_MAX);
    unsigned out = 0;
    for (unsigned i = 0; i < bm->npools; i++)
        out += bm->pools[i]->sweep != NULL;
    ck_assert_uint_ge(out, GA_POOLS_MAX - 1); /* stream 1000's own has none */
    afree(a, big, (gpuarena_stream_t)1000);
    void *x = aalloc(a, 4096, (gpuarena_stream_t)2000);
    afree(a, x, (gpuarena_stream_t)2000);
    ck_assert_uint_le(bm->npools, GA_POOLS_MAX);
    ck_assert_uint_le(stats(a).stream_pools, GA_POOLS_MAX);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_uint_eq(stats(a).reserved, 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* The end of a test's arena: the checker passes, and it goes. */
static void check_and_destroy(gpuarena_t *a)
{
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}

/* N blocks of SIZE bytes allocated on S, then all freed there, in order. */
static void fill_and_free(gpuarena_t *a, unsigned n, size_t size, gpuarena_stream_t s)
{
    void *p[64];
    ck_assert_uint_le(n, 64);
    for (unsigned i = 0; i < n; i++)
        p[i] = aalloc(a, size, s);
    for (unsigned i = 0; i < n; i++)
        afree(a, p[i], s);
}

/* Blocks that a thread cache gives back outside a locked free count
 * against max_cached too: at the thread's exit, and when an allocation
 * gives back the thread's large slot. */
static void *park_then_exit(void *arg)
{
    gpuarena_t *a = arg;
    void *p = NULL;
    if (gpuarena_alloc(a, (size_t)8 << 20, GPUARENA_STREAM_HOST, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(a, p, GPUARENA_STREAM_HOST) != GPUARENA_SUCCESS) /* the large slot */
        return NULL;
    return p;
}

/* max_reserved: the arena never holds more than the cap from the
 * provider; a request past it fails as out of memory and says why, after
 * the cached bytes were given back and the request retried (memory
 * cached for other sizes does not block it).  Fixed and growable
 * segments. */
START_TEST(max_reserved_caps_the_arena)
{
    static const char *const opts[] = {"max_reserved=8M,expandable=false",
                                       "max_reserved=8M,expandable=true"};
    const size_t cap = (size_t)8 << 20, mib = (size_t)1 << 20;
    for (int i = 0; i < 2; i++) {
        gpuarena_t *a = arena(GPUARENA_SIM, opts[i]);
        void *p[16];
        int n = 0;
        gpuarena_status_t st = GPUARENA_SUCCESS;
        while (n < 16 &&
               (st = gpuarena_alloc(a, mib, GPUARENA_STREAM_HOST, &p[n])) == GPUARENA_SUCCESS) {
            ck_assert_uint_le(stats(a).reserved, cap);
            n++;
        }
        ck_assert_int_eq(st, GPUARENA_ERR_OUT_OF_MEMORY);
        ck_assert_msg(strstr(gpuarena_last_error(), "max_reserved"), "%s: %s", opts[i],
                      gpuarena_last_error());
        ck_assert_msg(n >= 6, "%s: only %d blocks of 1 MiB under an 8 MiB cap", opts[i], n);
        gpuarena_stats_t s1 = stats(a);
        ck_assert_uint_le(s1.reserved_peak, cap);
        ck_assert_uint_eq(s1.oom_failures, 1);
        /* The failed allocation is neither a hit nor a miss. */
        ck_assert_uint_eq(s1.cache_hits + s1.cache_misses, s1.allocs);
        /* Cached 1 MiB blocks and small ones give way to a larger block. */
        for (int k = 0; k < n; k++)
            afree(a, p[k], GPUARENA_STREAM_HOST);
        void *small[64];
        for (int k = 0; k < 64; k++)
            small[k] = aalloc(a, 4096, GPUARENA_STREAM_HOST);
        for (int k = 0; k < 64; k++)
            afree(a, small[k], GPUARENA_STREAM_HOST);
        void *big = aalloc(a, 6 * mib, GPUARENA_STREAM_HOST);
        ck_assert_uint_le(stats(a).reserved_peak, cap);
        /* Past the cap whatever is released: refused, nothing changes. */
        gpuarena_stats_t s2 = stats(a);
        void *q = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 4 * mib, GPUARENA_STREAM_HOST, &q),
                         GPUARENA_ERR_OUT_OF_MEMORY);
        ck_assert_ptr_null(q);
        /* A host arena, or a sim arena of no set size, has no device
         * whose free memory it could give: none is made up. */
        ck_assert_ptr_null(strstr(gpuarena_last_error(), "device"));
        ck_assert_uint_eq(stats(a).device_free, 0);
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(out);
        ck_assert_int_eq(gpuarena_stats_print(out, NULL), GPUARENA_SUCCESS);
        fclose(out);
        ck_assert_ptr_nonnull(strstr(text, "out of memory: retries"));
        ck_assert_ptr_null(strstr(text, "free on the device"));
        free(text);
        ck_assert_uint_eq(stats(a).in_use, s2.in_use);
        afree(a, big, GPUARENA_STREAM_HOST);
        ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
}
END_TEST

/* gpuarena_set: the caps change on a live arena, at once; every other
 * key, a bad value or a bad option changes nothing, whatever else the
 * options hold. */
START_TEST(set_changes_the_caps_of_a_live_arena)
{
    const size_t mib = (size_t)1 << 20;
    gpuarena_t *a = arena(GPUARENA_SIM, "expandable=false,thread_cache=false");
    void *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = aalloc(a, mib, GPUARENA_STREAM_HOST);
    for (int k = 0; k < 4; k++)
        afree(a, p[k], GPUARENA_STREAM_HOST);
    gpuarena_stats_t s0 = stats(a);
    ck_assert_uint_ge(s0.cached, 4 * mib);

    /* A fixed key is refused as fixed whatever its value: one that breaks
     * a rule tying it to another fixed key (small_max above
     * small_segment), one that is no value of it, or none. */
    static const char *const bad[] = {
        "round=4096",  "max_cached=0,round=4096", "small_max=8M", "round=3000",
        "round=",      "max_cached=lots",         "max_cahced=0", "max_cached",
        "max_cached=", "sim.max_cached=0"};
    static const gpuarena_status_t why[] = {
        GPUARENA_ERR_INVALID_ARGUMENT, GPUARENA_ERR_INVALID_ARGUMENT,
        GPUARENA_ERR_INVALID_ARGUMENT, GPUARENA_ERR_INVALID_ARGUMENT,
        GPUARENA_ERR_INVALID_ARGUMENT, GPUARENA_ERR_CONFIG,
        GPUARENA_ERR_CONFIG,           GPUARENA_ERR_CONFIG,
        GPUARENA_ERR_CONFIG,           GPUARENA_ERR_CONFIG};
    _Static_assert(sizeof bad / sizeof *bad == sizeof why / sizeof *why, "one status a case");
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(gpuarena_set(a, bad[i]), why[i]);
        ck_assert_str_ne(gpuarena_last_error(), "");
        ck_assert_uint_eq(stats(a).cached, s0.cached);
        ck_assert_uint_eq(stats(a).reserved, s0.reserved);
    }
    ck_assert_int_eq(gpuarena_set(a, "round=4096"), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "'round' is fixed"));
    ck_assert_int_eq(gpuarena_set(a, "sim.max_cached=0"), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "gpuarena_set: key 'sim.max_cached': the options of "
                                            "one arena take no section (write 'max_cached')");
    ck_assert_int_eq(gpuarena_set(NULL, "max_cached=0"), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_set(a, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_set(a, ""), GPUARENA_SUCCESS);
    ck_assert_uint_eq(stats(a).cached, s0.cached);

    /* A lower max_cached gives the excess back at once. */
    ck_assert_int_eq(gpuarena_set(a, "max_cached=0"), GPUARENA_SUCCESS);
    ck_assert_uint_eq(stats(a).cached, 0);
    ck_assert_uint_eq(stats(a).reserved, 0);

    /* max_reserved: refused past it, allowed again once lifted. */
    ck_assert_int_eq(gpuarena_set(a, "max_reserved=2M,max_cached=none"), GPUARENA_SUCCESS);
    void *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4 * mib, GPUARENA_STREAM_HOST, &q),
                     GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "max_reserved"));
    q = aalloc(a, mib, GPUARENA_STREAM_HOST);
    afree(a, q, GPUARENA_STREAM_HOST);
    ck_assert_int_eq(gpuarena_set(a, "max_reserved=none"), GPUARENA_SUCCESS);
    q = aalloc(a, 4 * mib, GPUARENA_STREAM_HOST);
    afree(a, q, GPUARENA_STREAM_HOST);
    ck_assert_uint_ge(stats(a).cached, 4 * mib);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

START_TEST(max_cached_after_caches_give_back)
{
    gpuarena_t *a = arena(GPUARENA_HOST, "max_cached=0");
    pthread_t t;
    void *p = NULL;
    ck_assert_int_eq(pthread_create(&t, NULL, park_then_exit, a), 0);
    ck_assert_int_eq(pthread_join(t, &p), 0);
    ck_assert_ptr_nonnull(p);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.cached, 0);
    ck_assert_uint_eq(st.reserved, 0);

    void *q = aalloc(a, (size_t)8 << 20, GPUARENA_STREAM_HOST);
    afree(a, q, GPUARENA_STREAM_HOST);              /* this thread's large slot */
    void *r = aalloc(a, 512, GPUARENA_STREAM_HOST); /* locked: gives the slot back */
    st = stats(a);
    ck_assert_msg(st.reserved < ((size_t)8 << 20), "the large slot's block stayed: %" PRIu64,
                  st.reserved);
    afree(a, r, GPUARENA_STREAM_HOST);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Blocks a thread cache gives back to a trim, or to an allocation that
 * would grow a growable segment, count as cached from then on, under
 * max_cached: they stayed over the cap (4 MiB against 1) until some later
 * free, whatever a trim's KEEP. */
START_TEST(max_cached_when_caches_give_back_to_trim_or_growth)
{
    for (unsigned growable = 0; growable < 2; growable++) {
        gpuarena_t *a = arena(GPUARENA_HOST, growable ? "expandable=true,max_cached=1M"
                                                      : "expandable=false,max_cached=1M");
        void *p[16];
        for (unsigned i = 0; i < 16; i++)
            p[i] = aalloc(a, 256 * KI, GPUARENA_STREAM_HOST);
        for (unsigned i = 0; i < 16; i++)
            afree(a, p[i], GPUARENA_STREAM_HOST); /* into this thread's cache */
        void *q = NULL;
        if (growable)
            q = aalloc(a, 512 * KI, GPUARENA_STREAM_HOST); /* the caches give back first */
        else
            ck_assert_int_eq(gpuarena_trim(a, SIZE_MAX), GPUARENA_SUCCESS);
        gpuarena_stats_t st = stats(a);
        /* Growable: Q's granule keeps the rest of it cached (2 MiB). */
        ck_assert_msg(st.cached <= (growable ? 2 * MI - 512 * KI : MI),
                      "%s: %" PRIu64 " bytes cached, over max_cached", growable ? "growth" : "trim",
                      st.cached);
        if (q)
            afree(a, q, GPUARENA_STREAM_HOST);
        check_and_destroy(a);
    }
}
END_TEST

/* release_threshold: the free fixed segments a miss returns go the
 * largest first, whatever their class (gpuarena.conf(5)): the small
 * class's were all returned before any large one, so a free 2 MiB small
 * segment went and a free 20 MiB large one stayed (21 MiB cached). */
START_TEST(release_threshold_largest_first)
{
    gpuarena_t *a =
        arena(GPUARENA_HOST, "expandable=false,release_threshold=20M,thread_cache=false");
    void *s = aalloc(a, 4 * KI, GPUARENA_STREAM_HOST); /* a small segment (2 MiB) */
    void *l = aalloc(a, 8 * MI, GPUARENA_STREAM_HOST); /* a large one (20 MiB) */
    afree(a, s, GPUARENA_STREAM_HOST);
    afree(a, l, GPUARENA_STREAM_HOST);
    ck_assert_uint_ge(stats(a).cached, 22 * MI);
    void *big = aalloc(a, 21 * MI, GPUARENA_STREAM_HOST); /* fits neither */
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.provider_unmaps, 1);
    ck_assert_msg(st.cached <= 4 * MI, "%" PRIu64 " bytes cached: the 20 MiB segment stayed",
                  st.cached);
    afree(a, big, GPUARENA_STREAM_HOST);
    check_and_destroy(a);
}
END_TEST

/* A stream frees its blocks one after the other, each next to the last,
 * while another stream allocates as much: each free merged with the
 * blocks freed before it, the merged block took the newest stamp, and no
 * sweep ever covered it, so the other stream never had any of it and
 * the arena grew by all it allocated (128 MiB for 64 live).  The old
 * part of the merged block that a completed sweep covers goes to ANY. */
START_TEST(other_stream_gets_the_old_part_of_a_merged_block)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "expandable=true,thread_cache=false,sim_event_delay=4");
    gpuarena_stream_t s1 = (gpuarena_stream_t)(uintptr_t)1, s2 = (gpuarena_stream_t)(uintptr_t)2;
    void *p[32], *q[32];
    for (unsigned i = 0; i < 32; i++)
        p[i] = aalloc(a, 2 * MI, s1);
    for (unsigned i = 0; i < 32; i++) {
        afree(a, p[i], s1);
        q[i] = aalloc(a, 2 * MI, s2);
    }
    gpuarena_stats_t st = stats(a);
    ck_assert_msg(st.reserved <= 96 * MI, "%" PRIu64 " MiB reserved for 64 MiB live",
                  st.reserved / MI);
    for (unsigned i = 0; i < 32; i++)
        afree(a, q[i], s2);
    check_and_destroy(a);
}
END_TEST

/* Frees on a random stream, whatever the allocation's (two streams and
 * none), and allocations on a random one: the stream pools kept what
 * sweeps gave ANY (each free took its ANY neighbours in again), and sweeps
 * were asked for only at a miss, after the arena had grown.  With 48 live
 * blocks of up to 8 MiB (a peak request of 271 MiB) the arena reserved
 * 906 MiB after 300000 operations and went on growing (2.9 GiB after
 * 3 M); a pool that other streams missed beside takes nothing of ANY in
 * and asks for sweeps as it grows: 634 MiB (702 after 3 M). */
START_TEST(random_streams_do_not_grow_the_arena)
{
    enum { N = 48 };
    gpuarena_t *a = arena(GPUARENA_SIM, "expandable=true");
    gpuarena_stream_t on[3] = {(gpuarena_stream_t)(uintptr_t)1, (gpuarena_stream_t)(uintptr_t)2,
                               GPUARENA_STREAM_HOST};
    uint64_t seed = 88172645463325252ull;
    void *p[N];
    size_t size[N], live = 0, peak = 0;
    for (unsigned i = 0; i < N; i++) {
        size[i] = 1 + ga_test_rand(&seed) % (8 * MI);
        p[i] = aalloc(a, size[i], on[ga_test_rand(&seed) % 3]);
        live += size[i];
    }
    for (long k = 0; k < 300000; k++) {
        unsigned i = (unsigned)(ga_test_rand(&seed) % N);
        afree(a, p[i], on[ga_test_rand(&seed) % 3]);
        live -= size[i];
        size[i] = 1 + ga_test_rand(&seed) % (8 * MI);
        p[i] = aalloc(a, size[i], on[ga_test_rand(&seed) % 3]);
        live += size[i];
        peak = live > peak ? live : peak;
    }
    gpuarena_stats_t st = stats(a);
    ck_assert_msg(st.reserved_peak <= peak * 11 / 4,
                  "%" PRIu64 " MiB reserved at the peak for a peak request of %zu MiB",
                  st.reserved_peak / MI, peak / MI);
    for (unsigned i = 0; i < N; i++)
        afree(a, p[i], on[2]);
    check_and_destroy(a);
}
END_TEST

/* A completed sweep gives ANY the old part of a block whose newer frees
 * lie on both sides of it: two cuts, each a new record.  With one record
 * to be had, the first cut was made and the second not, and the two
 * sides lay next to each other in the stream's pool unmerged
 * (gpuarena_check: "were not merged") until a later free merged them. */
START_TEST(old_part_cut_twice_or_not_at_all)
{
    if (!records_can_fail())
        return; /* nothing to make fail */
    fx_t *f = fx_new(false, 64 * KI, NULL);
    void *v[7];
    for (unsigned i = 0; i < 7; i++)
        v[i] = fx_alloc(f, 64 * KI, 1);  /* b c d g z g2 y, side by side */
    fx_free(f, v[1], 1);                 /* c */
    void *big = fx_alloc(f, 64 * MI, 2); /* stream 2 misses: sweeps wanted, with old parts */
    fx_free(f, v[4], 1);                 /* z: the sweep is recorded behind it */
    fx_free(f, v[0], 1);                 /* b, then d: [b c d], its old part c */
    fx_free(f, v[2], 1);
    ga_block_t *m = ga_lmap_find(&f->bm->live, U(v[3]))->prev;
    ck_assert_uint_eq(m->addr, U(v[0]));
    ck_assert_uint_eq(m->olo, U(v[1]));
    ck_assert_uint_eq(m->ohi, U(v[2]));
    tp_complete(&f->tp, 1); /* the sweep has completed */
    ga_block_t *rest = f->bm->spare_blocks->next;
    f->bm->spare_blocks->next = NULL; /* one record left, and none to be made */
    records_fail = true;
    fx_free(f, v[6], 1); /* finds the sweep done; checks the manager */
    records_fail = false;
    ga_block_t **end = &f->bm->spare_blocks;
    while (*end)
        end = &(*end)->next;
    *end = rest;
    fx_free(f, v[3], 1);
    fx_free(f, v[5], 1);
    fx_free(f, big, 2);
    tp_complete(&f->tp, 1);
    tp_complete(&f->tp, 2);
    fx_done(f);
}
END_TEST

/* A new stream's pool retires the pool used longest ago (gpuarena(7)),
 * also where every older pool has a sweep out: it retired the pool of
 * the stream used last, whose next allocation then missed its own
 * block. */
START_TEST(retired_pool_is_the_oldest)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "thread_cache=false,sim_event_delay=1000000");
#define S(i) ((gpuarena_stream_t)(uintptr_t)(i))
    static void *x[256], *y[256];
    for (int i = 1; i <= 255; i++) {
        x[i] = aalloc(a, 4096, S(i));
        y[i] = aalloc(a, 4096, S(i));
        afree(a, x[i], S(i));
    }
    /* A miss with no stream asks every pool for a sweep, recorded by
     * each stream's next free, still ahead of the "GPU". */
    void *big = aalloc(a, 64 * MI, GPUARENA_STREAM_HOST);
    for (int i = 1; i <= 255; i++)
        afree(a, y[i], S(i));
    void *hot = aalloc(a, 4096, S(1000)); /* the 256th pool, used last */
    afree(a, hot, S(1000));
    ck_assert_uint_eq(stats(a).stream_pools, 256);
    void *p = aalloc(a, 4096, S(2000)); /* a pool is retired for it */
    afree(a, p, S(2000));
    void *q = aalloc(a, 4096, S(1000));
    ck_assert_ptr_eq(q, hot);
    afree(a, q, S(1000));
    afree(a, big, GPUARENA_STREAM_HOST);
#undef S
    check_and_destroy(a);
}
END_TEST

/* trim (and the out-of-memory path) wait for the whole device and then
 * empty every stream pool: nothing there needs an event any more, but a
 * pool with no sweep out took one to finish as a sweep would, and where
 * none could be made (no host memory) its blocks stayed: trim(0)
 * returned success with 4 MiB still cached in the stream's pool. */
START_TEST(drain_needs_no_event)
{
    fx_t *f = fx_new(false, 64 * KI, NULL);
    fx_free(f, fx_alloc(f, 4 * MI, 1), 1);
    ck_assert_uint_eq(fx_stats(f).stream_cached, fx_stats(f).cached);
    f->tp.events_refused = true;
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    f->tp.events_refused = false;
    ck_assert_uint_eq(fx_stats(f).reserved, 0);
    fx_done(f);
}
END_TEST

/* An allocation that fails for want of host memory is neither a cache
 * hit nor a miss (gpuarena_stats(3): each allocation made is one of
 * them).  Here the records run out first; where the live map could not
 * grow for a block already found (not reached here), one was counted. */
START_TEST(failed_allocation_is_no_hit_nor_miss)
{
    if (!records_can_fail())
        return; /* nothing to make fail */
    gpuarena_t *a = arena(GPUARENA_SIM, "thread_cache=false");
    static void *p[4096];
    unsigned n = 0, failed = 0;
    for (; n < 4096 && !failed; n++) {
        /* From the 500th on, no new record slab and no larger live map. */
        records_fail = n >= 500;
        if (gpuarena_alloc(a, 4096, (gpuarena_stream_t)(uintptr_t)1, &p[n]) != GPUARENA_SUCCESS) {
            p[n] = NULL;
            failed++;
        }
        records_fail = false;
    }
    ck_assert_uint_gt(failed, 0);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.cache_hits + st.cache_misses, st.allocs);
    for (unsigned i = 0; i < n; i++)
        if (p[i])
            afree(a, p[i], (gpuarena_stream_t)(uintptr_t)1);
    check_and_destroy(a);
}
END_TEST

/* A block that thread A's cache hands out again for another size, then
 * freed by thread B: each thread's view of the requested bytes stays
 * right (B's went below zero and its peak check wrapped to about 2^64). */
typedef struct {
    gpuarena_t *a;
    void *p;
    pthread_barrier_t bar;
} handoff_t;

static void *take_again(void *arg)
{
    handoff_t *h = arg;
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)7;
    void *p = NULL, *q = NULL;
    if (gpuarena_alloc(h->a, 1, s, &p) == GPUARENA_SUCCESS &&
        gpuarena_free(h->a, p, s) == GPUARENA_SUCCESS &&
        gpuarena_alloc(h->a, 512, s, &q) == GPUARENA_SUCCESS && q != p) /* not the cached one */
        (void)gpuarena_free(h->a, q, s), q = NULL;
    h->p = q;
    pthread_barrier_wait(&h->bar); /* B frees it */
    pthread_barrier_wait(&h->bar); /* B has looked: this thread and its cache may go */
    return NULL;
}

START_TEST(requested_peak_across_threads)
{
    handoff_t h = {.a = arena(GPUARENA_HOST, NULL)};
    ck_assert_int_eq(pthread_barrier_init(&h.bar, NULL, 2), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, take_again, &h), 0);
    pthread_barrier_wait(&h.bar);
    ck_assert_ptr_nonnull(h.p);
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)7;
    afree(h.a, h.p, s);                                          /* into this thread's cache */
    void *r = aalloc(h.a, 100, (gpuarena_stream_t)(uintptr_t)8); /* locked: peaks from here */
    gpuarena_stats_t st = stats(h.a);
    ck_assert_uint_eq(st.requested, 100);
    ck_assert_uint_eq(st.requested_peak, 512);
    pthread_barrier_wait(&h.bar);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    afree(h.a, r, (gpuarena_stream_t)(uintptr_t)8);
    st = stats(h.a);
    ck_assert_uint_eq(st.requested, 0);
    ck_assert_uint_eq(st.requested_peak, 512);
    ck_assert_int_eq(gpuarena_check(h.a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(h.a), GPUARENA_SUCCESS);
    pthread_barrier_destroy(&h.bar);
}
END_TEST

/* One thread, two streams: the cached peak counts the blocks of both
 * streams' caches (a free checked only its own cache's). */
START_TEST(cached_peak_counts_every_cache_of_the_thread)
{
    gpuarena_t *a = arena(GPUARENA_HOST, NULL);
    gpuarena_stream_t s1 = (gpuarena_stream_t)(uintptr_t)1, s2 = (gpuarena_stream_t)(uintptr_t)2;
    void *p = aalloc(a, (size_t)1 << 20, s1), *q = aalloc(a, (size_t)1 << 20, s2);
    uint64_t reserved = stats(a).reserved;
    afree(a, p, s1);
    afree(a, q, s2); /* each in its stream's cache: all of it cached */
    p = aalloc(a, (size_t)1 << 20, s1);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.reserved, reserved);
    ck_assert_uint_eq(st.cached, reserved - ((size_t)1 << 20));
    ck_assert_uint_eq(st.cached_peak, reserved);
    /* A block in a cache is a free block, as its bytes are cached. */
    uint64_t free_blocks = st.free_blocks;
    afree(a, p, s1);
    ck_assert_uint_eq(stats(a).free_blocks, free_blocks + 1);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* One thread, one stream more than it keeps caches for: making the last
 * cache retires the oldest, whose block goes back to its pool.  Everything
 * is free then, so the cached peak is all that is reserved (the retire
 * left the in-use count that the caches' peak checks read too high, and
 * that peak unrecorded). */
START_TEST(cached_peak_after_a_cache_is_retired)
{
    enum { STREAMS = 17 }; /* tcache.h's TC_PER_ARENA, and one more */
    gpuarena_t *a = arena(GPUARENA_HOST, NULL);
    void *p[STREAMS];
    for (uintptr_t i = 0; i < STREAMS; i++)
        p[i] = aalloc(a, 4096, (gpuarena_stream_t)(0x100 + i));
    for (uintptr_t i = 0; i < STREAMS; i++)
        afree(a, p[i], (gpuarena_stream_t)(0x100 + i));
    void *q = aalloc(a, 100000, GPUARENA_STREAM_HOST); /* locked: the peaks from here */
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.reserved_peak, st.reserved);
    ck_assert_uint_eq(st.cached_peak, st.reserved_peak);
    afree(a, q, GPUARENA_STREAM_HOST);
    check_and_destroy(a);
}
END_TEST

/* A trim to KEEP bytes on growable segments keeps about that much cached
 * (within a granule), not the nearest whole free block below it: four
 * blocks of 10 MiB freed, merged into one, trimmed to 15 MiB, kept 26
 * MiB of granules out of them (trim gave everything back before). */
START_TEST(trim_keeps_what_it_is_asked_to)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "expandable=true,granule=2M,thread_cache=false");
    fill_and_free(a, 4, 10 * MI, NULL);
    uint64_t trims = stats(a).trims;
    ck_assert_int_eq(gpuarena_trim(a, 15 * MI), GPUARENA_SUCCESS);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_le(st.cached, 15 * MI);
    ck_assert_uint_ge(st.cached, 13 * MI);
    ck_assert_uint_eq(st.trims, trims + 1); /* one call, one count */
    /* And the cached memory serves. */
    void *q = aalloc(a, 12 * MI, NULL);
    ck_assert_uint_eq(stats(a).reserved, st.reserved);
    afree(a, q, NULL);
    check_and_destroy(a);
}
END_TEST

START_TEST(max_cached_cap)
{
    gpuarena_t *a = arena(GPUARENA_HOST, "granule=64K,max_cached=1M,thread_cache=false");
    void *p[16];
    for (unsigned i = 0; i < 16; i++)
        p[i] = aalloc(a, 512 * KI, NULL);
    for (unsigned i = 0; i < 16; i++) {
        afree(a, p[i], NULL);
        gpuarena_stats_t st = stats(a);
        ck_assert_uint_le(st.cached, 1 * MI);
        ck_assert_uint_eq(st.in_use, (15 - i) * 512 * KI);
        ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    }
    ck_assert_uint_ge(stats(a).provider_unmaps, 1);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Blocks freed on a stream count against max_cached too (they stayed in
 * the stream's pool, over the cap, until a trim): they go once the GPU has
 * passed their frees, which a sweep recorded at the stream's next free
 * shows.  With no simulated delay, at once; with one, once the simulated
 * GPU has moved on (each new stream handle ticks its clock), even though
 * each free merges with the blocks freed before it (the old part of the
 * merged block goes: all 64 MiB stayed until the next free after the
 * last, when a sweep took the merged block's newest stamp every time). */
START_TEST(max_cached_stream_pools)
{
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)1;
    gpuarena_t *a = arena(GPUARENA_SIM, "max_cached=0,thread_cache=false,sim_event_delay=0");
    fill_and_free(a, 64, MI, s);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.stream_cached, 0);
    ck_assert_uint_eq(st.cached, 0);
    ck_assert_uint_eq(st.reserved, 0);
    check_and_destroy(a);

    a = arena(GPUARENA_SIM, "max_cached=0,thread_cache=false,sim_event_delay=8");
    fill_and_free(a, 64, MI, s);
    st = stats(a);
    ck_assert_uint_ge(st.stream_cached, MI);      /* the GPU may not be past the last */
    ck_assert_uint_le(st.stream_cached, 16 * MI); /* it is past the first, 8 frees later */
    for (unsigned round = 0; round < 2; round++) {
        for (uintptr_t k = 0; k < 16; k++) /* time passes */
            afree(a, aalloc(a, 4096, (gpuarena_stream_t)(100 + 16 * round + k)), NULL);
        afree(a, aalloc(a, MI, s), s); /* a free on S records a sweep, or finds it done */
    }
    for (uintptr_t k = 0; k < 16; k++)
        afree(a, aalloc(a, 4096, (gpuarena_stream_t)(200 + k)), NULL);
    st = stats(a);
    /* Left: what the last free on S put in its pool (a granule at most),
     * which no later free on S has covered with a sweep. */
    ck_assert_uint_le(st.cached, 2 * MI);
    check_and_destroy(a);
}
END_TEST

static void zero_fill(const char *opts, bool zero)
{
    gpuarena_t *a = arena(GPUARENA_HOST, opts);
    for (unsigned round = 0; round < 3; round++) {
        unsigned char *p = aalloc(a, 4000, NULL);
        memset(p, 0xAB, 4000);
        afree(a, p, NULL);
        unsigned char *q = aalloc(a, 4000, NULL);
        ck_assert_ptr_eq(q, p); /* reused, not fresh zero pages */
        for (size_t i = 0; i < 4000; i++)
            ck_assert_msg(q[i] == (zero ? 0 : 0xAB), "byte %zu is %#x (%s)", i, q[i], opts);
        afree(a, q, NULL);
    }
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}

START_TEST(zero_fill_on_reuse)
{
    zero_fill("zero=true,thread_cache=false", true);
    zero_fill("zero=true,thread_cache=true", true);
    /* The control: without zero the arena leaves the bytes alone, so the
     * test above sees the zeroing and not fresh pages. */
    zero_fill("zero=false,thread_cache=false", false);
    zero_fill("zero=false,thread_cache=true", false);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Statistics, with and without thread caches.                         */

static void stats_sequence(gpuarena_kind_t kind, const char *opts)
{
    gpuarena_t *a = arena(kind, opts);
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)7;
    void *p = aalloc(a, 1000, s);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.allocs, 1);
    ck_assert_uint_eq(st.cache_misses, 1);
    ck_assert_uint_eq(st.cache_hits, 0);
    ck_assert_uint_eq(st.requested, 1000);
    ck_assert_uint_eq(st.in_use, 1024);
    uint64_t reserved = st.reserved;
    ck_assert_uint_gt(reserved, 0);
    ck_assert_uint_eq(st.cached, reserved - 1024);
    void *q = aalloc(a, 3000, s); /* from the same mapping: a hit */
    st = stats(a);
    ck_assert_uint_eq(st.cache_hits, 1);
    ck_assert_uint_eq(st.cache_misses, 1);
    ck_assert_uint_eq(st.requested, 4000);
    ck_assert_uint_eq(st.in_use, 4096);
    ck_assert_uint_eq(st.reserved, reserved);
    ck_assert_uint_eq(st.live_blocks, 2);
    afree(a, q, s);
    st = stats(a);
    ck_assert_uint_eq(st.requested, 1000);
    ck_assert_uint_eq(st.in_use, 1024);
    ck_assert_uint_eq(st.cached, reserved - 1024);
    ck_assert_uint_eq(st.frees, 1);
    ck_assert_uint_eq(st.live_blocks, 1);
    q = aalloc(a, 3000, s); /* same stream, same size: a hit */
    st = stats(a);
    ck_assert_uint_eq(st.cache_hits, 2);
    ck_assert_uint_eq(st.allocs, 3);
    afree(a, q, s);
    afree(a, p, s);
    st = stats(a);
    ck_assert_uint_eq(st.allocs, 3);
    ck_assert_uint_eq(st.frees, 3);
    ck_assert_uint_eq(st.cache_hits, 2);
    ck_assert_uint_eq(st.cache_misses, 1);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.requested, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.requested_peak, 4000);
    ck_assert_uint_eq(st.in_use_peak, 4096);
    ck_assert_uint_eq(st.reserved_peak, reserved);
    ck_assert_uint_eq(st.cached, reserved);
    ck_assert_uint_eq(st.cached_peak, reserved);
    ck_assert_int_eq(gpuarena_stats_reset_peaks(a), GPUARENA_SUCCESS);
    st = stats(a);
    ck_assert_uint_eq(st.requested_peak, 0);
    ck_assert_uint_eq(st.in_use_peak, 0);
    ck_assert_uint_eq(st.reserved_peak, reserved);
    ck_assert_uint_eq(st.cached_peak, reserved);
    p = aalloc(a, 600, s);
    st = stats(a);
    ck_assert_uint_eq(st.requested_peak, 600);
    ck_assert_uint_eq(st.in_use_peak, 1024);
    afree(a, p, s);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    st = stats(a);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.cached, 0);
    ck_assert_uint_eq(st.reserved_peak, reserved);
    ck_assert_uint_eq(st.requested_peak, 600);
    ck_assert_uint_eq(st.allocs, 4);
    ck_assert_uint_eq(st.frees, 4);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}

START_TEST(statistics)
{
    stats_sequence(GPUARENA_HOST, "thread_cache=false");
    stats_sequence(GPUARENA_HOST, "thread_cache=true");
    stats_sequence(GPUARENA_SIM, "thread_cache=false");
    stats_sequence(GPUARENA_SIM, "thread_cache=true");
    stats_sequence(GPUARENA_SIM, "thread_cache=true,expandable=false");
}
END_TEST

/* The JSON of gpuarena_stats_print names how each arena's memory is made
 * (the table's memory line): null where its provider says nothing, else
 * the line as a JSON string, quotes, backslashes and control characters
 * escaped. */
START_TEST(stats_json_memory_line)
{
    gpuarena_t *a = arena(GPUARENA_SIM, NULL);
    char buf[1 << 16];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gpuarena_stats_print(f, "json"), GPUARENA_SUCCESS);
    fclose(f);
    ck_assert_msg(strstr(buf, "\"memory\": null}"), "%s", buf);
    static const char line[] = "made \"here\" \\ and\tthere";
    a->prov->how = line;
    f = fmemopen(buf, sizeof buf, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gpuarena_stats_print(f, "json"), GPUARENA_SUCCESS);
    fclose(f);
    a->prov->how = NULL;
    ck_assert_msg(strstr(buf, "\"memory\": \"made \\\"here\\\" \\\\ and\\u0009there\"}"), "%s",
                  buf);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* gpuarena_stats_print into a pipe that nobody reads blocks the printing
 * thread only: the report is made in memory while the list of arenas is
 * held and written after, so another thread makes and destroys arenas
 * meanwhile (they waited for the write, as did fork). */
static void *print_into(void *arg)
{
    FILE *w = arg;
    for (int i = 0; i < 40; i++)
        (void)gpuarena_stats_print(w, "json");
    fclose(w);
    return NULL;
}

START_TEST(stats_print_blocked_holds_up_no_arena)
{
    gpuarena_t *a[8];
    for (int i = 0; i < 8; i++)
        a[i] = arena(GPUARENA_SIM, NULL);
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    FILE *w = fdopen(fd[1], "w");
    ck_assert_ptr_nonnull(w);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, print_into, w), 0);
    /* 40 reports of 8 arenas are more than a pipe holds: the printer is
     * blocked in its write by now, or soon; this must not wait for it. */
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    gpuarena_t *b = arena(GPUARENA_HOST, NULL);
    ck_assert_int_eq(gpuarena_destroy(b), GPUARENA_SUCCESS);
    char buf[4096];
    while (read(fd[0], buf, sizeof buf) > 0)
        ;
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    close(fd[0]);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(gpuarena_destroy(a[i]), GPUARENA_SUCCESS);
}
END_TEST

/* An allocation that its out-of-memory retry saves did not fail: the
 * thread's message stays that of its last failure (it became the
 * capacity's, of the first try). */
START_TEST(recovered_allocation_keeps_the_message)
{
    const size_t mib = (size_t)1 << 20;
    gpuarena_t *a = arena(GPUARENA_SIM, "sim_capacity=64M,expandable=true,thread_cache=false");
    void *p = NULL, *q = NULL, *pin = NULL;
    /* 40 MiB cached behind a live large block, which they cannot grow into. */
    ck_assert_int_eq(gpuarena_alloc(a, 40 * mib, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 8 * mib, GPUARENA_STREAM_HOST, &pin), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_ne(gpuarena_free(a, (void *)16, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    char before[GA_ERROR_MAX];
    snprintf(before, sizeof before, "%s", gpuarena_last_error());
    ck_assert_str_ne(before, "");
    ck_assert_int_eq(gpuarena_alloc(a, 50 * mib, GPUARENA_STREAM_HOST, &q), GPUARENA_SUCCESS);
    ck_assert_uint_eq(stats(a).oom_retries, 1);
    ck_assert_str_eq(gpuarena_last_error(), before);
    ck_assert_int_eq(gpuarena_free(a, q, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, pin, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A failed write says why: the errno of the write, not EIO. */
START_TEST(stats_print_failure_says_why)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        return; /* no /dev/full here */
    setvbuf(f, NULL, _IONBF, 0);
    ck_assert_int_eq(gpuarena_stats_print(f, NULL), GPUARENA_ERR_SYSTEM);
    ck_assert_msg(strstr(gpuarena_last_error(), strerror(ENOSPC)), "%s", gpuarena_last_error());
    fclose(f);
}
END_TEST

/* A report into a pipe whose reader has gone fails with EPIPE
 * (gpuarena_stats(3): GPUARENA_ERR_SYSTEM for a closed pipe); SIGPIPE
 * killed the program, the report at exit too (GPUARENA_STATS=stderr
 * under `prog 2>&1 | head`).  A SIGPIPE of the program's own, pending
 * before, is left to it. */
START_TEST(stats_print_into_a_closed_pipe)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    close(fds[0]);
    FILE *out = fdopen(fds[1], "w");
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(gpuarena_stats_print(out, "json"), GPUARENA_ERR_SYSTEM);
    ck_assert_msg(strstr(gpuarena_last_error(), strerror(EPIPE)), "%s", gpuarena_last_error());
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    ck_assert_int_eq(sigpending(&pending), 0);
    ck_assert(!sigismember(&pending, SIGPIPE));
    /* The program's own, pending with the signal blocked, stays. */
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &set, &old);
    raise(SIGPIPE);
    clearerr(out);
    ck_assert_int_eq(gpuarena_stats_print(out, NULL), GPUARENA_ERR_SYSTEM);
    ck_assert_int_eq(sigpending(&pending), 0);
    ck_assert(sigismember(&pending, SIGPIPE));
    int sig = 0;
    ck_assert_int_eq(sigwait(&set, &sig), 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    fclose(out);
}
END_TEST

static void *print_reports(void *arg)
{
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(gpuarena_stats_print(arg, "json"), GPUARENA_SUCCESS);
    return NULL;
}

/* Two threads' reports on one stream come out whole, one after the
 * other: each begins where the one before it ended.  They were written
 * in three parts, interleaved into text that no longer read as JSON. */
START_TEST(stats_print_reports_do_not_interleave)
{
    gpuarena_t *a[4];
    for (int i = 0; i < 4; i++)
        a[i] = arena(GPUARENA_SIM, NULL);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, print_reports, f), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    long len = ftell(f);
    ck_assert_int_gt(len, 0);
    char *text = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(text);
    rewind(f);
    ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    fclose(f);
    int reports = 0;
    for (const char *p = text; *p; reports++) {
        ck_assert_msg(strncmp(p, "{\"version\": ", 12) == 0, "report %d begins: %.40s", reports, p);
        const char *end = strstr(p, "\n  ]}\n");
        ck_assert_ptr_nonnull(end);
        const char *next = strstr(p + 1, "{\"version\": ");
        ck_assert_msg(!next || next > end, "report %d cut by another", reports);
        p = end + 6;
    }
    ck_assert_int_eq(reports, 100);
    free(text);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(gpuarena_destroy(a[i]), GPUARENA_SUCCESS);
}
END_TEST

/* gpuarena_stats_total: every arena of a kind and device together, and
 * the peak of their sum, which is not the sum of their peaks when the
 * arenas hold their memory at different times.  Compared with what was
 * there before (other tests of the process may have left arenas). */
static gpuarena_total_t total(gpuarena_kind_t kind)
{
    gpuarena_total_t t;
    memset(&t, 0xa5, sizeof t);
    ck_assert_int_eq(gpuarena_stats_total(kind, 0, &t), GPUARENA_SUCCESS);
    for (unsigned i = 0; i < sizeof t.spare_ / sizeof t.spare_[0]; i++)
        ck_assert_uint_eq(t.spare_[i], 0);
    ck_assert_uint_ge(t.reserved_peak, t.reserved);
    return t;
}

static void totals_sequence(gpuarena_kind_t kind, const char *opts)
{
    ck_assert_int_eq(gpuarena_stats_total_reset_peak(kind, 0), GPUARENA_SUCCESS);
    gpuarena_total_t t0 = total(kind);
    ck_assert_uint_eq(t0.reserved_peak, t0.reserved);
    gpuarena_t *a = arena(kind, opts), *b = arena(kind, opts);
    ck_assert_uint_eq(total(kind).arenas, t0.arenas + 2);
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)7;

    /* A holds 8 MiB, gives it back; then B does the same. */
    void *p = aalloc(a, 8 * MI, s);
    uint64_t ra = stats(a).reserved;
    ck_assert_uint_ge(ra, 8 * MI);
    gpuarena_total_t t = total(kind);
    ck_assert_uint_eq(t.reserved, t0.reserved + ra);
    ck_assert_uint_eq(t.reserved_peak, t0.reserved + ra);
    afree(a, p, s);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_uint_eq(stats(a).reserved, 0);
    ck_assert_uint_eq(total(kind).reserved, t0.reserved);
    void *q = aalloc(b, 8 * MI, s);
    uint64_t rb = stats(b).reserved;
    ck_assert_uint_eq(rb, ra);
    t = total(kind);
    ck_assert_uint_eq(t.reserved, t0.reserved + rb);
    /* Each arena's peak is RA, their sum 2 RA; the device held RA at once. */
    ck_assert_uint_eq(stats(a).reserved_peak + stats(b).reserved_peak, ra + rb);
    ck_assert_uint_eq(t.reserved_peak, t0.reserved + ra);

    /* Both at once: the peak is the sum. */
    p = aalloc(a, 8 * MI, s);
    t = total(kind);
    ck_assert_uint_eq(t.reserved, t0.reserved + ra + rb);
    ck_assert_uint_eq(t.reserved_peak, t0.reserved + ra + rb);

    /* Bad input: a clear status, the total unchanged. */
    gpuarena_total_t keep = total(kind), out;
    memset(&out, 0x5a, sizeof out);
    gpuarena_total_t poison = out;
    ck_assert_int_eq(gpuarena_stats_total(kind, 0, NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_stats_total((gpuarena_kind_t)99, 0, &out),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_stats_total(kind, -1, &out), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_int_eq(gpuarena_stats_total(kind, 64, &out), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert(memcmp(&out, &poison, sizeof out) == 0);
    ck_assert_int_eq(gpuarena_stats_total_reset_peak((gpuarena_kind_t)-1, 0),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_stats_total_reset_peak(kind, 64), GPUARENA_ERR_INVALID_DEVICE);
    t = total(kind);
    ck_assert(memcmp(&t, &keep, sizeof t) == 0);

    /* The reset: the peak is the bytes reserved now; an arena's own peaks
     * are not touched. */
    afree(a, p, s);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats_total_reset_peak(kind, 0), GPUARENA_SUCCESS);
    t = total(kind);
    ck_assert_uint_eq(t.reserved, t0.reserved + rb);
    ck_assert_uint_eq(t.reserved_peak, t0.reserved + rb);
    ck_assert_uint_eq(stats(a).reserved_peak, ra);

    /* A destroyed arena leaves the total with what it held (B's cached
     * block, never trimmed). */
    afree(b, q, s);
    ck_assert_uint_eq(stats(b).reserved, rb);
    ck_assert_int_eq(gpuarena_destroy(b), GPUARENA_SUCCESS);
    t = total(kind);
    ck_assert_uint_eq(t.arenas, t0.arenas + 1);
    ck_assert_uint_eq(t.reserved, t0.reserved);
    ck_assert_uint_eq(t.reserved_peak, t0.reserved + rb);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_uint_eq(total(kind).arenas, t0.arenas);
}

START_TEST(totals_are_the_peak_of_the_sum)
{
    totals_sequence(GPUARENA_HOST, "thread_cache=true");
    totals_sequence(GPUARENA_SIM, "thread_cache=true");
    totals_sequence(GPUARENA_SIM, "thread_cache=false,expandable=false");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Out of memory.                                                      */

/* Room for 4 MiB: blocks *A and *B of 1 MiB fill one small segment, and
 * a third, freed on stream 1 (no event covers it), holds a second; work
 * is enqueued on stream 3.  *L, 2 MiB (large) on stream LS, fits only once
 * the cached segment is released: one retry, no failure. */
static fx_t *oom_fixture(unsigned ls, void **a, void **b, void **l)
{
    fx_t *f = fx_new(false, 2 * MI, "small_max=1M,small_segment=2M,large_segment=4K");
    f->tp.capacity = 4 * MI;
    *a = fx_alloc(f, 1 * MI, 1);
    *b = fx_alloc(f, 1 * MI, 1);
    fx_free(f, fx_alloc(f, 1 * MI, 1), 1);
    tp_enqueue(&f->tp, 3);
    *l = fx_alloc(f, 2 * MI, ls);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_uint_eq(st.oom_failures, 0);
    ck_assert_uint_eq(st.reserved, 4 * MI);
    return f;
}

START_TEST(oom_releases_retries_then_fails)
{
    void *a, *b, *l;
    fx_t *f = oom_fixture(2, &a, &b, &l);
    /* The cached block was freed on another stream: only a wait for the
     * whole device makes it reusable by stream 2. */
    ck_assert_uint_eq(f->tp.device_syncs, 1);
    /* Nothing left to release: fails after one retry. */
    void *m = (void *)0x1;
    ck_assert_int_eq(ga_bm_alloc(f->bm, 2 * MI, S(2), &m), GPUARENA_ERR_OUT_OF_MEMORY);
    gpuarena_stats_t st = fx_stats(f);
    ck_assert_uint_eq(st.oom_retries, 2);
    ck_assert_uint_eq(st.oom_failures, 1);
    ck_assert_uint_eq(st.last_oom_request, 2 * MI);
    ck_assert_uint_eq(st.live_blocks, 3);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "out of memory"));
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    /* After a free, it serves again. */
    fx_free(f, l, 2);
    m = fx_alloc(f, 2 * MI, 3); /* after releasing L's segment */
    ck_assert_uint_eq(fx_stats(f).oom_retries, 3);
    ck_assert_uint_eq(fx_stats(f).oom_failures, 1);
    fx_free(f, m, 3);
    fx_free(f, a, 1);
    fx_free(f, b, 1);
    fx_done(f);
}
END_TEST

/* An allocation that the out-of-memory retry served from a block the
 * waits freed mapped nothing: a cache hit, not a miss (cache_misses
 * counts allocations "that had to map memory"). */
START_TEST(oom_retry_from_cache_is_a_hit)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "thread_cache=false,expandable=false,max_reserved=2M");
    gpuarena_stream_t s1 = (gpuarena_stream_t)1, s2 = (gpuarena_stream_t)2;
    void *x = aalloc(a, 1 * MI, s1);
    void *y = aalloc(a, 1 * MI, s1);
    afree(a, y, s1);
    void *z = aalloc(a, 1 * MI, s2); /* y, once the retry waited for stream 1 */
    ck_assert_ptr_eq(z, y);
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_uint_eq(st.provider_maps, 1);
    ck_assert_uint_eq(st.cache_misses, st.provider_maps);
    ck_assert_uint_eq(st.cache_hits + st.cache_misses, st.allocs);
    afree(a, z, s2);
    afree(a, x, s1);
    check_and_destroy(a);
}
END_TEST

/* A sim arena whose capacity is all taken has 0 bytes free: the report
 * says so, as the failure's message does, rather than leave the device
 * out as for an arena that cannot say. */
START_TEST(oom_report_with_nothing_free)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "sim_capacity=4M,expandable=false,thread_cache=false");
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = aalloc(a, 1 * MI, NULL);
    void *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MI, NULL, &q), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "0 free on the device"));
    ck_assert_uint_eq(stats(a).device_free, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(gpuarena_stats_print(out, NULL), GPUARENA_SUCCESS);
    fclose(out);
    ck_assert_msg(strstr(text, "free on the device then 0 B") != NULL, "%s", text);
    free(text);
    for (int i = 0; i < 4; i++)
        afree(a, p[i], NULL);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* The memory that the retry needs was freed on the allocating stream
 * itself: an event recorded on that stream and waited on covers it, and
 * the device is not waited for (that wait would also break a capture in
 * another thread: check_fakecuda).  Work enqueued on other streams is
 * not completed by it. */
START_TEST(oom_waits_for_its_own_stream_only)
{
    void *a, *b, *l;
    fx_t *f = oom_fixture(1, &a, &b, &l);
    ck_assert_uint_eq(f->tp.device_syncs, 0);
    ck_assert_uint_eq(f->tp.completed[3], 0);
    ck_assert_uint_eq(f->tp.enqueued[3], 1);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    /* Trim names no stream to record on: stream 1's frees since then are
     * covered by no event, and only the device's wait releases them. */
    fx_free(f, l, 1);
    fx_free(f, b, 1);
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.device_syncs, 1);
    ck_assert_uint_eq(fx_stats(f).reserved, 2 * MI); /* the segment A is in */
    fx_free(f, a, 1);
    fx_done(f);
}
END_TEST

START_TEST(oom_sim_arena)
{
    gpuarena_t *a = arena(GPUARENA_SIM, "sim_capacity=8M,granule=2M");
    void *p = aalloc(a, 5 * MI, NULL);
    void *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 5 * MI, NULL, &q), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "out of memory"));
    /* The simulated device has a size: what it had free is said. */
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "free on the device"));
    gpuarena_stats_t st = stats(a);
    ck_assert_uint_eq(st.device_free, 2 * MI);
    ck_assert_uint_eq(st.last_oom_request, 5 * MI);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_uint_eq(st.oom_failures, 1);
    ck_assert_uint_eq(st.live_blocks, 1);
    afree(a, p, NULL);
    q = aalloc(a, 5 * MI, (gpuarena_stream_t)(uintptr_t)2);
    afree(a, q, (gpuarena_stream_t)(uintptr_t)2);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fault injection: every provider call of a workload fails in turn.   */

#define FI_MAX 24

typedef struct fi {
    fx_t *f;
    void *p[FI_MAX];
    unsigned s[FI_MAX];
    unsigned n;
    unsigned failures;
} fi_t;

static void fi_alloc(fi_t *w, size_t size, unsigned s)
{
    void *p = NULL;
    tp_enqueue(&w->f->tp, s);
    gpuarena_status_t st = ga_bm_alloc(w->f->bm, size, S(s), &p);
    if (st == GPUARENA_SUCCESS) {
        ck_assert_ptr_nonnull(p);
        w->p[w->n] = p;
        w->s[w->n++] = s;
    } else {
        w->failures++;
        ck_assert_str_ne(gpuarena_last_error(), "");
    }
    ck_assert_msg(ga_bm_check(w->f->bm) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
}

static void fi_free(fi_t *w, unsigned i, unsigned s)
{
    if (i >= w->n)
        return;
    tp_enqueue(&w->f->tp, s);
    ck_assert_int_eq(ga_bm_free(w->f->bm, w->p[i], S(s)), GPUARENA_SUCCESS);
    w->p[i] = w->p[--w->n];
    w->s[i] = w->s[w->n];
    ck_assert_msg(ga_bm_check(w->f->bm) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
}

/* A short workload that touches every kind of provider call: maps and
 * commits, events for sweeps and record_stream, waits, unmaps on trim. */
static void fi_workload(fi_t *w)
{
    fx_t *f = w->f;
    fi_alloc(w, 1000, 1);
    fi_alloc(w, 200 * KI, 1);
    fi_alloc(w, 3 * MI, 2);
    fi_alloc(w, 5000, 2);
    if (w->n)
        (void)ga_bm_record_stream(f->bm, w->p[0], S(3));
    tp_enqueue(&f->tp, 3);
    fi_free(w, 0, 1);
    fi_free(w, 0, 2);
    fi_alloc(w, 1000, 2); /* misses on 2: asks 1 for a sweep */
    fi_alloc(w, 64 * KI, 1);
    fi_free(w, w->n - 1, 1); /* records the sweep */
    tp_complete(&f->tp, 1);
    tp_complete(&f->tp, 3);
    fi_alloc(w, 1000, 3);
    fi_alloc(w, 8 * MI, 3);
    fi_free(w, 0, 3);
    ck_assert_int_eq(ga_bm_trim(f->bm, 1 * MI, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    fi_alloc(w, 2 * MI, 2);
    fi_alloc(w, 300, 1);
    while (w->n > 2)
        fi_free(w, 0, w->s[0]);
    ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
}

static uint64_t fault_sweep(bool growable, const char *opts)
{
    uint64_t calls = 0, injected = 0;
    for (uint64_t k = 0;; k++) {
        fi_t w = {0};
        w.f = fx_new(growable, 64 * KI, opts);
        w.f->tp.fail_at = k; /* 0: the clean run that counts the calls */
        fi_workload(&w);
        if (k == 0) {
            calls = w.f->tp.calls;
            ck_assert_uint_eq(w.failures, 0);
        }
        w.f->tp.fail_at = 0;
        /* The provider's mappings are the segments' (check compares) and
         * the arena keeps serving on every stream. */
        ck_assert_int_eq(ga_bm_check(w.f->bm), GPUARENA_SUCCESS);
        for (unsigned s = 1; s <= 3; s++) {
            fi_alloc(&w, 4000 * s, s);
            fi_alloc(&w, 2 * MI * s, s);
        }
        while (w.n)
            fi_free(&w, 0, w.s[0]);
        fx_done(w.f);
        if (k)
            injected++;
        if (k > calls)
            break;
    }
    /* Enough calls for the sweep to fail several (5 in one setting, since
     * stream pools give back what they took in from ANY before the arena
     * grows: ga_pool_reclaim). */
    ck_assert_uint_ge(calls, 5);
    return injected;
}

START_TEST(fault_injection_every_call)
{
    ck_assert_uint_gt(fault_sweep(false, NULL), 5);
    ck_assert_uint_gt(fault_sweep(true, NULL), 5);
    ck_assert_uint_gt(fault_sweep(false, "cross_stream=wait,max_cached=1M"), 5);
    ck_assert_uint_gt(fault_sweep(true, "cross_stream=wait,thread_cache=true"), 5);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bad input through the public API: a status, and nothing changes.    */

typedef struct snap {
    gpuarena_stats_t st;
} snap_t;

static snap_t snap(gpuarena_t *a)
{
    snap_t s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(gpuarena_stats(a, &s.st), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    return s;
}

#define EXPECT_UNCHANGED(a, before, call, status)                                                  \
    do {                                                                                           \
        ga_error_clear();                                                                          \
        ck_assert_int_eq((call), (status));                                                        \
        ck_assert_str_ne(gpuarena_last_error(), "");                                               \
        snap_t after_ = snap(a);                                                                   \
        ck_assert_msg(memcmp(&(before), &after_, sizeof after_) == 0, "%s changed the statistics", \
                      #call);                                                                      \
    } while (0)

static void bad_input(gpuarena_kind_t kind, const char *opts)
{
    gpuarena_t *a = arena(kind, opts);
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)1;
    void *live = aalloc(a, 4096, s);
    void *other = aalloc(a, 100, s);
    void *freed = aalloc(a, 2048, s);
    afree(a, freed, s); /* in the thread cache where there is one */
    /* Above thread_cache_max: in the thread's large slot, which the next
     * locked operation of the thread gives back, but not a refused one. */
    void *parked = aalloc(a, (size_t)8 << 20, s);
    afree(a, parked, s);
    snap_t before = snap(a);
    void *p = (void *)0x1234;

    EXPECT_UNCHANGED(a, before, gpuarena_free(a, freed, s), GPUARENA_ERR_DOUBLE_FREE);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, freed, (gpuarena_stream_t)(uintptr_t)2),
                     GPUARENA_ERR_DOUBLE_FREE);
    /* Inside a freed block (in a thread cache, where there is one): free
     * memory, not a live block's interior. */
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, (char *)freed + 100, s), GPUARENA_ERR_DOUBLE_FREE);
    EXPECT_UNCHANGED(a, before, gpuarena_record_stream(a, freed, (gpuarena_stream_t)(uintptr_t)2),
                     GPUARENA_ERR_DOUBLE_FREE);
    int local;
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, &local, s), GPUARENA_ERR_INVALID_POINTER);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, (void *)((uintptr_t)1 << 50), s),
                     GPUARENA_ERR_INVALID_POINTER);
    /* A live block of another arena of the kind, made alike: two sim
     * arenas used to hand out the same addresses, and this freed LIVE. */
    gpuarena_t *b = arena(kind, opts);
    void *theirs = aalloc(b, 4096, s);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, theirs, s), GPUARENA_ERR_INVALID_POINTER);
    afree(b, theirs, s);
    ck_assert_int_eq(gpuarena_destroy(b), GPUARENA_SUCCESS);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, (char *)live + 512, s),
                     GPUARENA_ERR_INTERIOR_POINTER);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, (char *)live + 1, s),
                     GPUARENA_ERR_INTERIOR_POINTER);
    EXPECT_UNCHANGED(a, before, gpuarena_record_stream(a, (char *)live + 8, s),
                     GPUARENA_ERR_INTERIOR_POINTER);
    EXPECT_UNCHANGED(a, before, gpuarena_alloc(a, SIZE_MAX, s, &p), GPUARENA_ERR_SIZE_OVERFLOW);
    ck_assert_ptr_eq(p, (void *)0x1234);
    ck_assert_msg(strstr(gpuarena_last_error(), "gpuarena_alloc: ") == gpuarena_last_error(), "%s",
                  gpuarena_last_error());
    EXPECT_UNCHANGED(a, before, gpuarena_alloc(a, SIZE_MAX - 100, s, &p),
                     GPUARENA_ERR_SIZE_OVERFLOW);
    EXPECT_UNCHANGED(a, before, gpuarena_alloc(a, SIZE_MAX / 2 + 1, s, &p),
                     GPUARENA_ERR_SIZE_OVERFLOW);
    EXPECT_UNCHANGED(a, before, gpuarena_alloc(NULL, 64, s, &p), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_alloc(a, 64, s, NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_free(NULL, live, s), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_record_stream(NULL, live, s),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_record_stream(a, NULL, s), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_trim(NULL, 0), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_stats(NULL, &before.st), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_stats(a, NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_stats_print(NULL, NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    FILE *full = fopen("/dev/full", "w"); /* every write fails: ENOSPC */
    if (full) {
        EXPECT_UNCHANGED(a, before, gpuarena_stats_print(full, NULL), GPUARENA_ERR_SYSTEM);
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), strerror(ENOSPC)));
        fclose(full);
    }
    EXPECT_UNCHANGED(a, before, gpuarena_check(NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_stats_reset_peaks(NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(a, before, gpuarena_prefetch(a, live, 0, GPUARENA_CPU, s),
                     GPUARENA_ERR_NOT_SUPPORTED);
    ck_assert_ptr_eq(p, (void *)0x1234);

    /* Size 0 and free(NULL): success, NULL, nothing counted. */
    ck_assert_int_eq(gpuarena_alloc(a, 0, s, &p), GPUARENA_SUCCESS);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(gpuarena_free(a, NULL, s), GPUARENA_SUCCESS);
    snap_t after = snap(a);
    ck_assert(memcmp(&before, &after, sizeof after) == 0);

    /* The good blocks are intact and still free normally. */
    afree(a, live, s);
    afree(a, other, s);
    before = snap(a);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, live, s), GPUARENA_ERR_DOUBLE_FREE);
    /* Without a thread cache OTHER merged with LIVE, its neighbour, and
     * is no block's start any more: freed twice all the same. */
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, other, s), GPUARENA_ERR_DOUBLE_FREE);
    EXPECT_UNCHANGED(a, before, gpuarena_record_stream(a, other, s), GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_uint_eq(stats(a).live_blocks, 0);
    /* Once the memory went back to the provider, the arena cannot tell. */
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    before = snap(a);
    EXPECT_UNCHANGED(a, before, gpuarena_free(a, other, s), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "given back"));
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}

START_TEST(bad_input_changes_nothing)
{
    bad_input(GPUARENA_HOST, "thread_cache=true");
    bad_input(GPUARENA_HOST, "thread_cache=false");
    bad_input(GPUARENA_SIM, "thread_cache=true");
    bad_input(GPUARENA_SIM, "thread_cache=false,expandable=false");
}
END_TEST

/* A kind and device that had an arena stays in the printed totals after
 * every arena of it went and its peak was reset (gpuarena_stats(3)):
 * it dropped out. */
START_TEST(totals_list_a_kind_that_had_arenas)
{
    gpuarena_t *a = arena(GPUARENA_SIM, NULL);
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)1;
    afree(a, aalloc(a, 4096, s), s);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats_total_reset_peak(GPUARENA_SIM, 0), GPUARENA_SUCCESS);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gpuarena_stats_print(f, "json"), GPUARENA_SUCCESS);
    fclose(f);
    ck_assert_msg(strstr(text, "{\"kind\": \"sim\", \"device\": 0, ") != NULL, "%s", text);
    free(text);
}
END_TEST

/* The sim arenas share one fake address space (two live ones never hand
 * out the same address), and what a destroyed arena held serves the next:
 * a replay makes an arena per trace arena and run, and a space never
 * given back ran out after some 16 million arenas. */
START_TEST(sim_address_space_is_reused)
{
    const char *const opts[] = {"expandable=true", "expandable=false"};
    for (int i = 0; i < 2; i++) {
        gpuarena_t *a = arena(GPUARENA_SIM, opts[i]), *b = arena(GPUARENA_SIM, opts[i]);
        gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)1;
        void *p = aalloc(a, 4096, s), *q = aalloc(b, 4096, s);
        ck_assert_ptr_ne(p, q);
        afree(a, p, s);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
        gpuarena_t *c = arena(GPUARENA_SIM, opts[i]);
        void *r = aalloc(c, 4096, s);
        ck_assert_ptr_eq(r, p); /* A's range, given back */
        afree(b, q, s);
        afree(c, r, s);
        ck_assert_int_eq(gpuarena_destroy(b), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(c), GPUARENA_SUCCESS);
    }
}
END_TEST

/* A provider's granule that is 0 or not a power of two is refused at
 * creation, with nothing made; a power of two is taken. */
START_TEST(provider_granule_is_checked)
{
    ga_settings_t set;
    ga_config_defaults(GPUARENA_SIM, &set);
    set.thread_cache = false;
    size_t bad[] = {0, 3 * 64 * KI};
    for (unsigned i = 0; i < 2; i++) {
        tp_t tp;
        tp_init(&tp, false, bad[i]);
        ga_bm_t *bm = NULL;
        ck_assert_int_eq(ga_bm_create(&tp.base, &set, &bm), GPUARENA_ERR_CONFIG);
        ck_assert_ptr_null(bm);
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "granule"));
        ck_assert_uint_eq(tp.base.live_maps, 0);
    }
    tp_t tp;
    tp_init(&tp, false, 64 * KI);
    ga_bm_t *bm = NULL;
    ck_assert_int_eq(ga_bm_create(&tp.base, &set, &bm), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_destroy(bm), GPUARENA_SUCCESS);
}
END_TEST

START_TEST(destroy_with_live_blocks_is_busy)
{
    gpuarena_t *a = arena(GPUARENA_SIM, NULL);
    void *p = aalloc(a, 100, NULL);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_ERR_BUSY);
    afree(a, p, NULL);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Destroy when the provider refuses a segment back.  The segments are
 * left free and cached (no trim), so that destroy itself gives each back;
 * every provider call that destroy makes is failed in turn.  A failed
 * unmap or decommit is reported with its status and a message that counts
 * what stays mapped, and the provider still holds exactly that (the
 * accounting stays true); every other segment, event and record is given
 * back or freed all the same (valgrind and ASan see the records). */
static void destroy_one(bool growable, uint64_t k, uint64_t *calls, unsigned *reported)
{
    fx_t *f = fx_new(growable, 64 * KI, NULL);
    /* Fixed: above half large_segment, each block has a segment. */
    size_t size = growable ? 2 * MI : 12 * MI;
    void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = fx_alloc(f, size, 1);
    if (growable) {
        /* A hole between the first and the last block: two runs to
         * decommit at destroy. */
        fx_free(f, p[1], 1);
        ck_assert_int_eq(ga_bm_trim(f->bm, 0, true), GPUARENA_SUCCESS);
        fx_free(f, p[0], 1);
        fx_free(f, p[2], 1);
    } else {
        for (int i = 0; i < 3; i++)
            fx_free(f, p[i], 1);
    }
    ck_assert_uint_ge(fx_stats(f).reserved, 4 * MI);
    uint64_t before = f->tp.calls;
    f->tp.fail_at = k ? before + k : 0;
    ga_error_clear();
    gpuarena_status_t st = ga_bm_destroy(f->bm);
    *calls = f->tp.calls - before;
    const char *msg = gpuarena_last_error();
    ck_assert_uint_eq(f->tp.events_live, 0);
    if (st == GPUARENA_SUCCESS) {
        ck_assert_msg(f->tp.base.live_maps == 0 && f->tp.committed == 0,
                      "destroy succeeded with %" PRIu64
                      " mappings (%zu bytes) left in the provider",
                      f->tp.base.live_maps, f->tp.committed);
    } else {
        (*reported)++;
        ck_assert_int_eq(st, GPUARENA_ERR_DRIVER);
        /* Fixed: one segment of three stays; growable: one run of one
         * block stays, and with it the reservation (one segment of one). */
        char want[128];
        snprintf(want, sizeof want, "%s segments could not be given back to the test provider; %zu",
                 growable ? "1 of 1" : "1 of 3", size);
        ck_assert_msg(strstr(msg, want) && strstr(msg, "failure injected at provider call"),
                      "message: %s", msg);
        ck_assert_uint_eq(f->tp.committed, size);
        ck_assert_uint_eq(f->tp.base.live_maps, growable ? size / (64 * KI) : 1);
    }
    free(f);
}

START_TEST(destroy_reports_what_stays_mapped)
{
    for (int g = 0; g < 2; g++) {
        uint64_t calls = 0, n;
        unsigned reported = 0;
        destroy_one(g, 0, &calls, &reported);
        ck_assert_uint_eq(reported, 0);
        for (uint64_t k = 1; k <= calls; k++)
            destroy_one(g, k, &n, &reported);
        /* Every unmap (three segments) or decommit (two runs) failed once. */
        ck_assert_uint_eq(reported, g ? 2 : 3);
    }
}
END_TEST

/* The live map grown several times over: every record's slot follows
 * its key into each new table (ga_lmap_valid checks the slots), so that
 * removals, which go by the slot, then empty the right ways. */
START_TEST(live_map_slots_follow_growth)
{
    enum { N = 5000 };
    ga_block_t *rec = aligned_alloc(64, N * sizeof *rec);
    ck_assert_ptr_nonnull(rec);
    memset(rec, 0, N * sizeof *rec);
    ga_lmap_t m;
    ck_assert_int_eq(ga_lmap_init(&m), GPUARENA_SUCCESS);
    size_t first = atomic_load(&m.table)->mask;
    uintptr_t bad;
    for (unsigned i = 0; i < N; i++) {
        rec[i].addr = ((uintptr_t)1 << 40) + (uintptr_t)i * 4096;
        rec[i].state = BLOCK_LIVE;
        ck_assert_int_eq(ga_lmap_insert(&m, &rec[i]), GPUARENA_SUCCESS);
        if (i % 500 == 0)
            ck_assert_msg(ga_lmap_valid(&m, &bad), "after %u inserts: wrong at %p", i + 1,
                          (void *)bad);
    }
    ck_assert_uint_gt(atomic_load(&m.table)->mask, 4 * first); /* grew at least three times */
    ck_assert(ga_lmap_valid(&m, &bad));
    /* Every other record out, then the rest: each removal empties its
     * own way only. */
    for (unsigned pass = 0; pass < 2; pass++) {
        for (unsigned i = pass; i < N; i += 2)
            ga_lmap_remove(&m, &rec[i]);
        ck_assert_msg(ga_lmap_valid(&m, &bad), "pass %u: wrong at %p", pass, (void *)bad);
        for (unsigned i = 0; i < N; i++)
            ck_assert_ptr_eq(ga_lmap_find(&m, rec[i].addr), pass == 0 && i % 2 ? &rec[i] : NULL);
    }
    ck_assert_uint_eq(m.count, 0);
    ga_lmap_destroy(&m);
    free(rec);
}
END_TEST

/* The live map on its own, loaded near its limit so that buckets fill
 * and their keys spill into the next ones (the last bucket's into the
 * first): after every step each present key is found, each removed one is
 * not, and the table agrees with its count; and some key did spill, or
 * the test would not have covered the far lookups. */
START_TEST(live_map_full_buckets_spill)
{
    enum { N = 500, STEPS = 20000 };
    static ga_block_t rec[N];
    bool in[N] = {false};
    ga_lmap_t m;
    ck_assert_int_eq(ga_lmap_init(&m), GPUARENA_SUCCESS);
    uint64_t seed = 0x2545F4914F6CDD1Dull;
    for (unsigned i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* Addresses of a 1 TiB range, 512-byte aligned, as blocks are. */
        rec[i].addr = ((uintptr_t)1 << 44) + ((seed >> 24) & ((1ull << 31) - 1)) * 512;
        rec[i].state = BLOCK_LIVE;
    }
    unsigned live = 0;
    for (unsigned step = 0; step < STEPS; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned i = (unsigned)(seed >> 33) % N;
        if (in[i]) {
            ga_lmap_remove(&m, &rec[i]);
            live--;
        } else {
            /* Stay under the grow point (half the 1024 ways). */
            if (live >= 500)
                continue;
            ck_assert_int_eq(ga_lmap_insert(&m, &rec[i]), GPUARENA_SUCCESS);
            live++;
        }
        in[i] = !in[i];
        uintptr_t bad;
        ck_assert_msg(ga_lmap_valid(&m, &bad), "step %u: map inconsistent at %p", step,
                      (void *)bad);
        if (step % 64 == 0 || step + 1 == STEPS)
            for (unsigned j = 0; j < N; j++)
                ck_assert_ptr_eq(ga_lmap_find(&m, rec[j].addr), in[j] ? &rec[j] : NULL);
    }
    ck_assert_uint_eq(m.count, live);
    ga_lmap_table_t *t = atomic_load(&m.table);
    unsigned spilled = 0;
    for (size_t i = 0; i <= t->mask; i++)
        spilled += atomic_load(&t->reach[i]) > 0;
    ck_assert_uint_gt(spilled, 0);
    ck_assert_uint_eq(t->mask + 1, 256); /* never grown: the load stayed at the limit */
    ga_lmap_destroy(&m);
}
END_TEST

/* Walk list FL/SL of F: every back link points at what points at the
 * block, and the blocks are WANT[0..N-1] in order. */
static void fit_list_is(ga_fit_t *f, unsigned fl, unsigned sl, ga_block_t **want, unsigned n)
{
    ga_block_t **link = &f->heads[fl][sl];
    unsigned i = 0;
    for (ga_block_t *b = *link; b; link = &b->fnext, b = b->fnext, i++) {
        ck_assert_uint_lt(i, n);
        ck_assert_ptr_eq(b, want[i]);
        ck_assert_ptr_eq(b->fpprev, link);
    }
    ck_assert_uint_eq(i, n);
    ck_assert_uint_eq(f->sl_map[fl] >> sl & 1, n > 0);
}

/* The free index's lists, which neither insert nor remove by branches:
 * removal of the head, a middle block, the last block and the only one
 * keeps every back link, and the bitmaps lose a list's bit only when it
 * empties, the level's only when its last list does.  ga_bm_check then
 * finds a broken back link in a manager's index. */
START_TEST(fit_lists_keep_links_and_bitmaps)
{
    ga_fit_t *f = calloc(1, sizeof *f);
    ga_block_t *b = aligned_alloc(64, 5 * sizeof *b);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(b);
    memset(b, 0, 5 * sizeof *b);
    size_t sizes[5] = {4096, 4096, 4096, 4096 + 256, 64 * KI};
    for (int i = 0; i < 5; i++) {
        b[i].size = sizes[i];
        ga_fit_insert(f, &b[i]);
    }
    unsigned fl, sl, fl2, sl2, fl3, sl3;
    ga_fit_index(4096, &fl, &sl);
    ga_fit_index(4096 + 256, &fl2, &sl2);
    ga_fit_index(64 * KI, &fl3, &sl3);
    ck_assert_uint_eq(fl2, fl);
    ck_assert_uint_ne(sl2, sl);
    ck_assert_uint_ne(fl3, fl);
    ck_assert_uint_eq(ga_fit_count(f), 5);
    fit_list_is(f, fl, sl, (ga_block_t *[]){&b[2], &b[1], &b[0]}, 3);
    ga_fit_remove(f, &b[1]); /* middle */
    fit_list_is(f, fl, sl, (ga_block_t *[]){&b[2], &b[0]}, 2);
    ga_fit_remove(f, &b[2]); /* head */
    fit_list_is(f, fl, sl, (ga_block_t *[]){&b[0]}, 1);
    ga_fit_insert(f, &b[1]);
    ga_fit_remove(f, &b[0]); /* last */
    fit_list_is(f, fl, sl, (ga_block_t *[]){&b[1]}, 1);
    ga_fit_remove(f, &b[1]); /* only: the list's bit goes, the level's stays */
    fit_list_is(f, fl, sl, NULL, 0);
    ck_assert_uint_eq(f->fl_map >> fl & 1, 1);
    /* The next list of the request's level, before any higher level. */
    ck_assert_ptr_eq(ga_fit_find(f, 4096, 0), &b[3]);
    ga_fit_remove(f, &b[3]); /* the level's last list */
    ck_assert_uint_eq(f->sl_map[fl], 0);
    ck_assert_uint_eq(f->fl_map >> fl & 1, 0);
    ck_assert_uint_eq(f->fl_map, 1ull << fl3);
    ck_assert_ptr_eq(ga_fit_find(f, 4096, 0), &b[4]);
    ga_fit_remove(f, &b[4]);
    ck_assert_uint_eq(f->fl_map, 0);
    ck_assert_uint_eq(ga_fit_count(f), 0);
    ck_assert(ga_fit_empty(f));
    ck_assert_ptr_null(ga_fit_find(f, 512, 0));
    free(b);
    free(f);

    /* A manager's index with a broken back link fails the check. */
    fx_t *x = fx_new(false, 64 * KI, NULL);
    void *p[3];
    for (int i = 0; i < 3; i++)
        p[i] = fx_alloc(x, 64 * KI, HOST);
    fx_free(x, p[1], HOST); /* between two live blocks: stays as it is */
    ga_fit_index(64 * KI, &fl, &sl);
    ga_block_t *h = x->bm->any.fit[CLASS_SMALL].heads[fl][sl];
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(h->addr, (uintptr_t)p[1]);
    ga_block_t **saved = h->fpprev;
    h->fpprev = &h->fnext;
    ck_assert_int_eq(ga_bm_check(x->bm), GPUARENA_ERR_CORRUPT);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "back link"));
    h->fpprev = saved;
    fx_free(x, p[0], HOST);
    fx_free(x, p[2], HOST);
    fx_done(x);
}
END_TEST

/* The stats a refused operation must leave as they were. */
static void same_counts(const gpuarena_stats_t *a, const gpuarena_stats_t *b)
{
    ck_assert_uint_eq(a->live_blocks, b->live_blocks);
    ck_assert_uint_eq(a->allocs, b->allocs);
    ck_assert_uint_eq(a->frees, b->frees);
    ck_assert_uint_eq(a->requested, b->requested);
    ck_assert_uint_eq(a->in_use, b->in_use);
    ck_assert_uint_eq(a->reserved, b->reserved);
}

/* A stream that the provider named without a capture check (the legacy
 * stream; GA_UNCHECKED): the thread cache's hits, and allocations that a
 * free block of the pools serves, make no provider call at all, a capture
 * elsewhere or not; everything else asks stream_check first, and a
 * refusal changes nothing and names nothing. */
START_TEST(unchecked_stream_is_checked_off_the_cache)
{
    fx_t *f = fx_new(true, 2 * MI, "thread_cache=true");
    ga_stream_t s = S(1);
    void *p = NULL, *q = NULL, *big = NULL, *r = NULL;
    /* A miss asks; the free that the slots take does not. */
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 4 * KI, s, &p, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 1);
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, s, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 1);
    /* A block too large for any slot, live across the capture below. */
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 128 * MI, s, &big, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 2);

    /* A blocking stream is "being captured": the legacy stream's check
     * would refuse now. */
    f->tp.capturing = 1u << 1;
    uint64_t calls = f->tp.calls;
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(ga_bm_alloc_on(f->bm, 4 * KI, s, &q, true), GPUARENA_SUCCESS);
        ck_assert_ptr_eq(q, p);
        ck_assert_int_eq(ga_bm_free_on(f->bm, q, s, true), GPUARENA_SUCCESS);
    }
    ck_assert_uint_eq(f->tp.checks, 2);
    ck_assert_uint_eq(f->tp.calls, calls);
    /* Not in the thread cache, but in the pools (the rest of the 4 KiB
     * block's segment). */
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 8 * KI, s, &r, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_free_on(f->bm, r, s, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 2);
    ck_assert_uint_eq(f->tp.calls, calls);

    /* New memory. */
    gpuarena_stats_t before = fx_stats(f);
    r = NULL;
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 64 * MI, s, &r, true), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(ga_bm_free_on(f->bm, big, s, true), GPUARENA_ERR_STREAM_CAPTURE);
    gpuarena_stats_t after = fx_stats(f);
    same_counts(&before, &after);
    ck_assert_uint_eq(f->tp.checks, 4);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    /* A stream named with its check made is not asked again. */
    ck_assert_int_eq(ga_bm_alloc(f->bm, 8 * KI, S(2), &r), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 4);
    fx_free(f, r, 2);

    /* The capture ends: the same calls go through.  The free of BIG
     * makes the stream's pool (a first locked free on a stream may need
     * the driver: it was refused above). */
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 64 * MI, s, &r, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_free_on(f->bm, big, s, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 6);

    /* With its pool made, a locked free on the stream reaches nothing
     * either: it goes through during a capture, asking nothing. */
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 128 * MI, s, &big, true), GPUARENA_SUCCESS);
    f->tp.capturing = 1u << 1;
    calls = f->tp.calls;
    ck_assert_int_eq(ga_bm_free_on(f->bm, big, s, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(f->tp.checks, 6);
    ck_assert_uint_eq(f->tp.calls, calls);
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_free_on(f->bm, r, s, true), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fx_stats(f).live_blocks, 0);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    ck_assert_int_eq(ga_bm_check(f->bm), GPUARENA_SUCCESS);
    fx_done(f);

    /* Host-visible memory asks whether the stream is idle on every free:
     * the check comes first, even where the thread cache would take it. */
    f = fx_new_memory(false, 64 * KI, "thread_cache=true", true);
    ck_assert_int_eq(ga_bm_alloc_on(f->bm, 4 * KI, s, &p, true), GPUARENA_SUCCESS);
    uint64_t checks = f->tp.checks;
    f->tp.capturing = 1u << 1;
    before = fx_stats(f);
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, s, true), GPUARENA_ERR_STREAM_CAPTURE);
    after = fx_stats(f);
    same_counts(&before, &after);
    ck_assert_uint_eq(f->tp.checks, checks + 1);
    ck_assert_uint_eq(f->tp.disturbed, 0);
    f->tp.capturing = 0;
    ck_assert_int_eq(ga_bm_free_on(f->bm, p, s, true), GPUARENA_SUCCESS);
    fx_done(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("block");
    TCase *fit = tcase_create("fit");
    tcase_add_test(fit, best_fit_picks_smallest_adequate);
    tcase_add_test(fit, merge_on_free);
    tcase_add_test(fit, rounding);
    tcase_add_test(fit, small_and_large_segments);
    tcase_add_test(fit, max_split_blocks_are_whole);
    tcase_add_test(fit, max_split_small_request_on_new_segment);
    tcase_add_test(fit, max_split_growable_request_takes_new_memory);
    tcase_add_test(fit, max_split_large_request_takes_a_close_block);
    tcase_add_test(fit, live_map_full_buckets_spill);
    tcase_add_test(fit, live_map_slots_follow_growth);
    tcase_add_test(fit, fit_lists_keep_links_and_bitmaps);
    suite_add_tcase(s, fit);
    TCase *reuse = tcase_create("reuse");
    tcase_add_test(reuse, stream_pools_bounded);
    tcase_add_test(reuse, stream_pools_bounded_with_sweeps_out);
    tcase_add_test(reuse, free_blocks_count_pending);
    tcase_add_test(reuse, stream_caches_bounded);
    tcase_add_test(reuse, retired_pools_keep_only_what_streams_used);
    tcase_add_test(reuse, reuse_same_stream_at_once);
    tcase_add_test(reuse, own_pool_before_any);
    tcase_add_test(reuse, reuse_other_stream_after_event);
    tcase_add_test(reuse, reuse_other_stream_wait_policy);
    tcase_add_test(reuse, reuse_other_stream_never_policy);
    tcase_add_test(reuse, host_stream_frees_need_no_event);
    tcase_add_test(reuse, wanted_sweep_skips_thread_cache);
    tcase_add_test(reuse, unchecked_free_asks_before_a_second_sweep);
    tcase_add_test(reuse, free_refused_while_a_recorded_stream_captures);
    tcase_add_test(reuse, large_slot_held_until_next_locked_op);
    tcase_add_test(reuse, large_slot_hint_spans_arenas);
    tcase_add_test(reuse, large_slots_of_two_arenas);
    tcase_add_test(reuse, requested_peak_with_other_arenas_cached);
    tcase_add_test(reuse, size_classes_round_cached_requests);
    tcase_add_test(reuse, slots_full_block_waits_in_large_slot);
    tcase_add_test(reuse, large_slot_serves_small_size);
    tcase_add_test(reuse, cache_goes_cold_and_warms_again);
    tcase_add_test(reuse, cold_cache_parks_one_block);
    tcase_add_test(reuse, large_misses_leave_the_cache_warm);
    tcase_add_test(reuse, caches_give_back_before_growing);
    tcase_add_test(reuse, host_stream_public_api);
    tcase_add_test(reuse, host_granule_larger_than_its_range);
    tcase_add_test(reuse, record_stream_keeps_block_pending);
    tcase_add_test(reuse, record_stream_of_the_allocation_stream);
    tcase_add_test(reuse, record_stream_without_host_memory);
    tcase_add_test(reuse, record_stream_of_another_threads_stream);
    tcase_add_test(reuse, record_stream_event_failure_is_safe);
    tcase_add_test(reuse, host_visible_idle_free_does_not_sync);
    tcase_add_test(reuse, unchecked_stream_is_checked_off_the_cache);
    suite_add_tcase(s, reuse);
    TCase *cache = tcase_create("cache");
    tcase_add_test(cache, trim_keeps_at_most_keep);
    tcase_add_test(cache, trim_fixed_segments);
    tcase_add_test(cache, release_threshold_largest_first);
    tcase_add_test(cache, max_cached_cap);
    tcase_add_test(cache, trim_keeps_what_it_is_asked_to);
    tcase_add_test(cache, max_cached_stream_pools);
    tcase_add_test(cache, other_stream_gets_the_old_part_of_a_merged_block);
    tcase_add_test(cache, random_streams_do_not_grow_the_arena);
    tcase_add_test(cache, old_part_cut_twice_or_not_at_all);
    tcase_add_test(cache, drain_needs_no_event);
    tcase_add_test(cache, retired_pool_is_the_oldest);
    tcase_add_test(cache, failed_allocation_is_no_hit_nor_miss);
    tcase_add_test(cache, max_cached_after_caches_give_back);
    tcase_add_test(cache, max_cached_when_caches_give_back_to_trim_or_growth);
    tcase_add_test(cache, max_reserved_caps_the_arena);
    tcase_add_test(cache, set_changes_the_caps_of_a_live_arena);
    tcase_add_test(cache, requested_peak_across_threads);
    tcase_add_test(cache, cached_peak_counts_every_cache_of_the_thread);
    tcase_add_test(cache, cached_peak_after_a_cache_is_retired);
    tcase_add_test(cache, zero_fill_on_reuse);
    tcase_add_test(cache, statistics);
    tcase_add_test(cache, stats_json_memory_line);
    tcase_add_test(cache, stats_print_blocked_holds_up_no_arena);
    tcase_add_test(cache, stats_print_failure_says_why);
    tcase_add_test(cache, stats_print_into_a_closed_pipe);
    tcase_add_test(cache, stats_print_reports_do_not_interleave);
    tcase_add_test(cache, recovered_allocation_keeps_the_message);
    tcase_add_test(cache, totals_are_the_peak_of_the_sum);
    suite_add_tcase(s, cache);
    TCase *fail = tcase_create("failures");
    tcase_set_timeout(fail, 120);
    tcase_add_test(fail, oom_releases_retries_then_fails);
    tcase_add_test(fail, oom_waits_for_its_own_stream_only);
    tcase_add_test(fail, oom_sim_arena);
    tcase_add_test(fail, oom_retry_from_cache_is_a_hit);
    tcase_add_test(fail, oom_report_with_nothing_free);
    tcase_add_test(fail, fault_injection_every_call);
    tcase_add_test(fail, bad_input_changes_nothing);
    tcase_add_test(fail, sim_address_space_is_reused);
    tcase_add_test(fail, totals_list_a_kind_that_had_arenas);
    tcase_add_test(fail, provider_granule_is_checked);
    tcase_add_test(fail, destroy_with_live_blocks_is_busy);
    tcase_add_test(fail, destroy_reports_what_stays_mapped);
    suite_add_tcase(s, fail);
    return ga_check_run(s);
}
