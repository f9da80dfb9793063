/*
 * block.h - the stream-ordered block manager shared by every arena kind.
 *
 * It owns segments taken from a provider, carves them into blocks, splits
 * and merges them, finds a fit, and decides when a freed block may be
 * reused by which stream.  It knows memory only through provider.h and
 * includes no CUDA header.  See block.c for the data structures.
 */
#ifndef GA_BLOCK_H
#define GA_BLOCK_H

#include "config/settings.h"
#include "gpuarena.h"
#include "providers/provider.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ga_bm ga_bm_t;
typedef struct ga_total ga_total_t;

/* A stream as the block manager sees it: the handle to pass back to the
 * provider, and the provider's stable id for it. */
typedef struct ga_stream {
    gpuarena_stream_t handle;
    uint64_t id;
} ga_stream_t;

/* Create a block manager over PROV (which it does not own) with settings S
 * (copied). */
gpuarena_status_t ga_bm_create(ga_provider_t *prov, const ga_settings_t *s, ga_bm_t **out);

/* Count BM's reserved bytes in TOTAL (total.h) from now on, until
 * ga_bm_destroy takes what BM still holds out of it; before BM's first
 * allocation.  A manager whose provider hands out blocks itself (the
 * driver's pool) reserves nothing of its own and is left out. */
void ga_bm_set_total(ga_bm_t *bm, ga_total_t *total);

/* Give every segment back to the provider and free the manager.  Live
 * blocks are lost; the caller checks for them first when it must.  The
 * manager and every record are freed whatever happens; when the provider
 * fails to take a segment back (unmap, decommit or release), its memory
 * stays mapped, and the status of the first such failure is returned with
 * a message that counts the segments and bytes left (gpuarena_destroy(3)). */
gpuarena_status_t ga_bm_destroy(ga_bm_t *bm);

/* Allocate and free on S.  UNCHECKED: the provider named S without asking
 * whether it is being captured (GA_UNCHECKED, provider.h): the legacy
 * stream, which cannot be, or any stream for a free; a thread cache's hit
 * then makes no provider call at all, and any other path that may reach
 * the provider with S asks its stream_check first (a refusal changes
 * nothing). */
gpuarena_status_t ga_bm_alloc_on(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr,
                                 bool unchecked);
gpuarena_status_t ga_bm_free_on(ga_bm_t *bm, void *ptr, ga_stream_t s, bool unchecked);

static inline gpuarena_status_t ga_bm_alloc(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr)
{
    return ga_bm_alloc_on(bm, size, s, ptr, false);
}

static inline gpuarena_status_t ga_bm_free(ga_bm_t *bm, void *ptr, ga_stream_t s)
{
    return ga_bm_free_on(bm, ptr, s, false);
}

gpuarena_status_t ga_bm_record_stream(ga_bm_t *bm, void *ptr, ga_stream_t s);

/* Size of the live block at PTR (its requested size), or an error status
 * when PTR is not the start of a live block: why, in a message that
 * names WHAT (the caller's public function), or no message where WHAT is
 * NULL (a search of several arenas). */
gpuarena_status_t ga_bm_lookup(ga_bm_t *bm, const void *ptr, size_t *requested, const char *what);

/* Return cached memory to the provider until at most KEEP bytes stay
 * cached.  Flushes the thread caches.  WAIT false: without the wait for
 * the whole device (or, for the driver's pool, any wait), which a capture
 * in progress refuses and which would invalidate it: only what is
 * reusable by every stream already, or once events recorded before
 * (which are waited on in relaxed capture mode) complete, goes back
 * (PyTorch's empty_cache during a capture, frameworks.c). */
gpuarena_status_t ga_bm_trim(ga_bm_t *bm, size_t keep, bool wait);

/* Change the caps of a live manager (gpuarena_set(3)); a NULL one stays
 * as it is.  From the next operation on, and a max_cached lower than the
 * bytes cached now releases the excess at once, as a free would. */
