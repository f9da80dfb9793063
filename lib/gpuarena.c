/*
 * gpuarena.c - the public functions: argument checking, the registry of
 * default arenas per (kind, device), and the calls into the arena's block
 * manager.  A caller mistake is caught here or in the block manager, and
 * always before anything changes.
 */
#include "config.h"

#include "arena.h"
#include "config/config.h"
#include "deferred.h"
#include "errors.h"
#include "graphpool.h"
#include "topo/topo.h"
#include "trace/trace.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Default arenas (GA_MAX_DEVICES: arena.h): one per (kind, device); host
 * and sim use device slot 0.
 * Lookups are lock-free once the arena exists. */
static gpuarena_t *_Atomic defaults[GPUARENA_KIND_COUNT][GA_MAX_DEVICES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

void ga_defaults_fork_lock(void)
{
    pthread_mutex_lock(&registry_lock);
}

void ga_defaults_fork_unlock(void)
{
    pthread_mutex_unlock(&registry_lock);
}

const char *gpuarena_version(void)
{
    return PACKAGE_VERSION;
}

gpuarena_status_t gpuarena_init(const char *config_path)
{
    return ga_config_init(config_path);
}

/* Check KIND and *DEVICE; the host and sim kinds have no device, so
 * theirs becomes 0 (gpuarena_get(3): checked, otherwise ignored). */
gpuarena_status_t ga_check_kind(gpuarena_kind_t kind, int *device)
{
    if ((unsigned)kind >= GPUARENA_KIND_COUNT)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "unknown arena kind %d", (int)kind);
    if (*device < 0 || *device >= GA_MAX_DEVICES)
        return ga_error(GPUARENA_ERR_INVALID_DEVICE, "device %d is out of range", *device);
    if (kind == GPUARENA_HOST || kind == GPUARENA_SIM)
        *device = 0;
    return GPUARENA_SUCCESS;
}

/* The message of a refused NUMA node list names where the list came
 * from (arena.h), as the configuration's own errors do (gpuarena_get(3)). */
gpuarena_status_t ga_numa_origin(gpuarena_status_t st, gpuarena_kind_t kind, int device,
                                 bool in_options)
{
    static const char prefix[] = GA_TOPO_NUMA_ERROR;
    if (st != GPUARENA_ERR_CONFIG || strncmp(gpuarena_last_error(), prefix, sizeof prefix - 1))
        return st;
    char origin[256] = "options", value[128], section[32];
    const ga_conf_t *c = in_options ? NULL : ga_config_current();
    int dev = kind == GPUARENA_HOST ? -1 : device;
    const ga_key_t *k = ga_config_find_key("numa");
    if (c)
        ga_conf_value(c, kind, dev, k, value, sizeof value, origin, sizeof origin);
    /* The section the value was set in: [pinned.1]'s is pinned.1.numa. */
    if (c && ga_conf_value_in_device(c, kind, dev, k))
        snprintf(section, sizeof section, "%s.%d", ga_kind_name(kind), dev);
    else
        snprintf(section, sizeof section, "%s", ga_kind_name(kind));
    ga_error_saved_t saved;
    ga_error_save(&saved);
    return ga_error(st, "%s: key '%s.numa': %s", origin, section, saved.text + sizeof prefix - 1);
}

gpuarena_status_t gpuarena_get(gpuarena_kind_t kind, int device, gpuarena_t **arena)
{
    if (!arena)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_get: arena is NULL");
    gpuarena_status_t st = ga_check_kind(kind, &device);
    if (st != GPUARENA_SUCCESS)
        return st;
    gpuarena_t *a = defaults[kind][device];
    if (a) {
        *arena = a;
        return GPUARENA_SUCCESS;
    }
    pthread_mutex_lock(&registry_lock);
    a = defaults[kind][device];
    if (!a) {
        ga_settings_t s;
        st = ga_config_settings(kind, device, &s);
        if (st == GPUARENA_SUCCESS)
            st = ga_numa_origin(ga_arena_create(kind, device, &s, &a), kind, device, false);
        if (st == GPUARENA_SUCCESS) {
            a->is_default = true;
            defaults[kind][device] = a;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    if (st == GPUARENA_SUCCESS)
        *arena = a;
    return st;
}

gpuarena_status_t gpuarena_create(gpuarena_kind_t kind, int device, const char *options,
                                  gpuarena_t **arena)
{
    if (!arena)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_create: arena is NULL");
    gpuarena_status_t st = ga_check_kind(kind, &device);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_settings_t s;
    bool named[GA_CONFIG_MAX_KEYS] = {false};
    st = ga_config_settings(kind, device, &s);
    if (st == GPUARENA_SUCCESS)
        st = ga_config_apply_named(&s, kind, options, "options", named);
    if (st == GPUARENA_SUCCESS)
        st = ga_numa_origin(ga_arena_create(kind, device, &s, arena), kind, device,
                            named[ga_config_key_index(ga_config_find_key("numa"))]);
    return st;
}

gpuarena_status_t gpuarena_destroy(gpuarena_t *a)
{
    if (!a)
        return GPUARENA_SUCCESS;
    if (a->is_default)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "gpuarena_destroy: a default arena (gpuarena_get) lives until exit");
    if (a->forked)
        return ga_arena_forked(a, "gpuarena_destroy");
    ga_deferred_settle(); /* a hook's frees that a capture held back */
    if (ga_bm_live_blocks(a->bm) != 0)
        return ga_error(GPUARENA_ERR_BUSY, "gpuarena_destroy: %llu blocks are still live",
                        (unsigned long long)ga_bm_live_blocks(a->bm));
    /* Destroyed in every case, as close(2) closes: memory the provider
     * could not take back is reported, not retried (gpuarena_destroy(3)). */
    return ga_arena_destroy(a);
}

gpuarena_status_t gpuarena_kind(const gpuarena_t *a, gpuarena_kind_t *kind, int *device)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_kind: arena is NULL");
    if (kind)
        *kind = a->kind;
    if (device)
        *device = a->device;
    return GPUARENA_SUCCESS;
}

