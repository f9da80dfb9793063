/*
 * direct.c - the block manager over a direct provider (provider.h:
 * alloc_async and friends; the driver's cuMemPool in driverpool.c).
 *
 * The provider hands out every block itself, in stream order, and orders
 * reuse itself; each request is passed straight through.  What stays here
 * is what every arena owes its caller, whoever caches:
 *
 * - The live map: a free or record_stream of a pointer that is not a live
 *   block is refused before anything changes, with the statuses of every
 *   arena: GPUARENA_ERR_INTERIOR_POINTER inside a live block,
 *   GPUARENA_ERR_DOUBLE_FREE for one of the last GA_DIRECT_FREED frees
 *   (older ones read as foreign: the provider may have handed the address
 *   out again since, and then it is live or inside a live block),
 *   GPUARENA_ERR_INVALID_POINTER otherwise.
 * - The counters: requested, in use (requests rounded up to `round`, the
 *   size the provider is asked for), their peaks, allocations, frees and
 *   live blocks.  Reserved and cached bytes are the provider's (its stats
 *   hook); nothing is reserved here.
 * - record_stream: before the free, the free's stream is made to wait
 *   (stream_wait) on an event recorded on every other stream that used the
 *   block, so that the pool, which orders reuse by the free's stream,
 *   cannot hand the block out before those streams are done with it.
 *   (Holding the block back and freeing it once the events complete, as
 *   the segment arenas do, would need a later provider free on a stream
 *   named in an earlier call, which the program may have destroyed, and
 *   would keep the memory from the pool longer; the wait costs one event
 *   per recorded stream and blocks nothing.)  Where an event cannot be
 *   recorded or waited on (a recorded stream the program has destroyed
 *   since, no host memory), or the uses are unknown (record_stream had no
 *   memory to note one), the block is held instead: kept from the pool,
 *   and freed to it on the legacy stream once trim or the out-of-memory
 *   path has waited for the whole device, as the segment arenas' limbo
 *   (limbo.c).  Waiting for the device in the free blocked the host, and
 *   broke any capture in progress in the driver's global capture mode.
 * - Out of memory: the pool's cached memory is released (trim) and the
 *   request retried; where that was not enough, once every free has
 *   completed (sync_all), again: the only path that blocks the host, as
 *   in every arena, and only where the first step could not serve.
 * - max_cached: after a free, cached memory above the cap is released
 *   (trim), as far as the pool can without waiting: memory whose free has
 *   not completed goes at a later free or trim.
 * - gpuarena_trim: waits for all work (so that every free has completed),
 *   then releases cached memory down to KEEP bytes; no wait where nothing
 *   could be released.
 * - A provider free that fails leaves the block live and counted, as the
 *   provider still holds it: the caller may free it again.  (So does the
 *   free that undoes an allocation whose zero fill failed, if it fails
 *   too: a context in that state is broken, and the block shows as live.)
 *
 * Every operation holds the manager's lock across its provider calls, so
 * that the live map, the counters and the provider's count of live blocks
 * always agree (the checker compares them).  There is no thread cache.
 */
#include "block/internal.h"

#include "errors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static inline size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) & ~(a - 1);
}

gpuarena_status_t ga_direct_init(ga_bm_t *bm)
{
    const ga_provider_ops_t *o = bm->prov->ops;
    if (!o->alloc_async || !o->free_async || !o->usage || !o->trim || !o->event_create ||
        !o->event_destroy || !o->event_record || !o->stream_wait || !o->sync_all)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "%s: a direct provider needs alloc_async, free_async, usage, trim, "
                        "events, stream_wait and sync_all",
                        o->name);
    bm->d.freed = calloc(GA_DIRECT_FREED, sizeof *bm->d.freed);
    if (!bm->d.freed)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a block manager");
    return GPUARENA_SUCCESS;
}

/* Give the pool the held blocks, once the device has been waited for
 * (the manager's lock held): on the legacy stream, which always exists.
 * One the provider refuses (a blocking stream captured since the wait)
 * stays held for the next time.  The pool counts a block freed so as
 * outstanding until the host has seen the free complete (cuMemPoolTrimTo
 * releases none of it): so when any went, THEN_WAIT waits for the device
 * again, for the trim or the retry that follows (measured on an H200: a
 * trim left the held gigabyte reserved, and a retry with reuse across
 * streams off ran out of memory). */
