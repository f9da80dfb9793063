/*
 * gpus.c - finding the GPUs in the topology and the NUMA nodes and CPUs
 * nearest each: the nodeset and cpuset of the GPU's nearest non-I/O
 * ancestor (the package or group its PCI root hangs from).
 *
 * The GPUs are the CUDA driver's, found by the PCI bus id the driver
 * gives.  With an XML topology file that does not hold the driver's GPUs
 * (another machine's), or without a driver, they are the NVIDIA (vendor
 * 0x10de) display and 3D controllers the topology lists, and NVIDIA PCI
 * devices carrying a CUDA or NVML OS device, numbered in PCI order.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "errors.h"
#include "topo/topo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVIDIA_VENDOR 0x10de

static void busid_of(hwloc_obj_t o, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", o->attr->pcidev.domain, o->attr->pcidev.bus,
             o->attr->pcidev.dev, o->attr->pcidev.func);
}

static bool has_gpu_osdev(hwloc_obj_t pci)
{
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->subtype &&
            (!strcmp(c->subtype, "CUDA") || !strcmp(c->subtype, "NVML")))
            return true;
    return false;
}

static bool is_nvidia_gpu(hwloc_obj_t o)
{
    if (o->attr->pcidev.vendor_id != NVIDIA_VENDOR)
        return false;
    return (o->attr->pcidev.class_id >> 8) == 0x03 || has_gpu_osdev(o);
}

#if HWLOC_API_VERSION >= 0x00020300
/* Whether memory object NODE is attached to O or below it: by its
 * parents, not by cpusets (hwloc_obj_is_in_subtree), which a machine of
 * one package shares with it. */
static bool attached_within(hwloc_obj_t node, hwloc_obj_t o)
{
    for (hwloc_obj_t a = node->parent; a; a = a->parent)
        if (a == o)
            return true;
    return false;
}
#endif

/* The nodes with memory whose locality is O's or within it (hwloc 2.3
 * and later), attached to O or below it, plain memory first
 * (ga_topo_plain_first).  Not O's whole nodeset: in hwloc 2 that also
 * holds the nodes attached above it (memory the whole machine shares,
 * such as a CXL expander), which would have put pinned pages on a far
 * node; nor those of O's locality attached above it (the machine's
 * nodes, where it has one package, as the package's). */
static uint64_t local_nodes(hwloc_topology_t t, hwloc_obj_t o)
{
#if HWLOC_API_VERSION >= 0x00020300
    struct hwloc_location loc;
    loc.type = HWLOC_LOCATION_TYPE_OBJECT;
    loc.location.object = o;
    hwloc_obj_t nodes[256];
    unsigned nr = sizeof nodes / sizeof nodes[0];
    if (hwloc_get_local_numanode_objs(t, &loc, &nr, nodes,
                                      HWLOC_LOCAL_NUMANODE_FLAG_SMALLER_LOCALITY) == 0) {
        if (nr > sizeof nodes / sizeof nodes[0])
            nr = sizeof nodes / sizeof nodes[0];
        hwloc_nodeset_t set = hwloc_bitmap_alloc();
        uint64_t m = 0;
        if (set) {
            for (unsigned i = 0; i < nr; i++)
                if (attached_within(nodes[i], o))
                    hwloc_bitmap_set(set, nodes[i]->os_index);
            m = ga_topo_plain_first(t, set);
            hwloc_bitmap_free(set);
        }
        return m;
    }
#endif
    return ga_topo_memory_nodes(t, o->nodeset);
}

/* Whether T has one package: a machine of one package is that
 * package's (hwloc hangs its PCI devices from the Machine). */
static bool one_package(hwloc_topology_t t)
{
    return hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE) == 1;
}

/* The nodes with memory nearest ANC, the GPU's nearest non-I/O ancestor:
 * its local nodes, else those of the first ancestor above it that has
 * some.  A PCI root may hang below its node's level (from a core, a cache
 * or a die of a package whose memory is attached to the whole package):
 * no node's locality is within the ancestor then, and the GPU read as
 * near no node.  The whole machine, where it has several nodes and
 * packages, is near none in particular (ga_topo_locate). */
static uint64_t nearest_nodes(hwloc_topology_t t, hwloc_obj_t anc)
{
    /* A machine of one package is that package's: its memory attached
     * to the machine (where the package has none of its own) is near. */
    bool whole = one_package(t);
    for (hwloc_obj_t o = anc; o; o = o->parent) {
        if (o != anc && o->type == HWLOC_OBJ_MACHINE && hwloc_bitmap_weight(o->nodeset) != 1 &&
            !whole)
            break;
        uint64_t m = local_nodes(t, o);
        if (m)
            return m;
    }
    return 0;
}

/* The object whose nodes are a GPU's nearest, from ANC, its nearest
 * non-I/O ancestor; NULL where that is unknown.  hwloc hangs the PCI
 * devices of a machine with one package from the Machine: the GPU is
 * that package's, whatever memory the machine has besides (a GH200's GPU
 * memory, a CXL expander; read as unknown, pinned memory was interleaved
 * over them).  With several packages, a GPU attached to the machine as a
 * whole is near no node in particular. */
