/*
 * gputest.h - what the GPU tests share: one test program at a time on the
 * GPU (they measure and exhaust its memory, which tests beside them under
 * `make -j' would disturb: the lock is held until the process exits), the
 * skip (77) where there is no GPU, device 0's primary context current in
 * every test, an assertion that says why a call failed, and running the
 * suite in-process (CUDA cannot be used in a child forked after the
 * parent initialised it).
 */
#ifndef GA_GPUTEST_H
#define GA_GPUTEST_H

#include "cuda/cuda.h"
#include "gpuarena.h"

#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

static void *gpu_ctx; /* device 0's primary context */

static inline void gpu_setup(void)
{
    gpuarena_status_t st = ga_cuda_primary_retain(0, &gpu_ctx);
    ck_assert_msg(st == GPUARENA_SUCCESS, "primary context: %s", gpuarena_last_error());
    st = ga_cuda_set_current(gpu_ctx);
    ck_assert_msg(st == GPUARENA_SUCCESS, "set current: %s", gpuarena_last_error());
}

static inline void gpu_teardown(void)
{
    ga_cuda_primary_release(0);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        gpuarena_status_t st_ = (call);                                                            \
        ck_assert_msg(st_ == GPUARENA_SUCCESS, "%s: %s (%d): %s", #call, gpuarena_strerror(st_),   \
                      (int)st_, gpuarena_last_error());                                            \
    } while (0)

/* Run S in this process; the exit status of the test program. */
static inline int gpu_tests_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* GA_GPUTEST_H */
