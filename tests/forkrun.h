/*
 * forkrun.h - a test's code run in a child made by fork(): the child under
 * an alarm, so that one that hangs is killed and the failure says so, and
 * its exit status read as the number of the step that failed (0: none).
 */
#ifndef GA_TESTS_FORKRUN_H
#define GA_TESTS_FORKRUN_H

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fork; the child runs BODY(ARG) under an alarm of ALARM_S seconds and
 * exits with what it returns; the parent waits and returns the child's
 * wait status, -1 when there was no child to wait for.  No assertion
 * here: with CK_FORK=no (valgrind) a failed one would leave the test
 * while other threads may still use its stack. */
static inline int ga_fork_run(int (*body)(void *), void *arg, unsigned alarm_s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        alarm(alarm_s);
        _exit(body(arg));
    }
    int status = 0;
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

/* Whether the child of ga_fork_run exited with 0. */
static inline bool ga_child_ok(int status)
{
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Fail the test unless the child of ga_fork_run exited with 0; WHAT
 * names it in the message. */
static inline void ga_require_child_ok(int status, const char *what)
{
    ck_assert_msg(status != -1, "%s: fork or wait failed", what);
    ck_assert_msg(!WIFSIGNALED(status), "%s: killed by signal %d (%s)", what, WTERMSIG(status),
                  WTERMSIG(status) == SIGALRM ? "hung" : "crashed");
    ck_assert_msg(WEXITSTATUS(status) == 0, "%s: failed step %d", what, WEXITSTATUS(status));
}

#endif /* GA_TESTS_FORKRUN_H */
