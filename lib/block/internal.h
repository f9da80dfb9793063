/*
 * internal.h - the data structures shared by the files of the block
 * manager (block.c, livemap.c, tcache.c, check.c; fit.h).  Nothing outside
 * lib/block/ includes it.
 *
 * A segment is a region taken from the provider: a fixed one (map/unmap)
 * or a growable one (an address reservation whose granules are committed
 * and decommitted).  Blocks tile each segment exactly, in address order:
 *
 *   LIVE     handed out (to the user, or held by a thread cache)
 *   FREE     reusable, in the free index of one pool
 *   PENDING  freed, waiting for events of other streams (record_stream)
 *   HOLE     growable segments only: address space with nothing mapped
 *
 * A pool is the set of free blocks that one stream may reuse at once: the
 * blocks freed on that stream and not yet known to be finished on the GPU.
 * The ANY pool holds blocks every stream may reuse (the free point has
 * completed, or the provider has no events: host memory).  HOLE blocks are
 * kept in a pool of their own so that address space can be found by fit.
 */
#ifndef GA_BLOCK_INTERNAL_H
#define GA_BLOCK_INTERNAL_H

#include "block/block.h"
#include "block/lock.h"
#include "block/total.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

enum { BLOCK_LIVE = 1, BLOCK_FREE = 2, BLOCK_PENDING = 3, BLOCK_HOLE = 4 };

/* Size classes: small requests and large ones live in separate segments
 * so that long-lived large blocks never pin a page of small ones. */
enum { CLASS_SMALL = 0, CLASS_LARGE = 1, CLASS_COUNT = 2 };

typedef struct ga_segment ga_segment_t;
typedef struct ga_pool ga_pool_t;

/* Streams that a live block is also used by (record_stream). */
typedef struct ga_uses {
    unsigned count, cap;
    ga_stream_t s[];
} ga_uses_t;

/* The uses of a block whose record_stream found no host memory to note
 * its stream: any stream may use it, as far as the manager knows.  Its
 * free puts it in limbo, which no stream takes from before a drain has
 * waited for the whole device (limbo.c); no event is needed, and no
 * stream is named, so nothing disturbs a capture.  Never freed. */
extern ga_uses_t ga_uses_unknown;
#define GA_USES_UNKNOWN (&ga_uses_unknown)

static inline void ga_uses_free(ga_uses_t *u)
{
    if (u != GA_USES_UNKNOWN)
        free(u);
}

/* Block records are cache-line aligned: thread caches write the records
 * of their own blocks, and two threads' records must not share a line.
 * Two lines each.  The first holds what fit, split, merge and a free
 * read: a free touches the records of both neighbours, and random churn
 * is bound by those loads.  What only a free block needs (its free-list
 * links and pool) and what only a live one needs (its sizes and recorded
 * streams) share the same bytes of it: no block is both, and a free then
 * reads nothing from the second line, which holds what splits, sweeps
 * and record_stream use. */
typedef struct ga_block {
    /* line 1 */
    _Alignas(64) uintptr_t addr;
    size_t size;
    struct ga_block *prev, *next; /* address neighbours in the segment */
    union {
        struct {                      /* FREE, HOLE; PENDING: pool only */
            struct ga_block *fnext;   /* free index list */
            struct ga_block **fpprev; /* what points at this block: head or fnext */
            ga_pool_t *pool;          /* the pool it is in; PENDING: the pool it goes to */
        };
        struct {                 /* LIVE */
            size_t requested;    /* the user's size (the owner thread's while cached) */
            size_t requested_bm; /* size as counted in the manager's totals */
            ga_uses_t *uses;     /* record_stream streams, NULL if none */
        };
    };
    union {
        unsigned pending; /* PENDING: events still outstanding */
        uint32_t lslot;   /* LIVE: where the live map holds it (livemap.c) */
        uint32_t flist;   /* FREE, HOLE: the free list it is in (fit.h) */
    };
    uint8_t state;
    uint8_t cls;            /* CLASS_SMALL or CLASS_LARGE */
    _Atomic uint8_t cached; /* LIVE: held by a thread cache */
    /* line 2 */
    _Alignas(64) uint64_t stamp; /* FREE in a stream pool: free sequence number */
    ga_segment_t *seg;
    uint64_t stream_id; /* LIVE: id of the allocation stream */
    uintptr_t ulo, uhi; /* FREE in a stream pool: the part its stream used (ga_block_used) */
    uintptr_t olo, ohi; /* FREE in a stream pool: its old part (block.c, coalesce_into) */
    uint64_t ostamp;    /* the newest stamp of its pieces; GA_OLD_WHOLE: all of it, stamp */
} ga_block_t;

