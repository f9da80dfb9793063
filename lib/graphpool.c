/*
 * graphpool.c - the memory pools of CUDA graphs: PyTorch's, which it
 * names, and CuPy's captures, which it does not.
 *
 * A block allocated during a CUDA graph capture belongs to the graph for
 * as long as the graph may be replayed: every replay writes it again.
 * So gpuarena refuses allocations on a capturing stream (gpuarena(7),
 * "Device memory"): reused after the capture, the block would be written by the
 * replays under its new owner.  PyTorch solves this with a private pool
 * per graph, and tells its allocator when a capture begins and ends
 * allocating to a pool and when a pool is given back (its allocator's
 * beginAllocateToPool, endAllocateToPool and releasePool, which
 * CUDAPluggableAllocator forwards to the functions a library installs).
 *
 * Here each pool is a private device arena (pool=arena,
 * cross_stream=never), made at the pool's first allocation.  Between
 * gpuarena_torch_begin_allocate_to_pool and its end, an allocation of
 * the same thread that the default arena refuses because its stream is
 * being captured is served by the pool's arena instead, without the
 * capture check; such an arena never records, queries or waits on events
 * (cross_stream=never) and maps memory only with the calls a capture
 * allows (cuMemCreate, cuMemMap, cuMemSetAccess; cuMemAlloc in relaxed
 * mode), so the capture is not disturbed.  A block freed during the
 * capture goes back to the pool, where later allocations of the capture
 * (and of later captures into the same pool, as PyTorch shares pools
 * between graphs) take it in stream order; it never goes back to the
 * default arena, which is what keeps replays safe.  A pool is PyTorch's
 * to share: each graph captured into it begins it once and releases it
 * once (its use count), and only once every graph has released it and
 * none of its blocks is live is its arena destroyed and its memory given
 * back to the driver; given back at the first release, the memory of a
 * graph still replayed was handed to other tensors.
 *
 * A capture that the driver invalidated (a synchronisation in the
 * captured code) makes PyTorch raise before it ends allocating to the
 * pool, and it never releases it: the pool stays begun.  When its thread
 * begins another pool, the first is taken as ended there: otherwise it
 * kept every released pool from being destroyed (no pool's arena is
 * while one is begun) and, unbound, made the allocations of other
 * threads for the next capture ambiguous (refused).
 *
 * A pool's record is the use count that keeps it, so one that could not
 * be made is not skipped: a graph that began the pool without it, its
 * allocations then refused, would still release it once, and a graph
 * sharing the pool would lose its memory at that release.  When calloc
 * has no memory the record comes from a small static reserve; only when
 * that is held too does the begin fail, raised in PyTorch (its capture
 * then never starts, and no graph is made to release the pool).
 *
 * PyTorch also passes a filter, a std::function that says which streams'
 * allocations go to the pool: those captured under the graph's capture
 * id.  C cannot call it, so the same rule is kept another way.  PyTorch
 * begins allocating to the pool just before the capture begins, when
 * there is no capture id yet; the first allocation that the default
 * arena refuses for a capture binds the capture's id
 * (cuStreamGetCaptureInfo) to a pool of its device that is begun and not
 * yet bound: the one its thread began, else the only such pool.  Every
 * later allocation under that capture id goes to that pool, whatever its
 * thread: the backward pass that make_graphed_callables captures runs in
 * autograd's own threads.  When two threads begin pools on one device at
 * once and a third thread allocates first for one of the captures, the
 * pool cannot be told and the allocation is refused, as without pools.
 * An allocation that is not being captured (another stream) goes to the
 * default arena as before.  (torch.cuda.MemPool, whose use_mem_pool
 * begins a pool for a thread with no capture, cannot be made for an
 * allocator that CUDAPluggableAllocator loads: PyTorch 2.11 refuses
 * createOrIncrefPool, measured on the H200.)
 *
 * CuPy has no such hooks: it captures on its current stream
 * (cupy.cuda.Stream.begin_capture), and its allocator hook is not told
 * of graphs at all.  So an allocation that the default arena refuses
 * because CuPy's current stream is being captured is served by the
 * capture's own pool (ga_capture_pool_alloc), keyed by the capture's id,
 * made at its first allocation and kept for as long as the graph lives:
 * the driver says when that ends through a user object that the graph
 * holds (cuUserObjectCreate, cuGraphRetainUserObject), whose destructor
 * runs once the graph and every executable graph made from it are
 * destroyed and their launches done.  The destructor runs on a thread of
 * the driver's, which may make no CUDA call, so it only marks the pool;
 * the next call of a CuPy hook destroys it once its blocks are freed
 * (ga_graph_pool_collect).  Frees of the pool's blocks go back to it, as
 * in PyTorch's pools, on CuPy's current stream: during the capture that
 * is the capturing one, so that later allocations of the capture reuse
 * them in stream order.
 */
