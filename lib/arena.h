/*
 * arena.h - an arena: a block manager over a provider, with its settings,
 * its kind and device, and its place in the list of all arenas that
 * gpuarena_stats_print() walks.
 */
#ifndef GA_ARENA_H
#define GA_ARENA_H

#include "block/block.h"
#include "config/settings.h"
#include "gpuarena.h"
#include "providers/provider.h"

#include <stdatomic.h>
#include <stdbool.h>

struct gpuarena {
    gpuarena_kind_t kind;
    int device;
    bool is_default; /* owned by the registry: gpuarena_destroy refuses */
    /* As created: the caps that gpuarena_set changes are the block
     * manager's (ga_bm_caps). */
    ga_settings_t settings;
    ga_provider_t *prov;
    ga_bm_t *bm;
    /* In a child made by fork(2): the arena's memory is the GPU's, which
     * the child cannot use (fork.c); every call on it is refused. */
    bool forked;
    /* Frees of its blocks that a framework hook keeps until a CUDA graph
     * capture ends (deferred.c): the statistic deferred_frees. */
    _Atomic uint64_t deferred;
    struct gpuarena *next; /* list of all arenas, under the registry lock */
};

gpuarena_status_t ga_arena_create(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                  gpuarena_t **out);
/* Destroy A whatever happens; the status of ga_bm_destroy (memory the
 * provider could not take back). */
gpuarena_status_t ga_arena_destroy(gpuarena_t *a);

/* Resolve a stream handle to the block manager's view of it (inline: it
 * runs on every alloc and free).  GA_UNCHECKED where the provider named
 * it without a capture check (provider.h): the caller then passes
 * unchecked to ga_bm_alloc_on or ga_bm_free_on, or asks stream_check
 * itself.  DEFER: the caller is gpuarena_free, which may leave the check
 * to the block manager (stream_resolve in provider.h). */
gpuarena_status_t ga_arena_stream_slow(gpuarena_t *a, gpuarena_stream_t handle, ga_stream_t *s);
static inline gpuarena_status_t ga_arena_stream(gpuarena_t *a, gpuarena_stream_t handle, bool defer,
                                                ga_stream_t *s)
{
    s->handle = handle;
    if (handle == GPUARENA_STREAM_HOST) {
        /* No stream: nothing to ask the driver (see gpuarena.h). */
        s->id = GA_STREAM_ANY;
        return GPUARENA_SUCCESS;
    }
    const ga_provider_ops_t *ops = a->prov->ops;
    if (ops->stream_resolve)
        return ops->stream_resolve(a->prov, handle, defer, &s->id);
    return ga_arena_stream_slow(a, handle, s);
}

/* fork(2) (fork.c): the list of arenas and every arena's block manager
 * held across it; in the child, arenas of GPU memory are marked forked. */
void ga_arenas_fork_prepare(void);
void ga_arenas_fork_parent(void);
void ga_arenas_fork_child(void);

/* The status of a call on arena A in a child made by fork(2) that A
 * cannot serve (A->forked), with a message naming FN. */
gpuarena_status_t ga_arena_forked(const gpuarena_t *a, const char *fn);

/* Walk every live arena under the registry lock. */
void ga_arena_foreach(void (*fn)(gpuarena_t *a, void *arg), void *arg);

/* ST, the status of placing an arena of KIND on DEVICE: where its NUMA
 * node list was refused (a node the machine lacks), the message is
 * rewritten to say where the value came from ("options" when
 * IN_OPTIONS, else the file and line or GPUARENA_OPTIONS), as the
 * configuration's own errors do (gpuarena.c; gpuarena-topo too). */
gpuarena_status_t ga_numa_origin(gpuarena_status_t st, gpuarena_kind_t kind, int device,
                                 bool in_options);

/* The default arena of KIND (gpuarena_get) that has PTR as a live block,
 * or NULL (gpuarena.c). */
gpuarena_t *ga_default_arena_of(gpuarena_kind_t kind, const void *ptr);

/* fork(2) (fork.c): the registry of default arenas held across it
 * (gpuarena.c). */
void ga_defaults_fork_lock(void);
void ga_defaults_fork_unlock(void);

/* Devices with a default arena of each kind: ordinals 0 to 63. */
#define GA_MAX_DEVICES 64

/* The default arena of KIND on DEVICE if it exists, else NULL: unlike
 * gpuarena_get, it makes none (gpuarena.c). */
gpuarena_t *ga_default_arena(gpuarena_kind_t kind, int device);

/* Check KIND and *DEVICE as gpuarena_get does (a clear status); the host
 * and sim kinds have no device, so theirs becomes 0 (gpuarena.c). */
gpuarena_status_t ga_check_kind(gpuarena_kind_t kind, int *device);

#endif /* GA_ARENA_H */
