/*
 * sweep.c - stream-ordered reuse (block.c's head gives the rules): the
 * events the manager records, pooled; the sweeps that move a stream
 * pool's frees to ANY once the GPU has passed them; the pending blocks
 * of record_stream and host-visible memory, which wait on events of
 * their own; and the waits of trim, the out-of-memory path and destroy
 * (settle, then the whole device with drain).  Everything here runs under
 * the manager's lock, and none of it is on the path of an allocation that
 * finds a free block: a free reaches it to record a sweep that another
 * stream asked for, or the events of a block with recorded streams or of
 * host-visible memory (block.c, free_watched).
 */
#include "config.h"

#include "block/internal.h"

#include "array.h"

#include <stdlib.h>

gpuarena_status_t ga_bm_event_get(ga_bm_t *bm, ga_event_t *ev)
{
    if (bm->nspare_events) {
        *ev = bm->spare_events[--bm->nspare_events];
        return GPUARENA_SUCCESS;
    }
    return bm->prov->ops->event_create(bm->prov, ev);
}

void ga_bm_event_put(ga_bm_t *bm, ga_event_t ev)
{
    ga_event_t *e =
        ga_room_for_one(bm->spare_events, bm->nspare_events, &bm->cap_spare_events, sizeof *e, 16);
    if (!e) {
        bm->prov->ops->event_destroy(bm->prov, ev);
        return;
    }
    bm->spare_events = e;
    bm->spare_events[bm->nspare_events++] = ev;
}

gpuarena_status_t ga_bm_event_record(ga_bm_t *bm, ga_stream_t s, ga_event_t *out)
{
    ga_event_t ev;
    gpuarena_status_t st = ga_bm_event_get(bm, &ev);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = bm->prov->ops->event_record(bm->prov, ev, s.handle);
    if (st != GPUARENA_SUCCESS) {
        ga_bm_event_put(bm, ev);
        return st;
    }
    bm->c.events++;
    *out = ev;
    return GPUARENA_SUCCESS;
}

/* Free block B, out of a stream pool and in no pool: the parts of it that
 * its stream never used (ga_block_used) to ANY, the rest to TO (its own
 * pool: put back as it is, its neighbours there merged already, where
 * merging would take the parts just given to ANY in again; limbo: merged
 * there).  What a split cannot cut off (no record) stays with the rest. */
static void part_out(ga_bm_t *bm, ga_block_t *b, ga_pool_t *to)
{
    if (b->ulo >= b->uhi) {
        ga_bm_coalesce(bm, &bm->any, b, 0);
        return;
    }
    uintptr_t lo = b->ulo, hi = b->uhi;
    ga_block_t *t;
    if (lo > b->addr && (t = ga_bm_split(bm, b, lo - b->addr))) {
        ga_bm_coalesce(bm, &bm->any, b, 0);
        b = t;
    }
    if (hi < b->addr + b->size && (t = ga_bm_split(bm, b, hi - b->addr)))
        ga_bm_coalesce(bm, &bm->any, t, 0);
    if (to->is_stream)
        ga_bm_pool_put(bm, to, b);
    else
        ga_bm_coalesce(bm, to, b, 0);
}

/* Whether B, free in a stream pool, holds a part its stream never used. */
static bool has_unused(const ga_block_t *b)
{
    return b->ulo >= b->uhi || b->ulo > b->addr || b->uhi < b->addr + b->size;
}

/* Which free blocks of a pool take_out takes: those a sweep up to UPTO
 * covers whole; those with a part their stream never used (has_unused);
 * those whose old part alone it covers (block.c, coalesce_into). */
typedef enum { TAKE_COVERED, TAKE_UNUSED, TAKE_OLD_PART } take_t;

static bool taken(const ga_block_t *b, take_t what, uint64_t upto)
{
    switch (what) {
    case TAKE_COVERED:
        return b->stamp <= upto;
    case TAKE_UNUSED:
        return has_unused(b);
    default:
        return b->stamp > upto && b->ostamp <= upto && b->olo < b->ohi;
    }
}

/* Take out of P's index the free blocks WHAT says, and return them
 * linked through fnext: merged or split only once the walk is over,
 * since that would change the lists walked. */
