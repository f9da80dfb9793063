/*
 * check_fakecuda.c - the device provider over a fake driver (fakecuda/),
 * for the driver failures that no real GPU makes on demand: a cuMemUnmap
 * or cuMemRelease that fails while cached memory is given back, a commit
 * whose undo cannot unmap, a wait that fails after the driver's pool has
 * handed out a block.  Each test requires that the block manager's view
 * stays what the driver holds, and that the arena keeps serving.  And
 * for what a one-GPU host cannot show: peer access to several GPUs.
 *
 * The library opens dlopen("libcuda.so.1"), so this program re-executes
 * itself with LD_LIBRARY_PATH at the fake's directory (as check_cuda does
 * for the toolkit's stub), and reaches the fake's controls with dlsym.
 * Runs on every machine, GPU or not, and in every build, static-only
 * ones too: make check builds the fake with a plain rule (Makefile.am).
 */
#include "checkrun.h"
#include "config.h"
#include "forkrun.h"

#include "gpuarena.h"
#include "graphpool.h"
#include "hostmem.h"
#include "memline.h"
#include "trace/trace.h"

#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB        ((size_t)1 << 20)
#define HOST       GPUARENA_STREAM_HOST
#define FAKE_DIR   GA_TOP_BUILDDIR "/tests/fakecuda"
#define CHILD_MARK "GA_FAKECUDA_CHILD"

static struct {
    void (*arm)(const char *call, int nth);
    void (*arm_unmap_at)(uint64_t va);
    size_t (*mapped)(uint64_t va, size_t size);
    int (*maps)(void);
    int (*handles)(void);
    int (*host_registered)(void);
    int (*reservations)(void);
    long (*pool_blocks)(void);
    void (*blocking_capture)(int on);
    void (*capture)(void *stream);
    void (*capture_join)(void *stream);
    long (*count)(const char *what);
    void (*devices)(int n, unsigned peers);
    int (*access)(int pool, int *ids, int max);
    void (*fd_handles)(int supported, int refused);
    void (*new_context)(void);
    void (*foreign_stream)(void *s);
    void (*refuse_peers)(int on);
    void (*no_managed_concurrency)(unsigned devices);
    void (*unmap_gate)(int closed);
    int (*unmap_waiting)(void);
    void (*pool_reserved)(uint64_t bytes);
} fake;

/* The fake's controls, from the libcuda.so.1 the library opens too. */
static void fake_open(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "no libcuda.so.1: %s", dlerror());
#define GET(field, sym)                                                                            \
    do {                                                                                           \
        void *p = dlsym(h, sym);                                                                   \
        ck_assert_msg(p != NULL, "libcuda.so.1 is not the fake: no %s", sym);                      \
        memcpy(&fake.field, &p, sizeof p);                                                         \
    } while (0)
    GET(arm, "fakecuda_fail");
    GET(arm_unmap_at, "fakecuda_fail_unmap_at");
    GET(mapped, "fakecuda_mapped");
    GET(maps, "fakecuda_maps");
    GET(handles, "fakecuda_handles");
    GET(host_registered, "fakecuda_host_registered");
    GET(reservations, "fakecuda_reservations");
    GET(pool_blocks, "fakecuda_pool_blocks");
    GET(blocking_capture, "fakecuda_blocking_capture");
    GET(capture, "fakecuda_capture");
    GET(capture_join, "fakecuda_capture_join");
    GET(count, "fakecuda_count");
    GET(devices, "fakecuda_devices");
    GET(access, "fakecuda_access");
    GET(fd_handles, "fakecuda_fd_handles");
    GET(new_context, "fakecuda_new_context");
    GET(foreign_stream, "fakecuda_foreign_stream");
    GET(no_managed_concurrency, "fakecuda_no_managed_concurrency");
    GET(refuse_peers, "fakecuda_refuse_peers");
    GET(unmap_gate, "fakecuda_unmap_gate");
    GET(unmap_waiting, "fakecuda_unmap_waiting");
    GET(pool_reserved, "fakecuda_pool_reserved");
#undef GET
}

/* A new arena of KIND on GPU 0 with OPTIONS, over the fake driver. */
static gpuarena_t *made(gpuarena_kind_t kind, const char *options)
{
    fake_open();
    gpuarena_t *a = NULL;
    gpuarena_status_t st = gpuarena_create(kind, 0, options, &a);
    ck_assert_msg(st == GPUARENA_SUCCESS, "create: %s", gpuarena_last_error());
    return a;
}

static gpuarena_t *growable(void)
{
    return made(GPUARENA_DEVICE, "expandable=true,thread_cache=false");
}

static uint64_t reserved(gpuarena_t *a)
{
    gpuarena_stats_t s;
    ck_assert_int_eq(gpuarena_stats(a, &s), GPUARENA_SUCCESS);
    return s.reserved;
}

static uint64_t va(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* cuMemUnmap fails for the 2nd of 4 granules of a cached block, every
 * time: a trim gives back the 1st granule only, and the rest stays a
 * mapped free block that the next allocation may have whole. */
START_TEST(decommit_stops_where_unmap_fails)
{
    gpuarena_t *a = growable();
    void *p, *q;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fake.mapped(va(p), 8 * MIB), 8 * MIB);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm_unmap_at(va(p) + 2 * MIB);
    gpuarena_trim(a, 0);
    ck_assert_uint_eq(fake.mapped(va(p), 8 * MIB), 6 * MIB);
    ck_assert_uint_eq(reserved(a), 6 * MIB);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    /* Whatever block the arena hands out is mapped whole. */
    ck_assert_int_eq(gpuarena_alloc(a, 6 * MIB, HOST, &q), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fake.mapped(va(q), 6 * MIB), 6 * MIB);
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &q), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fake.mapped(va(q), 8 * MIB), 8 * MIB);
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    /* Once the driver unmaps again, everything goes back. */
    fake.arm_unmap_at(0);
    gpuarena_trim(a, 0);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* A cuMemUnmap that fails once (the 2nd of 4) is retried: the trim
 * gives back every granule. */
