/*
 * block.c - the stream-ordered block manager.
 *
 * Data structures (internal.h): segments from the provider, tiled by
 * blocks in address order; free blocks indexed per pool by a two-level
 * segregated fit (fit.h); live blocks found by address in a map that the
 * thread caches read without the lock (livemap.c).
 *
 * The rules of DESIGN.md, "Stream-ordered semantics", and where they live:
 *
 * - A block freed on stream S goes into S's pool: a later allocation on S
 *   may take it at once (stream order makes that safe); no event is
 *   recorded on this path.
 * - Another stream T may take it only once the GPU has passed the free.
 *   When T misses, every stream pool with uncovered frees is marked as
 *   wanted; the next free into such a pool records one event (a "sweep")
 *   covering every free made into it so far.  When a sweep's event has
 *   completed, the blocks it covers move to the ANY pool, which every
 *   stream may use.  With cross_stream = wait, T instead takes the best
 *   fit covered by another pool's outstanding sweep at once and is made to
 *   wait on that event (the host never waits).
 * - A stream handle is used only during the call that names it: the
 *   program may destroy the stream right after.  So events are recorded on
 *   the stream being freed on, never later on a stream remembered.  Trim
 *   and the out-of-memory path wait on the events out, and on one they
 *   record on the stream they were called with (ga_sweep_settle); they catch up
 *   with the rest through sync_all only when that was not enough.
 * - record_stream adds streams to a live block; its free records one event
 *   on each of them and the block stays PENDING until all have completed.
 * - A provider without events (host memory) completes every free at once:
 *   freed blocks go straight to the ANY pool.
 *
 * Segments are fixed (mapped whole, unmapped whole when entirely free) or,
 * where the provider can grow and `expandable` is set, one growable
 * address reservation per size class whose granules are committed as
 * blocks need them and decommitted when cached memory is released.  HOLE
 * blocks stand for the unmapped parts and are found by fit like free ones,
 * so an allocation goes where it maps the fewest new granules.  Mapping,
 * growing and giving back are segment.c's; the records, split and merge
 * they use are here, inline for the hot paths.  The events, sweeps and
 * pending blocks of the rules above are sweep.c's.
 *
 * Only the out-of-memory path blocks the host: it synchronises on the
 * outstanding events, releases every cached byte and retries once.
 *
 * Over a direct provider (the driver's own pool), which hands out every
 * block itself, alloc, free and trim go to direct.c instead: no segments,
 * pools or thread caches, only the live map, the counters and the
 * record_stream rule.
 */
#include "config.h"

#include "array.h"
#include "block/peaks.h"
#include "block/tcache.h"

#include "errors.h"
#include "hostmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest request accepted: far beyond any memory, far below overflow. */
#define MAX_REQUEST ((size_t)1 << 60)
#define SLAB_BLOCKS 256

/* SIZE (at least 1) rounded up to ROUND, and where it is at most
 * class_max, further to the next of the size_classes sizes that split
 * each power of two evenly: with four, 5, 6, 7 and 8 KiB between 4 and
 * 8 KiB.  A thread cache then holds a freed block under its class, and
 * serves every later request of that class from it, where a key of the
 * exact size served only the same size again: on a random mix of sizes
 * nearly every probe missed and the cache went cold (bench_churn).  At
 * most a fifth of a block is rounding with four, about a tenth on
 * average.  A table of steps and a conditional move: the class of a
 * random size is as random as the size, and the computed step cost a
 * cached pair 24 more instructions than the plain rounding, the table 10
 * (bench_churn with one size, by cachegrind). */
static inline size_t class_round(const ga_bm_t *bm, size_t size)
{
    size_t n = size - 1;
    unsigned f = 63u - (unsigned)__builtin_clzll((unsigned long long)(n | 1));
    size_t mask = n < bm->class_max ? bm->class_mask[f] : bm->round - 1;
    return (n | mask) + 1;
}

/* The class steps of class_round for S. */
static void class_setup(ga_bm_t *bm, const ga_settings_t *s)
{
    unsigned shift = s->size_classes ? (unsigned)__builtin_ctz(s->size_classes) : 0;
    for (unsigned f = 0; f < 64; f++) {
        size_t step = f > shift ? (size_t)1 << (f - shift) : 1;
        bm->class_mask[f] = (step > s->round ? step : s->round) - 1;
    }
    /* Size classes serve the thread caches only. */
    bm->class_max = s->thread_cache && s->size_classes ? s->thread_cache_max : 0;
}

/* ------------------------------------------------------------------ */
/* Block records: slabs that live as long as the manager.              */

/* A slab of new records on the spare list (out of line: once per
 * SLAB_BLOCKS records); false when there is no memory. */
static __attribute__((noinline)) bool spare_refill(ga_bm_t *bm)
{
    void **s = ga_room_for_one(bm->slabs, bm->nslabs, &bm->cap_slabs, sizeof *s, 16);
    if (!s)
        return false;
    bm->slabs = s;
    ga_block_t *slab = aligned_alloc(_Alignof(ga_block_t), SLAB_BLOCKS * sizeof *slab);
    if (!slab)
        return false;
    memset(slab, 0, SLAB_BLOCKS * sizeof *slab);
    bm->slabs[bm->nslabs++] = slab;
    for (unsigned i = 0; i < SLAB_BLOCKS; i++) {
        slab[i].next = bm->spare_blocks;
        bm->spare_blocks = &slab[i];
    }
    return true;
}

/* A spare record as it was left (block_new zeroes it; split sets what
 * a free block reads), or NULL when there is no memory for more. */
static inline ga_block_t *block_pop(ga_bm_t *bm)
{
    if (!bm->spare_blocks && !spare_refill(bm))
        return NULL;
    ga_block_t *b = bm->spare_blocks;
    bm->spare_blocks = b->next;
    return b;
}

static inline ga_block_t *block_new(ga_bm_t *bm)
{
    ga_block_t *b = block_pop(bm);
    if (!b)
        return NULL;
    /* Eight 16-byte stores: memset, or a loop the compiler turns into
     * one, becomes a rep stos whose start-up costs more than the rest of
     * a split. */
    typedef uint64_t zero16 __attribute__((vector_size(16), may_alias));
    zero16 *z = (zero16 *)(void *)b;
    const zero16 zero = {0, 0};
    z[0] = zero, z[1] = zero, z[2] = zero, z[3] = zero;
    z[4] = zero, z[5] = zero, z[6] = zero, z[7] = zero;
    return b;
}

static void block_delete(ga_bm_t *bm, ga_block_t *b)
{
    b->state = 0;
    b->addr = 0;
    b->next = bm->spare_blocks;
    bm->spare_blocks = b;
}

ga_block_t *ga_bm_block_new(ga_bm_t *bm)
{
    return block_new(bm);
}

void ga_bm_block_delete(ga_bm_t *bm, ga_block_t *b)
{
    block_delete(bm, b);
}

/* Make sure two records are spare, so that the two splits that follow
 * cannot fail half-way; false when there is no memory for them. */
static bool spare_records(ga_bm_t *bm)
{
    ga_block_t *a = block_new(bm), *b = block_new(bm);
    if (a)
        block_delete(bm, a);
    if (b)
        block_delete(bm, b);
    return a && b;
}

/* ------------------------------------------------------------------ */
/* Pools.                                                              */

/* The walk of pool_find: the pool found last is not ID's. */
static ga_pool_t *pool_walk(ga_bm_t *bm, uint64_t id)
{
    for (unsigned i = 0; i < bm->npools; i++) {
        if (bm->pools[i]->stream.id == id) {
            bm->last_pool = bm->pools[i];
            return bm->last_pool;
        }
    }
    return NULL;
}

/* The pool of stream ID, or NULL.  A free and the allocation after it ask
 * for the same stream: the pool found last is checked first, inline
 * (pools live as long as the manager). */
static inline ga_pool_t *pool_find(ga_bm_t *bm, uint64_t id)
{
    ga_pool_t *p = bm->last_pool;
    if (p && p->stream.id == id)
        return p;
    return pool_walk(bm, id);
}

/* A new pool for S; NULL when out of memory. */
static __attribute__((noinline)) ga_pool_t *pool_make(ga_bm_t *bm, ga_stream_t s)
{
    ga_limbo_make_room(bm);
    ga_pool_t **n = ga_room_for_one(bm->pools, bm->npools, &bm->cap_pools, sizeof *n, 8);
    if (!n)
        return NULL;
    bm->pools = n;
    ga_pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->stream = s;
    p->is_stream = true;
    p->used = ++bm->pool_clock;
    bm->pools[bm->npools++] = p;
    return p;
}

