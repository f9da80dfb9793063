/*
 * bench_device.c - speed of the device arena against the driver's own
 * allocators, in one run on GPU 0 (issue 5's targets).
 *
 * Four allocators, each measured the same way:
 *   gpuarena    a device arena with the settings in effect (growable
 *               segments by default), gpuarena_alloc / gpuarena_free;
 *   cuMemAlloc  cuMemAlloc / cuMemFree (what cudaMalloc does);
 *   pool        cuMemAllocFromPoolAsync / cuMemFreeAsync from a pool of
 *               the device with release threshold = max (what
 *               cudaMallocAsync does with a raised threshold);
 *   pool=driver a device arena with pool = driver and release_threshold =
 *               max: the same driver pool behind gpuarena_alloc /
 *               gpuarena_free, so that its column minus the pool's is what
 *               gpuarena's checks and counters cost on top of the driver.
 *
 *   (a) a cached alloc+free pair of one size on one stream, ns per pair
 *       (512 B, 1 MiB, 64 MiB): ROUNDS rounds, each a run of about RUN_S
 *       seconds of every allocator in turn, and the median of each
 *       allocator's runs.  Target for gpuarena: 60 ns or less.  Then the
 *       512 B row again on the legacy stream (NULL), the stream PyTorch
 *       passes unless the program sets another and CuPy's entry points
 *       always pass, where a created stream's capture checks are not
 *       needed (gpuarena(7)); same target.
 *   (b) 256 live blocks of log-uniform random size 512 B to 64 MiB; each
 *       operation frees a random live block and allocates a new one (one
 *       free + one alloc), ns per operation; the same random sequence for
 *       every allocator, after a warm-up that fills the caches; median of
 *       ROUNDS runs.  Target: 100 ns or less.  Then the same row on the
 *       legacy stream, where only a call that reaches the driver asks it
 *       anything; and gpuarena on the same sequence with no stream (the
 *       block manager alone, no driver call).  The runs of all nine are
 *       interleaved, as (a)'s are, each with an arena or pool of its own
 *       that holds its 256 blocks (about 24 GiB in all).  Last, gpuarena's
 *       figure over the driver pool's, on each stream: the hosts differ,
 *       and the pool's (b) in the same runs measures the host (for no
 *       target; DESIGN.md's anchors put 100 ns at 0.052 of it).
 *   (c) 16 threads, each on its own stream, doing cached alloc+free pairs
 *       for CONC_S seconds: million pairs per second, all threads
 *       together (4 KiB, inside the thread caches, and 1 MiB, outside).
 *       Target: 30 or more.
 *
 *   (d) for the record: the (a) pair of gpuarena with no stream
 *       (GPUARENA_STREAM_HOST), and what the driver calls on the arena's
 *       path cost one by one (ns per call, median of RUNS runs): they
 *       bound what a stream-ordered pair can cost, since gpuarena must ask
 *       the driver whether a created stream is being captured into a graph
 *       before it hands out memory on it (a free that puts nothing on the
 *       stream is not asked: gpuarena(7)).  The legacy stream cannot be
 *       captured: a cached pair on it asks the driver nothing, so its
 *       figure in (a) is the no-stream pair plus the naming of the
 *       stream.  cuStreamGetFlags, which asks nothing about capture, is
 *       there to show what any call on a stream costs; the last line is
 *       the floor of a created stream's pair: one capture check.
 *
 * Why many short runs, interleaved: the lent H200 hosts have slow spells
 * of 0.1-0.5 s in which everything on the CPU takes up to twice as long
 * (seen with a timer of 50 ms slices, at every size, in most processes).
 * Five runs of 80 ms, one allocator after the other, put the median of a
 * whole row into one spell often enough to flip its verdict.  Spread over
 * ROUNDS rounds of every allocator (about 1.5 s a row), a spell falls on
 * each alike, and one shorter than half the row on fewer than half of any
 * one's runs.  A longer spell still moves the median: the range of
 * gpuarena's runs is printed under each row, so that such a run shows as
 * one.
 *
 * cuMemAlloc costs 0.1 ms or more per call: its loops are time-boxed
 * (each run stops after its time whatever the count), so it is measured
 * everywhere, with fewer operations.  The anchor figures of an H200 are in
 * DESIGN.md.  Exit: 0 every target met, 2 some missed, 77 no GPU, 1 error.
 */
