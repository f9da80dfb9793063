/*
 * tcache.c - per-thread caches of recently freed small blocks.
 *
 * The common pattern of a caching allocator, free then allocate the same
 * size on the same stream, should take no shared lock.  Each thread keeps,
 * per (manager, stream), a small direct-mapped table of exact sizes, each
 * slot a stack of blocks freed on that stream.  Reuse on the same stream
 * is what stream order allows at once, so no event is involved.  Blocks
 * with record_stream uses never enter a cache.
 *
 * A cached block stays LIVE in the manager (its address stays in the live
 * map), so a free finds it without the lock; the cache holds the
 * difference between the manager's totals and what the user sees
 * (requested, in use, counts), which the statistics add up.  Peaks seen
 * from a cache hit use the manager's totals and the calling thread's own
 * difference: exact with one thread, within the other threads' cached
 * bytes with several.
 *
 * Each cache has a spin lock, which trim, the out-of-memory path, the
 * statistics, manager destruction and thread exit take to reach it.  Its
 * own thread, the only one that uses it on the fast path, takes no lock
 * and makes no locked instruction where the kernel offers membarrier(2):
 * it marks itself active, then checks that no other thread wants the
 * cache; another thread marks that it wants it and makes every running
 * thread of the process pass a memory barrier (membarrier), after which
 * either it sees the owner active and waits, or the owner sees it and
 * takes the lock instead.  So the cost of the handshake falls on the rare
 * remote side (about a microsecond), not on every alloc and free (a locked
 * exchange on each cost a fifth of a cached pair).  Without membarrier
 * the owner takes the spin lock every time.  Lock order: registry lock,
 * manager lock, manager's cache-list lock, cache lock.
 */
#include "block/internal.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TC_SLOTS     32
#define TC_MAX_COUNT 32

typedef struct tc_slot {
    size_t size;
    unsigned n;
    ga_block_t *b[TC_MAX_COUNT];
} tc_slot_t;

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
    uint64_t allocs, frees, hits;
    ga_tcache_t *bm_prev, *bm_next; /* in the manager's list */
    ga_tcache_t *t_next;            /* in the thread's list */
    tc_slot_t slots[TC_SLOTS];
};

/* Guards the link between caches and managers: thread exit and manager
 * destruction meet here. */
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* The initial-exec model spares the fast path a __tls_get_addr call; two
 * pointers fit in the static TLS that glibc keeps for dlopen'ed libraries
 * (PyTorch and CuPy load gpuarena that way). */
#define GA_TLS_IE __attribute__((tls_model("initial-exec")))
static _Thread_local ga_tcache_t *tl_list GA_TLS_IE, *tl_last GA_TLS_IE;

static inline void tc_lock(ga_tcache_t *t)
{
    while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire))
        sched_yield();
}

static inline void tc_unlock(ga_tcache_t *t)
{
    atomic_flag_clear_explicit(&t->lock, memory_order_release);
}

/* Whether the owner's fast path may go without the lock: membarrier(2)
 * with private expedited barriers, registered once. */
static _Atomic bool asymmetric; /* set once, before the first cache exists */
static pthread_once_t asym_once = PTHREAD_ONCE_INIT;

static void asym_init(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    atomic_store_explicit(&asymmetric, ok, memory_order_relaxed);
}

/* The owner enters its cache; true when it had to take the lock. */
static inline bool owner_enter(ga_tcache_t *t)
{
    if (atomic_load_explicit(&asymmetric, memory_order_relaxed)) {
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

static inline void owner_leave(ga_tcache_t *t, bool locked)
{
    if (locked)
        tc_unlock(t);
    else
        atomic_store_explicit(&t->active, 0, memory_order_release);
}

/* Another thread (or the owner off its fast path) takes the caches of BM
 * (the manager's cache-list lock held): every lock, then one barrier for
 * all of them, then each owner out of its fast path. */
static void remote_lock_all(ga_bm_t *bm)
{
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next) {
        tc_lock(t);
        atomic_store_explicit(&t->remote, 1, memory_order_relaxed);
    }
    if (!bm->tcaches || !atomic_load_explicit(&asymmetric, memory_order_relaxed))
        return;
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next)
        while (atomic_load_explicit(&t->active, memory_order_acquire))
            sched_yield();
}

