/*
 * fit.h - the free-block index of a pool: a two-level segregated fit.
 *
 * Sizes map to a list by their power of two (first level) and the next
 * FIT_SL_BITS bits below it (second level), so each list holds blocks
 * within 1/16 of each other.  Two bitmaps say which lists are non-empty, so
 * finding a list with blocks large enough is two bit scans, whatever the
 * number of free blocks.  Within the request's own list (where blocks may
 * be smaller than the request) and the first larger list, a few entries
 * are compared for the best fit: this keeps the fragmentation of a
 * best-fit allocator at the cost of a bounded scan.
 *
 * Every function is inline: each free and each allocation on the locked
 * path inserts, removes and searches several times, and calls into
 * another file cost more than the list operations themselves.
 *
 * The lists are doubly linked through a back link to whatever points at
 * the block (the list head or the previous block's fnext), and neither
 * insert nor remove branches: whether a list was empty, or a block the
 * last, is as random as the sizes (cachegrind counted 1.5 mispredicted
 * branches per free + alloc of random sizes in those tests).  A back
 * link with no block to hold it (the list was empty, or the block was
 * the last) is written to the index's sink.
 */
#ifndef GA_BLOCK_FIT_H
#define GA_BLOCK_FIT_H

/* Included by internal.h once ga_block_t is defined. */

/* First level: the power of two of the size; second level: FIT_SL equal
 * parts of it.  Bitmaps find the next non-empty list in O(1). */
#define FIT_SL_BITS 4
#define FIT_SL      (1u << FIT_SL_BITS)
#define FIT_FL      64

typedef struct ga_fit {
    uint64_t fl_map;
    uint64_t bytes; /* the sizes of the blocks in the index, summed */
    uint32_t sl_map[FIT_FL];
    ga_block_t *heads[FIT_FL][FIT_SL];
    ga_block_t **sink; /* written, never read: see the top of this file */
} ga_fit_t;

/* The list a block of SIZE bytes goes to. */
static inline void ga_fit_index(size_t size, unsigned *fl, unsigned *sl)
{
    if (size < FIT_SL) {
        *fl = 0;
        *sl = (unsigned)size;
        return;
    }
    unsigned f = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    *fl = f - FIT_SL_BITS + 1;
    *sl = (unsigned)(size >> (f - FIT_SL_BITS)) & (FIT_SL - 1);
}

/* Entries compared per list before settling for the best seen. */
#define FIT_SCAN 16

/* Where the back link of N goes: N's own field, or the sink when N is
 * NULL.  A select on an opaque value, not a branch. */
static inline ga_block_t ***ga_fit_link_of(ga_fit_t *f, ga_block_t *n)
{
    uintptr_t own = (uintptr_t)n + offsetof(ga_block_t, fpprev);
    return (ga_block_t ***)ga_select(n != NULL, own, (uintptr_t)&f->sink);
}

/* A block keeps the number of its list (flist), so that its removal
 * need not work it out from the size again: a free and an allocation
 * remove three or four blocks between them. */
static inline void ga_fit_insert(ga_fit_t *f, ga_block_t *b)
{
    unsigned fl, sl;
    ga_fit_index(b->size, &fl, &sl);
    b->flist = fl * FIT_SL + sl;
    f->bytes += b->size;
    ga_block_t **head = &f->heads[fl][sl];
    ga_block_t *h = *head;
    b->fnext = h;
    b->fpprev = head;
    *ga_fit_link_of(f, h) = &b->fnext;
    *head = b;
    f->sl_map[fl] |= 1u << sl;
    f->fl_map |= 1ull << fl;
}

static inline void ga_fit_remove(ga_fit_t *f, ga_block_t *b)
{
    unsigned fl = b->flist / FIT_SL, sl = b->flist % FIT_SL;
    f->bytes -= b->size;
    ga_block_t *n = b->fnext;
    *b->fpprev = n;
    *ga_fit_link_of(f, n) = b->fpprev;
    /* The list's bit goes when it is empty now, the level's when its
     * last list went: both as values. */
    unsigned gone = f->heads[fl][sl] == NULL;
    ga_opaque(&gone);
    uint32_t sm = f->sl_map[fl] & ~(gone << sl);
    f->sl_map[fl] = sm;
    unsigned level_gone = sm == 0;
    ga_opaque(&level_gone);
    f->fl_map &= ~((uint64_t)level_gone << fl);
}