/* The traced halves of gpuarena_alloc and gpuarena_free, out of line:
 * the untraced calls then save and restore fewer registers (bench_churn
 * by cachegrind: 851 instructions a free + alloc against 860). */
static __attribute__((noinline)) gpuarena_status_t alloc_traced(gpuarena_t *a, size_t size,
                                                                gpuarena_stream_t stream,
                                                                ga_stream_t s, bool unchecked,
                                                                void **ptr)
{
    gpuarena_status_t st = ga_bm_alloc_on(a->bm, size, s, ptr, unchecked);
    if (st == GPUARENA_SUCCESS)
        ga_trace_record_alloc(a, a->kind, a->device, *ptr, size, stream);
    return st;
}

static __attribute__((noinline)) gpuarena_status_t
free_traced(gpuarena_t *a, void *ptr, gpuarena_stream_t stream, ga_stream_t s, bool unchecked)
{
    /* Around the free: PTR may be handed out again at once, and the free
     * may yet be refused (trace.h). */
    uint64_t id = ga_trace_free_begin(a, a->kind, a->device, ptr, stream);
    gpuarena_status_t st = ga_bm_free_on(a->bm, ptr, s, unchecked);
    ga_trace_free_end(a, a->kind, a->device, ptr, id, stream, st);
    return st;
}

gpuarena_status_t gpuarena_alloc(gpuarena_t *a, size_t size, gpuarena_stream_t stream, void **ptr)
{
    if (!a || !ptr)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_alloc: %s is NULL",
                        a ? "ptr" : "arena");
    /* One test of a byte next to the fields read below: the thread cache
     * of a GPU arena would otherwise still hand out blocks in a child. */
    if (__builtin_expect(a->forked, 0))
        return ga_arena_forked(a, "gpuarena_alloc");
    if (size == 0) {
        *ptr = NULL;
        if (ga_trace_on())
            ga_trace_record_alloc(a, a->kind, a->device, NULL, 0, stream);
        return GPUARENA_SUCCESS;
    }
    ga_stream_t s;
    gpuarena_status_t st = ga_arena_stream(a, stream, false, &s);
    if (st != GPUARENA_SUCCESS && st != GA_UNCHECKED)
        return st;
    /* GA_UNCHECKED: the legacy stream (ga_gpuctx_stream_resolve). */
    if (__builtin_expect(ga_trace_on(), 0))
        return alloc_traced(a, size, stream, s, st == GA_UNCHECKED, ptr);
    return ga_bm_alloc_on(a->bm, size, s, ptr, st == GA_UNCHECKED);
}

gpuarena_status_t gpuarena_free(gpuarena_t *a, void *ptr, gpuarena_stream_t stream)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_free: arena is NULL");
    if (!ptr)
        return GPUARENA_SUCCESS;
    if (__builtin_expect(a->forked, 0))
        return ga_arena_forked(a, "gpuarena_free");
    /* Deferred: the block manager asks whether the stream is being
     * captured only if the free would reach the driver with it. */
    ga_stream_t s;
    gpuarena_status_t st = ga_arena_stream(a, stream, true, &s);
    if (st != GPUARENA_SUCCESS && st != GA_UNCHECKED) {
        /* A pointer that is no live block is that error, whatever the
         * stream: a capture's refusal would have a caller keep the free
         * for later (gpuarena_torch_free), and count it. */
        size_t live;
        gpuarena_status_t pst = ga_bm_lookup(a->bm, ptr, &live, "gpuarena_free");
        return pst != GPUARENA_SUCCESS ? pst : st;
    }
    if (__builtin_expect(ga_trace_on(), 0))
        return free_traced(a, ptr, stream, s, st == GA_UNCHECKED);
    return ga_bm_free_on(a->bm, ptr, s, st == GA_UNCHECKED);
}

