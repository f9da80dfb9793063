/*
 * check_fork.c - arenas across fork(2) (gpuarena(7), "Fork").
 *
 * churn: three threads allocate and free on a host and a sim arena (their
 *   thread caches warm, the arenas' locks taken by most other operations,
 *   biased to one thread at times) while the main thread forks
 *   GA_TEST_FORKS children (default 40, fewer with GA_TEST_OPS).  Each
 *   child, under an alarm, allocates and frees on the same arenas, on a
 *   default arena and on a new one, trims, reads statistics and runs the
 *   invariant checker, and must exit 0: a lock or a thread cache that
 *   another thread held at the fork would hang it (the alarm then kills
 *   it), and one left half changed would fail the checker.
 * orphans: a thread frees a large block into its cache's large slot and
 *   small ones into its slots, then waits.  In the child that thread does
 *   not exist: its cache must be gone from the arena, and its blocks back
 *   in the arena's pools, so that the child's allocation of the large
 *   size maps nothing new.
 * fork_while_the_bias_breaks: forks while another thread takes the lock
 *   biased to the forking thread (lock.h); every child must allocate.
 * The GPU kinds in a child are tested in check_fakecuda (the fake driver)
 * and check_device (a GPU).
 */
#include "arena.h"
#include "block/internal.h"
#include "block/tcache.h"
#include "checkrun.h"
#include "forkrun.h"
#include "gpuarena.h"
#include "testrand.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KIB     ((size_t)1 << 10)
#define MIB     ((size_t)1 << 20)
#define HOST    GPUARENA_STREAM_HOST
#define WORKERS 3
#define LIVE    32

/* A child's exit status: which step failed (0: none). */
enum {
    OK = 0,
    E_ALLOC = 10,
    E_FREE,
    E_CHECK,
    E_STATS,
    E_LIVE,
    E_TRIM,
    E_CREATE,
    E_DEFAULT,
    E_CACHES,
    E_MAPPED
};

/* Log-uniform from 512 B to 2 MiB, every other one 4 KiB (a cache hit). */
static size_t some_size(uint64_t *s)
{
    uint64_t r = ga_test_rand(s);
    if (r & 1)
        return 4 * KIB;
    size_t lo = 512, span = (r >> 1) % 13; /* 2^9 .. 2^21 */
    size_t base = lo << span;
    return base + (size_t)(ga_test_rand(s) % base);
}

static gpuarena_stream_t stream_of(gpuarena_kind_t kind, unsigned n)
{
    return kind == GPUARENA_SIM ? (gpuarena_stream_t)(uintptr_t)(1 + n % 2) : HOST;
}

typedef struct {
    pthread_t th;
    gpuarena_t *a;
    gpuarena_kind_t kind;
    unsigned id;
    atomic_bool *stop;
    void *p[LIVE];
    gpuarena_stream_t s[LIVE];
    unsigned long ops;
    gpuarena_status_t err;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (w->id + 1);
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        unsigned k = (unsigned)(ga_test_rand(&seed) % LIVE);
        gpuarena_status_t st;
        if (w->p[k]) {
            st = gpuarena_free(w->a, w->p[k], w->s[k]);
            w->p[k] = NULL;
        } else {
            w->s[k] = stream_of(w->kind, (unsigned)ga_test_rand(&seed));
            st = gpuarena_alloc(w->a, some_size(&seed), w->s[k], &w->p[k]);
        }
        if (st != GPUARENA_SUCCESS) {
            w->err = st;
            break;
        }
        w->ops++;
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (w->p[k] && gpuarena_free(w->a, w->p[k], w->s[k]) != GPUARENA_SUCCESS)
            w->err = GPUARENA_ERR_CORRUPT;
    return NULL;
}

/* Operations of each child on each arena: 2000, fewer under GA_TEST_OPS. */
static unsigned child_ops(void)
{
    const char *ops = getenv("GA_TEST_OPS");
    long n = ops && atol(ops) > 0 ? atol(ops) / 40 : 2000;
    return n < 100 ? 100 : n > 2000 ? 2000 : (unsigned)n;
}

