/*
 * map.c - uint64_t to uint64_t hash map (see map.h).
 */
#include "trace/map.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

/* A key for the hash, new for each map.  The reader's keys are a file's
 * allocation ids: with a hash anyone can invert, ids chosen to share a
 * probe run made a trace of 160000 lines take 25 s to read instead of
 * 0.03.  Any value serves when the kernel has no randomness to give. */
static uint64_t new_seed(void)
{
    uint64_t s;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) == (ssize_t)sizeof s)
        return s;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)&t;
}

static inline size_t hash(const ga_map_t *m, uint64_t k)
{
    /* A 64-bit finaliser (xorshift-multiply) of the key mixed with the
     * map's seed: pointers and small integers both spread over the whole
     * table. */
    k ^= m->seed;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (size_t)k;
}

void ga_map_init(ga_map_t *m)
{
    m->slots = NULL;
    m->used = NULL;
    m->mask = 0;
    m->count = 0;
    m->seed = new_seed();
}

void ga_map_fini(ga_map_t *m)
{
    free(m->slots);
    free(m->used);
    ga_map_init(m);
}

uint64_t *ga_map_get(ga_map_t *m, uint64_t key)
{
    if (!m->slots)
        return NULL;
    for (size_t i = hash(m, key) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->used[i])
            return NULL;
        if (m->slots[i].key == key)
            return &m->slots[i].val;
    }
}

static void place(const ga_map_t *m, ga_map_slot_t *slots, uint8_t *used, size_t mask, uint64_t key,
                  uint64_t val)
{
    size_t i = hash(m, key) & mask;
    while (used[i])
        i = (i + 1) & mask;
    used[i] = 1;
    slots[i].key = key;
    slots[i].val = val;
}

static bool grow(ga_map_t *m)
{
    size_t cap = m->slots ? (m->mask + 1) * 2 : 64;
    if (cap > SIZE_MAX / sizeof(ga_map_slot_t))
        return false;
    ga_map_slot_t *slots = malloc(cap * sizeof *slots);
    uint8_t *used = calloc(cap, 1);
    if (!slots || !used) {
        free(slots);
        free(used);
        return false;
    }
    if (m->slots) {
        for (size_t i = 0; i <= m->mask; i++)
            if (m->used[i])
                place(m, slots, used, cap - 1, m->slots[i].key, m->slots[i].val);
    }
    free(m->slots);
    free(m->used);
    m->slots = slots;
    m->used = used;
    m->mask = cap - 1;
    return true;
}

bool ga_map_put(ga_map_t *m, uint64_t key, uint64_t val)
{
    uint64_t *v = ga_map_get(m, key);
    if (v) {
        *v = val;
        return true;
    }
    if ((!m->slots || (m->count + 1) * 2 > m->mask + 1) && !grow(m))
        return false;
    place(m, m->slots, m->used, m->mask, key, val);
    m->count++;
    return true;
}

bool ga_map_del(ga_map_t *m, uint64_t key, uint64_t *val)
{
    if (!m->slots)
        return false;
    size_t i = hash(m, key) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        if (!m->used[i])
            return false;
        if (m->slots[i].key == key)
            break;
    }
    if (val)
        *val = m->slots[i].val;
    /* Backward-shift deletion: move later members of the probe run into the
     * hole when their home slot does not lie strictly between the hole and
     * their own position. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->used[j]; j = (j + 1) & m->mask) {
        size_t home = hash(m, m->slots[j].key) & m->mask;
        bool between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!between) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->used[hole] = 0;
    m->count--;
    return true;
}
