/*
 * faulty.c - the fault-injecting provider of faulty.h (built only with
 * ./configure --enable-fault-injection, for tests).
 *
 * A wrapper has an ops table of its own with an entry wherever the real
 * provider has one, so that the block manager sees the same optional
 * features (events or none, growable or not).  Each entry counts the call,
 * decides whether it fails, and otherwise forwards it; afterwards the
 * fields the block manager reads (live_maps, va_size) are copied from the
 * real provider.  The wrapper also keeps what a leak check needs that the
 * provider interface does not say: live reservations and live events.
 */
#include "config.h"

#include "providers/faulty.h"

#include "errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const class_names[GA_FAULT_CLASSES] = {
    "map",      "unmap",        "reserve",      "release",     "commit",      "decommit",
    "stream",   "event_create", "event_record", "event_query", "event_sync",  "stream_wait",
    "sync_all", "memzero",      "advise",       "prefetch",    "stream_idle",
};

/* The plan and the counters: process-wide, atomics read relaxed (a test
 * sets the plan while no arena call is under way). */
static struct {
    _Atomic uint64_t at, count, threshold, seed;
    _Atomic unsigned mask;
    _Atomic uint64_t calls, per_class[GA_FAULT_CLASSES], injected, last_injected;
    _Atomic int last_class;
    _Atomic uint64_t leaked_maps, leaked_reserves, leaked_events;
} plan = {.count = 1, .seed = 1, .mask = GA_FAULT_ALL, .last_class = -1};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char env_error[256]; /* set when a variable is bad */
static char planted[64];

typedef struct faulty {
    ga_provider_t base;
    ga_provider_ops_t ops;
    ga_provider_t *in;
    uint64_t reserves; /* reservations live now */
    _Atomic uint64_t events;
} faulty_t;

#define F(p)  ((faulty_t *)(p))
#define IN(p) (F(p)->in)

/* ---- The plan ---------------------------------------------------------- */

static uint64_t threshold_of(double rate)
{
    if (!(rate > 0))
        return 0;
    if (rate >= 1)
        return UINT64_MAX;
    double t = rate * 18446744073709551616.0;
    return t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t;
}

static void read_env(void);

static void set_plan(uint64_t at, uint64_t count, double rate, uint64_t seed, unsigned mask)
{
    atomic_store_explicit(&plan.at, at, memory_order_relaxed);
    atomic_store_explicit(&plan.count, count, memory_order_relaxed);
    atomic_store_explicit(&plan.threshold, threshold_of(rate), memory_order_relaxed);
    atomic_store_explicit(&plan.seed, seed, memory_order_relaxed);
    atomic_store_explicit(&plan.mask, mask & GA_FAULT_ALL, memory_order_relaxed);
    atomic_store_explicit(&plan.calls, 0, memory_order_relaxed);
    for (int i = 0; i < GA_FAULT_CLASSES; i++)
        atomic_store_explicit(&plan.per_class[i], 0, memory_order_relaxed);
    atomic_store_explicit(&plan.injected, 0, memory_order_relaxed);
    atomic_store_explicit(&plan.last_injected, 0, memory_order_relaxed);
    atomic_store_explicit(&plan.last_class, -1, memory_order_relaxed);
    atomic_store_explicit(&plan.leaked_maps, 0, memory_order_relaxed);
    atomic_store_explicit(&plan.leaked_reserves, 0, memory_order_relaxed);
    atomic_store_explicit(&plan.leaked_events, 0, memory_order_relaxed);
}

void ga_fault_plan(uint64_t at, uint64_t count, double rate, uint64_t seed, unsigned mask)
{
    pthread_once(&env_once, read_env); /* the environment never overrides a test's plan */
    set_plan(at, count, rate, seed, mask);
}

