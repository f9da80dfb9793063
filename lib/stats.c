/*
 * stats.c - gpuarena_stats_print(): the statistics of every live arena,
 * as a table for people (sizes in binary units, one block per arena, the
 * way jemalloc's malloc_stats_print reads) or as JSON for programs (opts
 * containing 'j'; every field of gpuarena_stats_t, bytes as integers),
 * then the totals of each kind and device (gpuarena_stats_total(3)).
 */
#include "config.h"

#include "arena.h"
#include "config/config.h"
#include "errors.h"
#include "json.h"
#include "outpath.h"
#include "sigpipe.h"
#include "topo/topo.h"
#include "totals.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct print_ctx {
    FILE *out;
    bool json;
    int n;
} print_ctx_t;

/* "1.50 GiB": three significant digits, binary units. */
static const char *human(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double d = (double)v;
    unsigned u = 0;
    while (d >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        d /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 " B", v);
    else
        snprintf(buf, len, "%.*f %s", d < 10 ? 2 : d < 100 ? 1 : 0, d, units[u]);
    return buf;
}

/* Room for any node list of ga_topo_nodes_string: a buffer of 32 cut a
 * list of 16 nodes at node 12, silently. */
#define NODES_TEXT 200

/* How A's memory is made (its provider's `how'), or NULL.  A provider may
 * replace the line while the arena runs (device.c). */
static const char *memory_line(const gpuarena_t *a)
{
    return __atomic_load_n(&a->prov->how, __ATOMIC_ACQUIRE);
}

