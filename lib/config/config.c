/*
 * config.c - reading gpuarena.conf(5) with libinih, GPUARENA_OPTIONS and
 * option strings into a ga_conf_t; the search order; the process's
 * configuration, read once under a lock, with a sticky failure.
 *
 * libinih splits lines into section, key and value.  It tells its handler
 * neither the line number nor the start of an empty section, so the lines
 * reach it through our own reader, which counts them, checks section
 * headers and the shape of each line, and hands libinih the key lines only
 * (with their indentation removed, so that an indented line is never taken
 * for a continuation of the previous value).
 */
#include <config.h>

#include "config/config.h"
#include "config/suggest.h"
#include "env.h"
#include "errors.h"

#include <errno.h>
#include <ini.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef GA_SYSCONFDIR
#define GA_SYSCONFDIR "/etc"
#endif

/* Messages kept per configuration; later ones are counted, not kept. */
#define MAX_ERRORS 32

typedef struct origin {
    unsigned char kind; /* ga_origin_kind_t; GA_ORIGIN_DEFAULT: not set here */
    int line;           /* GA_ORIGIN_FILE */
    const char *name;   /* GA_ORIGIN_ENV, GA_ORIGIN_OPTIONS: a static name */
} origin_t;

typedef struct section {
    ga_settings_t values; /* only the keys set here are meaningful */
    origin_t origin[GA_CONFIG_MAX_KEYS];
} section_t;

struct ga_conf {
    char *file;              /* file read, or NULL */
    const char *file_source; /* how it was found */
    char *searched;          /* paths looked at when none was found */
    section_t kinds[GPUARENA_KIND_COUNT];
    section_t *devices[GPUARENA_KIND_COUNT][GA_CONFIG_MAX_DEVICES];
    char *errors[MAX_ERRORS];
    size_t nerrors; /* may exceed MAX_ERRORS */
    bool no_memory; /* an error was the host's lack of memory, not the text's */
};

/* ------------------------------------------------------------- messages */

static void conf_error(ga_conf_t *c, const char *fmt, ...) GA_PRINTF(2, 3);

static void conf_error(ga_conf_t *c, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->nerrors < MAX_ERRORS)
        c->errors[c->nerrors] = strdup(buf); /* NULL without memory: shown as such */
    c->nerrors++;
}

/* The status for C after a step that may have added messages: the first
 * message becomes gpuarena_last_error().  HOST_MEMORY where the host
 * lacked memory for the reading: the text may be right, and a later
 * reading may succeed (gpuarena_get(3)). */
static gpuarena_status_t conf_status(const ga_conf_t *c)
{
    if (c->nerrors == 0)
        return GPUARENA_SUCCESS;
    return ga_error(c->no_memory ? GPUARENA_ERR_HOST_MEMORY : GPUARENA_ERR_CONFIG, "%s",
                    ga_conf_error(c, 0));
}

size_t ga_conf_error_count(const ga_conf_t *c)
{
    return c->nerrors < MAX_ERRORS ? c->nerrors : MAX_ERRORS;
}

size_t ga_conf_total_errors(const ga_conf_t *c)
{
    return c->nerrors;
}

const char *ga_conf_error(const ga_conf_t *c, size_t index)
{
    if (index >= ga_conf_error_count(c))
        return NULL;
    return c->errors[index] ? c->errors[index] : "(no memory for the message)";
}

/* ------------------------------------------------------- the conf object */

ga_conf_t *ga_conf_new(void)
{
    ga_conf_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++)
        ga_config_defaults((gpuarena_kind_t)k, &c->kinds[k].values);
    return c;
}

void ga_conf_free(ga_conf_t *c)
{
    if (!c)
        return;
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++)
        for (int d = 0; d < GA_CONFIG_MAX_DEVICES; d++)
            free(c->devices[k][d]);
    for (size_t i = 0; i < ga_conf_error_count(c); i++)
        free(c->errors[i]);
    free(c->file);
    free(c->searched);
    free(c);
}

const char *ga_conf_file(const ga_conf_t *c)
{
    return c->file;
}

const char *ga_conf_file_source(const ga_conf_t *c)
{
    return c->file_source;
}

const char *ga_conf_searched(const ga_conf_t *c)
{
    return c->searched;
}

static bool has_device_sections(gpuarena_kind_t kind)
{
    return kind == GPUARENA_DEVICE || kind == GPUARENA_PINNED || kind == GPUARENA_MANAGED;
}

bool ga_conf_has_device(const ga_conf_t *c, gpuarena_kind_t kind, int device)
{
    return (unsigned)kind < GPUARENA_KIND_COUNT && device >= 0 && device < GA_CONFIG_MAX_DEVICES &&
           c->devices[kind][device] != NULL;
}