static hwloc_obj_t near_object(hwloc_topology_t t, hwloc_obj_t anc)
{
    if (anc->type != HWLOC_OBJ_MACHINE || hwloc_bitmap_weight(anc->nodeset) == 1)
        return anc;
    if (one_package(t))
        return hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
    return NULL;
}

void ga_topo_locate(hwloc_topology_t t, const char *busid, ga_topo_gpu_t *g)
{
    g->located = false;
    g->nodes = 0;
    g->cpus[0] = '\0';
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(t, busid);
    if (!pci)
        return;
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, pci);
    if (!anc)
        return;
    g->located = true;
    /* Its locality is unknown where no object is near it, or where its
     * nearest nodes have no memory. */
    hwloc_obj_t near = near_object(t, anc);
    if (near)
        g->nodes = nearest_nodes(t, near);
    if (anc->cpuset)
        hwloc_bitmap_list_snprintf(g->cpus, sizeof g->cpus, anc->cpuset);
}

static void name_of(hwloc_obj_t pci, char *buf, size_t len)
{
    const char *n = NULL;
    for (hwloc_obj_t c = pci->io_first_child; c && !n; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE)
            n = hwloc_obj_get_info_by_name(c, "GPUModel");
    if (!n)
        n = hwloc_obj_get_info_by_name(pci, "PCIDevice");
    snprintf(buf, len, "%s", n ? n : "");
}

static int by_busid(const void *a, const void *b)
{
    /* "dddd:bb:dd.f" in lower-case hex, fixed width: text order is PCI order. */
    return strcmp(((const ga_topo_gpu_t *)a)->busid, ((const ga_topo_gpu_t *)b)->busid);
}

static gpuarena_status_t from_file(hwloc_topology_t t, ga_topo_gpu_t **gpus, int *count)
{
    int n = 0, cap = 0;
    ga_topo_gpu_t *v = NULL;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o; o = hwloc_get_next_pcidev(t, o)) {
        if (!is_nvidia_gpu(o))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            ga_topo_gpu_t *w = realloc(v, (size_t)cap * sizeof *v);
            if (!w) {
                free(v);
                return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for the GPU list");
            }
            v = w;
        }
        memset(&v[n], 0, sizeof v[n]);
        busid_of(o, v[n].busid, sizeof v[n].busid);
        name_of(o, v[n].name, sizeof v[n].name);
        n++;
    }
    if (n)
        qsort(v, (size_t)n, sizeof *v, by_busid);
    for (int i = 0; i < n; i++) {
        v[i].ordinal = i;
        ga_topo_locate(t, v[i].busid, &v[i]);
    }
    *gpus = v;
    *count = n;
    return GPUARENA_SUCCESS;
}

/* The driver's GPUs; GPUARENA_ERR_NO_DRIVER etc. when it has none. */
static gpuarena_status_t from_driver(hwloc_topology_t t, ga_topo_gpu_t **gpus, int *count)
{
    int n = 0;
    gpuarena_status_t st = ga_cuda_device_count(&n);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (n == 0)
        return ga_error(GPUARENA_ERR_NO_DEVICE, "the CUDA driver sees no GPU");
    ga_topo_gpu_t *v = calloc((size_t)n, sizeof *v);
    if (!v)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory for the GPU list");
    for (int i = 0; i < n; i++) {
        v[i].ordinal = i;
        st = ga_cuda_device_pci_bus_id(i, v[i].busid, sizeof v[i].busid);
        if (st != GPUARENA_SUCCESS) {
            free(v);
            return st;
        }
        if (ga_cuda_device_name(i, v[i].name, sizeof v[i].name) != GPUARENA_SUCCESS)
            v[i].name[0] = '\0';
        ga_topo_locate(t, v[i].busid, &v[i]);
    }
    *gpus = v;
    *count = n;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_topo_gpus(hwloc_topology_t t, ga_topo_gpu_source_t src, ga_topo_gpu_t **gpus,
                               int *count, bool *driver)
{
    *gpus = NULL;
    *count = 0;
    *driver = false;
    if (src == GA_TOPO_GPUS_AUTO && ga_cuda_load() == GPUARENA_SUCCESS) {
        ga_topo_gpu_t *v = NULL;
        int n = 0;
        if (from_driver(t, &v, &n) == GPUARENA_SUCCESS) {
            /* With another machine's XML file, the driver's bus ids are
             * not in it: then the file's GPUs are the ones to show. */
            bool all = true;
            for (int i = 0; i < n; i++)
                all = all && v[i].located;
            if (all || hwloc_topology_is_thissystem(t)) {
                *gpus = v;
                *count = n;
                *driver = true;
                return GPUARENA_SUCCESS;
            }
            free(v);
        }
    }
    return from_file(t, gpus, count);
}
