/*
 * fakecuda.c - a fake libcuda.so.1 for `make check' (never installed): one
 * GPU (or several, fakecuda_devices) and just enough of the driver API for the device provider
 * (fixed, growable and driver-pool paths), with a record of the mappings, handles and pool blocks
 * it holds, and failures made on demand.  It exists for the driver's failures that no real GPU
 * makes when asked (a cuMemUnmap or cuMemRelease that fails), so that gpuarena's handling of them
 * is tested on every machine.  check_fakecuda.c runs with LD_LIBRARY_PATH at this library's
 * directory, so that lib/cuda/cuda.c's dlopen("libcuda.so.1") finds it; the test reaches the
 * fakecuda_* functions below with dlsym.
 *
 * Only what gpuarena looks up is here; any other symbol reads as missing.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The test's controls and queries (exported; not in any header). */
void fakecuda_fail(const char *call, int nth);
void fakecuda_fail_unmap_at(uint64_t va);
size_t fakecuda_mapped(uint64_t va, size_t size);
int fakecuda_maps(void);
int fakecuda_handles(void);
int fakecuda_host_registered(void);
int fakecuda_reservations(void);
long fakecuda_pool_blocks(void);
void fakecuda_blocking_capture(int on);
void fakecuda_capture(CUstream s);
long fakecuda_count(const char *what);
void fakecuda_devices(int n, unsigned peers);
int fakecuda_access(int pool, int *ids, int max);
void *fakecuda_graph(void);
int fakecuda_graph_destroyed(void *graph);
void fakecuda_fd_handles(int supported, int refused);
void fakecuda_new_context(void);
void fakecuda_foreign_stream(CUstream s);
void fakecuda_refuse_peers(int on);
void fakecuda_no_managed_concurrency(unsigned devices);
void fakecuda_unmap_gate(int closed);
void fakecuda_pool_reserved(uint64_t bytes);
int fakecuda_unmap_waiting(void);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status);

#define GRANULE ((size_t)2 << 20)
#define SLOTS   1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t va;
    size_t size;
} maps[SLOTS];
static CUmemGenericAllocationHandle handles[SLOTS];
static CUmemGenericAllocationHandle next_handle = 1;
static uint64_t next_va = 0x7f0000000000ull;
static long pool_blocks;
static int ctx_object;
static __thread CUcontext ctx_stack[16];
static __thread int ctx_depth;
static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* A blocking stream "being captured" (fakecuda_blocking_capture): the
 * legacy stream's cuStreamIsCapturing answers CAPTURE_IMPLICIT, as the
 * driver does, and a call that puts work or an event on the legacy
 * stream is refused and counted as a disturbed capture.  Counts of the
 * calls on an allocation's hot path, for fakecuda_count. */
static int blocking_capture;
static long n_capturing, n_get_current, n_disturbed, n_init, n_capture_info;

void fakecuda_blocking_capture(int on)
{
    __atomic_store_n(&blocking_capture, on, __ATOMIC_SEQ_CST);
}

/* A created stream "being captured" (fakecuda_capture; NULL for none):
 * its cuStreamIsCapturing answers ACTIVE, and a call that puts work or an
 * event on it, or cuCtxSynchronize, is refused and counted as a
 * disturbed capture. */
static CUstream captured;
/* A second stream in the capture of CAPTURED (the captured code forked
 * to it: it waited on an event of the capturing stream), with the same
 * capture id and graph; NULL for none. */
static CUstream joined;

static long captures; /* begun so far: each a graph of its own */

void fakecuda_capture(CUstream s)
{
    if (s)
        __atomic_add_fetch(&captures, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&captured, s, __ATOMIC_SEQ_CST);
    if (!s)
        __atomic_store_n(&joined, NULL, __ATOMIC_SEQ_CST);
}

void fakecuda_capture_join(CUstream s);
void fakecuda_capture_join(CUstream s)
{
    __atomic_store_n(&joined, s, __ATOMIC_SEQ_CST);
}

static bool is_captured(CUstream s)
{
    CUstream c = __atomic_load_n(&captured, __ATOMIC_SEQ_CST);
    CUstream j = __atomic_load_n(&joined, __ATOMIC_SEQ_CST);
    return c != NULL && (s == c || (j != NULL && s == j));
}