static void free_held(ga_bm_t *bm, bool then_wait)
{
    ga_provider_t *p = bm->prov;
    uint64_t held = bm->d.held_blocks;
    for (ga_block_t **at = &bm->d.held, *b; (b = *at) != NULL;) {
        if (p->ops->free_async(p, (void *)b->addr, b->size, GPUARENA_STREAM_HOST) !=
            GPUARENA_SUCCESS) {
            at = &b->next;
            continue;
        }
        *at = b->next;
        bm->d.held_blocks--;
        bm->d.held_bytes -= b->size;
        ga_bm_block_delete(bm, b);
    }
    if (then_wait && bm->d.held_blocks < held)
        (void)p->ops->sync_all(p);
}

void ga_direct_fini(ga_bm_t *bm)
{
    for (ga_block_t *b = bm->d.live; b; b = b->next)
        ga_uses_free(b->uses);
    bm->d.live = NULL;
    /* The pool gives its memory back only once every block is freed: the
     * held ones after the device's wait, or as they are where a capture
     * refuses it (the arena goes, as in every arena). */
    if (bm->d.held) {
        (void)bm->prov->ops->sync_all(bm->prov);
        free_held(bm, false); /* the pool's destruction waits for them */
        while (bm->d.held) {
            ga_block_t *b = bm->d.held;
            bm->d.held = b->next;
            (void)bm->prov->ops->free_async(bm->prov, (void *)b->addr, b->size,
                                            GPUARENA_STREAM_HOST);
            ga_bm_block_delete(bm, b);
        }
        bm->d.held_blocks = bm->d.held_bytes = 0;
    }
    free(bm->d.freed);
    bm->d.freed = NULL;
}

/* ------------------------------------------------------------------ */
/* Bad pointers.                                                       */

gpuarena_status_t ga_direct_bad_pointer(ga_bm_t *bm, uintptr_t a, const char *what)
{
    for (const ga_block_t *b = bm->d.live; b; b = b->next)
        if (a > b->addr && a - b->addr < b->size)
            return ga_error(GPUARENA_ERR_INTERIOR_POINTER,
                            "%s: %p points inside a block starting at %p", what, (void *)a,
                            (void *)b->addr);
    /* A held block is still this arena's, however many frees came since
     * (the ring below forgets). */
    for (const ga_block_t *b = bm->d.held; b; b = b->next) {
        if (a == b->addr)
            return ga_error(GPUARENA_ERR_DOUBLE_FREE, "%s: %p was already freed", what, (void *)a);
        if (a > b->addr && a - b->addr < b->size)
            return ga_error(GPUARENA_ERR_INVALID_POINTER,
                            "%s: %p points inside a freed block starting at %p", what, (void *)a,
                            (void *)b->addr);
    }
    /* Newest first: the last free of an address is the one that counts. */
    for (unsigned i = 0; i < bm->d.nfreed; i++) {
        const struct ga_freed *f =
            &bm->d.freed[(bm->d.next + GA_DIRECT_FREED - 1 - i) % GA_DIRECT_FREED];
        if (f->addr == a)
            return ga_error(GPUARENA_ERR_DOUBLE_FREE, "%s: %p was already freed", what, (void *)a);
        if (a > f->addr && a - f->addr < f->size)
            return ga_error(GPUARENA_ERR_INVALID_POINTER,
                            "%s: %p points inside a freed block starting at %p", what, (void *)a,
                            (void *)f->addr);
    }
    return ga_error(GPUARENA_ERR_INVALID_POINTER, "%s: %p was not handed out by this arena", what,
                    (void *)a);
}

static void remember_free(ga_bm_t *bm, uintptr_t a, size_t size)
{
    bm->d.freed[bm->d.next].addr = a;
    bm->d.freed[bm->d.next].size = size;
    bm->d.next = (bm->d.next + 1) % GA_DIRECT_FREED;
    if (bm->d.nfreed < GA_DIRECT_FREED)
        bm->d.nfreed++;
}

/* ------------------------------------------------------------------ */
/* Releasing the pool's cached memory.                                 */

/* BASE bytes in use and KEEP cached: what the pool may reserve. */
static uint64_t with_keep(uint64_t base, uint64_t keep)
{
    return base > UINT64_MAX - keep ? UINT64_MAX : base + keep;
}

/* Release cached memory until at most KEEP bytes stay cached, without
 * waiting; *DONE: whether the provider was asked. */
