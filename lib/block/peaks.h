/*
 * peaks.h - the manager's byte counts as the user sees them, and their
 * peaks, kept on the locked paths: inline here for block.c's allocation
 * and free, and used by stats.c, which reports them.
 *
 * The counters under the lock (ga_counts_t) include what the thread
 * caches hold as in use; the caches keep their own corrections of the
 * requested and in-use bytes (tcache.h), which the views below add.
 */
#ifndef GA_BLOCK_PEAKS_H
#define GA_BLOCK_PEAKS_H

#include "block/tcache.h"

/* Raise *PEAK to V.  Every writer of a peak holds the manager's lock
 * (the thread caches take it to raise one): a load and a store, no
 * compare-and-swap loop. */
static inline void ga_peak_max(_Atomic uint64_t *peak, uint64_t v)
{
    if (v > atomic_load_explicit(peak, memory_order_relaxed))
        atomic_store_explicit(peak, v, memory_order_relaxed);
}

/* The requested bytes the user holds, given the thread caches'
 * corrections REQ; never below zero, where a lagging view would wrap. */
static inline uint64_t ga_user_requested(ga_bm_t *bm, int64_t base, int64_t req)
{
    int64_t v = base + atomic_load_explicit(&bm->req_drift, memory_order_relaxed) + req;
    return v > 0 ? (uint64_t)v : 0;
}

/* Publish the manager's counts for the thread caches' peak checks
 * (base_req, base_inuse); *REQ and *INUSE get the user's requested and
 * in-use bytes with the thread caches' share.  That share is taken from
 * the calling thread's own caches only, as on the cache's fast path
 * (tcache.c): exact with one thread; with several, above the truth by at
 * most what the other threads' caches hold. */
static inline void ga_publish_bases(ga_bm_t *bm, uint64_t *req, uint64_t *inuse)
{
    int64_t own_req, own_inuse;
    ga_tcache_own_deltas(bm, &own_req, &own_inuse);
    int64_t base_req = (int64_t)bm->c.requested;
    int64_t base_inuse = (int64_t)bm->c.in_use;
    atomic_store_explicit(&bm->base_req, base_req, memory_order_relaxed);
    atomic_store_explicit(&bm->base_inuse, base_inuse, memory_order_relaxed);
    *req = ga_user_requested(bm, base_req, own_req);
    *inuse = (uint64_t)(base_inuse + own_inuse); /* the caches' blocks are in c.in_use */
}

/* Bytes reserved and not in use, when IN_USE bytes are. */
static inline uint64_t ga_cached_bytes(const ga_bm_t *bm, uint64_t in_use)
{
    return bm->c.reserved > in_use ? bm->c.reserved - in_use : 0;
}

/* Peaks after a locked allocation (ALLOC) or free.  While the reserved
 * bytes stay as they were (nothing mapped or returned), an allocation can
 * raise only the requested and in-use peaks, and a free only the cached
 * one: the others fell or stayed.  Every uncached operation ends here, and
 * ga_bm_update_peaks's four checks were 7 % of the instructions of a
 * random free and allocation. */
static inline void ga_peaks_after(ga_bm_t *bm, bool alloc)
{
    if (bm->c.reserved != atomic_load_explicit(&bm->base_reserved, memory_order_relaxed)) {
        ga_bm_update_peaks(bm);
        return;
    }
    uint64_t r, u;
    ga_publish_bases(bm, &r, &u);
    if (alloc) {
        ga_peak_max(&bm->peak.requested, r);
        ga_peak_max(&bm->peak.in_use, u);
    } else {
        ga_peak_max(&bm->peak.cached, ga_cached_bytes(bm, u));
    }
}

#endif /* GA_BLOCK_PEAKS_H */
