/*
 * keys.c - the one table of configuration keys: name, type, the kinds that
 * take it, range, help; plus the built-in defaults and the parsing and
 * printing of one key's value.  Adding a field to ga_settings_t means
 * adding its row here and its entry in gpuarena.conf(5); `make check`
 * compares the two.
 */
#include <config.h>

#include "config/config.h"
#include "config/suggest.h"

#include <stdio.h>
#include <string.h>

#define FIELD(f)  offsetof(ga_settings_t, f), sizeof(((ga_settings_t *)0)->f)
#define K_DEVICE  GA_KIND_BIT(GPUARENA_DEVICE)
#define K_PINNED  GA_KIND_BIT(GPUARENA_PINNED)
#define K_MANAGED GA_KIND_BIT(GPUARENA_MANAGED)
#define K_HOST    GA_KIND_BIT(GPUARENA_HOST)
#define K_SIM     GA_KIND_BIT(GPUARENA_SIM)
#define KI        (1ULL << 10)
#define MI        (1ULL << 20)
#define GI        (1ULL << 30)
#define TI        (1ULL << 40)

/* Enum fields are stored through an int of the same size. */
_Static_assert(sizeof(ga_cross_stream_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ga_prefetch_policy_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ga_pool_kind_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ga_numa_policy_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ga_advise_location_t) == sizeof(int), "enum size");
_Static_assert(sizeof(ga_advise_accessors_t) == sizeof(int), "enum size");

static const ga_word_t no_limit_zero[] = {{"none", 0}, {NULL, 0}};
static const ga_word_t no_limit_max[] = {{"none", SIZE_MAX}, {NULL, 0}};
static const ga_word_t keep_all[] = {{"max", SIZE_MAX}, {NULL, 0}};
static const ga_word_t granule_auto[] = {{"auto", 0}, {NULL, 0}};
static const ga_word_t cross_words[] = {
    {"event", GA_CROSS_EVENT}, {"wait", GA_CROSS_WAIT}, {"never", GA_CROSS_NEVER}, {NULL, 0}};
static const ga_word_t pool_words[] = {
    {"arena", GA_POOL_ARENA}, {"driver", GA_POOL_DRIVER}, {NULL, 0}};
static const ga_word_t prefetch_words[] = {
    {"none", GA_PREFETCH_NONE}, {"on-alloc", GA_PREFETCH_ON_ALLOC}, {NULL, 0}};

