/*
 * host.c - the host provider: pageable host memory from mmap, bound to NUMA
 * nodes by the topology room before the first touch.  It needs no GPU.
 *
 * Segments are growable: a reservation is an inaccessible anonymous
 * mapping, and commit/decommit turn granules of it into read-write memory
 * (bound, then usable) and back (pages given back to the kernel).  No GPU
 * uses host arena memory, so frees complete at once: the provider has no
 * events, and every free block is reusable by every stream.
 */
#include "errors.h"
#include "providers/providers.h"
#include "topo/topo.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct host {
    ga_provider_t base;
    ga_placement_t placement;
    uint64_t nodes_used;
    _Atomic uint64_t unbound; /* maps and commits left unbound (ga_topo_bind); read by stats
                                 without the manager's lock */
} host_t;

static gpuarena_status_t os_error(const char *call, size_t size)
{
    int e = errno;
    return ga_error(e == ENOMEM ? GPUARENA_ERR_OUT_OF_MEMORY : GPUARENA_ERR_SYSTEM,
                    "host: %s of %zu bytes failed: %s", call, size, strerror(e));
}

static gpuarena_status_t host_map(ga_provider_t *p, size_t size, void **base)
{
    host_t *h = (host_t *)p;
    void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return os_error("mmap", size);
    bool unbound;
    gpuarena_status_t st = ga_topo_bind(&h->placement, a, size, &unbound);
    if (st != GPUARENA_SUCCESS) {
        munmap(a, size);
        return st;
    }
    atomic_fetch_add_explicit(&h->unbound, unbound, memory_order_relaxed);
    *base = a;
    p->live_maps++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_unmap(ga_provider_t *p, void *base, size_t size)
{
    if (munmap(base, size) != 0)
        return os_error("munmap", size);
    p->live_maps--;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_reserve(ga_provider_t *p, size_t size, void **base)
{
    /* Address space is not always plentiful (an address-space rlimit,
     * valgrind): halve the range until it fits, down to 16 granules (at
     * 1 GiB, a limit of 900 MB left the arena serving nothing), and say
     * what was had through va_size. */
    for (;;) {
        /* mmap aligns to pages only: take a granule more, keep the aligned
         * part (blocks and holes are granule aligned). */
        size_t g = p->granule;
        void *a =
            mmap(NULL, size + g, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a != MAP_FAILED) {
            uintptr_t lo = (uintptr_t)a, al = (lo + g - 1) & ~(uintptr_t)(g - 1);
            if (al > lo)
                munmap(a, al - lo);
            if (al + size < lo + size + g)
                munmap((void *)(al + size), lo + size + g - (al + size));
            p->va_size = size;
            *base = (void *)al;
            return GPUARENA_SUCCESS;
        }
        if ((errno != ENOMEM && errno != EINVAL) || size / 2 < 16 * g)
            return os_error("mmap (reserve)", size);
        size /= 2;
    }
}

static gpuarena_status_t host_release(ga_provider_t *p, void *base, size_t size)
{
    (void)p;
    if (munmap(base, size) != 0)
        return os_error("munmap (release)", size);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_commit(ga_provider_t *p, void *addr, size_t size)
{
    host_t *h = (host_t *)p;
    if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0)
        return os_error("mprotect", size);
    bool unbound;
    gpuarena_status_t st = ga_topo_bind(&h->placement, addr, size, &unbound);
    if (st != GPUARENA_SUCCESS) {
        mprotect(addr, size, PROT_NONE);
        return st;
    }
    atomic_fetch_add_explicit(&h->unbound, unbound, memory_order_relaxed);
    p->live_maps += size / p->granule;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_decommit(ga_provider_t *p, void *addr, size_t size)
{
    /* MADV_DONTNEED gives the pages back; PROT_NONE catches stray use. */
    if (madvise(addr, size, MADV_DONTNEED) != 0 || mprotect(addr, size, PROT_NONE) != 0)
        return os_error("madvise/mprotect (decommit)", size);
    p->live_maps -= size / p->granule;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_stream_id(ga_provider_t *p, gpuarena_stream_t h, uint64_t *id)
{
    (void)p;
    *id = (uint64_t)(uintptr_t)h;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t host_memzero(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    (void)p, (void)s;
    memset(ptr, 0, size);
    return GPUARENA_SUCCESS;
}

static void host_stats(ga_provider_t *p, gpuarena_stats_t *st)
{
    host_t *h = (host_t *)p;
    st->numa_nodes = h->placement.placed;
    st->numa_fallbacks = h->placement.fallback;
    st->numa_unbound = atomic_load_explicit(&h->unbound, memory_order_relaxed);
}

static void host_destroy(ga_provider_t *p)
{
    free(p);
}

static const ga_provider_ops_t host_ops = {
    .name = "host",
    .map = host_map,
    .unmap = host_unmap,
    .reserve = host_reserve,
    .release = host_release,
    .commit = host_commit,
    .decommit = host_decommit,
    .stream_id = host_stream_id,
    .memzero = host_memzero,
    .stats = host_stats,
    .destroy = host_destroy,
};

gpuarena_status_t ga_host_provider_create(const ga_settings_t *set, ga_provider_t **out)
{
    host_t *h = calloc(1, sizeof *h);
    if (!h)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "host: no memory for the provider");
    gpuarena_status_t st = ga_topo_placement(set, -1, &h->placement);
    if (st != GPUARENA_SUCCESS) {
        free(h);
        return st;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    h->base.ops = &host_ops;
    h->base.granule = set->granule ? set->granule : (size_t)2 << 20;
    if (h->base.granule % page)
        h->base.granule = (h->base.granule + page - 1) / page * page;
    /* Twice the machine's memory: more than one arena could ever map. */
    size_t phys = (size_t)sysconf(_SC_PHYS_PAGES) * page;
    size_t va = (size_t)1 << 30;
    while (va < 2 * phys && va < ((size_t)1 << 46))
        va *= 2;
    /* At least one granule (both are powers of two): a range smaller than
     * the granule held no granule, served nothing, and read as corrupt
     * to gpuarena_check. */
    if (va < h->base.granule)
        va = h->base.granule;
    h->base.va_size = va;
    h->base.growable = set->expandable;
    h->base.host_visible = true;
    *out = &h->base;
    return GPUARENA_SUCCESS;
}
