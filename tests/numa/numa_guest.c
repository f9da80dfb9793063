/*
 * numa_guest.c - NUMA placement checked page by page, inside a QEMU guest
 * with several NUMA nodes (numa-guest.sh boots it; run alone it skips).
 *
 * Every test allocates blocks, writes every byte of them (the first touch
 * that makes the kernel place the pages), asks the kernel with move_pages
 * (the raw system call: no libnuma) on which node every page of every
 * block lies, and prints one line on the serial console:
 *
 *   RESULT <name> PASS <what was checked>
 *   RESULT <name> FAIL <the first wrong page and how many were wrong>
 *
 * and at the end "RESULT-SUMMARY passed=P failed=F".
 *
 * The tests:
 *   node:N:map, node:N:grow   host arena with numa=N, fixed segments
 *                             (mmap + bind) and growable ones (reserve,
 *                             then commit + bind per granule): every page
 *                             on node N
 *   list:L:fromN:map|grow     numa=L (the nodes but the first, or both of
 *                             two nodes) with the thread on node N: every
 *                             page on N when L holds it, else in L
 *   interleave:all, interleave:LIST
 *                             every page in the set, and consecutive pages
 *                             go round the set in order (transparent huge
 *                             pages are off in the guest, so the unit is a
 *                             page)
 *   local:N                   numa=local with the thread pinned to node
 *                             N's CPUs: every page on node N
 *   local:N:prefault          a segment of numa=local pre-faulted by
 *                             several threads (ga_topo_prefault, the
 *                             pinned provider's), the mapping thread on
 *                             node N but not bound there: every page on N
 *   local:N:prefault:policy   the same with the mapping thread on another
 *                             node and its own memory policy preferring
 *                             node N (numactl --preferred): every page on N
 *   refused:map, refused:grow a host arena bound to the second node in a
 *                             process whose seccomp filter makes mbind
 *                             fail with EPERM (Docker's default profile
 *                             without CAP_SYS_NICE), the thread on the
 *                             first node: the allocations succeed, every
 *                             page on the first node (the kernel's first
 *                             touch) and the statistics count the
 *                             segments left unbound (every allocation
 *                             failed before)
 *   nearest:host              a host arena asking for "nearest" has no GPU:
 *                             it interleaves over every node and counts
 *                             the fallback
 *   nearest:gpuD              (with GPUARENA_TOPOLOGY, the XML of a real
 *                             machine that the guest reproduces) the
 *                             pinned arena's placement for GPU D, bound by
 *                             ga_topo_bind as the pinned provider does:
 *                             every page on the node the file puts GPU D
 *                             under
 *
 * Each arena test allocates blocks of the small and large pools, frees
 * some and allocates again (blocks carved from a segment by a split and
 * blocks reused after a free), then trims the arena to nothing and
 * allocates once more (pages given back and bound again); every page of
 * every live block is checked at each step.
 *
 * GA_NUMA_PLANT=K (numa-guest.sh passes it on) asks for every node the
 * test names K nodes further on while still expecting the named one: the
 * placement is then wrong on purpose and the tests must fail.
 */
#include "config.h"

#include "config/config.h"
#include "gpuarena.h"
#include "nombind.h"
#include "topo/topo_internal.h"

#include <errno.h>
#include <hwloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_BLOCKS 16

static int passed, failed;
static int nnodes;               /* NUMA nodes of the guest */
static int node_ids[64];         /* their OS indexes */
static uint64_t all_nodes;       /* mask of them */
static int plant;                /* GA_NUMA_PLANT */
static size_t page;              /* page size */
static hwloc_topology_t machine; /* the guest's own topology */
static char detail[512];         /* the failure of the test running */

static void result(const char *name, bool ok, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("RESULT %s %s %s\n", name, ok ? "PASS" : "FAIL", buf);
    fflush(stdout);
    if (ok)
        passed++;
    else
        failed++;
}

