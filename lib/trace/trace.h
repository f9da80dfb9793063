/*
 * trace.h - the trace room: reading gpuarena-trace files (gpuarena-trace(5))
 * into compact event arrays for gpuarena-replay, and recording every
 * request of every arena into one when GPUARENA_TRACE is set.
 *
 * The reader accepts version 1 (events of one unnamed arena, taken to be
 * device 0), version 2 (adds "k KIND DEVICE [INSTANCE]" lines that name
 * the arena the following events belong to) and version 3 (adds "-" as the
 * STREAM of an allocation or free: no stream, GPUARENA_STREAM_HOST).  The
 * recorder writes version 3.  The reader splits a file into one event
 * array per arena and remaps the file's allocation ids to dense indexes
 * 0..nids-1 per arena, so that a replay keeps its live pointers in a plain
 * array.  Every error names the file and line through ga_error(); no
 * input makes it crash.
 */
#ifndef GA_TRACE_H
#define GA_TRACE_H

#include "gpuarena.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Reading ---------------------------------------------------------- */

typedef enum ga_trace_op {
    GA_TRACE_ALLOC = 0,  /* a ID SIZE STREAM */
    GA_TRACE_FREE = 1,   /* f ID STREAM */
    GA_TRACE_RECORD = 2, /* r ID STREAM */
} ga_trace_op_t;

/* One event: 24 bytes.  "No stream" is a flag of its own rather than a
 * reserved stream number because versions 1 and 2 allow every number below
 * 2^32 as a stream; it fits in the padding. */
typedef struct ga_trace_event {
    uint64_t size;   /* requested bytes (GA_TRACE_ALLOC), else 0 */
    uint32_t id;     /* dense index of the allocation within its arena */
    uint32_t stream; /* trace stream number: 0 is the legacy default stream */
    uint32_t line;   /* line of the file, for messages */
    uint8_t op;      /* ga_trace_op_t */
    bool no_stream;  /* "-": replay with GPUARENA_STREAM_HOST; stream is 0 */
} ga_trace_event_t;

_Static_assert(sizeof(ga_trace_event_t) == 24, "a trace event stays 24 bytes");

/* The events of one arena of a trace. */
typedef struct ga_trace_arena {
    gpuarena_kind_t kind; /* GPUARENA_DEVICE where the file does not say */
    int device;
    unsigned instance;         /* arenas of one kind and device, in order of use */
    bool declared;             /* named by a "k" line */
    ga_trace_event_t *events;  /* in file order */
    size_t nevents;            /* entries of events */
    size_t cap;                /* allocated entries of events */
    uint32_t nids;             /* allocations (dense ids 0..nids-1) */
    uint32_t nzero;            /* allocations of size 0 */
    uint32_t nfrees, nrecords; /* frees and record_stream events */
    uint64_t nno_stream;       /* allocations and frees with no stream ("-") */
    uint32_t max_stream;       /* largest stream number used ("-" is none) */
    uint64_t peak_requested;   /* peak of the sum of live requested bytes */
    uint64_t live_end;         /* requested bytes still live at the end */
    uint32_t nlive_end;        /* allocations still live at the end */
} ga_trace_arena_t;

typedef struct ga_trace {
    char *name;     /* file name as given (for messages) */
    int version;    /* 1, 2 or 3 */
    size_t narenas; /* entries of arenas, in order of first event */
    ga_trace_arena_t *arenas;
    size_t nevents; /* events of all arenas */
    uint32_t lines; /* lines read */
} ga_trace_t;

/* Highest format version read and written. */
#define GA_TRACE_VERSION 3

/* Arenas one file may name: a program that makes and destroys an arena in
 * a loop records each as an instance of its own.  The reader refuses a
 * file of more; the recorder leaves out the requests of the arenas made
 * past it (ga_trace_max_arenas, which tests lower), so that every file
 * it writes reads back. */
#define GA_TRACE_MAX_ARENAS ((size_t)1 << 24)
extern size_t ga_trace_max_arenas;

/* Parse LEN bytes at BUF (no terminating NUL needed) read from a file
 * called NAME.  On failure *OUT is NULL and gpuarena_last_error() says
 * "NAME:LINE: what".  GPUARENA_ERR_INVALID_ARGUMENT for bad input,
 * GPUARENA_ERR_HOST_MEMORY when memory runs out. */
