/*
 * recorder.c - GPUARENA_TRACE: every request of every arena, written in
 * the gpuarena-trace 3 format (gpuarena-trace(5)).
 *
 * One process-wide recorder behind one mutex.  A hook formats its line
 * with a hand-written integer formatter into a 64 KiB buffer that goes out
 * with write(2) when it fills and at exit; nothing is allocated per event
 * except when a hash map grows.  Allocation ids are numbered from 1 in the
 * order the allocations were made; live pointers are mapped to their ids
 * per arena.  Streams are numbered in order of first use, with the legacy
 * default stream as 0 (NULL, and CU_STREAM_LEGACY for the kinds that
 * name streams as CUDA does, stream_of); GPUARENA_STREAM_HOST is no
 * stream and is written as "-", so that a replay makes with no stream the
 * requests the program made with none.  A "k" line is written
 * whenever an event belongs to another arena than the line before it.
 *
 * The library never prints: when the file cannot be opened or written,
 * recording just stops.
 */
#include "config.h"

#include "env.h"
#include "errors.h"
#include "outpath.h"
#include "sigpipe.h"
#include "trace/map.h"
#include "trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUF_SIZE  (64 * 1024)
#define LINE_MAX_ 96

_Atomic int ga_trace_state = -1;
size_t ga_trace_max_arenas = GA_TRACE_MAX_ARENAS;

typedef struct rec_arena {
    const void *key;
    gpuarena_kind_t kind;
    int device;
    unsigned instance;
    ga_map_t live;       /* pointer -> id */
    ga_map_t freeing;    /* pointer -> a free in flight (FREEING_*) */
    ga_map_t freeing_on; /* pointer -> the stream of that free (stream_key) */
} rec_arena_t;

/* A free in flight, between ga_trace_free_begin and ga_trace_free_end:
 * the id, how many threads are freeing the pointer (more than one only
 * in a racing double free of the program's), and whether its "f" line
 * is written.  The record goes at the last end, or when the pointer is
 * handed out again first (settle_freeing).  Ids stay below 2^48 (one a
 * nanosecond for three days). */
#define FREEING_ID     ((UINT64_C(1) << 48) - 1)
#define FREEING_DONE   (UINT64_C(1) << 48)
#define FREEING_HOLDER (UINT64_C(1) << 49)

static struct {
    pthread_mutex_t lock;
    int fd;
    size_t len;
    char buf[BUF_SIZE];
    uint64_t next_id;
    ga_map_t streams; /* handle -> stream number */
    uint64_t next_stream;
    rec_arena_t *arenas; /* the live arenas that handed out something */
    size_t narenas;
    size_t last;        /* arena of the last line written, SIZE_MAX: none */
    size_t arenas_made; /* arena records made since the file was opened */
    ga_map_t instances; /* kind << 32 | device -> the next instance number */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .last = SIZE_MAX};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool hooks_installed;
static bool in_fork_child; /* ga_trace_fork_child */

static const char *const kind_names[GPUARENA_KIND_COUNT] = {
    [GPUARENA_DEVICE] = "device", [GPUARENA_PINNED] = "pinned", [GPUARENA_MANAGED] = "managed",
    [GPUARENA_HOST] = "host",     [GPUARENA_SIM] = "sim",
};

/* ---- Output ----------------------------------------------------------- */

/* Disk full or the like: recording stops rather than fail the program's
 * allocations.  The buffer ends on a line, but a short write may have cut
 * one: the file is cut back to the end of its last whole line, so that
 * what was recorded still reads (gpuarena-replay refuses a broken line). */
static void stop_writing(size_t written)
{
    size_t keep = written;
    while (keep && R.buf[keep - 1] != '\n')
        keep--;
    off_t end = lseek(R.fd, 0, SEEK_CUR);
    if (end >= (off_t)(written - keep) && ftruncate(R.fd, end - (off_t)(written - keep)) != 0) {
        /* Nothing more to do: the file keeps the piece of a line. */
    }
    close(R.fd);
    R.fd = -1;
    atomic_store(&ga_trace_state, 0);
}

