/*
 * topo.h - the topology room (hwloc only): which NUMA nodes and CPUs are
 * near each GPU, turning a placement policy into a node set, binding
 * host memory to it and touching it first.  The topology is the
 * machine's, or the hwloc XML file named by GPUARENA_TOPOLOGY.
 */
#ifndef GA_TOPO_H
#define GA_TOPO_H

#include "config/settings.h"
#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a segment's pages go. */
typedef struct ga_placement {
    ga_numa_policy_t policy; /* NODES and INTERLEAVE bind; LOCAL first-touch */
    uint64_t nodes;          /* bitmask of OS NUMA node indexes */
    bool fallback;           /* locality unknown: interleave over all nodes */
    uint64_t placed;         /* ga_topo_placed_nodes, set by ga_topo_placement */
} ga_placement_t;

/* Resolve the NUMA settings of S for an arena near GPU DEVICE (-1: none)
 * into a placement.  A node named in S that does not exist is
 * GPUARENA_ERR_CONFIG, its message starting with GA_TOPO_NUMA_ERROR (the
 * key), which gpuarena.c replaces with where the value came from. */
#define GA_TOPO_NUMA_ERROR "numa: "
gpuarena_status_t ga_topo_placement(const ga_settings_t *s, int device, ga_placement_t *out);

/* Bind the pages of [ADDR, ADDR+SIZE) (page aligned) as PL says, before
 * they are touched.  Where the system refuses binding (a container
 * without CAP_SYS_NICE, a cpuset without those nodes, no NUMA support)
 * the pages are left to the kernel: success, with *UNBOUND true. */
gpuarena_status_t ga_topo_bind(const ga_placement_t *pl, void *addr, size_t size, bool *unbound);

/* The nodes of PL that binding gives pages to on this machine: those it
 * has, with memory; 0 where it binds nothing (first touch, a topology
 * read from a file that is not this machine's, or that cannot be read).
 * The statistics' numa_nodes: ga_topo_placement keeps it in pl->placed,
 * so that a report does not load this machine's topology (under the
 * list of arenas, gpuarena_stats_print) where GPUARENA_TOPOLOGY made the
 * decisions. */
uint64_t ga_topo_placed_nodes(const ga_placement_t *pl);

/* Write every page (PAGE bytes) of [ADDR, ADDR+SIZE), bound by
 * ga_topo_bind, once, with THREADS threads (1 to 256), the calling
 * thread among them, so that the kernel allocates the pages as PL says
 * (prefault.c: a local placement stays on the calling thread's node). */
void ga_topo_prefault(const ga_placement_t *pl, void *addr, size_t size, size_t page,
                      unsigned threads);

/* Write the node list of MASK ("0-1,3") into BUF; returns BUF. */
char *ga_topo_nodes_string(uint64_t mask, char *buf, size_t len);

#endif /* GA_TOPO_H */
