/* selfcheck.cu - exhaustive device self-checks for tests/test_cuda_quant.c,
 * built into the test-only library fp8kit_testhooks (never libfp8kit): the
 * hardware fp8 conversion of the quantization kernels against the shared
 * codec over all 2^32 fp32 inputs, and the kernels' scale division. */
#include "cuda/quant.h"
#include "cuda/quant_common.cuh"

/* ------------------------------------------------- conversion self-check */

template <int E5> __global__ void fk_cvt_check_kernel(unsigned long long *bad, unsigned int *first)
{
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t u = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; u < ((uint64_t)1 << 32); u += stride) {
        const float f = fk_u2f((uint32_t)u);
        if (f != f)
            continue; /* NaN never reaches fk_cvt2 */
        const uint32_t hw = fk_cvt2<E5>(f, -f);
        const uint32_t lo = fk_f32_to_fp8(f, E5), hi = fk_f32_to_fp8(-f, E5);
        if (hw != (lo | (hi << 8))) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (uint32_t)u);
        }
    }
}

/* Runs an exhaustive self-check pair (kernel k0 and k1, each counting its
 * mismatches and keeping the first one) and copies the two counts and the two
 * first mismatches back. */
typedef void (*fk_check_kernel_fn)(unsigned long long *, unsigned int *);
static fp8kit_status fk_run_selfcheck(fp8kit_ctx *ctx, fk_check_kernel_fn k0, fk_check_kernel_fn k1,
                                      unsigned long long *mismatches, unsigned int *first)
{
    fp8kit_status st = fk_cuda_bind(ctx);
    if (st)
        return st;
    unsigned long long *dbad = NULL;
    FK_CUDA_CHECK(ctx, cudaMalloc(&dbad, 2 * sizeof(unsigned long long) + 2 * sizeof(unsigned int)));
    unsigned int *dfirst = (unsigned int *)(dbad + 2);
    unsigned long long hb[2] = {0, 0};
    unsigned int hf[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
    cudaError_t e = cudaMemcpy(dbad, hb, sizeof hb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(dfirst, hf, sizeof hf, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        const int blocks = fk_cuda(ctx)->sm_count * 8;
        k0<<<blocks, FK_THREADS>>>(dbad, dfirst);
        k1<<<blocks, FK_THREADS>>>(dbad + 1, dfirst + 1);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(hb, dbad, sizeof hb, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(hf, dfirst, sizeof hf, cudaMemcpyDeviceToHost);
    cudaFree(dbad);
    FK_CUDA_CHECK(ctx, e);
    mismatches[0] = hb[0];
    mismatches[1] = hb[1];
    first[0] = hf[0];
    first[1] = hf[1];
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_cvt_selfcheck(fp8kit_ctx *ctx, unsigned long long *mismatches,
                                               unsigned int *first_bits)
{
    return fk_run_selfcheck(ctx, fk_cvt_check_kernel<0>, fk_cvt_check_kernel<1>, mismatches, first_bits);
}

/* ---------------------------------------------- group division self-check */

/* fk_div_q (quant_common.cuh) against the IEEE division after the fp8
 * conversion: every (amax, x) pair of 16-bit inputs (H 0: bf16, 1: f16) with
 * finite amax > 0 and |x| <= amax, for the scales of both element formats,
 * with and without pow2. bad[0] counts mismatches, first[0] the lowest
 * (amax << 16 | x) pair that differs. */
template <int H> __global__ void fk_div_check_kernel(unsigned long long *bad, unsigned int *first)
{
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < (1u << 31); u += stride) {
        const uint16_t ha = (uint16_t)(u >> 16), hx = (uint16_t)u;
        const float am = H ? fk_f16_to_f32(ha) : fk_bf16_to_f32(ha);
        const float x = H ? fk_f16_to_f32(hx) : fk_bf16_to_f32(hx);
        if (!(am > 0.0f) || fk_abs_bits(am) >= FK_F32_INF || !(fabsf(x) <= am))
            continue;
        bool ok = true;
#pragma unroll
        for (int v = 0; v < 4; v++) {
            const int e5 = v & 1, pow2 = v >> 1;
            const fk_div_s d = fk_div_prep(fk_scale_f32(fk_abs_bits(am), e5, pow2));
            if (d.fast)
                ok = ok && fk_f32_to_fp8(fk_div_q(x, d), e5) == fk_f32_to_fp8(x / d.s, e5);
        }
        if (!ok) {
            atomicAdd(bad, 1ull);
            atomicMin(first, u);
        }
    }
}

extern "C" fp8kit_status fk_cuda_div_selfcheck(fp8kit_ctx *ctx, unsigned long long *mismatches,
                                               unsigned int *first_pair)
{
    return fk_run_selfcheck(ctx, fk_div_check_kernel<0>, fk_div_check_kernel<1>, mismatches, first_pair);
}
