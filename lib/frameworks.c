/*
 * frameworks.c - entry points in the signatures that PyTorch's
 * CUDAPluggableAllocator and CuPy's CFunctionAllocator call, so that both
 * load libgpuarena.so.0 with no glue code.  They use the default device
 * arena of the device they are given (gpuarena_get(GPUARENA_DEVICE, dev))
 * and leave the reason of a failure in gpuarena_last_error().  A failed
 * allocation is raised in the framework as an exception where it is
 * loaded (raise.c: neither checks for NULL), else answers NULL.  See
 * gpuarena_torch_alloc(3) and gpuarena_cupy_malloc(3).
 *
 * Built with -fexceptions (lib/Makefile.am): PyTorch's exception unwinds
 * through gpuarena_torch_alloc.  The free and record-stream hooks never
 * raise: PyTorch calls them from destructors, where an exception would
 * end the program; a free they cannot make during a CUDA graph capture
 * is made after it (deferred.c), and every hook first makes those.
 */
#include "arena.h"
#include "config/config.h"
#include "cuda/cuda.h"
#include "cupystream.h"
#include "deferred.h"
#include "errors.h"
#include "graphpool.h"
#include "raise.h"

#include <stdint.h>

void *gpuarena_torch_alloc(ssize_t size, int device, void *stream)
{
    ga_deferred_retry_collect(stream);
    gpuarena_status_t st;
    void *p = NULL;
    if (size < 0) {
        st = ga_error(GPUARENA_ERR_SIZE_OVERFLOW, "gpuarena_torch_alloc: negative size %zd", size);
    } else {
        gpuarena_t *a;
        st = gpuarena_get(GPUARENA_DEVICE, device, &a);
        if (st == GPUARENA_SUCCESS)
            st = gpuarena_alloc(a, (size_t)size, stream, &p);
        /* Refused for a capture: the graph's pool, if this thread
         * allocates to one (graphpool.c). */
        if (st == GPUARENA_ERR_STREAM_CAPTURE &&
            atomic_load_explicit(&ga_graph_pools, memory_order_relaxed))
            st = ga_graph_pool_alloc(device, (size_t)size, stream, &p);
    }
    if (st != GPUARENA_SUCCESS)
        ga_raise_torch(st, size); /* returns where PyTorch is not loaded */
    return p;
}

void gpuarena_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    ga_deferred_retry_collect(stream);
    if (!ptr)
        return;
    gpuarena_t *a;
    if (gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return;
    /* A block of a graph's pool goes back there (graphpool.c). */
    gpuarena_status_t st;
    if (atomic_load_explicit(&ga_graph_pools, memory_order_relaxed) && !ga_bm_holds(a->bm, ptr) &&
        ga_graph_pool_free(ptr, stream, &st))
        return;
    if (ga_deferred_double_free(a, ptr, "gpuarena_torch_free"))
        return;
    if (gpuarena_free(a, ptr, stream) == GPUARENA_ERR_STREAM_CAPTURE)
        ga_deferred_keep(a, ptr, stream, "gpuarena_torch_free");
}

void gpuarena_torch_record_stream(void *ptr, void *stream)
{
    ga_deferred_retry_collect(stream);
    if (!ptr)
        return;
    gpuarena_t *a = ga_default_arena_of(GPUARENA_DEVICE, ptr);
    if (!a && atomic_load_explicit(&ga_graph_pools, memory_order_relaxed))
        a = ga_graph_pool_arena_of(ptr);
    if (!a) {
        ga_error(GPUARENA_ERR_INVALID_POINTER,
                 "gpuarena_torch_record_stream: %p is not a live block of a default device arena",
                 ptr);
        return;
    }
    /* Refused on a stream being captured (an event there would go into
     * the graph), as when a side stream joins the capture and reads the
     * tensor: dropped, the use let the block go back at its free and be
     * handed out within the graph while that stream's reads were still
     * ahead of it.  It counts as used by every stream instead: its free
     * leaves it to a wait for the whole device (ga_bm_uses_unknown), as
     * PyTorch's own allocator leaves such a block until the capture ends. */
    if (gpuarena_record_stream(a, ptr, stream) != GPUARENA_ERR_STREAM_CAPTURE)
        return;
    /* A use on the block's own stream changes nothing, where the stream's
     * id is known with no driver call (a pool's arena names streams by
     * their handles, graphpool.c; a default arena, by the id this thread
     * remembers): asking the driver fails on a capturing stream and
     * invalidates the capture. */
    const ga_provider_ops_t *ops = a->prov->ops;
    uint64_t id;
    bool named = ops->stream_id_known && ops->stream_id_known(a->prov, stream, &id);
    (void)ga_bm_uses_unknown(a->bm, ptr, named ? &id : NULL);
}

/* torch.cuda.empty_cache(): every default device arena that exists gives
 * back all its cached memory, as PyTorch's own allocator does; none is
 * made.  Never raises (see above).  While this process may be making a
 * graph (a pool between begin and end, or a CuPy capture with a pool),
 * without the trim's wait for the whole device, which would invalidate
 * the capture: what needs it stays for a later call.  A pool's begin
 * waits for the trim (ga_graph_pool_hold_captures). */
static void empty_defaults(bool wait, void *arg)
{
    (void)arg;
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        gpuarena_t *a = ga_default_arena(GPUARENA_DEVICE, d);
        if (a && !a->forked)
            (void)ga_bm_trim(a->bm, 0, wait);
    }
}

void gpuarena_torch_empty_cache(void)
{
    ga_deferred_retry_no_stream();
    ga_graph_pool_hold_captures(empty_defaults, NULL);
}

