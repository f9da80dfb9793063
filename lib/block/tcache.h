/*
 * tcache.h - the fast path of the per-thread caches (tcache.c has the
 * design, creation, flushing and statistics).
 *
 * The owner's alloc and free from its cache are inline here, so that the
 * block manager's alloc and free reach a cached block with no call: on a
 * cached pair, four levels of calls cost more than the cache's own work.
 * Only block.c, tcache.c and (through peaks.h) stats.c include this.
 */
#ifndef GA_BLOCK_TCACHE_H
#define GA_BLOCK_TCACHE_H

#include "block/internal.h"

#include <sched.h>

/* Slots: room for every size class up to the default thread_cache_max
 * (about 40 with four classes per power of two), with few sharing a
 * pair.  With 32, the classes of a random mix of sizes crowded each
 * other out and the cache went cold (bench_churn: 1184 instructions a
 * free + alloc against 897 with 128). */
#define TC_SLOTS     128
#define TC_MAX_COUNT GA_THREAD_CACHE_COUNT_MAX

/* Caches of one manager that a thread keeps, one per stream it freed
 * on: a thread that frees on one stream more retires the cache it used
 * longest ago (ga_tcache_create).  Without a bound, a program that makes
 * a new stream for each piece of work (torch.cuda.Stream() in a loop)
 * kept a cache of about 34 KiB per stream per thread, with the blocks it
 * held, and every walk of the thread's caches grew with them: after
 * 16384 streams, 555 MiB of host memory and 2 ms per new stream (a sim
 * arena; check_block's stream_caches_bounded).  With 16, a thread that
 * takes turns at up to 16 streams pays what it did before (a sim pair of
 * 4 KiB with 16 streams in turn: 64 ns, against 47 with 8 and 38 with
 * one: the walks); with 17 or more, every change of stream retires a
 * cache and misses (300 ns a pair, against 67-122 unbounded); with 8,
 * that price started at 9 streams. */
#define TC_PER_ARENA 16

struct ga_tcache {
    atomic_flag lock;
    _Atomic int active;  /* the owner is in its fast path */
    _Atomic int remote;  /* another thread holds or wants the lock */
    ga_bm_t *_Atomic bm; /* NULL once the manager is gone */
    ga_stream_t stream;
    unsigned count; /* blocks per slot */
    size_t bytes;   /* held now, at most the thread_cache_bytes setting */
    /* Written under the cache's lock; read without it by the owner's
     * peak checks, hence atomic (relaxed: a sum, not a handshake). */
    _Atomic int64_t req_delta, inuse_delta;
    /* One block of at most thread_cache_large, out of the bytes budget:
     * one above thread_cache_max, or one the slots had no room for.  Held
     * from its free to the thread's next locked alloc or free on the
     * arena (ga_tcache_drop_large), so that a free and an allocation of
     * the same large size take no lock, a free and an allocation of
     * another size take it once, and it is not kept from the rest of the
     * arena for longer. */
    ga_block_t *large;
    uint64_t allocs, frees;         /* every cache alloc is a hit: allocs counts both */
    ga_tcache_t *bm_prev, *bm_next; /* in the manager's list */
    ga_tcache_t *t_next;            /* in the thread's list */
    uint64_t chosen;                /* ga_tc_clock when the thread last turned to it */
    /* Slot i: a stack of n[i] blocks of key[i] bytes each (key 0 when
     * empty).  Keys and counts are apart from the stacks, so that a probe
     * reads one or two cache lines, not the two slots' stacks. */
    size_t key[TC_SLOTS];
    uint8_t n[TC_SLOTS];
    ga_block_t *stack[TC_SLOTS][TC_MAX_COUNT];
    /* Going cold and warm again (tcache.c, "Cold caches"): the owner's
     * alone, so plain fields. */
    bool cold;
    bool alone;             /* the only cache of its manager in the thread's list */
    uint8_t window;         /* warm: misses; cold: probes; in this window */
    uint8_t matched;        /* cold: probes of a size that ghost[] held */
    uint64_t allocs_mark;   /* allocs when the window began (warm) */
    size_t ghost[TC_SLOTS]; /* cold: the last size freed into each slot */
};

/* A window of the cold-cache policy: TC_WINDOW misses of a warm cache,
 * TC_WINDOW probes of a cold one.  The shipped traces' replays
 * (bench_fragmentation) are sensitive to it, through when cached blocks
 * go back to the pools: with 64, gpt2_train's growable ratio went from
 * 1.039 to 1.132; with 128 none of the eight figures is worse than with
 * an always-warm cache. */
