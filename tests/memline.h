/*
 * memline.h - the "memory:" line that gpuarena_stats_print gives the
 * newest arena of one kind (arenas are listed newest first): how its
 * provider made the memory, which the device and pinned tests check.
 */
#ifndef GA_TESTS_MEMLINE_H
#define GA_TESTS_MEMLINE_H

#include "gpuarena.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* LINE: the memory line of the newest arena of KIND ("device",
 * "pinned"), without its newline; there must be one. */
static inline void ga_memory_line(const char *kind, char *line, size_t size)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gpuarena_stats_print(f, NULL), GPUARENA_SUCCESS);
    rewind(f);
    char head[64], buf[1024];
    snprintf(head, sizeof head, "arena %s.", kind);
    bool ours = false;
    line[0] = 0;
    while (!line[0] && fgets(buf, sizeof buf, f)) {
        if (strncmp(buf, "arena ", 6) == 0)
            ours = strncmp(buf, head, strlen(head)) == 0;
        if (ours && strncmp(buf, "  memory: ", 10) == 0) {
            size_t n = strcspn(buf + 10, "\n");
            n = n < size ? n : size - 1; /* cut to LINE */
            memcpy(line, buf + 10, n);
            line[n] = 0;
        }
    }
    fclose(f);
    ck_assert_msg(line[0] != 0, "no memory: line of a %s arena in gpuarena_stats_print", kind);
}

#endif /* GA_TESTS_MEMLINE_H */
