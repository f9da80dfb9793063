/*
 * cuda.h - the CUDA room's interface: CUDA-free wrappers of the few driver
 * calls gpuarena needs.
 *
 * lib/cuda/cuda.c is the only file of the project that includes the
 * driver's <cuda.h> and calls the driver.  It opens libcuda.so.1 at first
 * use (never linked), takes every entry point through cuGetProcAddress_v2
 * with the versioned signatures, and turns every CUresult into a gpuarena
 * status with a message (gpuarena_last_error()) naming the call and the
 * code.  This header names no CUDA type: contexts, streams and events are
 * void pointers, device addresses are uint64_t, so that providers and
 * tools compile without the driver's header.
 *
 * Mapping of driver results: STUB_LIBRARY (34) and a missing library are
 * GPUARENA_ERR_NO_DRIVER; NO_DEVICE (100) GPUARENA_ERR_NO_DEVICE;
 * INVALID_DEVICE (101) GPUARENA_ERR_INVALID_DEVICE; OUT_OF_MEMORY (2)
 * GPUARENA_ERR_OUT_OF_MEMORY; stream capture errors (900-908)
 * GPUARENA_ERR_STREAM_CAPTURE; INVALID_HANDLE (400) and INVALID_CONTEXT
 * (201) on a stream call GPUARENA_ERR_INVALID_STREAM; anything else
 * GPUARENA_ERR_DRIVER.
 */
#ifndef GA_CUDA_H
#define GA_CUDA_H

#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The legacy and per-thread default streams (CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD).  NULL also names the legacy default stream. */
#define GA_CUDA_STREAM_LEGACY     ((void *)0x1)
#define GA_CUDA_STREAM_PER_THREAD ((void *)0x2)

/* Load the driver and call cuInit(0), once per process (thread-safe).
 * GPUARENA_SUCCESS, GPUARENA_ERR_NO_DRIVER (no libcuda.so.1, the toolkit's
 * stub, a driver older than CUDA 12.0), GPUARENA_ERR_NO_DEVICE (cuInit
 * found no GPU) or GPUARENA_ERR_DRIVER; every call after the first returns
 * the same status and sets the same message. */
gpuarena_status_t ga_cuda_load(void);

/* fork(2) (lib/fork.c): the load is not in progress across it.  In the
 * child, a driver that the parent loaded and initialized cannot be used,
 * so ga_cuda_load then returns GPUARENA_ERR_NOT_SUPPORTED with a message
 * saying so. */
void ga_cuda_fork_prepare(void);
void ga_cuda_fork_parent(void);
void ga_cuda_fork_child(void);

/* Driver version (1000 * major + 10 * minor), 0 when not loaded. */
int ga_cuda_driver_version(void);

/* Path of the loaded libcuda, or "" when unknown. */
const char *ga_cuda_library_path(void);

/* Name of a CUresult code ("CUDA_ERROR_OUT_OF_MEMORY"), from the room's
 * own table (cuGetErrorName does not work on a stub). */
const char *ga_cuda_result_name(int code);

/* Number of visible devices.  Loads the driver. */
gpuarena_status_t ga_cuda_device_count(int *count);

/* Load the driver and check that DEVICE is a visible ordinal: NO_DRIVER,
 * NO_DEVICE or INVALID_DEVICE otherwise. */
gpuarena_status_t ga_cuda_device_check(int device);

gpuarena_status_t ga_cuda_device_name(int device, char *buf, size_t len);

/* PCI bus id "dddd:bb:dd.f" (lower case hex). */
gpuarena_status_t ga_cuda_device_pci_bus_id(int device, char *buf, size_t len);

gpuarena_status_t ga_cuda_device_total_mem(int device, size_t *bytes);

