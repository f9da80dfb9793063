/* config.c - TEMPORARY: defaults only, replaced by the config issue. */
#include "config/config.h"

#include <stdint.h>
#include <string.h>

static const char *const kind_names[GPUARENA_KIND_COUNT] = {"device", "pinned", "managed", "host",
                                                            "sim"};

const char *ga_kind_name(gpuarena_kind_t kind)
{
    return (unsigned)kind < GPUARENA_KIND_COUNT ? kind_names[kind] : "?";
}

void ga_config_defaults(gpuarena_kind_t kind, ga_settings_t *s)
{
    memset(s, 0, sizeof *s);
    s->round = 512;
    s->small_max = 1 << 20;
    s->small_segment = 2 << 20;
    s->large_segment = 20 << 20;
    s->max_split = 0;
    s->expandable = true;
    s->granule = 0;
    s->release_threshold = 0;
    s->max_cached = SIZE_MAX;
    s->cross_stream = GA_CROSS_EVENT;
    s->thread_cache = true;
    s->thread_cache_max = 256 << 10;
    s->thread_cache_count = 8;
    s->sim_event_delay = 4;
    s->numa = kind == GPUARENA_PINNED ? GA_NUMA_NEAREST : GA_NUMA_LOCAL;
    s->prefetch = GA_PREFETCH_NONE;
    s->prefetch_headroom = 256 << 20;
}

gpuarena_status_t ga_config_init(const char *path)
{
    (void)path;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_config_settings(gpuarena_kind_t kind, int device, ga_settings_t *out)
{
    (void)device;
    ga_config_defaults(kind, out);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_config_apply(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                  const char *origin)
{
    (void)s, (void)kind, (void)origin;
    return options && *options ? GPUARENA_ERR_CONFIG : GPUARENA_SUCCESS;
}
