/*
 * parse.c - value parsing for gpuarena.conf(5): see parse.h.  Every parser
 * reads the whole text or fails; none accepts trailing garbage.
 */
#include <config.h>

#include "config/parse.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits at *P into *OUT; false on no digit or overflow of UINT64. */
static bool read_digits(const char **p, uint64_t *out, bool *overflow)
{
    const char *s = *p;
    uint64_t v = 0;
    *overflow = false;
    if (!is_digit(*s))
        return false;
    for (; is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            *overflow = true;
        else
            v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return true;
}

int ga_parse_size(const char *text, uint64_t *out)
{
    const char *s = text;
    uint64_t v;
    bool overflow;
    if (!read_digits(&s, &v, &overflow))
        return GA_PARSE_SYNTAX;
    unsigned shift = 0;
    switch (*s) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) {
        s++;
        if (strcmp(s, "iB") == 0)
            s += 2;
    }
    if (*s != '\0')
        return GA_PARSE_SYNTAX;
    if (overflow || (shift && v > (UINT64_MAX >> shift)))
        return GA_PARSE_RANGE;
#if SIZE_MAX < UINT64_MAX
    if ((v << shift) > SIZE_MAX)
        return GA_PARSE_RANGE;
#endif
    *out = v << shift;
    return GA_PARSE_OK;
}

int ga_parse_uint(const char *text, uint64_t max, uint64_t *out)
{
    const char *s = text;
    uint64_t v;
    bool overflow;
    if (!read_digits(&s, &v, &overflow) || *s != '\0')
        return GA_PARSE_SYNTAX;
    if (overflow || v > max)
        return GA_PARSE_RANGE;
    *out = v;
    return GA_PARSE_OK;
}

int ga_parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return GA_PARSE_OK;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = false;
            return GA_PARSE_OK;
        }
    }
    return GA_PARSE_SYNTAX;
}

int ga_parse_fraction(const char *text, double *out)
{
    const char *s = text;
    uint64_t whole = 0, num = 0, den = 1;
    bool overflow = false, any = false;
    if (is_digit(*s)) {
        read_digits(&s, &whole, &overflow);
        any = true;
    }
    if (*s == '.') {
        s++;
        for (; is_digit(*s); s++, any = true) {
            if (den < 1000000000000000000ULL) { /* later digits cannot matter */
                num = num * 10 + (uint64_t)(*s - '0');
                den *= 10;
            }
        }
    }
    if (!any || *s != '\0')
        return GA_PARSE_SYNTAX;
    if (overflow || whole > 1 || (whole == 1 && num != 0))
        return GA_PARSE_RANGE;
    *out = (double)whole + (double)num / (double)den;
    return GA_PARSE_OK;
}

