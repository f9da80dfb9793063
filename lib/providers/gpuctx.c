/*
 * gpuctx.c - context, streams and events shared by the device, pinned and managed
 * providers (see gpuctx.h; the rules are those of device.c).
 */
#include "providers/gpuctx.h"

#include "errors.h"

#include <stdio.h>

gpuarena_status_t ga_gpuctx_init(ga_gpuctx_t *g, int device)
{
    gpuarena_status_t st = ga_cuda_device_check(device);
    if (st != GPUARENA_SUCCESS)
        return st;
    g->ordinal = device;
    g->nevents = 0;
    st = ga_cuda_primary_retain(device, &g->ctx);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_cuda_scope_t sc;
    st = ga_cuda_enter(g->ctx, &sc);
    if (st == GPUARENA_SUCCESS) {
        st = ga_cuda_legacy_id(g->ctx, &g->legacy_id);
        ga_cuda_leave(&sc);
    }
    if (st != GPUARENA_SUCCESS) {
        ga_cuda_primary_release(device);
        return st;
    }
    pthread_mutex_init(&g->lock, NULL);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_gpuctx_peers(const ga_gpuctx_t *g, int *peers, int max, int *count)
{
    int n = 0;
    *count = 0;
    gpuarena_status_t st = ga_cuda_device_count(&n);
    for (int i = 0; st == GPUARENA_SUCCESS && i < n && *count < max; i++) {
        bool can = false;
        if (i != g->ordinal)
            st = ga_cuda_can_access_peer(i, g->ordinal, &can);
        if (can)
            peers[(*count)++] = i;
    }
    return st;
}

void ga_gpuctx_fini(ga_gpuctx_t *g)
{
    ga_cuda_scope_t sc;
    bool in = ga_cuda_enter(g->ctx, &sc) == GPUARENA_SUCCESS;
    pthread_mutex_lock(&g->lock);
    while (g->nevents)
        ga_cuda_event_destroy(g->events[--g->nevents]);
    pthread_mutex_unlock(&g->lock);
    if (in)
        ga_cuda_leave(&sc);
    ga_cuda_primary_release(g->ordinal);
    pthread_mutex_destroy(&g->lock);
}

/* A real handle names its context; the default streams (NULL, legacy,
 * per-thread) mean "of the current context". */
static inline bool names_context(gpuarena_stream_t s)
{
    return s != NULL && s != GA_CUDA_STREAM_LEGACY && s != GA_CUDA_STREAM_PER_THREAD;
}

/* Run FN on stream S: as it is for a real handle; with the arena's
 * context made current around it for a default stream. */
static gpuarena_status_t on_stream(ga_gpuctx_t *g, gpuarena_stream_t s,
                                   gpuarena_status_t (*fn)(void *ctx, void *s, void *out),
                                   void *out)
{
    if (names_context(s))
        return fn(g->ctx, s, out);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = fn(g->ctx, s, out);
    ga_cuda_leave(&sc);
    return st;
}

static gpuarena_status_t get_id(void *ctx, void *s, void *out)
{
    return ga_cuda_stream_id(ctx, s, out);
}

static gpuarena_status_t query(void *ctx, void *s, void *out)
{
    (void)ctx, (void)out;
    return ga_cuda_stream_query(s);
}

/* Whether an arena that names streams by their handles (name_by_handle)
 * names S so: every stream but the legacy one, which is never captured
 * and has its id from init. */
static inline bool by_handle(const ga_gpuctx_t *g, gpuarena_stream_t s)
{
    return g->by_handle && s != NULL && s != GA_CUDA_STREAM_LEGACY;
}

/* The calling thread's per-thread stream, for handle_id: its address is
 * the thread's own while the thread lives. */
static _Thread_local char per_thread_stream;

/* A stream's id from its handle (name_by_handle): the handle, with the
 * top bit set so that it is none of the driver's ids (small counts).  A
 * handle is reused only once its stream was destroyed and its work done
 * (see cuda.c): a new stream with it then inherits a pool whose frees
 * have passed.  CU_STREAM_PER_THREAD is one handle for every thread's
 * stream, and its driver id cannot be asked while it is captured (CuPy
 * captures there under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1): the
 * address of a byte of the calling thread's own names it, which no
 * stream handle (driver memory) is.  A later thread may be given the same
 * address; the arenas that name streams so serve one capture each
 * (graphpool.c), which ends before its thread does. */
static inline uint64_t handle_id(gpuarena_stream_t s)
{
    if (s == GA_CUDA_STREAM_PER_THREAD)
        s = &per_thread_stream;
    return (uint64_t)(uintptr_t)s | (uint64_t)1 << 63;
}

void ga_gpuctx_name_by_handle(ga_provider_t *p)
{
    ga_gpuctx_of(p)->by_handle = true;
}

bool ga_gpuctx_stream_id_known(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    if (by_handle(g, s)) {
        *id = handle_id(s);
        return true;
    }
    if (s == NULL || s == GA_CUDA_STREAM_LEGACY) {
        *id = g->legacy_id;
        return true;
    }
    return ga_cuda_stream_id_cached(g->ctx, s, id);
}

/* The id known with no driver call, else the driver's; a stream named by
 * its handle has its device checked all the same. */
gpuarena_status_t ga_gpuctx_stream_id(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    if (by_handle(g, s) && names_context(s)) {
        /* No id asked, but the device checked: a capture pool must not
         * serve another GPU's stream with its GPU's memory. */
        gpuarena_status_t st = ga_cuda_stream_owner_check(g->ctx, s);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    if (ga_gpuctx_stream_id_known(p, s, id))
        return GPUARENA_SUCCESS;
    return on_stream(g, s, get_id, id);
}

gpuarena_status_t ga_gpuctx_stream_check(ga_provider_t *p, gpuarena_stream_t s)
{
    return names_context(s) ? ga_cuda_stream_check(s)
                            : ga_cuda_default_stream_check(ga_gpuctx_of(p)->ctx, s);
}

/* The hot path of every stream-ordered call: capture check and id in one
 * step for a real handle; the per-thread stream takes the two steps
 * above.  The legacy stream cannot be captured (CUDA refuses to begin a
 * capture on it), so its id, found at init, is all: GA_UNCHECKED.  Its
 * check (cuCtxGetCurrent, then the legacy stream's cuStreamIsCapturing,
 * which costs more than a created stream's) was most of the time of a
 * cached pair on it (bench_device's (d)), and what it finds, a blocking
 * stream of the context being captured, matters only to a call that
 * reaches the driver with the legacy stream: the block manager asks
 * stream_check before any such.
 *
 * DEFER (a free): a stream whose id this thread knows is named with no
 * driver call, GA_UNCHECKED, for the same reason.  A free reaches the
 * driver with its stream only for an event (recorded uses, a sweep that
 * its pool owes) or a pool not made yet, and the block manager asks
 * first (free_names_stream); a free into the thread cache or a pool puts
 * nothing on the stream, so a capture of it is not disturbed, and the
 * block waits there for an allocation, which is always checked: it is
 * reused by work queued after the capture, as PyTorch's own allocator
 * reuses a block freed during a capture.  One check a cached pair
 * instead of two: a check costs about as much as the rest of the pair. */
gpuarena_status_t ga_gpuctx_stream_resolve(ga_provider_t *p, gpuarena_stream_t s, bool defer,
                                           uint64_t *id)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    if (by_handle(g, s)) {
        *id = handle_id(s);
        if (defer)
            return GA_UNCHECKED;
        if (!names_context(s))
            return ga_gpuctx_stream_check(p, s);
        gpuarena_status_t st = ga_cuda_stream_owner_check(g->ctx, s);
        return st == GPUARENA_SUCCESS ? ga_cuda_stream_check(s) : st;
    }
    if (s != NULL && s != GA_CUDA_STREAM_LEGACY) {
        if (defer && ga_cuda_stream_id_cached(g->ctx, s, id))
            return GA_UNCHECKED;
        if (s != GA_CUDA_STREAM_PER_THREAD)
            return ga_cuda_stream_resolve(g->ctx, s, id);
        gpuarena_status_t st = ga_gpuctx_stream_check(p, s);
        return st == GPUARENA_SUCCESS ? ga_gpuctx_stream_id(p, s, id) : st;
    }
    *id = g->legacy_id;
    return GA_UNCHECKED;
}

gpuarena_status_t ga_gpuctx_event_create(ga_provider_t *p, ga_event_t *ev)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    pthread_mutex_lock(&g->lock);
    if (g->nevents) {
        *ev = g->events[--g->nevents];
        pthread_mutex_unlock(&g->lock);
        return GPUARENA_SUCCESS;
    }
    pthread_mutex_unlock(&g->lock);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_event_create(ev);
    ga_cuda_leave(&sc);
    return st;
}