static section_t *section_of(ga_conf_t *c, gpuarena_kind_t kind, int device)
{
    if (device < 0)
        return &c->kinds[kind];
    if (!c->devices[kind][device]) {
        section_t *s = calloc(1, sizeof *s);
        if (!s) {
            c->no_memory = true; /* conf_status: HOST_MEMORY */
            return NULL;
        }
        ga_config_defaults(kind, &s->values);
        c->devices[kind][device] = s;
    }
    return c->devices[kind][device];
}

static void overlay(ga_settings_t *out, const section_t *s)
{
    for (size_t i = 0; i < ga_config_key_count(); i++)
        if (s->origin[i].kind != GA_ORIGIN_DEFAULT)
            ga_key_copy(ga_config_key(i), out, &s->values);
}

void ga_conf_settings(const ga_conf_t *c, gpuarena_kind_t kind, int device, ga_settings_t *out)
{
    ga_config_defaults(kind, out);
    if ((unsigned)kind >= GPUARENA_KIND_COUNT)
        return;
    overlay(out, &c->kinds[kind]);
    if (ga_conf_has_device(c, kind, device))
        overlay(out, c->devices[kind][device]);
}

static void format_origin(const ga_conf_t *c, const origin_t *o, char *buf, size_t size)
{
    switch (o->kind) {
    case GA_ORIGIN_FILE:
        snprintf(buf, size, "%s:%d", c->file ? c->file : "?", o->line);
        break;
    case GA_ORIGIN_ENV:
    case GA_ORIGIN_OPTIONS:
        snprintf(buf, size, "%s", o->name);
        break;
    default:
        snprintf(buf, size, "default");
        break;
    }
}

static const origin_t *effective_origin(const ga_conf_t *c, gpuarena_kind_t kind, int device,
                                        size_t index)
{
    static const origin_t none = {GA_ORIGIN_DEFAULT, 0, NULL};
    if (ga_conf_has_device(c, kind, device) &&
        c->devices[kind][device]->origin[index].kind != GA_ORIGIN_DEFAULT)
        return &c->devices[kind][device]->origin[index];
    if ((unsigned)kind < GPUARENA_KIND_COUNT &&
        c->kinds[kind].origin[index].kind != GA_ORIGIN_DEFAULT)
        return &c->kinds[kind].origin[index];
    return &none;
}

void ga_conf_value(const ga_conf_t *c, gpuarena_kind_t kind, int device, const ga_key_t *k,
                   char *value, size_t value_size, char *origin, size_t origin_size)
{
    ga_settings_t s;
    ga_conf_settings(c, kind, device, &s);
    ga_key_format(k, &s, value, value_size);
    format_origin(c, effective_origin(c, kind, device, ga_config_key_index(k)), origin,
                  origin_size);
}

bool ga_conf_value_in_device(const ga_conf_t *c, gpuarena_kind_t kind, int device,
                             const ga_key_t *k)
{
    return device >= 0 && ga_conf_has_device(c, kind, device) &&
           effective_origin(c, kind, device, ga_config_key_index(k)) ==
               &c->devices[kind][device]->origin[ga_config_key_index(k)];
}

/* ------------------------------------------------------- sections, keys */

static const char *const section_names[] = {"device", "pinned", "managed", "host", "sim"};

/* Parse a section name "KIND" or "KIND.N" (N for device, pinned, managed).
 * On failure a message "section '...': ..." goes to C under WHERE. */
