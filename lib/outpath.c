/*
 * outpath.c - %p and %r in the names of the files gpuarena writes.
 */
#include "outpath.h"

#include "errors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *ga_output_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "MV2_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v && strlen(v) < 16 && strspn(v, "0123456789") == strlen(v)) {
            while (v[0] == '0' && v[1]) /* a number ("007" is no JSON) */
                v++;
            return v;
        }
    }
    return "0";
}

bool ga_output_per_process(const char *pattern)
{
    for (const char *s = pattern; *s; s++) {
        if (*s != '%')
            continue;
        if (s[1] == 'p')
            return true;
        if (s[1] == '%')
            s++;
    }
    return false;
}

gpuarena_status_t ga_output_path(const char *what, const char *pattern, char *out, size_t outsz)
{
    if (outsz == 0)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "%s: no room for the name", what);
    size_t n = 0;
    char num[24];
    for (const char *s = pattern; *s; s++) {
        const char *add;
        char one[2] = {*s, '\0'};
        if (*s != '%') {
            add = one;
        } else if (s[1] == '%') {
            add = "%";
            s++;
        } else if (s[1] == 'p') {
            snprintf(num, sizeof num, "%ld", (long)getpid());
            add = num;
            s++;
        } else if (s[1] == 'r') {
            add = ga_output_rank();
            s++;
        } else {
            return ga_error(GPUARENA_ERR_INVALID_ARGUMENT,
                            "%s '%s': only %%p, %%r and %%%% may follow %%", what, pattern);
        }
        size_t k = strlen(add);
        if (n + k >= outsz)
            return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "%s '%s': name too long", what, pattern);
        memcpy(out + n, add, k);
        n += k;
    }
    out[n] = '\0';
    return GPUARENA_SUCCESS;
}
