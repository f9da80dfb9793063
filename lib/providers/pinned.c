/*
 * pinned.c - the pinned provider: page-locked host memory placed on the
 * NUMA nodes that the arena's placement chooses (by default the nodes
 * nearest the arena's GPU), for staging copies and MPI buffers.
 *
 * A segment is an anonymous private mapping, bound with hwloc to the
 * placement's nodes before any page is touched (ga_topo_bind), then
 * pre-faulted: every page is written once, by several threads for large
 * segments (key prefault_threads), so that the kernel allocates it on the
 * bound nodes (numa = local: the mapping thread's node, prefault.c);
 * then cuMemHostRegister (PORTABLE | DEVICEMAP) locks and maps it for
 * every context.  Registering touched pages costs about a tenth of
 * registering untouched ones (../shared/notes/cuda-driver.md).
 * Unmapping unregisters, then munmaps.
 *
 * Segments are fixed by default: they are mapped once, reused through the
 * block manager and unpinned only on trim, on max_cached or when the arena
 * is destroyed.
 *
 * With `expandable = true` (false by default for pinned arenas), segments
 * grow like device ones where the driver can: an address reservation
 * whose granules are each a cuMemCreate of PINNED memory at a HOST_NUMA
 * location (the placement's node), mapped with cuMemMap and opened to the
 * host and the arena's GPU by cuMemSetAccess (vmm.c keeps the
 * reservations, as for device.c).  That path is taken when all of these
 * hold, else the arena falls back to the fixed segments above and says
 * why in gpuarena_stats_print ("memory:" line, the `how` of the
 * provider): the placement names exactly one node (numa = nearest with one
 * nearest node, or one explicit node; interleave, several nodes, local and
 * unknown locality cannot be expressed by one HOST_NUMA location); the
 * device attribute HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is set;
 * and a trial granule (reserve, create, map, set access, unmap, release,
 * free) succeeds at creation.  It is not the default because it is slower
 * to pin: about 270 ms/GiB for cuMemCreate HOST_NUMA against 33-36 ms/GiB
 * for binding + touching + registering (../shared/notes/cuda-driver.md);
 * what it buys is memory returned granule by granule on trim and segments
 * that grow in place.  The choice is documented in gpuarena(7).
 *
 * The memory is host-visible (the host uses a block as soon as it has it),
 * so the provider has events like the device provider's, and the block
 * manager reuses a freed block only once an event recorded on the free's
 * stream has completed: an async copy queued before the free is finished
 * before anybody, even the same stream's next allocation, gets the block.
 *
 * Streams, capture and events: the device's primary context, as in
 * device.c (gpuctx.c).  Stream capture is refused by stream_check.
 */
#include "errors.h"
#include "providers/gpu.h"
#include "providers/gpuctx.h"
#include "providers/vmm.h"
#include "topo/topo.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

typedef struct pinned {
    ga_provider_t base;
    ga_gpuctx_t g;
    ga_vmm_t vmm; /* growable segments, expandable (laid out as ga_vmm_provider_t) */
    ga_placement_t placement;
    _Atomic uint64_t unbound;  /* segments the system refused to bind */
    unsigned prefault_threads; /* 0: automatic */
    size_t page;
    pthread_mutex_t lock;           /* live_maps and the reservations */
    int node;                       /* their host NUMA node */
    int access[GA_CUDA_MAX_ACCESS]; /* GPUs that may reach them: its own first, then the others */
    int access_count;
    char access_note[200]; /* which GPUs the growable segments are opened to */
    char how[320];         /* base.how: the path taken, and why */
} pinned_t;

_Static_assert(offsetof(pinned_t, vmm) == offsetof(ga_vmm_provider_t, vmm),
               "pinned_t is laid out as ga_vmm_provider_t");

#define PIN(p) ((pinned_t *)(p))

/* ---------------------------------------------------------------------- */
/* Pre-faulting (ga_topo_prefault). */

/* Threads for a segment of SIZE bytes: the setting, or one per 256 MiB up
 * to 16, never more than the online CPUs. */
