/*
 * suggest.h - "did you mean": the closest of a list of names to a word
 * that matched none of them, by edit distance.
 */
#ifndef GA_CONFIG_SUGGEST_H
#define GA_CONFIG_SUGGEST_H

#include <stddef.h>

/* Optimal string alignment distance between A and B, ignoring case:
 * insertions, deletions, substitutions and swaps of two neighbours each
 * cost 1.  Words longer than 64 characters are "far" (distance 1000). */
unsigned ga_edit_distance(const char *a, const char *b);

/* The candidate of NAMES[0..COUNT) closest to WORD, or NULL when none is
 * close enough to be a likely typo (distance 1 for words of up to 3
 * characters, 2 up to 6, else 3). */
const char *ga_suggest(const char *word, const char *const *names, size_t count);

#endif /* GA_CONFIG_SUGGEST_H */