static ga_block_t *take_out(ga_pool_t *p, take_t what, uint64_t upto)
{
    ga_block_t *out = NULL;
    for (int cls = 0; cls < CLASS_COUNT; cls++) {
        ga_fit_t *f = &p->fit[cls];
        for (uint64_t fm = f->fl_map; fm; fm &= fm - 1) {
            unsigned fl = (unsigned)__builtin_ctzll(fm);
            for (uint32_t sm = f->sl_map[fl]; sm; sm &= sm - 1) {
                unsigned sl = (unsigned)__builtin_ctz(sm);
                for (ga_block_t *b = f->heads[fl][sl], *nx; b; b = nx) {
                    nx = b->fnext;
                    if (!taken(b, what, upto))
                        continue;
                    ga_bm_pool_take(b);
                    b->fnext = out;
                    out = b;
                }
            }
        }
    }
    return out;
}

/* The next block of a list of take_out, unlinked. */
static ga_block_t *next_out(ga_block_t **list)
{
    ga_block_t *b = *list;
    *list = b->fnext;
    b->fnext = NULL;
    return b;
}

void ga_pool_move(ga_bm_t *bm, ga_pool_t *from, ga_pool_t *to, uint64_t upto)
{
    for (ga_block_t *list = take_out(from, TAKE_COVERED, upto); list;) {
        ga_block_t *b = next_out(&list);
        /* Into limbo goes only what the retired pool's stream used. */
        if (from->is_stream && to == &bm->limbo)
            part_out(bm, b, to);
        else
            ga_bm_coalesce(bm, to, b, 0);
    }
}

bool ga_pool_reclaim(ga_bm_t *bm, uint64_t id)
{
    bool moved = false;
    for (unsigned i = 0; i < bm->npools; i++) {
        ga_pool_t *p = bm->pools[i];
        if (p->stream.id == id)
            continue; /* its stream has all of it already */
        ga_block_t *list = take_out(p, TAKE_UNUSED, 0);
        moved |= list != NULL;
        while (list)
            part_out(bm, next_out(&list), p);
    }
    return moved;
}

/* The old parts of P's blocks that a sweep up to UPTO covers, to ANY;
 * the rest of each block back to P as it is (its neighbours there merged
 * already), its old part all of it from now on. */
static void old_parts_out(ga_bm_t *bm, ga_pool_t *p, uint64_t upto)
{
    for (ga_block_t *list = take_out(p, TAKE_OLD_PART, upto); list;) {
        ga_block_t *b = next_out(&list), *t;
        uintptr_t lo = b->olo, hi = b->ohi;
        /* Both cuts or none: after one alone, the two sides would lie
         * side by side in P unmerged (no host memory for records: the
         * old part goes with a later sweep). */
        if (!ga_bm_spare_records(bm)) {
            ga_bm_pool_put(bm, p, b);
            continue;
        }
        if (lo > b->addr) {
            t = ga_bm_split(bm, b, lo - b->addr);
            ga_bm_pool_put(bm, p, b); /* its old part all of it (split) */
            b = t;
        }
        if (hi < b->addr + b->size)
            ga_bm_pool_put(bm, p, ga_bm_split(bm, b, hi - b->addr));
        ga_bm_coalesce(bm, &bm->any, b, 0);
    }
}

/* Move the blocks a completed sweep covers from P to ANY, and where
 * another stream or max_cached asked for it, the old parts it covers of
 * the others.  Not where only P's own stream missed: it may use its
 * pool's blocks whole, and cut in two (the old part ANY's, the rest
 * its), a block serves neither of its larger requests (the replay of
 * gpt2_train, one stream, reserved 1.133 times its peak against 1.039).
 * The pool's lists are walked whole: this runs only when a stream has
 * missed or the arena is over max_cached, and a sweep's event has
 * completed; keeping the blocks in free order instead (an age list) cost
 * every free and every split on a stream. */
