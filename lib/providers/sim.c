/*
 * sim.c - the simulated provider: address space only, no memory.
 *
 * It hands out addresses that are never touched, so that traces of real
 * programs can be replayed at full speed and the block manager tested on
 * any machine.  Events complete after a configurable number of later
 * provider operations (sim_event_delay), so that pending frees and
 * cross-stream rules are exercised.  Growable mode reserves address ranges
 * and commits them in granules, like virtual memory management on a GPU.
 * sim_capacity caps the committed bytes so that out-of-memory paths can be
 * tested.
 */
#include "errors.h"
#include "providers/providers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct sim {
    ga_provider_t base;
    /* Operations so far (every stream lookup ticks).  Stream lookups run
     * outside the block manager's lock, so it is atomic; relaxed is
     * enough: it only has to be a monotonic count, and the events that
     * read it are recorded and queried under the manager's lock. */
    _Atomic uint64_t clock;
    unsigned delay;   /* ticks until a recorded event completes */
    size_t capacity;  /* committed-byte cap (0: none) */
    size_t committed; /* bytes mapped or committed now */
} sim_t;

typedef struct sim_event {
    uint64_t done_at; /* clock value from which the event is complete */
} sim_event_t;

/* One fake address space for every sim arena of the process, so that
 * two arenas never hand out the same address: a pointer of one freed
 * into another is refused as foreign, as real memory would be (with a
 * bump pointer per arena, it freed the other arena's live block).  It
 * starts above the user addresses of 48-bit virtual memory, so that no
 * host arena's pointer is a sim address either.  Never dereferenced.
 *
 * Ranges come in powers of two, aligned to their size, each with room
 * for a granule after it (no two segments adjacent), and one given back
 * (a fixed segment unmapped, a growable one's reservation released)
 * serves the next of its size: a replay makes and destroys an arena per
 * trace arena and run, and a space never given back was used up after
 * 16 million reservations of 1 TiB.  A leaf lock (fork.c). */
#define SIM_VA_START ((uintptr_t)1 << 48)
static pthread_mutex_t va_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t va_next = SIM_VA_START;
static struct {
    uintptr_t *a;
    size_t n, cap;
} va_free[64];

void ga_sim_fork_lock(void)
{
    pthread_mutex_lock(&va_lock);
}

void ga_sim_fork_unlock(void)
{
    pthread_mutex_unlock(&va_lock);
}

/* The size class of a range of SIZE bytes with a granule G after it:
 * log2 of the power of two that holds both; 64 where none does. */
static unsigned va_class(size_t size, size_t g)
{
    if (size > SIZE_MAX - g)
        return 64;
    size_t need = size + g;
    return need <= 1 ? 0 : 64u - (unsigned)__builtin_clzll((unsigned long long)(need - 1));
}

static gpuarena_status_t take(sim_t *s, size_t size)
{
    if (s->capacity && size > s->capacity - s->committed)
        return ga_error(GPUARENA_ERR_OUT_OF_MEMORY, "sim: capacity of %zu bytes reached",
                        s->capacity);
    s->committed += size;
    return GPUARENA_SUCCESS;
}

/* SIZE bytes of the address space at *BASE, aligned to the arena's
 * granule (a power of two no larger than the range's class). */
static gpuarena_status_t carve(sim_t *s, size_t size, void **base)
{
    unsigned k = va_class(size, s->base.granule);
    uintptr_t len = k < 63 ? (uintptr_t)1 << k : 0, a = 0;
    pthread_mutex_lock(&va_lock);
    if (len && va_free[k].n) {
        a = va_free[k].a[--va_free[k].n];
    } else if (len) {
        uintptr_t up = (va_next + len - 1) & ~(len - 1);
        if (up >= va_next && up <= UINTPTR_MAX - len) {
            a = up;
            va_next = up + len;
        }
    }
    pthread_mutex_unlock(&va_lock);
    if (!a)
        return ga_error(GPUARENA_ERR_OUT_OF_MEMORY,
                        "sim: the process's fake address space has no range of %zu bytes left",
                        size);
    *base = (void *)a;
    return GPUARENA_SUCCESS;
}

/* The range at BASE of SIZE bytes back to the address space, for the
 * next of its class.  Where the list cannot grow (no host memory), the
 * range is left unused: the space is large. */
static void uncarve(sim_t *s, void *base, size_t size)
{
    unsigned k = va_class(size, s->base.granule);
    if (k >= 63)
        return;
    pthread_mutex_lock(&va_lock);
    if (va_free[k].n == va_free[k].cap) {
        size_t cap = va_free[k].cap ? va_free[k].cap * 2 : 16;
        uintptr_t *grown = realloc(va_free[k].a, cap * sizeof *grown);
        if (grown) {
            va_free[k].a = grown;
            va_free[k].cap = cap;
        }
    }
    if (va_free[k].n < va_free[k].cap)
        va_free[k].a[va_free[k].n++] = (uintptr_t)base;
    pthread_mutex_unlock(&va_lock);
}