gpuarena_status_t gpuarena_record_stream(gpuarena_t *a, void *ptr, gpuarena_stream_t stream)
{
    if (!a || !ptr)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_record_stream: %s is NULL",
                        a ? "ptr" : "arena");
    if (a->forked)
        return ga_arena_forked(a, "gpuarena_record_stream");
    if (stream == GPUARENA_STREAM_HOST)
        return ga_error(GPUARENA_ERR_INVALID_STREAM,
                        "gpuarena_record_stream: GPUARENA_STREAM_HOST is no stream to record");
    ga_stream_t s;
    gpuarena_status_t st = ga_arena_stream(a, stream, false, &s);
    if (st == GA_UNCHECKED) /* the block's free records an event on it */
        st = a->prov->ops->stream_check(a->prov, stream);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_bm_record_stream(a->bm, ptr, s);
    if (st == GPUARENA_SUCCESS && ga_trace_on())
        ga_trace_record_stream(a, a->kind, a->device, ptr, stream);
    return st;
}

gpuarena_status_t gpuarena_prefetch(gpuarena_t *a, void *ptr, size_t size, int destination,
                                    gpuarena_stream_t stream)
{
    if (!a || !ptr)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_prefetch: %s is NULL",
                        a ? "ptr" : "arena");
    if (a->forked)
        return ga_arena_forked(a, "gpuarena_prefetch");
    if (!a->prov->ops->prefetch)
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "gpuarena_prefetch: only managed arenas prefetch");
    size_t live = 0;
    gpuarena_status_t st = ga_bm_lookup(a->bm, ptr, &live, "gpuarena_prefetch");
    if (st != GPUARENA_SUCCESS)
        return st;
    if (size > live)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "gpuarena_prefetch: %zu bytes asked, the block has %zu", size, live);
    return a->prov->ops->prefetch(a->prov, ptr, size ? size : live, destination, stream);
}

gpuarena_status_t gpuarena_trim(gpuarena_t *a, size_t keep_bytes)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_trim: arena is NULL");
    if (a->forked)
        return ga_arena_forked(a, "gpuarena_trim");
    /* A trim succeeds where the driver keeps some memory (gpuarena_trim(3):
     * it stays cached, no error): the thread's message stays too, as after
     * every call that succeeds (gpuarena_last_error(3)); it was the
     * driver's refusal. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    ga_deferred_retry_no_stream();
    gpuarena_status_t st = ga_bm_trim(a->bm, keep_bytes, true);
    if (st == GPUARENA_SUCCESS)
        ga_error_restore(&saved);
    return st;
}

gpuarena_status_t gpuarena_stats(gpuarena_t *a, gpuarena_stats_t *st)
{
    if (!a || !st)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_stats: %s is NULL",
                        a ? "stats" : "arena");
    ga_bm_stats(a->bm, st);
    st->deferred_frees = atomic_load_explicit(&a->deferred, memory_order_relaxed);
    /* Not in a forked child: a provider's hook may ask the driver (pool =
     * driver), so the figures a kind keeps itself read 0 there. */
    if (a->prov->ops->stats && !a->forked)
        a->prov->ops->stats(a->prov, st);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t gpuarena_stats_reset_peaks(gpuarena_t *a)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_stats_reset_peaks: arena is NULL");
    ga_bm_reset_peaks(a->bm);
    if (a->prov->ops->reset_peaks && !a->forked)
        a->prov->ops->reset_peaks(a->prov);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t gpuarena_check(gpuarena_t *a)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_check: arena is NULL");
    return ga_bm_check(a->bm);
}

gpuarena_t *ga_default_arena(gpuarena_kind_t kind, int device)
{
    if ((unsigned)kind >= GPUARENA_KIND_COUNT || device < 0 || device >= GA_MAX_DEVICES)
        return NULL;
    return defaults[kind][device];
}

gpuarena_t *ga_default_arena_of(gpuarena_kind_t kind, const void *ptr)
{
    if ((unsigned)kind >= GPUARENA_KIND_COUNT)
        return NULL;
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        gpuarena_t *a = defaults[kind][d];
        size_t live;
        if (a && ga_bm_lookup(a->bm, ptr, &live, NULL) == GPUARENA_SUCCESS)
            return a;
    }
    return NULL;
}
