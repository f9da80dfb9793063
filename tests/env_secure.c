/*
 * env_secure.c - a program that uses the host arena, for env-secure.sh,
 * which runs a set-user-ID copy of it: gpuarena must then ignore its
 * environment variables.  It prints its real and effective user ids (the
 * script skips where the set-user-ID bit did not take), prints "arena ok"
 * and exits 0 when the arena worked, 3 when gpuarena_get failed (as it
 * does with a bad GPUARENA_OPTIONS, GPUARENA_CONF or GPUARENA_TOPOLOGY
 * that is honoured).
 */
#include "gpuarena.h"

#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("uid=%ld euid=%ld\n", (long)getuid(), (long)geteuid());
    fflush(stdout);
    gpuarena_t *a;
    void *p = NULL;
    if (gpuarena_get(GPUARENA_HOST, 0, &a) != GPUARENA_SUCCESS) {
        fprintf(stderr, "env_secure: %s\n", gpuarena_last_error());
        return 3;
    }
    if (gpuarena_alloc(a, (size_t)1 << 20, GPUARENA_STREAM_HOST, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(a, p, GPUARENA_STREAM_HOST) != GPUARENA_SUCCESS) {
        fprintf(stderr, "env_secure: %s\n", gpuarena_last_error());
        return 1;
    }
    puts("arena ok"); /* a sanitizer may still fail the exit: said first */
    fflush(stdout);
    return 0;
}
