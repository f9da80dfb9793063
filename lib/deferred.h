/*
 * deferred.h - frees that a framework's free hook could not make yet
 * (deferred.c).
 */
#ifndef GA_DEFERRED_H
#define GA_DEFERRED_H

#include "gpuarena.h"

#include <stdatomic.h>
#include <stdbool.h>

/* The newest deferred free, NULL when none waits: read by every hook. */
extern _Atomic(void *) ga_deferred_head;

/* Keep the free of PTR to A on STREAM, which gpuarena_free has just
 * refused with GPUARENA_ERR_STREAM_CAPTURE in FN, a hook that returns
 * nothing (gpuarena_torch_free, gpuarena_cupy_free), for a later
 * ga_deferred_retry to make. */
void ga_deferred_keep(gpuarena_t *a, void *ptr, gpuarena_stream_t stream, const char *fn);

/* Whether the free of PTR to A is kept already (a hook's free of it is a
 * double free, said so with GPUARENA_ERR_DOUBLE_FREE, FN naming the
 * hook): to be asked before gpuarena_free, which takes the block, still
 * live to the arena, once the capture that refused the first free is
 * over; the kept record then freed the block's next owner.  One load
 * while nothing is kept. */
bool ga_deferred_double_free(const gpuarena_t *a, const void *ptr, const char *fn);

/* Make the deferred frees whose capture has ended (deferred.c); whether
 * it made one. */
bool ga_deferred_retry_slow(void);

/* gpuarena_destroy: the retry, and a wait for any retry that another
 * thread is making (deferred.c says why). */
void ga_deferred_settle(void);

/* fork.c: the retry's mutex held across fork(), released in both
 * processes after it. */
void ga_deferred_fork_lock(void);
void ga_deferred_fork_unlock(void);

/* Every hook and gpuarena_trim call this first: one load while nothing
 * waits. */
static inline bool ga_deferred_retry(void)
{
    if (__builtin_expect(atomic_load_explicit(&ga_deferred_head, memory_order_relaxed) != NULL, 0))
        return ga_deferred_retry_slow();
    return false;
}

#endif /* GA_DEFERRED_H */
