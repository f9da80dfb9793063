/* check_errors.c - status texts, version, and the no-driver path. */
#include "checkrun.h"
#include "gpuarena.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(every_status_has_a_text)
{
    for (int s = GPUARENA_SUCCESS; s <= GPUARENA_ERR_BUSY; s++) {
        const char *t = gpuarena_strerror((gpuarena_status_t)s);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_ne(t, "unknown gpuarena status");
    }
    ck_assert_str_eq(gpuarena_strerror((gpuarena_status_t)9999), "unknown gpuarena status");
    ck_assert_str_eq(gpuarena_strerror((gpuarena_status_t)-5), "unknown gpuarena status");
}
END_TEST

START_TEST(version_matches_header)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", GPUARENA_VERSION_MAJOR, GPUARENA_VERSION_MINOR,
             GPUARENA_VERSION_PATCH);
    ck_assert_str_eq(gpuarena_version(), want);
}
END_TEST

START_TEST(bad_kind_and_device)
{
    gpuarena_t *a = (gpuarena_t *)0x1;
    ck_assert_int_eq(gpuarena_get((gpuarena_kind_t)42, 0, &a), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, -1, &a), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, 0, NULL), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
}
END_TEST

static void *fail_in_a_thread(void *arg)
{
    (void)arg;
    static char seen[2][256];
    snprintf(seen[0], sizeof seen[0], "%s", gpuarena_last_error());
    gpuarena_t *a = NULL;
    if (gpuarena_get(GPUARENA_HOST, -7, &a) != GPUARENA_ERR_INVALID_DEVICE)
        return NULL;
    snprintf(seen[1], sizeof seen[1], "%s", gpuarena_last_error());
    return seen;
}

/* Each thread has its own message (on the heap since errors.c moved it
 * out of thread-local storage): a new thread's is empty, its failure
 * does not change another's, and its buffer goes with it (valgrind). */
START_TEST(last_error_is_per_thread)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, -1, &a), GPUARENA_ERR_INVALID_DEVICE);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", gpuarena_last_error());
    ck_assert_str_ne(mine, "");
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        void *ret = NULL;
        ck_assert_int_eq(pthread_create(&t, NULL, fail_in_a_thread, NULL), 0);
        ck_assert_int_eq(pthread_join(t, &ret), 0);
        ck_assert_ptr_nonnull(ret);
        char(*seen)[256] = ret;
        ck_assert_str_eq(seen[0], "");
        ck_assert_str_ne(seen[1], "");
        ck_assert_str_ne(seen[1], mine);
    }
    ck_assert_str_eq(gpuarena_last_error(), mine);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {every_status_has_a_text, version_matches_header, bad_kind_and_device,
                            last_error_is_per_thread};
    return ga_check_tests("errors", 0, tests, sizeof tests / sizeof tests[0]);
}
