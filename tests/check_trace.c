/* check_trace.c - the gpuarena-trace reader, its errors with their lines,
 * the id map, and the recorder read back by the reader (no stream,
 * GPUARENA_STREAM_HOST, included). */
#include "checkrun.h"
#include "outpath.h"
#include "trace/map.h"
#include "trace/trace.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static ga_trace_t *parse_ok(const char *text)
{
    ga_trace_t *t = NULL;
    gpuarena_status_t st = ga_trace_parse(text, strlen(text), "t.trace", &t);
    ck_assert_msg(st == GPUARENA_SUCCESS, "parse failed: %s", gpuarena_last_error());
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Parsing TEXT fails with STATUS and a message starting with WANT. */
static void parse_bad(const char *text, gpuarena_status_t status, const char *want)
{
    ga_trace_t *t = (ga_trace_t *)0x1;
    gpuarena_status_t st = ga_trace_parse(text, strlen(text), "t.trace", &t);
    ck_assert_int_eq(st, status);
    ck_assert_ptr_null(t);
    const char *msg = gpuarena_last_error();
    ck_assert_msg(strncmp(msg, want, strlen(want)) == 0, "message '%s' does not start with '%s'",
                  msg, want);
}

START_TEST(version1_basic)
{
    ga_trace_t *t = parse_ok("# gpuarena-trace 1\n"
                             "# source: test\n"
                             "a 10 100 0\n"
                             "\n"
                             "   # an indented comment\n"
                             "a 7 0 1\n"
                             "a 99 50 1\n"
                             "r 10 1\n"
                             "f 10 0\n"
                             "f 7 1\n"
                             "a 3 400 2\n");
    ck_assert_int_eq(t->version, 1);
    ck_assert_uint_eq(t->narenas, 1);
    ck_assert_uint_eq(t->nevents, 7);
    ck_assert_uint_eq(t->lines, 11);
    const ga_trace_arena_t *a = &t->arenas[0];
    ck_assert_int_eq(a->kind, GPUARENA_DEVICE);
    ck_assert_int_eq(a->device, 0);
    ck_assert(!a->declared);
    ck_assert_uint_eq(a->nids, 4);
    ck_assert_uint_eq(a->nzero, 1);
    ck_assert_uint_eq(a->nfrees, 2);
    ck_assert_uint_eq(a->nrecords, 1);
    ck_assert_uint_eq(a->max_stream, 2);
    /* live: 100, 100, 150, 150, 50, 50, 450 */
    ck_assert_uint_eq(a->peak_requested, 450);
    ck_assert_uint_eq(a->live_end, 450);
    ck_assert_uint_eq(a->nlive_end, 2);
    const ga_trace_event_t *e = a->events;
    ck_assert_uint_eq(e[0].op, GA_TRACE_ALLOC);
    ck_assert_uint_eq(e[0].id, 0);
    ck_assert_uint_eq(e[0].size, 100);
    ck_assert_uint_eq(e[0].line, 3);
    ck_assert_uint_eq(e[1].id, 1);
    ck_assert_uint_eq(e[1].size, 0);
    ck_assert_uint_eq(e[1].stream, 1);
    ck_assert_uint_eq(e[1].line, 6);
    ck_assert_uint_eq(e[2].id, 2);
    ck_assert_uint_eq(e[3].op, GA_TRACE_RECORD);
    ck_assert_uint_eq(e[3].id, 0);
    ck_assert_uint_eq(e[3].stream, 1);
    ck_assert_uint_eq(e[4].op, GA_TRACE_FREE);
    ck_assert_uint_eq(e[4].id, 0);
    ck_assert_uint_eq(e[5].id, 1);
    ck_assert_uint_eq(e[6].id, 3);
    ck_assert_uint_eq(e[6].line, 11);
    ga_trace_free(t);
}
END_TEST

START_TEST(crlf_tabs_no_final_newline)
{
    ga_trace_t *t = parse_ok("# gpuarena-trace 1\r\na\t1\t18446744073709551615\t4294967295\r\nf 1 "
                             "0  ");
    ck_assert_uint_eq(t->nevents, 2);
    ck_assert_uint_eq(t->arenas[0].events[0].size, UINT64_MAX);
    ck_assert_uint_eq(t->arenas[0].events[0].stream, UINT32_MAX);
    ck_assert_uint_eq(t->arenas[0].peak_requested, UINT64_MAX);
    ga_trace_free(t);
}
END_TEST

/* The header's parts apart by spaces or tabs, as every line's fields. */
START_TEST(header_with_tabs)
{
    static const char *const ok[] = {"#\tgpuarena-trace\t3\n", "#  gpuarena-trace  2 \n",
                                     "#gpuarena-trace 1\n"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        ga_trace_t *t = parse_ok(ok[i]);
        ck_assert_int_eq(t->version, 3 - (int)i);
        ga_trace_free(t);
    }
}
END_TEST

START_TEST(header_only)
{
    ga_trace_t *t = parse_ok("# gpuarena-trace 2\n");
    ck_assert_int_eq(t->version, 2);
    ck_assert_uint_eq(t->narenas, 0);
    ck_assert_uint_eq(t->nevents, 0);
    ga_trace_free(t);
}
END_TEST

START_TEST(version2_arenas)
{
    ga_trace_t *t = parse_ok("# gpuarena-trace 2\n"
                             "a 1 10 0\n"   /* before any k: device 0 */
                             "k pinned 1\n" /* pinned 1, instance 0 */
                             "a 2 20 0\n"
                             "k device 0 0\n" /* back to the implicit arena */
                             "f 1 0\n"
                             "k host 0 3\n"
                             "a 3 30 5\n"
                             "k pinned 1 0\n"
                             "f 2 0\n");
    ck_assert_uint_eq(t->narenas, 3);
    ck_assert_int_eq(t->arenas[0].kind, GPUARENA_DEVICE);
    ck_assert(t->arenas[0].declared);
    ck_assert_uint_eq(t->arenas[0].nevents, 2);
    ck_assert_int_eq(t->arenas[1].kind, GPUARENA_PINNED);
    ck_assert_int_eq(t->arenas[1].device, 1);
    ck_assert_uint_eq(t->arenas[1].nevents, 2);
    ck_assert_uint_eq(t->arenas[1].events[1].op, GA_TRACE_FREE);
    ck_assert_uint_eq(t->arenas[1].events[1].id, 0);
    ck_assert_uint_eq(t->arenas[1].events[1].line, 10);
    ck_assert_int_eq(t->arenas[2].kind, GPUARENA_HOST);
    ck_assert_uint_eq(t->arenas[2].instance, 3);
    ck_assert_uint_eq(t->arenas[2].events[0].id, 0);
    ck_assert_uint_eq(t->arenas[2].max_stream, 5);
    ga_trace_free(t);
}
END_TEST

/* What an event of a trace should be: its operation and its stream. */
typedef struct want {
    uint8_t op;
    bool no_stream;
    uint32_t stream;
} want_t;

/* The events of TA are N and as WANT says. */
static void check_events(const ga_trace_arena_t *ta, const want_t *want, size_t n)
{
    ck_assert_uint_eq(ta->nevents, n);
    for (size_t i = 0; i < n; i++) {
        const ga_trace_event_t *e = &ta->events[i];
        ck_assert_msg(e->op == want[i].op && e->no_stream == want[i].no_stream &&
                          e->stream == want[i].stream,
                      "event %zu (line %u): op %u, no_stream %d, stream %u; want op %u, "
                      "no_stream %d, stream %u",
                      i, e->line, e->op, e->no_stream, e->stream, want[i].op, want[i].no_stream,
                      want[i].stream);
    }
}

/* Version 3: "-" is no stream on an allocation or a free.  It is no stream
 * number: the event reads as stream 0 with no_stream set, and max_stream
 * counts only the numbered streams. */
START_TEST(version3_no_stream)
{
    ga_trace_t *t = parse_ok("# gpuarena-trace 3\n"
                             "a 1 100 -\n"
                             "a 2 200 3\n"
                             "r 1 3\n"
                             "f 1 -\n"
                             "a 3 0 -\n"
                             "f 2 0\n"
                             "k pinned 0\n"
                             "a 4 50\t-\r\n"
                             "f 4 1\n");
    ck_assert_int_eq(t->version, 3);
    ck_assert_uint_eq(t->narenas, 2);
    const ga_trace_arena_t *d = &t->arenas[0], *pn = &t->arenas[1];
    ck_assert_uint_eq(d->nevents, 6);
    ck_assert_uint_eq(d->max_stream, 3);
    ck_assert_uint_eq(d->nno_stream, 3);
    ck_assert_uint_eq(d->peak_requested, 300);
    static const want_t want[] = {
        {GA_TRACE_ALLOC, true, 0}, {GA_TRACE_ALLOC, false, 3}, {GA_TRACE_RECORD, false, 3},
        {GA_TRACE_FREE, true, 0},  {GA_TRACE_ALLOC, true, 0},  {GA_TRACE_FREE, false, 0},
    };
    check_events(d, want, sizeof want / sizeof want[0]);
    ck_assert_uint_eq(pn->nevents, 2);
    ck_assert(pn->events[0].no_stream);
    ck_assert_uint_eq(pn->events[0].size, 50);
    ck_assert(!pn->events[1].no_stream);
    ck_assert_uint_eq(pn->events[1].stream, 1);
    ck_assert_uint_eq(pn->nno_stream, 1);
    ck_assert_uint_eq(pn->max_stream, 1);
    ga_trace_free(t);

    /* Versions 1 and 2 have no "-"; a record_stream always names a stream;
     * nothing else than "-" alone is taken for no stream. */
    const gpuarena_status_t I = GPUARENA_ERR_INVALID_ARGUMENT;
    parse_bad("# gpuarena-trace 1\na 1 2 -\n", I,
              "t.trace:2: STREAM '-' (no stream) needs '# gpuarena-trace 3'");
    parse_bad("# gpuarena-trace 2\na 1 2 0\nf 1 -\n", I,
              "t.trace:3: STREAM '-' (no stream) needs '# gpuarena-trace 3'");
    parse_bad("# gpuarena-trace 3\na 1 2 -\nr 1 -\n", I, "t.trace:3: 'r' needs a stream");
    parse_bad("# gpuarena-trace 3\na 1 2 --\n", I,
              "t.trace:2: STREAM must be a decimal number, not --");
    parse_bad("# gpuarena-trace 3\na 1 2 -1\n", I,
              "t.trace:2: STREAM must be a decimal number, not -1");
    parse_bad("# gpuarena-trace 3\na 1 - 0\n", I, "t.trace:2: SIZE must be a decimal number");
    parse_bad("# gpuarena-trace 3\na - 2 0\n", I, "t.trace:2: ID must be a decimal number");
}
END_TEST

START_TEST(errors_with_lines)
{
    const gpuarena_status_t I = GPUARENA_ERR_INVALID_ARGUMENT;
    parse_bad("", I, "t.trace:1: empty file");
    parse_bad("a 1 2 0\n", I, "t.trace:1: missing header");
    parse_bad("\n# gpuarena-trace 1\n", I, "t.trace:1: missing header");
    parse_bad("# gpuarena-trace\n", I, "t.trace:1: missing header");
    parse_bad("# gpuarena-trace 4\n", I, "t.trace:1: unsupported gpuarena-trace version");
    parse_bad("# gpuarena-trace 0\n", I, "t.trace:1: unsupported gpuarena-trace version");
    parse_bad("# gpuarena-trace x\n", I, "t.trace:1: the version must be a decimal number");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nx 1 2\n", I, "t.trace:3: unknown event");
    parse_bad("# gpuarena-trace 1\nalloc 1 2 0\n", I, "t.trace:2: unknown event");
    parse_bad("# gpuarena-trace 1\n\n\na 1 -2 0\n", I,
              "t.trace:4: SIZE must be a decimal number, not -2");
    parse_bad("# gpuarena-trace 1\na 1x 2 0\n", I, "t.trace:2: ID must be a decimal number");
    parse_bad("# gpuarena-trace 1\na 1 2 s\n", I, "t.trace:2: STREAM must be a decimal number");
    parse_bad("# gpuarena-trace 1\na 1 18446744073709551616 0\n", I,
              "t.trace:2: SIZE is too large");
    parse_bad("# gpuarena-trace 1\na 1 2 4294967296\n", I, "t.trace:2: STREAM is too large");
    parse_bad("# gpuarena-trace 1\na 1 2\n", I, "t.trace:2: 'a' takes ID SIZE STREAM (a field");
    parse_bad("# gpuarena-trace 1\na 1 2 0 0\n", I, "t.trace:2: 'a' takes ID SIZE STREAM (too");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nf 1\n", I, "t.trace:3: 'f' takes ID STREAM");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nr 1 0 0\n", I, "t.trace:3: 'r' takes ID STREAM");
    parse_bad("# gpuarena-trace 1\na 1 2 0\na 1 3 0\n", I, "t.trace:3: duplicate allocation id 1");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nf 1 0\na 1 3 0\n", I,
              "t.trace:4: duplicate allocation id 1");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nf 2 0\n", I, "t.trace:3: free of unknown id 2");
    parse_bad("# gpuarena-trace 1\nr 5 0\n", I, "t.trace:2: record_stream of unknown id 5");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nf 1 0\nf 1 0\n", I,
              "t.trace:4: free of id already freed: 1");
    parse_bad("# gpuarena-trace 1\na 1 2 0\nf 1 0\nr 1 0\n", I,
              "t.trace:4: record_stream of id already freed");
    parse_bad("# gpuarena-trace 1\nk device 0\n", I, "t.trace:2: 'k' lines need");
    parse_bad("# gpuarena-trace 2\nk gpu 0\n", I, "t.trace:2: unknown arena kind");
    parse_bad("# gpuarena-trace 2\nk device\n", I, "t.trace:2: 'k' takes KIND DEVICE");
    parse_bad("# gpuarena-trace 2\nk device 5000\n", I, "t.trace:2: DEVICE is too large");
    parse_bad("# gpuarena-trace 2\nk host 5\n", I,
              "t.trace:2: host and sim arenas have no device: DEVICE must be 0, not 5");
    parse_bad("# gpuarena-trace 2\nk sim 1 0\n", I,
              "t.trace:2: host and sim arenas have no device");
    parse_bad("# gpuarena-tracer 1\n", I, "t.trace:1: missing header");
    parse_bad("# gpuarena-trace1\n", I, "t.trace:1: missing header");
    parse_bad("#\n", I, "t.trace:1: missing header");
    parse_bad("# gpuarena-trace 2\na 1 2 0\nk host 0\nf 1 0\n", I,
              "t.trace:4: free of an id allocated in another arena");
    parse_bad("# gpuarena-trace 1\na 1 2 0 0 0 0 0\n", I, "t.trace:2: too many fields");
    static const char nul[] = "# gpuarena-trace 1\na 1\0 2 0\n";
    ga_trace_t *t = (ga_trace_t *)0x1;
    ck_assert_int_eq(ga_trace_parse(nul, sizeof nul - 1, "n.trace", &t), I);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(gpuarena_last_error(), "n.trace:2: a NUL byte: this is not a text file");
}
END_TEST

