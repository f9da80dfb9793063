/*
 * json.h - writing JSON: a string, escaped, for gpuarena_stats_print's
 * JSON (stats.c) and gpuarena-replay's report, which both quote text
 * that may hold anything (a driver's message, a trace's file name, the
 * options given on the command line).
 */
#ifndef GA_JSON_H
#define GA_JSON_H

#include <stddef.h>
#include <stdio.h>

/* S as a JSON string on OUT: quotes, backslashes and control characters
 * escaped, and each byte that does not belong to a valid UTF-8 sequence
 * written as U+FFFD. */
void ga_json_string(FILE *out, const char *s);

/* The length of the valid UTF-8 sequence of two to four bytes at TEXT
 * (no overlong form, no surrogate, nothing past U+10FFFF), or 0 when
 * TEXT does not start one (ASCII included). */
size_t ga_json_utf8_len(const char *text);

#endif /* GA_JSON_H */
