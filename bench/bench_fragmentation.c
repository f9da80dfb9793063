/*
 * bench_fragmentation.c - fragmentation and replay speed on the shipped
 * traces, next to what PyTorch's allocator did with the same programs.
 *
 *   bench_fragmentation [TRACE...]    (default: every shipped trace)
 *
 * Each trace is replayed through the sim arena with fixed segments
 * (expandable=false) and with growable segments (expandable=true), and the
 * peak reserved / peak requested ratio and the provider maps are printed
 * beside PyTorch's default and expandable_segments figures
 * (tests/data/README.md).  Then each trace is replayed RUNS times with the
 * default settings and the median speed is printed in events per second
 * (target: 10 million or more).  Only the loop over the events is timed.
 */
#include "gpuarena.h"
#include "trace/trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef GA_TRACE_DIR
#define GA_TRACE_DIR "tests/data"
#endif
#define RUNS 7

static const struct {
    const char *name;
    double fixed, expandable;
    int fixed_maps, expandable_maps;
} pytorch[] = {
    {"resnet50_train", 1.206, 1.017, 110, 117},
    {"gpt2_train", 1.137, 1.039, 200, 208},
    {"gpt2_generate_varlen", 1.312, 1.069, 63, 58},
    {"multistream_resnet18", 1.757, 1.054, 46, 38},
};
#define NPT (sizeof pytorch / sizeof pytorch[0])

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

/* Trace stream N is the value N, which the sim arena takes as a stream;
 * an event with no stream ("-") is replayed with GPUARENA_STREAM_HOST. */
static gpuarena_stream_t event_stream(const ga_trace_event_t *e)
{
    return e->no_stream ? GPUARENA_STREAM_HOST : (gpuarena_stream_t)(uintptr_t)e->stream;
}

/* Replay TA once through a new sim arena with OPTIONS; 0 on success. */
static int replay(const ga_trace_arena_t *ta, const char *options, gpuarena_stats_t *st, double *ns)
{
    gpuarena_t *a;
    gpuarena_status_t s = gpuarena_create(GPUARENA_SIM, 0, options, &a);
    if (s != GPUARENA_SUCCESS) {
        fprintf(stderr, "sim arena with '%s': %s: %s\n", options, gpuarena_strerror(s),
                gpuarena_last_error());
        return -1;
    }
    void **ptrs = calloc(ta->nids ? ta->nids : 1, sizeof *ptrs);
    if (!ptrs)
        abort();
    int rc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < ta->nevents; i++) {
        const ga_trace_event_t *e = &ta->events[i];
        gpuarena_stream_t stream = event_stream(e);
        if (e->op == GA_TRACE_ALLOC) {
            s = gpuarena_alloc(a, (size_t)e->size, stream, &ptrs[e->id]);
        } else if (e->op == GA_TRACE_FREE) {
            s = gpuarena_free(a, ptrs[e->id], stream);
            ptrs[e->id] = NULL;
        } else if (ptrs[e->id]) {
            s = gpuarena_record_stream(a, ptrs[e->id], stream);
        }
        if (s != GPUARENA_SUCCESS) {
            fprintf(stderr, "line %" PRIu32 ": %s: %s\n", e->line, gpuarena_strerror(s),
                    gpuarena_last_error());
            rc = -1;
            break;
        }
    }
    *ns = now_ns() - t0;
    if (gpuarena_stats(a, st) != GPUARENA_SUCCESS)
        memset(st, 0, sizeof *st);
    for (size_t i = 0; i < ta->nevents; i++) {
        const ga_trace_event_t *e = &ta->events[i];
        if (e->op == GA_TRACE_ALLOC && ptrs[e->id]) {
            (void)gpuarena_free(a, ptrs[e->id], event_stream(e));
            ptrs[e->id] = NULL;
        }
    }
    free(ptrs);
    gpuarena_destroy(a);
    return rc;
}

static double ratio(const gpuarena_stats_t *st)
{
    return st->requested_peak ? (double)st->reserved_peak / (double)st->requested_peak : 0;
}