/* The node a test names, moved by GA_NUMA_PLANT. */
static int planted(int node)
{
    if (!plant)
        return node;
    for (int i = 0; i < nnodes; i++)
        if (node_ids[i] == node)
            return node_ids[(i + plant) % nnodes];
    return node;
}

static uint64_t planted_mask(uint64_t mask)
{
    uint64_t m = 0;
    for (int i = 0; i < 64; i++)
        if (mask >> i & 1)
            m |= (uint64_t)1 << planted(i);
    return m;
}

/* ------------------------------------------------------------------ */
/* Where pages are. */

/* What a test expects of each page. */
typedef struct expect {
    uint64_t set; /* every page on one of these nodes */
    bool cycle;   /* consecutive pages go round SET in order */
} expect_t;

/* What the pages checked so far were. */
typedef struct tally {
    size_t pages, wrong, breaks; /* breaks: consecutive pages out of order */
    size_t on[64];
    bool first_noted;
} tally_t;

/* The node after NODE in SET, going round. */
static int next_in(uint64_t set, int node)
{
    for (int i = 1; i <= 64; i++) {
        int n = (node + i) % 64;
        if (set >> n & 1)
            return n;
    }
    return node;
}

/* Ask the kernel where every page of [P, P+SIZE) is and check it against
 * E; what is wrong goes into DETAIL (the first thing) and T. */
static void check_block(const char *what, int index, void *p, size_t size, const expect_t *e,
                        tally_t *t)
{
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + size + page - 1) & ~(uintptr_t)(page - 1);
    size_t n = (hi - lo) / page;
    enum { BATCH = 512 };
    void *pages[BATCH];
    int status[BATCH];
    int prev = -1;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < BATCH ? n - done : BATCH;
        for (size_t i = 0; i < k; i++) {
            pages[i] = (void *)(lo + (done + i) * page);
            status[i] = -1;
        }
        long rc = syscall(SYS_move_pages, 0, (unsigned long)k, pages, NULL, status, 0);
        if (rc != 0) {
            int err = errno;
            t->wrong += k;
            if (!t->first_noted) {
                snprintf(detail, sizeof detail, "%s: move_pages on block %d failed: %s", what,
                         index, strerror(err));
                t->first_noted = true;
            }
            done += k;
            continue;
        }
        for (size_t i = 0; i < k; i++) {
            int s = status[i];
            t->pages++;
            bool ok = s >= 0 && s < 64 && (e->set >> s & 1);
            if (s >= 0 && s < 64)
                t->on[s]++;
            if (ok && e->cycle && prev >= 0 && s != next_in(e->set, prev)) {
                t->breaks++;
                if (!t->first_noted) {
                    snprintf(detail, sizeof detail,
                             "%s: block %d page %zu at %p on node %d after a page on node %d"
                             " (interleave goes round the nodes in order)",
                             what, index, done + i, pages[i], s, prev);
                    t->first_noted = true;
                }
            }
            if (!ok) {
                t->wrong++;
                if (!t->first_noted) {
                    char want[128];
                    ga_topo_nodes_string(e->set, want, sizeof want);
                    if (s < 0)
                        snprintf(detail, sizeof detail,
                                 "%s: block %d page %zu at %p: move_pages status %d (%s)", what,
                                 index, done + i, pages[i], s, strerror(-s));
                    else
                        snprintf(detail, sizeof detail,
                                 "%s: block %d page %zu at %p on node %d, expected node(s) %s",
                                 what, index, done + i, pages[i], s, want);
                    t->first_noted = true;
                }
            }
            prev = s;
        }
        done += k;
    }
}

static void touch(void *p, size_t size, int byte)
{
    memset(p, byte, size);
}

