/*
 * bench_streams.c - what many streams cost a thread and an arena, on the
 * sim arena (no GPU): the thread caches kept per stream (at most 16 an
 * arena, tcache.h), the stream pools (at most 256, limbo.c) and the free
 * memory that pools take in from ANY (block.c, joins).  No target: the
 * figures the commits of 2026-11-28 quote, to be measured again.
 *
 * Usage: bench_streams new [STREAMS]  or  bench_streams turn [N...]
 *   new   a new stream for each step, as a program that makes one per
 *         piece of work: each step allocates 4 KiB on its stream, frees
 *         and allocates it again four times, and frees it.  Printed at
 *         each power of two from 1024 to STREAMS (default 65536): the
 *         microseconds per step since the last line, the process's
 *         resident memory, and the arena's reserved bytes, with what its
 *         stream pools hold (their own stream's only until a sweep) and
 *         what retired pools hold (no stream's until a trim).  Flat lines
 *         are the point: before the bounds a step cost 2 ms and 34 KiB of
 *         host memory more each time at 16384 streams.
 *   turn  N streams (default 1 8 16 17 32) in turn, one 4 KiB allocation
 *         and free on each: ns per pair, median of 5 runs.  Up to 16
 *         streams a thread's caches serve every pair; beyond, each change
 *         of stream retires a cache and takes the lock.
 * GPUARENA_OPTIONS and gpuarena.conf apply as usual (for instance
 * GPUARENA_OPTIONS=sim.thread_cache=false, where every free goes to its
 * stream's pool).
 */
#include "gpubench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 4096

/* Resident memory of the process in KiB (0 where /proc is not there). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * 4;
}

static gpuarena_stream_t stream(uintptr_t n)
{
    return (gpuarena_stream_t)n;
}

static void one_step(gpuarena_t *a, gpuarena_stream_t s)
{
    void *p;
    GB_CHECK("gpuarena_alloc", gpuarena_alloc(a, BLOCK, s, &p));
    for (int k = 0; k < 4; k++) {
        GB_CHECK("gpuarena_free", gpuarena_free(a, p, s));
        GB_CHECK("gpuarena_alloc", gpuarena_alloc(a, BLOCK, s, &p));
    }
    GB_CHECK("gpuarena_free", gpuarena_free(a, p, s));
}

static void new_streams(long count)
{
    gpuarena_t *a;
    GB_CHECK("gpuarena_create", gpuarena_create(GPUARENA_SIM, 0, NULL, &a));
    printf("%8s %12s %10s %12s %14s %14s\n", "streams", "us per step", "RSS MiB", "reserved MiB",
           "pools' MiB", "retired MiB");
    double t0 = gb_now();
    long since = 0;
    for (long i = 1; i <= count; i++) {
        one_step(a, stream((uintptr_t)(1000 + i)));
        if (i >= 1024 && (i & (i - 1)) == 0) {
            double t = gb_now();
            gpuarena_stats_t st;
            GB_CHECK("gpuarena_stats", gpuarena_stats(a, &st));
            printf("%8ld %12.2f %10.1f %12.1f %14.2f %14.2f\n", i,
                   (t - t0) / (double)(i - since) * 1e6, rss_kib() / 1024.0,
                   st.reserved / 1048576.0, st.stream_cached / 1048576.0,
                   st.retired_cached / 1048576.0);
            t0 = t;
            since = i;
        }
    }
    GB_CHECK("gpuarena_destroy", gpuarena_destroy(a));
}

static void in_turn(long n)
{
    gpuarena_t *a;
    GB_CHECK("gpuarena_create", gpuarena_create(GPUARENA_SIM, 0, NULL, &a));
    const long rounds = 200000 / n + 1;
    double v[5];
    for (int r = 0; r < 5; r++) {
        double t0 = gb_now();
        for (long k = 0; k < rounds; k++) {
            for (long i = 0; i < n; i++) {
                void *p;
                gpuarena_stream_t s = stream((uintptr_t)(100 + i));
                GB_CHECK("gpuarena_alloc", gpuarena_alloc(a, BLOCK, s, &p));
                GB_CHECK("gpuarena_free", gpuarena_free(a, p, s));
            }
        }
        v[r] = (gb_now() - t0) / (double)(rounds * n) * 1e9;
    }
    printf("%3ld streams in turn: %7.1f ns per pair of %d B\n", n, gb_median(v, 5), BLOCK);
    GB_CHECK("gpuarena_destroy", gpuarena_destroy(a));
}

int main(int argc, char **argv)
{
    gb_prog = "bench_streams";
    char *end = NULL;
    if (argc >= 2 && strcmp(argv[1], "new") == 0 && argc <= 3) {
        long count = argc == 3 ? strtol(argv[2], &end, 10) : 65536;
        if ((argc == 3 && *end) || count < 1024) {
            fprintf(stderr, "bench_streams: STREAMS is a number of at least 1024\n");
            return GB_EXIT_ERROR;
        }
        new_streams(count);
        return GB_EXIT_MET;
    }
    if (argc >= 2 && strcmp(argv[1], "turn") == 0) {
        static const long dflt[] = {1, 8, 16, 17, 32};
        if (argc == 2)
            for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
                in_turn(dflt[i]);
        for (int i = 2; i < argc; i++) {
            long n = strtol(argv[i], &end, 10);
            if (*end || n < 1 || n > 4096) {
                fprintf(stderr, "bench_streams: N is a number from 1 to 4096, not \"%s\"\n",
                        argv[i]);
                return GB_EXIT_ERROR;
            }
            in_turn(n);
        }
        return GB_EXIT_MET;
    }
    fprintf(stderr, "usage: bench_streams new [STREAMS] | bench_streams turn [N...]\n");
    return GB_EXIT_ERROR;
}