START_TEST(decommit_retries_a_failed_unmap)
{
    gpuarena_t *a = growable();
    void *p;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemUnmap", 2);
    gpuarena_trim(a, 0);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* cuMemUnmap succeeds and cuMemRelease fails: the granule is unmapped,
 * and the arena counts it so; the handle is kept and released again
 * before the next decommit (here, the block manager's second try of the
 * same trim), so its memory is not held for the life of the process. */
START_TEST(release_failure_still_unmaps)
{
    gpuarena_t *a = growable();
    void *p, *q;
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemRelease", 1);
    gpuarena_trim(a, 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(fake.handles(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &q), GPUARENA_SUCCESS);
    ck_assert_uint_eq(fake.mapped(va(q), 4 * MIB), 4 * MIB);
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    gpuarena_trim(a, 0);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_msg(gpuarena_destroy(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* A granule handle whose cuMemRelease fails is kept for a later release
 * (above); the room to keep it is made before the driver call that may
 * need it.  It was made after, and with no host memory at that moment
 * the handle was dropped, its memory held until the process exited: here
 * the ninth of nine granules whose releases fail, when the room for
 * eight is full. */
START_TEST(no_host_memory_drops_no_handle)
{
    gpuarena_t *a = growable();
    void *p[9];
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(gpuarena_alloc(a, 2 * MIB, HOST, &p[i]), GPUARENA_SUCCESS);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(gpuarena_free(a, p[i], HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemRelease", -1); /* every release fails */
    atomic_store(&ga_hostmem_fail, true);
    (void)gpuarena_trim(a, 0);
    atomic_store(&ga_hostmem_fail, false);
    fake.arm("cuMemRelease", 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_msg(gpuarena_destroy(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* cuMemSetAccess fails at a commit and the undo's cuMemUnmap fails too:
 * the allocation fails with the driver's status, and the next commit of
 * that range takes over the granule left mapped instead of failing. */
/* A 2 MiB allocation from A that fails as the driver calls FIRST and
 * SECOND fail once each. */
static void alloc_fails_with(gpuarena_t *a, const char *first, const char *second)
{
    void *p = NULL;
    fake.arm(first, 1);
    fake.arm(second, 1);
    ck_assert_int_eq(gpuarena_alloc(a, 2 * MIB, HOST, &p), GPUARENA_ERR_DRIVER);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), first));
}

START_TEST(failed_commit_undo_does_not_wedge)
{
    gpuarena_t *a = growable();
    void *p = NULL;
    alloc_fails_with(a, "cuMemSetAccess", "cuMemUnmap");
    gpuarena_status_t st;
    for (int i = 0; i < 3; i++) {
        st = gpuarena_alloc(a, 2 * MIB, HOST, &p);
        ck_assert_msg(st == GPUARENA_SUCCESS, "alloc %d: %s", i, gpuarena_last_error());
        ck_assert_uint_eq(fake.mapped(va(p), 2 * MIB), 2 * MIB);
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    }
    gpuarena_trim(a, 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* A commit that stops before a granule that an earlier failed commit
 * left mapped (stale), and whose undo cannot unmap that granule either:
 * it stays stale, counted once (the undo counted it again, and the
 * checker found the arena's mappings one short). */
START_TEST(failed_commit_undo_counts_a_stale_granule_once)
{
    gpuarena_t *a = growable();
    void *p = NULL;
    fake.arm("cuMemSetAccess", -1);
    fake.arm("cuMemUnmap", 2); /* the undo's second granule stays mapped */
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &p), GPUARENA_ERR_DRIVER);
    fake.arm("cuMemSetAccess", 0);
    fake.arm("cuMemUnmap", 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(fake.maps(), 1);
    fake.arm("cuMemCreate", 1); /* the first granule, this time */
    fake.arm("cuMemUnmap", 1);  /* and the stale one will not go */
    gpuarena_status_t st = gpuarena_alloc(a, 4 * MIB, HOST, &p);
    fake.arm("cuMemCreate", 0);
    fake.arm("cuMemUnmap", 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    if (st == GPUARENA_SUCCESS) /* a retry elsewhere */
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* Calls that succeed leave the thread's message as it was
 * (gpuarena_last_error(3)): a trim whose unmap the driver refuses (the
 * memory stays cached, no error: gpuarena_trim(3)) left the driver's
 * refusal there; a pinned arena that falls back to fixed segments
 * cleared it. */
START_TEST(successful_calls_keep_the_message)
{
    gpuarena_t *a = growable();
    int x;
    gpuarena_t *sim = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_SIM, 0, &sim), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(sim, &x, HOST), GPUARENA_ERR_INVALID_POINTER);
    char before[512];
    snprintf(before, sizeof before, "%s", gpuarena_last_error());
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemUnmap", 1);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    fake.arm("cuMemUnmap", 0);
    ck_assert_str_eq(gpuarena_last_error(), before);
    gpuarena_t *pn = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_PINNED, 0, "expandable=true", &pn), GPUARENA_SUCCESS);
    ck_assert_str_eq(gpuarena_last_error(), before);
    ck_assert_int_eq(gpuarena_destroy(pn), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    /* pool = driver: a free over max_cached whose pool trim the driver
     * refuses. */
    gpuarena_t *dp = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver,max_cached=0", &dp),
                     GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(dp, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    fake.pool_reserved(64 * MIB);
    fake.arm("cuMemPoolTrimTo", 1);
    ck_assert_int_eq(gpuarena_free(dp, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemPoolTrimTo", 0);
    fake.pool_reserved(0);
    ck_assert_str_eq(gpuarena_last_error(), before);
    /* An allocation the out-of-memory retry saves: the pool's first
     * refusal is no failure of it. */
    fake.arm("cuMemAllocFromPoolAsync", 1);
    ck_assert_int_eq(gpuarena_alloc(dp, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_str_eq(gpuarena_last_error(), before);
    ck_assert_int_eq(gpuarena_free(dp, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(dp), GPUARENA_SUCCESS);
    /* A driver pool that cannot be exportable falls back to a plain one. */
    fake.fd_handles(1, 1);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &dp), GPUARENA_SUCCESS);
    fake.fd_handles(0, 0);
    ck_assert_str_eq(gpuarena_last_error(), before);
    ck_assert_int_eq(gpuarena_destroy(dp), GPUARENA_SUCCESS);
    /* A kept free that the retry of every hook call and of a destroy
     * finds refused still (a blocking capture). */
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *mine = NULL, *other = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &mine), GPUARENA_SUCCESS);
    void *q = gpuarena_cupy_malloc(mine, 4096, 0);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(gpuarena_record_stream(mine, q, c), GPUARENA_SUCCESS);
    fake.capture(d);
    fake.blocking_capture(1);
    gpuarena_cupy_free(mine, q, 0); /* kept */
    ck_assert_int_eq(gpuarena_free(sim, &x, HOST), GPUARENA_ERR_INVALID_POINTER);
    snprintf(before, sizeof before, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &other), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(other), GPUARENA_SUCCESS);
    ck_assert_str_eq(gpuarena_last_error(), before);
    void *r = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(gpuarena_last_error(), before);
    fake.capture(NULL);
    fake.blocking_capture(0);
    gpuarena_torch_free(r, 4096, 0, c); /* makes the kept free too */
    ck_assert_int_eq(gpuarena_destroy(mine), GPUARENA_SUCCESS);
}
END_TEST

/* The same failed commit, and nothing allocated after it: the granule it
 * could not unmap is counted apart from the arena's mappings (the checker
 * called the arena corrupt), and a trim unmaps it (it stayed mapped, out
 * of every figure, until a commit there or the destroy). */
START_TEST(failed_commit_leftover_goes_at_trim)
{
    gpuarena_t *a = growable();
    alloc_fails_with(a, "cuMemSetAccess", "cuMemUnmap");
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(fake.maps(), 1);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_int_eq(fake.handles(), 0);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* cuMemMap fails and so does the release of what cuMemCreate made: the
 * handle is kept and released later (it was dropped, held until exit). */
START_TEST(failed_map_keeps_its_handle)
{
    gpuarena_t *a = growable();
    void *p = NULL;
    alloc_fails_with(a, "cuMemMap", "cuMemRelease");
    ck_assert_int_eq(fake.handles(), 1);
    ck_assert_int_eq(gpuarena_alloc(a, 2 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* One cuMemRelease failure at destroy: the first granule's handle is
 * kept, the other granules are unmapped and released all the same (the
 * destroy stopped at the first), and the last try of the destroy gives
 * that handle back; the status says what failed. */
START_TEST(release_failure_at_destroy)
{
    gpuarena_t *a = growable();
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemRelease", 1);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_ERR_DRIVER);
    ck_assert_msg(strstr(gpuarena_last_error(), "cuMemRelease") != NULL, "%s",
                  gpuarena_last_error());
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* A destroy whose decommit fails in the middle of a run: the driver has
 * unmapped the granules before the failing one (vmm.h), and the message
 * says how many bytes stay mapped: what the driver still holds (it said
 * the whole run). */
START_TEST(destroy_counts_what_stays_mapped)
{
    gpuarena_t *a = growable();
    char *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, (void **)&p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm_unmap_at((uint64_t)(uintptr_t)(p + 2 * MIB));
    ck_assert_int_ne(gpuarena_destroy(a), GPUARENA_SUCCESS);
    const char *m = strstr(gpuarena_last_error(), " bytes stay mapped");
    ck_assert_msg(m != NULL, "%s", gpuarena_last_error());
    while (m > gpuarena_last_error() && m[-1] >= '0' && m[-1] <= '9')
        m--;
    ck_assert_msg(strtoull(m, NULL, 10) == (unsigned long long)fake.maps() * 2 * MIB,
                  "%s; the driver holds %d granules", gpuarena_last_error(), fake.maps());
    fake.arm_unmap_at(0);
}
END_TEST

/* A destroy where the driver refuses to release a granule's memory
 * after unmapping it: the message is the destroy's (it was the
 * provider's last retry's, a bare cuMemRelease error, where that failed
 * too), and the address range goes, nothing being mapped in it (it
 * stayed reserved for good). */
START_TEST(destroy_with_a_refused_release)
{
    for (int always = 0; always < 2; always++) {
        gpuarena_t *a = growable();
        int resv = fake.reservations();
        char *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, (void **)&p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
        ck_assert_int_gt(fake.reservations(), resv);
        fake.arm("cuMemRelease", always ? -1 : 1);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_ERR_DRIVER);
        fake.arm("cuMemRelease", 0);
        ck_assert_msg(strstr(gpuarena_last_error(), "gpuarena_destroy: 1 of 1 segments") ==
                          gpuarena_last_error(),
                      "%s", gpuarena_last_error());
        ck_assert_int_eq(fake.maps(), 0);
        ck_assert_int_eq(fake.reservations(), resv);
    }
}
END_TEST

/* Memory whose release the driver refused at a trim (the granules
 * unmapped, their handles kept for a later try) and refuses still at the
 * destroy: the destroy says so (GPUARENA_ERR_DRIVER, with the bytes and
 * why), as gpuarena_destroy(3) promises; it returned success with the
 * memory held for good. */
START_TEST(destroy_with_releases_refused_since_a_trim)
{
    gpuarena_t *a = growable();
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemRelease", -1);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_ERR_DRIVER);
    fake.arm("cuMemRelease", 0);
    ck_assert_msg(strstr(gpuarena_last_error(),
                         "gpuarena_destroy: 8388608 bytes whose release the "
                         "driver refused stay allocated") == gpuarena_last_error(),
                  "%s", gpuarena_last_error());
    /* Refused at the trim only: the destroy's last try gives it back. */
    a = growable();
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    int handles = fake.handles();
    fake.arm("cuMemRelease", -1);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    fake.arm("cuMemRelease", 0);
    ck_assert_int_eq(fake.handles(), handles);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), handles - 4);
}
END_TEST

/* A managed arena out of memory names no device's free memory
 * (gpuarena_stats(3): device_free is 0 for it, and neither the message
 * nor the report speaks of the device): managed memory oversubscribes
 * the GPU, whose free memory is not what ran out.  It gave the GPU's,
 * in the message and the JSON report but not the text one. */
START_TEST(managed_oom_names_no_device)
{
    gpuarena_t *a = made(GPUARENA_MANAGED, "max_reserved=8M");
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 3 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &q), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_msg(strstr(gpuarena_last_error(), "device") == NULL, "%s", gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.oom_failures, 1);
    ck_assert_uint_eq(st.device_free, 0);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A managed arena's prefetches to another GPU: that GPU's primary context
 * is retained once, at the first, and released at the destroy (it was
 * retained and released at every prefetch, which makes and tears down a
 * context that nothing else holds: 118 ms for the first retain on an
 * H200); the retains and releases balance. */
START_TEST(managed_prefetch_to_a_peer_retains_once)
{
    fake_open();
    fake.devices(2, 0);
    long retains = fake.count("cuDevicePrimaryCtxRetain");
    long releases = fake.count("cuDevicePrimaryCtxRelease");
    gpuarena_t *a = NULL;
    ck_assert_msg(gpuarena_create(GPUARENA_MANAGED, 0, NULL, &a) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, MIB, HOST, &p), GPUARENA_SUCCESS);
    long prefetches = fake.count("cuMemPrefetchAsync");
    long before = fake.count("cuDevicePrimaryCtxRetain");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(gpuarena_prefetch(a, p, MIB, 1, NULL) == GPUARENA_SUCCESS, "%s",
                      gpuarena_last_error());
    ck_assert_int_eq(fake.count("cuMemPrefetchAsync") - prefetches, 3);
    ck_assert_int_eq(fake.count("cuDevicePrimaryCtxRetain") - before, 1);
    ck_assert_int_eq(gpuarena_prefetch(a, p, MIB, 0, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_prefetch(a, p, MIB, GPUARENA_CPU, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("cuDevicePrimaryCtxRetain") - before, 1);
    ck_assert_int_eq(gpuarena_prefetch(a, p, MIB, 2, NULL), GPUARENA_ERR_INVALID_DEVICE);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("cuDevicePrimaryCtxRetain") - retains,
                     fake.count("cuDevicePrimaryCtxRelease") - releases);
    fake.devices(1, 0);
}
END_TEST

/* Whether a GPU takes a managed prefetch is its own
 * CONCURRENT_MANAGED_ACCESS, not that of the arena's GPU: a prefetch to
 * a GPU without it is skipped and counted (the driver would refuse it),
 * and one from such a GPU's arena to a GPU with it is made. */
static uint64_t skipped(gpuarena_t *a)
{
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    return st.prefetches_skipped;
}

START_TEST(managed_prefetch_asks_the_destination)
{
    fake_open();
    fake.devices(2, 0);
    fake.no_managed_concurrency(2u); /* GPU 1 has none */
    for (int dev = 0; dev < 2; dev++) {
        gpuarena_t *a = NULL;
        ck_assert_msg(gpuarena_create(GPUARENA_MANAGED, dev, NULL, &a) == GPUARENA_SUCCESS, "%s",
                      gpuarena_last_error());
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, MIB, HOST, &p), GPUARENA_SUCCESS);
        long prefetches = fake.count("cuMemPrefetchAsync");
        uint64_t before = skipped(a);
        ck_assert_msg(gpuarena_prefetch(a, p, MIB, 1 - dev, NULL) == GPUARENA_SUCCESS, "%s",
                      gpuarena_last_error());
        if (dev == 0) { /* to GPU 1, which takes none */
            ck_assert_int_eq(fake.count("cuMemPrefetchAsync"), prefetches);
            ck_assert_uint_eq(skipped(a), before + 1);
        } else { /* from GPU 1, which takes none, to GPU 0, which does */
            ck_assert_int_eq(fake.count("cuMemPrefetchAsync"), prefetches + 1);
            ck_assert_uint_eq(skipped(a), before);
        }
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
    fake.no_managed_concurrency(0);
    fake.devices(1, 0);
}
END_TEST

/* Another thread captures stream T while this one runs out of memory on
 * stream S and trims.  What needs no wait for the whole device is
 * released without one: S's own frees (through an event recorded on S
 * and waited on), and blocks every stream may use.  cuCtxSynchronize,
 * which no capture mode allows, is tried only for frees on other streams
 * that no event covers, and a trim that needs it then fails with
 * GPUARENA_ERR_STREAM_CAPTURE, keeping those blocks and what it had
 * released. */
START_TEST(out_of_memory_and_trim_spare_a_capture)
{
    gpuarena_t *a = growable();
    void *const s = (void *)0x5000, *const t = (void *)0x6000, *const u = (void *)0x7000;
    void *p = NULL, *q = NULL, *r = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, s, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS); /* S's pool, no event */
    fake.capture(t);
    /* The device is full once: the 16 MiB fit only after the cached 8 MiB
     * went back, which was freed on S itself. */
    fake.arm("cuMemCreate", 1);
    ck_assert_msg(gpuarena_alloc(a, 16 * MIB, s, &q) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_uint_eq(st.oom_failures, 0);
    ck_assert_uint_eq(st.reserved, 16 * MIB);
    ck_assert_int_eq(fake.count("disturbed"), 0);

    /* Freed with no stream: every stream may use it, a trim needs no wait. */
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(fake.maps(), 0);
    ck_assert_int_eq(fake.count("disturbed"), 0);

    /* Freed on U, which no event covers: only the device's wait would
     * release it.  A trim down to what U's pool holds needs none. */
    ck_assert_int_eq(gpuarena_alloc(a, 4 * MIB, u, &r), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, r, u), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 4 * MIB), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_eq(fake.count("disturbed"), 1);
    ck_assert_uint_eq(reserved(a), 4 * MIB);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    fake.capture(NULL);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_uint_eq(reserved(a), 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.handles(), 0);
}
END_TEST

/* device.pool = driver, another thread capturing stream T: running out
 * of memory first trims the pool with no wait and retries, which serves
 * it here (the pool caches memory whose frees completed); and a trim with
 * nothing to give back waits for nothing.  Each waited for the whole
 * device first (cuCtxSynchronize), which the capture refuses and the
 * driver answers by invalidating it. */
START_TEST(driver_pool_out_of_memory_spares_a_capture)
{
    fake_open();
    void *const s = (void *)0x5000, *const t = (void *)0x6000;
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a), GPUARENA_SUCCESS);
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, MIB, s, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, s), GPUARENA_SUCCESS);
    fake.pool_reserved(8 * MIB); /* cached by the pool */
    fake.capture(t);
    fake.arm("cuMemAllocFromPoolAsync", 1);
    ck_assert_msg(gpuarena_alloc(a, 4 * MIB, s, &q) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    ck_assert_int_eq(fake.count("disturbed"), 0);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.oom_retries, 1);
    ck_assert_int_eq(gpuarena_free(a, q, s), GPUARENA_SUCCESS);
    fake.pool_reserved(0); /* nothing to give back */
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    fake.capture(NULL);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* device.pool = driver: the block allocated for GPUARENA_STREAM_HOST goes
 * back to the pool when the wait after it fails. */
START_TEST(driver_pool_frees_when_the_wait_fails)
{
    fake_open();
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a), GPUARENA_SUCCESS);
    void *p = NULL;
    fake.arm("cuStreamSynchronize", 1);
    gpuarena_status_t st = gpuarena_alloc(a, 1 * MIB, HOST, &p);
    ck_assert_int_ne(st, GPUARENA_SUCCESS);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "cuStreamSynchronize"));
    ck_assert_int_eq(fake.pool_blocks(), 0);
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.pool_blocks(), 1);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.pool_blocks(), 0);
}
END_TEST

/* A driver-pool arena's free whose recorded uses cannot be watched (no
 * host memory noted the stream) holds the block from the pool until trim
 * waits for the device: it waited for the device in the free, which the
 * driver refuses during any capture, and the capture was broken
 * (cuCtxSynchronize in global capture mode), whether the captured stream
 * was the recorded one or another. */
START_TEST(driver_pool_unknown_uses_spare_a_capture)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000, *const e = (void *)0x7000;
    for (int k = 0; k < 4; k++) {
        bool unknown = k & 1;
        void *cap = k < 2 ? e : d; /* another stream, then the recorded one */
        gpuarena_t *a = NULL;
        ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a), GPUARENA_SUCCESS);
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, MIB, c, &p), GPUARENA_SUCCESS);
        atomic_store(&ga_hostmem_fail, unknown);
        ck_assert_int_eq(gpuarena_record_stream(a, p, d), GPUARENA_SUCCESS);
        atomic_store(&ga_hostmem_fail, false);
        long before = fake.count("disturbed");
        fake.capture(cap);
        gpuarena_status_t st = gpuarena_free(a, p, c);
        fake.capture(NULL);
        ck_assert_msg(fake.count("disturbed") == before, "case %d: a capture disturbed", k);
        /* Refused only where the recorded stream is captured and known. */
        ck_assert_int_eq(st, k == 2 ? GPUARENA_ERR_STREAM_CAPTURE : GPUARENA_SUCCESS);
        if (st != GPUARENA_SUCCESS)
            ck_assert_int_eq(gpuarena_free(a, p, c), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
        gpuarena_stats_t now;
        ck_assert_int_eq(gpuarena_stats(a, &now), GPUARENA_SUCCESS);
        ck_assert_uint_eq(now.retired_cached, 0);
        ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
}
END_TEST

/* device.pool = driver with max_reserved: the bytes in use stay under the
 * cap; past it the pool is not asked at all, and the status says why. */
START_TEST(driver_pool_under_max_reserved)
{
    fake_open();
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver,max_reserved=4M", &a),
                     GPUARENA_SUCCESS);
    void *p[5] = {NULL};
    for (int i = 0; i < 4; i++)
        ck_assert_msg(gpuarena_alloc(a, 1 * MIB, HOST, &p[i]) == GPUARENA_SUCCESS, "%s",
                      gpuarena_last_error());
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MIB, HOST, &p[4]), GPUARENA_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(p[4]);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "max_reserved"));
    ck_assert_int_eq(fake.pool_blocks(), 4);
    ck_assert_int_eq(gpuarena_free(a, p[0], HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MIB, HOST, &p[4]), GPUARENA_SUCCESS);
    for (int i = 1; i < 5; i++)
        ck_assert_int_eq(gpuarena_free(a, p[i], HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.pool_blocks(), 0);
}
END_TEST

/* The last access list the fake was given (POOL: cuMemPoolSetAccess,
 * else cuMemSetAccess), as a string of ordinals: "0 2 3". */
static const char *access_list(int pool)
{
    static char buf[256];
    int ids[64], n = fake.access(pool, ids, 64), at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && i < 64; i++)
        at += snprintf(buf + at, sizeof buf - (size_t)at, "%s%d", i ? " " : "", ids[i]);
    return buf;
}

/* peer_access on a machine of four GPUs, of which devices 2 and 3 can
 * reach device 0's memory and device 1 cannot: a growable segment of
 * device 0 is mapped for device 0 and its two peers, in one
 * cuMemSetAccess, and the driver's pool is opened to the two peers
 * (device 0 has its own memory already): the default.  With
 * peer_access = false, device 0 alone, and the pool is opened to nobody. */
START_TEST(peer_access_opens_to_the_peers)
{
    fake_open();
    fake.devices(4, 1u << 2 | 1u << 3);
    const char *keys[2] = {"expandable=true,thread_cache=false,peer_access=false",
                           "expandable=true,thread_cache=false"};
    const char *want[2] = {"0", "0 2 3"};
    for (int k = 0; k < 2; k++) {
        gpuarena_t *a = NULL;
        ck_assert_msg(gpuarena_create(GPUARENA_DEVICE, 0, keys[k], &a) == GPUARENA_SUCCESS,
                      "%s: %s", keys[k], gpuarena_last_error());
        void *p = NULL;
        ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
        ck_assert_str_eq(access_list(0), want[k]);
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver,peer_access=false", &a),
                     GPUARENA_SUCCESS);
    ck_assert_str_eq(access_list(1), "");
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a), GPUARENA_SUCCESS);
    ck_assert_str_eq(access_list(1), "2 3");
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    /* Peers the driver names but will not open memory to: the driver's
     * error, saying which key avoids it (it read as an invalid device). */
    fake.refuse_peers(1);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, keys[1], &a), GPUARENA_SUCCESS);
    p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_ERR_DRIVER);
    ck_assert_msg(strstr(gpuarena_last_error(), "peer_access = false") != NULL, "%s",
                  gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, keys[0], &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 8 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    fake.refuse_peers(0);
}
END_TEST

/* Key ipc: a growable segment's granules are made exportable as POSIX
 * file descriptors where the device can; not with ipc = false or where the
 * device cannot; and where the driver refuses an exportable granule, the
 * arena makes it plain, asks no more, and its stats' memory line says so.
 * A refusal for memory is no reason to stop asking. */
static char *memory_line(void)
{
    static char line[400];
    ga_memory_line("device", line, sizeof line);
    return line;
}

static void ipc_case(const char *opts, int supported, int refused, long want_fd, long want_plain,
                     const char *say)
{
    fake_open();
    fake.fd_handles(supported, refused);
    long fd0 = fake.count("cuMemCreate exportable"), plain0 = fake.count("cuMemCreate plain");
    gpuarena_t *a = NULL;
    ck_assert_msg(gpuarena_create(GPUARENA_DEVICE, 0, opts, &a) == GPUARENA_SUCCESS, "%s: %s", opts,
                  gpuarena_last_error());
    void *p = NULL, *q = NULL;
    /* 8 MiB in one growable segment: 4 granules of 2 MiB. */
    ck_assert_int_eq(gpuarena_alloc(a, 3 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 5 * MIB, HOST, &q), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("cuMemCreate exportable") - fd0, want_fd);
    ck_assert_int_eq(fake.count("cuMemCreate plain") - plain0, want_plain);
    ck_assert_msg(strstr(memory_line(), say), "%s: memory line \"%s\", not \"%s\"", opts,
                  memory_line(), say);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    fake.fd_handles(1, 0);
}