#include "graphpool.h"

#include "arena.h"
#include "cuda/cuda.h"
#include "cupystream.h"
#include "deferred.h"
#include "errors.h"
#include "hostmem.h"
#include "raise.h"
#include "trace/trace.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct gpool {
    struct gpool *next;
    int device;
    gpuarena_torch_pool_t id;
    gpuarena_t *arena; /* made at the first allocation */
    unsigned users;    /* threads between begin and end */
    unsigned graphs;   /* begins not yet released: PyTorch's use count */
    uint64_t begun;    /* generation of its begins: a thread's is stale once it differs */
    bool bound;        /* to CAPTURE, the id of the capture it serves */
    uint64_t capture;
    void *stream;     /* a stream of that capture (the one that bound it) */
    pthread_t thread; /* the thread that bound it (askable) */
    bool captured;    /* a capture pool's capture is over (cupy_capture_running) */
    bool released;    /* destroyed once no user is left and no block is live */
    /* A capture's own pool (CuPy's, ga_capture_pool_alloc): bound to its
     * capture from the start, no id, no users; released when the driver
     * says the graph is gone (graph_gone, set on the driver's thread). */
    bool by_capture;
    _Atomic bool graph_gone;
    bool reserved; /* one of reserve[], not calloc's */
} gpool_t;

/* Guards the list and every pool's fields; taken before any arena's
 * locks (fork.c). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gpool_t *pools;
_Atomic int ga_graph_pools;
_Atomic int ga_graph_pools_gone;
/* The pool this thread allocates to, between begin and end, and the
 * generation of that begin.  A pool's generation changes when the driver
 * says its capture is over (any_begun_askable), ending every begin of it
 * then: a thread that began it before holds a stale begin, which must not
 * end or claim a begin that another thread made of the same pool after
 * (graphs share pools).  Generations come from one counter, so that a
 * record freed and made again at the same address is not taken for the
 * old.  Under the lock. */
static _Thread_local gpool_t *current;
static _Thread_local uint64_t current_begun;
static uint64_t generations;

/* Whether O is the pool this thread began, in the begin still under way.
 * Compared, not followed: CURRENT may be stale. */
static bool mine(const gpool_t *o)
{
    return o == current && o->begun == current_begun;
}

/* PyTorch's pool records when calloc has no memory (see the top); a
 * process shares a few pools at once.  Under the lock. */
#define GA_POOL_RESERVE 8
static gpool_t reserve[GA_POOL_RESERVE];
static bool reserve_held[GA_POOL_RESERVE];

static gpool_t *record_new(void)
{
    gpool_t *g = ga_calloc(1, sizeof *g);
    for (unsigned i = 0; !g && i < GA_POOL_RESERVE; i++) {
        if (!reserve_held[i]) {
            reserve_held[i] = true;
            g = &reserve[i];
            *g = (gpool_t){.reserved = true};
        }
    }
    return g;
}

static void record_free(gpool_t *g)
{
    if (g->reserved)
        reserve_held[g - reserve] = false;
    else
        free(g);
}

static gpool_t *find(int device, gpuarena_torch_pool_t id)
{
    for (gpool_t *g = pools; g; g = g->next)
        if (!g->by_capture && g->device == device && g->id.first == id.first &&
            g->id.second == id.second)
            return g;
    return NULL;
}

/* Whether G is given back: by PyTorch, or, for a capture's own pool, by
 * the driver (its graph destroyed). */
static bool given_back(const gpool_t *g)
{
    return g->released || atomic_load_explicit(&g->graph_gone, memory_order_acquire);
}

/* Whether the driver can say, from this thread, when O's capture is
 * over: it names a created stream of it, or the per-thread stream of
 * this thread (that handle names another stream in each thread that
 * asks).  Not the per-thread stream from any thread: a CuPy graph
 * captured on it held every graph pool back for as long as it lived,
 * long after its capture. */
static bool askable(const gpool_t *o)
{
    uintptr_t s = (uintptr_t)o->stream;
    return o->bound && (s > 2 || (s == 2 && pthread_equal(o->thread, pthread_self())));
}