void ga_bm_set_caps(ga_bm_t *bm, const size_t *max_cached, const size_t *max_reserved);
/* The caps in effect (SIZE_MAX: none). */
void ga_bm_caps(ga_bm_t *bm, size_t *max_cached, size_t *max_reserved);

void ga_bm_stats(ga_bm_t *bm, gpuarena_stats_t *st);
void ga_bm_reset_peaks(ga_bm_t *bm);

/* Verify every invariant: no two blocks overlap, every byte of every
 * segment is in exactly one block, free lists hold exactly the free
 * blocks, statistics equal what the blocks say.  GPUARENA_ERR_CORRUPT with
 * a message in gpuarena_last_error() when one fails. */
gpuarena_status_t ga_bm_check(ga_bm_t *bm);

/* fork(2) (lib/fork.c).  Before it, ga_bm_fork_begin (the registry of
 * thread caches), then for each manager ga_bm_fork_prepare (its lock and
 * every thread cache of it, each owner out of its fast path).  After it,
 * in each process, ga_bm_fork_parent or ga_bm_fork_child for each
 * manager, then ga_bm_fork_end.  In the child the caches of the threads
 * that did not come along give their blocks back, unless the arena is
 * not USABLE there (GPU memory): it is then left as the parent saw it. */
void ga_bm_fork_begin(void);
void ga_bm_fork_end(void);
void ga_bm_fork_prepare(ga_bm_t *bm);
void ga_bm_fork_parent(ga_bm_t *bm);
void ga_bm_fork_child(ga_bm_t *bm, bool usable);

/* Make the pool that frees on S go to, if there is none yet: a free on
 * a stream with no pool asks the provider whether S is being captured
 * (free_names_stream), which a graph pool's free during its capture must
 * not be refused for (graphpool.c).  GPUARENA_ERR_HOST_MEMORY when there
 * is no memory for it. */
gpuarena_status_t ga_bm_make_pool(ga_bm_t *bm, ga_stream_t s);

/* From now on BM gives no memory back to the provider before it is
 * destroyed, and its out-of-memory path neither waits nor releases: a
 * CUDA graph's pool (graphpool.c), whose free blocks the graph's replays
 * still write, and whose allocations come during a capture, which a wait
 * on its stream or the device would invalidate.  Its settings keep
 * nothing under max_cached or release_threshold either (make_arena). */
void ga_bm_hold(ga_bm_t *bm);

/* The live block PTR counts as used by every stream from now on, as when
 * gpuarena_record_stream had no host memory for its list: its free puts
 * it in limbo until a wait for the whole device (limbo.c).  For a use on
 * a stream that is being captured, which gpuarena_record_stream refuses
 * (an event on it would go into the graph): PyTorch's record_stream hook
 * (frameworks.c).  OWN, where not NULL, is that stream's id: a use on
 * the block's own stream, which stream order covers, changes nothing.
 * No provider call. */
gpuarena_status_t ga_bm_uses_unknown(ga_bm_t *bm, void *ptr, const uint64_t *own);

/* Where limbo holds blocks (their uses unknown: ga_bm_uses_unknown),
 * wait for the whole device and make every free block reusable
 * (ga_sweep_drain); else nothing, no provider call.  For a held manager,
 * whose out-of-memory path makes no such wait, at a moment when no
 * capture is under way (graphpool.c, at a pool's begin).  The wait's
 * status. */
gpuarena_status_t ga_bm_drain_limbo(ga_bm_t *bm);

/* Whether PTR is the start of a block that BM handed out and that is
 * live or in a thread cache: one lookup with no lock, for telling which
 * of several arenas a pointer belongs to (graphpool.c).  A true answer
 * is stable for as long as the caller owns the block. */
bool ga_bm_holds(ga_bm_t *bm, const void *ptr);

/* Number of blocks live now (for leak checks of tests and tools). */
uint64_t ga_bm_live_blocks(ga_bm_t *bm);

#endif /* GA_BLOCK_H */
