/*
 * arena.c - putting an arena together (provider + block manager +
 * settings) and the list of live arenas.
 */
#include "config.h"

#include "arena.h"

#include "config/config.h"
#include "errors.h"
#include "fork.h"
#include "providers/providers.h"
#include "report.h"
#include "totals.h"
#include "trace/trace.h"
#ifdef GA_FAULT_INJECTION
#include "providers/faulty.h"
#endif

#include <pthread.h>
#include <stdlib.h>

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static gpuarena_t *arenas;

static gpuarena_status_t make_provider(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                       ga_provider_t **p)
{
    switch (kind) {
    case GPUARENA_SIM:
        return ga_sim_provider_create(s, p);
    case GPUARENA_HOST:
        return ga_host_provider_create(s, p);
    case GPUARENA_DEVICE:
    case GPUARENA_PINNED:
    case GPUARENA_MANAGED:
        return ga_gpu_provider_create(kind, device, s, p);
    }
    return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "unknown arena kind %d", (int)kind);
}

gpuarena_status_t ga_arena_create(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                  gpuarena_t **out)
{
    ga_report_init();
    ga_fork_init();
    gpuarena_t *a = calloc(1, sizeof *a);
    if (!a)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for an arena");
    a->kind = kind;
    a->device = device;
    a->settings = *s;
    gpuarena_status_t st = make_provider(kind, device, s, &a->prov);
    if (st != GPUARENA_SUCCESS) {
        free(a);
        return st;
    }
#ifdef GA_FAULT_INJECTION
    /* Test builds: every provider call may be made to fail (faulty.h). */
    st = ga_fault_wrap(&a->prov);
    if (st != GPUARENA_SUCCESS) {
        a->prov->ops->destroy(a->prov);
        free(a);
        return st;
    }
#endif
    st = ga_bm_create(a->prov, s, &a->bm);
    if (st != GPUARENA_SUCCESS) {
        a->prov->ops->destroy(a->prov);
        free(a);
        return st;
    }
    /* DEVICE as ga_check_kind left it (host and sim: 0, one total each). */
    ga_total_t *t = ga_total_of(kind, device);
    if (t)
        ga_bm_set_total(a->bm, t);
    pthread_mutex_lock(&list_lock);
    a->next = arenas;
    arenas = a;
    pthread_mutex_unlock(&list_lock);
    *out = a;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_arena_destroy(gpuarena_t *a)
{
    pthread_mutex_lock(&list_lock);
    for (gpuarena_t **pp = &arenas; *pp; pp = &(*pp)->next) {
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    }
    pthread_mutex_unlock(&list_lock);
    if (atomic_load_explicit(&ga_trace_state, memory_order_relaxed) > 0)
        ga_trace_arena_gone(a);
    gpuarena_status_t st = ga_bm_destroy(a->bm);
    /* Memory whose release the driver refused earlier (a trim, a failed
     * decommit), tried once more: what it still holds is reported as the
     * manager's leftovers are.  It returned success with the memory held
     * for good.  The provider's last tries, and its destroy, report
     * nothing themselves: the message stays the manager's, or the
     * caller's. */
    ga_error_saved_t before;
    ga_error_save(&before);
    size_t kept = a->prov->ops->kept && !a->forked ? a->prov->ops->kept(a->prov) : 0;
    char why[512]; /* the last refusal's */
    snprintf(why, sizeof why, "%s", gpuarena_last_error());
    const char *name = a->prov->ops->name; /* static: the provider goes next */
    a->prov->ops->destroy(a->prov);
    ga_error_restore(&before);
    if (kept && st == GPUARENA_SUCCESS)
        st = ga_error(GPUARENA_ERR_DRIVER,
                      "gpuarena_destroy: %zu bytes whose release the driver refused stay "
                      "allocated until the process exits (%s provider): %s",
                      kept, name, why);
    free(a);
    return st;
}

/* Providers without stream_resolve: the capture check, then the id. */
gpuarena_status_t ga_arena_stream_slow(gpuarena_t *a, gpuarena_stream_t handle, ga_stream_t *s)
{
    const ga_provider_ops_t *ops = a->prov->ops;
    /* A stream under graph capture is refused first, before anything
     * changes and before any other driver call on it: the arena cannot
     * query or record events in a capture. */
    gpuarena_status_t st =
        ops->stream_check ? ops->stream_check(a->prov, handle) : GPUARENA_SUCCESS;
    if (st == GPUARENA_SUCCESS)
        st = ops->stream_id(a->prov, handle, &s->id);
    return st;
}

void ga_arenas_fork_prepare(void)
{
    pthread_mutex_lock(&list_lock);
    ga_bm_fork_begin();
    for (gpuarena_t *a = arenas; a; a = a->next)
        ga_bm_fork_prepare(a->bm);
}

void ga_arenas_fork_parent(void)
{
    for (gpuarena_t *a = arenas; a; a = a->next)
        ga_bm_fork_parent(a->bm);
    ga_bm_fork_end();
    pthread_mutex_unlock(&list_lock);
}

/* The host and sim kinds carry over to the child: their memory is the
 * process's own (a copy of the parent's pages).  The GPU kinds do not:
 * CUDA does not work in a child forked after it was initialized, and the
 * child's copy of pinned memory is plain memory, pinned no more (on an
 * H100 with the CUDA 13 driver it was mapped in the child, a copy). */
void ga_arenas_fork_child(void)
{
    for (gpuarena_t *a = arenas; a; a = a->next) {
        bool usable = a->kind == GPUARENA_HOST || a->kind == GPUARENA_SIM;
        a->forked = !usable;
        ga_bm_fork_child(a->bm, usable);
    }
    ga_bm_fork_end();
    pthread_mutex_unlock(&list_lock);
}

gpuarena_status_t ga_arena_forked(const gpuarena_t *a, const char *fn)
{
    return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                    "%s: this %s arena was made before the process forked: CUDA cannot be used "
                    "in a child made by fork() after it was initialized (only host and sim arenas "
                    "carry over; gpuarena(7), section Fork)",
                    fn, ga_kind_name(a->kind));
}

void ga_arena_foreach(void (*fn)(gpuarena_t *a, void *arg), void *arg)
{
    pthread_mutex_lock(&list_lock);
    for (gpuarena_t *a = arenas; a; a = a->next)
        fn(a, arg);
    pthread_mutex_unlock(&list_lock);
}
