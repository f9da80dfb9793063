/*
 * device.c - the device provider: GPU memory of one device, in the
 * device's primary context (shared with a program that uses the CUDA
 * runtime API; retained at creation, released at destroy, never reset).
 *
 * Fixed segments come from cuMemAlloc.  Growable segments, the default
 * where the device supports virtual memory management (key `expandable`),
 * reserve an address range (cuMemAddressReserve) and commit it granule by
 * granule: each granule is its own physical allocation (cuMemCreate +
 * cuMemMap), so that any granule-aligned piece can be decommitted later
 * (cuMemUnmap + cuMemRelease) whatever pieces it was committed in; vmm.c
 * keeps the reservations and handles, shared with the pinned provider's
 * growable segments.  Access (cuMemSetAccess) is given after
 * every commit to the device and, with `peer_access`, to every GPU that
 * can reach it.  The granule is the driver's recommended granularity, or
 * the `granule` setting rounded up to a multiple of it.
 *
 * Other processes (key `ipc`): the granules are made exportable as POSIX
 * file descriptors where the device allows it, since cuIpcGetMemHandle
 * refuses virtual-memory allocations and CUDA-aware MPI libraries reach
 * them through cuMemExportToShareableHandle instead (UCX's cuda_ipc); a
 * fixed segment from cuMemAlloc takes cuIpcGetMemHandle as it is.  Where
 * the driver refuses an exportable granule for any reason but memory
 * (a container that forbids it, say), the arena stops asking and says why
 * in its `how' (gpuarena_stats_print): memory first, sharing second.
 *
 * Every call that needs a context runs with the primary context current:
 * pushed when another context (or none) is current, popped after.
 *
 * Streams are named by cuStreamGetId (the driver recycles handles).  A
 * stream of another context or device is GPUARENA_ERR_INVALID_STREAM.
 * NULL and CU_STREAM_LEGACY are the context's legacy stream, whose id is
 * taken once at creation; CU_STREAM_PER_THREAD is the calling thread's
 * per-thread stream.
 *
 * Stream capture: stream_check answers GPUARENA_ERR_STREAM_CAPTURE when
 * the stream is being captured into a CUDA graph (or cannot be used
 * because another capture is under way in global mode), and the block
 * manager refuses the alloc or free with that status before anything
 * changes.  So an allocation inside a capture never breaks the capture:
 * no event is queried or recorded, nothing synchronises, no memory is
 * mapped; the program allocates before beginning the capture.  The
 * legacy stream, which cannot be captured, is named with no check at all
 * (GA_UNCHECKED, gpuctx.c): the block manager checks it only before a
 * call that would reach the driver with it.
 *
 * Events have timing disabled and are pooled: event_destroy keeps up to
 * GA_GPUCTX_EVENT_POOL of them for the next event_create.
 */
#include "cuda/cuda.h"
#include "errors.h"
#include "providers/gpu.h"
#include "providers/gpuctx.h"
#include "providers/vmm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct device {
    ga_provider_t base;
    ga_gpuctx_t g; /* context, streams, events: shared with pinned, managed */
    ga_vmm_t vmm;  /* growable segments (laid out as ga_vmm_provider_t) */
    int access[GA_CUDA_MAX_ACCESS];
    int access_count;     /* the device itself first, then peers */
    pthread_mutex_t lock; /* the reservations, live_maps and exportable */
    bool exportable;      /* granules made exportable (key ipc, device support) */
    char how[320];        /* base.how: the memory and whether other processes reach it */
    char refused[320];    /* base.how once the driver refused exportable granules */
} device_t;

_Static_assert(offsetof(device_t, vmm) == offsetof(ga_vmm_provider_t, vmm),
               "device_t is laid out as ga_vmm_provider_t");

#define DEV(p) ((device_t *)(p))

static gpuarena_status_t enter(device_t *d, ga_cuda_scope_t *sc)
{
    return ga_gpuctx_enter(&d->g, sc);
}

/* ---------------------------------------------------------------------- */
/* Fixed segments. */

