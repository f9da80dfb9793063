/*
 * gputest.h - what the GPU tests share: one test program at a time on the
 * GPU and the skip (77) where there is no GPU (gpulock.h, which needs no
 * Check), device 0's primary context current in every test, an assertion
 * that says why a call failed, and running the suite in-process (CUDA
 * cannot be used in a child forked after the parent initialised it); a
 * second process, where a test needs one, is the test program started
 * afresh (gpu_spawn_self).
 */
#ifndef GA_GPUTEST_H
#define GA_GPUTEST_H

#include "cuda/cuda.h"
#include "gpuarena.h"
#include "gpulock.h" /* gpu_tests_lock(), gpu_tests_begin() */

#include <check.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Run the test program again as a new process with ARGV (ARGV[0] its
 * path), which may use CUDA as a child of fork() may not; FD, a file
 * descriptor it is to import, is inherited by it and closed once it has
 * exited.  The child must exit 0. */
static inline void gpu_spawn_self(char *const argv[], int fd)
{
    extern char **environ;
    ck_assert_int_eq(fcntl(fd, F_SETFD, 0), 0); /* inherited: no close-on-exec */
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, argv[0], NULL, NULL, argv, environ), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    close(fd);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s %s: the importing process failed (status %#x)", argv[0], argv[1], status);
}

/* SIZE bytes of device memory at D all read BYTE. */
static inline void gpu_expect_bytes(uint64_t d, size_t size, unsigned char byte)
{
    unsigned char buf[4096];
    for (size_t at = 0; at < size; at += sizeof buf) {
        size_t n = size - at < sizeof buf ? size - at : sizeof buf;
        OK(ga_cuda_memcpy_dtoh(buf, d + at, n));
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(buf[j] == byte, "byte %zu: %#x, want %#x", at + j, buf[j], byte);
    }
}

/* The second process of gpu_spawn_self, which asserts nothing (its exit
 * status says which step failed): device 0's primary context made
 * current (0, else 3 with the reason on stderr), then the 64 KiB at D,
 * imported from the first process, read as EXPECT (else 4 or 5) and
 * written with WRITE for the first to read (else 6). */
#define GPU_CHILD_BYTES (64 << 10)
static inline int gpu_child_begin(void)
{
    void *ctx;
    if (ga_cuda_load() == GPUARENA_SUCCESS && ga_cuda_primary_retain(0, &ctx) == GPUARENA_SUCCESS &&
        ga_cuda_set_current(ctx) == GPUARENA_SUCCESS)
        return 0;
    fprintf(stderr, "import: %s\n", gpuarena_last_error());
    return 3;
}

static inline int gpu_child_read_write(uint64_t d, unsigned char expect, unsigned char write)
{
    static unsigned char buf[GPU_CHILD_BYTES];
    if (ga_cuda_memcpy_dtoh(buf, d, sizeof buf) != GPUARENA_SUCCESS)
        return 4;
    for (size_t i = 0; i < sizeof buf; i++)
        if (buf[i] != expect) {
            fprintf(stderr, "import: byte %zu is %#x, not %#x\n", i, buf[i], expect);
            return 5;
        }
    if (ga_cuda_memset_d8(d, write, sizeof buf) != GPUARENA_SUCCESS ||
        ga_cuda_ctx_sync() != GPUARENA_SUCCESS)
        return 6;
    return 0;
}

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
