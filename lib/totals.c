/*
 * totals.c - one total per kind and device (block/total.h): the bytes that
 * every arena of that kind on that device reserves, whichever made it
 * (gpuarena_get, gpuarena_create, a framework's graph pool), and the peak
 * of the sum; gpuarena_stats_total(3).
 *
 * A static table, as the registry of default arenas is: an arena keeps a
 * pointer to its entry for life, and an entry outlives every arena.
 */
#include "config.h"

#include "totals.h"

#include "errors.h"

#include <string.h>

static ga_total_t totals[GPUARENA_KIND_COUNT][GA_MAX_DEVICES];

ga_total_t *ga_total_of(gpuarena_kind_t kind, int device)
{
    if ((unsigned)kind >= GPUARENA_KIND_COUNT || device < 0 || device >= GA_MAX_DEVICES)
        return NULL;
    return &totals[kind][device];
}

bool ga_total_read(gpuarena_kind_t kind, int device, gpuarena_total_t *out)
{
    ga_total_t *t = ga_total_of(kind, device);
    memset(out, 0, sizeof *out);
    if (!t)
        return false;
    out->arenas = atomic_load_explicit(&t->arenas, memory_order_relaxed);
    out->reserved = atomic_load_explicit(&t->reserved, memory_order_relaxed);
    out->reserved_peak = atomic_load_explicit(&t->peak, memory_order_relaxed);
    /* Read one after the other, the peak may lag an update in flight. */
    if (out->reserved_peak < out->reserved)
        out->reserved_peak = out->reserved;
    /* Listed from its first arena on, whatever came since (all
     * destroyed, the peak reset: gpuarena_stats(3)). */
    return out->arenas || out->reserved_peak || atomic_load_explicit(&t->had, memory_order_relaxed);
}

gpuarena_status_t gpuarena_stats_total(gpuarena_kind_t kind, int device, gpuarena_total_t *total)
{
    if (!total)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_stats_total: total is NULL");
    gpuarena_status_t st = ga_check_kind(kind, &device);
    if (st != GPUARENA_SUCCESS)
        return st;
    (void)ga_total_read(kind, device, total);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t gpuarena_stats_total_reset_peak(gpuarena_kind_t kind, int device)
{
    gpuarena_status_t st = ga_check_kind(kind, &device);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_total_reset_peak(ga_total_of(kind, device));
    return GPUARENA_SUCCESS;
}

void ga_totals_fork_child(void)
{
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++)
        for (int d = 0; d < GA_MAX_DEVICES; d++)
            atomic_store_explicit(&totals[k][d].busy, 0, memory_order_relaxed);
}
