/*
 * stats_layout.c - the layout of gpuarena_stats_t as the C compiler sees
 * it, for test_gpuarena.F90 to compare with the Fortran type.
 */
#include <gpuarena.h>
#include <stddef.h>

size_t ga_ftest_stats_size(void);
size_t ga_ftest_stats_offset(int field);

size_t ga_ftest_stats_size(void)
{
    return sizeof(gpuarena_stats_t);
}

/* Offsets of a few fields spread over the struct: 0 requested, 1 allocs,
 * 2 trims, 3 device_free, 4 spare_, 5 retired_cached, 6 deferred_frees. */
size_t ga_ftest_stats_offset(int field)
{
    switch (field) {
    case 0:
        return offsetof(gpuarena_stats_t, requested);
    case 1:
        return offsetof(gpuarena_stats_t, allocs);
    case 2:
        return offsetof(gpuarena_stats_t, trims);
    case 3:
        return offsetof(gpuarena_stats_t, device_free);
    case 4:
        return offsetof(gpuarena_stats_t, spare_);
    case 5:
        return offsetof(gpuarena_stats_t, retired_cached);
    case 6:
        return offsetof(gpuarena_stats_t, deferred_frees);
    default:
        return (size_t)-1;
    }
}

/* The header's GPUARENA_STREAM_HOST, for the module's parameter to be
 * compared with. */
void *ga_ftest_stream_host(void);
void *ga_ftest_stream_host(void)
{
    return GPUARENA_STREAM_HOST;
}