#define TC_WINDOW 128
_Static_assert(TC_WINDOW < 256, "window and matched are uint8_t");

/* The initial-exec model spares the fast path a __tls_get_addr call; the
 * few bytes below fit in the static TLS that glibc keeps for dlopen'ed
 * libraries (PyTorch and CuPy load gpuarena that way; the H200 suite's
 * check-python.sh loads it so).  The thread's caches, and the one it used
 * last. */
#define GA_TLS_IE __attribute__((tls_model("initial-exec")))
extern _Thread_local ga_tcache_t *ga_tc_list GA_TLS_IE, *ga_tc_last GA_TLS_IE;
/* Whether this thread has ever made a cache of blocks freed with no
 * stream: an allocation on a stream asks that cache after its own, and a
 * thread that frees only on streams (a framework's) then skips the walk
 * of its list that would find nothing. */
extern _Thread_local bool ga_tc_any GA_TLS_IE;
/* How many of this thread's caches may hold a block in their large
 * slot, at least as many as do: counted up when the owner puts one
 * there, down when it takes one out, and set by the walk of
 * ga_tcache_drop_parked (a remote flush empties a large slot without
 * telling the owner).  The thread's locked operations skip that walk
 * while it is 0, and while it is 1 and the cache used last holds the
 * block. */
extern _Thread_local unsigned ga_tc_parked GA_TLS_IE;
/* Ticks each time the thread turns to another of its caches (made, or
 * found by the walk of ga_tcache_find): the cache whose turn came
 * longest ago is the one it used longest ago, since it uses one at a
 * time.  ga_tcache_create retires that one. */
extern _Thread_local uint64_t ga_tc_clock GA_TLS_IE;

/* Flush T, a cache of BM whose probes nearly all missed, and make it
 * cold (tcache.c); the manager's lock not held. */
void ga_tcache_cool(ga_bm_t *bm, ga_tcache_t *t);

/* A new cache of BM for stream S of the calling thread (tcache.c). */
ga_tcache_t *ga_tcache_create(ga_bm_t *bm, ga_stream_t s);
/* The rest of ga_tcache_drop_large, which also sets ga_tc_parked to the
 * number of caches of other managers that still hold a large block;
 * whether it gave one back (tcache.c). */
bool ga_tcache_drop_parked(ga_bm_t *bm);

/* Give the blocks in the large slots of this thread's caches of BM back
 * to it (the manager's lock held): every locked alloc and free does, so
 * that a large slot never keeps a block from the arena past the thread's
 * next miss.  No walk while the thread has parked none.  Whether a block
 * went back (the caller then honours max_cached). */
static inline bool ga_tcache_drop_large(ga_bm_t *bm)
{
    return ga_tc_parked && ga_tcache_drop_parked(bm);
}

static inline void tc_lock(ga_tcache_t *t)
{
    while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire))
        sched_yield();
}

static inline void tc_unlock(ga_tcache_t *t)
{
    atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

/* The owner enters its cache; true when it had to take the lock. */
static inline bool tc_owner_enter(ga_tcache_t *t)
{
    /* Without the lock where membarrier is there (ga_asymmetric_ok, lock.h). */
    if (atomic_load_explicit(&ga_asymmetric_ok, memory_order_relaxed)) {
        atomic_store_explicit(&t->active, 1, memory_order_relaxed);
        /* No hardware fence: the remote side's membarrier orders this
         * store before the load below, for the remote thread. */
        atomic_signal_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&t->remote, memory_order_acquire))
            return false;
        atomic_store_explicit(&t->active, 0, memory_order_release);
    }
    tc_lock(t);
    return true;
}

static inline void tc_owner_leave(ga_tcache_t *t, bool locked)
{
    if (locked)
        tc_unlock(t);
    else
        atomic_store_explicit(&t->active, 0, memory_order_release);
}

static inline unsigned tc_slot_of(size_t size, unsigned shift)
{
    /* ROUND is a power of two (the key says so): its shift, kept by the
     * manager, not a divide, which would cost more than the rest of the
     * lookup. */
    size_t k = size >> shift;
    return (unsigned)((k ^ (k >> 5)) % TC_SLOTS);
}

