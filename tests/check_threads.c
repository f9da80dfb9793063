/*
 * check_threads.c - the arenas under concurrent use.
 *
 * threads: 4 threads, each on two shared streams and private ones,
 *   GA_TEST_OPS operations each (default 1,000,000), on a sim and a host
 *   arena with thread caches on (issue 4), small ones (16 KiB), so that
 *   larger blocks go through the caches' large slot.
 * stress: 8 threads, GA_STRESS_OPS operations in all per arena, default
 *   ten million as issue 10 asks (about 3 s each on a 2-core machine): on
 *   a sim arena without thread caches (every operation takes the lock,
 *   cross_stream = wait) and on a host arena with them and max_cached.
 * two arenas: 4 threads, each on a sim and a host arena at once.
 * totals: the peak of a kind's total with several arenas, and beside resets.
 * double frees: beside a trim, and at once without thread caches, refused.
 *
 * Every worker allocates (sizes 1 B to 64 KiB, a few up to 1 MiB), frees on
 * the allocation's stream or another, and records other streams.  On the
 * host arena it writes a tag at both ends of each block and checks it at
 * free, so two threads handed overlapping memory are caught.  Meanwhile
 * a monitor thread reads statistics (checking they add up), trims to
 * various sizes, changes the caps (gpuarena_set) and runs the invariant
 * checker.  At the end every block is freed, the checker passes, nothing
 * is requested or live, and after trim(0) nothing is reserved.  Built
 * with -fsanitize=thread it must be clean; GA_TEST_OPS / GA_STRESS_OPS
 * scale it down for sanitizers and valgrind.
 */
#include "checkrun.h"
#include "gpuarena.h"
#include "testrand.h"

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIVE 64

typedef struct blk {
    gpuarena_t *a;
    unsigned char *p;
    size_t size;
    gpuarena_stream_t stream;
    uint64_t tag;
} blk_t;

/* Two arenas at most: a worker with two has caches of both, and its
 * locked operations on one look at its caches of the other while the
 * monitor's trims flush them. */
#define MAX_ARENAS 2

typedef struct worker {
    pthread_t th;
    gpuarena_t *a[MAX_ARENAS];
    bool host[MAX_ARENAS]; /* whose blocks are host memory, tagged */
    unsigned narenas;
    unsigned id;
    unsigned long ops;
    uint64_t rng;
    unsigned long done_ops;
    char err[256]; /* empty: no failure */
} worker_t;

typedef struct monitor {
    pthread_t th;
    gpuarena_t *a;
    atomic_bool stop;
    unsigned long rounds;
    char err[256];
} monitor_t;

static gpuarena_stream_t stream(uintptr_t n)
{
    return (gpuarena_stream_t)n;
}

/* The tag at the start, and at the end where the two do not overlap. */
static void tag_write(blk_t *b)
{
    size_t n = b->size < 8 ? b->size : 8;
    memcpy(b->p, &b->tag, n);
    if (b->size >= 16)
        memcpy(b->p + b->size - 8, &b->tag, 8);
}

static bool tag_ok(const blk_t *b)
{
    size_t n = b->size < 8 ? b->size : 8;
    return memcmp(b->p, &b->tag, n) == 0 &&
           (b->size < 16 || memcmp(b->p + b->size - 8, &b->tag, 8) == 0);
}

/* Whether B came from an arena of host memory, whose tags can be read. */
static bool is_host(const worker_t *w, const blk_t *b)
{
    for (unsigned k = 0; k < w->narenas; k++)
        if (w->a[k] == b->a)
            return w->host[k];
    return false;
}

#define FAIL(w, ...)                                                                               \
    do {                                                                                           \
        snprintf((w)->err, sizeof(w)->err, __VA_ARGS__);                                           \
        goto out;                                                                                  \
    } while (0)

