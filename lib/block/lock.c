/*
 * lock.c - the contended halves of the block manager's lock, its biasing
 * to one thread, and the process-wide barrier both use (lock.h).
 */
#include "block/lock.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Thread_local ga_lock_cell_t *ga_lock_cell __attribute__((tls_model("initial-exec")));

/* Spare cells, for the next threads: those of exited threads, and in a
 * forked child those of the threads that did not come along.  A breaker
 * may still read a cell after its thread is gone, so none is ever
 * freed. */
static pthread_mutex_t cells_lock = PTHREAD_MUTEX_INITIALIZER;
static ga_lock_cell_t *spare_cells;
static ga_lock_cell_t *all_cells; /* for the child of a fork */
static pthread_key_t cell_key;
static pthread_once_t cell_once = PTHREAD_ONCE_INIT;

static void cell_release(void *arg)
{
    ga_lock_cell_t *c = arg;
    /* Run by the exiting thread: a destructor that runs after this one
     * and takes a lock must not use a cell another thread may get. */
    if (ga_lock_cell == c)
        ga_lock_cell = NULL;
    pthread_mutex_lock(&cells_lock);
    c->next = spare_cells;
    spare_cells = c;
    pthread_mutex_unlock(&cells_lock);
}

static void cell_key_make(void)
{
    (void)pthread_key_create(&cell_key, cell_release);
}

/* This thread's cell, made on first use; NULL without memory. */
static ga_lock_cell_t *cell_get(void)
{
    if (ga_lock_cell)
        return ga_lock_cell;
    pthread_once(&cell_once, cell_key_make);
    /* A new cell is made and linked under the lock that fork's handlers
     * take: a fork in between would leave the child a cell on no list. */
    pthread_mutex_lock(&cells_lock);
    ga_lock_cell_t *c = spare_cells;
    if (c) {
        spare_cells = c->next;
    } else if ((c = calloc(1, sizeof *c))) {
        c->all = all_cells;
        all_cells = c;
    }
    pthread_mutex_unlock(&cells_lock);
    if (!c)
        return NULL;
    atomic_store_explicit(&c->active, NULL, memory_order_relaxed);
    if (pthread_setspecific(cell_key, c) != 0) {
        cell_release(c);
        return NULL;
    }
    ga_lock_cell = c;
    return c;
}

void ga_cells_fork_lock(void)
{
    pthread_mutex_lock(&cells_lock);
}

void ga_cells_fork_parent(void)
{
    pthread_mutex_unlock(&cells_lock);
}

void ga_cells_fork_child(void)
{
    spare_cells = NULL;
    for (ga_lock_cell_t *c = all_cells; c; c = c->all) {
        if (c == ga_lock_cell)
            continue;
        atomic_store_explicit(&c->active, NULL, memory_order_relaxed);
        c->next = spare_cells;
        spare_cells = c;
    }
    pthread_mutex_unlock(&cells_lock);
}

/* Spins before sleeping: a locked allocation or free holds the lock for
 * a few hundred nanoseconds, less than a trip through the kernel. */
#define SPINS 128

/* Acquisitions in a row by one thread before the lock is biased to it:
 * enough that two threads taking turns never bias it (each handover
 * would cost a barrier), few enough that a single-threaded program is
 * biased within its first allocations. */
#define BIAS_AFTER 64

/* The word's values. */
enum { FREE = 0, HELD = 1, SLEEPERS = 2, BIASED = 3 };

static pthread_once_t asym_once = PTHREAD_ONCE_INIT;
_Atomic bool ga_asymmetric_ok;

static void asym_init(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    atomic_store_explicit(&ga_asymmetric_ok, ok, memory_order_relaxed);
}

bool ga_asymmetric_ready(void)
{
    pthread_once(&asym_once, asym_init);
    return atomic_load_explicit(&ga_asymmetric_ok, memory_order_relaxed);
}

