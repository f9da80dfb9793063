/*
 * mpi_staging.c - MPI staging buffers from gpuarena.
 *
 * Every rank drives one GPU: the GPU of its rank on the node, modulo the
 * GPUs it can see.  It takes the buffers that MPI sends and receives from
 * the pinned arena of that GPU (page-locked host memory on the NUMA nodes
 * nearest it, so copies to and from the GPU run by DMA), or from the host
 * arena where there is no GPU.  It fills them with a pattern of its own,
 * passes them around a ring with MPI_Sendrecv and to every rank with
 * MPI_Alltoall, checks what it received, frees them, and prints a line with
 * the arena it used and its statistics.  The exit status is not 0 when any
 * rank received something wrong.
 *
 * Build and run (see gpuarena(7), "MPI programs"):
 *
 *   mpicc -std=c11 -o mpi_staging mpi_staging.c $(pkg-config --cflags --libs gpuarena)
 *   mpirun -np 4 ./mpi_staging
 */
#include <gpuarena.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 16, LINE = 512 };

/* The word at index i of what rank sends in round (to peer, for Alltoall). */
static uint64_t pattern(int rank, int round, int peer, size_t i)
{
    return ((uint64_t)(rank + 1) << 48) ^ ((uint64_t)round << 40) ^ ((uint64_t)peer << 32) ^
           (uint64_t)i * 2654435761u;
}

/* An environment variable that holds a non-negative int, or -1. */
static int env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end == '\0' && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/* This process's rank on its node: from the launcher's environment where it
 * says (Open MPI, MVAPICH2, MPICH's Hydra, Slurm's srun), else from the
 * ranks that share this node's memory. */
static int local_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        int r = env_int(vars[i]);
        if (r >= 0)
            return r;
    }
    int rank, r;
    MPI_Comm node;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

static int no_gpu(gpuarena_status_t st)
{
    return st == GPUARENA_ERR_NO_DRIVER || st == GPUARENA_ERR_NO_DEVICE ||
           st == GPUARENA_ERR_NOT_SUPPORTED;
}

/* The pinned arena of GPU (local rank modulo the visible GPUs), or the host
 * arena where there is no GPU.  gpuarena has no call that counts GPUs; an
 * ordinal past the last one gives GPUARENA_ERR_INVALID_DEVICE, so a rank
 * with more ranks than GPUs below it on the node looks down from its local
 * rank for the last GPU, making an arena only on that one. */
static gpuarena_status_t staging_arena(int lrank, gpuarena_t **arena, int *device, char *why,
                                       size_t whylen)
{
    gpuarena_status_t st = gpuarena_get(GPUARENA_PINNED, lrank, arena);
    *device = lrank;
    if (st == GPUARENA_ERR_INVALID_DEVICE) {
        int last = lrank - 1;
        while (last >= 0 &&
               (st = gpuarena_get(GPUARENA_PINNED, last, arena)) == GPUARENA_ERR_INVALID_DEVICE)
            last--;
        if (st == GPUARENA_SUCCESS) {
            *device = lrank % (last + 1);
            st = gpuarena_get(GPUARENA_PINNED, *device, arena);
        }
    }
    if (no_gpu(st)) {
        /* The first words of the status text, up to its ':'. */
        const char *text = gpuarena_strerror(st);
        snprintf(why, whylen, " (pinned: %.*s)", (int)strcspn(text, ":"), text);
        *device = 0;
        st = gpuarena_get(GPUARENA_HOST, 0, arena);
    }
    return st;
}

/* Alloc from the arena or report and return NULL. */
static uint64_t *take(gpuarena_t *arena, size_t words, int rank)
{
    void *p = NULL;
    gpuarena_status_t st = gpuarena_alloc(arena, words * sizeof(uint64_t), NULL, &p);
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "rank %d: gpuarena_alloc(%zu bytes): %s: %s\n", rank,
                words * sizeof(uint64_t), gpuarena_strerror(st), gpuarena_last_error());
        return NULL;
    }
    return p;
}

/* A ring exchange with buffers of a size that changes by round, so that the
 * arena reuses blocks of several sizes.  Returns the words received wrong
 * (or 1 when a buffer could not be had). */
