/*
 * gpuarena-replay - replay gpuarena-trace files through fresh arenas and
 * report fragmentation and speed.  See gpuarena-replay(1).
 *
 * Every trace is parsed once, before anything is timed.  For each arena of
 * each trace and each setting group (one, or one per --compare), an
 * untimed inspection run comes first when --check or --plot asks for one
 * (invariants after every event, reserved bytes after every event), then
 * --runs timed runs; each run uses a freshly created arena and times only
 * the loop over the events.  Statistics come from the first timed run.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "gpuarena.h"
#include "json.h"
#include "trace/trace.h"

#include "output.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    EXIT_REPLAY = 1, /* a request failed, or --check found a broken invariant */
    EXIT_USAGE = 2,  /* bad command line */
    EXIT_TRACE = 3,  /* a trace could not be read or is not valid */
    EXIT_ARENA = 4,  /* an arena could not be created (-o, -a) */
    EXIT_OUTPUT = 5  /* --plot or standard output could not be written, or nothing to plot */
};

typedef struct group {
    char *label;   /* column title */
    char *options; /* -o settings followed by the group's own */
} group_t;

/* Bytes over the events of one replay, for --plot. */
typedef struct series {
    uint64_t *requested, *reserved;
    size_t n;
} series_t;

typedef struct result {
    const ga_trace_t *trace;
    const ga_trace_arena_t *ta;
    const group_t *group;
    bool ok;
    gpuarena_stats_t st;
    double ns_per_event; /* median of the timed runs */
    series_t sr;
} result_t;

static const char *prog = "gpuarena-replay";
static gpuarena_kind_t opt_kind = GPUARENA_SIM;
static bool opt_check, opt_json;
static int opt_runs = 5;
static const char *opt_plot;

/* ---- Small helpers ------------------------------------------------------ */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", prog);
        exit(EXIT_REPLAY);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = xcalloc(strlen(s) + 1, 1);
    return strcpy(p, s);
}

static const char *kind_name(gpuarena_kind_t k)
{
    static const char *const names[] = {"device", "pinned", "managed", "host", "sim"};
    return (unsigned)k < GPUARENA_KIND_COUNT ? names[k] : "?";
}

