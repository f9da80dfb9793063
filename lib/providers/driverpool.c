/*
 * driverpool.c - the driver-pool provider: device memory of one device
 * from the CUDA driver's own stream-ordered allocator, a pool made for the
 * arena (cuMemPoolCreate) that hands out every block
 * (cuMemAllocFromPoolAsync) and takes it back (cuMemFreeAsync) in stream
 * order.  A device arena uses it with `pool = driver`, for comparison with
 * the arena's own block manager and for programs that want the driver's
 * pool under gpuarena's API, statistics, checks and traces.
 *
 * Design.  The pool caches and orders reuse itself, so carving its blocks
 * again into segments and blocks would cache twice and measure neither
 * allocator.  This is a direct provider (provider.h): the block manager
 * passes each request straight through and keeps only what every arena
 * owes its caller: the map of live blocks (double, interior and foreign
 * pointers get the same statuses as in every arena, and change nothing),
 * the counters (requested, in use, peaks, allocations, frees, live
 * blocks), the record_stream rule, the trace and the invariant checker
 * (lib/block/direct.c).  Reserved and cached bytes come from the pool's
 * attributes (RESERVED_MEM_CURRENT and _HIGH), through the stats hook.
 *
 * The settings map onto the pool:
 *   release_threshold  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (max: UINT64_MAX);
 *                      the driver releases what the pool holds above it at
 *                      the next stream, event or context synchronisation
 *   cross_stream       the pool's reuse policy: event = follow event
 *                      dependencies and take frees already completed;
 *                      wait = also let the driver insert stream waits;
 *                      never = none of these (same-stream reuse only)
 *   peer_access        cuMemPoolSetAccess for every GPU that can reach it
 *   ipc                the pool made with POSIX file descriptor handles,
 *                      where the device can, so that another process may
 *                      import it (cuMemPoolExportToShareableHandle) and its
 *                      blocks (cuMemPoolExportPointer); plain where the
 *                      driver refuses that for a reason other than memory
 *   trim, max_cached   cuMemPoolTrimTo (the block manager decides how far)
 *   zero               cuMemsetD8Async on the allocation's stream
 *   round              requests are rounded up before they reach the pool
 * The keys of segments, splitting and thread caches do not apply: the
 * driver's pool owns its layout (gpuarena.conf(5) says so per key).
 *
 * Streams, events and capture are gpuctx.c's, as in device.c: a capturing
 * stream is refused before anything changes (no allocation node is ever
 * put into a graph).  Every call runs with the primary context current,
 * which the default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)
 * need.
 */
#include "errors.h"
#include "providers/gpu.h"
#include "providers/gpuctx.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct driverpool {
    ga_provider_t base;
    ga_gpuctx_t g;        /* context, streams, events: shared with device, pinned, managed */
    void *pool;           /* the CUmemoryPool */
    pthread_mutex_t lock; /* live_maps and cached_peak */
    uint64_t cached_peak; /* highest cached figure reported since the last reset */
    char how[320];        /* the statistics' memory line: exportable or not, and why */
} driverpool_t;

#define DP(p) ((driverpool_t *)(p))

static gpuarena_status_t enter(driverpool_t *d, ga_cuda_scope_t *sc)
{
    return ga_gpuctx_enter(&d->g, sc);
}

/* ---------------------------------------------------------------------- */
/* Blocks. */

