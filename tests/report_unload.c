/*
 * report_unload.c - load libgpuarena with dlopen(3), make an arena, unload
 * the library, then send the process SIGUSR1: with GPUARENA_STATS and
 * GPUARENA_STATS_SIGNAL=1 the library had a handler for it and a report
 * thread, both its own code, which must not outlive it (stats-report.sh).
 *
 * Usage: report_unload LIBRARY   (exit 0: survived; 77: not unloaded)
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

typedef int get_fn(int kind, int device, void **arena);

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "report_unload: %s\n", dlerror());
        return 1;
    }
    get_fn *get = (get_fn *)(void (*)(void))dlsym(lib, "gpuarena_get");
    void *arena = NULL;
    if (!get || get(3 /* GPUARENA_HOST */, 0, &arena) != 0) {
        fprintf(stderr, "report_unload: no host arena\n");
        return 1;
    }
    if (dlclose(lib) != 0)
        return 1;
    if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) {
        printf("report_unload: the library stayed loaded\n");
        return 77;
    }
    raise(SIGUSR1);
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
    return 0;
}