void ga_fault_counts(ga_fault_counts_t *out)
{
    memset(out, 0, sizeof *out);
    out->calls = atomic_load_explicit(&plan.calls, memory_order_relaxed);
    for (int i = 0; i < GA_FAULT_CLASSES; i++)
        out->per_class[i] = atomic_load_explicit(&plan.per_class[i], memory_order_relaxed);
    out->injected = atomic_load_explicit(&plan.injected, memory_order_relaxed);
    out->last_injected = atomic_load_explicit(&plan.last_injected, memory_order_relaxed);
    out->last_class = atomic_load_explicit(&plan.last_class, memory_order_relaxed);
    out->leaked_maps = atomic_load_explicit(&plan.leaked_maps, memory_order_relaxed);
    out->leaked_reserves = atomic_load_explicit(&plan.leaked_reserves, memory_order_relaxed);
    out->leaked_events = atomic_load_explicit(&plan.leaked_events, memory_order_relaxed);
}

const char *ga_fault_class_name(int cls)
{
    return cls >= 0 && cls < GA_FAULT_CLASSES ? class_names[cls] : "?";
}

bool ga_fault_planted(const char *what)
{
    pthread_once(&env_once, read_env);
    return planted[0] && strcmp(planted, what) == 0;
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        return false;
    *v = x;
    return true;
}

static void read_env(void)
{
    uint64_t at = 0, count = 1, seed = 1;
    double rate = 0;
    unsigned mask = GA_FAULT_ALL;
    const char *v;
    if ((v = getenv("GPUARENA_FAULT_AT")) && *v && !parse_u64(v, &at)) {
        snprintf(env_error, sizeof env_error, "GPUARENA_FAULT_AT=%s: expected a call number", v);
        return;
    }
    if ((v = getenv("GPUARENA_FAULT_COUNT")) && *v && !parse_u64(v, &count)) {
        snprintf(env_error, sizeof env_error, "GPUARENA_FAULT_COUNT=%s: expected a count", v);
        return;
    }
    if ((v = getenv("GPUARENA_FAULT_SEED")) && *v && !parse_u64(v, &seed)) {
        snprintf(env_error, sizeof env_error, "GPUARENA_FAULT_SEED=%s: expected a number", v);
        return;
    }
    if ((v = getenv("GPUARENA_FAULT_RATE")) && *v) {
        char *end;
        errno = 0;
        rate = strtod(v, &end);
        if (errno || end == v || *end || !(rate >= 0 && rate <= 1)) {
            snprintf(env_error, sizeof env_error,
                     "GPUARENA_FAULT_RATE=%s: expected a probability from 0 to 1", v);
            return;
        }
    }
    if ((v = getenv("GPUARENA_FAULT_OPS")) && *v) {
        mask = 0;
        for (const char *s = v; *s;) {
            size_t n = strcspn(s, ",");
            int c;
            for (c = 0; c < GA_FAULT_CLASSES; c++)
                if (strlen(class_names[c]) == n && strncmp(s, class_names[c], n) == 0)
                    break;
            if (c == GA_FAULT_CLASSES) {
                snprintf(env_error, sizeof env_error,
                         "GPUARENA_FAULT_OPS: unknown class '%.*s' (map, unmap, reserve, "
                         "release, commit, decommit, stream, event_create, event_record, "
                         "event_query, event_sync, stream_wait, sync_all, memzero, advise, "
                         "prefetch, stream_idle)",
                         (int)(n < 32 ? n : 32), s);
                return;
            }
            mask |= 1u << c;
            s += n;
            if (*s == ',')
                s++;
        }
    }
    if ((v = getenv("GPUARENA_FAULT_PLANT")) && *v)
        snprintf(planted, sizeof planted, "%s", v);
    set_plan(at, count, rate, seed, mask);
}

/* splitmix64: the draw of call N under SEED. */
static uint64_t draw(uint64_t seed, uint64_t n)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + n * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Count a call of class CLS; its failure status, or GPUARENA_SUCCESS to
 * go ahead. */