/* ostamp of a block whose old part is all of it, stamped as the block:
 * one store where a split or a merge needs no more. */
#define GA_OLD_WHOLE UINT64_MAX

/* A free block of a stream pool holds what its stream freed, and may hold
 * free memory of ANY that it took in (block.c, joins), which its stream
 * never used since: every stream may have that part back at once, with no
 * event (sweep.c, ga_pool_reclaim; a retired pool's goes to ANY, not to
 * limbo).  [ulo, uhi) covers the part the stream used, pieces merged
 * taking the span of theirs; empty (ulo > uhi) when there is none. */
static inline void ga_block_used(ga_block_t *b, bool all)
{
    b->ulo = all ? b->addr : UINTPTR_MAX;
    b->uhi = all ? b->addr + b->size : 0;
}

_Static_assert(sizeof(ga_block_t) == 128, "a block record is two cache lines");

struct ga_segment {
    uintptr_t base;
    size_t size;   /* fixed: mapped bytes; growable: reserved address range */
    size_t mapped; /* bytes mapped now */
    bool growable;
    uint8_t cls;
    ga_block_t *first, *last; /* lowest and highest block */
    ga_segment_t *prev, *next;
};

/* Keep V a value the compiler cannot see through (an empty asm): GCC
 * turns tests combined with & back into branches, and on a random mix of
 * sizes, a branch on a random outcome mispredicts. */
static inline void ga_opaque(unsigned *v)
{
    __asm__("" : "+r"(*v));
}

/* Bytes that may be added to USED before it passes CAP (0 when it has):
 * max_reserved's test, on reserved bytes here and on bytes in use in
 * direct.c. */
static inline uint64_t ga_cap_room(uint64_t used, uint64_t cap)
{
    return used < cap ? cap - used : 0;
}

/* The largest free block that may serve a request of RS bytes under
 * max_split MS (0: any).  A block above MS is never split, so it serves a
 * request whole: one at most MS for a request at most MS, and for a larger
 * request one at most MS bytes larger than it (without that bound a 5M
 * request took a free 64M block whole).  Fit, and growth (segment.c),
 * keep to it. */
static inline size_t ga_split_limit(size_t ms, size_t rs)
{
    if (!ms)
        return 0;
    if (rs <= ms)
        return ms;
    return rs > SIZE_MAX - ms ? SIZE_MAX : rs + ms;
}

/* C ? A : B for unsigned C of 0 or 1, as a value (no branch). */
static inline uintptr_t ga_select(unsigned c, uintptr_t a, uintptr_t b)
{
    ga_opaque(&c);
    return b ^ ((a ^ b) & ((uintptr_t)0 - c));
}

#include "block/fit.h"

struct ga_pool {
    ga_stream_t stream; /* GA_STREAM_ANY for the ANY and HOLE pools */
    ga_fit_t fit[CLASS_COUNT];
    uint64_t seq;       /* stamp of the last free into this pool */
    ga_event_t sweep;   /* event recorded to release blocks to ANY */
    uint64_t sweep_seq; /* blocks stamped up to this are covered by it */
    bool wanted;        /* another stream missed: record at the next free */
    bool is_stream;     /* a stream's pool, not ANY or HOLE */
    bool parts;         /* the next sweep gives ANY old parts too (sweep.c) */
    /* Another stream, or an allocation with no stream, missed while this
     * pool held frees no sweep covered (ga_sweep_request_all): from then
     * on the pool takes in no free memory of ANY (block.c, joins) and asks
     * for a sweep whenever it caches more than GA_SHARED_CACHED of the
     * bytes in use (ga_sweep_shared). */
    bool shared;
    uint64_t used; /* the manager's pool_clock when its stream last freed or allocated */
};

/* Whether P holds free blocks. */
static inline bool ga_pool_holds(const ga_pool_t *p)
{
    return !ga_fit_empty(&p->fit[CLASS_SMALL]) || !ga_fit_empty(&p->fit[CLASS_LARGE]);
}

/* Live map (livemap.c): address -> live block, readable without the lock
 * (thread caches free through it) and written under the manager's lock.
 * Buckets of four keys and their values fill one cache line; a key lives
 * in its home bucket, or when that is full in one of the next REACH
 * buckets, REACH kept per home bucket. */
