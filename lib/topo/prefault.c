/*
 * prefault.c - touching every page of a new segment once, with several
 * threads for large ones, so that the kernel allocates the pages where
 * the placement says before the driver pins them (the pinned provider:
 * registering touched pages costs a tenth of registering untouched ones).
 *
 * A bound placement (nodes, interleave) was set on the range by
 * ga_topo_bind before: any thread may touch it.  A local one was not: the
 * pages go where the thread that touches them first runs, and the helper
 * threads may run on other nodes than the one that mapped the segment,
 * whose node "local" promises.  So before helpers touch a local range it
 * is bound, as a preference, to the node of the CPU the calling thread is
 * on: the kernel's own local policy, made explicit (a full node spills to
 * others, as a first touch there would).  Where that node cannot be
 * found or bound, the calling thread touches every page itself.
 *
 * That is only where the calling thread's own memory policy is the
 * kernel's default (first touch).  A program run under numactl
 * --membind or --interleave, or that set its thread's policy, places its
 * first touches by that policy, and a policy on the range would override
 * it; helper threads inherit the thread's policy (Linux copies it to a
 * new thread), so they touch as the calling thread would, unbound.  Where
 * the policy cannot be read, the calling thread touches alone.
 */
#include "config.h"

#include "topo/topo_internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct touch_job {
    volatile char *start;
    size_t size, page;
} touch_job_t;

static void *touch(void *arg)
{
    touch_job_t *j = arg;
    for (size_t off = 0; off < j->size; off += j->page)
        j->start[off] = 0;
    return NULL;
}

/* Bind [ADDR, ADDR+SIZE) as a preference to the NUMA node of the CPU
 * the calling thread runs on (T: the machine's topology); whether the
 * pages will go there whoever touches them (also true on a machine of one
 * node: no choice to make).
 *
 * The node is the kernel's own, the one its first touch takes
 * (getcpu(2)), not the PU's nodeset in hwloc: that also holds the
 * memory-only nodes near the CPU (high-bandwidth memory in flat mode, CXL
 * memory that the firmware's HMAT puts near it), and a CPU near two nodes
 * had no one node, so its segments were touched by one thread. */
static bool bind_here(hwloc_topology_t t, void *addr, size_t size)
{
    if (hwloc_bitmap_weight(hwloc_topology_get_topology_nodeset(t)) <= 1)
        return true;
    unsigned cpu, node;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) != 0)
        return false;
    /* A node without memory: the kernel takes a fallback node, which a
     * binding here would not be. */
    hwloc_obj_t n = hwloc_get_numanode_obj_by_os_index(t, node);
    if (!n || !n->nodeset || !n->attr->numanode.local_memory)
        return false;
    return hwloc_set_area_membind(t, addr, size, n->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET) == 0;
}

/* The calling thread's memory policy, as far as a pre-fault cares. */
typedef enum { POLICY_UNKNOWN, POLICY_FIRST_TOUCH, POLICY_OWN } thread_policy_t;

static thread_policy_t thread_policy(hwloc_topology_t t)
{
    hwloc_nodeset_t set = hwloc_bitmap_alloc();
    if (!set)
        return POLICY_UNKNOWN;
    hwloc_membind_policy_t policy;
    int rc = hwloc_get_membind(t, set, &policy, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
    hwloc_bitmap_free(set);
    if (rc != 0)
        return POLICY_UNKNOWN;
    return policy == HWLOC_MEMBIND_FIRSTTOUCH || policy == HWLOC_MEMBIND_DEFAULT
               ? POLICY_FIRST_TOUCH
               : POLICY_OWN;
}

/* How many threads may touch a range of placement PL (THREADS asked):
 * see the top of this file for a local one. */
static unsigned touchers(const ga_placement_t *pl, void *addr, size_t size, unsigned threads)
{
    unsigned n = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    if (n == 1 || pl->policy != GA_NUMA_LOCAL)
        return n;
    hwloc_topology_t t = NULL;
    if (ga_topo_machine(&t) != GPUARENA_SUCCESS)
        return 1;
    switch (thread_policy(t)) {
    case POLICY_FIRST_TOUCH:
        return bind_here(t, addr, size) ? n : 1;
    case POLICY_OWN:
        return n; /* the helpers inherit it */
    default:
        return 1;
    }
}

void ga_topo_prefault(const ga_placement_t *pl, void *addr, size_t size, size_t page,
                      unsigned threads)
{
    unsigned n = touchers(pl, addr, size, threads);
    size_t pages = size / page, per = (pages + n - 1) / n;
    touch_job_t jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS];
    char *a = addr;
    for (unsigned i = 0; i < n; i++) {
        size_t first = (size_t)i * per, last = first + per > pages ? pages : first + per;
        jobs[i].start = a + first * page;
        jobs[i].size = first < last ? (last - first) * page : 0;
        jobs[i].page = page;
        /* The calling thread takes the first piece; a thread that cannot
         * be started leaves its piece to the caller too. */
        started[i] = i > 0 && jobs[i].size && pthread_create(&tid[i], NULL, touch, &jobs[i]) == 0;
    }
    touch(&jobs[0]);
    for (unsigned i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            touch(&jobs[i]);
    }
}