static const char *human(uint64_t v, char buf[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 6) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%" PRIu64 " B", v);
    else
        snprintf(buf, 32, "%.3f %s", d, units[u]);
    return buf;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *arena_label(const ga_trace_t *t, const ga_trace_arena_t *ta, char buf[64])
{
    if (t->narenas == 1 && !ta->declared) {
        buf[0] = '\0';
        return buf;
    }
    if (ta->instance)
        snprintf(buf, 64, "%s %d #%u", kind_name(ta->kind), ta->device, ta->instance);
    else
        snprintf(buf, 64, "%s %d", kind_name(ta->kind), ta->device);
    return buf;
}

/* ---- Replay ------------------------------------------------------------- */

static void describe(const ga_trace_event_t *e, char *buf, size_t n)
{
    char on[32];
    if (e->no_stream)
        snprintf(on, sizeof on, "with no stream");
    else
        snprintf(on, sizeof on, "on stream %" PRIu32, e->stream);
    if (e->op == GA_TRACE_ALLOC)
        snprintf(buf, n, "alloc of %" PRIu64 " bytes %s", e->size, on);
    else
        snprintf(buf, n, "%s %s", e->op == GA_TRACE_FREE ? "free" : "record_stream", on);
}

static void report_failure(const ga_trace_t *t, const ga_trace_event_t *e, const char *what,
                           gpuarena_status_t st)
{
    char ev[96];
    describe(e, ev, sizeof ev);
    const char *why = gpuarena_last_error();
    fprintf(stderr, "%s: %s:%" PRIu32 ": %s %s: %s%s%s\n", prog, t->name, e->line, ev, what,
            gpuarena_strerror(st), why && *why ? ": " : "", why ? why : "");
}

/* The streams of the trace arena being replayed, by trace stream number.
 * Trace stream 0 is the legacy default stream: NULL.  For host and sim
 * arenas any value names a stream, so stream N is the value N (no table);
 * for the GPU kinds they are real CUDA streams of the arena's device,
 * created for the trace arena (open_streams) and destroyed after its runs.
 * An event with no stream ("-") is replayed with GPUARENA_STREAM_HOST
 * (event_stream), never with a stream of the table. */
static gpuarena_stream_t *streams;
static uint32_t nstreams;
static int streams_device = -1; /* device whose primary context is retained */
#define MAX_GPU_STREAMS 4096

static inline gpuarena_stream_t stream_of(uint32_t n)
{
    return streams ? streams[n] : (gpuarena_stream_t)(uintptr_t)n;
}

static inline gpuarena_stream_t event_stream(const ga_trace_event_t *e)
{
    return e->no_stream ? GPUARENA_STREAM_HOST : stream_of(e->stream);
}

static bool gpu_kind(gpuarena_kind_t k)
{
    return k == GPUARENA_DEVICE || k == GPUARENA_PINNED || k == GPUARENA_MANAGED;
}

static void close_streams(void)
{
    if (streams_device >= 0) {
        /* Blocks freed on these streams were handed back with the arenas;
         * wait for the work of the context before the streams go. */
        ga_cuda_ctx_sync();
        for (uint32_t i = 1; i < nstreams; i++)
            if (streams[i])
                ga_cuda_stream_destroy(streams[i]);
        ga_cuda_primary_release(streams_device);
        streams_device = -1;
    }
    free(streams);
    streams = NULL;
    nstreams = 0;
}

/* Streams 0..TA->max_stream for a replay of TA into arenas of opt_kind;
 * 0 or EXIT_ARENA (with a message). */
static int open_streams(const ga_trace_t *t, const ga_trace_arena_t *ta)
{
    if (!gpu_kind(opt_kind))
        return 0; /* stream N is the value N */
    if (ta->max_stream > MAX_GPU_STREAMS) {
        fprintf(stderr,
                "%s: %s: the trace uses stream numbers up to %" PRIu32 "; a %s replay creates "
                "a CUDA stream per number, at most %d\n",
                prog, t->name, ta->max_stream, kind_name(opt_kind), MAX_GPU_STREAMS);
        return EXIT_ARENA;
    }
    nstreams = ta->max_stream + 1;
    streams = xcalloc(nstreams, sizeof *streams);
    void *ctx;
    gpuarena_status_t st = ga_cuda_primary_retain(ta->device, &ctx);
    if (st == GPUARENA_SUCCESS) {
        streams_device = ta->device;
        st = ga_cuda_set_current(ctx);
    }
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "%s: %s: cannot create a %s arena on device %d: %s: %s\n", prog, t->name,
                kind_name(opt_kind), ta->device, gpuarena_strerror(st), gpuarena_last_error());
        close_streams();
        return EXIT_ARENA;
    }
    for (uint32_t i = 1; i < nstreams; i++) {
        st = ga_cuda_stream_create(true, &streams[i]);
        if (st != GPUARENA_SUCCESS) {
            fprintf(stderr,
                    "%s: %s: cannot create CUDA stream %" PRIu32 " of %" PRIu32
                    " for the trace's streams: %s: %s\n",
                    prog, t->name, i, nstreams - 1, gpuarena_strerror(st), gpuarena_last_error());
            close_streams();
            return EXIT_ARENA;
        }
    }
    return 0;
}

/* Replay the events of TA through A.  CHECK: gpuarena_check after every
 * event; SR: reserved and requested bytes after every event.  Returns the
 * index of the failing event, or nevents on success; *NS the loop's time. */
static inline size_t loop(const ga_trace_t *t, const ga_trace_arena_t *ta, gpuarena_t *a,
                          void **ptrs, const bool check, series_t *sr, double *ns)
{
    const ga_trace_event_t *ev = ta->events;
    const size_t n = ta->nevents;
    double t0 = now_ns();
    size_t i;
    for (i = 0; i < n; i++) {
        const ga_trace_event_t *e = &ev[i];
        gpuarena_status_t st = GPUARENA_SUCCESS;
        switch (e->op) {
        case GA_TRACE_ALLOC:
            st = gpuarena_alloc(a, (size_t)e->size, event_stream(e), &ptrs[e->id]);
            break;
        case GA_TRACE_FREE:
            st = gpuarena_free(a, ptrs[e->id], event_stream(e));
            ptrs[e->id] = NULL;
            break;
        case GA_TRACE_RECORD:
            if (ptrs[e->id]) /* size 0 gave NULL: nothing to record */
                st = gpuarena_record_stream(a, ptrs[e->id], event_stream(e));
            break;
        }
        if (__builtin_expect(st != GPUARENA_SUCCESS, 0)) {
            report_failure(t, e, "failed", st);
            break;
        }
        if (check) {
            st = gpuarena_check(a);
            if (st != GPUARENA_SUCCESS) {
                report_failure(t, e, "broke an invariant", st);
                break;
            }
        }
        if (sr) {
            gpuarena_stats_t s;
            if (gpuarena_stats(a, &s) != GPUARENA_SUCCESS)
                s.reserved = s.requested = 0;
            sr->requested[i] = s.requested;
            sr->reserved[i] = s.reserved;
        }
    }
    *ns = now_ns() - t0;
    return i;
}