/* What a child does with arena A (of KIND) that the parent's threads were
 * using: its own churn, then every block it made freed again. */
static int child_uses(gpuarena_t *a, gpuarena_kind_t kind, uint64_t seed)
{
    gpuarena_stats_t before, after;
    if (gpuarena_stats(a, &before) != GPUARENA_SUCCESS)
        return E_STATS;
    void *p[LIVE] = {0};
    gpuarena_stream_t s[LIVE];
    for (unsigned i = 0; i < child_ops(); i++) {
        unsigned k = (unsigned)(ga_test_rand(&seed) % LIVE);
        if (p[k]) {
            if (gpuarena_free(a, p[k], s[k]) != GPUARENA_SUCCESS)
                return E_FREE;
            p[k] = NULL;
        } else {
            s[k] = stream_of(kind, (unsigned)ga_test_rand(&seed));
            if (gpuarena_alloc(a, some_size(&seed), s[k], &p[k]) != GPUARENA_SUCCESS)
                return E_ALLOC;
            if (kind == GPUARENA_HOST)
                memset(p[k], 0x5a, 64); /* the child's own copy of the page */
        }
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (p[k] && gpuarena_free(a, p[k], s[k]) != GPUARENA_SUCCESS)
            return E_FREE;
    if (gpuarena_trim(a, 0) != GPUARENA_SUCCESS)
        return E_TRIM;
    if (gpuarena_check(a) != GPUARENA_SUCCESS)
        return E_CHECK;
    if (gpuarena_stats(a, &after) != GPUARENA_SUCCESS)
        return E_STATS;
    /* The blocks live at the fork (the parent's threads') stay live. */
    if (after.live_blocks != before.live_blocks)
        return E_LIVE;
    return OK;
}

/* A fresh arena and a default one work in the child too. */
static int child_new_arenas(void)
{
    gpuarena_t *n, *d;
    void *p;
    if (gpuarena_create(GPUARENA_SIM, 0, "thread_cache=true", &n) != GPUARENA_SUCCESS)
        return E_CREATE;
    if (gpuarena_alloc(n, 1 * MIB, HOST, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(n, p, HOST) != GPUARENA_SUCCESS || gpuarena_destroy(n) != GPUARENA_SUCCESS)
        return E_CREATE;
    if (gpuarena_get(GPUARENA_HOST, 0, &d) != GPUARENA_SUCCESS ||
        gpuarena_alloc(d, 8 * KIB, HOST, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(d, p, HOST) != GPUARENA_SUCCESS)
        return E_DEFAULT;
    return OK;
}

/* GA_TEST_FORKS, else 40, or fewer where GA_TEST_OPS scales the thread
 * tests down (valgrind: 4 for its 20000). */
static int forks_wanted(void)
{
    const char *e = getenv("GA_TEST_FORKS");
    if (e && atoi(e) > 0)
        return atoi(e);
    const char *ops = getenv("GA_TEST_OPS");
    long n = ops && atol(ops) > 0 ? atol(ops) / 5000 : 40;
    return n < 4 ? 4 : n > 40 ? 40 : (int)n;
}

typedef struct {
    gpuarena_t *host, *sim;
    uint64_t seed;
} churn_arg_t;

static int churn_child(void *arg)
{
    churn_arg_t *c = arg;
    int r = child_uses(c->host, GPUARENA_HOST, c->seed);
    if (r == OK)
        r = child_uses(c->sim, GPUARENA_SIM, c->seed ^ 0xabcdef);
    if (r == OK)
        r = child_new_arenas();
    return r;
}

START_TEST(churn)
{
    gpuarena_t *host, *sim;
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "thread_cache=true", &host),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, "thread_cache=true", &sim), GPUARENA_SUCCESS);
    atomic_bool stop = false;
    worker_t w[2 * WORKERS];
    memset(w, 0, sizeof w);
    for (unsigned i = 0; i < 2 * WORKERS; i++) {
        w[i].a = i < WORKERS ? host : sim;
        w[i].kind = i < WORKERS ? GPUARENA_HOST : GPUARENA_SIM;
        w[i].id = i;
        w[i].stop = &stop;
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, work, &w[i]), 0);
    }
    int n = forks_wanted(), failed = -1, status = 0;
    for (int i = 0; i < n && failed < 0; i++) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        churn_arg_t c = {host, sim, 0x1234567ull * (uint64_t)(i + 1)};
        status = ga_fork_run(churn_child, &c, 30);
        if (!ga_child_ok(status))
            failed = i;
    }
    atomic_store(&stop, true);
    unsigned long ops = 0;
    for (unsigned i = 0; i < 2 * WORKERS; i++) {
        ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
        ck_assert_msg(w[i].err == GPUARENA_SUCCESS, "worker %u: %s", i,
                      gpuarena_strerror(w[i].err));
        ops += w[i].ops;
    }
    if (failed >= 0) {
        char what[32];
        snprintf(what, sizeof what, "churn: child %d", failed);
        ga_require_child_ok(status, what);
    }
    ck_assert_msg(ops > 0, "the workers made no operation");
    /* The parent's arenas are whole after the forks. */
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_check(host), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(sim), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(host, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_int_eq(gpuarena_destroy(host), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(sim), GPUARENA_SUCCESS);
}
END_TEST

