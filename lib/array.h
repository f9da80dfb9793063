/*
 * array.h - room for one more entry in a growable array.
 *
 * The library keeps a few arrays that grow one entry at a time and are
 * never shrunk (the block manager's slabs, spare events and pools, the
 * vmm's handles that would not release): each doubles when full, and a
 * failed growth leaves the array as it was, so that the caller can report
 * it and go on.
 */
#ifndef GA_ARRAY_H
#define GA_ARRAY_H

#include "hostmem.h"

#include <stdlib.h>

/* ARR, N entries of ELEM bytes used of *CAP, with room for one more: ARR
 * itself when it has it, else grown to twice *CAP entries (FIRST when
 * empty); NULL when there is no memory, ARR then unchanged. */
static inline void *ga_room_for_one(void *arr, unsigned n, unsigned *cap, size_t elem,
                                    unsigned first)
{
    if (n < *cap)
        return arr;
    unsigned c = *cap ? *cap * 2 : first;
    void *grown = ga_realloc(arr, (size_t)c * elem);
    if (grown)
        *cap = c;
    return grown;
}

#endif /* GA_ARRAY_H */
