/*
 * gpuarena.h - pooled, stream-ordered arenas for GPU device memory, pinned
 * host memory, CUDA managed memory and NUMA-placed host memory.
 *
 * This is the only public header of libgpuarena.  It is self-contained: it
 * needs no CUDA header.  CUDA streams (CUstream, cudaStream_t) are passed as
 * gpuarena_stream_t, an opaque pointer of the same size and value.
 *
 * Every function returns a gpuarena_status_t (0 is success) unless it says
 * otherwise; none aborts the process or prints unless asked to.  All
 * functions are thread-safe.  See gpuarena(7).
 */
#ifndef GPUARENA_H
#define GPUARENA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUARENA_VERSION_MAJOR 0
#define GPUARENA_VERSION_MINOR 1
#define GPUARENA_VERSION_PATCH 0

#if defined(__GNUC__) && !defined(GPUARENA_NO_ATTRIBUTES)
#define GPUARENA_NODISCARD __attribute__((warn_unused_result))
#else
#define GPUARENA_NODISCARD
#endif

/* Status codes.  The values are part of the ABI and never change. */
typedef enum gpuarena_status {
    GPUARENA_SUCCESS = 0,
    GPUARENA_ERR_INVALID_ARGUMENT = 1, /* NULL arena or out pointer, bad enum */
    GPUARENA_ERR_OUT_OF_MEMORY = 2,    /* the provider has no more memory */
    GPUARENA_ERR_NO_DRIVER = 3,        /* libcuda.so.1 missing or a stub */
    GPUARENA_ERR_NO_DEVICE = 4,        /* driver loaded but no GPU visible */
    GPUARENA_ERR_INVALID_DEVICE = 5,   /* device ordinal out of range */
    GPUARENA_ERR_INVALID_POINTER = 6,  /* not handed out by this arena */
    GPUARENA_ERR_DOUBLE_FREE = 7,      /* block already freed */
    GPUARENA_ERR_INTERIOR_POINTER = 8, /* points inside a live block */
    GPUARENA_ERR_SIZE_OVERFLOW = 9,    /* size too large to represent */
    GPUARENA_ERR_INVALID_STREAM = 10,  /* stream unknown or of another device */
    GPUARENA_ERR_CONFIG = 11,          /* bad config file, key or value */
    GPUARENA_ERR_NOT_SUPPORTED = 12,   /* operation not offered by this kind */
    GPUARENA_ERR_STREAM_CAPTURE = 13,  /* not allowed while the stream captures */
    GPUARENA_ERR_DRIVER = 14,          /* other CUDA driver error */
    GPUARENA_ERR_SYSTEM = 15,          /* operating system call failed */
    GPUARENA_ERR_HOST_MEMORY = 16,     /* no host memory for bookkeeping */
    GPUARENA_ERR_CORRUPT = 17,         /* an invariant check failed */
    GPUARENA_ERR_BUSY = 18             /* blocks still live (destroy) */
} gpuarena_status_t;

/* The kinds of arena. */
typedef enum gpuarena_kind {
    GPUARENA_DEVICE = 0,  /* GPU device memory (caching allocator) */
    GPUARENA_PINNED = 1,  /* page-locked host memory near a GPU */
    GPUARENA_MANAGED = 2, /* CUDA managed (unified) memory */
    GPUARENA_HOST = 3,    /* pageable NUMA-placed host memory, no GPU */
    GPUARENA_SIM = 4      /* address space only, for replay and tests */
} gpuarena_kind_t;

#define GPUARENA_KIND_COUNT 5

/* Destination of gpuarena_prefetch() meaning "the host". */
#define GPUARENA_CPU (-1)

typedef struct gpuarena gpuarena_t;

/* A CUDA stream (CUstream or cudaStream_t).  NULL is the legacy default
 * stream, as in CUDA.  For host and sim arenas any value names a stream. */
typedef void *gpuarena_stream_t;

/* No stream: the calling host thread.  A block allocated with it may be
 * used on any stream; freeing a block with it says that no GPU work uses
 * the block any more (the program waited for it), apart from streams
 * named with gpuarena_record_stream(), so it is reusable at once and the
 * arena makes no driver call for it.  See gpuarena_alloc(3). */
#define GPUARENA_STREAM_HOST ((gpuarena_stream_t) ~(uintptr_t)0)

/* Statistics of one arena.  Byte counts are current values with their
 * peaks since creation or the last gpuarena_stats_reset_peaks(). */
typedef struct gpuarena_stats_s {
    uint64_t requested, requested_peak; /* bytes asked for by live allocations */
    uint64_t in_use, in_use_peak;       /* bytes of live blocks (after rounding) */
    uint64_t reserved, reserved_peak;   /* bytes mapped from the provider */
    uint64_t cached, cached_peak;       /* reserved bytes in free blocks */
    uint64_t allocs;                    /* successful allocations */
    uint64_t frees;                     /* successful frees */
    uint64_t cache_hits;                /* allocations served without a map */
    uint64_t cache_misses;              /* allocations that mapped memory */
    uint64_t provider_maps;             /* segments or granules mapped */
    uint64_t provider_unmaps;           /* segments or granules unmapped */
    uint64_t cross_stream_waits;        /* reuses across streams by waiting */
    uint64_t oom_retries;               /* out-of-memory releases and retries */
    uint64_t oom_failures;              /* allocations failed for memory */
    uint64_t last_oom_request;          /* size of the last failed request */
    uint64_t segments;                  /* live segments */
    uint64_t live_blocks;               /* live allocations */
    uint64_t free_blocks;               /* free blocks in the arena */
    uint64_t pending_frees;             /* free blocks waiting on an event */
    uint64_t events_recorded;           /* events recorded on streams */
    uint64_t trims;                     /* gpuarena_trim() and release passes */
    /* Per-kind figures; zero where they do not apply. */
    uint64_t numa_nodes;         /* bitmask of NUMA nodes used (<64) */
    uint64_t numa_fallbacks;     /* placements with unknown locality */
    uint64_t prefetches;         /* prefetches issued (managed) */
    uint64_t prefetches_skipped; /* prefetches skipped by the guard */
    uint64_t advice_applied;     /* cuMemAdvise calls applied */
    uint64_t advice_skipped;     /* advice the device cannot honour */
    uint64_t device_free;        /* device free bytes at the last OOM */
    /* Streams: free memory that not every stream may take yet. */
    uint64_t stream_pools;   /* streams whose frees the arena keeps apart */
    uint64_t stream_cached;  /* bytes of free blocks only their stream may take */
    uint64_t retired_cached; /* bytes free for no stream until a device wait */
    uint64_t deferred_frees; /* frees a framework hook keeps until a capture ends */
    uint64_t numa_unbound;   /* segments the system refused to bind to their nodes */
    uint64_t spare_[4];      /* room for growth; always zero */
} gpuarena_stats_t;