#define GA_LMAP_WAYS 4

typedef struct ga_lmap_bucket {
    _Alignas(64) _Atomic uintptr_t key[GA_LMAP_WAYS];
    ga_block_t *_Atomic val[GA_LMAP_WAYS];
} ga_lmap_bucket_t;

typedef struct ga_lmap_table {
    size_t mask; /* buckets - 1 */
    ga_lmap_bucket_t *b;
    _Atomic uint8_t *reach;        /* per home bucket: buckets past it its keys may be in */
    struct ga_lmap_table *retired; /* older tables, freed at destroy */
} ga_lmap_table_t;

typedef struct ga_lmap {
    ga_lmap_table_t *_Atomic table;
    size_t count; /* live entries */
} ga_lmap_t;

gpuarena_status_t ga_lmap_init(ga_lmap_t *m);
void ga_lmap_destroy(ga_lmap_t *m);
/* The rest of ga_lmap_insert (livemap.c): the table must grow, or the
 * key's home bucket is full. */
gpuarena_status_t ga_lmap_insert_far(ga_lmap_t *m, ga_block_t *b);
void ga_lmap_remove(ga_lmap_t *m, ga_block_t *b);
/* Whether the table is consistent (the lock held); *BAD gets the first
 * key in error, 0 when only the count is wrong. */
bool ga_lmap_valid(ga_lmap_t *m, uintptr_t *bad);
/* The reader, inline: every free starts with it, lock-free. */
#define GA_LMAP_EMPTY ((uintptr_t)0)

static inline size_t ga_lmap_hash(uintptr_t a, size_t mask)
{
    /* Block addresses are multiples of the rounding; mix the high bits. */
    uint64_t h = (uint64_t)a * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & mask;
}

/* 1 when way K of BK holds A.  The result is kept a value (the empty asm):
 * GCC otherwise turns some of ga_lmap_match's tests into branches, which
 * the random way of a key mispredicts. */
static inline unsigned ga_lmap_way_is(ga_lmap_bucket_t *bk, unsigned k, uintptr_t a)
{
    unsigned e = atomic_load_explicit(&bk->key[k], memory_order_acquire) == a;
    ga_opaque(&e);
    return e;
}

/* Bit k set when way k of bucket BK holds A: four compares, no branch. */
static inline unsigned ga_lmap_match(ga_lmap_bucket_t *bk, uintptr_t a)
{
    _Static_assert(GA_LMAP_WAYS == 4, "ga_lmap_match compares four ways");
    return ga_lmap_way_is(bk, 0, a) | ga_lmap_way_is(bk, 1, a) << 1 |
           ga_lmap_way_is(bk, 2, a) << 2 | ga_lmap_way_is(bk, 3, a) << 3;
}

/* The rest of ga_lmap_find: A not in its home bucket H (livemap.c). */
ga_block_t *ga_lmap_find_far(ga_lmap_table_t *t, size_t h, uintptr_t a);

/* The record at A, or NULL.  Without the lock the answer is a hint (see
 * livemap.c): the caller checks the record's address and state. */
__attribute__((always_inline)) static inline ga_block_t *ga_lmap_find(ga_lmap_t *m, uintptr_t a)
{
    if (a == GA_LMAP_EMPTY)
        return NULL;
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_acquire);
    size_t h = ga_lmap_hash(a, t->mask);
    ga_lmap_bucket_t *bk = &t->b[h];
    unsigned hit = ga_lmap_match(bk, a);
    if (hit)
        return atomic_load_explicit(&bk->val[__builtin_ctz(hit)], memory_order_relaxed);
    return atomic_load_explicit(&t->reach[h], memory_order_relaxed) ? ga_lmap_find_far(t, h, a)
                                                                    : NULL;
}

/* Whether table T of M takes one more key at half load or less. */
static inline bool ga_lmap_room(const ga_lmap_t *m, const ga_lmap_table_t *t)
{
    return (m->count + 1) * 2 <= (t->mask + 1) * GA_LMAP_WAYS;
}

/* Publish A -> B in way K of bucket number I of T: the value first, then
 * the key with release (see livemap.c); the slot it is in. */