typedef enum ga_cuda_attr {
    GA_CUDA_ATTR_MANAGED_MEMORY,            /* cuMemAllocManaged works */
    GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, /* GPU and CPU at once */
    GA_CUDA_ATTR_PAGEABLE_MEMORY_ACCESS,    /* GPU reads pageable memory */
    GA_CUDA_ATTR_VMM_SUPPORTED,             /* cuMemCreate / cuMemMap */
    GA_CUDA_ATTR_HOST_NUMA_VMM_SUPPORTED,   /* cuMemCreate at a HOST_NUMA location */
    GA_CUDA_ATTR_HOST_NUMA_ID,              /* the GPU's host NUMA node (-1: none) */
    GA_CUDA_ATTR_HOST_REGISTER_SUPPORTED,   /* cuMemHostRegister */
    GA_CUDA_ATTR_UNIFIED_ADDRESSING,
    GA_CUDA_ATTR_PAGEABLE_USES_HOST_PAGE_TABLES,  /* pageable access through host page tables */
    GA_CUDA_ATTR_DIRECT_MANAGED_ACCESS_FROM_HOST, /* host reads device-resident managed memory */
    GA_CUDA_ATTR_CONCURRENT_KERNELS,
    GA_CUDA_ATTR_MULTIPROCESSOR_COUNT,
    GA_CUDA_ATTR_MEMORY_POOLS_SUPPORTED, /* cuMemPoolCreate, cuMemAllocFromPoolAsync */
    GA_CUDA_ATTR_HOST_VMM_SUPPORTED,     /* cuMemCreate at a HOST location */
    GA_CUDA_ATTR_POSIX_FD_SUPPORTED,     /* cuMemCreate exportable as a file descriptor */
    GA_CUDA_ATTR_POOL_POSIX_FD_SUPPORTED /* cuMemPoolCreate the same (0 or 1, from the mask of
                                            CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES) */
} ga_cuda_attr_t;

gpuarena_status_t ga_cuda_device_attr(int device, ga_cuda_attr_t attr, int *value);

/* Can DEVICE access memory of PEER (cuDeviceCanAccessPeer)? */
gpuarena_status_t ga_cuda_can_access_peer(int device, int peer, bool *can);

/* Primary context: retained once per call of retain, balanced by release.
 * Never reset. */
gpuarena_status_t ga_cuda_primary_retain(int device, void **ctx);
void ga_cuda_primary_release(int device);
gpuarena_status_t ga_cuda_ctx_id(void *ctx, uint64_t *id);

/* Make CTX current for the calling thread around a piece of work: push it
 * when another context (or none) is current, and pop it again in leave.
 * ENTERED records what to undo. */
typedef struct ga_cuda_scope {
    bool pushed;
} ga_cuda_scope_t;
gpuarena_status_t ga_cuda_enter(void *ctx, ga_cuda_scope_t *scope);
void ga_cuda_leave(ga_cuda_scope_t *scope);
/* Set CTX current on the calling thread for good (cuCtxSetCurrent). */
gpuarena_status_t ga_cuda_set_current(void *ctx);

/* Stream identity: check that STREAM belongs to CTX (NULL and the two
 * default streams belong to every context: they are taken as CTX's own)
 * and return its id (cuStreamGetId, unique for the life of the program).
 * GPUARENA_ERR_INVALID_STREAM when the stream is of another context or
 * device, or unknown to the driver.  CTX must be current.  It always asks
 * the driver, and remembers the answer for ga_cuda_stream_id_cached. */
gpuarena_status_t ga_cuda_stream_id(void *ctx, void *stream, uint64_t *id);
/* The id of CTX's legacy stream (CTX current), asked of the driver once
 * per context: an arena made while a blocking stream is captured finds
 * the id that an arena made before asked for. */
gpuarena_status_t ga_cuda_legacy_id(void *ctx, uint64_t *id);
/* The id of STREAM in CTX when this thread named it recently (no driver
 * call, no context needed); false when it must be asked for: callers try
 * this first. */
bool ga_cuda_stream_id_cached(void *ctx, void *stream, uint64_t *id);

/* GPUARENA_ERR_STREAM_CAPTURE when STREAM is being captured into a graph
 * (or when the call is illegal because another capture is under way in
 * global mode). */
gpuarena_status_t ga_cuda_stream_check(void *stream);
/* The id of the capture that STREAM takes part in, unique in the process
 * (cuStreamGetCaptureInfo): true while the capture is active; false when
 * it is not, or the driver cannot say.  A query: it disturbs no capture. */
