/*
 * graphpool.h - the memory pools of CUDA graphs, for the PyTorch and CuPy
 * entry points (graphpool.c).
 */
#ifndef GA_GRAPHPOOL_H
#define GA_GRAPHPOOL_H

#include "deferred.h"
#include "gpuarena.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Pools that exist (begun and not yet given back): while 0, the hooks
 * ask nothing more. */
extern _Atomic int ga_graph_pools;

/* An allocation of SIZE bytes on STREAM of DEVICE that the default arena
 * refused with GPUARENA_ERR_STREAM_CAPTURE: from the pool that this
 * thread allocates to (gpuarena_torch_begin_allocate_to_pool), if it has
 * one on DEVICE.  Its status; GPUARENA_ERR_STREAM_CAPTURE, the refusal's
 * message kept, where the thread has none. */
gpuarena_status_t ga_graph_pool_alloc(int device, size_t size, void *stream, void **ptr);

/* An allocation of SIZE bytes on STREAM of DEVICE that the default arena
 * refused because STREAM is being captured, by a framework that has no
 * pools of its own (CuPy): from the capture's own pool, made at its
 * first allocation and given back once the driver has destroyed the
 * graph (and every executable graph made from it) and every block of it
 * is freed.  Its status; GPUARENA_ERR_STREAM_CAPTURE when the capture's
 * graph cannot be known (the refusal's message kept), or the status of
 * what failed (the driver has no user objects: GPUARENA_ERR_NOT_SUPPORTED). */
gpuarena_status_t ga_capture_pool_alloc(int device, size_t size, void *stream, void **ptr);

/* Pools to settle: capture pools whose graphs the driver destroyed, and
 * released pools whose destruction a capture put off (graphpool.c,
 * may_destroy), since the last collect: while 0, ga_graph_pool_collect
 * asks nothing more. */
extern _Atomic int ga_graph_pools_gone;
/* The rest of ga_graph_pool_collect (graphpool.c); STREAM as there. */
void ga_graph_pool_collect_slow(void *stream);

/* Destroy the pools given back whose blocks are all freed, where no
 * capture may be under way: the hooks call it first (the driver's thread
 * cannot), with the stream they were given (PyTorch's) or NULL; CuPy's
 * ask for CuPy's current stream (GA_GRAPH_POOL_CUPY_STREAM).  One load
 * while there are none. */
#define GA_GRAPH_POOL_CUPY_STREAM ((void *)-1)
static inline void ga_graph_pool_collect(void *stream)
{
    if (__builtin_expect(atomic_load_explicit(&ga_graph_pools_gone, memory_order_relaxed) != 0, 0))
        ga_graph_pool_collect_slow(stream);
}

/* What a hook that is given a stream does first: the deferred frees
 * whose capture has ended, then the pools left to settle, among them
 * those a free just made emptied, with STREAM as ga_graph_pool_collect
 * takes it.  The retry only marks them: it knows no stream, and settled
 * with none a pool was destroyed during the capture of the hook's own
 * stream. */
static inline void ga_deferred_retry_collect(void *stream)
{
    ga_deferred_retry();
    ga_graph_pool_collect(stream);
}

/* Free PTR on STREAM if it is a block of a graph's pool: true when it
 * was one (whatever the free's status, left in *ST), false when no pool
 * holds it. */
bool ga_graph_pool_free(void *ptr, void *stream, gpuarena_status_t *st);

/* Destroy the released pools none of whose blocks is live any more, if
 * no capture may be under way (STREAM: the hook's, as for collect): a
 * deferred free (deferred.c) may have freed the last one, a capture may
 * have ended. */
void ga_graph_pool_settle_all(void *stream);

/* The same for a call given no stream (gpuarena_trim, empty_cache, a
 * pool's begin or release): the pools are settled only where its own
 * retry made a free, which may have emptied one (else it stayed until
 * the next hook that allocates or frees, through a whole capture after a
 * begin).  Not every pool put off before: one put off during another
 * stream's capture, which a call with no stream cannot see, was
 * destroyed under that capture. */
static inline void ga_deferred_retry_no_stream(void)
{
    if (ga_deferred_retry())
        ga_graph_pool_settle_all(NULL);
}

/* The arena of the graph pool that holds PTR, or NULL. */
gpuarena_t *ga_graph_pool_arena_of(const void *ptr);

/* FN(WAIT, ARG) with no PyTorch pool begun meanwhile (a begin waits for
 * it, as PyTorch's own begin waits for its empty_cache): WAIT is whether
 * it may wait for the whole device, false while a pool is begun (this
 * process is capturing a graph, or about to) or a CuPy capture with a
 * pool may be under way.  Checked and used under one lock: a capture
 * begun by another thread between the check and FN's wait was
 * invalidated by it. */
void ga_graph_pool_hold_captures(void (*fn)(bool wait, void *arg), void *arg);

/* fork.c: the pools' lock held across fork(), outermost. */
void ga_graph_pool_fork_lock(void);
void ga_graph_pool_fork_unlock(void);

#endif /* GA_GRAPHPOOL_H */