/* write(2) with SIGPIPE held off (sigpipe.c): to a pipe whose reader has
 * gone (GPUARENA_TRACE=>(gzip > t.gz), gzip killed by a full disk) the
 * write fails with EPIPE, and recording stops as for any other error. */
static ssize_t write_quiet(int fd, const void *buf, size_t n)
{
    ga_sigpipe_t h;
    ga_sigpipe_hold(&h);
    ssize_t r = write(fd, buf, n);
    ga_sigpipe_release(&h);
    return r;
}

static void write_out(void)
{
    size_t off = 0;
    while (off < R.len && R.fd >= 0) {
        ssize_t n = write_quiet(R.fd, R.buf + off, R.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            stop_writing(off);
            break;
        }
        off += (size_t)n;
    }
    R.len = 0;
}

static inline char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static inline char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

/* Room for one more line; flush when needed. */
static inline char *line_start(void)
{
    if (BUF_SIZE - R.len < 2 * LINE_MAX_)
        write_out();
    return R.buf + R.len;
}

static inline void line_end(char *p)
{
    *p++ = '\n';
    R.len = (size_t)(p - R.buf);
}

/* ---- State ------------------------------------------------------------ */

static void reset_state(void)
{
    for (size_t i = 0; i < R.narenas; i++) {
        ga_map_fini(&R.arenas[i].live);
        ga_map_fini(&R.arenas[i].freeing);
        ga_map_fini(&R.arenas[i].freeing_on);
    }
    free(R.arenas);
    R.arenas = NULL;
    R.narenas = 0;
    R.arenas_made = 0;
    R.last = SIZE_MAX;
    ga_map_fini(&R.instances);
    ga_map_fini(&R.streams);
    R.next_stream = 1;
    R.next_id = 1;
    R.len = 0;
}

/* The record of ARENA, or NULL while the recorder has none (the arena
 * handed out nothing yet): unlike arena_of, it makes none and writes no
 * "k" line.  R.lock held. */
static rec_arena_t *find_arena(const void *arena, gpuarena_kind_t kind, int device)
{
    for (size_t i = 0; i < R.narenas; i++)
        if (R.arenas[i].key == arena && R.arenas[i].kind == kind && R.arenas[i].device == device)
            return &R.arenas[i];
    return NULL;
}

/* The arena entry of KEY; NULL when out of memory.  Writes its "k" line
 * when the previous line was of another arena. */
static rec_arena_t *arena_of(const void *key, gpuarena_kind_t kind, int device)
{
    if (R.last < R.narenas && R.arenas[R.last].key == key && R.arenas[R.last].kind == kind &&
        R.arenas[R.last].device == device)
        return &R.arenas[R.last];
    rec_arena_t *a = find_arena(key, kind, device);
    if (!a) {
        if (R.arenas_made >= ga_trace_max_arenas)
            return NULL; /* its requests are left out (trace.h) */
        a = realloc(R.arenas, (R.narenas + 1) * sizeof *a);
        if (!a)
            return NULL;
        R.arenas = a;
        /* Counted per kind and device for the life of the recording:
         * destroyed arenas' numbers are not given again. */
        uint64_t kd = (uint64_t)kind << 32 | (uint32_t)device, *next = ga_map_get(&R.instances, kd);
        unsigned instance = next ? (unsigned)*next : 0;
        if (!ga_map_put(&R.instances, kd, (uint64_t)instance + 1))
            return NULL;
        a += R.narenas++;
        R.arenas_made++;
        a->key = key;
        a->kind = kind;
        a->device = device;
        a->instance = instance;
        ga_map_init(&a->live);
        ga_map_init(&a->freeing);
        ga_map_init(&a->freeing_on);
    }
    char *p = line_start();
    p = put_str(p, "k ");
    p = put_str(p, (unsigned)kind < GPUARENA_KIND_COUNT ? kind_names[kind] : "device");
    *p++ = ' ';
    p = put_u64(p, (uint64_t)(device < 0 ? 0 : device));
    *p++ = ' ';
    p = put_u64(p, a->instance);
    line_end(p);
    R.last = (size_t)(a - R.arenas);
    return a;
}