/* Whether a PyTorch pool is between its begin and end.  One whose
 * capture the driver says is over (a capture it invalidated, which
 * PyTorch ended with an error and never ended allocating to the pool)
 * is ended here: it held every released pool back, and every later hook
 * call asked again, until its thread began another pool.  One not yet
 * bound to a capture cannot be asked (that capture made no allocation);
 * *ALL_ASKABLE (where not NULL): whether every begun pool can be
 * (askable).  The lock held. */
static bool any_begun_askable(bool *all_askable_out)
{
    bool any = false, all_askable = true;
    for (gpool_t *o = pools; o; o = o->next) {
        if (!o->users)
            continue;
        bool can = !o->by_capture && askable(o);
        if (can && ga_cuda_capture_over(o->stream, o->capture)) {
            o->users = 0;
            o->bound = false;
            o->begun = ++generations; /* every begin of it is ended */
            continue;
        }
        any = true;
        all_askable &= can;
    }
    if (all_askable_out)
        *all_askable_out = any && all_askable;
    return any;
}

static bool any_begun(void)
{
    return any_begun_askable(NULL);
}

/* Whether a capture that a CuPy pool serves may still be under way: the
 * driver says its stream is still in it, or cannot be asked (askable).
 * Before, any
 * CuPy pool whose graph lived counted, long after its capture ended.
 * The lock held. */
static bool cupy_capture_running(void)
{
    bool running = false;
    for (gpool_t *o = pools; o; o = o->next) {
        if (!o->by_capture || o->captured || given_back(o))
            continue;
        /* Once seen over, not asked again: CuPy may destroy the stream
         * while the graph lives. */
        if (askable(o) && ga_cuda_capture_over(o->stream, o->capture))
            o->captured = true;
        else
            running = true;
    }
    return running;
}

/* Whether a capture may be under way that a pool of this process serves:
 * nothing may wait for the whole device then. */
static bool pool_capture_may_run(void)
{
    return any_begun() || cupy_capture_running();
}

/* Whether G's arena may wait for the whole device now (be destroyed, or
 * drained), from a hook call on STREAM (NULL: the legacy stream, or none
 * known).  Destroying it waits for the whole device (its blocks' last frees may be ahead of the
 * GPU; block.c, ga_bm_destroy), which no capture mode allows: the driver refuses it and invalidates
 * a capture in progress.  So not while one may be: a PyTorch pool between begin and end (this
 * process is making a graph), STREAM being captured, or a blocking stream of the context (the
 * legacy stream's check says so), a CuPy capture that has a pool (another thread's, on its own
 * stream), or the driver unable to say.  A capture of another thread on a non-blocking stream,
 * with no pool of its own, cannot be seen.  Put off, the pool is settled by a
 * later hook call (ga_graph_pool_collect).  The lock held. */
static bool may_wait_for_device(const gpool_t *g, void *stream)
{
    /* A child made by fork(2) may not call the driver at all
     * (gpuarena(7), Fork). */
    if (g->arena->forked)
        return false;
    if (pool_capture_may_run())
        return false;
    ga_provider_t *p = g->arena->prov;
    if (p->ops->stream_check(p, stream) != GPUARENA_SUCCESS)
        return false;
    return !stream || p->ops->stream_check(p, NULL) == GPUARENA_SUCCESS;
}

/* Destroy G if it was released, no thread allocates to it, none of its
 * blocks is live and no capture may be under way (may_wait_for_device; STREAM:
 * the hook's).  The lock held. */