#include "churn.h"
#include "gpubench.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS  15
#define RUN_S   0.02 /* seconds per timed run */
#define RUNS    5    /* (d), per driver call */
#define LIVE    CHURN_LIVE
#define OPS     CHURN_OPS
#define WARM    (LIVE * 64L)
#define THREADS 16
#define CONC_S  0.25

enum { K_ARENA, K_CUMEM, K_POOL, K_PARENA, K_COUNT };
static const char *const names[K_COUNT] = {"gpuarena", "cuMemAlloc", "pool", "pool=driver"};

/* The two kinds that go through gpuarena_alloc. */
#define IS_ARENA(kind) ((kind) == K_ARENA || (kind) == K_PARENA)

typedef struct target {
    gpuarena_t *arena;
    gpuarena_t *parena; /* pool = driver */
    void *pool;
    void *stream;
} target_t;

static void *ctx;

/* ---- The three allocators, inlined into loops specialised per kind ---- */

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNLIKELY(x)   __builtin_expect(!!(x), 0)

ALWAYS_INLINE gpuarena_status_t t_alloc(const int kind, const target_t *t, size_t size, uint64_t *p)
{
    switch (kind) {
    case K_ARENA:
    case K_PARENA: {
        void *q;
        gpuarena_status_t st =
            gpuarena_alloc(kind == K_ARENA ? t->arena : t->parena, size, t->stream, &q);
        *p = (uint64_t)(uintptr_t)q;
        return st;
    }
    case K_CUMEM:
        return ga_cuda_mem_alloc(size, p);
    default:
        return ga_cuda_mem_alloc_from_pool(size, t->pool, t->stream, p);
    }
}

ALWAYS_INLINE gpuarena_status_t t_free(const int kind, const target_t *t, uint64_t p)
{
    switch (kind) {
    case K_ARENA:
    case K_PARENA:
        return gpuarena_free(kind == K_ARENA ? t->arena : t->parena, (void *)(uintptr_t)p,
                             t->stream);
    case K_CUMEM:
        return ga_cuda_mem_free(p);
    default:
        return ga_cuda_mem_free_async(p, t->stream);
    }
}

/* Check the clock every MASK+1 operations: often for slow allocators. */
#define MASK(kind) (IS_ARENA(kind) ? 1023L : 0L)

/* Up to N pairs of SIZE, stopping after BUDGET seconds; *DONE pairs made.
 * Returns seconds. */
ALWAYS_INLINE double pairs_loop(const int kind, const target_t *t, size_t size, long n,
                                double budget, long *done)
{
    uint64_t p;
    double t0 = gb_now();
    long i;
    for (i = 0; i < n; i++) {
        gpuarena_status_t st = t_alloc(kind, t, size, &p);
        if (UNLIKELY(st != GPUARENA_SUCCESS))
            gb_die(IS_ARENA(kind)    ? "gpuarena_alloc"
                   : kind == K_CUMEM ? "cuMemAlloc"
                                     : "cuMemAllocFromPoolAsync",
                   st);
        st = t_free(kind, t, p);
        if (UNLIKELY(st != GPUARENA_SUCCESS))
            gb_die(IS_ARENA(kind)    ? "gpuarena_free"
                   : kind == K_CUMEM ? "cuMemFree"
                                     : "cuMemFreeAsync",
                   st);
        if ((i & MASK(kind)) == MASK(kind) && gb_now() - t0 > budget) {
            i++;
            break;
        }
    }
    *done = i;
    return gb_now() - t0;
}

