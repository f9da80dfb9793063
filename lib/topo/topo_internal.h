/*
 * topo_internal.h - the topology room's own functions, shared by its files
 * (topo.c loading, gpus.c finding GPUs, bind.c binding, prefault.c
 * touching), the tool gpuarena-topo and the tests.  Only topo.h is the room's interface to
 * the rest of the library.
 *
 * Two topologies may be in play: the one placement decisions are made on
 * (the machine's, or the hwloc XML file named by GPUARENA_TOPOLOGY, to
 * test decisions for machines one does not have), and the machine's own,
 * which binding always uses since it binds real pages.
 */
#ifndef GA_TOPO_INTERNAL_H
#define GA_TOPO_INTERNAL_H

#include "topo/topo.h"

#include <hwloc.h>

/* Load a topology with I/O discovery (PCI devices kept): from the XML
 * file PATH, or of this machine when PATH is NULL.  Not cached. */
gpuarena_status_t ga_topo_load(const char *path, hwloc_topology_t *out);

/* The cached topology of decisions (GPUARENA_TOPOLOGY or the machine),
 * loaded once, thread-safely.  *XML gets the file name or NULL. */
gpuarena_status_t ga_topo_decisions(hwloc_topology_t *t, const char **xml);

/* The cached topology of this machine (for binding). */
gpuarena_status_t ga_topo_machine(hwloc_topology_t *t);

/* Bitmask of the OS indexes (< 64) of every NUMA node of T. */
uint64_t ga_topo_all_nodes(hwloc_topology_t t);

/* Mask of the nodes of NODESET (OS indexes < 64). */
uint64_t ga_topo_mask(hwloc_const_nodeset_t nodeset);
/* The nodes of SET that have memory, as ga_topo_mask gives them: a node
 * without any cannot take a binding.  Every node of SET where the
 * topology gives no node's memory. */
uint64_t ga_topo_memory_nodes(hwloc_topology_t t, hwloc_const_nodeset_t set);
/* The nodes of SET with memory of plain DRAM (no subtype, or "DRAM"),
 * before the special ones (HBM, NVM, a GPU's own memory), which are
 * small, slow or not host memory at all: those, or every node of SET
 * with memory where none is plain. */
uint64_t ga_topo_plain_first(hwloc_topology_t t, hwloc_const_nodeset_t set);

#define GA_TOPO_BUSID_LEN 32

/* A GPU and where it sits. */
typedef struct ga_topo_gpu {
    int ordinal;                   /* CUDA ordinal, or rank in PCI order */
    char busid[GA_TOPO_BUSID_LEN]; /* "dddd:bb:dd.f", lower case */
    char name[128];                /* model (driver or file), may be "" */
    bool located;                  /* its PCI device is in the topology */
    uint64_t nodes;                /* nearest NUMA nodes (0 when not located) */
    char cpus[256];                /* nearest CPUs as a list, "0-7,16-23" */
} ga_topo_gpu_t;

/* Where the GPU list comes from. */
typedef enum ga_topo_gpu_source {
    GA_TOPO_GPUS_AUTO = 0, /* the driver's GPUs when it loads (and, with an
                            * XML file, when the file holds every one of
                            * them), else the file's NVIDIA controllers */
    GA_TOPO_GPUS_FILE = 1  /* the NVIDIA (0x10de) display and 3D
                            * controllers of T, in PCI order */
} ga_topo_gpu_source_t;

/* The GPUs of T, in ordinal order: *GPUS is malloc'ed (free it), *COUNT
 * may be 0.  *FROM_DRIVER says whether the driver named them. */
gpuarena_status_t ga_topo_gpus(hwloc_topology_t t, ga_topo_gpu_source_t src, ga_topo_gpu_t **gpus,
                               int *count, bool *from_driver);

/* Locate the GPU with PCI bus id BUSID in T: fill nodes, cpus, located. */
void ga_topo_locate(hwloc_topology_t t, const char *busid, ga_topo_gpu_t *g);

/* ga_topo_placement() on an explicit topology and GPU (GPU NULL: none, or
 * not found). */
gpuarena_status_t ga_topo_resolve(hwloc_topology_t t, const ga_settings_t *s,
                                  const ga_topo_gpu_t *gpu, ga_placement_t *out);

#endif /* GA_TOPO_INTERNAL_H */