static bool parse_section(ga_conf_t *c, const char *where, const char *name, size_t len,
                          gpuarena_kind_t *kind, int *device)
{
    char text[64];
    if (len >= sizeof text) {
        conf_error(c, "%s: section '%.40s...': unknown section", where, name);
        return false;
    }
    memcpy(text, name, len);
    text[len] = '\0';
    char *dot = strchr(text, '.');
    if (dot)
        *dot = '\0';
    int k = -1;
    for (int i = 0; i < GPUARENA_KIND_COUNT; i++)
        if (strcmp(text, section_names[i]) == 0)
            k = i;
    if (k < 0) {
        const char *guess = ga_suggest(text, section_names, GPUARENA_KIND_COUNT);
        /* The device part of the guess as it must be written: a number,
         * with no blanks around it (it suggested 'device. 2' for
         * 'device . 2', itself refused); none where it is no number. */
        char devpart[16] = "";
        if (dot) {
            const char *d = dot + 1;
            while (*d == ' ' || *d == '\t')
                d++;
            size_t n = strcspn(d, " \t");
            uint64_t v;
            char num[8];
            if (n > 0 && n < sizeof num && d[n + strspn(d + n, " \t")] == '\0') {
                memcpy(num, d, n);
                num[n] = '\0';
                bool devices = false;
                for (int i = 0; i < GPUARENA_KIND_COUNT; i++)
                    devices |= guess == section_names[i] && has_device_sections((gpuarena_kind_t)i);
                if (devices && ga_parse_uint(num, GA_CONFIG_MAX_DEVICES - 1, &v) == GA_PARSE_OK)
                    snprintf(devpart, sizeof devpart, ".%d", (int)v);
            }
            *dot = '.';
        }
        if (guess)
            conf_error(c, "%s: section '%s': unknown section (did you mean '%s%s'?)", where, text,
                       guess, devpart);
        else
            conf_error(c,
                       "%s: section '%s': unknown section (expected device, pinned, managed, "
                       "host or sim, optionally followed by .DEVICE)",
                       where, text);
        return false;
    }
    int dev = -1;
    if (dot) {
        *dot = '.';
        uint64_t v;
        int r = ga_parse_uint(dot + 1, GA_CONFIG_MAX_DEVICES - 1, &v);
        if (!has_device_sections((gpuarena_kind_t)k)) {
            conf_error(c, "%s: section '%s': %s arenas have no device; use [%s]", where, text,
                       section_names[k], section_names[k]);
            return false;
        }
        if (r != GA_PARSE_OK) {
            conf_error(c, "%s: section '%s': bad device number: expected an integer from 0 to %d",
                       where, text, GA_CONFIG_MAX_DEVICES - 1);
            return false;
        }
        dev = (int)v;
    }
    *kind = (gpuarena_kind_t)k;
    *device = dev;
    return true;
}

/* Set KEY = VALUE in section (KIND, DEVICE), named SECNAME in messages. */
static void set_key(ga_conf_t *c, const char *where, gpuarena_kind_t kind, int device,
                    const char *secname, const char *key, const char *value, origin_t o)
{
    const ga_key_t *k = ga_config_find_key(key);
    if (!k) {
        const char *names[GA_CONFIG_MAX_KEYS];
        size_t n = ga_config_key_count();
        for (size_t i = 0; i < n; i++)
            names[i] = ga_config_key(i)->name;
        const char *guess = ga_suggest(key, names, n);
        if (guess)
            conf_error(c, "%s: key '%s.%.64s': unknown key (did you mean '%s'?)", where, secname,
                       key, guess);
        else
            conf_error(c, "%s: key '%s.%.64s': unknown key (see gpuarena.conf(5))", where, secname,
                       key);
        return;
    }
    if (!ga_key_applies(k, kind)) {
        char list[80] = "";
        for (int i = 0; i < GPUARENA_KIND_COUNT; i++) {
            if (!ga_key_applies(k, (gpuarena_kind_t)i))
                continue;
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s[%s]", used ? ", " : "", section_names[i]);
        }
        conf_error(c, "%s: key '%s.%s': not a key of [%s] arenas (it belongs in %s)", where,
                   secname, key, section_names[kind], list);
        return;
    }
    if (*value == '\0') {
        conf_error(c, "%s: key '%s.%s': empty value: expected %s", where, secname, key, k->range);
        return;
    }
    section_t *s = section_of(c, kind, device);
    if (!s) {
        conf_error(c, "%s: key '%s.%s': no memory", where, secname, key);
        return;
    }
    size_t idx = ga_config_key_index(k);
    if (o.kind == GA_ORIGIN_FILE && s->origin[idx].kind == GA_ORIGIN_FILE) {
        conf_error(c, "%s: key '%s.%s': set twice (first on line %d)", where, secname, key,
                   s->origin[idx].line);
        return;
    }
    ga_settings_t tmp = s->values;
    char why[256];
    if (ga_key_parse(k, value, &tmp, why, sizeof why) != GA_PARSE_OK) {
        conf_error(c, "%s: key '%s.%s': bad value '%.64s': %s", where, secname, key, value, why);
        return;
    }
    ga_key_copy(k, &s->values, &tmp);
    s->origin[idx] = o;
    /* GPUARENA_OPTIONS overrides the file: a kind's key set there also
     * takes the place of what the file's [KIND.N] sections set for it
     * (which would otherwise be laid over it), not of what the variable
     * itself set for one device. */
    if (o.kind != GA_ORIGIN_ENV || device >= 0)
        return;
    ga_settings_t def;
    ga_config_defaults(kind, &def);
    for (int d = 0; d < GA_CONFIG_MAX_DEVICES; d++) {
        section_t *ds = c->devices[kind][d];
        if (ds && ds->origin[idx].kind == GA_ORIGIN_FILE) {
            ga_key_copy(k, &ds->values, &def);
            ds->origin[idx] = (origin_t){GA_ORIGIN_DEFAULT, 0, NULL};
        }
    }
}