/* Free what the trace left live (on the stream of its allocation), then
 * destroy the arena.  False when the arena reports a problem. */
static bool finish(const ga_trace_t *t, const ga_trace_arena_t *ta, gpuarena_t *a, void **ptrs,
                   bool check)
{
    bool ok = true;
    for (size_t i = 0; i < ta->nevents; i++) {
        const ga_trace_event_t *e = &ta->events[i];
        if (e->op == GA_TRACE_ALLOC && ptrs[e->id]) {
            gpuarena_status_t st = gpuarena_free(a, ptrs[e->id], event_stream(e));
            ptrs[e->id] = NULL;
            if (st != GPUARENA_SUCCESS && ok) {
                report_failure(t, e, "could not be freed at the end", st);
                ok = false;
            }
        }
    }
    if (check && ok) {
        gpuarena_status_t st = gpuarena_check(a);
        if (st != GPUARENA_SUCCESS) {
            fprintf(stderr, "%s: %s: invariant broken after freeing everything: %s: %s\n", prog,
                    t->name, gpuarena_strerror(st), gpuarena_last_error());
            ok = false;
        }
    }
    gpuarena_status_t st = gpuarena_destroy(a);
    if (st != GPUARENA_SUCCESS) {
        fprintf(stderr, "%s: %s: the arena could not be destroyed: %s: %s\n", prog, t->name,
                gpuarena_strerror(st), gpuarena_last_error());
        ok = false;
    }
    return ok;
}

/* One run; returns 0 or an exit code. */
static int run_once(result_t *r, void **ptrs, bool inspect, double *ns, gpuarena_stats_t *st)
{
    const ga_trace_t *t = r->trace;
    const ga_trace_arena_t *ta = r->ta;
    gpuarena_t *a;
    /* The trace's device (up to 1023) names a GPU only for the GPU kinds:
     * host and sim arenas have none, and replay the trace of any one. */
    bool has_device = opt_kind != GPUARENA_HOST && opt_kind != GPUARENA_SIM;
    gpuarena_status_t s =
        gpuarena_create(opt_kind, has_device ? ta->device : 0, r->group->options, &a);
    if (s != GPUARENA_SUCCESS) {
        fprintf(stderr, "%s: cannot create a %s arena with options '%s': %s: %s\n", prog,
                kind_name(opt_kind), r->group->options, gpuarena_strerror(s),
                gpuarena_last_error());
        return EXIT_ARENA;
    }
    memset(ptrs, 0, (ta->nids ? ta->nids : 1) * sizeof *ptrs);
    size_t done;
    if (inspect)
        done = loop(t, ta, a, ptrs, opt_check, r->sr.requested ? &r->sr : NULL, ns);
    else
        done = loop(t, ta, a, ptrs, false, NULL, ns);
    bool ok = done == ta->nevents;
    if (gpuarena_stats(a, st) != GPUARENA_SUCCESS)
        memset(st, 0, sizeof *st);
    if (ok && inspect && opt_check) {
        uint64_t allocs = ta->nids - ta->nzero;
        if (st->requested_peak != ta->peak_requested || st->allocs != allocs) {
            fprintf(stderr,
                    "%s: %s: the arena counted a peak of %" PRIu64 " requested bytes and %" PRIu64
                    " allocations; the trace has %" PRIu64 " and %" PRIu64 "\n",
                    prog, t->name, st->requested_peak, st->allocs, ta->peak_requested, allocs);
            ok = false;
        }
    }
    if (!finish(t, ta, a, ptrs, inspect && opt_check))
        ok = false;
    return ok ? 0 : EXIT_REPLAY;
}

