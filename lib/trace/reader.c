/*
 * reader.c - parsing gpuarena-trace files (gpuarena-trace(5)).
 *
 * One pass over the text.  Each line is cut into at most five fields; ids
 * go through a hash map to (arena, dense index, freed) so that duplicate
 * allocations and frees of unknown or freed ids are caught with their line.
 * Live requested bytes are summed per arena to give the trace's own peak,
 * which a replay must reproduce exactly.
 */
#include "trace/trace.h"

#include "errors.h"
#include "trace/map.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 6

static const char *const kind_names[GPUARENA_KIND_COUNT] = {
    [GPUARENA_DEVICE] = "device", [GPUARENA_PINNED] = "pinned", [GPUARENA_MANAGED] = "managed",
    [GPUARENA_HOST] = "host",     [GPUARENA_SIM] = "sim",
};

int ga_trace_kind_from_name(const char *name, size_t len)
{
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == len && memcmp(kind_names[k], name, len) == 0)
            return k;
    return -1;
}

typedef struct field {
    const char *s;
    size_t n;
} field_t;

typedef struct parser {
    const char *name;
    uint32_t line;
    ga_trace_t *t;
    ga_map_t ids;      /* file id -> arena << 33 | freed << 32 | dense id */
    ga_map_t arena_ix; /* kind << 42 | device << 32 | instance -> arena index */
    size_t arena_cap;  /* entries of t->arenas, sizes and live */
    uint64_t **sizes;  /* per arena: requested size of each dense id */
    uint64_t *live;    /* per arena: live requested bytes */
    size_t cur;        /* current arena, SIZE_MAX before the first event */
    bool cur_declared; /* a "k" line chose cur (else the implicit device 0) */
    size_t cur_kind, cur_device, cur_instance;
} parser_t;

/* Copy at most 24 characters of a field into OUT, printable only. */
static const char *show(field_t f, char out[32])
{
    size_t n = f.n < 24 ? f.n : 24, i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)f.s[i];
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (f.n > n) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}

static gpuarena_status_t bad(parser_t *p, const char *fmt, const char *arg)
{
    return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "%s:%lu: %s%s", p->name, (unsigned long)p->line,
                    fmt, arg ? arg : "");
}

static gpuarena_status_t nomem(parser_t *p)
{
    return ga_error(GPUARENA_ERR_HOST_MEMORY, "%s:%lu: out of memory reading the trace", p->name,
                    (unsigned long)p->line);
}

/* Decimal digits only, no sign, at most MAX. */
static gpuarena_status_t number(parser_t *p, field_t f, const char *what, uint64_t max,
                                uint64_t *out)
{
    char buf[32], msg[96];
    uint64_t v = 0;
    if (f.n == 0)
        goto fail;
    for (size_t i = 0; i < f.n; i++) {
        unsigned d = (unsigned)((unsigned char)f.s[i] - '0');
        if (d > 9)
            goto fail;
        if (v > (max - d) / 10) {
            snprintf(msg, sizeof msg, "%s is too large (at most %llu): ", what,
                     (unsigned long long)max);
            return bad(p, msg, show(f, buf));
        }
        v = v * 10 + d;
    }
    *out = v;
    return GPUARENA_SUCCESS;
fail:
    snprintf(msg, sizeof msg, "%s must be a decimal number, not ", what);
    return bad(p, msg, f.n ? show(f, buf) : "nothing");
}