static void settle(gpool_t *g, void *stream)
{
    if (!given_back(g) || g->users)
        return;
    /* A child made by fork(2) may not call the driver at all: the pool
     * stays, as its arena does (gpuarena(7), Fork). */
    if (g->arena && g->arena->forked)
        return;
    /* While a pool is begun, put off: its end settles every pool
     * (gpuarena_torch_end_allocate_to_pool).  Where the driver can say
     * when each begun pool's capture is over (which a capture that fails
     * never tells PyTorch's end), a later hook call asks (a query, cheap
     * here: the live blocks are counted below, after); where it cannot,
     * nothing is counted for later calls: that pool counts as ended at
     * its thread's next begin, whose end settles.  Each hook call used to
     * count the live blocks (which asks every thread's cache) and settle
     * again: 20 times slower while a capture that failed left its pool
     * begun. */
    bool all_askable;
    if (g->arena && any_begun_askable(&all_askable)) {
        if (all_askable)
            atomic_fetch_add_explicit(&ga_graph_pools_gone, 1, memory_order_release);
        return;
    }
    if (g->arena && ga_bm_live_blocks(g->arena->bm) != 0)
        return;
    if (g->arena && !may_wait_for_device(g, stream)) {
        /* For a later hook call: the same count as a graph gone. */
        atomic_fetch_add_explicit(&ga_graph_pools_gone, 1, memory_order_release);
        return;
    }
    if (g->arena)
        (void)gpuarena_destroy(g->arena); /* what the driver keeps is reported there */
    for (gpool_t **pp = &pools; *pp; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    record_free(g);
    atomic_fetch_sub_explicit(&ga_graph_pools, 1, memory_order_relaxed);
}

void gpuarena_torch_begin_allocate_to_pool(int device, gpuarena_torch_pool_t pool, void *filter)
{
    (void)filter; /* PyTorch's std::function, which C cannot call (see above) */
    ga_deferred_retry_no_stream();
    pthread_mutex_lock(&lock);
    gpool_t *g = find(device, pool);
    /* A pool this thread began and never ended, this one again included:
     * its capture failed (see the top).  Not one whose begins the driver
     * ended already: another thread may have begun it since. */
    for (gpool_t *o = pools; o; o = o->next)
        if (mine(o) && o->users && !--o->users)
            o->bound = false;
    if (!g && (g = record_new()) != NULL) {
        g->device = device;
        g->id = pool;
        g->begun = ++generations;
        g->next = pools;
        pools = g;
        atomic_fetch_add_explicit(&ga_graph_pools, 1, memory_order_relaxed);
    }
    /* Blocks that the captures into the pool freed with uses on other
     * captured streams (gpuarena_torch_record_stream) wait in limbo for a
     * wait for the whole device, which the pool's arena never makes on
     * its own (ga_bm_hold): made here, before this capture begins (PyTorch
     * has synchronised the device already), where there are such blocks
     * and no capture may be under way, CuPy's included, so that the pool
     * reuses them.  Each such capture made the pool grow by them
     * otherwise; where a capture may be under way, it still does. */
    if (g && g->arena && may_wait_for_device(g, NULL))
        (void)ga_bm_drain_limbo(g->arena->bm);
    if (g) {
        g->users++;
        g->graphs++;
        g->released = false;
    }
    current = g;
    current_begun = g ? g->begun : 0;
    pthread_mutex_unlock(&lock);
    if (!g) {
        ga_error(GPUARENA_ERR_HOST_MEMORY,
                 "gpuarena_torch_begin_allocate_to_pool: no host memory for the pool's record, "
                 "and the %d reserved records are held: allocations of the capture will be "
                 "refused",
                 GA_POOL_RESERVE);
        ga_raise_torch_error("gpuarena_torch_begin_allocate_to_pool");
    }
}

void gpuarena_torch_end_allocate_to_pool(int device, gpuarena_torch_pool_t pool)
{
    ga_deferred_retry();
    pthread_mutex_lock(&lock);
    gpool_t *g = find(device, pool);
    /* Not where this thread's begin was ended by the driver (its capture
     * over, seen by another hook call): that would end another thread's
     * begin of the pool made since (PyTorch ends after the capture). */
    bool stale = g && g == current && !mine(g);
    if (g && g->users && !stale && !--g->users)
        g->bound = false; /* a later capture into the pool binds its own id */
    if (current == g)
        current = NULL;
    pthread_mutex_unlock(&lock);
    /* The capture has ended: pools put off while it went on, too. */
    ga_graph_pool_settle_all(NULL);
}

void gpuarena_torch_release_pool(int device, gpuarena_torch_pool_t pool)
{
    ga_deferred_retry_no_stream();
    pthread_mutex_lock(&lock);
    gpool_t *g = find(device, pool);
    /* Given back when the last graph that began it releases it. */
    if (g && g->graphs && !--g->graphs) {
        g->released = true;
        settle(g, NULL);
    }
    pthread_mutex_unlock(&lock);
}

/* A pool's arena.  Its streams are named by their handles (the
 * per-thread stream by its thread, gpuctx.c): the driver's cuStreamGetId
 * fails on a capturing stream and invalidates the capture (measured on an
 * H200, CUDA 13), and a thread of the capture, such as autograd's, may
 * meet the stream first in the capture. */
static gpuarena_status_t make_arena(int device, gpuarena_t **out)
{
    /* Its free blocks are the graph's as much as its live ones (every
     * replay writes them): nothing goes back to the driver before the
     * arena is destroyed, whatever the configuration says for device
     * arenas (max_cached, release_threshold; ga_bm_hold for the rest).
     * Given back under a max_cached of the configuration, a live graph's
     * memory was unmapped at the next free. */
    gpuarena_t *a = NULL;
    gpuarena_status_t st =
        gpuarena_create(GPUARENA_DEVICE, device,
                        "pool=arena,cross_stream=never,max_cached=none,release_threshold=max", &a);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_bm_hold(a->bm);
    if (!a->prov->ops->name_by_handle) {
        (void)gpuarena_destroy(a);
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "a CUDA graph pool's arena cannot name streams by their handles");
    }
    a->prov->ops->name_by_handle(a->prov);
    *out = a;
    return GPUARENA_SUCCESS;
}