/* Whether the index holds any block. */
static inline bool ga_fit_empty(const ga_fit_t *f)
{
    return f->fl_map == 0;
}

/* Blocks in the index and their bytes, added to *N and *BYTES by a walk
 * of its lists: for statistics only.  No count is kept: every insert and
 * remove would pay for it. */
static inline void ga_fit_tally(const ga_fit_t *f, uint64_t *n, uint64_t *bytes)
{
    for (uint64_t fm = f->fl_map; fm; fm &= fm - 1) {
        unsigned fl = (unsigned)__builtin_ctzll(fm);
        for (uint32_t sm = f->sl_map[fl]; sm; sm &= sm - 1)
            for (const ga_block_t *b = f->heads[fl][__builtin_ctz(sm)]; b; b = b->fnext) {
                ++*n;
                *bytes += b->size;
            }
    }
}

/* Blocks in the index (ga_fit_tally). */
static inline uint64_t ga_fit_count(const ga_fit_t *f)
{
    uint64_t n = 0, bytes = 0;
    ga_fit_tally(f, &n, &bytes);
    return n;
}

/* Smallest block of at least SIZE (and at most LIMIT, when not 0) among
 * the first FIT_SCAN of a list.  Which entry is best so far is as
 * random as the sizes: it is chosen with conditional moves, not
 * branches; only an exact fit ends the scan early. */
static inline ga_block_t *ga_fit_best_in(ga_block_t *b, size_t size, size_t limit)
{
    ga_block_t *best = NULL;
    size_t best_size = SIZE_MAX;
    size_t lim = limit ? limit : SIZE_MAX;
    for (unsigned n = 0; b && n < FIT_SCAN; b = b->fnext, n++) {
        size_t s = b->size;
        bool better = (s >= size) & (s <= lim) & (s < best_size);
        best = better ? b : best;
        best_size = better ? s : best_size;
        if (s == size)
            break;
    }
    return best;
}

/* The search of ga_fit_find in an index that is not empty. */
static inline ga_block_t *ga_fit_search(ga_fit_t *f, size_t size, size_t limit)
{
    unsigned fl, sl;
    ga_fit_index(size, &fl, &sl);
    ga_block_t *b = ga_fit_best_in(f->heads[fl][sl], size, limit);
    if (b)
        return b;
    /* Every block of a higher list is large enough: the next list of
     * this level, else the first of a higher level.  Which one is as
     * random as the sizes: chosen as a value. */
    uint32_t sl_bits = (uint32_t)(f->sl_map[fl] & (~0ull << (sl + 1)));
    uint64_t fl_bits = f->fl_map & (~0ull << fl << 1);
    if (!(sl_bits | fl_bits))
        return NULL;
    unsigned here = sl_bits != 0;
    unsigned up = (unsigned)__builtin_ctzll(fl_bits | 1ull << (FIT_FL - 1));
    fl = (unsigned)ga_select(here, fl, up);
    sl_bits = (uint32_t)ga_select(here, sl_bits, f->sl_map[fl]);
    sl = (unsigned)__builtin_ctz(sl_bits);
    return ga_fit_best_in(f->heads[fl][sl], size, limit);
}

/* The best-fitting block of at least SIZE bytes and at most LIMIT bytes
 * (0: no limit), or NULL.  The test for an empty index stays at the
 * caller's site: an allocation asks two pools, and one is often empty. */
__attribute__((always_inline)) static inline ga_block_t *ga_fit_find(ga_fit_t *f, size_t size,
                                                                     size_t limit)
{
    return ga_fit_empty(f) ? NULL : ga_fit_search(f, size, limit);
}

#endif /* GA_BLOCK_FIT_H */