int main(int argc, char **argv)
{
    const char *defaults[NPT];
    char paths[NPT][512];
    int n = argc - 1;
    char **files = argv + 1;
    if (n == 0) {
        for (size_t i = 0; i < NPT; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/%s.trace", GA_TRACE_DIR, pytorch[i].name);
            defaults[i] = paths[i];
        }
        n = (int)NPT;
        files = (char **)defaults;
    }
    printf("gpuarena %s, sim arena; PyTorch 2.11 figures from tests/data/README.md (H200)\n\n",
           gpuarena_version());
    printf("%-22s %10s | %-24s | %-24s | %9s\n", "", "peak", "fixed segments", "growable segments",
           "replay");
    printf("%-22s %10s | %7s %7s %8s | %7s %7s %8s | %9s\n", "trace", "requested", "ratio",
           "PyTorch", "maps/PT", "ratio", "PyTorch", "maps/PT", "M ev/s");
    int status = 0;
    double total_ev = 0, total_ns = 0;
    for (int f = 0; f < n; f++) {
        ga_trace_t *t;
        if (ga_trace_load(files[f], &t) != GPUARENA_SUCCESS) {
            fprintf(stderr, "%s\n", gpuarena_last_error());
            status = 1;
            continue;
        }
        const char *base = strrchr(files[f], '/');
        base = base ? base + 1 : files[f];
        const ga_trace_arena_t *ta = &t->arenas[0];
        int k = -1;
        for (size_t i = 0; i < NPT; i++)
            if (strncmp(base, pytorch[i].name, strlen(pytorch[i].name)) == 0 &&
                strcmp(base + strlen(pytorch[i].name), ".trace") == 0)
                k = (int)i;
        gpuarena_stats_t fx, gr, df;
        double ns, times[RUNS];
        bool okf = t->narenas && replay(ta, "expandable=false", &fx, &ns) == 0;
        bool okg = t->narenas && replay(ta, "expandable=true", &gr, &ns) == 0;
        bool okd = t->narenas != 0;
        for (int r = 0; okd && r < RUNS; r++)
            okd = replay(ta, "", &df, &times[r]) == 0;
        char cf[40] = "failed", cg[40] = "failed", cs[16] = "failed";
        char pf[16] = "-", pg[16] = "-", mf[16] = "", mg[16] = "";
        if (k >= 0) {
            snprintf(pf, sizeof pf, "%.3f", pytorch[k].fixed);
            snprintf(pg, sizeof pg, "%.3f", pytorch[k].expandable);
        }
        if (okf) {
            snprintf(cf, sizeof cf, "%.3f", ratio(&fx));
            snprintf(mf, sizeof mf, "%" PRIu64 "/%d", fx.provider_maps,
                     k >= 0 ? pytorch[k].fixed_maps : 0);
        }
        if (okg) {
            snprintf(cg, sizeof cg, "%.3f", ratio(&gr));
            snprintf(mg, sizeof mg, "%" PRIu64 "/%d", gr.provider_maps,
                     k >= 0 ? pytorch[k].expandable_maps : 0);
        }
        if (okd) {
            qsort(times, RUNS, sizeof times[0], cmp_double);
            snprintf(cs, sizeof cs, "%.2f", (double)ta->nevents / times[RUNS / 2] * 1e3);
            total_ev += (double)ta->nevents;
            total_ns += times[RUNS / 2];
        }
        printf("%-22.22s %6.3f GiB | %7s %7s %8s | %7s %7s %8s | %9s\n", base,
               (double)ta->peak_requested / (1 << 30), cf, pf, mf, cg, pg, mg, cs);
        if (!okf || !okg || !okd)
            status = 1;
        ga_trace_free(t);
    }
    if (total_ns > 0)
        printf("\nall traces: %.0f events in %.3f ms: %.2f million events/s (%.1f ns/event; "
               "median of %d runs each, default settings)\n",
               total_ev, total_ns / 1e6, total_ev / total_ns * 1e3, total_ns / total_ev, RUNS);
    printf("ratio: peak reserved / peak requested (1.000 is perfect); maps/PT: provider maps "
           "here / driver allocations or maps of PyTorch\n");
    return status;
}