static void *work(void *arg)
{
    worker_t *w = arg;
    blk_t live[MAX_LIVE];
    unsigned n = 0;
    /* Streams 1 and 2 are shared by every thread; the private one
     * changes every 256 operations, in turn among 20: more than a thread
     * keeps caches for (16 an arena), so that caches are retired while
     * other threads flush them, trim, and take the lock. */
    for (unsigned long op = 0; op < w->ops; op++) {
        gpuarena_stream_t mine = stream(100 + 32 * w->id + (op / 256) % 20);
        uint64_t r = ga_test_rand(&w->rng);
        unsigned what = (unsigned)(r % 100);
        unsigned pick = (unsigned)(r >> 8) % 4;
        gpuarena_stream_t s = pick == 0 ? stream(1) : pick == 1 ? stream(2) : mine;
        unsigned k = (unsigned)(r >> 60) % w->narenas;
        if (n < MAX_LIVE && (what < 50 || n == 0)) {
            unsigned bits = (unsigned)(r >> 16) % 17; /* up to 64 KiB */
            if ((r >> 24) % 64 == 0)
                bits = 20; /* now and then up to 1 MiB */
            size_t size = ((size_t)(r >> 32) & (((size_t)1 << bits) - 1)) + 1;
            blk_t *b = &live[n];
            b->a = w->a[k];
            gpuarena_status_t st = gpuarena_alloc(b->a, size, s, (void **)&b->p);
            if (st != GPUARENA_SUCCESS)
                FAIL(w, "thread %u: alloc %zu: %s", w->id, size, gpuarena_last_error());
            if (!b->p)
                FAIL(w, "thread %u: alloc %zu returned NULL", w->id, size);
            b->size = size;
            b->stream = s;
            b->tag = ((uint64_t)w->id << 56) | op;
            if (w->host[k])
                tag_write(b);
            n++;
        } else if (what < 95) {
            unsigned i = (unsigned)((r >> 16) % n);
            blk_t *b = &live[i];
            if (is_host(w, b) && !tag_ok(b))
                FAIL(w, "thread %u: block %p of %zu bytes was overwritten", w->id, (void *)b->p,
                     b->size);
            /* Mostly on the allocation's stream; sometimes on a shared
             * one, as after an event wait. */
            gpuarena_stream_t fs = (r >> 40) % 8 ? b->stream : stream(1 + (r >> 44) % 2);
            gpuarena_status_t st = gpuarena_free(b->a, b->p, fs);
            if (st != GPUARENA_SUCCESS)
                FAIL(w, "thread %u: free %p: %s", w->id, (void *)b->p, gpuarena_last_error());
            live[i] = live[--n];
        } else {
            blk_t *b = &live[(r >> 16) % n];
            gpuarena_status_t st = gpuarena_record_stream(b->a, b->p, stream(1 + (r >> 40) % 2));
            if (st != GPUARENA_SUCCESS)
                FAIL(w, "thread %u: record_stream: %s", w->id, gpuarena_last_error());
        }
        w->done_ops++;
    }
out:
    for (unsigned i = 0; i < n; i++) {
        if (is_host(w, &live[i]) && !tag_ok(&live[i]) && !w->err[0])
            snprintf(w->err, sizeof w->err, "thread %u: block %p overwritten", w->id,
                     (void *)live[i].p);
        if (gpuarena_free(live[i].a, live[i].p, live[i].stream) != GPUARENA_SUCCESS && !w->err[0])
            snprintf(w->err, sizeof w->err, "thread %u: final free: %s", w->id,
                     gpuarena_last_error());
    }
    return NULL;
}