START_TEST(long_garbage_is_shortened)
{
    char text[4096] = "# gpuarena-trace 1\n";
    size_t n = strlen(text);
    memset(text + n, 'z', 3000);
    text[n + 3000] = '\0';
    parse_bad(text, GPUARENA_ERR_INVALID_ARGUMENT,
              "t.trace:2: unknown event (a, f, r or k expected): zzzzzzzzzzzzzzzzzzzzzzzz...");
}
END_TEST

START_TEST(load_files)
{
    ga_trace_t *t = NULL;
    ck_assert_int_eq(ga_trace_load("/nonexistent/x.trace", &t), GPUARENA_ERR_SYSTEM);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(ga_trace_load(GA_TEST_DATA "/multistream_resnet18.trace", &t),
                     GPUARENA_SUCCESS);
    ck_assert_uint_eq(t->narenas, 1);
    ck_assert_uint_eq(t->arenas[0].nids, 4111);
    ck_assert_uint_eq(t->arenas[0].nrecords, 24);
    ck_assert_uint_eq(t->arenas[0].max_stream, 1);
    ck_assert_uint_eq(t->nevents, 4111 + 3352 + 24);
    ga_trace_free(t);
}
END_TEST

/* A source of zeros that never ends, through a pipe: LIMIT bytes at most
 * (a bound on a failing test), *WRITTEN what the reader took. */
