/*
 * check_device_reuse.c - data written through one device allocation is
 * never seen through another (issue 5).  Exits 77 (skipped) where the
 * driver or a GPU is missing.
 *
 * Free on stream A behind slow work, allocate on stream B: a block that
 * A's queued fill still writes is not handed to B before that fill has run,
 * unless B's work is made to wait for it on the GPU (cross_stream = wait);
 * for every policy (event, wait, never), with growable and fixed segments,
 * for a block of its own segment and for one small enough for the thread
 * caches.  record_stream likewise: a block allocated and freed on A while
 * a recorded stream B still has a fill of it queued is not handed to A
 * again, nor to a third stream C, before B's fill has run.  And once the
 * slow work is done, the block is reused (event and wait), or not by
 * another stream at all (never).
 *
 * Slow work without a kernel: 1 GiB cuMemsetD8Async fills of a buffer of
 * its own, about 0.25 s of them at first, queued ahead of the fills that
 * matter.  Every case runs twice.  "Cached": each stream that allocates
 * while the work is queued first gets as many blocks of its own cached as
 * it allocates then (allocated and freed on it, idle), so that no memory
 * is mapped while the rule is judged and whatever a driver call might wait for is no part of
 * it.  "Missing": nothing is cached, the allocations miss and map, and the
 * misses are what make the arena look at the other stream's blocks (ask
 * for the event of a sweep, take a block under wait).  The maps made are
 * printed.  A case judges its allocations only if
 * cuStreamQuery says the busy stream was still busy after them; if the work had finished, the case
 * proves nothing and runs again with twice the work, four times at most, and then fails saying so
 * (an allocation that waited on the host for the stream would do that: they must not).
 *
 * Every block is then read back whole after all streams have synchronised:
 * a block holds the pattern of the fill ordered last, so a stream that
 * took a block before another stream's queued fill of it had run finds
 * that other fill's pattern in its block.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"
#include "hostmem.h"

#include "gputest.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static const char *const policies[] = {"event", "wait", "never"};

/* A block with a segment of its own (above half large_segment, far above
 * thread_cache_max), and one that a free puts in the thread's cache. */
static const size_t sizes[] = {32 * MiB, 128 * KiB};
#define LARGE(size) ((size) >= 16 * MiB)

/* A's second block: above thread_cache_max, so that its free takes the
 * arena's lock (and records the sweep that B's miss asked for). */
#define HELPER (1 * MiB)

/* A live large-class block right after the one under test: in a growable
 * segment, blocks cached for the other streams come after it and cannot
 * join the block when it is freed. */
#define SPACER (2 * MiB)

/* Fill patterns: one per stream and block. */
enum { PAT_A = 0xa1, PAT_A2 = 0xa2, PAT_B1 = 0xb1, PAT_B2 = 0xb2, PAT_B3 = 0xb3, PAT_C = 0xc1 };

typedef struct streams {
    void *a, *b, *c;
    bool cached; /* the variant: blocks cached for the allocating streams */
} streams_t;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *yes(bool b)
{
    return b ? "yes" : "NO";
}

/* ---------------------------------------------------------------------- */
/* Slow work. */

static struct {
    uint64_t buf;
    size_t size;
    double one; /* seconds per fill */
} slow;

static void slow_setup(void)
{
    size_t free_bytes = 0;
    OK(ga_cuda_mem_info(&free_bytes, NULL));
    slow.size = 1024 * MiB;
    while (slow.size > 64 * MiB && slow.size > free_bytes / 4)
        slow.size /= 2;
    OK(ga_cuda_mem_alloc(slow.size, &slow.buf));
    void *s;
    OK(ga_cuda_stream_create(true, &s));
    OK(ga_cuda_memset_d8_async(slow.buf, 0, slow.size, s)); /* warm up */
    OK(ga_cuda_stream_sync(s));
    double t0 = now();
    for (int i = 0; i < 8; i++)
        OK(ga_cuda_memset_d8_async(slow.buf, (unsigned char)i, slow.size, s));
    OK(ga_cuda_stream_sync(s));
    slow.one = (now() - t0) / 8;
    OK(ga_cuda_stream_destroy(s));
    printf("check_device_reuse: slow work: fills of %zu MiB, %.3f ms each\n", slow.size / MiB,
           1e3 * slow.one);
}