/* Arenas of these kinds name streams as CUDA does: 0x1 is the legacy
 * stream (CU_STREAM_LEGACY) as NULL is, and 0x2 (CU_STREAM_PER_THREAD)
 * the calling thread's own stream.  Host and sim arenas take every
 * handle but NULL for a stream of its own, as gpuarena-replay(1) makes
 * them: stream 1 of a trace replays as handle 1. */
static bool cuda_names(gpuarena_kind_t kind)
{
    return kind == GPUARENA_DEVICE || kind == GPUARENA_PINNED || kind == GPUARENA_MANAGED;
}

/* A number per thread for its per-thread stream, never 0. */
static atomic_uint_fast64_t threads_seen;
static _Thread_local uint64_t thread_number;

/* What names a stream across the recording: 0 for the legacy stream,
 * KEY_NONE for no stream (GPUARENA_STREAM_HOST, whose handle it is), a
 * per-thread stream by its thread (the top bit set, which no stream
 * handle, a user-space address, has), any other stream by its handle.
 * Worked out on the thread that names the stream: a free whose line
 * another thread writes (settle_freeing) keeps its key. */
#define KEY_NONE UINT64_MAX
static uint64_t stream_key(gpuarena_kind_t kind, gpuarena_stream_t s)
{
    uintptr_t h = (uintptr_t)s;
    if (s == GPUARENA_STREAM_HOST)
        return KEY_NONE;
    if (h == 0 || (h == 1 && cuda_names(kind)))
        return 0;
    if (h == 2 && cuda_names(kind)) {
        if (!thread_number)
            thread_number = atomic_fetch_add(&threads_seen, 1) + 1;
        return UINT64_C(1) << 63 | thread_number;
    }
    return h;
}

/* The stream number of KEY (not KEY_NONE), given at its first use. */
static uint64_t stream_number(uint64_t key)
{
    if (key == 0)
        return 0;
    uint64_t *v = ga_map_get(&R.streams, key);
    if (v)
        return *v;
    uint64_t n = R.next_stream;
    if (!ga_map_put(&R.streams, key, n))
        return 0;
    R.next_stream++;
    return n;
}

/* The STREAM field: "-" for no stream, which takes no stream number (it
 * must not replay as stream-ordered on some stream), else the number. */
static inline char *put_stream(char *p, uint64_t key)
{
    if (key == KEY_NONE) {
        *p++ = '-';
        return p;
    }
    return put_u64(p, stream_number(key));
}

/* ---- Opening ---------------------------------------------------------- */

static void at_exit(void)
{
    pthread_mutex_lock(&R.lock);
    write_out();
    pthread_mutex_unlock(&R.lock);
}

/* Fork (fork.c, which takes the recorder's lock among the last: it is
 * taken under the locks of the graph pools and of the deferred frees,
 * which free into arenas, and takes none). */
void ga_trace_fork_prepare(void)
{
    pthread_mutex_lock(&R.lock);
}

void ga_trace_fork_parent(void)
{
    pthread_mutex_unlock(&R.lock);
}

/* Whether descriptor FD is of the file S describes. */
static bool same_file(int fd, const struct stat *s)
{
    struct stat o;
    return fstat(fd, &o) == 0 && o.st_dev == s->st_dev && o.st_ino == s->st_ino;
}