static void *watch(void *arg)
{
    monitor_t *m = arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    const struct timespec pause = {0, 200000};
    while (!atomic_load(&m->stop)) {
        gpuarena_stats_t st;
        if (gpuarena_stats(m->a, &st) != GPUARENA_SUCCESS) {
            snprintf(m->err, sizeof m->err, "stats: %s", gpuarena_last_error());
            break;
        }
        if (st.requested > st.in_use || st.in_use > st.reserved ||
            st.cached != st.reserved - st.in_use || st.reserved > st.reserved_peak ||
            st.in_use > st.in_use_peak || st.requested > st.requested_peak) {
            snprintf(m->err, sizeof m->err,
                     "statistics do not add up: requested %" PRIu64 " in use %" PRIu64
                     " reserved %" PRIu64 " cached %" PRIu64,
                     st.requested, st.in_use, st.reserved, st.cached);
            break;
        }
        if (gpuarena_check(m->a) != GPUARENA_SUCCESS) {
            snprintf(m->err, sizeof m->err, "check: %s", gpuarena_last_error());
            break;
        }
        uint64_t r = ga_test_rand(&rng);
        if (r % 4 == 0) {
            size_t keep = r % 3 == 0 ? 0 : r % 3 == 1 ? (size_t)1 << 20 : (size_t)16 << 20;
            if (gpuarena_trim(m->a, keep) != GPUARENA_SUCCESS) {
                snprintf(m->err, sizeof m->err, "trim: %s", gpuarena_last_error());
                break;
            }
        }
        if (r % 64 == 1)
            (void)gpuarena_stats_reset_peaks(m->a);
        if (r % 8 == 2) {
            /* New caps while the workers run: never one they could hit
             * (at most 4 x 64 blocks of 1 MiB live at once). */
            static const char *const caps[] = {"max_cached=1M", "max_cached=none,max_reserved=2G",
                                               "max_reserved=none", "max_cached=16M"};
            if (gpuarena_set(m->a, caps[(r >> 8) % 4]) != GPUARENA_SUCCESS) {
                snprintf(m->err, sizeof m->err, "set: %s", gpuarena_last_error());
                break;
            }
        }
        m->rounds++;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static unsigned long env_ops(const char *name, unsigned long dflt)
{
    const char *e = getenv(name);
    unsigned long v = e ? strtoul(e, NULL, 10) : dflt;
    return v ? v : 1;
}

/* Rounds of a race test: FULL at GA_TEST_OPS' default, which catches the
 * race it was written for in most runs; a hundredth of that scaled as
 * GA_TEST_OPS is, under sanitizers and valgrind, which run the handshakes
 * of each round hundreds of times slower and check other things. */
static unsigned long race_rounds(unsigned long full)
{
    unsigned long ops = env_ops("GA_TEST_OPS", 1000000);
    if (ops >= 1000000)
        return full;
    unsigned long r = full / 100 * ops / 1000000;
    return r ? r : 1;
}

/* The end of a run on arena A, every block freed: the checker passes,
 * the statistics add up, and trim(0) returns everything.  Its share of
 * the TOTAL operations is about a third allocations. */
static void check_after(gpuarena_t *a, unsigned long total)
{
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.requested, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.allocs, st.frees);
    ck_assert_uint_ge(st.allocs, total / 3);
    ck_assert_uint_eq(st.allocs, st.cache_hits + st.cache_misses);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.reserved, 0);
    ck_assert_uint_eq(st.pending_frees, 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
}

/* NARENAS arenas of KIND[k] made with OPTS[k], used by NTHREADS workers
 * at once, PER_THREAD operations each, and by the monitor. */
static void run_on(unsigned narenas, const gpuarena_kind_t *kind, const char *const *opts,
                   unsigned nthreads, unsigned long per_thread)
{
    gpuarena_t *a[MAX_ARENAS] = {NULL};
    for (unsigned k = 0; k < narenas; k++)
        ck_assert_msg(gpuarena_create(kind[k], 0, opts[k], &a[k]) == GPUARENA_SUCCESS, "create: %s",
                      gpuarena_last_error());
    worker_t *w = calloc(nthreads, sizeof *w);
    monitor_t *m = calloc(1, sizeof *m);
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(m);
    /* The monitor on the first arena only: what its trims flush, the
     * workers' locked operations on the other look at with no lock of
     * the first between them. */
    m->a = a[0];
    atomic_init(&m->stop, false);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(pthread_create(&m->th, NULL, watch, m), 0);
    for (unsigned i = 0; i < nthreads; i++) {
        memcpy(w[i].a, a, sizeof a);
        for (unsigned k = 0; k < narenas; k++)
            w[i].host[k] = kind[k] == GPUARENA_HOST;
        w[i].narenas = narenas;
        w[i].id = i;
        w[i].ops = per_thread;
        w[i].rng = 0x12345678ull * (i + 1) + 1;
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, work, &w[i]), 0);
    }
    unsigned long total = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
        total += w[i].done_ops;
    }
    atomic_store(&m->stop, true);
    ck_assert_int_eq(pthread_join(m->th, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (unsigned i = 0; i < nthreads; i++)
        ck_assert_msg(!w[i].err[0], "%s", w[i].err);
    ck_assert_msg(!m->err[0], "monitor: %s", m->err);
    ck_assert_uint_eq(total, (unsigned long)nthreads * per_thread);
    ck_assert_uint_gt(m->rounds, 0);

    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    for (unsigned k = 0; k < narenas; k++) {
        gpuarena_stats_t st;
        ck_assert_int_eq(gpuarena_stats(a[k], &st), GPUARENA_SUCCESS);
        check_after(a[k], total / narenas);
        printf("%-5s %u threads x %lu ops (%s%s): %.2f s, %.2f M ops/s, %lu monitor rounds, "
               "%" PRIu64 " allocs, %" PRIu64 " hits\n",
               kind[k] == GPUARENA_HOST ? "host" : "sim", nthreads, per_thread, opts[k],
               narenas > 1 ? "; one of two arenas" : "", s, (double)total / s / 1e6, m->rounds,
               st.allocs, st.cache_hits);
        ck_assert_int_eq(gpuarena_destroy(a[k]), GPUARENA_SUCCESS);
    }
    fflush(stdout);
    free(w);
    free(m);
}

static void run(gpuarena_kind_t kind, const char *opts, unsigned nthreads, unsigned long per_thread)
{
    run_on(1, &kind, &opts, nthreads, per_thread);
}

START_TEST(threads_sim)
{
    /* Blocks of 16K-1M go through the caches' large slot. */
    run(GPUARENA_SIM, "thread_cache=true,thread_cache_max=16K,thread_cache_bytes=64K", 4,
        env_ops("GA_TEST_OPS", 1000000));
}
END_TEST

START_TEST(threads_host)
{
    run(GPUARENA_HOST, "thread_cache=true,thread_cache_max=16K", 4,
        env_ops("GA_TEST_OPS", 1000000));
}
END_TEST

START_TEST(stress_sim)
{
    unsigned long total = env_ops("GA_STRESS_OPS", 10000000);
    run(GPUARENA_SIM, "thread_cache=false,cross_stream=wait,expandable=false", 8, (total + 7) / 8);
}
END_TEST

START_TEST(stress_host)
{
    unsigned long total = env_ops("GA_STRESS_OPS", 10000000);
    run(GPUARENA_HOST, "thread_cache=true,max_cached=4M,granule=64K", 8, (total + 7) / 8);
}
END_TEST

/* Each worker on a sim and a host arena at once, blocks of 16K-1M in
 * the large slots of its caches of both: a locked operation on the host
 * arena looks at the thread's caches of the sim one, which the monitor's
 * trims of that one flush meanwhile (a race ThreadSanitizer caught). */
START_TEST(threads_two_arenas)
{
    const gpuarena_kind_t kinds[] = {GPUARENA_SIM, GPUARENA_HOST};
    const char *const opts[] = {"thread_cache=true,thread_cache_max=16K,thread_cache_bytes=64K",
                                "thread_cache=true,thread_cache_max=16K"};
    run_on(2, kinds, opts, 4, env_ops("GA_TEST_OPS", 1000000) / 2);
}
END_TEST

/* gpuarena_stats_total with threads: each of 8 threads maps and unmaps
 * in an arena of its own, 64 times over; every round they all hold their
 * blocks at once, between two barriers, so the peak of the sum must reach
 * the sum of what they held, and once all have trimmed the total is back
 * where it was (no update lost to a race). */
#define TOTAL_THREADS 8
typedef struct total_worker {
    gpuarena_t *a;
    pthread_barrier_t *bar;
    uint64_t held; /* the arena's reserved bytes while it held its block */
} total_worker_t;

static void *total_thread(void *arg)
{
    total_worker_t *w = arg;
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)3;
    for (int round = 0; round < 64; round++) {
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(w->a, ((size_t)1 + (size_t)(round % 4)) << 20, s, &p),
                         GPUARENA_SUCCESS);
        gpuarena_stats_t st;
        ck_assert_int_eq(gpuarena_stats(w->a, &st), GPUARENA_SUCCESS);
        if (round == 63)
            w->held = st.reserved;
        pthread_barrier_wait(w->bar);
        pthread_barrier_wait(w->bar);
        ck_assert_int_eq(gpuarena_free(w->a, p, s), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_trim(w->a, 0), GPUARENA_SUCCESS);
    }
    return NULL;
}