void ga_gpuctx_event_destroy(ga_provider_t *p, ga_event_t ev)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    pthread_mutex_lock(&g->lock);
    if (g->nevents < GA_GPUCTX_EVENT_POOL) {
        g->events[g->nevents++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    if (ev)
        ga_cuda_event_destroy(ev);
}

gpuarena_status_t ga_gpuctx_event_record(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t s)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_event_record(ev, s);
    ga_cuda_leave(&sc);
    return st;
}

gpuarena_status_t ga_gpuctx_event_query(ga_provider_t *p, ga_event_t ev)
{
    (void)p;
    gpuarena_status_t st = ga_cuda_event_query(ev);
    return st == GA_CUDA_NOT_READY ? GA_NOT_READY : st;
}

gpuarena_status_t ga_gpuctx_event_sync(ga_provider_t *p, ga_event_t ev)
{
    (void)p;
    return ga_cuda_event_sync(ev);
}

gpuarena_status_t ga_gpuctx_stream_wait(ga_provider_t *p, gpuarena_stream_t s, ga_event_t ev)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_stream_wait_event(ga_gpuctx_queue(s), ev);
    ga_cuda_leave(&sc);
    return st;
}

gpuarena_status_t ga_gpuctx_sync_all(ga_provider_t *p)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_ctx_sync();
    ga_cuda_leave(&sc);
    return st;
}

