/*
 * set.c - changing the settings of a live arena (gpuarena_set(3)).
 *
 * Only the caps may change once an arena exists: max_cached and
 * max_reserved.  Both are read by the block manager under its lock and
 * nowhere else, so a new value takes effect from the next locked
 * operation, with nothing to rebuild.  Every other key shapes what is
 * already there (segment sizes, rounding, the provider and its pool, the
 * thread caches' slots, NUMA placement) and stays as the arena was made:
 * naming one is an error, not a silent no-op.
 *
 * The options are parsed whole before anything changes (the syntax of
 * gpuarena_create's), so a bad one changes nothing.
 */
#include "config.h"

#include "arena.h"
#include "config/config.h"
#include "errors.h"

#include <stdbool.h>

gpuarena_status_t gpuarena_set(gpuarena_t *a, const char *options)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_set: arena is NULL");
    if (a->forked) /* a lower cap would give GPU memory back */
        return ga_arena_forked(a, "gpuarena_set");
    /* Parsed over the creation settings: only the keys named are used. */
    ga_settings_t s = a->settings;
    bool named[GA_CONFIG_MAX_KEYS];
    gpuarena_status_t st = ga_config_apply_named(&s, a->kind, options, "gpuarena_set", named);
    /* A fixed key is refused as such whatever its value, and before the
     * rules that tie it to others (small_max to small_segment), which
     * would ask for a change gpuarena_set cannot make either. */
    size_t cached = ga_config_key_index(ga_config_find_key("max_cached"));
    size_t reserved = ga_config_key_index(ga_config_find_key("max_reserved"));
    for (size_t i = 0; i < ga_config_key_count(); i++)
        if (named[i] && i != cached && i != reserved)
            return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                            "gpuarena_set: key '%s' is fixed when the arena is created; only "
                            "max_cached and max_reserved change on a live arena",
                            ga_config_key(i)->name);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* Only the caps named: two setters of different caps do not undo each
     * other's. */
    ga_bm_set_caps(a->bm, named[cached] ? &s.max_cached : NULL,
                   named[reserved] ? &s.max_reserved : NULL);
    return GPUARENA_SUCCESS;
}
