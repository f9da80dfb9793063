/*
 * provider.h - the table of functions every memory provider fills in.
 *
 * The block manager (lib/block/) knows memory only through this table: it
 * asks a provider for segments (fixed ones with map/unmap, or growable ones
 * with reserve/commit/decommit/release), and for the few stream and event
 * operations that stream-ordered reuse needs.  Nothing here names CUDA;
 * streams and events are opaque pointers.  One file per kind implements it
 * (sim.c, host.c, device.c, pinned.c, managed.c, and driverpool.c for the
 * driver's own pool), the way mimalloc's prim/ holds one file per
 * operating system.
 *
 * Every function returns a gpuarena_status_t.  An optional entry is NULL
 * when the provider does not offer it; the block manager then falls back as
 * its comment says.
 */
#ifndef GA_PROVIDER_H
#define GA_PROVIDER_H

#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opaque event handle of a provider. */
typedef void *ga_event_t;

/* Stream id used by the block manager for "no stream owns this block". */
#define GA_STREAM_ANY UINT64_MAX

/* Returned by event_query when the event has not completed yet. */
#define GA_NOT_READY ((gpuarena_status_t)-1)

/* Returned by stream_resolve for a stream that it named without asking
 * whether it is being captured: because it cannot be (CUDA's legacy
 * stream), or because the caller, a free, said it would ask itself
 * (DEFER).  The id is set, and the caller asks stream_check before any
 * call that reaches the provider with the stream (block.h, unchecked). */
#define GA_UNCHECKED ((gpuarena_status_t)-2)

typedef struct ga_provider ga_provider_t;

