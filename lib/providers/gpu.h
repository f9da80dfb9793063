/*
 * gpu.h - constructors of the GPU providers, one per kind, that
 * ga_gpu_provider_create() (gpu.c) dispatches to.  Each loads the CUDA
 * driver through the CUDA room and checks the device first, so that a
 * missing driver, a machine without GPU and a bad ordinal come back as
 * GPUARENA_ERR_NO_DRIVER, NO_DEVICE and INVALID_DEVICE.
 */
#ifndef GA_PROVIDERS_GPU_H
#define GA_PROVIDERS_GPU_H

#include "config/settings.h"
#include "providers/provider.h"

gpuarena_status_t ga_device_provider_create(int device, const ga_settings_t *s,
                                            ga_provider_t **out);

/* Device memory from the driver's stream-ordered pool, block by block: a
 * direct provider (driverpool.c; device arenas with pool = driver). */
gpuarena_status_t ga_driverpool_provider_create(int device, const ga_settings_t *s,
                                                ga_provider_t **out);

/* Page-locked host memory near DEVICE (pinned.c). */
gpuarena_status_t ga_pinned_provider_create(int device, const ga_settings_t *s,
                                            ga_provider_t **out);

/* CUDA managed memory with advice and prefetch (managed.c). */
gpuarena_status_t ga_managed_provider_create(int device, const ga_settings_t *s,
                                             ga_provider_t **out);

#endif /* GA_PROVIDERS_GPU_H */
