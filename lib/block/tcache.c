/*
 * tcache.c - per-thread caches of recently freed small blocks.
 *
 * The common pattern of a caching allocator, free then allocate the same
 * size on the same stream, should take no shared lock.  Each thread keeps,
 * per (manager, stream), a small direct-mapped table of exact sizes, each
 * slot a stack of blocks freed on that stream, for at most TC_PER_ARENA
 * streams of a manager (retire_oldest).  Reuse on the same stream is
 * what stream order allows at once, so no event is involved.  Blocks
 * with record_stream uses never enter a cache.
 *
 * A cached block stays LIVE in the manager (its address stays in the live
 * map), so a free finds it without the lock; the cache holds the
 * difference between the manager's totals and what the user sees: minus
 * the requested and in-use bytes of the blocks it holds, and its counts,
 * which the statistics add up.  A block handed out again for another size
 * moves the requested bytes by the difference, in the manager's req_drift
 * (an atomic add, only then), not in the cache: so a cache's difference
 * stays bounded by what it holds, whichever thread frees the block later.
 * Peaks seen from a thread use the manager's totals, the drift and the
 * differences of that thread's own caches: exact with one thread; with
 * several, above the truth by at most what the other threads' caches
 * hold, never below it.
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
 *
 * Cold caches.  A cache pays for itself only when allocations ask for
 * sizes that the thread freed on that stream not long before.  On a
 * random mix of sizes nearly every probe misses, and the slots' upkeep
 * on each free and their probe on each allocation are wasted: a warm
 * cache cost about a tenth more per free + alloc than no cache at all
 * (measured on an H200 host with bench_churn, 114 against 103 ns).  So a
 * cache counts its misses of the sizes its slots may hold (at most
 * thread_cache_max: larger ones miss whatever it does), and when fewer
 * than a quarter of its probes hit over a window of TC_WINDOW such misses
 * it goes cold: it is flushed
 * once, its slots take no more blocks, and its probes only ask a table
 * of ghost keys (the last size freed into each slot) whether a warm
 * cache would have held the size.  Its large slot still takes a block
 * (tc_free_cold): the thread's next operation on such a mix is an
 * allocation that misses and takes the manager's lock anyway, and gives
 * the block back under it, so a random free + alloc takes the lock once,
 * not twice (96 against 88 ns a pair here, bench_churn).  When half of a
 * window of probes would have hit, it is warm again; a thread back at
 * freeing and allocating one size is served from its cache again within
 * TC_WINDOW allocations.  The thresholds (a quarter to go cold, a half
 * to warm) keep a cache from flapping between the two at a hit rate
 * near either.
 */
#include "block/tcache.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Guards the link between caches and managers: thread exit and manager
 * destruction meet here. */
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

_Thread_local ga_tcache_t *ga_tc_list GA_TLS_IE, *ga_tc_last GA_TLS_IE;
_Thread_local bool ga_tc_any GA_TLS_IE; /* never cleared while the thread lives: a hint */
_Thread_local unsigned ga_tc_parked GA_TLS_IE;
_Thread_local uint64_t ga_tc_clock GA_TLS_IE;

/* Another thread (or the owner off its fast path) takes the caches of BM
 * (the manager's cache-list lock held): every lock, then one barrier for
 * all of them, then each owner out of its fast path. */
static void remote_lock_all(ga_bm_t *bm)
{
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next) {
        tc_lock(t);
        atomic_store_explicit(&t->remote, 1, memory_order_relaxed);
    }
    if (!bm->tcaches || !atomic_load_explicit(&ga_asymmetric_ok, memory_order_relaxed))
        return;
    ga_asymmetric_barrier();
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

/* Give cached block B of T back to the manager (both locks held). */
static void give_back(ga_tcache_t *t, ga_block_t *b)
{
    /* The user saw it freed already: undo the cache's difference as the
     * manager counts the free. */
    tc_add(&t->req_delta, (int64_t)b->requested);
    tc_add(&t->inuse_delta, (int64_t)b->size);
    t->frees--; /* the manager counts this free itself */
    /* Host-visible blocks enter a cache only when freed on an idle stream:
     * their free has passed.  Others go to the stream's pool, with no
     * event recorded on the remembered handle.  The cached flag is
     * cleared after, with release: a second free of the block meanwhile
     * (a program's double free, on another thread) finds it cached, or
     * once cleared no longer live (ga_bm_free_on reads again); cleared
     * before, it found it live and uncached, and its thread's cache kept
     * the block that a pool held too.  (A record that merged into a
     * neighbour is a spare now: clearing its flag is harmless.) */
    ga_bm_free_locked(t->bm, b, t->stream, host_guard(t->bm));
    atomic_store_explicit(&b->cached, 0, memory_order_release);
}