bool ga_cuda_capture_id(void *stream, uint64_t *id);
/* The same, and the graph being captured, into *GRAPH (a CUgraph). */
bool ga_cuda_capture_graph(void *stream, uint64_t *id, void **graph);
/* Whether capture ID, which STREAM took part in, is over: the driver
 * says STREAM takes part in no capture, or in another, or refuses the
 * handle (a destroyed stream).  False while it goes on, is invalidated
 * but not ended, with no driver, or in a child made by fork(2) (which
 * may not call the driver).  A query: it disturbs no capture. */
bool ga_cuda_capture_over(void *stream, uint64_t id);
/* Call FN(ARG) once GRAPH (a CUgraph) and every executable graph made
 * from it are destroyed, after their launches (a CUDA user object the
 * graph holds).  FN runs on a thread of the driver's and must make no
 * CUDA call.  On failure (GPUARENA_ERR_NOT_SUPPORTED where the driver
 * has no user objects) FN never runs. */
gpuarena_status_t ga_cuda_graph_on_destroy(void *graph, void (*fn)(void *), void *arg);
/* GPUARENA_ERR_INVALID_STREAM when STREAM, a handle, belongs to a context
 * other than CTX; a default stream names the current one.  A query a
 * capture allows (cuStreamGetCtx). */
gpuarena_status_t ga_cuda_stream_owner_check(void *ctx, void *stream);
/* Both for a stream handle (not NULL nor a default stream): the capture
 * check, then the id, from this thread's recent streams when it is there.
 * One call on the hot path of every stream-ordered alloc and free.  A
 * captured stream of another context is GPUARENA_ERR_INVALID_STREAM, as
 * an idle one is: the device goes first. */
gpuarena_status_t ga_cuda_stream_resolve(void *ctx, void *stream, uint64_t *id);
/* The capture check of a default stream (NULL, legacy, per-thread), which
 * names the current context's: CTX is made current around it when it is
 * not, in one call (the hot path of a program that allocates on the
 * legacy stream, as PyTorch does on its default stream). */
gpuarena_status_t ga_cuda_default_stream_check(void *ctx, void *stream);
gpuarena_status_t ga_cuda_stream_sync(void *stream);
/* Wait for all work of the current context (trim, out of memory). */
gpuarena_status_t ga_cuda_ctx_sync(void);

/* Events without timing, as the block manager uses them.  Query returns
 * GPUARENA_SUCCESS when complete and GA_CUDA_NOT_READY when not. */
#define GA_CUDA_NOT_READY ((gpuarena_status_t)-1)
gpuarena_status_t ga_cuda_event_create(void **ev);
void ga_cuda_event_destroy(void *ev);
gpuarena_status_t ga_cuda_event_record(void *ev, void *stream);
gpuarena_status_t ga_cuda_event_query(void *ev);
gpuarena_status_t ga_cuda_event_sync(void *ev);
gpuarena_status_t ga_cuda_stream_wait_event(void *stream, void *ev);

/* Device memory (CTX current). */
gpuarena_status_t ga_cuda_mem_alloc(size_t size, uint64_t *dptr);
gpuarena_status_t ga_cuda_mem_free(uint64_t dptr);
gpuarena_status_t ga_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
gpuarena_status_t ga_cuda_memset_d8_async(uint64_t dptr, unsigned char value, size_t size,
                                          void *stream);

/* Virtual memory management on DEVICE (pinned device memory). */
gpuarena_status_t ga_cuda_vmm_granularity(int device, bool recommended, size_t *granule);
gpuarena_status_t ga_cuda_vmm_reserve(size_t size, size_t alignment, uint64_t *va);
gpuarena_status_t ga_cuda_vmm_free(uint64_t va, size_t size);
/* Create a physical allocation of SIZE bytes on DEVICE and map it at VA;
 * EXPORTABLE: one that may be exported as a POSIX file descriptor (key
 * `ipc').  *HANDLE is what ga_cuda_vmm_unmap_release takes back.  On
 * failure *CREATE_FAILED says whether cuMemCreate was the call that
 * failed, not the map after it, and *HANDLE is 0, or (the map failed and
 * so did the release of what cuMemCreate made) a handle for the caller to
 * release later (ga_cuda_vmm_release); so too for the host's below. */