typedef struct zeros {
    int fd;
    size_t limit, written;
} zeros_t;

static void *write_zeros(void *arg)
{
    zeros_t *z = arg;
    static const char zero[65536];
    while (z->written < z->limit) {
        ssize_t n = write(z->fd, zero, sizeof zero);
        if (n <= 0)
            break; /* EPIPE: the reader is gone */
        z->written += (size_t)n;
    }
    close(z->fd);
    return NULL;
}

/* A file that is not a trace is refused at its first bad line without
 * being read to its end: the whole file was read into memory first (a
 * 512 MiB file of zeros took 512 MiB; /dev/zero all memory).  The reader
 * stops within a line's limit and one read of the pipe's zeros; a line
 * longer than any event is refused, by the loader and by the parser. */
START_TEST(load_refuses_garbage_early)
{
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    zeros_t z = {fds[1], (size_t)256 << 20, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, write_zeros, &z), 0);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    ga_trace_t *t = NULL;
    ck_assert_int_eq(ga_trace_load(path, &t), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    close(fds[0]);
    pthread_join(th, NULL);
    signal(SIGPIPE, old);
    ck_assert_msg(strstr(gpuarena_last_error(), ":1: a NUL byte") != NULL, "%s",
                  gpuarena_last_error());
    ck_assert_msg(z.written < ((size_t)4 << 20), "%zu bytes read before the refusal", z.written);

    /* A header, then a line of 70000 bytes, in a file. */
    char name[] = "/tmp/gpuarena-long-XXXXXX";
    int fd = mkstemp(name);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs("# gpuarena-trace 1\n# ", f);
    for (int i = 0; i < 70000; i++)
        fputc('x', f);
    fputs("\na 1 2 0\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(ga_trace_load(name, &t), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(gpuarena_last_error(), ":2: a line longer than 65536 bytes") != NULL, "%s",
                  gpuarena_last_error());
    unlink(name);
    static char text[80000] = "# gpuarena-trace 1\n# ";
    memset(text + strlen(text), 'x', 70000);
    parse_bad(text, GPUARENA_ERR_INVALID_ARGUMENT,
              "t.trace:2: a line longer than 65536 bytes: this is not a trace");
    /* A comment just under the limit is a comment, at the end with no
     * newline too. */
    char *ok = calloc(1, 70000);
    ck_assert_ptr_nonnull(ok);
    strcpy(ok, "# gpuarena-trace 1\na 1 2 0\n# ");
    memset(ok + strlen(ok), 'y', 65536 - 2);
    ck_assert_int_eq(ga_trace_parse(ok, strlen(ok), "ok", &t), GPUARENA_SUCCESS);
    ck_assert_uint_eq(t->nevents, 1);
    ga_trace_free(t);
    free(ok);
}
END_TEST