static void flush(ga_tcache_t *t)
{
    for (unsigned i = 0; i < TC_SLOTS; i++) {
        while (t->n[i]) {
            ga_block_t *b = t->stack[i][--t->n[i]];
            t->bytes -= b->size;
            give_back(t, b);
        }
        t->key[i] = 0;
    }
    if (t->large) {
        ga_block_t *b = t->large;
        /* Read by its owner without entering the cache (large_hint). */
        __atomic_store_n(&t->large, NULL, __ATOMIC_RELAXED);
        give_back(t, b);
    }
}

/* Whether T's large slot holds a block, as its owner reads it without
 * entering T, for a hint: T may be a cache of another manager, which
 * a flush under that manager's lock is emptying (flush, above). */
static bool large_hint(const ga_tcache_t *t)
{
    return __atomic_load_n(&t->large, __ATOMIC_RELAXED) != NULL;
}

/* The owner gives back every block T holds, if T is still BM's (BM's
 * lock held). */
static void owner_flush(ga_bm_t *bm, ga_tcache_t *t)
{
    bool locked = tc_owner_enter(t);
    if (t->bm == bm)
        flush(t);
    tc_owner_leave(t, locked);
}

/* Give T's parked block back, if it still holds one (T is BM's).
 * Whether it did. */
static bool drop_one(ga_bm_t *bm, ga_tcache_t *t)
{
    bool locked = tc_owner_enter(t);
    ga_block_t *b = t->large;
    t->large = NULL;
    bool dropped = b && t->bm == bm;
    if (dropped)
        give_back(t, b);
    tc_owner_leave(t, locked);
    return dropped;
}

bool ga_tcache_drop_parked(ga_bm_t *bm)
{
    /* One block parked, by the cache used last: the thread's cold cache
     * on a random mix of sizes, at every allocation (tcache.h).  No walk
     * of the thread's caches of other arenas. */
    ga_tcache_t *last = ga_tc_last;
    if (ga_tc_parked == 1 && last && large_hint(last) &&
        atomic_load_explicit(&last->bm, memory_order_relaxed) == bm) {
        ga_tc_parked = 0;
        return drop_one(bm, last);
    }
    unsigned others = 0; /* large blocks in caches of other managers */
    bool dropped = false;
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next) {
        if (!large_hint(t))
            continue;
        if (atomic_load_explicit(&t->bm, memory_order_relaxed) != bm) {
            others++;
            continue;
        }
        dropped |= drop_one(bm, t);
    }
    ga_tc_parked = others;
    return dropped;
}

void ga_tcache_cool(ga_bm_t *bm, ga_tcache_t *t)
{
    ga_lock(&bm->lock);
    owner_flush(bm, t);
    ga_bm_caches_returned(bm); /* what went back counts as cached now */
    ga_unlock(&bm->lock);
    memset(t->ghost, 0, sizeof t->ghost);
    t->cold = true;
    t->window = t->matched = 0;
}

/* Fold T's counters into its manager and unlink it (all locks held).
 * Its corrections are minus what it holds, so zero once it is flushed:
 * nothing of them is left to fold. */
static void retire(ga_tcache_t *t)
{
    ga_bm_t *bm = t->bm;
    flush(t);
    bm->c.allocs += t->allocs;
    bm->c.frees += t->frees;
    bm->c.hits += t->allocs;
    atomic_store_explicit(&t->req_delta, 0, memory_order_relaxed);
    atomic_store_explicit(&t->inuse_delta, 0, memory_order_relaxed);
    t->allocs = t->frees = 0;
    if (t->bm_prev)
        t->bm_prev->bm_next = t->bm_next;
    else
        bm->tcaches = t->bm_next;
    if (t->bm_next)
        t->bm_next->bm_prev = t->bm_prev;
    t->bm = NULL;
}

/* The owner retires its cache T of BM: the library's lock order, from
 * the manager's lock down (the registry lock held). */