static unsigned thread_count(const pinned_t *pn, size_t size)
{
    unsigned n = pn->prefault_threads;
    if (n == 0) {
        size_t k = size / (256 * MiB);
        n = k > 16 ? 16 : (unsigned)(k ? k : 1);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && n > (unsigned long)cpus)
        n = (unsigned)cpus;
    return n ? n : 1;
}

/* ---------------------------------------------------------------------- */
/* Segments. */

static gpuarena_status_t pin_map(ga_provider_t *p, size_t size, void **base)
{
    pinned_t *pn = PIN(p);
    void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
        int e = errno;
        return ga_error(e == ENOMEM ? GPUARENA_ERR_OUT_OF_MEMORY : GPUARENA_ERR_SYSTEM,
                        "pinned: mmap of %zu bytes failed: %s", size, strerror(e));
    }
    bool unbound;
    gpuarena_status_t st = ga_topo_bind(&pn->placement, a, size, &unbound);
    if (st != GPUARENA_SUCCESS) {
        munmap(a, size);
        return st;
    }
    /* Helper threads may touch only a bound range: an unbound one would
     * get pages from every node they run on.  The mapping thread alone
     * puts them on its own node, as a first touch does. */
    ga_topo_prefault(&pn->placement, a, size, pn->page, unbound ? 1 : thread_count(pn, size));
    ga_cuda_scope_t sc;
    st = ga_gpuctx_enter(&pn->g, &sc);
    if (st == GPUARENA_SUCCESS) {
        st = ga_cuda_host_register(a, size, true);
        ga_cuda_leave(&sc);
    }
    if (st != GPUARENA_SUCCESS) {
        munmap(a, size);
        return st;
    }
    /* Counted once the segment is made: one whose registration failed
     * is no segment (numa_unbound counted it). */
    atomic_fetch_add_explicit(&pn->unbound, unbound, memory_order_relaxed);
    pthread_mutex_lock(&pn->lock);
    p->live_maps++;
    pthread_mutex_unlock(&pn->lock);
    *base = a;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t pin_unmap(ga_provider_t *p, void *base, size_t size)
{
    pinned_t *pn = PIN(p);
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_gpuctx_enter(&pn->g, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_host_unregister(base);
    ga_cuda_leave(&sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (munmap(base, size) != 0)
        return ga_error(GPUARENA_ERR_SYSTEM, "pinned: munmap of %zu bytes failed: %s", size,
                        strerror(errno));
    pthread_mutex_lock(&pn->lock);
    p->live_maps--;
    pthread_mutex_unlock(&pn->lock);
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Growable segments (expandable): host memory through cuMemCreate. */

static gpuarena_status_t create_map(void *owner, uint64_t va, size_t size, uint64_t *handle)
{
    pinned_t *pn = owner;
    return ga_cuda_vmm_host_create_map(pn->node, va, size, handle);
}

static gpuarena_status_t set_access(void *owner, uint64_t va, size_t size)
{
    pinned_t *pn = owner;
    return ga_cuda_vmm_host_set_access(va, size, pn->access, pn->access_count);
}

/* The placement's one node, or -1 when it names none or several. */
static int single_node(const ga_placement_t *pl)
{
    if (pl->fallback || pl->policy == GA_NUMA_LOCAL || pl->policy == GA_NUMA_INTERLEAVE)
        return -1;
    uint64_t n = pl->nodes;
    if (n == 0 || (n & (n - 1)) != 0)
        return -1;
    int i = 0;
    while (!(n >> i & 1))
        i++;
    return i;
}

/* One granule reserved, created, mapped, opened to the GPUs of
 * pn->access, then given back: the driver's word that the path works
 * here.  The context is current. */
static gpuarena_status_t trial(pinned_t *pn, size_t g)
{
    uint64_t va = 0, h = 0;
    gpuarena_status_t st = ga_cuda_vmm_reserve(g, g, &va);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = ga_cuda_vmm_host_create_map(pn->node, va, g, &h);
    if (st == GPUARENA_SUCCESS) {
        gpuarena_status_t a = ga_cuda_vmm_host_set_access(va, g, pn->access, pn->access_count);
        st = ga_cuda_vmm_unmap_release(va, g, h);
        if (a != GPUARENA_SUCCESS)
            st = a;
    }
    gpuarena_status_t f = ga_cuda_vmm_free(va, g);
    return st != GPUARENA_SUCCESS ? st : f;
}

/* Memory made with cuMemCreate is mapped only for the GPUs it is opened
 * to, where the fixed path's cuMemHostRegister memory (portable,
 * device-mapped) is every context's: a kernel of another GPU could not
 * touch a growable pinned block.  (Copies by another GPU's context
 * worked without it on two H200s, unlike those of device memory.)  So the
 * granules are opened to every GPU when the driver takes that (a second
 * trial), else to the arena's own GPU alone, as the stats' memory line
 * says.  The context is current. */
static void others(pinned_t *pn, size_t g)
{
    int n = 0;
    snprintf(pn->access_note, sizeof pn->access_note, "opened to its GPU only");
    if (ga_cuda_device_count(&n) != GPUARENA_SUCCESS || n < 2)
        return;
    int own = pn->access_count;
    for (int d = 0; d < n && pn->access_count < GA_CUDA_MAX_ACCESS; d++)
        if (d != pn->g.ordinal)
            pn->access[pn->access_count++] = d;
    if (trial(pn, g) == GPUARENA_SUCCESS) {
        snprintf(pn->access_note, sizeof pn->access_note, "opened to all %d GPUs",
                 pn->access_count);
        return;
    }
    snprintf(pn->access_note, sizeof pn->access_note,
             "opened to its GPU only (the other GPUs refused: %.150s)", gpuarena_last_error());
    pn->access_count = own; /* no error: choose() puts the message back */
}

/* Take the growable path when the settings ask for it and it works here;
 * else keep the fixed segments and put why in pn->how.  Every failure of
 * detection is a fallback, never an error of gpuarena_create. */
static void choose(pinned_t *pn, const ga_settings_t *s)
{
    snprintf(pn->how, sizeof pn->how, "cuMemHostRegister of bound, pre-faulted mappings%s",
             s->expandable ? "" : " (expandable = false)");
    if (!s->expandable)
        return;
    /* The thread's message as it was: a fallback is no failure of the
     * caller's (it was cleared, losing an earlier failure's message). */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    const char *why = NULL;
    char buf[200];
    pn->node = single_node(&pn->placement);
    ga_cuda_scope_t sc;
    size_t g = 0;
    int sup = 0;
    if (pn->node < 0) {
        why = "the NUMA placement names no single node";
    } else if (ga_gpuctx_enter(&pn->g, &sc) != GPUARENA_SUCCESS) {
        why = "the context cannot be made current";
    } else {
        if (ga_cuda_device_attr(pn->g.ordinal, GA_CUDA_ATTR_HOST_NUMA_VMM_SUPPORTED, &sup) !=
                GPUARENA_SUCCESS ||
            !sup)
            why = "the device has no HOST_NUMA virtual memory management";
        else if (ga_cuda_vmm_host_granularity(pn->node, true, &g) != GPUARENA_SUCCESS || g == 0)
            why = "no HOST_NUMA allocation granularity";
        else if (trial(pn, g) != GPUARENA_SUCCESS) {
            snprintf(buf, sizeof buf, "a trial granule failed: %s", gpuarena_last_error());
            why = buf;
        } else {
            others(pn, g);
        }
        ga_cuda_leave(&sc);
    }
    if (why) {
        /* A fallback, not an error: the arena works, in fixed segments. */
        ga_error_restore(&saved);
        snprintf(pn->how, sizeof pn->how,
                 "cuMemHostRegister of bound, pre-faulted mappings (expandable: %s)", why);
        return;
    }
    size_t want = pn->base.granule;
    pn->base.granule = want > g ? (want + g - 1) / g * g : g;
    /* Twice the host's memory, in whole GiB and granules, as device.c. */
    uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * pn->page;
    uint64_t va = ((2 * ram + ((uint64_t)1 << 30) - 1) >> 30) << 30;
    if (va == 0)
        va = (uint64_t)1 << 30;
    pn->base.va_size = (size_t)((va + pn->base.granule - 1) / pn->base.granule * pn->base.granule);
    pn->base.growable = true;
    snprintf(pn->how, sizeof pn->how,
             "cuMemCreate on host NUMA node %d, growable in %zu KiB granules, %s", pn->node,
             pn->base.granule >> 10, pn->access_note);
    ga_error_restore(&saved); /* a refusal of others() */
}

/* The host uses pinned blocks: zero them on the host, at once (the block
 * manager hands a block out only when the GPU is done with it). */
static gpuarena_status_t pin_memzero(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    (void)p, (void)s;
    memset(ptr, 0, size);
    return GPUARENA_SUCCESS;
}

static void pin_stats(ga_provider_t *p, gpuarena_stats_t *st)
{
    pinned_t *pn = PIN(p);
    st->numa_nodes = pn->placement.placed;
    st->numa_fallbacks = pn->placement.fallback;
    st->numa_unbound = atomic_load_explicit(&pn->unbound, memory_order_relaxed);
}

static void pin_destroy(ga_provider_t *p)
{
    pinned_t *pn = PIN(p);
    ga_vmm_fini(&pn->vmm);
    ga_gpuctx_fini(&pn->g);
    pthread_mutex_destroy(&pn->lock);
    free(pn);
}

static const ga_provider_ops_t pinned_ops = {
    .name = "pinned",
    .map = pin_map,
    .unmap = pin_unmap,
    GA_VMM_OPS,
    GA_GPUCTX_OPS,
    .stream_idle = ga_gpuctx_stream_idle,
    .memzero = pin_memzero,
    .stats = pin_stats,
    .destroy = pin_destroy,
};

gpuarena_status_t ga_pinned_provider_create(int device, const ga_settings_t *s, ga_provider_t **out)
{
    pinned_t *pn = calloc(1, sizeof *pn);
    if (!pn)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "pinned: no memory for the provider");
    gpuarena_status_t st = ga_gpuctx_init(&pn->g, device);
    if (st != GPUARENA_SUCCESS) {
        free(pn);
        return st;
    }
    int reg = 1;
    st = ga_cuda_device_attr(device, GA_CUDA_ATTR_HOST_REGISTER_SUPPORTED, &reg);
    if (st == GPUARENA_SUCCESS && !reg)
        st = ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                      "pinned: device %d does not support cuMemHostRegister", device);
    if (st == GPUARENA_SUCCESS)
        st = ga_topo_placement(s, device, &pn->placement);
    if (st != GPUARENA_SUCCESS) {
        ga_gpuctx_fini(&pn->g);
        free(pn);
        return st;
    }
    pn->page = (size_t)sysconf(_SC_PAGESIZE);
    pn->prefault_threads = s->prefault_threads;
    pn->access[0] = device;
    pn->access_count = 1;
    pn->base.ops = &pinned_ops;
    /* 2 MiB: whole transparent huge pages, and the size of the small
     * segments; a larger granule setting is honoured. */
    size_t g = 2 * MiB;
    if (s->granule > g)
        g = (s->granule + g - 1) / g * g;
    pn->base.granule = g;
    pn->base.growable = false;
    pn->base.host_visible = true;
    pthread_mutex_init(&pn->lock, NULL);
    pn->vmm = (ga_vmm_t){.prov = &pn->base,
                         .g = &pn->g,
                         .lock = &pn->lock,
                         .who = "pinned",
                         .owner = pn,
                         .create_map = create_map,
                         .set_access = set_access};
    choose(pn, s);
    pn->base.how = pn->how;
    *out = &pn->base;
    return GPUARENA_SUCCESS;
}