START_TEST(ipc_makes_granules_exportable)
{
    const char *o = "expandable=true,thread_cache=false,size_classes=0";
    char off[128];
    snprintf(off, sizeof off, "%s,ipc=false", o);
    ipc_case(o, 1, 0, 4, 0, "exportable to other processes as POSIX file descriptors");
    ipc_case(off, 1, 0, 0, 4, "not exportable to other processes (ipc = false)");
    ipc_case(o, 0, 0, 0, 4, "not exportable to other processes (the device cannot)");
    /* Refused: the first granule is asked for exportable, then made plain,
     * and every later one plain. */
    ipc_case(o, 1, 1, 1, 4, "not exportable to other processes: cuMemCreate");
    /* Fixed segments: cuMemAlloc, no granule. */
    ipc_case("expandable=false,thread_cache=false", 1, 0, 0, 0, "cuMemAlloc segments");
    /* Out of memory for an exportable granule: the allocation fails as
     * out of memory (after the arena's one retry), and the next granule is
     * asked for exportable again. */
    fake_open();
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, o, &a), GPUARENA_SUCCESS);
    fake.arm("cuMemCreate", 1);
    void *p = NULL;
    gpuarena_status_t st = gpuarena_alloc(a, 1 * MIB, HOST, &p);
    if (st == GPUARENA_SUCCESS) /* the retry after the release made it */
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    else
        ck_assert_int_eq(st, GPUARENA_ERR_OUT_OF_MEMORY);
    long fd0 = fake.count("cuMemCreate exportable"), plain0 = fake.count("cuMemCreate plain");
    ck_assert_int_eq(gpuarena_alloc(a, 16 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_ge(fake.count("cuMemCreate exportable") - fd0, 8);
    ck_assert_int_eq(fake.count("cuMemCreate plain") - plain0, 0);
    ck_assert_ptr_nonnull(strstr(memory_line(), "exportable to other processes as POSIX"));
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    /* A map that fails after an exportable cuMemCreate succeeded says
     * nothing of the handle type: exporting stays on (it was turned off
     * for any failure, the granule retried plain). */
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, o, &a), GPUARENA_SUCCESS);
    fake.arm("cuMemMap", 1);
    plain0 = fake.count("cuMemCreate plain");
    if (gpuarena_alloc(a, 1 * MIB, HOST, &p) == GPUARENA_SUCCESS)
        ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 16 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("cuMemCreate plain") - plain0, 0);
    ck_assert_ptr_nonnull(strstr(memory_line(), "exportable to other processes as POSIX"));
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Key ipc with pool = driver: the pool is made with POSIX file descriptor
 * handles where the device can (the mask of
 * CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES), plain with
 * ipc = false or where it cannot, and plain after the driver refused the
 * exportable one; the memory line says which, and the arena serves. */
static void pool_ipc_case(const char *opts, int supported, int refused, long want_fd,
                          long want_plain, const char *say)
{
    fake_open();
    fake.fd_handles(supported, refused);
    long fd0 = fake.count("cuMemPoolCreate exportable"),
         plain0 = fake.count("cuMemPoolCreate plain");
    gpuarena_t *a = NULL;
    ck_assert_msg(gpuarena_create(GPUARENA_DEVICE, 0, opts, &a) == GPUARENA_SUCCESS, "%s: %s", opts,
                  gpuarena_last_error());
    ck_assert_int_eq(fake.count("cuMemPoolCreate exportable") - fd0, want_fd);
    ck_assert_int_eq(fake.count("cuMemPoolCreate plain") - plain0, want_plain);
    ck_assert_msg(strstr(memory_line(), say), "%s: memory line \"%s\", not \"%s\"", opts,
                  memory_line(), say);
    void *p = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 1 * MIB, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    fake.fd_handles(1, 0);
}

START_TEST(ipc_makes_driver_pool_exportable)
{
    pool_ipc_case("pool=driver", 1, 0, 1, 0,
                  "the driver's pool (cuMemPoolCreate), exportable to other processes as POSIX");
    pool_ipc_case("pool=driver,ipc=false", 1, 0, 0, 1,
                  "not exportable to other processes (ipc = false)");
    pool_ipc_case("pool=driver", 0, 0, 0, 1,
                  "not exportable to other processes (the device cannot)");
    pool_ipc_case("pool=driver", 1, 1, 1, 1, "not exportable to other processes: cuMemPoolCreate");
}
END_TEST

/* The stats a refused call must leave as they were. */
static void same_counts(gpuarena_t *a, const gpuarena_stats_t *before)
{
    gpuarena_stats_t now;
    ck_assert_int_eq(gpuarena_stats(a, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.live_blocks, before->live_blocks);
    ck_assert_uint_eq(now.allocs, before->allocs);
    ck_assert_uint_eq(now.frees, before->frees);
    ck_assert_uint_eq(now.requested, before->requested);
}

/* The legacy stream (NULL, CU_STREAM_LEGACY) cannot be captured, so a
 * pair that the thread cache serves on it asks the driver nothing: no
 * current context, no capture check; nor does an allocation that a free
 * block of the pools serves.  While a blocking stream is being captured
 * (the legacy stream's check then answers CAPTURE_IMPLICIT), such calls
 * still go through; an operation that would reach the driver is refused
 * first, changes nothing, and puts nothing on the legacy stream.  Streams
 * that can be captured (a created one, the per-thread stream) are checked
 * on every allocation; a free that the thread cache takes asks nothing
 * (free_on_a_captured_stream). */
START_TEST(legacy_stream_asks_only_off_the_cache)
{
    fake_open();
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_SUCCESS);
    void *const legacy[] = {NULL, (void *)0x1};
    void *p = NULL, *q = NULL, *r = NULL;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(gpuarena_alloc(a, 4096, legacy[k], &p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, legacy[k]), GPUARENA_SUCCESS);
        long checks = fake.count("cuStreamIsCapturing");
        long current = fake.count("cuCtxGetCurrent");
        for (int i = 0; i < 1000; i++) {
            ck_assert_int_eq(gpuarena_alloc(a, 4096, legacy[k], &q), GPUARENA_SUCCESS);
            ck_assert_ptr_eq(q, p);
            ck_assert_int_eq(gpuarena_free(a, q, legacy[k]), GPUARENA_SUCCESS);
        }
        ck_assert_int_eq(fake.count("cuStreamIsCapturing"), checks);
        ck_assert_int_eq(fake.count("cuCtxGetCurrent"), current);
    }
    void *const checked[] = {(void *)0x5000, (void *)0x2};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(gpuarena_alloc(a, 4096, checked[k], &p), GPUARENA_SUCCESS);
        ck_assert_int_eq(gpuarena_free(a, p, checked[k]), GPUARENA_SUCCESS);
        long checks = fake.count("cuStreamIsCapturing");
        for (int i = 0; i < 100; i++) {
            ck_assert_int_eq(gpuarena_alloc(a, 4096, checked[k], &q), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_free(a, q, checked[k]), GPUARENA_SUCCESS);
        }
        ck_assert_int_eq(fake.count("cuStreamIsCapturing"), checks + 100);
    }

    /* A block too large for the thread cache, live across the capture;
     * used on another stream, so that its free records events and asks
     * first (a free that needs none goes through: check_block). */
    void *big = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 256 * MIB, NULL, &big), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_record_stream(a, big, (void *)0x5000), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, NULL, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, NULL), GPUARENA_SUCCESS);
    fake.blocking_capture(1);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, NULL, &q), GPUARENA_SUCCESS); /* cached */
    ck_assert_ptr_eq(q, p);
    ck_assert_int_eq(gpuarena_free(a, q, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, (void *)0x2, &r), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, r, (void *)0x2), GPUARENA_SUCCESS);
    /* Not in the thread cache, but in the pools: the segment of the
     * 4 KiB block has room. */
    long checks = fake.count("cuStreamIsCapturing");
    ck_assert_int_eq(gpuarena_alloc(a, 8192, NULL, &r), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, r, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("cuStreamIsCapturing"), checks);
    /* New memory: refused before it is mapped. */
    gpuarena_stats_t before;
    ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
    r = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 64 * MIB, NULL, &r), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(gpuarena_free(a, big, NULL), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_eq(gpuarena_record_stream(a, big, NULL), GPUARENA_ERR_STREAM_CAPTURE);
    same_counts(a, &before);
    fake.blocking_capture(0);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);

    /* The capture over, the refused calls go through. */
    ck_assert_int_eq(gpuarena_alloc(a, 64 * MIB, NULL, &r), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, r, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, big, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);

    /* The driver's pool: every call reaches the driver with the stream. */
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, NULL, &p), GPUARENA_SUCCESS);
    long pool = fake.pool_blocks();
    fake.blocking_capture(1);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, NULL, &r), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_eq(gpuarena_free(a, p, NULL), GPUARENA_ERR_STREAM_CAPTURE);
    fake.blocking_capture(0);
    ck_assert_int_eq(fake.pool_blocks(), pool);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_free(a, p, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* An arena made while a blocking stream of its device is being captured
 * (a CUDA graph pool's, when CuPy captures on a blocking stream or on
 * the per-thread one): the driver refuses the legacy stream's id then,
 * and asking for it invalidates the capture, so the arena takes the id
 * that an arena of the same context asked for before.  With none made
 * before, the creation is refused and changes nothing.  The capture is
 * never disturbed. */
START_TEST(arena_made_during_a_blocking_capture)
{
    fake_open();
    fake.new_context(); /* no arena made in it yet */
    long disturbed = fake.count("disturbed");
    gpuarena_t *a = NULL, *b = NULL;
    fake.blocking_capture(1);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_null(a);
    ck_assert_ptr_nonnull(strstr(gpuarena_last_error(), "CAPTURE_IMPLICIT"));
    fake.blocking_capture(0);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_SUCCESS);
    fake.blocking_capture(1);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=arena,cross_stream=never", &b),
                     GPUARENA_SUCCESS);
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(b, 4096, (void *)0x5000, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(b, p, (void *)0x5000), GPUARENA_SUCCESS);
    fake.blocking_capture(0);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    /* B names the legacy stream: a block freed there is its own again. */
    ck_assert_int_eq(gpuarena_alloc(b, 4096, NULL, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(b, p, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(b, 4096, NULL, &q), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(q, p);
    ck_assert_int_eq(gpuarena_free(b, q, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(b), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* A free on a created stream that is being captured asks the driver
 * nothing where it puts nothing on the stream: into the thread cache, or
 * into the stream's pool.  It is not refused: the block waits there, and
 * only an allocation, which is always checked, takes it back, after the
 * capture.  A free that would record an event on the stream (recorded
 * uses) is refused first and changes nothing; nothing disturbs the
 * capture.  The first free on a stream that this thread has not named
 * yet is checked as an allocation is. */
struct on_stream {
    gpuarena_t *a;
    void *stream, *p;
    gpuarena_status_t st;
};

static void *alloc_4k_on(void *arg)
{
    struct on_stream *o = arg;
    o->st = gpuarena_alloc(o->a, 4096, o->stream, &o->p);
    return NULL;
}

START_TEST(free_on_a_captured_stream)
{
    fake_open();
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_SUCCESS);
    void *const c = (void *)0x5000, *const d = (void *)0x6000, *const e = (void *)0x7000;
    void *p = NULL, *q = NULL, *used = NULL, *big[2] = {NULL, NULL};
    ck_assert_int_eq(gpuarena_alloc(a, 4096, c, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, c), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, c, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, c, &used), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_record_stream(a, used, d), GPUARENA_SUCCESS);
    /* Blocks above thread_cache_large: their frees take the lock.  One
     * freed before the capture gives the stream its pool. */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(gpuarena_alloc(a, 256 * MIB, c, &big[i]), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, big[0], c), GPUARENA_SUCCESS);
    /* Q is allocated on E by another thread: this one has not named E. */
    struct on_stream o = {a, e, NULL, GPUARENA_ERR_DRIVER};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_4k_on, &o), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(o.st, GPUARENA_SUCCESS);
    q = o.p;

    fake.capture(c);
    long checks = fake.count("cuStreamIsCapturing");
    ck_assert_int_eq(gpuarena_free(a, p, c), GPUARENA_SUCCESS);      /* thread cache */
    ck_assert_int_eq(gpuarena_free(a, big[1], c), GPUARENA_SUCCESS); /* the pool */
    ck_assert_int_eq(fake.count("cuStreamIsCapturing"), checks);
    gpuarena_stats_t before;
    ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
    void *r = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, c, &r), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(gpuarena_alloc(a, 256 * MIB, c, &r), GPUARENA_ERR_STREAM_CAPTURE);
    ck_assert_int_eq(gpuarena_free(a, used, c), GPUARENA_ERR_STREAM_CAPTURE);
    same_counts(a, &before);
    ck_assert_int_eq(fake.count("cuStreamIsCapturing"), checks + 3);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    fake.capture(NULL);

    /* A stream this thread has not named yet is asked on its first free,
     * while it is captured: refused, before anything changes. */
    fake.capture(e);
    ck_assert_int_eq(gpuarena_free(a, q, e), GPUARENA_ERR_STREAM_CAPTURE);
    same_counts(a, &before);
    fake.capture(NULL);
    ck_assert_int_eq(fake.count("disturbed"), 0);

    /* After the capture, allocations on the stream take the blocks freed
     * during it. */
    ck_assert_int_eq(gpuarena_alloc(a, 4096, c, &r), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(r, p);
    ck_assert_int_eq(gpuarena_free(a, r, c), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, used, c), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, q, e), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    gpuarena_stats_t end;
    ck_assert_int_eq(gpuarena_stats(a, &end), GPUARENA_SUCCESS);
    ck_assert_uint_eq(end.live_blocks, 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* Frees on a stream during its capture, into a pool that other streams
 * share (cross-stream traffic): such a free may ask for a sweep of the
 * pool (ga_sweep_shared), which was then recorded on the captured stream
 * by that same free, unchecked: the capture was broken.  The sweep waits
 * for the next free on the stream, which is checked. */
START_TEST(shared_pool_free_spares_a_capture)
{
    fake_open();
    void *const s1 = (void *)0x1000, *const s2 = (void *)0x2000;
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "thread_cache=false", &a),
                     GPUARENA_SUCCESS);
    void *p[16], *q;
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(gpuarena_alloc(a, MIB, s1, &p[i]), GPUARENA_SUCCESS);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(gpuarena_free(a, p[i], s1), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, MIB, s2, &q), GPUARENA_SUCCESS); /* misses: shared */
    ck_assert_int_eq(gpuarena_free(a, p[8], s1), GPUARENA_SUCCESS);     /* records its sweep */
    long before = fake.count("disturbed");
    fake.capture(s1);
    for (int i = 9; i < 16; i++) {
        gpuarena_status_t st = gpuarena_free(a, p[i], s1);
        ck_assert_msg(fake.count("disturbed") == before, "free %d disturbed the capture", i);
        ck_assert(st == GPUARENA_SUCCESS || st == GPUARENA_ERR_STREAM_CAPTURE);
        if (st == GPUARENA_SUCCESS)
            p[i] = NULL;
    }
    fake.capture(NULL);
    for (int i = 9; i < 16; i++)
        if (p[i])
            ck_assert_int_eq(gpuarena_free(a, p[i], s1), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, q, s2), GPUARENA_SUCCESS);
    ck_assert_msg(gpuarena_check(a) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* PyTorch's and CuPy's free hooks return nothing, so a free that gpuarena
 * refuses during a CUDA graph capture (the block has recorded uses: its
 * free would record an event on a stream being captured) is not dropped
 * with its block live for good: the hook keeps it, and the next call of
 * a hook, gpuarena_trim or gpuarena_destroy after the capture makes it
 * (deferred.c).  Nothing disturbs the capture meanwhile. */
START_TEST(hooks_free_after_the_capture)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    void *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_record_stream(p, d);
    gpuarena_stats_t before, now;
    ck_assert_int_eq(gpuarena_stats(dev, &before), GPUARENA_SUCCESS);
    ck_assert_uint_eq(before.live_blocks, 1);
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c);
    ck_assert_msg(strstr(gpuarena_last_error(), "waits for the capture") != NULL, "%s",
                  gpuarena_last_error());
    gpuarena_torch_empty_cache(); /* the capture goes on: the free still waits */
    gpuarena_torch_free(NULL, 0, 0, c);
    same_counts(dev, &before);
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, 1);
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c); /* any hook call, even one with nothing to free */
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.live_blocks, 0);
    ck_assert_uint_eq(now.frees, before.frees + 1);
    ck_assert_uint_eq(now.deferred_frees, 0);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);

    /* CuPy's hook frees on the legacy stream, whose check fails while a
     * blocking stream is captured; an arena of the caller's (PARAM), which
     * gpuarena_destroy refuses while the free waits and destroys once it
     * could make it. */
    gpuarena_t *a = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &a), GPUARENA_SUCCESS);
    void *q = gpuarena_cupy_malloc(a, 4096, 0);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(gpuarena_record_stream(a, q, c), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
    fake.blocking_capture(1);
    gpuarena_cupy_free(a, q, 0);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    same_counts(a, &before);
    ck_assert_int_eq(gpuarena_stats(a, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, 1);
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, 0); /* counted for the block's arena only */
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_ERR_BUSY);
    fake.blocking_capture(0);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