static gpuarena_status_t dp_alloc_async(ga_provider_t *p, size_t size, gpuarena_stream_t s,
                                        void **ptr)
{
    driverpool_t *d = DP(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = enter(d, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    uint64_t a = 0;
    /* No stream (GPUARENA_STREAM_HOST): allocated on the legacy stream and
     * waited for, so that any stream may use the block. */
    st = ga_gpuctx_queue_check(s);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_mem_alloc_from_pool(size, d->pool, ga_gpuctx_queue(s), &a);
    if (st == GPUARENA_SUCCESS) {
        st = ga_gpuctx_host_wait(s, st);
        if (st != GPUARENA_SUCCESS) {
            /* The block is the pool's now and nobody will ever free it:
             * give it back on the stream it was allocated on, keeping the
             * wait's status and message (after such an error the free may
             * fail too, and then nothing more can be done). */
            char why[512];
            snprintf(why, sizeof why, "%s", gpuarena_last_error());
            ga_cuda_mem_free_async(a, ga_gpuctx_queue(s));
            ga_error(st, "%s", why);
        }
    }
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&d->lock);
    p->live_maps++;
    pthread_mutex_unlock(&d->lock);
    *ptr = (void *)(uintptr_t)a;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t dp_free_async(ga_provider_t *p, void *ptr, size_t size,
                                       gpuarena_stream_t s)
{
    (void)size;
    driverpool_t *d = DP(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = enter(d, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* No stream: the program says no work uses the block, so the legacy
     * stream's order is as good as any. */
    st = ga_gpuctx_queue_check(s);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_mem_free_async((uint64_t)(uintptr_t)ptr, ga_gpuctx_queue(s));
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&d->lock);
    p->live_maps--;
    pthread_mutex_unlock(&d->lock);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t dp_usage(ga_provider_t *p, uint64_t *reserved, uint64_t *used)
{
    ga_cuda_pool_usage_t u;
    gpuarena_status_t st = ga_cuda_pool_usage(DP(p)->pool, &u);
    if (st != GPUARENA_SUCCESS)
        return st;
    *reserved = u.reserved;
    *used = u.used;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t dp_trim(ga_provider_t *p, uint64_t keep)
{
    return ga_cuda_pool_trim(DP(p)->pool, keep > SIZE_MAX ? SIZE_MAX : (size_t)keep);
}

/* ---------------------------------------------------------------------- */
/* Figures. */

/* Reserved and cached bytes are the pool's: what it holds from the device
 * (RESERVED_MEM_CURRENT, its high-water mark the peak), and of that what
 * is not in live blocks.  The block manager has filled in in_use. */
static void dp_stats(ga_provider_t *p, gpuarena_stats_t *st)
{
    driverpool_t *d = DP(p);
    ga_cuda_pool_usage_t u;
    if (ga_cuda_pool_usage(d->pool, &u) != GPUARENA_SUCCESS)
        return; /* the driver is gone (exit): the block manager's zeros stay */
    st->reserved = u.reserved;
    st->reserved_peak = u.reserved_high > u.reserved ? u.reserved_high : u.reserved;
    st->cached = u.reserved > st->in_use ? u.reserved - st->in_use : 0;
    pthread_mutex_lock(&d->lock);
    if (st->cached > d->cached_peak)
        d->cached_peak = st->cached;
    st->cached_peak = d->cached_peak;
    pthread_mutex_unlock(&d->lock);
}

/* The pool's high-water marks restart from the values now; the cached
 * peak restarts at the next stats call (dp_stats takes the value then). */
static void dp_reset_peaks(ga_provider_t *p)
{
    driverpool_t *d = DP(p);
    (void)ga_cuda_pool_reset_peaks(d->pool);
    pthread_mutex_lock(&d->lock);
    d->cached_peak = 0;
    pthread_mutex_unlock(&d->lock);
}

static void dp_destroy(ga_provider_t *p)
{
    driverpool_t *d = DP(p);
    /* Blocks still allocated or frees not yet complete keep the pool's
     * memory until they are done: the driver releases it then.  At exit
     * the driver may be shut down already: errors are ignored. */
    ga_cuda_scope_t sc;
    bool in = enter(d, &sc) == GPUARENA_SUCCESS;
    if (in) {
        (void)ga_cuda_pool_destroy(d->pool);
        ga_cuda_leave(&sc);
    }
    ga_gpuctx_fini(&d->g);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const ga_provider_ops_t driverpool_ops = {
    .name = "device (driver pool)",
    GA_GPUCTX_OPS,
    .alloc_async = dp_alloc_async,
    .free_async = dp_free_async,
    .usage = dp_usage,
    .trim = dp_trim,
    .reset_peaks = dp_reset_peaks,
    .memzero = ga_gpuctx_memzero,
    .memzero_check = ga_gpuctx_memzero_check,
    .stats = dp_stats,
    .mem_free = ga_gpuctx_mem_free,
    .destroy = dp_destroy,
};

/* The pool, its policies and its peers; the context is current. */
static gpuarena_status_t setup(driverpool_t *d, const ga_settings_t *s)
{
    int ok = 0;
    gpuarena_status_t st =
        ga_cuda_device_attr(d->g.ordinal, GA_CUDA_ATTR_MEMORY_POOLS_SUPPORTED, &ok);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (!ok)
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "device.pool = driver: device %d does not support the driver's "
                        "stream-ordered pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0); "
                        "use pool = arena",
                        d->g.ordinal);
    uint64_t threshold = s->release_threshold == SIZE_MAX ? UINT64_MAX : s->release_threshold;
    int fd = 0;
    if (s->ipc && ga_cuda_device_attr(d->g.ordinal, GA_CUDA_ATTR_POOL_POSIX_FD_SUPPORTED, &fd) !=
                      GPUARENA_SUCCESS)
        fd = 0;
    ga_error_saved_t saved; /* the caller's, kept where the fallback works */
    ga_error_save(&saved);
    st = ga_cuda_pool_create(d->g.ordinal, threshold, fd != 0, &d->pool);
    if (st != GPUARENA_SUCCESS && st != GPUARENA_ERR_OUT_OF_MEMORY && fd) {
        /* Refused for another reason than memory (a container that
         * forbids exporting): a plain pool, and the memory line says why. */
        char why[200];
        snprintf(why, sizeof why, "%s", gpuarena_last_error());
        st = ga_cuda_pool_create(d->g.ordinal, threshold, false, &d->pool);
        if (st == GPUARENA_SUCCESS)
            ga_error_restore(&saved);
        snprintf(d->how, sizeof d->how,
                 "the driver's pool (cuMemPoolCreate), " GA_GPUCTX_IPC_REFUSED "%s", why);
    } else {
        snprintf(d->how, sizeof d->how, "the driver's pool (cuMemPoolCreate), %s",
                 ga_gpuctx_ipc_words(fd != 0, s->ipc));
    }
    if (st != GPUARENA_SUCCESS)
        return st;
    d->base.how = d->how;
    bool events = s->cross_stream != GA_CROSS_NEVER;
    st = ga_cuda_pool_set_reuse(d->pool, events, events, s->cross_stream == GA_CROSS_WAIT);
    if (st == GPUARENA_SUCCESS && s->peer_access) {
        int peers[GA_CUDA_MAX_ACCESS], count = 0;
        st = ga_gpuctx_peers(&d->g, peers, GA_CUDA_MAX_ACCESS, &count);
        if (st == GPUARENA_SUCCESS && count)
            st = ga_cuda_pool_set_access(d->pool, peers, count);
    }
    if (st != GPUARENA_SUCCESS) {
        (void)ga_cuda_pool_destroy(d->pool);
        d->pool = NULL;
    }
    return st;
}

gpuarena_status_t ga_driverpool_provider_create(int device, const ga_settings_t *s,
                                                ga_provider_t **out)
{
    driverpool_t *d = calloc(1, sizeof *d);
    if (!d)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "device: no memory for the provider");
    d->base.ops = &driverpool_ops;
    /* No segments: the granule only has to be a valid one. */
    d->base.granule = (size_t)2 << 20;
    gpuarena_status_t st = ga_gpuctx_init(&d->g, device);
    if (st != GPUARENA_SUCCESS) {
        free(d);
        return st;
    }
    pthread_mutex_init(&d->lock, NULL);
    ga_cuda_scope_t sc;
    st = enter(d, &sc);
    if (st == GPUARENA_SUCCESS) {
        st = setup(d, s);
        ga_cuda_leave(&sc);
    }
    if (st != GPUARENA_SUCCESS) {
        ga_gpuctx_fini(&d->g);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return st;
    }
    *out = &d->base;
    return GPUARENA_SUCCESS;
}