START_TEST(totals_with_threads)
{
    gpuarena_total_t t0, t;
    ck_assert_int_eq(gpuarena_stats_total(GPUARENA_SIM, 0, &t0), GPUARENA_SUCCESS);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, TOTAL_THREADS);
    total_worker_t w[TOTAL_THREADS];
    pthread_t th[TOTAL_THREADS];
    for (int i = 0; i < TOTAL_THREADS; i++) {
        w[i].bar = &bar;
        w[i].held = 0;
        ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=true", &w[i].a),
                         GPUARENA_SUCCESS);
    }
    ck_assert_int_eq(gpuarena_stats_total_reset_peak(GPUARENA_SIM, 0), GPUARENA_SUCCESS);
    for (int i = 0; i < TOTAL_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, total_thread, &w[i]), 0);
    for (int i = 0; i < TOTAL_THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t held = 0;
    for (int i = 0; i < TOTAL_THREADS; i++)
        held += w[i].held;
    ck_assert_int_eq(gpuarena_stats_total(GPUARENA_SIM, 0, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.arenas, t0.arenas + TOTAL_THREADS);
    ck_assert_uint_eq(t.reserved, t0.reserved);
    ck_assert_uint_ge(held, (uint64_t)TOTAL_THREADS * (4u << 20));
    ck_assert_uint_ge(t.reserved_peak, t0.reserved + held);
    for (int i = 0; i < TOTAL_THREADS; i++)
        ck_assert_int_eq(gpuarena_destroy(w[i].a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats_total(GPUARENA_SIM, 0, &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t.arenas, t0.arenas);
    pthread_barrier_destroy(&bar);
}
END_TEST

/* A reset of the total's peak beside a mapping: the reset read the bytes
 * before the mapping added to them, and stored that older value over the
 * peak the mapping had raised; once the memory was unmapped the peak was
 * lost (gpuarena_stats(3): the total's peak "is exact with any number of
 * threads").  One thread resets in a loop; the other maps a segment,
 * stops the resets, reads the total, unmaps, and reads it again: the peak
 * must still cover the segment.  Before the fix, about one run in two of
 * 200000 rounds lost it. */
static atomic_int reset_pause, reset_paused, reset_quit;

static void *resetter(void *arg)
{
    (void)arg;
    while (!atomic_load(&reset_quit)) {
        if (atomic_load(&reset_pause)) {
            atomic_store(&reset_paused, 1);
            while (atomic_load(&reset_pause))
                sched_yield();
            atomic_store(&reset_paused, 0);
            continue;
        }
        ck_assert_int_eq(gpuarena_stats_total_reset_peak(GPUARENA_SIM, 0), GPUARENA_SUCCESS);
    }
    return NULL;
}

START_TEST(total_peak_beside_resets)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "expandable=false,thread_cache=false", &a),
                     GPUARENA_SUCCESS);
    unsigned long rounds = race_rounds(200000);
    pthread_t r;
    ck_assert_int_eq(pthread_create(&r, NULL, resetter, NULL), 0);
    unsigned long lost = 0;
    for (unsigned long i = 0; i < rounds; i++) {
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 4 << 20, NULL, &p), GPUARENA_SUCCESS); /* maps */
        atomic_store(&reset_pause, 1);
        while (!atomic_load(&reset_paused))
            sched_yield();
        gpuarena_total_t with, after;
        ck_assert_int_eq(gpuarena_stats_total(GPUARENA_SIM, 0, &with), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, NULL), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS); /* unmaps */
        ck_assert_int_eq(gpuarena_stats_total(GPUARENA_SIM, 0, &after), GPUARENA_SUCCESS);
        lost += after.reserved_peak < with.reserved;
        atomic_store(&reset_pause, 0);
        while (atomic_load(&reset_paused))
            sched_yield();
    }
    atomic_store(&reset_quit, 1);
    pthread_join(r, NULL);
    ck_assert_msg(lost == 0, "%lu of %lu rounds lost the total's peak", lost, rounds);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Double frees by two threads.  A second free after the first returned
 * must be refused (GPUARENA_ERR_DOUBLE_FREE) with the arena left whole,
 * also while a trim gives the block back from the thread cache that holds
 * it: the free found it live and uncached between the cache letting go
 * and the manager taking it, and that thread's cache kept it too (then
 * handed it out twice, or crashed).  Two frees at the same moment are the
 * program's race, which gpuarena_alloc(3) promises to refuse only with
 * thread_cache = false, every free then under the arena's lock.  These
 * tests make a data race on purpose (two threads free one pointer), which
 * ThreadSanitizer rightly reports: they are skipped in its build. */
