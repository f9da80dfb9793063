/*
 * settings.h - the typed settings of one arena, as the config room fills
 * them in from defaults, gpuarena.conf, GPUARENA_OPTIONS and the options
 * string of gpuarena_create().  Every field is one key of the key table in
 * keys.c and of gpuarena.conf(5); adding a field means adding its key there
 * and its entry in the man page (a test compares the two).
 */
#ifndef GA_SETTINGS_H
#define GA_SETTINGS_H

#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GA_MAX_NODES 64

/* Cross-stream reuse policy. */
typedef enum ga_cross_stream {
    GA_CROSS_EVENT = 0, /* reuse once the free's event has completed */
    GA_CROSS_WAIT = 1,  /* reuse at once, making the new stream wait */
    GA_CROSS_NEVER = 2  /* never reuse a block on another stream */
} ga_cross_stream_t;

/* NUMA placement policy (pinned and host arenas). */
typedef enum ga_numa_policy {
    GA_NUMA_NEAREST = 0,    /* the nodes nearest the arena's GPU */
    GA_NUMA_NODES = 1,      /* bind to the node list */
    GA_NUMA_INTERLEAVE = 2, /* interleave over the node list (all if empty) */
    GA_NUMA_LOCAL = 3       /* first touch by the calling thread */
} ga_numa_policy_t;

/* Where a device arena's blocks come from (key `pool`). */
typedef enum ga_pool_kind {
    GA_POOL_ARENA = 0, /* the block manager's own segments and blocks */
    GA_POOL_DRIVER = 1 /* the driver's stream-ordered pool (cuMemPool), block by block */
} ga_pool_kind_t;

typedef enum ga_prefetch_policy {
    GA_PREFETCH_NONE = 0,
    GA_PREFETCH_ON_ALLOC = 1
} ga_prefetch_policy_t;

/* Managed-memory advice: a location (advise_preferred) ... */
typedef enum ga_advise_location {
    GA_ADVISE_NONE = 0,   /* no advice */
    GA_ADVISE_DEVICE = 1, /* the arena's GPU */
    GA_ADVISE_CPU = 2,    /* the host */
    GA_ADVISE_NODE0 = 16  /* host NUMA node N is GA_ADVISE_NODE0 + N */
} ga_advise_location_t;

/* ... and a set of accessors (advise_accessed_by), a bit mask. */
typedef enum ga_advise_accessors {
    GA_ACCESS_NONE = 0,
    GA_ACCESS_DEVICE = 1,
    GA_ACCESS_CPU = 2,
    GA_ACCESS_BOTH = 3
} ga_advise_accessors_t;

/* The most blocks of a size class that a thread cache holds: its stacks
 * are arrays of this length (block/tcache.h), and the key's range ends
 * here (config/keys.c), so that a larger value is refused, not cut. */
#define GA_THREAD_CACHE_COUNT_MAX 32

typedef struct ga_settings {
    /* Block manager. */
    size_t round;             /* allocation granularity (power of two) */
    size_t small_max;         /* requests up to this size are small */
    size_t small_segment;     /* segment size of the small pool */
    size_t large_segment;     /* smallest segment of the large pool */
    size_t max_split;         /* free blocks larger than this are not split (0: no limit) */
    bool expandable;          /* growable segments where the provider can */
    size_t granule;           /* growable granule (0: the provider's) */
    size_t release_threshold; /* cached bytes kept when releasing */
    size_t max_cached;        /* cap on cached bytes (SIZE_MAX: none) */
    size_t max_reserved;      /* cap on reserved bytes (SIZE_MAX: none) */
    bool zero;                /* zero-fill every allocation */
    ga_cross_stream_t cross_stream;
    bool thread_cache;           /* per-thread caches of freed blocks */
    size_t thread_cache_max;     /* largest block a thread cache holds */
    unsigned thread_cache_count; /* blocks per size class per thread (at most
                                  * GA_THREAD_CACHE_COUNT_MAX) */
    size_t thread_cache_bytes;   /* bytes per thread, stream and arena */
    size_t thread_cache_large;   /* largest block of the one-block large slot */
    unsigned size_classes;       /* sizes per power of two for cacheable requests (0: none) */
    /* Sim provider. */
    unsigned sim_event_delay; /* operations before a sim event completes */
    size_t sim_capacity;      /* bytes the sim provider can map (0: no limit) */
    /* Placement (host, pinned). */
    ga_numa_policy_t numa;
    unsigned numa_count;
    int numa_nodes[GA_MAX_NODES];
    /* Pinned. */
    unsigned prefault_threads; /* threads that touch a new segment (0: auto) */
    /* Device. */
    bool peer_access;
    bool ipc;                /* growable segments exportable to other processes */
    ga_pool_kind_t pool;     /* the arena's own blocks, or the driver's pool */
    bool cupy_capture_check; /* gpuarena_cupy_malloc asks CuPy's current stream */
    /* Managed. */
    ga_prefetch_policy_t prefetch;
    size_t prefetch_headroom;
    size_t prefetch_chunk;                    /* largest single cuMemPrefetchAsync */
    ga_advise_location_t advise_preferred;    /* preferred location of new segments */
    ga_advise_accessors_t advise_accessed_by; /* accessed-by advice of new segments */
    bool read_mostly;                         /* read-mostly advice of new segments */
} ga_settings_t;

#endif /* GA_SETTINGS_H */
