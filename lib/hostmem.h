/*
 * hostmem.h - host allocations whose failure the library survives with
 * nothing lost, and the switch that makes them fail for the tests.
 *
 * A few paths must not drop what they were given when the host has no
 * memory left: a free that a framework's hook defers (deferred.c), the
 * record of a CUDA graph's pool (graphpool.c), the streams recorded on a
 * block (block.c).  Each has a fallback that needs no allocation, and
 * the tests show it by making these allocations fail.  They cannot make
 * malloc itself fail: valgrind and the sanitizers replace it, and the
 * suite runs under both.  So those paths allocate through ga_malloc,
 * ga_calloc and ga_realloc, which fail while ga_hostmem_fail is set; in
 * a program that never sets it they cost one load.
 */
#ifndef GA_HOSTMEM_H
#define GA_HOSTMEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Tests only: while true, ga_malloc, ga_calloc and ga_realloc return
 * NULL. */
extern atomic_bool ga_hostmem_fail;

static inline bool ga_hostmem_failing(void)
{
    return __builtin_expect(atomic_load_explicit(&ga_hostmem_fail, memory_order_relaxed), 0);
}

static inline void *ga_malloc(size_t size)
{
    return ga_hostmem_failing() ? NULL : malloc(size);
}

static inline void *ga_calloc(size_t n, size_t size)
{
    return ga_hostmem_failing() ? NULL : calloc(n, size);
}

static inline void *ga_realloc(void *p, size_t size)
{
    return ga_hostmem_failing() ? NULL : realloc(p, size);
}

#endif /* GA_HOSTMEM_H */