#if defined(__SANITIZE_THREAD__)
#define GA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GA_TSAN 1
#endif
#endif

typedef struct df_shared {
    gpuarena_t *a;
    pthread_barrier_t bar;
    void *p;
    atomic_int ok, refused, quit;
} df_shared_t;

static void *df_freer(void *arg)
{
    df_shared_t *d = arg;
    for (;;) {
        pthread_barrier_wait(&d->bar);
        if (atomic_load(&d->quit))
            return NULL;
        gpuarena_status_t st = gpuarena_free(d->a, d->p, (gpuarena_stream_t)1);
        if (st == GPUARENA_SUCCESS)
            atomic_fetch_add(&d->ok, 1);
        else if (st == GPUARENA_ERR_DOUBLE_FREE)
            atomic_fetch_add(&d->refused, 1);
        pthread_barrier_wait(&d->bar);
    }
}

START_TEST(double_free_at_once_without_caches)
{
#ifdef GA_TSAN
    return;
#endif
    df_shared_t d = {0};
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=false", &d.a),
                     GPUARENA_SUCCESS);
    pthread_barrier_init(&d.bar, NULL, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, df_freer, &d), 0);
    unsigned long rounds = race_rounds(20000);
    for (unsigned long r = 0; r < rounds; r++) {
        ck_assert_int_eq(gpuarena_alloc(d.a, 4096, (gpuarena_stream_t)1, &d.p), GPUARENA_SUCCESS);
        atomic_store(&d.ok, 0);
        atomic_store(&d.refused, 0);
        pthread_barrier_wait(&d.bar); /* both free P */
        pthread_barrier_wait(&d.bar);
        ck_assert_msg(atomic_load(&d.ok) == 1 && atomic_load(&d.refused) == 1,
                      "round %lu: %d frees of one block accepted, %d refused", r,
                      atomic_load(&d.ok), atomic_load(&d.refused));
    }
    atomic_store(&d.quit, 1);
    pthread_barrier_wait(&d.bar);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(gpuarena_check(d.a), GPUARENA_SUCCESS);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(d.a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_int_eq(gpuarena_destroy(d.a), GPUARENA_SUCCESS);
    pthread_barrier_destroy(&d.bar);
}
END_TEST

