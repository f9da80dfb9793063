/*
 * check.c - the invariant checker behind gpuarena_check(): everything the
 * block manager believes about its segments, blocks, pools and totals,
 * verified from scratch.  Tests run it after every step; gpuarena-replay
 * --check after every event.
 */
#include "block/internal.h"

#include "errors.h"

#include <inttypes.h>

#define FAIL(...) return ga_error(GPUARENA_ERR_CORRUPT, "check: " __VA_ARGS__)

typedef struct tally {
    uint64_t live, requested, in_use, pending, mapped, fixed_segs, granules, segs;
} tally_t;

static gpuarena_status_t check_segment(ga_bm_t *bm, ga_segment_t *g, tally_t *t)
{
    size_t gran = bm->prov->granule;
    uintptr_t at = g->base;
    size_t mapped = 0;
    const ga_block_t *prev = NULL;
    if (!g->first || g->first->prev)
        FAIL("segment %p has a bad first block", (void *)g->base);
    for (const ga_block_t *b = g->first; b; prev = b, b = b->next) {
        if (b->addr != at)
            FAIL("block %p should start at %p: blocks overlap or leave a gap", (void *)b->addr,
                 (void *)at);
        if (!b->size)
            FAIL("block %p is empty", (void *)b->addr);
        if (b->seg != g || b->cls != g->cls || b->prev != prev)
            FAIL("block %p has bad links", (void *)b->addr);
        at += b->size;
        switch (b->state) {
        case BLOCK_LIVE:
            /* Also catches a free block's links read as a live one's
             * sizes (they share bytes): a pointer is far above any size. */
            if (b->requested_bm > b->size)
                FAIL("live block %p of %zu bytes counts a request of %zu", (void *)b->addr, b->size,
                     b->requested_bm);
            if (ga_lmap_find(&bm->live, b->addr) != b)
                FAIL("live block %p is missing from the live map", (void *)b->addr);
            t->live++;
            t->requested += b->requested_bm;
            t->in_use += b->size;
            mapped += b->size;
            break;
        case BLOCK_FREE:
            if (!b->pool || b->pool == &bm->holes)
                FAIL("free block %p is in no pool", (void *)b->addr);
            if (prev && prev->state == BLOCK_FREE && prev->pool == b->pool)
                FAIL("free blocks %p and %p of one pool (stream %" PRIu64 ") were not merged",
                     (void *)prev->addr, (void *)b->addr, b->pool->stream.id);
            mapped += b->size;
            break;
        case BLOCK_PENDING:
            if (!b->pending || !b->pool)
                FAIL("pending block %p waits on nothing", (void *)b->addr);
            t->pending++;
            mapped += b->size;
            break;
        case BLOCK_HOLE:
            if (!g->growable || b->pool != &bm->holes)
                FAIL("hole %p outside a growable segment or its pool", (void *)b->addr);
            if ((b->addr | b->size) & (gran - 1))
                FAIL("hole %p is not granule aligned", (void *)b->addr);
            if (prev && prev->state == BLOCK_HOLE)
                FAIL("holes %p and %p were not merged", (void *)prev->addr, (void *)b->addr);
            break;
        default:
            FAIL("block %p has state %u", (void *)b->addr, b->state);
        }
    }
    if (at != g->base + g->size)
        FAIL("segment %p: blocks end at %p, not at its end", (void *)g->base, (void *)at);
    if (g->last != prev)
        FAIL("segment %p: wrong last block", (void *)g->base);
    if (mapped != g->mapped || (!g->growable && mapped != g->size))
        FAIL("segment %p: %zu bytes mapped, blocks say %zu", (void *)g->base, g->mapped, mapped);
    t->mapped += mapped;
    t->segs++;
    if (g->growable)
        t->granules += mapped / gran;
    else
        t->fixed_segs++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t check_pool(ga_bm_t *bm, ga_pool_t *p, uint64_t *listed)
{
    bool stream_pool = p != &bm->any && p != &bm->holes && p != &bm->limbo;
    if (p->is_stream != stream_pool)
        FAIL("the %s pool says it is%s a stream's", stream_pool ? "stream" : "ANY or hole",
             stream_pool ? " not" : "");
    uint64_t n = 0;
    for (int cls = 0; cls < CLASS_COUNT; cls++) {
        ga_fit_t *f = &p->fit[cls];
        for (unsigned fl = 0; fl < FIT_FL; fl++) {
            for (unsigned sl = 0; sl < FIT_SL; sl++) {
                const ga_block_t *h = f->heads[fl][sl];
                bool bit = (f->fl_map >> fl & 1) && (f->sl_map[fl] >> sl & 1);
                if (bit != (h != NULL))
                    FAIL("fit bitmap disagrees with list %u/%u", fl, sl);
                ga_block_t *const *link = &f->heads[fl][sl];
                for (const ga_block_t *b = h; b; link = &b->fnext, b = b->fnext) {
                    if ((const void *)b->fpprev != (const void *)link)
                        FAIL("block %p has a wrong back link in its free list", (void *)b->addr);
                    unsigned bf, bs;
                    ga_fit_index(b->size, &bf, &bs);
                    if (bf != fl || bs != sl || b->pool != p || b->cls != cls)
                        FAIL("block %p is in the wrong free list", (void *)b->addr);
                    if (b->state != (p == &bm->holes ? BLOCK_HOLE : BLOCK_FREE))
                        FAIL("block %p in a free list has state %u", (void *)b->addr, b->state);
                    /* A stamp above the pool's sequence would never be
                     * covered by a sweep: the block would stay out of ANY
                     * for good. */
                    if (stream_pool && b->stamp > p->seq)
                        FAIL("block %p has stamp %" PRIu64 " beyond its pool's %" PRIu64,
                             (void *)b->addr, b->stamp, p->seq);
                    /* The part its stream used lies inside it (or is
                     * empty): outside, it would keep a neighbour's memory
                     * from ANY when the pool gives its unused parts back. */
                    if (stream_pool && b->ulo < b->uhi &&
                        (b->ulo < b->addr || b->uhi > b->addr + b->size))
                        FAIL("block %p of %zu bytes has its used part at %p-%p", (void *)b->addr,
                             b->size, (void *)b->ulo, (void *)b->uhi);
                    /* Its old part too, and no newer than the block: a
                     * sweep gives ANY the old part it covers. */
                    if (stream_pool && b->ostamp != GA_OLD_WHOLE && b->olo < b->ohi &&
                        (b->olo < b->addr || b->ohi > b->addr + b->size || b->ostamp > b->stamp))
                        FAIL("block %p of %zu bytes (stamp %" PRIu64 ") has its old part at "
                             "%p-%p, stamped %" PRIu64,
                             (void *)b->addr, b->size, b->stamp, (void *)b->olo, (void *)b->ohi,
                             b->ostamp);
                    n++;
                }
            }
        }
    }
    *listed += n;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_bm_check(ga_bm_t *bm)
{
    if (bm->direct)
        return ga_direct_check(bm); /* live blocks only: direct.c */
    ga_lock(&bm->lock);
    tally_t t = {0};
    gpuarena_status_t st = GPUARENA_SUCCESS;
    uint64_t free_blocks = 0, listed = 0;
    for (ga_segment_t *g = bm->segs; g && st == GPUARENA_SUCCESS; g = g->next) {
        st = check_segment(bm, g, &t);
        for (const ga_block_t *b = g->first; b; b = b->next)
            free_blocks += b->state == BLOCK_FREE || b->state == BLOCK_HOLE;
    }
    if (st == GPUARENA_SUCCESS)
        st = check_pool(bm, &bm->any, &listed);
    if (st == GPUARENA_SUCCESS)
        st = check_pool(bm, &bm->holes, &listed);
    if (st == GPUARENA_SUCCESS)
        st = check_pool(bm, &bm->limbo, &listed);
    if (st == GPUARENA_SUCCESS && bm->npools > GA_POOLS_MAX)
        st = ga_error(GPUARENA_ERR_CORRUPT, "check: %u stream pools, more than %u", bm->npools,
                      GA_POOLS_MAX);
    for (unsigned i = 0; i < bm->npools && st == GPUARENA_SUCCESS; i++)
        st = check_pool(bm, bm->pools[i], &listed);
    if (st != GPUARENA_SUCCESS)
        goto out;
    st = GPUARENA_ERR_CORRUPT;
    uintptr_t bad;
    if (!ga_lmap_valid(&bm->live, &bad))
        ga_error(st, "check: the live map is inconsistent (at %p)", (void *)bad);
    else if (listed != free_blocks)
        ga_error(st, "check: %" PRIu64 " free blocks, %" PRIu64 " in free lists", free_blocks,
                 listed);
    else if (t.live != bm->live.count || t.live != bm->c.live)
        ga_error(st, "check: %" PRIu64 " live blocks, the map holds %zu, the totals %" PRIu64,
                 t.live, bm->live.count, bm->c.live);
    else if (t.requested != bm->c.requested || t.in_use != bm->c.in_use)
        ga_error(st, "check: requested/in use totals disagree with the blocks");
    else if (t.mapped != bm->c.reserved)
        ga_error(st, "check: %" PRIu64 " bytes mapped, reserved says %" PRIu64, t.mapped,
                 bm->c.reserved);
    else if (t.pending != bm->pending_blocks)
        ga_error(st, "check: pending blocks disagree");
    else if (t.segs != bm->c.segments)
        ga_error(st, "check: segment count disagrees");
    else if (bm->prov->live_maps != t.fixed_segs + t.granules)
        ga_error(st, "check: the provider holds %" PRIu64 " mappings, the segments %" PRIu64,
                 bm->prov->live_maps, t.fixed_segs + t.granules);
    else
        st = GPUARENA_SUCCESS;
out:
    ga_unlock(&bm->lock);
    return st;
}
