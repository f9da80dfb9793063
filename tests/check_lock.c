/*
 * check_lock.c - the block manager's lock (lib/block/lock.h): mutual
 * exclusion while it is biased to one thread, taken over from it, and
 * biased again, and the states its word goes through.
 *
 * The exclusion test runs threads that take the lock in bursts, some
 * longer than the run that biases it, so that it is biased, broken and
 * biased again many times; inside, each checks that no one else is inside
 * (a plain flag, set and cleared) and adds to plain counters.  A lost
 * exclusion shows as a flag found set or as counts that do not add up.
 * GA_TEST_OPS scales it (acquisitions per thread, default 400000).
 */
#include "block/lock.h"
#include "checkrun.h"
#include "testrand.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

enum { FREE = 0, HELD = 1, BIASED = 3 };

static ga_lock_t lk;
static volatile int inside; /* plain: the lock is all that guards it */
static uint64_t total;      /* plain: likewise */
static unsigned long overlaps;
static _Atomic unsigned long biased_seen;

static unsigned long ops_per_thread(void)
{
    const char *v = getenv("GA_TEST_OPS");
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? (unsigned long)n : 400000;
}

/* Take and release the lock far more times in a row than biasing needs. */
static void take_many(void)
{
    for (int i = 0; i < 1000; i++) {
        ga_lock(&lk);
        ga_unlock(&lk);
    }
}

START_TEST(single_thread_biases_and_unlocks)
{
    ga_lock_init(&lk);
    for (int i = 0; i < 1000; i++) {
        ga_lock(&lk);
        ck_assert_int_ne(atomic_load(&lk.word), FREE);
        ga_unlock(&lk);
    }
    if (!ga_asymmetric_ready()) {
        /* No membarrier: never biased, released every time. */
        ck_assert_int_eq(atomic_load(&lk.word), FREE);
        ck_assert_ptr_null(atomic_load(&lk.bias));
        return;
    }
    /* Biased to this thread: the word stays held on its behalf, and the
     * thread goes in and out by its ACTIVE mark. */
    ck_assert_int_eq(atomic_load(&lk.word), BIASED);
    ck_assert_ptr_nonnull(ga_lock_cell);
    ck_assert_ptr_eq(atomic_load(&lk.bias), ga_lock_cell);
    ga_lock(&lk);
    ck_assert_ptr_eq(atomic_load(&ga_lock_cell->active), &lk);
    ga_unlock(&lk);
    ck_assert_ptr_null(atomic_load(&ga_lock_cell->active));
    ck_assert_int_eq(atomic_load(&lk.word), BIASED);
}
END_TEST

static void *take_over(void *arg)
{
    (void)arg;
    ga_lock(&lk);
    int w = atomic_load(&lk.word);
    void *b = atomic_load(&lk.bias);
    ga_unlock(&lk);
    return (void *)(uintptr_t)(w == HELD && b == NULL);
}

START_TEST(another_thread_breaks_the_bias)
{
    ga_lock_init(&lk);
    take_many();
    if (atomic_load(&lk.word) != BIASED)
        return; /* no membarrier: the test above checked that */
    pthread_t th;
    void *ok = NULL;
    ck_assert_int_eq(pthread_create(&th, NULL, take_over, NULL), 0);
    ck_assert_int_eq(pthread_join(th, &ok), 0);
    /* The other thread held it as a plain lock, and released it. */
    ck_assert_ptr_nonnull(ok);
    ck_assert_int_eq(atomic_load(&lk.word), FREE);
    ck_assert_ptr_null(atomic_load(&lk.bias));
    /* This thread takes it again the plain way, then is biased anew. */
    ga_lock(&lk);
    ck_assert_ptr_null(atomic_load(&ga_lock_cell->active));
    ga_unlock(&lk);
    take_many();
    ck_assert_int_eq(atomic_load(&lk.word), BIASED);
}
END_TEST

