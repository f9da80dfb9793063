/*
 * livemap.c - the map from the address of a live block to its record.
 *
 * Every free needs it, and the thread caches free without taking the
 * manager's lock, so it is read lock-free while only the lock holder writes
 * it: open addressing with linear probing and atomic slots.
 *
 * A removal shifts the rest of the probe chain back into the hole instead
 * of leaving a tombstone, so chains stay as short as the load allows and
 * the map never needs a rehash in place.  Each slot's value is stored
 * before its key, with release, and read after it, with acquire.  A
 * reader that races a shift may miss a key that moved behind it, or read
 * the value of the key that replaced the one it matched: the free path
 * then checks the record's address and state, and on any doubt looks
 * again under the lock.
 *
 * Growing publishes a table twice the size; the old one is kept until the
 * manager is destroyed (all of them together are at most the size of the
 * last), so a reader that loaded it still reads valid memory.  Block
 * records are never freed while the manager lives, so a stale pointer
 * from a slot always points at a block record.
 */
#include "block/internal.h"

#include <stdlib.h>

#define EMPTY GA_LMAP_EMPTY

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
    m->count = 0;
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

static inline void slot_set(ga_lmap_slot_t *s, uintptr_t a, ga_block_t *b)
{
    atomic_store_explicit(&s->val, b, memory_order_relaxed);
    atomic_store_explicit(&s->key, a, memory_order_release);
}

static void put(ga_lmap_table_t *t, uintptr_t a, ga_block_t *b)
{
    size_t i = ga_lmap_hash(a, t->mask);
    while (atomic_load_explicit(&t->slots[i].key, memory_order_relaxed) != EMPTY)
        i = (i + 1) & t->mask;
    slot_set(&t->slots[i], a, b);
}

static gpuarena_status_t grow(ga_lmap_t *m)
{
    ga_lmap_table_t *old = atomic_load_explicit(&m->table, memory_order_relaxed);
    ga_lmap_table_t *t = table_new((old->mask + 1) * 2);
    if (!t)
        return GPUARENA_ERR_HOST_MEMORY;
    for (size_t i = 0; i <= old->mask; i++) {
        uintptr_t k = atomic_load_explicit(&old->slots[i].key, memory_order_relaxed);
        if (k != EMPTY)
            put(t, k, atomic_load_explicit(&old->slots[i].val, memory_order_relaxed));
    }
    t->retired = old;
    atomic_store_explicit(&m->table, t, memory_order_release);
    return GPUARENA_SUCCESS;
}

gpuarena_status_t ga_lmap_insert(ga_lmap_t *m, ga_block_t *b)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    if ((m->count + 1) * 2 > t->mask + 1) {
        gpuarena_status_t st = grow(m);
        if (st != GPUARENA_SUCCESS)
            return st;
        t = atomic_load_explicit(&m->table, memory_order_relaxed);
    }
    put(t, b->addr, b);
    m->count++;
    return GPUARENA_SUCCESS;
}

void ga_lmap_remove(ga_lmap_t *m, uintptr_t a)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    size_t mask = t->mask, i = ga_lmap_hash(a, mask);
    for (;;) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        if (k == EMPTY)
            return;
        if (k == a)
            break;
        i = (i + 1) & mask;
    }
    m->count--;
    /* Fill the hole at I with the next key of the chain that may live
     * there (its home is not in the cyclic range (I, J]), then the hole
     * moves to where that key was; the chain's end closes it. */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        uintptr_t k = atomic_load_explicit(&t->slots[j].key, memory_order_relaxed);
        if (k == EMPTY)
            break;
        size_t h = ga_lmap_hash(k, mask);
        if (((j - h) & mask) < ((j - i) & mask))
            continue; /* home between the hole and J: it must stay */
        slot_set(&t->slots[i], k, atomic_load_explicit(&t->slots[j].val, memory_order_relaxed));
        i = j;
    }
    atomic_store_explicit(&t->slots[i].key, EMPTY, memory_order_release);
    atomic_store_explicit(&t->slots[i].val, NULL, memory_order_relaxed);
}

/* For ga_bm_check (the lock held): every key in the table is found from
 * its home slot, names a live record at that address, and the table holds
 * as many keys as the count says. */
bool ga_lmap_valid(ga_lmap_t *m, uintptr_t *bad)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    size_t keys = 0;
    *bad = 0;
    for (size_t i = 0; i <= t->mask; i++) {
        uintptr_t k = atomic_load_explicit(&t->slots[i].key, memory_order_relaxed);
        if (k == EMPTY)
            continue;
        ga_block_t *b = atomic_load_explicit(&t->slots[i].val, memory_order_relaxed);
        keys++;
        if (!b || b->addr != k || b->state != BLOCK_LIVE || ga_lmap_find(m, k) != b) {
            *bad = k;
            return false;
        }
    }
    return keys == m->count;
}