/* orphans: the thread that fills its cache, then waits. */
typedef struct {
    gpuarena_t *a;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int phase; /* 1: blocks freed; 2: the parent is done */
    gpuarena_status_t err;
} holder_t;

#define BIG ((size_t)48 * MIB) /* above large_segment: a segment of its own */

static void *hold(void *arg)
{
    holder_t *h = arg;
    void *big, *small[4];
    gpuarena_status_t st = gpuarena_alloc(h->a, BIG, HOST, &big);
    for (unsigned i = 0; i < 4 && st == GPUARENA_SUCCESS; i++)
        st = gpuarena_alloc(h->a, 64 * KIB, HOST, &small[i]);
    for (unsigned i = 0; i < 4 && st == GPUARENA_SUCCESS; i++)
        st = gpuarena_free(h->a, small[i], HOST);
    if (st == GPUARENA_SUCCESS)
        st = gpuarena_free(h->a, big, HOST); /* into the large slot */
    pthread_mutex_lock(&h->m);
    h->err = st;
    h->phase = 1;
    pthread_cond_broadcast(&h->cv);
    while (h->phase != 2)
        pthread_cond_wait(&h->cv, &h->m);
    pthread_mutex_unlock(&h->m);
    return NULL;
}

/* The arena's thread caches, and those of them that are this thread's. */
static void count_caches(gpuarena_t *a, unsigned *all, unsigned *mine)
{
    ga_bm_t *bm = a->bm;
    *all = *mine = 0;
    pthread_mutex_lock(&bm->tc_lock);
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next)
        (*all)++;
    pthread_mutex_unlock(&bm->tc_lock);
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next)
        *mine += atomic_load(&t->bm) == bm;
}

static int orphans_child(void *arg)
{
    gpuarena_t *a = arg;
    unsigned all, mine;
    count_caches(a, &all, &mine);
    if (all != mine)
        return E_CACHES;
    gpuarena_stats_t before, after;
    if (gpuarena_stats(a, &before) != GPUARENA_SUCCESS)
        return E_STATS;
    void *p;
    if (gpuarena_alloc(a, BIG, HOST, &p) != GPUARENA_SUCCESS)
        return E_ALLOC;
    memset(p, 1, 4096);
    if (gpuarena_stats(a, &after) != GPUARENA_SUCCESS)
        return E_STATS;
    /* The block the other thread parked serves it: nothing mapped, and no
     * out-of-memory retry needed to find it. */
    if (after.provider_maps != before.provider_maps || after.oom_retries != 0 ||
        after.reserved != before.reserved)
        return E_MAPPED;
    if (gpuarena_free(a, p, HOST) != GPUARENA_SUCCESS)
        return E_FREE;
    if (gpuarena_check(a) != GPUARENA_SUCCESS)
        return E_CHECK;
    if (gpuarena_stats(a, &after) != GPUARENA_SUCCESS || after.live_blocks != 0 ||
        after.in_use != 0)
        return E_LIVE;
    return OK;
}