gpuarena_status_t ga_trace_parse(const char *buf, size_t len, const char *name, ga_trace_t **out);

/* Read and parse the file PATH ("-" is standard input).
 * GPUARENA_ERR_SYSTEM when it cannot be read. */
gpuarena_status_t ga_trace_load(const char *path, ga_trace_t **out);

void ga_trace_free(ga_trace_t *t);

/* "device", "pinned", ...: the names of the "k" line; -1 when unknown. */
int ga_trace_kind_from_name(const char *name, size_t len);

/* ---- Recording (GPUARENA_TRACE) ---------------------------------------- */

/* -1 until the environment has been read, then 0 (off) or 1 (on). */
extern _Atomic int ga_trace_state;

/* Read GPUARENA_TRACE once and open the file; true when recording. */
bool ga_trace_start(void);

/* True when requests must be recorded: one relaxed load once settled. */
static inline bool ga_trace_on(void)
{
    int s = atomic_load_explicit(&ga_trace_state, memory_order_relaxed);
    if (__builtin_expect(s == 0, 1))
        return false;
    return s > 0 || ga_trace_start();
}

/* The hooks of gpuarena.c.  ARENA identifies the arena (its address); KIND
 * and DEVICE are written on its "k" line.
 *   alloc:  after a successful allocation, size 0 (PTR NULL) included;
 *   free:   in two steps around the block manager's free of PTR on
 *           STREAM.  ga_trace_free_begin, BEFORE it, takes PTR out of the
 *           recorder's live blocks, so that another thread that is handed
 *           PTR again at once records a new block; it returns PTR's id,
 *           0 for a PTR the recorder never saw allocated (NULL, invalid,
 *           double free), which writes nothing.  ga_trace_free_end, AFTER
 *           it, given the free's status ST, writes the "f" line if the
 *           free was made, and otherwise (refused: a stream being
 *           captured) makes PTR live again, as the arena left it.  When
 *           PTR is handed out again before the end, the free was made:
 *           its "f" line goes then, before the new block's "a", and the
 *           end writes nothing.
 *           A racing double free of the program's (threads freeing PTR
 *           at once) shares the id among them: the first free the arena
 *           makes writes the line, one refused because the block is gone
 *           (a double free, an invalid or interior pointer) writes
 *           nothing.  One made after the block was handed out again
 *           freed the new block, but the recorder cannot tell it from a
 *           correct program's free that ends late: the new block stays
 *           live in the trace until the next free of PTR, which the arena
 *           refuses as a double free.  A free made between an allocation
 *           and its "a" line is lost (the block stays live in the trace);
 *   record: after a successful gpuarena_record_stream, which refuses
 *           GPUARENA_STREAM_HOST (given it, nothing is written).
 * GPUARENA_STREAM_HOST is written as "-" (no stream), other handles as
 * stream numbers. */
void ga_trace_record_alloc(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                           size_t size, gpuarena_stream_t stream);
/* ARENA is destroyed (ga_arena_destroy): an arena made later at its
 * address is recorded as another instance. */
void ga_trace_arena_gone(const void *arena);
uint64_t ga_trace_free_begin(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                             gpuarena_stream_t stream);
void ga_trace_free_end(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                       uint64_t id, gpuarena_stream_t stream, gpuarena_status_t st);
void ga_trace_record_stream(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                            gpuarena_stream_t stream);

/* Write out what is buffered (also done at exit). */
void ga_trace_flush(void);

/* Fork (fork.c): the recorder's lock, taken among the last before the
 * fork and let go after it in both processes.  In the child a recording
 * the parent had begun stops, and GPUARENA_TRACE, if the parent had not
 * read it yet, is read only for a file of the child's own (%p). */
void ga_trace_fork_prepare(void);
void ga_trace_fork_parent(void);
void ga_trace_fork_child(void);

/* Start recording to PATH now, whatever GPUARENA_TRACE says (%r and %p
 * expanded); stop with ga_trace_stop(), which flushes, closes and turns
 * recording off.  For tests and tools. */
gpuarena_status_t ga_trace_open(const char *path);
void ga_trace_stop(void);

#endif /* GA_TRACE_H */
