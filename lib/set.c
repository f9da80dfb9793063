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

#include <pthread.h>
#include <string.h>

/* Serialises setters of one arena against each other: the arena's copy of
 * its settings is read, changed and written back. */
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;

static bool live_key(const ga_key_t *k)
{
    return strcmp(k->name, "max_cached") == 0 || strcmp(k->name, "max_reserved") == 0;
}

void ga_arena_set_max_reserved(gpuarena_t *a, size_t max_reserved)
{
    pthread_mutex_lock(&set_lock);
    a->settings.max_reserved = max_reserved;
    ga_bm_set_caps(a->bm, a->settings.max_cached, max_reserved);
    pthread_mutex_unlock(&set_lock);
}

void ga_arena_caps(gpuarena_t *a, size_t *max_cached, size_t *max_reserved)
{
    pthread_mutex_lock(&set_lock);
    *max_cached = a->settings.max_cached;
    *max_reserved = a->settings.max_reserved;
    pthread_mutex_unlock(&set_lock);
}

gpuarena_status_t gpuarena_set(gpuarena_t *a, const char *options)
{
    if (!a)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_set: arena is NULL");
    bool named[GA_CONFIG_MAX_KEYS];
    pthread_mutex_lock(&set_lock);
    ga_settings_t s = a->settings;
    gpuarena_status_t st = ga_config_apply_named(&s, a->kind, options, "gpuarena_set", named);
    for (size_t i = 0; st == GPUARENA_SUCCESS && i < ga_config_key_count(); i++) {
        const ga_key_t *k = ga_config_key(i);
        if (named[i] && !live_key(k))
            st = ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                          "gpuarena_set: key '%s' is fixed when the arena is created; only "
                          "max_cached and max_reserved change on a live arena",
                          k->name);
    }
    if (st == GPUARENA_SUCCESS) {
        a->settings.max_cached = s.max_cached;
        a->settings.max_reserved = s.max_reserved;
        ga_bm_set_caps(a->bm, s.max_cached, s.max_reserved);
    }
    pthread_mutex_unlock(&set_lock);
    return st;
}
