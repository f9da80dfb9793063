/*
 * check_topo.c - placement decisions on real machines' topologies (the
 * hwloc XML files in tests/data), and real binding on this machine.
 *
 * Expected answers, read from the files:
 *
 * 32em64t-2n8c2t-pci-normalio.xml (Supermicro X9DRG-HF, 2 x Xeon E5-2650):
 *   Package 0 holds NUMANode os_index 0 (line 28, cpuset 0x00ff00ff) and
 *   the host bridge 0000:[00-05]; under it, root port 00:03.0 leads to the
 *   PCIDev 0000:03:00.0 "0302 [10de:1094]" Tesla M2075 (line 102).
 *   Package 1 holds NUMANode 1 (line 133, cpuset 0xff00ff00) and the host
 *   bridge 0000:[80-84]: PCIDev 0000:83:00.0 (line 225) and 0000:84:00.0
 *   (line 233, the one with the OSDev cuda0), both "0302 [10de:1094]".
 *   The Matrox 0000:05:03.0 "0300 [102b:0532]" is a display controller but
 *   not NVIDIA's.  So, in PCI order: GPU 0 -> node 0, GPUs 1, 2 -> node 1.
 *
 * power8gpudistances.xml (PowerNV 8335-GTB, 2 x POWER8NVL, 4 x P100):
 *   Package 0 (line 16) holds NUMANode 0 (line 19) and the host bridges
 *   0002:[00-01] and 0003:[00-01] with PCIDevs 0002:01:00.0 (line 46,
 *   cuda0) and 0003:01:00.0 (line 80, cuda1); Package 1 (line 113) holds
 *   NUMANode 1 (line 116) and 000a:01:00.0 (line 143, cuda2) and
 *   000b:01:00.0 (line 177, cuda3), all "0302 [10de:15f9]".  So GPUs 0, 1
 *   -> node 0, GPUs 2, 3 -> node 1.
 */
#include "checkrun.h"
#include "config.h"
#include "nombind.h"

#include "config/config.h"
#include "errors.h"
#include "providers/providers.h"
#include "topo/topo_internal.h"

#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct expect {
    const char *file;
    int gpus;
    const char *busid[4];
    uint64_t node[4]; /* nearest node mask of each GPU */
    const char *cpus[4];
} expect_t;

static const expect_t machines[] = {
    {"32em64t-2n8c2t-pci-normalio.xml",
     3,
     {"0000:03:00.0", "0000:83:00.0", "0000:84:00.0"},
     {0x1, 0x2, 0x2},
     {"0-7,16-23", "8-15,24-31", "8-15,24-31"}},
    {"power8gpudistances.xml",
     4,
     {"0002:01:00.0", "0003:01:00.0", "000a:01:00.0", "000b:01:00.0"},
     {0x1, 0x1, 0x2, 0x2},
     {"0-1,8-9,16-17,24-25", "0-1,8-9,16-17,24-25", "80-81,88-89,96-97,104-105",
      "80-81,88-89,96-97,104-105"}},
};

static hwloc_topology_t load(const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, file);
    hwloc_topology_t t = NULL;
    ck_assert_msg(ga_topo_load(path, &t) == GPUARENA_SUCCESS, "%s: %s", path,
                  gpuarena_last_error());
    return t;
}

static void pinned_settings(ga_settings_t *s, ga_numa_policy_t policy, int n, const int *nodes)
{
    ga_config_defaults(GPUARENA_PINNED, s);
    s->numa = policy;
    s->numa_count = (unsigned)n;
    for (int i = 0; i < n; i++)
        s->numa_nodes[i] = nodes[i];
}

START_TEST(gpus_found_in_pci_order)
{
    const expect_t *e = &machines[_i];
    hwloc_topology_t t = load(e->file);
    ck_assert_int_eq(ga_topo_all_nodes(t), 0x3);
    ga_topo_gpu_t *g = NULL;
    int n = 0;
    bool drv = true;
    ck_assert_int_eq(ga_topo_gpus(t, GA_TOPO_GPUS_FILE, &g, &n, &drv), GPUARENA_SUCCESS);
    ck_assert(!drv);
    ck_assert_int_eq(n, e->gpus);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(g[i].ordinal, i);
        ck_assert_str_eq(g[i].busid, e->busid[i]);
        ck_assert(g[i].located);
        ck_assert_uint_eq(g[i].nodes, e->node[i]);
        ck_assert_str_eq(g[i].cpus, e->cpus[i]);
    }
    free(g);
    hwloc_topology_destroy(t);
}
END_TEST

