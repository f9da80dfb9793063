/*
 * vmm.c - growable segments through cuMemAddressReserve, cuMemCreate and
 * cuMemMap, granule by granule (vmm.h says what is shared and what the
 * provider gives).
 */
#include "providers/vmm.h"

#include "array.h"
#include "cuda/cuda.h"
#include "errors.h"

#include <stdio.h>
#include <stdlib.h>

struct ga_vmm_resv {
    uint64_t base;
    size_t size;
    uint64_t *handles; /* per granule: the cuMemCreate handle */
    uint8_t *mapped;   /* per granule: GRANULE_FREE, _COMMITTED or _STALE */
    struct ga_vmm_resv *next;
};

/* A granule is mapped unless it is GRANULE_FREE, and counted in
 * live_maps when GRANULE_COMMITTED.  GRANULE_STALE is one that a failed
 * commit could not unmap again: a hole to the block manager, so that the
 * next commit there takes it over as it is (the driver would refuse a
 * second mapping at its address, and failing instead would wedge the hole
 * for good), and counted apart (nstale), so that the checker's count of
 * mappings holds; every later decommit tries to unmap it again, so that
 * a trim gives it back (retry_releases). */
enum { GRANULE_FREE, GRANULE_COMMITTED, GRANULE_STALE };

static ga_vmm_t *vmm_of(ga_provider_t *p)
{
    return &((ga_vmm_provider_t *)p)->vmm;
}

static void resv_free(ga_vmm_resv_t *r)
{
    if (r) {
        free(r->handles);
        free(r->mapped);
        free(r);
    }
}

gpuarena_status_t ga_vmm_reserve(ga_provider_t *p, size_t size, void **base)
{
    ga_vmm_t *v = vmm_of(p);
    size_t g = v->prov->granule;
    if (size == 0 || size % g)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "%s: reservation of %zu bytes is not a multiple of the granule %zu", v->who,
                        size, g);
    size_t n = size / g;
    ga_vmm_resv_t *r = calloc(1, sizeof *r);
    if (r) {
        r->handles = calloc(n, sizeof *r->handles);
        r->mapped = calloc(n, 1);
    }
    if (!r || !r->handles || !r->mapped) {
        resv_free(r);
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "%s: no memory to track a reservation", v->who);
    }
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(v->g, &sc);
    if (st == GPUARENA_SUCCESS) {
        st = ga_cuda_vmm_reserve(size, g, &r->base);
        ga_cuda_leave(&sc);
    }
    if (st != GPUARENA_SUCCESS) {
        resv_free(r);
        return st;
    }
    r->size = size;
    pthread_mutex_lock(v->lock);
    r->next = v->resv;
    v->resv = r;
    pthread_mutex_unlock(v->lock);
    *base = (void *)(uintptr_t)r->base;
    return GPUARENA_SUCCESS;
}

/* The reservation holding [A, A+SIZE), under the lock. */
static ga_vmm_resv_t *find(ga_vmm_t *v, uint64_t a, size_t size, ga_vmm_resv_t ***link)
{
    for (ga_vmm_resv_t **pp = &v->resv; *pp; pp = &(*pp)->next) {
        ga_vmm_resv_t *r = *pp;
        if (a >= r->base && a - r->base <= r->size && size <= r->size - (a - r->base)) {
            if (link)
                *link = pp;
            return r;
        }
    }
    return NULL;
}

/* Room to keep one more handle whose cuMemRelease may fail, made before
 * the call that may need it: a handle kept for nowhere was lost, its
 * memory held until the process exited.  HOST_MEMORY, with a message
 * about granule VA, when there is none: the caller then leaves the
 * granule as it is. */
static gpuarena_status_t room_to_keep(ga_vmm_t *v, uint64_t va)
{
    uint64_t *n = ga_room_for_one(v->unreleased, v->nunreleased, &v->cap_unreleased, sizeof *n, 8);
    if (!n)
        return ga_error(GPUARENA_ERR_HOST_MEMORY,
                        "%s: no host memory to keep the handle of the granule at %#llx should its "
                        "release fail: the granule is left as it was",
                        v->who, (unsigned long long)va);
    v->unreleased = n;
    return GPUARENA_SUCCESS;
}

/* Keep handle H, whose cuMemRelease failed, for retry_releases (in the
 * room that room_to_keep made). */