static void remote_unlock_all(ga_bm_t *bm)
{
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next) {
        atomic_store_explicit(&t->remote, 0, memory_order_release);
        tc_unlock(t);
    }
}

static inline unsigned slot_of(size_t size, size_t round)
{
    /* ROUND is a power of two (the key says so): a shift, not a divide,
     * which would cost more than the rest of the lookup. */
    size_t k = size >> __builtin_ctzl(round);
    return (unsigned)((k ^ (k >> 5)) % TC_SLOTS);
}

static inline void add(_Atomic int64_t *v, int64_t d)
{
    /* One writer at a time (the lock): load and store, no locked RMW. */
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static inline int64_t get(_Atomic int64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* The slot holding blocks of SIZE, two-way: SIZE may sit in its own slot
 * or its neighbour, so two sizes that hash alike can both be cached.
 * With EMPTY_OK, an empty one of the two when neither holds SIZE. */
static inline tc_slot_t *slot_for(ga_tcache_t *t, size_t size, size_t round, bool empty_ok)
{
    unsigned i = slot_of(size, round);
    tc_slot_t *a = &t->slots[i], *b = &t->slots[i ^ 1];
    if (a->n && a->size == size)
        return a;
    if (b->n && b->size == size)
        return b;
    if (!empty_ok)
        return NULL;
    return !a->n ? a : !b->n ? b : NULL;
}

/* Give every block of T back to its manager (both locks held). */
static void flush(ga_tcache_t *t)
{
    ga_bm_t *bm = t->bm;
    for (unsigned i = 0; i < TC_SLOTS; i++) {
        tc_slot_t *sl = &t->slots[i];
        while (sl->n) {
            ga_block_t *b = sl->b[--sl->n];
            t->bytes -= b->size;
            atomic_store_explicit(&b->cached, 0, memory_order_relaxed);
            /* The user saw it freed already: undo the cache's difference
             * as the manager counts the free. */
            add(&t->req_delta, (int64_t)b->requested);
            add(&t->inuse_delta, (int64_t)b->size);
            t->frees--; /* the manager counts this free itself */
            /* Host-visible blocks enter a cache only when freed on an idle
             * stream: their free has passed.  Others go to the stream's
             * pool, with no event recorded on the remembered handle. */
            ga_bm_free_locked(bm, b, t->stream, host_guard(bm));
        }
    }
}

/* Fold T's counters into its manager and unlink it (all locks held). */
static void retire(ga_tcache_t *t)
{
    ga_bm_t *bm = t->bm;
    flush(t);
    bm->c.req_adjust += get(&t->req_delta);
    bm->c.inuse_adjust += get(&t->inuse_delta);
    bm->c.allocs += t->allocs;
    bm->c.frees += t->frees;
    bm->c.hits += t->hits;
    atomic_store_explicit(&t->req_delta, 0, memory_order_relaxed);
    atomic_store_explicit(&t->inuse_delta, 0, memory_order_relaxed);
    t->allocs = t->frees = t->hits = 0;
    if (t->bm_prev)
        t->bm_prev->bm_next = t->bm_next;
    else
        bm->tcaches = t->bm_next;
    if (t->bm_next)
        t->bm_next->bm_prev = t->bm_prev;
    t->bm = NULL;
}

static void thread_exit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&registry);
    for (ga_tcache_t *t = tl_list, *n; t; t = n) {
        n = t->t_next;
        ga_bm_t *bm = t->bm;
        if (bm) {
            pthread_mutex_lock(&bm->lock);
            pthread_mutex_lock(&bm->tc_lock);
            tc_lock(t);
            retire(t);
            tc_unlock(t);
            pthread_mutex_unlock(&bm->tc_lock);
            pthread_mutex_unlock(&bm->lock);
        }
        free(t);
    }
    tl_list = tl_last = NULL;
    pthread_mutex_unlock(&registry);
}