static gpuarena_status_t release_cached(ga_bm_t *bm, uint64_t keep, bool *done)
{
    ga_provider_t *p = bm->prov;
    uint64_t reserved = 0, used = 0;
    *done = false;
    gpuarena_status_t st = p->ops->usage(p, &reserved, &used);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* The pool's own count of what it hands out may exceed ours by its
     * rounding: it can release nothing of that. */
    uint64_t base = used > bm->c.in_use ? used : bm->c.in_use;
    uint64_t target = with_keep(base, keep);
    if (reserved <= target)
        return GPUARENA_SUCCESS;
    *done = true;
    return p->ops->trim(p, target);
}

/* release_cached, counted as a release pass (trims) where the provider
 * was asked and did it: whether it was. */
static bool release_counted(ga_bm_t *bm, uint64_t keep)
{
    /* Its callers (a free over max_cached, the out-of-memory retry) go on
     * whatever the pool did: a refusal is no failure of theirs, and the
     * thread's message stays as it was (gpuarena_last_error(3)). */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    bool done;
    gpuarena_status_t st = release_cached(bm, keep, &done);
    ga_error_restore(&saved);
    if (st != GPUARENA_SUCCESS || !done)
        return false;
    bm->c.trims++;
    return true;
}

/* ------------------------------------------------------------------ */
/* Allocation and free.                                                */

gpuarena_status_t ga_direct_alloc(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr)
{
    ga_provider_t *p = bm->prov;
    size_t rs = round_up(size, bm->round);
    ga_lock(&bm->lock);
    /* The record first: running out of host memory leaves nothing
     * allocated. */
    ga_block_t *b = ga_bm_block_new(bm);
    if (!b) {
        ga_unlock(&bm->lock);
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a block record");
    }
    void *q = NULL;
    /* max_reserved bounds what is in use here (what the pool caches
     * beyond it is the release threshold's), so past the cap releasing
     * the pool's cache cannot help: no retry then. */
    bool capped = rs > ga_cap_room(bm->c.in_use, bm->set.max_reserved);
    /* The caller's message, for an allocation that the retry below saves:
     * the pool's first refusal is no failure of the call then. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    gpuarena_status_t st =
        capped ? GPUARENA_ERR_OUT_OF_MEMORY : p->ops->alloc_async(p, rs, s.handle, &q);
    if (st == GPUARENA_ERR_OUT_OF_MEMORY && !capped) {
        /* Release what the pool caches and retry: first with no wait
         * (what completed frees left), then, where that was not enough,
         * once every free has completed, the only path that blocks the
         * host.  Waiting first broke another thread's capture (the
         * driver's global mode) where the first step would have done. */
        bm->c.oom_retries++;
        if (release_counted(bm, 0))
            st = p->ops->alloc_async(p, rs, s.handle, &q);
        if (st == GPUARENA_ERR_OUT_OF_MEMORY) {
            if (p->ops->sync_all(p) == GPUARENA_SUCCESS) {
                free_held(bm, true);
                (void)release_counted(bm, 0);
            }
            st = p->ops->alloc_async(p, rs, s.handle, &q);
        }
        if (st == GPUARENA_SUCCESS)
            ga_error_restore(&saved);
    }
    if (st != GPUARENA_SUCCESS) {
        ga_bm_block_delete(bm, b);
        if (st == GPUARENA_ERR_OUT_OF_MEMORY)
            st = ga_bm_out_of_memory(bm, size, st);
        ga_unlock(&bm->lock);
        return st;
    }
    b->addr = (uintptr_t)q;
    b->size = rs;
    b->state = BLOCK_LIVE;
    b->requested = b->requested_bm = size;
    b->stream_id = s.id;
    st = ga_lmap_insert(&bm->live, b);
    if (st != GPUARENA_SUCCESS) {
        /* Give it back on the stream it came from: nothing was done with
         * it. */
        (void)p->ops->free_async(p, q, rs, s.handle);
        ga_bm_block_delete(bm, b);
        ga_unlock(&bm->lock);
        return ga_error(st, "no memory for the live-block map");
    }
    b->prev = NULL;
    b->next = bm->d.live;
    if (bm->d.live)
        bm->d.live->prev = b;
    bm->d.live = b;
    bm->c.requested += size;
    bm->c.in_use += rs;
    bm->c.allocs++;
    bm->c.live++;
    ga_bm_update_peaks(bm);
    ga_unlock(&bm->lock);
    if (bm->set.zero && p->ops->memzero) {
        st = p->ops->memzero(p, q, size, s.handle);
        if (st != GPUARENA_SUCCESS) {
            /* Nothing was handed out: neither counted. */
            if (ga_direct_free(bm, q, s) == GPUARENA_SUCCESS)
                ga_bm_uncount_alloc(bm, GA_SERVED_DIRECT);
            return st; /* *PTR left as it was, gpuarena_alloc(3) */
        }
    }
    *ptr = q;
    return st;
}

