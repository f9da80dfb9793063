/*
 * deferred.c - frees that a framework's free hook could not make yet.
 *
 * gpuarena_free refuses a free, and changes nothing, when it would have
 * to reach the driver with a stream that is being captured into a CUDA
 * graph: an event for the block's recorded uses (record_stream), a sweep
 * that its stream's pool owes another stream, or, on the legacy stream,
 * any of these while another thread captures on a blocking stream
 * (gpuarena(7), "Device memory").  A C caller sees the status and frees again
 * after the capture.  PyTorch's and CuPy's free hooks return nothing, and
 * the framework believes the memory freed: the block would stay live, out
 * of every pool, for the rest of the process.
 *
 * Such a free can be made once the capture has ended, as PyTorch's own
 * allocator defers the events of the frees made during a capture until
 * no capture is under way.  So the hooks keep it here, and the next call
 * of any hook, of gpuarena_trim or of gpuarena_destroy makes it (the
 * oldest first, until one is still refused: its capture goes on, and the
 * others are left for the next call rather than each costing a query).
 * Until then its block counts as live in the arena's statistics, which
 * is what it is.
 *
 * A deferred free must not be lost for want of host memory: its block
 * would stay live for good, and a graph pool holding it would never be
 * given back.  So when its record cannot be allocated it takes one of a
 * static reserve (GA_DEFERRED_RESERVE records, claimed and given back
 * with an atomic flag each); only a free met with no host memory while
 * the whole reserve waits is lost, and said so.
 *
 * The records are a stack, and while it is empty a hook pays one load
 * (deferred.h).  A hook keeps a free under a mutex, having looked for one
 * of the same block kept already (a double free); a retry takes the
 * whole stack under that mutex, makes what it can and pushes back the rest;
 * gpuarena_destroy takes that mutex even when the stack is empty
 * (ga_deferred_settle), so that it never checks an arena's live blocks
 * while another thread's retry is making a free into that arena: it
 * would find the block live and refuse, or destroy the arena under the
 * free.  fork.c takes the mutex around fork(), before every lock that a
 * free may take (after the graph pools', which a pool's free holds when
 * it keeps one).  Pushes are compare-and-swaps still, as the hooks read
 * the head with no lock.
 */
#include "deferred.h"

#include "arena.h"
#include "errors.h"
#include "graphpool.h"
#include "hostmem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct deferred {
    struct deferred *next;
    gpuarena_t *arena;
    void *ptr;
    gpuarena_stream_t stream;
} deferred_t;

_Atomic(void *) ga_deferred_head;
static pthread_mutex_t retry_lock = PTHREAD_MUTEX_INITIALIZER;
/* Records kept and not yet made: nonzero also while a retry holds them
 * all off the stack (the head then reads NULL). */
static atomic_uint kept_count;

/* The records for when malloc has none: a capture defers the frees of
 * its recorded blocks only, a few at a time in PyTorch's programs. */
#define GA_DEFERRED_RESERVE 64
static deferred_t reserve[GA_DEFERRED_RESERVE];
static atomic_bool reserved[GA_DEFERRED_RESERVE];

static deferred_t *record_new(void)
{
    deferred_t *d = ga_malloc(sizeof *d);
    for (unsigned i = 0; !d && i < GA_DEFERRED_RESERVE; i++)
        if (!atomic_exchange_explicit(&reserved[i], true, memory_order_acquire))
            d = &reserve[i];
    return d;
}

static void record_free(deferred_t *d)
{
    if (d >= reserve && d < reserve + GA_DEFERRED_RESERVE)
        atomic_store_explicit(&reserved[d - reserve], false, memory_order_release);
    else
        free(d);
}

static void push(deferred_t *d)
{
    void *head = atomic_load_explicit(&ga_deferred_head, memory_order_relaxed);
    do
        d->next = head;
    while (!atomic_compare_exchange_weak_explicit(&ga_deferred_head, &head, d, memory_order_release,
                                                  memory_order_relaxed));
}

/* Whether a free of PTR to A is kept already.  The mutex held: a retry
 * holds the records it took. */
static bool kept(const gpuarena_t *a, const void *ptr)
{
    for (deferred_t *d = atomic_load_explicit(&ga_deferred_head, memory_order_acquire); d;
         d = d->next)
        if (d->arena == a && d->ptr == ptr)
            return true;
    return false;
}

static void already_freed(const char *fn, const void *ptr)
{
    ga_error(GPUARENA_ERR_DOUBLE_FREE,
             "%s: %p was already freed (that free waits for the capture to end)", fn, ptr);
}

bool ga_deferred_double_free(const gpuarena_t *a, const void *ptr, const char *fn)
{
    /* The count, not the head: a retry takes the whole stack, and a
     * second free made meanwhile went to the arena. */
    if (!atomic_load_explicit(&kept_count, memory_order_acquire))
        return false;
    pthread_mutex_lock(&retry_lock);
    bool k = kept(a, ptr);
    pthread_mutex_unlock(&retry_lock);
    if (k)
        already_freed(fn, ptr);
    return k;
}