#define DF_BLOCKS 16

typedef struct df_trim {
    gpuarena_t *a;
    pthread_barrier_t bar;
    void *p[DF_BLOCKS];
    atomic_int phase, accepted, refused, quit;
} df_trim_t;

/* The owner: allocates the blocks and frees them into its cache. */
static void *df_owner(void *arg)
{
    df_trim_t *d = arg;
    for (;;) {
        for (int i = 0; i < DF_BLOCKS; i++)
            ck_assert_int_eq(gpuarena_alloc(d->a, 4096, (gpuarena_stream_t)1, &d->p[i]),
                             GPUARENA_SUCCESS);
        for (int i = 0; i < DF_BLOCKS; i++)
            ck_assert_int_eq(gpuarena_free(d->a, d->p[i], (gpuarena_stream_t)1), GPUARENA_SUCCESS);
        pthread_barrier_wait(&d->bar);
        pthread_barrier_wait(&d->bar);
        if (atomic_load(&d->quit))
            return NULL;
    }
}

/* The program's mistake: the same blocks freed again, while a trim gives
 * them back from the owner's cache. */
static void *df_again(void *arg)
{
    df_trim_t *d = arg;
    for (;;) {
        pthread_barrier_wait(&d->bar);
        /* At least once a round, even where the trim was over before this
         * thread ran (valgrind runs one thread at a time). */
        do {
            for (int i = 0; i < DF_BLOCKS; i++) {
                gpuarena_status_t st = gpuarena_free(d->a, d->p[i], (gpuarena_stream_t)2);
                atomic_fetch_add(st == GPUARENA_SUCCESS ? &d->accepted : &d->refused, 1);
            }
        } while (atomic_load(&d->phase) != 2);
        pthread_barrier_wait(&d->bar);
        if (atomic_load(&d->quit))
            return NULL;
    }
}

