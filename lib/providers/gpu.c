/*
 * gpu.c - ga_gpu_provider_create(): the one entry the arena uses for every
 * GPU kind, dispatching to the provider of the kind.  Each provider loads
 * the driver and checks the device first, so that the status a user sees
 * on a machine without driver or GPU is the right one.
 */
#include "providers/gpu.h"
#include "cuda/cuda.h"
#include "errors.h"
#include "providers/providers.h"

gpuarena_status_t ga_gpu_provider_create(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                         ga_provider_t **out)
{
    switch (kind) {
    case GPUARENA_DEVICE:
        if (s->pool == GA_POOL_DRIVER)
            return ga_driverpool_provider_create(device, s, out);
        return ga_device_provider_create(device, s, out);
    case GPUARENA_PINNED:
        return ga_pinned_provider_create(device, s, out);
    case GPUARENA_MANAGED:
        return ga_managed_provider_create(device, s, out);
    default:
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "kind %d is not a GPU kind", (int)kind);
    }
}