static void print_table(FILE *out, gpuarena_t *a, const gpuarena_stats_t *st)
{
    char b1[32], b2[32];
    if (ga_provider_is_direct(a->prov))
        fprintf(out, "arena %s.%d (the driver's stream-ordered pool)\n", ga_kind_name(a->kind),
                a->device);
    else
        fprintf(out, "arena %s.%d (%s segments)\n", ga_kind_name(a->kind), a->device,
                a->prov->growable && a->settings.expandable ? "growable" : "fixed");
    fprintf(out, "  %-10s %12s %12s\n", "bytes", "current", "peak");
    const struct {
        const char *name;
        uint64_t cur, peak;
    } rows[] = {
        {"requested", st->requested, st->requested_peak},
        {"in use", st->in_use, st->in_use_peak},
        {"reserved", st->reserved, st->reserved_peak},
        {"cached", st->cached, st->cached_peak},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        fprintf(out, "  %-10s %12s %12s\n", rows[i].name, human(rows[i].cur, b1, sizeof b1),
                human(rows[i].peak, b2, sizeof b2));
    uint64_t tries = st->cache_hits + st->cache_misses;
    fprintf(out,
            "  allocs %" PRIu64 ", frees %" PRIu64 ", live blocks %" PRIu64 ", cache hits %" PRIu64
            " (%.1f%%), misses %" PRIu64 "\n",
            st->allocs, st->frees, st->live_blocks, st->cache_hits,
            tries ? 100.0 * (double)st->cache_hits / (double)tries : 0.0, st->cache_misses);
    fprintf(out,
            "  segments %" PRIu64 ", free blocks %" PRIu64 ", pending frees %" PRIu64
            ", provider maps %" PRIu64 ", unmaps %" PRIu64 ", trims %" PRIu64 "\n",
            st->segments, st->free_blocks, st->pending_frees, st->provider_maps,
            st->provider_unmaps, st->trims);
    fprintf(out, "  events recorded %" PRIu64 ", cross-stream waits %" PRIu64 "\n",
            st->events_recorded, st->cross_stream_waits);
    if (st->stream_pools || st->retired_cached)
        fprintf(out,
                "  streams %" PRIu64 ": cached for their stream only %s, for none until a trim "
                "%s\n",
                st->stream_pools, human(st->stream_cached, b1, sizeof b1),
                human(st->retired_cached, b2, sizeof b2));
    if (st->deferred_frees)
        fprintf(out,
                "  frees kept until a CUDA graph capture ends %" PRIu64
                " (framework hooks; their blocks count as live)\n",
                st->deferred_frees);
    size_t max_cached, max_reserved;
    ga_bm_caps(a->bm, &max_cached, &max_reserved);
    if (max_cached != SIZE_MAX || max_reserved != SIZE_MAX)
        fprintf(out, "  caps: max_cached %s, max_reserved %s\n",
                max_cached == SIZE_MAX ? "none" : human(max_cached, b1, sizeof b1),
                max_reserved == SIZE_MAX ? "none" : human(max_reserved, b2, sizeof b2));
    if (st->oom_retries || st->oom_failures) {
        fprintf(out, "  out of memory: retries %" PRIu64 ", failures %" PRIu64 ", last request %s",
                st->oom_retries, st->oom_failures, human(st->last_oom_request, b1, sizeof b1));
        /* Host memory has no device; a sim arena, only with a capacity
         * (which may be all taken: 0 free is an answer). */
        if (a->kind == GPUARENA_DEVICE || (a->kind == GPUARENA_SIM && a->settings.sim_capacity))
            fprintf(out, ", free on the device then %s", human(st->device_free, b2, sizeof b2));
        fputc('\n', out);
    }
    if (a->kind == GPUARENA_HOST || a->kind == GPUARENA_PINNED) {
        char nodes[NODES_TEXT];
        if (!*ga_topo_nodes_string(st->numa_nodes, nodes, sizeof nodes))
            snprintf(nodes, sizeof nodes, "none");
        if (a->settings.numa == GA_NUMA_LOCAL)
            fprintf(out, "  NUMA placement local (first touch: gpuarena.conf(5))\n");
        else
            fprintf(out, "  NUMA nodes %s%s\n", nodes,
                    st->numa_fallbacks ? " (locality unknown: interleaved over plain memory)" : "");
        if (st->numa_unbound)
            fprintf(out,
                    "  NUMA binding not made, or made to only some of the nodes, for %" PRIu64
                    " segments (refused by the system, nodes this machine lacks, or not this "
                    "machine's topology: gpuarena_stats(3)): their pages are on the nodes left, "
                    "or where the kernel put them\n",
                    st->numa_unbound);
    }
    const char *how = memory_line(a);
    if (how)
        fprintf(out, "  memory: %s\n", how);
    if (a->kind == GPUARENA_MANAGED)
        fprintf(out,
                "  prefetches %" PRIu64 ", skipped %" PRIu64 "; advice applied %" PRIu64
                ", skipped %" PRIu64 "\n",
                st->prefetches, st->prefetches_skipped, st->advice_applied, st->advice_skipped);
}

static void print_json(FILE *out, gpuarena_t *a, const gpuarena_stats_t *st, bool first)
{
    fprintf(out, "%s\n    {\"kind\": \"%s\", \"device\": %d", first ? "" : ",",
            ga_kind_name(a->kind), a->device);
#define F(name) fprintf(out, ", \"" #name "\": %" PRIu64, st->name)
    F(requested);
    F(requested_peak);
    F(in_use);
    F(in_use_peak);
    F(reserved);
    F(reserved_peak);
    F(cached);
    F(cached_peak);
    F(allocs);
    F(frees);
    F(cache_hits);
    F(cache_misses);
    F(provider_maps);
    F(provider_unmaps);
    F(cross_stream_waits);
    F(oom_retries);
    F(oom_failures);
    F(last_oom_request);
    F(segments);
    F(live_blocks);
    F(free_blocks);
    F(pending_frees);
    F(events_recorded);
    F(trims);
    F(numa_nodes);
    F(numa_fallbacks);
    F(prefetches);
    F(prefetches_skipped);
    F(advice_applied);
    F(advice_skipped);
    F(device_free);
    F(stream_pools);
    F(stream_cached);
    F(retired_cached);
    F(deferred_frees);
    F(numa_unbound);
#undef F
    /* The caps, null when there is none. */
    size_t caps[2];
    ga_bm_caps(a->bm, &caps[0], &caps[1]);
    static const char *const cap_names[2] = {"max_cached", "max_reserved"};
    for (int i = 0; i < 2; i++) {
        if (caps[i] == SIZE_MAX)
            fprintf(out, ", \"%s\": null", cap_names[i]);
        else
            fprintf(out, ", \"%s\": %zu", cap_names[i], caps[i]);
    }
    /* Null where the provider says nothing. */
    const char *how = memory_line(a);
    fputs(", \"memory\": ", out);
    if (how)
        ga_json_string(out, how); /* may quote a driver's message */
    else
        fputs("null", out);
    fputs("}", out);
}

static void print_one(gpuarena_t *a, void *arg)
{
    print_ctx_t *c = arg;
    gpuarena_stats_t st;
    if (gpuarena_stats(a, &st) != GPUARENA_SUCCESS)
        return;
    if (c->json)
        print_json(c->out, a, &st, c->n == 0);
    else
        print_table(c->out, a, &st);
    c->n++;
}

/* The totals that count an arena now or once did. */
static void print_totals(FILE *out, bool json)
{
    bool first = true;
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++) {
        for (int d = 0; d < GA_MAX_DEVICES; d++) {
            gpuarena_total_t t;
            if (!ga_total_read((gpuarena_kind_t)k, d, &t))
                continue;
            const char *kind = ga_kind_name((gpuarena_kind_t)k);
            if (json) {
                fprintf(out,
                        "%s\n    {\"kind\": \"%s\", \"device\": %d, \"arenas\": %" PRIu64
                        ", \"reserved\": %" PRIu64 ", \"reserved_peak\": %" PRIu64 "}",
                        first ? "" : ",", kind, d, t.arenas, t.reserved, t.reserved_peak);
            } else {
                char b1[32], b2[32];
                if (first)
                    fprintf(out, "all arenas of a kind and device\n  %-10s %6s %12s %12s\n", "",
                            "arenas", "reserved", "peak");
                char name[32];
                snprintf(name, sizeof name, "%s.%d", kind, d);
                fprintf(out, "  %-10s %6" PRIu64 " %12s %12s\n", name, t.arenas,
                        human(t.reserved, b1, sizeof b1), human(t.reserved_peak, b2, sizeof b2));
            }
            first = false;
        }
    }
}

