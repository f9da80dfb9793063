/*
 * fuzz_api.c - libFuzzer target for the public API.  Built by
 * run-fuzz-api.sh, not by make.
 *
 * The input is decoded into a sequence of calls on a sim arena and a host
 * arena (settings chosen by the first byte), on four streams: alloc (sizes
 * from 0 to huge), free and record_stream of valid pointers, of stale
 * (freed) ones, of interior ones, of another arena's and of random
 * values, trim, stats, and new caps (gpuarena_set, good and bad).  The target keeps a model of what
 * is live and requires, after every call:
 *
 *   - the status is one the call documents for that input (a valid free
 *     succeeds; a stale pointer gives DOUBLE_FREE or INVALID_POINTER, an
 *     interior one INTERIOR_POINTER, a foreign or random one
 *     INVALID_POINTER; an allocation succeeds or fails with
 *     OUT_OF_MEMORY or SIZE_OVERFLOW, never with a NULL pointer);
 *   - gpuarena_check passes on both arenas, and the statistics agree with
 *     the model (live blocks, requested bytes);
 *   - host memory handed out is writable and no two live blocks overlap
 *     (a tag at both ends of each block is checked at free).
 *
 * At the end every block is freed, trim(0) leaves nothing reserved and the
 * sim arena is destroyed (the host arena is kept for the next input).  A violation aborts with a
 * message.
 */
#include "gpuarena.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOTS   64
#define STALE   16
#define NARENAS 2

typedef struct slot {
    unsigned char *p;
    size_t size;
    unsigned stream;
} slot_t;

typedef struct state {
    gpuarena_t *a[NARENAS];
    slot_t live[NARENAS][SLOTS];
    unsigned nlive[NARENAS];
    uint64_t requested[NARENAS];
    void *stale[NARENAS][STALE]; /* freed pointers, most recent first */
    const uint8_t *in;
    size_t left;
} state_t;

static const char *const sim_options[] = {
    "",
    "expandable=false",
    "cross_stream=wait,thread_cache=false",
    "sim_capacity=64M,expandable=false",
    "sim_capacity=256M",
    "max_split=1M,max_cached=8M",
    "round=4096,sim_event_delay=0",
    "expandable=false,release_threshold=1M,cross_stream=never",
};

static const char *const host_options[] = {
    "",
    "expandable=false",
    "zero=true,max_cached=1M",
    "thread_cache=false,round=64",
};

static void fail(const char *what, gpuarena_status_t st)
{
    fprintf(stderr, "fuzz_api: %s (status %d: %s; %s)\n", what, (int)st, gpuarena_strerror(st),
            gpuarena_last_error() ? gpuarena_last_error() : "");
    abort();
}

static uint8_t byte(state_t *s)
{
    if (!s->left)
        return 0;
    s->left--;
    return *s->in++;
}

static uint64_t word(state_t *s)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | byte(s);
    return v;
}

static gpuarena_stream_t stream_of(unsigned n)
{
    return (gpuarena_stream_t)(uintptr_t)n; /* 0 is the legacy default stream */
}

/* Sizes: zero, small, page-ish, large, huge (beyond any memory). */
static size_t size_of(state_t *s, int ai)
{
    uint8_t b = byte(s);
    size_t v = (size_t)byte(s) << 8 | byte(s);
    switch (b >> 5) {
    case 0:
        return 0;
    case 1:
    case 2:
        return (v & 0x3ff) + 1;
    case 3:
        return (v + 1) * 16;
    case 4:
        return (v + 1) * (ai == 0 ? 4096 : 64);
    case 5:
        return ai == 0 ? (v + 1) << 20 : (v & 0xff) << 12; /* sim: up to 64 GiB */
    case 6:
        return SIZE_MAX - v;
    default:
        return ((size_t)1 << 61) + v;
    }
}

static void tag(unsigned char *p, size_t n, unsigned char t)
{
    p[0] = t;
    p[n - 1] = t;
}

static void check_arena(state_t *s, int ai)
{
    gpuarena_status_t st = gpuarena_check(s->a[ai]);
    if (st != GPUARENA_SUCCESS)
        fail("gpuarena_check failed", st);
    gpuarena_stats_t t;
    st = gpuarena_stats(s->a[ai], &t);
    if (st != GPUARENA_SUCCESS)
        fail("gpuarena_stats failed", st);
    if (t.live_blocks != s->nlive[ai] || t.requested != s->requested[ai] ||
        t.in_use < t.requested || t.reserved < t.in_use || t.cached != t.reserved - t.in_use ||
        t.requested_peak < t.requested || t.allocs - t.frees != t.live_blocks) {
        fprintf(stderr,
                "fuzz_api: arena %d: stats say %llu live, %llu requested; the model %u, %llu\n", ai,
                (unsigned long long)t.live_blocks, (unsigned long long)t.requested, s->nlive[ai],
                (unsigned long long)s->requested[ai]);
        abort();
    }
}

