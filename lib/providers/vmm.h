/*
 * vmm.h - growable segments through the driver's virtual memory
 * management, shared by the device and pinned providers: an address
 * reservation (cuMemAddressReserve) committed granule by granule, each
 * granule its own physical allocation, so that any granule-aligned piece
 * can be decommitted later (cuMemUnmap + cuMemRelease) whatever pieces it
 * was committed in.  The handles are kept per reservation in an array
 * indexed by (address - base) / granule.
 *
 * What differs between providers is where the memory lives and who may
 * touch it: the provider gives create_map (cuMemCreate at its location +
 * cuMemMap) and set_access (cuMemSetAccess after every commit).  Every
 * call runs with the provider's context current and under its lock, which
 * also guards the provider's live_maps.
 */
#ifndef GA_PROVIDERS_VMM_H
#define GA_PROVIDERS_VMM_H

#include "providers/gpuctx.h"
#include "providers/provider.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ga_vmm_resv ga_vmm_resv_t;

typedef struct ga_vmm {
    ga_provider_t *prov;   /* granule and live_maps */
    ga_gpuctx_t *g;        /* the context every call runs in */
    pthread_mutex_t *lock; /* the provider's: reservations and live_maps */
    const char *who;       /* provider name, for messages */
    void *owner;           /* first argument of the two functions below */
    /* Create a physical allocation of SIZE bytes (one granule) and map
     * it at VA; *HANDLE is what ga_cuda_vmm_unmap_release takes back.  On
     * failure *HANDLE is 0, or a handle still to be released
     * (ga_cuda_vmm_create_map). */
    gpuarena_status_t (*create_map)(void *owner, uint64_t va, size_t size, uint64_t *handle);
    /* Give access to [VA, VA+SIZE), mapped over one or more handles. */
    gpuarena_status_t (*set_access)(void *owner, uint64_t va, size_t size);
    ga_vmm_resv_t *resv;
    /* Handles of unmapped granules whose cuMemRelease failed: released
     * again before every later decommit and release, so that one failure
     * does not keep a granule of memory for the life of the process. */
    uint64_t *unreleased;
    unsigned nunreleased, cap_unreleased;
    /* Granules a failed commit could not unmap (GRANULE_STALE, vmm.c):
     * not in live_maps, unmapped again by the next decommit or trim. */
    size_t nstale;
} ga_vmm_t;

/* A provider with growable segments through this file is laid out as
 * below (as gpuctx.h's are), so that the operations find its ga_vmm_t. */
typedef struct ga_vmm_provider {
    ga_provider_t base;
    ga_gpuctx_t g;
    ga_vmm_t vmm;
} ga_vmm_provider_t;

/* The provider operations of the same names.  Two differ from "a failed
 * call does nothing", since the driver unmaps granule by granule:
 * - a failed decommit has decommitted a prefix of whole granules of the
 *   range (possibly none) and left the rest committed; decommitting a
 *   granule of that prefix again succeeds and does nothing, which is how
 *   the block manager finds out how far it got;
 * - a failed commit leaves the range uncommitted to the block manager,
 *   but a granule its undo could not unmap stays mapped (counted apart
 *   from live_maps) until the next commit over it takes it over, or a
 *   decommit, a trim (ga_vmm_tidy) or the release unmaps it. */
gpuarena_status_t ga_vmm_reserve(ga_provider_t *p, size_t size, void **base);
gpuarena_status_t ga_vmm_release(ga_provider_t *p, void *base, size_t size);
gpuarena_status_t ga_vmm_commit(ga_provider_t *p, void *addr, size_t size);
gpuarena_status_t ga_vmm_decommit(ga_provider_t *p, void *addr, size_t size);
gpuarena_status_t ga_vmm_mapped(ga_provider_t *p, void *addr, size_t size, size_t *bytes);
void ga_vmm_tidy(ga_provider_t *p);
size_t ga_vmm_kept(ga_provider_t *p);

/* Their entries in a provider's table. */
#define GA_VMM_OPS                                                                                 \
    .reserve = ga_vmm_reserve, .release = ga_vmm_release, .commit = ga_vmm_commit,                 \
    .decommit = ga_vmm_decommit, .mapped = ga_vmm_mapped, .tidy = ga_vmm_tidy, .kept = ga_vmm_kept

/* Forget the reservations left (at destroy: what the block manager could
 * not give back stays mapped; only the records go), and the handles that
 * would not release. */
void ga_vmm_fini(ga_vmm_t *v);

#endif /* GA_PROVIDERS_VMM_H */