static inline uint32_t ga_lmap_store(ga_lmap_table_t *t, size_t i, unsigned k, uintptr_t a,
                                     ga_block_t *b)
{
    atomic_store_explicit(&t->b[i].val[k], b, memory_order_relaxed);
    atomic_store_explicit(&t->b[i].key[k], a, memory_order_release);
    return (uint32_t)(i * GA_LMAP_WAYS + k);
}

/* Put live block B in the map (the lock held).  Inline for the common
 * case, a free way in the key's home bucket of a table with room: every
 * allocation on the locked path makes one, and the call into livemap.c
 * cost more than the store. */
__attribute__((always_inline)) static inline gpuarena_status_t ga_lmap_insert(ga_lmap_t *m,
                                                                              ga_block_t *b)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    if (ga_lmap_room(m, t)) {
        size_t h = ga_lmap_hash(b->addr, t->mask);
        unsigned free_ways = ga_lmap_match(&t->b[h], GA_LMAP_EMPTY);
        if (free_ways) {
            b->lslot = ga_lmap_store(t, h, (unsigned)__builtin_ctz(free_ways), b->addr, b);
            m->count++;
            return GPUARENA_SUCCESS;
        }
    }
    return ga_lmap_insert_far(m, b);
}

/* A recorded event waiting to release a PENDING block. */
typedef struct ga_waiter {
    ga_event_t ev;
    ga_block_t *block;
    struct ga_waiter *next;
} ga_waiter_t;

/* Counters in the manager's view: a block held by a thread cache counts as
 * live here; the thread caches keep the corrections (tcache.c). */
typedef struct ga_counts {
    uint64_t requested, in_use, reserved;
    uint64_t allocs, frees, hits, misses;
    uint64_t maps, unmaps, waits, oom_retries, oom_failures, last_oom, device_free;
    uint64_t events, trims, segments, live;
} ga_counts_t;

typedef struct ga_peaks {
    _Atomic uint64_t requested, in_use, reserved, cached;
} ga_peaks_t;

typedef struct ga_tcache ga_tcache_t;

/* Direct mode (direct.c): the provider hands out every block itself (the
 * driver's pool).  There are no segments, pools or free blocks: live
 * blocks are records in the live map, also linked through prev/next, and
 * the last frees are remembered so that a second free of one of them is
 * told from a foreign pointer. */
#define GA_DIRECT_FREED 1024

typedef struct ga_direct {
    ga_block_t *live; /* every live block, linked through prev/next */
    ga_block_t *held; /* freed, kept from the pool until the device is
                       * waited for (direct.c), linked through next */
    uint64_t held_blocks, held_bytes;
    struct ga_freed {
        uintptr_t addr;
        size_t size;
    } * freed;       /* ring of the last GA_DIRECT_FREED frees */
    unsigned nfreed; /* entries in use */
    unsigned next;   /* where the next free is written */
} ga_direct_t;

/* Bits of ga_bm.wanted_map (ga_wanted_word), more than there are pools
 * (GA_POOLS_MAX): the pools of streams that a program made and destroyed
 * may want a sweep for good (no free on them will record it).  With one
 * bit per (id % 64), as there was, 64 of them sent the frees of every
 * other stream past its thread cache to the lock, and each pool made
 * then took in the free memory of ANY around it (a granule per stream in
 * a sim program that made a stream per step).  Stream ids are handed out
 * in sequence: the last 1024 streams' bits are apart. */
#define GA_WANTED_BITS 1024

struct ga_bm {
    ga_lock_t lock;
    ga_provider_t *prov;
    ga_settings_t set;
    size_t round;
    unsigned round_shift; /* log2(round): round is a power of two */
    bool events;          /* the provider has events: frees are stream-ordered */
    bool direct;          /* the provider hands out blocks itself (direct.c) */
    bool plain;           /* no hints, no zeros: a new block needs nothing more */
    bool hold;            /* its memory stays mapped until it is destroyed (ga_bm_hold) */
    bool forked;          /* a GPU arena's in a fork(2) child: nothing reaches its provider */
    bool guard;           /* host_guard(): events and host-visible memory */
    bool own_first;       /* find_free: a stream's own pool before ANY (block.c) */
    size_t tc_limit;      /* largest block a thread cache may hold (either kind of slot) */
    /* Requests up to CLASS_MAX bytes are rounded up to size classes
     * (block.c, class_round), the others to ROUND; CLASS_MASK[f] is the
     * class step minus one for requests of 2^f + 1 to 2^(f+1) bytes. */
    size_t class_max;
    size_t class_mask[64];
    ga_direct_t d;

