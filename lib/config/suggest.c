/*
 * suggest.c - "did you mean" by edit distance (see suggest.h).  Swapped
 * neighbours count as one edit because they are the most common typo
 * ('max_cahced').
 */
#include <config.h>

#include "config/suggest.h"

#include <ctype.h>
#include <string.h>

#define FAR     1000u
#define LONGEST 64

static unsigned min3(unsigned a, unsigned b, unsigned c)
{
    unsigned m = a < b ? a : b;
    return m < c ? m : c;
}

unsigned ga_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > LONGEST || m > LONGEST)
        return FAR;
    unsigned rows[3][LONGEST + 1];
    unsigned *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++)
        prev[j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (unsigned)i;
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            unsigned cost = ca != cb;
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
        unsigned *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

const char *ga_suggest(const char *word, const char *const *names, size_t count)
{
    size_t len = strlen(word);
    unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
    const char *best = NULL;
    unsigned best_d = FAR;
    for (size_t i = 0; i < count; i++) {
        unsigned d = ga_edit_distance(word, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
