/*
 * gpubench.c - helpers of the GPU benchmarks (see gpubench.h).
 */
#include "gpubench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *gb_prog = "bench";
static int met, missed;

double gb_now(void)
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

double gb_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void gb_die(const char *what, gpuarena_status_t st)
{
    const char *why = gpuarena_last_error();
    fflush(stdout);
    fprintf(stderr, "%s: %s failed: %s (%d)%s%s\n", gb_prog, what, gpuarena_strerror(st), (int)st,
            why && *why ? ": " : "", why ? why : "");
    exit(GB_EXIT_ERROR);
}

const char *gb_size(size_t n, char buf[32])
{
    if (n >= GiB && n % GiB == 0)
        snprintf(buf, 32, "%zu GiB", n / GiB);
    else if (n >= MiB && n % MiB == 0)
        snprintf(buf, 32, "%zu MiB", n / MiB);
    else if (n >= KiB && n % KiB == 0)
        snprintf(buf, 32, "%zu KiB", n / KiB);
    else
        snprintf(buf, 32, "%zu B", n);
    return buf;
}

static void cpu_model(char *model, size_t len)
{
    snprintf(model, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(model, len, "%s", c + 2);
                model[strcspn(model, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

size_t gb_host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

void *gb_open(const char *prog)
{
    gb_prog = prog;
    setvbuf(stdout, NULL, _IOLBF, 0);
    gpuarena_status_t st = ga_cuda_device_check(0);
    if (st == GPUARENA_ERR_NO_DRIVER || st == GPUARENA_ERR_NO_DEVICE ||
        st == GPUARENA_ERR_INVALID_DEVICE) {
        printf("%s: skipped, no GPU: %s (%s)\n", prog, gpuarena_strerror(st),
               gpuarena_last_error());
        exit(GB_EXIT_NO_GPU);
    }
    if (st != GPUARENA_SUCCESS)
        gb_die("opening device 0", st);
    void *ctx;
    GB_CHECK("retaining the primary context of device 0", ga_cuda_primary_retain(0, &ctx));
    gb_thread_ctx(ctx);
    char name[256] = "?", bus[64] = "?", model[256];
    size_t total = 0, free_b = 0;
    GB_CHECK("cuDeviceGetName", ga_cuda_device_name(0, name, sizeof name));
    if (ga_cuda_device_pci_bus_id(0, bus, sizeof bus) != GPUARENA_SUCCESS)
        snprintf(bus, sizeof bus, "?");
    GB_CHECK("cuMemGetInfo", ga_cuda_mem_info(&free_b, &total));
    int v = ga_cuda_driver_version(), numa = -1, count = 0;
    if (ga_cuda_device_attr(0, GA_CUDA_ATTR_HOST_NUMA_ID, &numa) != GPUARENA_SUCCESS)
        numa = -1;
    if (ga_cuda_device_count(&count) != GPUARENA_SUCCESS)
        count = 0;
    cpu_model(model, sizeof model);
    printf("%s: gpuarena %s\n", prog, gpuarena_version());
    printf("GPU 0 of %d: %s (PCI %s, host NUMA node %d), %.1f GiB, %.1f GiB free\n", count, name,
           bus, numa, (double)total / (double)GiB, (double)free_b / (double)GiB);
    printf("CUDA driver: CUDA %d.%d (%s)\n", v / 1000, v % 1000 / 10, ga_cuda_library_path());
    printf("host: %ld CPUs online, %s, %.1f GiB available\n", sysconf(_SC_NPROCESSORS_ONLN), model,
           (double)gb_host_available() / (double)GiB);
    const char *o = getenv("GPUARENA_OPTIONS"), *c = getenv("GPUARENA_CONF");
    if (o || c)
        printf("settings: %s%s%s%s (gpuarena-config shows them all)\n",
               o ? "GPUARENA_OPTIONS=" : "", o ? o : "", c ? " GPUARENA_CONF=" : "", c ? c : "");
    else
        printf("settings: GPUARENA_OPTIONS and GPUARENA_CONF unset: defaults, or a gpuarena.conf "
               "found in the usual places (gpuarena-config shows them)\n");
    printf("\n");
    return ctx;
}

void gb_thread_ctx(void *ctx)
{
    GB_CHECK("making the primary context current", ga_cuda_set_current(ctx));
}

size_t gb_device_free(void)
{
    size_t f = 0;
    GB_CHECK("waiting for the GPU (cuCtxSynchronize)", ga_cuda_ctx_sync());
    GB_CHECK("cuMemGetInfo", ga_cuda_mem_info(&f, NULL));
    return f;
}

void gb_target(bool ok)
{
    if (ok)
        met++;
    else
        missed++;
}

int gb_finish(void)
{
    printf("\n%s: targets met: %d, missed: %d\n", gb_prog, met, missed);
    return missed ? GB_EXIT_MISSED : GB_EXIT_MET;
}