int ga_parse_word(const char *text, const ga_word_t *words, uint64_t *out)
{
    for (; words && words->word; words++) {
        if (strcasecmp(text, words->word) == 0) {
            *out = words->value;
            return GA_PARSE_OK;
        }
    }
    return GA_PARSE_SYNTAX;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static int parse_node_list(const char *s, int *nodes, unsigned *count, char *why, size_t n)
{
    uint64_t seen = 0;
    unsigned c = 0;
    for (;;) {
        uint64_t a, b;
        bool overflow;
        s = skip_space(s);
        if (!read_digits(&s, &a, &overflow)) {
            snprintf(why, n, "expected a node number");
            return GA_PARSE_SYNTAX;
        }
        b = a;
        if (*s == '-') {
            s++;
            if (!read_digits(&s, &b, &overflow)) {
                snprintf(why, n, "expected a node number after '-'");
                return GA_PARSE_SYNTAX;
            }
        }
        if (a >= GA_MAX_NODES || b >= GA_MAX_NODES || overflow) {
            snprintf(why, n, "node numbers go from 0 to %d", GA_MAX_NODES - 1);
            return GA_PARSE_RANGE;
        }
        if (b < a) {
            snprintf(why, n, "range %u-%u goes backwards", (unsigned)a, (unsigned)b);
            return GA_PARSE_RANGE;
        }
        for (uint64_t i = a; i <= b; i++) {
            if (seen & (1ULL << i)) {
                snprintf(why, n, "node %u is listed twice", (unsigned)i);
                return GA_PARSE_RANGE;
            }
            seen |= 1ULL << i;
            nodes[c++] = (int)i;
        }
        s = skip_space(s);
        if (*s == '\0')
            break;
        if (*s != ',') {
            snprintf(why, n, "expected ',' between nodes");
            return GA_PARSE_SYNTAX;
        }
        s++;
    }
    *count = c;
    return GA_PARSE_OK;
}

int ga_parse_numa(const char *text, ga_numa_policy_t *policy, int *nodes, unsigned *count,
                  char *why, size_t why_size)
{
    int tmp[GA_MAX_NODES];
    unsigned c = 0;
    ga_numa_policy_t p;
    int r = GA_PARSE_OK;
    if (strcasecmp(text, "nearest") == 0) {
        p = GA_NUMA_NEAREST;
    } else if (strcasecmp(text, "local") == 0) {
        p = GA_NUMA_LOCAL;
    } else if (strcasecmp(text, "interleave") == 0) {
        p = GA_NUMA_INTERLEAVE;
    } else if (strncasecmp(text, "interleave:", 11) == 0) {
        p = GA_NUMA_INTERLEAVE;
        r = parse_node_list(text + 11, tmp, &c, why, why_size);
    } else if (is_digit(*skip_space(text))) {
        p = GA_NUMA_NODES;
        r = parse_node_list(text, tmp, &c, why, why_size);
    } else {
        snprintf(why, why_size, "%s", GA_NUMA_EXPECTED);
        return GA_PARSE_SYNTAX;
    }
    if (r != GA_PARSE_OK)
        return r;
    *policy = p;
    memcpy(nodes, tmp, c * sizeof *tmp);
    *count = c;
    return GA_PARSE_OK;
}

void ga_format_size(uint64_t v, char *buf, size_t size)
{
    static const char suffix[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        unsigned shift = 40 - 10 * (unsigned)i;
        uint64_t unit = 1ULL << shift;
        if (v != 0 && v % unit == 0) {
            snprintf(buf, size, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
            return;
        }
    }
    snprintf(buf, size, "%llu", (unsigned long long)v);
}

void ga_format_numa(ga_numa_policy_t policy, const int *nodes, unsigned count, char *buf,
                    size_t size)
{
    size_t used = 0;
    const char *head = "";
    switch (policy) {
    case GA_NUMA_NEAREST:
        snprintf(buf, size, "nearest");
        return;
    case GA_NUMA_LOCAL:
        snprintf(buf, size, "local");
        return;
    case GA_NUMA_INTERLEAVE:
        if (count == 0) {
            snprintf(buf, size, "interleave");
            return;
        }
        head = "interleave:";
        break;
    case GA_NUMA_NODES:
        break;
    }
    bool in[GA_MAX_NODES] = {false};
    for (unsigned i = 0; i < count; i++)
        if (nodes[i] >= 0 && nodes[i] < GA_MAX_NODES)
            in[nodes[i]] = true;
    int w = snprintf(buf, size, "%s", head);
    used = w > 0 ? (size_t)w : 0;
    const char *sep = "";
    for (int n = 0; n < GA_MAX_NODES && used < size; n++) {
        if (!in[n])
            continue;
        int last = n;
        while (last + 1 < GA_MAX_NODES && in[last + 1])
            last++;
        if (last - n >= 2) {
            w = snprintf(buf + used, size - used, "%s%d-%d", sep, n, last);
            n = last;
        } else {
            w = snprintf(buf + used, size - used, "%s%d", sep, n);
        }
        if (w < 0)
            break;
        used += (size_t)w;
        sep = ",";
    }
}