/* CuPy's PARAM arena must hold memory that CuPy's device uses as its
 * own: a device arena of that device or a managed one (a sim one for
 * tests).  A host or pinned arena (host memory) or another GPU's device
 * arena is refused with INVALID_ARGUMENT, nothing allocated; before,
 * each handed out a block that CuPy then used as its device's memory. */
START_TEST(cupy_param_arena_of_the_device)
{
    fake_open();
    fake.devices(2, 0);
    gpuarena_t *host = NULL, *sim = NULL, *dev1 = NULL, *dev0 = NULL, *man = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &host), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_SIM, 0, NULL, &sim), GPUARENA_SUCCESS);
    gpuarena_t *pinned = NULL; /* the fake driver has no cuMemHostRegister: made if it can */
    if (gpuarena_create(GPUARENA_PINNED, 0, NULL, &pinned) != GPUARENA_SUCCESS)
        pinned = NULL;
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 1, NULL, &dev1), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &dev0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_MANAGED, 1, NULL, &man), GPUARENA_SUCCESS);
    gpuarena_t *refused[] = {host, dev1, pinned};
    const char *why[] = {"a host arena", "is of GPU 1, CuPy asked for GPU 0", "a pinned arena"};
    for (int i = 0; i < (pinned ? 3 : 2); i++) {
        gpuarena_stats_t before;
        ck_assert_int_eq(gpuarena_stats(refused[i], &before), GPUARENA_SUCCESS);
        ck_assert_ptr_null(gpuarena_cupy_malloc(refused[i], 4096, 0));
        ck_assert_msg(strstr(gpuarena_last_error(), why[i]) != NULL, "%s", gpuarena_last_error());
        same_counts(refused[i], &before);
    }
    void *p = gpuarena_cupy_malloc(dev0, 4096, 0);
    ck_assert_ptr_nonnull(p);
    gpuarena_cupy_free(dev0, p, 0);
    p = gpuarena_cupy_malloc(man, 4096, 0); /* managed memory: any device */
    ck_assert_ptr_nonnull(p);
    gpuarena_cupy_free(man, p, 0);
    p = gpuarena_cupy_malloc(sim, 4096, 0); /* for tests */
    ck_assert_ptr_nonnull(p);
    gpuarena_cupy_free(sim, p, 0);
    gpuarena_t *all[] = {host, sim, dev1, dev0, man, pinned};
    for (int i = 0; i < (pinned ? 6 : 5); i++)
        ck_assert_int_eq(gpuarena_destroy(all[i]), GPUARENA_SUCCESS);
    fake.devices(1, 0);
}
END_TEST

/* A pinned segment whose registration the driver refuses is no segment:
 * not counted in numa_unbound, though its binding was not made (the
 * topology of another machine, GPUARENA_TOPOLOGY, binds nothing here).
 * It counted one for each try (2, the out-of-memory retry's too). */
START_TEST(pinned_failed_registration_is_not_unbound)
{
    fake_open();
    setenv("GPUARENA_TOPOLOGY", GA_TEST_DATA "/power8gpudistances.xml", 1);
    gpuarena_t *a = NULL;
    ck_assert_msg(gpuarena_create(GPUARENA_PINNED, 0, "numa=1", &a) == GPUARENA_SUCCESS, "%s",
                  gpuarena_last_error());
    void *p = NULL;
    fake.arm("cuMemHostRegister", -1);
    ck_assert_int_ne(gpuarena_alloc(a, 4096, GPUARENA_STREAM_HOST, &p), GPUARENA_SUCCESS);
    fake.arm("cuMemHostRegister", 0);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.segments, 0);
    ck_assert_uint_eq(st.numa_unbound, 0);
    ck_assert_int_eq(fake.host_registered(), 0);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    unsetenv("GPUARENA_TOPOLOGY");
}
END_TEST

/* A pinned arena's fixed segments over the fake driver's registration:
 * each registered once, unregistered at the trim that gives it back; one
 * whose unregister the driver refuses stays cached, still registered, and
 * goes at the next trim; the destroy leaves nothing registered. */
START_TEST(pinned_segments_registered_and_given_back)
{
    gpuarena_t *a = made(GPUARENA_PINNED, "thread_cache=false");
    void *p = NULL, *q = NULL;
    ck_assert_int_eq(gpuarena_alloc(a, 4096, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(a, 64 * MIB, HOST, &q), GPUARENA_SUCCESS);
    memset(p, 1, 4096);
    memset(q, 2, 64 * MIB);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.host_registered(), (int)st.segments);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, q, HOST), GPUARENA_SUCCESS);
    fake.arm("cuMemHostUnregister", 1);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.host_registered(), (int)st.segments);
    ck_assert_uint_eq(st.segments, 1); /* the one the driver would not let go */
    ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_trim(a, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.host_registered(), 0);
    ck_assert_int_eq(gpuarena_alloc(a, 4096, HOST, &p), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.host_registered(), 0);
}
END_TEST

/* A free refused for a capture is kept by PyTorch's hook for later: one
 * of a pointer that is no live block (inside a block, never handed out)
 * is that error instead, never kept or counted, whatever the stream.
 * Before, a stream new to the thread and being captured was refused
 * first, and the hook kept the bad pointer as a deferred free. */
START_TEST(hooks_bad_free_during_capture)
{
    fake_open();
    void *const c = (void *)0x5000, *const n = (void *)0x9000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    char *p = gpuarena_torch_alloc(1000, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_stats_t before, now;
    ck_assert_int_eq(gpuarena_stats(dev, &before), GPUARENA_SUCCESS);
    fake.capture(n); /* N: never named to this thread */
    ck_assert_int_eq(gpuarena_free(dev, (void *)0x1234, n), GPUARENA_ERR_INVALID_POINTER);
    ck_assert_int_eq(gpuarena_free(dev, p + 8, n), GPUARENA_ERR_INTERIOR_POINTER);
    ck_assert_msg(strstr(gpuarena_last_error(), "gpuarena_free: ") == gpuarena_last_error(), "%s",
                  gpuarena_last_error());
    gpuarena_torch_free(p + 8, 1000, 0, n);
    ck_assert_msg(strstr(gpuarena_last_error(), "points inside a block") != NULL, "%s",
                  gpuarena_last_error());
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, 0);
    same_counts(dev, &before);
    /* The block itself, on that stream: refused for the capture, kept. */
    ck_assert_int_eq(gpuarena_free(dev, p, n), GPUARENA_ERR_STREAM_CAPTURE);
    fake.capture(NULL);
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(gpuarena_free(dev, p, c), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
}
END_TEST

/* Two blocks whose frees a capture will refuse: *P from PyTorch's hook
 * on stream C, read on D; *Q from a CuPy arena *MINE of its own, read on
 * C.  Then D is captured, and a blocking stream (the legacy stream
 * refused). */
static void two_frees_to_keep(void *c, void *d, gpuarena_t **dev, gpuarena_t **mine, void **p,
                              void **q)
{
    fake_open();
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, mine), GPUARENA_SUCCESS);
    *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(*p);
    gpuarena_torch_record_stream(*p, d);
    *q = gpuarena_cupy_malloc(*mine, 4096, 0);
    ck_assert_ptr_nonnull(*q);
    ck_assert_int_eq(gpuarena_record_stream(*mine, *q, c), GPUARENA_SUCCESS);
    fake.capture(d);
    fake.blocking_capture(1);
}

/* A block freed twice through the hooks during a capture: the second
 * free is a double free, not kept again.  Kept twice, the second record,
 * left behind a third still refused, freed the block's next owner once
 * the first was made (the block then handed out twice). */
START_TEST(hooks_double_free_during_capture)
{
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL, *mine = NULL;
    void *p = NULL, *q = NULL;
    two_frees_to_keep(c, d, &dev, &mine, &p, &q);
    gpuarena_torch_free(p, 4096, 0, c); /* kept: its event goes on d */
    gpuarena_cupy_free(mine, q, 0);     /* kept: the legacy stream, a blocking capture */
    gpuarena_torch_free(p, 4096, 0, c); /* the program's double free */
    ck_assert_msg(strstr(gpuarena_last_error(), "already freed") != NULL, "%s",
                  gpuarena_last_error());
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(dev, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.deferred_frees, 1);
    fake.capture(NULL); /* d's capture ends; the blocking one goes on */
    void *x = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(x);
    fake.blocking_capture(0);
    gpuarena_torch_free(NULL, 0, 0, c); /* any hook call makes what is kept */
    void *y = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_ne(x, y);
    ck_assert_int_eq(gpuarena_stats(dev, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.deferred_frees, 0);
    gpuarena_torch_free(x, 4096, 0, c);
    gpuarena_torch_free(y, 4096, 0, c);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(mine), GPUARENA_SUCCESS);
}
END_TEST

static void *any_hook_call(void *arg)
{
    gpuarena_torch_free(NULL, 0, 0, arg);
    return NULL;
}

/* A kept free whose stream can no longer be named when it is made (the
 * stream destroyed after the capture, its handle then another context's):
 * made with no stream, the block waiting in limbo for a wait for the
 * whole device.  It was dropped as made: the block live for good, no
 * longer counted as deferred. */
START_TEST(deferred_free_of_a_stream_gone)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    void *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_record_stream(p, d);
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c); /* kept */
    fake.capture(NULL);
    fake.foreign_stream(c);
    pthread_t th; /* a thread that has not named C lately */
    ck_assert_int_eq(pthread_create(&th, NULL, any_hook_call, (void *)0x7000), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    fake.foreign_stream(NULL);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(dev, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.deferred_frees, 0);
    ck_assert_uint_eq(st.live_blocks, 0);
    /* In limbo: no stream takes it before a wait for the device. */
    void *q = gpuarena_torch_alloc(4096, 0, d);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_ne(q, p);
    gpuarena_torch_free(q, 4096, 0, d);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
}
END_TEST

/* The same double free once the capture that refused the first free is
 * over, while that free is still kept (behind another kept free still
 * refused): the arena would take it, the block being live to it, and the
 * kept record then freed the block's next owner. */
START_TEST(hooks_double_free_after_the_capture)
{
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL, *mine = NULL;
    void *p = NULL, *q = NULL;
    two_frees_to_keep(c, d, &dev, &mine, &p, &q);
    gpuarena_cupy_free(mine, q, 0);     /* kept first, refused until the blocking capture ends */
    gpuarena_torch_free(p, 4096, 0, c); /* kept: its event goes on d */
    fake.capture(NULL);                 /* d's capture is over */
    gpuarena_torch_free(p, 4096, 0, c); /* the program's double free */
    ck_assert_msg(strstr(gpuarena_last_error(), "already freed") != NULL, "%s",
                  gpuarena_last_error());
    void *x = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(x);
    fake.blocking_capture(0);
    gpuarena_torch_free(NULL, 0, 0, c); /* makes what is kept */
    void *y = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_ne(x, y);
    gpuarena_torch_free(x, 4096, 0, c);
    gpuarena_torch_free(y, 4096, 0, c);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(dev, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.live_blocks, 0);
    ck_assert_uint_eq(st.deferred_frees, 0);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(mine), GPUARENA_SUCCESS);
}
END_TEST

/* The child of deferred_free_kept_across_a_fork: 1 when its hook call
 * dropped the parent's kept free (taken as made: the block still live,
 * no longer counted as deferred). */
static int deferred_stays(void *arg)
{
    gpuarena_t *dev = arg;
    (void)gpuarena_torch_alloc(4096, 0, (void *)0x5000); /* refused: the parent's arena */
    gpuarena_stats_t st;
    if (gpuarena_stats(dev, &st) != GPUARENA_SUCCESS)
        return 2;
    return st.deferred_frees == 1 && st.live_blocks == 1 ? 0 : 1;
}

/* A free kept for a capture when the process forks: the child's hook
 * calls leave it as the parent had it (gpuarena(7), Fork), and the
 * parent makes it after the capture. */
START_TEST(deferred_free_kept_across_a_fork)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    void *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_record_stream(p, d);
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c);
    ga_require_child_ok(ga_fork_run(deferred_stays, dev, 30), "the child");
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c);
    gpuarena_stats_t st;
    ck_assert_int_eq(gpuarena_stats(dev, &st), GPUARENA_SUCCESS);
    ck_assert_uint_eq(st.deferred_frees, 0);
    ck_assert_uint_eq(st.live_blocks, 0);
}
END_TEST

/* A free deferred while the host has no memory for its record is kept
 * all the same, in one of a reserve of records (deferred.c): it was
 * lost, its block live for good.  Only with the whole reserve holding
 * frees is one refused, said so, its block still live and the program's
 * to free again. */
START_TEST(deferred_free_without_host_memory)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    enum { N = 65 }; /* the reserve's 64 and one more */
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    static void *p[N];
    for (unsigned i = 0; i < N; i++) {
        p[i] = gpuarena_torch_alloc(4096, 0, c);
        ck_assert_ptr_nonnull(p[i]);
        gpuarena_torch_record_stream(p[i], d);
    }
    fake.capture(d);
    atomic_store(&ga_hostmem_fail, true);
    for (unsigned i = 0; i < N; i++) {
        gpuarena_torch_free(p[i], 4096, 0, c);
        const char *why = i + 1 < N ? "waits for the capture" : "the block stays live";
        ck_assert_msg(strstr(gpuarena_last_error(), why) != NULL, "free %u: %s", i,
                      gpuarena_last_error());
    }
    atomic_store(&ga_hostmem_fail, false);
    gpuarena_stats_t now;
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, N - 1);
    ck_assert_uint_eq(now.live_blocks, N);
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c); /* the next hook call makes them */
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.deferred_frees, 0);
    ck_assert_uint_eq(now.live_blocks, 1);
    gpuarena_torch_free(p[N - 1], 4096, 0, c); /* the refused one, freed again */
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.live_blocks, 0);
    /* The reserve is free again: a capture's frees are kept as before. */
    void *q = gpuarena_torch_alloc(4096, 0, c);
    gpuarena_torch_record_stream(q, d);
    fake.capture(d);
    atomic_store(&ga_hostmem_fail, true);
    gpuarena_torch_free(q, 4096, 0, c);
    atomic_store(&ga_hostmem_fail, false);
    ck_assert_msg(strstr(gpuarena_last_error(), "waits for the capture") != NULL, "%s",
                  gpuarena_last_error());
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(gpuarena_stats(dev, &now), GPUARENA_SUCCESS);
    ck_assert_uint_eq(now.live_blocks, 0);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("disturbed"), 0);
}
END_TEST