typedef struct ga_provider_ops {
    const char *name;

    /* Fixed segments: map SIZE bytes (a multiple of granule) at *BASE. */
    gpuarena_status_t (*map)(ga_provider_t *p, size_t size, void **base);
    gpuarena_status_t (*unmap)(ga_provider_t *p, void *base, size_t size);

    /* Growable segments (optional, all four or none): reserve an address
     * range, then commit and decommit granule-aligned pieces inside it.
     * reserve may lower va_size when the full range cannot be had; the
     * segment then spans the new va_size.  A failed decommit changes
     * nothing, or (vmm.c) has decommitted a prefix of whole granules of
     * the range; a provider of the second kind must let an uncommitted
     * granule be decommitted again as no work, since the block manager
     * finds out how far a failed call got by asking granule by granule
     * (release_growable in block.c). */
    gpuarena_status_t (*reserve)(ga_provider_t *p, size_t size, void **base);
    gpuarena_status_t (*release)(ga_provider_t *p, void *base, size_t size);
    gpuarena_status_t (*commit)(ga_provider_t *p, void *addr, size_t size);
    gpuarena_status_t (*decommit)(ga_provider_t *p, void *addr, size_t size);
    /* Optional, with the four above: *BYTES = how much of [ADDR,
     * ADDR+SIZE) is still mapped, asked only after a failed decommit
     * there (what gpuarena_destroy says stays mapped).  A question, not a
     * retry: it changes nothing.  Without it the whole range counts. */
    gpuarena_status_t (*mapped)(ga_provider_t *p, void *addr, size_t size, size_t *bytes);

    /* Streams: a stable id for a stream handle (CUDA recycles handles). */
    gpuarena_status_t (*stream_id)(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id);
    /* Optional: GPUARENA_ERR_STREAM_CAPTURE when S is being captured. */
    gpuarena_status_t (*stream_check)(ga_provider_t *p, gpuarena_stream_t s);
    /* Optional: stream_check then stream_id in one call (the hot path of
     * every alloc and free on a stream); without it, the two are called.
     * GA_UNCHECKED (above) when it made no check; stream_check is then
     * required.  DEFER (a free): the check may be left to the caller,
     * which makes it only if the free reaches the provider with S; a
     * stream whose id is known then costs no provider call at all. */
    gpuarena_status_t (*stream_resolve)(ga_provider_t *p, gpuarena_stream_t s, bool defer,
                                        uint64_t *id);
    /* Optional: from now on, name every stream but the legacy one by its
     * handle (the per-thread stream by its thread), with no call that
     * asks for its id (stream_id and stream_resolve): for an arena that
     * serves a CUDA graph capture (graphpool.c), where the driver's
     * cuStreamGetId fails on the capturing stream and breaks the
     * capture. */
    void (*name_by_handle)(ga_provider_t *p);
    /* Optional: S's id where it is known with no driver call at all (the
     * legacy stream, a stream the calling thread named lately, any stream
     * of an arena that names them by handle): true and *ID, else false.
     * For a stream that may be being captured, whose id the driver would
     * refuse and whose capture it would invalidate. */
    bool (*stream_id_known)(ga_provider_t *p, gpuarena_stream_t s, uint64_t *id);

    /* Events (optional: without them, frees complete at once, as for host
     * memory that no GPU touches). */
    gpuarena_status_t (*event_create)(ga_provider_t *p, ga_event_t *ev);
    void (*event_destroy)(ga_provider_t *p, ga_event_t ev);
    gpuarena_status_t (*event_record)(ga_provider_t *p, ga_event_t ev, gpuarena_stream_t s);
    /* GPUARENA_SUCCESS when complete, GA_NOT_READY when not, else error. */
    gpuarena_status_t (*event_query)(ga_provider_t *p, ga_event_t ev);
    gpuarena_status_t (*event_sync)(ga_provider_t *p, ga_event_t ev);
    /* Make stream S wait for EV without blocking the host (optional). */
    gpuarena_status_t (*stream_wait)(ga_provider_t *p, gpuarena_stream_t s, ga_event_t ev);
    /* Wait until all work on every stream is done (with events; trim and
     * the out-of-memory path only).  The block manager never records on a
     * stream after the call that named it returns, since the program may
     * have destroyed it since; this is how it catches up on those. */
    gpuarena_status_t (*sync_all)(ga_provider_t *p);
    /* Optional: GPUARENA_SUCCESS when S has no work pending now, else
     * GA_NOT_READY (or an error).  Host-visible memory freed on an idle
     * stream is reusable at once, with no event. */
    gpuarena_status_t (*stream_idle)(ga_provider_t *p, gpuarena_stream_t s);

    /* Optional: zero SIZE bytes at PTR in stream order on S. */
    gpuarena_status_t (*memzero)(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s);
    /* Optional: whether memzero on S may run now, asked before the block
     * is taken, so that a refusal (no stream during a capture that
     * forbids the legacy stream) takes and counts nothing.  memzero
     * still checks: a capture may begin in between. */
    gpuarena_status_t (*memzero_check)(ga_provider_t *p, gpuarena_stream_t s);
    /* Optional hints (managed): called once per allocation / on request. */
    gpuarena_status_t (*on_alloc)(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s);
    gpuarena_status_t (*prefetch)(ga_provider_t *p, void *ptr, size_t size, int dest,
                                  gpuarena_stream_t s);
    /* Direct providers (optional: alloc_async, free_async, usage and trim
     * all four or none; then map, unmap and the growable entries are not
     * used).  Such a provider hands out every block itself, in stream
     * order, from a pool of its own (the driver's cuMemPool), and the
     * block manager passes each request straight through: it keeps only
     * its map of live blocks (for the statuses of bad pointers), its
     * counters, and the record_stream rule, which it keeps by making the
     * free's stream wait (stream_wait) on an event recorded on every other
     * stream that used the block before it calls free_async.  The provider
     * orders reuse itself.  Events are required. */
    gpuarena_status_t (*alloc_async)(ga_provider_t *p, size_t size, gpuarena_stream_t s,
                                     void **ptr);
    /* Free PTR (SIZE bytes, as allocated) in stream order on S. */
    gpuarena_status_t (*free_async)(ga_provider_t *p, void *ptr, size_t size, gpuarena_stream_t s);
    /* Bytes the provider's pool holds from the device (reserved) and hands
     * out (used) now. */
    gpuarena_status_t (*usage)(ga_provider_t *p, uint64_t *reserved, uint64_t *used);
    /* Release cached memory until at most KEEP bytes stay reserved, as far
     * as the pool can: memory whose free has not been seen complete on the
     * host stays (the caller synchronises first where it must). */
    gpuarena_status_t (*trim)(ga_provider_t *p, uint64_t keep);
    /* Optional: give back what an earlier failure kept (a handle whose
     * release failed, a granule a failed commit could not unmap): every
     * trim asks, so that one transient failure does not hold memory for
     * the life of the arena. */
    void (*tidy)(ga_provider_t *p);
    /* Optional: at destroy, once the block manager gave back what it
     * could, a last try for memory whose release the driver refused
     * earlier (vmm.c's kept handles); the bytes it still holds then, which
     * gpuarena_destroy reports (GPUARENA_ERR_DRIVER, the last refusal's
     * message with it). */
    size_t (*kept)(ga_provider_t *p);
    /* Optional: restart the peaks the provider's stats hook reports. */
    void (*reset_peaks)(ga_provider_t *p);

    /* Optional: fill per-kind statistics fields. */
    void (*stats)(ga_provider_t *p, gpuarena_stats_t *st);
    /* Optional: bytes the device has free now (for OOM reports). */
    gpuarena_status_t (*mem_free)(ga_provider_t *p, uint64_t *free_bytes);

    /* Free the provider.  Whatever is still mapped or reserved then is
     * what the block manager could not give back (it reported that at
     * gpuarena_destroy): it stays so, only the provider's records go. */
    void (*destroy)(ga_provider_t *p);
} ga_provider_ops_t;

/* A provider instance; kinds embed it first in their own struct. */
struct ga_provider {
    const ga_provider_ops_t *ops;
    size_t granule;     /* mapping granularity (page size, 2 MiB, ...) */
    size_t va_size;     /* address range a growable segment reserves */
    bool growable;      /* reserve/commit offered and enabled */
    bool host_visible;  /* the host may touch blocks (pinned, host) */
    uint64_t live_maps; /* segments or granules mapped now (for leak checks) */
    const char *how;    /* optional: how the memory is made and why, one line
                         * for gpuarena_stats_print (device, pinned); a
                         * provider that changes it later publishes a new
                         * string with an atomic release store */
};

static inline bool ga_provider_has_events(const ga_provider_t *p)
{
    return p->ops->event_create != NULL;
}

/* A direct provider: it hands out blocks itself (see alloc_async). */
static inline bool ga_provider_is_direct(const ga_provider_t *p)
{
    return p->ops->alloc_async != NULL;
}

#endif /* GA_PROVIDER_H */