/* Make the free's stream S wait for every other stream that used B
 * (record_stream), on the GPU; whether that was done for every one (else
 * the block is held, above). */
static bool wait_for_uses(ga_bm_t *bm, const ga_block_t *b, ga_stream_t s)
{
    ga_provider_t *p = bm->prov;
    const ga_uses_t *u = b->uses;
    bool unwatched = u == GA_USES_UNKNOWN;
    for (unsigned i = 0; u && !unwatched && i < u->count; i++) {
        if (u->s[i].id == s.id)
            continue;
        ga_event_t ev;
        if (!ga_bm_use_named_here(bm, u->s[i]) ||
            p->ops->event_create(p, &ev) != GPUARENA_SUCCESS) {
            unwatched = true;
            continue;
        }
        if (p->ops->event_record(p, ev, u->s[i].handle) == GPUARENA_SUCCESS) {
            bm->c.events++;
            if (p->ops->stream_wait(p, s.handle, ev) == GPUARENA_SUCCESS)
                bm->c.waits++;
            else
                unwatched = true;
        } else {
            unwatched = true;
        }
        /* The wait is enqueued: the event may be recorded again. */
        p->ops->event_destroy(p, ev);
    }
    return !unwatched;
}

gpuarena_status_t ga_direct_free(ga_bm_t *bm, void *ptr, ga_stream_t s)
{
    ga_provider_t *p = bm->prov;
    uintptr_t a = (uintptr_t)ptr;
    ga_lock(&bm->lock);
    ga_block_t *b = ga_lmap_find(&bm->live, a);
    gpuarena_status_t st;
    if (!b || b->addr != a || b->state != BLOCK_LIVE) {
        st = ga_direct_bad_pointer(bm, a, "gpuarena_free");
        ga_unlock(&bm->lock);
        return st;
    }
    st = ga_bm_uses_check(bm, b, s);
    bool hold = st == GPUARENA_SUCCESS && !wait_for_uses(bm, b, s);
    if (st == GPUARENA_SUCCESS && !hold)
        st = p->ops->free_async(p, ptr, b->size, s.handle);
    if (st != GPUARENA_SUCCESS) {
        /* The block stays live, as it was: the caller may free it again. */
        ga_unlock(&bm->lock);
        return st;
    }
    ga_lmap_remove(&bm->live, b);
    if (b->prev)
        b->prev->next = b->next;
    else
        bm->d.live = b->next;
    if (b->next)
        b->next->prev = b->prev;
    bm->c.requested -= b->requested_bm;
    bm->c.in_use -= b->size;
    bm->c.frees++;
    bm->c.live--;
    remember_free(bm, a, b->size);
    ga_uses_free(b->uses);
    b->uses = NULL;
    if (hold) {
        b->state = BLOCK_PENDING;
        b->next = bm->d.held;
        bm->d.held = b;
        bm->d.held_blocks++;
        bm->d.held_bytes += b->size;
    } else {
        ga_bm_block_delete(bm, b);
    }
    ga_direct_cap(bm);
    ga_bm_update_peaks(bm);
    ga_unlock(&bm->lock);
    return GPUARENA_SUCCESS;
}

void ga_direct_cap(ga_bm_t *bm)
{
    if (bm->set.max_cached != SIZE_MAX)
        (void)release_counted(bm, bm->set.max_cached);
}