    ga_segment_t *segs;              /* every segment */
    ga_segment_t *grow[CLASS_COUNT]; /* the growable segment of each class */
    ga_pool_t any, holes;
    ga_pool_t limbo;   /* blocks of retired stream pools (limbo.c) */
    ga_pool_t **pools; /* stream pools, at most GA_POOLS_MAX */
    unsigned npools, cap_pools;
    ga_pool_t *last_pool; /* the one pool_find found last */
    uint64_t pool_clock;  /* ticks at each use of a stream pool (ga_pool_t.used) */

    ga_lmap_t live;
    ga_block_t *spare_blocks; /* recycled block records */
    void **slabs;             /* block record slabs, freed at destroy */
    unsigned nslabs, cap_slabs;
    ga_event_t *spare_events;
    unsigned nspare_events, cap_spare_events;
    ga_waiter_t *waiters; /* events of PENDING blocks */
    uint64_t pending_blocks;

    ga_counts_t c;
    ga_peaks_t peak;
    ga_total_t *total; /* the sum over the arenas of this kind and device, or NULL */
    /* The sum, over the blocks the user holds and those the thread
     * caches hold, of requested minus requested_bm: a cache that hands a
     * block out again for another size adds the difference here, without
     * the lock, so that each cache's own correction stays minus what it
     * holds and any thread's view of the totals is never below the truth
     * (tcache.c). */
    _Atomic int64_t req_drift;
    /* c.requested and c.in_use, published for the thread caches' peak
     * checks, which add req_drift and their thread's corrections. */
    _Atomic int64_t base_req, base_inuse;
    _Atomic uint64_t base_reserved; /* c.reserved, for the cached peak */
    /* Bit (id % GA_WANTED_BITS) set while the pool of stream id wants a
     * sweep: a free on such a stream skips the thread cache, so that the
     * locked free records the sweep (a thread cache never records
     * events).  See ga_wanted_word. */
    _Atomic uint64_t wanted_map[GA_WANTED_BITS / 64];

    pthread_mutex_t tc_lock; /* guards the list below */
    ga_tcache_t *tcaches;    /* thread caches of this manager */
};

/* The word of ga_bm.wanted_map that holds stream ID's bit, (ID % 64). */
static inline _Atomic uint64_t *ga_wanted_word(ga_bm_t *bm, uint64_t id)
{
    return &bm->wanted_map[(id / 64) % (GA_WANTED_BITS / 64)];
}

/* Whether stream ID's bit is set: its pool may want a sweep (read
 * without the lock: a hint that the locked free makes exact). */
static inline bool ga_wanted(ga_bm_t *bm, uint64_t id)
{
    return atomic_load_explicit(ga_wanted_word(bm, id), memory_order_relaxed) >> (id & 63) & 1;
}

/* block.c, for tcache.c and check.c (the manager's lock held). */
/* DONE: the free point is known to have passed (the stream was idle). */
void ga_bm_free_locked(ga_bm_t *bm, ga_block_t *b, ga_stream_t s, bool done);
void ga_bm_update_peaks(ga_bm_t *bm);
uint64_t ga_bm_user_in_use(ga_bm_t *bm);
/* After thread caches gave blocks back to the pools (the lock held):
 * honour max_cached and publish the counts for the peaks. */
void ga_bm_caches_returned(ga_bm_t *bm);

/* A block's requested size changed by D for the user (see req_drift). */
static inline void ga_req_drift(ga_bm_t *bm, int64_t d)
{
    if (d) /* rare: a cached block taken again for another size */
        atomic_fetch_add_explicit(&bm->req_drift, d, memory_order_relaxed);
}
/* Block records (never freed while the manager lives). */
ga_block_t *ga_bm_block_new(ga_bm_t *bm);
void ga_bm_block_delete(ga_bm_t *bm, ga_block_t *b);
/* block.c's records, split and merge, for segment.c and sweep.c (out of
 * line there; block.c's own hot paths use them inline).  ga_bm_spare_records: two
 * records spare, so that two splits cannot fail half-way.  ga_bm_split:
 * B (in no pool) cut at SIZE, the tail returned.  ga_bm_coalesce: B (in
 * no pool) merged with its neighbours of P, put in P and returned, with
 * STAMP (the newest of its pieces' in a stream pool). */
