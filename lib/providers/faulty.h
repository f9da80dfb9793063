/*
 * faulty.h - fault injection for tests (./configure --enable-fault-injection
 * only; GA_FAULT_INJECTION in config.h).
 *
 * Every arena's provider is wrapped by a provider that forwards each call
 * to the real one and can make it fail instead, with the status the real
 * call would return (GPUARENA_ERR_OUT_OF_MEMORY for a map, reserve or
 * commit, GPUARENA_ERR_DRIVER for the rest) and a message in
 * gpuarena_last_error().  A failed call does nothing.  Calls are counted
 * over the whole process, per class and in all; which one fails is chosen
 * by the environment (read once, at the first arena):
 *
 *   GPUARENA_FAULT_AT=N      fail the Nth counted call (1 is the first)
 *   GPUARENA_FAULT_COUNT=C   and the C-1 counted calls after it (default 1;
 *                            0: every call from the Nth on)
 *   GPUARENA_FAULT_RATE=P    fail each counted call with probability P
 *   GPUARENA_FAULT_SEED=S    seed of those draws (default 1); a call's draw
 *                            depends only on S and its number
 *   GPUARENA_FAULT_OPS=LIST  the classes counted, comma-separated (default
 *                            all): map unmap reserve release commit
 *                            decommit stream event_create event_record
 *                            event_query event_sync stream_wait sync_all
 *                            memzero advise prefetch stream_idle
 *
 * or by a test through ga_fault_plan().  In a normal build none of this
 * is compiled.
 */
#ifndef GA_FAULTY_H
#define GA_FAULTY_H

#include "providers/provider.h"

#include <stdbool.h>
#include <stdint.h>

/* Call classes.  "map" is the pinned provider's registration too, and
 * "advise" the managed provider's per-allocation hints (on_alloc). */
enum {
    GA_FAULT_MAP,
    GA_FAULT_UNMAP,
    GA_FAULT_RESERVE,
    GA_FAULT_RELEASE,
    GA_FAULT_COMMIT,
    GA_FAULT_DECOMMIT,
    GA_FAULT_STREAM, /* stream_id and stream_check */
    GA_FAULT_EVENT_CREATE,
    GA_FAULT_EVENT_RECORD,
    GA_FAULT_EVENT_QUERY,
    GA_FAULT_EVENT_SYNC,
    GA_FAULT_STREAM_WAIT,
    GA_FAULT_SYNC_ALL,
    GA_FAULT_MEMZERO,
    GA_FAULT_ADVISE,
    GA_FAULT_PREFETCH,
    GA_FAULT_STREAM_IDLE, /* pinned and managed: is the free's stream idle? */
    GA_FAULT_CLASSES
};

#define GA_FAULT_ALL ((1u << GA_FAULT_CLASSES) - 1)

/* What failed and what was counted since the last plan, and what wrapped
 * providers still held when they were destroyed (leaks). */
typedef struct ga_fault_counts {
    uint64_t calls; /* counted calls */
    uint64_t per_class[GA_FAULT_CLASSES];
    uint64_t injected;        /* calls made to fail */
    uint64_t last_injected;   /* number of the last one (0: none) */
    int last_class;           /* its class (-1: none) */
    uint64_t leaked_maps;     /* live_maps left at destroy */
    uint64_t leaked_reserves; /* reservations not released at destroy */
    uint64_t leaked_events;   /* events not destroyed at destroy */
} ga_fault_counts_t;

/* Replace *P by a wrapper around it (which owns it from then on).  Reads
 * the environment on first use: GPUARENA_ERR_CONFIG, naming the variable,
 * when a value is bad (*P is left as it was). */
gpuarena_status_t ga_fault_wrap(ga_provider_t **p);

/* Start counting from zero with a new plan (AT, COUNT, RATE, SEED as the
 * variables above; MASK: bit 1<<class for each class counted). */
void ga_fault_plan(uint64_t at, uint64_t count, double rate, uint64_t seed, unsigned mask);

void ga_fault_counts(ga_fault_counts_t *out);
const char *ga_fault_class_name(int cls);

/* A planted bug, for showing that the tests catch it: true when
 * GPUARENA_FAULT_PLANT names WHAT ("unmap-leak": a segment whose unmap
 * failed is forgotten as if it had been unmapped). */
bool ga_fault_planted(const char *what);

#endif /* GA_FAULTY_H */
