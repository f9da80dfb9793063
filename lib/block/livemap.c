/*
 * livemap.c - the map from the address of a live block to its record.
 *
 * Every free needs it, and the thread caches free without taking the
 * manager's lock, so it is read lock-free while only the lock holder writes
 * it.  It is a hash table of buckets of GA_LMAP_WAYS keys, one cache line
 * each: a key goes to the first free way of its home bucket, or, when that
 * bucket is full, of the next buckets, and the home bucket's REACH says
 * how far past it its keys may be.  With the load kept at half the ways
 * or less, nearly every key is at home: a lookup reads one line and
 * compares its keys without a branch on which way holds the key.
 *
 * The common insert, a free way in the home bucket of a table with room,
 * is inline (ga_lmap_insert, internal.h); the rest is ga_lmap_insert_far.
 *
 * Each live record keeps where its key is (lslot), so a removal, which
 * every free makes, goes straight to the way: no hash and no probe.  A
 * grow rewrites the slots only once the new table is complete: one that
 * fails leaves every slot pointing into the table still in use.
 *
 * A removal only empties its way: no key ever moves while the table
 * lives, so a lock-free reader can miss only a key being inserted or
 * removed at that moment.  Each way's value is stored before its key, with
 * release, and read after it, with acquire; a reader that races a
 * removal and a new insertion into the same way may read the new key's
 * value: the free path checks the record's address and state, and on any
 * doubt looks again under the lock.  REACH only grows while a table
 * lives (a removal does not know whether other keys still need it); the
 * next table starts from zero.
 *
 * Growing publishes a table twice the size; the old one is kept until the
 * manager is destroyed (all of them together are at most the size of the
 * last), so a reader that loaded it still reads valid memory.  Block
 * records are never freed while the manager lives, so a stale pointer
 * from a way always points at a block record.
 */
#include "block/internal.h"

#include <stdlib.h>

#define EMPTY GA_LMAP_EMPTY
#define WAYS  GA_LMAP_WAYS
/* Buckets a key may be from home: REACH is a byte.  Past it the insert
 * grows the table, which at half load never comes near. */
#define MAX_REACH 255

static void table_free(ga_lmap_table_t *t)
{
    free(t->b);
    free((void *)t->reach);
    free(t);
}

/* Largest table: a record's LSLOT, bucket * WAYS + way, is 32 bits. */
#define MAX_BUCKETS ((size_t)1 << 30)

static ga_lmap_table_t *table_new(size_t buckets)
{
    if (buckets > MAX_BUCKETS)
        return NULL;
    ga_lmap_table_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->mask = buckets - 1;
    t->b = aligned_alloc(_Alignof(ga_lmap_bucket_t), buckets * sizeof *t->b);
    t->reach = calloc(buckets, sizeof *t->reach);
    if (!t->b || !t->reach) {
        table_free(t);
        return NULL;
    }
    for (size_t i = 0; i < buckets; i++) {
        for (unsigned k = 0; k < WAYS; k++) {
            atomic_init(&t->b[i].key[k], EMPTY);
            atomic_init(&t->b[i].val[k], NULL);
        }
    }
    return t;
}

gpuarena_status_t ga_lmap_init(ga_lmap_t *m)
{
    m->count = 0;
    ga_lmap_table_t *t = table_new(256); /* 1024 ways */
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
        table_free(t);
        t = r;
    }
    atomic_store(&m->table, NULL);
}

ga_block_t *ga_lmap_find_far(ga_lmap_table_t *t, size_t h, uintptr_t a)
{
    size_t reach = atomic_load_explicit(&t->reach[h], memory_order_relaxed);
    for (size_t d = 1; d <= reach; d++) {
        ga_lmap_bucket_t *bk = &t->b[(h + d) & t->mask];
        unsigned hit = ga_lmap_match(bk, a);
        if (hit)
            return atomic_load_explicit(&bk->val[__builtin_ctz(hit)], memory_order_relaxed);
    }
    return NULL;
}

/* Put A -> B in the first free way from A's home; false when none is
 * within MAX_REACH buckets.  *SLOT gets where it went. */
static bool put(ga_lmap_table_t *t, uintptr_t a, ga_block_t *b, uint32_t *slot)
{
    size_t h = ga_lmap_hash(a, t->mask);
    for (size_t d = 0; d <= MAX_REACH && d <= t->mask; d++) {
        size_t i = (h + d) & t->mask;
        unsigned free_ways = ga_lmap_match(&t->b[i], EMPTY);
        if (!free_ways)
            continue;
        *slot = ga_lmap_store(t, i, (unsigned)__builtin_ctz(free_ways), a, b);
        /* Published after the key: a reader that sees the new reach
         * finds the key (it is there already). */
        if (d > atomic_load_explicit(&t->reach[h], memory_order_relaxed))
            atomic_store_explicit(&t->reach[h], (uint8_t)d, memory_order_release);
        return true;
    }
    return false;
}

