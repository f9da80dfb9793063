/*
 * lock.c - the contended halves of the block manager's lock (lock.h).
 */
#include "block/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Spins before sleeping: a locked allocation or free holds the lock for
 * a few hundred nanoseconds, less than a trip through the kernel. */
#define SPINS 128

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void ga_lock_contended(ga_lock_t *l)
{
    for (int i = 0; i < SPINS; i++) {
        cpu_relax();
        int free_word = 0;
        if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->word, &free_word, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
    }
    /* Mark the word "held, sleepers" whenever this thread takes it from
     * here: it cannot tell whether others still sleep, so its unlock
     * wakes one to find out. */
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void ga_lock_wake(ga_lock_t *l)
{
    syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