/* Static: the holder thread must not point into a test that failed. */
static holder_t h = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

START_TEST(orphans)
{
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "thread_cache=true", &h.a),
                     GPUARENA_SUCCESS);
    /* This thread has a cache of the arena too: the child keeps it. */
    void *mine;
    ck_assert_int_eq(gpuarena_alloc(h.a, 4 * KIB, HOST, &mine), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(h.a, mine, HOST), GPUARENA_SUCCESS);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, hold, &h), 0);
    pthread_mutex_lock(&h.m);
    while (h.phase != 1)
        pthread_cond_wait(&h.cv, &h.m);
    pthread_mutex_unlock(&h.m);
    ck_assert_int_eq(h.err, GPUARENA_SUCCESS);
    unsigned all, own;
    count_caches(h.a, &all, &own);
    ck_assert_uint_eq(own, 1);
    ck_assert_uint_eq(all, 2);
    int status = ga_fork_run(orphans_child, h.a, 30);
    /* The parent's holder keeps its cache. */
    unsigned after;
    count_caches(h.a, &after, &own);
    pthread_mutex_lock(&h.m);
    h.phase = 2;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.m);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ga_require_child_ok(status, "orphans: the child");
    ck_assert_uint_eq(after, 2);
    ck_assert_int_eq(gpuarena_check(h.a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(h.a), GPUARENA_SUCCESS);
}
END_TEST

/* The lock of an arena biased to the forking thread while another thread
 * breaks the bias (lock.h): entered through its bias at the fork, the
 * lock word was held on the breaker's behalf, and the breaker does not
 * come along: the child's first allocation slept for ever (within a few
 * hundred forks on two cores).  Each round biases the lock to this thread
 * (a run of locked calls) while the other thread keeps taking it. */
static gpuarena_t *bias_arena;
static atomic_bool bias_stop;

static void *bias_breaker(void *arg)
{
    (void)arg;
    while (!atomic_load(&bias_stop)) {
        void *p;
        if (gpuarena_alloc(bias_arena, 64, HOST, &p) == GPUARENA_SUCCESS)
            (void)gpuarena_free(bias_arena, p, HOST);
    }
    return NULL;
}

static int bias_child(void *arg)
{
    (void)arg;
    void *p;
    if (gpuarena_alloc(bias_arena, 64, HOST, &p) != GPUARENA_SUCCESS)
        return E_ALLOC;
    return gpuarena_free(bias_arena, p, HOST) == GPUARENA_SUCCESS ? OK : E_FREE;
}

START_TEST(fork_while_the_bias_breaks)
{
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "thread_cache=false", &bias_arena),
                     GPUARENA_SUCCESS);
    atomic_store(&bias_stop, false);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, bias_breaker, NULL), 0);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0, rounds = 0;
    for (; rounds < 1000; rounds++) {
        for (int i = 0; i < 200; i++) {
            void *p;
            if (gpuarena_alloc(bias_arena, 64, HOST, &p) == GPUARENA_SUCCESS)
                (void)gpuarena_free(bias_arena, p, HOST);
        }
        status = ga_fork_run(bias_child, NULL, 3);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!ga_child_ok(status) || now.tv_sec - t0.tv_sec >= 3)
            break;
    }
    atomic_store(&bias_stop, true);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ga_require_child_ok(status, "fork_while_the_bias_breaks: a child");
    ck_assert_int_eq(gpuarena_destroy(bias_arena), GPUARENA_SUCCESS);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {churn, orphans, fork_while_the_bias_breaks};
    return ga_check_tests("fork", 600, tests, sizeof tests / sizeof tests[0]);
}