START_TEST(every_policy_for_every_gpu)
{
    const expect_t *e = &machines[_i];
    hwloc_topology_t t = load(e->file);
    ga_topo_gpu_t *g = NULL;
    int n = 0;
    bool drv;
    ck_assert_int_eq(ga_topo_gpus(t, GA_TOPO_GPUS_FILE, &g, &n, &drv), GPUARENA_SUCCESS);
    for (int i = 0; i < n; i++) {
        ga_settings_t s;
        ga_placement_t pl;
        /* nearest: the GPU's own node, bound. */
        pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g[i], &pl), GPUARENA_SUCCESS);
        ck_assert_int_eq(pl.policy, GA_NUMA_NODES);
        ck_assert_uint_eq(pl.nodes, e->node[i]);
        ck_assert(!pl.fallback);
        /* nodes: the list, whatever the GPU. */
        const int one[] = {1};
        pinned_settings(&s, GA_NUMA_NODES, 1, one);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g[i], &pl), GPUARENA_SUCCESS);
        ck_assert_int_eq(pl.policy, GA_NUMA_NODES);
        ck_assert_uint_eq(pl.nodes, 0x2);
        /* interleave: all nodes when the list is empty, else the list. */
        pinned_settings(&s, GA_NUMA_INTERLEAVE, 0, NULL);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g[i], &pl), GPUARENA_SUCCESS);
        ck_assert_int_eq(pl.policy, GA_NUMA_INTERLEAVE);
        ck_assert_uint_eq(pl.nodes, 0x3);
        const int both[] = {0, 1};
        pinned_settings(&s, GA_NUMA_INTERLEAVE, 2, both);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g[i], &pl), GPUARENA_SUCCESS);
        ck_assert_uint_eq(pl.nodes, 0x3);
        /* local: first touch, no nodes. */
        pinned_settings(&s, GA_NUMA_LOCAL, 0, NULL);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g[i], &pl), GPUARENA_SUCCESS);
        ck_assert_int_eq(pl.policy, GA_NUMA_LOCAL);
        ck_assert_uint_eq(pl.nodes, 0);
    }
    free(g);
    hwloc_topology_destroy(t);
}
END_TEST

START_TEST(unknown_locality_falls_back)
{
    hwloc_topology_t t = load(machines[_i].file);
    ga_settings_t s;
    ga_placement_t pl;
    pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
    /* No GPU at all (a host arena asking for "nearest"). */
    ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_SUCCESS);
    ck_assert_int_eq(pl.policy, GA_NUMA_INTERLEAVE);
    ck_assert_uint_eq(pl.nodes, 0x3);
    ck_assert(pl.fallback);
    /* A GPU whose bus id the topology does not hold. */
    ga_topo_gpu_t g = {.ordinal = 0, .busid = "0000:ff:00.0"};
    ga_topo_locate(t, g.busid, &g);
    ck_assert(!g.located);
    ck_assert_int_eq(ga_topo_resolve(t, &s, &g, &pl), GPUARENA_SUCCESS);
    ck_assert(pl.fallback);
    ck_assert_uint_eq(pl.nodes, 0x3);
    hwloc_topology_destroy(t);
}
END_TEST

/* The two-socket machine with node 1 given no memory (as a node of CPUs
 * or of a GPU alone may be): GPUs 1 and 2, near it, have no node with
 * memory near them, and a binding to node 1 would be refused, so their
 * locality is unknown and the fallback spreads over node 0 alone. */