/* Tell every record of T where T holds it. */
static void slots_set(ga_lmap_table_t *t)
{
    for (size_t i = 0; i <= t->mask; i++) {
        for (unsigned k = 0; k < WAYS; k++) {
            if (atomic_load_explicit(&t->b[i].key[k], memory_order_relaxed) == EMPTY)
                continue;
            ga_block_t *b = atomic_load_explicit(&t->b[i].val[k], memory_order_relaxed);
            b->lslot = (uint32_t)(i * WAYS + k);
        }
    }
}

static gpuarena_status_t grow(ga_lmap_t *m)
{
    ga_lmap_table_t *old = atomic_load_explicit(&m->table, memory_order_relaxed);
    for (size_t buckets = (old->mask + 1) * 2;; buckets *= 2) {
        ga_lmap_table_t *t = table_new(buckets);
        if (!t)
            return GPUARENA_ERR_HOST_MEMORY;
        bool ok = true;
        for (size_t i = 0; i <= old->mask && ok; i++) {
            for (unsigned k = 0; k < WAYS && ok; k++) {
                uintptr_t key = atomic_load_explicit(&old->b[i].key[k], memory_order_relaxed);
                uint32_t slot;
                if (key != EMPTY)
                    ok = put(t, key, atomic_load_explicit(&old->b[i].val[k], memory_order_relaxed),
                             &slot);
            }
        }
        if (ok) {
            /* Only now: a table given up below, or a failure to make
             * the next, leaves every record's slot in OLD. */
            slots_set(t);
            t->retired = old;
            atomic_store_explicit(&m->table, t, memory_order_release);
            return GPUARENA_SUCCESS;
        }
        /* Keys piled up past MAX_REACH even at a quarter load: a larger
         * table still (never seen; the hash would have to be pathological).
         * This one was never published, so no reader can hold it. */
        table_free(t);
    }
}

gpuarena_status_t ga_lmap_insert_far(ga_lmap_t *m, ga_block_t *b)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    if (!ga_lmap_room(m, t)) {
        gpuarena_status_t st = grow(m);
        if (st != GPUARENA_SUCCESS)
            return st;
        t = atomic_load_explicit(&m->table, memory_order_relaxed);
    }
    uint32_t slot;
    while (!put(t, b->addr, b, &slot)) {
        gpuarena_status_t st = grow(m);
        if (st != GPUARENA_SUCCESS)
            return st;
        t = atomic_load_explicit(&m->table, memory_order_relaxed);
    }
    b->lslot = slot;
    m->count++;
    return GPUARENA_SUCCESS;
}

void ga_lmap_remove(ga_lmap_t *m, ga_block_t *b)
{
    /* The record says where its key is: no hash, no probe. */
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    ga_lmap_bucket_t *bk = &t->b[b->lslot / WAYS];
    unsigned k = b->lslot % WAYS;
    atomic_store_explicit(&bk->key[k], EMPTY, memory_order_release);
    atomic_store_explicit(&bk->val[k], NULL, memory_order_relaxed);
    m->count--;
}

/* For ga_bm_check (the lock held): every key in the table is within its
 * home bucket's reach and names a live record at that address, which
 * knows where its key is, and the table holds as many keys as the count
 * says. */
bool ga_lmap_valid(ga_lmap_t *m, uintptr_t *bad)
{
    ga_lmap_table_t *t = atomic_load_explicit(&m->table, memory_order_relaxed);
    size_t keys = 0;
    *bad = 0;
    for (size_t i = 0; i <= t->mask; i++) {
        for (unsigned k = 0; k < WAYS; k++) {
            uintptr_t key = atomic_load_explicit(&t->b[i].key[k], memory_order_relaxed);
            if (key == EMPTY)
                continue;
            ga_block_t *b = atomic_load_explicit(&t->b[i].val[k], memory_order_relaxed);
            size_t h = ga_lmap_hash(key, t->mask);
            size_t d = (i - h) & t->mask;
            keys++;
            if (!b || b->addr != key || b->state != BLOCK_LIVE || ga_lmap_find(m, key) != b ||
                b->lslot != i * WAYS + k ||
                d > atomic_load_explicit(&t->reach[h], memory_order_relaxed)) {
                *bad = key;
                return false;
            }
        }
    }
    return keys == m->count;
}
