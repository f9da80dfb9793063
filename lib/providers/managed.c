/*
 * managed.c - the managed provider: CUDA managed (unified) memory, paged
 * between host and GPU by the nvidia-uvm driver, with the config's hints
 * turned into cuMemAdvise and cuMemPrefetchAsync calls.
 *
 * Segments are fixed cuMemAllocManaged(ATTACH_GLOBAL) allocations.  Each
 * new segment gets the arena's advice with the CUmemLocation forms of
 * CUDA 12.2 and later: preferred location (advise_preferred: the arena's
 * GPU, the CPU or a host NUMA node), accessed-by (advise_accessed_by: the
 * GPU and/or the CPU), read-mostly (read_mostly).  The advice is unset
 * before the segment is freed.
 *
 * Prefetch: with prefetch = on-alloc every allocation is prefetched to the
 * arena's GPU on the allocation's stream (on_alloc); gpuarena_prefetch()
 * moves a block to a GPU or to the CPU on request (prefetch).  A prefetch
 * to a GPU never asks for more than the GPU has free less
 * prefetch_headroom, and one to the CPU never more than the host has
 * available: such a prefetch is skipped and counted (prefetches_skipped),
 * so that a program that oversubscribes the GPU degrades to fault-driven
 * paging instead of evicting its own working set.  Prefetches are issued
 * in pieces of at most prefetch_chunk bytes (one prefetch larger than the
 * GPU got a process killed by the kernel's OOM killer on a host with less
 * memory than the GPU).
 *
 * UVM awareness: the device attributes that decide what works are read at
 * creation.  Without CONCURRENT_MANAGED_ACCESS the driver cannot prefetch
 * to the GPU nor honour a preferred location on it nor CPU accessed-by
 * advice: such hints become counted no-ops (advice_skipped,
 * prefetches_skipped), never errors.  Advice the driver refuses for
 * another reason (a driver older than 12.2, a host NUMA node it does not
 * know) is skipped and counted the same way.
 *
 * Streams, events and capture as in device.c (gpuctx.c); a prefetch on a
 * capturing stream is refused with GPUARENA_ERR_STREAM_CAPTURE before any
 * call that would break the capture.
 *
 * A prefetch to another GPU asks that GPU's free memory in its primary
 * context, retained at the first such prefetch and kept until the arena
 * is destroyed: retained and released at each one, a context that nothing
 * else held was made and torn down every time (the first retain took
 * 118 ms on the H200).  Whether the other GPU takes prefetches is its own
 * CONCURRENT_MANAGED_ACCESS, read then too.
 */
#include "errors.h"
#include "providers/gpu.h"
#include "providers/gpuctx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

typedef struct managed {
    ga_provider_t base;
    ga_gpuctx_t g;
    ga_prefetch_policy_t prefetch;
    size_t headroom, chunk;
    ga_advise_location_t preferred;
    ga_advise_accessors_t accessed_by;
    bool read_mostly;
    int concurrent; /* CONCURRENT_MANAGED_ACCESS */
    _Atomic uint64_t prefetches, prefetches_skipped, advice_applied, advice_skipped;
    /* Other GPUs prefetched to: their primary contexts, held (see the
     * top), and their CONCURRENT_MANAGED_ACCESS. */
    pthread_mutex_t peers_lock;
    void *peer_ctx[GA_CUDA_MAX_ACCESS];
    int peer_concurrent[GA_CUDA_MAX_ACCESS];
} managed_t;

#define MAN(p) ((managed_t *)(p))

/* ---------------------------------------------------------------------- */
/* Advice. */

/* Apply one piece of advice; a refusal is a counted no-op. */
static void advise(managed_t *m, uint64_t a, size_t size, ga_cuda_advice_t what, int where)
{
    if (ga_cuda_mem_advise(a, size, what, where) == GPUARENA_SUCCESS)
        atomic_fetch_add(&m->advice_applied, 1);
    else
        atomic_fetch_add(&m->advice_skipped, 1);
}

/* The preferred location as a ga_cuda location, or INT32_MIN for none or
 * for a location this device cannot prefer (counted). */
static int preferred_location(managed_t *m)
{
    switch ((int)m->preferred) {
    case GA_ADVISE_NONE:
        return INT32_MIN;
    case GA_ADVISE_DEVICE:
        if (!m->concurrent) {
            atomic_fetch_add(&m->advice_skipped, 1);
            return INT32_MIN;
        }
        return m->g.ordinal;
    case GA_ADVISE_CPU:
        return GPUARENA_CPU;
    default:
        return GA_CUDA_LOCATION_HOST_NUMA((int)m->preferred - GA_ADVISE_NODE0);
    }
}

