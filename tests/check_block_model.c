/*
 * check_block_model.c - the block manager against a reference model.
 *
 * Long random sequences of alloc, free (on the allocation's stream or
 * another), record_stream, trim and GPU progress run on the test provider
 * (testprov.h), which models streams and events.  After every step the
 * invariant checker runs, and the model checks what the manager cannot
 * check about itself:
 *   - a new block overlaps no live block;
 *   - it overlaps no freed range that its stream may not use yet: a range
 *     freed on stream S at work position p, with record_stream uses U at
 *     positions q, is usable by S once every U has passed q, and by
 *     another stream T once S has passed p too, or once T was made to
 *     wait for S at p or later (cross_stream = wait);
 *   - requested bytes equal the model's sum, and their peak the model's
 *     highest sum; no other peak is below its count.
 * Stream number NSTREAMS is GPUARENA_STREAM_HOST (no stream): the program
 * frees with it only after waiting for the block's stream (the model
 * completes that stream), and a block allocated with it must be free of
 * every stream's pending work but for the recorded uses.
 * Every configuration (fixed and growable segments, thread caches on and
 * off, both cross-stream policies) runs a share of the operations.
 * GA_TEST_OPS scales the total (default one million).  For debugging:
 * GA_MODEL_ONLY=N runs only the Nth configuration (from 0), GA_MODEL_SEED=K
 * runs other random sequences (K is mixed into each configuration's
 * seed), GA_MODEL_TRACE=1 prints every operation and every block.
 */
#include "block/block.h"
#include "block/internal.h"
#include "checkrun.h"
#include "config/config.h"
#include "testprov.h"
#include "testrand.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Check's ck_assert writes a checkpoint on every call; the hot loop
 * asserts only on failure. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

#define NSTREAMS 4
#define MAX_LIVE 256
#define MAX_QUAR 4096

typedef struct live {
    uintptr_t p;
    size_t size;
    unsigned stream;
    unsigned uses; /* bitmask of record_stream streams */
} live_t;

typedef struct quar {
    uintptr_t lo, hi;
    unsigned stream;
    uint64_t pos;
    uint64_t use_pos[NSTREAMS]; /* 0: not used */
} quar_t;

typedef struct model {
    tp_t tp;
    ga_bm_t *bm;
    live_t live[MAX_LIVE];
    unsigned nlive;
    quar_t q[MAX_QUAR];
    unsigned nq;
    uint64_t requested;
    uint64_t requested_peak; /* the highest REQUESTED since the start */
    uint64_t rng;
    bool wait_policy;
} model_t;

static uint64_t rnd(model_t *m)
{
    return ga_test_rand(&m->rng);
}

#define HOST NSTREAMS

static ga_stream_t stream_of(unsigned s)
{
    if (s == HOST)
        return (ga_stream_t){GPUARENA_STREAM_HOST, GA_STREAM_ANY};
    return (ga_stream_t){tp_handle(s), s};
}

static bool q_done(const model_t *m, const quar_t *q)
{
    if (m->tp.completed[q->stream] < q->pos)
        return false;
    /* Uses on the stream that freed it are ordered by that stream. */
    for (unsigned u = 0; u < NSTREAMS; u++)
        if (q->use_pos[u] && u != q->stream && m->tp.completed[u] < q->use_pos[u])
            return false;
    return true;
}

static bool q_allows(const model_t *m, const quar_t *q, unsigned t)
{
    /* Uses on the stream that freed it are ordered by that stream. */
    for (unsigned u = 0; u < NSTREAMS; u++)
        if (q->use_pos[u] && u != q->stream && m->tp.completed[u] < q->use_pos[u])
            return false;
    if (t == q->stream)
        return true;
    return m->tp.completed[q->stream] >= q->pos || m->tp.waited[t][q->stream] >= q->pos;
}

static void prune(model_t *m)
{
    unsigned j = 0;
    for (unsigned i = 0; i < m->nq; i++)
        if (!q_done(m, &m->q[i]))
            m->q[j++] = m->q[i];
    m->nq = j;
}

static void do_alloc(model_t *m, unsigned s)
{
    /* Log-uniform sizes from 1 byte to 16 MiB, and some zero. */
    unsigned bits = (unsigned)(rnd(m) % 25);
    size_t size = (size_t)(rnd(m) & ((1ull << bits) - 1)) + (bits ? 1 : 0);
    if (s != HOST)
        tp_enqueue(&m->tp, s);
    void *p = NULL;
    gpuarena_status_t st = ga_bm_alloc(m->bm, size ? size : 1, stream_of(s), &p);
    REQUIRE(st == GPUARENA_SUCCESS, "alloc %zu: %s", size, gpuarena_last_error());
    size = size ? size : 1;
    uintptr_t lo = (uintptr_t)p, hi = lo + size;
    for (unsigned i = 0; i < m->nlive; i++)
        REQUIRE(hi <= m->live[i].p || lo >= m->live[i].p + m->live[i].size,
                "new block %p overlaps a live block", p);
    for (unsigned i = 0; i < m->nq; i++) {
        quar_t *q = &m->q[i];
        if (hi <= q->lo || lo >= q->hi)
            continue;
        REQUIRE(q_allows(m, q, s),
                "block %p handed to stream %u before the free on stream %u completed", p, s,
                q->stream);
    }
    m->live[m->nlive++] = (live_t){lo, size, s, 0};
    m->requested += size;
    if (m->requested > m->requested_peak)
        m->requested_peak = m->requested;
}

