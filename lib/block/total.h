/*
 * total.h - the bytes that several block managers reserve together, and
 * the peak of that sum (gpuarena_stats_total(3): one per kind and device,
 * kept in totals.c).
 *
 * Why a shared counter and not a sum at the time of asking: a program
 * with several arenas on one GPU (PyTorch's graph pools and CuPy's
 * capture pools are arenas of their own) reaches each arena's peak at a
 * different time, so the sum of the peaks overstates what the device held
 * at once, and no later reading can recover the peak of the sum.  It is
 * the figure a framework reports as the device's reserved memory
 * (PyTorch's max_memory_reserved).
 *
 * A manager changes it only where it maps or unmaps memory (segment.c),
 * and once more when it is destroyed: never on the path of a cached
 * block.  Several managers, each under its own lock, change one total, so
 * its counts are atomic, and an addition and the peak it raises are one
 * step with respect to a reset of the peak (a spin lock of the total's
 * own, taken only there: mapping is never fast).  Without it, a reset
 * that read the bytes before an addition stored that older value over
 * the peak the addition had raised, and once the memory was unmapped the
 * peak was lost for good.
 */
#ifndef GA_BLOCK_TOTAL_H
#define GA_BLOCK_TOTAL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct ga_total {
    _Atomic uint64_t reserved; /* bytes the managers hold from their providers */
    _Atomic uint64_t peak;     /* the largest value of reserved */
    _Atomic uint64_t arenas;   /* managers counted in it (totals.c) */
    _Atomic bool had;          /* a manager was ever counted in it: listed for good */
    _Atomic int busy;          /* an addition or a reset of the peak under way */
} ga_total_t;

static inline void ga_total_enter(ga_total_t *t)
{
    int idle = 0;
    while (!atomic_compare_exchange_weak_explicit(&t->busy, &idle, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
        idle = 0;
        sched_yield();
    }
}

static inline void ga_total_leave(ga_total_t *t)
{
    atomic_store_explicit(&t->busy, 0, memory_order_release);
}

static inline void ga_total_add(ga_total_t *t, uint64_t bytes)
{
    ga_total_enter(t);
    uint64_t v = atomic_fetch_add_explicit(&t->reserved, bytes, memory_order_relaxed) + bytes;
    if (v > atomic_load_explicit(&t->peak, memory_order_relaxed))
        atomic_store_explicit(&t->peak, v, memory_order_relaxed);
    ga_total_leave(t);
}

static inline void ga_total_sub(ga_total_t *t, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&t->reserved, bytes, memory_order_relaxed);
}

/* The peak starts again from the bytes reserved now.  A subtraction may
 * run beside it: it lowers the bytes only, which leaves the peak above
 * them, as it should be. */
static inline void ga_total_reset_peak(ga_total_t *t)
{
    ga_total_enter(t);
    atomic_store_explicit(&t->peak, atomic_load_explicit(&t->reserved, memory_order_relaxed),
                          memory_order_relaxed);
    ga_total_leave(t);
}

#endif /* GA_BLOCK_TOTAL_H */