/* The preferred location, verified: a driver may accept a location it
 * does not keep (a host NUMA node where UVM is not NUMA-aware reads back
 * as no preference); that is counted as skipped, not as applied. */
static void advise_preferred(managed_t *m, uint64_t a, size_t size, int where)
{
    if (ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_PREFERRED_LOCATION, where) != GPUARENA_SUCCESS) {
        atomic_fetch_add(&m->advice_skipped, 1);
        return;
    }
    int want = where == GPUARENA_CPU ? GA_CUDA_LOCTYPE_HOST
               : where >= 0          ? GA_CUDA_LOCTYPE_DEVICE
                                     : GA_CUDA_LOCTYPE_HOST_NUMA;
    int got = GA_CUDA_LOCTYPE_INVALID;
    if (ga_cuda_mem_range_attr(a, size, GA_CUDA_RANGE_PREFERRED_TYPE, &got, 1) ==
            GPUARENA_SUCCESS &&
        got == want) {
        atomic_fetch_add(&m->advice_applied, 1);
        return;
    }
    ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_UNSET_PREFERRED_LOCATION, where);
    atomic_fetch_add(&m->advice_skipped, 1);
}

/* The advice of a new segment (context current). */
static void advise_segment(managed_t *m, uint64_t a, size_t size)
{
    int where = preferred_location(m);
    if (where != INT32_MIN)
        advise_preferred(m, a, size, where);
    if (m->accessed_by & GA_ACCESS_DEVICE)
        advise(m, a, size, GA_CUDA_ADVISE_ACCESSED_BY, m->g.ordinal);
    if (m->accessed_by & GA_ACCESS_CPU) {
        if (m->concurrent)
            advise(m, a, size, GA_CUDA_ADVISE_ACCESSED_BY, GPUARENA_CPU);
        else
            atomic_fetch_add(&m->advice_skipped, 1);
    }
    if (m->read_mostly)
        advise(m, a, size, GA_CUDA_ADVISE_READ_MOSTLY, m->g.ordinal);
}

/* Unset what advise_segment set (context current); failures are of no
 * consequence: the memory is freed next. */
static void unadvise_segment(managed_t *m, uint64_t a, size_t size)
{
    if (m->preferred != GA_ADVISE_NONE)
        (void)ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_UNSET_PREFERRED_LOCATION, m->g.ordinal);
    if (m->accessed_by & GA_ACCESS_DEVICE)
        (void)ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_UNSET_ACCESSED_BY, m->g.ordinal);
    if ((m->accessed_by & GA_ACCESS_CPU) && m->concurrent)
        (void)ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_UNSET_ACCESSED_BY, GPUARENA_CPU);
    if (m->read_mostly)
        (void)ga_cuda_mem_advise(a, size, GA_CUDA_ADVISE_UNSET_READ_MOSTLY, m->g.ordinal);
}

/* ---------------------------------------------------------------------- */
/* Segments. */

