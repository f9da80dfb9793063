/*
 * gpuarena-config - print the settings in effect for every arena and where
 * each came from, check a gpuarena.conf(5) file, list the keys.  See
 * gpuarena-config(1).  Uses the config room's internal API, so it links
 * the library's convenience archive.
 */
#include <config.h>

#include "config/config.h"
#include "env.h"
#include "gpuarena.h"
#include "outpath.h"

#include "output.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "Usage: gpuarena-config [--file FILE]\n"
    "       gpuarena-config --check FILE...\n"
    "       gpuarena-config --keys | --describe\n"
    "       gpuarena-config --help | --version\n"
    "\n"
    "Print every setting in effect for every arena kind and device section,\n"
    "with where it came from (default, FILE:LINE or GPUARENA_OPTIONS).\n"
    "\n"
    "  --file FILE    read FILE instead of the search order of gpuarena.conf(5)\n"
    "  --check FILE   check FILE; print its errors and exit 1 if it has any\n"
    "  --keys         list the key names, one a line\n"
    "  --describe     list the keys with type, sections, defaults, range and help\n"
    "  --help         print this help\n"
    "  --version      print the version\n"
    "\n"
    "Exit status: 0 on success, 1 on a configuration error, 2 on a usage error.\n";

static void print_errors(const ga_conf_t *c)
{
    size_t n = ga_conf_error_count(c);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s\n", ga_conf_error(c, i));
    if (ga_conf_file(c) && n > 0 && ga_conf_error_count(c) < ga_conf_total_errors(c))
        fprintf(stderr, "%s: %zu more errors not shown\n", ga_conf_file(c),
                ga_conf_total_errors(c) - n);
}

static int check_file(const char *path)
{
    ga_conf_t *c = ga_conf_new();
    if (!c) {
        fprintf(stderr, "gpuarena-config: out of memory\n");
        return 1;
    }
    gpuarena_status_t st = ga_conf_load_file(c, path);
    if (st == GPUARENA_SUCCESS)
        st = ga_conf_check(c);
    if (st == GPUARENA_SUCCESS)
        printf("%s: ok\n", path);
    else if (ga_conf_error_count(c) > 0)
        print_errors(c);
    else
        fprintf(stderr, "%s: %s\n", path, gpuarena_last_error());
    ga_conf_free(c);
    return st == GPUARENA_SUCCESS ? 0 : 1;
}

static void print_keys(void)
{
    for (size_t i = 0; i < ga_config_key_count(); i++)
        printf("%s\n", ga_config_key(i)->name);
}

static void print_sections(const ga_key_t *k, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    if (k->kinds == GA_KINDS_ALL) {
        snprintf(buf, size, "all");
        return;
    }
    for (int i = 0; i < GPUARENA_KIND_COUNT && used < size; i++) {
        if (!ga_key_applies(k, (gpuarena_kind_t)i))
            continue;
        int w = snprintf(buf + used, size - used, "%s%s", used ? "," : "",
                         ga_kind_name((gpuarena_kind_t)i));
        if (w > 0)
            used += (size_t)w;
    }
}

static void describe(void)
{
    for (size_t i = 0; i < ga_config_key_count(); i++) {
        const ga_key_t *k = ga_config_key(i);
        char sections[64], value[128];
        print_sections(k, sections, sizeof sections);
        printf("%s\n  %s\n  type: %s; sections: %s\n  range: %s\n  default:", k->name, k->help,
               ga_key_type_name(k->type), sections, k->range);
        /* One default, or one per kind where they differ. */
        char first[128] = "";
        bool same = true;
        for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
            ga_settings_t s;
            if (!ga_key_applies(k, (gpuarena_kind_t)kind))
                continue;
            ga_config_defaults((gpuarena_kind_t)kind, &s);
            ga_key_format(k, &s, value, sizeof value);
            if (!first[0])
                snprintf(first, sizeof first, "%s", value);
            else if (strcmp(first, value) != 0)
                same = false;
        }
        if (same) {
            printf(" %s\n", first);
            continue;
        }
        for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
            ga_settings_t s;
            if (!ga_key_applies(k, (gpuarena_kind_t)kind))
                continue;
            ga_config_defaults((gpuarena_kind_t)kind, &s);
            ga_key_format(k, &s, value, sizeof value);
            printf(" %s (%s)", value, ga_kind_name((gpuarena_kind_t)kind));
        }
        printf("\n");
    }
}

/* TEXT (a path, the environment's options) in a comment: a control
 * character, a newline above all, would end the comment and make the
 * output no config file; it is written as an octal escape. */
static void print_safe(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            printf("\\%03o", *p);
        else
            putchar(*p);
    }
}