static __attribute__((noinline)) double pairs_arena(const target_t *t, size_t s, long n, double b,
                                                    long *d)
{
    return pairs_loop(K_ARENA, t, s, n, b, d);
}
static __attribute__((noinline)) double pairs_cumem(const target_t *t, size_t s, long n, double b,
                                                    long *d)
{
    return pairs_loop(K_CUMEM, t, s, n, b, d);
}
static __attribute__((noinline)) double pairs_pool(const target_t *t, size_t s, long n, double b,
                                                   long *d)
{
    return pairs_loop(K_POOL, t, s, n, b, d);
}
static __attribute__((noinline)) double pairs_parena(const target_t *t, size_t s, long n, double b,
                                                     long *d)
{
    return pairs_loop(K_PARENA, t, s, n, b, d);
}

static double pairs(int kind, const target_t *t, size_t s, long n, double b, long *d)
{
    switch (kind) {
    case K_ARENA:
        return pairs_arena(t, s, n, b, d);
    case K_CUMEM:
        return pairs_cumem(t, s, n, b, d);
    case K_PARENA:
        return pairs_parena(t, s, n, b, d);
    default:
        return pairs_pool(t, s, n, b, d);
    }
}

/* Pairs of KIND at SIZE in a run of about RUN_S seconds, after a first
 * pair that maps memory and an estimate of the rate. */
static long pairs_per_run(int kind, const target_t *t, size_t size)
{
    long d;
    pairs(kind, t, size, 1, 1e9, &d);
    double s = pairs(kind, t, size, kind == K_CUMEM ? 16 : IS_ARENA(kind) ? 10000 : 1000, 1e9, &d);
    double per = s / (double)d;
    long n = per > 0 ? (long)(RUN_S / per) : 1000000;
    return n < 8 ? 8 : n > 20000000 ? 20000000 : n;
}

/* One column of a row of (a): an allocator, and the stream it runs on. */
typedef struct column {
    int kind;
    const target_t *t;
} column_t;

/* (a) for the N columns C at SIZE: ROUNDS rounds of one run of each
 * column in turn; V[i] the median ns per pair of column i, CNT[i] its
 * pairs timed, LO and HI the fastest and slowest run of column 0. */
static void cached_pairs(const column_t *c, int n, size_t size, double *v, long *cnt, double *lo,
                         double *hi)
{
    long per[K_COUNT];
    double runs[K_COUNT][ROUNDS];
    for (int i = 0; i < n; i++) {
        per[i] = pairs_per_run(c[i].kind, c[i].t, size);
        cnt[i] = 0;
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < n; i++) {
            long d;
            double s = pairs(c[i].kind, c[i].t, size, per[i], RUN_S * 2, &d);
            runs[i][r] = s / (double)d * 1e9;
            cnt[i] += d;
        }
    }
    for (int i = 0; i < n; i++)
        v[i] = gb_median(runs[i], ROUNDS); /* sorts them */
    *lo = runs[0][0];
    *hi = runs[0][ROUNDS - 1];
}

/* ---- (b) random churn over 256 live blocks ---------------------------- */

/* Operations FROM..TO-1 of SEQ (wrapping) on the blocks LIVE, stopping
 * after BUDGET seconds; returns seconds, *DONE operations. */
ALWAYS_INLINE double churn_loop(const int kind, const target_t *t, const churn_seq_t *seq,
                                uint64_t *live, long from, long to, double budget, long *done)
{
    double t0 = gb_now();
    long i;
    for (i = from; i < to; i++) {
        long k = i % OPS;
        uint64_t *slot = &live[seq->victim[k]];
        gpuarena_status_t st = t_free(kind, t, *slot);
        if (UNLIKELY(st != GPUARENA_SUCCESS))
            gb_die(IS_ARENA(kind)    ? "gpuarena_free"
                   : kind == K_CUMEM ? "cuMemFree"
                                     : "cuMemFreeAsync",
                   st);
        st = t_alloc(kind, t, seq->size[k], slot);
        if (UNLIKELY(st != GPUARENA_SUCCESS)) {
            char b[32];
            fprintf(stderr, "%s: %s: allocating %s with 255 blocks live\n", gb_prog, names[kind],
                    gb_size(seq->size[k], b));
            gb_die(IS_ARENA(kind)    ? "gpuarena_alloc"
                   : kind == K_CUMEM ? "cuMemAlloc"
                                     : "cuMemAllocFromPoolAsync",
                   st);
        }
        if (((i - from) & MASK(kind)) == MASK(kind) && gb_now() - t0 > budget) {
            i++;
            break;
        }
    }
    *done = i - from;
    return gb_now() - t0;
}

