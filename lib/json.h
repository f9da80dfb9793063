/*
 * json.h - writing JSON: a string, escaped, for gpuarena_stats_print's
 * JSON (stats.c) and gpuarena-replay's report, which both quote text
 * that may hold anything (a driver's message, a trace's file name, the
 * options given on the command line).
 */
#ifndef GA_JSON_H
#define GA_JSON_H

#include <stdio.h>

/* S as a JSON string on OUT: quotes, backslashes and control characters
 * escaped. */
void ga_json_string(FILE *out, const char *s);

#endif /* GA_JSON_H */