/* "pages=N on{0:12,1:12} reused=R" etc. for a passing test. */
static void summary(char *buf, size_t len, const tally_t *t)
{
    size_t used = (size_t)snprintf(buf, len, "pages=%zu on{", t->pages);
    bool first = true;
    for (int i = 0; i < 64 && used < len; i++)
        if (t->on[i]) {
            used +=
                (size_t)snprintf(buf + used, len - used, "%s%d:%zu", first ? "" : ",", i, t->on[i]);
            first = false;
        }
    if (used < len)
        snprintf(buf + used, len - used, "}");
}

/* ------------------------------------------------------------------ */
/* Arena scenario: allocate, check, free some, reuse, trim, again. */

typedef struct live {
    void *p[MAX_BLOCKS];
    size_t size[MAX_BLOCKS];
    int n;
} live_t;

static bool alloc_block(gpuarena_t *a, live_t *l, size_t size)
{
    void *p = NULL;
    gpuarena_status_t st = gpuarena_alloc(a, size, NULL, &p);
    if (st != GPUARENA_SUCCESS || !p) {
        snprintf(detail, sizeof detail, "gpuarena_alloc(%zu): %s: %s", size, gpuarena_strerror(st),
                 gpuarena_last_error());
        return false;
    }
    touch(p, size, 0x40 + l->n);
    l->p[l->n] = p;
    l->size[l->n] = size;
    l->n++;
    return true;
}

static void free_block(gpuarena_t *a, live_t *l, int i)
{
    (void)gpuarena_free(a, l->p[i], NULL);
    l->p[i] = l->p[l->n - 1];
    l->size[i] = l->size[l->n - 1];
    l->n--;
}

static void check_live(const char *what, const live_t *l, const expect_t *e, tally_t *t)
{
    for (int i = 0; i < l->n; i++)
        check_block(what, i, l->p[i], l->size[i], e, t);
}