/* Exportable allocations (key ipc): whether the device says it can make
 * them (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
 * and for pools CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES),
 * whether cuMemCreate and cuMemPoolCreate refuse them (NOT_PERMITTED, as
 * a container that forbids them would), and how many creations asked for
 * one. */
static long n_retain, n_primary_release, n_prefetch, n_mem_free;
static int fd_supported = 1, fd_refused;
static long n_create_fd, n_create_plain, n_pool_fd, n_pool_plain;

void fakecuda_fd_handles(int supported, int refused)
{
    __atomic_store_n(&fd_supported, supported, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fd_refused, refused, __ATOMIC_SEQ_CST);
}

long fakecuda_count(const char *what)
{
    static const struct {
        const char *name;
        long *n;
    } counters[] = {
        {"cuStreamIsCapturing", &n_capturing},
        {"cuStreamGetCaptureInfo", &n_capture_info},
        {"cuCtxGetCurrent", &n_get_current},
        {"disturbed", &n_disturbed},
        {"cuDevicePrimaryCtxRetain", &n_retain},
        {"cuDevicePrimaryCtxRelease", &n_primary_release},
        {"cuMemPrefetchAsync", &n_prefetch},
        {"cuInit", &n_init}, /* calls begun */
        {"cuMemFree", &n_mem_free},
        {"cuMemCreate exportable", &n_create_fd}, /* asked for, made or not */
        {"cuMemCreate plain", &n_create_plain},
        {"cuMemPoolCreate exportable", &n_pool_fd},
        {"cuMemPoolCreate plain", &n_pool_plain},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        if (strcmp(what, counters[i].name) == 0)
            return __atomic_load_n(counters[i].n, __ATOMIC_SEQ_CST);
    return -1;
}

static int is_legacy(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY;
}

/* A call that uses stream S: refused on the legacy stream while a
 * blocking stream is captured. */
static int disturbs(CUstream s)
{
    bool hit =
        is_legacy(s) ? __atomic_load_n(&blocking_capture, __ATOMIC_SEQ_CST) != 0 : is_captured(s);
    if (!hit)
        return 0;
    __atomic_add_fetch(&n_disturbed, 1, __ATOMIC_SEQ_CST);
    return 1;
}

/* Failures: the NTH next call of each call named fails (one armed per
 * name; a negative NTH: every call, until armed again with 0);
 * cuMemUnmap at unmap_at fails every time. */
#define ARMED 8
static struct {
    char call[48];
    int nth;
} armed[ARMED];
static uint64_t unmap_at;

void fakecuda_fail(const char *call, int nth)
{
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < ARMED; i++)
        if (strcmp(armed[i].call, call) == 0 || (slot < 0 && !armed[i].nth))
            slot = i;
    if (slot >= 0) {
        snprintf(armed[slot].call, sizeof armed[slot].call, "%s", call);
        armed[slot].nth = nth;
    }
    pthread_mutex_unlock(&lock);
}

void fakecuda_fail_unmap_at(uint64_t va)
{
    pthread_mutex_lock(&lock);
    unmap_at = va;
    pthread_mutex_unlock(&lock);
}

static int fails(const char *call)
{
    int f = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ARMED; i++)
        if (armed[i].nth && strcmp(call, armed[i].call) == 0 &&
            (armed[i].nth < 0 || --armed[i].nth == 0))
            f = 1;
    pthread_mutex_unlock(&lock);
    return f;
}

static size_t mapped_locked(uint64_t va, size_t size)
{
    size_t n = 0;
    for (int i = 0; i < SLOTS; i++)
        if (maps[i].size && maps[i].va >= va && maps[i].va + maps[i].size <= va + size)
            n += maps[i].size;
    return n;
}

size_t fakecuda_mapped(uint64_t va, size_t size)
{
    pthread_mutex_lock(&lock);
    size_t n = mapped_locked(va, size);
    pthread_mutex_unlock(&lock);
    return n;
}

int fakecuda_maps(void)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++)
        n += maps[i].size != 0;
    pthread_mutex_unlock(&lock);
    return n;
}

int fakecuda_handles(void)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++)
        n += handles[i] != 0;
    pthread_mutex_unlock(&lock);
    return n;
}