static void slow_teardown(void)
{
    OK(ga_cuda_ctx_sync());
    OK(ga_cuda_mem_free(slow.buf));
}

/* Queue about SECONDS of fills on STREAM; how many. */
static size_t slow_queue(void *stream, double seconds)
{
    size_t n = slow.one > 0 ? (size_t)(seconds / slow.one) : 1000;
    if (n < 16)
        n = 16;
    if (n > 100000)
        n = 100000;
    for (size_t i = 0; i < n; i++)
        OK(ga_cuda_memset_d8_async(slow.buf, (unsigned char)i, slow.size, stream));
    return n;
}

static bool busy(void *stream)
{
    gpuarena_status_t st = ga_cuda_stream_query(stream);
    ck_assert_msg(st == GPUARENA_SUCCESS || st == GA_CUDA_NOT_READY, "cuStreamQuery: %s",
                  gpuarena_last_error());
    return st == GA_CUDA_NOT_READY;
}

/* ---------------------------------------------------------------------- */
/* Blocks and patterns. */

static bool overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + nb && y < x + na;
}

static void fill(void *p, size_t n, unsigned char v, void *stream)
{
    OK(ga_cuda_memset_d8_async((uint64_t)(uintptr_t)p, v, n, stream));
}

static const char *whose(unsigned char v)
{
    switch (v) {
    case PAT_A:
    case PAT_A2:
        return " (stream A's fill: it ran after this block's own fill, so the block was handed "
               "out while A's queued work still wrote it)";
    case PAT_B1:
    case PAT_B2:
    case PAT_B3:
        return " (a fill of stream B)";
    case PAT_C:
        return " (stream C's fill)";
    default:
        return "";
    }
}

/* After every stream has synchronised: N bytes at P all hold WANT. */
static void expect(const void *p, size_t n, unsigned char want, const char *what, const char *cs)
{
    unsigned char *h = malloc(n);
    ck_assert_ptr_nonnull(h);
    OK(ga_cuda_memcpy_dtoh(h, (uint64_t)(uintptr_t)p, n));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (h[i] != want) {
            if (!bad)
                first = i;
            bad++;
        }
    }
    unsigned char got = bad ? h[first] : want;
    free(h);
    ck_assert_msg(bad == 0,
                  "%s: %s at %p: %zu of %zu bytes are not %#x; the first, at +%zu, is %#x%s", cs,
                  what, p, bad, n, want, first, got, whose(got));
}

/* Cache N blocks of SIZE for stream S: allocated and freed on it while it
 * is idle, so that its next N allocations need no mapping. */
static void cache_for(gpuarena_t *a, size_t size, void *s, int n)
{
    void *x[2];
    ck_assert_int_le(n, 2);
    for (int i = 0; i < n; i++)
        OK(gpuarena_alloc(a, size, s, &x[i]));
    for (int i = 0; i < n; i++)
        OK(gpuarena_free(a, x[i], s));
}

static gpuarena_t *device_arena(const char *policy, bool expandable, char *cs, size_t cslen,
                                size_t size, bool cached)
{
    char opt[96];
    snprintf(opt, sizeof opt, "cross_stream=%s,expandable=%s", policy,
             expandable ? "true" : "false");
    snprintf(cs, cslen, "%s, %zu KiB blocks, %s", opt, size / KiB, cached ? "cached" : "missing");
    gpuarena_t *a = NULL;
    OK(gpuarena_create(GPUARENA_DEVICE, 0, opt, &a));
    return a;
}

/* One try of a case: false when the busy stream was idle again too early
 * for its allocations to be judged. */
typedef bool (*attempt_fn)(const char *policy, bool expandable, size_t size, const streams_t *s,
                           double seconds);

/* Run ATTEMPT until the busy stream was still busy when judged: 0.25 s of
 * slow work, then 0.5, 1 and 2 s. */
