/*
 * topo.c - loading the topology (hwloc, I/O discovery on), caching it, and
 * turning a placement policy into a set of NUMA nodes.
 *
 * Placement decisions are made on the machine's topology, or on the hwloc
 * XML file named by GPUARENA_TOPOLOGY (to see what gpuarena would decide
 * on another machine).  Both are loaded once per process, thread-safely,
 * and never freed (they live as long as the arenas that use them).
 */
#include "config.h"

#include "env.h"
#include "errors.h"
#include "topo/topo_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpuarena_status_t ga_topo_load(const char *path, hwloc_topology_t *out)
{
    hwloc_topology_t t = NULL;
    if (hwloc_topology_init(&t) != 0)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "hwloc_topology_init failed");
    /* PCI devices are filtered out by default: keep the important ones
     * (GPUs, bridges leading to them), from the machine or from the file. */
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
    /* PCI locality is all that is needed of the machine: the GPUs come
     * from the CUDA driver.  The plugins that would list OpenCL, GL, CUDA
     * runtime, NVML, ROCm SMI and Level Zero devices load whole stacks into
     * the program: an OpenCL ICD such as PoCL brings LLVM, which starts a
     * thread per CPU and takes over SIGUSR1 (seen on an H200 host: the
     * GPUARENA_STATS_SIGNAL report never came).  An XML file still gives
     * the OS devices it lists. */
    static const char *const skip[] = {"opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
#endif
    errno = 0;
    if (path && hwloc_topology_set_xml(t, path) != 0) {
        /* A file that is not there or not readable, or one hwloc cannot
         * parse (EINVAL, or errno left as it was). */
        int e = errno;
        hwloc_topology_destroy(t);
        bool unreadable = e != 0 && e != EINVAL;
        return ga_error(GPUARENA_ERR_CONFIG,
                        "GPUARENA_TOPOLOGY: cannot read the hwloc XML topology file '%s': %s", path,
                        unreadable ? strerror(e) : "not a topology that hwloc reads");
    }
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return ga_error(path ? GPUARENA_ERR_CONFIG : GPUARENA_ERR_SYSTEM,
                        "hwloc could not load the topology of %s", path ? path : "this machine");
    }
    *out = t;
    return GPUARENA_SUCCESS;
}

/* One cached topology: loaded at first use, the outcome kept. */
typedef struct cached {
    pthread_once_t once;
    hwloc_topology_t topo;
    gpuarena_status_t status;
    char message[512];
    char path[4096];
} cached_t;

static cached_t machine = {.once = PTHREAD_ONCE_INIT};
static cached_t decisions = {.once = PTHREAD_ONCE_INIT};

static void load_cached(cached_t *c, const char *path)
{
    c->status = ga_topo_load(path, &c->topo);
    if (c->status != GPUARENA_SUCCESS)
        snprintf(c->message, sizeof c->message, "%s", gpuarena_last_error());
}

static void load_machine(void)
{
    load_cached(&machine, NULL);
}

static void load_decisions(void)
{
    const char *env = ga_env("GPUARENA_TOPOLOGY");
    if (env) {
        snprintf(decisions.path, sizeof decisions.path, "%s", env);
        load_cached(&decisions, decisions.path);
        return;
    }
    pthread_once(&machine.once, load_machine);
    decisions.topo = machine.topo;
    decisions.status = machine.status;
    memcpy(decisions.message, machine.message, sizeof decisions.message);
}

static gpuarena_status_t get(cached_t *c, void (*fn)(void), hwloc_topology_t *t)
{
    pthread_once(&c->once, fn);
    if (c->status != GPUARENA_SUCCESS)
        return ga_error(c->status, "%s", c->message);
    *t = c->topo;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_topo_machine(hwloc_topology_t *t)
{
    return get(&machine, load_machine, t);
}

gpuarena_status_t ga_topo_decisions(hwloc_topology_t *t, const char **xml)
{
    gpuarena_status_t st = get(&decisions, load_decisions, t);
    if (xml)
        *xml = decisions.path[0] ? decisions.path : NULL;
    return st;
}

uint64_t ga_topo_mask(hwloc_const_nodeset_t nodeset)
{
    uint64_t m = 0;
    unsigned i;
    hwloc_bitmap_foreach_begin(i, nodeset)
    {
        if (i < 64)
            m |= (uint64_t)1 << i;
    }
    hwloc_bitmap_foreach_end();
    return m;
}

uint64_t ga_topo_all_nodes(hwloc_topology_t t)
{
    return ga_topo_mask(hwloc_topology_get_topology_nodeset(t));
}

/* The nodes of SET that have memory, as a mask.  A node without any
 * (CPUs or a GPU alone, as some topologies list) cannot take a binding:
 * the kernel refuses it.  Where the topology tells the memory of no node
 * at all, every node of SET counts. */
uint64_t ga_topo_memory_nodes(hwloc_topology_t t, hwloc_const_nodeset_t set)
{
    uint64_t m = 0;
    bool told = false;
    for (hwloc_obj_t n = NULL; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));) {
        told |= n->attr && n->attr->numanode.local_memory > 0;
        if (n->os_index < 64 && hwloc_bitmap_isset(set, n->os_index) && n->attr &&
            n->attr->numanode.local_memory > 0)
            m |= (uint64_t)1 << n->os_index;
    }
    return told ? m : ga_topo_mask(set);
}

