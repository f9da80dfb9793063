/*
 * gputest.h - what the GPU tests share: one test program at a time on the
 * GPU and the skip (77) where there is no GPU (gpulock.h, which needs no
 * Check), device 0's primary context current in every test, an assertion
 * that says why a call failed, and running the suite in-process (CUDA
 * cannot be used in a child forked after the parent initialised it).
 */
#ifndef GA_GPUTEST_H
#define GA_GPUTEST_H

#include "cuda/cuda.h"
#include "gpuarena.h"
#include "gpulock.h" /* gpu_tests_lock(), gpu_tests_begin() */

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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

/* Whether the machine has WANT GPUs or more; if not, says that WHAT is not
 * tested here (the test returns; the others of its program still run). */
static inline bool gpus_at_least(int want, const char *what)
{
    int n = 0;
    OK(ga_cuda_device_count(&n));
    if (n >= want)
        return true;
    printf("%s: %d GPU%s here: not tested\n", what, n, n == 1 ? "" : "s");
    return false;
}

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
