/*
 * bench_kernels.cu - the kernels of bench_managed: a reading pass and a
 * writing pass over a buffer, in 16-byte accesses.
 *
 * This file is not compiled by the build: the GPU machines may have a
 * driver and no nvcc.  bench_kernels_ptx.h holds the PTX generated from
 * it, as a C string that bench_managed loads with cuModuleLoadData (the
 * driver compiles it for the GPU at hand).  After changing this file,
 * regenerate the header on a machine with the CUDA toolkit:
 *
 *     make -C bench regen-kernels        (NVCC=/path/to/nvcc to choose)
 *
 * which runs nvcc -ptx -arch=compute_75 (the lowest target of CUDA 13, so
 * that every GPU it supports can run it) and checks the result with ptxas
 * for sm_90.  The PTX ISA version in the header (.version) must not be
 * newer than the oldest driver that will run the benchmark accepts: CUDA
 * 13.0's nvcc writes 9.0, which CUDA 13.0 drivers (580) accept.
 *
 * Both kernels take the buffer as N 16-byte words and are launched with
 * blocks of GA_BENCH_THREADS threads (a multiple of 32) and any grid.
 */

#define GA_BENCH_THREADS 256

/* Sum of the 32-bit words of P[0..N), one partial sum per block in
 * PARTIAL[blockIdx.x].  The sum is what proves that every word was read
 * (and keeps the compiler from dropping the loads): over a buffer filled
 * with the 32-bit value V it is N * 4 * V modulo 2^64. */
extern "C" __global__ void __launch_bounds__(GA_BENCH_THREADS)
    ga_bench_read(const uint4 *__restrict__ p, unsigned long long n,
                  unsigned long long *__restrict__ partial)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    /* Four independent loads in flight per thread. */
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        s0 += (unsigned long long)a.x + a.y + a.z + a.w;
        s1 += (unsigned long long)b.x + b.y + b.z + b.w;
        s2 += (unsigned long long)c.x + c.y + c.z + c.w;
        s3 += (unsigned long long)d.x + d.y + d.z + d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = p[i];
        s0 += (unsigned long long)a.x + a.y + a.z + a.w;
    }
    unsigned long long s = s0 + s1 + s2 + s3;
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, o);
    __shared__ unsigned long long warp_sum[GA_BENCH_THREADS / 32];
    if ((threadIdx.x & 31) == 0)
        warp_sum[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t = 0;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            t += warp_sum[w];
        partial[blockIdx.x] = t;
    }
}

/* Fill P[0..N) with the 32-bit value V. */
extern "C" __global__ void __launch_bounds__(GA_BENCH_THREADS)
    ga_bench_fill(uint4 *__restrict__ p, unsigned long long n, unsigned int v)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const uint4 w = make_uint4(v, v, v, v);
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride)
        p[i] = w;
}