static void make_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
}

static inline ga_tcache_t *find(ga_bm_t *bm, uint64_t id)
{
    ga_tcache_t *t = tl_last;
    if (t && t->bm == bm && t->stream.id == id)
        return t;
    for (t = tl_list; t; t = t->t_next) {
        if (t->bm == bm && t->stream.id == id) {
            tl_last = t;
            return t;
        }
    }
    return NULL;
}

static ga_tcache_t *create(ga_bm_t *bm, ga_stream_t s)
{
    pthread_once(&key_once, make_key);
    pthread_once(&asym_once, asym_init);
    ga_tcache_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    atomic_flag_clear(&t->lock);
    t->bm = bm;
    t->stream = s;
    t->count =
        bm->set.thread_cache_count < TC_MAX_COUNT ? bm->set.thread_cache_count : TC_MAX_COUNT;
    pthread_mutex_lock(&registry);
    pthread_mutex_lock(&bm->tc_lock);
    t->bm_next = bm->tcaches;
    if (bm->tcaches)
        bm->tcaches->bm_prev = t;
    bm->tcaches = t;
    pthread_mutex_unlock(&bm->tc_lock);
    /* Caches of managers destroyed since (retired: bm is NULL) are freed
     * here: a thread that outlives many arenas would otherwise keep them
     * all, and every lookup would walk them.  Under the registry lock no
     * retirement is half done. */
    for (ga_tcache_t **pp = &tl_list; *pp;) {
        ga_tcache_t *r = *pp;
        if (atomic_load_explicit(&r->bm, memory_order_relaxed) == NULL) {
            *pp = r->t_next;
            free(r);
        } else {
            pp = &r->t_next;
        }
    }
    t->t_next = tl_list;
    tl_list = t;
    pthread_mutex_unlock(&registry);
    /* Any non-NULL value makes the destructor run at thread exit. */
    pthread_setspecific(exit_key, t);
    tl_last = t;
    return t;
}

/* A block of ROUNDED bytes from this thread's cache of stream ID, for an
 * allocation on S. */
static bool take(ga_bm_t *bm, uint64_t id, size_t rounded, size_t size, ga_stream_t s, void **ptr)
{
    ga_tcache_t *t = find(bm, id);
    if (!t)
        return false;
    bool locked = owner_enter(t);
    if (t->bm != bm) {
        owner_leave(t, locked);
        return false;
    }
    tc_slot_t *sl = slot_for(t, rounded, bm->round, false);
    if (!sl) {
        owner_leave(t, locked);
        return false;
    }
    ga_block_t *b = sl->b[--sl->n];
    t->bytes -= b->size;
    atomic_store_explicit(&b->cached, 0, memory_order_relaxed);
    b->requested = size;
    b->stream_id = s.id; /* it may have been allocated on another stream before */
    add(&t->req_delta, (int64_t)size);
    add(&t->inuse_delta, (int64_t)b->size);
    t->allocs++;
    t->hits++;
    int64_t mine_req = get(&t->req_delta), mine_use = get(&t->inuse_delta);
    owner_leave(t, locked);
    /* Peaks as this thread sees them (see the top of the file). */
    uint64_t r = (uint64_t)(atomic_load_explicit(&bm->base_req, memory_order_relaxed) + mine_req);
    uint64_t u = (uint64_t)(atomic_load_explicit(&bm->base_inuse, memory_order_relaxed) + mine_use);
    if (r > atomic_load_explicit(&bm->peak.requested, memory_order_relaxed) ||
        u > atomic_load_explicit(&bm->peak.in_use, memory_order_relaxed)) {
        pthread_mutex_lock(&bm->lock);
        ga_bm_update_peaks(bm);
        pthread_mutex_unlock(&bm->lock);
    }
    *ptr = (void *)b->addr;
    return true;
}

bool ga_tcache_alloc(ga_bm_t *bm, size_t rounded, size_t size, ga_stream_t s, void **ptr)
{
    return take(bm, s.id, rounded, size, s, ptr);
}