static int replay(result_t *r)
{
    const ga_trace_arena_t *ta = r->ta;
    int rc = open_streams(r->trace, ta);
    if (rc)
        return rc;
    void **ptrs = xcalloc(ta->nids ? ta->nids : 1, sizeof *ptrs);
    double *times = xcalloc((size_t)opt_runs, sizeof *times);
    if (opt_check || opt_plot) {
        gpuarena_stats_t st;
        double ns;
        if (opt_plot) {
            r->sr.n = ta->nevents;
            r->sr.requested = xcalloc(ta->nevents, sizeof *r->sr.requested);
            r->sr.reserved = xcalloc(ta->nevents, sizeof *r->sr.reserved);
        }
        rc = run_once(r, ptrs, true, &ns, &st);
    }
    for (int i = 0; rc == 0 && i < opt_runs; i++) {
        gpuarena_stats_t st;
        rc = run_once(r, ptrs, false, &times[i], &st);
        if (i == 0)
            r->st = st;
    }
    if (rc == 0) {
        qsort(times, (size_t)opt_runs, sizeof *times, cmp_double);
        double med = opt_runs % 2 ? times[opt_runs / 2]
                                  : (times[opt_runs / 2 - 1] + times[opt_runs / 2]) / 2;
        r->ns_per_event = ta->nevents ? med / (double)ta->nevents : 0;
        r->ok = true;
    }
    free(times);
    free(ptrs);
    close_streams();
    return rc;
}

/* ---- Output ------------------------------------------------------------- */

static double ratio(const result_t *r)
{
    return r->st.requested_peak ? (double)r->st.reserved_peak / (double)r->st.requested_peak : 0.0;
}

/* One table per trace arena: a row per figure, a column per group. */
static void print_table(const result_t *rs, size_t ngroups)
{
    const result_t *r0 = &rs[0];
    char lab[64], b[32];
    const char *al = arena_label(r0->trace, r0->ta, lab);
    printf("%s%s%s%s  (%s arena, %d run%s)\n", r0->trace->name, *al ? " [" : "", al, *al ? "]" : "",
           kind_name(opt_kind), opt_runs, opt_runs == 1 ? "" : "s");
    if (ngroups > 1 || *rs[0].group->label) {
        printf("  %-24s", "");
        for (size_t g = 0; g < ngroups; g++)
            printf(" %20.20s", rs[g].group->label);
        printf("\n");
    }
#define ROW(always, name, ...)                                                                     \
    do {                                                                                           \
        printf("  %-24s", name);                                                                   \
        for (size_t g = 0; g < ngroups; g++) {                                                     \
            const result_t *r = &rs[g];                                                            \
            char cell[48];                                                                         \
            if (!r->ok && !always)                                                                 \
                snprintf(cell, sizeof cell, "failed");                                             \
            else                                                                                   \
                snprintf(cell, sizeof cell, __VA_ARGS__);                                          \
            printf(" %20s", cell);                                                                 \
        }                                                                                          \
        printf("\n");                                                                              \
    } while (0)
    ROW(true, "events", "%zu", r->ta->nevents);
    ROW(true, "allocations", "%" PRIu32, r->ta->nids);
    ROW(false, "peak requested", "%s", human(r->st.requested_peak, b));
    ROW(false, "peak reserved", "%s", human(r->st.reserved_peak, b));
    ROW(false, "reserved/requested", "%.3f", ratio(r));
    ROW(false, "provider maps", "%" PRIu64, r->st.provider_maps);
    ROW(false, "provider unmaps", "%" PRIu64, r->st.provider_unmaps);
    ROW(false, "cross-stream waits", "%" PRIu64, r->st.cross_stream_waits);
    ROW(false, "ns per event", "%.1f", r->ns_per_event);
    ROW(false, "million events/s", "%.2f", r->ns_per_event > 0 ? 1e3 / r->ns_per_event : 0.0);
#undef ROW
    printf("\n");
}

static void print_json(const result_t *rs, size_t n)
{
    printf("{\"tool\":\"gpuarena-replay\",\"version\":\"%s\",\"kind\":\"%s\",\"runs\":%d,"
           "\"results\":[",
           PACKAGE_VERSION, kind_name(opt_kind), opt_runs);
    for (size_t i = 0; i < n; i++) {
        const result_t *r = &rs[i];
        printf("%s\n {\"trace\":", i ? "," : "");
        ga_json_string(stdout, r->trace->name);
        printf(",\"arena\":{\"kind\":\"%s\",\"device\":%d,\"instance\":%u},\"group\":",
               kind_name(r->ta->kind), r->ta->device, r->ta->instance);
        ga_json_string(stdout, r->group->label);
        printf(",\"options\":");
        ga_json_string(stdout, r->group->options);
        printf(",\"ok\":%s,\"events\":%zu,\"allocations\":%" PRIu32
               ",\"zero_size_allocations\":%" PRIu32 ",\"trace_peak_requested\":%" PRIu64,
               r->ok ? "true" : "false", r->ta->nevents, r->ta->nids, r->ta->nzero,
               r->ta->peak_requested);
        if (r->ok)
            printf(",\"peak_requested\":%" PRIu64 ",\"peak_reserved\":%" PRIu64
                   ",\"ratio\":%.6f,\"provider_maps\":%" PRIu64 ",\"provider_unmaps\":%" PRIu64
                   ",\"cross_stream_waits\":%" PRIu64 ",\"ns_per_event\":%.3f"
                   ",\"events_per_second\":%.0f",
                   r->st.requested_peak, r->st.reserved_peak, ratio(r), r->st.provider_maps,
                   r->st.provider_unmaps, r->st.cross_stream_waits, r->ns_per_event,
                   r->ns_per_event > 0 ? 1e9 / r->ns_per_event : 0.0);
        printf("}");
    }
    printf("\n]}\n");
}