static gpuarena_status_t find_arena(parser_t *p, size_t kind, size_t device, size_t instance,
                                    bool declared)
{
    ga_trace_t *t = p->t;
    /* Found by a map, not a walk: a file of many arenas, each named by
     * many "k" lines, read in time quadratic in the arenas otherwise. */
    uint64_t key = (uint64_t)kind << 42 | (uint64_t)device << 32 | (uint64_t)instance;
    uint64_t *ix = ga_map_get(&p->arena_ix, key);
    if (ix) {
        t->arenas[*ix].declared |= declared;
        p->cur = (size_t)*ix;
        return GPUARENA_SUCCESS;
    }
    if (t->narenas >= GA_TRACE_MAX_ARENAS)
        return bad(p, "too many arenas in one trace", NULL);
    size_t n = t->narenas + 1;
    if (n > p->arena_cap) {
        size_t cap = p->arena_cap ? 2 * p->arena_cap : 8;
        ga_trace_arena_t *arenas = realloc(t->arenas, cap * sizeof *arenas);
        if (!arenas)
            return nomem(p);
        t->arenas = arenas;
        uint64_t **sizes = realloc(p->sizes, cap * sizeof *sizes);
        if (!sizes)
            return nomem(p);
        p->sizes = sizes;
        uint64_t *live = realloc(p->live, cap * sizeof *live);
        if (!live)
            return nomem(p);
        p->live = live;
        p->arena_cap = cap;
    }
    if (!ga_map_put(&p->arena_ix, key, n - 1))
        return nomem(p);
    ga_trace_arena_t *arenas = t->arenas;
    uint64_t **sizes = p->sizes;
    uint64_t *live = p->live;
    ga_trace_arena_t *a = &arenas[n - 1];
    memset(a, 0, sizeof *a);
    a->kind = (gpuarena_kind_t)kind;
    a->device = (int)device;
    a->instance = (unsigned)instance;
    a->declared = declared;
    sizes[n - 1] = NULL;
    live[n - 1] = 0;
    t->narenas = n;
    p->cur = n - 1;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t push(parser_t *p, ga_trace_arena_t *a, ga_trace_event_t e)
{
    if (a->nevents == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 4; /* see the sizes in event() */
        if (cap > SIZE_MAX / sizeof *a->events)
            return nomem(p);
        ga_trace_event_t *ev = realloc(a->events, cap * sizeof *ev);
        if (!ev)
            return nomem(p);
        a->events = ev;
        a->cap = cap;
    }
    a->events[a->nevents++] = e;
    p->t->nevents++;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t current(parser_t *p, ga_trace_arena_t **a)
{
    if (p->cur == SIZE_MAX) {
        gpuarena_status_t st = find_arena(p, GPUARENA_DEVICE, 0, 0, false);
        if (st != GPUARENA_SUCCESS)
            return st;
    }
    *a = &p->t->arenas[p->cur];
    return GPUARENA_SUCCESS;
}

/* The STREAM field F: a number, or from version 3 on "-" for no stream
 * (GPUARENA_STREAM_HOST) on an allocation or a free.  A record_stream has
 * no "-": gpuarena_record_stream refuses GPUARENA_STREAM_HOST, so a replay
 * of one could only fail. */
static gpuarena_status_t stream_field(parser_t *p, char op, field_t f, uint64_t *stream,
                                      bool *no_stream)
{
    *no_stream = false;
    if (f.n != 1 || f.s[0] != '-')
        return number(p, f, "STREAM", UINT32_MAX, stream);
    if (p->t->version < 3)
        return bad(p, "STREAM '-' (no stream) needs '# gpuarena-trace 3'", NULL);
    if (op == 'r')
        return bad(p, "'r' needs a stream: '-' (no stream) has nothing to record", NULL);
    *stream = 0;
    *no_stream = true;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t event(parser_t *p, char op, const field_t *f, size_t nf)
{
    char buf[32];
    uint64_t id, size = 0, stream;
    bool no_stream;
    size_t want = op == 'a' ? 4 : 3;
    if (nf != want) {
        static const char *const usage[] = {"'a' takes ID SIZE STREAM", "'f' takes ID STREAM",
                                            "'r' takes ID STREAM"};
        const char *u = usage[op == 'a' ? 0 : op == 'f' ? 1 : 2];
        return bad(p, u, nf < want ? " (a field is missing)" : " (too many fields)");
    }
    gpuarena_status_t st = number(p, f[1], "ID", UINT64_MAX, &id);
    if (st == GPUARENA_SUCCESS && op == 'a')
        st = number(p, f[2], "SIZE", SIZE_MAX < UINT64_MAX ? SIZE_MAX : UINT64_MAX, &size);
    if (st == GPUARENA_SUCCESS)
        st = stream_field(p, op, f[want - 1], &stream, &no_stream);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_trace_arena_t *a;
    st = current(p, &a);
    if (st != GPUARENA_SUCCESS)
        return st;
    ga_trace_event_t e = {
        .size = size, .stream = (uint32_t)stream, .line = p->line, .no_stream = no_stream};
    uint64_t *v = ga_map_get(&p->ids, id);
    if (op == 'a') {
        if (v)
            return bad(p, "duplicate allocation id ", show(f[1], buf));
        if (a->nids == UINT32_MAX)
            return bad(p, "too many allocations in one arena", NULL);
        /* From a few, doubling: a trace may hold millions of arenas of
         * one allocation each (64 here and 256 events took 6.6 KB an
         * arena, 1 GB for a 5 MB file of 200,000). */
        if (a->nids == 0 || (a->nids >= 4 && (a->nids & (a->nids - 1)) == 0)) {
            size_t cap = a->nids ? (size_t)a->nids * 2 : 4;
            uint64_t *sz = realloc(p->sizes[p->cur], cap * sizeof *sz);
            if (!sz)
                return nomem(p);
            p->sizes[p->cur] = sz;
        }
        if (!ga_map_put(&p->ids, id, (uint64_t)p->cur << 33 | a->nids))
            return nomem(p);
        p->sizes[p->cur][a->nids] = size;
        e.op = GA_TRACE_ALLOC;
        e.id = a->nids++;
        if (size == 0)
            a->nzero++;
        uint64_t *live = &p->live[p->cur];
        *live = *live > UINT64_MAX - size ? UINT64_MAX : *live + size;
        if (*live > a->peak_requested)
            a->peak_requested = *live;
    } else {
        const char *what = op == 'f' ? "free" : "record_stream";
        char msg[64];
        if (!v) {
            snprintf(msg, sizeof msg, "%s of unknown id ", what);
            return bad(p, msg, show(f[1], buf));
        }
        if (*v >> 32 & 1) {
            snprintf(msg, sizeof msg, "%s of id already freed: ", what);
            return bad(p, msg, show(f[1], buf));
        }
        if (*v >> 33 != p->cur) {
            snprintf(msg, sizeof msg, "%s of an id allocated in another arena: ", what);
            return bad(p, msg, show(f[1], buf));
        }
        e.id = (uint32_t)*v;
        if (op == 'f') {
            e.op = GA_TRACE_FREE;
            *v |= (uint64_t)1 << 32;
            uint64_t sz = p->sizes[p->cur][e.id], *live = &p->live[p->cur];
            *live = *live < sz ? 0 : *live - sz;
            a->nfrees++;
        } else {
            e.op = GA_TRACE_RECORD;
            a->nrecords++;
        }
    }
    if (e.stream > a->max_stream)
        a->max_stream = e.stream;
    a->nno_stream += no_stream;
    return push(p, a, e);
}

static gpuarena_status_t arena_line(parser_t *p, const field_t *f, size_t nf)
{
    char buf[32];
    uint64_t device, instance = 0;
    if (p->t->version < 2)
        return bad(p, "'k' lines need '# gpuarena-trace 2'", NULL);
    if (nf < 3 || nf > 4)
        return bad(p, "'k' takes KIND DEVICE [INSTANCE]",
                   nf < 3 ? " (a field is missing)" : " (too many fields)");
    int kind = ga_trace_kind_from_name(f[1].s, f[1].n);
    if (kind < 0)
        return bad(p,
                   "unknown arena kind (device, pinned, managed, host or sim): ", show(f[1], buf));
    gpuarena_status_t st = number(p, f[2], "DEVICE", 1023, &device);
    if (st == GPUARENA_SUCCESS && device != 0 && (kind == GPUARENA_HOST || kind == GPUARENA_SIM))
        return bad(p, "host and sim arenas have no device: DEVICE must be 0, not ",
                   show(f[2], buf));
    if (st == GPUARENA_SUCCESS && nf == 4)
        st = number(p, f[3], "INSTANCE", UINT32_MAX, &instance);
    if (st != GPUARENA_SUCCESS)
        return st;
    return find_arena(p, (size_t)kind, (size_t)device, (size_t)instance, true);
}

static gpuarena_status_t header(parser_t *p, const char *s, size_t n)
{
    /* "#", "gpuarena-trace" and the version, apart by spaces or tabs as
     * every line's fields are. */
    static const char word[] = "gpuarena-trace";
    size_t w = sizeof word - 1, i = 1, j;
    for (j = i; j < n && (s[j] == ' ' || s[j] == '\t'); j++)
        ;
    bool ok = n > 0 && s[0] == '#' && n - j > w && memcmp(s + j, word, w) == 0;
    for (i = j + w; ok && i < n && (s[i] == ' ' || s[i] == '\t'); i++)
        ;
    if (!ok || i == j + w || i == n)
        return bad(p, "missing header: the first line must be '# gpuarena-trace 1' (or 2, 3)",
                   NULL);
    field_t v = {s + i, n - i};
    while (v.n && (v.s[v.n - 1] == ' ' || v.s[v.n - 1] == '\t'))
        v.n--;
    uint64_t version = 0;
    gpuarena_status_t st = number(p, v, "the version", UINT32_MAX, &version);
    if (st != GPUARENA_SUCCESS)
        return st;
    if (version < 1 || version > GA_TRACE_VERSION) {
        char buf[32];
        return bad(
            p, "unsupported gpuarena-trace version (this reader knows 1, 2 and 3): ", show(v, buf));
    }
    p->t->version = (int)version;
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t line(parser_t *p, const char *s, size_t n)
{
    if (n && s[n - 1] == '\r')
        n--;
    if (p->line == 1)
        return header(p, s, n);
    field_t f[MAX_FIELDS];
    size_t nf = 0, i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == n)
            break;
        if (nf == 0 && s[i] == '#')
            return GPUARENA_SUCCESS; /* comment */
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t')
            i++;
        if (nf == MAX_FIELDS)
            return bad(p, "too many fields", NULL);
        f[nf].s = s + start;
        f[nf].n = i - start;
        nf++;
    }
    if (nf == 0)
        return GPUARENA_SUCCESS; /* blank line */
    char buf[32];
    if (f[0].n == 1) {
        switch (f[0].s[0]) {
        case 'a':
        case 'f':
        case 'r':
            return event(p, f[0].s[0], f, nf);
        case 'k':
            return arena_line(p, f, nf);
        }
    }
    return bad(p, "unknown event (a, f, r or k expected): ", show(f[0], buf));
}

void ga_trace_free(ga_trace_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->narenas; i++)
        free(t->arenas[i].events);
    free(t->arenas);
    free(t->name);
    free(t);
}

/* ga_trace_load reads a file in pieces and parses each line as it comes,
 * so that what is not a trace (a binary file, /dev/zero) is refused at its
 * first bad line having cost no more memory than a line: it used to be
 * read whole first, growing without bound on a source that never ends.
 * A line longer than any event could be (LINE_MAX_BYTES, with room for a
 * long comment) is refused, whatever reads it. */
#define LINE_MAX_BYTES 65536
#define READ_BYTES     65536

/* Set P up to read a trace called NAME. */
static gpuarena_status_t parse_begin(parser_t *p, const char *name)
{
    *p = (parser_t){.name = name, .line = 0, .cur = SIZE_MAX};
    ga_map_init(&p->ids);
    ga_map_init(&p->arena_ix);
    p->t = calloc(1, sizeof *p->t);
    if (!p->t || !(p->t->name = strdup(name))) {
        free(p->t);
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "%s: out of memory reading the trace", name);
    }
    return GPUARENA_SUCCESS;
}