static void owner_retire(ga_bm_t *bm, ga_tcache_t *t)
{
    ga_lock(&bm->lock);
    pthread_mutex_lock(&bm->tc_lock);
    tc_lock(t);
    ga_tc_parked -= t->large && ga_tc_parked;
    retire(t);
    tc_unlock(t);
    pthread_mutex_unlock(&bm->tc_lock);
    ga_bm_caches_returned(bm); /* the cache's blocks are cached now */
    ga_unlock(&bm->lock);
}

static void thread_exit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&registry);
    for (ga_tcache_t *t; (t = ga_tc_list) != NULL;) {
        /* Out of the thread's list before it is retired: the retire
         * publishes the peaks' counts from the caches left in it. */
        ga_tc_list = t->t_next;
        if (ga_tc_last == t)
            ga_tc_last = NULL;
        ga_bm_t *bm = t->bm;
        /* A GPU arena's in a child made by fork(2) (ga_bm_fork_child):
         * its blocks stay in the cache, which stays its manager's (its
         * statistics read what the parent had): given back, they were
         * freed into the arena, and with max_cached unmapped through the
         * driver, which a child may not call. */
        if (bm && bm->forked)
            continue;
        if (bm)
            owner_retire(bm, t);
        free(t);
    }
    ga_tc_any = false;
    ga_tc_parked = 0;
    pthread_mutex_unlock(&registry);
}

/* The thread is about to make another cache of BM: if it has
 * TC_PER_ARENA of them, the one it used longest ago (ga_tc_clock) is
 * retired, as at thread exit, and its record returned for the new cache;
 * else NULL.  Its blocks go back to their stream's pool with no event
 * recorded on the remembered handle: the stream may be gone.  The
 * registry lock held. */
static ga_tcache_t *retire_oldest(ga_bm_t *bm)
{
    unsigned n = 0;
    ga_tcache_t **oldest = NULL;
    for (ga_tcache_t **pp = &ga_tc_list; *pp; pp = &(*pp)->t_next) {
        if (atomic_load_explicit(&(*pp)->bm, memory_order_relaxed) != bm)
            continue;
        n++;
        if (!oldest || (*pp)->chosen < (*oldest)->chosen)
            oldest = pp;
    }
    if (n < TC_PER_ARENA)
        return NULL;
    ga_tcache_t *t = *oldest;
    owner_retire(bm, t);
    *oldest = t->t_next;
    if (ga_tc_last == t)
        ga_tc_last = NULL;
    return t;
}

/* A retired record (no thread but this one reaches it) made new.  Only
 * what a new cache reads is cleared: not the stacks, read below n[]
 * only, nor the ghost keys, cleared when a cache goes cold; a record
 * cleared whole, as calloc's, cost a thread that frees on more than
 * TC_PER_ARENA streams in turn about 0.5 us at each change of stream. */
static void renew(ga_tcache_t *t)
{
    memset(t, 0, offsetof(ga_tcache_t, key));
    memset(t->key, 0, sizeof t->key);
    memset(t->n, 0, sizeof t->n);
    t->cold = t->alone = false;
    t->window = t->matched = 0;
    t->allocs_mark = 0;
}

static void make_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
}

ga_tcache_t *ga_tcache_create(ga_bm_t *bm, ga_stream_t s)
{
    pthread_once(&key_once, make_key);
    /* Before the first cache exists: the owners' fast paths and the
     * remote side then read the same ga_asymmetric_ok. */
    (void)ga_asymmetric_ready();
    /* Allocated under the registry lock, which fork's handlers take
     * (fork.c): a fork between the allocation and the link would leave
     * the child a record that no list reaches (valgrind saw one in
     * check_fork's children). */
    pthread_mutex_lock(&registry);
    ga_tcache_t *t = retire_oldest(bm);
    if (t) {
        renew(t);
    } else if (!(t = calloc(1, sizeof *t))) {
        pthread_mutex_unlock(&registry);
        return NULL;
    }
    atomic_flag_clear(&t->lock);
    t->bm = bm;
    t->stream = s;
    t->count =
        bm->set.thread_cache_count < TC_MAX_COUNT ? bm->set.thread_cache_count : TC_MAX_COUNT;
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
    for (ga_tcache_t **pp = &ga_tc_list; *pp;) {
        ga_tcache_t *r = *pp;
        if (atomic_load_explicit(&r->bm, memory_order_relaxed) == NULL) {
            *pp = r->t_next;
            free(r);
        } else {
            pp = &r->t_next;
        }
    }
    /* Only the first of a thread's caches of BM is alone (tc_mine): the
     * caches of other arenas do not count. */
    t->alone = true;
    for (ga_tcache_t *o = ga_tc_list; o; o = o->t_next) {
        if (atomic_load_explicit(&o->bm, memory_order_relaxed) == bm) {
            o->alone = false;
            t->alone = false;
        }
    }
    t->t_next = ga_tc_list;
    ga_tc_list = t;
    t->chosen = ++ga_tc_clock;
    pthread_mutex_unlock(&registry);
    /* Any non-NULL value makes the destructor run at thread exit. */
    pthread_setspecific(exit_key, t);
    ga_tc_last = t;
    if (s.id == GA_STREAM_ANY)
        ga_tc_any = true;
    return t;
}

