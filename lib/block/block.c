/* block.c - TEMPORARY stub while the block manager is written. */
#include "block/block.h"

#include "errors.h"

#include <stdlib.h>

struct ga_bm {
    int unused;
};

gpuarena_status_t ga_bm_create(ga_provider_t *prov, const ga_settings_t *s, ga_bm_t **out)
{
    (void)prov, (void)s;
    *out = calloc(1, sizeof **out);
    return *out ? GPUARENA_SUCCESS : GPUARENA_ERR_HOST_MEMORY;
}
void ga_bm_destroy(ga_bm_t *bm)
{
    free(bm);
}
gpuarena_status_t ga_bm_alloc(ga_bm_t *bm, size_t size, ga_stream_t s, void **ptr)
{
    (void)bm, (void)size, (void)s, (void)ptr;
    return GPUARENA_ERR_NOT_SUPPORTED;
}
gpuarena_status_t ga_bm_free(ga_bm_t *bm, void *ptr, ga_stream_t s)
{
    (void)bm, (void)ptr, (void)s;
    return GPUARENA_ERR_NOT_SUPPORTED;
}
gpuarena_status_t ga_bm_record_stream(ga_bm_t *bm, void *ptr, ga_stream_t s)
{
    (void)bm, (void)ptr, (void)s;
    return GPUARENA_ERR_NOT_SUPPORTED;
}
gpuarena_status_t ga_bm_lookup(ga_bm_t *bm, const void *ptr, size_t *requested)
{
    (void)bm, (void)ptr, (void)requested;
    return GPUARENA_ERR_NOT_SUPPORTED;
}
gpuarena_status_t ga_bm_trim(ga_bm_t *bm, size_t keep)
{
    (void)bm, (void)keep;
    return GPUARENA_SUCCESS;
}
void ga_bm_stats(ga_bm_t *bm, gpuarena_stats_t *st)
{
    (void)bm, (void)st;
}
void ga_bm_reset_peaks(ga_bm_t *bm)
{
    (void)bm;
}
gpuarena_status_t ga_bm_check(ga_bm_t *bm)
{
    (void)bm;
    return GPUARENA_SUCCESS;
}
uint64_t ga_bm_live_blocks(ga_bm_t *bm)
{
    (void)bm;
    return 0;
}