START_TEST(memoryless_nearest_node_falls_back)
{
    char path[4096], tmp[] = "/tmp/check_topo_XXXXXX";
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, machines[0].file);
    FILE *in = fopen(path, "r");
    ck_assert_ptr_nonnull(in);
    int fd = mkstemp(tmp);
    ck_assert_int_ge(fd, 0);
    FILE *out = fdopen(fd, "w");
    ck_assert_ptr_nonnull(out);
    char line[8192];
    unsigned changed = 0;
    while (fgets(line, sizeof line, in)) {
        char *m = strstr(line, "os_index=\"1\"");
        char *lm = m ? strstr(line, "local_memory=\"") : NULL;
        if (lm && strstr(line, "NUMANode")) {
            fprintf(out, "%.*slocal_memory=\"0\"%s", (int)(lm - line), line,
                    strchr(lm + strlen("local_memory=\""), '"') + 1);
            changed++;
        } else {
            fputs(line, out);
        }
    }
    fclose(in);
    fclose(out);
    ck_assert_uint_eq(changed, 1);
    hwloc_topology_t t = NULL;
    ck_assert_msg(ga_topo_load(tmp, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    unlink(tmp);
    ga_settings_t s;
    ga_placement_t pl;
    pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
    for (int i = 0; i < machines[0].gpus; i++) {
        ga_topo_gpu_t g = {.ordinal = i};
        snprintf(g.busid, sizeof g.busid, "%s", machines[0].busid[i]);
        ga_topo_locate(t, g.busid, &g);
        ck_assert(g.located);
        ck_assert_int_eq(ga_topo_resolve(t, &s, &g, &pl), GPUARENA_SUCCESS);
        ck_assert_uint_eq(pl.nodes, 0x1); /* GPU 0's own node; the fallback's */
        ck_assert(pl.fallback == (i > 0));
    }
    hwloc_topology_destroy(t);
}
END_TEST

/* The two-socket machine's file with EDITS made, each the first
 * occurrence of a text replaced (an empty FROM: nothing), loaded.  Each
 * text must be there. */
typedef struct edit {
    const char *from, *to;
} edit_t;

/* Write the file with EDITS made to a new file made from the template
 * TMP. */
static void write_edited(const edit_t *edits, size_t n, char *tmp)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, machines[0].file);
    FILE *in = fopen(path, "r");
    ck_assert_ptr_nonnull(in);
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    ck_assert_uint_lt(len, sizeof text - 1);
    text[len] = '\0';
    static char out[1 << 20];
    for (size_t i = 0; i < n; i++) {
        char *at = strstr(text, edits[i].from);
        ck_assert_msg(at != NULL, "'%s' is not in %s", edits[i].from, path);
        size_t head = (size_t)(at - text), from = strlen(edits[i].from);
        ck_assert_uint_lt(len - from + strlen(edits[i].to), sizeof out - 1);
        snprintf(out, sizeof out, "%.*s%s%s", (int)head, text, edits[i].to, at + from);
        len = strlen(out);
        memcpy(text, out, len + 1);
    }
    int fd = mkstemp(tmp);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static hwloc_topology_t load_edited(const edit_t *edits, size_t n)
{
    char tmp[] = "/tmp/check_topo_XXXXXX";
    write_edited(edits, n, tmp);
    hwloc_topology_t t = NULL;
    ck_assert_msg(ga_topo_load(tmp, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    unlink(tmp);
    return t;
}

/* The two-socket machine's file with EDITS, which give it the nodes
 * ALL: each GPU's nearest nodes are those of the file as shipped. */
static void nearest_as_before(const edit_t *edits, size_t n, uint64_t all)
{
    hwloc_topology_t t = load_edited(edits, n);
    ck_assert_uint_eq(ga_topo_all_nodes(t), all);
    for (int i = 0; i < machines[0].gpus; i++) {
        ga_topo_gpu_t g = {.ordinal = i};
        snprintf(g.busid, sizeof g.busid, "%s", machines[0].busid[i]);
        ga_topo_locate(t, g.busid, &g);
        ck_assert(g.located);
        ck_assert_uint_eq(g.nodes, machines[0].node[i]);
    }
    hwloc_topology_destroy(t);
}

/* The two-socket machine with the PCI root of GPU 0 moved from its
 * package to the object whose gp_index is UNDER (the board wires it below
 * the node's level: a core, a cache, a die).  No node's locality is
 * within that object; the GPU read as near no node, and its pinned
 * memory was spread over both. */
static hwloc_topology_t bridge_moved_under(const char *under)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, machines[0].file);
    FILE *in = fopen(path, "r");
    ck_assert_ptr_nonnull(in);
    static char text[1 << 20], moved[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[len] = '\0';
    /* The bridge's element: from its tag to its closing tag, the first
     * one as indented as it is. */
    char *from = strstr(text, "      <object type=\"Bridge\" gp_index=\"45\"");
    ck_assert_ptr_nonnull(from);
    char *end = strstr(from, "\n      </object>\n");
    ck_assert_ptr_nonnull(end);
    end += strlen("\n      </object>\n");
    char tag[64];
    snprintf(tag, sizeof tag, "gp_index=\"%s\"", under);
    char *at = strstr(text, tag);
    ck_assert_ptr_nonnull(at);
    at = strchr(at, '\n') + 1; /* after the line of its opening tag */
    ck_assert(at < from);
    snprintf(moved, sizeof moved, "%.*s%.*s%.*s%s", (int)(at - text), text, (int)(end - from), from,
             (int)(from - at), at, end);
    char tmp[] = "/tmp/check_topo_XXXXXX";
    int fd = mkstemp(tmp);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, moved, strlen(moved)), (ssize_t)strlen(moved));
    close(fd);
    hwloc_topology_t t = NULL;
    ck_assert_msg(ga_topo_load(tmp, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    unlink(tmp);
    return t;
}

START_TEST(gpu_below_its_node_s_level)
{
    const char *const under[] = {"7", "5", "4"}; /* core 0, its L2, the L3 */
    for (int k = 0; k < 3; k++) {
        hwloc_topology_t t = bridge_moved_under(under[k]);
        ga_topo_gpu_t g = {.ordinal = 0};
        snprintf(g.busid, sizeof g.busid, "%s", machines[0].busid[0]);
        ga_topo_locate(t, g.busid, &g);
        ck_assert(g.located);
        ck_assert_msg(g.nodes == 0x1, "under gp_index %s: nodes 0x%llx", under[k],
                      (unsigned long long)g.nodes);
        hwloc_topology_destroy(t);
    }
}
END_TEST

#if HWLOC_API_VERSION >= 0x00020300 /* hwloc_get_local_numanode_objs: gpus.c */
/* One package with DRAM (node 0), and a GPU's own memory (node 1, as on a
 * GH200) and a CXL expander (node 2) attached to the whole machine, from
 * which hwloc hangs the GPU (data/1p-gpumem-cxl.xml).  The GPU is the
 * package's: node 0 (it read as of unknown locality, and its pinned pages
 * were interleaved over all three).  Where the locality is unknown, the
 * pages are spread over plain memory: nodes 0 and 2, not the GPU's. */
START_TEST(one_package_with_memory_only_nodes)
{
    hwloc_topology_t t = load("1p-gpumem-cxl.xml");
    ck_assert_uint_eq(ga_topo_all_nodes(t), 0x7);
    ga_topo_gpu_t g = {.ordinal = 0};
    snprintf(g.busid, sizeof g.busid, "0009:01:00.0");
    ga_topo_locate(t, g.busid, &g);
    ck_assert(g.located);
    ck_assert_msg(g.nodes == 0x1, "nodes 0x%llx", (unsigned long long)g.nodes);
    ga_settings_t s;
    pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
    ga_placement_t pl;
    ck_assert_int_eq(ga_topo_resolve(t, &s, &g, &pl), GPUARENA_SUCCESS);
    ck_assert(pl.policy == GA_NUMA_NODES && pl.nodes == 0x1 && !pl.fallback);
    g.nodes = 0; /* as for a GPU near no node */
    ck_assert_int_eq(ga_topo_resolve(t, &s, &g, &pl), GPUARENA_SUCCESS);
    ck_assert(pl.policy == GA_NUMA_INTERLEAVE && pl.fallback);
    ck_assert_msg(pl.nodes == 0x5, "fallback nodes 0x%llx", (unsigned long long)pl.nodes);
    hwloc_topology_destroy(t);

    /* The GPU under the one package, all memory attached to the machine
     * (data/1p-memory-on-machine.xml): the machine is the package's, its
     * plain node 0 near (the walk stopped at the machine: unknown). */
    t = load("1p-memory-on-machine.xml");
    g.nodes = 0;
    ga_topo_locate(t, g.busid, &g);
    ck_assert(g.located);
    ck_assert_msg(g.nodes == 0x1, "nodes 0x%llx", (unsigned long long)g.nodes);
    hwloc_topology_destroy(t);
}
END_TEST
#endif

#define MACHINE_NODES                                                                              \
    "nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\""

#if HWLOC_API_VERSION >= 0x00020300 /* hwloc_get_local_numanode_objs: gpus.c */
/* The two-socket machine with a memory-only node that the machine as a
 * whole shares (a CXL memory expander, as hwloc shows one whose
 * initiators it does not know): in hwloc 2 it is in every package's
 * nodeset too, and GPUs took it as near (nodes 0,2 and 1-2). */
START_TEST(nearest_leaves_out_the_machine_s_memory)
{
    static const edit_t cxl[] = {
        {MACHINE_NODES, "nodeset=\"0x00000007\" complete_nodeset=\"0x00000007\" "
                        "allowed_nodeset=\"0x00000007\""},
        {"    <object type=\"Package\" os_index=\"0\"",
         "    <object type=\"NUMANode\" os_index=\"2\" cpuset=\"0xffffffff\" "
         "complete_cpuset=\"0xffffffff\" nodeset=\"0x00000004\" complete_nodeset=\"0x00000004\" "
         "gp_index=\"900\" local_memory=\"68719476736\"/>\n"
         "    <object type=\"Package\" os_index=\"0\""},
    };
    nearest_as_before(cxl, 2, 0x7);
}
END_TEST

/* Package 1 with a high-bandwidth memory node beside its DRAM (a Xeon
 * Max's): its GPUs' pinned pages go to the DRAM (they took 1,3). */
START_TEST(nearest_prefers_plain_memory)
{
    static const edit_t hbm[] = {
        {MACHINE_NODES, "nodeset=\"0x0000000b\" complete_nodeset=\"0x0000000b\" "
                        "allowed_nodeset=\"0x0000000b\""},
        {"nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" gp_index=\"84\"",
         "nodeset=\"0x0000000a\" complete_nodeset=\"0x0000000a\" gp_index=\"84\""},
        {"      <object type=\"NUMANode\" os_index=\"1\"",
         "      <object type=\"NUMANode\" os_index=\"3\" cpuset=\"0xff00ff00\" "
         "complete_cpuset=\"0xff00ff00\" nodeset=\"0x00000008\" complete_nodeset=\"0x00000008\" "
         "gp_index=\"901\" subtype=\"HBM\" local_memory=\"17179869184\"/>\n"
         "      <object type=\"NUMANode\" os_index=\"1\""},
    };
    nearest_as_before(hbm, 3, 0xb);
}
END_TEST
#endif

START_TEST(missing_node_is_a_config_error)
{
    hwloc_topology_t t = load(machines[_i].file);
    ga_settings_t s;
    ga_placement_t pl = {.policy = GA_NUMA_LOCAL, .nodes = 42, .fallback = false};
    const int bad[] = {0, 5};
    const ga_numa_policy_t policies[] = {GA_NUMA_NODES, GA_NUMA_INTERLEAVE};
    for (int k = 0; k < 2; k++) {
        pinned_settings(&s, policies[k], 2, bad);
        ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_ERR_CONFIG);
        ck_assert_msg(strncmp(gpuarena_last_error(), "numa:", 5) == 0, "%s", gpuarena_last_error());
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "node 5"));
    }
    ck_assert_uint_eq(pl.nodes, 42); /* untouched */
    const int neg[] = {-1};
    pinned_settings(&s, GA_NUMA_NODES, 1, neg);
    ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_ERR_CONFIG);
    pinned_settings(&s, GA_NUMA_NODES, 0, NULL);
    ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_ERR_CONFIG);
    hwloc_topology_destroy(t);
}
END_TEST

