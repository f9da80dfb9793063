/*
 * check_cuda.c - the CUDA room and the GPU kinds on a machine whatever it
 * has: no driver (GPUARENA_ERR_NO_DRIVER), a driver and no GPU
 * (NO_DEVICE), or GPUs (success, and INVALID_DEVICE past the last one).
 *
 * The stub case re-executes this program with LD_LIBRARY_PATH pointing at
 * a directory where libcuda.so.1 is the CUDA toolkit's stub library (the
 * toolkit ships it as stubs/libcuda.so with the SONAME libcuda.so.1), and
 * once more with LD_LIBRARY_PATH at the toolkit's stubs directory itself:
 * the stub must read as "no driver", never crash.
 */
#include "checkrun.h"
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GA_CUDA_DIR
#define GA_CUDA_DIR "/usr/local/cuda"
#endif

/* What the driver says on this machine, measured once (in the child). */
static gpuarena_status_t driver_state(int *count)
{
    *count = 0;
    gpuarena_status_t st = ga_cuda_load();
    if (st == GPUARENA_SUCCESS) {
        st = ga_cuda_device_count(count);
        if (st == GPUARENA_SUCCESS && *count == 0)
            st = GPUARENA_ERR_NO_DEVICE;
    }
    return st;
}

START_TEST(result_names)
{
    ck_assert_str_eq(ga_cuda_result_name(0), "CUDA_SUCCESS");
    ck_assert_str_eq(ga_cuda_result_name(2), "CUDA_ERROR_OUT_OF_MEMORY");
    ck_assert_str_eq(ga_cuda_result_name(34), "CUDA_ERROR_STUB_LIBRARY");
    ck_assert_str_eq(ga_cuda_result_name(900), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    /* Numbers as in CUDA 13.0's cuda.h (35 is unused there; 224 and 225
     * were once off by one in the table). */
    ck_assert_str_eq(ga_cuda_result_name(36), "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER");
    ck_assert_str_eq(ga_cuda_result_name(218), "CUDA_ERROR_INVALID_PTX");
    ck_assert_str_eq(ga_cuda_result_name(222), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    ck_assert_str_eq(ga_cuda_result_name(224), "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY");
    ck_assert_str_eq(ga_cuda_result_name(225), "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC");
    ck_assert_str_eq(ga_cuda_result_name(12345), "CUDA_ERROR_(unnamed)");
}
END_TEST

/* Every GPU kind reports the driver's state with a message; the status is
 * the same at every call (the driver is loaded once). */
START_TEST(gpu_kinds_report_the_driver)
{
    int count;
    gpuarena_status_t want = driver_state(&count);
    const gpuarena_kind_t kinds[] = {GPUARENA_DEVICE, GPUARENA_PINNED, GPUARENA_MANAGED};
    for (int round = 0; round < 2; round++) {
        for (unsigned k = 0; k < 3; k++) {
            gpuarena_t *a = (gpuarena_t *)0x1;
            gpuarena_status_t st = gpuarena_get(kinds[k], 0, &a);
            if (want != GPUARENA_SUCCESS) {
                ck_assert_int_eq(st, want);
                ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
                ck_assert_int_gt(strlen(gpuarena_last_error()), 20);
                if (want == GPUARENA_ERR_NO_DRIVER)
                    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "libcuda"));
            } else if (kinds[k] == GPUARENA_DEVICE) {
                ck_assert_int_eq(st, GPUARENA_SUCCESS);
            } else {
                /* Pinned and managed providers come later. */
                ck_assert(st == GPUARENA_SUCCESS || st == GPUARENA_ERR_NOT_SUPPORTED);
            }
        }
    }
    printf("check_cuda: driver state on this machine: %s (%s)\n", gpuarena_strerror(want),
           want == GPUARENA_SUCCESS ? "GPUs found" : gpuarena_last_error());
}
END_TEST

START_TEST(device_past_the_last)
{
    int count;
    if (driver_state(&count) != GPUARENA_SUCCESS)
        return; /* nothing to count past */
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, count, &a), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "does not exist"));
    ck_assert_int_eq(ga_cuda_device_check(count), GPUARENA_ERR_INVALID_DEVICE);
}
END_TEST

/* Run in the re-executed child: the stub must read as no driver. */
START_TEST(stub_is_no_driver)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_ERR_NO_DRIVER);
    ck_assert_ptr_null(a);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "stub"));
    ck_assert_int_eq(ga_cuda_load(), GPUARENA_ERR_NO_DRIVER);
    ck_assert_int_eq(gpuarena_get(GPUARENA_PINNED, 0, &a), GPUARENA_ERR_NO_DRIVER);
    ck_assert_int_eq(gpuarena_get(GPUARENA_MANAGED, 0, &a), GPUARENA_ERR_NO_DRIVER);
    printf("check_cuda (stub): %s\n", gpuarena_last_error());
}
END_TEST

