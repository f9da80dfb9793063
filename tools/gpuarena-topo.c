/*
 * gpuarena-topo - print what gpuarena finds on this machine (or in an
 * hwloc XML topology file): the CUDA driver, each GPU with its PCI bus id,
 * the NUMA nodes and CPUs nearest it and the nodes its pinned arena will
 * use, the device attributes that decide what managed memory does, the
 * NUMA nodes of the machine and the nvidia-uvm module's parameters.  See
 * gpuarena-topo(1).
 */
#include "config.h"

#include "arena.h"
#include "config/config.h"
#include "cuda/cuda.h"
#include "gpuarena.h"
#include "topo/topo_internal.h"

#include "output.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuarena-topo [--topology FILE] [--help] [--version]\n"
               "Print the CUDA driver, the GPUs with their nearest NUMA nodes and CPUs,\n"
               "the nodes each pinned arena will use, the managed-memory attributes of each\n"
               "GPU, the NUMA nodes of the machine and the nvidia-uvm module parameters.\n");
}

static const char *policy_name(ga_numa_policy_t p)
{
    switch (p) {
    case GA_NUMA_NEAREST:
        return "nearest";
    case GA_NUMA_NODES:
        return "bind to";
    case GA_NUMA_INTERLEAVE:
        return "interleave over";
    case GA_NUMA_LOCAL:
        return "first touch (local)";
    }
    return "?";
}

static void print_driver(void)
{
    gpuarena_status_t st = ga_cuda_load();
    if (st == GPUARENA_SUCCESS || st == GPUARENA_ERR_NO_DEVICE) {
        int v = ga_cuda_driver_version();
        printf("CUDA driver: loaded, CUDA %d.%d (%s)\n", v / 1000, v % 1000 / 10,
               ga_cuda_library_path());
        if (st != GPUARENA_SUCCESS)
            printf("  but: %s\n", gpuarena_last_error());
        return;
    }
    printf("CUDA driver: not available: %s\n", gpuarena_last_error());
}

static void print_nodes(hwloc_topology_t t)
{
    int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    char list[256];
    printf("NUMA nodes: %d (%s)\n", n,
           ga_topo_nodes_string(ga_topo_all_nodes(t), list, sizeof list));
    int last = hwloc_bitmap_last(hwloc_topology_get_topology_nodeset(t));
    if (last >= 64)
        printf("  gpuarena places memory on nodes 0-63 only: not on nodes 64-%d\n", last);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        char cpus[256] = "";
        if (o->cpuset)
            hwloc_bitmap_list_snprintf(cpus, sizeof cpus, o->cpuset);
        printf("  node %u: CPUs %s, memory %.1f GiB\n", o->os_index, cpus[0] ? cpus : "none",
               (double)o->attr->numanode.local_memory / (1024.0 * 1024 * 1024));
    }
}

/* Whether MASK names more than one node (plural words). */
static bool several(uint64_t mask)
{
    return (mask & (mask - 1)) != 0;
}

/* The placement of an arena of KIND near GPU G (NULL: none) as the
 * library would resolve it, with where a refused value was set. */
static gpuarena_status_t placement(hwloc_topology_t t, gpuarena_kind_t kind, const ga_topo_gpu_t *g,
                                   ga_placement_t *pl)
{
    ga_settings_t s;
    int device = g ? g->ordinal : 0;
    gpuarena_status_t st = ga_config_settings(kind, device, &s);
    if (st == GPUARENA_SUCCESS)
        st = ga_numa_origin(ga_topo_resolve(t, &s, g, pl), kind, device, false);
    return st;
}

/* Where a placement PL of T binds, where T is this machine's and some of
 * its nodes cannot take pages (no memory): the library binds to the
 * others only, and counts such segments in numa_unbound. */
static void print_bound(const ga_placement_t *pl, bool this_machine)
{
    if (!this_machine || pl->policy == GA_NUMA_LOCAL)
        return;
    uint64_t placed = ga_topo_placed_nodes(pl);
    if (placed == pl->nodes)
        return;
    char on[256], off[256];
    uint64_t left = pl->nodes & ~placed;
    printf("                   ");
    if (placed)
        printf("binds to node%s %s only: ", several(placed) ? "s" : "",
               ga_topo_nodes_string(placed, on, sizeof on));
    else
        printf("binds nowhere: ");
    printf("node%s %s %s no memory%s (segments counted in numa_unbound)\n",
           several(left) ? "s" : "", ga_topo_nodes_string(left, off, sizeof off),
           several(left) ? "have" : "has", placed ? "" : ", pages go where the kernel puts them");
}

/* Whether the pinned arena of G could be placed (its error printed).
 * THIS_MACHINE: T is the machine's own. */