/* Called with R.lock held. */
static gpuarena_status_t open_locked(const char *pattern)
{
    char path[4096];
    gpuarena_status_t st = ga_output_path("trace file", pattern, path, sizeof path);
    if (st != GPUARENA_SUCCESS)
        return st;
    /* Not truncated before it is ours: another process recording to the
     * same file (a program this one runs, which inherits GPUARENA_TRACE,
     * or one started beside it) would lose what it wrote, and keep
     * writing at its offset past a hole of NUL bytes. */
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return ga_error(GPUARENA_ERR_SYSTEM, "trace file '%s': %s", path, strerror(errno));
    struct stat st_new;
    bool known = fstat(fd, &st_new) == 0, regular = known && S_ISREG(st_new.st_mode);
    if (R.fd >= 0 && known && same_file(R.fd, &st_new)) {
        /* This process's own file again (ga_trace_open): that recording
         * ends here, before the lock is asked for (where flock is made of
         * POSIX locks, on NFS, the process would get it a second time)
         * and before the file is cut. */
        write_out();
        close(R.fd);
        R.fd = -1;
        reset_state();
        atomic_store(&ga_trace_state, 0);
    }
    /* Only a regular file is locked and cut: /dev/null, a pipe or a
     * terminal takes neither (ftruncate fails there). */
    if (regular && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        return ga_error(GPUARENA_ERR_BUSY,
                        "trace file '%s': another process records to it (a %%p in "
                        "GPUARENA_TRACE gives each process a file)",
                        path);
    }
    /* Locked, or on a file system without locks (ENOLCK), as before. */
    if (regular && ftruncate(fd, 0) != 0) {
        int e = errno;
        close(fd);
        return ga_error(GPUARENA_ERR_SYSTEM, "trace file '%s': %s", path, strerror(e));
    }
    if (!hooks_installed) {
        atexit(at_exit);
        hooks_installed = true;
    }
    if (R.fd >= 0) {
        write_out();
        close(R.fd);
    }
    reset_state();
    R.fd = fd;
    char *p = line_start();
    p = put_str(p, "# gpuarena-trace 3\n# source: gpuarena " PACKAGE_VERSION " pid ");
    p = put_u64(p, (uint64_t)getpid());
    line_end(p);
    atomic_store(&ga_trace_state, 1);
    return GPUARENA_SUCCESS;
}

void ga_trace_fork_child(void)
{
    in_fork_child = true;
    /* A child of a recording process would write the parent's buffer
     * twice and mix its events into the parent's file: it records
     * nothing.  One forked before the recorder read GPUARENA_TRACE reads
     * it later (read_env). */
    if (hooks_installed) {
        if (R.fd >= 0)
            close(R.fd);
        R.fd = -1;
        R.len = 0;
        atomic_store(&ga_trace_state, 0);
    }
    pthread_mutex_unlock(&R.lock);
}

static void read_env(void)
{
    /* A child made before its parent read the variable (the parent had
     * made no request yet) records only to a file of its own (%p): any
     * other would be its parent's.  One made after never gets here: the
     * once-control is done. */
    const char *pattern = ga_env("GPUARENA_TRACE");
    if (in_fork_child && pattern && !ga_output_per_process(pattern))
        pattern = NULL;
    pthread_mutex_lock(&R.lock);
    /* A file that cannot be opened stops the recording, not the call that
     * started it: its message is not the thread's. */
    ga_error_saved_t saved;
    ga_error_save(&saved);
    if (!pattern || open_locked(pattern) != GPUARENA_SUCCESS)
        atomic_store(&ga_trace_state, 0);
    ga_error_restore(&saved);
    pthread_mutex_unlock(&R.lock);
}

bool ga_trace_start(void)
{
    pthread_once(&env_once, read_env);
    return atomic_load(&ga_trace_state) > 0;
}

gpuarena_status_t ga_trace_open(const char *path)
{
    if (!path)
        return ga_error(GPUARENA_ERR_INVALID_ARGUMENT, "ga_trace_open: path is NULL");
    pthread_once(&env_once, read_env);
    pthread_mutex_lock(&R.lock);
    gpuarena_status_t st = open_locked(path);
    pthread_mutex_unlock(&R.lock);
    return st;
}

void ga_trace_stop(void)
{
    pthread_once(&env_once, read_env);
    pthread_mutex_lock(&R.lock);
    atomic_store(&ga_trace_state, 0);
    write_out();
    if (R.fd >= 0)
        close(R.fd);
    R.fd = -1;
    reset_state();
    pthread_mutex_unlock(&R.lock);
}

