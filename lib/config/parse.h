/*
 * parse.h - parsing and printing of config values: sizes with binary
 * suffixes, booleans, unsigned integers, fractions, words from a list and
 * NUMA node lists.  Pure functions of their text; nothing here knows about
 * keys or sections.
 */
#ifndef GA_CONFIG_PARSE_H
#define GA_CONFIG_PARSE_H

#include "config/settings.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results of the parsers. */
enum { GA_PARSE_OK = 0, GA_PARSE_SYNTAX = 1, GA_PARSE_RANGE = 2 };

/* A word that stands for a value: "none", "max", "event", ... */
typedef struct ga_word {
    const char *word;
    uint64_t value;
} ga_word_t;

/* "512", "64K", "2M", "1G", "3T" (binary: K = 1024), also "2MiB".  No sign,
 * no fraction, no space.  GA_PARSE_RANGE when the value exceeds SIZE_MAX. */
int ga_parse_size(const char *text, uint64_t *out);

/* A decimal integer of at most MAX. */
int ga_parse_uint(const char *text, uint64_t max, uint64_t *out);

/* true/false, yes/no, on/off, 1/0 (any case). */
int ga_parse_bool(const char *text, bool *out);

/* A decimal fraction from 0 to 1: "0", "0.8", ".25", "1", "1.0". */
int ga_parse_fraction(const char *text, double *out);

/* One of WORDS (terminated by a NULL word), any case. */
int ga_parse_word(const char *text, const ga_word_t *words, uint64_t *out);

/* A NUMA policy: "nearest", "local", "interleave", "interleave:LIST" or
 * "LIST", where LIST is "N" or "N-M" items joined by commas, every node
 * below GA_MAX_NODES and none twice.  On failure WHY says what was wrong:
 * GA_NUMA_EXPECTED where TEXT is neither a policy nor a list. */
#define GA_NUMA_EXPECTED "expected nearest, local, interleave, interleave:LIST or LIST"
int ga_parse_numa(const char *text, ga_numa_policy_t *policy, int *nodes, unsigned *count,
                  char *why, size_t why_size);

/* "4K", "2M", "512": the largest suffix that divides V exactly. */
void ga_format_size(uint64_t v, char *buf, size_t size);

/* The text ga_parse_numa() reads back as the same policy and nodes (in
 * any order, as the arenas use them as a set): ascending, runs of three
 * or more as "N-M", so that every list fits a line of a file. */
void ga_format_numa(ga_numa_policy_t policy, const int *nodes, unsigned count, char *buf,
                    size_t size);

#endif /* GA_CONFIG_PARSE_H */