static gpuarena_status_t fault(ga_provider_t *p, int cls, gpuarena_status_t status)
{
    if (!(atomic_load_explicit(&plan.mask, memory_order_relaxed) >> cls & 1))
        return GPUARENA_SUCCESS;
    uint64_t n = atomic_fetch_add_explicit(&plan.calls, 1, memory_order_relaxed) + 1;
    atomic_fetch_add_explicit(&plan.per_class[cls], 1, memory_order_relaxed);
    uint64_t at = atomic_load_explicit(&plan.at, memory_order_relaxed);
    uint64_t count = atomic_load_explicit(&plan.count, memory_order_relaxed);
    uint64_t thr = atomic_load_explicit(&plan.threshold, memory_order_relaxed);
    bool hit = at && n >= at && (count == 0 || n - at < count);
    if (!hit && thr)
        hit = thr == UINT64_MAX ||
              draw(atomic_load_explicit(&plan.seed, memory_order_relaxed), n) < thr;
    if (!hit)
        return GPUARENA_SUCCESS;
    atomic_fetch_add_explicit(&plan.injected, 1, memory_order_relaxed);
    atomic_store_explicit(&plan.last_injected, n, memory_order_relaxed);
    atomic_store_explicit(&plan.last_class, cls, memory_order_relaxed);
    return ga_error(status, "%s: %s failed: fault injected at provider call %llu", IN(p)->ops->name,
                    class_names[cls], (unsigned long long)n);
}

/* After a forwarded call: what the block manager reads of the provider. */
static void sync_fields(ga_provider_t *p)
{
    p->live_maps = IN(p)->live_maps;
    p->va_size = IN(p)->va_size;
    p->how = IN(p)->how; /* a provider may point it at a new line (device.c, ipc) */
}

/* ---- The wrapped entries ----------------------------------------------- */

#define OOM GPUARENA_ERR_OUT_OF_MEMORY
#define DRV GPUARENA_ERR_DRIVER

