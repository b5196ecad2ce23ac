/* epilogue_op.cuh - the fused epilogue op of the Hopper GEMM kernels (device code; the kernel
 * parameters are in gemm/params.h): loads of C, biases and scales, the
 * per-element value (tensor/row scales, alpha, beta*C, bias, activation)
 * and its output cast, the per-tile prefetch of scales and biases and the
 * staging layout the store paths share. Output quantization of whole rows
 * is in epilogue_quant.cuh; the store paths are store_*.cuh. */
#ifndef FK_SM90_EPILOGUE_OP_CUH
#define FK_SM90_EPILOGUE_OP_CUH

#include <cuda.h>
#include <stdint.h>
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/scale.h"
#include "fp8kit.h"
#include "cuda/ptx/ptx.cuh"
#include "cuda/gemm/params.h"

#ifdef __CUDACC__
static __device__ __forceinline__ float fk_epi_load(const void *p, long long i, int type)
{
    if (type == FP8KIT_F32)
        return ((const float *)p)[i];
    if (type == FP8KIT_BF16)
        return fk_bf16_to_f32(((const uint16_t *)p)[i]);
    return fk_f16_to_f32(((const uint16_t *)p)[i]);
}

/* The activation as a real call: one copy of exp2f/erff in the kernel
 * instead of one per unrolled element (instruction-cache footprint). */
static __device__ __noinline__ float fk_epi_act(float y, int act) { return fk_act(y, act); }

/* y = act(alpha * s + beta * C[row, col] + bias) where s is the scaled sum. */
static __device__ __forceinline__ float fk_epi_value(const fk_gemm_params &p, float s, int row,
                                                     int col, float bias)
{
    float y = p.alpha * s;
    if (p.c)
        y = y + p.beta * fk_epi_load(p.c, (long long)row * p.ldc + col, p.c_type);
    if (p.bias)
        y = y + bias;
    return p.act ? fk_epi_act(y, p.act) : y;
}

/* Casts and stores n (1..4) adjacent outputs of row `row` starting at `col`,
 * as one vector store when n == 4 and the address allows; amax collects |y|
 * bits for OUTQ_SCALED. */
static __device__ __forceinline__ void fk_epi_store4(const fk_gemm_params &p, int row, int col,
                                                     const float *y, int n, unsigned int &amax)
{
    const long long off = (long long)row * p.ldd + col;
    switch (p.d_type) {
    case FP8KIT_F32: {
        float *d = (float *)p.d + off;
        if (n == 4 && ((uintptr_t)d & 15u) == 0) {
            *(float4 *)d = make_float4(y[0], y[1], y[2], y[3]);
        } else {
            for (int e = 0; e < n; e++)
                d[e] = y[e];
        }
        break;
    }
    case FP8KIT_BF16:
    case FP8KIT_F16: {
        const bool bf = p.d_type == FP8KIT_BF16;
        uint16_t h[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            h[e] = bf ? fk_f32_to_bf16(y[e]) : fk_f32_to_f16(y[e]);
        uint16_t *d = (uint16_t *)p.d + off;
        if (n == 4 && ((uintptr_t)d & 7u) == 0) {
            *(uint2 *)d = make_uint2((uint32_t)h[0] | ((uint32_t)h[1] << 16),
                                     (uint32_t)h[2] | ((uint32_t)h[3] << 16));
        } else {
            for (int e = 0; e < n; e++)
                d[e] = h[e];
        }
        break;
    }
    default: { /* e4m3 / e5m2 */
        const int e5 = p.d_type == FP8KIT_E5M2;
        const bool scaled = p.out_quant == FP8KIT_OUTQ_SCALED;
        const float sd = scaled ? p.scale_d[0] : 1.0f;
        uint32_t q = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if (e < n && scaled)
                amax = max(amax, fk_f2u(y[e]) & 0x7FFFFFFFu);
            q |= (uint32_t)fk_f32_to_fp8(scaled ? y[e] / sd : y[e], e5) << (8 * e);
        }
        uint8_t *d = (uint8_t *)p.d + off;
        if (n == 4 && ((uintptr_t)d & 3u) == 0) {
            *(uint32_t *)d = q;
        } else {
            for (int e = 0; e < n; e++)
                d[e] = (uint8_t)(q >> (8 * e));
        }
        break;
    }
    }
}

