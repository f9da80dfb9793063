/*
 * churn.h - the random sequence of issue 5's benchmark (b): CHURN_LIVE
 * blocks live, of log-uniform random size from 512 B to 64 MiB; operation
 * i frees live block victim[i] and allocates size[i] in its place.
 *
 * bench_device runs it on a GPU, against the driver's allocators;
 * bench_torch, against PyTorch's caching allocator; bench_churn runs it on
 * the sim arena, so that the block manager's share of it can be measured,
 * and profiled, on a machine without a GPU.  One header, so that all run
 * the same sequence; it compiles as C and as C++ (bench_torch).
 */
#ifndef GA_BENCH_CHURN_H
#define GA_BENCH_CHURN_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define CHURN_LIVE 256
#define CHURN_OPS  (1L << 20) /* operations generated; runs wrap around */

/* xorshift64*: a fixed sequence for every allocator compared. */
static inline uint64_t churn_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

typedef struct churn_seq {
    size_t init[CHURN_LIVE]; /* sizes of the first CHURN_LIVE blocks */
    size_t *size;            /* size of operation i's new block */
    uint16_t *victim;        /* live block operation i frees */
} churn_seq_t;

static inline size_t churn_size(uint64_t *seed)
{
    double u = (double)(churn_rand(seed) >> 11) / 9007199254740992.0; /* [0, 1) */
    double lo = log(512.0), hi = log(64.0 * 1024 * 1024);
    size_t s = (size_t)exp(lo + u * (hi - lo));
    return s < 512 ? 512 : s;
}

/* The sequence, the same on every call; false when out of host memory. */
static inline bool churn_seq_init(churn_seq_t *c)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < CHURN_LIVE; i++)
        c->init[i] = churn_size(&seed);
    c->size = (size_t *)malloc(CHURN_OPS * sizeof *c->size);
    c->victim = (uint16_t *)malloc(CHURN_OPS * sizeof *c->victim);
    if (!c->size || !c->victim) {
        free(c->size);
        free(c->victim);
        return false;
    }
    for (long i = 0; i < CHURN_OPS; i++) {
        c->size[i] = churn_size(&seed);
        c->victim[i] = (uint16_t)(churn_rand(&seed) % CHURN_LIVE);
    }
    return true;
}

#endif /* GA_BENCH_CHURN_H */