/* The bytes T holds (entered, or read as a hint). */
static size_t held(const ga_tcache_t *t)
{
    return t->bytes + (t->large ? t->large->size : 0);
}

bool ga_tcache_flush_own(ga_bm_t *bm, size_t need)
{
    size_t sum = 0;
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next)
        if (atomic_load_explicit(&t->bm, memory_order_relaxed) == bm)
            sum += held(t);
    if (sum < need || !sum)
        return false; /* no block of NEED bytes could come of them */
    for (ga_tcache_t *t = ga_tc_list; t; t = t->t_next)
        if (atomic_load_explicit(&t->bm, memory_order_relaxed) == bm)
            owner_flush(bm, t);
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

void ga_tcache_sums(ga_bm_t *bm, ga_tc_sums_t *sum)
{
    memset(sum, 0, sizeof *sum);
    pthread_mutex_lock(&bm->tc_lock);
    remote_lock_all(bm);
    for (ga_tcache_t *t = bm->tcaches; t; t = t->bm_next) {
        sum->req += tc_get(&t->req_delta);
        sum->inuse += tc_get(&t->inuse_delta);
        sum->allocs += t->allocs; /* every one a hit */
        sum->frees += t->frees;
        for (unsigned i = 0; i < TC_SLOTS; i++)
            sum->blocks += t->n[i];
        sum->blocks += t->large != NULL;
    }
    remote_unlock_all(bm);
    pthread_mutex_unlock(&bm->tc_lock);
}

void ga_tcache_detach_all(ga_bm_t *bm)
{
    pthread_mutex_lock(&registry);
    ga_lock(&bm->lock);
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
    ga_unlock(&bm->lock);
    pthread_mutex_unlock(&registry);
}

/* ------------------------------------------------------------------ */
/* fork(2): the manager's side (block.h), here since nearly all of it is
 * the caches'.  The locks in the library's order: the registry, then per
 * manager its lock, its cache list and every cache. */

void ga_bm_fork_begin(void)
{
    pthread_mutex_lock(&registry);
}

void ga_bm_fork_end(void)
{
    pthread_mutex_unlock(&registry);
}

void ga_bm_fork_prepare(ga_bm_t *bm)
{
    ga_lock_plain(&bm->lock); /* lock.h: the word held by this thread */
    pthread_mutex_lock(&bm->tc_lock);
    remote_lock_all(bm);
}

void ga_bm_fork_parent(ga_bm_t *bm)
{
    remote_unlock_all(bm);
    pthread_mutex_unlock(&bm->tc_lock);
    ga_unlock(&bm->lock);
}

static bool is_this_threads(const ga_tcache_t *t)
{
    for (const ga_tcache_t *o = ga_tc_list; o; o = o->t_next)
        if (o == t)
            return true;
    return false;
}

/* Only the thread that forked lives on in the child.  The caches of the
 * others have no owner there: left as they were, their blocks would stay
 * out of the child's reach until a trim or an out-of-memory retry.  So
 * they are retired as at a thread's exit, and their records freed:
 * nothing in the child points to them any more (their owners' lists
 * were in the owners' thread-local storage).  Every lock is held. */
void ga_bm_fork_child(ga_bm_t *bm, bool usable)
{
    bm->forked = !usable;
    for (ga_tcache_t *t = bm->tcaches, *n; usable && t; t = n) {
        n = t->bm_next;
        if (is_this_threads(t))
            continue;
        retire(t); /* unlinks it */
        tc_unlock(t);
        free(t);
    }
    remote_unlock_all(bm);
    pthread_mutex_unlock(&bm->tc_lock);
    if (usable)
        ga_bm_caches_returned(bm); /* the retired caches' blocks are cached now */
    ga_unlock(&bm->lock);
}