/* Width in columns of one epilogue chunk: the accumulators go through
 * shared memory 32 columns at a time (64 x 32 fp32 = 8 KB per consumer
 * warpgroup), so wide tiles leave room for a deep stage ring. */
#define FK_EPI_CH 32

/* Swizzled float index of (row r, column c) in a consumer warpgroup's staging
 * chunk of 64 x 32 fp32: XOR of column bits 3-4 with the row keeps float2 and
 * float4 groups contiguous and spreads the fragment writes over the banks. */
static __device__ __forceinline__ int fk_stage_idx(int r, int c) { return r * FK_EPI_CH + (c ^ ((r & 3) << 3)); }

/* Per-tile epilogue inputs read from global memory at the start of the tile,
 * so their latency hides behind the main loop: this thread's share of the
 * per-column B scales (c0, c1: columns tid and tid + 128) and column bias
 * (b0, b1), one per-row value (r: threads 0-63 the A scale of row tid,
 * threads 64-127 the row bias of row tid - 64) and the two tensor scales. */
struct fk_epi_pre {
    float c0, c1, b0, b1, r, sat, sbt;
    int m_end; /* rows at or past it are not stored (p.m; a group's end in the grouped kernel) */
};

/* Grouped kernel: m_end is the group's row end and g the group, whose B
 * scales and column bias start at g (tensor) or g * N. */
template <int BN>
static __device__ __forceinline__ fk_epi_pre fk_epi_prefetch(const fk_gemm_params &p, int m0, int n0, int tid,
                                                             int m_end = -1, int g = 0)
{
    fk_epi_pre e;
    e.m_end = m_end < 0 ? p.m : m_end;
    e.sat = p.sa_mode == FP8KIT_SCALE_TENSOR ? p.sa[0] : 1.0f;
    e.sbt = p.sb_mode == FP8KIT_SCALE_TENSOR ? p.sb[g] : 1.0f;
    const long long cg = (long long)g * p.n;
    const int ca = n0 + tid, cb = n0 + 128 + tid;
    const bool oka = tid < BN && ca < p.n, okb = tid + 128 < BN && cb < p.n;
    const bool rowb = p.sb_mode == FP8KIT_SCALE_ROW, colb = p.bias_mode == FP8KIT_BIAS_COL;
    e.c0 = oka ? (rowb ? p.sb[cg + ca] : e.sbt) : 0.0f;
    e.c1 = okb ? (rowb ? p.sb[cg + cb] : e.sbt) : 0.0f;
    e.b0 = oka && colb ? fk_epi_load(p.bias, cg + ca, p.bias_type) : 0.0f;
    e.b1 = okb && colb ? fk_epi_load(p.bias, cg + cb, p.bias_type) : 0.0f;
    const int row = m0 + (tid & 63);
    e.r = 0.0f;
    if (row < e.m_end) {
        if (tid < 64)
            e.r = p.sa_mode == FP8KIT_SCALE_ROW ? p.sa[row] : e.sat;
        else if (p.bias_mode == FP8KIT_BIAS_ROW)
            e.r = fk_epi_load(p.bias, row, p.bias_type);
    }
    return e;
}

/* Floats of a consumer warpgroup's epilogue table: BN column scales, BN
 * column biases, 64 row scales, 64 row biases, BN column factors
 * alpha * sa * sb rounded once from double (sa = 1 with row scales). */
#define FK_EPI_TAB(BN) (3 * (BN) + 128)

/* Bytes of one staged output row of the bulk epilogue: BN 16-bit values and
 * 16 bytes of padding (conflict-free fragment stores, 16-byte alignment). */
#define FK_EPI_ROW_BYTES(BN) (2 * (BN) + 16)