/* The whole report to OUT. */
static void print_report(FILE *out, bool json)
{
    print_ctx_t c = {out, json, 0};
    if (json)
        fprintf(out, "{\"version\": \"%s\", \"pid\": %ld, \"rank\": %s, \"arenas\": [",
                PACKAGE_VERSION, (long)getpid(), ga_output_rank());
    else
        fprintf(out, "gpuarena %s statistics (pid %ld, rank %s)\n", PACKAGE_VERSION, (long)getpid(),
                ga_output_rank());
    ga_arena_foreach(print_one, &c);
    if (json) {
        fputs("\n  ], \"totals\": [", out);
        print_totals(out, true);
        fputs("\n  ]}\n", out);
    } else {
        if (!c.n)
            fputs("no arena\n", out);
        print_totals(out, false);
    }
}

gpuarena_status_t gpuarena_stats_print(FILE *out, const char *opts)
{
    if (!out)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_stats_print: out is NULL");
    bool json = opts && strchr(opts, 'j');
    /* The report is written into memory while the list of arenas is
     * held, and to OUT after, in one write under OUT's lock: a write
     * that blocks (a pipe nobody reads, an MPI launcher's stderr) held
     * up every arena's creation and destruction, and fork; and two
     * reports at once on one stream (threads, the signal report on
     * stderr) interleaved into text that no longer read as JSON.  Straight
     * to OUT where there is no memory for the text. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *mem = open_memstream(&text, &text_len);
    errno = 0; /* a failed write's errno is the one reported */
    bool ok = false;
    if (mem) {
        print_report(mem, json);
        /* A write the memory stream could not grow for is lost without
         * a word (glibc: the writes and the close succeed, the text is
         * short or NULL): the report is then made again straight to OUT,
         * as where there was no stream at all. */
        long written = ftell(mem);
        ok = !ferror(mem) && written >= 0;
        ok &= fclose(mem) == 0;
        ok = ok && text && text_len == (size_t)written;
    }
    /* OUT may be a pipe whose reader has gone: the write fails with EPIPE
     * rather than kill the program (sigpipe.c), the report at exit
     * (GPUARENA_STATS=stderr under `prog 2>&1 | head`) among others. */
    ga_sigpipe_t h;
    ga_sigpipe_hold(&h);
    if (ok) {
        flockfile(out);
        fwrite(text, 1, text_len, out);
        funlockfile(out);
    }
    free(text);
    if (!ok)
        print_report(out, json);
    bool flushed = fflush(out) == 0 && !ferror(out);
    ga_sigpipe_release(&h);
    if (flushed)
        return GPUARENA_SUCCESS;
    int err = errno ? errno : EIO;
    return ga_error(GPUARENA_ERR_SYSTEM, "gpuarena_stats_print: cannot write: %s", strerror(err));
}