/* The pool that serves capture CID on DEVICE, bound to it now if need
 * be (see the top) with STREAM, the capturing stream that asks, or NULL;
 * the lock held. */
static gpool_t *pool_of_capture(int device, uint64_t cid, void *stream)
{
    gpool_t *unbound = NULL, *own = NULL;
    unsigned n = 0;
    for (gpool_t *g = pools; g; g = g->next) {
        if (g->device != device || !g->users || g->by_capture)
            continue;
        if (g->bound && g->capture == cid)
            return g;
        if (!g->bound) {
            unbound = g;
            n++;
            /* A thread that began a pool and left its end to another
             * holds a stale pointer: mine() compares. */
            if (mine(g))
                own = g;
        }
    }
    gpool_t *g = own ? own : n == 1 ? unbound : NULL;
    if (g) {
        g->bound = true;
        g->capture = cid;
        g->stream = stream;
        g->thread = pthread_self();
    }
    return g;
}

/* SIZE bytes on capturing STREAM from A, a pool's arena, which lives
 * at least until the capture ends. */
static gpuarena_status_t alloc_in(gpuarena_t *a, size_t size, void *stream, void **ptr)
{
    /* The stream's id without the capture check that refused it. */
    ga_stream_t s = {.handle = stream};
    gpuarena_status_t st = a->prov->ops->stream_id(a->prov, stream, &s.id);
    /* The stream's pool made now: a free into a pool not made yet asks
     * whether the stream is captured, and would be refused until the
     * capture ends (deferred.c), its block not reused by the capture. */
    if (st == GPUARENA_SUCCESS)
        st = ga_bm_make_pool(a->bm, s);
    if (st == GPUARENA_SUCCESS)
        st = ga_bm_alloc_on(a->bm, size, s, ptr, false);
    /* Recorded as gpuarena_alloc records its own: the free goes through
     * gpuarena_free, which finds the block by it (an untraced block's
     * free writes nothing, and GPUARENA_TRACE missed the graphs). */
    if (st == GPUARENA_SUCCESS && ga_trace_on())
        ga_trace_record_alloc(a, a->kind, a->device, *ptr, size, stream);
    return st;
}

gpuarena_status_t ga_graph_pool_alloc(int device, size_t size, void *stream, void **ptr)
{
    uint64_t cid;
    if (!ga_cuda_capture_id(stream, &cid))
        return GPUARENA_ERR_STREAM_CAPTURE; /* the default arena's refusal stands */
    gpuarena_status_t st = GPUARENA_SUCCESS;
    pthread_mutex_lock(&lock);
    gpool_t *g = pool_of_capture(device, cid, stream);
    if (g && !g->arena)
        st = make_arena(device, &g->arena);
    gpuarena_t *a = g ? g->arena : NULL;
    pthread_mutex_unlock(&lock);
    /* A has users until the capture ends, after this allocation: it is
     * not destroyed under it. */
    if (!g)
        return GPUARENA_ERR_STREAM_CAPTURE;
    if (st != GPUARENA_SUCCESS)
        return st;
    return alloc_in(a, size, stream, ptr);
}

/* The driver's word that a capture pool's graph is gone (a user object's
 * destructor, on the driver's thread: no CUDA call, no lock that a CUDA
 * call may be made under).  The pool is destroyed by the next hook call
 * that collects (ga_graph_pool_collect), once its blocks are freed.  The
 * flag is the last write to the record, which another thread may free
 * as soon as it sees it; the count, which the collector reads first, is
 * raised after, so that a collector that takes the count sees the flag. */