#define CHURN_ARGS const target_t *t, const churn_seq_t *q, uint64_t *l, long f, long to, double b
static __attribute__((noinline)) double churn_arena(CHURN_ARGS, long *d)
{
    return churn_loop(K_ARENA, t, q, l, f, to, b, d);
}
static __attribute__((noinline)) double churn_cumem(CHURN_ARGS, long *d)
{
    return churn_loop(K_CUMEM, t, q, l, f, to, b, d);
}
static __attribute__((noinline)) double churn_pool(CHURN_ARGS, long *d)
{
    return churn_loop(K_POOL, t, q, l, f, to, b, d);
}
static __attribute__((noinline)) double churn_parena(CHURN_ARGS, long *d)
{
    return churn_loop(K_PARENA, t, q, l, f, to, b, d);
}

static double churn(int kind, CHURN_ARGS, long *d)
{
    switch (kind) {
    case K_ARENA:
        return churn_arena(t, q, l, f, to, b, d);
    case K_CUMEM:
        return churn_cumem(t, q, l, f, to, b, d);
    case K_PARENA:
        return churn_parena(t, q, l, f, to, b, d);
    default:
        return churn_pool(t, q, l, f, to, b, d);
    }
}
#undef CHURN_ARGS

/* One column of (b): an allocator on a stream, with blocks of its own
 * (allocators never share their live blocks: each holds LIVE of them, as
 * the benchmark says), and its place in the sequence. */
typedef struct churn_col {
    int kind;
    const target_t *t;
    uint64_t live[LIVE];
    long at, count;
    double runs[ROUNDS];
} churn_col_t;

/* (b) for the N columns C at once: each allocates its first blocks and
 * warms up (fills its caches), then ROUNDS rounds of one run of each
 * column in turn, as (a) does, so that a slow spell of the host falls on
 * every column alike; the blocks are freed after, untimed.  V[i]: the
 * median ns per operation of column i. */
static void churn_cols(churn_col_t *c, int n, const churn_seq_t *seq, double *v)
{
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < LIVE; k++)
            GB_CHECK("allocating the first 256 blocks",
                     t_alloc(c[i].kind, c[i].t, seq->init[k], &c[i].live[k]));
        long d;
        churn(c[i].kind, c[i].t, seq, c[i].live, 0, c[i].kind == K_CUMEM ? 64 : WARM, 5.0, &d);
        c[i].at = d;
        c[i].count = 0;
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < n; i++) {
            long d, ops = c[i].kind == K_ARENA ? OPS / 4 : OPS / 8;
            double sec =
                churn(c[i].kind, c[i].t, seq, c[i].live, c[i].at, c[i].at + ops, RUN_S * 2, &d);
            c[i].at += d;
            c[i].runs[r] = sec / (double)d * 1e9;
            c[i].count += d;
        }
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < LIVE; k++)
            GB_CHECK("freeing the live blocks", t_free(c[i].kind, c[i].t, c[i].live[k]));
        v[i] = gb_median(c[i].runs, ROUNDS);
    }
}

/* ---- (c) 16 threads on 16 streams ------------------------------------- */

typedef struct job {
    int kind;
    target_t t;
    size_t size;
    pthread_barrier_t *go;
    long done;
} job_t;

static void *job_main(void *arg)
{
    job_t *j = arg;
    gb_thread_ctx(ctx);
    long d;
    pairs(j->kind, &j->t, j->size, 1, 1e9, &d); /* this stream's first block */
    pthread_barrier_wait(j->go);
    pairs(j->kind, &j->t, j->size, 1L << 40, CONC_S, &j->done);
    return NULL;
}

