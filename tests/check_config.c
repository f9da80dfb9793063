/* check_config.c - the config room: value parsing, the key table, files,
 * per-device sections, GPUARENA_OPTIONS, the search order, every error
 * message, gpuarena_init() and the options of gpuarena_create(). */
#include <config.h>

#include "arena.h"
#include "checkrun.h"
#include "config/config.h"
#include "config/parse.h"
#include "config/suggest.h"
#include "cuda/cuda.h"
#include "gpuarena.h"
#include "providers/provider.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/check_config.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write TEXT to DIR/NAME; returns the path (static buffer per call site). */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void clear_env(void)
{
    unsetenv("GPUARENA_CONF");
    unsetenv("GPUARENA_OPTIONS");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", "/nonexistent-home-of-check_config", 1);
}

static void setup(void)
{
    clear_env();
    ga_config_reset();
    make_tmpdir();
}

static void teardown(void)
{
    ga_config_reset();
    rm_rf(tmpdir);
}

/* Parse TEXT as a file named "t.conf"; returns the conf (caller frees). */
static ga_conf_t *parse(const char *text, gpuarena_status_t *st)
{
    ga_conf_t *c = ga_conf_new();
    ck_assert_ptr_nonnull(c);
    *st = ga_config_parse_buffer(c, "t.conf", text, strlen(text));
    if (*st == GPUARENA_SUCCESS)
        *st = ga_conf_check(c);
    return c;
}

/* The first error of parsing TEXT, which must fail. */
static void expect_error(const char *text, const char *message)
{
    gpuarena_status_t st;
    ga_conf_t *c = parse(text, &st);
    ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
    ck_assert_uint_ge(ga_conf_error_count(c), 1);
    ck_assert_str_eq(ga_conf_error(c, 0), message);
    ck_assert_str_eq(gpuarena_last_error(), message);
    ga_conf_free(c);
}

static void value_of(const ga_conf_t *c, gpuarena_kind_t kind, int dev, const char *key,
                     const char *want_value, const char *want_origin)
{
    char v[128], o[256];
    const ga_key_t *k = ga_config_find_key(key);
    ck_assert_ptr_nonnull(k);
    ga_conf_value(c, kind, dev, k, v, sizeof v, o, sizeof o);
    ck_assert_str_eq(v, want_value);
    ck_assert_str_eq(o, want_origin);
}

/* ----------------------------------------------------------- parsers */

