/*
 * trace_roundtrip.c - a test program for trace-roundtrip.sh: random
 * allocations (size 0 included), frees and record_stream calls on three
 * streams and with no stream (GPUARENA_STREAM_HOST) of a host arena and a
 * sim arena, with GPUARENA_TRACE set by the script.  It prints, per arena, the peak of requested
 * bytes and the number of allocations it made, for the script to compare with the replay.
 */
#include "gpuarena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE 64

static int run(gpuarena_kind_t kind, const char *name, unsigned seed, int with_record)
{
    gpuarena_t *a = NULL;
    if (gpuarena_create(kind, 0, "", &a) != GPUARENA_SUCCESS) {
        fprintf(stderr, "create %s: %s\n", name, gpuarena_last_error());
        return 1;
    }
    void *ptr[LIVE] = {0};
    uintptr_t stream[LIVE] = {0};
    int used[LIVE] = {0};
    unsigned long allocs = 0;
    srand(seed);
    for (int i = 0; i < 20000; i++) {
        int k = rand() % LIVE;
        int pick = rand() % 4;
        /* NULL, 16, 32 and no stream */
        uintptr_t s = pick < 3 ? (uintptr_t)pick * 16 : (uintptr_t)GPUARENA_STREAM_HOST;
        if (!used[k]) {
            size_t size = rand() % 10 == 0 ? 0 : (size_t)(rand() % (1 << (rand() % 22))) + 1;
            if (gpuarena_alloc(a, size, (gpuarena_stream_t)s, &ptr[k]) != GPUARENA_SUCCESS) {
                fprintf(stderr, "alloc: %s\n", gpuarena_last_error());
                return 1;
            }
            used[k] = 1;
            stream[k] = s;
            allocs++;
        } else if (ptr[k] && with_record && rand() % 4 == 0) {
            /* gpuarena_record_stream refuses no stream: stream 16 instead. */
            uintptr_t rs = s == (uintptr_t)GPUARENA_STREAM_HOST ? 16 : s;
            if (gpuarena_record_stream(a, ptr[k], (gpuarena_stream_t)rs) != GPUARENA_SUCCESS) {
                fprintf(stderr, "record_stream: %s\n", gpuarena_last_error());
                return 1;
            }
        } else {
            /* Now and then the program has waited for the block's work and
             * frees it with no stream, whatever it was allocated on. */
            uintptr_t fs = pick == 0 ? (uintptr_t)GPUARENA_STREAM_HOST : stream[k];
            if (gpuarena_free(a, ptr[k], (gpuarena_stream_t)fs) != GPUARENA_SUCCESS) {
                fprintf(stderr, "free: %s\n", gpuarena_last_error());
                return 1;
            }
            used[k] = 0;
            ptr[k] = NULL;
        }
    }
    gpuarena_stats_t st;
    if (gpuarena_stats(a, &st) != GPUARENA_SUCCESS)
        return 1;
    printf("%s %llu %lu\n", name, (unsigned long long)st.requested_peak, allocs);
    for (int k = 0; k < LIVE; k++)
        if (used[k])
            (void)gpuarena_free(a, ptr[k], (gpuarena_stream_t)stream[k]);
    return gpuarena_destroy(a) == GPUARENA_SUCCESS ? 0 : 1;
}

int main(void)
{
    return run(GPUARENA_HOST, "host", 1, 1) || run(GPUARENA_SIM, "sim", 2, 1);
}