static inline void tc_add(_Atomic int64_t *v, int64_t d)
{
    /* One writer at a time (the lock): load and store, no locked RMW. */
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline int64_t tc_get(_Atomic int64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* The corrections of the calling thread's own caches of BM only: cheap,
 * for peaks on the locked path (ga_bm_update_peaks), which every locked
 * allocation and free reaches.  The cache used last, when it is BM's only
 * one in the thread, has them all: no walk of a list that holds the
 * caches of the thread's other arenas too (an MPI rank's device and
 * pinned arenas, say), a load of a cold record per cache. */
static inline void ga_tcache_own_deltas(ga_bm_t *bm, int64_t *req, int64_t *inuse)
{
    ga_tcache_t *last = ga_tc_last;
    if (last && last->alone && atomic_load_explicit(&last->bm, memory_order_relaxed) == bm) {
        *req = tc_get(&last->req_delta);
        *inuse = tc_get(&last->inuse_delta);
        return;
    }
    *req = *inuse = 0;
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next) {
        if (atomic_load_explicit(&t->bm, memory_order_relaxed) != bm)
            continue;
        *req += tc_get(&t->req_delta);
        *inuse += tc_get(&t->inuse_delta);
    }
}

/* The corrections of the calling thread's caches of BM, T among them:
 * T's alone when it is the thread's only cache of BM (alone), the common
 * case of one stream, else the walk of ga_tcache_own_deltas.  Every cache of the
 * thread counts: a block held in another stream's cache is cached too. */
static inline void tc_mine(ga_bm_t *bm, ga_tcache_t *t, int64_t *req, int64_t *inuse)
{
    if (t->alone) {
        *req = tc_get(&t->req_delta);
        *inuse = tc_get(&t->inuse_delta);
    } else {
        ga_tcache_own_deltas(bm, req, inuse);
    }
}

/* The slot a free puts a block of SIZE in, two-way: SIZE may sit in its
 * own slot or its neighbour, so two sizes that hash alike can both be
 * cached.  The one of the two that holds SIZE, else an empty one, else
 * the neighbour (which then holds another size): the caller compares its
 * key.  Chosen with a conditional move: which slot holds a size is as
 * random as the sizes, and a branch on it mispredicts. */
static inline unsigned tc_slot_for(const ga_tcache_t *t, size_t size, unsigned shift)
{
    unsigned i = tc_slot_of(size, shift);
    size_t ka = t->key[i], kb = t->key[i ^ 1];
    unsigned other = (ka != size) & ((ka != 0) | (kb == size));
    ga_opaque(&other);
    return i ^ other;
}

/* A warm cache missed: at the end of a window of TC_WINDOW misses, it
 * goes cold if fewer than a quarter of its probes hit (fewer than a
 * third as many hits as misses).  Misses only are counted: the hit path
 * pays nothing, as allocs counts the hits already. */
static inline void tc_missed(ga_bm_t *bm, ga_tcache_t *t)
{
    if (++t->window < TC_WINDOW)
        return;
    uint64_t hits = t->allocs - t->allocs_mark;
    t->window = 0;
    t->allocs_mark = t->allocs;
    if (hits < TC_WINDOW / 3)
        ga_tcache_cool(bm, t);
}

/* A cold cache is asked for ROUNDED bytes: would a warm one have held
 * that size?  At the end of a window of TC_WINDOW probes, it warms again
 * if half of them would have hit. */
static inline void tc_cold_probe(ga_tcache_t *t, size_t rounded, unsigned shift)
{
    t->matched += t->ghost[tc_slot_of(rounded, shift)] == rounded;
    if (++t->window < TC_WINDOW)
        return;
    if (t->matched >= TC_WINDOW / 2) {
        t->cold = false;
        t->allocs_mark = t->allocs;
    }
    t->window = t->matched = 0;
}

/* This thread's cache of BM for stream ID, or NULL: the one used last
 * with no walk, else the walk of the thread's list, which stamps what it
 * finds (ga_tc_clock).  Only the owner reads or changes its list. */
static inline ga_tcache_t *ga_tcache_find(ga_bm_t *bm, uint64_t id)
{
    ga_tcache_t *t = ga_tc_last;
    if (t && t->bm == bm && t->stream.id == id)
        return t;
    for (t = ga_tc_list; t; t = t->t_next) {
        if (t->bm == bm && t->stream.id == id) {
            t->chosen = ++ga_tc_clock;
            ga_tc_last = t;
            return t;
        }
    }
    return NULL;
}

/* A block of ROUNDED bytes from this thread's cache of stream ID, for an
 * allocation on S: from its large slot or its slots, whichever holds that
 * size.  Both are probed for every size, with no branch on which one the
 * size belongs to (thread_cache_max): on a random mix of sizes such a
 * branch mispredicts, where the large slot's own test is nearly always
 * false. */