/* Through the public path: GPUARENA_TOPOLOGY names the file (each Check
 * test runs in its own process, so the cached topology is this one). */
START_TEST(environment_names_the_file)
{
    const expect_t *e = &machines[_i];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, e->file);
    setenv("GPUARENA_TOPOLOGY", path, 1);
    hwloc_topology_t t = NULL;
    const char *xml = NULL;
    ck_assert_int_eq(ga_topo_decisions(&t, &xml), GPUARENA_SUCCESS);
    ck_assert_str_eq(xml, path);
    for (int i = 0; i < e->gpus; i++) {
        ga_settings_t s;
        ga_placement_t pl;
        pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
        ck_assert_int_eq(ga_topo_placement(&s, i, &pl), GPUARENA_SUCCESS);
        ck_assert_uint_eq(pl.nodes, e->node[i]);
        ck_assert(!pl.fallback);
    }
    /* Past the last GPU: unknown locality. */
    ga_settings_t s;
    ga_placement_t pl;
    pinned_settings(&s, GA_NUMA_NEAREST, 0, NULL);
    ck_assert_int_eq(ga_topo_placement(&s, e->gpus, &pl), GPUARENA_SUCCESS);
    ck_assert(pl.fallback);
    /* A node the file lacks is missing from it, not from this machine. */
    const int gone[] = {63};
    pinned_settings(&s, GA_NUMA_NODES, 1, gone);
    ck_assert_int_eq(ga_topo_placement(&s, 0, &pl), GPUARENA_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "in the topology of"));
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), e->file));
}
END_TEST