/* ---- SVG plot ----------------------------------------------------------- */

#define SVG_W      960
#define SVG_PLOT_H 270 /* height of the plot area of a panel */
#define SVG_LEFT   90
#define SVG_RIGHT  30
#define SVG_TOP    40
#define SVG_AXIS   44 /* x tick labels and axis title below the plot */
#define SVG_ROW    17 /* one legend line */
#define SVG_POINTS 1200

static const char *const colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

/* S as XML character data.  Control characters other than tab and
 * newline are not XML at all (a file name may hold them): written as '?'.
 * Bytes that are not UTF-8 are written as U+FFFD (ga_json_utf8_len). */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80) {
            size_t len = ga_json_utf8_len(s);
            if (len) {
                fwrite(s, 1, len, f);
                s += len - 1;
            } else {
                fputs("\xef\xbf\xbd", f);
            }
            continue;
        }
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
            fputc('?', f);
            continue;
        }
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* A polyline of V over N events, as min and max of each bucket so that no
 * peak is lost to the downsampling. */
static void svg_line(FILE *f, const uint64_t *v, size_t n, double x0, double w, double y0, double h,
                     double ymax, const char *color, double width)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"", color,
            width);
    size_t step = (n + SVG_POINTS - 1) / SVG_POINTS;
    if (step == 0)
        step = 1;
    for (size_t i = 0; i < n; i += step) {
        size_t end = i + step < n ? i + step : n, imin = i, imax = i;
        for (size_t j = i; j < end; j++) {
            if (v[j] < v[imin])
                imin = j;
            if (v[j] > v[imax])
                imax = j;
        }
        size_t first = imin < imax ? imin : imax, second = imin < imax ? imax : imin;
        double x = x0 + (n > 1 ? w * (double)i / (double)(n - 1) : 0);
        fprintf(f, "%.1f,%.1f ", x, y0 + h - h * (double)v[first] / ymax);
        if (second != first)
            fprintf(f, "%.1f,%.1f ", x, y0 + h - h * (double)v[second] / ymax);
    }
    fprintf(f, "\"/>\n");
}

/* Index of the largest value (the first, on ties). */
static size_t argmax(const uint64_t *v, size_t n)
{
    size_t ip = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[ip])
            ip = i;
    return ip;
}

/* A circle on the peak and a dashed line down to the x axis. */
static void svg_peak(FILE *f, const uint64_t *v, size_t n, double x0, double w, double y0, double h,
                     double ymax, const char *color)
{
    size_t ip = argmax(v, n);
    double x = x0 + (n > 1 ? w * (double)ip / (double)(n - 1) : 0);
    double y = y0 + h - h * (double)v[ip] / ymax;
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-dasharray=\"3,3\"/>\n"
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" stroke=\"%s\" "
            "stroke-width=\"2\"/>\n",
            x, y, x, y0 + h, color, x, y, color);
}

/* Round tick step: 1, 2 or 5 times a power of ten, in units of 1024^k. */
static void nice_ticks(uint64_t ymax, double *step, double *unit, const char **uname)
{
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    double u = 1;
    while (k < 5 && (double)ymax / u >= 1024) {
        u *= 1024;
        k++;
    }
    double raw = (double)ymax / u / 4, p = 1;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw && p > 1e-3)
        p /= 10;
    double m = raw / p;
    *step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p * u;
    *unit = u;
    *uname = names[k];
}