bool ga_bm_spare_records(ga_bm_t *bm);
void ga_bm_pool_put(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b);
void ga_bm_pool_take(ga_block_t *b);
ga_block_t *ga_bm_split(ga_bm_t *bm, ga_block_t *b, size_t size);
ga_block_t *ga_bm_coalesce(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b, uint64_t stamp);
ga_pool_t *ga_bm_pool_find(ga_bm_t *bm, uint64_t id);
/* B (in no pool) freed into P: stamped in a stream pool, merged. */
ga_block_t *ga_bm_free_into(ga_bm_t *bm, ga_pool_t *p, ga_block_t *b);

/* sweep.c (the manager's lock held): events, sweeps, pending blocks. */
/* A spare event, or a new one; back to the spares. */
gpuarena_status_t ga_bm_event_get(ga_bm_t *bm, ga_event_t *ev);
void ga_bm_event_put(ga_bm_t *bm, ga_event_t ev);
/* An event recorded on S (the manager's count of events too). */
gpuarena_status_t ga_bm_event_record(ga_bm_t *bm, ga_stream_t s, ga_event_t *out);
/* The streams whose pools want a sweep, for the lock-free free path
 * (wanted_map). */
void ga_sweep_wanted_update(ga_bm_t *bm);
/* A stream missed (MISSED; NULL: the arena is over max_cached): ask
 * every stream pool with uncovered free blocks for a sweep at its next
 * free, which gives ANY the old parts it covers too in the pools of other
 * streams than MISSED (every pool's for the cap). */
void ga_sweep_request_all(ga_bm_t *bm, const ga_stream_t *missed);
/* Ask P's stream for a sweep at its next free, one that gives ANY the
 * old parts it covers too (another stream wants P's blocks). */
void ga_sweep_want(ga_bm_t *bm, ga_pool_t *p);
/* A shared pool (ga_pool_t.shared) asks for a sweep, with old parts,
 * once it caches more than the bytes in use divided by this. */
#define GA_SHARED_CACHED 2
/* After a free into shared stream pool P: ask for a sweep if it caches
 * too much. */
void ga_sweep_shared(ga_bm_t *bm, ga_pool_t *p);
/* After a free into stream pool P on S: finish a completed sweep and
 * record a wanted one, where MAY_RECORD (S was asked whether it is being
 * captured, or needs no asking). */
void ga_sweep_on_free(ga_bm_t *bm, ga_pool_t *p, ga_stream_t s, bool may_record);
/* Query the outstanding events (SYNC: wait for them) and act on those
 * complete: sweeps finished, pending blocks freed. */
void ga_sweep_poll(ga_bm_t *bm, bool sync);
/* What can be made reusable without waiting for the whole device (see
 * sweep.c); S gets a sweep of its own. */
void ga_sweep_settle(ga_bm_t *bm, ga_stream_t s);
/* Whether free blocks are still kept from the streams that did not free
 * them (stream pools, pending blocks). */
bool ga_sweep_unsettled(const ga_bm_t *bm);
/* Everything freed so far made reusable by every stream, waiting for the
 * device; its status (a capture refuses the wait). */
gpuarena_status_t ga_sweep_drain(ga_bm_t *bm);
/* Move the free blocks of FROM stamped UPTO or earlier (UINT64_MAX: all)
 * to TO, merged there with TO's neighbours: a completed sweep's to ANY,
 * a retired pool's to limbo, limbo's to ANY after a drain. */
void ga_pool_move(ga_bm_t *bm, ga_pool_t *from, ga_pool_t *to, uint64_t upto);

/* limbo.c (the manager's lock held).  Stream pools kept at most. */
#define GA_POOLS_MAX 256
/* Before a new stream pool is made: with GA_POOLS_MAX of them, retire
 * the one used longest ago, its free blocks to limbo. */
void ga_limbo_make_room(ga_bm_t *bm);
/* sweep.c: give the parts of stream pools' free blocks that their
 * streams never used to ANY (before the arena grows for stream ID, whose
 * own pool is left whole); whether any went. */
bool ga_pool_reclaim(ga_bm_t *bm, uint64_t id);

/* Once the device has passed every free (ga_sweep_drain): limbo to ANY. */
void ga_limbo_release(ga_bm_t *bm);

/* segment.c (the manager's lock held). */
/* Map memory for RS bytes of class CLS usable by S; the block returned is
 * in a pool and large enough. */
