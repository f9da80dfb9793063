/*
 * checkrun.h - the end of every unit test's main(): run the suite, each
 * test in a child process (Check's default), and turn the failures into
 * the exit status the Automake harness reads.
 */
#ifndef GA_TESTS_CHECKRUN_H
#define GA_TESTS_CHECKRUN_H

#include <check.h>
#include <stdlib.h>

static inline int ga_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The common main(): the N tests of TESTS in one test case of suite NAME,
 * each with TIMEOUT seconds (0: Check's default, CK_DEFAULT_TIMEOUT), run
 * as above. */
static inline int ga_check_tests(const char *name, double timeout, const TTest *const *tests,
                                 size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return ga_check_run(s);
}

#endif /* GA_TESTS_CHECKRUN_H */