__attribute__((always_inline)) static inline bool
ga_tcache_take(ga_bm_t *bm, uint64_t id, size_t rounded, size_t size, ga_stream_t s, void **ptr)
{
    ga_tcache_t *t = ga_tcache_find(bm, id);
    if (!t)
        return false;
    /* A cold cache serves nothing, not even its large slot's block at
     * that block's size: the allocation takes the lock, which gives the
     * block back, merged with its free neighbours, and best fit may find
     * a closer block elsewhere.  Serving it here (tried on 2026-11-25)
     * raised the replay of resnet50_train on fixed segments from 1.062 to
     * 1.120 times its peak request (bench_fragmentation), for pairs that
     * a cold cache sees rarely: when they are common, it warms. */
    /* Only the sizes that the slots may hold count for going cold and
     * warm again: a size above thread_cache_max misses whatever the
     * cache does, and a program whose allocations are mostly such sizes
     * would otherwise lose the cache of its small ones. */
    bool counts = rounded <= bm->set.thread_cache_max;
    if (t->cold) {
        if (counts)
            tc_cold_probe(t, rounded, bm->round_shift);
        return false;
    }
    bool locked = tc_owner_enter(t);
    ga_block_t *b = NULL;
    if (t->bm == bm) {
        /* The large slot first: a pair of one large size then skips the
         * slots' keys; on a random mix the test is nearly always false,
         * and predicted so. */
        if (t->large && t->large->size == rounded) {
            b = t->large;
            t->large = NULL;
            ga_tc_parked -= ga_tc_parked != 0;
        } else {
            unsigned i = tc_slot_of(rounded, bm->round_shift);
            unsigned in_a = t->key[i] == rounded, in_b = t->key[i ^ 1] == rounded;
            unsigned in_slot = in_a | in_b;
            ga_opaque(&in_slot);
            if (in_slot) {
                unsigned j = i ^ !in_a;
                b = t->stack[j][--t->n[j]];
                if (!t->n[j])
                    t->key[j] = 0;
                t->bytes -= b->size;
            }
        }
    }
    if (!b) {
        tc_owner_leave(t, locked);
        if (counts)
            tc_missed(bm, t);
        return false;
    }
    atomic_store_explicit(&b->cached, 0, memory_order_relaxed);
    /* The cache counted minus the block's last size; a new size goes to
     * the manager's drift (see req_drift), not to this cache. */
    tc_add(&t->req_delta, (int64_t)b->requested);
    ga_req_drift(bm, (int64_t)size - (int64_t)b->requested);
    b->requested = size;
    b->stream_id = s.id; /* it may have been allocated on another stream before */
    tc_add(&t->inuse_delta, (int64_t)b->size);
    t->allocs++;
    int64_t mine_req, mine_use;
    tc_mine(bm, t, &mine_req, &mine_use);
    tc_owner_leave(t, locked);
    /* Peaks as this thread sees them (see the top of tcache.c); compared
     * signed, so that a view that a race left below zero raises none. */
    int64_t rv = atomic_load_explicit(&bm->base_req, memory_order_relaxed) +
                 atomic_load_explicit(&bm->req_drift, memory_order_relaxed) + mine_req;
    int64_t uv = atomic_load_explicit(&bm->base_inuse, memory_order_relaxed) + mine_use;
    if (rv > (int64_t)atomic_load_explicit(&bm->peak.requested, memory_order_relaxed) ||
        uv > (int64_t)atomic_load_explicit(&bm->peak.in_use, memory_order_relaxed)) {
        ga_lock(&bm->lock);
        ga_bm_update_peaks(bm);
        ga_unlock(&bm->lock);
    }
    *ptr = (void *)b->addr;
    return true;
}

/* A block for an allocation of SIZE (ROUNDED) on S from this thread's
 * cache of S, else from its cache of blocks freed with no stream (they
 * suit S), if it has one; false when neither holds that size.  Inlined
 * wherever block.c's alloc_block is: out of line, the plain manager's
 * pair cost 29 more instructions (bench_churn). */
__attribute__((always_inline)) static inline bool
ga_tcache_alloc(ga_bm_t *bm, size_t rounded, size_t size, ga_stream_t s, void **ptr)
{
    return ga_tcache_take(bm, s.id, rounded, size, s, ptr) ||
           (s.id != GA_STREAM_ANY && ga_tc_any &&
            ga_tcache_take(bm, GA_STREAM_ANY, rounded, size, s, ptr));
}