static void judged(attempt_fn attempt, const char *name, const char *policy, bool expandable,
                   size_t size, const streams_t *s)
{
    double seconds = 0.25;
    for (int i = 0; i < 4; i++, seconds *= 2) {
        if (attempt(policy, expandable, size, s, seconds))
            return;
        if (i < 3)
            printf("check_device_reuse: %s: the slow work was done before the allocations were "
                   "judged: again with %.2f s of it\n",
                   name, 2 * seconds);
    }
    ck_abort_msg("%s, cross_stream=%s, expandable=%s, %zu KiB blocks, %s: the busy stream was "
                 "idle again before the allocations could be judged, four times, with up to "
                 "%.1f s of slow work queued: nothing is proved.  An allocation must not wait "
                 "for a stream on the host; see the timings printed above (in the missing "
                 "variant the allocations map memory: a driver that made that wait for the GPU "
                 "would show here).",
                 name, policy, expandable ? "true" : "false", size / KiB,
                 s->cached ? "cached" : "missing", seconds / 2);
}

/* ---------------------------------------------------------------------- */
/* Free on A behind slow work, allocate on B. */

static bool cross_stream_try(const char *policy, bool expandable, size_t size, const streams_t *s,
                             double seconds)
{
    char cs[160];
    gpuarena_t *a = device_arena(policy, expandable, cs, sizeof cs, size, s->cached);
    bool wait = strcmp(policy, "wait") == 0, never = strcmp(policy, "never") == 0;
    void *p, *p2, *q1, *q2, *spacer;
    OK(gpuarena_alloc(a, size, s->a, &p));
    OK(gpuarena_alloc(a, SPACER, s->a, &spacer));
    OK(gpuarena_alloc(a, HELPER, s->a, &p2));
    if (s->cached)
        cache_for(a, size, s->b, 2); /* B need not look at A's blocks */
    /* A's work: slow, then a fill of each block; then, in stream order,
     * the frees (legal: the fills are queued before them on A). */
    size_t n = slow_queue(s->a, seconds);
    fill(p, size, PAT_A, s->a);
    fill(p2, HELPER, PAT_A2, s->a);
    OK(gpuarena_free(a, p, s->a));
    bool busy_free = busy(s->a);
    gpuarena_stats_t st0;
    OK(gpuarena_stats(a, &st0));
    double t0 = now();
    /* Missing: B has nothing of its own and A's free is not known to be
     * done: B misses, and asks A's pool for an event. */
    OK(gpuarena_alloc(a, size, s->b, &q1));
    fill(q1, size, PAT_B1, s->b);
    /* A's next free records that event (a sweep), behind A's fills. */
    OK(gpuarena_free(a, p2, s->a));
    /* Missing: event, never: B misses again; wait: B may take A's
     * block, its work made to wait for the sweep's event on the GPU. */
    OK(gpuarena_alloc(a, size, s->b, &q2));
    fill(q2, size, PAT_B2, s->b);
    OK(gpuarena_check(a));
    double took = now() - t0;
    bool still = busy(s->a);
    gpuarena_stats_t st1;
    OK(gpuarena_stats(a, &st1));
    bool o1 = overlaps(q1, size, p, size) || overlaps(q1, size, p2, HELPER);
    bool o2 = overlaps(q2, size, p, size) || overlaps(q2, size, p2, HELPER);
    unsigned long long waits = st1.cross_stream_waits - st0.cross_stream_waits;
    unsigned long long maps = st1.provider_maps - st0.provider_maps;
    printf("check_device_reuse: free on A, alloc on B: %s: %zu fills queued (%.2f s), A busy at "
           "the free: %s, after B's allocations (%.2f ms, %llu maps): %s; B got A's block: %s, "
           "%s; cross-stream waits %llu\n",
           cs, n, seconds, yes(busy_free), 1e3 * took, maps, yes(still), o1 ? "yes" : "no",
           o2 ? "yes" : "no", waits);
    if (still) {
        ck_assert_msg(!o1,
                      "%s: B's first allocation got %p, overlapping A's freed block %p or %p, "
                      "while A's fill of it was queued (no event could cover it yet)",
                      cs, q1, p, p2);
        if (!wait) {
            ck_assert_msg(!o2,
                          "%s: B got %p, overlapping A's freed block %p or %p, while A's fill of "
                          "it was still queued",
                          cs, q2, p, p2);
            ck_assert_msg(waits == 0, "%s: %llu cross-stream waits", cs, waits);
        } else {
            ck_assert_msg(!o2 || waits == 1,
                          "%s: B got A's block %p while A's fill was queued, and no cross-stream "
                          "wait was made",
                          cs, q2);
            /* A block of its own segment: the sweep covers it and B has
             * nothing else, so wait takes it (the path is exercised). */
            if (LARGE(size) && !s->cached)
                ck_assert_msg(q2 == p && waits == 1,
                              "%s: B was to take A's block %p at once and wait for A on the GPU; "
                              "it got %p with %llu waits",
                              cs, p, q2, waits);
        }
    }
    OK(ga_cuda_stream_sync(s->a));
    OK(ga_cuda_stream_sync(s->b));
    /* Whatever the timing: B's blocks hold B's fills, A's never reached
     * them after. */
    expect(q1, size, PAT_B1, "B's first block", cs);
    expect(q2, size, PAT_B2, "B's second block", cs);
    if (!o1 && !o2) {
        expect(p, size, PAT_A, "A's freed block", cs);
        expect(p2, HELPER, PAT_A2, "A's freed second block", cs);
    }
    if (still && LARGE(size) && (never || (!wait && !s->cached))) {
        /* A's work is done: event reuses A's block now (the sweep B's
         * miss asked for has completed); never keeps it for A. */
        /* B takes cached blocks until it gets A's or would map: another
         * cached block may fit as well and come first. */
        void *got[16];
        int n3 = 0;
        bool reused = false;
        gpuarena_stats_t sm0, sm1;
        OK(gpuarena_stats(a, &sm0));
        while (n3 < 16) {
            OK(gpuarena_alloc(a, size, s->b, &got[n3]));
            OK(gpuarena_stats(a, &sm1));
            bool mapped = sm1.provider_maps != sm0.provider_maps;
            reused = overlaps(got[n3], size, p, size);
            n3++;
            if (reused || mapped)
                break;
        }
        if (never)
            ck_assert_msg(!reused, "%s: B got A's block %p: never is to leave it to A", cs, p);
        else
            ck_assert_msg(reused,
                          "%s: with A's work done, B did not reuse A's block %p before mapping "
                          "new memory (%d allocations): the sweep's event should have released "
                          "it",
                          cs, p, n3);
        for (int i = 0; i < n3; i++) {
            fill(got[i], size, PAT_B3, s->b);
            OK(ga_cuda_stream_sync(s->b));
            expect(got[i], size, PAT_B3, "B's third block", cs);
            OK(gpuarena_free(a, got[i], s->b));
        }
    }
    OK(gpuarena_free(a, q1, s->b));
    OK(gpuarena_free(a, q2, s->b));
    OK(gpuarena_free(a, spacer, s->a));
    OK(ga_cuda_stream_sync(s->b));
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    return still;
}

