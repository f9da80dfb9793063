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

#endif /* GA_TESTS_CHECKRUN_H */
