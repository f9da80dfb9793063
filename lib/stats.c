/*
 * stats.c - gpuarena_stats_print(): every arena's statistics as a table for
 * people or as JSON for programs (opts containing 'j').
 */
#include "arena.h"
#include "config/config.h"
#include "errors.h"

#include <inttypes.h>
#include <string.h>

typedef struct print_ctx {
    FILE *out;
    bool json;
    int n;
} print_ctx_t;

static void print_one(gpuarena_t *a, void *arg)
{
    print_ctx_t *c = arg;
    gpuarena_stats_t st;
    if (gpuarena_stats(a, &st) != GPUARENA_SUCCESS)
        return;
    if (c->json) {
        fprintf(c->out,
                "%s\n  {\"kind\": \"%s\", \"device\": %d, \"requested\": %" PRIu64
                ", \"requested_peak\": %" PRIu64 ", \"in_use\": %" PRIu64
                ", \"in_use_peak\": %" PRIu64 ", \"reserved\": %" PRIu64
                ", \"reserved_peak\": %" PRIu64 ", \"cached\": %" PRIu64 ", \"allocs\": %" PRIu64
                ", \"frees\": %" PRIu64 ", \"cache_hits\": %" PRIu64 ", \"provider_maps\": %" PRIu64
                ", \"provider_unmaps\": %" PRIu64 ", \"cross_stream_waits\": %" PRIu64
                ", \"oom_retries\": %" PRIu64 "}",
                c->n ? "," : "", ga_kind_name(a->kind), a->device, st.requested, st.requested_peak,
                st.in_use, st.in_use_peak, st.reserved, st.reserved_peak, st.cached, st.allocs,
                st.frees, st.cache_hits, st.provider_maps, st.provider_unmaps,
                st.cross_stream_waits, st.oom_retries);
    } else {
        fprintf(c->out,
                "%-8s %3d  requested %" PRIu64 " (peak %" PRIu64 ")  reserved %" PRIu64
                " (peak %" PRIu64 ")  cached %" PRIu64 "  allocs %" PRIu64 "  frees %" PRIu64 "\n",
                ga_kind_name(a->kind), a->device, st.requested, st.requested_peak, st.reserved,
                st.reserved_peak, st.cached, st.allocs, st.frees);
    }
    c->n++;
}

gpuarena_status_t gpuarena_stats_print(FILE *out, const char *opts)
{
    if (!out)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_stats_print: out is NULL");
    print_ctx_t c = {out, opts && strchr(opts, 'j'), 0};
    if (c.json)
        fputs("{\"arenas\": [", out);
    ga_arena_foreach(print_one, &c);
    if (c.json)
        fputs("\n]}\n", out);
    return GPUARENA_SUCCESS;
}