START_TEST(map_against_reference)
{
    /* Plain comparisons in the loop: every ck_assert costs Check a write. */
    enum { N = 5000 };
    static uint64_t ref[N];
    static bool in[N];
    ga_map_t m;
    ga_map_init(&m);
    srand(7);
    long wrong = 0;
    for (int step = 0; step < 200000; step++) {
        int k = rand() % N;
        uint64_t key = (uint64_t)k * 4096; /* pointer-like keys collide in low bits */
        if (rand() % 3) {
            uint64_t v = (uint64_t)rand();
            wrong += !ga_map_put(&m, key, v);
            ref[k] = v;
            in[k] = true;
        } else {
            uint64_t v = 0;
            bool had = ga_map_del(&m, key, &v);
            wrong += had != in[k] || (had && v != ref[k]);
            in[k] = false;
        }
        if (step % 1000 == 0) {
            size_t count = 0;
            for (int i = 0; i < N; i++) {
                uint64_t *v = ga_map_get(&m, (uint64_t)i * 4096);
                wrong += (v != NULL) != in[i] || (v && *v != ref[i]);
                count += in[i];
            }
            wrong += m.count != count;
        }
    }
    ck_assert_int_eq(wrong, 0);
    ga_map_fini(&m);
}
END_TEST

START_TEST(expand_path)
{
    char out[64], want[64];
    setenv("PMI_RANK", "12", 1);
    ck_assert_int_eq(ga_output_path("trace file", "t.%r.%p.%%", out, sizeof out), GPUARENA_SUCCESS);
    snprintf(want, sizeof want, "t.12.%ld.%%", (long)getpid());
    ck_assert_str_eq(out, want);
    unsetenv("PMI_RANK");
    ck_assert_int_eq(ga_output_path("trace file", "%x", out, sizeof out),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ga_output_path("trace file", "%", out, sizeof out),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ga_output_path("trace file", "abcdef", out, 4), GPUARENA_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Create an empty file from the template PATH (mkstemp). */
static void temp_file(char *path)
{
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* Record to a new empty file made from the template PATH. */
static void record_to_temp(char *path)
{
    temp_file(path);
    ck_assert_int_eq(ga_trace_open(path), GPUARENA_SUCCESS);
}

/* Load the trace at PATH, which must read, and remove the file. */
static ga_trace_t *load_and_remove(const char *path)
{
    ga_trace_t *t = NULL;
    ck_assert_msg(ga_trace_load(path, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    unlink(path);
    return t;
}

/* A free that the arena made, as gpuarena_free records it: both steps. */
static void record_free(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                        gpuarena_stream_t stream)
{
    uint64_t id = ga_trace_free_begin(arena, kind, device, ptr, stream);
    ga_trace_free_end(arena, kind, device, ptr, id, stream, GPUARENA_SUCCESS);
}

/* The recorder's file reads back with the reader: ids, sizes, streams,
 * arenas, NULL for size 0, unknown pointers ignored. */
START_TEST(recorder_round_trip)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    ck_assert(ga_trace_on());
    int a1, a2; /* two arenas: their addresses are their keys */
    char *p = (char *)0x10000, *q = (char *)0x20000;
    void *s1 = (void *)0x7777, *s2 = (void *)0x8888;
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, p, 100, NULL);
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, NULL, 0, s1);
    ga_trace_record_alloc(&a2, GPUARENA_PINNED, 1, p, 64, s2); /* same pointer, other arena */
    ga_trace_record_stream(&a1, GPUARENA_DEVICE, 0, p, s2);
    record_free(&a1, GPUARENA_DEVICE, 0, q, NULL); /* never allocated: nothing */
    record_free(&a1, GPUARENA_DEVICE, 0, p, s1);
    record_free(&a1, GPUARENA_DEVICE, 0, p, s1);                       /* double free: nothing */
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, p, 300, (void *)1); /* legacy: stream 0 */
    record_free(&a2, GPUARENA_PINNED, 1, p, s2);
    ga_trace_stop();
    ck_assert(!ga_trace_on());
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, q, 1, NULL); /* after stop: nothing */

    ga_trace_t *t = load_and_remove(path);
    ck_assert_int_eq(t->version, GA_TRACE_VERSION);
    ck_assert_uint_eq(t->narenas, 2);
    const ga_trace_arena_t *d = &t->arenas[0], *pn = &t->arenas[1];
    ck_assert_int_eq(d->kind, GPUARENA_DEVICE);
    ck_assert(d->declared);
    ck_assert_int_eq(pn->kind, GPUARENA_PINNED);
    ck_assert_int_eq(pn->device, 1);
    ck_assert_uint_eq(d->nevents, 5);
    ck_assert_uint_eq(d->nids, 3);
    ck_assert_uint_eq(d->nzero, 1);
    ck_assert_uint_eq(d->peak_requested, 300);
    ck_assert_uint_eq(d->events[1].stream, 1); /* s1 first used */
    ck_assert_uint_eq(d->events[2].op, GA_TRACE_RECORD);
    ck_assert_uint_eq(d->events[2].stream, 2); /* s2 */
    ck_assert_uint_eq(d->events[3].op, GA_TRACE_FREE);
    ck_assert_uint_eq(d->events[3].id, 0);
    ck_assert_uint_eq(d->events[4].size, 300);
    ck_assert_uint_eq(d->events[4].stream, 0);
    ck_assert_uint_eq(pn->nevents, 2);
    ck_assert_uint_eq(pn->nfrees, 1);
    ga_trace_free(t);
}
END_TEST

/* An arena destroyed and another made at its address (malloc hands it
 * out again): two instances, each with its own events, where the second
 * arena's events went on under the first one's "k" line. */
START_TEST(recorder_arena_at_a_reused_address)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int key, other;
    char *p = (char *)0x10000;
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, p, 100, NULL);
    record_free(&key, GPUARENA_HOST, 0, p, NULL);
    ga_trace_record_alloc(&other, GPUARENA_HOST, 0, p, 7, NULL);
    ga_trace_arena_gone(&key);
    ga_trace_arena_gone(&key); /* twice, and of an arena the recorder never saw: no harm */
    ga_trace_arena_gone(&path);
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, p, 200, NULL); /* the new arena */
    ga_trace_record_alloc(&other, GPUARENA_HOST, 0, p + 64, 8, NULL);
    record_free(&key, GPUARENA_HOST, 0, p, NULL);
    ga_trace_stop();

    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 3);
    const ga_trace_arena_t *first = &t->arenas[0], *o = &t->arenas[1], *again = &t->arenas[2];
    ck_assert_uint_eq(first->instance, 0);
    ck_assert_uint_eq(o->instance, 1);
    ck_assert_uint_eq(again->instance, 2);
    ck_assert_uint_eq(first->nevents, 2);
    ck_assert_uint_eq(first->peak_requested, 100);
    ck_assert_uint_eq(o->nevents, 2);
    ck_assert_uint_eq(again->nevents, 2);
    ck_assert_uint_eq(again->peak_requested, 200);
    ck_assert_uint_eq(again->nfrees, 1);
    ga_trace_free(t);
}
END_TEST

