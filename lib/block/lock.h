/*
 * lock.h - the block manager's lock: a mutex whose uncontended lock and
 * unlock are one atomic instruction each, inline.
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
 */
#ifndef GA_BLOCK_LOCK_H
#define GA_BLOCK_LOCK_H

#include <stdatomic.h>

typedef struct ga_lock {
    _Atomic int word;
} ga_lock_t;

/* lock.c: the contended halves. */
void ga_lock_contended(ga_lock_t *l);
void ga_lock_wake(ga_lock_t *l);

static inline void ga_lock_init(ga_lock_t *l)
{
    atomic_init(&l->word, 0);
}

static inline void ga_lock(ga_lock_t *l)
{
    int free_word = 0;
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                             &l->word, &free_word, 1, memory_order_acquire, memory_order_relaxed),
                         1))
        return;
    ga_lock_contended(l);
}

static inline void ga_unlock(ga_lock_t *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2, 0))
        ga_lock_wake(l);
}

#endif /* GA_BLOCK_LOCK_H */