/* Allocates 1 MiB with PyTorch's hook on the stream in *ARG, as
 * autograd's threads do for make_graphed_callables' backward capture;
 * the block replaces *ARG. */
static void *torch_alloc_on(void *arg)
{
    void **io = arg;
    *io = gpuarena_torch_alloc(MIB, 0, *io);
    return NULL;
}

/* PyTorch's CUDA graph pools (graphpool.c): between begin and end of
 * allocating to a pool, an allocation on a captured stream that the
 * default arena refuses comes from the pool's own arena, with nothing
 * that disturbs the capture; a block freed during the capture is taken
 * again by the capture, in stream order; an allocation of another thread
 * under the same capture (autograd's, for a backward pass) goes to the
 * same pool, even as the capture's first; the default arena is untouched
 * and never hands out the pool's blocks; once the pool is released and
 * its last block freed, its memory goes back to the driver. */
START_TEST(torch_graph_pools)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    const gpuarena_torch_pool_t id = {0, 7};
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(e);
    gpuarena_torch_free(e, MIB, 0, c); /* cached in the default arena */
    gpuarena_stats_t before;
    ck_assert_int_eq(gpuarena_stats(dev, &before), GPUARENA_SUCCESS);
    int handles = fake.handles();

    fake.capture(c);
    ck_assert_ptr_null(gpuarena_torch_alloc(MIB, 0, c)); /* no pool begun: refused */
    ck_assert_msg(strstr(gpuarena_last_error(), "captured") != NULL, "%s", gpuarena_last_error());
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    void *t = c;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, torch_alloc_on, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_ptr_nonnull(t);
    gpuarena_torch_free(t, MIB, 0, c);
    void *p = gpuarena_torch_alloc(4096, 0, c), *q = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_eq(q, t); /* the pool that the other thread's allocation bound */
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_ne(q, e);
    gpuarena_torch_record_stream(p, d); /* a pool block is known to the hook */
    ck_assert_int_eq(gpuarena_torch_alloc(0, 0, c) == NULL, 1);
    gpuarena_torch_free(q, MIB, 0, c); /* a temporary of the captured code */
    void *q2 = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_eq(q2, q);
    /* Above thread_cache_large: the free goes to the pool's lock, not
     * refused for the capture, and the capture takes the block again. */
    void *big = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_nonnull(big);
    gpuarena_torch_free(big, 128 * MIB, 0, c);
    ck_assert_ptr_eq(gpuarena_torch_alloc(128 * MIB, 0, c), big);
    gpuarena_torch_free(big, 128 * MIB, 0, c);
    same_counts(dev, &before);
    ck_assert_int_gt(fake.handles(), handles); /* the pool mapped its own memory */
    gpuarena_torch_end_allocate_to_pool(0, id);
    ck_assert_ptr_null(gpuarena_torch_alloc(MIB, 0, c)); /* ended: refused again */
    fake.capture(NULL);
    ck_assert_int_eq(fake.count("disturbed"), 0);

    /* After the capture: the graph's output freed by eager code goes back
     * to the pool; eager allocations come from the default arena. */
    gpuarena_torch_free(q2, MIB, 0, c);
    void *x = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_eq(x, e);
    gpuarena_torch_free(x, MIB, 0, c);
    gpuarena_torch_release_pool(0, id);
    ck_assert_int_gt(fake.handles(), handles); /* P is still live */
    /* P's free is refused while D, which P was recorded on, is captured:
     * kept (deferred.c), and made by the next hook call after the
     * capture, which then destroys the released pool's arena. */
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c);
    ck_assert_int_gt(fake.handles(), handles);
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(fake.handles(), handles); /* the pool's arena is gone */
    gpuarena_stats_t after;
    ck_assert_int_eq(gpuarena_stats(dev, &after), GPUARENA_SUCCESS);
    ck_assert_uint_eq(after.live_blocks, 0);
    ck_assert_int_eq(gpuarena_check(dev), GPUARENA_SUCCESS);
}
END_TEST

/* Two graphs captured on C into POOL, each allocating and freeing a
 * temporary, the first with no host memory for the pool's record when
 * NO_MEMORY; then each released: the pool's memory goes back to the
 * driver with the second release only, and a third does nothing. */
static void two_graphs_share(gpuarena_torch_pool_t pool, void *c, bool no_memory)
{
    void *e = gpuarena_torch_alloc(MIB, 0, c); /* the default arena first */
    gpuarena_torch_free(e, MIB, 0, c);
    int handles = fake.handles();
    for (int graph = 0; graph < 2; graph++) {
        atomic_store(&ga_hostmem_fail, no_memory && graph == 0);
        gpuarena_torch_begin_allocate_to_pool(0, pool, NULL);
        atomic_store(&ga_hostmem_fail, false);
        fake.capture(c);
        void *t = gpuarena_torch_alloc(4 * MIB, 0, c);
        ck_assert_msg(t != NULL, "graph %d: %s", graph, gpuarena_last_error());
        gpuarena_torch_free(t, 4 * MIB, 0, c); /* a temporary of the captured code */
        fake.capture(NULL);
        gpuarena_torch_end_allocate_to_pool(0, pool);
    }
    int with_pool = fake.handles();
    ck_assert_int_gt(with_pool, handles);
    gpuarena_torch_release_pool(0, pool); /* graph 1 deleted; graph 2 replays on */
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(fake.handles(), with_pool);
    gpuarena_torch_release_pool(0, pool); /* graph 2 deleted */
    ck_assert_int_eq(fake.handles(), handles);
    gpuarena_torch_release_pool(0, pool); /* one release too many: nothing */
    ck_assert_int_eq(fake.handles(), handles);
}

/* PyTorch shares a pool between graphs (pool=g1.pool(),
 * make_graphed_callables): each graph's capture begins it and each
 * graph's deletion releases it once.  The first release gave the pool's
 * memory back while the other graph lived (its replays would write
 * memory handed to other tensors); it goes with the last. */
START_TEST(torch_pool_shared_by_two_graphs)
{
    fake_open();
    void *const c = (void *)0x5000;
    two_graphs_share((gpuarena_torch_pool_t){0, 21}, c, false);
}
END_TEST

/* A pool's record that calloc could not make (no host memory) comes
 * from a reserve (graphpool.c): without it, graph 1's capture was refused
 * its allocations and counted no use of the pool, and its release gave
 * back the memory of graph 2, which shared the pool and replays on.  With
 * the reserve held, a begin says so (and raises in PyTorch); a released
 * pool gives its record back to the reserve. */
START_TEST(torch_pool_record_without_host_memory)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t pool = {0, 23};
    two_graphs_share(pool, c, true);
    int handles = fake.handles();

    /* The reserve's eight records held by eight pools: a ninth begin
     * fails, clearly; releasing them gives the records back. */
    atomic_store(&ga_hostmem_fail, true);
    for (unsigned long i = 0; i < 9; i++) {
        gpuarena_torch_begin_allocate_to_pool(0, (gpuarena_torch_pool_t){1, i}, NULL);
        gpuarena_torch_end_allocate_to_pool(0, (gpuarena_torch_pool_t){1, i});
        if (i < 8)
            continue;
        ck_assert_msg(strstr(gpuarena_last_error(), "reserved records are held") != NULL, "%s",
                      gpuarena_last_error());
    }
    for (unsigned long i = 0; i < 8; i++)
        gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){1, i});
    gpuarena_torch_begin_allocate_to_pool(0, pool, NULL);
    atomic_store(&ga_hostmem_fail, false);
    fake.capture(c);
    void *t = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_msg(t != NULL, "%s", gpuarena_last_error());
    gpuarena_torch_free(t, MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, pool);
    gpuarena_torch_release_pool(0, pool);
    ck_assert_int_eq(fake.handles(), handles);
}
END_TEST

/* A capture the driver invalidated (a synchronisation in the captured
 * code): PyTorch raises before it ends allocating to the pool, and never
 * releases it.  The thread's next capture begins another pool: the first
 * counts as ended there, so that an allocation of another thread under
 * the new capture (autograd's) finds one pool begun and unbound, not two
 * (it was refused), and released pools are destroyed again (none was
 * while the first stayed begun). */
START_TEST(torch_pool_of_a_failed_capture)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t failed = {0, 31}, next = {0, 32};
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    int handles = fake.handles();
    gpuarena_torch_begin_allocate_to_pool(0, failed, NULL); /* never ended, never released */
    gpuarena_torch_begin_allocate_to_pool(0, next, NULL);
    fake.capture(c);
    void *t = c;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, torch_alloc_on, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(t != NULL, "autograd's allocation refused: %s", gpuarena_last_error());
    gpuarena_torch_free(t, MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, next);
    ck_assert_int_gt(fake.handles(), handles);
    gpuarena_torch_release_pool(0, next);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(fake.handles(), handles); /* the released pool's memory is back */
}
END_TEST

/* Graph 1 captured into pool KEPT on C, its 64 MiB output *OUT kept
 * live; then pool FAILED begun and its capture on C under way, its first
 * allocation *Y made (*FAILED_HOLDS: the granules that took).  The
 * handles the fake held before graph 1. */
static int graph_then_another_capture(void *c, gpuarena_torch_pool_t kept,
                                      gpuarena_torch_pool_t failed, void **out, void **y,
                                      int *failed_holds)
{
    fake_open();
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    int handles = fake.handles();
    gpuarena_torch_begin_allocate_to_pool(0, kept, NULL);
    fake.capture(c);
    *out = gpuarena_torch_alloc(64 * MIB, 0, c);
    ck_assert_ptr_nonnull(*out);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, kept);
    gpuarena_torch_begin_allocate_to_pool(0, failed, NULL);
    int before_failed = fake.handles();
    fake.capture(c);
    *y = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(*y);
    *failed_holds = fake.handles() - before_failed;
    return handles;
}

/* A capture that failed after its first allocation leaves its pool
 * begun and bound: the driver says its capture is over, so it counts as
 * ended.  Before, a graph released after it kept its memory until the
 * failed capture's thread began another pool, and every later hook call
 * of every thread tried again to give it back (20 times slower each,
 * counting every thread's cached blocks). */
START_TEST(torch_pool_released_after_a_failed_capture)
{
    void *const c = (void *)0x5000, *out, *y;
    int failed_holds;
    int handles = graph_then_another_capture(
        c, (gpuarena_torch_pool_t){0, 33}, (gpuarena_torch_pool_t){0, 34}, &out, &y, &failed_holds);
    fake.capture(NULL); /* it fails: PyTorch raises, never ends the pool */
    gpuarena_torch_free(y, MIB, 0, c);
    /* Eager again: graph 1 is deleted, then its output. */
    gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){0, 33});
    int disturbed = fake.count("disturbed");
    gpuarena_torch_free(out, 64 * MIB, 0, c);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    /* Pool 1's memory is back; the failed pool's 1 MiB is held until
     * PyTorch releases it (it never does: the process's end). */
    ck_assert_int_eq(fake.handles(), handles + failed_holds);
    ck_assert_int_eq(atomic_load(&ga_graph_pools_gone), 0); /* nothing left for later calls */
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 1);
}
END_TEST

/* A second graph captured into the shared pool, on stream *ARG: its
 * first allocation, made in its thread, to *ARG. */
static void *begin_shared_on(void *arg)
{
    void **io = arg;
    fake.capture(*io);
    gpuarena_torch_begin_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 40}, NULL);
    *io = gpuarena_torch_alloc(MIB, 0, *io);
    return NULL;
}

/* Graphs share pool P: thread 1's capture into it is over (ended, or
 * invalidated), seen so by a hook call, and thread 2 begins P for its own
 * capture before thread 1 ends P (PyTorch ends after the capture) or
 * begins another pool (after a failed capture).  Thread 1's stale begin
 * took thread 2's away: its allocations were refused, or went to thread
 * 1's next pool, whose release then gave back memory that thread 2's
 * live graph writes. */
START_TEST(torch_pool_stale_begin_spares_another_threads)
{
    fake_open();
    void *const c1 = (void *)0x5000, *const c2 = (void *)0x6000;
    const gpuarena_torch_pool_t p = {0, 40}, q = {0, 41};
    for (int late_end = 0; late_end < 2; late_end++) {
        void *e = gpuarena_torch_alloc(MIB, 0, c1);
        gpuarena_torch_free(e, MIB, 0, c1);
        gpuarena_torch_begin_allocate_to_pool(0, p, NULL);
        fake.capture(c1);
        void *x = gpuarena_torch_alloc(MIB, 0, c1);
        ck_assert_ptr_nonnull(x);
        fake.capture(NULL); /* over: ended, or invalidated */
        gpuarena_torch_free(x, MIB, 0, c1);
        pthread_t th;
        void *first = c2;
        ck_assert_int_eq(pthread_create(&th, NULL, begin_shared_on, &first), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_ptr_nonnull(first);
        if (late_end)
            gpuarena_torch_end_allocate_to_pool(0, p); /* thread 1's, late */
        else
            gpuarena_torch_begin_allocate_to_pool(0, q, NULL); /* its next graph's */
        void *t = c2;
        ck_assert_int_eq(pthread_create(&th, NULL, torch_alloc_on, &t), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_msg(t != NULL, "thread 2's allocation in its capture: %s", gpuarena_last_error());
        /* A later allocation of thread 2's capture, from another thread
         * (autograd's): from P's arena, which Q's release gives back
         * nothing of. */
        int handles = fake.handles();
        if (!late_end) {
            gpuarena_torch_end_allocate_to_pool(0, q);
            gpuarena_torch_release_pool(0, q);
        }
        gpuarena_torch_free(NULL, 0, 0, c1);
        ck_assert_int_eq(fake.handles(), handles);
        gpuarena_torch_free(t, MIB, 0, c2);
        gpuarena_torch_free(first, MIB, 0, c2);
        fake.capture(NULL);
        gpuarena_torch_end_allocate_to_pool(0, p); /* thread 2's, for it */
        gpuarena_torch_release_pool(0, p);
        gpuarena_torch_release_pool(0, p);
    }
    ck_assert_int_eq(fake.count("disturbed"), 0);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 0);
}
END_TEST

static void *empty_cache_main(void *arg)
{
    (void)arg;
    gpuarena_torch_empty_cache();
    return NULL;
}

static void *begin_pool_main(void *arg)
{
    atomic_int *begun = arg;
    gpuarena_torch_begin_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 35}, NULL);
    atomic_store(begun, 1);
    return NULL;
}

/* torch.cuda.empty_cache() on one thread while another begins a pool
 * for a capture: the begin waits until the trim, which waits for the
 * whole device, is done (PyTorch's own begin takes the allocator's lock
 * that its empty_cache holds).  Before, the trim saw no pool begun, the
 * begin and the capture went ahead, and the trim's wait invalidated the
 * capture. */
