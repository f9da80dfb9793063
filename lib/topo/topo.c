/* topo.c - TEMPORARY: no binding; replaced by the topology room. */
#include "topo/topo.h"

gpuarena_status_t ga_topo_placement(const ga_settings_t *s, int device, ga_placement_t *out)
{
    (void)device;
    out->policy = s->numa;
    out->nodes = 0;
    out->fallback = true;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_topo_bind(const ga_placement_t *pl, void *addr, size_t size)
{
    (void)pl, (void)addr, (void)size;
    return GPUARENA_SUCCESS;
}