/* ---------------------------------------------------------------------- */
/* record_stream: allocated and freed on A, used by B behind slow work. */

/* record_stream_try's record made with no host memory to note the stream
 * (record_stream_unnoted): it still succeeds, and the block's free keeps
 * it from every stream until a wait for the device. */
static bool unnoted;

static bool record_stream_try(const char *policy, bool expandable, size_t size, const streams_t *s,
                              double seconds)
{
    char cs[160];
    gpuarena_t *a = device_arena(policy, expandable, cs, sizeof cs, size, s->cached);
    bool never = strcmp(policy, "never") == 0;
    void *p, *qa, *qc, *spacer;
    OK(gpuarena_alloc(a, size, s->a, &p));
    OK(gpuarena_alloc(a, SPACER, s->a, &spacer));
    if (s->cached) {
        cache_for(a, size, s->a, 1);
        cache_for(a, size, s->c, 1);
    }
    gpuarena_stats_t st0;
    OK(gpuarena_stats(a, &st0));
    atomic_store(&ga_hostmem_fail, unnoted);
    gpuarena_status_t rs = gpuarena_record_stream(a, p, s->b);
    atomic_store(&ga_hostmem_fail, false);
    OK(rs);
    size_t n = slow_queue(s->b, seconds);
    fill(p, size, PAT_B1, s->b);
    OK(gpuarena_free(a, p, s->a)); /* A itself is idle */
    double t0 = now();
    OK(gpuarena_alloc(a, size, s->a, &qa));
    fill(qa, size, PAT_A, s->a);
    OK(gpuarena_alloc(a, size, s->c, &qc));
    fill(qc, size, PAT_C, s->c);
    OK(gpuarena_check(a));
    double took = now() - t0;
    bool still = busy(s->b);
    gpuarena_stats_t st;
    OK(gpuarena_stats(a, &st));
    bool oa = overlaps(qa, size, p, size), oc = overlaps(qc, size, p, size);
    printf("check_device_reuse: record_stream: %s: %zu fills queued on B (%.2f s), B busy after "
           "the allocations on A and C (%.2f ms, %llu maps): %s; A got the block back: %s, C got "
           "it: %s; pending frees %llu\n",
           cs, n, seconds, 1e3 * took, (unsigned long long)(st.provider_maps - st0.provider_maps),
           yes(still), oa ? "yes" : "no", oc ? "yes" : "no", (unsigned long long)st.pending_frees);
    if (still) {
        ck_assert_msg(!oa,
                      "%s: A got back its freed block %p while B, recorded with record_stream, "
                      "still had a fill of it queued",
                      cs, p);
        ck_assert_msg(!oc,
                      "%s: C got the freed block %p while B, recorded with record_stream, still "
                      "had a fill of it queued",
                      cs, p);
        if (unnoted)
            ck_assert_msg(st.pending_frees == 0 && st.retired_cached >= size,
                          "%s: uses unknown: %llu pending frees, %llu bytes retired, not the "
                          "block in limbo",
                          cs, (unsigned long long)st.pending_frees,
                          (unsigned long long)st.retired_cached);
        else
            ck_assert_msg(st.pending_frees == 1, "%s: %llu pending frees, not 1 (the block, for B)",
                          cs, (unsigned long long)st.pending_frees);
    }
    OK(ga_cuda_stream_sync(s->a));
    OK(ga_cuda_stream_sync(s->b));
    OK(ga_cuda_stream_sync(s->c));
    expect(qa, size, PAT_A, "A's new block", cs);
    expect(qc, size, PAT_C, "C's new block", cs);
    if (!oa && !oc)
        expect(p, size, PAT_B1, "the freed block (B's fill ran last)", cs);
    if (unnoted) {
        /* Uses unknown: the block is no stream's until a wait for the
         * device; trim makes it (and gives it back). */
        OK(gpuarena_trim(a, 0));
        OK(gpuarena_stats(a, &st));
        ck_assert_msg(st.retired_cached == 0, "%s: %llu bytes still retired after trim", cs,
                      (unsigned long long)st.retired_cached);
    } else if (still && LARGE(size) && !never) {
        /* B's work is done: the block comes back to A, with no new
         * mapping. */
        gpuarena_stats_t before, after;
        OK(gpuarena_stats(a, &before));
        void *q3;
        OK(gpuarena_alloc(a, size, s->a, &q3));
        OK(gpuarena_stats(a, &after));
        ck_assert_msg(q3 == p && after.provider_maps == before.provider_maps,
                      "%s: with B's work done, A did not get the block %p back (got %p, %llu new "
                      "mappings)",
                      cs, p, q3, (unsigned long long)(after.provider_maps - before.provider_maps));
        fill(q3, size, PAT_A, s->a);
        OK(ga_cuda_stream_sync(s->a));
        expect(q3, size, PAT_A, "the block back on A", cs);
        OK(gpuarena_free(a, q3, s->a));
    }
    OK(gpuarena_free(a, qa, s->a));
    OK(gpuarena_free(a, qc, s->c));
    OK(gpuarena_free(a, spacer, s->a));
    OK(ga_cuda_ctx_sync());
    OK(gpuarena_check(a));
    OK(gpuarena_destroy(a));
    return still;
}