/* The pool a free on S goes to, made if there is none yet (ANY where the
 * provider has no events); NULL when out of memory. */
static inline ga_pool_t *pool_get(ga_bm_t *bm, ga_stream_t s)
{
    if (!bm->events)
        return &bm->any;
    ga_pool_t *p = pool_find(bm, s.id);
    if (!p)
        return pool_make(bm, s);
    p->stream.handle = s.handle; /* the newest handle of this stream */
    p->used = ++bm->pool_clock;
    return p;
}

static inline bool is_stream_pool(const ga_pool_t *p)
{
    return p->is_stream; /* a flag, not two compares: read on every merge */
}

/* Take B out of its pool's index (it stays in the segment's list). */
static void pool_take(ga_block_t *b)
{
    ga_pool_t *p = b->pool;
    ga_fit_remove(&p->fit[b->cls], b);
    b->pool = NULL;
}

/* Put B into pool P as it is (no merging). */
static void pool_put(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b)
{
    b->pool = p;
    b->state = p == &bm->holes ? BLOCK_HOLE : BLOCK_FREE;
    ga_fit_insert(&p->fit[b->cls], b);
}

/* May a free neighbour in pool Q join a block going into pool P?  Blocks
 * of ANY are safe for every stream, so a stream pool takes them in: the
 * larger block is worth more to its stream than the pieces to the others,
 * and the next sweep gives it back to ANY; the part its stream did not
 * use since goes back sooner, before the arena grows for another stream
 * (ga_pool_reclaim) and when the pool is retired (ga_block_used).  Holes
 * and limbo take none in: limbo's blocks wait for a drain (limbo.c).
 * Nor does a shared pool (ga_pool_t.shared): there other streams, or
 * allocations with no stream, need ANY, and each free of the stream took
 * back the blocks that the last sweep had just given ANY.  Three streams
 * (1, 2 and none) at random, 48 blocks up to 8 MiB each freed on a random
 * one of them, reserved 2.9 GiB after 3 M operations (peak request 271
 * MiB) with it, about 0.7 GiB without it and ga_sweep_shared. */
static inline bool joins(const ga_bm_t *bm, const ga_block_t *n, const ga_pool_t *p)
{
    if (n->state != BLOCK_FREE && n->state != BLOCK_HOLE)
        return false; /* live, or pending (its pool is where it will go) */
    return n->pool == p || (n->pool == &bm->any && is_stream_pool(p) && !p->shared);
}

/* Merge R, the right neighbour of L, into L (both in no pool). */
static void absorb(ga_bm_t *bm, ga_block_t *l, ga_block_t *r)
{
    l->size += r->size;
    l->next = r->next;
    if (r->next)
        r->next->prev = l;
    else
        l->seg->last = l;
    block_delete(bm, r);
}

/* Widen [*LO, *HI) by what the stream used of N, a neighbour joining a
 * block of P: N's part if N is P's, none if it is ANY's (ga_block_used).
 * Selects, not branches: whose a neighbour is is as random as the frees
 * (a branch here cost bench_churn 0.8 mispredictions a pair).  Outside a
 * stream pool the span is computed and never read. */
static inline void used_span(const ga_block_t *n, const ga_pool_t *p, uintptr_t *lo, uintptr_t *hi)
{
    unsigned mine = n->pool == p;
    uintptr_t nlo = ga_select(mine, n->ulo, UINTPTR_MAX), nhi = ga_select(mine, n->uhi, 0);
    *lo = nlo < *lo ? nlo : *lo;
    *hi = nhi > *hi ? nhi : *hi;
}

/* A stream pool's free block keeps, beside its stamp (the newest of its
 * pieces), an old part: a run of it whose pieces are all stamped up to
 * ostamp.  A sweep that completes gives ANY the blocks it covers whole,
 * and of the others the old part it covers (sweep.c): without it, a
 * stream freeing blocks next to each other merged each free into the
 * block a sweep had just covered, whose stamp then passed the sweep's,
 * so no sweep ever released anything: 64 MiB stayed cached under a
 * max_cached of 4 MiB, and other streams grew the arena beside it.
 *
 * The old part of a merge is one run, so of two that do not touch one
 * is dropped (it goes with a later sweep, as the whole block does).
 * While a sweep is out (up to S), the run it covers is kept; with none
 * out, the next sweep covers every block as it is, and the runs join.
 * GOOD: whether a run would go with the sweep out (or the next). */
typedef struct old_part {
    uintptr_t lo, hi;
    uint64_t stamp;
} old_part_t;

static inline uintptr_t old_size(const old_part_t *o)
{
    return o->lo < o->hi ? o->hi - o->lo : 0;
}

static inline bool old_good(const ga_pool_t *p, const old_part_t *o)
{
    return o->lo < o->hi && (!p->sweep || o->stamp <= p->sweep_seq);
}

/* The old part that N, a neighbour joining a block of stream pool P,
 * brings: all of it when it is ANY's (every stream's already), or when
 * its stamp says the sweep out covers all of it or no sweep out covers
 * its old part either; else its own. */
static inline old_part_t old_of(const ga_pool_t *p, const ga_block_t *n)
{
    old_part_t all = {n->addr, n->addr + n->size, n->pool == p ? n->stamp : 0};
    if (n->pool != p || n->ostamp == GA_OLD_WHOLE)
        return all;
    old_part_t own = {n->olo, n->ohi, n->ostamp};
    return old_good(p, &own) && !old_good(p, &all) ? own : all;
}

/* The old part of a block made of *O's and N's blocks (N the one of
 * their two runs that comes later in memory when LATER). */
static inline void old_merge(const ga_pool_t *p, old_part_t *o, old_part_t n, bool later)
{
    bool touch = later ? o->hi == n.lo : n.hi == o->lo;
    bool go = old_good(p, o), gn = old_good(p, &n);
    if (touch && old_size(o) && old_size(&n) && go == gn) {
        o->lo = later ? o->lo : n.lo;
        o->hi = later ? n.hi : o->hi;
        o->stamp = o->stamp > n.stamp ? o->stamp : n.stamp;
    } else if (gn > go || (gn == go && old_size(&n) > old_size(o))) {
        *o = n;
    }
}

/* Merge free block B (in no pool) with its neighbours of pool P, put the
 * result in P and return it.  In a stream pool the merged block takes the
 * newest stamp of its pieces: a sweep then releases it only once it
 * covers every piece; its old part (above) goes before. */
static ga_block_t *coalesce_into(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b, uint64_t stamp)
{
    /* Loops: an ANY neighbour taken in may have a neighbour of P. */
    ga_block_t *n;
    uintptr_t lo = b->ulo, hi = b->uhi; /* a stream pool's: what its stream used */
    old_part_t old = {b->addr, b->addr + b->size, stamp};
    bool stream = is_stream_pool(p);
    /* Only a sweep out that is to give old parts away needs them kept
     * apart; else the old part is the whole block (the next sweep covers
     * it all), which costs a random churn on a stream nothing. */
    bool apart = stream && p->sweep && p->parts;
    while ((n = b->next) && joins(bm, n, p)) {
        if (stream)
            stamp = n->stamp > stamp ? n->stamp : stamp;
        if (apart)
            old_merge(p, &old, old_of(p, n), true);
        used_span(n, p, &lo, &hi);
        pool_take(n);
        absorb(bm, b, n);
    }
    ga_block_t *v;
    while ((v = b->prev) && joins(bm, v, p)) {
        if (stream)
            stamp = v->stamp > stamp ? v->stamp : stamp;
        if (apart)
            old_merge(p, &old, old_of(p, v), false);
        used_span(v, p, &lo, &hi);
        pool_take(v);
        absorb(bm, v, b);
        b = v;
    }
    b->stamp = stamp;
    b->ulo = lo;
    b->uhi = hi;
    b->ostamp = GA_OLD_WHOLE;
    if (apart) {
        b->olo = old.lo;
        b->ohi = old.hi;
        b->ostamp = old.stamp;
    }
    pool_put(bm, p, b);
    return b;
}

/* Give free block B (in no pool) to pool P: stream pools stamp it. */
static ga_block_t *free_into(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b)
{
    uint64_t stamp = is_stream_pool(p) ? ++p->seq : 0;
    ga_block_used(b, true);
    return coalesce_into(bm, p, b, stamp);
}