START_TEST(empty_cache_holds_a_pool_begin_back)
{
    fake_open();
    void *const c = (void *)0x5000;
    void *p = gpuarena_torch_alloc(8 * MIB, 0, c);
    gpuarena_torch_free(p, 8 * MIB, 0, c); /* cached: the trim unmaps it */
    fake.unmap_gate(1);
    pthread_t w, b;
    ck_assert_int_eq(pthread_create(&w, NULL, empty_cache_main, NULL), 0);
    struct timespec tick = {0, 1000 * 1000};
    for (int i = 0; fake.unmap_waiting() == 0; i++) {
        ck_assert_msg(i < 10000, "empty_cache's trim unmapped nothing in 10 s");
        nanosleep(&tick, NULL);
    }
    atomic_int begun = 0;
    ck_assert_int_eq(pthread_create(&b, NULL, begin_pool_main, &begun), 0);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    ck_assert_msg(!atomic_load(&begun), "a pool was begun in the middle of empty_cache's trim");
    fake.unmap_gate(0);
    ck_assert_int_eq(pthread_join(w, NULL), 0);
    ck_assert_int_eq(pthread_join(b, NULL), 0);
    ck_assert(atomic_load(&begun));
    gpuarena_torch_end_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 35});
    gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){0, 35});
}
END_TEST

/* The same, the pool released (and its output freed) while the other
 * capture still went on, so left to that capture's end, which never
 * comes: the first hook call after the driver says it is over gives the
 * memory back (it stayed until a later capture's end). */
START_TEST(torch_pool_released_during_a_capture_that_fails)
{
    void *const c = (void *)0x5000, *out, *y;
    int failed_holds;
    int handles = graph_then_another_capture(
        c, (gpuarena_torch_pool_t){0, 36}, (gpuarena_torch_pool_t){0, 37}, &out, &y, &failed_holds);
    gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){0, 36}); /* during the capture */
    gpuarena_torch_free(out, 64 * MIB, 0, c);
    ck_assert_int_gt(fake.handles(), handles + failed_holds);
    fake.capture(NULL); /* it fails: PyTorch raises, never ends the pool */
    gpuarena_torch_free(y, MIB, 0, c);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(fake.handles(), handles + failed_holds);
}
END_TEST

/* The child of graph_pool_begun_across_a_fork: 1 when empty_cache asked
 * the driver about the pool's capture. */
static int empty_cache_asks_nothing(void *arg)
{
    (void)arg;
    long before = fake.count("cuStreamGetCaptureInfo");
    gpuarena_torch_empty_cache();
    return fake.count("cuStreamGetCaptureInfo") == before ? 0 : 1;
}

/* A thread's cache of a GPU arena when that thread forks and then ends
 * in the child (the child's only thread): its blocks were given back at
 * the thread's exit, freed into the parent's arena and, over max_cached,
 * unmapped with cuMemFree, which a child may not call (gpuarena(7), Fork:
 * such an arena changes nothing).  The child's atexit handler checks,
 * once its thread is gone. */
static gpuarena_t *exit_arena;
static long exit_frees;
static gpuarena_stats_t exit_stats;

static void exit_check(void)
{
    gpuarena_stats_t st;
    if (fake.count("cuMemFree") != exit_frees || gpuarena_stats(exit_arena, &st) != 0 ||
        st.reserved != exit_stats.reserved || st.provider_unmaps != exit_stats.provider_unmaps)
        _exit(1);
    _exit(0); /* before a leak checker's own handler, which would count Check's memory */
}

static void *fork_and_end(void *arg)
{
    (void)arg;
    void *p = NULL;
    if (gpuarena_alloc(exit_arena, 1000, NULL, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(exit_arena, p, HOST) != GPUARENA_SUCCESS) /* kept in this thread's cache */
        return (void *)1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);
        exit_frees = fake.count("cuMemFree");
        if (gpuarena_stats(exit_arena, &exit_stats) != GPUARENA_SUCCESS)
            _exit(2);
        atexit(exit_check);
        pthread_exit(NULL); /* the last thread: its destructors, then exit(0) */
    }
    int status = -1;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return (void *)2;
    return NULL;
}

START_TEST(device_cache_of_a_thread_that_ends_in_a_child)
{
    fake_open();
    ck_assert_int_eq(
        gpuarena_create(GPUARENA_DEVICE, 0, "max_cached=0,expandable=false", &exit_arena),
        GPUARENA_SUCCESS);
    pthread_t th;
    void *r = (void *)3;
    ck_assert_int_eq(pthread_create(&th, NULL, fork_and_end, NULL), 0);
    ck_assert_int_eq(pthread_join(th, &r), 0);
    ck_assert_msg(r == NULL, "step %d", (int)(uintptr_t)r);
    ck_assert_int_eq(gpuarena_destroy(exit_arena), GPUARENA_SUCCESS);
}
END_TEST

/* The child of graph_pool_begin_in_a_child: 1 when a begin asked the
 * driver anything (it drained the pool's limbo, waiting for the
 * device). */
static int begin_asks_nothing(void *arg)
{
    (void)arg;
    long capturing = fake.count("cuStreamIsCapturing"), disturbed = fake.count("disturbed");
    fake.capture((void *)0x5000);
    gpuarena_torch_begin_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 42}, NULL);
    return fake.count("cuStreamIsCapturing") == capturing && fake.count("disturbed") == disturbed
               ? 0
               : 1;
}

/* A pool whose blocks wait in limbo (read on a side stream during the
 * capture) when the process forks: the child's begin of it drained the
 * limbo, a driver query and a wait for the whole device, which a child
 * may not make (gpuarena(7), Fork). */
START_TEST(graph_pool_begin_in_a_child)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    const gpuarena_torch_pool_t id = {0, 42};
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    fake.capture(c);
    fake.capture_join(d);
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    void *b = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(b);
    gpuarena_torch_record_stream(b, d);
    gpuarena_torch_end_allocate_to_pool(0, id);
    fake.capture(NULL);
    gpuarena_torch_free(b, MIB, 0, c); /* to the pool's limbo */
    ga_require_child_ok(ga_fork_run(begin_asks_nothing, NULL, 30), "the child");
    gpuarena_torch_release_pool(0, id);
}
END_TEST

/* A pool begun and bound to a capture when the process forks: the child's
 * empty_cache asked the driver whether that capture was over, which a
 * child made after CUDA was initialized may not do. */
START_TEST(graph_pool_begun_across_a_fork)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 38};
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    fake.capture(c);
    void *p = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(p);
    ga_require_child_ok(ga_fork_run(empty_cache_asks_nothing, NULL, 30), "the child");
    gpuarena_torch_free(p, MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
}
END_TEST

/* Record a trace (GPUARENA_TRACE's recorder) to a new empty file made
 * from the template PATH. */
static void record_to_temp(char *path)
{
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(ga_trace_open(path), GPUARENA_SUCCESS);
}

/* A graph's capture into POOL on stream C, as PyTorch makes one: the
 * default arena has served C before (eager code), the pool is begun, the
 * capture begins. */
static void begin_capture(void *c, gpuarena_torch_pool_t pool)
{
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    gpuarena_torch_begin_allocate_to_pool(0, pool, NULL);
    fake.capture(c);
}

/* A released pool put off (its last block freed during a capture), and
 * a kept free of the default arena made by the retry at the start of a
 * hook call on a stream being captured (another capture, with no pool):
 * the pool goes at a later call, not in that one.  The retry settled
 * the pools itself, with no stream, and destroyed the pool (a wait for
 * the whole device) during the capture of the hook's own stream. */
START_TEST(deferred_retry_settles_no_pool_in_a_capture)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000, *const e = (void *)0x7000;
    const gpuarena_torch_pool_t id = {0, 43};
    begin_capture(c, id);
    void *b = gpuarena_torch_alloc(MIB, 0, c); /* the graph's output */
    ck_assert_ptr_nonnull(b);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id); /* B is live: the pool stays */
    void *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_record_stream(p, d);
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c); /* kept: its event goes on d */
    gpuarena_torch_free(b, MIB, 0, d);  /* the pool's last block: put off during d's capture */
    int held = fake.handles();
    fake.capture(NULL);
    fake.capture(e);
    long disturbed = fake.count("disturbed");
    ck_assert_ptr_null(gpuarena_torch_alloc(4096, 0, e)); /* refused; its retry frees P */
    ck_assert_int_eq(fake.handles(), held);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 1);
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_lt(fake.handles(), held);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 0);
}
END_TEST

/* A released pool whose last live block P is kept, freed on C with a use
 * on D while D was captured; no capture is under way after. */
static void released_pool_with_a_kept_last_free(gpuarena_torch_pool_t id)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    begin_capture(c, id);
    void *p = gpuarena_torch_alloc(4096, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_record_stream(p, d);
    gpuarena_torch_end_allocate_to_pool(0, id);
    fake.capture(NULL);
    gpuarena_torch_release_pool(0, id); /* P is live: the pool stays */
    fake.capture(d);
    gpuarena_torch_free(p, 4096, 0, c); /* kept: its event goes on d */
    fake.capture(NULL);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 1);
}

/* Such a pool goes at the next call that makes the kept free, whichever
 * it is: empty_cache, gpuarena_trim, another pool's release, and a
 * destroy (then at the next hook call).  Only the hooks that allocate
 * and free gave it back (the retry left it to their collect), and a
 * destroy's retry left it for good. */
START_TEST(released_pool_goes_with_its_kept_last_free)
{
    gpuarena_t *h = NULL;
    for (int how = 0; how < 4; how++) {
        released_pool_with_a_kept_last_free((gpuarena_torch_pool_t){0, 44 + (uint64_t)how});
        int held = fake.handles();
        switch (how) {
        case 0:
            gpuarena_torch_empty_cache();
            break;
        case 1:
            ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &h), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_trim(h, 0), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_destroy(h), GPUARENA_SUCCESS);
            break;
        case 2:
            gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){0, 99}); /* no such pool */
            break;
        default:
            ck_assert_int_eq(gpuarena_create(GPUARENA_HOST, 0, NULL, &h), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_destroy(h), GPUARENA_SUCCESS); /* makes the free */
            gpuarena_torch_free(NULL, 0, 0, (void *)0x5000);
            break;
        }
        ck_assert_msg(atomic_load(&ga_graph_pools) == 0, "case %d: the pool stayed", how);
        ck_assert_int_lt(fake.handles(), held);
    }
}
END_TEST

/* A pool's begin whose retry makes the kept last free of a released
 * pool gives that pool back before the capture that follows (its
 * hooks' collects are put off while a pool is begun: it stayed through
 * the capture). */
START_TEST(begin_gives_back_a_pool_its_retry_emptied)
{
    released_pool_with_a_kept_last_free((gpuarena_torch_pool_t){0, 60});
    gpuarena_torch_begin_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 61}, NULL);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 1); /* the one begun */
    gpuarena_torch_end_allocate_to_pool(0, (gpuarena_torch_pool_t){0, 61});
    gpuarena_torch_release_pool(0, (gpuarena_torch_pool_t){0, 61});
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 0);
}
END_TEST

/* A pool put off during a capture of a stream with no pool (which a call
 * given no stream cannot see), then gpuarena_trim of a host arena during
 * that capture: the trim needs no wait and disturbs nothing
 * (gpuarena_trim(3)); it destroyed the pool, a wait for the whole
 * device, under the capture. */
START_TEST(host_trim_during_a_capture_destroys_no_pool)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    const gpuarena_torch_pool_t id = {0, 62};
    begin_capture(c, id);
    void *b = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(b);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id); /* B is live: the pool stays */
    fake.capture(d);
    gpuarena_torch_free(b, MIB, 0, d); /* its last block: put off */
    gpuarena_t *h = made(GPUARENA_HOST, NULL);
    long disturbed = fake.count("disturbed");
    ck_assert_int_eq(gpuarena_trim(h, 0), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 1);
    fake.capture(NULL);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(atomic_load(&ga_graph_pools), 0);
    ck_assert_int_eq(gpuarena_destroy(h), GPUARENA_SUCCESS);
}
END_TEST

/* GPUARENA_TRACE records a graph's allocations, in its pool's arena, and
 * their frees: they were not recorded at all (the pool allocates below
 * gpuarena_alloc, and a free of a block the recorder never saw writes
 * nothing). */
START_TEST(torch_pool_allocations_are_traced)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t p = {0, 41};
    char path[] = "/tmp/check_fakecuda_XXXXXX";
    record_to_temp(path);
    begin_capture(c, p);
    void *x = gpuarena_torch_alloc(3 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    gpuarena_torch_free(x, 3 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, p);
    gpuarena_torch_release_pool(0, p);
    ga_trace_stop();
    ga_trace_t *t = NULL;
    ck_assert_msg(ga_trace_load(path, &t) == GPUARENA_SUCCESS, "%s", gpuarena_last_error());
    unlink(path);
    ck_assert_uint_eq(t->narenas, 2);
    const ga_trace_arena_t *g = &t->arenas[1];
    ck_assert_int_eq(g->kind, GPUARENA_DEVICE);
    ck_assert_uint_eq(g->nevents, 2);
    ck_assert_uint_eq(g->nfrees, 1);
    ck_assert_uint_eq(g->peak_requested, 3 * MIB);
    ga_trace_free(t);
}
END_TEST

static _Atomic int pool_loop_stop;

static void *pool_loop(void *arg)
{
    void *c = arg;
    while (!pool_loop_stop) {
        void *x = gpuarena_torch_alloc(MIB, 0, c);
        if (x)
            gpuarena_torch_free(x, MIB, 0, c);
    }
    return NULL;
}

/* A fork while another thread frees into a graph's pool with a trace
 * being recorded: the pool frees into its arena under its lock, and the
 * traced free takes the recorder's.  The recorder's own fork handler,
 * registered at its first recording, ran first and took its lock before
 * the pools' (fork runs the handlers registered last first): a fork hung
 * within seconds.  The recorder's lock is now taken last (fork.c). */
START_TEST(fork_while_a_traced_pool_frees)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t p = {0, 42};
    char path[] = "/tmp/check_fakecuda_XXXXXX";
    record_to_temp(path);
    begin_capture(c, p);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pool_loop, c), 0);
    for (int i = 0; i < 400; i++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    }
    pool_loop_stop = 1;
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, p);
    gpuarena_torch_release_pool(0, p);
    ga_trace_stop();
    unlink(path);
}
END_TEST

/* A graph's pool keeps its memory mapped for as long as the pool lives,
 * whatever the configuration says for device arenas: every replay of
 * the graph writes its blocks, freed during the capture or not.  With
 * device.max_cached=0 the next free unmapped the temporary a capture had
 * freed, and the output freed after it.  With fixed segments no free
 * segment goes back (cuMemFree) for a later allocation either
 * (release_threshold; a guard: the pool's frees stay in the capturing
 * stream's own pool, which that path leaves alone).  The options are
 * read once a process: main() makes Check fork for every test. */
static void pool_keeps_its_memory(int growable)
{
    setenv("GPUARENA_OPTIONS",
           growable ? "device.max_cached=0" : "device.expandable=false,device.thread_cache=false",
           1);
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 51};
    const size_t SZ = 128 * MIB; /* above thread_cache_large */
    begin_capture(c, id);
    void *t = gpuarena_torch_alloc((ssize_t)SZ, 0, c);   /* a temporary */
    void *out = gpuarena_torch_alloc((ssize_t)SZ, 0, c); /* the graph's output */
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(out);
    gpuarena_torch_free(t, (ssize_t)SZ, 0, c);
    long frees = fake.count("cuMemFree");
    void *x = gpuarena_torch_alloc((ssize_t)(2 * SZ), 0, c); /* needs new memory */
    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(fake.count("cuMemFree"), frees);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    /* The graph lives; eager code frees its output and goes on. */
    gpuarena_torch_free(out, (ssize_t)SZ, 0, c);
    gpuarena_torch_free(x, (ssize_t)(2 * SZ), 0, c);
    for (int i = 0; i < 3; i++) {
        void *y = gpuarena_torch_alloc(MIB, 0, c);
        gpuarena_torch_free(y, MIB, 0, c);
    }
    ck_assert_int_eq(fake.count("cuMemFree"), frees);
    if (growable) { /* granules to look at */
        ck_assert_uint_eq(fake.mapped(va(t), SZ), SZ);
        ck_assert_uint_eq(fake.mapped(va(out), SZ), SZ);
    }
    int handles = fake.handles();
    gpuarena_torch_release_pool(0, id); /* the graph deleted: now it goes */
    gpuarena_torch_free(NULL, 0, 0, c);
    if (growable)
        ck_assert_int_lt(fake.handles(), handles);
    else
        ck_assert_int_gt(fake.count("cuMemFree"), frees);
}