/* A program that makes more arenas than a file may name, one after
 * another: the recorder leaves out the later arenas' requests, and the
 * file reads back (it was refused whole).  The reader takes a file of
 * more than 65536 arenas, the old limit. */
START_TEST(recorder_arenas_past_the_limit)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    size_t saved = ga_trace_max_arenas;
    ga_trace_max_arenas = 4;
    int key;
    char *p = (char *)0x10000;
    for (int i = 0; i < 6; i++) {
        ga_trace_record_alloc(&key, GPUARENA_SIM, 0, p, 100 + i, NULL);
        record_free(&key, GPUARENA_SIM, 0, p, NULL);
        ga_trace_arena_gone(&key);
    }
    ga_trace_stop();
    ga_trace_max_arenas = saved;
    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 4);
    ck_assert_uint_eq(t->arenas[3].instance, 3);
    ck_assert_uint_eq(t->arenas[3].peak_requested, 103);
    ga_trace_free(t);

    const unsigned n = 65537;
    size_t cap = (size_t)n * 32 + 64, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    len += (size_t)snprintf(buf, cap, "# gpuarena-trace 3\n");
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "k sim 0 %u\na %u 1 -\n", i, i + 1);
    ck_assert_msg(ga_trace_parse(buf, len, "many", &t) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    ck_assert_uint_eq(t->narenas, n);
    ga_trace_free(t);
    free(buf);
}
END_TEST

/* A file that is no regular file takes the trace, neither locked nor cut
 * (ftruncate fails there): /dev/null, to measure what recording costs, a
 * pipe or a terminal. */
START_TEST(recorder_to_dev_null)
{
    ck_assert_msg(ga_trace_open("/dev/null") == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert(ga_trace_on());
    int key;
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, (void *)0x1000, 100, NULL);
    ga_trace_flush();
    ck_assert(ga_trace_on());
    ga_trace_stop();
}
END_TEST

/* A named pipe whose reader goes away (GPUARENA_TRACE=>(gzip ...), gzip
 * dies): the next write fails, recording stops, and the program goes on
 * with SIGPIPE's default action in place; it was ended by the signal
 * (exit 141 in a shell).  A SIGPIPE of the program's own, pending before,
 * stays pending. */
START_TEST(recorder_to_a_pipe_without_reader)
{
    char dir[] = "/tmp/ga-fifo-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/trace", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    int reader = open(path, O_RDONLY | O_NONBLOCK);
    ck_assert_int_ge(reader, 0);
    signal(SIGPIPE, SIG_DFL);
    ck_assert_msg(ga_trace_open(path) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    close(reader);
    int key;
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, (void *)0x1000, 100, NULL);
    ga_trace_flush();
    ck_assert(!ga_trace_on());
    sigset_t pending;
    ck_assert_int_eq(sigpending(&pending), 0);
    ck_assert(!sigismember(&pending, SIGPIPE));
    unlink(path);
    rmdir(dir);
}
END_TEST

/* One file, one recording process: another that opens it (a program the
 * recording one runs inherits GPUARENA_TRACE) is refused and the file
 * stays the first one's; the same process may open it again. */
START_TEST(recorder_one_process_a_file)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int key;
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, (void *)0x1000, 100, NULL);
    ga_trace_flush();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* another process, as a program the recording one runs is */
        _exit(ga_trace_open(path) == GPUARENA_ERR_BUSY ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, (void *)0x2000, 200, NULL);
    ga_trace_flush();
    ga_trace_t *t = NULL;
    ck_assert_msg(ga_trace_load(path, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_uint_eq(t->narenas, 1);
    ck_assert_uint_eq(t->arenas[0].nevents, 2);
    ga_trace_free(t);
    /* this process again: a new recording, the file its own */
    ck_assert_int_eq(ga_trace_open(path), GPUARENA_SUCCESS);
    ga_trace_record_alloc(&key, GPUARENA_HOST, 0, (void *)0x3000, 300, NULL);
    ga_trace_stop();
    t = load_and_remove(path);
    ck_assert_uint_eq(t->arenas[0].nevents, 1);
    ck_assert_uint_eq(t->arenas[0].peak_requested, 300);
    ga_trace_free(t);
}
END_TEST

/* A free in two steps (gpuarena_free): one that the arena refused leaves
 * the block live, known to the recorder by its id; one that is made while
 * another thread is handed the same pointer again writes its "f" line
 * after that thread's "a" line, each with its own id. */
START_TEST(recorder_refused_and_racing_frees)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int a1;
    char *p = (char *)0x10000;
    void *s1 = (void *)0x7777, *s2 = (void *)0x8888;
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, p, 100, s1);
    uint64_t id = ga_trace_free_begin(&a1, GPUARENA_DEVICE, 0, p, s1);
    ck_assert_uint_ne(id, 0);
    ga_trace_free_end(&a1, GPUARENA_DEVICE, 0, p, id, s1,
                      GPUARENA_ERR_STREAM_CAPTURE);         /* refused */
    ga_trace_record_stream(&a1, GPUARENA_DEVICE, 0, p, s2); /* live again */
    uint64_t again = ga_trace_free_begin(&a1, GPUARENA_DEVICE, 0, p, s1);
    ck_assert_uint_eq(again, id);
    /* Another thread is handed P before the free's end: the free was
     * made, its "f" line goes before the new block's "a". */
    ga_trace_record_alloc(&a1, GPUARENA_DEVICE, 0, p, 200, s2);
    ga_trace_free_end(&a1, GPUARENA_DEVICE, 0, p, again, s1, GPUARENA_SUCCESS);
    record_free(&a1, GPUARENA_DEVICE, 0, p, s2);
    ga_trace_free_end(&a1, GPUARENA_DEVICE, 0, p, 0, s2, GPUARENA_SUCCESS); /* unknown: nothing */
    ga_trace_stop();

    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 1);
    const ga_trace_arena_t *d = &t->arenas[0];
    ck_assert_uint_eq(d->nevents, 5);
    ck_assert_uint_eq(d->nids, 2);
    ck_assert_uint_eq(d->nfrees, 2);
    ck_assert_uint_eq(d->events[1].op, GA_TRACE_RECORD);
    ck_assert_uint_eq(d->events[1].id, 0);
    ck_assert_uint_eq(d->events[2].op, GA_TRACE_FREE);
    ck_assert_uint_eq(d->events[2].id, 0);
    ck_assert_uint_eq(d->events[2].stream, 1); /* the free's, s1 */
    ck_assert_uint_eq(d->events[3].size, 200);
    ck_assert_uint_eq(d->events[4].op, GA_TRACE_FREE);
    ck_assert_uint_eq(d->events[4].id, 1);
    ck_assert_uint_eq(d->peak_requested, 200);
    ga_trace_free(t);
}
END_TEST

