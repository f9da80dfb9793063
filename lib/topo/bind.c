/*
 * bind.c - binding host pages to NUMA nodes before they are touched.
 *
 * Binding always uses this machine's topology, even when decisions were
 * made on an XML file (GPUARENA_TOPOLOGY): pages are real.  Nodes of the
 * placement that this machine lacks, or that have no memory, are left
 * out, and the segment is counted as unbound (numa_unbound), as where the
 * system refuses binding; when none is left its pages stay where the
 * kernel puts them.
 */
#include "config.h"

#include "errors.h"
#include "topo/topo_internal.h"

#include <errno.h>
#include <string.h>

/* The nodes of PL that T has, with memory. */
static uint64_t bindable(hwloc_topology_t t, const ga_placement_t *pl)
{
    return pl->nodes & ga_topo_memory_nodes(t, hwloc_topology_get_topology_nodeset(t));
}

uint64_t ga_topo_placed_nodes(const ga_placement_t *pl)
{
    if (pl->policy == GA_NUMA_LOCAL)
        return 0;
    /* A topology that cannot be loaded is the first binding's failure
     * to report, not this question's. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    hwloc_topology_t t = NULL;
    bool known = ga_topo_machine(&t) == GPUARENA_SUCCESS;
    ga_error_restore(&saved);
    return known && hwloc_topology_is_thissystem(t) ? bindable(t, pl) : 0;
}

gpuarena_status_t ga_topo_bind(const ga_placement_t *pl, void *addr, size_t size, bool *unbound)
{
    *unbound = false;
    if (pl->policy == GA_NUMA_LOCAL || size == 0)
        return GPUARENA_SUCCESS; /* first touch by the thread that writes */
    hwloc_topology_t t = NULL;
    gpuarena_status_t st = ga_topo_machine(&t);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* HWLOC_XMLFILE or HWLOC_SYNTHETIC in the environment (a site's, to
     * spare MPI ranks the discovery) loads a file as this machine's
     * topology; unless HWLOC_THISSYSTEM=1 says it is this machine, hwloc
     * binds nothing and says it did: the pages are left to the kernel,
     * and counted as such. */
    if (!hwloc_topology_is_thissystem(t)) {
        *unbound = true;
        return GPUARENA_SUCCESS;
    }
    uint64_t want = bindable(t, pl);
    if (!want) {
        *unbound = true;
        return GPUARENA_SUCCESS;
    }
    hwloc_nodeset_t set = hwloc_bitmap_alloc();
    if (!set)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for a nodeset");
    for (unsigned i = 0; i < 64; i++)
        if (want >> i & 1)
            hwloc_bitmap_set(set, i);
    hwloc_membind_policy_t policy =
        pl->policy == GA_NUMA_INTERLEAVE ? HWLOC_MEMBIND_INTERLEAVE : HWLOC_MEMBIND_BIND;
    int rc = hwloc_set_area_membind(t, addr, size, set, policy, HWLOC_MEMBIND_BYNODESET);
    int e = errno;
    hwloc_bitmap_free(set);
    if (rc == 0) {
        *unbound = want != pl->nodes; /* bound to a part of its nodes */
        return GPUARENA_SUCCESS;
    }
    /* With one node there is no choice to make: a system that refuses
     * binding (no NUMA support, a sandbox) loses nothing, but the nodes
     * of the placement that it lacks are still lacking. */
    if (hwloc_bitmap_weight(hwloc_topology_get_topology_nodeset(t)) == 1) {
        *unbound = want != pl->nodes;
        return GPUARENA_SUCCESS;
    }
    /* A system that refuses it with several nodes (Docker's default
     * seccomp profile allows mbind only with CAP_SYS_NICE; a cpuset
     * without the nodes; a kernel without NUMA) made every allocation
     * fail: the binding is a preference (gpuarena.conf(5)), so the pages
     * go where the kernel puts them, and the statistics say so. */
    if (e == EPERM || e == ENOSYS || e == EINVAL) {
        *unbound = true;
        return GPUARENA_SUCCESS;
    }
    return ga_error(GPUARENA_ERR_SYSTEM, "binding %zu bytes at %p to NUMA nodes failed: %s", size,
                    addr, strerror(e));
}