static const ga_word_t location_words[] = {{"none", GA_ADVISE_NONE},
                                           {"device", GA_ADVISE_DEVICE},
                                           {"cpu", GA_ADVISE_CPU},
                                           {"node:0", GA_ADVISE_NODE0 + 0},
                                           {"node:1", GA_ADVISE_NODE0 + 1},
                                           {"node:2", GA_ADVISE_NODE0 + 2},
                                           {"node:3", GA_ADVISE_NODE0 + 3},
                                           {"node:4", GA_ADVISE_NODE0 + 4},
                                           {"node:5", GA_ADVISE_NODE0 + 5},
                                           {"node:6", GA_ADVISE_NODE0 + 6},
                                           {"node:7", GA_ADVISE_NODE0 + 7},
                                           {"node:8", GA_ADVISE_NODE0 + 8},
                                           {"node:9", GA_ADVISE_NODE0 + 9},
                                           {"node:10", GA_ADVISE_NODE0 + 10},
                                           {"node:11", GA_ADVISE_NODE0 + 11},
                                           {"node:12", GA_ADVISE_NODE0 + 12},
                                           {"node:13", GA_ADVISE_NODE0 + 13},
                                           {"node:14", GA_ADVISE_NODE0 + 14},
                                           {"node:15", GA_ADVISE_NODE0 + 15},
                                           {"node:16", GA_ADVISE_NODE0 + 16},
                                           {"node:17", GA_ADVISE_NODE0 + 17},
                                           {"node:18", GA_ADVISE_NODE0 + 18},
                                           {"node:19", GA_ADVISE_NODE0 + 19},
                                           {"node:20", GA_ADVISE_NODE0 + 20},
                                           {"node:21", GA_ADVISE_NODE0 + 21},
                                           {"node:22", GA_ADVISE_NODE0 + 22},
                                           {"node:23", GA_ADVISE_NODE0 + 23},
                                           {"node:24", GA_ADVISE_NODE0 + 24},
                                           {"node:25", GA_ADVISE_NODE0 + 25},
                                           {"node:26", GA_ADVISE_NODE0 + 26},
                                           {"node:27", GA_ADVISE_NODE0 + 27},
                                           {"node:28", GA_ADVISE_NODE0 + 28},
                                           {"node:29", GA_ADVISE_NODE0 + 29},
                                           {"node:30", GA_ADVISE_NODE0 + 30},
                                           {"node:31", GA_ADVISE_NODE0 + 31},
                                           {"node:32", GA_ADVISE_NODE0 + 32},
                                           {"node:33", GA_ADVISE_NODE0 + 33},
                                           {"node:34", GA_ADVISE_NODE0 + 34},
                                           {"node:35", GA_ADVISE_NODE0 + 35},
                                           {"node:36", GA_ADVISE_NODE0 + 36},
                                           {"node:37", GA_ADVISE_NODE0 + 37},
                                           {"node:38", GA_ADVISE_NODE0 + 38},
                                           {"node:39", GA_ADVISE_NODE0 + 39},
                                           {"node:40", GA_ADVISE_NODE0 + 40},
                                           {"node:41", GA_ADVISE_NODE0 + 41},
                                           {"node:42", GA_ADVISE_NODE0 + 42},
                                           {"node:43", GA_ADVISE_NODE0 + 43},
                                           {"node:44", GA_ADVISE_NODE0 + 44},
                                           {"node:45", GA_ADVISE_NODE0 + 45},
                                           {"node:46", GA_ADVISE_NODE0 + 46},
                                           {"node:47", GA_ADVISE_NODE0 + 47},
                                           {"node:48", GA_ADVISE_NODE0 + 48},
                                           {"node:49", GA_ADVISE_NODE0 + 49},
                                           {"node:50", GA_ADVISE_NODE0 + 50},
                                           {"node:51", GA_ADVISE_NODE0 + 51},
                                           {"node:52", GA_ADVISE_NODE0 + 52},
                                           {"node:53", GA_ADVISE_NODE0 + 53},
                                           {"node:54", GA_ADVISE_NODE0 + 54},
                                           {"node:55", GA_ADVISE_NODE0 + 55},
                                           {"node:56", GA_ADVISE_NODE0 + 56},
                                           {"node:57", GA_ADVISE_NODE0 + 57},
                                           {"node:58", GA_ADVISE_NODE0 + 58},
                                           {"node:59", GA_ADVISE_NODE0 + 59},
                                           {"node:60", GA_ADVISE_NODE0 + 60},
                                           {"node:61", GA_ADVISE_NODE0 + 61},
                                           {"node:62", GA_ADVISE_NODE0 + 62},
                                           {"node:63", GA_ADVISE_NODE0 + 63},
                                           {NULL, 0}};
static const ga_word_t accessor_words[] = {
    {"none", GA_ACCESS_NONE},       {"device", GA_ACCESS_DEVICE},   {"cpu", GA_ACCESS_CPU},
    {"device,cpu", GA_ACCESS_BOTH}, {"cpu,device", GA_ACCESS_BOTH}, {NULL, 0}};

/* numa owns three fields: the policy, the count and the nodes. */
#define NUMA_FIELDS                                                                                \
    offsetof(ga_settings_t, numa), offsetof(ga_settings_t, numa_nodes) +                           \
                                       sizeof(((ga_settings_t *)0)->numa_nodes) -                  \
                                       offsetof(ga_settings_t, numa)