/* Run the scenario on a new host arena made with OPTIONS; report NAME. */
static void arena_test(const char *name, const char *options, const expect_t *e,
                       uint64_t want_stat_nodes, bool want_fallback, bool want_unbound)
{
    detail[0] = '\0';
    gpuarena_t *a = NULL;
    gpuarena_status_t st = gpuarena_create(GPUARENA_HOST, 0, options, &a);
    if (st != GPUARENA_SUCCESS) {
        result(name, false, "gpuarena_create(host, \"%s\"): %s: %s", options, gpuarena_strerror(st),
               gpuarena_last_error());
        return;
    }
    tally_t t = {0};
    live_t l = {0};
    bool ok = true;
    int reused = 0;
    /* Small pool (2 MiB segments, split), then the large pool. */
    static const size_t first[] = {100 << 10, 700 << 10, 1 << 20, (3 << 20) + (5 << 10), 9 << 20};
    for (size_t i = 0; ok && i < sizeof first / sizeof first[0]; i++)
        ok = alloc_block(a, &l, first[i]);
    if (ok)
        check_live("fresh", &l, e, &t);
    /* Free the 700 KiB and the 3 MiB blocks; smaller requests carve their
     * space again. */
    void *gone[2] = {NULL, NULL};
    size_t gone_size[2] = {0, 0};
    if (ok) {
        gone[0] = l.p[1], gone_size[0] = l.size[1];
        gone[1] = l.p[3], gone_size[1] = l.size[3];
        free_block(a, &l, 3);
        free_block(a, &l, 1);
        size_t again[] = {300 << 10, 2 << 20, 600 << 10};
        for (size_t i = 0; ok && i < sizeof again / sizeof again[0]; i++) {
            ok = alloc_block(a, &l, again[i]);
            if (!ok)
                break;
            uintptr_t p = (uintptr_t)l.p[l.n - 1];
            for (int g = 0; g < 2; g++)
                if (p >= (uintptr_t)gone[g] && p < (uintptr_t)gone[g] + gone_size[g])
                    reused++;
        }
        if (ok)
            check_live("reused", &l, e, &t);
    }
    gpuarena_stats_t s;
    bool stats_ok = gpuarena_stats(a, &s) == GPUARENA_SUCCESS;
    /* Everything back, the arena trimmed to nothing, then new blocks on
     * pages mapped or committed (and bound) again. */
    while (ok && l.n)
        free_block(a, &l, l.n - 1);
    if (ok && gpuarena_trim(a, 0) != GPUARENA_SUCCESS) {
        snprintf(detail, sizeof detail, "gpuarena_trim: %s", gpuarena_last_error());
        ok = false;
    }
    if (ok)
        ok = alloc_block(a, &l, 5 << 20) && alloc_block(a, &l, 200 << 10);
    if (ok)
        check_live("after trim", &l, e, &t);
    while (l.n)
        free_block(a, &l, l.n - 1);
    (void)gpuarena_destroy(a);

    char sum[256];
    summary(sum, sizeof sum, &t);
    if (ok && !t.wrong && !t.breaks && reused == 0) {
        snprintf(detail, sizeof detail, "no block was carved from a freed one (%s)", sum);
        ok = false;
    }
    if (ok && !t.wrong && !t.breaks && stats_ok &&
        (s.numa_nodes != want_stat_nodes || (s.numa_fallbacks != 0) != want_fallback ||
         (s.numa_unbound != 0) != want_unbound)) {
        char got[128], want[128];
        snprintf(detail, sizeof detail,
                 "statistics say nodes %s fallbacks %llu unbound %llu, expected %s%s%s",
                 ga_topo_nodes_string(s.numa_nodes, got, sizeof got),
                 (unsigned long long)s.numa_fallbacks, (unsigned long long)s.numa_unbound,
                 ga_topo_nodes_string(want_stat_nodes, want, sizeof want),
                 want_fallback ? " and a fallback" : "",
                 want_unbound ? " and unbound segments" : "");
        ok = false;
    }
    /* An interleaved block of several pages must use every node. */
    if (ok && e->cycle)
        for (int i = 0; i < 64; i++)
            if ((e->set >> i & 1) && !t.on[i]) {
                snprintf(detail, sizeof detail, "no page on node %d (%s)", i, sum);
                t.wrong++;
            }
    if (ok && !t.wrong && !t.breaks)
        result(name, true, "%s reused=%d", sum, reused);
    else if (ok)
        result(name, false, "%s (%zu of %zu pages wrong, %zu out of order; %s)", detail, t.wrong,
               t.pages, t.breaks, sum);
    else
        result(name, false, "%s", detail);
}

/* ------------------------------------------------------------------ */
/* The tests. */

static void nodes_option(char *buf, size_t len, const char *prefix, uint64_t mask)
{
    char list[128];
    snprintf(buf, len, "numa=%s%s", prefix, ga_topo_nodes_string(mask, list, sizeof list));
}

static void test_nodes(void)
{
    for (int i = 0; i < nnodes; i++) {
        int n = node_ids[i];
        expect_t e = {(uint64_t)1 << n, false};
        char name[64], opt[192], numa[160];
        nodes_option(numa, sizeof numa, "", (uint64_t)1 << planted(n));
        snprintf(name, sizeof name, "node:%d:map", n);
        snprintf(opt, sizeof opt, "%s,expandable=false", numa);
        arena_test(name, opt, &e, (uint64_t)1 << planted(n), false, false);
        snprintf(name, sizeof name, "node:%d:grow", n);
        snprintf(opt, sizeof opt, "%s,expandable=true", numa);
        arena_test(name, opt, &e, (uint64_t)1 << planted(n), false, false);
    }
}

/* The list: every node but the first, or both of two nodes. */
static uint64_t list_mask(void)
{
    return nnodes > 2 ? all_nodes & ~((uint64_t)1 << node_ids[0]) : all_nodes;
}

static bool pin_to(int node);

/* Bound to a list, pages go to the nodes of the list only; the kernel
 * takes the calling thread's node when the list holds it (so the pages do
 * not all pile up on one node of the list), else one of the list.  The
 * thread runs on each node in turn. */