/* ---------------------------------------------------------- file parsing */

enum { SEC_NONE, SEC_OK, SEC_BAD };

typedef struct reader {
    ga_conf_t *c;
    const char *p, *end;
    int line;
    int sec_state;
    gpuarena_kind_t kind;
    int device;
    char secname[64];
    char where[512 - 64];
} reader_t;

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v';
}

static void set_where(reader_t *r)
{
    snprintf(r->where, sizeof r->where, "%s:%d", r->c->file, r->line);
}

/* A key line must have '=' or ':' before any inline ';' comment, as
 * libinih wants. */
static bool has_separator(const char *s, size_t len)
{
    bool was_space = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=' || s[i] == ':')
            return true;
        if (was_space && s[i] == ';')
            return false;
        was_space = is_space(s[i]);
    }
    return false;
}

static void section_line(reader_t *r, const char *s, size_t len)
{
    const char *close = memchr(s, ']', len);
    r->sec_state = SEC_BAD;
    if (!close) {
        conf_error(r->c, "%s: syntax error: section header without ']'", r->where);
        return;
    }
    const char *rest = close + 1;
    while (rest < s + len && is_space(*rest))
        rest++;
    if (rest < s + len && *rest != '#' && *rest != ';') {
        conf_error(r->c, "%s: syntax error: text after ']'", r->where);
        return;
    }
    const char *name = s + 1;
    size_t n = (size_t)(close - name);
    while (n && is_space(*name))
        name++, n--;
    while (n && is_space(name[n - 1]))
        n--;
    if (n == 0) {
        conf_error(r->c, "%s: syntax error: empty section name", r->where);
        return;
    }
    if (parse_section(r->c, r->where, name, n, &r->kind, &r->device)) {
        memcpy(r->secname, name, n); /* n < 64: parse_section checked */
        r->secname[n] = '\0';
        r->sec_state = SEC_OK;
    }
}