static int write_plot(const char *path, const result_t *rs, size_t nres, size_t ngroups)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot write the plot: ", prog, path);
        perror(NULL);
        return EXIT_OUTPUT;
    }
    size_t npanels = nres / ngroups;
    size_t panel = SVG_TOP + SVG_PLOT_H + SVG_AXIS + SVG_ROW * (ngroups + 1) + 20;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%zu\" "
            "viewBox=\"0 0 %d %zu\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_W, npanels * panel, SVG_W, npanels * panel);
    for (size_t p = 0; p < npanels; p++) {
        /* The requested bytes and the number of events are the same in
         * every group's replay: they are drawn from the first group that
         * replayed (with --compare, the first may have failed and the
         * others not). */
        const result_t *g0 = &rs[p * ngroups];
        for (size_t g = 0; g < ngroups; g++) {
            const result_t *r = &rs[p * ngroups + g];
            if (r->ok && r->sr.n) {
                g0 = r;
                break;
            }
        }
        double x0 = SVG_LEFT, w = SVG_W - SVG_LEFT - SVG_RIGHT;
        double y0 = (double)(p * panel) + SVG_TOP, h = SVG_PLOT_H;
        size_t n = g0->sr.n;
        uint64_t ymax = 1;
        for (size_t g = 0; g < ngroups; g++) {
            const series_t *sr = &rs[p * ngroups + g].sr;
            for (size_t i = 0; i < sr->n; i++) {
                if (sr->reserved[i] > ymax)
                    ymax = sr->reserved[i];
                if (sr->requested[i] > ymax)
                    ymax = sr->requested[i];
            }
        }
        double step, unit;
        const char *uname;
        nice_ticks(ymax, &step, &unit, &uname);
        int nticks = (int)((double)ymax / step) + 1;
        double ym = step * nticks;
        char lab[64], b[32];
        const char *al = arena_label(g0->trace, g0->ta, lab);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", x0,
                y0 - 16);
        xml_text(f, g0->trace->name);
        if (*al) {
            fputs(" [", f);
            xml_text(f, al);
            fputs("]", f);
        }
        fprintf(f, " (%s arena)</text>\n", kind_name(opt_kind));
        /* Axes and ticks. */
        for (int k = 0; k <= nticks; k++) {
            double yy = y0 + h - h * k / (double)nticks;
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n"
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g %s"
                    "</text>\n",
                    x0, yy, x0 + w, yy, x0 - 6, yy + 4, step * k / unit, k ? uname : "");
        }
        for (int k = 0; k <= 4; k++) {
            double xx = x0 + w * k / 4.0;
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%zu"
                    "</text>\n",
                    xx, y0 + h + 16, n > 1 ? (size_t)((double)(n - 1) * k / 4.0) : (size_t)0);
        }
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                "stroke=\"#888\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">event"
                "</text>\n",
                x0, y0, w, h, x0 + w / 2, y0 + h + 32);
        if (!g0->ok || n == 0) {
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\">%s</text>\n", x0 + 20, y0 + 30,
                    g0->ta->nevents == 0 ? "no events" : "replay failed");
            continue;
        }
        /* Reserved bytes of each group, then requested on top (the same
         * for every group), then the peaks. */
        for (size_t g = 0; g < ngroups; g++) {
            const result_t *r = &rs[p * ngroups + g];
            if (r->ok && r->sr.n)
                svg_line(f, r->sr.reserved, r->sr.n, x0, w, y0, h, ym, colors[g % 8], 1.5);
        }
        svg_line(f, g0->sr.requested, n, x0, w, y0, h, ym, "#222", 1.0);
        for (size_t g = 0; g < ngroups; g++) {
            const result_t *r = &rs[p * ngroups + g];
            if (r->ok && r->sr.n)
                svg_peak(f, r->sr.reserved, r->sr.n, x0, w, y0, h, ym, colors[g % 8]);
        }
        svg_peak(f, g0->sr.requested, n, x0, w, y0, h, ym, "#222");
        /* Legend below the axis, with the peaks in words. */
        double lx = x0, ly = y0 + h + SVG_AXIS + 6;
        size_t ip = argmax(g0->sr.requested, n);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">requested: "
                "peak %s at event %zu</text>\n",
                lx, ly, lx + 24, ly, lx + 30, ly + 4, human(g0->sr.requested[ip], b), ip);
        for (size_t g = 0; g < ngroups; g++) {
            const result_t *r = &rs[p * ngroups + g];
            ly += SVG_ROW;
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                    "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">reserved",
                    lx, ly, lx + 24, ly, colors[g % 8], lx + 30, ly + 4);
            if (*r->group->label) {
                fputs(" (", f);
                xml_text(f, r->group->label);
                fputs(")", f);
            }
            if (r->ok && r->sr.n) {
                size_t jp = argmax(r->sr.reserved, r->sr.n);
                fprintf(f, ": peak %s at event %zu, %.3f times the peak requested",
                        human(r->sr.reserved[jp], b), jp, ratio(r));
            } else {
                fputs(": replay failed", f);
            }
            fputs("</text>\n", f);
        }
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: %s: cannot write the plot\n", prog, path);
        return EXIT_OUTPUT;
    }
    return 0;
}

