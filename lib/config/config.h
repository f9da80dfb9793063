/*
 * config.h - the configuration room: gpuarena.conf(5), GPUARENA_OPTIONS and
 * option strings, read into typed ga_settings_t.  Nothing here touches
 * CUDA.  Messages for failures go to gpuarena_last_error() in the form
 * "FILE:LINE: key 'SECTION.KEY': WHAT (did you mean 'KEY'?)".
 *
 * Three layers:
 *   - the key table (keys.c): one entry per field of ga_settings_t, from
 *     which parsing, validation, printing, gpuarena-config and the test
 *     against gpuarena.conf(5) all work;
 *   - a parsed configuration, ga_conf_t (config.c): values and the origin
 *     of each, per arena kind and per device section; built from a file, a
 *     buffer and GPUARENA_OPTIONS-style strings, and freed by its owner;
 *   - the process's configuration (ga_config_*): read once, thread-safely,
 *     by the search order of gpuarena.conf(5); a failure is sticky.
 */
#ifndef GA_CONFIG_H
#define GA_CONFIG_H

#include "config/parse.h"
#include "config/settings.h"
#include "gpuarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Devices that may have their own section: [device.0] to [device.63]. */
#define GA_CONFIG_MAX_DEVICES 64

/* The most keys the table may hold (sections store one origin per key). */
#define GA_CONFIG_MAX_KEYS 48

/* Longest line of a config file, in characters. */
#define GA_CONFIG_MAX_LINE 190

/* Largest config file read, in bytes. */
#define GA_CONFIG_MAX_FILE (1 << 20)

/* ------------------------------------------------------------------ keys */

typedef enum ga_key_type {
    GA_KEY_SIZE = 0,     /* bytes with K/M/G/T suffixes, or a special word */
    GA_KEY_BOOL = 1,     /* true/false */
    GA_KEY_UINT = 2,     /* unsigned integer */
    GA_KEY_FRACTION = 3, /* 0 to 1, as 0.8 */
    GA_KEY_ENUM = 4,     /* one word of a list */
    GA_KEY_NUMA = 5      /* a NUMA policy and node list */
} ga_key_type_t;

/* Flags of a key's range. */
#define GA_KEY_POW2    0x1u /* the value is a power of two ... */
#define GA_KEY_ZERO_OK 0x2u /* ... or 0 */

/* Bit of KIND in ga_key_t.kinds. */
#define GA_KIND_BIT(kind) (1u << (unsigned)(kind))
#define GA_KINDS_ALL      ((1u << GPUARENA_KIND_COUNT) - 1)

typedef struct ga_key {
    const char *name;
    ga_key_type_t type;
    unsigned kinds;         /* GA_KIND_BIT of the kinds whose sections take it */
    size_t offset, length;  /* the bytes of ga_settings_t the key owns */
    uint64_t min, max;      /* range of sizes and integers */
    unsigned flags;         /* GA_KEY_POW2, GA_KEY_ZERO_OK */
    const ga_word_t *words; /* enum values; for sizes, special words */
    const char *range;      /* the accepted values, in words */
    const char *help;       /* one line */
} ga_key_t;

/* The key table, in the order of gpuarena.conf(5). */
size_t ga_config_key_count(void);
const ga_key_t *ga_config_key(size_t index);

/* The key named NAME (exact), or NULL. */
const ga_key_t *ga_config_find_key(const char *name);

/* Index of K in the table. */
size_t ga_config_key_index(const ga_key_t *k);

/* Whether KIND's sections take the key. */
bool ga_key_applies(const ga_key_t *k, gpuarena_kind_t kind);

/* "size", "boolean", ... */
const char *ga_key_type_name(ga_key_type_t type);

/* Parse TEXT as K's value into S.  On failure returns GA_PARSE_SYNTAX or
 * GA_PARSE_RANGE, leaves S unchanged and writes what was expected into
 * WHY ("expected a power of two from 1 to 1G"). */
int ga_key_parse(const ga_key_t *k, const char *text, ga_settings_t *s, char *why, size_t why_size);

/* K's value in S as text that ga_key_parse() reads back. */
void ga_key_format(const ga_key_t *k, const ga_settings_t *s, char *buf, size_t size);

/* Copy K's value from SRC to DST. */
void ga_key_copy(const ga_key_t *k, ga_settings_t *dst, const ga_settings_t *src);

/* Rules between keys: A <= B for (round, small_max), (small_max,
 * small_segment), (thread_cache_max, thread_cache_bytes).  Returns true when S
 * keeps them all; else the first rule broken, in *A and *B. */
bool ga_settings_consistent(const ga_settings_t *s, const ga_key_t **a, const ga_key_t **b);
/* Each rule S breaks in turn: the first from rule *NEXT on (0 to begin)
 * in *A and *B, *NEXT past it; false when no more. */
bool ga_settings_broken(const ga_settings_t *s, size_t *next, const ga_key_t **a,
                        const ga_key_t **b);

/* The text for a broken rule A <= B of S, said of BLAME (A or B): "4M is
 * larger than small_segment (2M)" or "1M is smaller than round (2M)". */
void ga_settings_conflict(const ga_settings_t *s, const ga_key_t *blame, const ga_key_t *a,
                          const ga_key_t *b, char *why, size_t why_size);

/* The built-in defaults for KIND. */
void ga_config_defaults(gpuarena_kind_t kind, ga_settings_t *out);