/* Writes the prefetched factors to the warpgroup's table. */
template <int BN>
static __device__ __forceinline__ void fk_epi_tab_write(const fk_gemm_params &p, float *tab, const fk_epi_pre &pre,
                                                        int tid)
{
    const double ar = (double)p.alpha * (double)pre.sat;
    if (tid < BN) {
        tab[tid] = pre.c0;
        tab[BN + tid] = pre.b0;
        tab[2 * BN + 128 + tid] = (float)(ar * (double)pre.c0);
    }
    if (tid + 128 < BN) {
        tab[128 + tid] = pre.c1;
        tab[BN + 128 + tid] = pre.b1;
        tab[2 * BN + 256 + tid] = (float)(ar * (double)pre.c1);
    }
    tab[2 * BN + tid] = pre.r;
}

/* Device helpers with a host fallback (tests/emu compiles this file as host
 * C++): the rcp estimate, byte permute, f16 -> fp32, the 2^x estimate (the
 * fp32 pair -> fp8 pair conversion is ptx/cvt.cuh's fk_cvt2, which has its
 * own). */

/* 1 / d for 1 <= d < 2^126 from the hardware estimate (within 1 ulp). The
 * .ftz form is exact here: d is normal and so is 1 / d (the callers keep d
 * far below 2^126); the non-.ftz form wraps the estimate in a 5-instruction
 * subnormal fix-up that this range never needs. */
static __device__ __forceinline__ float fk_epi_rcp_est(float d)
{
#ifdef FK_SM90_DEVICE
    return fk_rcp_approx_ftz(d);
#else
    return 1.0f / d;
#endif
}

/* prmt.b32: byte i of the result is byte (sel >> 4 i) & 7 of {b, a}. */
static __device__ __forceinline__ uint32_t fk_epi_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef FK_SM90_DEVICE
    return fk_prmt(a, b, sel);
#else
    const uint64_t v = ((uint64_t)b << 32) | a;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        r |= (uint32_t)((v >> (8 * ((sel >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
    return r;
#endif
}

/* f16 bits -> fp32 (exact). */
static __device__ __forceinline__ float fk_epi_f16_f32(uint32_t h)
{
#ifdef FK_SM90_DEVICE
    return fk_cvt_f32_f16((uint16_t)h);
#else
    return fk_f16_to_f32((uint16_t)h);
#endif
}

/* 2^x from the hardware estimate (ex2.approx: relative error about 2^-22;
 * results below the normal range flush to 0). */
static __device__ __forceinline__ float fk_epi_ex2(float x)
{
#ifdef FK_SM90_DEVICE
    return fk_ex2_approx_ftz(x);
#else
    return exp2f(x);
#endif
}

/* y / (1 + 2^z) of src/format/epilogue_math.h (gelu_tanh, silu; z from fk_act_z)
 * in 3 instructions and no division, so that many of them interleave: 2^z
 * from ex2, the reciprocal of d = 1 + 2^z from rcp.approx (1 ulp), times y:
 * a few ulp from the CPU's exp2f and division, far inside docs/spec.md 3 even
 * for fp32 output (the rounding of z, common to both, dominates). Where 2^z
 * overflows d is Inf and its reciprocal 0: a signed 0 for finite y and NaN
 * for y = -Inf, as on the CPU. */
static __device__ __forceinline__ float fk_epi_ysig(float y, float z)
{
    const float d = 1.0f + fk_epi_ex2(z);
    return y * fk_epi_rcp_est(d);
}

/* Applies the activation to n values: the branch on act is taken once, so
 * the n independent evaluations interleave. */
template <int N> static __device__ __forceinline__ void fk_epi_act_n(float (&y)[N], int act)
{
    if (act == 2) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = fk_epi_ysig(y[e], fk_act_z(y[e], 2));
    } else if (act == 4) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = fk_epi_ysig(y[e], fk_act_z(y[e], 4));
    } else if (act == 1) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = y[e] < 0.0f ? 0.0f : y[e];
    } else if (act) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = fk_epi_act(y[e], act);
    }
}
#endif /* __CUDACC__ */
#endif