void ga_trace_flush(void)
{
    pthread_mutex_lock(&R.lock);
    write_out();
    pthread_mutex_unlock(&R.lock);
}

/* ---- Hooks ------------------------------------------------------------ */

static void id_line(char op, uint64_t id, uint64_t key);

/* PTR is handed out again while a free of it is still in flight (its
 * thread is between the arena's free and ga_trace_free_end): a free of
 * it was made, or the arena could not hand it out.  Its "f" line goes
 * now, before the new block's "a", on the stream of the free that began
 * first, and its record goes: a free of the new block is then not taken
 * for a racing double free of the old one (which freed the old block in
 * the trace while the new one stayed live there for good), and the old
 * free's end, finding no record of its own, writes nothing.  R.lock
 * held. */
static void settle_freeing(rec_arena_t *a, const void *ptr)
{
    uint64_t e, on = 0;
    if (!ga_map_del(&a->freeing, (uintptr_t)ptr, &e))
        return;
    (void)ga_map_del(&a->freeing_on, (uintptr_t)ptr, &on);
    if (!(e & FREEING_DONE))
        id_line('f', e & FREEING_ID, on);
}

void ga_trace_record_alloc(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                           size_t size, gpuarena_stream_t stream)
{
    pthread_mutex_lock(&R.lock);
    if (R.fd >= 0) {
        rec_arena_t *a = arena_of(arena, kind, device);
        if (a && ptr)
            settle_freeing(a, ptr);
        uint64_t id = R.next_id;
        /* Size 0 hands out NULL, which is never freed: it gets an id and
         * stays live in the trace, as a replay does with it. */
        if (a && (!ptr || ga_map_put(&a->live, (uintptr_t)ptr, id))) {
            R.next_id++;
            char *p = line_start();
            p = put_str(p, "a ");
            p = put_u64(p, id);
            *p++ = ' ';
            p = put_u64(p, size);
            *p++ = ' ';
            p = put_stream(p, stream_key(kind, stream));
            line_end(p);
        }
    }
    pthread_mutex_unlock(&R.lock);
}

/* An "f" or "r" line for block ID.  R.lock held. */
static void id_line(char op, uint64_t id, uint64_t key)
{
    char *p = line_start();
    *p++ = op;
    *p++ = ' ';
    p = put_u64(p, id);
    *p++ = ' ';
    p = put_stream(p, key);
    line_end(p);
}

/* A racing double free of the program's (trace.h): every thread that
 * frees PTR while a free of it is in flight shares that free's id, and
 * the first whose free the arena makes writes the "f" line. */
uint64_t ga_trace_free_begin(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                             gpuarena_stream_t stream)
{
    uint64_t id = 0;
    if (!ptr)
        return 0;
    pthread_mutex_lock(&R.lock);
    rec_arena_t *a = R.fd >= 0 ? find_arena(arena, kind, device) : NULL;
    uint64_t *f = a ? ga_map_get(&a->freeing, (uintptr_t)ptr) : NULL;
    if (f) {
        *f += FREEING_HOLDER;
        id = *f & FREEING_ID;
    } else if (a && ga_map_del(&a->live, (uintptr_t)ptr, &id)) {
        /* Out of memory for the entry (or an id past FREEING_ID): the
         * free is not followed, and its "f" line is lost rather than the
         * pointer kept live. */
        if (id > FREEING_ID ||
            !ga_map_put(&a->freeing_on, (uintptr_t)ptr, stream_key(kind, stream)))
            id = 0;
        else if (!ga_map_put(&a->freeing, (uintptr_t)ptr, id | FREEING_HOLDER)) {
            (void)ga_map_del(&a->freeing_on, (uintptr_t)ptr, NULL);
            id = 0;
        }
    }
    pthread_mutex_unlock(&R.lock);
    return id;
}