/* Name of a kind as used for config sections: "device", "pinned", ... */
const char *ga_kind_name(gpuarena_kind_t kind);

/* ------------------------------------------------- a parsed configuration */

typedef struct ga_conf ga_conf_t;

/* Where a value came from. */
typedef enum ga_origin_kind {
    GA_ORIGIN_DEFAULT = 0, /* the built-in default */
    GA_ORIGIN_FILE = 1,    /* FILE:LINE */
    GA_ORIGIN_ENV = 2,     /* GPUARENA_OPTIONS */
    GA_ORIGIN_OPTIONS = 3  /* the options of gpuarena_create() */
} ga_origin_kind_t;

/* An empty configuration (every value the default), or NULL without
 * memory. */
ga_conf_t *ga_conf_new(void);
void ga_conf_free(ga_conf_t *c);

/* Read the file PATH into C.  Errors (unreadable file, syntax, unknown
 * section or key, bad value) are collected in C; the first is also set as
 * gpuarena_last_error() and GPUARENA_ERR_CONFIG returned. */
gpuarena_status_t ga_conf_load_file(ga_conf_t *c, const char *path);

/* The same for the LEN bytes at BUF, named NAME in messages.  BUF needs no
 * terminating NUL; a NUL inside it is an error. */
gpuarena_status_t ga_config_parse_buffer(ga_conf_t *c, const char *name, const char *buf,
                                         size_t len);

/* Apply "SECTION.KEY=VALUE,..." (the GPUARENA_OPTIONS syntax; SECTION is
 * KIND or KIND.DEVICE) to C, named ORIGIN (a string that outlives C) in
 * messages and origins. */
gpuarena_status_t ga_conf_apply_options(ga_conf_t *c, const char *text, const char *origin);

/* Check every section's effective settings with ga_settings_consistent(). */
gpuarena_status_t ga_conf_check(ga_conf_t *c);

/* The messages collected in C, first to last. */
size_t ga_conf_error_count(const ga_conf_t *c);
const char *ga_conf_error(const ga_conf_t *c, size_t index);

/* All the errors found, including those past the kept messages. */
size_t ga_conf_total_errors(const ga_conf_t *c);

/* The file C was read from and how it was found ("GPUARENA_CONF", ...),
 * or NULL when none was read; the paths looked at when none was found. */
const char *ga_conf_file(const ga_conf_t *c);
const char *ga_conf_file_source(const ga_conf_t *c);
const char *ga_conf_searched(const ga_conf_t *c);

/* Whether C has a section [KIND.DEVICE]. */
bool ga_conf_has_device(const ga_conf_t *c, gpuarena_kind_t kind, int device);

/* The settings of an arena of KIND on DEVICE (-1: the kind's section only). */
void ga_conf_settings(const ga_conf_t *c, gpuarena_kind_t kind, int device, ga_settings_t *out);

/* Key K's effective value for (KIND, DEVICE) as text, and where it came
 * from: "default", "FILE:LINE", "GPUARENA_OPTIONS". */
void ga_conf_value(const ga_conf_t *c, gpuarena_kind_t kind, int device, const ga_key_t *k,
                   char *value, size_t value_size, char *origin, size_t origin_size);

/* Whether key K's effective value for (KIND, DEVICE) was set in the
 * section [KIND.DEVICE] itself (else the kind's, or a default): its name
 * in messages is then KIND.DEVICE.KEY. */
bool ga_conf_value_in_device(const ga_conf_t *c, gpuarena_kind_t kind, int device,
                             const ga_key_t *k);

/* ------------------------------------------- the process's configuration */

/* Read the configuration once, thread-safely: the file PATH if not NULL,
 * else the search order of gpuarena.conf(5), then GPUARENA_OPTIONS.  A
 * failure is sticky: every later call returns it with its message (not
 * a lack of host memory, GPUARENA_ERR_HOST_MEMORY: read again then).  A
 * second call with PATH NULL or the same path returns the status of the
 * first; with another path it returns GPUARENA_ERR_CONFIG and changes
 * nothing. */
gpuarena_status_t ga_config_init(const char *path);

/* The settings in effect for an arena of KIND on DEVICE (-1: no device),
 * reading the configuration first if nobody has. */
gpuarena_status_t ga_config_settings(gpuarena_kind_t kind, int device, ga_settings_t *out);

/* The configuration in effect (reading it first if nobody has), or NULL
 * when reading it failed (see gpuarena_last_error()). */
const ga_conf_t *ga_config_current(void);

/* Apply OPTIONS, "key=value,key=value" with keys of KIND's section and no
 * section prefix, to S.  ORIGIN names the source in messages.  S is left
 * unchanged on error. */
gpuarena_status_t ga_config_apply(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                  const char *origin);
/* The same; NAMED (GA_CONFIG_MAX_KEYS entries, indexed as the key table)
 * gets which keys of KIND OPTIONS named, on error too (whatever their
 * values). */
gpuarena_status_t ga_config_apply_named(ga_settings_t *s, gpuarena_kind_t kind, const char *options,
                                        const char *origin, bool *named);

/* fork(2) (lib/fork.c): the configuration's lock held across it. */
void ga_config_fork_lock(void);
void ga_config_fork_unlock(void);

/* Forget the configuration read (tests only: not safe while other threads
 * use the library). */
void ga_config_reset(void);

#endif /* GA_CONFIG_H */