/* Split B (in no pool) at SIZE; the tail is a new block of the same state,
 * returned (NULL when out of records: then B stays whole).  B is free or
 * a hole, and so is the tail: every field such a block reads is set here,
 * none zeroed first (the eight stores of block_new were a tenth of a
 * split). */
static inline ga_block_t *split(ga_bm_t *bm, ga_block_t *b, size_t size)
{
    ga_block_t *t = block_pop(bm);
    if (!t)
        return NULL;
    t->pool = NULL;
    atomic_store_explicit(&t->cached, 0, memory_order_relaxed);
    t->addr = b->addr + size;
    t->size = b->size - size;
    t->seg = b->seg;
    t->cls = b->cls;
    t->state = b->state;
    t->stamp = b->stamp;
    /* What the stream used, cut in two (stream pools: ga_block_used); a
     * side left with none reads empty (ulo > uhi). */
    t->ulo = ga_select(b->ulo > t->addr, b->ulo, t->addr);
    t->uhi = b->uhi;
    b->uhi = ga_select(b->uhi < t->addr, b->uhi, t->addr);
    /* The old parts (coalesce_into): all of each, which is right if not
     * the best (a sweep that covers the whole block gives it away). */
    t->ostamp = GA_OLD_WHOLE;
    b->ostamp = GA_OLD_WHOLE;
    t->prev = b;
    t->next = b->next;
    if (b->next)
        b->next->prev = t;
    else
        b->seg->last = t;
    b->next = t;
    b->size = size;
    return t;
}

/* The primitives above, out of line for segment.c and sweep.c
 * (internal.h). */
bool ga_bm_spare_records(ga_bm_t *bm)
{
    return spare_records(bm);
}

void ga_bm_pool_put(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b)
{
    pool_put(bm, p, b);
}

void ga_bm_pool_take(ga_block_t *b)
{
    pool_take(b);
}

/* The old part of B cut to [LO, HI) and stamped ST: all of B where
 * nothing of it is left. */
static void old_cut(ga_block_t *b, uintptr_t lo, uintptr_t hi, uint64_t st)
{
    lo = lo > b->addr ? lo : b->addr;
    hi = hi < b->addr + b->size ? hi : b->addr + b->size;
    b->olo = lo;
    b->ohi = hi;
    b->ostamp = lo < hi ? st : GA_OLD_WHOLE;
}

/* split() for sweep.c and segment.c, which keep a stream pool's blocks
 * free: each side keeps its share of the old part (split makes both
 * whole, which is all an allocation's tail needs on the hot path). */
ga_block_t *ga_bm_split(ga_bm_t *bm, ga_block_t *b, size_t size)
{
    uintptr_t lo = b->olo, hi = b->ohi;
    uint64_t st = b->ostamp;
    ga_block_t *t = split(bm, b, size);
    if (t && st != GA_OLD_WHOLE) {
        old_cut(b, lo, hi, st);
        old_cut(t, lo, hi, st);
    }
    return t;
}

ga_block_t *ga_bm_coalesce(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b, uint64_t stamp)
{
    return coalesce_into(bm, p, b, stamp);
}

ga_pool_t *ga_bm_pool_find(ga_bm_t *bm, uint64_t id)
{
    return pool_find(bm, id);
}

ga_block_t *ga_bm_free_into(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b)
{
    return free_into(bm, p, b);
}

/* ------------------------------------------------------------------ */
/* Caps.                                                               */

/* max_cached: after blocks went back to the pools.  What ANY holds goes
 * at once; what the stream pools hold, once the GPU has passed its frees:
 * each pool is asked for a sweep, which its stream's next free records
 * (ga_sweep_on_free), and the polls of later frees release what it
 * covers once it completes.  A stream that frees no more keeps its
 * pool's blocks until trim. */
static __attribute__((noinline)) void release_over_cap(ga_bm_t *bm, uint64_t cached)
{
    ga_sweep_poll(bm, false);
    ga_seg_release(bm, cached - bm->set.max_cached);
    if (bm->npools && bm->c.reserved - bm->c.in_use > bm->set.max_cached)
        ga_sweep_request_all(bm, NULL);
}

/* Inline: every locked free asks, and nearly always the answer is no. */
static inline void enforce_cap(ga_bm_t *bm)
{
    uint64_t cached = bm->c.reserved - bm->c.in_use;
    if (cached > bm->set.max_cached)
        release_over_cap(bm, cached);
}

void ga_bm_caches_returned(ga_bm_t *bm)
{
    enforce_cap(bm);
    /* The in-use count fell by what came back, and the thread caches'
     * lock-free peak checks measure against the one last published: a
     * stale, higher one would hide the next cached peak.  Only the cached
     * peak can have risen.  The requested and in-use ones are left alone:
     * measured from a thread whose caches are gone (at its exit), they
     * would count what other threads' caches hold as in use. */
    uint64_t r, u;
    ga_publish_bases(bm, &r, &u);
    ga_peak_max(&bm->peak.cached, ga_cached_bytes(bm, u));
}

void ga_bm_set_caps(ga_bm_t *bm, const size_t *max_cached, const size_t *max_reserved)
{
    ga_lock(&bm->lock);
    if (max_cached)
        bm->set.max_cached = *max_cached;
    if (max_reserved)
        bm->set.max_reserved = *max_reserved;
    /* Blocks in thread caches count as in use (enforce_cap): a lower cap
     * releases what the pools hold now, the caches' blocks as they come
     * back. */
    if (bm->direct)
        ga_direct_cap(bm);
    else
        enforce_cap(bm);
    ga_bm_update_peaks(bm);
    ga_unlock(&bm->lock);
}

void ga_bm_caps(ga_bm_t *bm, size_t *max_cached, size_t *max_reserved)
{
    ga_lock(&bm->lock);
    *max_cached = bm->set.max_cached;
    *max_reserved = bm->set.max_reserved;
    ga_unlock(&bm->lock);
}

/* ------------------------------------------------------------------ */
/* Streams named without a capture check.                              */

/* The capture check of a stream that the provider named without one
 * (GA_UNCHECKED, provider.h; UNCHECKED of ga_bm_alloc_on), made before
 * anything changes that may reach the provider with it.  Only the thread
 * caches' hits on a plain manager go without: they reach nothing, so
 * nothing they do can disturb a capture. */
static gpuarena_status_t stream_check(ga_bm_t *bm, ga_stream_t s)
{
    return bm->prov->ops->stream_check(bm->prov, s.handle);
}

/* Whether recorded use U's handle still names, from the calling thread,
 * the stream that was recorded: a thread-relative handle (CUDA's
 * per-thread default stream) names the freeing thread's own stream when
 * another thread recorded it, and an event there would complete with
 * nothing of the recorded stream's work behind it.  Asked only after
 * ga_bm_uses_check (a stream's id may not be asked while it is captured),
 * of a free that records an event per use anyway. */
bool ga_bm_use_named_here(ga_bm_t *bm, ga_stream_t u)
{
    uint64_t id;
    return bm->prov->ops->stream_id(bm->prov, u.handle, &id) == GPUARENA_SUCCESS && id == u.id;
}

/* One driver call per recorded stream, on a free that records an event
 * on each of them anyway (an event record costs far more). */