static void test_list(void)
{
    uint64_t m = list_mask();
    char opt[192], numa[160], name[192], list[128];
    nodes_option(numa, sizeof numa, "", planted_mask(m));
    ga_topo_nodes_string(m, list, sizeof list);
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    hwloc_get_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    for (int i = 0; i < nnodes; i++) {
        int n = node_ids[i];
        if (!pin_to(n))
            continue;
        expect_t e = {m >> n & 1 ? (uint64_t)1 << n : m, false};
        snprintf(name, sizeof name, "list:%s:from%d:map", list, n);
        snprintf(opt, sizeof opt, "%s,expandable=false", numa);
        arena_test(name, opt, &e, planted_mask(m), false, false);
        snprintf(name, sizeof name, "list:%s:from%d:grow", list, n);
        snprintf(opt, sizeof opt, "%s,expandable=true", numa);
        arena_test(name, opt, &e, planted_mask(m), false, false);
    }
    hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(saved);
}

static void test_interleave(void)
{
    expect_t e = {all_nodes, true};
    arena_test("interleave:all", "numa=interleave", &e, all_nodes, false, false);
    /* Over a part of the nodes, in a different order from the list's. */
    uint64_t m = nnodes > 2 ? all_nodes & ~((uint64_t)1 << node_ids[1]) : all_nodes;
    char opt[192], name[64], list[128];
    expect_t f = {m, true};
    nodes_option(opt, sizeof opt, "interleave:", planted_mask(m));
    snprintf(name, sizeof name, "interleave:%s", ga_topo_nodes_string(m, list, sizeof list));
    arena_test(name, opt, &f, planted_mask(m), false, false);
}

/* Pin the calling thread to the CPUs of NODE; false if it has none. */
static bool pin_to(int node)
{
    hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(machine, (unsigned)node);
    if (!o || !o->cpuset || hwloc_bitmap_iszero(o->cpuset))
        return false;
    return hwloc_set_cpubind(machine, o->cpuset, HWLOC_CPUBIND_THREAD | HWLOC_CPUBIND_STRICT) == 0;
}

static void test_local(void)
{
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    hwloc_get_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    for (int i = 0; i < nnodes; i++) {
        int n = node_ids[i];
        char name[64];
        snprintf(name, sizeof name, "local:%d", n);
        if (!pin_to(planted(n))) {
            printf("RESULT %s SKIP node %d has no CPU to run on\n", name, planted(n));
            continue;
        }
        int cpu = sched_getcpu();
        expect_t e = {(uint64_t)1 << n, false};
        /* numa_nodes is 0 for local: first touch decides. */
        arena_test(name, "numa=local", &e, 0, false, false);
        printf("RESULT-NOTE %s ran on CPU %d\n", name, cpu);
    }
    hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(saved);
}

/* The pinned provider's pre-fault of a segment with numa=local
 * (ga_topo_prefault): the helper threads that touch most of the pages
 * may run on any node, and the pages must still go to the node of the
 * thread that maps the segment, as a first touch by it would put them.
 * That thread is moved to node N, then let run anywhere again (where it
 * mostly stays, with nothing else to run), as an unbound thread of a
 * program is; the helpers, as many as two per CPU, are then free to run
 * on the other nodes' CPUs.  The scheduler may still move the thread
 * before the call reads its CPU (seen in CI): the node expected is N or,
 * where the thread ran elsewhere after the call, that node, and every
 * page must be on one node.  (GA_NUMA_PLANT expects N alone.) */
/* The pre-fault tests' segment: an untouched anonymous mapping of
 * SEGMENT bytes for test NAME, as the pinned provider maps one; NULL,
 * reported, when there is none. */
#define SEGMENT ((size_t)16 << 20)

static char *segment_for(const char *name)
{
    char *a = mmap(NULL, SEGMENT, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a != MAP_FAILED)
        return a;
    result(name, false, "mmap: %s", strerror(errno));
    return NULL;
}

/* Every page of segment A checked against E into *T, the segment
 * unmapped, and *T summed up in SUM. */