uint64_t ga_topo_plain_first(hwloc_topology_t t, hwloc_const_nodeset_t set)
{
    hwloc_nodeset_t plain = hwloc_bitmap_alloc();
    uint64_t m = 0;
    if (plain) {
        for (hwloc_obj_t n = NULL; (n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n));)
            if (hwloc_bitmap_isset(set, n->os_index) &&
                (!n->subtype || !strcmp(n->subtype, "DRAM")))
                hwloc_bitmap_set(plain, n->os_index);
        m = ga_topo_memory_nodes(t, plain);
        hwloc_bitmap_free(plain);
    }
    return m ? m : ga_topo_memory_nodes(t, set);
}

char *ga_topo_nodes_string(uint64_t mask, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 64;) {
        if (!(mask >> i & 1)) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < 64 && (mask >> (j + 1) & 1))
            j++;
        int n = j > i ? snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", i, j)
                      : snprintf(buf + used, len - used, "%s%d", used ? "," : "", i);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
        i = j + 1;
    }
    return buf;
}

/* Check the node list of S against T; *MASK gets it. */
static gpuarena_status_t node_list(hwloc_topology_t t, const ga_settings_t *s, uint64_t *mask)
{
    uint64_t all = ga_topo_all_nodes(t), m = 0;
    char have[128], where[4200] = "on this machine";
    if (t == decisions.topo && decisions.path[0]) /* GPUARENA_TOPOLOGY's, not this one's */
        snprintf(where, sizeof where, "in the topology of %s", decisions.path);
    for (unsigned i = 0; i < s->numa_count && i < GA_MAX_NODES; i++) {
        int n = s->numa_nodes[i];
        if (n < 0 || n >= 64 || !hwloc_get_numanode_obj_by_os_index(t, (unsigned)n) ||
            !(all >> n & 1))
            return ga_error(GPUARENA_ERR_CONFIG,
                            GA_TOPO_NUMA_ERROR "NUMA node %d does not exist %s (its nodes: %s)", n,
                            where, ga_topo_nodes_string(all, have, sizeof have));
        m |= (uint64_t)1 << n;
    }
    *mask = m;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_topo_resolve(hwloc_topology_t t, const ga_settings_t *s,
                                  const ga_topo_gpu_t *gpu, ga_placement_t *out)
{
    /* Spread over the nodes that have memory: one without refuses it. */
    uint64_t list = 0, all = ga_topo_memory_nodes(t, hwloc_topology_get_topology_nodeset(t));
    gpuarena_status_t st = node_list(t, s, &list);
    if (st != GPUARENA_SUCCESS)
        return st;
    out->fallback = false;
    switch (s->numa) {
    case GA_NUMA_NEAREST:
        if (gpu && gpu->located && gpu->nodes) {
            out->policy = GA_NUMA_NODES;
            out->nodes = gpu->nodes;
            return GPUARENA_SUCCESS;
        }
        /* Locality unknown: spread the pages, and say so; over plain
         * memory, not high-bandwidth, persistent or a GPU's own (a
         * GH200's, which hwloc lists as a node). */
        out->policy = GA_NUMA_INTERLEAVE;
        out->nodes = ga_topo_plain_first(t, hwloc_topology_get_topology_nodeset(t));
        out->fallback = true;
        return GPUARENA_SUCCESS;
    case GA_NUMA_NODES:
        if (!list)
            return ga_error(GPUARENA_ERR_CONFIG,
                            GA_TOPO_NUMA_ERROR "the policy 'nodes' needs a list of NUMA nodes");
        out->policy = GA_NUMA_NODES;
        out->nodes = list;
        return GPUARENA_SUCCESS;
    case GA_NUMA_INTERLEAVE:
        out->policy = GA_NUMA_INTERLEAVE;
        out->nodes = list ? list : all;
        return GPUARENA_SUCCESS;
    case GA_NUMA_LOCAL:
        out->policy = GA_NUMA_LOCAL;
        out->nodes = 0;
        return GPUARENA_SUCCESS;
    }
    return ga_error(GPUARENA_ERR_CONFIG, GA_TOPO_NUMA_ERROR "unknown policy %d", (int)s->numa);
}

gpuarena_status_t ga_topo_placement(const ga_settings_t *s, int device, ga_placement_t *out)
{
    hwloc_topology_t t = NULL;
    gpuarena_status_t st = ga_topo_decisions(&t, NULL);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_topo_gpu_t *gpus = NULL;
    int n = 0;
    bool from_driver = false;
    const ga_topo_gpu_t *gpu = NULL;
    /* Only the nearest policy needs to know where the GPU is. */
    if (device >= 0 && s->numa == GA_NUMA_NEAREST &&
        ga_topo_gpus(t, GA_TOPO_GPUS_AUTO, &gpus, &n, &from_driver) == GPUARENA_SUCCESS) {
        for (int i = 0; i < n; i++)
            if (gpus[i].ordinal == device)
                gpu = &gpus[i];
    }
    st = ga_topo_resolve(t, s, gpu, out);
    free(gpus);
    if (st == GPUARENA_SUCCESS)
        out->placed = ga_topo_placed_nodes(out);
    return st;
}