static bool print_gpu(hwloc_topology_t t, const ga_topo_gpu_t *g, bool this_machine)
{
    char nodes[256];
    printf("  GPU %d: %s\n", g->ordinal, g->name[0] ? g->name : "(unnamed)");
    printf("    PCI bus id:    %s\n", g->busid);
    if (g->located && g->nodes) {
        printf("    nearest NUMA:  %s\n", ga_topo_nodes_string(g->nodes, nodes, sizeof nodes));
        printf("    nearest CPUs:  %s\n", g->cpus[0] ? g->cpus : "none");
    } else {
        printf("    nearest NUMA:  unknown (%s)\n",
               g->located ? "attached to the whole machine, near no node with memory, or only to "
                            "nodes numbered 64 and above"
                          : "not in the topology");
    }
    ga_placement_t pl = {0};
    if (placement(t, GPUARENA_PINNED, g, &pl) != GPUARENA_SUCCESS) {
        printf("    pinned arena:  error: %s\n", gpuarena_last_error());
        return false;
    }
    if (pl.policy == GA_NUMA_LOCAL)
        printf("    pinned arena:  %s\n", policy_name(pl.policy));
    else
        printf("    pinned arena:  %s node%s %s%s\n", policy_name(pl.policy),
               several(pl.nodes) ? "s" : "", ga_topo_nodes_string(pl.nodes, nodes, sizeof nodes),
               pl.fallback ? " (fallback: locality unknown)" : "");
    print_bound(&pl, this_machine);
    return true;
}

/* Whether the host arena could be placed: its numa list checked as the
 * library would (a missing node said on standard error).  It needs no
 * GPU, so it is no line of a GPU's. */
static bool check_host(hwloc_topology_t t)
{
    ga_placement_t pl = {0};
    if (placement(t, GPUARENA_HOST, NULL, &pl) == GPUARENA_SUCCESS)
        return true;
    fprintf(stderr, "gpuarena-topo: %s\n", gpuarena_last_error());
    return false;
}

/* The device attributes that decide what managed memory does, for GPUs
 * the driver knows. */
static void print_managed_attrs(int ordinal)
{
    static const struct {
        ga_cuda_attr_t attr;
        const char *name, *meaning;
    } attrs[] = {
        {GA_CUDA_ATTR_MANAGED_MEMORY, "managed memory", "cuMemAllocManaged works"},
        {GA_CUDA_ATTR_CONCURRENT_MANAGED_ACCESS, "concurrent managed access",
         "GPU and CPU use managed memory at once; needed to prefetch to the GPU and for "
         "device preferred location"},
        {GA_CUDA_ATTR_PAGEABLE_MEMORY_ACCESS, "pageable memory access",
         "the GPU reads malloc'd memory directly (HMM or ATS)"},
        {GA_CUDA_ATTR_PAGEABLE_USES_HOST_PAGE_TABLES, "uses host page tables",
         "that access goes through the CPU's page tables (ATS)"},
        {GA_CUDA_ATTR_DIRECT_MANAGED_ACCESS_FROM_HOST, "direct managed access from host",
         "the CPU reads GPU-resident managed memory without migrating it"},
        {GA_CUDA_ATTR_HOST_NUMA_ID, "host NUMA id", "the NUMA node of the host nearest the GPU"},
        {GA_CUDA_ATTR_VMM_SUPPORTED, "VMM supported",
         "cuMemCreate and cuMemMap: growable device segments"},
    };
    printf("    managed memory and UVM attributes:\n");
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int v = 0;
        gpuarena_status_t st = ga_cuda_device_attr(ordinal, attrs[i].attr, &v);
        char val[32];
        if (st != GPUARENA_SUCCESS)
            snprintf(val, sizeof val, "unknown");
        else if (attrs[i].attr == GA_CUDA_ATTR_HOST_NUMA_ID)
            snprintf(val, sizeof val, "%d%s", v, v < 0 ? " (none)" : "");
        else
            snprintf(val, sizeof val, "%s", v ? "yes" : "no");
        printf("      %-32s %-10s %s\n", attrs[i].name, val, attrs[i].meaning);
    }
}

/* The nvidia-uvm module parameters that matter to managed memory, with
 * what each means; the directory can be moved for tests with
 * GPUARENA_UVM_PARAMS. */