gpuarena_status_t ga_cuda_vmm_create_map(int device, uint64_t va, size_t size, bool exportable,
                                         uint64_t *handle, bool *create_failed);
/* Devices that one call giving access names at most (the set_access
 * functions here): the size of the providers' lists of devices. */
#define GA_CUDA_MAX_ACCESS 64
/* Give read-write access to [VA, VA+SIZE) (mapped, possibly over several
 * handles) to the COUNT devices of DEVICES (at most GA_CUDA_MAX_ACCESS). */
gpuarena_status_t ga_cuda_vmm_set_access(uint64_t va, size_t size, const int *devices, int count);
/* Tests: *FD (the caller closes it) exports the allocation that holds PTR,
 * of *SIZE bytes from *BASE (made exportable: ga_cuda_vmm_create_map);
 * ga_cuda_vmm_import_fd maps such an allocation, exported by another
 * process, at a new address *PTR readable and writable by DEVICE (undo
 * with ga_cuda_vmm_unmap and ga_cuda_vmm_free). */
gpuarena_status_t ga_cuda_vmm_export_fd(uint64_t ptr, int *fd, uint64_t *base, size_t *size);
gpuarena_status_t ga_cuda_vmm_import_fd(int device, int fd, size_t size, uint64_t *ptr);
/* Tests: whether DEVICE may read and write the mapped memory at PTR
 * (cuMemGetAccess: peer_access). */
gpuarena_status_t ga_cuda_vmm_access(uint64_t ptr, int device, bool *rw);
/* Unmap [VA, VA+SIZE) (whole mappings), and release a physical allocation
 * whose mappings are gone.  Apart for a caller that must know which one
 * failed: once the unmap has succeeded the range is unmapped whatever the
 * release then says. */
gpuarena_status_t ga_cuda_vmm_unmap(uint64_t va, size_t size);
gpuarena_status_t ga_cuda_vmm_release(uint64_t handle);
/* Both in one call (on failure the range may be unmapped already). */
gpuarena_status_t ga_cuda_vmm_unmap_release(uint64_t va, size_t size, uint64_t handle);

/* Virtual memory management of pinned host memory: on host NUMA node NODE
 * (CU_MEM_LOCATION_TYPE_HOST_NUMA), or with NODE < 0 anywhere on the host
 * (CU_MEM_LOCATION_TYPE_HOST).  Mapped like device memory (reserve, free
 * and unmap_release above); access is given to the host and to the COUNT
 * devices of DEVICES (1 to GA_CUDA_MAX_ACCESS). */
gpuarena_status_t ga_cuda_vmm_host_granularity(int node, bool recommended, size_t *granule);
gpuarena_status_t ga_cuda_vmm_host_create_map(int node, uint64_t va, size_t size, uint64_t *handle);
gpuarena_status_t ga_cuda_vmm_host_set_access(uint64_t va, size_t size, const int *devices,
                                              int count);

/* Pinned and managed memory (for the pinned and managed providers). */
gpuarena_status_t ga_cuda_host_register(void *ptr, size_t size, bool device_map);
gpuarena_status_t ga_cuda_host_unregister(void *ptr);
gpuarena_status_t ga_cuda_mem_alloc_managed(size_t size, bool attach_global, uint64_t *dptr);

/* Managed-memory advice and prefetch with a location: DEVICE >= 0 is that
 * GPU, GPUARENA_CPU the host, GA_CUDA_LOCATION_HOST_NUMA(N) host NUMA
 * node N (CU_MEM_LOCATION_TYPE_HOST_NUMA). */
#define GA_CUDA_LOCATION_HOST_NUMA(n) (-1000 - (n))
typedef enum ga_cuda_advice {
    GA_CUDA_ADVISE_READ_MOSTLY = 1,
    GA_CUDA_ADVISE_UNSET_READ_MOSTLY = 2,
    GA_CUDA_ADVISE_PREFERRED_LOCATION = 3,
    GA_CUDA_ADVISE_UNSET_PREFERRED_LOCATION = 4,
    GA_CUDA_ADVISE_ACCESSED_BY = 5,
    GA_CUDA_ADVISE_UNSET_ACCESSED_BY = 6
} ga_cuda_advice_t;
gpuarena_status_t ga_cuda_mem_advise(uint64_t dptr, size_t size, ga_cuda_advice_t advice,
                                     int location);
