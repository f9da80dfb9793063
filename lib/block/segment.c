/*
 * segment.c - the memory the block manager takes from its provider and
 * gives back: fixed segments, mapped whole and unmapped whole once
 * entirely free, and growable ones, one address reservation per size
 * class whose granules are committed as blocks need them and decommitted
 * when cached memory is released (block.c's head says when each is
 * used).  The unmapped parts of a growable segment are HOLE blocks in the
 * HOLE pool, found by fit like free ones, so that an allocation goes
 * where it maps the fewest new granules.
 *
 * Everything here runs under the manager's lock and off the hot path:
 * when an allocation finds no free block (ga_seg_grow), when cached
 * memory goes back (ga_seg_release: trim, max_cached, the out-of-memory
 * path) and at destroy (ga_seg_give_back).  The records, the split and
 * the merge it uses are block.c's.
 */
#include "config.h"

#include "block/internal.h"

#include "errors.h"
#ifdef GA_FAULT_INJECTION
#include "providers/faulty.h"
#endif

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static inline size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) & ~(a - 1);
}

static inline size_t round_down(size_t n, size_t a)
{
    return n & ~(a - 1);
}

/* Every change of the reserved bytes goes through these two: the arenas'
 * total (total.h) follows them. */
static void reserved_add(ga_bm_t *bm, size_t n)
{
    bm->c.reserved += n;
    if (bm->total)
        ga_total_add(bm->total, n);
}

static void reserved_sub(ga_bm_t *bm, size_t n)
{
    bm->c.reserved -= n;
    if (bm->total)
        ga_total_sub(bm->total, n);
}

static void seg_link(ga_bm_t *bm, ga_segment_t *g)
{
    g->prev = NULL;
    g->next = bm->segs;
    if (bm->segs)
        bm->segs->prev = g;
    bm->segs = g;
    bm->c.segments++;
}

static void seg_unlink(ga_bm_t *bm, ga_segment_t *g)
{
    if (g->prev)
        g->prev->next = g->next;
    else
        bm->segs = g->next;
    if (g->next)
        g->next->prev = g->prev;
    bm->c.segments--;
}

/* Records for a new segment and its one block, taken before the provider
 * is asked for memory, so that running out of them leaves nothing mapped. */
static gpuarena_status_t seg_records(ga_bm_t *bm, ga_segment_t **g, ga_block_t **b)
{
    *g = calloc(1, sizeof **g);
    *b = ga_bm_block_new(bm);
    if (*g && *b)
        return GPUARENA_SUCCESS;
    free(*g);
    if (*b)
        ga_bm_block_delete(bm, *b);
    return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a segment record");
}

/* Fill in and link segment G of SIZE bytes at BASE, tiled by block B. */
static void seg_setup(ga_bm_t *bm, ga_segment_t *g, ga_block_t *b, int cls, void *base, size_t size)
{
    g->base = (uintptr_t)base;
    g->size = size;
    g->cls = (uint8_t)cls;
    g->first = g->last = b;
    seg_link(bm, g);
    b->addr = g->base;
    b->size = size;
    b->seg = g;
    b->cls = (uint8_t)cls;
}

/* max_reserved: whether LEN more bytes may be taken from the provider.
 * Out of memory when not, so that the caller's out-of-memory path gives
 * the cached bytes back and retries once, as when the device is full. */
static gpuarena_status_t reserve_room(ga_bm_t *bm, size_t len)
{
    if (len <= ga_cap_room(bm->c.reserved, bm->set.max_reserved))
        return GPUARENA_SUCCESS;
    return ga_error(GPUARENA_ERR_OUT_OF_MEMORY,
                    "max_reserved: %zu bytes more would make %" PRIu64
                    " reserved, above the cap of %zu",
                    len, bm->c.reserved + len, bm->set.max_reserved);
}