/* Every arena of one kind on one device together: the bytes they reserve
 * at once and the peak of that sum, which no arena's own peak gives once
 * a program has several (graph pools are arenas of their own).  Arenas
 * with pool = driver are not counted: the driver's pool reserves for
 * them.  See gpuarena_stats_total(3). */
typedef struct gpuarena_total {
    uint64_t arenas;                  /* live arenas counted */
    uint64_t reserved, reserved_peak; /* bytes they reserve together, and its peak */
    uint64_t spare_[5];               /* room for growth; always zero */
} gpuarena_total_t;

/* Library information. */
const char *gpuarena_version(void);
const char *gpuarena_strerror(gpuarena_status_t status);
const char *gpuarena_last_error(void);

/* Configuration: optional; without it the first call reads the config. */
GPUARENA_NODISCARD gpuarena_status_t gpuarena_init(const char *config_path);

/* Arenas. */
GPUARENA_NODISCARD gpuarena_status_t gpuarena_get(gpuarena_kind_t kind, int device,
                                                  gpuarena_t **arena);
GPUARENA_NODISCARD gpuarena_status_t gpuarena_create(gpuarena_kind_t kind, int device,
                                                     const char *options, gpuarena_t **arena);
gpuarena_status_t gpuarena_destroy(gpuarena_t *arena);
gpuarena_status_t gpuarena_set(gpuarena_t *arena, const char *options);
GPUARENA_NODISCARD gpuarena_status_t gpuarena_kind(const gpuarena_t *arena, gpuarena_kind_t *kind,
                                                   int *device);

/* Memory. */
GPUARENA_NODISCARD gpuarena_status_t gpuarena_alloc(gpuarena_t *arena, size_t size,
                                                    gpuarena_stream_t stream, void **ptr);
gpuarena_status_t gpuarena_free(gpuarena_t *arena, void *ptr, gpuarena_stream_t stream);
gpuarena_status_t gpuarena_record_stream(gpuarena_t *arena, void *ptr, gpuarena_stream_t stream);
gpuarena_status_t gpuarena_prefetch(gpuarena_t *arena, void *ptr, size_t size, int destination,
                                    gpuarena_stream_t stream);
gpuarena_status_t gpuarena_trim(gpuarena_t *arena, size_t keep_bytes);

/* Observability. */
GPUARENA_NODISCARD gpuarena_status_t gpuarena_stats(gpuarena_t *arena, gpuarena_stats_t *stats);
gpuarena_status_t gpuarena_stats_reset_peaks(gpuarena_t *arena);
gpuarena_status_t gpuarena_stats_print(FILE *out, const char *opts);
GPUARENA_NODISCARD gpuarena_status_t gpuarena_stats_total(gpuarena_kind_t kind, int device,
                                                          gpuarena_total_t *total);
gpuarena_status_t gpuarena_stats_total_reset_peak(gpuarena_kind_t kind, int device);
GPUARENA_NODISCARD gpuarena_status_t gpuarena_check(gpuarena_t *arena);

/* Entry points for frameworks that load an allocator from a shared library
 * (see gpuarena_torch_alloc(3), gpuarena_cupy_malloc(3)).  They use the
 * default device arena of DEVICE and leave the reason of a failure in
 * gpuarena_last_error(); a failed allocation is raised as an exception in
 * the framework when it is loaded, else answers NULL.  STREAM is a
 * cudaStream_t. */
void *gpuarena_torch_alloc(ssize_t size, int device, void *stream);
void gpuarena_torch_free(void *ptr, ssize_t size, int device, void *stream);
void gpuarena_torch_record_stream(void *ptr, void *stream);
void gpuarena_torch_empty_cache(void);
void gpuarena_torch_set_memory_fraction(double fraction, int device);
/* PyTorch's id of a CUDA graph's memory pool (c10::cuda::MempoolId_t, a
 * pair of unsigned long long), passed by value as PyTorch passes it. */
typedef struct gpuarena_torch_pool {
    unsigned long long first, second;
} gpuarena_torch_pool_t;
void gpuarena_torch_begin_allocate_to_pool(int device, gpuarena_torch_pool_t pool, void *filter);
void gpuarena_torch_end_allocate_to_pool(int device, gpuarena_torch_pool_t pool);
void gpuarena_torch_release_pool(int device, gpuarena_torch_pool_t pool);
void *gpuarena_cupy_malloc(void *param, size_t size, int device);
void gpuarena_cupy_free(void *param, void *ptr, int device);

#ifdef __cplusplus
}
#endif

#endif /* GPUARENA_H */