/* A racing double free of the program's: threads that free one pointer
 * at once share its id, and the trace frees each block exactly once,
 * whichever free the arena made and in whatever order the threads end.
 * Before, the second thread's free was not followed (id 0): when it was
 * the one the arena made and the first thread's was refused, the trace
 * kept the block live for ever. */
START_TEST(recorder_racing_double_frees)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int a1;
    char *p = (char *)0x10000, *q = (char *)0x20000, *r = (char *)0x30000, *u = (char *)0x40000;
    void *s1 = (void *)0x7777, *s2 = (void *)0x8888;
    const gpuarena_kind_t k = GPUARENA_DEVICE;

    /* The second thread's free is made, the first's refused after it. */
    ga_trace_record_alloc(&a1, k, 0, p, 100, s1);
    uint64_t t1 = ga_trace_free_begin(&a1, k, 0, p, s1), t2 = ga_trace_free_begin(&a1, k, 0, p, s2);
    ck_assert_uint_ne(t1, 0);
    ck_assert_uint_eq(t2, t1);
    ga_trace_free_end(&a1, k, 0, p, t2, s2, GPUARENA_SUCCESS);
    ga_trace_free_end(&a1, k, 0, p, t1, s1, GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_uint_eq(ga_trace_free_begin(&a1, k, 0, p, s1), 0); /* gone */

    /* The same, the refused thread ending first. */
    ga_trace_record_alloc(&a1, k, 0, q, 200, s1);
    t1 = ga_trace_free_begin(&a1, k, 0, q, s1);
    t2 = ga_trace_free_begin(&a1, k, 0, q, s2);
    ga_trace_free_end(&a1, k, 0, q, t1, s1, GPUARENA_ERR_DOUBLE_FREE);
    ga_trace_free_end(&a1, k, 0, q, t2, s2, GPUARENA_SUCCESS);
    ck_assert_uint_eq(ga_trace_free_begin(&a1, k, 0, q, s1), 0);

    /* Both made: the block was handed out again between them (its "a"
     * line written), so the later free freed that one.  The recorder
     * cannot tell that from a free made before the block was handed out
     * again whose thread ends late (recorder_address_reused_...), the
     * case of correct programs, which it records exactly: the block
     * stays live in the trace until the program's own free of it, which
     * the arena refuses as a double free. */
    ga_trace_record_alloc(&a1, k, 0, r, 300, s1);
    t1 = ga_trace_free_begin(&a1, k, 0, r, s1);
    t2 = ga_trace_free_begin(&a1, k, 0, r, s2);
    ga_trace_free_end(&a1, k, 0, r, t2, s2, GPUARENA_SUCCESS);
    ga_trace_record_alloc(&a1, k, 0, r, 400, s2);
    ga_trace_free_end(&a1, k, 0, r, t1, s1, GPUARENA_SUCCESS);
    uint64_t late = ga_trace_free_begin(&a1, k, 0, r, s1);
    ck_assert_uint_ne(late, 0);
    ga_trace_free_end(&a1, k, 0, r, late, s1, GPUARENA_ERR_DOUBLE_FREE);
    ck_assert_uint_eq(ga_trace_free_begin(&a1, k, 0, r, s1), 0);

    /* Both refused for a reason that leaves the block live: live again,
     * by its id, once the last of them ends. */
    ga_trace_record_alloc(&a1, k, 0, u, 500, s1);
    t1 = ga_trace_free_begin(&a1, k, 0, u, s1);
    t2 = ga_trace_free_begin(&a1, k, 0, u, s2);
    ga_trace_free_end(&a1, k, 0, u, t1, s1, GPUARENA_ERR_STREAM_CAPTURE);
    ga_trace_free_end(&a1, k, 0, u, t2, s2, GPUARENA_ERR_STREAM_CAPTURE);
    uint64_t again = ga_trace_free_begin(&a1, k, 0, u, s1);
    ck_assert_uint_eq(again, t1);
    ga_trace_free_end(&a1, k, 0, u, again, s1, GPUARENA_SUCCESS);
    ga_trace_stop();

    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 1);
    const ga_trace_arena_t *d = &t->arenas[0];
    ck_assert_uint_eq(d->nevents, 10);
    ck_assert_uint_eq(d->nids, 5);
    ck_assert_uint_eq(d->nfrees, 5);
    ck_assert_uint_eq(d->nlive_end, 0);
    /* a0 f0 a1 f1 a2 f2 a3 f3 a4 f4, each free of the block before it */
    for (unsigned i = 0; i < 10; i++) {
        ck_assert_uint_eq(d->events[i].op, i % 2 ? GA_TRACE_FREE : GA_TRACE_ALLOC);
        ck_assert_uint_eq(d->events[i].id, i / 2);
    }
    ck_assert_uint_eq(d->events[1].stream, 2); /* the made free's stream, s2 */
    ck_assert_uint_eq(d->events[7].stream, 1); /* the later free, s1 */
    ga_trace_free(t);
}
END_TEST

/* A correct program's free whose thread ends late: the arena made it and
 * handed the address out again, maybe several times, before the
 * recorder heard of its end.  Each block is freed exactly once in the
 * trace, before the next block at that address is allocated.  Before,
 * the next free of the address shared the late free's id (taken for a
 * racing double free), the late end then freed the block live at that
 * time, still live in the program, and one block never went. */