static void print_section(const ga_conf_t *c, gpuarena_kind_t kind, int device)
{
    if (device >= 0)
        printf("\n[%s.%d]\n", ga_kind_name(kind), device);
    else
        printf("\n[%s]\n", ga_kind_name(kind));
    for (size_t i = 0; i < ga_config_key_count(); i++) {
        const ga_key_t *k = ga_config_key(i);
        char value[256], origin[600];
        if (!ga_key_applies(k, kind))
            continue;
        ga_conf_value(c, kind, device, k, value, sizeof value, origin, sizeof origin);
        printf("%-18s = %-12s # ", k->name, value);
        print_safe(origin);
        putchar('\n');
    }
}

static int show(const char *file)
{
    gpuarena_status_t st = gpuarena_init(file);
    const ga_conf_t *c = st == GPUARENA_SUCCESS ? ga_config_current() : NULL;
    if (!c) {
        fprintf(stderr, "%s\n", gpuarena_last_error());
        return 1;
    }
    printf("# gpuarena %s: the settings in effect, and where each came from\n", gpuarena_version());
    if (ga_conf_file(c)) {
        printf("# file: ");
        print_safe(ga_conf_file(c));
        printf(" (found by %s)\n", ga_conf_file_source(c));
    } else {
        printf("# file: none (looked for ");
        print_safe(ga_conf_searched(c) ? ga_conf_searched(c) : "-");
        printf(")\n");
    }
    /* As the library reads it: ignored in a set-ID program (env.h). */
    const char *opts = ga_env("GPUARENA_OPTIONS");
    if (opts) {
        printf("# GPUARENA_OPTIONS: ");
        print_safe(opts);
        putchar('\n');
    }
    /* The files the library would write: a name it cannot expand is
     * ignored there, silently (it never prints on its own account), so
     * it is said here, and is an error of the configuration. */
    int rc = 0;
    static const struct {
        const char *var, *what;
        bool streams; /* stderr and stdout name streams, not files */
    } outputs[] = {{"GPUARENA_STATS", "statistics file", true},
                   {"GPUARENA_TRACE", "trace file", false}};
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        const char *v = ga_env(outputs[i].var);
        if (!v)
            continue;
        char path[4096];
        bool stream = outputs[i].streams && (strcmp(v, "stderr") == 0 || strcmp(v, "stdout") == 0);
        bool ok =
            stream || ga_output_path(outputs[i].what, v, path, sizeof path) == GPUARENA_SUCCESS;
        printf("# %s: ", outputs[i].var);
        print_safe(v);
        printf("%s\n", ok ? "" : " (ignored: see standard error)");
        if (!ok) {
            fprintf(stderr, "%s: %s: ignored\n", outputs[i].var, gpuarena_last_error());
            rc = 1;
        }
    }
    for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++) {
        print_section(c, (gpuarena_kind_t)kind, -1);
        for (int d = 0; d < GA_CONFIG_MAX_DEVICES; d++)
            if (ga_conf_has_device(c, (gpuarena_kind_t)kind, d))
                print_section(c, (gpuarena_kind_t)kind, d);
    }
    return rc;
}

/* A command line that is none of the usage's: which part, then the usage. */
static int bad_usage(int argc, char **argv)
{
    static const char *const known[] = {"--help",     "-h",     "--version", "--keys",
                                        "--describe", "--file", "--check"};
    bool option = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        option |= strcmp(argv[1], known[i]) == 0;
    if (option)
        fprintf(stderr, "gpuarena-config: '%s' does not take %d argument%s\n", argv[1], argc - 2,
                argc == 3 ? "" : "s");
    else
        fprintf(stderr, "gpuarena-config: unrecognized option '%s'\n", argv[1]);
    fputs(usage, stderr);
    return 2;
}

static int run(int argc, char **argv)
{
    if (argc == 1)
        return show(NULL);
    const char *a = argv[1];
    if ((strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) && argc == 2) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(a, "--version") == 0 && argc == 2) {
        printf("gpuarena-config (gpuarena) %s\n", gpuarena_version());
        return 0;
    }
    if (strcmp(a, "--keys") == 0 && argc == 2) {
        print_keys();
        return 0;
    }
    if (strcmp(a, "--describe") == 0 && argc == 2) {
        describe();
        return 0;
    }
    if (strcmp(a, "--file") == 0 && argc == 3)
        return show(argv[2]);
    if (strcmp(a, "--check") == 0 && argc >= 3) {
        int rc = 0;
        for (int i = 2; i < argc; i++)
            rc |= check_file(argv[i]);
        return rc;
    }
    return bad_usage(argc, argv);
}

int main(int argc, char **argv)
{
    return ga_tool_main("gpuarena-config", run, argc, argv, 3);
}