/* libinih's reader: one line per call, or NULL at the end. */
static char *read_line(char *str, int num, void *stream)
{
    reader_t *r = stream;
    if (r->p >= r->end)
        return NULL;
    const char *s = r->p;
    const char *nl = memchr(s, '\n', (size_t)(r->end - s));
    size_t len = (size_t)((nl ? nl : r->end) - s);
    r->p = nl ? nl + 1 : r->end;
    r->line++;
    set_where(r);
    str[0] = '\n';
    str[1] = '\0';
    if (r->line == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3, len -= 3;
    if (memchr(s, '\0', len)) {
        conf_error(r->c, "%s: syntax error: the line holds a NUL byte", r->where);
        return str;
    }
    while (len && is_space(*s))
        s++, len--;
    if (len == 0 || *s == '#' || *s == ';')
        return str;
    /* A comment after a space is dropped here, so that the limit is on
     * the setting, not on what a comment says (gpuarena-config writes
     * file names there, of any length). */
    for (size_t i = 1; i < len; i++) {
        if ((s[i] == '#' || s[i] == ';') && is_space(s[i - 1])) {
            len = i;
            break;
        }
    }
    while (len && is_space(s[len - 1]))
        len--;
    int limit = num - 3 < GA_CONFIG_MAX_LINE ? num - 3 : GA_CONFIG_MAX_LINE;
    if (len > (size_t)(limit > 0 ? limit : 0)) {
        conf_error(r->c, "%s: syntax error: line longer than %d characters", r->where, limit);
        return str;
    }
    if (*s == '[') {
        section_line(r, s, len);
        return str;
    }
    if (!has_separator(s, len)) {
        conf_error(r->c, "%s: syntax error: expected 'key = value', '[section]' or a comment",
                   r->where);
        return str;
    }
    memcpy(str, s, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    reader_t *r = user;
    (void)section; /* the reader tracks sections itself */
    if (r->sec_state == SEC_BAD)
        return 1; /* the header's error is reported */
    if (r->sec_state == SEC_NONE) {
        conf_error(r->c,
                   "%s: key '%.64s': outside any section (put it under [device], [pinned], "
                   "[managed], [host] or [sim])",
                   r->where, name);
        return 1;
    }
    if (*name == '\0') {
        conf_error(r->c, "%s: syntax error: no key before '='", r->where);
        return 1;
    }
    /* read_line has dropped a comment after a space; a '#' or ';' right
     * after '=' is part of the value (gpuarena.conf(5)), which is then a
     * bad one, and said so. */
    origin_t o = {GA_ORIGIN_FILE, r->line, NULL};
    set_key(r->c, r->where, r->kind, r->device, r->secname, name, value, o);
    return 1;
}

static gpuarena_status_t parse_buffer(ga_conf_t *c, const char *buf, size_t len)
{
    reader_t r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.p = buf;
    r.end = buf + len;
    r.sec_state = SEC_NONE;
    int e = ini_parse_stream(read_line, &r, on_key, &r);
    if (e == -2) {
        c->no_memory = true;
        conf_error(c, "%s: no memory to parse the file", c->file);
    } else if (e != 0 && c->nerrors == 0)
        conf_error(c, "%s:%d: syntax error", c->file, e);
    return conf_status(c);
}

static gpuarena_status_t set_file(ga_conf_t *c, const char *name)
{
    char *copy = strdup(name ? name : "(buffer)");
    if (!copy)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory to read the configuration");
    free(c->file);
    c->file = copy;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_config_parse_buffer(ga_conf_t *c, const char *name, const char *buf,
                                         size_t len)
{
    gpuarena_status_t st = set_file(c, name);
    if (st != GPUARENA_SUCCESS)
        return st;
    return parse_buffer(c, buf, len);
}

/* Read PATH whole into a new buffer.  Returns 0, or an errno value. */
static int slurp(const char *path, char **out, size_t *out_len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int err = 0;
    if (!buf)
        err = ENOMEM;
    while (!err) {
        if (len == cap) {
            if (cap >= GA_CONFIG_MAX_FILE) {
                /* Full at the limit: too large only if there is more. */
                char more;
                if (fread(&more, 1, 1, f) == 1)
                    err = EFBIG;
                else if (ferror(f))
                    err = errno ? errno : EIO;
                break;
            }
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                err = ENOMEM;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                err = errno ? errno : EIO;
            break;
        }
    }
    fclose(f);
    if (err) {
        free(buf);
        return err;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

gpuarena_status_t ga_conf_load_file(ga_conf_t *c, const char *path)
{
    gpuarena_status_t st = set_file(c, path);
    if (st != GPUARENA_SUCCESS)
        return st;
    char *buf = NULL;
    size_t len = 0;
    errno = 0;
    int err = slurp(path, &buf, &len);
    if (err == EFBIG) {
        conf_error(c, "%s: cannot read: larger than %d bytes", path, GA_CONFIG_MAX_FILE);
        return conf_status(c);
    }
    if (err) {
        c->no_memory |= err == ENOMEM;
        conf_error(c, "%s: cannot read: %s", path, strerror(err));
        return conf_status(c);
    }
    st = parse_buffer(c, buf, len);
    free(buf);
    return st;
}

/* --------------------------------------------------------- option strings */

/* Split TEXT into "name=value" items at commas; a piece without '=' joins
 * the value before it (node lists: "pinned.numa=0,2").  Calls FN for each
 * item; a message for an item that is not name=value. */
typedef void item_fn(ga_conf_t *c, const char *origin, char *name, char *value, void *ctx);

static char *trim(char *s)
{
    while (is_space(*s) || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n && (is_space(s[n - 1]) || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Whether the piece of an option string from P to the next comma continues
 * the previous item's value: it has no '=' and is not blank. */
static bool continues(const char *p)
{
    size_t n = strcspn(p, ",");
    bool blank = true;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '=')
            return false;
        if (!is_space(p[i]) && p[i] != '\n')
            blank = false;
    }
    return !blank;
}

static void split_options(ga_conf_t *c, const char *text, const char *origin, item_fn *fn,
                          void *ctx)
{
    char *copy = strdup(text);
    if (!copy) {
        c->no_memory = true;
        conf_error(c, "%s: no memory", origin);
        return;
    }
    char *start = copy;
    for (char *p = copy;; p++) {
        if (*p == ',' && continues(p + 1))
            continue;
        if (*p != ',' && *p != '\0')
            continue;
        bool last = *p == '\0';
        *p = '\0';
        char *item = trim(start);
        if (*item != '\0') { /* ",," and a trailing comma are harmless */
            char *eq = strchr(item, '=');
            if (eq) {
                *eq = '\0';
                fn(c, origin, trim(item), trim(eq + 1), ctx);
            } else {
                conf_error(c, "%s: '%.64s': expected KEY=VALUE", origin, item);
            }
        }
        if (last)
            break;
        start = p + 1;
    }
    free(copy);
}

static void env_item(ga_conf_t *c, const char *origin, char *name, char *value, void *ctx)
{
    (void)ctx;
    char *dot = strrchr(name, '.');
    if (!dot) {
        conf_error(c, "%s: key '%.64s': no section (write SECTION.KEY, as in device.%.64s)", origin,
                   name, name);
        return;
    }
    *dot = '\0';
    gpuarena_kind_t kind;
    int device;
    if (!parse_section(c, origin, name, strlen(name), &kind, &device))
        return;
    origin_t o = {GA_ORIGIN_ENV, 0, origin};
    set_key(c, origin, kind, device, name, dot + 1, value, o);
}

gpuarena_status_t ga_conf_apply_options(ga_conf_t *c, const char *text, const char *origin)
{
    if (text)
        split_options(c, text, origin, env_item, NULL);
    return conf_status(c);
}

/* Consistency of one section's effective settings.  A broken rule is
 * blamed on the key of the two that was set last (A if both were set
 * alike). */
static void check_section(ga_conf_t *c, gpuarena_kind_t kind, int device)
{
    ga_settings_t s;
    const ga_key_t *a, *b;
    char why[160], where[512], secname[32];
    ga_conf_settings(c, kind, device, &s);
    /* Every rule broken, not the first alone: --check then shows them
     * all at once (gpuarena.conf(5): none is ignored). */
    for (size_t next = 0; ga_settings_broken(&s, &next, &a, &b);) {
        const origin_t *oa = effective_origin(c, kind, device, ga_config_key_index(a));
        const origin_t *ob = effective_origin(c, kind, device, ga_config_key_index(b));
        /* Set in this device's own section, not inherited from the
         * kind's: of two keys that conflict only here, that one broke the
         * rule. */
        const section_t *own = device >= 0 ? c->devices[kind][device] : NULL;
        bool a_own = own && oa == &own->origin[ga_config_key_index(a)];
        bool b_own = own && ob == &own->origin[ga_config_key_index(b)];
        /* Both from the kind's section: reported there already, once,
         * not again for every device section that inherits it. */
        if (own && !a_own && !b_own)
            continue;
        /* The one set last: GPUARENA_OPTIONS over the file, the file over
         * a default (a file that --check passes, broken by the variable,
         * is not the one named, whichever section either key is in);
         * of two set in one place, the device section's own. */
        const ga_key_t *blame;
        if (oa->kind != ob->kind)
            blame = ob->kind > oa->kind ? b : a;
        else
            blame = b_own && !a_own ? b : a;
        format_origin(c, blame == a ? oa : ob, where, sizeof where);
        ga_settings_conflict(&s, blame, a, b, why, sizeof why);
        /* The section the blamed key was written in. */
        if (blame == a ? a_own : b_own)
            snprintf(secname, sizeof secname, "%s.%d", ga_kind_name(kind), device);
        else
            snprintf(secname, sizeof secname, "%s", ga_kind_name(kind));
        conf_error(c, "%s: key '%s.%s': %s", where, secname, blame->name, why);
    }
}

gpuarena_status_t ga_conf_check(ga_conf_t *c)
{
    for (int k = 0; k < GPUARENA_KIND_COUNT; k++) {
        check_section(c, (gpuarena_kind_t)k, -1);
        for (int d = 0; d < GA_CONFIG_MAX_DEVICES; d++)
            if (c->devices[k][d])
                check_section(c, (gpuarena_kind_t)k, d);
    }
    return conf_status(c);
}

/* --------------------------------------------- gpuarena_create() options */

typedef struct apply_ctx {
    gpuarena_kind_t kind;
    ga_settings_t *s;
    bool set[GA_CONFIG_MAX_KEYS]; /* keys the options set */
} apply_ctx_t;

static void create_item(ga_conf_t *c, const char *origin, char *name, char *value, void *ctx)
{
    apply_ctx_t *a = ctx;
    const ga_key_t *k = ga_config_find_key(name);
    const char *dot = strrchr(name, '.');
    if (!k && dot && ga_config_find_key(dot + 1)) {
        conf_error(c, "%s: key '%s': the options of one arena take no section (write '%s')", origin,
                   name, dot + 1);
        return;
    }
    if (!k && dot) {
        /* Not given to set_key, which names keys in the kind's section:
         * it wrote 'host.host.max_cahced' for 'host.max_cahced'. */
        const char *names[GA_CONFIG_MAX_KEYS];
        size_t n = ga_config_key_count();
        for (size_t i = 0; i < n; i++)
            names[i] = ga_config_key(i)->name;
        const char *guess = ga_suggest(dot + 1, names, n);
        conf_error(c,
                   "%s: key '%.64s': unknown key; the options of one arena take no section, and "
                   "'%.64s' is no key (%s%s%s)",
                   origin, name, dot + 1, guess ? "did you mean '" : "see gpuarena.conf(5)",
                   guess ? guess : "", guess ? "'?" : "");
        return;
    }
    if (!k || !ga_key_applies(k, a->kind) || *value == '\0') {
        /* the messages of a file's key, in the kind's section; nothing is
         * set, but a key of the kind is named, empty or not: gpuarena_set
         * refuses a fixed one as such */
        if (k && ga_key_applies(k, a->kind))
            a->set[ga_config_key_index(k)] = true;
        origin_t o = {GA_ORIGIN_OPTIONS, 0, origin};
        set_key(c, origin, a->kind, -1, ga_kind_name(a->kind), name, value, o);
        return;
    }
    char why[256];
    a->set[ga_config_key_index(k)] = true;
    if (ga_key_parse(k, value, a->s, why, sizeof why) != GA_PARSE_OK)
        conf_error(c, "%s: key '%s.%s': bad value '%.64s': %s", origin, ga_kind_name(a->kind), name,
                   value, why);
}

gpuarena_status_t ga_config_apply(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                  const char *origin)
{
    return ga_config_apply_named(s, kind, options, origin, NULL);
}

gpuarena_status_t ga_config_apply_named(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                        const char *origin, bool *named)
{
    if (named)
        memset(named, 0, GA_CONFIG_MAX_KEYS * sizeof *named);
    if (!options || !*options)
        return GPUARENA_SUCCESS;
    if ((unsigned)kind >= GPUARENA_KIND_COUNT)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "unknown arena kind %d", (int)kind);
    ga_conf_t *c = ga_conf_new();
    if (!c)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory to parse options");
    ga_settings_t tmp = *s;
    apply_ctx_t ctx = {kind, &tmp, {false}};
    const char *name = origin ? origin : "options";
    split_options(c, options, name, create_item, &ctx);
    const ga_key_t *a, *b;
    if (c->nerrors == 0 && !ga_settings_consistent(&tmp, &a, &b)) {
        char why[160];
        const ga_key_t *blame =
            !ctx.set[ga_config_key_index(a)] && ctx.set[ga_config_key_index(b)] ? b : a;
        ga_settings_conflict(&tmp, blame, a, b, why, sizeof why);
        conf_error(c, "%s: key '%s.%s': %s", name, ga_kind_name(kind), blame->name, why);
    }
    gpuarena_status_t st = conf_status(c);
    ga_conf_free(c);
    if (st == GPUARENA_SUCCESS)
        *s = tmp;
    if (named)
        memcpy(named, ctx.set, GA_CONFIG_MAX_KEYS * sizeof *named);
    return st;
}

/* --------------------------------------------------- the search order */

/* A file of the search order: read into C if it is there (it can be
 * opened, or cannot for another reason than being absent, ENOENT or
 * ENOTDIR, which reading it then reports); *FOUND false if absent, and
 * true where the host had no memory to tell (HOST_MEMORY). */
static gpuarena_status_t try_file(ga_conf_t *c, const char *path, bool *found)
{
    FILE *f = fopen(path, "re");
    *found = true;
    if (f)
        fclose(f);
    else if (errno == ENOMEM)
        return ga_error(GPUARENA_ERR_HOST_MEMORY,
                        "%s: no memory to look for the configuration file", path);
    else if (errno == ENOENT || errno == ENOTDIR)
        *found = false;
    return *found ? ga_conf_load_file(c, path) : GPUARENA_SUCCESS;
}

static void note_searched(ga_conf_t *c, const char *path)
{
    size_t old = c->searched ? strlen(c->searched) : 0;
    char *s = realloc(c->searched, old + strlen(path) + 3);
    if (!s)
        return;
    snprintf(s + old, strlen(path) + 3, "%s%s", old ? ", " : "", path);
    c->searched = s;
}

/* Read the file of the search order into C, if any. */
static gpuarena_status_t load_searched(ga_conf_t *c, const char *path)
{
    if (path) {
        c->file_source = "gpuarena_init";
        return ga_conf_load_file(c, path);
    }
    const char *v = ga_env("GPUARENA_CONF");
    if (v) {
        c->file_source = "GPUARENA_CONF";
        return ga_conf_load_file(c, v);
    }
    char buf[4096];
    const char *xdg = ga_env("XDG_CONFIG_HOME"), *home = ga_env("HOME");
    buf[0] = '\0';
    if (xdg && xdg[0] == '/') {
        snprintf(buf, sizeof buf, "%s/gpuarena.conf", xdg);
        c->file_source = "XDG_CONFIG_HOME";
    } else if (home) {
        snprintf(buf, sizeof buf, "%s/.config/gpuarena.conf", home);
        c->file_source = "HOME";
    }
    bool found;
    gpuarena_status_t st;
    if (buf[0]) {
        if ((st = try_file(c, buf, &found)) != GPUARENA_SUCCESS || found)
            return st;
        note_searched(c, buf);
    }
    snprintf(buf, sizeof buf, "%s/gpuarena.conf", GA_SYSCONFDIR);
    c->file_source = "sysconfdir";
    if ((st = try_file(c, buf, &found)) != GPUARENA_SUCCESS || found)
        return st;
    note_searched(c, buf);
    c->file_source = NULL;
    return GPUARENA_SUCCESS;
}

/* ------------------------------------------ the process's configuration */

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int config_state; /* 0: not read, 1: read, 2: failed */
static ga_conf_t *config_current;
static gpuarena_status_t config_status;
static char config_message[512];
static char *config_path;       /* the path given to ga_config_init, if any */
static struct stat config_file; /* that file, where stat(2) could say */
static bool config_file_known;

/* Whether PATH names the file the configuration was read from: the same
 * spelling, or the same file under another ("./a.conf", an absolute
 * path, a link), which was refused as another configuration. */
static bool same_config(const char *path)
{
    if (!config_path)
        return false;
    if (strcmp(path, config_path) == 0)
        return true;
    struct stat st;
    return config_file_known && stat(path, &st) == 0 && st.st_dev == config_file.st_dev &&
           st.st_ino == config_file.st_ino;
}

void ga_config_fork_lock(void)
{
    pthread_mutex_lock(&config_lock);
}

void ga_config_fork_unlock(void)
{
    pthread_mutex_unlock(&config_lock);
}

static gpuarena_status_t sticky(void)
{
    return ga_error(config_status, "%s", config_message);
}

static gpuarena_status_t load(const char *path)
{
    ga_conf_t *c = ga_conf_new();
    if (!c)
        return ga_error(GPUARENA_ERR_HOST_MEMORY, "no memory to read the configuration");
    gpuarena_status_t st = load_searched(c, path);
    if (st == GPUARENA_SUCCESS)
        st = ga_conf_apply_options(c, ga_env("GPUARENA_OPTIONS"), "GPUARENA_OPTIONS");
    if (st == GPUARENA_SUCCESS)
        st = ga_conf_check(c);
    if (st == GPUARENA_SUCCESS) {
        config_current = c;
        atomic_store(&config_state, 1);
        return st;
    }
    if (st == GPUARENA_ERR_HOST_MEMORY) {
        /* Not the configuration's fault: the next call reads it again. */
        ga_conf_free(c);
        return st;
    }
    config_status = st;
    snprintf(config_message, sizeof config_message, "%s", gpuarena_last_error());
    ga_conf_free(c);
    atomic_store(&config_state, 2);
    return st;
}

gpuarena_status_t ga_config_init(const char *path)
{
    if (path && !*path)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "gpuarena_init: empty path");
    pthread_mutex_lock(&config_lock);
    gpuarena_status_t st;
    int state = atomic_load(&config_state);
    if (state == 0) {
        free(config_path);
        config_path = path ? strdup(path) : NULL;
        config_file_known = path && stat(path, &config_file) == 0;
        st = load(path);
    } else if (path && !same_config(path)) {
        if (config_path)
            st = ga_error(GPUARENA_ERR_CONFIG,
                          "gpuarena_init: %s not read: the configuration was already read from "
                          "%s, by an earlier gpuarena_init()",
                          path, config_path);
        else
            st = ga_error(GPUARENA_ERR_CONFIG,
                          "gpuarena_init: %s not read: the configuration was already read; call "
                          "gpuarena_init() before any other gpuarena function",
                          path);
    } else {
        st = state == 1 ? GPUARENA_SUCCESS : sticky();
    }
    pthread_mutex_unlock(&config_lock);
    return st;
}

/* The configuration in effect, reading it if nobody has; NULL with *ST
 * and the message set when reading failed. */
static const ga_conf_t *current(gpuarena_status_t *st)
{
    int state = atomic_load(&config_state);
    if (state == 0) {
        *st = ga_config_init(NULL);
        if (*st != GPUARENA_SUCCESS)
            return NULL;
        state = atomic_load(&config_state);
    }
    if (state != 1) {
        pthread_mutex_lock(&config_lock);
        *st = sticky();
        pthread_mutex_unlock(&config_lock);
        return NULL;
    }
    *st = GPUARENA_SUCCESS;
    return config_current;
}

const ga_conf_t *ga_config_current(void)
{
    gpuarena_status_t st;
    return current(&st);
}

gpuarena_status_t ga_config_settings(gpuarena_kind_t kind, int device, ga_settings_t *out)
{
    gpuarena_status_t st;
    const ga_conf_t *c = current(&st);
    if (c)
        ga_conf_settings(c, kind, device, out);
    return st;
}

void ga_config_reset(void)
{
    pthread_mutex_lock(&config_lock);
    ga_conf_free(config_current);
    config_current = NULL;
    free(config_path);
    config_path = NULL;
    config_file_known = false;
    config_message[0] = '\0';
    config_status = GPUARENA_SUCCESS;
    atomic_store(&config_state, 0);
    pthread_mutex_unlock(&config_lock);
}