static void keep_unreleased(ga_vmm_t *v, uint64_t h)
{
    v->unreleased[v->nunreleased++] = h;
}

static gpuarena_status_t drop_one(ga_vmm_t *v, ga_vmm_resv_t *r, size_t i);

/* Release again the handles whose cuMemRelease failed before, and unmap
 * the granules a failed commit left mapped; those that fail again stay
 * for the next time.  Under the lock, in the context. */
static void retry_releases(ga_vmm_t *v)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < v->nunreleased; i++)
        if (ga_cuda_vmm_release(v->unreleased[i]) != GPUARENA_SUCCESS)
            v->unreleased[kept++] = v->unreleased[i];
    v->nunreleased = kept;
    for (ga_vmm_resv_t *r = v->resv; r && v->nstale; r = r->next)
        for (size_t i = 0; i < r->size / v->prov->granule && v->nstale; i++)
            if (r->mapped[i] == GRANULE_STALE)
                (void)drop_one(v, r, i);
}

/* Unmap and release granule I of R; under the lock, in the context.  Once
 * cuMemUnmap has succeeded the granule is free whatever cuMemRelease says:
 * its address may be mapped again, and only the physical memory behind the
 * handle stays held until a later release of it succeeds (retry_releases),
 * which the error says. */
static gpuarena_status_t drop_one(ga_vmm_t *v, ga_vmm_resv_t *r, size_t i)
{
    size_t g = v->prov->granule;
    uint64_t va = r->base + i * g;
    if (r->mapped[i] == GRANULE_FREE)
        return GPUARENA_SUCCESS;
    gpuarena_status_t st = room_to_keep(v, va);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_vmm_unmap(va, g);
    if (st != GPUARENA_SUCCESS)
        return st;
    uint64_t h = r->handles[i];
    if (r->mapped[i] == GRANULE_STALE)
        v->nstale--;
    else
        v->prov->live_maps--;
    r->mapped[i] = GRANULE_FREE;
    r->handles[i] = 0;
    st = ga_cuda_vmm_release(h);
    if (st != GPUARENA_SUCCESS) {
        char why[512];
        snprintf(why, sizeof why, "%s", gpuarena_last_error());
        keep_unreleased(v, h);
        ga_error(st,
                 "%s: granule at %#llx is unmapped, but its %zu bytes stay allocated until a "
                 "later release of them succeeds (at the next trim or release of memory): %s",
                 v->who, (unsigned long long)va, g, why);
    }
    return st;
}

/* Unmap and release granules [FIRST, LAST) of R in order, stopping at the
 * first granule that will not unmap: a failed call has then decommitted a
 * prefix of the range and left the rest committed, and dropping a granule
 * of that prefix again is no work.  That is what lets the block manager
 * find out how far a failed decommit got (release_growable asks again
 * granule by granule) instead of taking a partly unmapped block for a
 * mapped one.  A granule whose release alone failed is unmapped (its
 * handle kept for retry_releases): the others go on, and the first such
 * failure is the status (at a destroy, which probes no further, stopping
 * there kept the rest of the segment mapped).  Under the lock, in the
 * context. */
static gpuarena_status_t drop(ga_vmm_t *v, ga_vmm_resv_t *r, size_t first, size_t last)
{
    retry_releases(v);
    gpuarena_status_t first_st = GPUARENA_SUCCESS;
    ga_error_saved_t why;
    for (size_t i = first; i < last; i++) {
        gpuarena_status_t st = drop_one(v, r, i);
        if (st == GPUARENA_SUCCESS)
            continue;
        if (r->mapped[i] != GRANULE_FREE)
            return st; /* would not unmap: the prefix before it is done */
        if (first_st == GPUARENA_SUCCESS) {
            first_st = st;
            ga_error_save(&why);
        }
    }
    if (first_st != GPUARENA_SUCCESS)
        ga_error_restore(&why);
    return first_st;
}