START_TEST(sizes)
{
    uint64_t v;
    struct {
        const char *text;
        uint64_t want;
    } good[] = {{"0", 0},
                {"512", 512},
                {"64K", 64ULL << 10},
                {"64k", 64ULL << 10},
                {"2M", 2ULL << 20},
                {"1G", 1ULL << 30},
                {"3T", 3ULL << 40},
                {"2MiB", 2ULL << 20},
                {"16777215T", 16777215ULL << 40},
                {"18446744073709551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ck_assert_int_eq(ga_parse_size(good[i].text, &v), GA_PARSE_OK);
        ck_assert_uint_eq(v, good[i].want);
    }
    const char *bad[] = {"",   "K",   "1.5G", "-1",  "+1",  "1 G",
                         " 1", "1G ", "12X",  "1KB", "1Ki", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 77;
        ck_assert_int_eq(ga_parse_size(bad[i], &v), GA_PARSE_SYNTAX);
        ck_assert_uint_eq(v, 77);
    }
    ck_assert_int_eq(ga_parse_size("16777216T", &v), GA_PARSE_RANGE);
    ck_assert_int_eq(ga_parse_size("18446744073709551616", &v), GA_PARSE_RANGE);
    ck_assert_int_eq(ga_parse_size("99999999999999999999999G", &v), GA_PARSE_RANGE);

    char buf[32];
    uint64_t round_trip[] = {0,    1,          512,        1000,       1024,
                             1536, 2ULL << 20, 3ULL << 30, 5ULL << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof round_trip / sizeof round_trip[0]; i++) {
        ga_format_size(round_trip[i], buf, sizeof buf);
        ck_assert_int_eq(ga_parse_size(buf, &v), GA_PARSE_OK);
        ck_assert_uint_eq(v, round_trip[i]);
    }
    ga_format_size(1536, buf, sizeof buf);
    ck_assert_str_eq(buf, "1536");
    ga_format_size(3ULL << 30, buf, sizeof buf);
    ck_assert_str_eq(buf, "3G");
}
END_TEST

START_TEST(integers_booleans_fractions_words)
{
    uint64_t v;
    ck_assert_int_eq(ga_parse_uint("1024", 1024, &v), GA_PARSE_OK);
    ck_assert_uint_eq(v, 1024);
    ck_assert_int_eq(ga_parse_uint("1025", 1024, &v), GA_PARSE_RANGE);
    ck_assert_int_eq(ga_parse_uint("1K", 1 << 20, &v), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_uint("", 10, &v), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_uint("-3", 10, &v), GA_PARSE_SYNTAX);

    bool b = false;
    const char *yes[] = {"true", "TRUE", "yes", "on", "1"}, *no[] = {"false", "No", "off", "0"};
    for (size_t i = 0; i < 5; i++) {
        b = false;
        ck_assert_int_eq(ga_parse_bool(yes[i], &b), GA_PARSE_OK);
        ck_assert(b);
    }
    for (size_t i = 0; i < 4; i++) {
        b = true;
        ck_assert_int_eq(ga_parse_bool(no[i], &b), GA_PARSE_OK);
        ck_assert(!b);
    }
    ck_assert_int_eq(ga_parse_bool("truee", &b), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_bool("2", &b), GA_PARSE_SYNTAX);

    double d = -1;
    ck_assert_int_eq(ga_parse_fraction("0.8", &d), GA_PARSE_OK);
    ck_assert(d > 0.7999 && d < 0.8001);
    ck_assert_int_eq(ga_parse_fraction(".25", &d), GA_PARSE_OK);
    ck_assert(d == 0.25);
    ck_assert_int_eq(ga_parse_fraction("1", &d), GA_PARSE_OK);
    ck_assert(d == 1.0);
    ck_assert_int_eq(ga_parse_fraction("1.000", &d), GA_PARSE_OK);
    ck_assert_int_eq(ga_parse_fraction("0", &d), GA_PARSE_OK);
    ck_assert(d == 0.0);
    ck_assert_int_eq(ga_parse_fraction("1.01", &d), GA_PARSE_RANGE);
    ck_assert_int_eq(ga_parse_fraction("2", &d), GA_PARSE_RANGE);
    ck_assert_int_eq(ga_parse_fraction(".", &d), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_fraction("", &d), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_fraction("0.8x", &d), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_fraction("-0.5", &d), GA_PARSE_SYNTAX);
    ck_assert_int_eq(ga_parse_fraction("80%", &d), GA_PARSE_SYNTAX);

    static const ga_word_t words[] = {{"event", 0}, {"wait", 1}, {NULL, 0}};
    ck_assert_int_eq(ga_parse_word("WAIT", words, &v), GA_PARSE_OK);
    ck_assert_uint_eq(v, 1);
    ck_assert_int_eq(ga_parse_word("waits", words, &v), GA_PARSE_SYNTAX);
}
END_TEST

START_TEST(numa_lists)
{
    ga_numa_policy_t p;
    int nodes[GA_MAX_NODES];
    unsigned n;
    char why[128], buf[256];
    ck_assert_int_eq(ga_parse_numa("nearest", &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_int_eq(p, GA_NUMA_NEAREST);
    ck_assert_int_eq(ga_parse_numa("local", &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_int_eq(p, GA_NUMA_LOCAL);
    ck_assert_int_eq(ga_parse_numa("interleave", &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_int_eq(p, GA_NUMA_INTERLEAVE);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(ga_parse_numa("interleave:0-2,5", &p, nodes, &n, why, sizeof why),
                     GA_PARSE_OK);
    ck_assert_int_eq(p, GA_NUMA_INTERLEAVE);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(nodes[0], 0);
    ck_assert_int_eq(nodes[2], 2);
    ck_assert_int_eq(nodes[3], 5);
    ga_format_numa(p, nodes, n, buf, sizeof buf);
    ck_assert_str_eq(buf, "interleave:0-2,5");
    /* Every list in 64 nodes fits a line of a file, and reads back. */
    ck_assert_int_eq(ga_parse_numa("interleave:63,0-61", &p, nodes, &n, why, sizeof why),
                     GA_PARSE_OK);
    ga_format_numa(p, nodes, n, buf, sizeof buf);
    ck_assert_str_eq(buf, "interleave:0-61,63");
    int odd[32];
    for (int i = 0; i < 32; i++)
        odd[i] = 63 - 2 * i;
    ga_format_numa(GA_NUMA_INTERLEAVE, odd, 32, buf, sizeof buf);
    ck_assert_uint_lt(strlen(buf), 190);
    ck_assert_int_eq(ga_parse_numa(buf, &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_uint_eq(n, 32);
    ck_assert_int_eq(nodes[0], 1);
    ck_assert_int_eq(nodes[31], 63);
    ga_format_numa(GA_NUMA_NODES, (const int[]){4, 5}, 2, buf, sizeof buf);
    ck_assert_str_eq(buf, "4,5");
    ck_assert_int_eq(ga_parse_numa("3, 1", &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_int_eq(p, GA_NUMA_NODES);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(nodes[0], 3);
    ck_assert_int_eq(nodes[1], 1);
    ck_assert_int_eq(ga_parse_numa("0-63", &p, nodes, &n, why, sizeof why), GA_PARSE_OK);
    ck_assert_uint_eq(n, 64);

    struct {
        const char *text;
        int r;
        const char *why;
    } bad[] = {
        {"64", GA_PARSE_RANGE, "node numbers go from 0 to 63"},
        {"1,1", GA_PARSE_RANGE, "node 1 is listed twice"},
        {"0-2,2", GA_PARSE_RANGE, "node 2 is listed twice"},
        {"3-1", GA_PARSE_RANGE, "range 3-1 goes backwards"},
        {"0,", GA_PARSE_SYNTAX, "expected a node number"},
        {"0-", GA_PARSE_SYNTAX, "expected a node number after '-'"},
        {"0;1", GA_PARSE_SYNTAX, "expected ',' between nodes"},
        {"interleave:", GA_PARSE_SYNTAX, "expected a node number"},
        {"closest", GA_PARSE_SYNTAX,
         "expected nearest, local, interleave, interleave:LIST or LIST"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = GA_NUMA_LOCAL;
        n = 99;
        ck_assert_int_eq(ga_parse_numa(bad[i].text, &p, nodes, &n, why, sizeof why), bad[i].r);
        ck_assert_str_eq(why, bad[i].why);
        ck_assert_int_eq(p, GA_NUMA_LOCAL); /* unchanged */
        ck_assert_uint_eq(n, 99);
    }
}
END_TEST

START_TEST(did_you_mean)
{
    ck_assert_uint_eq(ga_edit_distance("max_cahced", "max_cached"), 1); /* swap */
    ck_assert_uint_eq(ga_edit_distance("expandble", "expandable"), 1);  /* deletion */
    ck_assert_uint_eq(ga_edit_distance("Round", "round"), 0);           /* case */
    ck_assert_uint_eq(ga_edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(ga_edit_distance("", "abc"), 3);
    const char *names[] = {"round", "max_cached", "max_split", "granule"};
    ck_assert_str_eq(ga_suggest("max_cahced", names, 4), "max_cached");
    ck_assert_str_eq(ga_suggest("max-split", names, 4), "max_split");
    ck_assert_str_eq(ga_suggest("rond", names, 4), "round");
    ck_assert_ptr_null(ga_suggest("xyz", names, 4));
    ck_assert_ptr_null(ga_suggest("frobnicate", names, 4));
}
END_TEST

/* ---------------------------------------------------------- key table */

START_TEST(key_table)
{
    size_t n = ga_config_key_count();
    ck_assert_uint_ge(n, 20);
    ck_assert_ptr_null(ga_config_key(n));
    for (size_t i = 0; i < n; i++) {
        const ga_key_t *k = ga_config_key(i);
        ck_assert(k->name && *k->name && k->help && *k->help && k->range && *k->range);
        ck_assert_ptr_eq(ga_config_find_key(k->name), k);
        ck_assert_uint_eq(ga_config_key_index(k), i);
        ck_assert_uint_ne(k->kinds, 0);
        ck_assert_uint_le(k->offset + k->length, sizeof(ga_settings_t));
        /* every kind's default prints and parses back to itself */
        for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
            if (!ga_key_applies(k, (gpuarena_kind_t)kind))
                continue;
            ga_settings_t d, s;
            char text[160], why[256], again[160];
            ga_config_defaults((gpuarena_kind_t)kind, &d);
            memset(&s, 0xA5, sizeof s);
            ga_key_format(k, &d, text, sizeof text);
            ck_assert_msg(ga_key_parse(k, text, &s, why, sizeof why) == GA_PARSE_OK, "%s = %s: %s",
                          k->name, text, why);
            if (k->type == GA_KEY_NUMA) {
                ck_assert_int_eq(s.numa, d.numa);
                ck_assert_uint_eq(s.numa_count, d.numa_count);
                ck_assert_int_eq(memcmp(s.numa_nodes, d.numa_nodes, d.numa_count * sizeof(int)), 0);
            } else {
                ck_assert_int_eq(memcmp((char *)&s + k->offset, (char *)&d + k->offset, k->length),
                                 0);
            }
            ga_key_format(k, &s, again, sizeof again);
            ck_assert_str_eq(again, text);
        }
    }
    /* the defaults are consistent for every kind */
    for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
        ga_settings_t d;
        const ga_key_t *a, *b;
        ga_config_defaults((gpuarena_kind_t)kind, &d);
        ck_assert(ga_settings_consistent(&d, &a, &b));
    }
    /* pinned segments are fixed unless asked (cuMemHostRegister pins
     * faster than cuMemCreate HOST_NUMA); the other kinds grow */
    for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
        ga_settings_t d;
        ga_config_defaults((gpuarena_kind_t)kind, &d);
        ck_assert_int_eq(d.expandable, kind != GPUARENA_PINNED);
    }
    ck_assert_ptr_null(ga_config_find_key("ROUND"));
    ck_assert(ga_key_applies(ga_config_find_key("numa"), GPUARENA_HOST));
    ck_assert(ga_key_applies(ga_config_find_key("numa"), GPUARENA_PINNED));
    ck_assert(!ga_key_applies(ga_config_find_key("numa"), GPUARENA_DEVICE));
    ck_assert(ga_key_applies(ga_config_find_key("sim_capacity"), GPUARENA_SIM));
    ck_assert(!ga_key_applies(ga_config_find_key("sim_capacity"), GPUARENA_HOST));
    ck_assert(!ga_key_applies(ga_config_find_key("prefetch"), GPUARENA_DEVICE));
    ck_assert(ga_key_applies(ga_config_find_key("peer_access"), GPUARENA_DEVICE));
    ck_assert(!ga_key_applies(ga_config_find_key("peer_access"), GPUARENA_PINNED));
    ck_assert(ga_key_applies(ga_config_find_key("pool"), GPUARENA_DEVICE));
    for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++)
        ck_assert(kind == GPUARENA_DEVICE ||
                  !ga_key_applies(ga_config_find_key("pool"), (gpuarena_kind_t)kind));
    ck_assert_str_eq(ga_kind_name(GPUARENA_SIM), "sim");
    ck_assert_str_eq(ga_kind_name((gpuarena_kind_t)9), "?");
}
END_TEST

/* One value of KEY in section [KIND]: accepted (and printed back as WANT)
 * or, with WANT NULL, rejected as a bad value, the key keeping its default. */
static void bound(gpuarena_kind_t kind, const char *key, const char *value, const char *want)
{
    char text[256];
    gpuarena_status_t st;
    snprintf(text, sizeof text, "[%s]\n%s = %s\n", ga_kind_name(kind), key, value);
    ga_conf_t *c = parse(text, &st);
    if (want) {
        ck_assert_msg(st == GPUARENA_SUCCESS, "%s = %s: %s", key, value, gpuarena_last_error());
        value_of(c, kind, -1, key, want, "t.conf:2");
    } else {
        ck_assert_msg(st == GPUARENA_ERR_CONFIG, "%s = %s accepted", key, value);
        ck_assert_ptr_nonnull(strstr(ga_conf_error(c, 0), "bad value"));
        ga_settings_t d;
        char def[128];
        ga_config_defaults(kind, &d);
        ga_key_format(ga_config_find_key(key), &d, def, sizeof def);
        value_of(c, kind, -1, key, def, "default");
    }
    ga_conf_free(c);
}

START_TEST(bounds)
{
    gpuarena_kind_t D = GPUARENA_DEVICE;
    bound(D, "round", "1", "1");
    bound(D, "round", "1M", "1M");
    bound(D, "round", "4096", "4K");
    bound(D, "round", "0", NULL);
    bound(D, "round", "3", NULL);
    bound(D, "round", "2G", NULL);
    bound(D, "round", "768", NULL);
    bound(D, "small_max", "0", NULL);
    bound(D, "small_max", "2G", NULL);
    bound(D, "small_segment", "1M", "1M");
    bound(D, "small_segment", "4095", NULL);
    bound(D, "small_segment", "2T", NULL);
    bound(D, "large_segment", "1T", "1T");
    bound(D, "max_split", "none", "none");
    bound(D, "max_split", "0", "none");
    bound(D, "max_split", "256M", "256M");
    bound(D, "max_split", "nnone", NULL);
    bound(D, "expandable", "off", "false");
    bound(D, "expandable", "maybe", NULL);
    bound(D, "granule", "auto", "auto");
    bound(D, "granule", "0", "auto");
    bound(D, "granule", "4K", "4K");
    bound(D, "granule", "2M", "2M");
    bound(D, "granule", "2K", NULL);
    bound(D, "granule", "6K", NULL);
    bound(D, "granule", "2T", NULL);
    bound(D, "release_threshold", "max", "max");
    bound(D, "release_threshold", "8G", "8G");
    bound(D, "release_threshold", "0", "0");
    bound(D, "max_cached", "none", "none");
    bound(D, "max_cached", "20G", "20G");
    bound(D, "max_cached", "-1", NULL);
    bound(D, "zero", "true", "true");
    bound(D, "cross_stream", "wait", "wait");
    bound(D, "cross_stream", "never", "never");
    bound(D, "cross_stream", "always", NULL);
    bound(D, "thread_cache", "no", "false");
    bound(D, "thread_cache_max", "0", "0");
    bound(D, "thread_cache_max", "2G", NULL);
    bound(D, "thread_cache_large", "0", "0");
    bound(D, "thread_cache_large", "256M", "256M");
    bound(D, "thread_cache_large", "-1", NULL);
    bound(D, "thread_cache_count", "1", "1");
    bound(D, "thread_cache_count", "32", "32"); /* the cache's stacks hold 32 */
    bound(D, "thread_cache_count", "0", NULL);
    bound(D, "thread_cache_count", "33", NULL);
    bound(D, "thread_cache_count", "8K", NULL);
    bound(D, "size_classes", "0", "0");
    bound(D, "size_classes", "1", "1");
    bound(D, "size_classes", "16", "16");
    bound(D, "size_classes", "3", NULL);
    bound(D, "size_classes", "32", NULL);
    bound(D, "size_classes", "4K", NULL);
    bound(D, "peer_access", "yes", "true");
    bound(D, "pool", "arena", "arena");
    bound(D, "pool", "driver", "driver");
    bound(D, "pool", "drive", NULL);
    bound(D, "pool", "DRIVER", "driver");
    bound(D, "pool", "cuda", NULL);
    bound(D, "pool", "1", NULL);
    bound(GPUARENA_SIM, "sim_event_delay", "0", "0");
    bound(GPUARENA_SIM, "sim_event_delay", "1000000", "1000000");
    bound(GPUARENA_SIM, "sim_event_delay", "1000001", NULL);
    bound(GPUARENA_SIM, "sim_capacity", "none", "none");
    bound(GPUARENA_SIM, "sim_capacity", "80G", "80G");
    bound(GPUARENA_PINNED, "numa", "nearest", "nearest");
    bound(GPUARENA_PINNED, "numa", "0,2-3", "0,2,3");
    bound(GPUARENA_HOST, "numa", "interleave:0-1", "interleave:0,1");
    bound(GPUARENA_HOST, "numa", "interleave", "interleave");
    bound(GPUARENA_HOST, "numa", "local", "local");
    bound(GPUARENA_HOST, "numa", "64", NULL);
    bound(GPUARENA_MANAGED, "prefetch", "on-alloc", "on-alloc");
    bound(GPUARENA_MANAGED, "prefetch", "always", NULL);
    bound(GPUARENA_MANAGED, "prefetch_headroom", "1G", "1G");

    /* the settings themselves, not only their text */
    gpuarena_status_t st;
    ga_conf_t *c = parse("[device]\nmax_cached = none\nround = 1K\nzero = on\n"
                         "[sim]\nsim_capacity = none\nsim_event_delay = 9\n"
                         "[pinned]\nnuma = 1,3\n",
                         &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ga_settings_t s;
    ga_conf_t *big = parse("[host]\nround = 1G\nsmall_max = 1G\nsmall_segment = 1G\n"
                           "[sim]\nround=1\nsmall_max=4K\nsmall_segment=4K\nthread_cache_max=4K\n",
                           &st);
    ck_assert_msg(st == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ga_conf_settings(big, GPUARENA_HOST, -1, &s);
    ck_assert_uint_eq(s.round, 1ULL << 30);
    ga_conf_settings(big, GPUARENA_SIM, -1, &s);
    ck_assert_uint_eq(s.small_segment, 4096);
    ga_conf_free(big);
    ga_conf_settings(c, GPUARENA_DEVICE, -1, &s);
    ck_assert_uint_eq(s.max_cached, SIZE_MAX);
    ck_assert_uint_eq(s.round, 1024);
    ck_assert(s.zero);
    ga_conf_settings(c, GPUARENA_SIM, -1, &s);
    ck_assert_uint_eq(s.sim_capacity, 0);
    ck_assert_uint_eq(s.sim_event_delay, 9);
    ck_assert_uint_eq(s.round, 512);
    ga_conf_settings(c, GPUARENA_PINNED, 0, &s);
    ck_assert_int_eq(s.numa, GA_NUMA_NODES);
    ck_assert_uint_eq(s.numa_count, 2);
    ck_assert_int_eq(s.numa_nodes[0], 1);
    ck_assert_int_eq(s.numa_nodes[1], 3);
    ga_conf_settings(c, GPUARENA_HOST, 0, &s);
    ck_assert_int_eq(s.numa, GA_NUMA_LOCAL);
    ga_conf_free(c);
}
END_TEST

/* ------------------------------------------------------------- files */

START_TEST(file_syntax)
{
    gpuarena_status_t st;
    /* comments, indentation, CRLF, a BOM, ':' and inline comments */
    const char text[] = "\xEF\xBB\xBF# comment\r\n"
                        "; another\r\n"
                        "\r\n"
                        "  [ device ]   # every device arena\r\n"
                        "\texpandable = false\r\n"
                        "    max_cached=1G    # a cap\r\n"
                        "round: 1K ; inline\n"
                        "[device.2]\n"
                        "  zero = true\n"
                        "[pinned]\n"
                        "numa = 0, 2-3   # list\n"
                        "[sim]\n"
                        "sim_capacity = 8G";
    ga_conf_t *c = parse(text, &st);
    ck_assert_msg(st == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    value_of(c, GPUARENA_DEVICE, -1, "expandable", "false", "t.conf:5");
    value_of(c, GPUARENA_DEVICE, -1, "max_cached", "1G", "t.conf:6");
    value_of(c, GPUARENA_DEVICE, -1, "round", "1K", "t.conf:7");
    value_of(c, GPUARENA_DEVICE, 2, "zero", "true", "t.conf:9");
    value_of(c, GPUARENA_DEVICE, 2, "round", "1K", "t.conf:7");
    value_of(c, GPUARENA_DEVICE, 1, "zero", "false", "default");
    value_of(c, GPUARENA_PINNED, -1, "numa", "0,2,3", "t.conf:11");
    value_of(c, GPUARENA_SIM, -1, "sim_capacity", "8G", "t.conf:13");
    ck_assert(ga_conf_has_device(c, GPUARENA_DEVICE, 2));
    ck_assert(!ga_conf_has_device(c, GPUARENA_DEVICE, 1));
    ck_assert_str_eq(ga_conf_file(c), "t.conf");
    ga_conf_free(c);

    /* an empty file and a file of comments are the defaults */
    c = parse("", &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    value_of(c, GPUARENA_HOST, -1, "numa", "local", "default");
    ga_conf_free(c);
}
END_TEST

START_TEST(per_device_override)
{
    gpuarena_status_t st;
    ga_conf_t *c = parse("[device]\nmax_cached = 1G\nzero = true\n"
                         "[device.1]\nmax_cached = 2G\n"
                         "[managed.63]\nprefetch = on-alloc\n",
                         &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ga_settings_t s0, s1;
    ga_conf_settings(c, GPUARENA_DEVICE, 0, &s0);
    ga_conf_settings(c, GPUARENA_DEVICE, 1, &s1);
    ck_assert_uint_eq(s0.max_cached, 1ULL << 30);
    ck_assert_uint_eq(s1.max_cached, 2ULL << 30);
    ck_assert(s0.zero && s1.zero); /* inherited from [device] */
    value_of(c, GPUARENA_DEVICE, 0, "max_cached", "1G", "t.conf:2");
    value_of(c, GPUARENA_DEVICE, 1, "max_cached", "2G", "t.conf:5");
    value_of(c, GPUARENA_DEVICE, 1, "zero", "true", "t.conf:3");
    value_of(c, GPUARENA_MANAGED, 63, "prefetch", "on-alloc", "t.conf:7");
    value_of(c, GPUARENA_MANAGED, 62, "prefetch", "none", "default");
    /* other kinds are untouched */
    value_of(c, GPUARENA_PINNED, 1, "max_cached", "none", "default");
    ga_conf_free(c);
}
END_TEST

START_TEST(options_override)
{
    gpuarena_status_t st;
    ga_conf_t *c = parse("[device]\nexpandable = true\nmax_cached = 4G\n", &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    st = ga_conf_apply_options(c,
                               " device.expandable=false , pinned.numa=0,2-3,device.1.max_cached="
                               "1G,host.numa=interleave:0,1,sim.sim_event_delay=0,",
                               "GPUARENA_OPTIONS");
    ck_assert_msg(st == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    value_of(c, GPUARENA_DEVICE, -1, "expandable", "false", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_DEVICE, -1, "max_cached", "4G", "t.conf:3");
    value_of(c, GPUARENA_DEVICE, 1, "max_cached", "1G", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_DEVICE, 0, "max_cached", "4G", "t.conf:3");
    value_of(c, GPUARENA_PINNED, -1, "numa", "0,2,3", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_HOST, -1, "numa", "interleave:0,1", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_SIM, -1, "sim_event_delay", "0", "GPUARENA_OPTIONS");
    /* a later override of the same key wins */
    ck_assert_int_eq(ga_conf_apply_options(c, "device.expandable=true", "GPUARENA_OPTIONS"),
                     GPUARENA_SUCCESS);
    value_of(c, GPUARENA_DEVICE, -1, "expandable", "true", "GPUARENA_OPTIONS");
    /* and so does a later setting in one string (a script's appended
     * override), where a file refuses a key set twice */
    ck_assert_int_eq(
        ga_conf_apply_options(c, "host.max_cached=1G,host.max_cached=2G", "GPUARENA_OPTIONS"),
        GPUARENA_SUCCESS);
    value_of(c, GPUARENA_HOST, -1, "max_cached", "2G", "GPUARENA_OPTIONS");
    ga_conf_free(c);

    /* Two keys of a rule set in the file, one overridden so that they
     * conflict: the override is named, not the file's line (which
     * gpuarena-config --check passes). */
    c = parse("[device]\nthread_cache_max = 1M\nthread_cache_bytes = 16M\n", &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_conf_apply_options(c, "device.thread_cache_bytes=512K", "GPUARENA_OPTIONS"),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_conf_check(c), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(ga_conf_error(c, 0), "GPUARENA_OPTIONS: key 'device.thread_cache_bytes': "
                                          "512K is smaller than thread_cache_max (1M)");
    ga_conf_free(c);

    /* The same where the file's key is in a device's own section and the
     * variable's in the kind's: the variable is named (the device
     * section's line was, which --check passes). */
    c = parse("[device.1]\nsmall_max = 2K\n", &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_conf_apply_options(c, "device.round=4K", "GPUARENA_OPTIONS"),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_conf_check(c), GPUARENA_ERR_CONFIG);
    ck_assert_uint_eq(ga_conf_error_count(c), 1);
    ck_assert_str_eq(ga_conf_error(c, 0), "GPUARENA_OPTIONS: key 'device.round': 4K is larger "
                                          "than small_max (2K)");
    ga_conf_free(c);
}
END_TEST

/* A kind's key in GPUARENA_OPTIONS overrides the file's [KIND.N] sections
 * too (a job script's device.max_cached=2G reaches every GPU), but not
 * what the variable itself sets for one device, before or after. */
START_TEST(options_override_device_sections)
{
    gpuarena_status_t st;
    ga_conf_t *c = parse("[device]\nmax_cached = 8G\n[device.1]\nmax_cached = 20G\nzero = true\n"
                         "[device.2]\nmax_cached = 30G\n",
                         &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    st =
        ga_conf_apply_options(c, "device.2.max_cached=3G,device.max_cached=2G", "GPUARENA_OPTIONS");
    ck_assert_msg(st == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    value_of(c, GPUARENA_DEVICE, -1, "max_cached", "2G", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_DEVICE, 0, "max_cached", "2G", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_DEVICE, 1, "max_cached", "2G", "GPUARENA_OPTIONS");
    value_of(c, GPUARENA_DEVICE, 2, "max_cached", "3G", "GPUARENA_OPTIONS");
    /* the section's other keys stay */
    value_of(c, GPUARENA_DEVICE, 1, "zero", "true", "t.conf:5");
    ga_settings_t s1;
    ga_conf_settings(c, GPUARENA_DEVICE, 1, &s1);
    ck_assert_uint_eq(s1.max_cached, 2ULL << 30);
    /* another kind's sections are not touched */
    ck_assert_int_eq(ga_conf_apply_options(c, "pinned.max_cached=1G", "GPUARENA_OPTIONS"),
                     GPUARENA_SUCCESS);
    value_of(c, GPUARENA_DEVICE, 1, "max_cached", "2G", "GPUARENA_OPTIONS");
    ga_conf_free(c);
}
END_TEST

/* -------------------------------------------------------- every error */

START_TEST(error_messages)
{
    expect_error("[device]\nexpandable = true\nmax_cahced = 20G\n",
                 "t.conf:3: key 'device.max_cahced': unknown key (did you mean 'max_cached'?)");
    expect_error("[device.1]\nfrobnicate = 1\n",
                 "t.conf:2: key 'device.1.frobnicate': unknown key (see gpuarena.conf(5))");
    expect_error("[device]\nround = 3000\n", "t.conf:2: key 'device.round': bad value '3000': "
                                             "expected a power of two from 1 to 1G");
    /* a number past what a size holds, or past an integer key's range */
    expect_error("[device]\nmax_cached = 99999999999999999999\n",
                 "t.conf:2: key 'device.max_cached': bad value '99999999999999999999': too large: "
                 "expected none or a size");
    expect_error("[device]\nmax_cached = 99999999T\n",
                 "t.conf:2: key 'device.max_cached': bad value '99999999T': too large: "
                 "expected none or a size");
    expect_error("[device]\ncross_stream = evnt\n",
                 "t.conf:2: key 'device.cross_stream': bad value 'evnt': expected event, wait "
                 "or never (did you mean 'event'?)");
    /* '#' right after '=' follows no space: not a comment, a bad value */
    expect_error("[device]\nmax_cached =#1G\n",
                 "t.conf:2: key 'device.max_cached': bad value '#1G': expected none or a size");
    expect_error("[device]\nmax_cached=;1G\n",
                 "t.conf:2: key 'device.max_cached': bad value ';1G': expected none or a size");
    expect_error("[device]\nexpandable = ture\n", "t.conf:2: key 'device.expandable': bad value "
                                                  "'ture': expected true or false (did you mean "
                                                  "'true'?)");
    expect_error("[pinned]\nnuma = neerest\n",
                 "t.conf:2: key 'pinned.numa': bad value 'neerest': expected nearest, local, "
                 "interleave, interleave:LIST or LIST (node numbers 0 to 63, as 0,2-3) (did you "
                 "mean 'nearest'?)");
    expect_error("[pinned]\nnuma = 1,1\n",
                 "t.conf:2: key 'pinned.numa': bad value '1,1': node 1 is listed twice; expected "
                 "nearest, local, interleave, interleave:LIST or LIST (node numbers 0 to 63, as "
                 "0,2-3)");
    expect_error("[device]\nround =\n",
                 "t.conf:2: key 'device.round': empty value: expected a power of two from 1 to 1G");
    expect_error("[device]\npool = drivr\n",
                 "t.conf:2: key 'device.pool': bad value 'drivr': expected arena or driver (did "
                 "you mean 'driver'?)");
    expect_error("[pinned]\npool = driver\n",
                 "t.conf:2: key 'pinned.pool': not a key of [pinned] arenas (it belongs in "
                 "[device])");
    expect_error("[device]\nprefetch = on-alloc\n",
                 "t.conf:2: key 'device.prefetch': not a key of [device] arenas (it belongs in "
                 "[managed])");
    expect_error("[host]\nnuma = 0\nsim_capacity = 1G\n",
                 "t.conf:3: key 'host.sim_capacity': not a key of [host] arenas (it belongs in "
                 "[sim])");
    expect_error("[gpu]\nround = 1K\n", "t.conf:1: section 'gpu': unknown section (expected "
                                        "device, pinned, managed, host or sim, optionally "
                                        "followed by .DEVICE)");
    expect_error("[devcie.1]\n",
                 "t.conf:1: section 'devcie.1': unknown section (did you mean 'device.1'?)");
    /* The guess is a section that would be taken: no blanks around the
     * dot, and no device part where there is no number. */
    expect_error("[device . 2]\n",
                 "t.conf:1: section 'device . 2': unknown section (did you mean 'device.2'?)");
    expect_error("[devcie.x]\n",
                 "t.conf:1: section 'devcie.x': unknown section (did you mean 'device'?)");
    expect_error("[hots.3]\n",
                 "t.conf:1: section 'hots.3': unknown section (did you mean 'host'?)");
    expect_error("[host.0]\n",
                 "t.conf:1: section 'host.0': host arenas have no device; use [host]");
    expect_error("[device.64]\n", "t.conf:1: section 'device.64': bad device number: expected an "
                                  "integer from 0 to 63");
    expect_error("[device.x]\n", "t.conf:1: section 'device.x': bad device number: expected an "
                                 "integer from 0 to 63");
    expect_error("\n[device\nround = 1K\n", "t.conf:2: syntax error: section header without ']'");
    expect_error("[device] round = 1K\n", "t.conf:1: syntax error: text after ']'");
    expect_error("[ ]\n", "t.conf:1: syntax error: empty section name");
    expect_error("[device]\nexpandable\n",
                 "t.conf:2: syntax error: expected 'key = value', '[section]' or a comment");
    expect_error("[device]\n= 5\n", "t.conf:2: syntax error: no key before '='");
    expect_error("round = 1K\n", "t.conf:1: key 'round': outside any section (put it under "
                                 "[device], [pinned], [managed], [host] or [sim])");
    expect_error("[device]\nround = 1K\n[pinned]\n[device]\nround = 2K\n",
                 "t.conf:5: key 'device.round': set twice (first on line 2)");
    expect_error("[device]\nsmall_max = 4M\n",
                 "t.conf:2: key 'device.small_max': 4M is larger than small_segment (2M)");
    expect_error("[device.3]\nround = 2M\n",
                 "t.conf:2: key 'device.3.round': 2M is larger than small_max (1M)");
    /* Two keys that conflict only in a device's section: the one set
     * there is to blame, named with its own section and line. */
    expect_error("[device]\nsmall_segment = 8M\nsmall_max = 4M\n[device.0]\nsmall_segment = 2M\n",
                 "t.conf:5: key 'device.0.small_segment': 2M is smaller than small_max (4M)");
    expect_error("[device]\nsmall_segment = 512K\n",
                 "t.conf:2: key 'device.small_segment': 512K is smaller than small_max (1M)");
    /* A conflict of the kind's section is reported once, not again for
     * each device section that inherits it; one of a device's own still
     * is. */
    {
        gpuarena_status_t st;
        ga_conf_t *c = parse("[device]\nsmall_max = 4M\n[device.0]\nzero = true\n[device.1]\n"
                             "zero = true\n[device.2]\nsmall_segment = 512K\n",
                             &st);
        ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
        ck_assert_uint_eq(ga_conf_error_count(c), 2);
        ck_assert_str_eq(ga_conf_error(c, 0),
                         "t.conf:2: key 'device.small_max': 4M is larger than small_segment (2M)");
        ck_assert_str_eq(ga_conf_error(c, 1), "t.conf:8: key 'device.2.small_segment': 512K is "
                                              "smaller than small_max (4M)");
        ga_conf_free(c);
    }
    /* Every rule a section breaks, not the first alone (--check showed
     * the second once the first was mended), in the kind's section and
     * in a device's own. */
    {
        gpuarena_status_t st;
        ga_conf_t *c = parse("[device]\nsmall_max = 4M\nthread_cache_bytes = 4K\n", &st);
        ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
        ck_assert_uint_eq(ga_conf_error_count(c), 2);
        ck_assert_str_eq(ga_conf_error(c, 0),
                         "t.conf:2: key 'device.small_max': 4M is larger than small_segment (2M)");
        ck_assert_str_eq(ga_conf_error(c, 1), "t.conf:3: key 'device.thread_cache_bytes': 4K is "
                                              "smaller than thread_cache_max (1M)");
        ga_conf_free(c);
        c = parse("[device]\nsmall_max = 4M\n[device.1]\nthread_cache_bytes = 4K\n", &st);
        ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
        ck_assert_uint_eq(ga_conf_error_count(c), 2);
        ck_assert_str_eq(ga_conf_error(c, 1), "t.conf:4: key 'device.1.thread_cache_bytes': 4K "
                                              "is smaller than thread_cache_max (1M)");
        ga_conf_free(c);
    }
    expect_error(
        "[host]\nthread_cache_max = 32M\n",
        "t.conf:2: key 'host.thread_cache_max': 32M is larger than thread_cache_bytes (16M)");

    /* a NUL byte and an overlong line */
    gpuarena_status_t st;
    ga_conf_t *c = ga_conf_new();
    ck_assert_int_eq(ga_config_parse_buffer(c, "nul.conf", "[device]\nround = 1\0K\n", 20),
                     GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(ga_conf_error(c, 0), "nul.conf:2: syntax error: the line holds a NUL byte");
    value_of(c, GPUARENA_DEVICE, -1, "round", "512", "default");
    ga_conf_free(c);
    char longline[400] = "[device]\nround = 1";
    memset(longline + strlen(longline), ' ', 250);
    strcat(longline, "K\n");
    c = parse(longline, &st);
    ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(ga_conf_error(c, 0),
                     "t.conf:2: syntax error: line longer than 190 characters");
    ga_conf_free(c);
    /* Comments do not count: a long one on its own line, after a section
     * and after a setting (as gpuarena-config writes file names). */
    char note[301];
    memset(note, 'x', 300);
    note[300] = '\0';
    char commented[1300];
    snprintf(commented, sizeof commented, "# %s\n[device] # %s\nround = 1K # %s\n; %s\n", note,
             note, note, note);
    c = parse(commented, &st);
    ck_assert_int_eq(st, GPUARENA_SUCCESS);
    value_of(c, GPUARENA_DEVICE, -1, "round", "1K", "t.conf:3");
    ga_conf_free(c);

    /* every error is collected, in the order of the file */
    c = parse("[device]\nmax_cahced = 1\nround = 3\n[gpu]\nx = 1\n[host]\nzero = 2\n", &st);
    ck_assert_int_eq(st, GPUARENA_ERR_CONFIG);
    ck_assert_uint_eq(ga_conf_error_count(c), 4);
    ck_assert_ptr_nonnull(strstr(ga_conf_error(c, 0), "t.conf:2:"));
    ck_assert_ptr_nonnull(strstr(ga_conf_error(c, 1), "t.conf:3:"));
    ck_assert_ptr_nonnull(strstr(ga_conf_error(c, 2), "t.conf:4:"));
    ck_assert_ptr_nonnull(strstr(ga_conf_error(c, 3), "t.conf:7:"));
    ck_assert_ptr_null(ga_conf_error(c, 4));
    ga_conf_free(c);

    /* GPUARENA_OPTIONS errors name it */
    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_apply_options(c, "device.max_cahced=1G", "GPUARENA_OPTIONS"),
                     GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "GPUARENA_OPTIONS: key 'device.max_cahced': unknown "
                                            "key (did you mean 'max_cached'?)");
    ga_conf_free(c);
    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_apply_options(c, "round=1K", "GPUARENA_OPTIONS"), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "GPUARENA_OPTIONS: key 'round': no section (write "
                                            "SECTION.KEY, as in device.round)");
    ga_conf_free(c);
    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_apply_options(c, "devise.round=1K", "GPUARENA_OPTIONS"),
                     GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(
        gpuarena_last_error(),
        "GPUARENA_OPTIONS: section 'devise': unknown section (did you mean 'device'?)");
    ga_conf_free(c);
    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_apply_options(c, "oops", "GPUARENA_OPTIONS"), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "GPUARENA_OPTIONS: 'oops': expected KEY=VALUE");
    ga_conf_free(c);
}
END_TEST

START_TEST(unreadable_files)
{
    ga_conf_t *c = ga_conf_new();
    char path[400];
    snprintf(path, sizeof path, "%s/missing.conf", tmpdir);
    ck_assert_int_eq(ga_conf_load_file(c, path), GPUARENA_ERR_CONFIG);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", path);
    ck_assert_str_eq(gpuarena_last_error(), want);
    ga_conf_free(c);

    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_load_file(c, tmpdir), GPUARENA_ERR_CONFIG);
    snprintf(want, sizeof want, "%s: cannot read: %s", tmpdir, strerror(EISDIR));
    ck_assert_str_eq(gpuarena_last_error(), want);
    ga_conf_free(c);

    /* a real file, read whole */
    snprintf(path, sizeof path, "%s/ok.conf", tmpdir);
    write_file(path, "[device]\nmax_cached = 3G\n");
    c = ga_conf_new();
    ck_assert_int_eq(ga_conf_load_file(c, path), GPUARENA_SUCCESS);
    snprintf(want, sizeof want, "%s:2", path);
    value_of(c, GPUARENA_DEVICE, -1, "max_cached", "3G", want);
    ga_conf_free(c);

    /* The size limit: a file of exactly GA_CONFIG_MAX_FILE bytes is read
     * (the setting at its end counts), one byte more is refused. */
    for (int extra = 0; extra < 2; extra++) {
        static const char tail[] = "[device]\nmax_cached = 5G\n";
        size_t fill = GA_CONFIG_MAX_FILE + (size_t)extra - (sizeof tail - 1);
        snprintf(path, sizeof path, "%s/big%d.conf", tmpdir, extra);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        for (size_t n = 0; n < fill; n += 100)
            fprintf(f, "%.*s\n", (int)(fill - n < 100 ? fill - n - 1 : 99),
                    "#########################################################################"
                    "##########################");
        fputs(tail, f);
        ck_assert_int_eq(fclose(f), 0);
        struct stat sb;
        ck_assert_int_eq(stat(path, &sb), 0);
        ck_assert_int_eq(sb.st_size, GA_CONFIG_MAX_FILE + extra);
        c = ga_conf_new();
        if (extra) {
            ck_assert_int_eq(ga_conf_load_file(c, path), GPUARENA_ERR_CONFIG);
            snprintf(want, sizeof want, "%s: cannot read: larger than %d bytes", path,
                     GA_CONFIG_MAX_FILE);
            ck_assert_str_eq(gpuarena_last_error(), want);
        } else {
            ck_assert_int_eq(ga_conf_load_file(c, path), GPUARENA_SUCCESS);
            snprintf(want, sizeof want, "%s:%d", path, (int)((fill + 99) / 100) + 2);
            value_of(c, GPUARENA_DEVICE, -1, "max_cached", "5G", want);
        }
        ga_conf_free(c);
    }

    if (geteuid() != 0) { /* root reads anything */
        chmod(path, 0);
        c = ga_conf_new();
        ck_assert_int_eq(ga_conf_load_file(c, path), GPUARENA_ERR_CONFIG);
        snprintf(want, sizeof want, "%s: cannot read: Permission denied", path);
        ck_assert_str_eq(gpuarena_last_error(), want);
        ga_conf_free(c);
    }
}
END_TEST

/* ------------------------------------------------------- search order */

static void expect_file(const char *want_file, const char *want_source, const char *round)
{
    ga_config_reset();
    ck_assert_int_eq(ga_config_init(NULL), GPUARENA_SUCCESS);
    const ga_conf_t *c = ga_config_current();
    ck_assert_ptr_nonnull(c);
    if (want_file) {
        ck_assert_str_eq(ga_conf_file(c), want_file);
        ck_assert_str_eq(ga_conf_file_source(c), want_source);
    } else {
        ck_assert_ptr_null(ga_conf_file(c));
    }
    ga_settings_t s;
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 0, &s), GPUARENA_SUCCESS);
    uint64_t v;
    ck_assert_int_eq(ga_parse_size(round, &v), GA_PARSE_OK);
    ck_assert_uint_eq(s.round, v);
}

START_TEST(search_order)
{
    char conf[400], xdg[400], xdgfile[450], home[400], homefile[450];
    snprintf(conf, sizeof conf, "%s/env.conf", tmpdir);
    snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
    snprintf(xdgfile, sizeof xdgfile, "%s/gpuarena.conf", xdg);
    snprintf(home, sizeof home, "%s/home", tmpdir);
    snprintf(homefile, sizeof homefile, "%s/.config/gpuarena.conf", home);
    ck_assert_int_eq(mkdir(xdg, 0755), 0);
    ck_assert_int_eq(mkdir(home, 0755), 0);
    char dotconfig[450];
    snprintf(dotconfig, sizeof dotconfig, "%s/.config", home);
    ck_assert_int_eq(mkdir(dotconfig, 0755), 0);
    write_file(conf, "[device]\nround = 1K\n");
    write_file(xdgfile, "[device]\nround = 2K\n");
    write_file(homefile, "[device]\nround = 4K\n");

    /* nothing: defaults, after looking in ~/.config and sysconfdir */
    expect_file(NULL, NULL, "512");
    const char *searched = ga_conf_searched(ga_config_current());
    ck_assert_ptr_nonnull(searched);
    ck_assert_ptr_nonnull(
        strstr(searched, "/nonexistent-home-of-check_config/.config/gpuarena.conf"));
    ck_assert_ptr_nonnull(strstr(searched, GA_SYSCONFDIR "/gpuarena.conf"));

    setenv("HOME", home, 1);
    expect_file(homefile, "HOME", "4K");
    setenv("XDG_CONFIG_HOME", "relative/dir", 1); /* not absolute: ignored */
    expect_file(homefile, "HOME", "4K");
    setenv("XDG_CONFIG_HOME", xdg, 1);
    expect_file(xdgfile, "XDG_CONFIG_HOME", "2K");
    setenv("GPUARENA_CONF", conf, 1);
    expect_file(conf, "GPUARENA_CONF", "1K");
    setenv("GPUARENA_CONF", "", 1); /* empty: unset */
    expect_file(xdgfile, "XDG_CONFIG_HOME", "2K");

    /* GPUARENA_OPTIONS overrides the file */
    setenv("GPUARENA_CONF", conf, 1);
    setenv("GPUARENA_OPTIONS", "device.round=8K", 1);
    expect_file(conf, "GPUARENA_CONF", "8K");
    unsetenv("GPUARENA_OPTIONS");

    /* gpuarena_init(path) beats GPUARENA_CONF */
    ga_config_reset();
    ck_assert_int_eq(gpuarena_init(homefile), GPUARENA_SUCCESS);
    ck_assert_str_eq(ga_conf_file(ga_config_current()), homefile);
    ck_assert_str_eq(ga_conf_file_source(ga_config_current()), "gpuarena_init");

    /* GPUARENA_CONF naming a missing file is an error; a missing
     * XDG file is not */
    char missing[450];
    snprintf(missing, sizeof missing, "%s/missing.conf", tmpdir);
    setenv("GPUARENA_CONF", missing, 1);
    ga_config_reset();
    ck_assert_int_eq(ga_config_init(NULL), GPUARENA_ERR_CONFIG);
    unsetenv("GPUARENA_CONF");
    ck_assert_int_eq(unlink(xdgfile), 0);
    expect_file(NULL, NULL, "512"); /* XDG set: ~/.config is not looked at */
}
END_TEST

/* ------------------------------------------- gpuarena_init, stickiness */

START_TEST(sticky_failure)
{
    char bad[400], good[400];
    snprintf(bad, sizeof bad, "%s/bad.conf", tmpdir);
    snprintf(good, sizeof good, "%s/good.conf", tmpdir);
    write_file(bad, "[device]\nmax_cahced = 1G\n");
    write_file(good, "[host]\nround = 4K\n");
    char want[600];
    snprintf(want, sizeof want,
             "%s:2: key 'device.max_cahced': unknown key (did you mean "
             "'max_cached'?)",
             bad);
    setenv("GPUARENA_CONF", bad, 1);
    gpuarena_t *a = (gpuarena_t *)0x1;
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, 0, &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), want);
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    /* sticky: the same status and message, also after another failure */
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 99, &a), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_int_eq(gpuarena_get(GPUARENA_SIM, 0, &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), want);
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, NULL, &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), want);
    ck_assert_int_eq(gpuarena_init(NULL), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), want);
    /* fixing the file does not help: read once */
    write_file(bad, "[host]\n");
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, 0, &a), GPUARENA_ERR_CONFIG);
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    /* another path cannot replace it */
    ck_assert_int_eq(gpuarena_init(good), GPUARENA_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "already read"));
    ck_assert_int_eq(gpuarena_get(GPUARENA_HOST, 0, &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), want);
}
END_TEST

START_TEST(init_once)
{
    char good[400], other[400];
    snprintf(good, sizeof good, "%s/good.conf", tmpdir);
    snprintf(other, sizeof other, "%s/other.conf", tmpdir);
    write_file(good, "[sim]\nround = 4K\n");
    write_file(other, "[sim]\nround = 8K\n");
    ck_assert_int_eq(gpuarena_init(""), GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(gpuarena_init(good), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_init(good), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_init(NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_init(other), GPUARENA_ERR_CONFIG);
    ck_assert_msg(strstr(gpuarena_last_error(), "already read from ") != NULL, "%s",
                  gpuarena_last_error());
    /* The same file under another name is the first call's path (it was
     * refused as another configuration). */
    char again[420];
    snprintf(again, sizeof again, "%s/./good.conf", tmpdir);
    ck_assert_msg(gpuarena_init(again) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    gpuarena_t *a;
    ck_assert_int_eq(gpuarena_get(GPUARENA_SIM, 0, &a), GPUARENA_SUCCESS);
    ck_assert_uint_eq(a->settings.round, 4096); /* good.conf, not other.conf */
}
END_TEST

static void *first_reader(void *arg)
{
    ga_settings_t s;
    *(gpuarena_status_t *)arg = ga_config_settings(GPUARENA_SIM, 0, &s);
    return (void *)ga_config_current();
}

START_TEST(concurrent_first_use)
{
    char good[400];
    snprintf(good, sizeof good, "%s/good.conf", tmpdir);
    write_file(good, "[sim]\nround = 2K\n");
    setenv("GPUARENA_CONF", good, 1);
    pthread_t t[8];
    gpuarena_status_t st[8];
    void *conf[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, first_reader, &st[i]), 0);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(pthread_join(t[i], &conf[i]), 0);
        ck_assert_int_eq(st[i], GPUARENA_SUCCESS);
        ck_assert_ptr_nonnull(conf[i]);
        ck_assert_ptr_eq(conf[i], conf[0]);
    }
}
END_TEST

/* --------------------------------------------- gpuarena_create options */

START_TEST(create_options)
{
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0,
                                     "round=4K, max_cached=1G,sim_capacity=8G,"
                                     "cross_stream=wait",
                                     &a),
                     GPUARENA_SUCCESS);
    ck_assert_uint_eq(a->settings.round, 4096);
    ck_assert_uint_eq(a->settings.max_cached, 1ULL << 30);
    ck_assert_uint_eq(a->settings.sim_capacity, 8ULL << 30);
    ck_assert_int_eq(a->settings.cross_stream, GA_CROSS_WAIT);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);

    /* A node list parses as one value (the arena then refuses nodes this
     * machine lacks: that is the topology room's test). */
    ga_settings_t s;
    ga_config_defaults(GPUARENA_HOST, &s);
    ck_assert_int_eq(ga_config_apply(&s, GPUARENA_HOST, "numa=0,1,round=1K", "options"),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(s.numa, GA_NUMA_NODES);
    ck_assert_uint_eq(s.numa_count, 2);
    ck_assert_uint_eq(s.round, 1024);
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "numa=0,round=1K", &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(a->settings.numa, GA_NUMA_NODES);
    ck_assert_uint_eq(a->settings.numa_count, 1);
    ck_assert_uint_eq(a->settings.round, 1024);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    /* A node the machine lacks (none has 64) is refused with the value's
     * origin, as every configuration error (gpuarena_get(3)): it said
     * "numa: ...", naming neither the file, the variable nor the kind. */
    const char *lacks = "key 'host.numa': NUMA node 63 does not exist on this machine";
    a = (gpuarena_t *)0x1;
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "numa=0,63", &a), GPUARENA_ERR_CONFIG);
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    ck_assert_msg(strncmp(gpuarena_last_error(), "options: ", 9) == 0 &&
                      strstr(gpuarena_last_error(), lacks) == gpuarena_last_error() + 9,
                  "%s", gpuarena_last_error());
    setenv("GPUARENA_OPTIONS", "host.numa=interleave:63", 1);
    ga_config_reset();
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &a), GPUARENA_ERR_CONFIG);
    ck_assert_msg(strncmp(gpuarena_last_error(), "GPUARENA_OPTIONS: ", 18) == 0 &&
                      strstr(gpuarena_last_error(), lacks) == gpuarena_last_error() + 18,
                  "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, "numa=local", &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    unsetenv("GPUARENA_OPTIONS");
    ga_config_reset();

    struct {
        const char *options, *message;
    } bad[] = {
        {"round=4K,max_cahced=1G",
         "options: key 'sim.max_cahced': unknown key (did you mean 'max_cached'?)"},
        {"round=3",
         "options: key 'sim.round': bad value '3': expected a power of two from 1 to 1G"},
        {"numa=0", "options: key 'sim.numa': not a key of [sim] arenas (it belongs in [pinned], "
                   "[host])"},
        {"round=", "options: key 'sim.round': empty value: expected a power of two from 1 to 1G"},
        {"sim.round=4K",
         "options: key 'sim.round': the options of one arena take no section (write 'round')"},
        {"sim.max_cahced=1G", "options: key 'sim.max_cahced': unknown key; the options of one "
                              "arena take no section, and 'max_cahced' is no key (did you mean "
                              "'max_cached'?)"},
        {"x.qqqqqqqqqq=1", "options: key 'x.qqqqqqqqqq': unknown key; the options of one arena "
                           "take no section, and 'qqqqqqqqqq' is no key (see gpuarena.conf(5))"},
        {"round", "options: 'round': expected KEY=VALUE"},
        {"small_max=4M", "options: key 'sim.small_max': 4M is larger than small_segment (2M)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a = (gpuarena_t *)0x1;
        ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, bad[i].options, &a), GPUARENA_ERR_CONFIG);
        ck_assert_str_eq(gpuarena_last_error(), bad[i].message);
        ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    }
}
END_TEST

