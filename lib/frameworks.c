/*
 * frameworks.c - entry points in the signatures that PyTorch's
 * CUDAPluggableAllocator and CuPy's CFunctionAllocator call, so that both
 * load libgpuarena.so.0 with no glue code.  They use the default device
 * arena of the device they are given (gpuarena_get(GPUARENA_DEVICE, dev)),
 * return NULL on failure and leave the reason in gpuarena_last_error().
 * See gpuarena_torch_alloc(3) and gpuarena_cupy_malloc(3).
 */
#include "arena.h"
#include "errors.h"

#include <stdint.h>

void *gpuarena_torch_alloc(ssize_t size, int device, void *stream)
{
    if (size < 0) {
        ga_error(GPUARENA_ERR_SIZE_OVERFLOW, "gpuarena_torch_alloc: negative size %zd", size);
        return NULL;
    }
    gpuarena_t *a;
    if (gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return NULL;
    void *p = NULL;
    if (gpuarena_alloc(a, (size_t)size, stream, &p) != GPUARENA_SUCCESS)
        return NULL;
    return p;
}

void gpuarena_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size;
    if (!ptr)
        return;
    gpuarena_t *a;
    if (gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return;
    (void)gpuarena_free(a, ptr, stream);
}

void gpuarena_torch_record_stream(void *ptr, void *stream)
{
    if (!ptr)
        return;
    gpuarena_t *a = ga_default_arena_of(GPUARENA_DEVICE, ptr);
    if (!a) {
        ga_error(GPUARENA_ERR_INVALID_POINTER,
                 "gpuarena_torch_record_stream: %p is not a live block of a default device arena",
                 ptr);
        return;
    }
    (void)gpuarena_record_stream(a, ptr, stream);
}

/* PARAM: NULL for the default device arena of DEVICE, or a gpuarena_t *
 * of the caller's (gpuarena_create) to allocate from instead. */
void *gpuarena_cupy_malloc(void *param, size_t size, int device)
{
    gpuarena_t *a = param;
    if (!a && gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return NULL;
    void *p = NULL;
    if (gpuarena_alloc(a, size, NULL, &p) != GPUARENA_SUCCESS)
        return NULL;
    return p;
}

void gpuarena_cupy_free(void *param, void *ptr, int device)
{
    if (!ptr)
        return;
    gpuarena_t *a = param;
    if (!a && gpuarena_get(GPUARENA_DEVICE, device, &a) != GPUARENA_SUCCESS)
        return;
    (void)gpuarena_free(a, ptr, NULL);
}
