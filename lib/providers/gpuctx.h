/*
 * gpuctx.h - the part that the device, pinned and managed providers share: the
 * device's primary context (retained, never reset), stream identity by
 * cuStreamGetId, the refusal of capturing streams, and a pool of events
 * without timing (device.c's head says why each rule); a
 * provider that uses it starts with
 *
 *     struct { ga_provider_t base; ga_gpuctx_t g; ... }
 *
 * and puts the ga_gpuctx_* operations in its table.
 */
#ifndef GA_PROVIDERS_GPUCTX_H
#define GA_PROVIDERS_GPUCTX_H

#include "cuda/cuda.h"
#include "providers/provider.h"

#include <pthread.h>

#define GA_GPUCTX_EVENT_POOL 256

typedef struct ga_gpuctx {
    int ordinal;
    void *ctx;          /* the device's primary context (retained) */
    uint64_t legacy_id; /* cuStreamGetId of the legacy stream */
    bool by_handle;     /* streams named by their handles (name_by_handle) */
    pthread_mutex_t lock;
    void *events[GA_GPUCTX_EVENT_POOL];
    unsigned nevents;
} ga_gpuctx_t;

/* The provider P's shared part (P is laid out as above). */
typedef struct ga_gpuctx_provider {
    ga_provider_t base;
    ga_gpuctx_t g;
} ga_gpuctx_provider_t;

static inline ga_gpuctx_t *ga_gpuctx_of(ga_provider_t *p)
{
    return &((ga_gpuctx_provider_t *)p)->g;
}

/* Check DEVICE, retain its primary context, take the legacy stream's id. */
gpuarena_status_t ga_gpuctx_init(ga_gpuctx_t *g, int device);
/* Destroy pooled events and release the context (errors ignored: the
 * driver may be shut down at exit). */
void ga_gpuctx_fini(ga_gpuctx_t *g);

/* The devices that can reach G's device's memory (peer_access): their
 * ordinals, at most MAX of them, in *COUNT.  G's device is not among
 * them.  The device (growable segments) and driver-pool providers grant
 * them access. */
gpuarena_status_t ga_gpuctx_peers(const ga_gpuctx_t *g, int *peers, int max, int *count);

/* The statistics' memory line on key ipc, for the device's growable
 * segments and the driver's pool alike: memory made EXPORTABLE, or why
 * not (IPC: the key was on, so the device cannot).  A driver's refusal
 * is said apart, with the driver's words (GA_GPUCTX_IPC_REFUSED). */
static inline const char *ga_gpuctx_ipc_words(bool exportable, bool ipc)
{
    return exportable ? "exportable to other processes as POSIX file descriptors"
           : ipc      ? "not exportable to other processes (the device cannot)"
                      : "not exportable to other processes (ipc = false)";
}
#define GA_GPUCTX_IPC_REFUSED "not exportable to other processes: "

static inline gpuarena_status_t ga_gpuctx_enter(ga_gpuctx_t *g, ga_cuda_scope_t *sc)
{
    return ga_cuda_enter(g->ctx, sc);
}

/* Work queued for GPUARENA_STREAM_HOST (no stream: memzero, hints) goes
 * on the legacy stream, and the caller waits for it before returning,
 * since no later stream order would cover it.  The context is current. */
static inline gpuarena_stream_t ga_gpuctx_queue(gpuarena_stream_t s)
{
    return s == GPUARENA_STREAM_HOST ? NULL : s;
}

/* Before such work: the legacy stream's capture check.  While a blocking
 * stream of the context is being captured the legacy stream may not be
 * used (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), and work on it invalidates
 * that capture: refused first, GPUARENA_ERR_STREAM_CAPTURE, as a NULL
 * stream is.  No call for a stream the block manager checked. */
gpuarena_status_t ga_gpuctx_legacy_check(void);
static inline gpuarena_status_t ga_gpuctx_queue_check(gpuarena_stream_t s)
{
    return s == GPUARENA_STREAM_HOST ? ga_gpuctx_legacy_check() : GPUARENA_SUCCESS;
}

static inline gpuarena_status_t ga_gpuctx_host_wait(gpuarena_stream_t s, gpuarena_status_t st)
{
    return st == GPUARENA_SUCCESS && s == GPUARENA_STREAM_HOST ? ga_cuda_stream_sync(NULL) : st;
}

/* Provider operations. */
gpuarena_status_t ga_gpuctx_stream_id(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id);
gpuarena_status_t ga_gpuctx_stream_check(ga_provider_t *p, gpuarena_stream_t s);
bool ga_gpuctx_stream_id_known(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id);
gpuarena_status_t ga_gpuctx_stream_resolve(ga_provider_t *p, gpuarena_stream_t s, bool defer,
                                           uint64_t *id);
void ga_gpuctx_name_by_handle(ga_provider_t *p);
gpuarena_status_t ga_gpuctx_event_create(ga_provider_t *p, ga_event_t *ev);
void ga_gpuctx_event_destroy(ga_provider_t *p, ga_event_t ev);
gpuarena_status_t ga_gpuctx_event_record(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t s);
gpuarena_status_t ga_gpuctx_event_query(ga_provider_t *p, ga_event_t ev);
gpuarena_status_t ga_gpuctx_event_sync(ga_provider_t *p, ga_event_t ev);
gpuarena_status_t ga_gpuctx_stream_wait(ga_provider_t *p, gpuarena_stream_t s, ga_event_t ev);
gpuarena_status_t ga_gpuctx_sync_all(ga_provider_t *p);
gpuarena_status_t ga_gpuctx_stream_idle(ga_provider_t *p, gpuarena_stream_t s);
gpuarena_status_t ga_gpuctx_mem_free(ga_provider_t *p, uint64_t *free_bytes);
/* Zeros written by the GPU in stream order (device, managed and
 * driver-pool memory; pinned memory is zeroed by the host). */
gpuarena_status_t ga_gpuctx_memzero(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s);
gpuarena_status_t ga_gpuctx_memzero_check(ga_provider_t *p, gpuarena_stream_t s);

/* The entries of these operations in a provider's table. */
#define GA_GPUCTX_OPS                                                                              \
    .stream_id = ga_gpuctx_stream_id, .stream_check = ga_gpuctx_stream_check,                      \
    .name_by_handle = ga_gpuctx_name_by_handle, .stream_resolve = ga_gpuctx_stream_resolve,        \
    .stream_id_known = ga_gpuctx_stream_id_known, .event_create = ga_gpuctx_event_create,          \
    .event_destroy = ga_gpuctx_event_destroy, .event_record = ga_gpuctx_event_record,              \
    .event_query = ga_gpuctx_event_query, .event_sync = ga_gpuctx_event_sync,                      \
    .stream_wait = ga_gpuctx_stream_wait, .sync_all = ga_gpuctx_sync_all

#endif /* GA_PROVIDERS_GPUCTX_H */