static _Atomic int c_inside;

static void *enter_and_mark(void *arg)
{
    (void)arg;
    ga_lock(&lk);
    atomic_store(&c_inside, 1);
    int found = inside;
    ga_unlock(&lk);
    return (void *)(uintptr_t)(found == 0);
}

START_TEST(breaking_thread_waits_for_the_biased_one)
{
    ga_lock_init(&lk);
    take_many();
    if (atomic_load(&lk.word) != BIASED)
        return; /* no membarrier: nothing to break */
    for (int round = 0; round < 5; round++) {
        /* This thread is inside by its bias when the other one comes. */
        ga_lock(&lk);
        inside = 1;
        atomic_store(&c_inside, 0);
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, enter_and_mark, NULL), 0);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        ck_assert_msg(atomic_load(&c_inside) == 0,
                      "round %d: another thread got in while the biased one was inside", round);
        inside = 0;
        ga_unlock(&lk);
        void *ok = NULL;
        ck_assert_int_eq(pthread_join(th, &ok), 0);
        ck_assert_int_eq(atomic_load(&c_inside), 1);
        ck_assert_ptr_nonnull(ok);
        /* Biased to this thread again for the next round. */
        take_many();
        ck_assert_int_eq(atomic_load(&lk.word), BIASED);
    }
}
END_TEST

typedef struct worker {
    pthread_t th;
    int id;
    unsigned long ops;
    uint64_t rng;
    uint64_t added;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    unsigned long done = 0;
    while (done < w->ops) {
        /* Bursts of 1 to 255 acquisitions: those past the biasing run
         * bias the lock to this thread, the next thread breaks it. */
        unsigned burst = (unsigned)(ga_test_rand(&w->rng) % 255) + 1;
        for (unsigned i = 0; i < burst && done < w->ops; i++, done++) {
            ga_lock(&lk);
            if (inside)
                overlaps++;
            inside = w->id;
            if (atomic_load_explicit(&lk.word, memory_order_relaxed) == BIASED)
                atomic_fetch_add_explicit(&biased_seen, 1, memory_order_relaxed);
            /* Stay a while, so that a thread let in early would meet
             * this one here. */
            for (int k = 0; k < 64; k++)
                total += inside == w->id ? 0 : 1000000;
            total += 3;
            w->added += 3;
            if (inside != w->id)
                overlaps++;
            inside = 0;
            ga_unlock(&lk);
        }
        if (ga_test_rand(&w->rng) % 4 == 0)
            sched_yield();
    }
    return NULL;
}

START_TEST(exclusion_while_biased_and_broken)
{
    ga_lock_init(&lk);
    total = 0;
    overlaps = 0;
    inside = 0;
    atomic_store(&biased_seen, 0);
    enum { N = 4 };
    worker_t w[N] = {{0}};
    for (int i = 0; i < N; i++) {
        w[i].id = i + 1;
        w[i].ops = ops_per_thread();
        w[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        ck_assert_int_eq(pthread_create(&w[i].th, NULL, work, &w[i]), 0);
    }
    uint64_t sum = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(pthread_join(w[i].th, NULL), 0);
        sum += w[i].added;
    }
    ck_assert_uint_eq(overlaps, 0);
    ck_assert_uint_eq(total, sum);
    ck_assert_uint_eq(total, 3ull * N * ops_per_thread());
    /* The lock was biased while held at times (where membarrier is
     * there), so the exclusion above covered the biased path too. */
    unsigned long seen = atomic_load(&biased_seen);
    if (ga_asymmetric_ready())
        ck_assert_uint_gt(seen, 0);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {single_thread_biases_and_unlocks, another_thread_breaks_the_bias,
                            breaking_thread_waits_for_the_biased_one,
                            exclusion_while_biased_and_broken};
    return ga_check_tests("lock", 120, tests, sizeof tests / sizeof tests[0]);
}