static unsigned char tag_of(const slot_t *l)
{
    return (unsigned char)((uintptr_t)l->p >> 4 ^ l->size);
}

/* Forget live slot I of arena AI (it was freed). */
static void drop(state_t *s, int ai, unsigned i)
{
    slot_t *l = &s->live[ai][i];
    memmove(&s->stale[ai][1], &s->stale[ai][0], (STALE - 1) * sizeof(void *));
    s->stale[ai][0] = l->p;
    s->requested[ai] -= l->size;
    s->live[ai][i] = s->live[ai][--s->nlive[ai]];
}

/* The live slot of arena AI at exactly P, or -1. */
static int find_live(const state_t *s, int ai, const void *p)
{
    for (unsigned i = 0; i < s->nlive[ai]; i++)
        if (s->live[ai][i].p == p)
            return (int)i;
    return -1;
}

/* The live block of arena AI that P points inside (not at its start). */
static bool inside_live(const state_t *s, int ai, const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (unsigned i = 0; i < s->nlive[ai]; i++) {
        uintptr_t b = (uintptr_t)s->live[ai][i].p;
        if (a > b && a < b + s->live[ai][i].size)
            return true;
    }
    return false;
}

static void do_alloc(state_t *s, int ai)
{
    size_t n = size_of(s, ai);
    unsigned stream = byte(s) & 3;
    if (s->nlive[ai] == SLOTS)
        return;
    void *p = (void *)(uintptr_t)0x5a5a5a5a;
    gpuarena_status_t st = gpuarena_alloc(s->a[ai], n, stream_of(stream), &p);
    if (st == GPUARENA_SUCCESS) {
        if (n == 0) {
            if (p != NULL)
                fail("alloc of 0 bytes gave a pointer", st);
            return;
        }
        if (!p || p == (void *)(uintptr_t)0x5a5a5a5a)
            fail("alloc succeeded with no pointer", st);
        if (find_live(s, ai, p) >= 0 || inside_live(s, ai, p))
            fail("alloc handed out memory of a live block", st);
        slot_t *l = &s->live[ai][s->nlive[ai]++];
        l->p = p;
        l->size = n;
        l->stream = stream;
        s->requested[ai] += n;
        if (ai == 1)
            tag(l->p, n, tag_of(l));
        return;
    }
    if (st != GPUARENA_ERR_OUT_OF_MEMORY && st != GPUARENA_ERR_SIZE_OVERFLOW)
        fail("alloc failed with an undocumented status", st);
}

/* Free or record_stream P on arena AI and check the status against the
 * model. */
static void pointer_call(state_t *s, int ai, void *p, bool record, unsigned stream)
{
    int i = p ? find_live(s, ai, p) : -1;
    if (i >= 0 && !record && ai == 1) {
        slot_t *l = &s->live[ai][i];
        if (l->p[0] != tag_of(l) || l->p[l->size - 1] != tag_of(l))
            fail("a host block was overwritten: two live blocks overlap", GPUARENA_SUCCESS);
    }
    gpuarena_status_t st = record ? gpuarena_record_stream(s->a[ai], p, stream_of(stream))
                                  : gpuarena_free(s->a[ai], p, stream_of(stream));
    if (i >= 0) {
        if (st != GPUARENA_SUCCESS)
            fail(record ? "record_stream of a live block failed" : "free of a live block failed",
                 st);
        if (!record)
            drop(s, ai, (unsigned)i);
        return;
    }
    if (!p) {
        /* free(NULL) is a no-op; record_stream(NULL) a bad argument. */
        if (st != (record ? GPUARENA_ERR_INVALID_ARGUMENT : GPUARENA_SUCCESS))
            fail("NULL pointer: wrong status", st);
        return;
    }
    if (inside_live(s, ai, p)) {
        if (st != GPUARENA_ERR_INTERIOR_POINTER)
            fail("interior pointer: not INTERIOR_POINTER", st);
        return;
    }
    /* INTERIOR_POINTER too: the rounding past a block's requested size
     * is still inside it, and the model knows only the requested size. */
    if (st != GPUARENA_ERR_DOUBLE_FREE && st != GPUARENA_ERR_INVALID_POINTER &&
        st != GPUARENA_ERR_INTERIOR_POINTER)
        fail("stale or foreign pointer: not DOUBLE_FREE, INVALID_POINTER or INTERIOR_POINTER", st);
}

