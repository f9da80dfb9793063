/*
 * fuzz_trace.c - libFuzzer target for the gpuarena-trace reader: any bytes
 * must parse or fail with a status, never crash, leak or read out of
 * bounds.  Built by run-fuzz-trace.sh with clang -fsanitize=fuzzer,address.
 */
#include "trace/trace.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ga_trace_t *t = NULL;
    gpuarena_status_t st = ga_trace_parse((const char *)data, size, "fuzz", &t);
    if (st == GPUARENA_SUCCESS) {
        /* Walk what came out: every dense id is within its arena; an
         * event with no stream is an allocation or a free of a version 3
         * file, with stream 0, and the arena counts it. */
        for (size_t i = 0; i < t->narenas; i++) {
            const ga_trace_arena_t *a = &t->arenas[i];
            uint64_t no_stream = 0;
            for (size_t j = 0; j < a->nevents; j++) {
                const ga_trace_event_t *e = &a->events[j];
                if (e->id >= a->nids || e->op > GA_TRACE_RECORD)
                    abort();
                if (e->no_stream && (e->op == GA_TRACE_RECORD || e->stream || t->version < 3))
                    abort();
                no_stream += e->no_stream;
            }
            if (no_stream != a->nno_stream)
                abort();
        }
        ga_trace_free(t);
    } else if (t != NULL) {
        abort();
    }
    return 0;
}