/* ---------------------------------------------------------------------- */

static void every_case(attempt_fn attempt, const char *name)
{
    slow_setup();
    streams_t s;
    OK(ga_cuda_stream_create(true, &s.a));
    OK(ga_cuda_stream_create(true, &s.b));
    OK(ga_cuda_stream_create(true, &s.c));
    for (int c = 1; c >= 0; c--) {
        s.cached = c;
        for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
            for (int e = 1; e >= 0; e--)
                for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
                    judged(attempt, name, policies[k], e, sizes[z], &s);
    }
    OK(ga_cuda_stream_destroy(s.a));
    OK(ga_cuda_stream_destroy(s.b));
    OK(ga_cuda_stream_destroy(s.c));
    slow_teardown();
}

START_TEST(free_on_a_alloc_on_b)
{
    every_case(cross_stream_try, "free on A, alloc on B");
}
END_TEST

START_TEST(record_stream_holds_the_block)
{
    every_case(record_stream_try, "record_stream");
}
END_TEST

START_TEST(record_stream_unnoted_holds_the_block)
{
    unnoted = true;
    every_case(record_stream_try, "record_stream with no host memory");
    unnoted = false;
}
END_TEST

/* ---------------------------------------------------------------------- */
/* The per-thread default stream recorded by one thread, the block freed by
 * another. */

