/*
 * report_unload.c - load libgpuarena with dlopen(3), make an arena, unload
 * the library, then send the process SIGUSR1: with GPUARENA_STATS and
 * GPUARENA_STATS_SIGNAL=1 the library had a handler for it and a report
 * thread, both its own code, which must not outlive it (stats-report.sh).
 * A thread that allocated and freed through the library, and failed a
 * call (a thread cache, a lock cell and a message buffer of its own, each
 * with a destructor at thread exit), exits after the unload: the
 * library's thread-exit destructors must not run then (it crashed).
 *
 * Usage: report_unload LIBRARY   (exit 0: survived; 77: not unloaded)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

typedef int get_fn(int kind, int device, void **arena);
typedef int alloc_fn(void *arena, size_t size, void *stream, void **ptr);
typedef int free_fn(void *arena, void *ptr, void *stream);

static void *lib;
static pthread_barrier_t used, unloaded;
static int thread_ok;

static void *user(void *arg)
{
    (void)arg;
    get_fn *get = (get_fn *)(void (*)(void))dlsym(lib, "gpuarena_get");
    alloc_fn *alloc = (alloc_fn *)(void (*)(void))dlsym(lib, "gpuarena_alloc");
    free_fn *release = (free_fn *)(void (*)(void))dlsym(lib, "gpuarena_free");
    void *arena = NULL, *p = NULL;
    thread_ok = get && alloc && release && get(3 /* GPUARENA_HOST */, 0, &arena) == 0 &&
                alloc(arena, 64, NULL, &p) == 0 && release(arena, p, NULL) == 0 &&
                get(3, -7, &arena) != 0; /* a failure: the thread's message */
    pthread_barrier_wait(&used);
    pthread_barrier_wait(&unloaded);
    return NULL; /* exits with the library gone */
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
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
    pthread_t t;
    if (pthread_barrier_init(&used, NULL, 2) != 0 ||
        pthread_barrier_init(&unloaded, NULL, 2) != 0 || pthread_create(&t, NULL, user, NULL) != 0)
        return 1;
    pthread_barrier_wait(&used);
    if (!thread_ok) {
        fprintf(stderr, "report_unload: the thread's calls failed\n");
        return 1;
    }
    if (dlclose(lib) != 0)
        return 1;
    int stayed = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) != NULL;
    pthread_barrier_wait(&unloaded);
    pthread_join(t, NULL);
    if (stayed) {
        printf("report_unload: the library stayed loaded\n");
        return 77;
    }
    raise(SIGUSR1);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return 0;
}