gpuarena_status_t ga_bm_uses_check(ga_bm_t *bm, const ga_block_t *b, ga_stream_t s)
{
    const ga_uses_t *u = b->uses;
    if (!u || !bm->prov->ops->stream_check)
        return GPUARENA_SUCCESS;
    for (unsigned i = 0; i < u->count; i++) {
        if (u->s[i].id == s.id)
            continue;
        gpuarena_status_t st = stream_check(bm, u->s[i]);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    return GPUARENA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Allocation.                                                         */

/* The block for RS bytes of class CLS on S: from S's own pool first
 * where segments grow in place (own_first), else the closer fit of S's
 * pool and ANY.  Best fit across both let a busy stream drain ANY into its
 * pool, where the other streams (and allocations with no stream) cannot
 * reach it until a sweep, and they grew the arena: one stream and no
 * stream at random, each block freed on its allocation's stream, reserved
 * 2.99 GiB for a peak request near 100 MiB after 3 M operations of the
 * sim arena, 320 MiB own-first (two streams: 538 against 286 MiB); the
 * shipped traces' growable replays moved by 0.002 at most
 * (bench_fragmentation).  Fixed segments keep the closer fit: there ANY
 * holds whole new segments, and own-first raised gpt2_generate_varlen's
 * replay from 1.140 to 1.426 of its peak request, above PyTorch's 1.312.
 * Inline: every allocation that misses the thread cache asks it. */
static inline ga_block_t *find_free(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s)
{
    size_t limit = ga_split_limit(bm->set.max_split, rs);
    ga_pool_t *p = bm->events ? pool_find(bm, s.id) : NULL;
    if (p)
        p->used = ++bm->pool_clock;
    ga_block_t *a = p ? ga_fit_find(&p->fit[cls], rs, limit) : NULL;
    if (a && bm->own_first)
        return a;
    ga_block_t *b = ga_fit_find(&bm->any.fit[cls], rs, limit);
    if (a && (!b || a->size <= b->size))
        return a;
    return b;
}

/* cross_stream = wait: the best fit in another stream's pool that an
 * outstanding sweep covers (its event can be waited on); *POOL gets it. */
static ga_block_t *find_other(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s, ga_pool_t **pool)
{
    size_t limit = ga_split_limit(bm->set.max_split, rs);
    ga_block_t *best = NULL;
    for (unsigned i = 0; i < bm->npools; i++) {
        ga_pool_t *p = bm->pools[i];
        if (p->stream.id == s.id)
            continue;
        ga_block_t *b = ga_fit_find(&p->fit[cls], rs, limit);
        if (!b)
            continue;
        if (!p->sweep || b->stamp > p->sweep_seq) {
            ga_sweep_want(bm, p); /* covered next time */
            continue;
        }
        if (!best || b->size < best->size) {
            best = b;
            *pool = p;
        }
    }
    return best;
}

/* Carve RS bytes from free block B for stream S and make it live. */
static gpuarena_status_t take_block(ga_bm_t *bm, ga_block_t *b, size_t rs, size_t size,
                                    ga_stream_t s, void **ptr)
{
    ga_pool_t *p = b->pool;
    bool keep_whole = bm->set.max_split && b->size > bm->set.max_split;
    ga_block_t *t = NULL;
    ga_fit_remove(&p->fit[b->cls], b);
    /* A remainder smaller than the rounding could serve nothing. */
    if (!keep_whole && b->size - rs >= bm->round)
        t = split(bm, b, rs);
    if (t) {
        /* The tail stays in B's pool with B's stamp (split copied it). */
        t->pool = p;
        ga_fit_insert(&p->fit[t->cls], t);
    }
    b->pool = NULL;
    gpuarena_status_t st = ga_lmap_insert(&bm->live, b);
    if (st != GPUARENA_SUCCESS) {
        coalesce_into(bm, p, b, b->stamp);
        return ga_error(st, "no memory for the live-block map");
    }
    b->state = BLOCK_LIVE;
    b->requested = b->requested_bm = size;
    b->stream_id = s.id;
    b->uses = NULL;
    atomic_store_explicit(&b->cached, 0, memory_order_relaxed);
    bm->c.requested += size;
    bm->c.in_use += b->size;
    bm->c.allocs++;
    bm->c.live++;
    *ptr = (void *)b->addr;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_bm_out_of_memory(ga_bm_t *bm, size_t size, gpuarena_status_t st)
{
    /* Another failure (a system call or the driver refused) is no lack of
     * memory: oom_failures counts only those (gpuarena_stats(3)). */
    if (st != GPUARENA_ERR_OUT_OF_MEMORY)
        return st;
    bm->c.oom_failures++;
    bm->c.last_oom = size;
    /* What the device has free, where the provider can say: a GPU's
     * arenas and a sim arena with a capacity. */
    uint64_t dev_free = 0;
    bool known =
        bm->prov->ops->mem_free && bm->prov->ops->mem_free(bm->prov, &dev_free) == GPUARENA_SUCCESS;
    bm->c.device_free = known ? dev_free : 0;
    /* A direct provider's pool holds the memory: ask it what it has. */
    uint64_t reserved = bm->c.reserved, used = 0;
    if (bm->direct && bm->prov->ops->usage(bm->prov, &reserved, &used) != GPUARENA_SUCCESS)
        reserved = 0;
    uint64_t in_use = ga_bm_user_in_use(bm);
    char cap[64] = "", device[64] = "";
    if (bm->set.max_reserved != SIZE_MAX)
        snprintf(cap, sizeof cap, " (max_reserved %zu)", bm->set.max_reserved);
    if (known)
        snprintf(device, sizeof device, ", %" PRIu64 " free on the device", dev_free);
    return ga_error(GPUARENA_ERR_OUT_OF_MEMORY,
                    "%s: out of memory allocating %zu bytes: %" PRIu64 " in use, %" PRIu64
                    " reserved%s, %" PRIu64 " cached%s",
                    bm->prov->ops->name, size, in_use, reserved, cap,
                    reserved > in_use ? reserved - in_use : 0, device);
}

/* One retry of alloc_miss once it ran out of memory: every cached byte
 * that every stream may use goes back, then a free block or new memory
 * (*GROWN: the latter was asked for). */
static gpuarena_status_t release_and_retry(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s,
                                           ga_block_t **b, bool *grown)
{
    ga_seg_release(bm, SIZE_MAX);
    *b = find_free(bm, cls, rs, s);
    *grown = !*b;
    return *b ? GPUARENA_SUCCESS : ga_seg_grow(bm, cls, rs, s, b);
}

/* The retry of alloc_miss once it ran out of memory: every thread's
 * cached blocks first (no provider call), then, but for a manager that
 * holds its memory (a graph's pool, during a capture of S: the waits would
 * invalidate the capture, and what they release the graph still writes),
 * everything cached, waiting for pending frees: the only path that blocks
 * the host.  First what is freed without waiting for the whole device
 * (ga_sweep_settle: S's own frees and those that events cover), which
 * breaks no other thread's capture; the wait for the device
 * (ga_sweep_drain) only when that was not enough and frees of other
 * streams are still uncovered. */
static gpuarena_status_t retry_out_of_memory(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s,
                                             ga_block_t **b, bool *grown, bool *returned)
{
    bm->c.oom_retries++;
    ga_tcache_flush_all(bm);
    *returned = true;
    if (bm->hold) {
        *b = find_free(bm, cls, rs, s);
        *grown = false;
        return *b ? GPUARENA_SUCCESS : GPUARENA_ERR_OUT_OF_MEMORY;
    }
    ga_sweep_settle(bm, s);
    gpuarena_status_t st = release_and_retry(bm, cls, rs, s, b, grown);
    if (st == GPUARENA_ERR_OUT_OF_MEMORY && ga_sweep_unsettled(bm)) {
        (void)ga_sweep_drain(bm); /* refused: the retry below finds what it finds */
        st = release_and_retry(bm, cls, rs, s, b, grown);
    }
    return st;
}

/* No block of the pools S may use at once fits RS bytes: another
 * stream's, once its sweep is waited on, or new memory; *OUT gets a block
 * in a pool and large enough (out of line: the hit path stays short).
 * *UNCHECKED: S not yet asked whether it is being captured (the legacy
 * stream, alloc_slow); asked here first, before anything changes, since
 * what follows may reach the driver with S. */
static __attribute__((noinline)) gpuarena_status_t alloc_miss(ga_bm_t *bm, int cls, size_t rs,
                                                              size_t size, ga_stream_t s,
                                                              bool *unchecked, bool *returned,
                                                              bool *grown, ga_block_t **out)
{
    if (*unchecked) {
        gpuarena_status_t st = stream_check(bm, s);
        if (st != GPUARENA_SUCCESS)
            return st;
        *unchecked = false;
    }
    ga_block_t *b = NULL;
    if (bm->events && bm->set.cross_stream != GA_CROSS_NEVER) {
        ga_sweep_poll(bm, false);
        b = find_free(bm, cls, rs, s);
        /* No stream (GPUARENA_STREAM_HOST) has nothing that could wait. */
        if (!b && bm->set.cross_stream == GA_CROSS_WAIT && s.id != GA_STREAM_ANY) {
            ga_pool_t *p = NULL;
            b = find_other(bm, cls, rs, s, &p);
            if (b) {
                if (bm->prov->ops->stream_wait(bm->prov, s.handle, p->sweep) == GPUARENA_SUCCESS)
                    bm->c.waits++;
                else
                    b = NULL;
            }
        }
        if (!b)
            ga_sweep_request_all(bm, &s);
    }
    /* Free memory that a stream pool took in from ANY and its stream
     * never used is every stream's at once: back to ANY before the arena
     * grows (a stream destroyed after a free would otherwise keep it
     * until a drain: a granule per stream, where each new stream freed a
     * small block). */
    if (!b && bm->npools && ga_pool_reclaim(bm, s.id))
        b = find_free(bm, cls, rs, s);
    /* What this thread's caches hold goes back before a growable segment
     * grows for it: there a cache never makes the arena grow.  Without
     * this, the blocks cached when a program reached its peak were
     * reserved on top of it, and a cache budget above 4M made the shipped
     * traces' replays reserve more than PyTorch's allocator with
     * expandable segments (gpt2_generate_varlen 1.074 with 16M against
     * 1.069).  Fixed segments do without: a block given back there is
     * reused only where it lies, and their replays reserved more with it
     * (gpt2_generate_varlen 1.129 against 1.090), if still less than
     * PyTorch's.  Other threads' caches are left alone: reaching them
     * costs a barrier, which only the out-of-memory path below pays. */
    if (!b && bm->set.thread_cache && ga_grows_in_place(bm) && ga_tcache_flush_own(bm, rs)) {
        *returned = true;
        b = find_free(bm, cls, rs, s);
    }
    if (b) {
        *out = b;
        return GPUARENA_SUCCESS;
    }
    *grown = true;
    /* An allocation that the retry below saves did not fail: the thread's
     * message stays what it was (gpuarena_last_error(3)). */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    gpuarena_status_t st = ga_seg_grow(bm, cls, rs, s, &b);
    if (st == GPUARENA_ERR_OUT_OF_MEMORY)
        st = retry_out_of_memory(bm, cls, rs, s, &b, grown, returned);
    if (st != GPUARENA_SUCCESS)
        return ga_bm_out_of_memory(bm, size, st);
    ga_error_restore(&saved);
    *out = b;
    return GPUARENA_SUCCESS;
}

/* *RETURNED: thread caches gave blocks back on the way (their bytes
 * count as cached from then on: the caller enforces max_cached);
 * *MISSED: memory was mapped for it. */
static gpuarena_status_t alloc_locked(ga_bm_t *bm, size_t rs, size_t size, ga_stream_t s,
                                      bool *unchecked, bool *returned, bool *missed, void **ptr)
{
    int cls = rs <= bm->set.small_max ? CLASS_SMALL : CLASS_LARGE;
    ga_block_t *b = find_free(bm, cls, rs, s);
    bool grown = false;
    if (!b) {
        gpuarena_status_t st = alloc_miss(bm, cls, rs, size, s, unchecked, returned, &grown, &b);
        if (st != GPUARENA_SUCCESS)
            return st;
        if (!b) /* never: its success gives a block (said for scan-build) */
            return ga_error(GPUARENA_ERR_CORRUPT, "no block from a successful miss");
    }
    /* One call: it is inlined here. */
    gpuarena_status_t st = take_block(bm, b, rs, size, s, ptr);
    /* An allocation made counts as a hit, or a miss where it mapped
     * memory (a retry that found a block the waits freed maps nothing);
     * a failed one is neither (the live map's growth can fail here). */
    if (st == GPUARENA_SUCCESS)
        *(grown ? &bm->c.misses : &bm->c.hits) += 1;
    *missed = grown;
    return st;
}

void ga_bm_uncount_alloc(ga_bm_t *bm, ga_served_t how)
{
    /* The sums of the manager's counts and the thread caches' are what
     * gpuarena_stats reports (block/stats.c): the manager's alone may wrap
     * below zero here, and the sums stay right. */
    ga_lock(&bm->lock);
    bm->c.allocs--;
    bm->c.frees--;
    if (how == GA_SERVED_CACHE || how == GA_SERVED_HIT)
        bm->c.hits--; /* a thread cache's hit counts in its allocs, as a hit */
    else if (how == GA_SERVED_MISS)
        bm->c.misses--;
    ga_unlock(&bm->lock);
}

/* What every new block gets, cached ones too: the provider's hints first
 * (a managed block is prefetched to where it will be used), then zeros
 * (written there, not pulled over by faults).  On failure the block goes
 * back, uncounted (nothing was handed out: allocs and frees count only
 * those that were), and *PTR is cleared; HOW says how it was served. */
static gpuarena_status_t finish_alloc(ga_bm_t *bm, size_t size, ga_stream_t s, ga_served_t how,
                                      void **ptr)
{
    const ga_provider_ops_t *ops = bm->prov->ops;
    gpuarena_status_t st = GPUARENA_SUCCESS;
    if (ops->on_alloc)
        st = ops->on_alloc(bm->prov, *ptr, size, s.handle);
    if (st == GPUARENA_SUCCESS && bm->set.zero && ops->memzero)
        st = ops->memzero(bm->prov, *ptr, size, s.handle);
    if (st != GPUARENA_SUCCESS) {
        if (ga_bm_free(bm, *ptr, s) == GPUARENA_SUCCESS)
            ga_bm_uncount_alloc(bm, how);
        *ptr = NULL;
    }
    return st;
}

/* The locked path, out of line: the fast path above it then saves and
 * restores only the few registers it uses.
 *
 * UNCHECKED (the legacy stream; only on a plain manager, ga_bm_alloc_on):
 * the capture check is left to alloc_miss, the first step that may reach
 * the driver with S.  A block found in the pools reaches nothing, as a
 * thread cache's hit does not: asking first cost a legacy-stream query
 * (the dearest of the stream calls, bench_device's (d)) on every
 * allocation that the thread cache could not serve.  *MISSED: whether
 * memory was mapped for it (one call for both paths: a second copy took
 * the inlining of alloc_locked and take_block from the plain one, 16
 * more instructions a free + allocation, bench_churn). */
static __attribute__((noinline)) gpuarena_status_t alloc_slow(ga_bm_t *bm, size_t rs, size_t size,
                                                              ga_stream_t s, void **ptr,
                                                              bool unchecked, bool *missed)
{
    ga_lock(&bm->lock);
    bool returned = bm->set.thread_cache && ga_tcache_drop_large(bm);
    gpuarena_status_t st = alloc_locked(bm, rs, size, s, &unchecked, &returned, missed, ptr);
    /* What the large slot or the caches gave back counts as cached now,
     * against max_cached (after the allocation: the block it takes is
     * not released under it).  Giving it back to the driver names no
     * stream (and runs in relaxed capture mode, cuda.c): it needs no
     * check of S. */
    if (returned)
        enforce_cap(bm);
    if (st == GPUARENA_SUCCESS)
        ga_peaks_after(bm, true);
    ga_unlock(&bm->lock);
    return st;
}

/* A block of RS bytes for SIZE on S, in *PTR: from the thread cache, else
 * under the lock; *HOW says which.  Inlined into both callers below
 * (ga_tcache_alloc too: out of line, the plain pair cost 29 more
 * instructions, bench_churn); the plain one drops *HOW. */
__attribute__((always_inline)) static inline gpuarena_status_t
alloc_block(ga_bm_t *bm, size_t rs, size_t size, ga_stream_t s, void **ptr, bool unchecked,
            ga_served_t *how)
{
    *how = GA_SERVED_CACHE;
    if (bm->set.thread_cache && rs <= bm->tc_limit && ga_tcache_alloc(bm, rs, size, s, ptr))
        return GPUARENA_SUCCESS;
    bool missed = false;
    gpuarena_status_t st = alloc_slow(bm, rs, size, s, ptr, unchecked, &missed);
    *how = missed ? GA_SERVED_MISS : GA_SERVED_HIT;
    return st;
}

/* An allocation of a manager that is not plain (pinned and managed
 * memory, zero fill): the block, taken as by a plain one, then the
 * provider's hooks; *PTR is written only once they have succeeded (a
 * refusal leaves it as it was, gpuarena_alloc(3)).  A fill that would be
 * refused is refused first, before any block is taken or counted. */
static __attribute__((noinline)) gpuarena_status_t
alloc_hooked(ga_bm_t *bm, size_t rs, size_t size, ga_stream_t s, void **ptr, bool unchecked)
{
    const ga_provider_ops_t *ops = bm->prov->ops;
    if (bm->set.zero && ops->memzero && ops->memzero_check) {
        gpuarena_status_t st = ops->memzero_check(bm->prov, s.handle);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    void *q = NULL;
    ga_served_t how;
    gpuarena_status_t st = alloc_block(bm, rs, size, s, &q, unchecked, &how);
    if (st == GPUARENA_SUCCESS)
        st = finish_alloc(bm, size, s, how, &q);
    if (st == GPUARENA_SUCCESS)
        *ptr = q;
    return st;
}

gpuarena_status_t ga_bm_alloc_on(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr,
                                 bool unchecked)
{
    if (size > MAX_REQUEST)
        return ga_error(GPUARENA_ERR_SIZE_OVERFLOW,
                        "gpuarena_alloc: a request of %zu bytes is too large (at most 2^60)", size);
    if (unchecked && (bm->direct || !bm->plain)) {
        gpuarena_status_t st = stream_check(bm, s);
        if (st != GPUARENA_SUCCESS)
            return st;
        unchecked = false;
    }
    if (bm->direct)
        return ga_direct_alloc(bm, size, s, ptr);
    size_t rs = class_round(bm, size);
    /* Thread caches of host-visible memory hold only blocks freed on an
     * idle stream or with no stream (see ga_bm_free), so they may serve at
     * once too.  Blocks freed with no stream suit any stream: the
     * stream's own cache first, then that of "no stream"; in each, the
     * slots and the large slot. */
    if (!bm->plain)
        return alloc_hooked(bm, rs, size, s, ptr, unchecked);
    ga_served_t how;
    return alloc_block(bm, rs, size, s, ptr, unchecked, &how);
}

/* ------------------------------------------------------------------ */
/* Free and record_stream.                                             */

ga_uses_t ga_uses_unknown;

/* Why PTR is not a live block: double free, interior or foreign pointer.
 * A block freed twice may have merged with a free neighbour since its
 * first free, so its address is no block's start any more: an address in
 * free memory is reported as freed already, which it is unless the
 * program made it up.  The manager's lock held. */
static gpuarena_status_t bad_pointer(ga_bm_t *bm, uintptr_t a, const char *what)
{
    if (bm->direct)
        return ga_direct_bad_pointer(bm, a, what);
    for (ga_segment_t *g = bm->segs; g; g = g->next) {
        if (a < g->base || a >= g->base + g->size)
            continue;
        for (ga_block_t *b = g->first; b; b = b->next) {
            if (a < b->addr || a >= b->addr + b->size)
                continue;
            /* A block in a thread cache is live to the manager but free
             * to the program: reported as free memory, below. */
            bool cached = atomic_load_explicit(&b->cached, memory_order_relaxed);
            if (b->state == BLOCK_LIVE && !cached)
                return ga_error(GPUARENA_ERR_INTERIOR_POINTER,
                                "%s: %p points inside a block starting at %p", what, (void *)a,
                                (void *)b->addr);
            if (b->state == BLOCK_HOLE)
                break; /* memory given back to the provider */
            if (b->addr == a)
                return ga_error(GPUARENA_ERR_DOUBLE_FREE, "%s: %p was already freed", what,
                                (void *)a);
            return ga_error(GPUARENA_ERR_DOUBLE_FREE,
                            "%s: %p was already freed (it lies in free memory of this arena, "
                            "inside the free block at %p)",
                            what, (void *)a, (void *)b->addr);
        }
    }
    return ga_error(GPUARENA_ERR_INVALID_POINTER,
                    "%s: %p is not memory this arena holds: never handed out, or freed and its "
                    "memory given back since",
                    what, (void *)a);
}

/* The rest of free_locked: the block has recorded uses, or is
 * host-visible memory, so it may need events before it can be reused. */
static __attribute__((noinline)) ga_pool_t *free_watched(ga_bm_t *bm, ga_block_t *b, ga_stream_t s,
                                                         bool done)
{
    /* DONE: the stream had no work left when the block was freed, so the
     * free point has passed; host-visible memory then needs no event.  A
     * free with no stream (GPUARENA_STREAM_HOST) has passed already. */
    bool guard = host_guard(bm) && !done && s.id != GA_STREAM_ANY;
    /* Host-visible memory and frees with no stream (GPUARENA_STREAM_HOST)
     * go to ANY; a device block freed on a stream to that stream's pool. */
    bool to_any = host_guard(bm) || s.id == GA_STREAM_ANY;
    ga_pool_t *p = to_any ? &bm->any : pool_get(bm, s);
    bool no_pool = !p;
    if (no_pool)
        p = &bm->any; /* no memory for a pool record: be conservative below */
    ga_uses_t *u = b->uses;
    b->uses = NULL;
    unsigned n = 0;
    bool unwatched = u == GA_USES_UNKNOWN;
    if (guard) {
        /* Host-visible memory: the host may write the block as soon as it
         * is handed out, so even the freeing stream may not take it back
         * before the GPU has passed the free (an async copy may still read
         * it).  The free stream is watched like a recorded one, and the
         * block goes to ANY when every watched event has completed. */
        ga_waiter_t *w = malloc(sizeof *w);
        if (w && ga_bm_event_record(bm, s, &w->ev) == GPUARENA_SUCCESS) {
            w->block = b;
            w->next = bm->waiters;
            bm->waiters = w;
            n++;
        } else {
            free(w);
            unwatched = true; /* cannot watch: limbo, below */
        }
    }
    if (u && !unwatched && bm->events) {
        for (unsigned i = 0; i < u->count; i++) {
            if (u->s[i].id == s.id)
                continue;
            ga_waiter_t *w = ga_bm_use_named_here(bm, u->s[i]) ? malloc(sizeof *w) : NULL;
            if (!w || ga_bm_event_record(bm, u->s[i], &w->ev) != GPUARENA_SUCCESS) {
                /* Cannot watch this use: limbo below, rather than hand
                 * the block out early. */
                free(w);
                unwatched = true;
                continue;
            }
            w->block = b;
            w->next = bm->waiters;
            bm->waiters = w;
            n++;
        }
    }
    ga_uses_free(u);
    if ((unwatched || no_pool) && bm->events) {
        /* Only reached when a provider call or host memory failed: an
         * event for the free or a recorded use, a pool record, or a
         * record of the uses themselves.  The block goes to limbo, for
         * no stream until a drain has waited for the whole device
         * (trim, the out-of-memory path): waiting here, for the device,
         * would block the host on a free and, in the driver's global
         * capture mode, break another thread's capture. */
        p = &bm->limbo;
    }
    if (n) {
        b->state = BLOCK_PENDING;
        b->pending = n;
        b->pool = p;
        bm->pending_blocks++;
        return p;
    }
    free_into(bm, p, b);
    return p;
}

/* Free live block B on S (see ga_bm_free_locked); the pool it went to,
 * or will go to once its events complete.  Inline for the common case,
 * device memory with no recorded uses: the free goes straight into the
 * stream's pool, and every uncached free takes this path. */
static inline ga_pool_t *free_locked(ga_bm_t *bm, ga_block_t *b, ga_stream_t s, bool done)
{
    bm->c.requested -= b->requested_bm;
    ga_req_drift(bm, (int64_t)b->requested_bm - (int64_t)b->requested);
    bm->c.in_use -= b->size;
    bm->c.frees++;
    bm->c.live--;
    ga_lmap_remove(&bm->live, b);
    ga_pool_t *p;
    if (b->uses || host_guard(bm) || !(p = s.id == GA_STREAM_ANY ? &bm->any : pool_get(bm, s)))
        return free_watched(bm, b, s, done);
    free_into(bm, p, b);
    if (__builtin_expect(p->shared, 0))
        ga_sweep_shared(bm, p);
    return p;
}

void ga_bm_free_locked(ga_bm_t *bm, ga_block_t *b, ga_stream_t s, bool done)
{
    (void)free_locked(bm, b, s, done);
}

static gpuarena_status_t free_slow(ga_bm_t *bm, void *ptr, ga_stream_t s, ga_block_t *b, bool done,
                                   bool unchecked);

gpuarena_status_t ga_bm_free_on(ga_bm_t *bm, void *ptr, ga_stream_t s, bool unchecked)
{
    /* Host-visible memory asks whether the stream is idle. */
    if (unchecked && (bm->direct || host_guard(bm))) {
        gpuarena_status_t st = stream_check(bm, s);
        if (st != GPUARENA_SUCCESS)
            return st;
        unchecked = false;
    }
    if (bm->direct)
        return ga_direct_free(bm, ptr, s);
    uintptr_t a = (uintptr_t)ptr;
    ga_block_t *b = ga_lmap_find(&bm->live, a);
    bool done = false;
    if (b && b->addr == a && b->state == BLOCK_LIVE) {
        if (atomic_load_explicit(&b->cached, memory_order_acquire))
            return ga_error(GPUARENA_ERR_DOUBLE_FREE, "gpuarena_free: %p was already freed", ptr);
        /* Read again, after the flag: a thread cache giving the block back
         * (a trim, say, on another thread) clears the flag only once the
         * block is free in the manager (tcache.c, give_back), so a second
         * free that finds the flag clear during the give-back (the
         * program's double free, after the first free returned) finds
         * the block no longer live here, and the locked path reports it.
         * Two frees of one block at the same moment are the program's race,
         * not caught here (gpuarena_alloc(3)). */
        if (b->state != BLOCK_LIVE || b->addr != a)
            return free_slow(bm, ptr, s, b, false, unchecked);
        /* Host-visible memory may be reused at once only if the stream is
         * idle: then the free point has passed and no event is needed
         * (one query instead of an event record and a query). */
        if (host_guard(bm) && !b->uses && s.id == GA_STREAM_ANY)
            done = true; /* the program says no GPU work uses it */
        else if (host_guard(bm) && !b->uses && bm->prov->ops->stream_idle)
            done = bm->prov->ops->stream_idle(bm->prov, s.handle) == GPUARENA_SUCCESS;
        /* A stream whose pool wants a sweep frees under the lock, which
         * records it (wanted_map). */
        bool sweep = ga_wanted(bm, s.id);
        if (bm->set.thread_cache && (!host_guard(bm) || done) && !sweep && ga_tcache_free(bm, b, s))
            return GPUARENA_SUCCESS;
    }
    return free_slow(bm, ptr, s, b, done, unchecked);
}

/* Whether the free of live block B on S may reach the driver with S (the
 * manager's lock held, before anything changes): an event for its
 * recorded uses or for host-visible memory, a sweep that S's pool owes
 * another stream (wanted: ga_sweep_on_free records it once the sweep still
 * out, if any, has completed), or no pool yet (a stream new to the arena,
 * which gpuarena_free(3) says a capture refuses: the free asks for the
 * pool's record, and once waited for the device where none could be had).
 * Event queries and unmaps name no stream. */
static bool free_names_stream(ga_bm_t *bm, const ga_block_t *b, ga_stream_t s)
{
    if (b->uses || host_guard(bm))
        return true;
    if (s.id == GA_STREAM_ANY)
        return false;
    ga_pool_t *p = pool_find(bm, s.id);
    return !p || p->wanted;
}

/* The locked path of ga_bm_free, out of line (see alloc_slow).  B is what
 * the lock-free lookup found at PTR, if anything.  UNCHECKED (the legacy
 * stream, or any stream whose free the provider left unchecked): S is
 * asked whether it may be used only where the free would reach the driver
 * with it (free_names_stream), as alloc_miss does.  A free into a pool
 * during a capture of S is then made, as one into the thread cache is:
 * it puts nothing on S, and only a checked allocation takes the block
 * back. */
static __attribute__((noinline)) gpuarena_status_t
free_slow(ga_bm_t *bm, void *ptr, ga_stream_t s, ga_block_t *b, bool done, bool unchecked)
{
    uintptr_t a = (uintptr_t)ptr;
    gpuarena_status_t st = GPUARENA_SUCCESS;
    bool named = false; /* S asked whether it is being captured */
    ga_lock(&bm->lock);
    /* Records live as long as the manager and change only under the lock:
     * one that is still the live block at A is the one to free; else the
     * map is asked again, now that nothing moves. */
    if (!b || b->addr != a || b->state != BLOCK_LIVE)
        b = ga_lmap_find(&bm->live, a);
    if (!b || b->addr != a || b->state != BLOCK_LIVE) {
        st = bad_pointer(bm, a, "gpuarena_free");
    } else if (atomic_load_explicit(&b->cached, memory_order_relaxed)) {
        st = ga_error(GPUARENA_ERR_DOUBLE_FREE, "gpuarena_free: %p was already freed", ptr);
    } else if (unchecked && (named = free_names_stream(bm, b, s)) &&
               (st = stream_check(bm, s)) != GPUARENA_SUCCESS) {
        /* Refused before anything changed. */
    } else if (b->uses && bm->events && (st = ga_bm_uses_check(bm, b, s)) != GPUARENA_SUCCESS) {
        /* Likewise: a recorded stream is being captured. */
    } else {
        /* Only a free that is done gives the large slot back: a refused
         * one changes nothing (gpuarena_free(3)). */
        if (bm->set.thread_cache)
            ga_tcache_drop_large(bm);
        ga_pool_t *p = free_locked(bm, b, s, done && !b->uses);
        /* A sweep that the free itself asked for (a shared pool caching
         * too much, ga_sweep_shared) is recorded on S only where S was
         * checked: unchecked, S may be being captured, and the next free
         * on S, which the wanted sweep sends here, is checked. */
        if (is_stream_pool(p))
            ga_sweep_on_free(bm, p, s, !unchecked || named);
        if (bm->waiters)
            ga_sweep_poll(bm, false);
        enforce_cap(bm);
        ga_peaks_after(bm, false);
    }
    ga_unlock(&bm->lock);
    return st;
}

/* The live block at PTR for gpuarena_record_stream, in *B; else its
 * status (a bad pointer, a block freed into a thread cache).  The lock
 * held. */
static gpuarena_status_t recorded_block(ga_bm_t *bm, void *ptr, ga_block_t **out)
{
    uintptr_t a = (uintptr_t)ptr;
    ga_block_t *b = ga_lmap_find(&bm->live, a);
    if (!b || b->addr != a || b->state != BLOCK_LIVE)
        return bad_pointer(bm, a, "gpuarena_record_stream");
    if (atomic_load_explicit(&b->cached, memory_order_relaxed))
        return ga_error(GPUARENA_ERR_DOUBLE_FREE, "gpuarena_record_stream: %p was freed", ptr);
    *out = b;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_bm_record_stream(ga_bm_t *bm, void *ptr, ga_stream_t s)
{
    ga_lock(&bm->lock);
    ga_block_t *b = NULL;
    gpuarena_status_t st = recorded_block(bm, ptr, &b);
    /* B is set on success (said for scan-build: the failures' statuses
     * come through ga_error). */
    if (st == GPUARENA_SUCCESS && b && bm->events) {
        /* The allocation's stream too: the free may come on another one
         * (a free on the recorded stream itself waits for nothing). */
        ga_uses_t *u = b->uses;
        bool known = u == GA_USES_UNKNOWN;
        for (unsigned i = 0; u && !known && i < u->count; i++)
            known |= u->s[i].id == s.id;
        if (!known && (!u || u->count == u->cap)) {
            unsigned cap = u ? u->cap * 2 : 2;
            ga_uses_t *n = ga_realloc(u, sizeof *n + cap * sizeof n->s[0]);
            if (n) {
                if (!u)
                    n->count = 0;
                n->cap = cap;
                b->uses = u = n;
            } else {
                /* Nothing lost: the block counts as used by every stream
                 * (GA_USES_UNKNOWN), and the streams noted so far are
                 * of no more use. */
                free(u);
                b->uses = GA_USES_UNKNOWN;
                known = true;
            }
        }
        if (!known)
            u->s[u->count++] = s;
    }
    ga_unlock(&bm->lock);
    return st;
}

void ga_bm_hold(ga_bm_t *bm)
{
    ga_lock(&bm->lock);
    bm->hold = true;
    ga_unlock(&bm->lock);
}

gpuarena_status_t ga_bm_uses_unknown(ga_bm_t *bm, void *ptr, const uint64_t *own)
{
    ga_lock(&bm->lock);
    ga_block_t *b = NULL;
    gpuarena_status_t st = recorded_block(bm, ptr, &b);
    if (st == GPUARENA_SUCCESS && b && bm->events && !(own && *own == b->stream_id)) {
        ga_uses_free(b->uses);
        b->uses = GA_USES_UNKNOWN;
    }
    ga_unlock(&bm->lock);
    return st;
}

gpuarena_status_t ga_bm_drain_limbo(ga_bm_t *bm)
{
    ga_lock(&bm->lock);
    gpuarena_status_t st =
        bm->events && ga_pool_holds(&bm->limbo) ? ga_sweep_drain(bm) : GPUARENA_SUCCESS;
    ga_unlock(&bm->lock);
    return st;
}

gpuarena_status_t ga_bm_make_pool(ga_bm_t *bm, ga_stream_t s)
{
    if (s.id == GA_STREAM_ANY)
        return GPUARENA_SUCCESS;
    ga_lock(&bm->lock);
    ga_pool_t *p = pool_get(bm, s);
    ga_unlock(&bm->lock);
    return p ? GPUARENA_SUCCESS
             : ga_error(GPUARENA_ERR_HOST_MEMORY, "no host memory for a stream's pool record");
}

bool ga_bm_holds(ga_bm_t *bm, const void *ptr)
{
    /* As ga_bm_free_on's lookup: records live as long as the manager. */
    uintptr_t a = (uintptr_t)ptr;
    const ga_block_t *b = ga_lmap_find(&bm->live, a);
    return b && b->addr == a && b->state == BLOCK_LIVE;
}

gpuarena_status_t ga_bm_lookup(ga_bm_t *bm, const void *ptr, size_t *requested, const char *what)
{
    uintptr_t a = (uintptr_t)ptr;
    ga_lock(&bm->lock);
    gpuarena_status_t st = GPUARENA_SUCCESS;
    ga_block_t *b = ga_lmap_find(&bm->live, a);
    if (!b || b->addr != a || b->state != BLOCK_LIVE ||
        atomic_load_explicit(&b->cached, memory_order_relaxed))
        st = what ? bad_pointer(bm, a, what) : GPUARENA_ERR_INVALID_POINTER;
    else
        *requested = b->requested;
    ga_unlock(&bm->lock);
    return st;
}

/* ------------------------------------------------------------------ */
/* Trim and life cycle.                                                 */

gpuarena_status_t ga_bm_trim(ga_bm_t *bm, size_t keep, bool wait)
{
    if (bm->direct)
        return wait ? ga_direct_trim(bm, keep) : GPUARENA_SUCCESS;
    ga_lock(&bm->lock);
    ga_tcache_flush_all(bm);
    /* What came back counts against max_cached, whatever KEEP is. */
    enforce_cap(bm);
    /* As the out-of-memory path: the wait for the whole device only when
     * what is released without it leaves more than KEEP cached.  What was
     * released stays released when that wait is refused. */
    gpuarena_status_t st = GPUARENA_SUCCESS;
    uint64_t trims = bm->c.trims; /* the call counts, not its passes */
    ga_sweep_settle(bm, (ga_stream_t){.id = GA_STREAM_ANY});
    uint64_t cached = bm->c.reserved - bm->c.in_use;
    if (cached > keep)
        ga_seg_release(bm, cached - keep);
    cached = bm->c.reserved - bm->c.in_use;
    if (wait && cached > keep && ga_sweep_unsettled(bm) &&
        (st = ga_sweep_drain(bm)) == GPUARENA_SUCCESS)
        ga_seg_release(bm, cached - keep);
    if (bm->prov->ops->tidy)
        bm->prov->ops->tidy(bm->prov);
    bm->c.trims = trims + 1;
    ga_bm_update_peaks(bm);
    ga_unlock(&bm->lock);
    return st;
}

gpuarena_status_t ga_bm_create(ga_provider_t *prov, const ga_settings_t *s, ga_bm_t **out)
{
    if (!s->round || (s->round & (s->round - 1)))
        return ga_error(GPUARENA_ERR_CONFIG, "round must be a power of two, not %zu", s->round);
    /* A granule of 0 would round every segment to nothing. */
    if (!prov->granule || (prov->granule & (prov->granule - 1)))
        return ga_error(GPUARENA_ERR_CONFIG, "the granule must be a power of two, not %zu",
                        prov->granule);
    ga_bm_t *bm = calloc(1, sizeof *bm);
    if (!bm)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a block manager");
    if (ga_lmap_init(&bm->live) != GPUARENA_SUCCESS) {
        free(bm);
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a block manager");
    }
    ga_lock_init(&bm->lock);
    pthread_mutex_init(&bm->tc_lock, NULL);
    bm->prov = prov;
    bm->set = *s;
    bm->round = s->round;
    bm->round_shift = (unsigned)__builtin_ctzll((unsigned long long)s->round);
    bm->events = ga_provider_has_events(prov);
    bm->guard = bm->events && prov->host_visible;
    bm->plain = !prov->ops->on_alloc && !(bm->set.zero && prov->ops->memzero);
    bm->own_first = ga_grows_in_place(bm);
    bm->tc_limit =
        s->thread_cache_max > s->thread_cache_large ? s->thread_cache_max : s->thread_cache_large;
    class_setup(bm, s);
    bm->any.stream.id = GA_STREAM_ANY;
    bm->holes.stream.id = GA_STREAM_ANY;
    bm->limbo.stream.id = GA_STREAM_ANY;
    bm->direct = ga_provider_is_direct(prov);
    if (bm->direct) {
        /* Every request goes to the provider: nothing is cached here. */
        bm->set.thread_cache = false;
        gpuarena_status_t st = ga_direct_init(bm);
        if (st != GPUARENA_SUCCESS) {
            ga_lmap_destroy(&bm->live);
            pthread_mutex_destroy(&bm->tc_lock);
            free(bm);
            return st;
        }
    }
    *out = bm;
    return GPUARENA_SUCCESS;
}

void ga_bm_set_total(ga_bm_t *bm, ga_total_t *total)
{
    if (bm->direct)
        return;
    bm->total = total;
    atomic_fetch_add_explicit(&total->arenas, 1, memory_order_relaxed);
    atomic_store_explicit(&total->had, true, memory_order_relaxed);
    ga_total_add(total, bm->c.reserved);
}

gpuarena_status_t ga_bm_destroy(ga_bm_t *bm)
{
    if (!bm)
        return GPUARENA_SUCCESS;
    ga_tcache_detach_all(bm);
    ga_lock(&bm->lock);
    /* The total is of live managers: what this one still holds leaves it
     * now, whether or not the provider takes it back below. */
    if (bm->total) {
        ga_total_sub(bm->total, bm->c.reserved);
        atomic_fetch_sub_explicit(&bm->total->arenas, 1, memory_order_relaxed);
    }
    if (bm->direct)
        ga_direct_fini(bm); /* live blocks are lost, as below */
    else if (ga_sweep_unsettled(bm))
        /* Only where a free may be ahead of the GPU: the wait is for the
         * whole device, which a capture in progress forbids (a capture
         * pool's arena destroyed before it served, graphpool.c). */
        (void)ga_sweep_drain(bm);
    for (ga_waiter_t *w = bm->waiters, *n; w; w = n) {
        n = w->next;
        ga_bm_event_put(bm, w->ev);
        free(w);
    }
    const ga_provider_ops_t *ops = bm->prov->ops;
    gpuarena_status_t first = GPUARENA_SUCCESS;
    char why[512] = "";
    unsigned nsegs = 0, kept = 0;
    size_t kept_bytes = 0;
    for (ga_segment_t *g = bm->segs, *n; g; g = n) {
        n = g->next;
        nsegs++;
        size_t left = 0;
        gpuarena_status_t st = ga_seg_give_back(bm, g, &left);
        if (st != GPUARENA_SUCCESS) {
            /* Its memory stays mapped; the record goes all the same. */
            kept++;
            kept_bytes += left;
            if (first == GPUARENA_SUCCESS) {
                first = st;
                snprintf(why, sizeof why, "%s", gpuarena_last_error());
            }
        }
        for (ga_block_t *b = g->first; b; b = b->next)
            if (b->state == BLOCK_LIVE) /* others keep their pool in these bytes */
                ga_uses_free(b->uses);
        free(g);
    }
    for (unsigned i = 0; i < bm->npools; i++) {
        if (bm->pools[i]->sweep)
            ops->event_destroy(bm->prov, bm->pools[i]->sweep);
        free(bm->pools[i]);
    }
    free(bm->pools);
    for (unsigned i = 0; i < bm->nspare_events; i++)
        ops->event_destroy(bm->prov, bm->spare_events[i]);
    free(bm->spare_events);
    for (unsigned i = 0; i < bm->nslabs; i++)
        free(bm->slabs[i]);
    free(bm->slabs);
    ga_lmap_destroy(&bm->live);
    const char *name = ops->name;
    ga_unlock(&bm->lock);
    pthread_mutex_destroy(&bm->tc_lock);
    free(bm);
    if (first == GPUARENA_SUCCESS)
        return GPUARENA_SUCCESS;
    return ga_error(first,
                    "gpuarena_destroy: %u of %u segments could not be given back to the %s "
                    "provider; %zu bytes stay mapped until the process exits: %s",
                    kept, nsegs, name, kept_bytes, why);
}
