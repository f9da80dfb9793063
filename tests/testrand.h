/*
 * testrand.h - the tests' random numbers: xorshift64 (Marsaglia), fast,
 * and the same sequence from the same seed on every machine, so that a
 * failing random test can be run again as it ran.
 */
#ifndef GA_TESTS_TESTRAND_H
#define GA_TESTS_TESTRAND_H

#include <stdint.h>

/* The next number of the sequence in *S (a seed of 0 stays 0). */
static inline uint64_t ga_test_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif /* GA_TESTS_TESTRAND_H */