gpuarena_status_t ga_direct_trim(ga_bm_t *bm, size_t keep)
{
    ga_provider_t *p = bm->prov;
    ga_lock(&bm->lock);
    /* Memory whose free has not been seen complete cannot be released:
     * wait for every stream first, as trim does in every arena; unless
     * nothing could be released after it (no block held, and the pool
     * reserves no more than what is in use and KEEP): a trim that needs
     * no wait disturbs no capture (gpuarena_trim(3)). */
    bool done;
    uint64_t reserved = 0, used = 0;
    gpuarena_status_t st = p->ops->usage(p, &reserved, &used);
    bool needed = st != GPUARENA_SUCCESS || bm->d.held || reserved > with_keep(bm->c.in_use, keep);
    st = needed ? p->ops->sync_all(p) : GPUARENA_SUCCESS;
    if (st == GPUARENA_SUCCESS && needed) {
        free_held(bm, true);
        st = release_cached(bm, keep, &done);
    }
    bm->c.trims++;
    ga_bm_update_peaks(bm);
    ga_unlock(&bm->lock);
    return st;
}

/* ------------------------------------------------------------------ */
/* The invariant checker.                                              */

static int by_address(const void *x, const void *y)
{
    const ga_block_t *a = *(ga_block_t *const *)x, *b = *(ga_block_t *const *)y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

#define FAIL(...) return ga_error(GPUARENA_ERR_CORRUPT, "check: " __VA_ARGS__)

static gpuarena_status_t check_locked(ga_bm_t *bm, ga_block_t **v, uint64_t n)
{
    uint64_t count = 0, requested = 0, in_use = 0;
    const ga_block_t *prev = NULL;
    for (ga_block_t *b = bm->d.live; b; prev = b, b = b->next) {
        if (b->state != BLOCK_LIVE || b->seg || b->prev != prev)
            FAIL("block %p of a direct arena has state %u or bad links", (void *)b->addr, b->state);
        if (!b->size || b->requested_bm > b->size || b->size % bm->round)
            FAIL("block %p has %zu bytes for a request of %zu (rounding %zu)", (void *)b->addr,
                 b->size, b->requested_bm, bm->round);
        if (ga_lmap_find(&bm->live, b->addr) != b)
            FAIL("live block %p is missing from the live map", (void *)b->addr);
        if (count < n)
            v[count] = b;
        count++;
        requested += b->requested_bm;
        in_use += b->size;
    }
    uintptr_t bad;
    if (!ga_lmap_valid(&bm->live, &bad))
        FAIL("the live map is inconsistent (at %p)", (void *)bad);
    if (count != n || count != bm->live.count || count != bm->c.live)
        FAIL("%" PRIu64 " live blocks listed, the map holds %zu, the totals %" PRIu64, count,
             bm->live.count, bm->c.live);
    if (requested != bm->c.requested || in_use != bm->c.in_use)
        FAIL("requested/in use totals disagree with the blocks");
    if (bm->segs || bm->c.segments || bm->c.reserved || bm->npools || bm->waiters ||
        bm->pending_blocks)
        FAIL("a direct arena holds segments, pools or pending frees");
    uint64_t held = 0, held_bytes = 0;
    for (const ga_block_t *b = bm->d.held; b; b = b->next) {
        if (b->state != BLOCK_PENDING || ga_lmap_find(&bm->live, b->addr) == b)
            FAIL("held block %p has state %u or is in the live map", (void *)b->addr, b->state);
        held++;
        held_bytes += b->size;
    }
    if (held != bm->d.held_blocks || held_bytes != bm->d.held_bytes)
        FAIL("%" PRIu64 " blocks held, the totals say %" PRIu64, held, bm->d.held_blocks);
    if (bm->prov->live_maps != count + held)
        FAIL("the provider holds %" PRIu64 " blocks, the arena %" PRIu64 " and %" PRIu64 " held",
             bm->prov->live_maps, count, held);
    if (n > 1)
        qsort(v, n, sizeof *v, by_address);
    for (uint64_t i = 1; i < n; i++)
        if (v[i - 1]->addr + v[i - 1]->size > v[i]->addr)
            FAIL("live blocks %p (%zu bytes) and %p overlap", (void *)v[i - 1]->addr,
                 v[i - 1]->size, (void *)v[i]->addr);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_direct_check(ga_bm_t *bm)
{
    ga_lock(&bm->lock);
    uint64_t n = bm->c.live;
    ga_block_t **v = n ? malloc(n * sizeof *v) : NULL;
    gpuarena_status_t st = n && !v ? ga_error(GPUARENA_ERR_HOST_MEMORY,
                                              "check: no memory to sort %" PRIu64 " blocks", n)
                                   : check_locked(bm, v, n);
    ga_unlock(&bm->lock);
    free(v);
    return st;
}