/* ---- Command line ------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [-a sim|host|device|pinned|managed] [-o KEY=VALUE[,...]]... [--check]\n"
            "       [--json] [--runs N] [--plot FILE.svg] [--compare [LABEL:]KEY=VALUE[,...]]...\n"
            "       TRACE...\n"
            "Replay gpuarena-trace files through fresh arenas and report peak requested and\n"
            "reserved bytes, their ratio, provider maps and unmaps, cross-stream waits and\n"
            "nanoseconds per event.  See gpuarena-replay(1).\n"
            "  -a, --arena KIND      arena kind to replay into (default sim)\n"
            "  -o, --option K=V      setting for every replay (gpuarena.conf(5) keys)\n"
            "  -c, --compare GROUP   a column of settings; repeat it, or separate groups\n"
            "                        with ';' (\"expandable=false;expandable=true\")\n"
            "      --check           check invariants after every event\n"
            "      --json            print JSON\n"
            "  -n, --runs N          timed runs, the median is reported (default 5)\n"
            "      --plot FILE.svg   plot requested and reserved bytes over the events\n"
            "  -h, --help            this text\n"
            "  -V, --version         the version\n"
            "Exit: 0 ok, 1 a replay failed, 2 usage, 3 bad trace, 4 bad arena or settings,\n"
            "      5 the plot could not be written.\n",
            prog);
}

static void append_option(char **dst, const char *s)
{
    size_t a = *dst ? strlen(*dst) : 0, b = strlen(s);
    char *p = xcalloc(a + b + 2, 1);
    if (a) {
        memcpy(p, *dst, a);
        p[a++] = ',';
    }
    memcpy(p + a, s, b + 1);
    free(*dst);
    *dst = p;
}

/* Split ARG on ';' into groups "LABEL:settings" or "settings". */
static void add_groups(group_t **groups, size_t *n, const char *arg)
{
    const char *s = arg;
    for (;;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        group_t g;
        char *text = xcalloc(len + 1, 1);
        memcpy(text, s, len);
        const char *colon = strchr(text, ':'), *eq = strchr(text, '=');
        if (colon && (!eq || colon < eq)) {
            g.label = xcalloc((size_t)(colon - text) + 1, 1);
            memcpy(g.label, text, (size_t)(colon - text));
            g.options = xstrdup(colon + 1);
        } else {
            g.label = xstrdup(*text ? text : "defaults");
            g.options = xstrdup(text);
        }
        free(text);
        *groups = realloc(*groups, (*n + 1) * sizeof **groups);
        if (!*groups) {
            fprintf(stderr, "%s: out of memory\n", prog);
            exit(EXIT_REPLAY);
        }
        (*groups)[(*n)++] = g;
        if (!end)
            break;
        s = end + 1;
    }
}

/* Free the groups and the common settings; RC. */
static int free_groups(int rc, char *common, group_t *groups, size_t n)
{
    for (size_t g = 0; g < n; g++) {
        free(groups[g].label);
        free(groups[g].options);
    }
    free(groups);
    free(common);
    return rc;
}

