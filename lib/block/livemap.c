/*
 * livemap.c - the map from the address of a live block to its record.
 *
 * Every free needs it, and the thread caches free without taking the
 * manager's lock, so it is read lock-free while only the lock holder writes
 * it: open addressing with linear probing, atomic slots, and tombstones for
 * removals.  Growing publishes a table twice the size; the old one is kept
 * until the manager is destroyed (all of them together are at most the
 * size of the last), so a reader that loaded it still reads valid memory.
 * Clearing tombstones rehashes in place inside a sequence lock: a reader
 * that overlapped it sees the version change and looks again.  Block
 * records are never freed while the manager lives, so a stale pointer from
 * a slot always points at a block record, which the caller checks.
 */
#include "block/internal.h"

#include <stdlib.h>

#define EMPTY GA_LMAP_EMPTY
#define TOMB  GA_LMAP_TOMB

static ga_lmap_table_t *table_new(size_t slots)
{
    ga_lmap_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->mask = slots - 1;
    t->slots = calloc(slots, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

gpuarena_status_t ga_lmap_init(ga_lmap_t *m)
{
    m->used = m->count = 0;
    atomic_store(&m->version, 0);
    ga_lmap_table_t *t = table_new(1024);
    if (!t)
        return GPUARENA_ERR_HOST_MEMORY;
    atomic_store(&m->table, t);
    return GPUARENA_SUCCESS;
}

void ga_lmap_destroy(ga_lmap_t *m)
{
    ga_lmap_table_t *t = atomic_load(&m->table);
    while (t) {
        ga_lmap_table_t *r = t->retired;
        free(t->slots);
        free(t);
        t = r;
    }
    atomic_store(&m->table, NULL);
}

static void put(ga_lmap_table_t *t, uintptr_t a, ga_block_t *b)
{
    size_t i = ga_lmap_hash(a, t->mask);
    for (;;) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        if (k == EMPTY || k == TOMB) {
            atomic_store_explicit(&t->slots[i].val, b, memory_order_relaxed);
            atomic_store_explicit(&t->slots[i].key, a, memory_order_release);
            return;
        }
        i = (i + 1) & t->mask;
    }
}

/* Rehash in place to drop tombstones, inside the sequence lock. */
static gpuarena_status_t clean(ga_lmap_t *m, ga_lmap_table_t *t)
{
    struct {
        uintptr_t key;
        ga_block_t *val;
    } *live = malloc((m->count + 1) * sizeof *live);
    if (!live)
        return GPUARENA_ERR_HOST_MEMORY;
    size_t n = 0;
    for (size_t i = 0; i <= t->mask; i++) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        ga_block_t *b = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
        if (k != EMPTY && k != TOMB && b) {
            live[n].key = k;
            live[n++].val = b;
        }
    }
    atomic_fetch_add_explicit(&m->version, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i <= t->mask; i++) {
        atomic_store_explicit(&t->slots[i].key, EMPTY, memory_order_relaxed);
        atomic_store_explicit(&t->slots[i].val, NULL, memory_order_relaxed);
    }
    for (size_t i = 0; i < n; i++)
        put(t, live[i].key, live[i].val);
    atomic_fetch_add_explicit(&m->version, 1, memory_order_release);
    m->used = n;
    free(live);
    return GPUARENA_SUCCESS;
}

static gpuarena_status_t grow(ga_lmap_t *m)
{
    ga_lmap_table_t *old = atomic_load_explicit(&m->table, memory_order_relaxed);
    size_t slots = old->mask + 1;
    if (m->count * 4 < slots)
        return clean(m, old); /* mostly tombstones: same size will do */
    slots *= 2;
    ga_lmap_table_t *t = table_new(slots);
    if (!t)
        return GPUARENA_ERR_HOST_MEMORY;
    for (size_t i = 0; i <= old->mask; i++) {
        uintptr_t k = atomic_load_explicit(&old->slots[i].key, memory_order_relaxed);
        ga_block_t *b = atomic_load_explicit(&old->slots[i].val, memory_order_relaxed);
        if (k != EMPTY && k != TOMB && b)
            put(t, k, b);
    }
    t->retired = old;
    atomic_store_explicit(&m->table, t, memory_order_release);
    m->used = m->count;
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_lmap_insert(ga_lmap_t *m, ga_block_t *b)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    if ((m->used + 1) * 2 > t->mask + 1) {
        gpuarena_status_t st = grow(m);
        if (st != GPUARENA_SUCCESS)
            return st;
        t = atomic_load_explicit(&m->table, memory_order_relaxed);
    }
    /* Reuse a tombstone on the probe path only if the key is absent. */
    size_t i = ga_lmap_hash(b->addr, t->mask);
    for (;;) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        if (k == EMPTY) {
            m->used++;
            break;
        }
        if (k == TOMB)
            break;
        i = (i + 1) & t->mask;
    }
    atomic_store_explicit(&t->slots[i].val, b, memory_order_relaxed);
    atomic_store_explicit(&t->slots[i].key, b->addr, memory_order_release);
    m->count++;
    return GPUARENA_SUCCESS;
}

void ga_lmap_remove(ga_lmap_t *m, uintptr_t a)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    size_t i = ga_lmap_hash(a, t->mask);
    for (;;) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        if (k == EMPTY)
            return;
        if (k == a) {
            atomic_store_explicit(&t->slots[i].val, NULL, memory_order_relaxed);
            atomic_store_explicit(&t->slots[i].key, TOMB, memory_order_release);
            m->count--;
            return;
        }
        i = (i + 1) & t->mask;
    }
}
