/*
 * outpath.h - the file names of GPUARENA_TRACE and GPUARENA_STATS, where
 * %p is the process id and %r the MPI rank, so that the ranks of a job
 * (and the processes of a pipeline) do not write over each other.
 */
#ifndef GA_OUTPATH_H
#define GA_OUTPATH_H

#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>

/* Expand PATTERN into OUT: %p -> pid, %r -> the rank from the usual
 * launcher variables (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
 * MV2_COMM_WORLD_RANK, SLURM_PROCID; 0 when none is set), %% -> %.  WHAT
 * names the file in messages ("trace file"). */
gpuarena_status_t ga_output_path(const char *what, const char *pattern, char *out, size_t outsz);

/* Whether PATTERN names a file of each process's own (holds %p). */
bool ga_output_per_process(const char *pattern);

/* The MPI rank as %r would give it. */
const char *ga_output_rank(void);

#endif /* GA_OUTPATH_H */
