/*
 * fork.c - arenas across fork(2).
 *
 * fork() copies one thread, the caller, into the child; the others are
 * gone there, and whatever they held at that moment stays held for ever:
 * a lock, a thread cache an owner was inside, a manager's lists half
 * changed.  A child that then allocated, trimmed, read statistics or just
 * exited with GPUARENA_STATS set (the report at exit reads every arena)
 * would hang.  So, as C libraries' own allocators do, gpuarena takes
 * every one of its locks before the fork (pthread_atfork's prepare
 * handler), in the order the rest of the library takes them, and lets
 * them go in both processes after it:
 *
 *   the pools of PyTorch's CUDA graphs (graphpool.c, which makes,
 *   frees into and destroys arenas while it holds it), the retry of
 *   the frees that framework hooks deferred (deferred.c, which frees
 *   into arenas while it holds it), the registry of
 *   default arenas (gpuarena.c), the configuration
 *   (config/config.c), the list of arenas (arena.c), the registry of
 *   thread caches, then each arena's block manager: its lock, its word
 *   taken by the forking thread whichever thread it was biased to
 *   (ga_lock_plain: entered through a bias being broken, it was left
 *   held for the breaker, who stays behind), and each of its thread caches,
 *   with every owner out of its fast path (block/tcache.c); last
 *   the leaves: the block room's list of lock cells (block/lock.c), the
 *   sim arenas' address space (providers/sim.c), the
 *   loading of the CUDA driver (cuda/cuda.c), which a fork must not
 *   find half done, and the trace recorder (trace/recorder.c), which
 *   the graph pools and the deferred frees reach through gpuarena_free.
 *
 * In the child, the thread caches of the threads that did not come along
 * give their blocks back to their arenas, which then serve the child as
 * they served the parent: host and sim arenas carry over whole.  Arenas
 * of GPU memory do not: CUDA cannot be used in a child forked after it
 * was initialized, and the child's copy of pinned memory is not pinned.
 * Every call on such an arena in the child is refused
 * (GPUARENA_ERR_NOT_SUPPORTED, ga_arena_forked), as is making a new one
 * once the parent had loaded the driver (lib/cuda/cuda.c), and the
 * forking thread's caches of such arenas stay as they are when it ends
 * there (block/tcache.c); the block
 * manager's statistics still read what the parent had (the per-kind
 * ones read 0: gpuarena_stats skips the provider's hook there).  The
 * child records no trace, prints no GPUARENA_STATS report, and its
 * SIGUSR1 no longer reaches the parent's report thread (report.c).
 *
 * The handlers cost nothing between forks: a fork pays for them, in
 * proportion to the number of arenas and thread caches.
 */
#include "config.h"

#include "fork.h"

#include "arena.h"
#include "block/lock.h"
#include "config/config.h"
#include "cuda/cuda.h"
#include "deferred.h"
#include "graphpool.h"
#include "providers/providers.h"
#include "report.h"
#include "totals.h"
#include "trace/trace.h"

#include <pthread.h>

static void prepare(void)
{
    ga_graph_pool_fork_lock();
    ga_deferred_fork_lock();
    ga_defaults_fork_lock();
    ga_config_fork_lock();
    ga_arenas_fork_prepare();
    ga_cells_fork_lock();
    ga_sim_fork_lock();
    ga_cuda_fork_prepare();
    ga_trace_fork_prepare();
}

static void parent(void)
{
    ga_trace_fork_parent();
    ga_cuda_fork_parent();
    ga_sim_fork_unlock();
    ga_cells_fork_parent();
    ga_arenas_fork_parent();
    ga_config_fork_unlock();
    ga_defaults_fork_unlock();
    ga_deferred_fork_unlock();
    ga_graph_pool_fork_unlock();
}

static void child(void)
{
    ga_cuda_fork_child();
    ga_sim_fork_unlock();
    ga_cells_fork_child();
    ga_arenas_fork_child();
    ga_totals_fork_child();
    ga_report_fork_child();
    ga_trace_fork_child();
    ga_config_fork_unlock();
    ga_defaults_fork_unlock();
    ga_deferred_fork_unlock();
    ga_graph_pool_fork_unlock();
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void install(void)
{
    /* Registered from this library (its handlers go if it is unloaded);
     * a failure (no memory) leaves fork as unsafe as it was, and is not
     * worth failing the arena for. */
    (void)pthread_atfork(prepare, parent, child);
}

void ga_fork_init(void)
{
    pthread_once(&once, install);
}

/* At load, not only at the first arena: a child forked before the
 * program made one is a child all the same, which records no trace and
 * prints no report (gpuarena-trace(5)), and only the handlers tell it so;
 * they cost a process that never forks nothing. */
__attribute__((constructor)) static void install_at_load(void)
{
    ga_fork_init();
}