gpuarena_status_t ga_cuda_mem_prefetch(uint64_t dptr, size_t size, int location, void *stream);

/* Range attributes of managed memory (cuMemRangeGetAttribute): the values
 * are CU_MEM_RANGE_ATTRIBUTE_* numbers.  COUNT ints are read into VALUES
 * (ACCESSED_BY gives a list of devices, -1 for the CPU, -2 for unused
 * slots; the others one int). */
typedef enum ga_cuda_range_attr {
    GA_CUDA_RANGE_READ_MOSTLY = 1,
    GA_CUDA_RANGE_ACCESSED_BY = 3,
    GA_CUDA_RANGE_PREFERRED_TYPE = 5,
    GA_CUDA_RANGE_PREFERRED_ID = 6,
    GA_CUDA_RANGE_LAST_PREFETCH_TYPE = 7,
    GA_CUDA_RANGE_LAST_PREFETCH_ID = 8
} ga_cuda_range_attr_t;
/* CUmemLocationType values as read back. */
#define GA_CUDA_LOCTYPE_INVALID   0
#define GA_CUDA_LOCTYPE_DEVICE    1
#define GA_CUDA_LOCTYPE_HOST      2
#define GA_CUDA_LOCTYPE_HOST_NUMA 3
gpuarena_status_t ga_cuda_mem_range_attr(uint64_t dptr, size_t size, ga_cuda_range_attr_t attr,
                                         int *values, size_t count);

/* Page-locked host memory of the driver (for benchmarks): cuMemHostAlloc
 * with PORTABLE | DEVICEMAP, cuMemFreeHost. */
gpuarena_status_t ga_cuda_host_alloc(size_t size, void **ptr);
gpuarena_status_t ga_cuda_host_free(void *ptr);

/* The driver's stream-ordered allocator (for benchmarks and comparison):
 * a pool of DEVICE with a release threshold (EXPORTABLE: its memory may be
 * exported as POSIX file descriptors, key `ipc'), allocations from it on a
 * stream, frees on a stream; cuMemAllocAsync uses the current device's
 * default pool. */
gpuarena_status_t ga_cuda_pool_create(int device, uint64_t release_threshold, bool exportable,
                                      void **pool);
gpuarena_status_t ga_cuda_pool_destroy(void *pool);
gpuarena_status_t ga_cuda_pool_trim(void *pool, size_t keep);
gpuarena_status_t ga_cuda_mem_alloc_from_pool(size_t size, void *pool, void *stream,
                                              uint64_t *dptr);
gpuarena_status_t ga_cuda_mem_alloc_async(size_t size, void *stream, uint64_t *dptr);
gpuarena_status_t ga_cuda_mem_free_async(uint64_t dptr, void *stream);
/* What a pool holds from the device (reserved) and hands out (used), now
 * and at the high-water marks (CU_MEMPOOL_ATTR_*_MEM_CURRENT and _HIGH). */
typedef struct ga_cuda_pool_usage {
    uint64_t reserved, reserved_high, used, used_high;
} ga_cuda_pool_usage_t;
gpuarena_status_t ga_cuda_pool_usage(void *pool, ga_cuda_pool_usage_t *u);
/* Restart both high-water marks from the values now. */
gpuarena_status_t ga_cuda_pool_reset_peaks(void *pool);
/* The pool's reuse policy across streams: follow event dependencies,
 * take completed frees opportunistically, insert stream waits itself
 * (CU_MEMPOOL_ATTR_REUSE_*; the driver enables all three by default). */
gpuarena_status_t ga_cuda_pool_set_reuse(void *pool, bool follow_events, bool opportunistic,
                                         bool internal_dependencies);
/* Give read-write access to the pool's memory to the COUNT devices of
 * DEVICES (at most GA_CUDA_MAX_ACCESS; not the pool's own device, which always has it). */
