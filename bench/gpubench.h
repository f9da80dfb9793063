/*
 * gpubench.h - what the GPU benchmarks share: a clock, medians, fatal
 * errors that print gpuarena_last_error(), opening device 0 (or saying
 * why there is no GPU and exiting 77), the machine header, and the count
 * of targets met and missed.
 *
 * The benchmarks reach the CUDA room's wrappers (lib/cuda/cuda.h) for the
 * driver's own allocators, so they link the convenience library.
 */
#ifndef GA_GPUBENCH_H
#define GA_GPUBENCH_H

#include "cuda/cuda.h"
#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* Exit status of a benchmark: every target met, some missed, no GPU. */
#define GB_EXIT_MET    0
#define GB_EXIT_ERROR  1
#define GB_EXIT_MISSED 2
#define GB_EXIT_NO_GPU 77

/* The program's name, for messages (set by gb_open). */
extern const char *gb_prog;

/* Seconds of CLOCK_MONOTONIC. */
double gb_now(void);

/* Median of N values (sorts V). */
double gb_median(double *v, int n);

/* Print "PROG: WHAT: status (last error)" and exit 1. */
_Noreturn void gb_die(const char *what, gpuarena_status_t st);

/* Check a status; die naming WHAT when it is not success. */
#define GB_CHECK(what, call)                                                                       \
    do {                                                                                           \
        gpuarena_status_t gb_st_ = (call);                                                         \
        if (gb_st_ != GPUARENA_SUCCESS)                                                            \
            gb_die(what, gb_st_);                                                                  \
    } while (0)

/* Open device 0 for benchmark PROG: load the driver, retain the primary
 * context and make it current on the calling thread, print the header
 * (GPU, driver, memory, host, gpuarena, settings from the environment).
 * Without a driver or a GPU: print why and exit 77.  Returns the context. */
void *gb_open(const char *prog);

/* Make CTX current on the calling thread (every thread that calls the
 * driver's allocators directly). */
void gb_thread_ctx(void *ctx);

/* Device memory free now (after waiting for queued work). */
size_t gb_device_free(void);

/* Host memory available (MemAvailable), 0 when unknown. */
size_t gb_host_available(void);

/* Record a target: prints nothing; counts for gb_finish. */
void gb_target(bool met);

/* Print the count of targets met and missed; the exit status. */
int gb_finish(void);

/* Human size "512 B", "64 KiB", "1 GiB". */
const char *gb_size(size_t n, char buf[32]);

#endif /* GA_GPUBENCH_H */
