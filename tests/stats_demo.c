/*
 * stats_demo.c - a program that uses a host arena and, with an argument
 * "signal", sends itself SIGUSR1 half-way: stats-report.sh runs it under
 * GPUARENA_STATS to see what a user sees.
 */
#include "gpuarena.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    gpuarena_t *a;
    void *p[16];
    if (gpuarena_get(GPUARENA_HOST, 0, &a) != GPUARENA_SUCCESS) {
        fprintf(stderr, "stats_demo: %s\n", gpuarena_last_error());
        return 1;
    }
    for (int i = 0; i < 16; i++)
        if (gpuarena_alloc(a, (size_t)(i + 1) << 20, NULL, &p[i]) != GPUARENA_SUCCESS)
            return 1;
    if (argc > 1 && strcmp(argv[1], "signal") == 0) {
        raise(SIGUSR1);
        sleep(1); /* the report thread prints */
    }
    for (int i = 0; i < 8; i++)
        if (gpuarena_free(a, p[i], NULL) != GPUARENA_SUCCESS)
            return 1;
    return 0;
}