bool ga_tcache_alloc_any(ga_bm_t *bm, size_t rounded, size_t size, ga_stream_t s, void **ptr)
{
    return take(bm, GA_STREAM_ANY, rounded, size, s, ptr);
}

bool ga_tcache_free(ga_bm_t *bm, ga_block_t *b, ga_stream_t s)
{
    if (b->size > bm->set.thread_cache_max || b->uses)
        return false;
    ga_tcache_t *t = find(bm, s.id);
    if (!t && !(t = create(bm, s)))
        return false;
    bool locked = owner_enter(t);
    tc_slot_t *sl = slot_for(t, b->size, bm->round, true);
    if (t->bm != bm || !sl || sl->n >= t->count ||
        t->bytes + b->size > bm->set.thread_cache_bytes) {
        owner_leave(t, locked);
        return false;
    }
    t->bytes += b->size;
    sl->size = b->size;
    sl->b[sl->n++] = b;
    atomic_store_explicit(&b->cached, 1, memory_order_relaxed);
    add(&t->req_delta, -(int64_t)b->requested);
    add(&t->inuse_delta, -(int64_t)b->size);
    t->frees++;
    t->stream.handle = s.handle;
    int64_t mine_use = t->inuse_delta;
    owner_leave(t, locked);
    /* The cached bytes grew: their peak, as for the others in alloc. */
    uint64_t c = atomic_load_explicit(&bm->base_reserved, memory_order_relaxed) -
                 (uint64_t)(atomic_load_explicit(&bm->base_inuse, memory_order_relaxed) + mine_use);
    if (c > atomic_load_explicit(&bm->peak.cached, memory_order_relaxed)) {
        pthread_mutex_lock(&bm->lock);
        ga_bm_update_peaks(bm);
        pthread_mutex_unlock(&bm->lock);
    }
    return true;
}

void ga_tcache_flush_all(ga_bm_t *bm)
{
    pthread_mutex_lock(&bm->tc_lock);
    remote_lock_all(bm);
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next)
        flush(t);
    remote_unlock_all(bm);
    pthread_mutex_unlock(&bm->tc_lock);
}

void ga_tcache_deltas(ga_bm_t *bm, int64_t *req, int64_t *inuse, uint64_t *allocs, uint64_t *frees,
                      uint64_t *hits)
{
    *req = *inuse = 0;
    *allocs = *frees = *hits = 0;
    pthread_mutex_lock(&bm->tc_lock);
    remote_lock_all(bm);
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next) {
        *req += get(&t->req_delta);
        *inuse += get(&t->inuse_delta);
        *allocs += t->allocs;
        *frees += t->frees;
        *hits += t->hits;
    }
    remote_unlock_all(bm);
    pthread_mutex_unlock(&bm->tc_lock);
}

void ga_tcache_own_deltas(ga_bm_t *bm, int64_t *req, int64_t *inuse)
{
    *req = *inuse = 0;
    for (ga_tcache_t *t = tl_list; t; t = t->t_next) {
        if (atomic_load_explicit(&t->bm, memory_order_relaxed) != bm)
            continue;
        *req += get(&t->req_delta);
        *inuse += get(&t->inuse_delta);
    }
}

void ga_tcache_detach_all(ga_bm_t *bm)
{
    pthread_mutex_lock(&registry);
    pthread_mutex_lock(&bm->lock);
    pthread_mutex_lock(&bm->tc_lock);
    remote_lock_all(bm);
    /* retire() unlinks each cache: unlock them from a copy of the list. */
    ga_tcache_t *all = NULL;
    while (bm->tcaches) {
        ga_tcache_t *t = bm->tcaches;
        retire(t);
        t->bm_next = all; /* no longer in the manager's list: a scratch link */
        all = t;
    }
    for (ga_tcache_t *t = all, *n; t; t = n) {
        n = t->bm_next;
        t->bm_next = NULL;
        atomic_store_explicit(&t->remote, 0, memory_order_release);
        tc_unlock(t);
    }
    pthread_mutex_unlock(&bm->tc_lock);
    pthread_mutex_unlock(&bm->lock);
    pthread_mutex_unlock(&registry);
}