/* The rest of a free into T (entered, LOCKED as tc_owner_enter said), once
 * B is in a slot or the large slot: the cache's corrections, and the
 * cached peak that the free may have raised. */
__attribute__((always_inline)) static inline void tc_kept(ga_bm_t *bm, ga_tcache_t *t,
                                                          ga_block_t *b, ga_stream_t s, bool locked)
{
    atomic_store_explicit(&b->cached, 1, memory_order_relaxed);
    tc_add(&t->req_delta, -(int64_t)b->requested);
    tc_add(&t->inuse_delta, -(int64_t)b->size);
    t->frees++;
    t->stream.handle = s.handle;
    int64_t mine_req, mine_use;
    tc_mine(bm, t, &mine_req, &mine_use);
    (void)mine_req;
    tc_owner_leave(t, locked);
    /* The cached bytes grew: their peak, as for the others in alloc. */
    int64_t c = (int64_t)atomic_load_explicit(&bm->base_reserved, memory_order_relaxed) -
                (atomic_load_explicit(&bm->base_inuse, memory_order_relaxed) + mine_use);
    if (c > (int64_t)atomic_load_explicit(&bm->peak.cached, memory_order_relaxed)) {
        ga_lock(&bm->lock);
        ga_bm_update_peaks(bm);
        ga_unlock(&bm->lock);
    }
}

/* A free into cold cache T: its slots take nothing, but its large slot
 * still takes one block, as a warm cache's does; the allocation that
 * misses next gives it back under the lock it takes anyway (tcache.c,
 * "Cold caches"). */
static inline bool tc_free_cold(ga_bm_t *bm, ga_tcache_t *t, ga_block_t *b, ga_stream_t s)
{
    /* Its size is remembered, so that the probes can tell when a warm
     * cache would hit again: a size the slots may hold (the probes of
     * others do not count). */
    if (b->size <= bm->set.thread_cache_max)
        t->ghost[tc_slot_of(b->size, bm->round_shift)] = b->size;
    if (b->size > bm->set.thread_cache_large)
        return false;
    /* The large slot is read inside: a remote flush may be emptying it. */
    bool locked = tc_owner_enter(t);
    if (t->bm != bm || t->large) {
        tc_owner_leave(t, locked);
        return false;
    }
    t->large = b;
    ga_tc_parked++;
    tc_kept(bm, t, b, s, locked);
    return true;
}

/* Keep live block B, freed on S, in this thread's cache of S (in a slot,
 * or in the large slot when it is above thread_cache_max or the slots
 * have no room, or the cache is cold); false when it does not go there
 * (too large, recorded uses, the cache full). */
static inline bool ga_tcache_free(ga_bm_t *bm, ga_block_t *b, ga_stream_t s)
{
    size_t size = b->size;
    if (size > bm->tc_limit || b->uses)
        return false;
    ga_tcache_t *t = ga_tcache_find(bm, s.id);
    if (!t && !(t = ga_tcache_create(bm, s)))
        return false;
    if (t->cold)
        return tc_free_cold(bm, t, b, s);
    bool locked = tc_owner_enter(t);
    /* A slot, if the size is not above thread_cache_max and its slot has
     * room, computed as one value.  Whether the size is small is a branch:
     * a pair of one large size then skips the slot lookup, at the cost of
     * a misprediction on a random mix of sizes. */
    unsigned slot = 0, j = 0;
    if (size <= bm->set.thread_cache_max) {
        j = tc_slot_for(t, size, bm->round_shift);
        slot = ((t->key[j] == size) | (t->key[j] == 0)) & (t->n[j] < t->count) &
               (t->bytes + size <= bm->set.thread_cache_bytes);
        ga_opaque(&slot);
    }
    if (t->bm != bm) {
        tc_owner_leave(t, locked);
        return false;
    }
    if (slot) {
        t->bytes += size;
        t->key[j] = size;
        t->stack[j][t->n[j]++] = b;
    } else if (size <= bm->set.thread_cache_large && !t->large) {
        /* What the slots do not take waits in the large slot for the
         * thread's next locked operation, which gives it back: a free
         * followed by an allocation then takes the manager's lock once. */
        t->large = b;
        ga_tc_parked++;
    } else {
        tc_owner_leave(t, locked);
        return false;
    }
    tc_kept(bm, t, b, s, locked);
    return true;
}

#endif /* GA_BLOCK_TCACHE_H */