/* Million pairs per second of THREADS threads, median of 3 runs. */
static double concurrent_mops(int kind, const target_t *base, void *const *streams, size_t size,
                              long *count)
{
    double v[3];
    *count = 0;
    for (int r = 0; r < 3; r++) {
        pthread_t th[THREADS];
        job_t j[THREADS];
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, THREADS + 1);
        for (int i = 0; i < THREADS; i++) {
            j[i] = (job_t){kind, *base, size, &go, 0};
            j[i].t.stream = streams[i];
            if (pthread_create(&th[i], NULL, job_main, &j[i]) != 0) {
                fprintf(stderr, "%s: pthread_create failed\n", gb_prog);
                exit(GB_EXIT_ERROR);
            }
        }
        pthread_barrier_wait(&go);
        double t0 = gb_now();
        long total = 0;
        for (int i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            total += j[i].done;
        }
        double wall = gb_now() - t0;
        pthread_barrier_destroy(&go);
        v[r] = (double)total / wall / 1e6;
        *count += total;
    }
    return gb_median(v, 3);
}

/* ---- Output ----------------------------------------------------------- */

static void header(void)
{
    printf("%-44s | %12s | %12s | %12s | %12s | %s\n", "operation", names[K_ARENA], names[K_CUMEM],
           names[K_POOL], names[K_PARENA], "target (gpuarena)");
    printf("%.44s-+-%.12s-+-%.12s-+-%.12s-+-%.12s-+-%.18s\n",
           "---------------------------------------------", "-------------", "-------------",
           "-------------", "-------------", "-------------------");
}

/* One row; LOWER: the target is an upper bound. */
static void row(const char *op, const double v[K_COUNT], double target, bool lower)
{
    char cell[K_COUNT][32];
    for (int k = 0; k < K_COUNT; k++) {
        if (v[k] < 0)
            snprintf(cell[k], 32, "-");
        else if (v[k] >= 1000)
            snprintf(cell[k], 32, "%.0f", v[k]);
        else
            snprintf(cell[k], 32, "%.2f", v[k]);
    }
    bool ok = lower ? v[K_ARENA] <= target : v[K_ARENA] >= target;
    gb_target(ok);
    printf("%-44s | %12s | %12s | %12s | %12s | %s %g: %s\n", op, cell[K_ARENA], cell[K_CUMEM],
           cell[K_POOL], cell[K_PARENA], lower ? "<=" : ">=", target, ok ? "met" : "MISSED");
}

/* (d): ns per call of CALL, median of RUNS runs of N calls, printed and
 * stored in OUT. */
#define PER_CALL_NS(what, n, call, out)                                                            \
    do {                                                                                           \
        double v_[RUNS];                                                                           \
        for (int r_ = 0; r_ < RUNS; r_++) {                                                        \
            double t0_ = gb_now();                                                                 \
            for (long i_ = 0; i_ < (n); i_++)                                                      \
                GB_CHECK(what, call);                                                              \
            v_[r_] = (gb_now() - t0_) / (double)(n)*1e9;                                           \
        }                                                                                          \
        (out) = gb_median(v_, RUNS);                                                               \
        printf("  %-58s %8.1f\n", what, (out));                                                    \
    } while (0)

static gpuarena_status_t enter_leave(void)
{
    ga_cuda_scope_t sc;
    gpuarena_status_t st = ga_cuda_enter(ctx, &sc);
    if (st == GPUARENA_SUCCESS)
        ga_cuda_leave(&sc);
    return st;
}

static gpuarena_status_t record_query(void *ev, void *s)
{
    gpuarena_status_t st = ga_cuda_event_record(ev, s);
    if (st == GPUARENA_SUCCESS)
        st = ga_cuda_event_query(ev);
    return st == GA_CUDA_NOT_READY ? GPUARENA_SUCCESS : st;
}

static gpuarena_status_t stream_flags(void *s)
{
    unsigned f;
    return ga_cuda_stream_flags(s, &f);
}