static void sweep_finish(ga_bm_t *bm, ga_pool_t *p)
{
    ga_pool_move(bm, p, &bm->any, p->sweep_seq);
    if (p->parts)
        old_parts_out(bm, p, p->sweep_seq);
    p->parts = false;
    if (p->sweep)
        ga_bm_event_put(bm, p->sweep);
    p->sweep = NULL;
}

/* Whether P holds free blocks that no sweep covers yet.  The newest free
 * into P is stamped p->seq; blocks taken since may leave none uncovered,
 * and then a sweep is asked for that releases nothing: a spare event,
 * never a block released early. */
static bool uncovered(const ga_pool_t *p)
{
    return p->seq > p->sweep_seq && ga_pool_holds(p);
}

/* The streams whose pools want a sweep, for the lock-free free path. */
void ga_sweep_wanted_update(ga_bm_t *bm)
{
    uint64_t m[GA_WANTED_BITS / 64] = {0};
    for (unsigned i = 0; i < bm->npools; i++) {
        uint64_t id = bm->pools[i]->stream.id;
        if (bm->pools[i]->wanted && !bm->pools[i]->sweep)
            m[ga_wanted_word(bm, id) - bm->wanted_map] |= (uint64_t)1 << (id & 63);
    }
    for (unsigned w = 0; w < GA_WANTED_BITS / 64; w++)
        atomic_store_explicit(&bm->wanted_map[w], m[w], memory_order_relaxed);
}

/* internal.h says what it does. */
void ga_sweep_request_all(ga_bm_t *bm, const ga_stream_t *missed)
{
    for (unsigned i = 0; i < bm->npools; i++) {
        ga_pool_t *p = bm->pools[i];
        if (!p->sweep && uncovered(p))
            p->wanted = true;
        bool other = !missed || missed->id != p->stream.id;
        p->parts |= other;
        p->shared |= other && missed;
    }
    ga_sweep_wanted_update(bm);
}

/* internal.h says what it does.  Sweeps asked for only at a miss came
 * too late where other streams need ANY: the arena grew at the miss, and
 * the stream pools kept what the sweeps gave back short of it (joins).
 * Asking as the pool passes a share of the bytes in use keeps them
 * coming; the one asked for is recorded at the stream's next free. */
void ga_sweep_shared(ga_bm_t *bm, ga_pool_t *p)
{
    if (p->sweep || p->wanted)
        return;
    uint64_t cached = p->fit[CLASS_SMALL].bytes + p->fit[CLASS_LARGE].bytes;
    if (cached * GA_SHARED_CACHED > bm->c.in_use)
        ga_sweep_want(bm, p);
}

/* internal.h says what it does: the lock-free free path sees the
 * stream's bit and frees under the lock, which records the sweep. */
void ga_sweep_want(ga_bm_t *bm, ga_pool_t *p)
{
    p->wanted = true;
    p->parts = true;
    atomic_fetch_or_explicit(ga_wanted_word(bm, p->stream.id), (uint64_t)1 << (p->stream.id & 63),
                             memory_order_relaxed);
}

/* After a free into P on S (a live handle): finish a completed sweep and
 * record a wanted one, where MAY_RECORD (S was checked for a capture). */
void ga_sweep_on_free(ga_bm_t *bm, ga_pool_t *p, ga_stream_t s, bool may_record)
{
    if (p->sweep && bm->prov->ops->event_query(bm->prov, p->sweep) == GPUARENA_SUCCESS)
        sweep_finish(bm, p);
    if (!p->wanted || p->sweep || !may_record)
        return;
    if (ga_bm_event_record(bm, s, &p->sweep) != GPUARENA_SUCCESS) {
        p->sweep = NULL;
        return; /* trim and the out-of-memory path catch up */
    }
    p->sweep_seq = p->seq;
    p->wanted = false;
    ga_sweep_wanted_update(bm);
}

/* Query outstanding events; act on the completed ones.  With SYNC, wait
 * for them (the out-of-memory path and trim only). */