gpuarena_status_t ga_gpuctx_mem_free(ga_provider_t *p, uint64_t *free_bytes)
{
    ga_gpuctx_t *g = ga_gpuctx_of(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    size_t f = 0;
    st = ga_cuda_mem_info(&f, NULL);
    ga_cuda_leave(&sc);
    if (st == GPUARENA_SUCCESS)
        *free_bytes = f;
    return st;
}

gpuarena_status_t ga_gpuctx_legacy_check(void)
{
    gpuarena_status_t st = ga_cuda_stream_check(NULL);
    if (st == GPUARENA_SUCCESS)
        return st;
    char why[400];
    snprintf(why, sizeof why, "%s", gpuarena_last_error());
    return ga_error(st,
                    "no stream (GPUARENA_STREAM_HOST): the work this call needs goes on the "
                    "legacy stream, which a capture of a blocking stream forbids (%s)",
                    why);
}

gpuarena_status_t ga_gpuctx_memzero(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(ga_gpuctx_of(p), &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_gpuctx_queue_check(s);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_memset_d8_async((uint64_t)(uintptr_t)ptr, 0, size, ga_gpuctx_queue(s));
    st = ga_gpuctx_host_wait(s, st);
    ga_cuda_leave(&sc);
    return st;
}

/* Only no stream has anything to check: a stream is checked by the block
 * manager before it takes a block. */
gpuarena_status_t ga_gpuctx_memzero_check(ga_provider_t *p, gpuarena_stream_t s)
{
    if (s != GPUARENA_STREAM_HOST)
        return GPUARENA_SUCCESS;
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(ga_gpuctx_of(p), &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_gpuctx_legacy_check();
    ga_cuda_leave(&sc);
    return st;
}

gpuarena_status_t ga_gpuctx_stream_idle(ga_provider_t *p, gpuarena_stream_t s)
{
    gpuarena_status_t st = on_stream(ga_gpuctx_of(p), s, query, NULL);
    return st == GPUARENA_SUCCESS ? GPUARENA_SUCCESS : GA_NOT_READY;
}