static void driver_calls(const target_t *t)
{
    target_t host = *t;
    host.stream = GPUARENA_STREAM_HOST;
    const column_t c[1] = {{K_ARENA, &host}};
    double v[1], lo, hi;
    long n[1];
    cached_pairs(c, 1, 512, v, n, &lo, &hi);
    printf("\n(d) gpuarena pair of 512 B with no stream (ns, no target):\n");
    printf("  %-58s %8.1f\n", "no stream (GPUARENA_STREAM_HOST)", v[0]);
    GB_CHECK("waiting for the stream", ga_cuda_stream_sync(t->stream));
    printf("driver calls on the arena's path (ns per call; stream idle):\n");
    const long N = 200000;
    double capture, v1;
    PER_CALL_NS("cuStreamIsCapturing, a stream", N, ga_cuda_stream_check(t->stream), capture);
    PER_CALL_NS("cuStreamIsCapturing, the legacy stream", N, ga_cuda_stream_check(NULL), v1);
    PER_CALL_NS("cuStreamGetFlags, a stream (for comparison)", N, stream_flags(t->stream), v1);
    PER_CALL_NS("cuCtxGetCurrent (context already current)", N, enter_leave(), v1);
    PER_CALL_NS("cuStreamQuery, an idle stream", N, ga_cuda_stream_query(t->stream), v1);
    void *ev = NULL;
    GB_CHECK("cuEventCreate", ga_cuda_event_create(&ev));
    PER_CALL_NS("cuEventRecord + cuEventQuery", N / 4, record_query(ev, t->stream), v1);
    GB_CHECK("waiting for the stream", ga_cuda_stream_sync(t->stream));
    ga_cuda_event_destroy(ev);
    /* The floor under (a) and (b) on a created stream: gpuarena asks
     * whether it is being captured on every allocation (gpuarena(7)), and
     * no cheaper call answers that. */
    printf("a created stream's pair (a) or operation (b) asks cuStreamIsCapturing once: "
           "%.1f ns\nbefore the allocator does anything (targets 60 and 100 ns)\n",
           capture);
}

static void release_caches(const target_t *t)
{
    GB_CHECK("waiting for the stream", ga_cuda_stream_sync(t->stream));
    GB_CHECK("gpuarena_trim", gpuarena_trim(t->arena, 0));
    GB_CHECK("cuMemPoolTrimTo", ga_cuda_pool_trim(t->pool, 0));
    GB_CHECK("gpuarena_trim (pool=driver)", gpuarena_trim(t->parena, 0));
}