/* device.pool = driver: chosen by the key, and on a machine without the
 * driver (or without a GPU) the arena fails cleanly with the status of
 * every GPU arena there; where there is one, the arena is the driver's
 * pool (check_driverpool tests it on the GPU). */
START_TEST(driver_pool_key)
{
    gpuarena_status_t want = ga_cuda_load();
    int n = 0;
    if (want == GPUARENA_SUCCESS && (want = ga_cuda_device_count(&n)) == GPUARENA_SUCCESS && !n)
        want = GPUARENA_ERR_NO_DEVICE;
    gpuarena_t *a = (gpuarena_t *)0x1;
    gpuarena_status_t st = gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a);
    if (want != GPUARENA_SUCCESS) {
        ck_assert_msg(st == want, "pool=driver: %d, want %d (%s)", (int)st, (int)want,
                      gpuarena_last_error());
        ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
        ck_assert_str_ne(gpuarena_last_error(), "");
        printf("check_config: pool=driver here: %s\n", gpuarena_last_error());
    } else if (st == GPUARENA_SUCCESS) {
        ck_assert_int_eq(a->settings.pool, GA_POOL_DRIVER);
        ck_assert(ga_provider_is_direct(a->prov));
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    } else {
        /* a GPU without memory pools */
        ck_assert_int_eq(st, GPUARENA_ERR_NOT_SUPPORTED);
    }
    /* A bad value is the configuration's error, before any driver call. */
    a = (gpuarena_t *)0x1;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=drivr", &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "options: key 'device.pool': bad value 'drivr': "
                                            "expected arena or driver (did you mean 'driver'?)");
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 0, "pool=driver", &a), GPUARENA_ERR_CONFIG);
    ck_assert_str_eq(gpuarena_last_error(), "options: key 'pinned.pool': not a key of [pinned] "
                                            "arenas (it belongs in [device])");
    ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
    /* The default arena from GPUARENA_OPTIONS: the same status, each time
     * (nothing half made is kept). */
    setenv("GPUARENA_OPTIONS", "device.pool=driver,device.release_threshold=max", 1);
    ga_config_reset();
    ga_settings_t set;
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 0, &set), GPUARENA_SUCCESS);
    ck_assert_int_eq(set.pool, GA_POOL_DRIVER);
    ck_assert_uint_eq(set.release_threshold, SIZE_MAX);
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 1, &set), GPUARENA_SUCCESS);
    ck_assert_int_eq(set.pool, GA_POOL_DRIVER);
    if (want != GPUARENA_SUCCESS) {
        for (int i = 0; i < 2; i++) {
            a = (gpuarena_t *)0x1;
            ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &a), want);
            ck_assert_ptr_eq(a, (gpuarena_t *)0x1);
        }
    }
    /* Per device: only GPU 1 takes the driver's pool. */
    setenv("GPUARENA_OPTIONS", "device.1.pool=driver", 1);
    ga_config_reset();
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 0, &set), GPUARENA_SUCCESS);
    ck_assert_int_eq(set.pool, GA_POOL_ARENA);
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 1, &set), GPUARENA_SUCCESS);
    ck_assert_int_eq(set.pool, GA_POOL_DRIVER);
    unsetenv("GPUARENA_OPTIONS");
    ga_config_reset();
}
END_TEST