gpuarena_status_t ga_seg_grow(ga_bm_t *bm, int cls, size_t rs, ga_stream_t s, ga_block_t **out);
/* Return free memory of the ANY pool to the provider until WANT bytes are
 * released or nothing more can be, the largest blocks first; the bytes
 * released. */
size_t ga_seg_release(ga_bm_t *bm, size_t want);
/* Give segment G back to the provider at destroy; *LEFT gets the bytes
 * that stay mapped when it fails. */
gpuarena_status_t ga_seg_give_back(ga_bm_t *bm, ga_segment_t *g, size_t *left);

/* Whether new memory comes from growing a reservation (growable
 * segments) rather than from mapping fixed segments. */
static inline bool ga_grows_in_place(const ga_bm_t *bm)
{
    return bm->prov->growable && bm->set.expandable;
}
/* Count a failed allocation of SIZE bytes and return ST, with the
 * out-of-memory message when ST is GPUARENA_ERR_OUT_OF_MEMORY. */
gpuarena_status_t ga_bm_out_of_memory(ga_bm_t *bm, size_t size, gpuarena_status_t st);

/* Whether the free on S of live block B, which has recorded streams, may
 * record events on them: GPUARENA_ERR_STREAM_CAPTURE when one of them
 * (S apart) is being captured, since the event would go into that graph
 * instead of marking the end of the stream's work (block.c).  Asked under
 * the lock before anything changes. */
gpuarena_status_t ga_bm_uses_check(ga_bm_t *bm, const ga_block_t *b, ga_stream_t s);
/* Whether recorded use U's handle names the same stream from this thread
 * (block.c). */
bool ga_bm_use_named_here(ga_bm_t *bm, ga_stream_t u);

/* How an allocation was served: from a thread cache, a free block under
 * the lock (a hit), new memory (a miss), or the driver's pool (direct). */
typedef enum ga_served {
    GA_SERVED_CACHE,
    GA_SERVED_HIT,
    GA_SERVED_MISS,
    GA_SERVED_DIRECT
} ga_served_t;
/* Take back the counts of an allocation served HOW and of the free that
 * gave its block back at once, when the provider's hooks or the zero
 * fill failed before it was handed out (block.c; takes the lock). */
void ga_bm_uncount_alloc(ga_bm_t *bm, ga_served_t how);

/* direct.c: the manager over a direct provider.  alloc, free, trim and
 * check take the manager's lock; bad_pointer and the rest run under it. */
gpuarena_status_t ga_direct_init(ga_bm_t *bm);
void ga_direct_fini(ga_bm_t *bm);
gpuarena_status_t ga_direct_alloc(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr);
gpuarena_status_t ga_direct_free(ga_bm_t *bm, void *ptr, ga_stream_t s);
gpuarena_status_t ga_direct_trim(ga_bm_t *bm, size_t keep);
/* After a free or a new max_cached (the lock held): release what the pool
 * caches beyond the cap. */
void ga_direct_cap(ga_bm_t *bm);
gpuarena_status_t ga_direct_check(ga_bm_t *bm);
gpuarena_status_t ga_direct_bad_pointer(ga_bm_t *bm, uintptr_t a, const char *what);

/* Host-visible memory with GPU events (pinned, managed): a freed block is
 * reusable, by any stream, only once the GPU has passed its free, unless
 * its stream was idle when it was freed (then it may enter a thread
 * cache). */
static inline bool host_guard(const ga_bm_t *bm)
{
    return bm->guard; /* set at creation: the free path asks it several times */
}

/* tcache.c (the fast path, alloc and free, is inline in tcache.h) */
/* Return every cached block of BM to it (the manager's lock held). */
void ga_tcache_flush_all(ga_bm_t *bm);
/* Return the blocks that the calling thread's own caches of BM hold, if
 * they come to NEED bytes or more (the manager's lock held); whether
 * they did. */
bool ga_tcache_flush_own(ga_bm_t *bm, size_t need);
/* What every cache of BM adds to the manager's counts, in one walk: the
 * corrections of the requested and in-use bytes, the allocations (each
 * a hit) and frees it served, and the free blocks it holds. */
typedef struct ga_tc_sums {
    int64_t req, inuse;
    uint64_t allocs, frees, blocks;
} ga_tc_sums_t;
void ga_tcache_sums(ga_bm_t *bm, ga_tc_sums_t *sum);
/* Detach every cache from BM before it is destroyed. */
void ga_tcache_detach_all(ga_bm_t *bm);

#endif /* GA_BLOCK_INTERNAL_H */