START_TEST(double_free_beside_a_trim)
{
#ifdef GA_TSAN
    return;
#endif
    df_trim_t d = {0};
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=true", &d.a), GPUARENA_SUCCESS);
    pthread_barrier_init(&d.bar, NULL, 3);
    pthread_t owner, again;
    ck_assert_int_eq(pthread_create(&owner, NULL, df_owner, &d), 0);
    ck_assert_int_eq(pthread_create(&again, NULL, df_again, &d), 0);
    unsigned long rounds = race_rounds(5000);
    for (unsigned long r = 0; r < rounds; r++) {
        pthread_barrier_wait(&d.bar);
        atomic_store(&d.phase, 1);
        ck_assert_int_eq(gpuarena_trim(d.a, 0), GPUARENA_SUCCESS);
        atomic_store(&d.phase, 2);
        if (r == rounds - 1 || atomic_load(&d.accepted))
            atomic_store(&d.quit, 1);
        pthread_barrier_wait(&d.bar);
        atomic_store(&d.phase, 0);
        if (atomic_load(&d.quit))
            break;
    }
    pthread_join(owner, NULL);
    pthread_join(again, NULL);
    ck_assert_msg(atomic_load(&d.accepted) == 0, "%d double frees accepted (%d refused)",
                  atomic_load(&d.accepted), atomic_load(&d.refused));
    ck_assert_int_gt(atomic_load(&d.refused), 0);
    ck_assert_msg(gpuarena_check(d.a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(d.a), GPUARENA_SUCCESS);
    pthread_barrier_destroy(&d.bar);
}
END_TEST

int main(void)
{
    printf("check_threads: GA_TEST_OPS (ops per thread, default 1000000) and GA_STRESS_OPS\n"
           "(ops in all of each 8-thread stress run, on sim and on host; default\n"
           "10000000, issue 10's full size; under sanitizers or valgrind use e.g.\n"
           "GA_TEST_OPS=20000 GA_STRESS_OPS=80000)\n");
    const TTest *tests[] = {threads_sim,
                            threads_host,
                            stress_sim,
                            stress_host,
                            threads_two_arenas,
                            totals_with_threads,
                            total_peak_beside_resets,
                            double_free_at_once_without_caches,
                            double_free_beside_a_trim};
    return ga_check_tests("threads", 900, tests, sizeof tests / sizeof tests[0]);
}
