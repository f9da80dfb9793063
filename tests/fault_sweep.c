/*
 * fault_sweep.c - every provider call of a real workload made to fail, one
 * at a time (issue 10).  Needs ./configure --enable-fault-injection; exits
 * 77 (skipped) in a normal build.
 *
 * The workload is the first GA_SWEEP_EVENTS events (default 1300: both
 * streams and the record_stream uses) of tests/data/multistream_resnet18
 * .trace, replayed through sim and host arenas in several settings, then
 * every block freed and trim(0).  A clean run counts the provider calls C;
 * then for every k in 1..C (every GA_SWEEP_STRIDE-th where set) a fresh
 * arena replays it with call k failing, and the sweep requires that
 *
 *   - an API call fails only when a fault was injected during it, with the
 *     status of the failed call (OUT_OF_MEMORY or DRIVER) and a message;
 *     a successful allocation never returns NULL;
 *   - gpuarena_check passes after the faulty event, every 100 events and
 *     at the end (it compares the provider's live mappings with the
 *     segments), and the statistics agree with what the driver holds
 *     (live blocks, requested bytes, allocations less frees);
 *   - every later request succeeds: the arena keeps serving (the
 *     replay goes on to the end);
 *   - after every block is freed and trim(0) (twice where the fault hit
 *     the first trim), nothing is reserved and the provider holds no
 *     mapping; at destroy no mapping, reservation or event is left.
 *
 * Then GA_SWEEP_RANDOM runs (default 20) per setting fail calls at random
 * (GPUARENA_FAULT_RATE 2%, seeds 1..N), several faults a run, with the
 * same checks.  GPUARENA_FAULT_PLANT=unmap-leak plants a leak in the
 * block manager; the sweep must then fail.
 */
#include "config.h"

#include "gpuarena.h"

#include <stdio.h>

#ifndef GA_FAULT_INJECTION

int main(void)
{
    puts("fault_sweep: built without --enable-fault-injection: skipped");
    return 77;
}

#else

#include "arena.h"
#include "providers/faulty.h"
#include "trace/trace.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct setting {
    gpuarena_kind_t kind;
    const char *options;
    unsigned shift; /* sizes divided by 2^shift (zero-filled host memory) */
} setting_t;

static const setting_t settings[] = {
    {GPUARENA_SIM, "expandable=false", 0},
    {GPUARENA_SIM, "expandable=true", 0},
    {GPUARENA_SIM, "expandable=false,cross_stream=wait,max_cached=32M,thread_cache=false", 0},
    {GPUARENA_HOST,
     "expandable=false,zero=true,small_max=64K,thread_cache_max=32K,small_segment=64K,large_"
     "segment=1M",
     8},
    {GPUARENA_HOST, "expandable=true,max_cached=16M", 0},
};

/* What the driver holds, to compare with the statistics. */
typedef struct model {
    void **ptrs;
    uint64_t *size;
    uint32_t *stream;
    uint64_t live, requested;
} model_t;

typedef struct tally {
    uint64_t points, reported, absorbed, oom, driver, random_faults;
    uint64_t per_class[GA_FAULT_CLASSES];
} tally_t;

static const ga_trace_arena_t *ta;
static size_t nevents;
static const setting_t *cur;
static uint64_t cur_k;
static bool random_mode;
static uint64_t run_injected; /* faults injected in the last run */

static const char *kind_name(gpuarena_kind_t k)
{
    return k == GPUARENA_SIM ? "sim" : k == GPUARENA_HOST ? "host" : "?";
}