static void graph_gone(void *arg)
{
    gpool_t *g = arg;
    atomic_store_explicit(&g->graph_gone, true, memory_order_release);
    atomic_fetch_add_explicit(&ga_graph_pools_gone, 1, memory_order_release);
}

gpuarena_status_t ga_capture_pool_alloc(int device, size_t size, void *stream, void **ptr)
{
    uint64_t cid;
    void *graph = NULL;
    if (!ga_cuda_capture_graph(stream, &cid, &graph) || !graph)
        return GPUARENA_ERR_STREAM_CAPTURE; /* the refusal stands */
    gpuarena_status_t st = GPUARENA_SUCCESS;
    pthread_mutex_lock(&lock);
    gpool_t *g = pools;
    while (g && !(g->by_capture && g->device == device && g->capture == cid && !given_back(g)))
        g = g->next;
    if (!g) {
        g = calloc(1, sizeof *g);
        if (!g)
            st = ga_error(GPUARENA_ERR_HOST_MEMORY, "no host memory for a capture's pool");
        if (g) {
            g->device = device;
            g->by_capture = g->bound = true;
            g->capture = cid;
            g->stream = stream;
            g->thread = pthread_self();
            st = make_arena(device, &g->arena);
        }
        /* Tied to the graph last: from then on the driver may free it. */
        if (st == GPUARENA_SUCCESS)
            st = ga_cuda_graph_on_destroy(graph, graph_gone, g);
        if (st == GPUARENA_SUCCESS) {
            g->next = pools;
            pools = g;
            atomic_fetch_add_explicit(&ga_graph_pools, 1, memory_order_relaxed);
        } else if (g) {
            if (g->arena)
                (void)gpuarena_destroy(g->arena);
            free(g);
            g = NULL;
        }
    }
    gpuarena_t *a = g ? g->arena : NULL;
    pthread_mutex_unlock(&lock);
    /* The graph is being captured, so it cannot be destroyed before this
     * allocation is made: A lives until then. */
    return a ? alloc_in(a, size, stream, ptr) : st;
}

void ga_graph_pool_collect_slow(void *stream)
{
    if (stream == GA_GRAPH_POOL_CUPY_STREAM && !ga_cupy_current_stream(&stream))
        stream = NULL; /* the legacy stream, where CuPy cannot say */
    if (atomic_exchange_explicit(&ga_graph_pools_gone, 0, memory_order_acquire))
        ga_graph_pool_settle_all(stream);
}

/* The pool whose arena holds PTR, or NULL; the lock held. */
static gpool_t *holder(const void *ptr)
{
    for (gpool_t *g = pools; g; g = g->next)
        if (g->arena && ga_bm_holds(g->arena->bm, ptr))
            return g;
    return NULL;
}

bool ga_graph_pool_free(void *ptr, void *stream, gpuarena_status_t *st)
{
    pthread_mutex_lock(&lock);
    gpool_t *g = holder(ptr);
    bool found = g != NULL;
    if (found) {
        /* Under the lock: the arena is destroyed only under it, once
         * nothing is live, and this free may be its last block's. */
        *st = ga_deferred_double_free(g->arena, ptr, "gpuarena_torch_free")
                  ? GPUARENA_ERR_DOUBLE_FREE
                  : gpuarena_free(g->arena, ptr, stream);
        if (*st == GPUARENA_ERR_STREAM_CAPTURE)
            ga_deferred_keep(g->arena, ptr, stream, "gpuarena_torch_free");
        settle(g, stream); /* may free G */
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void ga_graph_pool_settle_all(void *stream)
{
    pthread_mutex_lock(&lock);
    for (gpool_t *g = pools, *next; g; g = next) {
        next = g->next;
        settle(g, stream);
    }
    pthread_mutex_unlock(&lock);
}

void ga_graph_pool_hold_captures(void (*fn)(bool wait, void *arg), void *arg)
{
    pthread_mutex_lock(&lock);
    fn(!pool_capture_may_run(), arg);
    pthread_mutex_unlock(&lock);
}

gpuarena_t *ga_graph_pool_arena_of(const void *ptr)
{
    pthread_mutex_lock(&lock);
    gpool_t *g = holder(ptr);
    gpuarena_t *a = g ? g->arena : NULL;
    pthread_mutex_unlock(&lock);
    return a;
}

void ga_graph_pool_fork_lock(void)
{
    pthread_mutex_lock(&lock);
}

void ga_graph_pool_fork_unlock(void)
{
    pthread_mutex_unlock(&lock);
}