static const ga_key_t keys[] = {
    {"round", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(round), 1, GI, GA_KEY_POW2, NULL,
     "a power of two from 1 to 1G", "granularity to which every request is rounded up"},
    {"small_max", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(small_max), 1, GI, 0, NULL,
     "a size from 1 to 1G, at least round and at most small_segment",
     "requests up to this size come from the small pool"},
    {"small_segment", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(small_segment), 4 * KI, TI, 0, NULL,
     "a size from 4K to 1T", "size of each segment of the small pool"},
    {"large_segment", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(large_segment), 4 * KI, TI, 0, NULL,
     "a size from 4K to 1T", "smallest segment mapped for the large pool"},
    {"max_split", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(max_split), 0, SIZE_MAX, 0, no_limit_zero,
     "none or a size", "free blocks larger than this are never split (none: split any)"},
    {"expandable", GA_KEY_BOOL, GA_KINDS_ALL, FIELD(expandable), 0, 1, 0, NULL, "true or false",
     "grow segments in place where the provider can (virtual memory)"},
    {"granule", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(granule), 4 * KI, TI, GA_KEY_POW2 | GA_KEY_ZERO_OK,
     granule_auto, "auto, 0 or a power of two from 4K to 1T",
     "step by which growable segments grow (auto: the provider's)"},
    {"release_threshold", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(release_threshold), 0, SIZE_MAX, 0,
     keep_all, "max or a size",
     "cached bytes kept before fixed segments are released to map new ones"},
    {"max_cached", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(max_cached), 0, SIZE_MAX, 0, no_limit_max,
     "none or a size", "cap on the bytes held in free blocks (none: no cap)"},
    {"max_reserved", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(max_reserved), 0, SIZE_MAX, 0, no_limit_max,
     "none or a size", "cap on the bytes taken from the provider, in use or cached (none: no cap)"},
    {"zero", GA_KEY_BOOL, GA_KINDS_ALL, FIELD(zero), 0, 1, 0, NULL, "true or false",
     "fill every allocation with zeros"},
    {"cross_stream", GA_KEY_ENUM, GA_KINDS_ALL, FIELD(cross_stream), 0, 0, 0, cross_words,
     "event, wait or never", "how a block freed on one stream is reused on another"},
    {"thread_cache", GA_KEY_BOOL, GA_KINDS_ALL, FIELD(thread_cache), 0, 1, 0, NULL, "true or false",
     "keep per-thread caches of freed blocks"},
    {"thread_cache_max", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(thread_cache_max), 0, GI, 0, NULL,
     "a size from 0 to 1G, at most thread_cache_bytes", "largest block a thread cache holds"},
    {"thread_cache_bytes", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(thread_cache_bytes), 0, SIZE_MAX, 0,
     NULL, "a size, at least thread_cache_max",
     "bytes one thread's cache of one stream holds at most"},
    {"thread_cache_large", GA_KEY_SIZE, GA_KINDS_ALL, FIELD(thread_cache_large), 0, SIZE_MAX, 0,
     NULL, "a size (0: none)",
     "largest block a thread cache holds one of (a block above thread_cache_max, or one its "
     "slots have no room for), until the thread's next allocation or free that takes the "
     "arena's lock"},
    {"thread_cache_count", GA_KEY_UINT, GA_KINDS_ALL, FIELD(thread_cache_count), 1,
     GA_THREAD_CACHE_COUNT_MAX, 0, NULL, "an integer from 1 to 32",
     "blocks per size class a thread cache holds"},
    {"size_classes", GA_KEY_UINT, GA_KINDS_ALL, FIELD(size_classes), 1, 16,
     GA_KEY_POW2 | GA_KEY_ZERO_OK, NULL, "0 or a power of two from 1 to 16",
     "sizes per power of two to which requests of at most thread_cache_max are rounded up, so "
     "that a cached block serves every request of its size class (0: round only to round)"},
    {"sim_event_delay", GA_KEY_UINT, K_SIM, FIELD(sim_event_delay), 0, 1000000, 0, NULL,
     "an integer from 0 to 1000000", "provider operations before a simulated event completes"},
    {"sim_capacity", GA_KEY_SIZE, K_SIM, FIELD(sim_capacity), 0, SIZE_MAX, 0, no_limit_zero,
     "none or a size", "bytes the simulated provider can map (none: no limit)"},
    {"numa", GA_KEY_NUMA, K_PINNED | K_HOST, NUMA_FIELDS, 0, 0, 0, NULL,
     "nearest, local, interleave, interleave:LIST or LIST (node numbers 0 to 63, as 0,2-3)",
     "NUMA nodes that back host memory"},
    {"prefault_threads", GA_KEY_UINT, K_PINNED, FIELD(prefault_threads), 0, 256, 0, NULL,
     "an integer from 0 to 256 (0: one per 256M of the segment, at most 16)",
     "threads that touch the pages of a new pinned segment before it is registered"},
    {"peer_access", GA_KEY_BOOL, K_DEVICE, FIELD(peer_access), 0, 1, 0, NULL, "true or false",
     "give the other GPUs access to this device's memory"},
    {"ipc", GA_KEY_BOOL, K_DEVICE, FIELD(ipc), 0, 1, 0, NULL, "true or false",
     "make growable segments exportable to other processes as POSIX file descriptors "
     "(CUDA-aware MPI)"},
    {"pool", GA_KEY_ENUM, K_DEVICE, FIELD(pool), 0, 0, 0, pool_words, "arena or driver",
     "where blocks come from: the arena's own segments, or the driver's stream-ordered pool "
     "(cuMemPool)"},
    {"cupy_capture_check", GA_KEY_BOOL, K_DEVICE | K_MANAGED, FIELD(cupy_capture_check), 0, 1, 0,
     NULL, "true or false",
     "gpuarena_cupy_malloc asks CuPy for its current stream and refuses while that stream is "
     "being captured into a CUDA graph"},
    {"prefetch", GA_KEY_ENUM, K_MANAGED, FIELD(prefetch), 0, 0, 0, prefetch_words,
     "none or on-alloc", "prefetch managed memory to the device when it is allocated"},
    {"prefetch_headroom", GA_KEY_SIZE, K_MANAGED, FIELD(prefetch_headroom), 0, SIZE_MAX, 0, NULL,
     "a size", "device memory left free by prefetches"},
    {"prefetch_chunk", GA_KEY_SIZE, K_MANAGED, FIELD(prefetch_chunk), 2 * MI, TI, 0, NULL,
     "a size from 2M to 1T", "largest piece a prefetch is issued in"},
    {"advise_preferred", GA_KEY_ENUM, K_MANAGED, FIELD(advise_preferred), 0, 0, 0, location_words,
     "none, device, cpu or node:N (a host NUMA node, N from 0 to 63)",
     "preferred location advised for new managed segments"},
    {"advise_accessed_by", GA_KEY_ENUM, K_MANAGED, FIELD(advise_accessed_by), 0, 0, 0,
     accessor_words, "none, device, cpu or device,cpu",
     "processors advised to access new managed segments without faults"},
    {"read_mostly", GA_KEY_BOOL, K_MANAGED, FIELD(read_mostly), 0, 1, 0, NULL, "true or false",
     "advise new managed segments as read-mostly (the driver copies pages on read)"},
};

