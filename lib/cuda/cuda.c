/*
 * cuda.c - the CUDA room: the only file of gpuarena that includes the
 * driver's <cuda.h> and calls the driver.
 *
 * The driver is opened with dlopen("libcuda.so.1") at first use, once per
 * process unless the library could not be opened (ga_cuda_load says
 * why), so that libgpuarena never links libcuda and
 * works without a driver (host and sim arenas).  The one symbol taken with
 * dlsym is cuGetProcAddress_v2; every other entry point comes through it,
 * asked at cudaVersion = the version of the PFN typedef it is cast to.  An
 * entry point whose version is above the driver's is left NULL rather
 * than asked at the driver's version: an older driver would hand out an
 * older signature (cuMemAdvise before 12.2 takes a CUdevice, not a
 * CUmemLocation), and calling it through the newer type would be wrong.
 * So cudaVersion is always min(driver version, PFN version) and the two
 * are equal for every entry point in use.
 *
 * The toolkit's stubs/libcuda.so carries the SONAME libcuda.so.1 and
 * answers CUDA_ERROR_STUB_LIBRARY (34) to everything, cuGetErrorName
 * included: it counts as "no driver", and the names of results come from
 * the room's own table.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "errors.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Entry points: name, version of the PFN typedef, required for loading. */
#define GA_CU_ENTRY_POINTS(X)                                                                      \
    X(cuInit, 2000, 1)                                                                             \
    X(cuDeviceGetCount, 2000, 1)                                                                   \
    X(cuDeviceGet, 2000, 1)                                                                        \
    X(cuDeviceGetName, 2000, 1)                                                                    \
    X(cuDeviceGetPCIBusId, 4010, 1)                                                                \
    X(cuDeviceGetAttribute, 2000, 1)                                                               \
    X(cuDeviceTotalMem, 3020, 1)                                                                   \
    X(cuDeviceCanAccessPeer, 4000, 1)                                                              \
    X(cuDevicePrimaryCtxRetain, 7000, 1)                                                           \
    X(cuDevicePrimaryCtxRelease, 11000, 1)                                                         \
    X(cuCtxGetCurrent, 4000, 1)                                                                    \
    X(cuCtxSetCurrent, 4000, 1)                                                                    \
    X(cuCtxPushCurrent, 4000, 1)                                                                   \
    X(cuCtxPopCurrent, 4000, 1)                                                                    \
    X(cuCtxGetId, 12000, 1)                                                                        \
    X(cuStreamGetId, 12000, 1)                                                                     \
    X(cuStreamGetCtx, 9020, 1)                                                                     \
    X(cuStreamIsCapturing, 10000, 1)                                                               \
    X(cuStreamGetCaptureInfo, 11030, 0)                                                            \
    X(cuUserObjectCreate, 11030, 0)                                                                \
    X(cuGraphRetainUserObject, 11030, 0)                                                           \
    X(cuStreamSynchronize, 2000, 1)                                                                \
    X(cuCtxSynchronize, 2000, 1)                                                                   \
    X(cuThreadExchangeStreamCaptureMode, 10010, 1)                                                 \
    X(cuEventCreate, 2000, 1)                                                                      \
    X(cuEventDestroy, 4000, 1)                                                                     \
    X(cuEventRecord, 2000, 1)                                                                      \
    X(cuEventQuery, 2000, 1)                                                                       \
    X(cuEventSynchronize, 2000, 1)                                                                 \
    X(cuStreamWaitEvent, 3020, 1)                                                                  \
    X(cuMemAlloc, 3020, 1)                                                                         \
    X(cuMemFree, 3020, 1)                                                                          \
    X(cuMemGetInfo, 3020, 1)                                                                       \
    X(cuMemsetD8Async, 3020, 1)                                                                    \
    X(cuMemcpyHtoD, 3020, 1)                                                                       \
    X(cuMemcpyDtoH, 3020, 1)                                                                       \
    X(cuMemGetAllocationGranularity, 10020, 1)                                                     \
    X(cuMemAddressReserve, 10020, 1)                                                               \
    X(cuMemAddressFree, 10020, 1)                                                                  \
    X(cuMemCreate, 10020, 1)                                                                       \
    X(cuMemRelease, 10020, 1)                                                                      \
    X(cuMemMap, 10020, 1)                                                                          \
    X(cuMemUnmap, 10020, 1)                                                                        \
    X(cuMemSetAccess, 10020, 1)                                                                    \
    X(cuMemHostRegister, 6050, 1)                                                                  \
    X(cuMemHostUnregister, 4000, 1)                                                                \
    X(cuMemAllocManaged, 6000, 1)                                                                  \
    X(cuMemAdvise, 12020, 0)                                                                       \
    X(cuMemPrefetchAsync, 12020, 0)                                                                \
    X(cuStreamCreate, 2000, 0)                                                                     \
    X(cuStreamDestroy, 4000, 0)                                                                    \
    X(cuCtxCreate, 3020, 0)                                                                        \
    X(cuCtxDestroy, 4000, 0)                                                                       \
    X(cuStreamBeginCapture, 10010, 0)                                                              \
    X(cuStreamEndCapture, 10000, 0)                                                                \
    X(cuGraphDestroy, 10000, 0)                                                                    \
    X(cuMemRangeGetAttribute, 8000, 0)                                                             \
    X(cuMemHostAlloc, 2020, 0)                                                                     \
    X(cuMemFreeHost, 2000, 0)                                                                      \
    X(cuMemAllocAsync, 11020, 0)                                                                   \
    X(cuMemFreeAsync, 11020, 0)                                                                    \
    X(cuMemPoolCreate, 11020, 0)                                                                   \
    X(cuMemPoolDestroy, 11020, 0)                                                                  \
    X(cuMemPoolSetAttribute, 11020, 0)                                                             \
    X(cuMemPoolGetAttribute, 11020, 0)                                                             \
    X(cuMemPoolSetAccess, 11020, 0)                                                                \
    X(cuMemPoolTrimTo, 11020, 0)                                                                   \
    X(cuMemAllocFromPoolAsync, 11020, 0)                                                           \
    X(cuMemcpyHtoDAsync, 3020, 0)                                                                  \
    X(cuMemcpyDtoHAsync, 3020, 0)                                                                  \
    X(cuMemcpyDtoD, 3020, 0)                                                                       \
    X(cuMemsetD8, 3020, 0)                                                                         \
    X(cuStreamQuery, 2000, 0)                                                                      \
    X(cuStreamGetFlags, 5050, 0)                                                                   \
    X(cuMemsetD32Async, 3020, 0)                                                                   \
    X(cuMemcpyDtoDAsync, 3020, 0)                                                                  \
    X(cuEventElapsedTime, 12080, 0)                                                                \
    X(cuModuleLoadDataEx, 2010, 0)                                                                 \
    X(cuModuleUnload, 2000, 0)                                                                     \
    X(cuModuleGetFunction, 2000, 0)                                                                \
    X(cuLaunchKernel, 4000, 0)                                                                     \
    X(cuMemRetainAllocationHandle, 11000, 0)                                                       \
    X(cuMemExportToShareableHandle, 10020, 0)                                                      \
    X(cuMemImportFromShareableHandle, 10020, 0)                                                    \
    X(cuMemGetAddressRange, 3020, 0)                                                               \
    X(cuMemGetAccess, 10020, 0)                                                                    \
    X(cuPointerGetAttribute, 4000, 0)                                                              \
    X(cuMemPoolExportToShareableHandle, 11020, 0)                                                  \
    X(cuMemPoolImportFromShareableHandle, 11020, 0)                                                \
    X(cuMemPoolExportPointer, 11020, 0)                                                            \
    X(cuMemPoolImportPointer, 11020, 0)

#define GA_CU_FIELD(name, ver, req) PFN_##name##_v##ver name;
static struct {
    GA_CU_ENTRY_POINTS(GA_CU_FIELD)
} cu;
#undef GA_CU_FIELD

static gpuarena_status_t load_status;
/* The library was not found: looked for again at the next load (below). */
static bool load_again;
static char load_message[400];
static char lib_path[256];
static int driver_version;
static void *lib;

/* ---------------------------------------------------------------------- */
/* Names of CUresult codes (cuGetErrorName fails on the stub). */

