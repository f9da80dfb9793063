/*
 * sigpipe.h - writing to a pipe whose reader may have gone without being
 * killed for it (sigpipe.c).
 */
#ifndef GA_SIGPIPE_H
#define GA_SIGPIPE_H

#include <signal.h>
#include <stdbool.h>

typedef struct ga_sigpipe {
    sigset_t old;     /* the thread's mask before */
    bool was_pending; /* a SIGPIPE of the program's own, left to it */
} ga_sigpipe_t;

/* Hold SIGPIPE off in this thread until ga_sigpipe_release: a write to a
 * pipe with no reader fails with EPIPE then, as it does for a program
 * that ignores the signal. */
void ga_sigpipe_hold(ga_sigpipe_t *h);

/* Take back a SIGPIPE that the writes since ga_sigpipe_hold raised (not
 * one pending before), and restore the thread's mask.  errno is kept. */
void ga_sigpipe_release(ga_sigpipe_t *h);

#endif /* GA_SIGPIPE_H */
