/*
 * check_frameworks.c - the PyTorch and CuPy entry points, called as the
 * frameworks call them.  Without a GPU, only the failure path is checked
 * (NULL and a reason in gpuarena_last_error()); with one, blocks come from
 * the default device arena and go back to it.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"

#include "gputest.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static bool have_gpu;

START_TEST(failures_return_null_with_a_reason)
{
    ck_assert_ptr_null(gpuarena_torch_alloc(-1, 0, NULL));
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "negative"));
    ck_assert_ptr_null(gpuarena_torch_alloc(4096, 99, NULL));
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "99"));
    ck_assert_ptr_null(gpuarena_cupy_malloc(NULL, 4096, -1));
    ck_assert_str_ne(gpuarena_last_error(), "");
    /* Frees of nothing do nothing. */
    gpuarena_torch_free(NULL, 0, 0, NULL);
    gpuarena_cupy_free(NULL, NULL, 0);
    gpuarena_torch_record_stream(NULL, NULL);
    /* No default device arena yet, or none to be had: nothing to do,
     * and none is made. */
    gpuarena_torch_empty_cache();
    /* A fraction out of range, or a device there is none of: a reason,
     * nothing raised (no PyTorch here), nothing changed. */
    gpuarena_torch_set_memory_fraction(1.5, 0);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "1.5"));
    gpuarena_torch_set_memory_fraction(NAN, 0);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "nan"));
    gpuarena_torch_set_memory_fraction(0.5, 99);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "99"));
    if (!have_gpu) {
        ck_assert_ptr_null(gpuarena_torch_alloc(4096, 0, NULL));
        ck_assert_ptr_null(gpuarena_cupy_malloc(NULL, 4096, 0));
        printf("check_frameworks: no GPU: %s\n", gpuarena_last_error());
    }
}
END_TEST

START_TEST(torch_entry_points)
{
    if (!have_gpu)
        return;
    void *ctx, *s, *s2;
    ck_assert_int_eq(ga_cuda_primary_retain(0, &ctx), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_set_current(ctx), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_create(true, &s2), GPUARENA_SUCCESS);
    void *p = gpuarena_torch_alloc(3 * MiB, 0, s);
    ck_assert_msg(p != NULL, "%s", gpuarena_last_error());
    ck_assert_int_eq(ga_cuda_memset_d8_async((uint64_t)(uintptr_t)p, 0x11, 3 * MiB, s),
                     GPUARENA_SUCCESS);
    gpuarena_torch_record_stream(p, s2);
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_ge(st.live_blocks, 1);
    uint64_t frees = st.frees;
    gpuarena_torch_free(p, 3 * MiB, 0, s);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.frees, frees + 1);
    /* A pointer the arena does not know: nothing changes, a reason. */
    char local;
    gpuarena_torch_free(&local, 1, 0, s);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.frees, frees + 1);
    gpuarena_torch_record_stream(&local, s2);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "torch_record_stream"));
    ck_assert_ptr_null(gpuarena_torch_alloc(0, 0, s));
    /* torch.cuda.empty_cache(): the cached block goes back to the driver. */
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_ge(st.cached, 3 * MiB);
    uint64_t trims = st.trims;
    gpuarena_torch_empty_cache();
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.cached, 0);
    ck_assert_uint_gt(st.trims, trims);
    ck_assert_int_eq(ga_cuda_stream_sync(s), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_cuda_stream_sync(s2), GPUARENA_SUCCESS);
    ga_cuda_stream_destroy(s);
    ga_cuda_stream_destroy(s2);
    ga_cuda_primary_release(0);
}
END_TEST

/* torch.cuda.set_per_process_memory_fraction: the default device arena
 * takes no more than the fraction of the device's memory; a larger
 * request fails before the driver is asked, saying why, and 1 lifts the
 * cap again. */
START_TEST(torch_memory_fraction)
{
    if (!have_gpu)
        return;
    size_t total = 0;
    ck_assert_int_eq(ga_cuda_device_total_mem(0, &total), GPUARENA_SUCCESS);
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), GPUARENA_SUCCESS);
    gpuarena_torch_set_memory_fraction(0.25, 0);
    ck_assert_ptr_null(gpuarena_torch_alloc((ssize_t)(total / 10 * 3), 0, NULL));
    ck_assert_msg(strstr(gpuarena_last_error(), "max_reserved"), "%s", gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_le(st.reserved, total / 4 + 1);
    void *p = gpuarena_torch_alloc(64 * MiB, 0, NULL);
    ck_assert_msg(p != NULL, "%s", gpuarena_last_error());
    gpuarena_torch_free(p, 64 * MiB, 0, NULL);
    /* Nothing the device could hold is above 1. */
    gpuarena_torch_set_memory_fraction(1.0, 0);
    ck_assert_int_eq(gpuarena_set(a, "max_reserved=none"), GPUARENA_SUCCESS);
    gpuarena_torch_empty_cache();
}
END_TEST

START_TEST(cupy_entry_points)
{
    if (!have_gpu)
        return;
    void *p = gpuarena_cupy_malloc(NULL, MiB, 0);
    ck_assert_msg(p != NULL, "%s", gpuarena_last_error());
    gpuarena_cupy_free(NULL, p, 0);
    /* PARAM names an arena of the program's. */
    gpuarena_t *mine;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "expandable=false", &mine),
                     GPUARENA_SUCCESS);
    p = gpuarena_cupy_malloc(mine, 5 * MiB, 0);
    ck_assert_msg(p != NULL, "%s", gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(mine, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.live_blocks, 1);
    gpuarena_cupy_free(mine, p, 0);
    ck_assert_int_eq(gpuarena_stats(mine, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_int_eq(gpuarena_destroy(mine), GPUARENA_SUCCESS);
}
END_TEST

int main(void)
{
    gpu_tests_lock();
    int n = 0;
    have_gpu =
        ga_cuda_load() == GPUARENA_SUCCESS && ga_cuda_device_count(&n) == GPUARENA_SUCCESS && n > 0;
    Suite *s = suite_create("frameworks");
    TCase *tc = tcase_create("frameworks");
    tcase_add_test(tc, failures_return_null_with_a_reason);
    tcase_add_test(tc, torch_entry_points);
    tcase_add_test(tc, torch_memory_fraction);
    tcase_add_test(tc, cupy_entry_points);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return gpu_tests_run(s);
}