static void *pick_pointer(state_t *s, int ai)
{
    uint8_t how = byte(s);
    uint8_t k = byte(s);
    switch (how % 6) {
    case 0:
    case 1: /* a live one */
        return s->nlive[ai] ? s->live[ai][k % s->nlive[ai]].p : NULL;
    case 2: /* a freed one */
        return s->stale[ai][k % STALE];
    case 3: { /* inside a live one */
        if (!s->nlive[ai])
            return NULL;
        const slot_t *l = &s->live[ai][k % s->nlive[ai]];
        size_t off = l->size > 1 ? 1 + (size_t)byte(s) * 97 % (l->size - 1) : 0;
        return l->p + off;
    }
    case 4: /* the other arena's */
        return s->nlive[!ai] ? s->live[!ai][k % s->nlive[!ai]].p : s->stale[!ai][k % STALE];
    default: /* anything */
        return (void *)(uintptr_t)word(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static state_t s;
    memset(&s, 0, sizeof s);
    s.in = data;
    s.left = size;
    uint8_t cfg = byte(&s);
    const char *so = sim_options[cfg % (sizeof sim_options / sizeof *sim_options)];
    const char *ho = host_options[(cfg >> 4) % (sizeof host_options / sizeof *host_options)];
    (void)ho;
    gpuarena_status_t st = gpuarena_create(GPUARENA_SIM, 0, so, &s.a[0]);
    if (st != GPUARENA_SUCCESS)
        fail("cannot create the sim arena", st);
    /* Host arenas are made once per setting and kept (an input leaves its
     * host arena empty): making one reads the machine's topology, which
     * would cost most of the time of an input. */
    static gpuarena_t *hosts[sizeof host_options / sizeof *host_options];
    size_t hi = (cfg >> 4) % (sizeof host_options / sizeof *host_options);
    if (!hosts[hi]) {
        st = gpuarena_create(GPUARENA_HOST, 0, ho, &hosts[hi]);
        if (st != GPUARENA_SUCCESS)
            fail("cannot create the host arena", st);
    }
    s.a[1] = hosts[hi];

    while (s.left) {
        uint8_t op = byte(&s);
        int ai = op >> 7;
        switch (op & 7) {
        case 0:
        case 1:
        case 2:
            do_alloc(&s, ai);
            break;
        case 3:
        case 4: {
            void *p = pick_pointer(&s, ai);
            pointer_call(&s, ai, p, false, byte(&s) & 3);
            break;
        }
        case 5: {
            void *p = pick_pointer(&s, ai);
            pointer_call(&s, ai, p, true, byte(&s) & 3);
            break;
        }
        case 6:
            st = gpuarena_trim(s.a[ai], (size_t)byte(&s) << 16);
            if (st != GPUARENA_SUCCESS)
                fail("trim failed", st);
            break;
        default: {
            gpuarena_stats_t t;
            uint8_t b = byte(&s);
            if ((b & 3) == 2 && ai == 0) {
                /* New caps on the sim arena (made afresh for each input:
                 * the kept host arena must not carry them to the next). */
                static const char *const cached[] = {"0", "1M", "none"};
                static const char *const reserved[] = {"1M", "16M", "256M", "none"};
                char opts[64];
                snprintf(opts, sizeof opts, "max_cached=%s,max_reserved=%s", cached[(b >> 2) % 3],
                         reserved[(b >> 4) % 4]);
                st = gpuarena_set(s.a[ai], opts);
                if (st != GPUARENA_SUCCESS)
                    fail("set of the caps failed", st);
            } else if ((b & 3) == 3 && ai == 0) {
                /* A key fixed at creation: refused, nothing changes. */
                st = gpuarena_set(s.a[ai], b & 4 ? "max_cached=0,round=4096" : "max_cached=x");
                if (st != (b & 4 ? GPUARENA_ERR_INVALID_ARGUMENT : GPUARENA_ERR_CONFIG))
                    fail("a bad set was not refused as documented", st);
                st = GPUARENA_SUCCESS;
            } else if (b & 1) {
                st = gpuarena_stats_reset_peaks(s.a[ai]);
            } else {
                st = gpuarena_stats(s.a[ai], &t);
            }
            if (st != GPUARENA_SUCCESS)
                fail("stats failed", st);
            break;
        }
        }
        check_arena(&s, ai);
    }

    for (int ai = 0; ai < NARENAS; ai++) {
        while (s.nlive[ai]) {
            slot_t *l = &s.live[ai][s.nlive[ai] - 1];
            pointer_call(&s, ai, l->p, false, l->stream);
        }
        if (gpuarena_trim(s.a[ai], 0) != GPUARENA_SUCCESS)
            fail("trim(0) failed", GPUARENA_SUCCESS);
        check_arena(&s, ai);
        gpuarena_stats_t t;
        if (gpuarena_stats(s.a[ai], &t) != GPUARENA_SUCCESS || t.reserved != 0 || t.in_use != 0)
            fail("memory still reserved after freeing everything and trim(0)", GPUARENA_SUCCESS);
        if (ai == 0 && (st = gpuarena_destroy(s.a[ai])) != GPUARENA_SUCCESS)
            fail("destroy failed", st);
    }
    return 0;
}
