/*
 * errors.c - gpuarena_strerror() and the per-thread last-error message.
 *
 * Each text says what went wrong and, where the user can act, what to do:
 * an HPC user meeting GPUARENA_ERR_NO_DRIVER on a login node should learn
 * from the text alone that the job must run where the NVIDIA driver is.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
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

static _Thread_local char message[GA_ERROR_MAX];

/* The name in parentheses: errors.h makes ga_error a macro for the static
 * analyzer, which this definition must not expand. */
gpuarena_status_t(ga_error)(gpuarena_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return status;
}

void ga_error_clear(void)
{
    message[0] = '\0';
}

void ga_error_save(ga_error_saved_t *s)
{
    memcpy(s->text, message, strlen(message) + 1);
}

void ga_error_restore(const ga_error_saved_t *s)
{
    memcpy(message, s->text, strlen(s->text) + 1);
}

const char *gpuarena_last_error(void)
{
    return message;
}
