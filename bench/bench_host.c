/*
 * bench_host.c - the host arena's fast path.
 *
 *   bench_host [PAIRS]      (default 10 million per measurement)
 *
 * 1. A cached alloc+free pair on one stream, for a few sizes: the block
 *    comes back from the cache every time (target: under 50 ns a pair).
 * 2. Throughput of 1 thread on 1 stream, then 2 threads on 2 streams of
 *    the same arena, each doing PAIRS pairs (target: 2 threads at 1.8
 *    times one thread or better).  Needs 2 idle cores to mean anything.
 */
#include "gpuarena.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, gpuarena_status_t st)
{
    fprintf(stderr, "bench_host: %s: %s: %s\n", what, gpuarena_strerror(st), gpuarena_last_error());
    exit(1);
}

typedef struct job {
    gpuarena_t *a;
    gpuarena_stream_t stream;
    size_t size;
    long pairs;
    double ns;
} job_t;

static void *pairs(void *arg)
{
    job_t *j = arg;
    void *p;
    gpuarena_status_t st;
    /* Warm the cache. */
    if ((st = gpuarena_alloc(j->a, j->size, j->stream, &p)) != GPUARENA_SUCCESS)
        die("alloc", st);
    gpuarena_free(j->a, p, j->stream);
    double t0 = now_ns();
    for (long i = 0; i < j->pairs; i++) {
        if (gpuarena_alloc(j->a, j->size, j->stream, &p) != GPUARENA_SUCCESS)
            die("alloc", GPUARENA_ERR_OUT_OF_MEMORY);
        gpuarena_free(j->a, p, j->stream);
    }
    j->ns = now_ns() - t0;
    return NULL;
}

static double best_of(int reps, gpuarena_t *a, size_t size, long n)
{
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        job_t j = {a, (gpuarena_stream_t)(uintptr_t)1, size, n, 0};
        pairs(&j);
        if (j.ns / (double)n < best)
            best = j.ns / (double)n;
    }
    return best;
}

/* NT threads, each on its own stream; pairs per second, all threads. */
static double throughput(gpuarena_t *a, int nt, long n)
{
    pthread_t th[8];
    job_t jobs[8];
    double t0 = now_ns();
    for (int i = 0; i < nt; i++) {
        jobs[i] = (job_t){a, (gpuarena_stream_t)(uintptr_t)(i + 1), 4096, n, 0};
        pthread_create(&th[i], NULL, pairs, &jobs[i]);
    }
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    double wall = now_ns() - t0;
    return (double)nt * (double)n / wall * 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000000L;
    if (n <= 0)
        n = 10000000L;
    gpuarena_t *a;
    gpuarena_status_t st = gpuarena_create(GPUARENA_HOST, 0, "", &a);
    if (st != GPUARENA_SUCCESS)
        die("host arena", st);
    printf("gpuarena %s, host arena, %ld pairs per measurement\n", gpuarena_version(), n);
    printf("cached alloc+free pair, 1 thread (best of 3; target < 50 ns):\n");
    static const size_t sizes[] = {64, 4096, 65536, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        printf("  %8zu bytes  %7.1f ns\n", sizes[i], best_of(3, a, sizes[i], n));
    double one = 0, two = 0;
    for (int r = 0; r < 3; r++) {
        double x = throughput(a, 1, n), y = throughput(a, 2, n);
        one = x > one ? x : one;
        two = y > two ? y : two;
    }
    printf("threads on their own streams, 4096 bytes (best of 3; target 2 threads >= 1.8x):\n");
    printf("  1 thread   %7.2f million pairs/s\n", one / 1e6);
    printf("  2 threads  %7.2f million pairs/s  (%.2fx)\n", two / 1e6, two / one);
    gpuarena_stats_t s;
    if (gpuarena_stats(a, &s) == GPUARENA_SUCCESS)
        printf("arena: %llu allocations, %llu cache hits, %llu provider maps\n",
               (unsigned long long)s.allocs, (unsigned long long)s.cache_hits,
               (unsigned long long)s.provider_maps);
    st = gpuarena_destroy(a);
    if (st != GPUARENA_SUCCESS)
        die("destroy", st);
    return 0;
}