/* torch.cuda.set_per_process_memory_fraction(FRACTION, DEVICE): the
 * default device arena of DEVICE takes at most FRACTION of the device's
 * memory from the driver (max_reserved), as PyTorch's own allocator caps
 * its reserved bytes.  PyTorch calls it from Python, not from a
 * destructor: a failure is raised. */
void gpuarena_torch_set_memory_fraction(double fraction, int device)
{
    ga_deferred_retry_no_stream();
    gpuarena_status_t st;
    gpuarena_t *a = NULL;
    size_t total = 0;
    if (!(fraction >= 0.0 && fraction <= 1.0)) /* NaN too */
        st = ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                      "gpuarena_torch_set_memory_fraction: fraction %g is not from 0 to 1",
                      fraction);
    else if ((st = gpuarena_get(GPUARENA_DEVICE, device, &a)) == GPUARENA_SUCCESS)
        st = a->forked ? ga_arena_forked(a, "gpuarena_torch_set_memory_fraction")
                       : ga_cuda_device_total_mem(device, &total);
    if (st != GPUARENA_SUCCESS) {
        ga_raise_torch_error("gpuarena_torch_set_memory_fraction");
        return;
    }
    size_t cap = (size_t)((double)total * fraction);
    ga_bm_set_caps(a->bm, NULL, &cap);
}

/* GPUARENA_ERR_STREAM_CAPTURE while CuPy's current stream, left in
 * *STREAM, is being captured into a CUDA graph (cupystream.c says why); a
 * stream that cannot be asked (another device's, a handle the driver
 * refuses) is let be: the block is on the legacy stream all the same. */
static gpuarena_status_t cupy_capture_check(gpuarena_t *a, void **stream)
{
    *stream = NULL;
    if (!a->settings.cupy_capture_check || !ga_cupy_current_stream(stream) || !*stream)
        return GPUARENA_SUCCESS;
    ga_stream_t s;
    gpuarena_status_t st = ga_arena_stream(a, *stream, false, &s);
    return st == GPUARENA_ERR_STREAM_CAPTURE ? st : GPUARENA_SUCCESS;
}

/* A caller's arena for CuPy's DEVICE: memory that device can use as its
 * own, a device arena of that device or a managed arena (any device
 * reaches managed memory); host memory (a host or pinned arena's) or
 * another GPU's would make arrays that CuPy's kernels cannot use as
 * such.  A sim arena is taken for tests, as everywhere (no memory: a
 * program's own choice, tests/python/raise_cupy.py). */
static gpuarena_status_t cupy_param_check(gpuarena_t *a, int device)
{
    gpuarena_kind_t kind;
    int dev;
    gpuarena_status_t st = gpuarena_kind(a, &kind, &dev);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (kind == GPUARENA_MANAGED || kind == GPUARENA_SIM ||
        (kind == GPUARENA_DEVICE && dev == device))
        return GPUARENA_SUCCESS;
    if (kind == GPUARENA_DEVICE)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "gpuarena_cupy_malloc: the arena (param) is of GPU %d, CuPy asked for "
                        "GPU %d",
                        dev, device);
    return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                    "gpuarena_cupy_malloc: the arena (param) is a %s arena: CuPy needs a device "
                    "or managed one",
                    ga_kind_name(kind));
}

/* PARAM: NULL for the default device arena of DEVICE, or a gpuarena_t *
 * of the caller's (gpuarena_create) to allocate from instead.  During a
 * capture of CuPy's current stream the default arena's allocations come
 * from the capture's own pool (graphpool.c); a caller's arena refuses. */
void *gpuarena_cupy_malloc(void *param, size_t size, int device)
{
    ga_deferred_retry_collect(GA_GRAPH_POOL_CUPY_STREAM);
    gpuarena_t *a = param;
    gpuarena_status_t st =
        a ? cupy_param_check(a, device) : gpuarena_get(GPUARENA_DEVICE, device, &a);
    void *p = NULL, *stream = NULL;
    if (st == GPUARENA_SUCCESS && size && !a->forked)
        st = cupy_capture_check(a, &stream);
    if (st == GPUARENA_ERR_STREAM_CAPTURE && !param)
        st = ga_capture_pool_alloc(device, size, stream, &p);
    else if (st == GPUARENA_SUCCESS)
        st = gpuarena_alloc(a, size, NULL, &p);
    return st == GPUARENA_SUCCESS ? p : ga_raise_cupy(st, size);
}

void gpuarena_cupy_free(void *param, void *ptr, int device)
{
    ga_deferred_retry_collect(GA_GRAPH_POOL_CUPY_STREAM);
    if (!ptr)
        return;
    gpuarena_t *a = param;
    if (!a && gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return;
    /* A block of a capture's pool goes back there, on CuPy's current
     * stream: during the capture, the capturing one (graphpool.c). */
    if (!param && atomic_load_explicit(&ga_graph_pools, memory_order_relaxed) &&
        !ga_bm_holds(a->bm, ptr)) {
        void *stream = NULL; /* the legacy stream where CuPy cannot say */
        if (!ga_cupy_current_stream(&stream))
            stream = NULL;
        gpuarena_status_t st;
        if (ga_graph_pool_free(ptr, stream, &st))
            return;
    }
    if (ga_deferred_double_free(a, ptr, "gpuarena_cupy_free"))
        return;
    if (gpuarena_free(a, ptr, NULL) == GPUARENA_ERR_STREAM_CAPTURE)
        ga_deferred_keep(a, ptr, NULL, "gpuarena_cupy_free");
}