typedef struct per_thread {
    gpuarena_t *a;
    void *p, *done; /* the block; an event after the recording thread's work */
    size_t size;
    double seconds;
} per_thread_t;

/* The recording thread: slow work and a fill of the block on its own
 * per-thread stream, which it records. */
static void *record_on_my_stream(void *arg)
{
    per_thread_t *t = arg;
    void *pt = GA_CUDA_STREAM_PER_THREAD;
    OK(ga_cuda_set_current(gpu_ctx)); /* a driver context is the thread's own */
    (void)slow_queue(pt, t->seconds);
    fill(t->p, t->size, PAT_B1, pt);
    OK(ga_cuda_event_record(t->done, pt));
    OK(gpuarena_record_stream(t->a, t->p, pt));
    return NULL;
}

static void *free_with_no_stream(void *arg)
{
    per_thread_t *t = arg;
    OK(gpuarena_free(t->a, t->p, GPUARENA_STREAM_HOST));
    return NULL;
}

/* Whether the recording thread's work was still running when the next
 * allocation was judged. */
static bool per_thread_try(double seconds)
{
    per_thread_t t = {.size = 32 * MiB, .seconds = seconds};
    OK(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &t.a));
    OK(ga_cuda_event_create(&t.done));
    OK(gpuarena_alloc(t.a, t.size, GPUARENA_STREAM_HOST, &t.p));
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, record_on_my_stream, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(pthread_create(&th, NULL, free_with_no_stream, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    void *q;
    OK(gpuarena_alloc(t.a, t.size, GPUARENA_STREAM_HOST, &q));
    gpuarena_status_t ev = ga_cuda_event_query(t.done);
    ck_assert(ev == GPUARENA_SUCCESS || ev == GA_CUDA_NOT_READY);
    bool still = ev == GA_CUDA_NOT_READY;
    printf("check_device_reuse: per-thread stream recorded by one thread, freed by another: "
           "its work still running at the next allocation: %s; that allocation got the block: "
           "%s\n",
           yes(still), overlaps(q, t.size, t.p, t.size) ? "yes" : "no");
    if (still)
        ck_assert_msg(!overlaps(q, t.size, t.p, t.size),
                      "the block was handed out again while the work of the per-thread stream "
                      "that recorded it still ran (its free, on another thread, watched that "
                      "thread's own per-thread stream)");
    OK(ga_cuda_ctx_sync());
    if (!overlaps(q, t.size, t.p, t.size))
        expect(t.p, t.size, PAT_B1, "the freed block (the recording thread's fill)", "per-thread");
    OK(gpuarena_free(t.a, q, GPUARENA_STREAM_HOST));
    ga_cuda_event_destroy(t.done);
    OK(gpuarena_check(t.a));
    OK(gpuarena_destroy(t.a));
    return still;
}

START_TEST(per_thread_stream_of_another_thread)
{
    slow_setup();
    double seconds = 0.25;
    bool judged_busy = false;
    for (int i = 0; i < 4 && !judged_busy; i++, seconds *= 2)
        judged_busy = per_thread_try(seconds);
    slow_teardown();
    ck_assert_msg(judged_busy, "the recording thread's work was done before the allocation "
                               "could be judged, four times: nothing is proved");
}
END_TEST

int main(void)
{
    if (!gpu_tests_begin("check_device_reuse"))
        return 77;
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("device_reuse");
    TCase *tc = tcase_create("reuse");
    tcase_add_checked_fixture(tc, gpu_setup, gpu_teardown);
    tcase_add_test(tc, free_on_a_alloc_on_b);
    tcase_add_test(tc, record_stream_holds_the_block);
    tcase_add_test(tc, record_stream_unnoted_holds_the_block);
    tcase_add_test(tc, per_thread_stream_of_another_thread);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return gpu_tests_run(s);
}