_Static_assert(sizeof keys / sizeof keys[0] <= GA_CONFIG_MAX_KEYS, "raise GA_CONFIG_MAX_KEYS");

static const char *const kind_names[GPUARENA_KIND_COUNT] = {"device", "pinned", "managed", "host",
                                                            "sim"};

const char *ga_kind_name(gpuarena_kind_t kind)
{
    return (unsigned)kind < GPUARENA_KIND_COUNT ? kind_names[kind] : "?";
}

void ga_config_defaults(gpuarena_kind_t kind, ga_settings_t *s)
{
    memset(s, 0, sizeof *s);
    s->round = 512;
    s->small_max = 1 << 20;
    s->small_segment = 2 << 20;
    s->large_segment = 20 << 20;
    s->max_split = 0;
    /* Pinned memory pins faster through cuMemHostRegister than through
     * cuMemCreate HOST_NUMA (pinned.c): fixed segments unless asked. */
    s->expandable = kind != GPUARENA_PINNED;
    s->granule = 0;
    s->release_threshold = 0;
    s->max_cached = SIZE_MAX;
    s->max_reserved = SIZE_MAX;
    s->cross_stream = GA_CROSS_EVENT;
    s->thread_cache = true;
    /* Pinned staging buffers are reused whole at their sizes, and the
     * replayed traces that bound the other kinds' caches (fragmentation)
     * are not theirs: pinned threads cache up to 16 MiB blocks. */
    s->thread_cache_max = kind == GPUARENA_PINNED ? (size_t)16 << 20 : (size_t)1 << 20;
    /* With size classes a random mix of sizes keeps hitting while the
     * budget lasts, and a cache gives its blocks back before the arena
     * maps memory for its thread (block.c, alloc_miss): 16 blocks of a
     * class and 16M (bench_churn: 67 against 76 ns a pair with 8 and 4M,
     * the shipped traces' replays reserving the same). */
    s->thread_cache_bytes = kind == GPUARENA_PINNED ? (size_t)32 << 20 : (size_t)16 << 20;
    s->thread_cache_large = (size_t)64 << 20;
    s->thread_cache_count = kind == GPUARENA_PINNED ? 8 : 16;
    /* Pinned staging buffers come back at the sizes they were asked for,
     * and rounding would pin host memory that nothing uses. */
    s->size_classes = kind == GPUARENA_PINNED ? 0 : 4;
    s->sim_event_delay = 4;
    s->numa = kind == GPUARENA_PINNED ? GA_NUMA_NEAREST : GA_NUMA_LOCAL;
    s->pool = GA_POOL_ARENA;
    s->ipc = kind == GPUARENA_DEVICE;
    /* Growable segments and the driver's pool are mapped for their own
     * device only unless access is given: another GPU could not even copy
     * from them (gpuarena.conf(5), peer_access), which cuMemAlloc memory
     * never refuses. */
    s->peer_access = kind == GPUARENA_DEVICE;
    s->cupy_capture_check = kind == GPUARENA_DEVICE || kind == GPUARENA_MANAGED;
    s->prefetch = GA_PREFETCH_NONE;
    s->prefetch_headroom = 256 << 20;
    s->prefetch_chunk = (size_t)2 << 30;
    s->prefault_threads = 0;
    s->advise_preferred = GA_ADVISE_NONE;
    s->advise_accessed_by = GA_ACCESS_NONE;
    s->read_mostly = false;
}