/* Run in the re-executed child with LD_LIBRARY_PATH at the toolkit's stubs
 * directory: whatever is found, a status, never a crash. */
START_TEST(stubs_dir_never_crashes)
{
    int count;
    gpuarena_status_t st = driver_state(&count);
    const char *want = getenv("GA_EXPECT");
    gpuarena_t *a = NULL;
    gpuarena_status_t got = gpuarena_get(GPUARENA_DEVICE, 0, &a);
    ck_assert_int_eq(got, st);
    if (want && strcmp(want, "no-driver") == 0)
        ck_assert_int_eq(got, GPUARENA_ERR_NO_DRIVER);
    printf("check_cuda (stubs dir): %s: %s\n", gpuarena_strerror(got), gpuarena_last_error());
}
END_TEST

/* A driver that could not be opened is looked for again at the next
 * call (lib/cuda/cuda.c): dlopen fails for want of host memory as for a
 * missing file, and one such moment made every GPU arena of the process
 * fail with "no driver" for good.  Where there is no driver, the fake
 * one (tests/fakecuda) is opened by its path after the first look: the
 * next look finds it by its name.  Last in the suite: with CK_FORK=no
 * the tests after it would see a driver. */
START_TEST(driver_found_at_a_later_call)
{
    int count;
    if (driver_state(&count) != GPUARENA_ERR_NO_DRIVER)
        return; /* a driver here: nothing to find later */
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_ERR_NO_DRIVER);
    void *h = dlopen(GA_TOP_BUILDDIR "/tests/fakecuda/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "the fake driver: %s", dlerror());
    ck_assert_int_eq(ga_cuda_load(), GPUARENA_SUCCESS);
    ck_assert_int_gt(ga_cuda_driver_version(), 0);
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
}
END_TEST

static const char *self; /* argv[0] */

/* Re-execute this program under LD_LIBRARY_PATH=DIR with MODE. */
static int reexec(const char *dir, const char *mode, const char *expect)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* In front of what is there: the test's own libraries (Check,
         * where it is not installed) must still be found. */
        const char *old = getenv("LD_LIBRARY_PATH");
        char path[4096];
        snprintf(path, sizeof path, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", path, 1);
        if (expect)
            setenv("GA_EXPECT", expect, 1);
        /* The program itself, not /proc/self/exe: under valgrind that is
         * valgrind's own tool. */
        execl(self, "check_cuda", mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(stub_library_reexec)
{
    char stub[4096];
    snprintf(stub, sizeof stub, "%s/lib64/stubs/libcuda.so", GA_CUDA_DIR);
    if (access(stub, R_OK) != 0) {
        printf("check_cuda: no stub library at %s: stub case not run\n", stub);
        return;
    }
    char dir[] = "/tmp/gpuarena-stub-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char link[4200];
    snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
    ck_assert_int_eq(symlink(stub, link), 0);
    int rc = reexec(dir, "--stub", NULL);
    unlink(link);
    rmdir(dir);
    ck_assert_int_eq(rc, 0);
}
END_TEST

START_TEST(stubs_dir_reexec)
{
    int count;
    gpuarena_status_t here = driver_state(&count);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/lib64/stubs", GA_CUDA_DIR);
    /* Without a driver on the machine, nothing there can be one either. */
    int rc = reexec(dir, "--stubs-dir", here == GPUARENA_ERR_NO_DRIVER ? "no-driver" : NULL);
    ck_assert_int_eq(rc, 0);
}
END_TEST

int main(int argc, char **argv)
{
    self = argv[0];
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("core");
    if (argc > 1 && strcmp(argv[1], "--stub") == 0) {
        tcase_add_test(tc, stub_is_no_driver);
    } else if (argc > 1 && strcmp(argv[1], "--stubs-dir") == 0) {
        tcase_add_test(tc, stubs_dir_never_crashes);
    } else {
        tcase_add_test(tc, result_names);
        tcase_add_test(tc, gpu_kinds_report_the_driver);
        tcase_add_test(tc, device_past_the_last);
        tcase_add_test(tc, stub_library_reexec);
        tcase_add_test(tc, stubs_dir_reexec);
        tcase_add_test(tc, driver_found_at_a_later_call);
    }
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return ga_check_run(s);
}
