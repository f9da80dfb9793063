/*
 * providers.h - constructors of the providers, one per arena kind.  Each
 * returns a provider whose ops table is filled in and whose destroy()
 * frees it.
 */
#ifndef GA_PROVIDERS_H
#define GA_PROVIDERS_H

#include "config/settings.h"
#include "providers/provider.h"

/* fork(2): the sim providers' shared address space (sim.c), a leaf lock. */
void ga_sim_fork_lock(void);
void ga_sim_fork_unlock(void);
gpuarena_status_t ga_sim_provider_create(const ga_settings_t *s, ga_provider_t **out);
gpuarena_status_t ga_host_provider_create(const ga_settings_t *s, ga_provider_t **out);

/* GPU kinds: GPUARENA_ERR_NO_DRIVER / NO_DEVICE / INVALID_DEVICE where the
 * driver or the device is missing. */
gpuarena_status_t ga_gpu_provider_create(gpuarena_kind_t kind, int device, const ga_settings_t *s,
                                         ga_provider_t **out);

#endif /* GA_PROVIDERS_H */