static void do_free(model_t *m, unsigned i, unsigned s)
{
    live_t l = m->live[i];
    if (getenv("GA_MODEL_TRACE"))
        fprintf(stderr, "FREE %#lx alloc-stream %u on %u uses %x\n", (unsigned long)l.p, l.stream,
                s, l.uses);
    if (s == HOST) {
        /* The program waited for the block's stream before saying that no
         * GPU work uses the block (recorded uses apart). */
        if (l.stream != HOST)
            tp_complete(&m->tp, l.stream);
    } else {
        tp_enqueue(&m->tp, s);
        /* A free on a stream other than the allocation's is correct only
         * if the program ordered that stream after the allocation
         * stream's work on the block (an event wait): model it. */
        if (s != l.stream)
            tp_wait(&m->tp, s, l.stream);
    }
    gpuarena_status_t st = ga_bm_free(m->bm, (void *)l.p, stream_of(s));
    REQUIRE(st == GPUARENA_SUCCESS, "free: %s", gpuarena_last_error());
    if (m->nq == MAX_QUAR) {
        for (unsigned k = 0; k < NSTREAMS; k++)
            tp_complete(&m->tp, k);
        prune(m);
    }
    quar_t *q = &m->q[m->nq++];
    memset(q, 0, sizeof *q);
    q->lo = l.p;
    q->hi = l.p + l.size;
    q->stream = s;
    q->pos = m->tp.enqueued[s];
    for (unsigned u = 0; u < NSTREAMS; u++)
        if (l.uses >> u & 1)
            q->use_pos[u] = m->tp.enqueued[u];
    m->requested -= l.size;
    m->live[i] = m->live[--m->nlive];
}

static void run_model(unsigned long ops, bool growable, bool tcache, ga_cross_stream_t policy,
                      uint64_t seed)
{
    model_t *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(m);
    const char *es = getenv("GA_MODEL_SEED");
    m->rng = es ? seed ^ strtoull(es, NULL, 0) : seed;
    if (!m->rng)
        m->rng = seed; /* xorshift never leaves 0 */
    m->wait_policy = policy == GA_CROSS_WAIT;
    tp_init(&m->tp, growable, (size_t)2 << 20);
    ga_settings_t set;
    ga_config_defaults(GPUARENA_SIM, &set);
    set.expandable = growable;
    set.thread_cache = tcache;
    set.cross_stream = policy;
    ck_assert_int_eq(ga_bm_create(&m->tp.base, &set, &m->bm), GPUARENA_SUCCESS);

    for (unsigned long n = 0; n < ops; n++) {
        unsigned s = (unsigned)(rnd(m) % (NSTREAMS + 1)); /* HOST too */
        unsigned r = (unsigned)(rnd(m) % 100);
        if (m->nlive < MAX_LIVE && (r < 45 || m->nlive == 0)) {
            do_alloc(m, s);
        } else if (r < 88) {
            unsigned i = (unsigned)(rnd(m) % m->nlive);
            /* Mostly on the allocation's stream, as frameworks do. */
            do_free(m, i, rnd(m) % 8 ? m->live[i].stream : s);
        } else if (r < 93 && m->nlive) {
            unsigned i = (unsigned)(rnd(m) % m->nlive);
            s %= NSTREAMS; /* a use is on a stream */
            tp_enqueue(&m->tp, s);
            REQUIRE(ga_bm_record_stream(m->bm, (void *)m->live[i].p, stream_of(s)) ==
                        GPUARENA_SUCCESS,
                    "record_stream: %s", gpuarena_last_error());
            if (s != m->live[i].stream)
                m->live[i].uses |= 1u << s;
            if (getenv("GA_MODEL_TRACE"))
                fprintf(stderr, "RECORD %#lx on %u\n", (unsigned long)m->live[i].p, s);
        } else if (r < 99) {
            /* The GPU catches up on one stream, wholly or part of the way:
             * an event recorded at a free completes then while later
             * frees on that stream are still ahead of the GPU. */
            unsigned g = s % NSTREAMS;
            uint64_t done = m->tp.completed[g], ahead = m->tp.enqueued[g] - done;
            if (rnd(m) % 2 || !ahead)
                tp_complete(&m->tp, g);
            else
                tp_complete_to(&m->tp, g, done + 1 + rnd(m) % ahead);
            prune(m);
        } else {
            size_t keep = rnd(m) % 2 ? 0 : (size_t)(rnd(m) % (64u << 20));
            REQUIRE(ga_bm_trim(m->bm, keep, true) == GPUARENA_SUCCESS, "trim: %s",
                    gpuarena_last_error());
            prune(m);
        }
        if (getenv("GA_MODEL_TRACE")) {
            fprintf(stderr, "op %lu r=%u s=%u nlive=%u\n", n, r, s, m->nlive);
            for (unsigned i = 0; i < m->nlive; i++)
                fprintf(stderr, "   live %#lx +%zu on %u\n", (unsigned long)m->live[i].p,
                        m->live[i].size, m->live[i].stream);
            for (ga_segment_t *g = m->bm->segs; g; g = g->next)
                for (ga_block_t *b = g->first; b; b = b->next)
                    fprintf(stderr, "   [%#lx +%zu st%u pool %ld]\n", (unsigned long)b->addr,
                            b->size, b->state,
                            /* a live block has no pool: those bytes are its sizes */
                            b->state != BLOCK_LIVE && b->pool ? (long)b->pool->stream.id : -2L);
        }
        gpuarena_status_t st = ga_bm_check(m->bm);
        REQUIRE(st == GPUARENA_SUCCESS, "op %lu: %s", n, gpuarena_last_error());
        if (n % 64 == 0) {
            gpuarena_stats_t stats;
            ga_bm_stats(m->bm, &stats);
            REQUIRE(stats.requested == m->requested, "requested %llu, model %llu",
                    (unsigned long long)stats.requested, (unsigned long long)m->requested);
            REQUIRE(stats.live_blocks == m->nlive, "live blocks disagree");
            REQUIRE(stats.reserved >= stats.in_use && stats.in_use >= stats.requested &&
                        stats.reserved_peak >= stats.reserved,
                    "statistics out of order");
            /* One thread: the peaks are exact (see ga_bm_update_peaks). */
            REQUIRE(stats.requested_peak == m->requested_peak, "requested peak %llu, model %llu",
                    (unsigned long long)stats.requested_peak,
                    (unsigned long long)m->requested_peak);
            REQUIRE(stats.in_use_peak >= stats.in_use && stats.cached_peak >= stats.cached &&
                        stats.in_use_peak >= stats.requested_peak,
                    "a peak below its count");
        }
    }
    while (m->nlive)
        do_free(m, 0, m->live[0].stream);
    ck_assert_int_eq(ga_bm_trim(m->bm, 0, true), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_bm_check(m->bm), GPUARENA_SUCCESS);
    gpuarena_stats_t stats;
    ga_bm_stats(m->bm, &stats);
    ck_assert_uint_eq(stats.requested, 0);
    ck_assert_uint_eq(stats.in_use, 0);
    ck_assert_uint_eq(stats.reserved, 0);
    ck_assert_uint_eq(m->tp.base.live_maps, 0);
    ck_assert_uint_eq(m->tp.committed, 0);
    ga_bm_destroy(m->bm);
    ck_assert_uint_eq(m->tp.events_live, 0);
    ck_assert_uint_eq(m->tp.bad_handles, 0); /* nothing queued on "no stream" */
    free(m);
}