static gpuarena_status_t w_map(ga_provider_t *p, size_t size, void **base)
{
    gpuarena_status_t st = fault(p, GA_FAULT_MAP, OOM);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->map(IN(p), size, base);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_unmap(ga_provider_t *p, void *base, size_t size)
{
    gpuarena_status_t st = fault(p, GA_FAULT_UNMAP, DRV);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->unmap(IN(p), base, size);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_reserve(ga_provider_t *p, size_t size, void **base)
{
    gpuarena_status_t st = fault(p, GA_FAULT_RESERVE, OOM);
    if (st == GPUARENA_SUCCESS) {
        IN(p)->va_size = p->va_size;
        st = IN(p)->ops->reserve(IN(p), size, base);
        if (st == GPUARENA_SUCCESS)
            F(p)->reserves++;
    }
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_release(ga_provider_t *p, void *base, size_t size)
{
    gpuarena_status_t st = fault(p, GA_FAULT_RELEASE, DRV);
    if (st == GPUARENA_SUCCESS) {
        st = IN(p)->ops->release(IN(p), base, size);
        if (st == GPUARENA_SUCCESS)
            F(p)->reserves--;
    }
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_commit(ga_provider_t *p, void *addr, size_t size)
{
    gpuarena_status_t st = fault(p, GA_FAULT_COMMIT, OOM);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->commit(IN(p), addr, size);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_decommit(ga_provider_t *p, void *addr, size_t size)
{
    gpuarena_status_t st = fault(p, GA_FAULT_DECOMMIT, DRV);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->decommit(IN(p), addr, size);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_stream_id(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id)
{
    gpuarena_status_t st = fault(p, GA_FAULT_STREAM, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->stream_id(IN(p), s, id) : st;
}

static gpuarena_status_t w_stream_check(ga_provider_t *p, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_STREAM, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->stream_check(IN(p), s) : st;
}

static gpuarena_status_t w_stream_resolve(ga_provider_t *p, gpuarena_stream_t s, bool defer,
                                          uint64_t *id)
{
    /* Two calls in one: either may be the one that fails. */
    gpuarena_status_t st = fault(p, GA_FAULT_STREAM, DRV);
    if (st == GPUARENA_SUCCESS)
        st = fault(p, GA_FAULT_STREAM, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->stream_resolve(IN(p), s, defer, id) : st;
}

static void w_name_by_handle(ga_provider_t *p)
{
    IN(p)->ops->name_by_handle(IN(p));
}

static gpuarena_status_t w_event_create(ga_provider_t *p, ga_event_t *ev)
{
    gpuarena_status_t st = fault(p, GA_FAULT_EVENT_CREATE, DRV);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->event_create(IN(p), ev);
    if (st == GPUARENA_SUCCESS)
        atomic_fetch_add_explicit(&F(p)->events, 1, memory_order_relaxed);
    return st;
}

static void w_event_destroy(ga_provider_t *p, ga_event_t ev)
{
    atomic_fetch_sub_explicit(&F(p)->events, 1, memory_order_relaxed);
    IN(p)->ops->event_destroy(IN(p), ev);
}

static gpuarena_status_t w_event_record(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_EVENT_RECORD, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->event_record(IN(p), ev, s) : st;
}

static gpuarena_status_t w_event_query(ga_provider_t *p, ga_event_t ev)
{
    gpuarena_status_t st = fault(p, GA_FAULT_EVENT_QUERY, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->event_query(IN(p), ev) : st;
}

static gpuarena_status_t w_event_sync(ga_provider_t *p, ga_event_t ev)
{
    gpuarena_status_t st = fault(p, GA_FAULT_EVENT_SYNC, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->event_sync(IN(p), ev) : st;
}

static gpuarena_status_t w_stream_wait(ga_provider_t *p, gpuarena_stream_t s, ga_event_t ev)
{
    gpuarena_status_t st = fault(p, GA_FAULT_STREAM_WAIT, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->stream_wait(IN(p), s, ev) : st;
}

static gpuarena_status_t w_sync_all(ga_provider_t *p)
{
    gpuarena_status_t st = fault(p, GA_FAULT_SYNC_ALL, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->sync_all(IN(p)) : st;
}

static gpuarena_status_t w_stream_idle(ga_provider_t *p, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_STREAM_IDLE, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->stream_idle(IN(p), s) : st;
}

static gpuarena_status_t w_memzero(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_MEMZERO, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->memzero(IN(p), ptr, size, s) : st;
}

/* No call to fail: passes through. */
static bool w_stream_id_known(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id)
{
    return IN(p)->ops->stream_id_known(IN(p), s, id);
}

/* The check passes through: a fault of the fill is memzero's. */
static gpuarena_status_t w_memzero_check(ga_provider_t *p, gpuarena_stream_t s)
{
    return IN(p)->ops->memzero_check(IN(p), s);
}

static gpuarena_status_t w_on_alloc(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_ADVISE, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->on_alloc(IN(p), ptr, size, s) : st;
}

static gpuarena_status_t w_prefetch(ga_provider_t *p, void *ptr, size_t size, int dest,
                                    gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_PREFETCH, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->prefetch(IN(p), ptr, size, dest, s) : st;
}

/* A direct provider's blocks count as maps and unmaps, its trims as
 * decommits. */
static gpuarena_status_t w_alloc_async(ga_provider_t *p, size_t size, gpuarena_stream_t s,
                                       void **ptr)
{
    gpuarena_status_t st = fault(p, GA_FAULT_MAP, OOM);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->alloc_async(IN(p), size, s, ptr);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_free_async(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s)
{
    gpuarena_status_t st = fault(p, GA_FAULT_UNMAP, DRV);
    if (st == GPUARENA_SUCCESS)
        st = IN(p)->ops->free_async(IN(p), ptr, size, s);
    sync_fields(p);
    return st;
}

static gpuarena_status_t w_usage(ga_provider_t *p, uint64_t *reserved, uint64_t *used)
{
    return IN(p)->ops->usage(IN(p), reserved, used);
}

static gpuarena_status_t w_trim(ga_provider_t *p, uint64_t keep)
{
    gpuarena_status_t st = fault(p, GA_FAULT_DECOMMIT, DRV);
    return st == GPUARENA_SUCCESS ? IN(p)->ops->trim(IN(p), keep) : st;
}

static void w_tidy(ga_provider_t *p)
{
    IN(p)->ops->tidy(IN(p));
    sync_fields(p);
}

static void w_reset_peaks(ga_provider_t *p)
{
    IN(p)->ops->reset_peaks(IN(p));
}

static void w_stats(ga_provider_t *p, gpuarena_stats_t *st)
{
    IN(p)->ops->stats(IN(p), st);
}

static gpuarena_status_t w_mem_free(ga_provider_t *p, uint64_t *free_bytes)
{
    return IN(p)->ops->mem_free(IN(p), free_bytes);
}

/* What the provider still holds is a leak of whoever destroys it. */
static void w_destroy(ga_provider_t *p)
{
    faulty_t *f = F(p);
    atomic_fetch_add_explicit(&plan.leaked_maps, f->in->live_maps, memory_order_relaxed);
    atomic_fetch_add_explicit(&plan.leaked_reserves, f->reserves, memory_order_relaxed);
    atomic_fetch_add_explicit(&plan.leaked_events,
                              atomic_load_explicit(&f->events, memory_order_relaxed),
                              memory_order_relaxed);
    f->in->ops->destroy(f->in);
    free(f);
}

gpuarena_status_t ga_fault_wrap(ga_provider_t **pp)
{
    pthread_once(&env_once, read_env);
    if (env_error[0])
        return ga_error(GPUARENA_ERR_CONFIG, "fault injection: %s", env_error);
    faulty_t *f = calloc(1, sizeof *f);
    if (!f)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a fault-injection wrapper");
    ga_provider_t *in = *pp;
    const ga_provider_ops_t *o = in->ops;
    f->in = in;
    f->base = *in;
    f->base.ops = &f->ops;
    f->ops.name = o->name;
#define WRAP(field, fn) f->ops.field = o->field ? fn : NULL
    WRAP(map, w_map);
    WRAP(unmap, w_unmap);
    WRAP(reserve, w_reserve);
    WRAP(release, w_release);
    WRAP(commit, w_commit);
    WRAP(decommit, w_decommit);
    WRAP(stream_id, w_stream_id);
    WRAP(stream_check, w_stream_check);
    WRAP(stream_resolve, w_stream_resolve);
    f->ops.name_by_handle = o->name_by_handle ? w_name_by_handle : NULL;
    f->ops.stream_id_known = o->stream_id_known ? w_stream_id_known : NULL;
    WRAP(event_create, w_event_create);
    WRAP(event_destroy, w_event_destroy);
    WRAP(event_record, w_event_record);
    WRAP(event_query, w_event_query);
    WRAP(event_sync, w_event_sync);
    WRAP(stream_wait, w_stream_wait);
    WRAP(sync_all, w_sync_all);
    WRAP(stream_idle, w_stream_idle);
    WRAP(memzero, w_memzero);
    WRAP(memzero_check, w_memzero_check);
    WRAP(on_alloc, w_on_alloc);
    WRAP(prefetch, w_prefetch);
    WRAP(alloc_async, w_alloc_async);
    WRAP(free_async, w_free_async);
    WRAP(usage, w_usage);
    WRAP(trim, w_trim);
    WRAP(tidy, w_tidy);
    WRAP(reset_peaks, w_reset_peaks);
    WRAP(stats, w_stats);
    WRAP(mem_free, w_mem_free);
#undef WRAP
    f->ops.destroy = w_destroy;
    *pp = &f->base;
    return GPUARENA_SUCCESS;
}
