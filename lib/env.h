/*
 * env.h - how gpuarena reads its environment variables (GPUARENA_CONF,
 * GPUARENA_OPTIONS, GPUARENA_STATS, GPUARENA_TRACE, GPUARENA_TOPOLOGY).
 *
 * Some of them name files that gpuarena writes (a trace, a statistics
 * report) or reads (a configuration, a topology).  In a set-user-ID or
 * set-group-ID program these would be opened with privileges that the
 * user who set the variable does not have, so there every variable is
 * ignored, as secure_getenv(3) does it (gpuarena(7), ENVIRONMENT).
 */
#ifndef GA_ENV_H
#define GA_ENV_H

#include <stdlib.h>
#include <unistd.h>

/* The value of NAME, or NULL when it is unset, empty, or the process
 * runs with privileges its user does not have. */
static inline const char *ga_env(const char *name)
{
#if defined(__GLIBC__)
    const char *v = secure_getenv(name);
#else
    /* Not the kernel's AT_SECURE, but what it says for set-ID programs. */
    const char *v = getuid() == geteuid() && getgid() == getegid() ? getenv(name) : NULL;
#endif
    return v && *v ? v : NULL;
}

#endif /* GA_ENV_H */