static const struct {
    int code;
    const char *name;
} result_names[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {5, "CUDA_ERROR_PROFILER_DISABLED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED"},
    {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT"},
    {205, "CUDA_ERROR_MAP_FAILED"},
    {206, "CUDA_ERROR_UNMAP_FAILED"},
    {208, "CUDA_ERROR_ALREADY_MAPPED"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {210, "CUDA_ERROR_ALREADY_ACQUIRED"},
    {211, "CUDA_ERROR_NOT_MAPPED"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"},
    {218, "CUDA_ERROR_INVALID_PTX"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY"},
    {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC"},
    {300, "CUDA_ERROR_INVALID_SOURCE"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {401, "CUDA_ERROR_ILLEGAL_STATE"},
    {402, "CUDA_ERROR_LOSSY_QUERY"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {600, "CUDA_ERROR_NOT_READY"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {710, "CUDA_ERROR_ASSERT"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {719, "CUDA_ERROR_LAUNCH_FAILED"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
    {907, "CUDA_ERROR_CAPTURED_EVENT"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
    {909, "CUDA_ERROR_TIMEOUT"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

const char *ga_cuda_result_name(int code)
{
    for (size_t i = 0; i < sizeof result_names / sizeof result_names[0]; i++)
        if (result_names[i].code == code)
            return result_names[i].name;
    return "CUDA_ERROR_(unnamed)";
}

/* ---------------------------------------------------------------------- */
/* Mapping CUresult to gpuarena statuses. */

static gpuarena_status_t status_of(CUresult r)
{
    switch ((int)r) {
    case CUDA_SUCCESS:
        return GPUARENA_SUCCESS;
    case CUDA_ERROR_STUB_LIBRARY:
        return GPUARENA_ERR_NO_DRIVER;
    case CUDA_ERROR_NO_DEVICE:
        return GPUARENA_ERR_NO_DEVICE;
    case CUDA_ERROR_INVALID_DEVICE:
        return GPUARENA_ERR_INVALID_DEVICE;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return GPUARENA_ERR_OUT_OF_MEMORY;
    default:
        if ((int)r >= 900 && (int)r <= 908)
            return GPUARENA_ERR_STREAM_CAPTURE;
        return GPUARENA_ERR_DRIVER;
    }
}

/* Fail with the status of R and a message naming CALL and the code. */
static gpuarena_status_t fail(const char *call, CUresult r)
{
    return ga_error(status_of(r), "%s: %s (%d)", call, ga_cuda_result_name((int)r), (int)r);
}

/* The same for calls that take a stream: a handle or context the driver
 * does not know is the caller's stream at fault. */
static gpuarena_status_t stream_fail(const char *call, void *stream, CUresult r)
{
    if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT ||
        r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_INVALID_VALUE)
        return ga_error(GPUARENA_ERR_INVALID_STREAM,
                        "%s: stream %p is not a valid stream of the arena's device: %s (%d)", call,
                        stream, ga_cuda_result_name((int)r), (int)r);
    return ga_error(status_of(r), "%s (stream %p): %s (%d)", call, stream,
                    ga_cuda_result_name((int)r), (int)r);
}

/* The same for a call that takes memory as well as a stream (a copy, a
 * fill, a prefetch, an asynchronous free): CUDA_ERROR_INVALID_VALUE there
 * is as likely the pointer or the size, so it is not blamed on the
 * stream. */
static gpuarena_status_t queue_fail(const char *call, void *stream, CUresult r)
{
    if (r == CUDA_ERROR_INVALID_VALUE)
        return ga_error(status_of(r), "%s (stream %p): %s (%d)", call, stream,
                        ga_cuda_result_name((int)r), (int)r);
    return stream_fail(call, stream, r);
}

/* ---------------------------------------------------------------------- */
/* Loading. */

static gpuarena_status_t load_fail(gpuarena_status_t st, const char *fmt, ...) GA_PRINTF(2, 3);

static gpuarena_status_t load_fail(gpuarena_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(load_message, sizeof load_message, fmt, ap);
    va_end(ap);
    return st;
}

static void load(void)
{
    dlerror();
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "cannot load the CUDA driver libcuda.so.1 (%s): the NVIDIA "
                                "driver is not installed here or not on the library path",
                                why ? why : "not found");
        load_again = true;
        return;
    }
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (!sym) {
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "libcuda.so.1 has no cuGetProcAddress_v2: the driver is "
                                "older than CUDA 12.0; install a newer NVIDIA driver");
        return;
    }
    Dl_info info;
    if (dladdr(sym, &info) && info.dli_fname)
        snprintf(lib_path, sizeof lib_path, "%s", info.dli_fname);

    PFN_cuGetProcAddress_v12000 gpa;
    memcpy(&gpa, &sym, sizeof gpa);

    void *p = NULL;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = gpa("cuDriverGetVersion", &p, 2020, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    int version = 0;
    if (r == CUDA_SUCCESS && p) {
        PFN_cuDriverGetVersion_v2020 get_version;
        memcpy(&get_version, &p, sizeof get_version);
        r = get_version(&version);
    } else if (r == CUDA_SUCCESS) {
        r = CUDA_ERROR_NOT_FOUND;
    }
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "%s is the CUDA toolkit's stub library, not the driver "
                                "(CUDA_ERROR_STUB_LIBRARY, %d): remove the toolkit's stubs "
                                "directory from LD_LIBRARY_PATH or install the NVIDIA driver",
                                lib_path[0] ? lib_path : "libcuda.so.1", (int)r);
        return;
    }
    if (r != CUDA_SUCCESS) {
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "cuDriverGetVersion through cuGetProcAddress failed: %s (%d)",
                                ga_cuda_result_name((int)r), (int)r);
        return;
    }
    if (version < 12000) {
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "the CUDA driver is too old (version %d): gpuarena needs a "
                                "CUDA 12.0 driver or newer",
                                version);
        return;
    }

#define GA_CU_GET(name, ver, req)                                                                  \
    do {                                                                                           \
        p = NULL;                                                                                  \
        if (version >= (ver)) {                                                                    \
            r = gpa(#name, &p, (ver), CU_GET_PROC_ADDRESS_DEFAULT, &q);                            \
            if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS)                             \
                p = NULL;                                                                          \
        }                                                                                          \
        if (!p && (req)) {                                                                         \
            load_status = load_fail(GPUARENA_ERR_NO_DRIVER,                                        \
                                    "the CUDA driver lacks %s (version %d): install a newer "      \
                                    "NVIDIA driver",                                               \
                                    #name, (ver));                                                 \
            return;                                                                                \
        }                                                                                          \
        memcpy(&cu.name, &p, sizeof p);                                                            \
    } while (0);
    GA_CU_ENTRY_POINTS(GA_CU_GET)
#undef GA_CU_GET

    driver_version = version;
    r = cu.cuInit(0);
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        load_status = load_fail(GPUARENA_ERR_NO_DRIVER,
                                "cuInit: %s is the CUDA toolkit's stub library "
                                "(CUDA_ERROR_STUB_LIBRARY, %d), not the driver",
                                lib_path, (int)r);
    } else if (r == CUDA_ERROR_NO_DEVICE) {
        load_status = load_fail(GPUARENA_ERR_NO_DEVICE,
                                "cuInit: %s (%d): the driver sees no GPU (check "
                                "CUDA_VISIBLE_DEVICES and nvidia-smi)",
                                ga_cuda_result_name((int)r), (int)r);
    } else if (r != CUDA_SUCCESS) {
        load_status = load_fail(status_of(r) == GPUARENA_ERR_NO_DEVICE ? GPUARENA_ERR_NO_DEVICE
                                                                       : GPUARENA_ERR_DRIVER,
                                "cuInit: %s (%d)", ga_cuda_result_name((int)r), (int)r);
    } else {
        load_status = GPUARENA_SUCCESS;
    }
}

/* The load, made once under a lock that fork(2) takes too
 * (ga_cuda_fork_prepare): a fork in the middle of the load would leave
 * the child a driver that the parent had begun to initialize.  With the
 * lock, the child finds the load done or not begun, and
 * ga_cuda_fork_child can refuse.  Once the load is done the lock is not
 * taken.  It is a leaf: load() takes no other of the library's, so the
 * handlers take it last.
 *
 * Its outcome is kept for the life of the process, except where
 * libcuda.so.1 could not be opened: dlopen fails for want of host memory
 * as for a missing file (saying "No such file or directory" or "cannot
 * allocate symbol search list"), and one such moment made every GPU arena
 * of the process fail with "no driver" for good.  So that failure is
 * reported and the next load looks again: a program on a machine with no
 * driver pays one failed dlopen per GPU arena it asks for. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool load_done;

/* The load if not done, the lock held; its status, with its message in
 * gpuarena_last_error() on failure. */
static gpuarena_status_t load_locked(void)
{
    if (!atomic_load_explicit(&load_done, memory_order_relaxed)) {
        load_again = false;
        load();
        if (!load_again)
            atomic_store_explicit(&load_done, true, memory_order_release);
    }
    return load_status == GPUARENA_SUCCESS ? GPUARENA_SUCCESS
                                           : ga_error(load_status, "%s", load_message);
}

void ga_cuda_fork_prepare(void)
{
    pthread_mutex_lock(&load_lock);
}

void ga_cuda_fork_parent(void)
{
    pthread_mutex_unlock(&load_lock);
}

gpuarena_status_t ga_cuda_load(void)
{
    if (atomic_load_explicit(&load_done, memory_order_acquire))
        return load_status == GPUARENA_SUCCESS ? GPUARENA_SUCCESS
                                               : ga_error(load_status, "%s", load_message);
    pthread_mutex_lock(&load_lock);
    gpuarena_status_t st = load_locked();
    pthread_mutex_unlock(&load_lock);
    return st;
}

void ga_cuda_fork_child(void)
{
    /* Only a driver this process loaded and initialized is lost to the
     * child; one never loaded can be loaded there as anywhere.  The load
     * is done in that case, so its status is the answer from now on. */
    if (load_status == GPUARENA_SUCCESS && lib) {
        load_status = GPUARENA_ERR_NOT_SUPPORTED;
        snprintf(load_message, sizeof load_message,
                 "CUDA was initialized before this process was forked: it cannot be used in a "
                 "child made by fork() (gpuarena(7), section Fork)");
    }
    pthread_mutex_unlock(&load_lock);
}

/* Read only once the load is done: until then another thread's load may
 * be writing them. */
int ga_cuda_driver_version(void)
{
    (void)ga_cuda_load();
    return atomic_load_explicit(&load_done, memory_order_acquire) ? driver_version : 0;
}

const char *ga_cuda_library_path(void)
{
    (void)ga_cuda_load();
    return atomic_load_explicit(&load_done, memory_order_acquire) ? lib_path : "";
}

/* ---------------------------------------------------------------------- */
/* Devices. */

gpuarena_status_t ga_cuda_device_count(int *count)
{
    gpuarena_status_t st = ga_cuda_load();
    if (st != GPUARENA_SUCCESS)
        return st;
    int n = 0;
    CUresult r = cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS)
        return fail("cuDeviceGetCount", r);
    *count = n;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t get_device(int ordinal, CUdevice *dev)
{
    int n = 0;
    gpuarena_status_t st = ga_cuda_device_count(&n);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (n == 0)
        return ga_error(GPUARENA_ERR_NO_DEVICE, "the CUDA driver sees no GPU (check "
                                                "CUDA_VISIBLE_DEVICES and nvidia-smi)");
    if (ordinal < 0 || ordinal >= n)
        return ga_error(GPUARENA_ERR_INVALID_DEVICE,
                        "device %d does not exist: the driver sees %d GPU%s (0 to %d)", ordinal, n,
                        n == 1 ? "" : "s", n - 1);
    CUresult r = cu.cuDeviceGet(dev, ordinal);
    if (r != CUDA_SUCCESS)
        return fail("cuDeviceGet", r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_device_check(int device)
{
    CUdevice d;
    return get_device(device, &d);
}

gpuarena_status_t ga_cuda_device_name(int device, char *buf, size_t len)
{
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuDeviceGetName(buf, (int)len, d);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuDeviceGetName", r);
}

gpuarena_status_t ga_cuda_device_pci_bus_id(int device, char *buf, size_t len)
{
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuDeviceGetPCIBusId(buf, (int)len, d);
    if (r != CUDA_SUCCESS)
        return fail("cuDeviceGetPCIBusId", r);
    /* The driver writes "0000:3B:00.0"; hwloc and sysfs use lower case. */
    for (char *c = buf; *c; c++)
        if (*c >= 'A' && *c <= 'F')
            *c = (char)(*c - 'A' + 'a');
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_device_total_mem(int device, size_t *bytes)
{
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuDeviceTotalMem(bytes, d);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuDeviceTotalMem", r);
}

gpuarena_status_t ga_cuda_device_attr(int device, ga_cuda_attr_t attr, int *value)
{
    static const CUdevice_attribute attrs[] = {
        [GA_CUDA_ATTR_MANAGED_MEMORY] = CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
        [GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS] = CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
        [GA_CUDA_ATTR_PAGEABLE_MEMORY_ACCESS] = CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
        [GA_CUDA_ATTR_VMM_SUPPORTED] = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        [GA_CUDA_ATTR_HOST_NUMA_VMM_SUPPORTED] =
            CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        [GA_CUDA_ATTR_HOST_NUMA_ID] = CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID,
        [GA_CUDA_ATTR_HOST_REGISTER_SUPPORTED] = CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED,
        [GA_CUDA_ATTR_UNIFIED_ADDRESSING] = CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
        [GA_CUDA_ATTR_PAGEABLE_USES_HOST_PAGE_TABLES] =
            CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
        [GA_CUDA_ATTR_DIRECT_MANAGED_ACCESS_FROM_HOST] =
            CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
        [GA_CUDA_ATTR_CONCURRENT_KERNELS] = CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS,
        [GA_CUDA_ATTR_MULTIPROCESSOR_COUNT] = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        [GA_CUDA_ATTR_MEMORY_POOLS_SUPPORTED] = CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        [GA_CUDA_ATTR_HOST_VMM_SUPPORTED] =
            CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        [GA_CUDA_ATTR_POSIX_FD_SUPPORTED] =
            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
        [GA_CUDA_ATTR_POOL_POSIX_FD_SUPPORTED] = CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
    };
    if ((unsigned)attr >= sizeof attrs / sizeof attrs[0])
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "unknown device attribute %d", (int)attr);
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuDeviceGetAttribute(value, attrs[attr], d);
    if (r == CUDA_ERROR_INVALID_VALUE && attr == GA_CUDA_ATTR_HOST_NUMA_ID) {
        *value = -1; /* a driver that does not know the attribute */
        return GPUARENA_SUCCESS;
    }
    if (r == CUDA_ERROR_INVALID_VALUE) {
        *value = 0;
        return GPUARENA_SUCCESS;
    }
    if (r == CUDA_SUCCESS && attr == GA_CUDA_ATTR_POOL_POSIX_FD_SUPPORTED)
        *value = (*value & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0; /* a mask of types */
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuDeviceGetAttribute", r);
}

gpuarena_status_t ga_cuda_can_access_peer(int device, int peer, bool *can)
{
    CUdevice d, e;
    gpuarena_status_t st = get_device(device, &d);
    if (st == GPUARENA_SUCCESS)
        st = get_device(peer, &e);
    if (st != GPUARENA_SUCCESS)
        return st;
    int v = 0;
    CUresult r = cu.cuDeviceCanAccessPeer(&v, d, e);
    if (r != CUDA_SUCCESS)
        return fail("cuDeviceCanAccessPeer", r);
    *can = v != 0;
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Contexts. */

gpuarena_status_t ga_cuda_primary_retain(int device, void **ctx)
{
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUcontext c;
    CUresult r = cu.cuDevicePrimaryCtxRetain(&c, d);
    if (r != CUDA_SUCCESS)
        return fail("cuDevicePrimaryCtxRetain", r);
    *ctx = c;
    return GPUARENA_SUCCESS;
}

void ga_cuda_primary_release(int device)
{
    CUdevice d;
    /* At exit the driver may be shut down already: nothing to report. */
    if (load_status == GPUARENA_SUCCESS && cu.cuDeviceGet(&d, device) == CUDA_SUCCESS)
        cu.cuDevicePrimaryCtxRelease(d);
}

gpuarena_status_t ga_cuda_ctx_id(void *ctx, uint64_t *id)
{
    unsigned long long v;
    CUresult r = cu.cuCtxGetId((CUcontext)ctx, &v);
    if (r != CUDA_SUCCESS)
        return fail("cuCtxGetId", r);
    *id = v;
    return GPUARENA_SUCCESS;
}

/* The bodies of ga_cuda_enter and ga_cuda_leave, inline for the hot path
 * of the default streams (ga_cuda_default_stream_check). */
static inline gpuarena_status_t scope_enter(void *ctx, ga_cuda_scope_t *scope)
{
    CUcontext cur = NULL;
    scope->pushed = false;
    CUresult r = cu.cuCtxGetCurrent(&cur);
    if (r != CUDA_SUCCESS)
        return fail("cuCtxGetCurrent", r);
    if (cur == (CUcontext)ctx)
        return GPUARENA_SUCCESS;
    r = cu.cuCtxPushCurrent((CUcontext)ctx);
    if (r != CUDA_SUCCESS)
        return fail("cuCtxPushCurrent", r);
    scope->pushed = true;
    return GPUARENA_SUCCESS;
}

static inline void scope_leave(ga_cuda_scope_t *scope)
{
    if (scope->pushed) {
        CUcontext c;
        cu.cuCtxPopCurrent(&c);
        scope->pushed = false;
    }
}

gpuarena_status_t ga_cuda_enter(void *ctx, ga_cuda_scope_t *scope)
{
    return scope_enter(ctx, scope);
}

void ga_cuda_leave(ga_cuda_scope_t *scope)
{
    scope_leave(scope);
}

gpuarena_status_t ga_cuda_set_current(void *ctx)
{
    CUresult r = cu.cuCtxSetCurrent((CUcontext)ctx);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuCtxSetCurrent", r);
}

/* ---------------------------------------------------------------------- */
/* Streams. */

static bool is_default_stream(void *stream)
{
    return stream == NULL || stream == GA_CUDA_STREAM_LEGACY || stream == GA_CUDA_STREAM_PER_THREAD;
}

/* The streams this thread named last, each with the context it was found
 * in and its id, so that the hot path (an alloc and a free on the stream
 * the program keeps using) makes no driver call to name the stream.
 *
 * A handle is only reused by the driver after the stream it named was
 * destroyed and its queued work had completed (cuStreamDestroy releases
 * the stream's resources once its work is done).  So a cached entry whose
 * handle now names a newer stream only makes that stream inherit the old
 * stream's pool, all of whose frees have long passed: reuse stays safe.
 * What the cache cannot notice is a recycled handle that now names a
 * stream of another context; such a program error is then caught by the
 * next event operation on it instead of here (gpuarena(7), "Device memory").
 * The per-thread default stream has one id per thread and context. */
#define LAST_STREAMS 4
static _Thread_local struct {
    struct {
        void *stream;
        void *ctx;
        uint64_t id;
    } e[LAST_STREAMS];
    unsigned next;
    void *pt_ctx; /* context of the per-thread stream's id below */
    uint64_t pt_id;
} last_streams __attribute__((tls_model("initial-exec")));

/* STREAM's id in CTX when it is among this thread's last streams. */
static inline bool remembered(void *ctx, void *stream, uint64_t *id)
{
    for (unsigned i = 0; i < LAST_STREAMS; i++) {
        if (last_streams.e[i].stream == stream && last_streams.e[i].ctx == ctx) {
            *id = last_streams.e[i].id;
            return true;
        }
    }
    return false;
}

bool ga_cuda_stream_id_cached(void *ctx, void *stream, uint64_t *id)
{
    if (stream == GA_CUDA_STREAM_PER_THREAD) {
        if (!ctx || last_streams.pt_ctx != ctx)
            return false;
        *id = last_streams.pt_id;
        return true;
    }
    return !is_default_stream(stream) && remembered(ctx, stream, id);
}

/* cuStreamGetCtx may be asked of a stream being captured, in every
 * capture mode: it answers, and the capture goes on (measured on an H200,
 * CUDA 13; cuStreamGetId and cuStreamGetDevice instead fail with 900 and
 * invalidate it). */
static gpuarena_status_t foreign_stream(void *stream)
{
    return ga_error(GPUARENA_ERR_INVALID_STREAM,
                    "stream %p belongs to another CUDA context or device than the arena's (the "
                    "device's primary context)",
                    stream);
}

gpuarena_status_t ga_cuda_stream_owner_check(void *ctx, void *stream)
{
    if (is_default_stream(stream))
        return GPUARENA_SUCCESS;
    CUcontext owner = NULL;
    CUresult r = cu.cuStreamGetCtx((CUstream)stream, &owner);
    if (r != CUDA_SUCCESS)
        return stream_fail("cuStreamGetCtx", stream, r);
    return owner == (CUcontext)ctx ? GPUARENA_SUCCESS : foreign_stream(stream);
}

gpuarena_status_t ga_cuda_stream_id(void *ctx, void *stream, uint64_t *id)
{
    bool per_thread = stream == GA_CUDA_STREAM_PER_THREAD;
    unsigned long long v;
    CUresult r = cu.cuStreamGetId((CUstream)stream, &v);
    if (r != CUDA_SUCCESS)
        return stream_fail("cuStreamGetId", stream, r);
    if (per_thread) {
        last_streams.pt_ctx = ctx;
        last_streams.pt_id = v;
    } else if (!is_default_stream(stream)) {
        gpuarena_status_t st = ga_cuda_stream_owner_check(ctx, stream);
        if (st != GPUARENA_SUCCESS)
            return st;
        unsigned i = last_streams.next++ % LAST_STREAMS;
        last_streams.e[i].stream = stream;
        last_streams.e[i].ctx = ctx;
        last_streams.e[i].id = v;
    }
    *id = v;
    return GPUARENA_SUCCESS;
}

/* The body of ga_cuda_stream_check, inline for the hot paths below. */
static inline gpuarena_status_t capture_check(void *stream)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = cu.cuStreamIsCapturing((CUstream)stream, &cs);
    if (r != CUDA_SUCCESS)
        return stream_fail("cuStreamIsCapturing", stream, r);
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return ga_error(GPUARENA_ERR_STREAM_CAPTURE,
                        "stream %p is being captured into a CUDA graph (%s): gpuarena does not "
                        "allocate or free on a capturing stream; allocate before the capture "
                        "begins",
                        stream, cs == CU_STREAM_CAPTURE_STATUS_ACTIVE ? "active" : "invalidated");
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_stream_check(void *stream)
{
    return capture_check(stream);
}

/* The legacy stream's id of each context an arena was made in, by the
 * context's id (cuCtxGetId: unique for the life of the program, where a
 * handle may be reused by a context made later).  An arena made while a
 * blocking stream of its device is being captured, as a CUDA graph pool's
 * is (graphpool.c) when CuPy captures on a blocking stream, cannot ask
 * the driver: the legacy stream may not be used then
 * (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).  It takes the id that the
 * device's default arena, made before, asked for; with none made before,
 * it is refused (GPUARENA_ERR_STREAM_CAPTURE) and the capture goes on. */
#define LEGACY_IDS 64
static struct {
    unsigned long long ctx, id;
} legacy_ids[LEGACY_IDS];
static unsigned n_legacy_ids;
static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;

gpuarena_status_t ga_cuda_legacy_id(void *ctx, uint64_t *id)
{
    unsigned long long c = 0, v = 0;
    CUresult r = cu.cuCtxGetId((CUcontext)ctx, &c);
    if (r != CUDA_SUCCESS)
        return fail("cuCtxGetId", r);
    bool known = false;
    pthread_mutex_lock(&legacy_lock);
    unsigned n = n_legacy_ids < LEGACY_IDS ? n_legacy_ids : LEGACY_IDS;
    for (unsigned i = 0; i < n; i++) {
        if (legacy_ids[i].ctx == c) {
            v = legacy_ids[i].id;
            known = true;
            break;
        }
    }
    pthread_mutex_unlock(&legacy_lock);
    if (!known) {
        /* Asking for the id while a blocking stream is captured fails and
         * invalidates that capture (measured on an H200, CUDA 13); asking
         * whether the legacy stream may be used fails alone. */
        gpuarena_status_t st = capture_check(GA_CUDA_STREAM_LEGACY);
        if (st != GPUARENA_SUCCESS)
            return st;
        r = cu.cuStreamGetId(CU_STREAM_LEGACY, &v);
        if (r != CUDA_SUCCESS)
            return stream_fail("cuStreamGetId", GA_CUDA_STREAM_LEGACY, r);
        pthread_mutex_lock(&legacy_lock);
        unsigned i = n_legacy_ids++ % LEGACY_IDS; /* the oldest goes */
        legacy_ids[i].ctx = c;
        legacy_ids[i].id = v;
        pthread_mutex_unlock(&legacy_lock);
    }
    *id = v;
    return GPUARENA_SUCCESS;
}

static CUstreamCaptureMode relax(void);
static void unrelax(CUstreamCaptureMode m);

bool ga_cuda_capture_graph(void *stream, uint64_t *id, void **graph)
{
    if (!cu.cuStreamGetCaptureInfo || load_status != GPUARENA_SUCCESS)
        return false;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t v = 0;
    CUgraph g = NULL;
    if (cu.cuStreamGetCaptureInfo((CUstream)stream, &cs, &v, graph ? &g : NULL, NULL, NULL) !=
            CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return false;
    *id = v;
    if (graph)
        *graph = g;
    return true;
}

bool ga_cuda_capture_over(void *stream, uint64_t id)
{
    /* Not in a child made by fork(2): no driver call there at all. */
    if (!cu.cuStreamGetCaptureInfo || load_status != GPUARENA_SUCCESS)
        return false;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t v = 0;
    /* A handle the driver refuses is no stream of a capture under way
     * (a capturing stream cannot be destroyed): the capture is over. */
    if (cu.cuStreamGetCaptureInfo((CUstream)stream, &cs, &v, NULL, NULL, NULL) != CUDA_SUCCESS)
        return true;
    return cs == CU_STREAM_CAPTURE_STATUS_NONE || v != id;
}

bool ga_cuda_capture_id(void *stream, uint64_t *id)
{
    return ga_cuda_capture_graph(stream, id, NULL);
}

gpuarena_status_t ga_cuda_graph_on_destroy(void *graph, void (*fn)(void *), void *arg)
{
    if (!cu.cuUserObjectCreate || !cu.cuGraphRetainUserObject)
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "the CUDA driver has no user objects (cuUserObjectCreate): the end of a "
                        "graph's life cannot be known");
    /* Made during the capture of GRAPH, by its thread or another: in
     * relaxed mode, as every call that is not about the capturing stream
     * (see relax below). */
    CUstreamCaptureMode m = relax();
    CUuserObject obj;
    CUresult r = cu.cuUserObjectCreate(&obj, arg, fn, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    /* The graph takes the one reference over: FN runs once the graph and
     * every executable graph made from it are destroyed. */
    CUresult rr = r == CUDA_SUCCESS ? cu.cuGraphRetainUserObject((CUgraph)graph, obj, 1,
                                                                 CU_GRAPH_USER_OBJECT_MOVE)
                                    : r;
    unrelax(m);
    if (r != CUDA_SUCCESS)
        return fail("cuUserObjectCreate", r);
    r = rr;
    if (r != CUDA_SUCCESS)
        /* The object is left, not released: its release would run FN
         * on the driver's thread at a time of its own, after the caller
         * has given ARG up.  A few bytes, on a failure. */
        return fail("cuGraphRetainUserObject", r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_stream_resolve(void *ctx, void *stream, uint64_t *id)
{
    gpuarena_status_t st = capture_check(stream);
    if (st == GPUARENA_ERR_STREAM_CAPTURE) {
        /* Another device's stream is refused as such first; where the
         * driver cannot say, the capture's refusal and message stand. */
        CUcontext owner = NULL;
        if (!remembered(ctx, stream, id) &&
            cu.cuStreamGetCtx((CUstream)stream, &owner) == CUDA_SUCCESS && owner != (CUcontext)ctx)
            return foreign_stream(stream);
        return st;
    }
    if (st != GPUARENA_SUCCESS || remembered(ctx, stream, id))
        return st;
    return ga_cuda_stream_id(ctx, stream, id);
}

gpuarena_status_t ga_cuda_default_stream_check(void *ctx, void *stream)
{
    ga_cuda_scope_t sc;
    gpuarena_status_t st = scope_enter(ctx, &sc);
    if (st != GPUARENA_SUCCESS)
        return st;
    st = capture_check(stream);
    scope_leave(&sc);
    return st;
}

/* Made in the default (global) capture mode, cuMemAlloc, cuMemFree,
 * cuMemHostRegister, cuMemAdvise, cuEventQuery, cuEventSynchronize,
 * cuStreamQuery and cuStreamSynchronize invalidate a capture that another
 * thread has in progress, whatever stream they name (measured on an H100,
 * CUDA 13: ../shared/notes/cuda-driver.md); in relaxed mode they do not.
 * gpuarena never makes them on a capturing stream (stream_check refuses
 * first), and switches the calling thread to relaxed mode around them
 * (about 18 ns a switch and back), so that a segment map, the poll of a
 * pending free or the idle check of a pinned free does not break another
 * thread's capture.  cuCtxSynchronize breaks it even in relaxed mode. */
static CUstreamCaptureMode relax(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (cu.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        m = CU_STREAM_CAPTURE_MODE_RELAXED;
    return m;
}

static void unrelax(CUstreamCaptureMode m)
{
    if (m != CU_STREAM_CAPTURE_MODE_RELAXED)
        cu.cuThreadExchangeStreamCaptureMode(&m);
}

gpuarena_status_t ga_cuda_ctx_sync(void)
{
    CUresult r = cu.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuCtxSynchronize", r);
}

gpuarena_status_t ga_cuda_stream_sync(void *stream)
{
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuStreamSynchronize((CUstream)stream);
    unrelax(m);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamSynchronize", stream, r);
}

/* ---------------------------------------------------------------------- */
/* Events. */

gpuarena_status_t ga_cuda_event_create(void **ev)
{
    CUevent e;
    CUresult r = cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return fail("cuEventCreate", r);
    *ev = e;
    return GPUARENA_SUCCESS;
}

void ga_cuda_event_destroy(void *ev)
{
    if (load_status == GPUARENA_SUCCESS && ev)
        cu.cuEventDestroy((CUevent)ev);
}

gpuarena_status_t ga_cuda_event_record(void *ev, void *stream)
{
    CUresult r = cu.cuEventRecord((CUevent)ev, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuEventRecord", stream, r);
}

gpuarena_status_t ga_cuda_event_query(void *ev)
{
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuEventQuery((CUevent)ev);
    unrelax(m);
    if (r == CUDA_SUCCESS)
        return GPUARENA_SUCCESS;
    if (r == CUDA_ERROR_NOT_READY)
        return GA_CUDA_NOT_READY;
    return fail("cuEventQuery", r);
}

gpuarena_status_t ga_cuda_event_sync(void *ev)
{
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuEventSynchronize((CUevent)ev);
    unrelax(m);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuEventSynchronize", r);
}

gpuarena_status_t ga_cuda_stream_wait_event(void *stream, void *ev)
{
    CUresult r = cu.cuStreamWaitEvent((CUstream)stream, (CUevent)ev, 0);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamWaitEvent", stream, r);
}

/* ---------------------------------------------------------------------- */
/* Device memory. */

gpuarena_status_t ga_cuda_mem_alloc(size_t size, uint64_t *dptr)
{
    CUdeviceptr p;
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuMemAlloc(&p, size);
    unrelax(m);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemAlloc of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    *dptr = p;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_mem_free(uint64_t dptr)
{
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuMemFree((CUdeviceptr)dptr);
    unrelax(m);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemFree", r);
}

gpuarena_status_t ga_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    size_t f = 0, t = 0;
    CUresult r = cu.cuMemGetInfo(&f, &t);
    if (r != CUDA_SUCCESS)
        return fail("cuMemGetInfo", r);
    if (free_bytes)
        *free_bytes = f;
    if (total_bytes)
        *total_bytes = t;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_memset_d8_async(uint64_t dptr, unsigned char value, size_t size,
                                          void *stream)
{
    CUresult r = cu.cuMemsetD8Async((CUdeviceptr)dptr, value, size, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : queue_fail("cuMemsetD8Async", stream, r);
}

gpuarena_status_t ga_cuda_memcpy_htod(uint64_t dst, const void *src, size_t size)
{
    CUresult r = cu.cuMemcpyHtoD((CUdeviceptr)dst, src, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemcpyHtoD", r);
}

gpuarena_status_t ga_cuda_memcpy_dtoh(void *dst, uint64_t src, size_t size)
{
    CUresult r = cu.cuMemcpyDtoH(dst, (CUdeviceptr)src, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemcpyDtoH", r);
}

/* ---------------------------------------------------------------------- */
/* Virtual memory management. */

/* EXPORTABLE: the allocation may be exported as a POSIX file descriptor
 * (cuMemExportToShareableHandle), which another process on the node
 * imports (cuMemImportFromShareableHandle): how CUDA-aware MPI libraries
 * reach virtual-memory allocations, which cuIpcGetMemHandle refuses. */
static void device_prop(CUdevice d, bool exportable, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes =
        exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = (int)d;
}

/* The granularity of allocations like PROP: the recommended or minimum. */
static gpuarena_status_t granularity(const CUmemAllocationProp *prop, bool recommended,
                                     size_t *granule)
{
    CUresult r = cu.cuMemGetAllocationGranularity(granule, prop,
                                                  recommended ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
                                                              : CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemGetAllocationGranularity", r);
}

gpuarena_status_t ga_cuda_vmm_granularity(int device, bool recommended, size_t *granule)
{
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUmemAllocationProp prop;
    device_prop(d, false, &prop);
    return granularity(&prop, recommended, granule);
}

gpuarena_status_t ga_cuda_vmm_reserve(size_t size, size_t alignment, uint64_t *va)
{
    CUdeviceptr p;
    CUresult r = cu.cuMemAddressReserve(&p, size, alignment, 0, 0);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemAddressReserve of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    *va = p;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_free(uint64_t va, size_t size)
{
    CUresult r = cu.cuMemAddressFree((CUdeviceptr)va, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemAddressFree", r);
}

/* Map H at VA, or give H back; *HANDLE gets H once mapped, and also when
 * the map failed and the release of H did too (ga_cuda_vmm_create_map). */
static gpuarena_status_t map_or_release(uint64_t va, size_t size, CUmemGenericAllocationHandle h,
                                        uint64_t *handle)
{
    CUresult r = cu.cuMemMap((CUdeviceptr)va, size, 0, h, 0);
    if (r != CUDA_SUCCESS) {
        /* A handle that will not release either goes back to the caller
         * to release later: dropped here, it was held until exit. */
        if (cu.cuMemRelease(h) != CUDA_SUCCESS)
            *handle = h;
        return fail("cuMemMap", r);
    }
    *handle = h;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_create_map(int device, uint64_t va, size_t size, bool exportable,
                                         uint64_t *handle, bool *create_failed)
{
    *create_failed = false;
    *handle = 0;
    CUdevice d;
    CUresult r = cu.cuDeviceGet(&d, device);
    if (r != CUDA_SUCCESS)
        return fail("cuDeviceGet", r);
    CUmemAllocationProp prop;
    device_prop(d, exportable, &prop);
    CUmemGenericAllocationHandle h;
    r = cu.cuMemCreate(&h, size, &prop, 0);
    *create_failed = r != CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemCreate of %zu bytes on device %d%s: %s (%d)", size,
                        device, exportable ? ", exportable as a file descriptor" : "",
                        ga_cuda_result_name((int)r), (int)r);
    return map_or_release(va, size, h, handle);
}

/* DESC[0..COUNT-1]: read-write access for the COUNT devices of DEVICES
 * (1 to GA_CUDA_MAX_ACCESS), for cuMemSetAccess. */
static gpuarena_status_t device_access(CUmemAccessDesc *desc, const int *devices, int count)
{
    if (count <= 0 || count > GA_CUDA_MAX_ACCESS)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "cuMemSetAccess: %d devices", count);
    for (int i = 0; i < count; i++) {
        CUdevice d;
        CUresult r = cu.cuDeviceGet(&d, devices[i]);
        if (r != CUDA_SUCCESS)
            return fail("cuDeviceGet", r);
        memset(&desc[i], 0, sizeof desc[i]);
        desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[i].location.id = (int)d;
        desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_set_access(uint64_t va, size_t size, const int *devices, int count)
{
    CUmemAccessDesc desc[GA_CUDA_MAX_ACCESS];
    gpuarena_status_t st = device_access(desc, devices, count);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuMemSetAccess((CUdeviceptr)va, size, desc, (size_t)count);
    /* The devices were asked of the driver first (cuDeviceCanAccessPeer):
     * an invalid one here is a peer it will not open memory to after all,
     * not a device ordinal of the caller's. */
    if (r == CUDA_ERROR_INVALID_DEVICE && count > 1)
        return ga_error(GPUARENA_ERR_DRIVER,
                        "cuMemSetAccess of %zu bytes for %d devices: %s (%d): the driver will "
                        "not open the memory to every peer it said could reach it; "
                        "peer_access = false opens it to the arena's device alone",
                        size, count, ga_cuda_result_name((int)r), (int)r);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemSetAccess of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_unmap(uint64_t va, size_t size)
{
    CUresult r = cu.cuMemUnmap((CUdeviceptr)va, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemUnmap", r);
}

gpuarena_status_t ga_cuda_vmm_release(uint64_t handle)
{
    CUresult r = cu.cuMemRelease((CUmemGenericAllocationHandle)handle);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemRelease", r);
}

gpuarena_status_t ga_cuda_vmm_unmap_release(uint64_t va, size_t size, uint64_t handle)
{
    gpuarena_status_t st = ga_cuda_vmm_unmap(va, size);
    return st == GPUARENA_SUCCESS ? ga_cuda_vmm_release(handle) : st;
}

static void host_prop(int node, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop->location.type = node >= 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
    prop->location.id = node >= 0 ? node : 0;
}

gpuarena_status_t ga_cuda_vmm_host_granularity(int node, bool recommended, size_t *granule)
{
    CUmemAllocationProp prop;
    host_prop(node, &prop);
    return granularity(&prop, recommended, granule);
}

gpuarena_status_t ga_cuda_vmm_host_create_map(int node, uint64_t va, size_t size, uint64_t *handle)
{
    *handle = 0;
    CUmemAllocationProp prop;
    host_prop(node, &prop);
    CUmemGenericAllocationHandle h;
    CUresult r = cu.cuMemCreate(&h, size, &prop, 0);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemCreate of %zu bytes on host NUMA node %d: %s (%d)",
                        size, node, ga_cuda_result_name((int)r), (int)r);
    return map_or_release(va, size, h, handle);
}

gpuarena_status_t ga_cuda_vmm_host_set_access(uint64_t va, size_t size, const int *devices,
                                              int count)
{
    CUmemAccessDesc desc[1 + GA_CUDA_MAX_ACCESS]; /* the host, then the devices */
    memset(&desc[0], 0, sizeof desc[0]);
    desc[0].location.type = CU_MEM_LOCATION_TYPE_HOST;
    desc[0].location.id = 0;
    desc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    gpuarena_status_t st = device_access(desc + 1, devices, count);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUresult r = cu.cuMemSetAccess((CUdeviceptr)va, size, desc, (size_t)count + 1);
    if (r != CUDA_SUCCESS)
        return ga_error(
            status_of(r), "cuMemSetAccess of %zu bytes (the host and %d device%s from %d): %s (%d)",
            size, count, count == 1 ? "" : "s", devices[0], ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Pinned and managed memory. */

gpuarena_status_t ga_cuda_host_register(void *ptr, size_t size, bool device_map)
{
    unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | (device_map ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuMemHostRegister(ptr, size, flags);
    unrelax(m);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemHostRegister of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_host_unregister(void *ptr)
{
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuMemHostUnregister(ptr);
    unrelax(m);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemHostUnregister", r);
}

gpuarena_status_t ga_cuda_mem_alloc_managed(size_t size, bool attach_global, uint64_t *dptr)
{
    CUdeviceptr p;
    CUstreamCaptureMode m = relax();
    CUresult r =
        cu.cuMemAllocManaged(&p, size, attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST);
    unrelax(m);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemAllocManaged of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    *dptr = p;
    return GPUARENA_SUCCESS;
}

static CUmemLocation location_of(int where)
{
    CUmemLocation loc;
    memset(&loc, 0, sizeof loc);
    if (where == GPUARENA_CPU) {
        loc.type = CU_MEM_LOCATION_TYPE_HOST;
        loc.id = 0;
    } else if (where <= GA_CUDA_LOCATION_HOST_NUMA(0)) {
        loc.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        loc.id = GA_CUDA_LOCATION_HOST_NUMA(0) - where;
    } else {
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = where;
    }
    return loc;
}

gpuarena_status_t ga_cuda_mem_advise(uint64_t dptr, size_t size, ga_cuda_advice_t advice,
                                     int location)
{
    if (!cu.cuMemAdvise)
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "cuMemAdvise with a location needs a CUDA 12.2 driver or newer");
    CUstreamCaptureMode m = relax();
    CUresult r =
        cu.cuMemAdvise((CUdeviceptr)dptr, size, (CUmem_advise)advice, location_of(location));
    unrelax(m);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemAdvise", r);
}

gpuarena_status_t ga_cuda_mem_prefetch(uint64_t dptr, size_t size, int location, void *stream)
{
    if (!cu.cuMemPrefetchAsync)
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "cuMemPrefetchAsync with a location needs a CUDA 12.2 driver or newer");
    CUresult r =
        cu.cuMemPrefetchAsync((CUdeviceptr)dptr, size, location_of(location), 0, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : queue_fail("cuMemPrefetchAsync", stream, r);
}

/* ---------------------------------------------------------------------- */
/* For tests, tools and benchmarks. */

#define NEED(fn)                                                                                   \
    do {                                                                                           \
        gpuarena_status_t st_ = ga_cuda_load();                                                    \
        if (st_ != GPUARENA_SUCCESS)                                                               \
            return st_;                                                                            \
        if (!cu.fn)                                                                                \
            return ga_error(GPUARENA_ERR_NOT_SUPPORTED, "the CUDA driver lacks " #fn);             \
    } while (0)

gpuarena_status_t ga_cuda_stream_create(bool non_blocking, void **stream)
{
    NEED(cuStreamCreate);
    CUstream s;
    CUresult r = cu.cuStreamCreate(&s, non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT);
    if (r != CUDA_SUCCESS)
        return fail("cuStreamCreate", r);
    *stream = s;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_stream_destroy(void *stream)
{
    NEED(cuStreamDestroy);
    CUresult r = cu.cuStreamDestroy((CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamDestroy", stream, r);
}

gpuarena_status_t ga_cuda_ctx_create(int device, void **ctx)
{
    NEED(cuCtxCreate);
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUcontext c, popped;
    CUresult r = cu.cuCtxCreate(&c, 0, d);
    if (r != CUDA_SUCCESS)
        return fail("cuCtxCreate", r);
    cu.cuCtxPopCurrent(&popped); /* cuCtxCreate made it current */
    *ctx = c;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_ctx_destroy(void *ctx)
{
    NEED(cuCtxDestroy);
    CUresult r = cu.cuCtxDestroy((CUcontext)ctx);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuCtxDestroy", r);
}

gpuarena_status_t ga_cuda_capture_begin(void *stream)
{
    NEED(cuStreamBeginCapture);
    CUresult r = cu.cuStreamBeginCapture((CUstream)stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamBeginCapture", stream, r);
}

gpuarena_status_t ga_cuda_capture_end(void *stream)
{
    NEED(cuStreamEndCapture);
    CUgraph g = NULL;
    CUresult r = cu.cuStreamEndCapture((CUstream)stream, &g);
    if (g && cu.cuGraphDestroy)
        cu.cuGraphDestroy(g);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamEndCapture", stream, r);
}

/* ---------------------------------------------------------------------- */
/* Managed range attributes, driver pinned memory, the driver's pool,
 * stream-ordered copies (managed provider, tests and benchmarks). */

gpuarena_status_t ga_cuda_mem_range_attr(uint64_t dptr, size_t size, ga_cuda_range_attr_t attr,
                                         int *values, size_t count)
{
    NEED(cuMemRangeGetAttribute);
    if (!values || count == 0)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "cuMemRangeGetAttribute: no room");
    CUresult r = cu.cuMemRangeGetAttribute(values, count * sizeof(int), (CUmem_range_attribute)attr,
                                           (CUdeviceptr)dptr, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemRangeGetAttribute", r);
}

gpuarena_status_t ga_cuda_host_alloc(size_t size, void **ptr)
{
    NEED(cuMemHostAlloc);
    CUresult r = cu.cuMemHostAlloc(ptr, size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemHostAlloc of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_host_free(void *ptr)
{
    NEED(cuMemFreeHost);
    CUresult r = cu.cuMemFreeHost(ptr);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemFreeHost", r);
}

gpuarena_status_t ga_cuda_pool_create(int device, uint64_t release_threshold, bool exportable,
                                      void **pool)
{
    NEED(cuMemPoolCreate);
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes =
        exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)d;
    CUmemoryPool p;
    CUresult r = cu.cuMemPoolCreate(&p, &props);
    if (r != CUDA_SUCCESS)
        return fail("cuMemPoolCreate", r);
    cuuint64_t v = release_threshold;
    r = cu.cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);
    if (r != CUDA_SUCCESS) {
        cu.cuMemPoolDestroy(p);
        return fail("cuMemPoolSetAttribute", r);
    }
    *pool = p;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_pool_destroy(void *pool)
{
    NEED(cuMemPoolDestroy);
    CUresult r = cu.cuMemPoolDestroy((CUmemoryPool)pool);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemPoolDestroy", r);
}

gpuarena_status_t ga_cuda_pool_trim(void *pool, size_t keep)
{
    NEED(cuMemPoolTrimTo);
    CUresult r = cu.cuMemPoolTrimTo((CUmemoryPool)pool, keep);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemPoolTrimTo", r);
}

gpuarena_status_t ga_cuda_mem_alloc_from_pool(size_t size, void *pool, void *stream, uint64_t *dptr)
{
    NEED(cuMemAllocFromPoolAsync);
    CUdeviceptr p;
    CUresult r = cu.cuMemAllocFromPoolAsync(&p, size, (CUmemoryPool)pool, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemAllocFromPoolAsync of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    *dptr = p;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_mem_alloc_async(size_t size, void *stream, uint64_t *dptr)
{
    NEED(cuMemAllocAsync);
    CUdeviceptr p;
    CUresult r = cu.cuMemAllocAsync(&p, size, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemAllocAsync of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    *dptr = p;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_mem_free_async(uint64_t dptr, void *stream)
{
    NEED(cuMemFreeAsync);
    CUresult r = cu.cuMemFreeAsync((CUdeviceptr)dptr, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : queue_fail("cuMemFreeAsync", stream, r);
}

static gpuarena_status_t pool_get(CUmemoryPool p, CUmemPool_attribute attr, uint64_t *v)
{
    cuuint64_t x = 0;
    CUresult r = cu.cuMemPoolGetAttribute(p, attr, &x);
    if (r != CUDA_SUCCESS)
        return fail("cuMemPoolGetAttribute", r);
    *v = x;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_pool_usage(void *pool, ga_cuda_pool_usage_t *u)
{
    NEED(cuMemPoolGetAttribute);
    CUmemoryPool p = (CUmemoryPool)pool;
    gpuarena_status_t st = pool_get(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &u->reserved);
    if (st == GPUARENA_SUCCESS)
        st = pool_get(p, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &u->reserved_high);
    if (st == GPUARENA_SUCCESS)
        st = pool_get(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u->used);
    if (st == GPUARENA_SUCCESS)
        st = pool_get(p, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &u->used_high);
    return st;
}

gpuarena_status_t ga_cuda_pool_reset_peaks(void *pool)
{
    NEED(cuMemPoolSetAttribute);
    /* A high-water mark can only be set to 0, which restarts it from the
     * value now. */
    cuuint64_t zero = 0;
    CUresult r =
        cu.cuMemPoolSetAttribute((CUmemoryPool)pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);
    if (r == CUDA_SUCCESS) {
        zero = 0;
        r = cu.cuMemPoolSetAttribute((CUmemoryPool)pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero);
    }
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemPoolSetAttribute", r);
}

gpuarena_status_t ga_cuda_pool_set_reuse(void *pool, bool follow_events, bool opportunistic,
                                         bool internal_dependencies)
{
    NEED(cuMemPoolSetAttribute);
    const struct {
        CUmemPool_attribute attr;
        int value;
    } set[] = {
        {CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, follow_events},
        {CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, opportunistic},
        {CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, internal_dependencies},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        int v = set[i].value;
        CUresult r = cu.cuMemPoolSetAttribute((CUmemoryPool)pool, set[i].attr, &v);
        if (r != CUDA_SUCCESS)
            return fail("cuMemPoolSetAttribute", r);
    }
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_pool_set_access(void *pool, const int *devices, int count)
{
    NEED(cuMemPoolSetAccess);
    CUmemAccessDesc desc[GA_CUDA_MAX_ACCESS];
    if (count <= 0 || count > GA_CUDA_MAX_ACCESS)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "cuMemPoolSetAccess: %d devices", count);
    for (int i = 0; i < count; i++) {
        CUdevice d;
        gpuarena_status_t st = get_device(devices[i], &d);
        if (st != GPUARENA_SUCCESS)
            return st;
        memset(&desc[i], 0, sizeof desc[i]);
        desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[i].location.id = (int)d;
        desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    CUresult r = cu.cuMemPoolSetAccess((CUmemoryPool)pool, desc, (size_t)count);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemPoolSetAccess", r);
}

gpuarena_status_t ga_cuda_memcpy_htod_async(uint64_t dst, const void *src, size_t size,
                                            void *stream)
{
    NEED(cuMemcpyHtoDAsync);
    CUresult r = cu.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, size, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : queue_fail("cuMemcpyHtoDAsync", stream, r);
}

gpuarena_status_t ga_cuda_memcpy_dtoh_async(void *dst, uint64_t src, size_t size, void *stream)
{
    NEED(cuMemcpyDtoHAsync);
    CUresult r = cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, size, (CUstream)stream);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : queue_fail("cuMemcpyDtoHAsync", stream, r);
}

gpuarena_status_t ga_cuda_memcpy_dtod(uint64_t dst, uint64_t src, size_t size)
{
    NEED(cuMemcpyDtoD);
    CUresult r = cu.cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemcpyDtoD", r);
}

gpuarena_status_t ga_cuda_memset_d8(uint64_t dptr, unsigned char value, size_t size)
{
    NEED(cuMemsetD8);
    CUresult r = cu.cuMemsetD8((CUdeviceptr)dptr, value, size);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuMemsetD8", r);
}

gpuarena_status_t ga_cuda_stream_query(void *stream)
{
    NEED(cuStreamQuery);
    CUstreamCaptureMode m = relax();
    CUresult r = cu.cuStreamQuery((CUstream)stream);
    unrelax(m);
    if (r == CUDA_SUCCESS)
        return GPUARENA_SUCCESS;
    if (r == CUDA_ERROR_NOT_READY)
        return GA_CUDA_NOT_READY;
    return stream_fail("cuStreamQuery", stream, r);
}

gpuarena_status_t ga_cuda_stream_flags(void *stream, unsigned *flags)
{
    NEED(cuStreamGetFlags);
    CUresult r = cu.cuStreamGetFlags((CUstream)stream, flags);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : stream_fail("cuStreamGetFlags", stream, r);
}

/* ---------------------------------------------------------------------- */
/* Kernels and timing events (for benchmarks): PTX loaded and compiled by
 * the driver for the GPU at hand, launches on a stream, events that
 * measure the time between two points of a stream. */

gpuarena_status_t ga_cuda_memset_d32_async(uint64_t dptr, uint32_t value, size_t count,
                                           void *stream)
{
    NEED(cuMemsetD32Async);
    CUresult r = cu.cuMemsetD32Async((CUdeviceptr)dptr, value, count, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemsetD32Async of %zu words at %#llx: %s (%d)", count,
                        (unsigned long long)dptr, ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_memcpy_dtod_async(uint64_t dst, uint64_t src, size_t size, void *stream)
{
    NEED(cuMemcpyDtoDAsync);
    CUresult r = cu.cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, size, (CUstream)stream);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuMemcpyDtoDAsync of %zu bytes: %s (%d)", size,
                        ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_timing_event_create(void **ev)
{
    NEED(cuEventCreate);
    CUevent e;
    CUresult r = cu.cuEventCreate(&e, CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS)
        return fail("cuEventCreate (timing)", r);
    *ev = e;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_event_elapsed(void *start, void *end, float *ms)
{
    gpuarena_status_t st = ga_cuda_load();
    if (st != GPUARENA_SUCCESS)
        return st;
    if (!cu.cuEventElapsedTime) /* asked for at 12.8, the version of the _v2 form */
        return ga_error(GPUARENA_ERR_NOT_SUPPORTED,
                        "the CUDA driver lacks cuEventElapsedTime_v2 (CUDA 12.8 or newer)");
    CUresult r = cu.cuEventElapsedTime(ms, (CUevent)start, (CUevent)end);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuEventElapsedTime", r);
}

gpuarena_status_t ga_cuda_module_load(const char *image, void **module)
{
    NEED(cuModuleLoadDataEx);
    /* The JIT's error log says which line of the PTX it refused. */
    char log[1024] = "";
    CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof log};
    CUmodule m;
    CUresult r = cu.cuModuleLoadDataEx(&m, image, 2, opt, val);
    if (r != CUDA_SUCCESS) {
        log[sizeof log - 1] = 0;
        const char *why = "";
        if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
            why = " (the PTX's .version is newer than this driver accepts: regenerate it "
                  "with an older nvcc or update the driver)";
        else if (r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND || r == CUDA_ERROR_JIT_COMPILATION_DISABLED)
            why = " (the driver cannot compile PTX here)";
        return ga_error(status_of(r), "cuModuleLoadDataEx: %s (%d)%s%s%.300s",
                        ga_cuda_result_name((int)r), (int)r, why, log[0] ? "; JIT log: " : "", log);
    }
    *module = m;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_module_unload(void *module)
{
    NEED(cuModuleUnload);
    CUresult r = cu.cuModuleUnload((CUmodule)module);
    return r == CUDA_SUCCESS ? GPUARENA_SUCCESS : fail("cuModuleUnload", r);
}

gpuarena_status_t ga_cuda_function_get(void *module, const char *name, void **fn)
{
    NEED(cuModuleGetFunction);
    CUfunction f;
    CUresult r = cu.cuModuleGetFunction(&f, (CUmodule)module, name);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r), "cuModuleGetFunction(\"%s\"): %s (%d)", name,
                        ga_cuda_result_name((int)r), (int)r);
    *fn = f;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_launch(void *fn, unsigned grid, unsigned block, unsigned shared_bytes,
                                 void *stream, void **args)
{
    NEED(cuLaunchKernel);
    CUresult r = cu.cuLaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, shared_bytes,
                                   (CUstream)stream, args, NULL);
    if (r != CUDA_SUCCESS)
        return ga_error(status_of(r),
                        "cuLaunchKernel (%u blocks of %u threads, stream %p): %s (%d)", grid, block,
                        stream, ga_cuda_result_name((int)r), (int)r);
    return GPUARENA_SUCCESS;
}

/* Tests: how another process reaches an exportable allocation. */
gpuarena_status_t ga_cuda_vmm_export_fd(uint64_t ptr, int *fd, uint64_t *base, size_t *size)
{
    NEED(cuMemRetainAllocationHandle);
    NEED(cuMemExportToShareableHandle);
    NEED(cuMemGetAddressRange);
    CUdeviceptr b;
    size_t n;
    CUresult r = cu.cuMemGetAddressRange(&b, &n, (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS)
        return fail("cuMemGetAddressRange", r);
    CUmemGenericAllocationHandle h;
    r = cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return fail("cuMemRetainAllocationHandle", r);
    int f = -1;
    r = cu.cuMemExportToShareableHandle(&f, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    cu.cuMemRelease(h); /* the retained reference only: the mapping keeps its own */
    if (r != CUDA_SUCCESS)
        return fail("cuMemExportToShareableHandle", r);
    *fd = f;
    *base = b;
    *size = n;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_import_fd(int device, int fd, size_t size, uint64_t *ptr)
{
    NEED(cuMemImportFromShareableHandle);
    CUmemGenericAllocationHandle h;
    CUresult r = cu.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS)
        return fail("cuMemImportFromShareableHandle", r);
    uint64_t va = 0;
    gpuarena_status_t st = ga_cuda_vmm_reserve(size, 0, &va);
    if (st != GPUARENA_SUCCESS) {
        cu.cuMemRelease(h);
        return st;
    }
    r = cu.cuMemMap((CUdeviceptr)va, size, 0, h, 0);
    cu.cuMemRelease(h); /* the mapping holds the allocation from here */
    if (r != CUDA_SUCCESS) {
        ga_cuda_vmm_free(va, size);
        return fail("cuMemMap", r);
    }
    st = ga_cuda_vmm_set_access(va, size, &device, 1);
    if (st != GPUARENA_SUCCESS) {
        cu.cuMemUnmap((CUdeviceptr)va, size);
        ga_cuda_vmm_free(va, size);
        return st;
    }
    *ptr = va;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_vmm_access(uint64_t ptr, int device, bool *rw)
{
    NEED(cuMemGetAccess);
    CUdevice d;
    gpuarena_status_t st = get_device(device, &d);
    if (st != GPUARENA_SUCCESS)
        return st;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = (int)d};
    unsigned long long flags = 0;
    CUresult r = cu.cuMemGetAccess(&flags, &loc, (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS)
        return fail("cuMemGetAccess", r);
    *rw = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_pool_export(uint64_t ptr, int *fd, void *data)
{
    NEED(cuPointerGetAttribute);
    NEED(cuMemPoolExportToShareableHandle);
    NEED(cuMemPoolExportPointer);
    CUmemoryPool pool = NULL;
    CUresult r =
        cu.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS)
        return fail("cuPointerGetAttribute(MEMPOOL_HANDLE)", r);
    int f = -1;
    r = cu.cuMemPoolExportToShareableHandle(&f, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS)
        return fail("cuMemPoolExportToShareableHandle", r);
    _Static_assert(sizeof(CUmemPoolPtrExportData) == GA_CUDA_POOL_PTR_DATA,
                   "the driver's pointer export data");
    r = cu.cuMemPoolExportPointer((CUmemPoolPtrExportData *)data, (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS) {
        close(f);
        return fail("cuMemPoolExportPointer", r);
    }
    *fd = f;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_cuda_pool_import(int fd, const void *data, void **pool, uint64_t *ptr)
{
    NEED(cuMemPoolImportFromShareableHandle);
    NEED(cuMemPoolImportPointer);
    CUmemoryPool p;
    CUresult r = cu.cuMemPoolImportFromShareableHandle(&p, (void *)(uintptr_t)fd,
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS)
        return fail("cuMemPoolImportFromShareableHandle", r);
    CUdeviceptr a;
    CUmemPoolPtrExportData d;
    memcpy(&d, data, sizeof d);
    r = cu.cuMemPoolImportPointer(&a, p, &d);
    if (r != CUDA_SUCCESS) {
        cu.cuMemPoolDestroy(p);
        return fail("cuMemPoolImportPointer", r);
    }
    *pool = p;
    *ptr = a;
    return GPUARENA_SUCCESS;
}