START_TEST(graph_pool_keeps_its_memory_under_max_cached)
{
    pool_keeps_its_memory(1);
}
END_TEST

START_TEST(graph_pool_keeps_its_fixed_segments)
{
    pool_keeps_its_memory(0);
}
END_TEST

/* The device full once during a capture into a graph's pool: the
 * allocation fails (PyTorch raises), and the capture goes on.  The
 * retry of an arena's out-of-memory path recorded an event on the
 * capturing stream and waited for it, and then for the whole device,
 * which invalidate a capture. */
START_TEST(graph_pool_out_of_memory_spares_the_capture)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 52};
    begin_capture(c, id);
    void *t = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_nonnull(t);
    gpuarena_torch_free(t, 128 * MIB, 0, c); /* a temporary, in the pool */
    long disturbed = fake.count("disturbed");
    fake.arm("cuMemCreate", 1); /* the device full once */
    void *x = gpuarena_torch_alloc(256 * MIB, 0, c);
    ck_assert_ptr_null(x);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    void *y = gpuarena_torch_alloc(64 * MIB, 0, c); /* the temporary's memory serves */
    ck_assert_ptr_nonnull(y);
    gpuarena_torch_free(y, 64 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
}
END_TEST

/* torch.cuda.empty_cache() while the process captures a graph: no wait
 * for the whole device (it invalidated the capture), so what only that
 * wait frees (a block freed on a stream) stays, and what needs none goes
 * (a block freed with no stream); after the capture the rest goes too.
 * A capture the driver invalidated leaves its pool begun (PyTorch raises
 * before it ends it): empty_cache still gives back what needs no wait. */
START_TEST(empty_cache_during_a_capture)
{
    fake_open();
    void *const u = (void *)0x7000, *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 54}, failed = {0, 55};
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    for (int round = 0; round < 2; round++) {
        void *p = gpuarena_torch_alloc(128 * MIB, 0, u);
        void *h = gpuarena_torch_alloc(128 * MIB, 0, u);
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(h);
        gpuarena_torch_free(p, 128 * MIB, 0, u);
        ck_assert_int_eq(gpuarena_free(dev, h, HOST), GPUARENA_SUCCESS); /* every stream's */
        int handles = fake.handles();
        long disturbed = fake.count("disturbed");
        const gpuarena_torch_pool_t pool = round ? failed : id;
        gpuarena_torch_begin_allocate_to_pool(0, pool, NULL);
        fake.capture(c);
        void *x = gpuarena_torch_alloc(MIB, 0, c); /* binds the pool */
        ck_assert_ptr_nonnull(x);
        if (round) /* the capture invalidated: PyTorch never ends the pool */
            fake.capture(NULL);
        gpuarena_torch_empty_cache();
        ck_assert_int_eq(fake.count("disturbed"), disturbed);
        int during = fake.handles();
        ck_assert_int_lt(during, handles); /* the block freed with no stream */
        if (!round) {
            gpuarena_torch_free(x, MIB, 0, c);
            fake.capture(NULL);
            gpuarena_torch_end_allocate_to_pool(0, pool);
            gpuarena_torch_release_pool(0, pool);
            gpuarena_torch_empty_cache();
            ck_assert_int_lt(fake.handles(), during); /* the one freed on U */
        }
    }
}
END_TEST

/* A capture that forks to a side stream D (it joins the capture): a
 * block of the graph's pool read on D (record_stream) and freed on the
 * capturing stream is not handed to the capture's next allocation, whose
 * writes the graph would not order after D's reads.  The refused
 * record_stream was dropped, and the block went straight back. */
START_TEST(record_stream_of_a_captured_side_stream)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    const gpuarena_torch_pool_t id = {0, 53};
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    int handles = fake.handles();
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    fake.capture(c);
    fake.capture_join(d);
    long disturbed = fake.count("disturbed");
    void *x = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    gpuarena_torch_record_stream(x, d);              /* y = g(x) on D */
    gpuarena_torch_free(x, 128 * MIB, 0, c);         /* del x */
    void *z = gpuarena_torch_alloc(128 * MIB, 0, c); /* z = h(inp) on C */
    ck_assert_ptr_nonnull(z);
    ck_assert_ptr_ne(z, x);
    gpuarena_torch_free(z, 128 * MIB, 0, c);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
    gpuarena_torch_free(NULL, 0, 0, c);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    ck_assert_int_eq(fake.handles(), handles); /* the held block went with the pool */
}
END_TEST

/* Captures into one pool (a shared pool: make_graphed_callables), each
 * with a block read on a side stream (record_stream) and freed: such a
 * block waits for a wait for the whole device, which the pool's arena
 * makes at the next begin (no capture under way then), so the next
 * capture reuses it.  Each capture added its block to the pool before. */
START_TEST(pool_reuses_side_stream_blocks_across_captures)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    const gpuarena_torch_pool_t id = {0, 56};
    void *e = gpuarena_torch_alloc(MIB, 0, c);
    gpuarena_torch_free(e, MIB, 0, c);
    long disturbed = fake.count("disturbed");
    int after_first = 0;
    for (int g = 0; g < 4; g++) {
        gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
        fake.capture(c);
        fake.capture_join(d);
        void *x = gpuarena_torch_alloc(128 * MIB, 0, c);
        ck_assert_ptr_nonnull(x);
        gpuarena_torch_record_stream(x, d);
        gpuarena_torch_free(x, 128 * MIB, 0, c);
        fake.capture(NULL);
        gpuarena_torch_end_allocate_to_pool(0, id);
        if (g == 0)
            after_first = fake.handles();
        ck_assert_int_eq(fake.handles(), after_first);
    }
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    for (int g = 0; g < 4; g++)
        gpuarena_torch_release_pool(0, id);
}
END_TEST

/* A pool begun again while a capture the hooks do not see runs on another
 * stream (a CuPy capture, a program's own): the begin makes no wait for
 * the device where the pool holds nothing in limbo.  It drained at every
 * begin of a pool whose stream pools held blocks, and broke that capture. */
START_TEST(pool_begin_spares_another_capture)
{
    fake_open();
    void *const c = (void *)0x5000, *const d = (void *)0x6000;
    const gpuarena_torch_pool_t id = {0, 91};
    begin_capture(c, id);
    void *x = gpuarena_torch_alloc(8 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    gpuarena_torch_free(x, 8 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    long disturbed = fake.count("disturbed");
    fake.capture(d); /* a capture no hook was told of */
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
    gpuarena_torch_release_pool(0, id);
}
END_TEST

/* record_stream on the block's own capturing stream, which stream order
 * covers: the block goes back to the pool at its free and serves the
 * capture's next allocation, as without the call. */
START_TEST(record_stream_of_the_blocks_own_captured_stream)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 57};
    begin_capture(c, id);
    void *x = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    gpuarena_torch_record_stream(x, c);
    gpuarena_torch_free(x, 128 * MIB, 0, c);
    void *z = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_eq(z, x);
    gpuarena_torch_free(z, 128 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
}
END_TEST

/* The same for a block of the default arena, allocated before the
 * capture on the stream that is then captured: the thread remembers
 * that stream's id, so the use is told apart with no driver call.  It
 * sent the block to limbo, and the next allocation took new memory. */
START_TEST(record_stream_of_a_default_blocks_own_captured_stream)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 58};
    void *x = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    int handles = fake.handles();
    long disturbed = fake.count("disturbed");
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    fake.capture(c);
    gpuarena_torch_record_stream(x, c);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
    gpuarena_torch_free(x, 128 * MIB, 0, c);
    void *z = gpuarena_torch_alloc(128 * MIB, 0, c);
    ck_assert_ptr_eq(z, x);
    ck_assert_int_eq(fake.handles(), handles);
    gpuarena_torch_free(z, 128 * MIB, 0, c);
}
END_TEST

static _Atomic int cached_phase;

/* Autograd's thread: a block of the capture's pool, freed into this
 * thread's cache, which stays while the thread waits. */
static void *cache_a_pool_block(void *arg)
{
    void *c = arg;
    void *x = gpuarena_torch_alloc(8 * MIB, 0, c);
    ck_assert_ptr_nonnull(x);
    gpuarena_torch_free(x, 8 * MIB, 0, c);
    cached_phase = 1;
    while (cached_phase != 2) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    return NULL;
}

/* Out of memory in a graph's pool during its capture still takes back
 * what other threads' caches hold of the pool (no driver call): the
 * allocation is served.  With the retry skipped whole it failed. */
START_TEST(pool_out_of_memory_takes_other_threads_caches)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 59};
    begin_capture(c, id);
    void *keep = gpuarena_torch_alloc(8 * MIB, 0, c); /* binds the pool here */
    ck_assert_ptr_nonnull(keep);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, cache_a_pool_block, c), 0);
    while (cached_phase != 1) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    long disturbed = fake.count("disturbed");
    fake.arm("cuMemCreate", -1); /* the device full */
    void *y = gpuarena_torch_alloc(8 * MIB, 0, c);
    fake.arm("cuMemCreate", 0);
    ck_assert_msg(y != NULL, "%s", gpuarena_last_error());
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    cached_phase = 2;
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    gpuarena_torch_free(y, 8 * MIB, 0, c);
    gpuarena_torch_free(keep, 8 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
}
END_TEST

/* PyTorch: a graph's pool released while a tensor of it lives, that
 * tensor freed during the capture of another graph.  Its arena is not
 * destroyed there (the wait for the whole device would break the
 * capture) but once the capture has ended. */
START_TEST(torch_pool_released_during_another_capture)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t p1 = {0, 11}, p2 = {0, 12};
    void *e = gpuarena_torch_alloc(MIB, 0, c); /* the default arena first */
    gpuarena_torch_free(e, MIB, 0, c);
    int handles = fake.handles();
    gpuarena_torch_begin_allocate_to_pool(0, p1, NULL);
    fake.capture(c);
    void *x = gpuarena_torch_alloc(4 * MIB, 0, c); /* graph 1's output, kept */
    ck_assert_ptr_nonnull(x);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, p1);
    gpuarena_torch_release_pool(0, p1); /* graph 1 deleted, X alive */
    int with_p1 = fake.handles();
    ck_assert_int_gt(with_p1, handles);

    long disturbed = fake.count("disturbed");
    gpuarena_torch_begin_allocate_to_pool(0, p2, NULL);
    fake.capture(c);
    void *y = gpuarena_torch_alloc(4 * MIB, 0, c);
    ck_assert_ptr_nonnull(y);
    gpuarena_torch_free(x, 4 * MIB, 0, c); /* X dies during capture 2 */
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    ck_assert_int_ge(fake.handles(), with_p1); /* pool 1 kept for now */
    gpuarena_torch_free(y, 4 * MIB, 0, c);
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, p2);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    gpuarena_torch_release_pool(0, p2);
    ck_assert_int_eq(fake.handles(), handles); /* both pools' memory back */
}
END_TEST

/* No stream (GPUARENA_STREAM_HOST) asks no capture check of a stream, but
 * a zero fill or the driver pool's allocation then goes on the legacy
 * stream, which a capture of a blocking stream forbids: refused first,
 * the capture undisturbed, nothing changed; served after the capture. */
START_TEST(no_stream_work_during_a_blocking_capture)
{
    fake_open();
    static const char *const opts[] = {"zero=true", "pool=driver", "pool=driver,zero=true"};
    for (int i = 0; i < 3; i++) {
        gpuarena_t *a = NULL;
        ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, opts[i], &a), GPUARENA_SUCCESS);
        void *p = (void *)0x1; /* left as it was by a refusal (it was cleared) */
        long disturbed = fake.count("disturbed");
        gpuarena_stats_t before, st;
        ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
        fake.blocking_capture(1);
        ck_assert_int_eq(gpuarena_alloc(a, 4096, HOST, &p), GPUARENA_ERR_STREAM_CAPTURE);
        ck_assert_ptr_eq(p, (void *)0x1);
        ck_assert_msg(strstr(gpuarena_last_error(), "GPUARENA_STREAM_HOST") != NULL, "%s",
                      gpuarena_last_error());
        ck_assert_int_eq(fake.count("disturbed"), disturbed);
        fake.blocking_capture(0);
        /* Refused before any block was taken: no memory mapped, no
         * allocation or free counted. */
        ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
        ck_assert_uint_eq(st.live_blocks, 0);
        ck_assert_uint_eq(st.reserved, before.reserved);
        ck_assert_uint_eq(st.provider_maps, before.provider_maps);
        ck_assert_uint_eq(st.allocs, before.allocs);
        ck_assert_uint_eq(st.frees, before.frees);
        ck_assert_int_eq(gpuarena_alloc(a, 4096, HOST, &p), GPUARENA_SUCCESS);
        fake.blocking_capture(1);
        gpuarena_status_t fst = gpuarena_free(a, p, HOST);
        fake.blocking_capture(0);
        ck_assert_int_eq(fake.count("disturbed"), disturbed);
        if (fst != GPUARENA_SUCCESS) { /* the driver pool's free: made after */
            ck_assert_int_eq(fst, GPUARENA_ERR_STREAM_CAPTURE);
            ck_assert_int_eq(gpuarena_free(a, p, HOST), GPUARENA_SUCCESS);
        }
        ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
    }
    /* A fill the driver refuses with CUDA_ERROR_INVALID_VALUE: the driver's
     * error, not a bad stream (the pointer or size may be what it means);
     * *PTR left as it was, with either pool, and nothing counted: no
     * allocation, free, hit or miss (they were, before).  Of a new
     * segment's block (a miss), a thread cache's and a pool's (hits). */
    for (int i = 0; i < 2; i++) {
        for (int served = 0; served < 3; served++) {
            static const char *const served_opts[] = {"zero=true", "zero=true",
                                                      "zero=true,thread_cache=false"};
            gpuarena_t *a = NULL;
            ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0,
                                             i ? "pool=driver,zero=true" : served_opts[served], &a),
                             GPUARENA_SUCCESS);
            void *p = (void *)0x1, *q = NULL;
            if (served) { /* freed first: cached */
                ck_assert_int_eq(gpuarena_alloc(a, 4096, (void *)0x5000, &q), GPUARENA_SUCCESS);
                ck_assert_int_eq(gpuarena_free(a, q, (void *)0x5000), GPUARENA_SUCCESS);
            }
            gpuarena_stats_t before, st;
            ck_assert_int_eq(gpuarena_stats(a, &before), GPUARENA_SUCCESS);
            fake.arm("cuMemsetD8Async", 1);
            ck_assert_int_eq(gpuarena_alloc(a, 4096, (void *)0x5000, &p), GPUARENA_ERR_DRIVER);
            ck_assert_ptr_eq(p, (void *)0x1);
            ck_assert_msg(strstr(gpuarena_last_error(), "not a valid stream") == NULL, "%s",
                          gpuarena_last_error());
            ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
            ck_assert_uint_eq(st.live_blocks, 0);
            ck_assert_uint_eq(st.allocs, before.allocs);
            ck_assert_uint_eq(st.frees, before.frees);
            ck_assert_uint_eq(st.cache_hits, before.cache_hits);
            ck_assert_uint_eq(st.cache_misses, before.cache_misses);
            ck_assert_uint_eq(st.requested, 0);
            /* and the next one is made, and counted once */
            ck_assert_int_eq(gpuarena_alloc(a, 4096, (void *)0x5000, &p), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_stats(a, &st), GPUARENA_SUCCESS);
            ck_assert_uint_eq(st.allocs, before.allocs + 1);
            if (!i) /* the driver's pool counts neither */
                ck_assert_uint_eq(st.cache_hits + st.cache_misses, st.allocs);
            ck_assert_int_eq(gpuarena_free(a, p, (void *)0x5000), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_check(a), GPUARENA_SUCCESS);
            ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
            if (i)
                break; /* the driver's pool: one way */
        }
    }
}
END_TEST