gpuarena_status_t ga_vmm_release(ga_provider_t *p, void *base, size_t size)
{
    ga_vmm_t *v = vmm_of(p);
    uint64_t a = (uint64_t)(uintptr_t)base;
    pthread_mutex_lock(v->lock);
    ga_vmm_resv_t **link = NULL;
    ga_vmm_resv_t *r = find(v, a, size, &link);
    if (!r || r->base != a || r->size != size) {
        pthread_mutex_unlock(v->lock);
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "%s: no reservation of %zu bytes at %p to release", v->who, size, base);
    }
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(v->g, &sc);
    bool gone = false;
    if (st == GPUARENA_SUCCESS) {
        /* Granules still committed go first; the block manager decommits
         * them before releasing, so this only runs on an error path.  The
         * range goes once nothing is mapped in it, even where a release
         * failed (its handle waits for a later one). */
        size_t n = r->size / v->prov->granule, i = 0;
        st = drop(v, r, 0, n);
        while (i < n && r->mapped[i] == GRANULE_FREE)
            i++;
        if (i == n) {
            ga_error_saved_t why;
            ga_error_save(&why);
            gpuarena_status_t f = ga_cuda_vmm_free(r->base, r->size);
            gone = f == GPUARENA_SUCCESS;
            if (st == GPUARENA_SUCCESS)
                st = f;
            else
                ga_error_restore(&why); /* drop's message, not the free's */
        }
        ga_cuda_leave(&sc);
    }
    if (gone) {
        *link = r->next;
        resv_free(r);
    }
    pthread_mutex_unlock(v->lock);
    return st;
}