static gpuarena_status_t dev_map(ga_provider_t *p, size_t size, void **base)
{
    device_t *d = DEV(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = enter(d, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    uint64_t a = 0;
    st = ga_cuda_mem_alloc(size, &a);
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&d->lock);
    p->live_maps++;
    pthread_mutex_unlock(&d->lock);
    *base = (void *)(uintptr_t)a;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t dev_unmap(ga_provider_t *p, void *base, size_t size)
{
    (void)size;
    device_t *d = DEV(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = enter(d, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_mem_free((uint64_t)(uintptr_t)base);
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&d->lock);
    p->live_maps--;
    pthread_mutex_unlock(&d->lock);
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Growable segments (vmm.c: the reservations and their granules). */

/* Under d->lock (vmm.c). */
static gpuarena_status_t create_map(void *owner, uint64_t va, size_t size, uint64_t *handle)
{
    device_t *d = owner;
    bool create_failed = false;
    gpuarena_status_t st =
        ga_cuda_vmm_create_map(d->g.ordinal, va, size, d->exportable, handle, &create_failed);
    /* Only a refused exportable cuMemCreate turns exporting off: a map
     * that failed after it says nothing of the handle type. */
    if (st == GPUARENA_SUCCESS || st == GPUARENA_ERR_OUT_OF_MEMORY || !d->exportable ||
        !create_failed)
        return st;
    char why[200];
    snprintf(why, sizeof why, "%s", gpuarena_last_error());
    st = ga_cuda_vmm_create_map(d->g.ordinal, va, size, false, handle, &create_failed);
    if (st == GPUARENA_SUCCESS) {
        d->exportable = false;
        /* gpuarena_stats_print may be reading base.how in another thread:
         * the new line is written apart, then published whole. */
        snprintf(d->refused, sizeof d->refused, "cuMemCreate granules, " GA_GPUCTX_IPC_REFUSED "%s",
                 why);
        __atomic_store_n(&d->base.how, d->refused, __ATOMIC_RELEASE);
    }
    return st;
}

static gpuarena_status_t set_access(void *owner, uint64_t va, size_t size)
{
    device_t *d = owner;
    return ga_cuda_vmm_set_access(va, size, d->access, d->access_count);
}

/* ---------------------------------------------------------------------- */
/* Streams and events. */

/* Streams and events are gpuctx.c's, shared with the pinned and managed
 * providers: see the head of this file for what is done under capture
 * (refuse). */

/* ---------------------------------------------------------------------- */
/* The rest. */

static void dev_destroy(ga_provider_t *p)
{
    device_t *d = DEV(p);
    /* A reservation still here is one the block manager could not give
     * back: gpuarena_destroy reported it, and its memory stays mapped.
     * Only the records go.  No second try: it would fail as the first did
     * (a context in error, a driver shut down at exit), and the report
     * must say what stays mapped. */
    ga_vmm_fini(&d->vmm);
    ga_gpuctx_fini(&d->g);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const ga_provider_ops_t device_ops = {
    .name = "device",
    .map = dev_map,
    .unmap = dev_unmap,
    GA_VMM_OPS,
    GA_GPUCTX_OPS,
    .memzero = ga_gpuctx_memzero,
    .memzero_check = ga_gpuctx_memzero_check,
    .mem_free = ga_gpuctx_mem_free,
    .destroy = dev_destroy,
};

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* Sizes and access list; the context is current. */
static gpuarena_status_t setup(device_t *d, const ga_settings_t *s)
{
    int vmm = 0;
    gpuarena_status_t st = ga_cuda_device_attr(d->g.ordinal, GA_CUDA_ATTR_VMM_SUPPORTED, &vmm);
    if (st != GPUARENA_SUCCESS)
        return st;
    size_t g = (size_t)2 << 20;
    if (vmm) {
        st = ga_cuda_vmm_granularity(d->g.ordinal, true, &g);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    if (s->granule > g)
        g = round_up(s->granule, g);
    d->base.granule = g;
    d->base.growable = vmm && s->expandable;

    size_t total = 0;
    st = ga_cuda_device_total_mem(d->g.ordinal, &total);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* Twice the device's memory, in whole GiB and granules: room for the
     * segment to grow to all of the device, with fragmentation. */
    d->base.va_size = round_up(round_up(2 * total, (size_t)1 << 30), g);

    if (d->base.growable) {
        int fd = 0;
        if (s->ipc && ga_cuda_device_attr(d->g.ordinal, GA_CUDA_ATTR_POSIX_FD_SUPPORTED, &fd) ==
                          GPUARENA_SUCCESS)
            d->exportable = fd != 0;
        snprintf(d->how, sizeof d->how, "cuMemCreate granules, %s",
                 ga_gpuctx_ipc_words(d->exportable, s->ipc));
    } else {
        snprintf(d->how, sizeof d->how, "cuMemAlloc segments (cuIpcGetMemHandle)");
    }
    d->base.how = d->how;

    d->access[0] = d->g.ordinal;
    d->access_count = 1;
    if (s->peer_access && d->base.growable) {
        int peers = 0;
        st = ga_gpuctx_peers(&d->g, d->access + 1, GA_CUDA_MAX_ACCESS - 1, &peers);
        d->access_count += peers;
    }
    return st;
}

gpuarena_status_t ga_device_provider_create(int device, const ga_settings_t *s, ga_provider_t **out)
{
    device_t *d = calloc(1, sizeof *d);
    if (!d)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "device: no memory for the provider");
    d->base.ops = &device_ops;
    gpuarena_status_t st = ga_gpuctx_init(&d->g, device);
    if (st != GPUARENA_SUCCESS) {
        free(d);
        return st;
    }
    pthread_mutex_init(&d->lock, NULL);
    d->vmm = (ga_vmm_t){.prov = &d->base,
                        .g = &d->g,
                        .lock = &d->lock,
                        .who = "device",
                        .owner = d,
                        .create_map = create_map,
                        .set_access = set_access};
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
