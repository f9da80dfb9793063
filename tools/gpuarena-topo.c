/*
 * gpuarena-topo - print what gpuarena finds on this machine (or in an
 * hwloc XML topology file): the CUDA driver, each GPU with its PCI bus id,
 * the NUMA nodes and CPUs nearest it and the nodes its pinned arena will
 * use, and the NUMA nodes of the machine.  See gpuarena-topo(1).
 */
#include "config.h"

#include "config/config.h"
#include "cuda/cuda.h"
#include "gpuarena.h"
#include "topo/topo_internal.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: gpuarena-topo [--topology FILE] [--help] [--version]\n"
               "Print the CUDA driver, the GPUs with their nearest NUMA nodes and CPUs,\n"
               "the nodes each pinned arena will use, and the NUMA nodes of the machine.\n");
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
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
        char cpus[256] = "";
        if (o->cpuset)
            hwloc_bitmap_list_snprintf(cpus, sizeof cpus, o->cpuset);
        printf("  node %u: CPUs %s, memory %.1f GiB\n", o->os_index, cpus[0] ? cpus : "none",
               (double)o->attr->numanode.local_memory / (1024.0 * 1024 * 1024));
    }
}

static void print_gpu(hwloc_topology_t t, const ga_topo_gpu_t *g)
{
    char nodes[256];
    printf("  GPU %d: %s\n", g->ordinal, g->name[0] ? g->name : "(unnamed)");
    printf("    PCI bus id:    %s\n", g->busid);
    if (g->located && g->nodes) {
        printf("    nearest NUMA:  %s\n", ga_topo_nodes_string(g->nodes, nodes, sizeof nodes));
        printf("    nearest CPUs:  %s\n", g->cpus[0] ? g->cpus : "none");
    } else {
        printf("    nearest NUMA:  unknown (%s)\n",
               g->located ? "attached to the whole machine" : "not in the topology");
    }
    ga_settings_t s;
    ga_placement_t pl;
    gpuarena_status_t st = ga_config_settings(GPUARENA_PINNED, g->ordinal, &s);
    if (st == GPUARENA_SUCCESS)
        st = ga_topo_resolve(t, &s, g, &pl);
    if (st != GPUARENA_SUCCESS) {
        printf("    pinned arena:  error: %s\n", gpuarena_last_error());
        return;
    }
    if (pl.policy == GA_NUMA_LOCAL)
        printf("    pinned arena:  %s\n", policy_name(pl.policy));
    else
        printf("    pinned arena:  %s node%s %s%s\n", policy_name(pl.policy),
               (pl.nodes & (pl.nodes - 1)) ? "s" : "",
               ga_topo_nodes_string(pl.nodes, nodes, sizeof nodes),
               pl.fallback ? " (fallback: locality unknown)" : "");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"topology", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"version", no_argument, NULL, 'V'},
                                         {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "t:hV", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (setenv("GPUARENA_TOPOLOGY", optarg, 1) != 0) {
                perror("gpuarena-topo: setenv");
                return 1;
            }
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
        usage(stderr);
        return 2;
    }

    hwloc_topology_t t;
    const char *xml = NULL;
    if (ga_topo_decisions(&t, &xml) != GPUARENA_SUCCESS) {
        fprintf(stderr, "gpuarena-topo: %s\n", gpuarena_last_error());
        return 1;
    }
    printf("gpuarena %s\n", gpuarena_version());
    printf("topology: %s%s\n", xml ? "hwloc XML file " : "this machine", xml ? xml : "");
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
    for (int i = 0; i < n; i++)
        print_gpu(t, &gpus[i]);
    free(gpus);
    print_nodes(t);
    return 0;
}