gpuarena_status_t ga_cuda_pool_set_access(void *pool, const int *devices, int count);
/* Tests: *FD (the caller closes it) exports the pool that PTR was
 * allocated from (made exportable), and DATA (GA_CUDA_POOL_PTR_DATA bytes)
 * names PTR in it; ga_cuda_pool_import, in another process, imports the
 * pool as *POOL and the block as *PTR, readable and writable by the
 * pool's device (undo with ga_cuda_mem_free_async, then
 * ga_cuda_pool_destroy, before the exporter frees the block). */
#define GA_CUDA_POOL_PTR_DATA 64
gpuarena_status_t ga_cuda_pool_export(uint64_t ptr, int *fd, void *data);
gpuarena_status_t ga_cuda_pool_import(int fd, const void *data, void **pool, uint64_t *ptr);

/* Copies and fills in stream order, and a synchronous device copy. */
gpuarena_status_t ga_cuda_memcpy_htod_async(uint64_t dst, const void *src, size_t size,
                                            void *stream);
gpuarena_status_t ga_cuda_memcpy_dtoh_async(void *dst, uint64_t src, size_t size, void *stream);
gpuarena_status_t ga_cuda_memcpy_dtod(uint64_t dst, uint64_t src, size_t size);
gpuarena_status_t ga_cuda_memset_d8(uint64_t dptr, unsigned char value, size_t size);
/* GPUARENA_SUCCESS when all work on STREAM is done, GA_CUDA_NOT_READY when
 * not. */
gpuarena_status_t ga_cuda_stream_query(void *stream);

/* For tests, tools and benchmarks (CTX current where it matters). */
gpuarena_status_t ga_cuda_stream_create(bool non_blocking, void **stream);
gpuarena_status_t ga_cuda_stream_destroy(void *stream);
/* cuStreamGetFlags: bench_device's measure of a stream call that asks
 * nothing about capture. */
gpuarena_status_t ga_cuda_stream_flags(void *stream, unsigned *flags);
/* A new (non-primary) context on DEVICE, not left current. */
gpuarena_status_t ga_cuda_ctx_create(int device, void **ctx);
gpuarena_status_t ga_cuda_ctx_destroy(void *ctx);
/* Stream capture in global mode; end throws the graph away. */
gpuarena_status_t ga_cuda_capture_begin(void *stream);
gpuarena_status_t ga_cuda_capture_end(void *stream);
/* Synchronous copies. */
gpuarena_status_t ga_cuda_memcpy_htod(uint64_t dst, const void *src, size_t size);
gpuarena_status_t ga_cuda_memcpy_dtoh(void *dst, uint64_t src, size_t size);

/* Kernels, for benchmarks (CTX current).  MODULE_LOAD takes a PTX text
 * (NUL-terminated) or a cubin and has the driver compile it for the
 * current device; a refusal carries the JIT's error log in its message.
 * LAUNCH runs FN on a one-dimensional grid of GRID blocks of BLOCK
 * threads on STREAM; ARGS points at each parameter's value, as
 * cuLaunchKernel's kernelParams. */
gpuarena_status_t ga_cuda_module_load(const char *image, void **module);
gpuarena_status_t ga_cuda_module_unload(void *module);
gpuarena_status_t ga_cuda_function_get(void *module, const char *name, void **fn);
gpuarena_status_t ga_cuda_launch(void *fn, unsigned grid, unsigned block, unsigned shared_bytes,
                                 void *stream, void **args);
/* Fill COUNT 32-bit words with VALUE, and copy device to device, in
 * stream order. */
gpuarena_status_t ga_cuda_memset_d32_async(uint64_t dptr, uint32_t value, size_t count,
                                           void *stream);
gpuarena_status_t ga_cuda_memcpy_dtod_async(uint64_t dst, uint64_t src, size_t size, void *stream);
/* Events that measure time (destroyed with ga_cuda_event_destroy); the
 * milliseconds between two completed events (cuEventElapsedTime_v2, CUDA
 * 12.8 drivers or newer: GPUARENA_ERR_NOT_SUPPORTED before). */
gpuarena_status_t ga_cuda_timing_event_create(void **ev);
gpuarena_status_t ga_cuda_event_elapsed(void *start, void *end, float *ms);

#endif /* GA_CUDA_H */