/* The next line of the text, S[0..N) without its newline. */
static gpuarena_status_t parse_line(parser_t *p, const char *s, size_t n)
{
    if (p->line == UINT32_MAX)
        return bad(p, "too many lines", NULL);
    p->line++;
    if (memchr(s, '\0', n))
        return bad(p, "a NUL byte: this is not a text file", NULL);
    if (n > LINE_MAX_BYTES)
        return bad(p, "a line longer than 65536 bytes: this is not a trace", NULL);
    return line(p, s, n);
}

/* The end of the text, or of reading it where ST says it failed: the
 * trace to *OUT, or nothing. */
static gpuarena_status_t parse_end(parser_t *p, gpuarena_status_t st, ga_trace_t **out)
{
    if (st == GPUARENA_SUCCESS && p->line == 0) {
        p->line = 1;
        st = bad(p, "empty file: the first line must be '# gpuarena-trace 1' (or 2, 3)", NULL);
    }
    if (st == GPUARENA_SUCCESS) {
        p->t->lines = p->line;
        for (size_t i = 0; i < p->t->narenas; i++) {
            ga_trace_arena_t *a = &p->t->arenas[i];
            a->live_end = p->live[i];
            a->nlive_end = a->nids - a->nfrees;
        }
    }
    for (size_t i = 0; i < p->t->narenas; i++)
        free(p->sizes[i]);
    free(p->sizes);
    free(p->live);
    ga_map_fini(&p->ids);
    ga_map_fini(&p->arena_ix);
    if (st != GPUARENA_SUCCESS) {
        ga_trace_free(p->t);
        return st;
    }
    *out = p->t;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_trace_parse(const char *buf, size_t len, const char *name, ga_trace_t **out)
{
    if (!out)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "ga_trace_parse: out is NULL");
    *out = NULL;
    if (!buf && len)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "ga_trace_parse: buffer is NULL");
    parser_t p;
    gpuarena_status_t st = parse_begin(&p, name ? name : "trace");
    if (st != GPUARENA_SUCCESS)
        return st;
    for (size_t pos = 0; st == GPUARENA_SUCCESS && pos < len;) {
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        st = parse_line(&p, s, n);
        pos += n + (nl ? 1 : 0);
    }
    return parse_end(&p, st, out);
}

