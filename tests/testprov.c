/* testprov.c - the test provider of testprov.h. */
#include "testprov.h"

#include "errors.h"

#include <stdlib.h>

static gpuarena_status_t tick(tp_t *t)
{
    t->calls++;
    if (t->fail_at && t->calls == t->fail_at)
        return ga_error(GPUARENA_ERR_DRIVER, "test: failure injected at provider call %llu",
                        (unsigned long long)t->calls);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t take(tp_t *t, size_t size)
{
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (t->capacity && size > t->capacity - t->committed)
        return GPUARENA_ERR_OUT_OF_MEMORY;
    t->committed += size;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_map(ga_provider_t *p, size_t size, void **base)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = take(t, size);
    if (st != GPUARENA_SUCCESS)
        return st;
    *base = (void *)t->next_va;
    t->next_va += size + p->granule;
    p->live_maps++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_unmap(ga_provider_t *p, void *base, size_t size)
{
    (void)base;
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    t->committed -= size;
    p->live_maps--;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_reserve(ga_provider_t *p, size_t size, void **base)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    *base = (void *)t->next_va;
    t->next_va += size + p->granule;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_release(ga_provider_t *p, void *base, size_t size)
{
    (void)p, (void)base, (void)size;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_commit(ga_provider_t *p, void *addr, size_t size)
{
    (void)addr;
    gpuarena_status_t st = take((tp_t *)p, size);
    if (st == GPUARENA_SUCCESS)
        p->live_maps += size / p->granule;
    return st;
}

static gpuarena_status_t tp_decommit(ga_provider_t *p, void *addr, size_t size)
{
    (void)addr;
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    t->committed -= size;
    p->live_maps -= size / p->granule;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_stream_id(ga_provider_t *p, gpuarena_stream_t h, uint64_t *id)
{
    (void)p;
    *id = (uint64_t)(uintptr_t)h;
    return *id < TP_STREAMS ? GPUARENA_SUCCESS : GPUARENA_ERR_INVALID_STREAM;
}

static bool is_captured(const tp_t *t, gpuarena_stream_t h)
{
    return (uintptr_t)h < TP_STREAMS && (t->capturing >> (uintptr_t)h & 1);
}

/* A call that names stream H: one that is being captured is disturbed. */
static void names(tp_t *t, gpuarena_stream_t h)
{
    t->disturbed += is_captured(t, h);
}

static gpuarena_status_t tp_stream_check(ga_provider_t *p, gpuarena_stream_t h)
{
    tp_t *t = (tp_t *)p;
    t->checks++;
    return is_captured(t, h) ? GPUARENA_ERR_STREAM_CAPTURE : GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_event_create(ga_provider_t *p, ga_event_t *ev)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    tp_event_t *e = t->events_refused ? NULL : calloc(1, sizeof *e);
    if (!e)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "test provider: no memory for an event");
    t->events_live++;
    *ev = e;
    return GPUARENA_SUCCESS;
}

static void tp_event_destroy(ga_provider_t *p, ga_event_t ev)
{
    ((tp_t *)p)->events_live--;
    free(ev);
}

static gpuarena_status_t tp_event_record(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t h)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    names(t, h);
    if ((uintptr_t)h >= TP_STREAMS) {
        t->bad_handles++;
        return GPUARENA_ERR_INVALID_STREAM;
    }
    tp_event_t *e = ev;
    e->stream = (unsigned)(uintptr_t)h;
    e->pos = t->enqueued[e->stream];
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_event_query(ga_provider_t *p, ga_event_t ev)
{
    tp_t *t = (tp_t *)p;
    tp_event_t *e = ev;
    return t->completed[e->stream] >= e->pos ? GPUARENA_SUCCESS : GA_NOT_READY;
}

/* Stream S has completed up to POS: so has what it waited for before. */
static void advance(tp_t *t, unsigned s, uint64_t pos)
{
    if (t->completed[s] < pos)
        t->completed[s] = pos;
    for (unsigned i = 0; i < t->npend[s];) {
        if (t->pend[s][i].at <= t->completed[s]) {
            unsigned on = t->pend[s][i].on;
            uint64_t upto = t->pend[s][i].upto;
            t->pend[s][i] = t->pend[s][--t->npend[s]];
            advance(t, on, upto);
            i = 0;
        } else {
            i++;
        }
    }
}

static void note_wait(tp_t *t, unsigned s, unsigned on, uint64_t upto)
{
    if (t->npend[s] == 256)
        return; /* the model only gets stricter */
    t->pend[s][t->npend[s]].at = t->enqueued[s] + 1;
    t->pend[s][t->npend[s]].on = on;
    t->pend[s][t->npend[s]].upto = upto;
    t->npend[s]++;
}

static gpuarena_status_t tp_event_sync(ga_provider_t *p, ga_event_t ev)
{
    tp_t *t = (tp_t *)p;
    tp_event_t *e = ev;
    advance(t, e->stream, e->pos);
    t->syncs++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_stream_wait(ga_provider_t *p, gpuarena_stream_t h, ga_event_t ev)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    names(t, h);
    if ((uintptr_t)h >= TP_STREAMS) {
        t->bad_handles++;
        return GPUARENA_ERR_INVALID_STREAM;
    }
    tp_event_t *e = ev;
    unsigned s = (unsigned)(uintptr_t)h;
    if (t->waited[s][e->stream] < e->pos)
        t->waited[s][e->stream] = e->pos;
    /* The wait takes the next position of S, as in tp_wait: once S has
     * completed everything enqueued on it (a stream synchronisation),
     * the wait has passed too, and so has E's stream up to E. */
    note_wait(t, s, e->stream, e->pos);
    t->enqueued[s]++;
    /* Waiting is transitive: what E's stream had waited for when E was
     * recorded (the manager records right before it waits) is ordered
     * before S's later work too. */
    for (unsigned k = 0; k < TP_STREAMS; k++)
        if (t->waited[s][k] < t->waited[e->stream][k])
            t->waited[s][k] = t->waited[e->stream][k];
    return GPUARENA_SUCCESS;
}

/* As the driver's cuCtxSynchronize, which no capture mode allows while a
 * stream is being captured: refused, and the capture disturbed. */
static gpuarena_status_t tp_sync_all(ga_provider_t *p)
{
    tp_t *t = (tp_t *)p;
    if (t->capturing) {
        t->disturbed++;
        return ga_error(GPUARENA_ERR_STREAM_CAPTURE, "test: a device wait during a capture");
    }
    for (unsigned s = 0; s < TP_STREAMS; s++)
        advance(t, s, t->enqueued[s]);
    t->syncs++;
    t->device_syncs++;
    return GPUARENA_SUCCESS;
}

/* Used only where the test makes the provider host-visible. */
static gpuarena_status_t tp_stream_idle(ga_provider_t *p, gpuarena_stream_t h)
{
    tp_t *t = (tp_t *)p;
    names(t, h);
    unsigned s = (unsigned)(uintptr_t)h;
    return t->completed[s] >= t->enqueued[s] ? GPUARENA_SUCCESS : GA_NOT_READY;
}

static gpuarena_status_t tp_mem_free(ga_provider_t *p, uint64_t *free_bytes)
{
    tp_t *t = (tp_t *)p;
    *free_bytes = t->capacity ? t->capacity - t->committed : UINT64_MAX;
    return GPUARENA_SUCCESS;
}

static void tp_destroy(ga_provider_t *p)
{
    (void)p;
}

static const ga_provider_ops_t tp_ops = {
    .name = "test",
    .map = tp_map,
    .unmap = tp_unmap,
    .reserve = tp_reserve,
    .release = tp_release,
    .commit = tp_commit,
    .decommit = tp_decommit,
    .stream_id = tp_stream_id,
    .stream_check = tp_stream_check,
    .event_create = tp_event_create,
    .event_destroy = tp_event_destroy,
    .event_record = tp_event_record,
    .event_query = tp_event_query,
    .event_sync = tp_event_sync,
    .stream_wait = tp_stream_wait,
    .sync_all = tp_sync_all,
    .stream_idle = tp_stream_idle,
    .mem_free = tp_mem_free,
    .destroy = tp_destroy,
};

void tp_init(tp_t *t, bool growable, size_t granule)
{
    *t = (tp_t){0};
    t->base.ops = &tp_ops;
    t->base.granule = granule;
    t->base.va_size = (size_t)1 << 36;
    t->base.growable = growable;
    t->next_va = (uintptr_t)1 << 40;
}

/* ---- Direct mode ------------------------------------------------------ */

static gpuarena_status_t tp_alloc_async(ga_provider_t *p, size_t size, gpuarena_stream_t h,
                                        void **ptr)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    names(t, h);
    for (unsigned i = t->ncached; i-- > 0;) {
        if (t->cached[i].size != size)
            continue;
        *ptr = (void *)t->cached[i].addr;
        t->cached[i] = t->cached[--t->ncached];
        t->used += size;
        t->direct_allocs++;
        p->live_maps++;
        return GPUARENA_SUCCESS;
    }
    if (t->capacity && size > t->capacity - t->committed)
        return ga_error(GPUARENA_ERR_OUT_OF_MEMORY, "test pool: out of memory");
    t->committed += size;
    t->used += size;
    *ptr = (void *)t->next_va;
    t->next_va += size + 4096;
    t->direct_allocs++;
    p->live_maps++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_free_async(ga_provider_t *p, void *ptr, size_t size,
                                       gpuarena_stream_t h)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    names(t, h);
    /* With no stream (GPUARENA_STREAM_HOST) the free waits for nothing. */
    unsigned s = (unsigned)(uintptr_t)h;
    for (unsigned k = 0; k < TP_STREAMS; k++)
        t->free_waited[k] = s < TP_STREAMS ? t->waited[s][k] : 0;
    if (t->ncached < 256) {
        t->cached[t->ncached].addr = (uintptr_t)ptr;
        t->cached[t->ncached].size = size;
        t->cached[t->ncached].seen_at = s < TP_STREAMS ? 0 : t->device_syncs + 1;
        t->ncached++;
    } else {
        t->committed -= size; /* no room to cache it: released */
    }
    t->used -= size;
    t->direct_frees++;
    p->live_maps--;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_usage(ga_provider_t *p, uint64_t *reserved, uint64_t *used)
{
    tp_t *t = (tp_t *)p;
    *reserved = t->committed;
    *used = t->used;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t tp_trim(ga_provider_t *p, uint64_t keep)
{
    tp_t *t = (tp_t *)p;
    gpuarena_status_t st = tick(t);
    if (st != GPUARENA_SUCCESS)
        return st;
    t->trims++;
    for (unsigned i = t->ncached; i-- > 0 && t->committed > keep;) {
        if (t->cached[i].seen_at > t->device_syncs)
            continue; /* its free not yet seen complete */
        t->committed -= t->cached[i].size;
        t->cached[i] = t->cached[--t->ncached];
    }
    return GPUARENA_SUCCESS;
}

static const ga_provider_ops_t tp_direct_ops = {
    .name = "test pool",
    .stream_id = tp_stream_id,
    .stream_check = tp_stream_check,
    .event_create = tp_event_create,
    .event_destroy = tp_event_destroy,
    .event_record = tp_event_record,
    .event_query = tp_event_query,
    .event_sync = tp_event_sync,
    .stream_wait = tp_stream_wait,
    .sync_all = tp_sync_all,
    .alloc_async = tp_alloc_async,
    .free_async = tp_free_async,
    .usage = tp_usage,
    .trim = tp_trim,
    .mem_free = tp_mem_free,
    .destroy = tp_destroy,
};

void tp_init_direct(tp_t *t)
{
    tp_init(t, false, (size_t)2 << 20);
    t->base.ops = &tp_direct_ops;
}

void tp_enqueue(tp_t *t, unsigned s)
{
    t->enqueued[s]++;
}

void tp_complete(tp_t *t, unsigned s)
{
    advance(t, s, t->enqueued[s]);
}

void tp_complete_to(tp_t *t, unsigned s, uint64_t pos)
{
    advance(t, s, pos < t->enqueued[s] ? pos : t->enqueued[s]);
}

void tp_wait(tp_t *t, unsigned s, unsigned on)
{
    if (t->waited[s][on] < t->enqueued[on])
        t->waited[s][on] = t->enqueued[on];
    /* The wait takes a position of its own on S, the next one: an event
     * recorded on S after this call (the manager's, at the free that
     * follows) completes only once ON has done what S waits for, while
     * one recorded before does not need it. */
    note_wait(t, s, on, t->enqueued[on]);
    t->enqueued[s]++;
    for (unsigned k = 0; k < TP_STREAMS; k++)
        if (t->waited[s][k] < t->waited[on][k])
            t->waited[s][k] = t->waited[on][k];
}