/* A new fixed segment of SIZE bytes, as one free block in ANY. */
static gpuarena_status_t seg_map(ga_bm_t *bm, int cls, size_t size, ga_block_t **out)
{
    gpuarena_status_t st = reserve_room(bm, size);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_segment_t *g;
    ga_block_t *b;
    st = seg_records(bm, &g, &b);
    if (st != GPUARENA_SUCCESS)
        return st;
    void *base;
    st = bm->prov->ops->map(bm->prov, size, &base);
    if (st != GPUARENA_SUCCESS) {
        free(g);
        ga_bm_block_delete(bm, b);
        return st;
    }
    seg_setup(bm, g, b, cls, base, size);
    g->mapped = size;
    reserved_add(bm, size);
    bm->c.maps++;
    ga_bm_pool_put(bm, &bm->any, b);
    *out = b;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t seg_unmap(ga_bm_t *bm, ga_segment_t *g)
{
    gpuarena_status_t st = bm->prov->ops->unmap(bm->prov, (void *)g->base, g->size);
#ifdef GA_FAULT_INJECTION
    /* A planted bug (tests only, GPUARENA_FAULT_PLANT=unmap-leak): forget
     * a segment whose unmap failed, which leaks it. */
    if (st != GPUARENA_SUCCESS && ga_fault_planted("unmap-leak"))
        st = GPUARENA_SUCCESS;
#endif
    if (st != GPUARENA_SUCCESS)
        return st;
    reserved_sub(bm, g->size);
    bm->c.unmaps++;
    seg_unlink(bm, g);
    free(g);
    return GPUARENA_SUCCESS;
}

/* The growable segment of class CLS, reserved on first use. */
static gpuarena_status_t seg_growable(ga_bm_t *bm, int cls, ga_segment_t **out)
{
    if (bm->grow[cls]) {
        *out = bm->grow[cls];
        return GPUARENA_SUCCESS;
    }
    ga_segment_t *g;
    ga_block_t *h;
    gpuarena_status_t st = seg_records(bm, &g, &h);
    if (st != GPUARENA_SUCCESS)
        return st;
    void *base;
    st = bm->prov->ops->reserve(bm->prov, bm->prov->va_size, &base);
    if (st != GPUARENA_SUCCESS) {
        free(g);
        ga_bm_block_delete(bm, h);
        return st;
    }
    /* The provider's va_size now: it may have had less than it asked. */
    seg_setup(bm, g, h, cls, base, bm->prov->va_size);
    g->growable = true;
    ga_bm_pool_put(bm, &bm->holes, h);
    bm->grow[cls] = g;
    *out = g;
    return GPUARENA_SUCCESS;
}

/* Commit [addr, addr+len) of hole H (granule aligned, inside H) and return
 * the new free block, in no pool.  The rest of H stays a hole. */
static gpuarena_status_t commit_hole(ga_bm_t *bm, ga_block_t *h, uintptr_t addr, size_t len,
                                     ga_block_t **out)
{
    gpuarena_status_t st = reserve_room(bm, len);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* Records first, so that a failure leaves the hole as it was. */
    if (!ga_bm_spare_records(bm))
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for block records");
    st = bm->prov->ops->commit(bm->prov, (void *)addr, len);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_bm_pool_take(h);
    ga_block_t *b = h;
    if (addr > h->addr) {
        b = ga_bm_split(bm, h, addr - h->addr); /* cannot fail: records were there */
        ga_bm_pool_put(bm, &bm->holes, h);
    }
    if (b->size > len) {
        ga_block_t *t = ga_bm_split(bm, b, len);
        ga_bm_pool_put(bm, &bm->holes, t);
    }
    b->state = BLOCK_FREE;
    b->seg->mapped += len;
    reserved_add(bm, len);
    bm->c.maps++;
    *out = b;
    return GPUARENA_SUCCESS;
}

/* Decommit whole granules inside free block B (in ANY), LIMIT bytes of
 * them or the fewest granules past it, from its top, and turn them into a
 * hole; return the bytes released.  The rest of B stays cached: a trim
 * to KEEP bytes or a max_cached keeps that much, not the nearest whole
 * block below it. */
static size_t release_growable(ga_bm_t *bm, ga_block_t *b, size_t limit)
{
    size_t g = bm->prov->granule;
    uintptr_t lo = round_up(b->addr, g), hi = round_down(b->addr + b->size, g);
    if (hi <= lo)
        return 0;
    if (limit < hi - lo && round_up(limit, g) < hi - lo)
        lo = hi - round_up(limit, g);
    /* Records for the two splits, taken before anything changes. */
    if (!ga_bm_spare_records(bm))
        return 0;
    const ga_provider_ops_t *ops = bm->prov->ops;
    if (ops->decommit(bm->prov, (void *)lo, hi - lo) != GPUARENA_SUCCESS) {
        /* A failed decommit may have decommitted a prefix of the range
         * (the driver unmaps granule by granule: vmm.h) without saying how
         * much, and a granule of that prefix decommits again as no work.
         * So ask again granule by granule up to the first that fails: what
         * lies before it is decommitted, what follows is still committed,
         * and only that prefix becomes a hole.  Error path only: one call
         * for the whole range otherwise. */
        uintptr_t end = lo;
        while (end < hi && ops->decommit(bm->prov, (void *)end, g) == GPUARENA_SUCCESS)
            end += g;
        if (end == lo)
            return 0;
        hi = end;
    }
    ga_bm_pool_take(b);
    ga_block_t *h = b;
    if (lo > b->addr) {
        h = ga_bm_split(bm, b, lo - b->addr);
        ga_bm_pool_put(bm, &bm->any, b);
    }
    if (h->addr + h->size > hi) {
        ga_block_t *t = ga_bm_split(bm, h, hi - h->addr);
        ga_bm_pool_put(bm, &bm->any, t);
    }
    h->state = BLOCK_HOLE;
    h->seg->mapped -= hi - lo;
    reserved_sub(bm, hi - lo);
    bm->c.unmaps++;
    ga_bm_coalesce(bm, &bm->holes, h, 0);
    return hi - lo;
}

/* Return free memory of the ANY pool to the provider until WANT bytes
 * are released or nothing more can be; the largest blocks go first. */
size_t ga_seg_release(ga_bm_t *bm, size_t want)
{
    /* What the provider refuses stays cached, which is no error of the
     * caller's (a free over max_cached, a trim): the thread's message is
     * left as it was. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    size_t done = 0;
    /* The largest first, across both classes: a size's list of the small
     * class and then of the large, list by list from the top. */
    for (int fl = FIT_FL - 1; fl >= 0 && done < want; fl--) {
        for (int sl = FIT_SL - 1; sl >= 0 && done < want; sl--) {
            for (int cls = 0; cls < CLASS_COUNT && done < want; cls++) {
                ga_fit_t *f = &bm->any.fit[cls];
                if (!(f->fl_map & (1ull << fl)))
                    continue;
                ga_block_t *b = f->heads[fl][sl];
                while (b && done < want) {
                    ga_block_t *nx = b->fnext;
                    if (b->seg->growable) {
                        done += release_growable(bm, b, want - done);
                    } else if (!b->prev && !b->next) {
                        size_t sz = b->size;
                        ga_segment_t *g = b->seg;
                        ga_bm_pool_take(b);
                        if (seg_unmap(bm, g) == GPUARENA_SUCCESS) {
                            ga_bm_block_delete(bm, b);
                            done += sz;
                        } else {
                            ga_bm_pool_put(bm, &bm->any, b);
                        }
                    }
                    b = nx;
                }
            }
        }
    }
    if (done)
        bm->c.trims++;
    ga_error_restore(&saved);
    return done;
}

/* max_split on a growable segment.  Fit never hands a request a free
 * block above ga_split_limit, so such a request grows the segment; but
 * the new memory [START, END) merges with its free neighbours, and may
 * make such a block, which the request then took whole (a 3M request with
 * a free 10M block before the hole took both, 14M, under max_split 4M).
 * Its RS bytes are cut from the new memory instead, from its start (the
 * block before it stays as it was), or where the new memory extends a
 * smaller free block, from the end of both; the rest of merged block M
 * stays free around them.  M as it is where max_split does not apply, or
 * where there are no records for the cuts. */
static ga_block_t *carve_new(ga_bm_t *bm, ga_block_t *m, uintptr_t start, uintptr_t end, size_t rs)
{
    size_t limit = ga_split_limit(bm->set.max_split, rs);
    if (!limit || m->size <= limit || !ga_bm_spare_records(bm))
        return m;
    ga_pool_t *p = m->pool;
    uintptr_t at = end - rs < start ? end - rs : start; /* within M, RS bytes before END */
    ga_bm_pool_take(m);
    ga_block_t *b = m;
    if (at > m->addr) {
        b = ga_bm_split(bm, m, at - m->addr); /* cannot fail: records were there */
        ga_bm_pool_put(bm, p, m);
    }
    if (b->size > rs)
        ga_bm_pool_put(bm, p, ga_bm_split(bm, b, rs));
    ga_bm_pool_put(bm, p, b);
    return b;
}

/* Map memory for RS bytes of class CLS usable by S; the block returned is
 * in a pool and large enough. */
gpuarena_status_t ga_seg_grow(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s, ga_block_t **out)
{
    ga_provider_t *pv = bm->prov;
    bool growable = ga_grows_in_place(bm);
    size_t gran = pv->granule;

    /* Fixed segments: whole free segments that could not serve this
     * request are given back before a new one is taken, as far as cached
     * memory exceeds the threshold.  Growable segments never do this: a
     * hole punched in the middle would cost the contiguity that lets a
     * later large block reuse the space; they return memory on trim, on
     * max_cached and when the provider runs out. */
    uint64_t cached = bm->c.reserved - bm->c.in_use;
    if (!growable && cached > bm->set.release_threshold) {
        size_t excess = cached - bm->set.release_threshold;
        ga_seg_release(bm, rs < excess ? rs : excess);
    }

    if (!growable) {
        size_t size;
        if (cls == CLASS_SMALL)
            size = bm->set.small_segment;
        else if (rs <= bm->set.large_segment / 2)
            size = bm->set.large_segment;
        else
            size = round_up(rs, gran);
        if (size < rs)
            size = round_up(rs, gran);
        /* A block above max_split is never split for a smaller request,
         * so a segment above it would go whole to this one: a request
         * above max_split gets a segment of its own size, one below it a
         * segment no larger than max_split. */
        size_t ms = bm->set.max_split;
        if (ms && size > ms) {
            size = round_up(rs, gran);
            if (rs <= ms && round_down(ms, gran) > size)
                size = round_down(ms, gran);
        }
        size = round_up(size, gran);
        /* Under max_reserved, a segment no larger than the room left,
         * where the request itself fits in it. */
        uint64_t room = ga_cap_room(bm->c.reserved, bm->set.max_reserved);
        if (size > room && round_up(rs, gran) <= room)
            size = round_down((size_t)room, gran);
        return seg_map(bm, cls, size, out);
    }

    ga_segment_t *g = NULL;
    gpuarena_status_t st = seg_growable(bm, cls, &g);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* Candidates: the best-fitting hole on its own, and a hole right after
     * a free block S may use (extending that block maps less). */
    ga_pool_t *own = ga_bm_pool_find(bm, s.id);
    ga_block_t *h = ga_fit_find(&bm->holes.fit[cls], round_up(rs, gran), 0);
    size_t cost = h ? round_up(rs, gran) : SIZE_MAX;
    ga_block_t *eh = NULL;
    size_t ecost = SIZE_MAX;
    /* Only the last hole is tried for extension: it is where the segment
     * grows; interior holes are found by fit above. */
    ga_block_t *b = g->last;
    if (b->state == BLOCK_HOLE && b->prev && b->prev->state == BLOCK_FREE &&
        (b->prev->pool == &bm->any || (own && b->prev->pool == own)) && b->prev->size < rs) {
        size_t c = round_up(rs - b->prev->size, gran);
        if (c <= b->size) {
            eh = b;
            ecost = c;
        }
    }
    if (eh && ecost <= cost) {
        ga_block_t *nb;
        uintptr_t start = eh->addr; /* EH's record may merge away */
        st = commit_hole(bm, eh, start, ecost, &nb);
        if (st != GPUARENA_SUCCESS)
            return st;
        ga_pool_t *p = nb->prev->pool; /* the block extended */
        ga_block_used(nb, false);      /* new memory: no stream used it */
        ga_block_t *m = ga_bm_coalesce(bm, p, nb, p->is_stream ? ++p->seq : 0);
        *out = carve_new(bm, m, start, start + ecost, rs);
        return GPUARENA_SUCCESS;
    }
    if (!h)
        return ga_error(GPUARENA_ERR_OUT_OF_MEMORY,
                        "the address range of the growable segment (%zu bytes) is full", g->size);
    ga_block_t *nb;
    uintptr_t start = h->addr;
    st = commit_hole(bm, h, start, cost, &nb);
    if (st != GPUARENA_SUCCESS)
        return st;
    *out = carve_new(bm, ga_bm_coalesce(bm, &bm->any, nb, 0), start, start + cost, rs);
    return GPUARENA_SUCCESS;
}

/* Give segment G back to the provider at destroy.  A growable segment is
 * released only once every run of it is decommitted: a reservation with
 * memory still committed in it stays (with what its provider counts of
 * it), so that what is left over is what the provider says is left.
 * *LEFT gets the bytes that stay mapped when it fails. */
gpuarena_status_t ga_seg_give_back(ga_bm_t *bm, ga_segment_t *g, size_t *left)
{
    const ga_provider_ops_t *ops = bm->prov->ops;
    if (!g->growable) {
        *left = g->size;
        return ops->unmap(bm->prov, (void *)g->base, g->size);
    }
    gpuarena_status_t first = GPUARENA_SUCCESS;
    char why[512];
    size_t mapped = g->mapped;
    /* Decommit each run of mapped blocks (runs are granule aligned: only
     * holes separate them). */
    for (ga_block_t *b = g->first; b;) {
        if (b->state == BLOCK_HOLE) {
            b = b->next;
            continue;
        }
        uintptr_t lo = b->addr;
        while (b && b->state != BLOCK_HOLE)
            b = b->next;
        uintptr_t hi = b ? b->addr : g->base + g->size;
        gpuarena_status_t st = ops->decommit(bm->prov, (void *)lo, hi - lo);
        if (st != GPUARENA_SUCCESS) {
            if (first == GPUARENA_SUCCESS) {
                first = st;
                snprintf(why, sizeof why, "%s", gpuarena_last_error());
            }
            /* The driver may have unmapped part of the run (vmm.h): ask
             * what is left, rather than count it whole. */
            size_t still = hi - lo;
            if (ops->mapped &&
                ops->mapped(bm->prov, (void *)lo, hi - lo, &still) == GPUARENA_SUCCESS &&
                still <= hi - lo)
                mapped -= hi - lo - still;
        } else {
            mapped -= hi - lo;
        }
    }
    *left = mapped;
    if (first != GPUARENA_SUCCESS) {
        /* Nothing stays mapped (the decommit unmapped all, and a release
         * of a granule's memory failed, kept by the provider for a later
         * try): the address range goes all the same.  It stayed reserved
         * for good, twice the device's memory of address space. */
        if (mapped == 0 && ops->mapped)
            (void)ops->release(bm->prov, (void *)g->base, g->size);
        ga_error(first, "%s", why); /* the message of the first failure */
        return first;
    }
    return ops->release(bm->prov, (void *)g->base, g->size);
}