static gpuarena_status_t man_map(ga_provider_t *p, size_t size, void **base)
{
    managed_t *m = MAN(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(&m->g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    uint64_t a = 0;
    st = ga_cuda_mem_alloc_managed(size, true, &a);
    if (st == GPUARENA_SUCCESS)
        advise_segment(m, a, size);
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&m->g.lock);
    p->live_maps++;
    pthread_mutex_unlock(&m->g.lock);
    *base = (void *)(uintptr_t)a;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t man_unmap(ga_provider_t *p, void *base, size_t size)
{
    managed_t *m = MAN(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(&m->g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    uint64_t a = (uint64_t)(uintptr_t)base;
    unadvise_segment(m, a, size);
    st = ga_cuda_mem_free(a);
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    pthread_mutex_lock(&m->g.lock);
    p->live_maps--;
    pthread_mutex_unlock(&m->g.lock);
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Prefetch. */

/* Host memory available now: MemAvailable of /proc/meminfo, the free
 * memory plus what the kernel can reclaim without swapping (page cache,
 * reclaimable slab).  Free pages alone (_SC_AVPHYS_PAGES, MemFree) leave
 * out the page cache, which on a node that has read its input files can
 * be most of the memory: every prefetch to the CPU was then skipped.
 * Free pages only where the kernel gives no MemAvailable. */
static size_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (f) {
        char line[128];
        unsigned long long kb;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* GPU DEST's primary context, held by the arena from the first call on,
 * and whether DEST takes prefetches (CONCURRENT). */
static gpuarena_status_t peer(managed_t *m, int dest, void **ctx, int *concurrent)
{
    if (dest < 0 || dest >= GA_CUDA_MAX_ACCESS)
        return ga_error(GPUARENA_ERR_INVALID_DEVICE,
                        "managed: device %d is past the %d gpuarena serves", dest,
                        GA_CUDA_MAX_ACCESS);
    gpuarena_status_t st = GPUARENA_SUCCESS;
    pthread_mutex_lock(&m->peers_lock);
    if (!m->peer_ctx[dest]) {
        int c = 0;
        st = ga_cuda_device_attr(dest, GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, &c);
        void *x = NULL;
        if (st == GPUARENA_SUCCESS)
            st = ga_cuda_primary_retain(dest, &x);
        if (st == GPUARENA_SUCCESS) {
            m->peer_ctx[dest] = x;
            m->peer_concurrent[dest] = c;
        }
    }
    *ctx = m->peer_ctx[dest];
    *concurrent = m->peer_concurrent[dest];
    pthread_mutex_unlock(&m->peers_lock);
    return st;
}

/* Bytes DEST can take now: device free memory less the headroom, or the
 * host's available memory less the same headroom.  PEER_CTX: the primary
 * context of DEST when it is another GPU (peer). */
static gpuarena_status_t room_at(managed_t *m, int dest, void *peer_ctx, size_t *room)
{
    size_t f = 0;
    if (dest == GPUARENA_CPU) {
        f = host_available();
    } else if (dest == m->g.ordinal) {
        gpuarena_status_t st = ga_cuda_mem_info(&f, NULL); /* our context is current */
        if (st != GPUARENA_SUCCESS)
            return st;
    } else {
        ga_cuda_scope_t sc;
        gpuarena_status_t st = ga_cuda_enter(peer_ctx, &sc);
        if (st == GPUARENA_SUCCESS) {
            st = ga_cuda_mem_info(&f, NULL);
            ga_cuda_leave(&sc);
        }
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    *room = f > m->headroom ? f - m->headroom : 0;
    return GPUARENA_SUCCESS;
}

/* Prefetch [PTR, PTR+SIZE) to DEST on S in pieces, or skip it (counted).
 * The context is current.  *ISSUED tells whether it was issued. */
static gpuarena_status_t do_prefetch(managed_t *m, void *ptr, size_t size, int dest,
                                     gpuarena_stream_t s, bool *issued)
{
    *issued = false;
    int takes = m->concurrent;
    void *peer_ctx = NULL;
    if (dest != GPUARENA_CPU && dest != m->g.ordinal) {
        gpuarena_status_t st = peer(m, dest, &peer_ctx, &takes);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    if (dest != GPUARENA_CPU && !takes) {
        atomic_fetch_add(&m->prefetches_skipped, 1);
        return GPUARENA_SUCCESS; /* the device cannot take prefetches */
    }
    size_t room = 0;
    gpuarena_status_t st = room_at(m, dest, peer_ctx, &room);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (size > room) {
        atomic_fetch_add(&m->prefetches_skipped, 1);
        return GPUARENA_SUCCESS;
    }
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    for (size_t off = 0; off < size; off += m->chunk) {
        size_t n = size - off < m->chunk ? size - off : m->chunk;
        st = ga_cuda_mem_prefetch(a + off, n, dest, s);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    atomic_fetch_add(&m->prefetches, 1);
    *issued = true;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t man_prefetch(ga_provider_t *p, void *ptr, size_t size, int dest,
                                      gpuarena_stream_t s)
{
    managed_t *m = MAN(p);
    int n = 0;
    gpuarena_status_t st = ga_cuda_device_count(&n);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (dest != GPUARENA_CPU && (dest < 0 || dest >= n))
        return ga_error(GPUARENA_ERR_INVALID_DEVICE,
                        "gpuarena_prefetch: destination %d is neither GPUARENA_CPU nor one of the "
                        "%d devices",
                        dest, n);
    ga_cuda_scope_t sc;
    st = ga_gpuctx_enter(&m->g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* The stream is checked here: gpuarena_prefetch does not go through
     * the block manager, and a prefetch would break a capture. */
    uint64_t id;
    if (s != GPUARENA_STREAM_HOST) {
        st = ga_cuda_stream_check(s); /* first: no other call on a capturing stream */
        if (st == GPUARENA_SUCCESS)
            st = ga_gpuctx_stream_id(p, s, &id);
    } else {
        st = ga_gpuctx_queue_check(s); /* the legacy stream's, which it goes on */
    }
    bool issued;
    if (st == GPUARENA_SUCCESS)
        st = ga_gpuctx_host_wait(s, do_prefetch(m, ptr, size, dest, ga_gpuctx_queue(s), &issued));
    ga_cuda_leave(&sc);
    return st;
}

/* prefetch = on-alloc: to the arena's GPU on the allocation's stream (the
 * block manager checked the stream).  A prefetch that fails is a hint
 * lost, not a failed allocation: it is counted as skipped. */
static gpuarena_status_t man_on_alloc(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    managed_t *m = MAN(p);
    if (m->prefetch != GA_PREFETCH_ON_ALLOC)
        return GPUARENA_SUCCESS;
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(&m->g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    bool issued = false;
    /* With no stream, during a capture that forbids the legacy stream:
     * the hint is skipped, the block served (it needs no stream). */
    if (ga_gpuctx_queue_check(s) != GPUARENA_SUCCESS) {
        ga_cuda_leave(&sc);
        atomic_fetch_add(&m->prefetches_skipped, 1);
        return GPUARENA_SUCCESS;
    }
    st = ga_gpuctx_host_wait(s,
                             do_prefetch(m, ptr, size, m->g.ordinal, ga_gpuctx_queue(s), &issued));
    ga_cuda_leave(&sc);
    if (st == GPUARENA_ERR_STREAM_CAPTURE || st == GPUARENA_ERR_INVALID_STREAM)
        return st;
    if (st != GPUARENA_SUCCESS)
        atomic_fetch_add(&m->prefetches_skipped, 1);
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Figures and the rest. */

static void man_stats(ga_provider_t *p, gpuarena_stats_t *st)
{
    managed_t *m = MAN(p);
    st->prefetches = atomic_load(&m->prefetches);
    st->prefetches_skipped = atomic_load(&m->prefetches_skipped);
    st->advice_applied = atomic_load(&m->advice_applied);
    st->advice_skipped = atomic_load(&m->advice_skipped);
}

static void man_destroy(ga_provider_t *p)
{
    managed_t *m = MAN(p);
    for (int d = 0; d < GA_CUDA_MAX_ACCESS; d++)
        if (m->peer_ctx[d])
            ga_cuda_primary_release(d);
    pthread_mutex_destroy(&m->peers_lock);
    ga_gpuctx_fini(&m->g);
    free(m);
}

static const ga_provider_ops_t managed_ops = {
    .name = "managed",
    .map = man_map,
    .unmap = man_unmap,
    GA_GPUCTX_OPS,
    .stream_idle = ga_gpuctx_stream_idle,
    .memzero = ga_gpuctx_memzero,
    .memzero_check = ga_gpuctx_memzero_check,
    .on_alloc = man_on_alloc,
    .prefetch = man_prefetch,
    .stats = man_stats,
    /* No mem_free: managed memory oversubscribes the GPU, whose free
     * memory is not what an allocation here ran out of
     * (gpuarena_stats(3): device_free is 0). */
    .destroy = man_destroy,
};

gpuarena_status_t ga_managed_provider_create(int device, const ga_settings_t *s,
                                             ga_provider_t **out)
{
    managed_t *m = calloc(1, sizeof *m);
    if (!m)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "managed: no memory for the provider");
    gpuarena_status_t st = ga_gpuctx_init(&m->g, device);
    if (st != GPUARENA_SUCCESS) {
        free(m);
        return st;
    }
    pthread_mutex_init(&m->peers_lock, NULL);
    int supported = 0;
    st = ga_cuda_device_attr(device, GA_CUDA_ATTR_MANAGED_MEMORY, &supported);
    if (st == GPUARENA_SUCCESS && !supported)
        st = ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                      "managed: device %d does not support managed memory", device);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_device_attr(device, GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, &m->concurrent);
    if (st != GPUARENA_SUCCESS) {
        pthread_mutex_destroy(&m->peers_lock);
        ga_gpuctx_fini(&m->g);
        free(m);
        return st;
    }
    m->prefetch = s->prefetch;
    m->headroom = s->prefetch_headroom;
    m->chunk = s->prefetch_chunk ? s->prefetch_chunk : (size_t)2 << 30;
    m->preferred = s->advise_preferred;
    m->accessed_by = s->advise_accessed_by;
    m->read_mostly = s->read_mostly;
    m->base.ops = &managed_ops;
    /* Managed memory migrates in 2 MiB blocks (uvm); segments are whole
     * blocks. */
    size_t g = 2 * MiB;
    if (s->granule > g)
        g = (s->granule + g - 1) / g * g;
    m->base.granule = g;
    m->base.growable = false;
    /* The host reads and writes managed memory too: a freed block is
     * reused only once the GPU has passed the free (as for pinned). */
    m->base.host_visible = true;
    *out = &m->base;
    return GPUARENA_SUCCESS;
}