START_TEST(recorder_address_reused_before_the_free_ends)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int a1;
    char *p = (char *)0x10000;
    void *s1 = (void *)0x7777, *s2 = (void *)0x8888;
    const gpuarena_kind_t k = GPUARENA_DEVICE;
    ga_trace_record_alloc(&a1, k, 0, p, 100, s1);
    uint64_t slow = ga_trace_free_begin(&a1, k, 0, p, s1); /* made; its end comes last */
    ck_assert_uint_ne(slow, 0);
    for (unsigned i = 0; i < 3; i++) { /* another thread, at once */
        ga_trace_record_alloc(&a1, k, 0, p, 200 + i, s2);
        if (i < 2)
            record_free(&a1, k, 0, p, s2);
    }
    ga_trace_free_end(&a1, k, 0, p, slow, s1, GPUARENA_SUCCESS);
    record_free(&a1, k, 0, p, s2); /* the last block, freed by its owner */
    ga_trace_stop();

    ga_trace_t *t = load_and_remove(path);
    const ga_trace_arena_t *d = &t->arenas[0];
    ck_assert_uint_eq(d->nevents, 8);
    ck_assert_uint_eq(d->nfrees, 4);
    ck_assert_uint_eq(d->nlive_end, 0);
    for (unsigned i = 0; i < 8; i++) {
        ck_assert_uint_eq(d->events[i].op, i % 2 ? GA_TRACE_FREE : GA_TRACE_ALLOC);
        ck_assert_uint_eq(d->events[i].id, i / 2);
    }
    ck_assert_uint_eq(d->events[1].stream, 1); /* the slow free's own stream */
    ck_assert_uint_eq(d->peak_requested, 202);
    ga_trace_free(t);
}
END_TEST

static void *per_thread_alloc(void *arg)
{
    ga_trace_record_alloc(arg, GPUARENA_DEVICE, 0, (void *)0x50000, 64, (void *)0x2);
    return NULL;
}

typedef struct late_free {
    int *arena;
    uint64_t id;
} late_free_t;

static void *alloc_and_begin_free(void *arg)
{
    late_free_t *l = arg;
    ga_trace_record_alloc(l->arena, GPUARENA_DEVICE, 0, (void *)0x60000, 64, (void *)0x2);
    l->id = ga_trace_free_begin(l->arena, GPUARENA_DEVICE, 0, (void *)0x60000, (void *)0x2);
    return NULL;
}

/* A free on a thread's per-thread stream whose line another thread
 * writes (handed the address first): on the freeing thread's stream.
 * It was written on the writing thread's. */
START_TEST(recorder_late_free_on_a_per_thread_stream)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int dev;
    late_free_t l = {&dev, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, alloc_and_begin_free, &l), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_ne(l.id, 0);
    ga_trace_record_alloc(&dev, GPUARENA_DEVICE, 0, (void *)0x60000, 128, (void *)0x2);
    ga_trace_free_end(&dev, GPUARENA_DEVICE, 0, (void *)0x60000, l.id, (void *)0x2,
                      GPUARENA_SUCCESS);
    ga_trace_stop();
    ga_trace_t *t = load_and_remove(path);
    const ga_trace_arena_t *d = &t->arenas[0];
    ck_assert_uint_eq(d->nevents, 3);
    ck_assert_uint_eq(d->events[1].op, GA_TRACE_FREE);
    ck_assert_uint_eq(d->events[1].stream, d->events[0].stream); /* the other thread's */
    ck_assert_uint_ne(d->events[2].stream, d->events[0].stream); /* this thread's */
    ga_trace_free(t);
}
END_TEST

/* Stream handles as each kind takes them: for a device arena NULL and
 * CU_STREAM_LEGACY (0x1) are the legacy stream, 0 in the trace, and
 * CU_STREAM_PER_THREAD (0x2) a stream of each thread's; for a sim arena
 * (and a host one) 0x1 and 0x2 are streams like any other, which is how
 * gpuarena-replay gives trace streams 1 and 2 to them.  Before, 0x1 was
 * 0 for every kind, so that recording a replay merged streams 0 and 1,
 * and every thread's per-thread stream was one stream. */
START_TEST(recorder_stream_handles_by_kind)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int dev, sim;
    ga_trace_record_alloc(&sim, GPUARENA_SIM, 0, (void *)0x10000, 1, (void *)0x1);
    ga_trace_record_alloc(&sim, GPUARENA_SIM, 0, (void *)0x20000, 2, NULL);
    ga_trace_record_alloc(&sim, GPUARENA_SIM, 0, (void *)0x30000, 3, (void *)0x2);
    ga_trace_record_alloc(&dev, GPUARENA_DEVICE, 0, (void *)0x10000, 4, (void *)0x1);
    ga_trace_record_alloc(&dev, GPUARENA_DEVICE, 0, (void *)0x20000, 5, (void *)0x2);
    ga_trace_record_alloc(&dev, GPUARENA_DEVICE, 0, (void *)0x30000, 6, (void *)0x2);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, per_thread_alloc, &dev), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ga_trace_stop();

    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 2);
    const ga_trace_arena_t *s0 = &t->arenas[0], *d = &t->arenas[1];
    ck_assert_uint_eq(s0->nevents, 3);
    ck_assert_uint_eq(s0->events[0].stream, 1); /* handle 1: a stream */
    ck_assert_uint_eq(s0->events[1].stream, 0);
    ck_assert_uint_eq(s0->events[2].stream, 2);
    ck_assert_uint_eq(d->nevents, 4);
    ck_assert_uint_eq(d->events[0].stream, 0); /* CU_STREAM_LEGACY */
    ck_assert_uint_eq(d->events[1].stream, 3); /* this thread's per-thread stream */
    ck_assert_uint_eq(d->events[2].stream, 3);
    ck_assert_uint_eq(d->events[3].stream, 4); /* another thread's */
    ga_trace_free(t);
}
END_TEST

/* The whole of the file at PATH, NUL-terminated (a test's trace is small). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Requests made with GPUARENA_STREAM_HOST through a sim arena are recorded
 * as "-" and read back with no stream, next to requests on the legacy
 * stream and on another stream; GPUARENA_STREAM_HOST takes no stream
 * number, so the other stream is stream 1 although it is used later. */