static void problem(size_t i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Say what went wrong, where, under which fault; the sweep fails. */
static void problem(size_t i, const char *fmt, ...)
{
    ga_fault_counts_t fc;
    ga_fault_counts(&fc);
    fprintf(stderr, "fault_sweep: FAIL: %s arena, %s: ", kind_name(cur->kind), cur->options);
    if (random_mode)
        fprintf(stderr, "random faults, seed %" PRIu64, cur_k);
    else
        fprintf(stderr, "fault at provider call %" PRIu64, cur_k);
    if (fc.last_class >= 0)
        fprintf(stderr, " (last injected: %s, call %" PRIu64 ")",
                ga_fault_class_name(fc.last_class), fc.last_injected);
    if (i < nevents)
        fprintf(stderr, ", event %zu (trace line %" PRIu32 ")", i, ta->events[i].line);
    else
        fprintf(stderr, ", %s", i == nevents ? "freeing everything" : "at the end");
    fputs(": ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static inline gpuarena_stream_t stream_of(uint32_t n)
{
    return (gpuarena_stream_t)(uintptr_t)n;
}

static uint64_t injected(void)
{
    ga_fault_counts_t fc;
    ga_fault_counts(&fc);
    return fc.injected;
}

/* The status of a failed call: one a fault can cause, with a message. */
static bool status_ok(size_t i, const char *what, gpuarena_status_t st, bool faulted, tally_t *t)
{
    if (!faulted) {
        problem(i, "%s failed with no fault injected: %s: %s", what, gpuarena_strerror(st),
                gpuarena_last_error());
        return false;
    }
    if (st != GPUARENA_ERR_OUT_OF_MEMORY && st != GPUARENA_ERR_DRIVER) {
        problem(i, "%s failed with status %d (%s), not OUT_OF_MEMORY or DRIVER", what, (int)st,
                gpuarena_strerror(st));
        return false;
    }
    const char *msg = gpuarena_last_error();
    if (!msg || !*msg) {
        problem(i, "%s failed with no message", what);
        return false;
    }
    t->reported++;
    if (st == GPUARENA_ERR_OUT_OF_MEMORY)
        t->oom++;
    else
        t->driver++;
    return true;
}

/* The invariant checker and the statistics against the model. */
static bool consistent(gpuarena_t *a, const model_t *m, size_t i)
{
    gpuarena_status_t st = gpuarena_check(a);
    if (st != GPUARENA_SUCCESS) {
        problem(i, "gpuarena_check: %s: %s", gpuarena_strerror(st), gpuarena_last_error());
        return false;
    }
    gpuarena_stats_t s;
    if (gpuarena_stats(a, &s) != GPUARENA_SUCCESS) {
        problem(i, "gpuarena_stats failed");
        return false;
    }
    if (s.live_blocks != m->live || s.allocs - s.frees != m->live || s.requested != m->requested ||
        s.in_use < s.requested || s.reserved < s.in_use || s.cached != s.reserved - s.in_use ||
        s.requested_peak < s.requested || s.in_use_peak < s.in_use ||
        s.reserved_peak < s.reserved) {
        problem(i,
                "statistics disagree: live %" PRIu64 " (held %" PRIu64 "), allocs-frees %" PRIu64
                ", requested %" PRIu64 " (held %" PRIu64 "), in use %" PRIu64 ", reserved %" PRIu64
                ", cached %" PRIu64,
                s.live_blocks, m->live, s.allocs - s.frees, s.requested, m->requested, s.in_use,
                s.reserved, s.cached);
        return false;
    }
    return true;
}

/* Free what is held; a free that fails (a fault) is tried again. */
static bool free_all(gpuarena_t *a, model_t *m, tally_t *t)
{
    for (uint32_t id = 0; id < ta->nids; id++) {
        for (int tries = 0; m->ptrs[id] && tries < 8; tries++) {
            uint64_t before = injected();
            gpuarena_status_t st = gpuarena_free(a, m->ptrs[id], stream_of(m->stream[id]));
            if (st == GPUARENA_SUCCESS) {
                m->ptrs[id] = NULL;
                m->live--;
                m->requested -= m->size[id];
            } else if (!status_ok(nevents, "free", st, injected() != before, t)) {
                return false;
            }
        }
        if (m->ptrs[id]) {
            problem(nevents, "a block could not be freed in 8 tries");
            return false;
        }
    }
    return true;
}

/* One replay with the plan already set; *HIT is set when a fault was
 * injected.  False on a problem. */
static bool replay(gpuarena_t *a, model_t *m, tally_t *t, bool *hit)
{
    for (size_t i = 0; i < nevents; i++) {
        const ga_trace_event_t *e = &ta->events[i];
        uint64_t before = injected();
        gpuarena_status_t st = GPUARENA_SUCCESS;
        const char *what = "alloc";
        switch (e->op) {
        case GA_TRACE_ALLOC: {
            void *p = (void *)(uintptr_t)0xdeadbeef;
            uint64_t size = cur->shift && e->size ? (e->size >> cur->shift) + 1 : e->size;
            st = gpuarena_alloc(a, (size_t)size, stream_of(e->stream), &p);
            if (st == GPUARENA_SUCCESS && size) {
                if (!p || p == (void *)(uintptr_t)0xdeadbeef) {
                    problem(i, "alloc of %" PRIu64 " bytes succeeded with no pointer", size);
                    return false;
                }
                m->ptrs[e->id] = p;
                m->size[e->id] = size;
                m->stream[e->id] = e->stream;
                m->live++;
                m->requested += size;
            }
            break;
        }
        case GA_TRACE_FREE:
            what = "free";
            if (m->ptrs[e->id]) {
                st = gpuarena_free(a, m->ptrs[e->id], stream_of(e->stream));
                if (st == GPUARENA_SUCCESS) {
                    m->ptrs[e->id] = NULL;
                    m->live--;
                    m->requested -= m->size[e->id];
                }
            }
            break;
        case GA_TRACE_RECORD:
            what = "record_stream";
            if (m->ptrs[e->id])
                st = gpuarena_record_stream(a, m->ptrs[e->id], stream_of(e->stream));
            break;
        }
        bool faulted = injected() != before;
        if (st != GPUARENA_SUCCESS && !status_ok(i, what, st, faulted, t))
            return false;
        if (faulted)
            *hit = true;
        if ((faulted || i % 100 == 99) && !consistent(a, m, i))
            return false;
    }
    return true;
}

/* Free everything, trim(0) (again where a fault hit the first), check
 * that nothing is held, destroy and check for leaks. */
static bool finish(gpuarena_t *a, model_t *m, tally_t *t)
{
    if (!free_all(a, m, t) || !consistent(a, m, nevents))
        return false;
    gpuarena_stats_t s;
    for (int pass = 0; pass < 2; pass++) {
        (void)gpuarena_trim(a, 0);
        if (!consistent(a, m, nevents + 1) || gpuarena_stats(a, &s) != GPUARENA_SUCCESS)
            return false;
        if (s.reserved == 0 && a->prov->live_maps == 0)
            break;
    }
    if (s.reserved || a->prov->live_maps || s.live_blocks || s.in_use || s.pending_frees) {
        problem(nevents + 1,
                "after freeing everything and trim(0) twice: %" PRIu64 " bytes reserved, %" PRIu64
                " provider mappings, %" PRIu64 " live blocks, %" PRIu64 " pending frees",
                s.reserved, a->prov->live_maps, s.live_blocks, s.pending_frees);
        return false;
    }
    /* Destroy with faults off: a failed release there is the provider's
     * to report, not the arena's. */
    ga_fault_counts_t fc;
    ga_fault_counts(&fc);
    run_injected = fc.injected;
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        t->per_class[c] += fc.per_class[c];
    ga_fault_plan(0, 1, 0, 1, GA_FAULT_ALL);
    gpuarena_status_t st = gpuarena_destroy(a);
    if (st != GPUARENA_SUCCESS) {
        problem(nevents + 1, "gpuarena_destroy: %s: %s", gpuarena_strerror(st),
                gpuarena_last_error());
        return false;
    }
    ga_fault_counts(&fc);
    if (fc.leaked_maps || fc.leaked_reserves || fc.leaked_events) {
        problem(nevents + 1,
                "the provider still held %" PRIu64 " mappings, %" PRIu64
                " reservations and %" PRIu64 " events when the arena was destroyed",
                fc.leaked_maps, fc.leaked_reserves, fc.leaked_events);
        return false;
    }
    return true;
}

/* A fresh arena and model, a replay under the plan (AT, RATE, SEED), the
 * end checks.  *CALLS: the calls counted up to the destroy. */
static bool one_run(uint64_t at, uint64_t count, double rate, uint64_t seed, unsigned mask,
                    model_t *m, tally_t *t, uint64_t *calls)
{
    gpuarena_t *a;
    ga_fault_plan(0, 1, 0, 1, GA_FAULT_ALL);
    gpuarena_status_t st = gpuarena_create(cur->kind, 0, cur->options, &a);
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "fault_sweep: cannot create a %s arena (%s): %s: %s\n",
                kind_name(cur->kind), cur->options, gpuarena_strerror(st), gpuarena_last_error());
        return false;
    }
    memset(m->ptrs, 0, ta->nids * sizeof *m->ptrs);
    m->live = m->requested = 0;
    ga_fault_plan(at, count, rate, seed, mask);
    bool hit = false;
    bool ok = replay(a, m, t, &hit);
    if (ok && rate > 0) {
        t->random_faults += injected();
        ga_fault_plan(0, 1, 0, 1, GA_FAULT_ALL); /* the end runs clean */
    }
    if (ok) {
        ga_fault_counts_t fc;
        ga_fault_counts(&fc);
        *calls = fc.calls;
        ok = finish(a, m, t);
    }
    if (!ok)
        return false;
    if (at && run_injected)
        t->points++;
    return true;
}

/* Fail, one at a time, every STRIDE-th call of the classes in MASK (and
 * the COUNT-1 calls of them after it); the clean run counted PER[] calls
 * of each class. */
static bool sweep_mask(unsigned mask, uint64_t count, const uint64_t *per, uint64_t stride,
                       model_t *m, tally_t *t)
{
    uint64_t n = 0, dummy;
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        if (mask >> c & 1)
            n += per[c];
    for (uint64_t k = 1; k <= n; k += stride) {
        cur_k = k;
        uint64_t rep = t->reported;
        if (!one_run(k, count, 0, 1, mask, m, t, &dummy))
            return false;
        if (t->reported == rep)
            t->absorbed++;
    }
    return true;
}

static bool sweep(const setting_t *s, model_t *m, uint64_t stride, uint64_t sstride,
                  unsigned nrandom, tally_t *all)
{
    cur = s;
    random_mode = false;
    cur_k = 0;
    tally_t t = {0};
    uint64_t calls = 0;
    if (!one_run(0, 1, 0, 1, GA_FAULT_ALL, m, &t, &calls))
        return false;
    uint64_t per[GA_FAULT_CLASSES]; /* calls of the clean run, per class */
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        per[c] = t.per_class[c];
    memset(&t, 0, sizeof t);
    /* Every call but the stream lookups (one per API call, and all alike)
     * in turn, then every SSTRIDE-th stream lookup; then every map, reserve
     * and commit with the next one too, so that the out-of-memory retry
     * fails as well and the allocation reports it. */
    const unsigned stream = 1u << GA_FAULT_STREAM;
    const unsigned grow = 1u << GA_FAULT_MAP | 1u << GA_FAULT_RESERVE | 1u << GA_FAULT_COMMIT;
    bool ok = sweep_mask(GA_FAULT_ALL & ~stream, 1, per, stride, m, &t) &&
              sweep_mask(stream, 1, per, sstride, m, &t);
    tally_t d = {0};
    ok = ok && sweep_mask(grow, 2, per, stride, m, &d);
    tally_t r = {0};
    random_mode = true;
    for (unsigned seed = 1; seed <= nrandom && ok; seed++) {
        cur_k = seed;
        uint64_t dummy;
        ok = one_run(0, 1, 0.02, seed, GA_FAULT_ALL, m, &r, &dummy);
    }
    printf("%-4s %s\n     %" PRIu64 " calls; %" PRIu64 " failed one at a time: %" PRIu64
           " reported (%" PRIu64 " OUT_OF_MEMORY, %" PRIu64 " DRIVER), %" PRIu64
           " absorbed; %" PRIu64 " double faults of map/reserve/commit: %" PRIu64
           " OUT_OF_MEMORY reported; %u random runs: %" PRIu64 " faults, %" PRIu64 " reported%s\n",
           kind_name(s->kind), s->options, calls, t.points, t.reported, t.oom, t.driver, t.absorbed,
           d.points, d.oom, nrandom, r.random_faults, r.reported, ok ? "" : "  FAILED");
    printf("     calls:");
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        if (per[c])
            printf(" %s %" PRIu64, ga_fault_class_name(c), per[c]);
    printf("\n");
    all->points += t.points + d.points;
    all->reported += t.reported + d.reported;
    all->absorbed += t.absorbed + d.absorbed;
    all->random_faults += r.random_faults;
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        all->per_class[c] += per[c] ? 1 : 0;
    return ok;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *path = argc > 1 ? argv[1] : GA_TEST_DATA "/multistream_resnet18.trace";
    ga_trace_t *tr;
    gpuarena_status_t st = ga_trace_load(path, &tr);
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "fault_sweep: %s\n", gpuarena_last_error());
        return 99;
    }
    ta = &tr->arenas[0];
    nevents = env_u64("GA_SWEEP_EVENTS", 1300);
    if (nevents > ta->nevents)
        nevents = ta->nevents;
    uint64_t stride = env_u64("GA_SWEEP_STRIDE", 1);
    uint64_t sstride = env_u64("GA_SWEEP_STREAM_STRIDE", 20);
    unsigned nrandom = (unsigned)env_u64("GA_SWEEP_RANDOM", 20);
    if (!stride)
        stride = 1;
    if (!sstride)
        sstride = 1;
    model_t m = {
        .ptrs = calloc(ta->nids + 1, sizeof *m.ptrs),
        .size = calloc(ta->nids + 1, sizeof *m.size),
        .stream = calloc(ta->nids + 1, sizeof *m.stream),
    };
    if (!m.ptrs || !m.size || !m.stream)
        return 99;
    printf("fault_sweep: %s, first %zu events; failed in turn: every %" PRIu64
           "%s provider call, every %" PRIu64 "%s stream lookup\n",
           path, nevents, stride, stride == 1 ? "" : "th", sstride, sstride == 1 ? "" : "th");
    const char *plant = getenv("GPUARENA_FAULT_PLANT");
    if (plant && *plant)
        printf("fault_sweep: planted bug: %s (the sweep must fail)\n", plant);
    time_t t0 = time(NULL);
    tally_t all = {0};
    bool ok = true;
    uint64_t only = env_u64("GA_SWEEP_ONLY", 0); /* 1..: one setting */
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (!only || only == i + 1)
            ok &= sweep(&settings[i], &m, stride, sstride, nrandom, &all);
    unsigned classes = 0;
    for (int c = 0; c < GA_FAULT_CLASSES; c++)
        classes += all.per_class[c] != 0;
    printf("fault_sweep: %" PRIu64 " single faults (%" PRIu64 " reported as a status, %" PRIu64
           " absorbed) and %" PRIu64 " random ones over %u call classes in %lds: %s\n",
           all.points, all.reported, all.absorbed, all.random_faults, classes,
           (long)(time(NULL) - t0), ok ? "ok" : "FAILED");
    free(m.ptrs);
    free(m.size);
    free(m.stream);
    ga_trace_free(tr);
    return ok ? 0 : 1;
}

#endif
