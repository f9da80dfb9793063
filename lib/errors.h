/*
 * errors.h - status texts and the per-thread message behind
 * gpuarena_last_error().  Any room may call ga_error() to say, in words, why
 * it is about to return a failing status; the message stays with the
 * calling thread until its next failure.
 */
#ifndef GA_ERRORS_H
#define GA_ERRORS_H

#include "gpuarena.h"

#if defined(__GNUC__)
#define GA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GA_PRINTF(a, b)
#endif

/* The longest message kept, with its terminating zero. */
#define GA_ERROR_MAX 512

/* Record a message for gpuarena_last_error() and return STATUS. */
gpuarena_status_t ga_error(gpuarena_status_t status, const char *fmt, ...) GA_PRINTF(2, 3);
#ifdef __clang_analyzer__
/* The static analyzer (scan-build) reads one file at a time: say that
 * ga_error returns its status, or every caller's error path looks as if
 * it could return success. */
#define ga_error(status, ...) ((void)(ga_error)((status), __VA_ARGS__), (status))
#endif

/* Forget the calling thread's message. */
void ga_error_clear(void);

/* The calling thread's message, kept across work whose failure the
 * caller absorbs (an allocation that succeeds after its out-of-memory
 * retry, a GPUARENA_STATS name that is ignored): gpuarena_last_error(3)
 * speaks of the last call that failed, not of what a call recovered
 * from. */
typedef struct ga_error_saved {
    char text[GA_ERROR_MAX];
    const char *fallback; /* a status's text, where the thread had no buffer (errors.c) */
} ga_error_saved_t;
void ga_error_save(ga_error_saved_t *s);
void ga_error_restore(const ga_error_saved_t *s);

#endif /* GA_ERRORS_H */
