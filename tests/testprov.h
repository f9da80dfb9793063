/*
 * testprov.h - a provider for tests that models GPU streams: every
 * operation enqueues one unit of work on its stream, an event completes
 * when its stream's completed work has reached the point of its record,
 * and the test decides when work completes.  Memory is address space only
 * (like the sim provider), growable or fixed.  Failures can be injected
 * by call number.  A test may set base.host_visible to model pinned or
 * managed memory; stream_idle then says whether a stream's work is done.
 */
#ifndef GA_TESTPROV_H
#define GA_TESTPROV_H

#include "providers/provider.h"

#include <stdbool.h>
#include <stdint.h>

#define TP_STREAMS 8

typedef struct tp_event {
    unsigned stream;
    uint64_t pos;
} tp_event_t;

typedef struct tp {
    ga_provider_t base;
    uintptr_t next_va;
    uint64_t enqueued[TP_STREAMS];
    uint64_t completed[TP_STREAMS];
    uint64_t waited[TP_STREAMS][TP_STREAMS]; /* [t][s]: t waits for s up to */
    /* Waits not yet known complete: once stream s has completed past
     * at[s][i], stream on[s][i] has completed up to upto[s][i]. */
    struct {
        uint64_t at, upto;
        unsigned on;
    } pend[TP_STREAMS][256];
    unsigned npend[TP_STREAMS];
    uint64_t calls;      /* provider calls made */
    uint64_t fail_at;    /* fail this call number (0: never) */
    bool events_refused; /* event_create fails (no host memory for one) */
    uint64_t events_live;
    uint64_t bad_handles;  /* records or waits on a handle that is no stream */
    uint64_t syncs;        /* event and device waits */
    uint64_t device_syncs; /* device waits alone (sync_all) */
    size_t capacity, committed;
    /* Direct mode (tp_init_direct): a pool that hands out blocks itself,
     * reusing a freed block of the same size (newest first) and mapping
     * new memory otherwise; committed counts what it holds (in use or
     * cached), capacity bounds it. */
    struct {
        uintptr_t addr;
        size_t size;
        /* Freed with no stream (the legacy stream's order): as the
         * driver's pool, a trim releases it only once a device wait
         * (device_syncs reaching this) has seen the free complete. */
        uint64_t seen_at;
    } cached[256];
    unsigned ncached;
    size_t used;
    uint64_t direct_allocs, direct_frees, trims;
    /* waited[s][*] of the stream of the last free_async, when it was made */
    uint64_t free_waited[TP_STREAMS];
    /* Streams "being captured" (bit s for stream s): stream_check refuses
     * them; a call that names one anyway counts in disturbed. */
    unsigned capturing;
    uint64_t checks, disturbed;
} tp_t;

/* Streams are handles 1..TP_STREAMS-1 cast to pointers; 0 is NULL. */
static inline gpuarena_stream_t tp_handle(unsigned s)
{
    return (gpuarena_stream_t)(uintptr_t)s;
}

void tp_init(tp_t *t, bool growable, size_t granule);
/* A direct provider (alloc_async and friends, provider.h) with events. */
void tp_init_direct(tp_t *t);
/* One unit of work enqueued on stream S (the test calls it per op). */
void tp_enqueue(tp_t *t, unsigned s);
/* Stream S waits for the work enqueued on stream ON so far (as a program
 * does with cuStreamWaitEvent): the wait is the next position of S, so
 * events recorded on S after the call complete only after ON's work. */
void tp_wait(tp_t *t, unsigned s, unsigned on);
/* Complete all work of stream S. */
void tp_complete(tp_t *t, unsigned s);
/* Complete the work of stream S up to position POS (at most what was
 * enqueued): the GPU part-way through a stream's queue. */
void tp_complete_to(tp_t *t, unsigned s, uint64_t pos);

#endif