void ga_asymmetric_barrier(void)
{
    /* EPERM: not registered in this process (a child forked after the
     * registration, on a kernel that does not carry it over): register
     * and try again; the query said the command is there. */
    for (int tries = 0; tries < 4; tries++) {
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
            return;
        if (errno == EPERM)
            (void)syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
    }
    /* Never seen.  The barrier only has to outlast the other threads'
     * store buffers, which drain in far less than this. */
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Take the lock from the thread it is biased to: the word goes from
 * BIASED to TO (HELD, or SLEEPERS from the sleeping loop), and this thread
 * holds the lock once the biased one is out (see lock.h).  False when the
 * word was no longer BIASED. */
static bool take_biased(ga_lock_t *l, int to)
{
    int w = BIASED;
    if (!atomic_compare_exchange_weak_explicit(&l->word, &w, to, memory_order_acquire,
                                               memory_order_relaxed))
        return false;
    ga_lock_cell_t *owner = atomic_load_explicit(&l->bias, memory_order_relaxed);
    atomic_store_explicit(&l->bias, NULL, memory_order_relaxed);
    ga_asymmetric_barrier();
    while (owner && atomic_load_explicit(&owner->active, memory_order_acquire) == l)
        sched_yield();
    return true;
}

void ga_lock_contended(ga_lock_t *l)
{
    for (int i = 0; i < SPINS; i++) {
        int w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == BIASED) {
            if (take_biased(l, HELD))
                return;
            continue;
        }
        if (w == FREE && atomic_compare_exchange_weak_explicit(
                             &l->word, &w, HELD, memory_order_acquire, memory_order_relaxed))
            return;
        cpu_relax();
    }
    /* Mark the word "held, sleepers" whenever this thread takes it from
     * here: it cannot tell whether others still sleep, so its unlock
     * wakes one to find out.  A compare-and-swap, not an exchange: a
     * BIASED word must be seen, not overwritten. */
    for (;;) {
        int w = atomic_load_explicit(&l->word, memory_order_relaxed);
        if (w == BIASED) {
            if (take_biased(l, SLEEPERS))
                return;
        } else if (w == FREE) {
            if (atomic_compare_exchange_weak_explicit(&l->word, &w, SLEEPERS, memory_order_acquire,
                                                      memory_order_relaxed))
                return;
        } else if (w == SLEEPERS || atomic_compare_exchange_weak_explicit(&l->word, &w, SLEEPERS,
                                                                          memory_order_relaxed,
                                                                          memory_order_relaxed)) {
            syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, SLEEPERS, NULL, NULL, 0);
        }
    }
}

void ga_unlock_word(ga_lock_t *l)
{
    /* Any per-thread address tells threads apart here; the cell's
     * pointer would do once made, but is made only at the first bias. */
    void *me = (void *)&ga_lock_cell;
    if (l->last == me) {
        l->streak++;
    } else {
        l->last = me;
        l->streak = 1;
    }
    ga_lock_cell_t *c;
    if (l->streak >= BIAS_AFTER) {
        /* One try per run: where it cannot be biased (no membarrier, no
         * memory for a cell) the next try is BIAS_AFTER unlocks away, not
         * at every unlock. */
        l->streak = 0;
        if (ga_asymmetric_ready() && (c = cell_get())) {
            /* BIAS first: a thread that sees BIASED finds whose cell to
             * wait on.  A sleeper (SLEEPERS) keeps the lock unbiased, and
             * is woken. */
            atomic_store_explicit(&l->bias, c, memory_order_relaxed);
            int w = HELD;
            if (atomic_compare_exchange_strong_explicit(&l->word, &w, BIASED, memory_order_release,
                                                        memory_order_relaxed))
                return;
            atomic_store_explicit(&l->bias, NULL, memory_order_relaxed);
        }
    }
    if (atomic_exchange_explicit(&l->word, FREE, memory_order_release) == SLEEPERS)
        syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