/* Decisions on a file (two nodes), pages on this machine: the file's
 * nodes that this machine lacks get no pages, so numa_nodes leaves them
 * out and the segments bound to a part of their nodes count in
 * numa_unbound (gpuarena.conf(5)).  numa_nodes said 0-1 and numa_unbound
 * 0 on a machine of one node. */
START_TEST(file_nodes_this_machine_lacks)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", GA_TEST_DATA, machines[0].file);
    setenv("GPUARENA_TOPOLOGY", path, 1);
    hwloc_topology_t here = NULL;
    ck_assert_int_eq(ga_topo_machine(&here), GPUARENA_SUCCESS);
    uint64_t mine = ga_topo_memory_nodes(here, hwloc_topology_get_topology_nodeset(here));
    /* Bound as far as this machine goes, then with binding refused by
     * the system (the test's own process: Check forks it). */
    for (int refused = 0; refused < 2; refused++) {
        if (refused && !ga_refuse_mbind())
            break;
        gpuarena_t *a = NULL;
        ck_assert_msg(gpuarena_create(GPUARENA_HOST, 0, "numa=interleave,expandable=false", &a) ==
                          GPUARENA_SUCCESS,
                      "%s", gpuarena_last_error());
        void *p;
        ck_assert_int_eq(gpuarena_alloc(a, 1 << 20, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
        gpuarena_stats_t st;
        ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
        uint64_t want = hwloc_topology_is_thissystem(here) ? mine & 0x3 : 0;
        ck_assert_uint_eq(st.numa_nodes, want);
        ck_assert_msg((st.numa_unbound != 0) == (want != 0x3 || (refused && mine != 1)),
                      "refused %d: numa_unbound %llu", refused,
                      (unsigned long long)st.numa_unbound);
        ck_assert_int_eq(gpuarena_free(a, p, GPUARENA_STREAM_HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
}
END_TEST

START_TEST(bad_topology_file)
{
    setenv("GPUARENA_TOPOLOGY", GA_TEST_DATA "/no-such-file.xml", 1);
    hwloc_topology_t t = NULL;
    ck_assert_int_eq(ga_topo_decisions(&t, NULL), GPUARENA_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "no-such-file.xml"));
    /* The same answer the second time (cached). */
    ck_assert_int_eq(ga_topo_decisions(&t, NULL), GPUARENA_ERR_CONFIG);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Real binding on this machine. */

static uint64_t pages_on(hwloc_topology_t t, void *a, size_t size, bool *known)
{
    hwloc_nodeset_t where = hwloc_bitmap_alloc();
    int rc = hwloc_get_area_memlocation(t, a, size, where, HWLOC_MEMBIND_BYNODESET);
    *known = rc == 0 && !hwloc_bitmap_iszero(where);
    uint64_t m = ga_topo_mask(where);
    hwloc_bitmap_free(where);
    return m;
}

START_TEST(binding_puts_pages_on_the_node)
{
    unsetenv("GPUARENA_TOPOLOGY");
    hwloc_topology_t t = NULL;
    ck_assert_int_eq(ga_topo_machine(&t), GPUARENA_SUCCESS);
    uint64_t all = ga_topo_all_nodes(t);
    ck_assert_uint_ne(all, 0);
    size_t size = (size_t)8 << 20;
    for (int node = 0; node < 64; node++) {
        if (!(all >> node & 1))
            continue;
        ga_settings_t s;
        ga_placement_t pl;
        pinned_settings(&s, GA_NUMA_NODES, 1, &node);
        ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_SUCCESS);
        void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(a, MAP_FAILED);
        bool unbound;
        ck_assert_int_eq(ga_topo_bind(&pl, a, size, &unbound), GPUARENA_SUCCESS);
        if (unbound) { /* a container refusing mbind, HWLOC_XMLFILE: nothing to see */
            printf("check_topo: binding to node %d not made here\n", node);
            munmap(a, size);
            continue;
        }
        memset(a, 0x5a, size);
        bool known;
        uint64_t on = pages_on(t, a, size, &known);
        if (known)
            ck_assert_uint_eq(on, (uint64_t)1 << node);
        else
            printf("check_topo: hwloc_get_area_memlocation unsupported here\n");
        munmap(a, size);
    }
    /* Interleave over every node: the pages are on those nodes only. */
    ga_settings_t s;
    ga_placement_t pl;
    pinned_settings(&s, GA_NUMA_INTERLEAVE, 0, NULL);
    ck_assert_int_eq(ga_topo_resolve(t, &s, NULL, &pl), GPUARENA_SUCCESS);
    void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool unbound;
    ck_assert_int_eq(ga_topo_bind(&pl, a, size, &unbound), GPUARENA_SUCCESS);
    memset(a, 0xa5, size);
    bool known;
    uint64_t on = pages_on(t, a, size, &known);
    if (known)
        ck_assert_uint_eq(on & ~all, 0);
    munmap(a, size);
}
END_TEST

/* The host provider binds what it maps, as its placement says. */
START_TEST(host_provider_places_its_segments)
{
    unsetenv("GPUARENA_TOPOLOGY");
    hwloc_topology_t t = NULL;
    ck_assert_int_eq(ga_topo_machine(&t), GPUARENA_SUCCESS);
    uint64_t all = ga_topo_all_nodes(t);
    int last = 63;
    while (!(all >> last & 1))
        last--;
    ga_settings_t s;
    ga_config_defaults(GPUARENA_HOST, &s);
    s.numa = GA_NUMA_NODES;
    s.numa_count = 1;
    s.numa_nodes[0] = last;
    ga_provider_t *p;
    ck_assert_int_eq(ga_host_provider_create(&s, &p), GPUARENA_SUCCESS);
    size_t size = 4 * p->granule;
    void *seg;
    ck_assert_int_eq(p->ops->map(p, size, &seg), GPUARENA_SUCCESS);
    memset(seg, 1, size);
    bool known;
    uint64_t on = pages_on(t, seg, size, &known);
    if (known)
        ck_assert_uint_eq(on, (uint64_t)1 << last);
    gpuarena_stats_t st;
    memset(&st, 0, sizeof st);
    p->ops->stats(p, &st);
    ck_assert_uint_eq(st.numa_nodes, (uint64_t)1 << last);
    ck_assert_uint_eq(st.numa_fallbacks, 0);
    ck_assert_int_eq(p->ops->unmap(p, seg, size), GPUARENA_SUCCESS);
    p->ops->destroy(p);

    /* A node this machine lacks: a config error naming the key. */
    s.numa_nodes[0] = 63;
    if (!(all >> 63 & 1)) {
        ck_assert_int_eq(ga_host_provider_create(&s, &p), GPUARENA_ERR_CONFIG);
        ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "numa"));
    }
}
END_TEST

/* numa = local pre-faults with helper threads once the range is bound to
 * the calling thread's node: the kernel's node of its CPU.  On a machine
 * whose CPUs are near a memory-only node besides their own (here the
 * two-socket file with a high-bandwidth node in package 0, read as this
 * machine's), hwloc gives each of package 0's PUs two nodes, and the
 * range was left unbound, touched by the calling thread alone. */
START_TEST(local_prefault_binds_to_the_cpu_s_node)
{
    static const edit_t hbm[] = {
        {MACHINE_NODES, "nodeset=\"0x00000007\" complete_nodeset=\"0x00000007\" "
                        "allowed_nodeset=\"0x00000007\""},
        {"nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"3\"",
         "nodeset=\"0x00000005\" complete_nodeset=\"0x00000005\" gp_index=\"3\""},
        {"      <object type=\"NUMANode\" os_index=\"0\"",
         "      <object type=\"NUMANode\" os_index=\"2\" cpuset=\"0x00ff00ff\" "
         "complete_cpuset=\"0x00ff00ff\" nodeset=\"0x00000004\" complete_nodeset=\"0x00000004\" "
         "gp_index=\"901\" subtype=\"HBM\" local_memory=\"17179869184\"/>\n"
         "      <object type=\"NUMANode\" os_index=\"0\""},
    };
    /* On a CPU of package 0 (this machine's CPU 0 or 1), whose node the
     * kernel says is 0: a machine of other shapes runs nothing here. */
    unsigned cpu, node;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0 || cpu > 7 || node != 0)
        return;
    unsigned long one = 1ul << cpu; /* stay there */
    ck_assert_int_eq(syscall(SYS_sched_setaffinity, 0, sizeof one, &one), 0);
    char tmp[] = "/tmp/check_topo_XXXXXX";
    write_edited(hbm, 3, tmp);
    setenv("HWLOC_XMLFILE", tmp, 1);
    setenv("HWLOC_THISSYSTEM", "1", 1);
    hwloc_topology_t t = NULL;
    ck_assert_int_eq(ga_topo_machine(&t), GPUARENA_SUCCESS);
    unlink(tmp);
    hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(t, cpu);
    ck_assert_ptr_nonnull(pu);
    ck_assert_int_eq(hwloc_bitmap_weight(pu->nodeset), 2); /* nodes 0 and 2 */
    ga_placement_t pl = {.policy = GA_NUMA_LOCAL};
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size = 64 * page;
    void *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(a, MAP_FAILED);
    ga_topo_prefault(&pl, a, size, page, 4);
    int mode = -1;
    unsigned long mask[2] = {0, 0};
    ck_assert_int_eq(syscall(SYS_get_mempolicy, &mode, mask, 128, a, 2 /* MPOL_F_ADDR */), 0);
    ck_assert_msg(mode != 0 && mask[0] == 1, "range policy %d, nodes 0x%lx", mode, mask[0]);
    munmap(a, size);
    unsetenv("HWLOC_XMLFILE");
    unsetenv("HWLOC_THISSYSTEM");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("topo");
    TCase *xml = tcase_create("xml");
    int nm = (int)(sizeof machines / sizeof machines[0]);
    tcase_add_loop_test(xml, gpus_found_in_pci_order, 0, nm);
    tcase_add_loop_test(xml, every_policy_for_every_gpu, 0, nm);
    tcase_add_loop_test(xml, unknown_locality_falls_back, 0, nm);
    tcase_add_loop_test(xml, missing_node_is_a_config_error, 0, nm);
    tcase_add_test(xml, memoryless_nearest_node_falls_back);
    tcase_add_test(xml, gpu_below_its_node_s_level);
#if HWLOC_API_VERSION >= 0x00020300
    tcase_add_test(xml, nearest_leaves_out_the_machine_s_memory);
    tcase_add_test(xml, nearest_prefers_plain_memory);
    tcase_add_test(xml, one_package_with_memory_only_nodes);
#endif
    /* These read GPUARENA_TOPOLOGY through the once-per-process cache,
     * so they need a process each: left out when Check does not fork
     * (CK_FORK=no, as under valgrind). */
    const char *fork_env = getenv("CK_FORK");
    if (!fork_env || strcmp(fork_env, "no") != 0) {
        tcase_add_loop_test(xml, environment_names_the_file, 0, nm);
        tcase_add_test(xml, bad_topology_file);
        tcase_add_test(xml, file_nodes_this_machine_lacks);
    }
    suite_add_tcase(s, xml);
    TCase *here = tcase_create("this machine");
    tcase_add_test(here, binding_puts_pages_on_the_node);
    tcase_add_test(here, host_provider_places_its_segments);
    if (!fork_env || strcmp(fork_env, "no") != 0) /* ga_topo_machine, once a process */
        tcase_add_test(here, local_prefault_binds_to_the_cpu_s_node);
    tcase_set_timeout(here, 60);
    suite_add_tcase(s, here);
    return ga_check_run(s);
}