static gpuarena_status_t sim_map(ga_provider_t *p, size_t size, void **base)
{
    sim_t *s = (sim_t *)p;
    gpuarena_status_t st = take(s, size);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = carve(s, size, base);
    if (st != GPUARENA_SUCCESS) {
        s->committed -= size;
        return st;
    }
    p->live_maps++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_unmap(ga_provider_t *p, void *base, size_t size)
{
    sim_t *s = (sim_t *)p;
    s->committed -= size;
    p->live_maps--;
    uncarve(s, base, size);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_reserve(ga_provider_t *p, size_t size, void **base)
{
    return carve((sim_t *)p, size, base);
}

static gpuarena_status_t sim_release(ga_provider_t *p, void *base, size_t size)
{
    uncarve((sim_t *)p, base, size);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_commit(ga_provider_t *p, void *addr, size_t size)
{
    (void)addr;
    gpuarena_status_t st = take((sim_t *)p, size);
    if (st == GPUARENA_SUCCESS)
        p->live_maps += size / p->granule;
    return st;
}

static gpuarena_status_t sim_decommit(ga_provider_t *p, void *addr, size_t size)
{
    (void)addr;
    ((sim_t *)p)->committed -= size;
    p->live_maps -= size / p->granule;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_stream_id(ga_provider_t *p, gpuarena_stream_t h, uint64_t *id)
{
    atomic_fetch_add_explicit(&((sim_t *)p)->clock, 1, memory_order_relaxed);
    *id = (uint64_t)(uintptr_t)h;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_event_create(ga_provider_t *p, ga_event_t *ev)
{
    (void)p;
    sim_event_t *e = calloc(1, sizeof *e);
    if (!e)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "sim: no memory for an event");
    *ev = e;
    return GPUARENA_SUCCESS;
}

static void sim_event_destroy(ga_provider_t *p, ga_event_t ev)
{
    (void)p;
    free(ev);
}

static gpuarena_status_t sim_event_record(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t h)
{
    (void)h;
    sim_t *s = (sim_t *)p;
    ((sim_event_t *)ev)->done_at = atomic_load_explicit(&s->clock, memory_order_relaxed) + s->delay;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_event_query(ga_provider_t *p, ga_event_t ev)
{
    uint64_t now = atomic_load_explicit(&((sim_t *)p)->clock, memory_order_relaxed);
    return now >= ((sim_event_t *)ev)->done_at ? GPUARENA_SUCCESS : GA_NOT_READY;
}

static gpuarena_status_t sim_event_sync(ga_provider_t *p, ga_event_t ev)
{
    sim_t *s = (sim_t *)p;
    sim_event_t *e = ev;
    uint64_t now = atomic_load_explicit(&s->clock, memory_order_relaxed);
    while (now < e->done_at &&
           !atomic_compare_exchange_weak_explicit(&s->clock, &now, e->done_at, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_sync_all(ga_provider_t *p)
{
    /* Every event recorded is done. */
    atomic_fetch_add_explicit(&((sim_t *)p)->clock, (uint64_t)((sim_t *)p)->delay + 1,
                              memory_order_relaxed);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t sim_stream_wait(ga_provider_t *p, gpuarena_stream_t h, ga_event_t ev)
{
    (void)p, (void)h, (void)ev;
    return GPUARENA_SUCCESS;
}

/* Without sim_capacity the simulated device has no size to say. */
static gpuarena_status_t sim_mem_free(ga_provider_t *p, uint64_t *free_bytes)
{
    sim_t *s = (sim_t *)p;
    if (!s->capacity)
        return GPUARENA_ERR_NOT_SUPPORTED;
    *free_bytes = s->capacity - s->committed;
    return GPUARENA_SUCCESS;
}

static void sim_destroy(ga_provider_t *p)
{
    free(p);
}

static const ga_provider_ops_t sim_ops = {
    .name = "sim",
    .map = sim_map,
    .unmap = sim_unmap,
    .reserve = sim_reserve,
    .release = sim_release,
    .commit = sim_commit,
    .decommit = sim_decommit,
    .stream_id = sim_stream_id,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .stream_wait = sim_stream_wait,
    .sync_all = sim_sync_all,
    .mem_free = sim_mem_free,
    .destroy = sim_destroy,
};

gpuarena_status_t ga_sim_provider_create(const ga_settings_t *set, ga_provider_t **out)
{
    sim_t *s = calloc(1, sizeof *s);
    if (!s)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "sim: no memory for the provider");
    s->base.ops = &sim_ops;
    s->base.granule = set->granule ? set->granule : (size_t)2 << 20;
    s->base.va_size = (size_t)1 << 40;
    s->base.growable = set->expandable;
    s->delay = set->sim_event_delay;
    s->capacity = set->sim_capacity;
    *out = &s->base;
    return GPUARENA_SUCCESS;
}