/* A stream of another device (its context another), being captured: the
 * device is checked first, GPUARENA_ERR_INVALID_STREAM as for the stream
 * idle (it read as refused for the capture, and PyTorch's graph pool then
 * served it with this device's memory). */
START_TEST(captured_stream_of_another_device)
{
    fake_open();
    void *const f = (void *)0x7000;
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    void *live = NULL, *p = (void *)0x1;
    ck_assert_int_eq(gpuarena_alloc(dev, 4096, NULL, &live), GPUARENA_SUCCESS);
    fake.foreign_stream(f);
    ck_assert_int_eq(gpuarena_alloc(dev, 4096, f, &p), GPUARENA_ERR_INVALID_STREAM);
    long disturbed = fake.count("disturbed");
    int handles = fake.handles();
    fake.capture(f);
    ck_assert_int_eq(gpuarena_alloc(dev, 4096, f, &p), GPUARENA_ERR_INVALID_STREAM);
    ck_assert_ptr_eq(p, (void *)0x1);
    ck_assert_int_eq(gpuarena_free(dev, live, f), GPUARENA_ERR_INVALID_STREAM);
    const gpuarena_torch_pool_t id = {0, 21};
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    ck_assert_ptr_null(gpuarena_torch_alloc(MIB, 0, f));
    ck_assert_msg(strstr(gpuarena_last_error(), "another CUDA context") != NULL, "%s",
                  gpuarena_last_error());
    ck_assert_int_eq(fake.handles(), handles); /* no pool memory mapped for it */
    fake.capture(NULL);
    gpuarena_torch_end_allocate_to_pool(0, id);
    gpuarena_torch_release_pool(0, id);
    fake.foreign_stream(NULL);
    ck_assert_int_eq(fake.count("disturbed"), disturbed);
    ck_assert_int_eq(gpuarena_free(dev, live, NULL), GPUARENA_SUCCESS);
}
END_TEST

/* What device_arena_in_a_forked_child hands its child. */
typedef struct {
    gpuarena_t *a, *dp;
    void *live, *dlive;
    gpuarena_stats_t before;
} forked_t;

/* What a child made by fork() finds (see device_arena_in_a_forked_child);
 * the number of the step that failed, 0 when none did. */
static int forked_child(void *arg)
{
    forked_t *f = arg;
    gpuarena_t *a = f->a, *dp = f->dp;
    const gpuarena_stats_t *before = &f->before;
    int maps = fake.maps();
    long pool = fake.pool_blocks();
    void *const untouched = (void *)0x1;
    void *p = untouched;
    if (gpuarena_alloc(a, 4096, NULL, &p) != GPUARENA_ERR_NOT_SUPPORTED || p != untouched)
        return 1; /* the thread cache holds a block of that size */
    if (!strstr(gpuarena_last_error(), "fork"))
        return 2;
    if (gpuarena_alloc(a, 4096, HOST, &p) != GPUARENA_ERR_NOT_SUPPORTED || p != untouched)
        return 3;
    if (gpuarena_free(a, f->live, NULL) != GPUARENA_ERR_NOT_SUPPORTED)
        return 4;
    if (gpuarena_record_stream(a, f->live, (void *)0x5000) != GPUARENA_ERR_NOT_SUPPORTED)
        return 5;
    if (gpuarena_trim(a, 0) != GPUARENA_ERR_NOT_SUPPORTED)
        return 6;
    if (gpuarena_set(a, "max_cached=0") != GPUARENA_ERR_NOT_SUPPORTED)
        return 7;
    if (gpuarena_destroy(a) != GPUARENA_ERR_NOT_SUPPORTED)
        return 8;
    if (gpuarena_alloc(dp, 4096, NULL, &p) != GPUARENA_ERR_NOT_SUPPORTED ||
        gpuarena_free(dp, f->dlive, NULL) != GPUARENA_ERR_NOT_SUPPORTED)
        return 9;
    /* Statistics read what the parent had; the checker passes. */
    gpuarena_stats_t st;
    if (gpuarena_stats(a, &st) != GPUARENA_SUCCESS || st.live_blocks != before->live_blocks ||
        st.reserved != before->reserved || st.in_use != before->in_use)
        return 10;
    if (gpuarena_check(a) != GPUARENA_SUCCESS)
        return 11;
    /* No new arena of GPU memory: the driver the parent initialized is
     * not the child's. */
    gpuarena_t *n = NULL;
    if (gpuarena_create(GPUARENA_DEVICE, 0, NULL, &n) != GPUARENA_ERR_NOT_SUPPORTED || n ||
        !strstr(gpuarena_last_error(), "fork"))
        return 12;
    if (gpuarena_get(GPUARENA_DEVICE, 0, &n) != GPUARENA_ERR_NOT_SUPPORTED)
        return 13;
    /* Nothing reached the driver. */
    if (fake.maps() != maps || fake.pool_blocks() != pool)
        return 14;
    /* A sim arena serves. */
    if (gpuarena_create(GPUARENA_SIM, 0, NULL, &n) != GPUARENA_SUCCESS ||
        gpuarena_alloc(n, 4096, NULL, &p) != GPUARENA_SUCCESS ||
        gpuarena_free(n, p, NULL) != GPUARENA_SUCCESS || gpuarena_destroy(n) != GPUARENA_SUCCESS)
        return 15;
    return 0;
}

/* fork(2): in the child, a device arena made before the fork refuses
 * every call that would reach the driver or hand out its memory (even a
 * block its thread cache holds) with GPUARENA_ERR_NOT_SUPPORTED and
 * changes nothing; no device arena can be made there; statistics and the
 * checker still read what the parent had; a sim arena serves.  The
 * parent's arenas go on as before. */
START_TEST(device_arena_in_a_forked_child)
{
    fake_open();
    forked_t f = {0};
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, NULL, &f.a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_create(GPUARENA_DEVICE, 0, "pool=driver", &f.dp), GPUARENA_SUCCESS);
    void *cached, *p;
    ck_assert_int_eq(gpuarena_alloc(f.a, MIB, NULL, &f.live), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(f.a, 4096, NULL, &cached), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(f.a, cached, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_alloc(f.dp, 4096, NULL, &f.dlive), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_stats(f.a, &f.before), GPUARENA_SUCCESS);
    ga_require_child_ok(ga_fork_run(forked_child, &f, 30), "the child");
    /* The parent: the cached block, then everything back. */
    ck_assert_int_eq(gpuarena_alloc(f.a, 4096, NULL, &p), GPUARENA_SUCCESS);
    ck_assert_ptr_eq(p, cached);
    ck_assert_int_eq(gpuarena_free(f.a, p, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(f.a, f.live, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_free(f.dp, f.dlive, NULL), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_check(f.a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(f.a), GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(f.dp), GPUARENA_SUCCESS);
    ck_assert_int_eq(fake.maps(), 0);
}
END_TEST

/* The child of graph_pool_put_off_before_a_fork: 1 when a hook call
 * asked the driver anything (settling the pool put off in the parent). */
static int hook_asks_nothing(void *arg)
{
    (void)arg;
    long before = fake.count("cuStreamIsCapturing");
    if (gpuarena_torch_alloc(4096, 0, NULL) != NULL)
        return 2; /* the default device arena is the parent's */
    return fake.count("cuStreamIsCapturing") == before ? 0 : 1;
}

/* A graph pool whose destruction was put off (a blocking stream was
 * captured at its release) when the process forks: the child's first
 * hook call settled it, asking the driver whether a stream was captured,
 * which a child made after CUDA was initialized may not do. */
START_TEST(graph_pool_put_off_before_a_fork)
{
    fake_open();
    void *const c = (void *)0x5000;
    const gpuarena_torch_pool_t id = {0, 7};
    gpuarena_t *dev = NULL;
    ck_assert_int_eq(gpuarena_get(GPUARENA_DEVICE, 0, &dev), GPUARENA_SUCCESS);
    fake.capture(c);
    gpuarena_torch_begin_allocate_to_pool(0, id, NULL);
    void *p = gpuarena_torch_alloc(MIB, 0, c);
    ck_assert_ptr_nonnull(p);
    gpuarena_torch_free(p, MIB, 0, c);
    gpuarena_torch_end_allocate_to_pool(0, id);
    fake.capture(NULL);
    int handles = fake.handles();
    fake.blocking_capture(1);
    gpuarena_torch_release_pool(0, id); /* put off */
    fake.blocking_capture(0);
    ck_assert_int_eq(fake.handles(), handles);
    ga_require_child_ok(ga_fork_run(hook_asks_nothing, NULL, 30), "the child");
    gpuarena_torch_free(NULL, 0, 0, c); /* the parent settles it */
    ck_assert_int_lt(fake.handles(), handles);
}
END_TEST

/* The child of fork_during_the_driver_load: 1 when making a device arena
 * is not refused, 2 when it called cuInit. */
static int create_refused(void *arg)
{
    (void)arg;
    gpuarena_t *n = NULL;
    long inits = fake.count("cuInit");
    if (gpuarena_create(GPUARENA_DEVICE, 0, NULL, &n) != GPUARENA_ERR_NOT_SUPPORTED)
        return 1;
    return fake.count("cuInit") == inits ? 0 : 2;
}

static void *make_device_arena(void *arg)
{
    gpuarena_t **a = arg;
    return (void *)(intptr_t)gpuarena_create(GPUARENA_DEVICE, 0, NULL, a);
}

/* fork(2) while another thread is inside the first load of the driver
 * (its cuInit, slowed down to 300 ms): the fork waits for the load to be
 * done, so the child finds it done, neither in progress (glibc would run
 * it again in the child) nor to be made: making a device arena there is
 * refused at once, and the child calls no cuInit of its own. */
START_TEST(fork_during_the_driver_load)
{
    fake_open();
    ck_assert_int_eq(fake.count("cuInit"), 0); /* nothing loaded it yet */
    setenv("FAKECUDA_INIT_MS", "300", 1);
    gpuarena_t *a = NULL;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, make_device_arena, &a), 0);
    while (fake.count("cuInit") == 0) {
        struct timespec t = {0, 1000 * 1000};
        nanosleep(&t, NULL);
    }
    /* The alarm: a load left in progress would hang the child's create. */
    int status = ga_fork_run(create_refused, NULL, 20);
    void *st = NULL;
    ck_assert_int_eq(pthread_join(th, &st), 0);
    unsetenv("FAKECUDA_INIT_MS");
    ga_require_child_ok(status, "the child's create (1: not refused, 2: it called cuInit)");
    ck_assert_int_eq((int)(intptr_t)st, GPUARENA_SUCCESS);
    ck_assert_int_eq(gpuarena_destroy(a), GPUARENA_SUCCESS);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    if (!getenv(CHILD_MARK)) {
        char lib[4096];
        snprintf(lib, sizeof lib, "%s/libcuda.so.1", FAKE_DIR);
        if (access(lib, R_OK) != 0) {
            /* make check builds it first: its absence is a broken build. */
            printf("check_fakecuda: no fake driver at %s (make check builds it)\n", lib);
            return 99;
        }
        const char *old = getenv("LD_LIBRARY_PATH");
        char path[8192];
        snprintf(path, sizeof path, "%s%s%s", FAKE_DIR, old && *old ? ":" : "", old ? old : "");
        setenv("LD_LIBRARY_PATH", path, 1);
        setenv(CHILD_MARK, "1", 1);
        /* Each test on a fresh fake: one of them leaks a handle on purpose
         * (a failed cuMemRelease), which CK_FORK=no would carry into the
         * next. */
        setenv("CK_FORK", "yes", 1);
        /* The program itself, not /proc/self/exe: under valgrind that is
         * valgrind's own tool (as in check_cuda). */
        execv(argv[0], argv);
        perror("check_fakecuda: execv");
        return EXIT_FAILURE;
    }
    const TTest *tests[] = {decommit_stops_where_unmap_fails,
                            decommit_retries_a_failed_unmap,
                            release_failure_still_unmaps,
                            failed_commit_undo_does_not_wedge,
                            failed_commit_undo_counts_a_stale_granule_once,
                            successful_calls_keep_the_message,
                            failed_commit_leftover_goes_at_trim,
                            failed_map_keeps_its_handle,
                            no_host_memory_drops_no_handle,
                            release_failure_at_destroy,
                            destroy_counts_what_stays_mapped,
                            destroy_with_a_refused_release,
                            destroy_with_releases_refused_since_a_trim,
                            managed_oom_names_no_device,
                            managed_prefetch_to_a_peer_retains_once,
                            managed_prefetch_asks_the_destination,
                            driver_pool_frees_when_the_wait_fails,
                            driver_pool_out_of_memory_spares_a_capture,
                            driver_pool_unknown_uses_spare_a_capture,
                            driver_pool_under_max_reserved,
                            legacy_stream_asks_only_off_the_cache,
                            arena_made_during_a_blocking_capture,
                            free_on_a_captured_stream,
                            shared_pool_free_spares_a_capture,
                            device_arena_in_a_forked_child,
                            graph_pool_put_off_before_a_fork,
                            fork_during_the_driver_load,
                            out_of_memory_and_trim_spare_a_capture,
                            peer_access_opens_to_the_peers,
                            ipc_makes_granules_exportable,
                            ipc_makes_driver_pool_exportable,
                            hooks_free_after_the_capture,
                            hooks_bad_free_during_capture,
                            cupy_param_arena_of_the_device,
                            pinned_failed_registration_is_not_unbound,
                            pinned_segments_registered_and_given_back,
                            hooks_double_free_during_capture,
                            hooks_double_free_after_the_capture,
                            deferred_free_kept_across_a_fork,
                            deferred_free_of_a_stream_gone,
                            deferred_free_without_host_memory,
                            torch_pool_record_without_host_memory,
                            torch_graph_pools,
                            torch_pool_released_during_another_capture,
                            torch_pool_shared_by_two_graphs,
                            torch_pool_of_a_failed_capture,
                            torch_pool_released_after_a_failed_capture,
                            empty_cache_holds_a_pool_begin_back,
                            torch_pool_released_during_a_capture_that_fails,
                            torch_pool_stale_begin_spares_another_threads,
                            graph_pool_begin_in_a_child,
                            device_cache_of_a_thread_that_ends_in_a_child,
                            graph_pool_begun_across_a_fork,
                            torch_pool_allocations_are_traced,
                            deferred_retry_settles_no_pool_in_a_capture,
                            released_pool_goes_with_its_kept_last_free,
                            begin_gives_back_a_pool_its_retry_emptied,
                            host_trim_during_a_capture_destroys_no_pool,
                            fork_while_a_traced_pool_frees,
                            graph_pool_keeps_its_memory_under_max_cached,
                            graph_pool_keeps_its_fixed_segments,
                            graph_pool_out_of_memory_spares_the_capture,
                            empty_cache_during_a_capture,
                            record_stream_of_a_captured_side_stream,
                            pool_reuses_side_stream_blocks_across_captures,
                            pool_begin_spares_another_capture,
                            record_stream_of_the_blocks_own_captured_stream,
                            record_stream_of_a_default_blocks_own_captured_stream,
                            pool_out_of_memory_takes_other_threads_caches,
                            no_stream_work_during_a_blocking_capture,
                            captured_stream_of_another_device};
    return ga_check_tests("fakecuda", 0, tests, sizeof tests / sizeof tests[0]);
}