gpuarena_status_t ga_trace_load(const char *path, ga_trace_t **out)
{
    if (!path || !out)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "ga_trace_load: %s is NULL",
                        path ? "out" : "path");
    *out = NULL;
    bool std_in = strcmp(path, "-") == 0;
    FILE *fp = std_in ? stdin : fopen(path, "rb");
    if (!fp)
        return ga_error(GPUARENA_ERR_SYSTEM, "%s: %s", path, strerror(errno));
    parser_t p;
    gpuarena_status_t st = parse_begin(&p, std_in ? "<stdin>" : path);
    if (st != GPUARENA_SUCCESS) {
        if (!std_in)
            fclose(fp);
        return st;
    }
    /* BUF holds the unfinished line (LEN bytes), then what is read. */
    char *buf = malloc(LINE_MAX_BYTES + READ_BYTES);
    size_t len = 0;
    if (!buf)
        st = ga_error(GPUARENA_ERR_HOST_MEMORY, "%s: no memory to read the trace", path);
    while (st == GPUARENA_SUCCESS) {
        size_t got = fread(buf + len, 1, READ_BYTES, fp);
        if (got == 0) {
            if (ferror(fp))
                st = ga_error(GPUARENA_ERR_SYSTEM, "%s: read error: %s", path, strerror(errno));
            else if (len)
                st = parse_line(&p, buf, len); /* the last line, with no newline */
            break;
        }
        size_t end = len + got, pos = 0;
        for (const char *nl; st == GPUARENA_SUCCESS && (nl = memchr(buf + pos, '\n', end - pos));) {
            size_t n = (size_t)(nl - (buf + pos));
            st = parse_line(&p, buf + pos, n);
            pos += n + 1;
        }
        len = end - pos;
        if (st == GPUARENA_SUCCESS && len > LINE_MAX_BYTES)
            st = parse_line(&p, buf, len); /* refused: too long, or a NUL in it */
        memmove(buf, buf + pos, len);
    }
    free(buf);
    if (!std_in)
        fclose(fp);
    return parse_end(&p, st, out);
}