START_TEST(recorder_no_stream)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    temp_file(path);
    const gpuarena_stream_t H = GPUARENA_STREAM_HOST;
    const gpuarena_stream_t s = (gpuarena_stream_t)(uintptr_t)0x40; /* any value, in a sim arena */
    gpuarena_t *a = NULL;
    /* A sim arena has no device: the 5 is checked, then taken as 0, as
     * by gpuarena_get (and so recorded). */
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 5, NULL, &a), GPUARENA_SUCCESS);
    gpuarena_kind_t kind = GPUARENA_DEVICE;
    int device = -1;
    ck_assert_int_eq(gpuarena_kind(a, &kind, &device), GPUARENA_SUCCESS);
    ck_assert_int_eq(device, 0);
    ck_assert_int_eq(ga_trace_open(path), GPUARENA_SUCCESS);
    void *p, *q, *r, *z;
    ck_assert_int_eq(gpuarena_alloc(a, 1000, H, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 2000, NULL, &q), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 0, H, &z), GPUARENA_SUCCESS);
    ck_assert_ptr_null(z);
    ck_assert_int_eq(gpuarena_alloc(a, 3000, s, &r), GPUARENA_SUCCESS);
    /* Refused, so not recorded; a direct call of the hook writes nothing
     * either, as "r ID -" is no valid line. */
    ck_assert_int_eq(gpuarena_record_stream(a, q, H), GPUARENA_ERR_INVALID_STREAM);
    ga_trace_record_stream(a, kind, device, q, H);
    ck_assert_int_eq(gpuarena_record_stream(a, q, s), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS); /* none at alloc, one at free */
    ck_assert_int_eq(gpuarena_free(a, q, H), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, r, H), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 500, H, &p), GPUARENA_SUCCESS); /* left live */
    ga_trace_stop();
    ck_assert_int_eq(gpuarena_free(a, p, H), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);

    /* The text itself: version 3, and "-" where the program named no
     * stream. */
    const char *text = slurp(path);
    ck_assert_msg(strncmp(text, "# gpuarena-trace 3\n", 19) == 0, "header of:\n%s", text);
    static const char *const lines[] = {"\na 1 1000 -\n", "\na 2 2000 0\n", "\na 3 0 -\n",
                                        "\na 4 3000 1\n", "\nr 2 1\n",      "\nf 1 1\n",
                                        "\nf 2 -\n",      "\nf 4 -\n",      "\na 5 500 -\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg(strstr(text, lines[i]), "no line '%.*s' in:\n%s", (int)strlen(lines[i]) - 2,
                      lines[i] + 1, text);
    ck_assert_msg(!strstr(text, "\nr 2 -") && !strstr(text, "\nr 2 2"),
                  "a record_stream with no stream was written:\n%s", text);

    ga_trace_t *t = load_and_remove(path);
    ck_assert_int_eq(t->version, 3);
    ck_assert_uint_eq(t->narenas, 1);
    const ga_trace_arena_t *ta = &t->arenas[0];
    ck_assert_int_eq(ta->kind, GPUARENA_SIM);
    ck_assert_int_eq(ta->device, 0);
    ck_assert_uint_eq(ta->max_stream, 1);
    ck_assert_uint_eq(ta->nno_stream, 5);
    static const want_t want[] = {
        {GA_TRACE_ALLOC, true, 0},  {GA_TRACE_ALLOC, false, 0},  {GA_TRACE_ALLOC, true, 0},
        {GA_TRACE_ALLOC, false, 1}, {GA_TRACE_RECORD, false, 1}, {GA_TRACE_FREE, false, 1},
        {GA_TRACE_FREE, true, 0},   {GA_TRACE_FREE, true, 0},    {GA_TRACE_ALLOC, true, 0},
    };
    check_events(ta, want, sizeof want / sizeof want[0]);
    ga_trace_free(t);
}
END_TEST

/* Enough events to flush the buffer several times. */
START_TEST(recorder_many)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    int a;
    for (uintptr_t i = 1; i <= 20000; i++) {
        ga_trace_record_alloc(&a, GPUARENA_SIM, 0, (void *)(i * 512), i, (void *)(i % 3 + 2));
        if (i % 2 == 0)
            record_free(&a, GPUARENA_SIM, 0, (void *)((i - 1) * 512), NULL);
    }
    ga_trace_stop();
    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 1);
    ck_assert_int_eq(t->arenas[0].kind, GPUARENA_SIM);
    ck_assert_uint_eq(t->arenas[0].nids, 20000);
    ck_assert_uint_eq(t->arenas[0].nfrees, 10000);
    ck_assert_uint_eq(t->arenas[0].max_stream, 3);
    ga_trace_free(t);
}
END_TEST

/* Four threads record at once: every line is whole and every free follows
 * its allocation. */
static int thread_arena;

static void *record_many(void *arg)
{
    uintptr_t base = (uintptr_t)arg << 32;
    for (uintptr_t i = 1; i <= 5000; i++) {
        void *p = (void *)(base + i * 256);
        ga_trace_record_alloc(&thread_arena, GPUARENA_HOST, 0, p, i, (void *)(base + 7));
        if (i % 3 == 0)
            ga_trace_record_stream(&thread_arena, GPUARENA_HOST, 0, p, NULL);
        record_free(&thread_arena, GPUARENA_HOST, 0, p, (void *)(base + 7));
    }
    return NULL;
}

START_TEST(recorder_threads)
{
    char path[] = "/tmp/check_trace_XXXXXX";
    record_to_temp(path);
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, record_many, (void *)(i + 1)), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ga_trace_stop();
    ga_trace_t *t = load_and_remove(path);
    ck_assert_uint_eq(t->narenas, 1);
    ck_assert_uint_eq(t->arenas[0].nids, 20000);
    ck_assert_uint_eq(t->arenas[0].nfrees, 20000);
    ck_assert_uint_eq(t->arenas[0].nrecords, 4 * 1666);
    ck_assert_uint_eq(t->arenas[0].max_stream, 4);
    ga_trace_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("reader");
    tcase_add_test(tc, version1_basic);
    tcase_add_test(tc, crlf_tabs_no_final_newline);
    tcase_add_test(tc, header_only);
    tcase_add_test(tc, header_with_tabs);
    tcase_add_test(tc, version2_arenas);
    tcase_add_test(tc, version3_no_stream);
    tcase_add_test(tc, errors_with_lines);
    tcase_add_test(tc, long_garbage_is_shortened);
    tcase_add_test(tc, load_files);
    tcase_add_test(tc, load_refuses_garbage_early);
    tcase_add_test(tc, map_against_reference);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("recorder");
    tcase_add_test(tr, expand_path);
    tcase_add_test(tr, recorder_round_trip);
    tcase_add_test(tr, recorder_arena_at_a_reused_address);
    tcase_add_test(tr, recorder_arenas_past_the_limit);
    tcase_add_test(tr, recorder_one_process_a_file);
    tcase_add_test(tr, recorder_to_dev_null);
    tcase_add_test(tr, recorder_to_a_pipe_without_reader);
    tcase_add_test(tr, recorder_refused_and_racing_frees);
    tcase_add_test(tr, recorder_racing_double_frees);
    tcase_add_test(tr, recorder_address_reused_before_the_free_ends);
    tcase_add_test(tr, recorder_stream_handles_by_kind);
    tcase_add_test(tr, recorder_late_free_on_a_per_thread_stream);
    tcase_add_test(tr, recorder_no_stream);
    tcase_add_test(tr, recorder_many);
    tcase_add_test(tr, recorder_threads);
    suite_add_tcase(s, tr);
    return ga_check_run(s);
}
