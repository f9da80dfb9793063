/*
 * totals.h - the arenas' totals per kind and device (totals.c).
 */
#ifndef GA_TOTALS_H
#define GA_TOTALS_H

#include "arena.h"
#include "block/total.h"

#include <stdbool.h>

/* The total of KIND on DEVICE (host and sim: device 0), or NULL where
 * there is none (a device out of range). */
ga_total_t *ga_total_of(gpuarena_kind_t kind, int device);

/* *OUT: the total of KIND on DEVICE; whether it has ever counted an
 * arena's memory or counts an arena now (gpuarena_stats_print lists
 * those). */
bool ga_total_read(gpuarena_kind_t kind, int device, gpuarena_total_t *out);

/* fork(2), in the child: a reset of a peak that another thread had under
 * way (no arena lock is held there) is over; its total is free again. */
void ga_totals_fork_child(void);

#endif /* GA_TOTALS_H */