START_TEST(bad_option_changes_nothing)
{
    ga_settings_t s, before;
    ga_config_defaults(GPUARENA_PINNED, &s);
    s.round = 2048;
    before = s;
    /* good items before and after the bad one are not applied either */
    ck_assert_int_eq(
        ga_config_apply(&s, GPUARENA_PINNED, "max_cached=1G,numa=0,0,zero=true", "options"),
        GPUARENA_ERR_CONFIG);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    ck_assert_int_eq(ga_config_apply(&s, GPUARENA_PINNED, "zero=true,small_max=8M", "options"),
                     GPUARENA_ERR_CONFIG);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    ck_assert_int_eq(ga_config_apply(&s, (gpuarena_kind_t)7, "zero=true", "options"),
                     GPUARENA_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    /* NULL and "" change nothing and succeed */
    ck_assert_int_eq(ga_config_apply(&s, GPUARENA_PINNED, NULL, "options"), GPUARENA_SUCCESS);
    ck_assert_int_eq(ga_config_apply(&s, GPUARENA_PINNED, "", "options"), GPUARENA_SUCCESS);
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    /* the last setting of a key wins, as in GPUARENA_OPTIONS */
    ck_assert_int_eq(
        ga_config_apply(&s, GPUARENA_PINNED, "max_reserved=1G,max_reserved=none", "options"),
        GPUARENA_SUCCESS);
    ck_assert_uint_eq(s.max_reserved, before.max_reserved);
    ck_assert_int_eq(
        ga_config_apply(&s, GPUARENA_PINNED, "max_reserved=none,max_reserved=1G", "options"),
        GPUARENA_SUCCESS);
    ck_assert_uint_eq(s.max_reserved, (size_t)1 << 30);
    s.max_reserved = before.max_reserved;
    ck_assert_int_eq(memcmp(&s, &before, sizeof s), 0);
    /* and a good string changes exactly its keys */
    ck_assert_int_eq(ga_config_apply(&s, GPUARENA_PINNED, "zero=true,numa=interleave", "options"),
                     GPUARENA_SUCCESS);
    ck_assert(s.zero);
    ck_assert_int_eq(s.numa, GA_NUMA_INTERLEAVE);
    ck_assert_uint_eq(s.round, 2048);

    /* a bad GPUARENA_OPTIONS leaves the process with an error, not half a
     * configuration */
    setenv("GPUARENA_OPTIONS", "device.round=1K,device.zero=maybe", 1);
    ga_settings_t out;
    memset(&out, 0x5A, sizeof out);
    ga_settings_t copy = out;
    ck_assert_int_eq(ga_config_settings(GPUARENA_DEVICE, 0, &out), GPUARENA_ERR_CONFIG);
    ck_assert_int_eq(memcmp(&out, &copy, sizeof out), 0);
    ck_assert_str_eq(gpuarena_last_error(), "GPUARENA_OPTIONS: key 'device.zero': bad value "
                                            "'maybe': expected true or false");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *parsers = tcase_create("parsers");
    tcase_add_test(parsers, sizes);
    tcase_add_test(parsers, integers_booleans_fractions_words);
    tcase_add_test(parsers, numa_lists);
    tcase_add_test(parsers, did_you_mean);
    tcase_add_test(parsers, key_table);
    suite_add_tcase(s, parsers);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, setup, teardown);
    tcase_add_test(files, bounds);
    tcase_add_test(files, file_syntax);
    tcase_add_test(files, per_device_override);
    tcase_add_test(files, options_override);
    tcase_add_test(files, options_override_device_sections);
    tcase_add_test(files, error_messages);
    tcase_add_test(files, unreadable_files);
    tcase_add_test(files, search_order);
    tcase_add_test(files, sticky_failure);
    tcase_add_test(files, init_once);
    tcase_add_test(files, concurrent_first_use);
    tcase_add_test(files, create_options);
    tcase_add_test(files, bad_option_changes_nothing);
    tcase_add_test(files, driver_pool_key);
    suite_add_tcase(s, files);
    return ga_check_run(s);
}
