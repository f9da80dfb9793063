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
 * its updates are atomic and its peak is raised by compare-and-swap.
 */
#ifndef GA_BLOCK_TOTAL_H
#define GA_BLOCK_TOTAL_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct ga_total {
    _Atomic uint64_t reserved; /* bytes the managers hold from their providers */
    _Atomic uint64_t peak;     /* the largest value of reserved */
    _Atomic uint64_t arenas;   /* managers counted in it (totals.c) */
} ga_total_t;

static inline void ga_total_add(ga_total_t *t, uint64_t bytes)
{
    uint64_t v = atomic_fetch_add_explicit(&t->reserved, bytes, memory_order_relaxed) + bytes;
    uint64_t p = atomic_load_explicit(&t->peak, memory_order_relaxed);
    while (v > p && !atomic_compare_exchange_weak_explicit(&t->peak, &p, v, memory_order_relaxed,
                                                           memory_order_relaxed))
        ;
}

static inline void ga_total_sub(ga_total_t *t, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&t->reserved, bytes, memory_order_relaxed);
}

/* The peak starts again from the bytes reserved now. */
static inline void ga_total_reset_peak(ga_total_t *t)
{
    atomic_store_explicit(&t->peak, atomic_load_explicit(&t->reserved, memory_order_relaxed),
                          memory_order_relaxed);
}

#endif /* GA_BLOCK_TOTAL_H */
