/*
 * map.h - a small open-addressing hash map from uint64_t to uint64_t, used
 * by the trace room: the reader maps a file's allocation ids to dense
 * indexes, the recorder maps live pointers to ids and streams to their
 * small trace numbers.  Linear probing with backward-shift deletion; the
 * table doubles at 1/2 load.  Not thread-safe: callers lock.
 */
#ifndef GA_TRACE_MAP_H
#define GA_TRACE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ga_map_slot {
    uint64_t key;
    uint64_t val;
} ga_map_slot_t;

typedef struct ga_map {
    ga_map_slot_t *slots;
    uint8_t *used;
    size_t mask; /* capacity - 1; capacity is a power of two, 0 when empty */
    size_t count;
    uint64_t seed; /* mixed into the hash (map.c) */
} ga_map_t;

void ga_map_init(ga_map_t *m);
void ga_map_fini(ga_map_t *m);

/* Pointer to the value of KEY, or NULL when absent. */
uint64_t *ga_map_get(ga_map_t *m, uint64_t key);

/* Insert KEY (absent) with VAL, or overwrite it.  False when out of memory
 * (the map is then unchanged). */
bool ga_map_put(ga_map_t *m, uint64_t key, uint64_t val);

/* Remove KEY; false when it was absent. */
bool ga_map_del(ga_map_t *m, uint64_t key, uint64_t *val);

#endif /* GA_TRACE_MAP_H */