/* A new arena, pool and driver-pool arena for T, used on STREAM. */
static void target_open(target_t *t, void *stream)
{
    GB_CHECK("creating the device arena", gpuarena_create(GPUARENA_DEVICE, 0, NULL, &t->arena));
    GB_CHECK("creating a pool (cuMemPoolCreate)",
             ga_cuda_pool_create(0, UINT64_MAX, false, &t->pool));
    GB_CHECK("creating a device arena with pool=driver",
             gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver,release_threshold=max", &t->parena));
    t->stream = stream;
}

/* Their memory back, and all three gone (not the stream). */
static void target_close(target_t *t)
{
    release_caches(t);
    GB_CHECK("destroying the pool", ga_cuda_pool_destroy(t->pool));
    GB_CHECK("destroying the arena", gpuarena_destroy(t->arena));
    GB_CHECK("destroying the arena (pool=driver)", gpuarena_destroy(t->parena));
}

int main(void)
{
    ctx = gb_open("bench_device");
    target_t t = {0};
    void *stream;
    GB_CHECK("creating a stream", ga_cuda_stream_create(true, &stream));
    target_open(&t, stream);
    printf(
        "one stream (non-blocking) for (a) and (b); %d streams for (c); (a) and (b) median of %d "
        "runs, interleaved\n",
        THREADS, ROUNDS);
    printf(
        "(a) pair = alloc + free of one size, cached; (b) op = free a random live block + "
        "allocate a new one;\n(c) million alloc+free pairs per second, all threads together\n\n");
    header();

    /* (a).  First a quarter second of pairs, untimed: the first row read
     * up to twice the later ones on some leases (the process had just
     * created its context, pools and stream). */
    long warm;
    pairs(K_ARENA, &t, 512, 1L << 40, 0.25, &warm);
    static const size_t sizes[] = {512, MiB, 64 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const column_t c[K_COUNT] = {{K_ARENA, &t}, {K_CUMEM, &t}, {K_POOL, &t}, {K_PARENA, &t}};
        double v[K_COUNT], lo, hi;
        long n[K_COUNT];
        cached_pairs(c, K_COUNT, sizes[i], v, n, &lo, &hi);
        char b[32], op[64];
        snprintf(op, sizeof op, "(a) cached alloc+free, %s (ns)", gb_size(sizes[i], b));
        row(op, v, 60, true);
        printf("%-44s   (pairs timed: %ld, %ld, %ld, %ld; gpuarena runs %.1f-%.1f)\n", "", n[0],
               n[1], n[2], n[3], lo, hi);
    }
    {
        target_t legacy = t;
        legacy.stream = NULL;
        const column_t c[K_COUNT] = {
            {K_ARENA, &legacy}, {K_CUMEM, &legacy}, {K_POOL, &legacy}, {K_PARENA, &legacy}};
        double v[K_COUNT], lo, hi;
        long n[K_COUNT];
        cached_pairs(c, K_COUNT, 512, v, n, &lo, &hi);
        row("(a) the same, 512 B, legacy stream (ns)", v, 60, true);
        printf("%-44s   (pairs timed: %ld, %ld, %ld, %ld; gpuarena runs %.1f-%.1f)\n", "", n[0],
               n[1], n[2], n[3], lo, hi);
    }
    driver_calls(&t);
    release_caches(&t);

    /* (b): the created stream's row, the legacy stream's, and gpuarena
     * with no stream, all interleaved.  Each column has its own arena or
     * pool, so that each holds 256 live blocks. */
    size_t need = 24 * GiB;
    size_t free_now = gb_device_free();
    if (free_now < need) {
        printf("(b) skipped: %.1f GiB of device memory free, it needs %.1f GiB\n",
               (double)free_now / (double)GiB, (double)need / (double)GiB);
    } else {
        static churn_seq_t seq;
        if (!churn_seq_init(&seq)) {
            fprintf(stderr, "%s: no host memory for the random sequence\n", gb_prog);
            exit(GB_EXIT_ERROR);
        }
        /* Fresh ones for the created stream too: the (a) rows used the
         * first ones. */
        target_t ct = {0}, lt = {0}, ht = {0};
        target_open(&ct, t.stream);
        target_open(&lt, NULL);
        GB_CHECK("creating the device arena", gpuarena_create(GPUARENA_DEVICE, 0, NULL, &ht.arena));
        ht.stream = GPUARENA_STREAM_HOST;
        enum { NB = 2 * K_COUNT + 1 };
        static churn_col_t c[NB];
        for (int k = 0; k < K_COUNT; k++) {
            c[k] = (churn_col_t){.kind = k, .t = &ct};
            c[K_COUNT + k] = (churn_col_t){.kind = k, .t = &lt};
        }
        c[2 * K_COUNT] = (churn_col_t){.kind = K_ARENA, .t = &ht};
        gpuarena_stats_t s0, s1;
        GB_CHECK("gpuarena_stats", gpuarena_stats(ct.arena, &s0));
        double v[NB];
        churn_cols(c, NB, &seq, v);
        GB_CHECK("gpuarena_stats", gpuarena_stats(ct.arena, &s1));
        row("(b) 256 live, random 512 B-64 MiB (ns/op)", v, 100, true);
        printf("%-44s   (ops timed: %ld, %ld, %ld, %ld; gpuarena runs %.1f-%.1f, mapped %llu "
               "times, peak reserved %.2f GiB)\n",
               "", c[0].count, c[1].count, c[2].count, c[3].count, c[0].runs[0],
               c[0].runs[ROUNDS - 1], (unsigned long long)(s1.provider_maps - s0.provider_maps),
               (double)s1.reserved_peak / (double)GiB);
        /* The same sequence on the legacy stream, as (a): no capture
         * check where the caches or the pools serve. */
        row("(b) the same, legacy stream (ns/op)", v + K_COUNT, 100, true);
        printf("%-44s   (ops timed: %ld, %ld, %ld, %ld; gpuarena runs %.1f-%.1f)\n", "",
               c[K_COUNT].count, c[K_COUNT + 1].count, c[K_COUNT + 2].count, c[K_COUNT + 3].count,
               c[K_COUNT].runs[0], c[K_COUNT].runs[ROUNDS - 1]);
        /* With no stream: the block manager's share, without the capture
         * check of each allocation on a created stream. */
        printf("%-44s   (gpuarena with no stream, GPUARENA_STREAM_HOST: %.1f ns/op over %ld ops, "
               "runs %.1f-%.1f)\n",
               "", v[2 * K_COUNT], c[2 * K_COUNT].count, c[2 * K_COUNT].runs[0],
               c[2 * K_COUNT].runs[ROUNDS - 1]);
        /* The lent hosts run the same code up to twice as fast as each
         * other: the driver pool's (b), measured in the same interleaved
         * runs, is the host's measure (DESIGN.md's anchors: 100 ns is
         * 0.052 of the pool's 1937). */
        printf("%-44s   (gpuarena / the driver's pool, the host's measure: %.3f on a created "
               "stream, %.3f on the legacy stream; DESIGN.md's anchors: 100 / 1937 = 0.052)\n",
               "", v[K_ARENA] / v[K_POOL], v[K_COUNT + K_ARENA] / v[K_COUNT + K_POOL]);
        target_close(&ct);
        target_close(&lt);
        GB_CHECK("destroying the arena", gpuarena_destroy(ht.arena));
        free(seq.size);
        free(seq.victim);
    }

    /* (c) */
    void *streams[THREADS];
    for (int i = 0; i < THREADS; i++)
        GB_CHECK("creating a stream", ga_cuda_stream_create(true, &streams[i]));
    static const size_t csizes[] = {4 * KiB, MiB};
    for (size_t i = 0; i < sizeof csizes / sizeof csizes[0]; i++) {
        double v[K_COUNT];
        long n[K_COUNT];
        for (int k = 0; k < K_COUNT; k++)
            v[k] = concurrent_mops(k, &t, streams, csizes[i], &n[k]);
        char b[32], op[64];
        snprintf(op, sizeof op, "(c) %d threads, %s (M pairs/s)", THREADS, gb_size(csizes[i], b));
        row(op, v, 30, false);
        printf("%-44s   (pairs: %ld, %ld, %ld, %ld)\n", "", n[0], n[1], n[2], n[3]);
    }
    GB_CHECK("waiting for the GPU", ga_cuda_ctx_sync());
    for (int i = 0; i < THREADS; i++)
        GB_CHECK("destroying a stream", ga_cuda_stream_destroy(streams[i]));

    gpuarena_stats_t st;
    GB_CHECK("gpuarena_stats", gpuarena_stats(t.arena, &st));
    printf("\ngpuarena arena: %llu allocations, %llu cache hits, %llu provider maps, %llu "
           "unmaps, %llu events recorded, peak reserved %.2f GiB\n",
           (unsigned long long)st.allocs, (unsigned long long)st.cache_hits,
           (unsigned long long)st.provider_maps, (unsigned long long)st.provider_unmaps,
           (unsigned long long)st.events_recorded, (double)st.reserved_peak / (double)GiB);
    printf("anchors on an H200 (DESIGN.md): cudaMallocAsync 700 ns / 1937 ns / 0.15 M ops/s; "
           "PyTorch 350-600 ns / 814 ns / 0.30 M ops/s\n");
    target_close(&t);
    GB_CHECK("destroying the stream", ga_cuda_stream_destroy(t.stream));
    return gb_finish();
}
