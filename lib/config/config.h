/*
 * config.h - the configuration room: gpuarena.conf(5), GPUARENA_OPTIONS and
 * option strings, read into typed ga_settings_t.  Nothing here touches
 * CUDA.  Messages for failures go to gpuarena_last_error() in the form
 * "FILE:LINE: key 'SECTION.KEY': WHAT (did you mean 'KEY'?)".
 */
#ifndef GA_CONFIG_H
#define GA_CONFIG_H

#include "config/settings.h"
#include "gpuarena.h"

/* Read the configuration once, thread-safely: the file PATH if not NULL,
 * else the search order of gpuarena.conf(5), then GPUARENA_OPTIONS.  A
 * second call returns the status of the first. */
gpuarena_status_t ga_config_init(const char *path);

/* The settings in effect for an arena of KIND on DEVICE (-1: no device),
 * reading the configuration first if nobody has. */
gpuarena_status_t ga_config_settings(gpuarena_kind_t kind, int device, ga_settings_t *out);

/* The built-in defaults for KIND. */
void ga_config_defaults(gpuarena_kind_t kind, ga_settings_t *out);

/* Apply OPTIONS, "key=value,key=value" with keys of KIND's section and no
 * section prefix, to S.  ORIGIN names the source in messages.  S is left
 * unchanged on error. */
gpuarena_status_t ga_config_apply(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                  const char *origin);

/* Name of a kind as used for config sections: "device", "pinned", ... */
const char *ga_kind_name(gpuarena_kind_t kind);

#endif /* GA_CONFIG_H */