static long ring(gpuarena_t *arena, int rank, int size, int round)
{
    size_t words = (size_t)1024 << (round % 5);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    uint64_t *send = take(arena, words, rank), *recv = take(arena, words, rank);
    long bad = 0;
    if (!send || !recv) {
        bad = 1;
        words = 0;
    }
    for (size_t i = 0; i < words; i++)
        send[i] = pattern(rank, round, right, i);
    /* On a GPU, the data would come from the device here:
     * cuMemcpyDtoHAsync(send, dptr, bytes, stream), then a stream sync. */
    MPI_Sendrecv(send, (int)words, MPI_UINT64_T, right, round, recv, (int)words, MPI_UINT64_T, left,
                 round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (size_t i = 0; i < words; i++)
        bad += recv[i] != pattern(left, round, rank, i);
    gpuarena_free(arena, send, NULL);
    gpuarena_free(arena, recv, NULL);
    return bad;
}

/* Every rank sends a block to every rank. */
static long alltoall(gpuarena_t *arena, int rank, int size, int round)
{
    size_t words = 4096, total = words * (size_t)size;
    uint64_t *send = take(arena, total, rank), *recv = take(arena, total, rank);
    long bad = 0;
    if (!send || !recv) {
        bad = 1;
        words = total = 0;
    }
    for (int peer = 0; peer < size && total; peer++)
        for (size_t i = 0; i < words; i++)
            send[(size_t)peer * words + i] = pattern(rank, round, peer, i);
    MPI_Alltoall(send, (int)words, MPI_UINT64_T, recv, (int)words, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int peer = 0; peer < size && total; peer++)
        for (size_t i = 0; i < words; i++)
            bad += recv[(size_t)peer * words + i] != pattern(peer, round, rank, i);
    gpuarena_free(arena, send, NULL);
    gpuarena_free(arena, recv, NULL);
    return bad;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int lrank = local_rank(), device;
    char why[160] = "";
    gpuarena_t *arena = NULL;
    gpuarena_kind_t kind = GPUARENA_HOST;
    gpuarena_status_t st = staging_arena(lrank, &arena, &device, why, sizeof why);
    if (st == GPUARENA_SUCCESS)
        st = gpuarena_kind(arena, &kind, &device);
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "rank %d: no staging arena: %s: %s\n", rank, gpuarena_strerror(st),
                gpuarena_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* With a GPU, the rank's data lives in the device arena of the same
     * GPU: a device buffer per round, as large as the staging buffers (a
     * real code copies between the two with cudaMemcpyAsync). */
    gpuarena_t *dev = NULL;
    if (kind == GPUARENA_PINNED &&
        gpuarena_get(GPUARENA_DEVICE, device, &dev) != GPUARENA_SUCCESS) {
        fprintf(stderr, "rank %d: no device arena: %s\n", rank, gpuarena_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    long bad = 0;
    for (int round = 0; round < ROUNDS; round++) {
        void *d = NULL;
        if (dev && gpuarena_alloc(dev, ((size_t)1024 << (round % 5)) * sizeof(uint64_t), NULL,
                                  &d) != GPUARENA_SUCCESS)
            bad++;
        bad += ring(arena, rank, size, round);
        if (dev && gpuarena_free(dev, d, NULL) != GPUARENA_SUCCESS)
            bad++;
    }
    for (int round = 0; round < 4; round++)
        bad += alltoall(arena, rank, size, ROUNDS + round);

    gpuarena_stats_t s;
    if (gpuarena_stats(arena, &s) != GPUARENA_SUCCESS)
        memset(&s, 0, sizeof s);
    if (s.live_blocks != 0)
        bad++;
    gpuarena_stats_t ds = {0};
    if (dev && (gpuarena_stats(dev, &ds) != GPUARENA_SUCCESS || ds.allocs != ROUNDS ||
                ds.live_blocks != 0))
        bad++;
    char devtext[96] = "";
    if (dev)
        snprintf(devtext, sizeof devtext, "; device arena: %" PRIu64 " allocs, %" PRIu64 " live",
                 ds.allocs, ds.live_blocks);

    char line[LINE];
    snprintf(line, sizeof line,
             "rank %d/%d: local rank %d, %s arena of device %d%s: %" PRIu64 " allocs, %" PRIu64
             " frees, %" PRIu64 " cache hits, %" PRIu64 " live, peak in use %" PRIu64
             " B, reserved %" PRIu64 " B%s: %s",
             rank, size, lrank, kind == GPUARENA_PINNED ? "pinned" : "host", device, why, s.allocs,
             s.frees, s.cache_hits, s.live_blocks, s.in_use_peak, s.reserved, devtext,
             bad ? "MISMATCH" : "ok");
    /* One line per rank, printed by rank 0 in rank order. */
    char *all = rank == 0 ? malloc((size_t)size * LINE) : NULL;
    if (rank == 0 && !all)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("%s\n", all + (size_t)r * LINE);
        fflush(stdout);
    }
    free(all);

    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total)
        fprintf(stderr, "mpi_staging: %ld words or buffers wrong over all ranks\n", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