static void print_uvm(void)
{
    static const struct {
        const char *name, *meaning;
    } known[] = {
        {"uvm_perf_prefetch_enable", "1: the driver prefetches around faulting pages itself"},
        {"uvm_perf_prefetch_threshold",
         "percent of a 2 MiB block that must be resident before the rest is prefetched"},
        {"uvm_perf_prefetch_min_faults", "faults in a block before its prefetch is considered"},
        {"uvm_perf_thrashing_enable", "1: pages that bounce between processors are detected"},
        {"uvm_perf_thrashing_threshold", "migrations of a page that count as thrashing"},
        {"uvm_perf_thrashing_pin_threshold", "thrashing episodes before a page is pinned"},
        {"uvm_perf_thrashing_lapse_usec", "time between migrations that still counts as thrashing"},
        {"uvm_perf_thrashing_nap", "how long a thrashing page is throttled"},
        {"uvm_perf_thrashing_epoch", "period after which thrashing history is forgotten"},
        {"uvm_perf_thrashing_pin", "how long a thrashing page stays pinned"},
        {"uvm_perf_thrashing_max_resets", "resets of a page's thrashing state before it stays"},
        {"uvm_global_oversubscription",
         "1: managed memory may exceed GPU memory (evicted pages go to the host); 0: "
         "cuMemAlloc cannot evict managed memory"},
        {"uvm_ats_mode", "1: address translation services (the GPU uses the CPU's page tables)"},
        {"uvm_disable_hmm", "1: heterogeneous memory management off (no GPU access to malloc'd "
                            "memory without ATS); check the device attribute, not this"},
    };
    const char *dir = getenv("GPUARENA_UVM_PARAMS");
    if (!dir || !*dir)
        dir = "/sys/module/nvidia_uvm/parameters";
    printf("nvidia-uvm parameters (%s):\n", dir);
    int found = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char path[512], val[64] = "";
        snprintf(path, sizeof path, "%s/%s", dir, known[i].name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (!fgets(val, sizeof val, f))
            snprintf(val, sizeof val, "unreadable");
        fclose(f);
        val[strcspn(val, "\n")] = 0;
        printf("  %-34s %-8s %s\n", known[i].name, val, known[i].meaning);
        found++;
    }
    if (!found)
        printf("  none: the nvidia-uvm module is not loaded on this machine (managed memory "
               "needs it)\n");
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {{"topology", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    int c;
    bool from_option = false;
    while ((c = getopt_long(argc, argv, "t:hV", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (!*optarg) { /* GPUARENA_TOPOLOGY's empty value means none */
                fprintf(stderr, "gpuarena-topo: --topology: the file name is empty\n");
                usage(stderr);
                return 2;
            }
            if (setenv("GPUARENA_TOPOLOGY", optarg, 1) != 0) {
                perror("gpuarena-topo: setenv");
                return 1;
            }
            from_option = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("gpuarena-topo %s\n", gpuarena_version());
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "gpuarena-topo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    hwloc_topology_t t = NULL;
    const char *xml = NULL;
    if (ga_topo_decisions(&t, &xml) != GPUARENA_SUCCESS) {
        /* The file came from --topology, which the library reads as
         * GPUARENA_TOPOLOGY: the message names the option given. */
        const char *msg = gpuarena_last_error();
        static const char env[] = "GPUARENA_TOPOLOGY: ";
        if (from_option && strncmp(msg, env, sizeof env - 1) == 0)
            fprintf(stderr, "gpuarena-topo: --topology: %s\n", msg + sizeof env - 1);
        else
            fprintf(stderr, "gpuarena-topo: %s\n", msg);
        return 1;
    }
    /* A configuration that gpuarena would refuse is said first (on
     * standard error), and the tool exits 1 after its report: a machine
     * with no GPU in its topology would show nothing of it otherwise. */
    ga_settings_t conf;
    bool config_ok = ga_config_settings(GPUARENA_PINNED, 0, &conf) == GPUARENA_SUCCESS;
    if (!config_ok)
        fprintf(stderr, "gpuarena-topo: %s\n", gpuarena_last_error());
    /* The host arena's list, where the configuration reads (a bad value
     * is said above). */
    if (config_ok)
        config_ok = check_host(t);
    printf("gpuarena %s\n", gpuarena_version());
    if (xml)
        printf("topology: hwloc XML file %s\n", xml);
    else if (!hwloc_topology_is_thissystem(t))
        printf("topology: not this machine's: hwloc read a file named by HWLOC_XMLFILE or "
               "HWLOC_SYNTHETIC; without HWLOC_THISSYSTEM=1 nothing is bound to its nodes\n");
    else
        printf("topology: this machine\n");
    print_driver();

    ga_topo_gpu_t *gpus = NULL;
    int n = 0;
    bool from_driver = false;
    if (ga_topo_gpus(t, GA_TOPO_GPUS_AUTO, &gpus, &n, &from_driver) != GPUARENA_SUCCESS) {
        fprintf(stderr, "gpuarena-topo: %s\n", gpuarena_last_error());
        return 1;
    }
    printf("GPUs: %d (%s)\n", n,
           from_driver ? "from the CUDA driver"
                       : "NVIDIA display and 3D controllers of the topology, in PCI order");
    for (int i = 0; i < n; i++) {
        config_ok &= print_gpu(t, &gpus[i], !xml && hwloc_topology_is_thissystem(t));
        if (from_driver)
            print_managed_attrs(gpus[i].ordinal);
    }
    if (n && !from_driver)
        printf("  (the managed-memory attributes of the GPUs need the CUDA driver)\n");
    free(gpus);
    print_nodes(t);
    print_uvm();
    return config_ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    return ga_tool_main("gpuarena-topo", run, argc, argv, 3);
}