static gpuarena_status_t check_range(ga_vmm_t *v, uint64_t a, size_t size, ga_vmm_resv_t **out)
{
    size_t g = v->prov->granule;
    ga_vmm_resv_t *r = find(v, a, size, NULL);
    if (!r || size == 0 || (a - r->base) % g || size % g)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                        "%s: [%#llx, +%zu) is not a granule-aligned piece of a reservation", v->who,
                        (unsigned long long)a, size);
    *out = r;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t set_access(ga_vmm_t *v, uint64_t a, size_t size)
{
    size_t g = v->prov->granule;
    gpuarena_status_t st = v->set_access(v->owner, a, size);
    if (st == GPUARENA_SUCCESS || size == g)
        return st;
    /* A driver that wants one call per mapping: set it granule by granule. */
    for (size_t off = 0; off < size; off += g) {
        st = v->set_access(v->owner, a + off, g);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_vmm_commit(ga_provider_t *p, void *addr, size_t size)
{
    ga_vmm_t *v = vmm_of(p);
    uint64_t a = (uint64_t)(uintptr_t)addr;
    size_t g = v->prov->granule;
    pthread_mutex_lock(v->lock);
    ga_vmm_resv_t *r;
    gpuarena_status_t st = check_range(v, a, size, &r);
    if (st != GPUARENA_SUCCESS)
        goto out;
    size_t first = (a - r->base) / g, last = first + size / g;
    for (size_t i = first; i < last; i++)
        if (r->mapped[i] == GRANULE_COMMITTED) {
            st =
                ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "%s: granule at %#llx is committed already",
                         v->who, (unsigned long long)(r->base + i * g));
            goto out;
        }
    ga_cuda_scope_t sc;
    st = ga_gpuctx_enter(v->g, &sc);
    if (st != GPUARENA_SUCCESS)
        goto out;
    for (size_t i = first; i < last && st == GPUARENA_SUCCESS; i++) {
        if (r->mapped[i] == GRANULE_STALE) {
            /* Mapped still, by a failed commit: taken over as it is; the
             * access below covers it. */
            r->mapped[i] = GRANULE_COMMITTED;
            v->nstale--;
            v->prov->live_maps++;
            continue;
        }
        st = room_to_keep(v, r->base + i * g);
        if (st == GPUARENA_SUCCESS)
            st = v->create_map(v->owner, r->base + i * g, g, &r->handles[i]);
        if (st == GPUARENA_SUCCESS) {
            r->mapped[i] = GRANULE_COMMITTED;
            v->prov->live_maps++;
        } else if (r->handles[i]) {
            /* Not mapped, and its release failed: kept for a later one. */
            keep_unreleased(v, r->handles[i]);
            r->handles[i] = 0;
        }
    }
    if (st == GPUARENA_SUCCESS)
        st = set_access(v, a, size);
    if (st != GPUARENA_SUCCESS) {
        /* Undo every granule, not only up to a failure: the range stays a
         * hole to the block manager, so a granule that will not unmap is
         * left GRANULE_STALE for the next commit there to take over (and
         * ga_vmm_release to drop).  Keep the status and message of the
         * failure, not of the undo. */
        char why[512];
        snprintf(why, sizeof why, "%s", gpuarena_last_error());
        size_t stale = 0;
        for (size_t i = first; i < last; i++) {
            bool was_stale = r->mapped[i] == GRANULE_STALE; /* not counted as mapped */
            if (drop_one(v, r, i) != GPUARENA_SUCCESS && r->mapped[i] != GRANULE_FREE) {
                if (!was_stale) {
                    r->mapped[i] = GRANULE_STALE;
                    v->prov->live_maps--;
                    v->nstale++;
                }
                stale++;
            }
        }
        if (stale)
            ga_error(st,
                     "%s (%zu granules would not unmap: they stay mapped until the next commit "
                     "there or the next trim)",
                     why, stale);
        else
            ga_error(st, "%s", why);
    }
    ga_cuda_leave(&sc);
out:
    pthread_mutex_unlock(v->lock);
    return st;
}

gpuarena_status_t ga_vmm_decommit(ga_provider_t *p, void *addr, size_t size)
{
    ga_vmm_t *v = vmm_of(p);
    uint64_t a = (uint64_t)(uintptr_t)addr;
    pthread_mutex_lock(v->lock);
    ga_vmm_resv_t *r;
    gpuarena_status_t st = check_range(v, a, size, &r);
    if (st == GPUARENA_SUCCESS) {
        ga_cuda_scope_t sc;
        st = ga_gpuctx_enter(v->g, &sc);
        if (st == GPUARENA_SUCCESS) {
            size_t first = (a - r->base) / v->prov->granule;
            st = drop(v, r, first, first + size / v->prov->granule);
            ga_cuda_leave(&sc);
        }
    }
    pthread_mutex_unlock(v->lock);
    return st;
}

/* Granules of the range not GRANULE_FREE: those a failed decommit left
 * (committed ones, and any stale one, which is mapped too). */
gpuarena_status_t ga_vmm_mapped(ga_provider_t *p, void *addr, size_t size, size_t *bytes)
{
    ga_vmm_t *v = vmm_of(p);
    uint64_t a = (uint64_t)(uintptr_t)addr;
    pthread_mutex_lock(v->lock);
    ga_vmm_resv_t *r;
    gpuarena_status_t st = check_range(v, a, size, &r);
    if (st == GPUARENA_SUCCESS) {
        size_t g = v->prov->granule, first = (a - r->base) / g, n = 0;
        for (size_t i = first; i < first + size / g; i++)
            n += r->mapped[i] != GRANULE_FREE;
        *bytes = n * g;
    }
    pthread_mutex_unlock(v->lock);
    return st;
}

/* retry_releases where there is something to retry, entering the context
 * for it.  Under the lock. */
static void retry_if_kept(ga_vmm_t *v)
{
    ga_cuda_scope_t sc;
    if ((v->nunreleased || v->nstale) && ga_gpuctx_enter(v->g, &sc) == GPUARENA_SUCCESS) {
        retry_releases(v);
        ga_cuda_leave(&sc);
    }
}

void ga_vmm_tidy(ga_provider_t *p)
{
    ga_vmm_t *v = vmm_of(p);
    pthread_mutex_lock(v->lock);
    retry_if_kept(v);
    pthread_mutex_unlock(v->lock);
}

size_t ga_vmm_kept(ga_provider_t *p)
{
    ga_vmm_t *v = vmm_of(p);
    pthread_mutex_lock(v->lock);
    retry_if_kept(v);
    size_t bytes = ((size_t)v->nunreleased + v->nstale) * v->prov->granule;
    pthread_mutex_unlock(v->lock);
    return bytes;
}

void ga_vmm_fini(ga_vmm_t *v)
{
    pthread_mutex_lock(v->lock);
    /* A last try for the handles a failed release kept, and the granules
     * a failed commit left mapped. */
    retry_if_kept(v);
    while (v->resv) {
        ga_vmm_resv_t *r = v->resv;
        v->resv = r->next;
        resv_free(r);
    }
    free(v->unreleased);
    v->unreleased = NULL;
    v->nunreleased = v->cap_unreleased = 0;
    pthread_mutex_unlock(v->lock);
}
