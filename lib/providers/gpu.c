/* gpu.c - TEMPORARY: GPU kinds are not built yet; replaced by the CUDA room. */
#include "errors.h"
#include "providers/providers.h"

gpuarena_status_t ga_gpu_provider_create(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                         ga_provider_t **out)
{
    (void)kind, (void)device, (void)s, (void)out;
    return ga_error(GPUARENA_ERR_NO_DRIVER, "GPU arenas are not built yet");
}