void ga_deferred_keep(gpuarena_t *a, void *ptr, gpuarena_stream_t stream, const char *fn)
{
    /* The refusal's reason, copied: ga_error writes the buffer it is in. */
    char why[GA_ERROR_MAX];
    snprintf(why, sizeof why, "%s", gpuarena_last_error());
    /* A block whose free is kept is still live to its arena, which
     * refuses a second free for the capture as it did the first: a
     * double free, said as such and not kept.  Kept twice, the second
     * record freed the block's next owner once the first was made. */
    pthread_mutex_lock(&retry_lock);
    if (kept(a, ptr)) {
        pthread_mutex_unlock(&retry_lock);
        already_freed(fn, ptr);
        return;
    }
    deferred_t *d = record_new();
    if (!d) {
        pthread_mutex_unlock(&retry_lock);
        ga_error(GPUARENA_ERR_HOST_MEMORY,
                 "%s: the free of %p was refused (%s) and neither host memory nor one of the %d "
                 "reserved records was left to keep it for later: the block stays live",
                 fn, ptr, why, GA_DEFERRED_RESERVE);
        return;
    }
    d->arena = a;
    d->ptr = ptr;
    d->stream = stream;
    atomic_fetch_add_explicit(&a->deferred, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&kept_count, 1, memory_order_release);
    push(d);
    pthread_mutex_unlock(&retry_lock);
    ga_error(GPUARENA_ERR_STREAM_CAPTURE,
             "%s: the free of %p waits for the capture to end (%s); the next call of a hook, "
             "gpuarena_trim or gpuarena_destroy makes it",
             fn, ptr, why);
}

/* The retry, the mutex held; whether it made a free.  The frees it makes
 * or finds refused again are no failure of the call that runs it (a hook,
 * gpuarena_trim, gpuarena_destroy): the thread's message is left as it
 * was (gpuarena_last_error(3)). */
static bool retry_locked(void)
{
    ga_error_saved_t saved;
    ga_error_save(&saved);
    deferred_t *d = atomic_exchange_explicit(&ga_deferred_head, NULL, memory_order_acquire);
    /* Oldest first: the stack holds the newest on top. */
    deferred_t *old = NULL;
    while (d) {
        deferred_t *next = d->next;
        d->next = old;
        old = d;
        d = next;
    }
    bool stop = false, made = false;
    for (d = old; d; d = old) {
        old = d->next;
        /* An arena of the parent's in a child made by fork(2), which
         * refuses every free: kept as the parent left it (gpuarena(7),
         * Fork: the statistics read what the parent had).  It was taken
         * as made, the block still live and no longer counted. */
        if (!stop && !d->arena->forked) {
            gpuarena_status_t st = gpuarena_free(d->arena, d->ptr, d->stream);
            if (st == GPUARENA_ERR_INVALID_STREAM &&
                ga_bm_uses_unknown(d->arena->bm, d->ptr, NULL) == GPUARENA_SUCCESS)
                /* Its stream can no longer be named (destroyed since, its
                 * handle now another context's): the block's uses are
                 * unknown, and freed with no stream it waits in limbo
                 * for a wait for the whole device (limbo.c), safe for
                 * every stream.  Dropped as made, it stayed live for
                 * good. */
                st = gpuarena_free(d->arena, d->ptr, GPUARENA_STREAM_HOST);
            stop = st == GPUARENA_ERR_STREAM_CAPTURE;
            if (!stop) {
                /* Made, or refused for another reason that a later try
                 * would meet again. */
                atomic_fetch_sub_explicit(&d->arena->deferred, 1, memory_order_relaxed);
                atomic_fetch_sub_explicit(&kept_count, 1, memory_order_release);
                record_free(d);
                made = true;
                continue;
            }
        }
        push(d);
    }
    ga_error_restore(&saved);
    return made;
}

/* The retry under the mutex, which it waits for when another thread's
 * retry holds it; whether it made a free. */
static bool retry(void)
{
    pthread_mutex_lock(&retry_lock);
    bool made = retry_locked();
    pthread_mutex_unlock(&retry_lock);
    return made;
}

/* The retry; where it made a free, the graph pools are marked for the
 * next collect (ga_graph_pool_collect): the free may have been the last
 * live block of a released pool.  Only marked: the retry knows no stream
 * (settled with none, such a pool was destroyed, a wait for the whole
 * device, during the capture of the hook's own stream), and
 * gpuarena_destroy's runs where graphpool.c may hold its lock. */
bool ga_deferred_retry_slow(void)
{
    bool made = retry();
    if (made && atomic_load_explicit(&ga_graph_pools, memory_order_relaxed))
        atomic_fetch_add_explicit(&ga_graph_pools_gone, 1, memory_order_release);
    return made;
}

void ga_deferred_settle(void)
{
    (void)ga_deferred_retry_slow(); /* the mutex taken even when nothing is kept */
}

void ga_deferred_fork_lock(void)
{
    pthread_mutex_lock(&retry_lock);
}

void ga_deferred_fork_unlock(void)
{
    pthread_mutex_unlock(&retry_lock);
}