static void segment_done(char *a, const expect_t *e, tally_t *t, char *sum, size_t len)
{
    detail[0] = '\0';
    memset(t, 0, sizeof *t);
    check_block("prefault", 0, a, SEGMENT, e, t);
    munmap(a, SEGMENT);
    summary(sum, len, t);
}

static int node_of_cpu(int cpu)
{
    hwloc_obj_t pu = cpu < 0 ? NULL : hwloc_get_pu_obj_by_os_index(machine, (unsigned)cpu);
    return pu && pu->nodeset && hwloc_bitmap_weight(pu->nodeset) == 1
               ? hwloc_bitmap_first(pu->nodeset)
               : -1;
}

static void test_local_prefault(void)
{
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    hwloc_get_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = cpus > 2 ? (unsigned)(2 * cpus) : 4;
    ga_placement_t pl = {.policy = GA_NUMA_LOCAL};
    for (int i = 0; i < nnodes; i++) {
        int n = node_ids[i];
        char name[64];
        snprintf(name, sizeof name, "local:%d:prefault", n);
        char *a = segment_for(name);
        if (!a)
            continue;
        if (!pin_to(planted(n))) {
            printf("RESULT %s SKIP node %d has no CPU to run on\n", name, planted(n));
            munmap(a, SEGMENT);
            continue;
        }
        hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
        int cpu = sched_getcpu();
        ga_topo_prefault(&pl, a, SEGMENT, page, threads);
        int after = sched_getcpu();
        int moved = node_of_cpu(after);
        expect_t e = {(uint64_t)1 << n, false};
        if (!plant && moved >= 0 && moved < 64)
            e.set |= (uint64_t)1 << moved;
        tally_t tl;
        char sum[256];
        segment_done(a, &e, &tl, sum, sizeof sum);
        int on = 0;
        for (int k = 0; k < 64; k++)
            on += tl.on[k] != 0;
        if (tl.wrong)
            result(name, false, "%s (%zu of %zu pages wrong, %u threads; %s)", detail, tl.wrong,
                   tl.pages, threads, sum);
        else if (on > 1)
            result(name, false, "pages on %d nodes, expected one (%u threads; %s)", on, threads,
                   sum);
        else
            result(name, true, "%u threads: %s", threads, sum);
        printf("RESULT-NOTE %s the mapping thread ran on CPU %d, then %d\n", name, cpu, after);
    }
    hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(saved);
}

/* The same with the mapping thread's own memory policy set (as numactl
 * --membind or --preferred sets it for a program): the thread would put
 * its first touches on node N whatever CPU it runs on, and so must the
 * helper threads, which inherit its policy: every page on N, the thread
 * running on another node's CPU. */