static unsigned long share(void)
{
    const char *e = getenv("GA_TEST_OPS");
    unsigned long total = e ? strtoul(e, NULL, 10) : 1000000ul;
    return total / 8 ? total / 8 : 1;
}

START_TEST(model_fixed_event)
{
    run_model(share(), false, false, GA_CROSS_EVENT, 0x1234567ull);
}
END_TEST

START_TEST(model_fixed_event_tcache)
{
    run_model(share(), false, true, GA_CROSS_EVENT, 0x2345671ull);
}
END_TEST

START_TEST(model_growable_event)
{
    run_model(share(), true, false, GA_CROSS_EVENT, 0x3456712ull);
}
END_TEST

START_TEST(model_growable_event_tcache)
{
    run_model(share(), true, true, GA_CROSS_EVENT, 0x4567123ull);
}
END_TEST

START_TEST(model_fixed_wait)
{
    run_model(share(), false, true, GA_CROSS_WAIT, 0x5671234ull);
}
END_TEST

START_TEST(model_growable_wait)
{
    run_model(share(), true, false, GA_CROSS_WAIT, 0x6712345ull);
}
END_TEST

START_TEST(model_fixed_never)
{
    run_model(share(), false, false, GA_CROSS_NEVER, 0x7123456ull);
}
END_TEST

START_TEST(model_growable_never)
{
    run_model(share(), true, true, GA_CROSS_NEVER, 0x1726354ull);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("block_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 600);
    const char *only = getenv("GA_MODEL_ONLY");
    if (only) {
        const TTest *fns[] = {model_fixed_event,    model_fixed_event_tcache,
                              model_growable_event, model_growable_event_tcache,
                              model_fixed_wait,     model_growable_wait,
                              model_fixed_never,    model_growable_never};
        tcase_add_test(tc, fns[atoi(only)]);
        goto run;
    }
    tcase_add_test(tc, model_fixed_event);
    tcase_add_test(tc, model_fixed_event_tcache);
    tcase_add_test(tc, model_growable_event);
    tcase_add_test(tc, model_growable_event_tcache);
    tcase_add_test(tc, model_fixed_wait);
    tcase_add_test(tc, model_growable_wait);
    tcase_add_test(tc, model_fixed_never);
    tcase_add_test(tc, model_growable_never);
run:
    suite_add_tcase(s, tc);
    return ga_check_run(s);
}