static int run(int argc, char **argv)
{
    enum { OPT_CHECK = 256, OPT_JSON, OPT_PLOT };
    static const struct option longopts[] = {
        {"arena", required_argument, NULL, 'a'},     {"option", required_argument, NULL, 'o'},
        {"compare", required_argument, NULL, 'c'},   {"check", no_argument, NULL, OPT_CHECK},
        {"json", no_argument, NULL, OPT_JSON},       {"runs", required_argument, NULL, 'n'},
        {"plot", required_argument, NULL, OPT_PLOT}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0}};
    char *common = NULL;
    group_t *groups = NULL;
    size_t ngroups = 0;
    int c;
    while ((c = getopt_long(argc, argv, "a:o:c:n:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'a': {
            int k = ga_trace_kind_from_name(optarg, strlen(optarg));
            if (k < 0) {
                fprintf(stderr,
                        "%s: unknown arena kind '%s' (sim, host, device, pinned, "
                        "managed)\n",
                        prog, optarg);
                return free_groups(EXIT_USAGE, common, groups, ngroups);
            }
            opt_kind = (gpuarena_kind_t)k;
            break;
        }
        case 'o':
            append_option(&common, optarg);
            break;
        case 'c':
            add_groups(&groups, &ngroups, optarg);
            break;
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || v > 1000) {
                fprintf(stderr, "%s: --runs takes a number from 1 to 1000, not '%s'\n", prog,
                        optarg);
                return free_groups(EXIT_USAGE, common, groups, ngroups);
            }
            opt_runs = (int)v;
            break;
        }
        case OPT_CHECK:
            opt_check = true;
            break;
        case OPT_JSON:
            opt_json = true;
            break;
        case OPT_PLOT:
            opt_plot = optarg;
            break;
        case 'h':
            usage(stdout);
            return free_groups(0, common, groups, ngroups);
        case 'V':
            printf("gpuarena-replay %s\n", PACKAGE_VERSION);
            return free_groups(0, common, groups, ngroups);
        default:
            usage(stderr);
            return free_groups(EXIT_USAGE, common, groups, ngroups);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no trace given\n", prog);
        usage(stderr);
        return free_groups(EXIT_USAGE, common, groups, ngroups);
    }
    if (ngroups == 0)
        add_groups(&groups, &ngroups, "");
    if (ngroups == 1 && !strcmp(groups[0].label, "defaults") && !*groups[0].options)
        groups[0].label[0] = '\0';
    for (size_t g = 0; g < ngroups; g++) {
        char *o = NULL;
        if (common)
            append_option(&o, common);
        if (*groups[g].options)
            append_option(&o, groups[g].options);
        free(groups[g].options);
        groups[g].options = o ? o : xstrdup("");
    }
    free(common);

    /* Parse every trace before anything is timed. */
    int ntraces = argc - optind, rc = 0;
    ga_trace_t **traces = xcalloc((size_t)ntraces, sizeof *traces);
    size_t nres = 0;
    for (int i = 0; i < ntraces; i++) {
        const char *path = argv[optind + i];
        gpuarena_status_t st = ga_trace_load(path, &traces[i]);
        if (st != GPUARENA_SUCCESS) {
            fprintf(stderr, "%s: %s\n", prog, gpuarena_last_error());
            if (strchr(path, '=') && st == GPUARENA_ERR_SYSTEM)
                fprintf(stderr,
                        "%s: (settings go with -o or --compare, one group per "
                        "--compare or separated by ';')\n",
                        prog);
            rc = EXIT_TRACE;
            continue;
        }
        nres += traces[i]->narenas * ngroups;
    }
    result_t *rs = xcalloc(nres, sizeof *rs);
    /* The results made, which the report and the plot read: all NRES,
     * counted as they are made (the static analyzer cannot tell that the
     * loop below makes every one). */
    size_t made = 0;
    if (rc == 0) {
        for (int i = 0; i < ntraces; i++) {
            if (traces[i]->narenas == 0 && !opt_json) /* a header and nothing else */
                printf("%s  (no events: nothing to replay)\n\n", argv[optind + i]);
            for (size_t j = 0; j < traces[i]->narenas; j++)
                for (size_t g = 0; g < ngroups; g++, made++) {
                    rs[made].trace = traces[i];
                    rs[made].ta = &traces[i]->arenas[j];
                    rs[made].group = &groups[g];
                    int r = replay(&rs[made]);
                    if (r > rc)
                        rc = r;
                    if (!opt_json && g == ngroups - 1)
                        print_table(&rs[made + 1 - ngroups], ngroups);
                }
        }
        if (opt_json)
            print_json(rs, made);
        if (opt_plot && !made) {
            fprintf(stderr, "%s: %s: nothing to plot: the traces hold no events\n", prog, opt_plot);
            rc = EXIT_OUTPUT;
        } else if (opt_plot) {
            int r = write_plot(opt_plot, rs, made, ngroups);
            if (r > rc)
                rc = r;
        }
    }
    for (size_t k = 0; k < nres; k++) {
        free(rs[k].sr.requested);
        free(rs[k].sr.reserved);
    }
    free(rs);
    for (int i = 0; i < ntraces; i++)
        ga_trace_free(traces[i]);
    free(traces);
    return free_groups(rc, NULL, groups, ngroups);
}

int main(int argc, char **argv)
{
    return ga_tool_main(prog, run, argc, argv, EXIT_OUTPUT);
}