/* Whether status ST of a free of a pointer that the recorder knew live
 * says that another free of it came first: the block is no longer live
 * at that address. */
static bool freed_meanwhile(gpuarena_status_t st)
{
    return st == GPUARENA_ERR_DOUBLE_FREE || st == GPUARENA_ERR_INVALID_POINTER ||
           st == GPUARENA_ERR_INTERIOR_POINTER;
}

void ga_trace_free_end(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                       uint64_t id, gpuarena_stream_t stream, gpuarena_status_t st)
{
    if (!id)
        return;
    pthread_mutex_lock(&R.lock);
    rec_arena_t *a = R.fd >= 0 ? find_arena(arena, kind, device) : NULL;
    uint64_t *f = a ? ga_map_get(&a->freeing, (uintptr_t)ptr) : NULL;
    if (!f || (*f & FREEING_ID) != id) {
        /* Settled when PTR was handed out again (settle_freeing), or
         * stopped and started again meanwhile: nothing of ours. */
        pthread_mutex_unlock(&R.lock);
        return;
    }
    uint64_t e = *f - FREEING_HOLDER;
    /* Made, or refused because the block is gone and no other free of it
     * is left to say so (freed by a free the recorder did not follow). */
    bool gone = st == GPUARENA_SUCCESS || (freed_meanwhile(st) && e < FREEING_HOLDER);
    if (gone && !(e & FREEING_DONE)) {
        if (arena_of(arena, kind, device))
            id_line('f', id, stream_key(kind, stream));
        e |= FREEING_DONE;
    }
    a = find_arena(arena, kind, device); /* arena_of may have moved the records */
    f = ga_map_get(&a->freeing, (uintptr_t)ptr);
    if (e >= FREEING_HOLDER) {
        *f = e; /* another thread's free of it still in flight decides */
    } else {
        (void)ga_map_del(&a->freeing, (uintptr_t)ptr, NULL);
        (void)ga_map_del(&a->freeing_on, (uintptr_t)ptr, NULL);
        /* Refused (a capture, a stream of another device...) and no other
         * free of it made: PTR is still live, known by its id again. */
        if (!(e & FREEING_DONE))
            (void)ga_map_put(&a->live, (uintptr_t)ptr, id);
    }
    pthread_mutex_unlock(&R.lock);
}

void ga_trace_arena_gone(const void *arena)
{
    pthread_mutex_lock(&R.lock);
    /* Its record goes: an arena made later at the same address (malloc
     * hands it out again) is another one, with a "k" line and an instance
     * number of its own, not this one's events continued.  The records
     * left are the live arenas', whatever a program made and destroyed. */
    for (size_t i = 0; i < R.narenas; i++) {
        rec_arena_t *a = &R.arenas[i];
        if (a->key != arena)
            continue;
        ga_map_fini(&a->live);
        ga_map_fini(&a->freeing);
        ga_map_fini(&a->freeing_on);
        size_t end = --R.narenas;
        *a = R.arenas[end];
        if (R.last == i)
            R.last = SIZE_MAX;
        else if (R.last == end)
            R.last = i;
        break;
    }
    pthread_mutex_unlock(&R.lock);
}

void ga_trace_record_stream(const void *arena, gpuarena_kind_t kind, int device, const void *ptr,
                            gpuarena_stream_t stream)
{
    /* gpuarena_record_stream refuses GPUARENA_STREAM_HOST, so only a direct
     * caller gets here with it; "r ID -" is not a valid line. */
    if (!ptr || stream == GPUARENA_STREAM_HOST)
        return;
    pthread_mutex_lock(&R.lock);
    rec_arena_t *a = R.fd >= 0 ? find_arena(arena, kind, device) : NULL;
    uint64_t *v = a ? ga_map_get(&a->live, (uintptr_t)ptr) : NULL;
    if (v) {
        uint64_t id = *v;
        if (arena_of(arena, kind, device))
            id_line('r', id, stream_key(kind, stream));
    }
    pthread_mutex_unlock(&R.lock);
}