static void test_local_prefault_policy(void)
{
    hwloc_bitmap_t saved = hwloc_bitmap_alloc();
    hwloc_get_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    ga_placement_t pl = {.policy = GA_NUMA_LOCAL};
    for (int i = 0; i < nnodes; i++) {
        int n = node_ids[i], other = node_ids[(i + 1) % nnodes];
        char name[64];
        snprintf(name, sizeof name, "local:%d:prefault:policy", n);
        char *a = segment_for(name);
        if (!a)
            continue;
        hwloc_bitmap_t want = hwloc_bitmap_alloc();
        hwloc_bitmap_only(want, (unsigned)planted(n));
        bool set =
            pin_to(other) && hwloc_set_membind(machine, want, HWLOC_MEMBIND_BIND,
                                               HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0;
        hwloc_bitmap_free(want);
        hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
        if (!set) {
            result(name, false, "could not run on node %d and prefer node %d: %s", other,
                   planted(n), strerror(errno));
            munmap(a, SEGMENT);
            continue;
        }
        ga_topo_prefault(&pl, a, SEGMENT, page, 4);
        hwloc_set_membind(machine, hwloc_topology_get_topology_nodeset(machine),
                          HWLOC_MEMBIND_DEFAULT, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
        expect_t e = {(uint64_t)1 << n, false};
        tally_t tl;
        char sum[256];
        segment_done(a, &e, &tl, sum, sizeof sum);
        if (tl.wrong)
            result(name, false, "%s (%zu of %zu pages wrong; %s)", detail, tl.wrong, tl.pages, sum);
        else
            result(name, true, "thread on node %d preferring node %d, 4 threads: %s", other, n,
                   sum);
    }
    hwloc_set_cpubind(machine, saved, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(saved);
}

/* Binding refused by the system: a child process (the filter stays for
 * its life) runs the arena tests with the thread on the first node and
 * the arena bound to the second; its RESULT lines are its own, its
 * tally comes back in its exit status (passed * 16 + failed). */
static void test_refused(void)
{
    int a = node_ids[0], b = node_ids[1];
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        passed = failed = 0;
        if (!pin_to(planted(a)) || !ga_refuse_mbind()) {
            result("refused", false, "cannot pin to node %d or set the filter: %s", planted(a),
                   strerror(errno));
            fflush(stdout);
            _exit(1);
        }
        expect_t e = {(uint64_t)1 << a, false};
        char opt[64];
        snprintf(opt, sizeof opt, "numa=%d,expandable=false", b);
        arena_test("refused:map", opt, &e, (uint64_t)1 << b, false, true);
        snprintf(opt, sizeof opt, "numa=%d,expandable=true", b);
        arena_test("refused:grow", opt, &e, (uint64_t)1 << b, false, true);
        fflush(stdout);
        _exit(passed * 16 + failed);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        result("refused", false, "the child process did not exit (status %d)", status);
        return;
    }
    passed += WEXITSTATUS(status) / 16;
    failed += WEXITSTATUS(status) % 16;
}

/* A host arena has no GPU: "nearest" falls back to all nodes. */
static void test_nearest_host(void)
{
    expect_t e = {all_nodes, true};
    arena_test("nearest:host", "numa=nearest", &e, all_nodes, true, false);
}

/* The node the XML file puts each GPU under, read from the file (see
 * check_topo.c): 03:00.0 under Package 0 / NUMANode 0, 83:00.0 and
 * 84:00.0 under Package 1 / NUMANode 1. */
static const struct {
    const char *busid;
    int node;
} xml_gpus[] = {{"0000:03:00.0", 0}, {"0000:83:00.0", 1}, {"0000:84:00.0", 1}};

static void test_nearest_gpus(const char *xml)
{
    hwloc_topology_t t = NULL;
    const char *file = NULL;
    if (ga_topo_decisions(&t, &file) != GPUARENA_SUCCESS || !file) {
        result("nearest:xml", false, "GPUARENA_TOPOLOGY=%s not in effect: %s", xml,
               gpuarena_last_error());
        return;
    }
    ga_topo_gpu_t *g = NULL;
    int n = 0;
    bool drv = false;
    if (ga_topo_gpus(t, GA_TOPO_GPUS_AUTO, &g, &n, &drv) != GPUARENA_SUCCESS ||
        n != (int)(sizeof xml_gpus / sizeof xml_gpus[0])) {
        result("nearest:xml", false, "%d GPUs found in %s, expected 3: %s", n, xml,
               gpuarena_last_error());
        free(g);
        return;
    }
    for (int d = 0; d < n; d++) {
        char name[64];
        snprintf(name, sizeof name, "nearest:gpu%d", d);
        int want = xml_gpus[d].node;
        if (strcmp(g[d].busid, xml_gpus[d].busid) != 0) {
            result(name, false, "GPU %d is %s, expected %s", d, g[d].busid, xml_gpus[d].busid);
            continue;
        }
        /* The pinned arena's placement: its settings, its device. */
        ga_settings_t s;
        ga_config_defaults(GPUARENA_PINNED, &s);
        ga_placement_t pl;
        if (ga_topo_placement(&s, d, &pl) != GPUARENA_SUCCESS) {
            result(name, false, "ga_topo_placement: %s", gpuarena_last_error());
            continue;
        }
        if (pl.policy != GA_NUMA_NODES || pl.nodes != (uint64_t)1 << want || pl.fallback) {
            char got[128];
            result(name, false, "%s: placement policy %d nodes %s fallback %d, expected node %d",
                   g[d].busid, (int)pl.policy, ga_topo_nodes_string(pl.nodes, got, sizeof got),
                   (int)pl.fallback, want);
            continue;
        }
        pl.nodes = planted_mask(pl.nodes);
        /* Bound and touched as the pinned provider's segments are (a whole
         * mapping, then a part of it, as growable segments are). */
        size_t size = 6 << 20;
        char *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED) {
            result(name, false, "mmap: %s", strerror(errno));
            continue;
        }
        detail[0] = '\0';
        tally_t tl = {0};
        expect_t e = {(uint64_t)1 << want, false};
        bool unbound[2] = {false, false};
        gpuarena_status_t st = ga_topo_bind(&pl, a, 4 << 20, &unbound[0]);
        if (st == GPUARENA_SUCCESS)
            st = ga_topo_bind(&pl, a + (4 << 20), 2 << 20, &unbound[1]);
        if (st != GPUARENA_SUCCESS || unbound[0] || unbound[1]) {
            result(name, false, "ga_topo_bind: %s",
                   st != GPUARENA_SUCCESS ? gpuarena_last_error() : "left unbound");
            munmap(a, size);
            continue;
        }
        /* By several threads, as the pinned provider pre-faults. */
        ga_topo_prefault(&pl, a, size, page, 4);
        check_block(g[d].busid, 0, a, 4 << 20, &e, &tl);
        check_block(g[d].busid, 1, a + (4 << 20), 2 << 20, &e, &tl);
        munmap(a, size);
        char sum[256];
        summary(sum, sizeof sum, &tl);
        if (tl.wrong)
            result(name, false, "%s (%zu of %zu pages wrong; %s)", detail, tl.wrong, tl.pages, sum);
        else
            result(name, true, "%s near node %d (cpus %s): %s", g[d].busid, want, g[d].cpus, sum);
    }
    free(g);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--guest") != 0) {
        fprintf(stderr, "%s: runs inside a QEMU guest started by numa-guest.sh\n", argv[0]);
        return 77;
    }
    const char *p = getenv("GA_NUMA_PLANT");
    plant = p ? atoi(p) : 0;
    page = (size_t)sysconf(_SC_PAGESIZE);
    if (ga_topo_machine(&machine) != GPUARENA_SUCCESS) {
        printf("RESULT setup FAIL hwloc: %s\n", gpuarena_last_error());
        return 1;
    }
    all_nodes = ga_topo_all_nodes(machine);
    for (int i = 0; i < 64; i++)
        if (all_nodes >> i & 1)
            node_ids[nnodes++] = i;
    char list[128];
    printf("RESULT-NOTE guest: %d NUMA nodes (%s), %ld CPUs, plant %d, topology of decisions %s\n",
           nnodes, ga_topo_nodes_string(all_nodes, list, sizeof list),
           sysconf(_SC_NPROCESSORS_ONLN), plant,
           getenv("GPUARENA_TOPOLOGY") ? getenv("GPUARENA_TOPOLOGY") : "the guest's");
    if (nnodes < 2) {
        puts("RESULT setup FAIL the guest has fewer than 2 NUMA nodes");
        return 1;
    }
    test_nodes();
    test_list();
    test_interleave();
    test_local();
    test_local_prefault();
    test_local_prefault_policy();
    test_refused();
    test_nearest_host();
    const char *xml = getenv("GPUARENA_TOPOLOGY");
    if (xml && *xml)
        test_nearest_gpus(xml);
    printf("RESULT-SUMMARY passed=%d failed=%d\n", passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}
