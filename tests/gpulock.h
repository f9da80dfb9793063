/*
 * gpulock.h - the part of gputest.h that needs no Check, for test programs
 * that are not Check suites (fault_sweep.c): one test program at a time on
 * the GPU (they measure and exhaust its memory, which tests beside them
 * under `make -j' would disturb: the lock is held until the process exits),
 * and whether there is a GPU here.
 */
#ifndef GA_GPULOCK_H
#define GA_GPULOCK_H

#include "cuda/cuda.h"
#include "gpuarena.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/file.h>

static inline void gpu_tests_lock(void)
{
    int fd = open("gpu-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd >= 0)
        (void)flock(fd, LOCK_EX);
}

/* Take the lock; true when a GPU is here, else say why NAME skips. */
static inline bool gpu_tests_begin(const char *name)
{
    gpu_tests_lock();
    int n = 0;
    gpuarena_status_t st = ga_cuda_load();
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_device_count(&n);
    if (st == GPUARENA_SUCCESS && n > 0)
        return true;
    printf("%s: no GPU here (%s): skipped\n", name,
           st != GPUARENA_SUCCESS ? gpuarena_last_error() : "the driver sees none");
    return false;
}

#endif /* GA_GPULOCK_H */