size_t ga_config_key_count(void)
{
    return sizeof keys / sizeof keys[0];
}

const ga_key_t *ga_config_key(size_t index)
{
    return index < ga_config_key_count() ? &keys[index] : NULL;
}

const ga_key_t *ga_config_find_key(const char *name)
{
    for (size_t i = 0; i < ga_config_key_count(); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

size_t ga_config_key_index(const ga_key_t *k)
{
    return (size_t)(k - keys);
}

bool ga_key_applies(const ga_key_t *k, gpuarena_kind_t kind)
{
    return (unsigned)kind < GPUARENA_KIND_COUNT && (k->kinds & GA_KIND_BIT(kind));
}

const char *ga_key_type_name(ga_key_type_t type)
{
    switch (type) {
    case GA_KEY_SIZE:
        return "size";
    case GA_KEY_BOOL:
        return "boolean";
    case GA_KEY_UINT:
        return "integer";
    case GA_KEY_FRACTION:
        return "fraction";
    case GA_KEY_ENUM:
        return "word";
    case GA_KEY_NUMA:
        return "NUMA policy";
    }
    return "?";
}

static void *field(const ga_key_t *k, ga_settings_t *s)
{
    return (char *)s + k->offset;
}

static const void *cfield(const ga_key_t *k, const ga_settings_t *s)
{
    return (const char *)s + k->offset;
}

static bool in_range(const ga_key_t *k, uint64_t v)
{
    if (v == 0 && (k->flags & GA_KEY_ZERO_OK))
        return true;
    if (v < k->min || v > k->max)
        return false;
    return !(k->flags & GA_KEY_POW2) || (v & (v - 1)) == 0;
}

/* "expected RANGE", plus "(did you mean 'WORD'?)" for a near miss. */
static void expected(const ga_key_t *k, const char *text, char *why, size_t n)
{
    const char *names[16];
    size_t count = 0;
    for (const ga_word_t *w = k->words; w && w->word && count < 16; w++)
        names[count++] = w->word;
    if (k->type == GA_KEY_BOOL) {
        static const char *const b[] = {"true", "false"};
        names[count++] = b[0];
        names[count++] = b[1];
    }
    if (k->type == GA_KEY_NUMA) {
        static const char *const p[] = {"nearest", "local", "interleave"};
        for (int i = 0; i < 3; i++)
            names[count++] = p[i];
    }
    const char *guess = ga_suggest(text, names, count);
    if (guess)
        snprintf(why, n, "expected %s (did you mean '%s'?)", k->range, guess);
    else
        snprintf(why, n, "expected %s", k->range);
}

int ga_key_parse(const ga_key_t *k, const char *text, ga_settings_t *s, char *why, size_t why_size)
{
    uint64_t v = 0;
    int r;
    bool too_large = false; /* past what the type holds, not just the key's range */
    switch (k->type) {
    case GA_KEY_SIZE:
        if (ga_parse_word(text, k->words, &v) == GA_PARSE_OK) {
            size_t z = (size_t)v;
            memcpy(field(k, s), &z, sizeof z);
            return GA_PARSE_OK;
        }
        r = ga_parse_size(text, &v);
        too_large = r == GA_PARSE_RANGE;
        if (r == GA_PARSE_OK && !in_range(k, v))
            r = GA_PARSE_RANGE;
        if (r == GA_PARSE_OK) {
            size_t z = (size_t)v;
            memcpy(field(k, s), &z, sizeof z);
        }
        break;
    case GA_KEY_UINT:
        r = ga_parse_uint(text, k->max, &v);
        too_large = r == GA_PARSE_RANGE;
        if (r == GA_PARSE_OK && !in_range(k, v))
            r = GA_PARSE_RANGE;
        if (r == GA_PARSE_OK) {
            unsigned u = (unsigned)v;
            memcpy(field(k, s), &u, sizeof u);
        }
        break;
    case GA_KEY_BOOL: {
        bool b;
        r = ga_parse_bool(text, &b);
        if (r == GA_PARSE_OK)
            memcpy(field(k, s), &b, sizeof b);
        break;
    }
    case GA_KEY_FRACTION: {
        double d;
        r = ga_parse_fraction(text, &d);
        if (r == GA_PARSE_OK)
            memcpy(field(k, s), &d, sizeof d);
        break;
    }
    case GA_KEY_ENUM:
        r = ga_parse_word(text, k->words, &v);
        if (r == GA_PARSE_OK) {
            int e = (int)v;
            memcpy(field(k, s), &e, sizeof e);
        }
        break;
    case GA_KEY_NUMA: {
        char detail[96];
        r = ga_parse_numa(text, &s->numa, s->numa_nodes, &s->numa_count, detail, sizeof detail);
        if (r != GA_PARSE_OK) {
            char exp[200];
            expected(k, text, exp, sizeof exp);
            /* No policy and no list: the key's expectation says it all. */
            if (strcmp(detail, GA_NUMA_EXPECTED) == 0)
                snprintf(why, why_size, "%s", exp);
            else
                snprintf(why, why_size, "%s; %s", detail, exp);
        }
        return r;
    }
    default:
        r = GA_PARSE_SYNTAX;
        break;
    }
    if (r != GA_PARSE_OK) {
        char exp[200];
        expected(k, text, exp, sizeof exp);
        /* A number too large for any value (99999999999999999999, 20E):
         * the key's range alone read as if it were no number at all. */
        snprintf(why, why_size, "%s%s", too_large ? "too large: " : "", exp);
    }
    return r;
}

void ga_key_format(const ga_key_t *k, const ga_settings_t *s, char *buf, size_t size)
{
    switch (k->type) {
    case GA_KEY_SIZE: {
        size_t z;
        memcpy(&z, cfield(k, s), sizeof z);
        for (const ga_word_t *w = k->words; w && w->word; w++) {
            if (w->value == (uint64_t)z) {
                snprintf(buf, size, "%s", w->word);
                return;
            }
        }
        ga_format_size(z, buf, size);
        return;
    }
    case GA_KEY_UINT: {
        unsigned u;
        memcpy(&u, cfield(k, s), sizeof u);
        snprintf(buf, size, "%u", u);
        return;
    }
    case GA_KEY_BOOL: {
        bool b;
        memcpy(&b, cfield(k, s), sizeof b);
        snprintf(buf, size, "%s", b ? "true" : "false");
        return;
    }
    case GA_KEY_FRACTION: {
        double d;
        memcpy(&d, cfield(k, s), sizeof d);
        snprintf(buf, size, "%g", d);
        return;
    }
    case GA_KEY_ENUM: {
        int e;
        memcpy(&e, cfield(k, s), sizeof e);
        for (const ga_word_t *w = k->words; w && w->word; w++) {
            if (w->value == (uint64_t)e) {
                snprintf(buf, size, "%s", w->word);
                return;
            }
        }
        snprintf(buf, size, "%d", e);
        return;
    }
    case GA_KEY_NUMA:
        ga_format_numa(s->numa, s->numa_nodes, s->numa_count, buf, size);
        return;
    }
    snprintf(buf, size, "?");
}

void ga_key_copy(const ga_key_t *k, ga_settings_t *dst, const ga_settings_t *src)
{
    memcpy(field(k, dst), cfield(k, src), k->length);
}

static size_t size_value(const ga_key_t *k, const ga_settings_t *s)
{
    size_t z;
    memcpy(&z, cfield(k, s), sizeof z);
    return z;
}

bool ga_settings_broken(const ga_settings_t *s, size_t *next, const ga_key_t **a,
                        const ga_key_t **b)
{
    static const char *const rules[][2] = {{"round", "small_max"},
                                           {"small_max", "small_segment"},
                                           {"thread_cache_max", "thread_cache_bytes"}};
    for (size_t i = *next; i < sizeof rules / sizeof rules[0]; i++) {
        const ga_key_t *ka = ga_config_find_key(rules[i][0]);
        const ga_key_t *kb = ga_config_find_key(rules[i][1]);
        if (size_value(ka, s) > size_value(kb, s)) {
            *a = ka;
            *b = kb;
            *next = i + 1;
            return true;
        }
    }
    return false;
}

bool ga_settings_consistent(const ga_settings_t *s, const ga_key_t **a, const ga_key_t **b)
{
    size_t next = 0;
    return !ga_settings_broken(s, &next, a, b);
}

void ga_settings_conflict(const ga_settings_t *s, const ga_key_t *blame, const ga_key_t *a,
                          const ga_key_t *b, char *why, size_t why_size)
{
    char va[32], vb[32];
    ga_key_format(a, s, va, sizeof va);
    ga_key_format(b, s, vb, sizeof vb);
    if (blame == a)
        snprintf(why, why_size, "%s is larger than %s (%s)", va, b->name, vb);
    else
        snprintf(why, why_size, "%s is smaller than %s (%s)", vb, a->name, va);
}
