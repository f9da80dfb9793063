/*
 * report_unload.c - load libgpuarena with dlopen(3), make an arena, "unload"
 * the library, then send the process SIGUSR1 (stats-report.sh).  The
 * library is linked never to be unloaded (-z nodelete, lib/Makefile.am):
 * a thread that allocated and freed through it, and failed a call (a
 * thread cache, a lock cell and a message buffer of its own, each with a
 * destructor at thread exit), exits after the dlclose and runs them; it
 * crashed where the library was unmapped.  With GPUARENA_STATS and
 * GPUARENA_STATS_SIGNAL=1 the signal then prints a report; where a linker
 * without -z nodelete let the library go, its handler went with it, and
 * the signal is ignored.  Either way the process survives.
 *
 * Usage: report_unload LIBRARY   (exit 0: survived)
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
    void *arena = NULL, *p[300];
    thread_ok = get && alloc && release && get(3 /* GPUARENA_HOST */, 0, &arena) == 0;
    /* Enough locked operations in a row for the arena's lock to give
     * this thread a cell of its own (block/lock.c), then a cache. */
    for (int i = 0; thread_ok && i < 300; i++)
        thread_ok = alloc(arena, 64 << (i % 8), NULL, &p[i]) == 0;
    for (int i = 0; thread_ok && i < 300; i++)
        thread_ok = release(arena, p[i], NULL) == 0;
    thread_ok = thread_ok && get(3, -7, &arena) != 0; /* a failure: the thread's message */
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
    printf("report_unload: the library %s\n", stayed ? "stayed loaded" : "was unloaded");
    raise(SIGUSR1);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return 0;
}