void ga_sweep_poll(ga_bm_t *bm, bool sync)
{
    if (!bm->events)
        return;
    const ga_provider_ops_t *ops = bm->prov->ops;
    for (unsigned i = 0; i < bm->npools; i++) {
        ga_pool_t *p = bm->pools[i];
        if (!p->sweep)
            continue;
        gpuarena_status_t st =
            sync ? ops->event_sync(bm->prov, p->sweep) : ops->event_query(bm->prov, p->sweep);
        if (st == GPUARENA_SUCCESS)
            sweep_finish(bm, p);
    }
    for (ga_waiter_t **pw = &bm->waiters; *pw;) {
        ga_waiter_t *w = *pw;
        gpuarena_status_t st =
            sync ? ops->event_sync(bm->prov, w->ev) : ops->event_query(bm->prov, w->ev);
        if (st != GPUARENA_SUCCESS) {
            pw = &w->next;
            continue;
        }
        *pw = w->next;
        ga_bm_event_put(bm, w->ev);
        ga_block_t *b = w->block;
        free(w);
        if (--b->pending == 0) {
            bm->pending_blocks--;
            ga_pool_t *p = b->pool;
            b->pool = NULL;
            ga_bm_free_into(bm, p, b);
        }
    }
}

/* What can be made reusable by every stream without waiting for the
 * whole device (blocking, the out-of-memory path and trim only): the
 * outstanding sweeps and the events of pending blocks are waited on, and
 * the pool of S, a stream this call names (GA_STREAM_ANY: none), gets a
 * sweep of its own, waited on too.  Only those events are waited for, in
 * relaxed capture mode (cuda.c), so another thread's capture goes on and
 * other streams' work is not waited for.  The blocks freed on other
 * streams that no sweep covers stay where they are: their streams may be
 * gone, and only ga_sweep_drain's wait for the device covers them. */
void ga_sweep_settle(ga_bm_t *bm, ga_stream_t s)
{
    if (!bm->events)
        return;
    ga_sweep_poll(bm, true);
    ga_pool_t *p = s.id == GA_STREAM_ANY ? NULL : ga_bm_pool_find(bm, s.id);
    /* A sweep still out is one whose wait failed: it stays P's. */
    if (p && !p->sweep && uncovered(p) &&
        ga_bm_event_record(bm, s, &p->sweep) == GPUARENA_SUCCESS) {
        p->sweep_seq = p->seq;
        p->wanted = false;
        if (bm->prov->ops->event_sync(bm->prov, p->sweep) == GPUARENA_SUCCESS)
            sweep_finish(bm, p);
    }
    ga_sweep_wanted_update(bm);
}

/* Whether some free block is still kept from the streams that did not
 * free it: in a stream pool, or pending (what only ga_sweep_drain frees). */
bool ga_sweep_unsettled(const ga_bm_t *bm)
{
    if (!bm->events)
        return false;
    if (bm->pending_blocks || ga_pool_holds(&bm->limbo))
        return true;
    for (unsigned i = 0; i < bm->npools; i++)
        if (ga_pool_holds(bm->pools[i]))
            return true;
    return false;
}

/* Everything freed so far becomes reusable by every stream (blocking);
 * the status of the wait for the device (a capture in progress refuses
 * it: GPUARENA_ERR_STREAM_CAPTURE). */
gpuarena_status_t ga_sweep_drain(ga_bm_t *bm)
{
    if (!bm->events)
        return GPUARENA_SUCCESS;
    const ga_provider_ops_t *ops = bm->prov->ops;
    if (ops->sync_all) {
        gpuarena_status_t st = ops->sync_all(bm->prov);
        if (st != GPUARENA_SUCCESS)
            return st;            /* refused, or the device is in error: every block stays */
        ga_sweep_poll(bm, false); /* all complete now */
        ga_limbo_release(bm);
        /* Every free has completed: each pool's blocks go as a sweep's
         * would, with no event (one asked for here could fail, for want
         * of host memory, and keep them). */
        for (unsigned i = 0; i < bm->npools; i++) {
            ga_pool_t *p = bm->pools[i];
            if (!ga_pool_holds(p))
                continue;
            p->sweep_seq = p->seq;
            p->wanted = false;
            sweep_finish(bm, p);
        }
        ga_sweep_wanted_update(bm);
    } else {
        ga_sweep_poll(bm, true);
    }
    return GPUARENA_SUCCESS;
}
