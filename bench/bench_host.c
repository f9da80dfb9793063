/*
 * bench_host.c - speed of the host arena (issue 4's targets).
 *
 *   1. A cached alloc+free pair on one stream, sizes 64 B to 256 KiB, in
 *      nanoseconds: the median of RUNS runs of N pairs each (target
 *      < 50 ns).
 *   2. Throughput of 2 threads on 2 streams against 1 thread, same loop
 *      (target >= 1.8x).
 *
 * Usage: bench_host [pairs-per-run]   (default 2,000,000)
 * Options for the arena come from GPUARENA_OPTIONS / gpuarena.conf as
 * usual; this program passes none.  Timings only mean something on an
 * idle machine: the machine is printed with them.
 */
#include "gpuarena.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUNS 7

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static void die(const char *what, gpuarena_status_t st)
{
    fprintf(stderr, "bench_host: %s: %s (%s)\n", what, gpuarena_strerror(st),
            gpuarena_last_error());
    exit(1);
}

/* N alloc+free pairs of SIZE on stream S; seconds. */
static double pairs(gpuarena_t *a, size_t size, gpuarena_stream_t s, long n)
{
    void *p;
    gpuarena_status_t st = gpuarena_alloc(a, size, s, &p); /* warm the cache */
    if (st != GPUARENA_SUCCESS)
        die("alloc", st);
    gpuarena_free(a, p, s);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (gpuarena_alloc(a, size, s, &p) != GPUARENA_SUCCESS)
            die("alloc", GPUARENA_ERR_OUT_OF_MEMORY);
        gpuarena_free(a, p, s);
    }
    return now() - t0;
}

typedef struct job {
    gpuarena_t *a;
    gpuarena_stream_t s;
    long n;
    pthread_barrier_t *go;
    double secs;
} job_t;

static void *thread_pairs(void *arg)
{
    job_t *j = arg;
    pthread_barrier_wait(j->go);
    j->secs = pairs(j->a, 4096, j->s, j->n);
    return NULL;
}

/* Pairs per second of T threads, each on its own stream. */
static double throughput(gpuarena_t *a, int t, long n)
{
    pthread_t th[2];
    job_t j[2];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)t + 1);
    for (int i = 0; i < t; i++) {
        j[i] = (job_t){a, (gpuarena_stream_t)(uintptr_t)(i + 1), n, &go, 0};
        pthread_create(&th[i], NULL, thread_pairs, &j[i]);
    }
    double t0 = now();
    pthread_barrier_wait(&go);
    for (int i = 0; i < t; i++)
        pthread_join(th[i], NULL);
    double wall = now() - t0;
    pthread_barrier_destroy(&go);
    return (double)n * t / wall;
}

static void machine(void)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    snprintf(model, sizeof model, "%s", c + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        }
        fclose(f);
    }
    printf("machine: %ld CPUs online, %s; gpuarena %s\n", sysconf(_SC_NPROCESSORS_ONLN), model,
           gpuarena_version());
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n < 1)
        n = 1;
    gpuarena_t *a;
    gpuarena_status_t st = gpuarena_create(GPUARENA_HOST, 0, NULL, &a);
    if (st != GPUARENA_SUCCESS)
        die("create", st);
    machine();
    printf("host arena, cached alloc+free pair on one stream, median of %d runs of %ld pairs\n",
           RUNS, n);
    printf("%10s %12s %12s %8s\n", "size", "median ns", "best ns", "< 50 ns");
    int missed = 0;
    for (size_t size = 64; size <= 256 * 1024; size *= 4) {
        double v[RUNS];
        for (int r = 0; r < RUNS; r++)
            v[r] = pairs(a, size, (gpuarena_stream_t)(uintptr_t)1, n) / (double)n * 1e9;
        double med = median(v, RUNS);
        missed += med >= 50;
        printf("%10zu %12.1f %12.1f %8s\n", size, med, v[0], med < 50 ? "yes" : "NO");
    }
    double one[RUNS], two[RUNS];
    for (int r = 0; r < RUNS; r++) {
        one[r] = throughput(a, 1, n);
        two[r] = throughput(a, 2, n);
    }
    double m1 = median(one, RUNS), m2 = median(two, RUNS);
    printf("4 KiB pairs, each thread on its own stream (median of %d runs):\n", RUNS);
    printf("  1 thread : %8.2f M pairs/s\n", m1 / 1e6);
    printf("  2 threads: %8.2f M pairs/s  = %.2fx one thread (target >= 1.8x: %s)\n", m2 / 1e6,
           m2 / m1, m2 / m1 >= 1.8 ? "yes" : "NO");
    if (gpuarena_destroy(a) != GPUARENA_SUCCESS)
        die("destroy", GPUARENA_ERR_BUSY);
    return missed || m2 / m1 < 1.8 ? 2 : 0;
}
