/*
 * sigpipe.c - SIGPIPE held off around the library's own writes.
 *
 * gpuarena writes to files the user names, which may be pipes
 * (GPUARENA_TRACE=>(gzip > t.gz), GPUARENA_STATS=stderr under
 * `prog 2>&1 | head`).  Where the reader has gone, write(2) raises
 * SIGPIPE, whose default action ends the process: the program was killed
 * by a report or a trace it never asked to read.  So the signal is
 * blocked in the writing thread, the write fails with EPIPE (an error
 * the caller reports), and a SIGPIPE the write raised is taken back
 * before the mask is restored.  One that was pending already is the
 * program's own and is left to it.
 */
#include "sigpipe.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static void pipe_only(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGPIPE);
}

void ga_sigpipe_hold(ga_sigpipe_t *h)
{
    sigset_t set, pending;
    pipe_only(&set);
    h->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &h->old);
}

void ga_sigpipe_release(ga_sigpipe_t *h)
{
    int e = errno;
    sigset_t set, pending;
    pipe_only(&set);
    if (!h->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&set, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &h->old, NULL);
    errno = e;
}
