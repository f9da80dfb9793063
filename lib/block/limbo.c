/*
 * limbo.c - the pools of streams that may be gone, and other blocks safe
 * for no stream until the device has been waited for.
 *
 * A stream's pool holds the blocks freed on that stream until a sweep, an
 * event recorded at a later free on the same stream, shows the GPU past
 * them (sweep.c).  A stream that is destroyed frees nothing more, so its
 * pool keeps its blocks, and its record, for good: gpuarena never keeps a
 * stream handle past the call that names it, so it cannot ask the stream
 * later, nor learn that it was destroyed (CUDA stream ids are never
 * reused).  A program that makes a new stream for each piece of work
 * (torch.cuda.Stream() in a loop) then piled up one pool per stream,
 * about 17 KiB each, and every walk of the pools (each miss asks them
 * all for a sweep) grew with them.  (A thread's caches are bounded
 * likewise: TC_PER_ARENA, tcache.h.)
 *
 * So the manager keeps at most GA_POOLS_MAX stream pools.  When a new
 * stream needs one beyond that, the pool whose stream freed or allocated
 * longest ago is retired: its free blocks move to the limbo pool and its
 * record goes.  Blocks in limbo are safe for no stream, not even their
 * own (which pool they came from is forgotten), until the whole device
 * has passed their frees; only what the pool's stream used goes there,
 * the free memory of ANY that the pool took in going back to ANY
 * (ga_block_used, sweep.c's part_out).  ga_sweep_drain, at trim and on the
 * out-of-memory path, moves them to ANY after its wait.  Until then they
 * count as cached and merge only with each other, never taking in a
 * neighbour of ANY, which every stream may use.
 *
 * Limbo also takes the blocks whose free could not watch every use: an
 * event refused for a recorded stream or for host-visible memory, no
 * record for the free's pool, or uses that record_stream had no memory
 * to note (GA_USES_UNKNOWN).  Waiting for the device there instead would
 * block the host on a free and, in the driver's global capture mode,
 * break another thread's capture.
 *
 * The bound is set well above the streams a program uses in turn (a
 * PyTorch process has a few dozen per device): a pool retired while its
 * stream lives only costs that stream the reuse of its blocks until the
 * next drain.
 */
#include "block/internal.h"

#include <stdint.h>
#include <stdlib.h>

/* The stream pool used longest ago (gpuarena(7)).  Not one with no sweep
 * out first, though its blocks would have gone to ANY with the sweep and
 * wait for a drain in limbo: where every older pool had a sweep out, that
 * retired the pool of the stream used last, a busy stream losing its
 * cache to each new stream. */
static ga_pool_t *oldest_pool(ga_bm_t *bm, unsigned *at)
{
    ga_pool_t *best = NULL;
    for (unsigned i = 0; i < bm->npools; i++) {
        ga_pool_t *p = bm->pools[i];
        if (!best || p->used < best->used) {
            best = p;
            *at = i;
        }
    }
    return best;
}

void ga_limbo_make_room(ga_bm_t *bm)
{
    if (bm->npools < GA_POOLS_MAX)
        return;
    ga_sweep_poll(bm, false); /* completed sweeps release their blocks to ANY first */
    unsigned at = 0;
    ga_pool_t *p = oldest_pool(bm, &at);
    /* Every pool may have a sweep out (each was asked for one, and its
     * stream freed again before the GPU got there): the oldest goes all
     * the same, or the pools would pass GA_POOLS_MAX.  Its blocks go to
     * limbo, which no stream may use before a drain, so its sweep is of
     * no more use: the event goes back to the provider (a GPU's keeps it
     * for a later event: the driver lets an event be recorded again with
     * its last record still ahead of the GPU, and a wait on it already
     * queued keeps what that record marked). */
    if (p->sweep) {
        bm->prov->ops->event_destroy(bm->prov, p->sweep);
        p->sweep = NULL;
    }
    ga_pool_move(bm, p, &bm->limbo, UINT64_MAX);
    /* Blocks still waiting for the events of their recorded streams were
     * to go to P once those completed: to limbo instead. */
    for (ga_waiter_t *w = bm->waiters; w; w = w->next)
        if (w->block->pool == p)
            w->block->pool = &bm->limbo;
    bm->pools[at] = bm->pools[--bm->npools];
    if (bm->last_pool == p)
        bm->last_pool = NULL;
    free(p);
    ga_sweep_wanted_update(bm);
}

void ga_limbo_release(ga_bm_t *bm)
{
    ga_pool_move(bm, &bm->limbo, &bm->any, UINT64_MAX);
}
