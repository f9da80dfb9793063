/*
 * lock.h - the block manager's lock: a mutex whose uncontended lock and
 * unlock are one atomic instruction each, and none at all for the thread
 * the lock is biased to.
 *
 * Every locked allocation and free takes it.  pthread_mutex_lock and
 * pthread_mutex_unlock cost two calls into libc and its checks of the
 * mutex's type, about 80 instructions a pair, several times the atomic
 * operations they wrap; on a random mix of sizes, where most operations
 * take the lock, that was a tenth of the manager's time.
 *
 * The word is 0 (free), 1 (held) or 2 (held, and a thread may sleep on
 * it): a thread that finds it held spins a little, then sleeps in
 * futex(2) after setting it to 2, and an unlock that finds 2 wakes one
 * sleeper (the three-state futex mutex).  Not recursive; not shared
 * between processes.
 *
 * Biased: a program that allocates from one thread (the usual PyTorch or
 * MPI rank) still paid a locked compare-and-swap and a locked exchange
 * per locked operation: each waits for every store before it to reach
 * the cache, about a tenth of a random free + alloc on an H200's host.
 * So once one thread has taken the lock BIAS_AFTER times in a row (lock.c)
 * with no other thread in between, its unlock leaves the word at 3, held
 * on that thread's behalf, and names the thread's cell in BIAS.  That
 * thread then enters by writing the lock into its cell's ACTIVE and
 * reading BIAS again (plain stores and loads), and leaves by clearing
 * ACTIVE.  Another thread finds the word at 3, takes it over (3 -> 1),
 * clears BIAS, makes every thread of the process pass a memory barrier
 * (membarrier(2), as the thread caches do: tcache.c) and waits until the
 * biased thread's cell no longer names the lock: after the barrier,
 * either it saw that, or the biased thread sees BIAS cleared and takes
 * the word like any other.  The handover costs a few microseconds, paid
 * by the thread that breaks the bias, once per run of a single thread.
 * Without membarrier the lock is never biased.
 *
 * Each thread's mark is in its own cell, never in the lock: a thread
 * held up between its two reads of BIAS, while the lock was taken from
 * it and biased to another, then writes only its own cell, not the mark
 * the other's exclusion rests on.  Cells outlive their threads (lock.c
 * keeps them for the next thread), so a breaker never reads freed memory.
 * A thread inside one biased lock takes any other the plain way: its
 * cell names one lock at a time.
 */
#ifndef GA_BLOCK_LOCK_H
#define GA_BLOCK_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* A thread's mark, kept from its first biasing on (lock.c). */
typedef struct ga_lock_cell {
    void *_Atomic active;      /* the biased lock this thread is inside, or NULL */
    struct ga_lock_cell *next; /* on the list of spare cells (lock.c) */
    struct ga_lock_cell *all;  /* on the list of every cell (lock.c) */
} ga_lock_cell_t;

typedef struct ga_lock {
    _Atomic int word;
    ga_lock_cell_t *_Atomic bias; /* the cell of the thread it is biased to */
    /* Under the lock: who took it last, and how many times in a row. */
    void *last;
    unsigned streak;
} ga_lock_t;

/* This thread's cell, NULL until the lock is first biased to it. */
extern _Thread_local ga_lock_cell_t *ga_lock_cell __attribute__((tls_model("initial-exec")));

/* lock.c: the contended, releasing and biasing halves. */
void ga_lock_contended(ga_lock_t *l);
void ga_unlock_word(ga_lock_t *l);

/* Whether membarrier(2) with private expedited barriers is there (it is
 * registered on the first call), and such a barrier: the thread caches
 * and the biased lock make their owners' fast paths free of locked
 * instructions with it. */
bool ga_asymmetric_ready(void);
void ga_asymmetric_barrier(void);
/* fork(2) (lib/fork.c): the lists of cells are held across it, so that
 * the child finds them whole; in the child, the cells of the threads that
 * did not come along are spare (the fork handlers took every lock from
 * whichever thread it was biased to, so no lock names them). */
void ga_cells_fork_lock(void);
void ga_cells_fork_parent(void);
void ga_cells_fork_child(void);

/* What ga_asymmetric_ready answered, for fast paths that cannot afford
 * its pthread_once: false until its first call. */
extern _Atomic bool ga_asymmetric_ok;

static inline void ga_lock_init(ga_lock_t *l)
{
    atomic_init(&l->word, 0);
    atomic_init(&l->bias, NULL);
    l->last = NULL;
    l->streak = 0;
}

static inline void ga_lock(ga_lock_t *l)
{
    ga_lock_cell_t *c = ga_lock_cell;
    if (c && atomic_load_explicit(&l->bias, memory_order_relaxed) == c &&
        atomic_load_explicit(&c->active, memory_order_relaxed) == NULL) {
        atomic_store_explicit(&c->active, l, memory_order_relaxed);
        /* No hardware fence: the breaking thread's membarrier orders
         * this store before the load below (see the top). */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&l->bias, memory_order_acquire) == c)
            return;
        atomic_store_explicit(&c->active, NULL, memory_order_release);
    }
    int free_word = 0;
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                             &l->word, &free_word, 1, memory_order_acquire, memory_order_relaxed),
                         1))
        return;
    ga_lock_contended(l);
}

/* The lock taken the plain way, through its word, never by this
 * thread's bias (which it breaks, as another thread would): for fork's
 * handlers, so that the forking thread itself holds the word.  Entered
 * through the bias while another thread was breaking it (the word then
 * held on that thread's behalf, waiting for this one to leave), the
 * child found the word held by a thread that did not come along, and
 * its first locked call slept for ever. */
static inline void ga_lock_plain(ga_lock_t *l)
{
    int free_word = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        ga_lock_contended(l);
}

static inline void ga_unlock(ga_lock_t *l)
{
    ga_lock_cell_t *c = ga_lock_cell;
    if (c && atomic_load_explicit(&c->active, memory_order_relaxed) == l) {
        atomic_store_explicit(&c->active, NULL, memory_order_release);
        return;
    }
    ga_unlock_word(l);
}

#endif /* GA_BLOCK_LOCK_H */
