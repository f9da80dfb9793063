/*
 * errors.c - gpuarena_strerror() and the per-thread last-error message.
 *
 * Each text says what went wrong and, where the user can act, what to do:
 * an HPC user meeting GPUARENA_ERR_NO_DRIVER on a login node should learn
 * from the text alone that the job must run where the NVIDIA driver is.
 */
#include "errors.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const texts[] = {
    [GPUARENA_SUCCESS] = "success",
    [GPUARENA_ERR_INVALID_ARGUMENT] = "invalid argument (a NULL arena or output pointer, or "
                                      "a value out of range)",
    [GPUARENA_ERR_OUT_OF_MEMORY] = "out of memory: the arena released its cached memory, "
                                   "retried and still found none (see gpuarena_stats_print)",
    [GPUARENA_ERR_NO_DRIVER] = "no CUDA driver: libcuda.so.1 could not be loaded or is the "
                               "toolkit's stub; run on a machine with the NVIDIA driver, "
                               "or use a host arena",
    [GPUARENA_ERR_NO_DEVICE] = "no CUDA device: the driver is loaded but sees no GPU; check "
                               "CUDA_VISIBLE_DEVICES and nvidia-smi, or use a host arena",
    [GPUARENA_ERR_INVALID_DEVICE] = "invalid device: the ordinal is not that of a visible GPU",
    [GPUARENA_ERR_INVALID_POINTER] = "invalid pointer: this arena did not hand it out",
    [GPUARENA_ERR_DOUBLE_FREE] = "double free: the block was already freed",
    [GPUARENA_ERR_INTERIOR_POINTER] = "interior pointer: it points inside a block, not at "
                                      "its start",
    [GPUARENA_ERR_SIZE_OVERFLOW] = "size overflow: the size cannot be represented after "
                                   "rounding",
    [GPUARENA_ERR_INVALID_STREAM] = "invalid stream: unknown to the driver or of another device",
    [GPUARENA_ERR_CONFIG] = "configuration error: see gpuarena_last_error() for the file, "
                            "line and key, and gpuarena.conf(5)",
    [GPUARENA_ERR_NOT_SUPPORTED] = "not supported by this kind of arena or by this device",
    [GPUARENA_ERR_STREAM_CAPTURE] = "not allowed while the stream is being captured into a "
                                    "CUDA graph",
    [GPUARENA_ERR_DRIVER] = "CUDA driver error (see gpuarena_last_error() for the call and "
                            "code)",
    [GPUARENA_ERR_SYSTEM] = "operating system error (see gpuarena_last_error())",
    [GPUARENA_ERR_HOST_MEMORY] = "no host memory left for gpuarena's bookkeeping",
    [GPUARENA_ERR_CORRUPT] = "an internal invariant does not hold (see gpuarena_last_error())",
    [GPUARENA_ERR_BUSY] = "the arena still has live blocks",
};

const char *gpuarena_strerror(gpuarena_status_t status)
{
    if ((unsigned)status < sizeof texts / sizeof texts[0] && texts[status])
        return texts[status];
    return "unknown gpuarena status";
}

/* The message: a buffer of GA_ERROR_MAX bytes per thread, made at the
 * thread's first message and freed when it exits, not thread-local
 * storage itself.  The library's thread-local block is static (the fast
 * path's variables use the initial-exec model, block/tcache.h), and
 * glibc keeps some 1.5 KiB in all for the libraries a program loads with
 * dlopen, as Python does gpuarena for PyTorch and CuPy: a message of 512
 * bytes made 696 of gpuarena's, and a third library such as it could not
 * be loaded.  A thread that has no room for a buffer (no host memory)
 * reports the text of its last status. */
static _Thread_local char *message;
static _Thread_local const char *fallback;
static pthread_key_t key; /* never deleted: the library is never unloaded (lib/Makefile.am) */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_made;

static void free_message(void *m)
{
    message = NULL; /* a message made by a later destructor makes another */
    free(m);
}

static void make_key(void)
{
    key_made = pthread_key_create(&key, free_message) == 0;
}

/* The thread's buffer, made now if need be; NULL without host memory.
 * Plain malloc, not hostmem.h's: a test's host-memory failure is not the
 * message's. */
static char *buffer(void)
{
    if (message)
        return message;
    pthread_once(&key_once, make_key);
    char *m = key_made ? malloc(GA_ERROR_MAX) : NULL;
    if (m && pthread_setspecific(key, m) != 0) {
        free(m);
        m = NULL;
    }
    if (m)
        m[0] = '\0';
    return message = m;
}

/* The name in parentheses: errors.h makes ga_error a macro for the static
 * analyzer, which this definition must not expand. */
gpuarena_status_t(ga_error)(gpuarena_status_t status, const char *fmt, ...)
{
    char *m = buffer();
    fallback = m ? NULL : gpuarena_strerror(status);
    if (m) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, GA_ERROR_MAX, fmt, ap);
        va_end(ap);
    }
    return status;
}

void ga_error_clear(void)
{
    fallback = NULL;
    if (message)
        message[0] = '\0';
}

void ga_error_save(ga_error_saved_t *s)
{
    s->fallback = fallback;
    const char *m = message && !fallback ? message : "";
    memcpy(s->text, m, strlen(m) + 1);
}

/* A text saved from a buffer goes back into it: the thread had one then,
 * and keeps it until it exits. */
void ga_error_restore(const ga_error_saved_t *s)
{
    ga_error_clear();
    fallback = s->fallback;
    if (!fallback && s->text[0] && message)
        memcpy(message, s->text, strlen(s->text) + 1);
}

const char *gpuarena_last_error(void)
{
    if (fallback)
        return fallback;
    return message ? message : "";
}
