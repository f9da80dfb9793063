/*
 * stats.c - the block manager's statistics: the counts under the lock
 * with the thread caches' corrections, the four peaks, and what
 * ga_bm_stats reports (gpuarena_stats(3)).  The peak checks of the locked
 * paths are inline in peaks.h.
 */
#include "config.h"

#include "block/peaks.h"

#include <string.h>

uint64_t ga_bm_user_in_use(ga_bm_t *bm)
{
    ga_tc_sums_t tc;
    ga_tcache_sums(bm, &tc);
    return (uint64_t)((int64_t)bm->c.in_use + tc.inuse);
}

/* Peaks after a change made under the lock: all four. */
void ga_bm_update_peaks(ga_bm_t *bm)
{
    uint64_t r, u;
    ga_publish_bases(bm, &r, &u);
    atomic_store_explicit(&bm->base_reserved, bm->c.reserved, memory_order_relaxed);
    ga_peak_max(&bm->peak.requested, r);
    ga_peak_max(&bm->peak.in_use, u);
    ga_peak_max(&bm->peak.reserved, bm->c.reserved);
    ga_peak_max(&bm->peak.cached, ga_cached_bytes(bm, u));
}

/* P's free blocks and bytes, added to *N and *BYTES. */
static void pool_tally(const ga_pool_t *p, uint64_t *n, uint64_t *bytes)
{
    for (int cls = 0; cls < CLASS_COUNT; cls++)
        ga_fit_tally(&p->fit[cls], n, bytes);
}

void ga_bm_stats(ga_bm_t *bm, gpuarena_stats_t *st)
{
    memset(st, 0, sizeof *st);
    ga_lock(&bm->lock);
    ga_tc_sums_t tc;
    ga_tcache_sums(bm, &tc);
    st->requested = ga_user_requested(bm, (int64_t)bm->c.requested, tc.req);
    st->in_use = (uint64_t)((int64_t)bm->c.in_use + tc.inuse);
    st->reserved = bm->c.reserved;
    /* A direct provider's reserved and cached bytes are its own (its
     * stats hook): none here. */
    st->cached = st->reserved > st->in_use ? st->reserved - st->in_use : 0;
    /* A peak is never below the value now (a thread cache's view of the
     * totals may have lagged when it last compared). */
    ga_peak_max(&bm->peak.requested, st->requested);
    ga_peak_max(&bm->peak.in_use, st->in_use);
    ga_peak_max(&bm->peak.reserved, st->reserved);
    ga_peak_max(&bm->peak.cached, st->cached);
    st->requested_peak = atomic_load(&bm->peak.requested);
    st->in_use_peak = atomic_load(&bm->peak.in_use);
    st->reserved_peak = atomic_load(&bm->peak.reserved);
    st->cached_peak = atomic_load(&bm->peak.cached);
    st->allocs = bm->c.allocs + tc.allocs;
    st->frees = bm->c.frees + tc.frees;
    st->cache_hits = bm->c.hits + tc.allocs;
    st->cache_misses = bm->c.misses;
    st->provider_maps = bm->c.maps;
    st->provider_unmaps = bm->c.unmaps;
    st->cross_stream_waits = bm->c.waits;
    st->oom_retries = bm->c.oom_retries;
    st->oom_failures = bm->c.oom_failures;
    st->last_oom_request = bm->c.last_oom;
    st->device_free = bm->c.device_free;
    st->segments = bm->c.segments;
    st->live_blocks = bm->c.allocs + tc.allocs - bm->c.frees - tc.frees;
    st->pending_frees = bm->pending_blocks;
    st->events_recorded = bm->c.events;
    st->trims = bm->c.trims;
    uint64_t nfree = 0, any = 0;
    pool_tally(&bm->any, &nfree, &any);
    pool_tally(&bm->limbo, &nfree, &st->retired_cached);
    st->retired_cached += bm->d.held_bytes; /* a direct manager's limbo */
    nfree += bm->d.held_blocks;
    for (unsigned i = 0; i < bm->npools; i++)
        pool_tally(bm->pools[i], &nfree, &st->stream_cached);
    /* Blocks in thread caches are free too: their bytes are in cached.
     * So are pending ones, which wait for events in no pool. */
    st->free_blocks = nfree + tc.blocks + bm->pending_blocks;
    st->stream_pools = bm->npools;
    ga_unlock(&bm->lock);
}

void ga_bm_reset_peaks(ga_bm_t *bm)
{
    ga_lock(&bm->lock);
    ga_tc_sums_t tc;
    ga_tcache_sums(bm, &tc);
    uint64_t u = (uint64_t)((int64_t)bm->c.in_use + tc.inuse);
    atomic_store(&bm->peak.requested, ga_user_requested(bm, (int64_t)bm->c.requested, tc.req));
    atomic_store(&bm->peak.in_use, u);
    atomic_store(&bm->peak.reserved, bm->c.reserved);
    atomic_store(&bm->peak.cached, ga_cached_bytes(bm, u));
    ga_unlock(&bm->lock);
}

uint64_t ga_bm_live_blocks(ga_bm_t *bm)
{
    gpuarena_stats_t st;
    ga_bm_stats(bm, &st);
    return st.live_blocks;
}
