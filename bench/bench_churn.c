/*
 * bench_churn.c - issue 5's random churn (b) on the sim arena, with no
 * GPU: CHURN_LIVE blocks of log-uniform random size from 512 B to 64 MiB,
 * each operation a free of a random live block and an allocation of a
 * new one (churn.h, the sequence bench_device runs on a GPU).
 *
 * What it measures is the block manager's share of (b): the sim arena has
 * the device arena's block manager, thread cache and stream pools, but no
 * driver, so the capture check (of the allocation) and the stream lookup
 * that a GPU stream adds are not in it.  It sets no target;
 * it is there to compare two builds of the manager on one machine, and to
 * run under a profiler, e.g.
 *
 *   valgrind --tool=cachegrind --branch-sim=yes bench/bench_churn 20000
 *
 * and again with 60000: the difference of the two counts over the
 * 5 x 40000 operations more is the cost of one free + alloc, without the
 * set-up: on a stream, 1254 instructions and 3.1 mispredicted branches
 * when this program was written, 1129 and 2.5 on 2026-11-24 (GCC 12,
 * -O2), then 1186 and 1.8 once a cold thread cache parked the free in
 * its large slot (more instructions, fewer mispredicted branches: 96
 * against 88 ns a pair here).  Time it on one idle CPU (taskset -c N)
 * and alternate the two builds compared: the lent hosts have slow
 * spells.
 *
 * Usage: bench_churn [OPERATIONS [STREAM [ARENAS]]]
 *   OPERATIONS  timed operations per run (default 524288); 5 runs, the
 *               median printed
 *   STREAM      a number: the sim stream handle (default 7); "host":
 *               GPUARENA_STREAM_HOST, no stream
 *   ARENAS      other sim arenas that the thread has allocated from and
 *               freed to on STREAM before the run (default 0), each
 *               leaving a thread cache in the thread: a program with a
 *               device and a pinned arena has two, bench_device's (b)
 *               three.  A locked operation used to walk them all (86
 *               against 79 ns a pair with 8 here before 438cd70; the
 *               same since)
 * The arena is made with expandable=true, the device arena's default
 * where the driver has virtual memory management; GPUARENA_OPTIONS and
 * gpuarena.conf apply as usual.
 */
#include "churn.h"
#include "gpubench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUNS 5

/* Operations FROM..TO-1 of the sequence (wrapping); seconds. */
static double run(gpuarena_t *a, gpuarena_stream_t s, const churn_seq_t *c, void **live, long from,
                  long to)
{
    double t0 = gb_now();
    for (long i = from; i < to; i++) {
        long k = i % CHURN_OPS;
        void **slot = &live[c->victim[k]];
        GB_CHECK("gpuarena_free", gpuarena_free(a, *slot, s));
        GB_CHECK("gpuarena_alloc", gpuarena_alloc(a, c->size[k], s, slot));
    }
    return gb_now() - t0;
}

int main(int argc, char **argv)
{
    gb_prog = "bench_churn";
    char *end = NULL;
    long ops = argc > 1 ? strtol(argv[1], &end, 10) : CHURN_OPS / 2;
    if (argc > 1 && (*end || ops <= 0)) {
        fprintf(stderr, "usage: bench_churn [OPERATIONS [STREAM|host [ARENAS]]]\n");
        return GB_EXIT_ERROR;
    }
    gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)7;
    long others = 0;
    if (argc > 3) {
        others = strtol(argv[3], &end, 10);
        if (*end || others < 0 || others > 64) {
            fprintf(stderr, "bench_churn: ARENAS is a number from 0 to 64, not \"%s\"\n", argv[3]);
            return GB_EXIT_ERROR;
        }
    }
    if (argc > 2 && strcmp(argv[2], "host") == 0) {
        s = GPUARENA_STREAM_HOST;
    } else if (argc > 2) {
        unsigned long long v = strtoull(argv[2], &end, 10);
        if (*end) {
            fprintf(stderr, "bench_churn: STREAM is a number or \"host\", not \"%s\"\n", argv[2]);
            return GB_EXIT_ERROR;
        }
        s = (gpuarena_stream_t)(uintptr_t)v;
    }

    static churn_seq_t c;
    if (!churn_seq_init(&c)) {
        fprintf(stderr, "bench_churn: no host memory for the random sequence\n");
        return GB_EXIT_ERROR;
    }
    gpuarena_t *other[64];
    for (long i = 0; i < others; i++) {
        void *p;
        GB_CHECK("gpuarena_create", gpuarena_create(GPUARENA_SIM, 0, "expandable=true", &other[i]));
        GB_CHECK("gpuarena_alloc", gpuarena_alloc(other[i], 4096, s, &p));
        GB_CHECK("gpuarena_free", gpuarena_free(other[i], p, s));
    }
    gpuarena_t *a = NULL;
    GB_CHECK("gpuarena_create", gpuarena_create(GPUARENA_SIM, 0, "expandable=true", &a));
    void *live[CHURN_LIVE];
    for (int i = 0; i < CHURN_LIVE; i++)
        GB_CHECK("allocating the first blocks", gpuarena_alloc(a, c.init[i], s, &live[i]));
    long at = 0;
    run(a, s, &c, live, at, at + CHURN_LIVE * 64L); /* warm-up */
    at += CHURN_LIVE * 64L;
    double v[RUNS];
    for (int r = 0; r < RUNS; r++) {
        v[r] = run(a, s, &c, live, at, at + ops) / (double)ops * 1e9;
        at += ops;
    }
    double med = gb_median(v, RUNS);
    for (int i = 0; i < CHURN_LIVE; i++)
        GB_CHECK("freeing the live blocks", gpuarena_free(a, live[i], s));
    GB_CHECK("gpuarena_destroy", gpuarena_destroy(a));
    for (long i = 0; i < others; i++)
        GB_CHECK("gpuarena_destroy", gpuarena_destroy(other[i]));
    free(c.size);
    free(c.victim);
    printf("sim arena, %s: %.1f ns per free + alloc (median of %d runs of %ld; %d live blocks, "
           "512 B - 64 MiB; %ld other arenas)\n",
           s == GPUARENA_STREAM_HOST ? "no stream" : "stream", med, RUNS, ops, CHURN_LIVE, others);
    return GB_EXIT_MET;
}