long fakecuda_pool_blocks(void)
{
    pthread_mutex_lock(&lock);
    long n = pool_blocks;
    pthread_mutex_unlock(&lock);
    return n;
}

/* ---------------------------------------------------------------------- */
/* Devices and contexts: one GPU, its primary context. */

/* FAKECUDA_INIT_MS: cuInit takes that long, as a real driver's first
 * call does (a fork during it: check_fakecuda). */
static CUresult f_init(unsigned flags)
{
    (void)flags;
    __atomic_add_fetch(&n_init, 1, __ATOMIC_SEQ_CST);
    const char *ms = getenv("FAKECUDA_INIT_MS");
    if (ms) {
        long v = atol(ms);
        struct timespec t = {v / 1000, (v % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    return CUDA_SUCCESS;
}

static CUresult f_version(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

/* Devices (fakecuda_devices): how many, and a bit per device that may
 * reach device 0's memory (cuDeviceCanAccessPeer).  One, none, unless a
 * test says otherwise. */
static int n_devices = 1;
static unsigned peer_mask;

void fakecuda_devices(int n, unsigned peers)
{
    n_devices = n;
    peer_mask = peers;
}

/* The devices named by the last cuMemSetAccess (POOL 0) or
 * cuMemPoolSetAccess (POOL 1), in its order; how many there were. */
#define ACCESS_MAX 64
static struct {
    int ids[ACCESS_MAX];
    int n;
} last_access[2];

static void note_access(int pool, const CUmemAccessDesc *d, size_t n)
{
    pthread_mutex_lock(&lock);
    last_access[pool].n = (int)n;
    for (size_t i = 0; i < n && i < ACCESS_MAX; i++)
        last_access[pool].ids[i] = d[i].location.id;
    pthread_mutex_unlock(&lock);
}

int fakecuda_access(int pool, int *ids, int max)
{
    pthread_mutex_lock(&lock);
    int n = last_access[pool].n;
    for (int i = 0; i < n && i < max && i < ACCESS_MAX; i++)
        ids[i] = last_access[pool].ids[i];
    pthread_mutex_unlock(&lock);
    return n;
}

static CUresult f_count(int *n)
{
    *n = n_devices;
    return CUDA_SUCCESS;
}

static CUresult f_device_get(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= n_devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult f_name(char *buf, int len, CUdevice d)
{
    (void)d;
    snprintf(buf, (size_t)len, "fakecuda GPU");
    return CUDA_SUCCESS;
}

static CUresult f_bus_id(char *buf, int len, CUdevice d)
{
    (void)d;
    snprintf(buf, (size_t)len, "0000:ff:1f.7");
    return CUDA_SUCCESS;
}

/* Devices (a bit each) whose CONCURRENT_MANAGED_ACCESS reads 0, as a
 * GPU's under Windows' WDDM or on some virtual machines does: the driver
 * takes no prefetch to them. */
static unsigned no_concurrency;

void fakecuda_no_managed_concurrency(unsigned devices)
{
    __atomic_store_n(&no_concurrency, devices, __ATOMIC_SEQ_CST);
}

static CUresult f_attribute(int *v, CUdevice_attribute a, CUdevice d)
{
    if (a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS && d >= 0 && d < 32) {
        *v = !(__atomic_load_n(&no_concurrency, __ATOMIC_SEQ_CST) >> d & 1);
        return CUDA_SUCCESS;
    }
    *v = a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID           ? 0
         : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132
         : a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
             ? __atomic_load_n(&fd_supported, __ATOMIC_SEQ_CST)
         : a == CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES
             ? (__atomic_load_n(&fd_supported, __ATOMIC_SEQ_CST)
                    ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC
                    : CU_MEM_HANDLE_TYPE_FABRIC)
             : 1;
    return CUDA_SUCCESS;
}

static CUresult f_total(size_t *bytes, CUdevice d)
{
    (void)d;
    *bytes = (size_t)16 << 30;
    return CUDA_SUCCESS;
}

static CUresult f_peer(int *can, CUdevice a, CUdevice b)
{
    if (a < 0 || a >= n_devices || b < 0 || b >= n_devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *can = b == 0 && a != 0 && (peer_mask >> a & 1);
    return CUDA_SUCCESS;
}

static CUresult f_retain(CUcontext *c, CUdevice d)
{
    (void)d;
    __atomic_add_fetch(&n_retain, 1, __ATOMIC_SEQ_CST);
    *c = (CUcontext)&ctx_object;
    return CUDA_SUCCESS;
}

static CUresult f_primary_release(CUdevice d)
{
    (void)d;
    __atomic_add_fetch(&n_primary_release, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

static CUresult f_get_current(CUcontext *c)
{
    __atomic_add_fetch(&n_get_current, 1, __ATOMIC_SEQ_CST);
    *c = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

static CUresult f_set_current(CUcontext c)
{
    if (ctx_depth)
        ctx_stack[ctx_depth - 1] = c;
    else if (c)
        ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult f_push(CUcontext c)
{
    if (ctx_depth == 16)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult f_pop(CUcontext *c)
{
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = ctx_stack[--ctx_depth];
    if (c)
        *c = top;
    return CUDA_SUCCESS;
}

/* The primary context's id (cuCtxGetId); fakecuda_new_context gives it
 * another, as the driver does to a context made after the last release
 * of the one before. */
static unsigned long long ctx_id = 1;

void fakecuda_new_context(void)
{
    __atomic_add_fetch(&ctx_id, 1, __ATOMIC_SEQ_CST);
}

static CUresult f_ctx_id(CUcontext c, unsigned long long *id)
{
    (void)c;
    *id = __atomic_load_n(&ctx_id, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Streams and events: all work is done at once. */

/* Measured on an H200 (CUDA 13): cuStreamGetId on a stream being
 * captured fails, in either capture mode, and invalidates the capture;
 * on the legacy stream while a blocking stream is captured it fails
 * too (CAPTURE_IMPLICIT). */
static CUresult f_stream_id(CUstream s, unsigned long long *id)
{
    if (disturbs(s))
        return is_legacy(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                            : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    *id = is_legacy(s) ? 100 : (unsigned long long)(uintptr_t)s;
    return CUDA_SUCCESS;
}

/* A stream of another context (another device's): what cuStreamGetCtx
 * says of it, a capture allowing the question as the driver does. */
static CUstream foreign;
static int foreign_ctx_object;

void fakecuda_foreign_stream(CUstream s)
{
    __atomic_store_n(&foreign, s, __ATOMIC_SEQ_CST);
}

static CUresult f_stream_ctx(CUstream s, CUcontext *c)
{
    CUstream f = __atomic_load_n(&foreign, __ATOMIC_SEQ_CST);
    *c = f && s == f ? (CUcontext)&foreign_ctx_object : (CUcontext)&ctx_object;
    return CUDA_SUCCESS;
}

static CUresult f_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    __atomic_add_fetch(&n_capturing, 1, __ATOMIC_SEQ_CST);
    if (is_legacy(s) && __atomic_load_n(&blocking_capture, __ATOMIC_SEQ_CST))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    *st = !is_legacy(s) && is_captured(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                          : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

/* A captured stream's capture id: its handle's value plus the number of
 * captures begun (one capture at a time here, fakecuda_capture), and its
 * graph: that number, as a handle. */

static CUresult f_capture_info(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id,
                               CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    __atomic_add_fetch(&n_capture_info, 1, __ATOMIC_SEQ_CST);
    if (is_legacy(s) && __atomic_load_n(&blocking_capture, __ATOMIC_SEQ_CST))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    bool on = !is_legacy(s) && is_captured(s);
    long n = __atomic_load_n(&captures, __ATOMIC_SEQ_CST);
    *st = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    *id = on ? (cuuint64_t)(uintptr_t)__atomic_load_n(&captured, __ATOMIC_SEQ_CST) + (cuuint64_t)n
             : 0;
    if (graph)
        *graph = on ? (CUgraph)(uintptr_t)n : NULL;
    if (deps)
        *deps = NULL;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

/* User objects that graphs hold: their destructors run when the test
 * says the graph is destroyed (fakecuda_graph_destroyed). */
#define USER_OBJECTS 64
static struct {
    void *ptr;
    CUhostFn fn;
    CUgraph graph; /* NULL until retained */
} user_objects[USER_OBJECTS];

static CUresult f_user_object_create(CUuserObject *out, void *ptr, CUhostFn fn, unsigned refs,
                                     unsigned flags)
{
    if (refs != 1 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC || !fn)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < USER_OBJECTS; i++) {
        if (!user_objects[i].fn) {
            user_objects[i].ptr = ptr;
            user_objects[i].fn = fn;
            user_objects[i].graph = NULL;
            *out = (CUuserObject)(uintptr_t)(i + 1);
            pthread_mutex_unlock(&lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_graph_retain_user_object(CUgraph g, CUuserObject o, unsigned count,
                                           unsigned flags)
{
    uintptr_t i = (uintptr_t)o - 1;
    if (!g || i >= USER_OBJECTS || count != 1 || flags != CU_GRAPH_USER_OBJECT_MOVE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    user_objects[i].graph = g;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* The graph of the capture running now, or of the last one (the test's
 * view, for fakecuda_graph_destroyed). */
void *fakecuda_graph(void)
{
    return (void *)(uintptr_t)__atomic_load_n(&captures, __ATOMIC_SEQ_CST);
}

/* GRAPH and its executable graphs destroyed: the destructors of the user
 * objects it holds run, as the driver's thread runs them.  How many. */
int fakecuda_graph_destroyed(void *graph)
{
    int n = 0;
    for (int i = 0; i < USER_OBJECTS; i++) {
        pthread_mutex_lock(&lock);
        CUhostFn fn = user_objects[i].graph == graph ? user_objects[i].fn : NULL;
        void *ptr = user_objects[i].ptr;
        if (fn)
            user_objects[i].fn = NULL, user_objects[i].graph = NULL;
        pthread_mutex_unlock(&lock);
        if (fn) {
            fn(ptr);
            n++;
        }
    }
    return n;
}

static CUresult f_stream_sync(CUstream s)
{
    if (disturbs(s))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    return fails("cuStreamSynchronize") ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

static CUresult f_stream_query(CUstream s)
{
    return disturbs(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

static CUresult f_ctx_sync(void)
{
    /* No capture mode allows it while a stream is being captured. */
    if (__atomic_load_n(&captured, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&blocking_capture, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&n_disturbed, 1, __ATOMIC_SEQ_CST);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
}

static CUresult f_exchange_mode(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode old = capture_mode;
    capture_mode = *m;
    *m = old;
    return CUDA_SUCCESS;
}

static CUresult f_event_create(CUevent *e, unsigned flags)
{
    (void)flags;
    *e = (CUevent)malloc(16);
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_event_destroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent e, CUstream s)
{
    (void)e;
    return disturbs(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

static CUresult f_event_done(CUevent e)
{
    (void)e;
    return CUDA_SUCCESS;
}

static CUresult f_stream_wait_event(CUstream s, CUevent e, unsigned flags)
{
    (void)e, (void)flags;
    return disturbs(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Memory: addresses only (nothing is ever read or written). */

static CUresult f_mem_info(size_t *free_bytes, size_t *total)
{
    *free_bytes = (size_t)8 << 30;
    *total = (size_t)16 << 30;
    return CUDA_SUCCESS;
}

static uint64_t take_va(size_t size)
{
    pthread_mutex_lock(&lock);
    uint64_t va = next_va;
    next_va += (size + GRANULE - 1) / GRANULE * GRANULE;
    pthread_mutex_unlock(&lock);
    return va;
}

static CUresult f_mem_alloc(CUdeviceptr *p, size_t size)
{
    *p = take_va(size);
    return CUDA_SUCCESS;
}

/* Host memory registered (pinned): the ranges, so that an unregister of
 * a base never registered fails as the driver's does, and a test can see
 * that nothing stays registered (fakecuda_host_registered). */
#define HOST_RANGES 256
static struct {
    void *p;
    size_t size;
} host_ranges[HOST_RANGES];

static CUresult f_host_register(void *p, size_t size, unsigned flags)
{
    (void)flags;
    if (fails("cuMemHostRegister"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < HOST_RANGES; i++)
        if (host_ranges[i].size && (char *)p < (char *)host_ranges[i].p + host_ranges[i].size &&
            (char *)host_ranges[i].p < (char *)p + size) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    for (int i = 0; i < HOST_RANGES; i++)
        if (!host_ranges[i].size) {
            host_ranges[i].p = p;
            host_ranges[i].size = size;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult f_host_unregister(void *p)
{
    if (fails("cuMemHostUnregister"))
        return CUDA_ERROR_UNKNOWN;
    CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < HOST_RANGES; i++)
        if (host_ranges[i].size && host_ranges[i].p == p) {
            host_ranges[i].size = 0;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

int fakecuda_host_registered(void)
{
    int n = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < HOST_RANGES; i++)
        n += host_ranges[i].size != 0;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Managed memory: address space, as cuMemAlloc's; advice taken, and
 * prefetches counted. */
static CUresult f_alloc_managed(CUdeviceptr *p, size_t size, unsigned flags)
{
    (void)flags;
    *p = take_va(size);
    return CUDA_SUCCESS;
}

static CUresult f_advise(CUdeviceptr p, size_t size, CUmem_advise advice, CUmemLocation loc)
{
    (void)p, (void)size, (void)advice, (void)loc;
    return CUDA_SUCCESS;
}

static CUresult f_prefetch(CUdeviceptr p, size_t size, CUmemLocation loc, unsigned flags,
                           CUstream s)
{
    (void)p, (void)size, (void)flags;
    /* As the driver: no prefetch to a GPU without concurrent access. */
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id >= 0 && loc.id < 32 &&
        __atomic_load_n(&no_concurrency, __ATOMIC_SEQ_CST) >> loc.id & 1)
        return CUDA_ERROR_INVALID_DEVICE;
    __atomic_add_fetch(&n_prefetch, 1, __ATOMIC_SEQ_CST);
    return disturbs(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

static CUresult f_mem_free(CUdeviceptr p)
{
    (void)p;
    __atomic_add_fetch(&n_mem_free, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

static CUresult f_memset_async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n;
    if (fails("cuMemsetD8Async"))
        return CUDA_ERROR_INVALID_VALUE;
    return disturbs(s) ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

static CUresult f_granularity(size_t *g, const CUmemAllocationProp *prop,
                              CUmemAllocationGranularity_flags o)
{
    (void)prop, (void)o;
    *g = GRANULE;
    return CUDA_SUCCESS;
}

/* Address reservations not freed (fakecuda_reservations). */
static int reservations;

static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                          unsigned long long flags)
{
    (void)align, (void)addr, (void)flags;
    *p = take_va(size);
    __atomic_add_fetch(&reservations, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

static CUresult f_address_free(CUdeviceptr p, size_t size)
{
    (void)p, (void)size;
    __atomic_sub_fetch(&reservations, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}

int fakecuda_reservations(void)
{
    return __atomic_load_n(&reservations, __ATOMIC_SEQ_CST);
}

/* A creation asking for handle TYPES: counted in *EXPORTABLE or *PLAIN;
 * whether it is refused (an exportable one, after fakecuda_fd_handles). */
static bool refused(unsigned long long types, long *exportable, long *plain)
{
    bool fd = (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
    __atomic_add_fetch(fd ? exportable : plain, 1, __ATOMIC_SEQ_CST);
    return fd && __atomic_load_n(&fd_refused, __ATOMIC_SEQ_CST);
}

static CUresult f_create(CUmemGenericAllocationHandle *h, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags)
{
    (void)size, (void)flags;
    if (refused(prop->requestedHandleTypes, &n_create_fd, &n_create_plain))
        return CUDA_ERROR_NOT_PERMITTED;
    if (fails("cuMemCreate"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++)
        if (!handles[i]) {
            *h = handles[i] = next_handle++;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult f_release(CUmemGenericAllocationHandle h)
{
    if (fails("cuMemRelease"))
        return CUDA_ERROR_UNKNOWN;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++)
        if (handles[i] == h) {
            handles[i] = 0;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult f_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                      unsigned long long flags)
{
    (void)offset, (void)h, (void)flags;
    if (fails("cuMemMap"))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++)
        if (maps[i].size && va < maps[i].va + maps[i].size && maps[i].va < va + size) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_ALREADY_MAPPED;
        }
    for (int i = 0; i < SLOTS; i++)
        if (!maps[i].size) {
            maps[i].va = va;
            maps[i].size = size;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* A gate that cuMemUnmap waits at while it is closed
 * (fakecuda_unmap_gate), to hold a trim in the middle for as long as a
 * test needs; fakecuda_unmap_waiting says how many calls wait there. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_open = PTHREAD_COND_INITIALIZER;
static bool gate_closed;
static int gate_waiting;

void fakecuda_unmap_gate(int closed)
{
    pthread_mutex_lock(&gate_lock);
    gate_closed = closed;
    pthread_cond_broadcast(&gate_open);
    pthread_mutex_unlock(&gate_lock);
}

int fakecuda_unmap_waiting(void)
{
    pthread_mutex_lock(&gate_lock);
    int n = gate_waiting;
    pthread_mutex_unlock(&gate_lock);
    return n;
}

static CUresult f_unmap(CUdeviceptr va, size_t size)
{
    pthread_mutex_lock(&gate_lock);
    gate_waiting++;
    while (gate_closed)
        pthread_cond_wait(&gate_open, &gate_lock);
    gate_waiting--;
    pthread_mutex_unlock(&gate_lock);
    if (fails("cuMemUnmap"))
        return CUDA_ERROR_UNKNOWN;
    CUresult r = CUDA_ERROR_INVALID_VALUE; /* not one whole mapping */
    pthread_mutex_lock(&lock);
    if (unmap_at && va == unmap_at)
        r = CUDA_ERROR_UNKNOWN;
    else
        for (int i = 0; i < SLOTS; i++)
            if (maps[i].size && maps[i].va == va && maps[i].size == size) {
                maps[i].size = 0;
                r = CUDA_SUCCESS;
                break;
            }
    pthread_mutex_unlock(&lock);
    return r;
}

/* A driver that says peers can reach the device (cuDeviceCanAccessPeer)
 * but refuses to open memory to them. */
static int refuse_peers;

void fakecuda_refuse_peers(int on)
{
    __atomic_store_n(&refuse_peers, on, __ATOMIC_SEQ_CST);
}

static CUresult f_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc, size_t n)
{
    if (fails("cuMemSetAccess"))
        return CUDA_ERROR_UNKNOWN;
    if (n > 1 && __atomic_load_n(&refuse_peers, __ATOMIC_SEQ_CST))
        return CUDA_ERROR_INVALID_DEVICE;
    note_access(0, desc, n);
    return fakecuda_mapped(va, size) == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (refused(props->handleTypes, &n_pool_fd, &n_pool_plain))
        return CUDA_ERROR_NOT_PERMITTED;
    *pool = (CUmemoryPool)malloc(16);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_pool_destroy(CUmemoryPool pool)
{
    free(pool);
    return CUDA_SUCCESS;
}

static CUresult f_pool_set(CUmemoryPool pool, CUmemPool_attribute a, void *v)
{
    (void)pool, (void)a, (void)v;
    return CUDA_SUCCESS;
}

/* What the pools say they reserve (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
 * fakecuda_pool_reserved): 0 unless a test says otherwise; every other
 * attribute reads 0. */
static cuuint64_t pool_reserved;

void fakecuda_pool_reserved(uint64_t bytes)
{
    __atomic_store_n(&pool_reserved, bytes, __ATOMIC_SEQ_CST);
}

static CUresult f_pool_get(CUmemoryPool pool, CUmemPool_attribute a, void *v)
{
    (void)pool;
    *(cuuint64_t *)v = a == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
                           ? __atomic_load_n(&pool_reserved, __ATOMIC_SEQ_CST)
                           : 0;
    return CUDA_SUCCESS;
}

static CUresult f_pool_access(CUmemoryPool pool, const CUmemAccessDesc *d, size_t n)
{
    (void)pool;
    note_access(1, d, n);
    return CUDA_SUCCESS;
}

static CUresult f_pool_trim(CUmemoryPool pool, size_t keep)
{
    (void)pool, (void)keep;
    return fails("cuMemPoolTrimTo") ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

static CUresult f_pool_alloc(CUdeviceptr *p, size_t size, CUmemoryPool pool, CUstream s)
{
    (void)pool;
    if (disturbs(s))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (fails("cuMemAllocFromPoolAsync"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = take_va(size);
    pthread_mutex_lock(&lock);
    pool_blocks++;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult f_free_async(CUdeviceptr p, CUstream s)
{
    (void)p;
    if (disturbs(s))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    pthread_mutex_lock(&lock);
    pool_blocks--;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* The one symbol the library looks up itself. */

typedef void (*fn_t)(void);
#define E(name, f)                                                                                 \
    {                                                                                              \
#name, (fn_t)f                                                                             \
    }
static const struct {
    const char *name;
    fn_t f;
} table[] = {
    E(cuInit, f_init),
    E(cuDriverGetVersion, f_version),
    E(cuDeviceGetCount, f_count),
    E(cuDeviceGet, f_device_get),
    E(cuDeviceGetName, f_name),
    E(cuDeviceGetPCIBusId, f_bus_id),
    E(cuDeviceGetAttribute, f_attribute),
    E(cuDeviceTotalMem, f_total),
    E(cuDeviceCanAccessPeer, f_peer),
    E(cuDevicePrimaryCtxRetain, f_retain),
    E(cuDevicePrimaryCtxRelease, f_primary_release),
    E(cuCtxGetCurrent, f_get_current),
    E(cuCtxSetCurrent, f_set_current),
    E(cuCtxPushCurrent, f_push),
    E(cuCtxPopCurrent, f_pop),
    E(cuCtxGetId, f_ctx_id),
    E(cuStreamGetId, f_stream_id),
    E(cuStreamGetCtx, f_stream_ctx),
    E(cuStreamIsCapturing, f_capturing),
    E(cuStreamGetCaptureInfo, f_capture_info),
    E(cuUserObjectCreate, f_user_object_create),
    E(cuGraphRetainUserObject, f_graph_retain_user_object),
    E(cuStreamSynchronize, f_stream_sync),
    E(cuStreamQuery, f_stream_query),
    E(cuCtxSynchronize, f_ctx_sync),
    E(cuThreadExchangeStreamCaptureMode, f_exchange_mode),
    E(cuEventCreate, f_event_create),
    E(cuEventDestroy, f_event_destroy),
    E(cuEventRecord, f_event_record),
    E(cuEventQuery, f_event_done),
    E(cuEventSynchronize, f_event_done),
    E(cuStreamWaitEvent, f_stream_wait_event),
    E(cuMemAlloc, f_mem_alloc),
    E(cuMemFree, f_mem_free),
    E(cuMemGetInfo, f_mem_info),
    E(cuMemAllocManaged, f_alloc_managed),
    E(cuMemHostRegister, f_host_register),
    E(cuMemHostUnregister, f_host_unregister),
    E(cuMemAdvise, f_advise),
    E(cuMemPrefetchAsync, f_prefetch),
    E(cuMemsetD8Async, f_memset_async),
    E(cuMemGetAllocationGranularity, f_granularity),
    E(cuMemAddressReserve, f_reserve),
    E(cuMemAddressFree, f_address_free),
    E(cuMemCreate, f_create),
    E(cuMemRelease, f_release),
    E(cuMemMap, f_map),
    E(cuMemUnmap, f_unmap),
    E(cuMemSetAccess, f_set_access),
    E(cuMemPoolCreate, f_pool_create),
    E(cuMemPoolDestroy, f_pool_destroy),
    E(cuMemPoolSetAttribute, f_pool_set),
    E(cuMemPoolGetAttribute, f_pool_get),
    E(cuMemPoolSetAccess, f_pool_access),
    E(cuMemPoolTrimTo, f_pool_trim),
    E(cuMemAllocFromPoolAsync, f_pool_alloc),
    E(cuMemFreeAsync, f_free_async),
};

/* Entry points gpuarena needs but no test here reaches: present, so that
 * the driver loads, and failing if ever called. */
static CUresult f_unsupported(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static const char *const unsupported[] = {
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    (void)version, (void)flags;
    fn_t f = NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, symbol) == 0)
            f = table[i].f;
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (strcmp(unsupported[i], symbol) == 0)
            f = (fn_t)f_unsupported;
    memcpy(pfn, &f, sizeof f);
    if (status)
        *status = f ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
