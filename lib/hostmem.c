/*
 * hostmem.c - the tests' switch for the host allocations of hostmem.h.
 */
#include "hostmem.h"

atomic_bool ga_hostmem_fail;
