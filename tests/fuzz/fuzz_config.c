/*
 * fuzz_config.c - libFuzzer target for the config parser: the input is
 * parsed as a gpuarena.conf file, then (up to its first NUL, if any) as
 * GPUARENA_OPTIONS and as gpuarena_create() options; every value of every
 * section is printed.  Built by run-fuzz.sh, not by make.
 */
#include "config/config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void print_all(const ga_conf_t *c)
{
    char v[256], o[600];
    for (int kind = 0; kind < GPUARENA_KIND_COUNT; kind++)
        for (int dev = -1; dev < GA_CONFIG_MAX_DEVICES; dev++) {
            if (dev >= 0 && !ga_conf_has_device(c, (gpuarena_kind_t)kind, dev))
                continue;
            for (size_t i = 0; i < ga_config_key_count(); i++)
                ga_conf_value(c, (gpuarena_kind_t)kind, dev, ga_config_key(i), v, sizeof v, o,
                              sizeof o);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ga_conf_t *c = ga_conf_new();
    if (!c)
        return 0;
    if (ga_config_parse_buffer(c, "fuzz.conf", (const char *)data, size) == GPUARENA_SUCCESS &&
        ga_conf_check(c) == GPUARENA_SUCCESS)
        print_all(c);
    for (size_t i = 0; i < ga_conf_error_count(c); i++)
        if (!ga_conf_error(c, i))
            abort();
    ga_conf_free(c);

    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    c = ga_conf_new();
    if (c) {
        if (ga_conf_apply_options(c, text, "GPUARENA_OPTIONS") == GPUARENA_SUCCESS)
            print_all(c);
        ga_conf_free(c);
    }
    ga_settings_t s, before;
    ga_config_defaults(GPUARENA_PINNED, &s);
    before = s;
    if (ga_config_apply(&s, GPUARENA_PINNED, text, "options") != GPUARENA_SUCCESS &&
        memcmp(&s, &before, sizeof s) != 0)
        abort(); /* a failed apply must change nothing */
    free(text);
    return 0;
}
