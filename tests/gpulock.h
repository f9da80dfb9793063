/*
 * gpulock.h - GPU tests take this lock for their whole run: they measure
 * the device's free memory and exhaust it, which tests running beside them
 * under `make -j' would disturb.  The lock is released when the process
 * exits.
 */
#ifndef GA_GPULOCK_H
#define GA_GPULOCK_H

#include <fcntl.h>
#include <sys/file.h>

static inline void gpu_tests_lock(void)
{
    int fd = open("gpu-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd >= 0)
        (void)flock(fd, LOCK_EX);
}

#endif
