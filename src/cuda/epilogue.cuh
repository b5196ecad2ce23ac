/* epilogue.cuh - the Hopper GEMM's kernel parameters (fk_gemm_params, shared
 * by the host code in gemm.cu and the kernels in gemm_sm90.cu) and its fused
 * epilogue: tensor/row scales, alpha, beta*C, column/row bias, activation,
 * and the output cast (bf16/f16/f32, fp8 plain or OUTQ_SCALED with amax).
 * Each consumer thread finishes its own accumulator fragment (the wgmma
 * m64nN layout) and stores it straight to global memory. */
#ifndef FK_CUDA_EPILOGUE_CUH
#define FK_CUDA_EPILOGUE_CUH

#include <cuda.h>
#include <stdint.h>
#include "format/codec.h"
#include "format/epilogue.h"
#include "fp8kit.h"
#include "cuda/sched.cuh"

/* Everything a GEMM kernel reads besides the two tensor maps. Scale modes are
 * fp8kit_scale_mode values; dtypes fp8kit_dtype values. */
struct fk_gemm_params {
    int m, n, k;
    int num_kb; /* ceil(k / 128): K blocks of one smem stage */
    fk_tile_sched sched;
    int sa_mode, sb_mode;
    const float *sa, *sb;
    long long sa_sm, sa_sk; /* BLOCK: A scale (m, kb) at sa[m * sa_sm + kb * sa_sk] */
    long long sb_ld;        /* BLOCK: B scale (n / 128, kb) at sb[(n / 128) * sb_ld + kb] */
    float alpha, beta;
    const void *c;          /* NULL unless beta != 0 */
    long long ldc;
    int c_type;
    const void *bias;       /* NULL unless bias_mode != NONE */
    int bias_type, bias_mode;
    int act;
    void *d;
    long long ldd;
    int d_type;
    int out_quant;          /* OUTQ_NONE or OUTQ_SCALED */
    const float *scale_d;   /* OUTQ_SCALED */
    unsigned int *amax_bits; /* OUTQ_SCALED, optional: max of |y| as fp32 bits */
};

/* One compiled kernel variant: tile width, promotion interval (wgmma k32 steps
 * between fp32 promotions; 0 = fast accumulation: promote once per tile),
 * block scaling in the main loop, fp8 types (0 e4m3.e4m3, 1 e4m3.e5m2,
 * 2 e5m2.e4m3, 3 e5m2.e5m2), pipeline depth and the kernel itself. */
typedef void (*fk_sm90_kernel_fn)(const CUtensorMap, const CUtensorMap, const fk_gemm_params);
struct fk_sm90_variant {
    int bn, promo, block, ab, stages;
    int smem_bytes;
    fk_sm90_kernel_fn fn;
};
extern const fk_sm90_variant fk_sm90_variants[];
extern const int fk_sm90_variant_count;

#define FK_GEMM_THREADS 384 /* two consumer warpgroups + one producer warpgroup */
#define FK_GEMM_BM 128
#define FK_GEMM_BK 128

#ifdef __CUDACC__

static __device__ __forceinline__ float fk_epi_load(const void *p, long long i, int type)
{
    if (type == FP8KIT_F32)
        return ((const float *)p)[i];
    if (type == FP8KIT_BF16)
        return fk_bf16_to_f32(((const uint16_t *)p)[i]);
    return fk_f16_to_f32(((const uint16_t *)p)[i]);
}

/* y = act(alpha * s + beta * C[row, col] + bias) where s is the scaled sum. */
static __device__ __forceinline__ float fk_epi_value(const fk_gemm_params &p, float s, int row,
                                                     int col, float bias)
{
    float y = p.alpha * s;
    if (p.c)
        y = y + p.beta * fk_epi_load(p.c, (long long)row * p.ldc + col, p.c_type);
    if (p.bias)
        y = y + bias;
    return fk_act(y, p.act);
}

/* Stores one or two adjacent outputs (two when `two`) of row `row` at `col`;
 * amax collects |y| bits for OUTQ_SCALED. */
static __device__ __forceinline__ void fk_epi_store(const fk_gemm_params &p, int row, int col,
                                                    float y0, float y1, bool two,
                                                    unsigned int &amax)
{
    const long long off = (long long)row * p.ldd + col;
    switch (p.d_type) {
    case FP8KIT_F32: {
        float *d = (float *)p.d + off;
        if (two && ((uintptr_t)d & 7u) == 0) {
            *(float2 *)d = make_float2(y0, y1);
        } else {
            d[0] = y0;
            if (two)
                d[1] = y1;
        }
        break;
    }
    case FP8KIT_BF16:
    case FP8KIT_F16: {
        const bool bf = p.d_type == FP8KIT_BF16;
        uint16_t h0 = bf ? fk_f32_to_bf16(y0) : fk_f32_to_f16(y0);
        uint16_t h1 = bf ? fk_f32_to_bf16(y1) : fk_f32_to_f16(y1);
        uint16_t *d = (uint16_t *)p.d + off;
        if (two && ((uintptr_t)d & 3u) == 0) {
            *(uint32_t *)d = (uint32_t)h0 | ((uint32_t)h1 << 16);
        } else {
            d[0] = h0;
            if (two)
                d[1] = h1;
        }
        break;
    }
    default: { /* e4m3 / e5m2 */
        const int e5 = p.d_type == FP8KIT_E5M2;
        float v0 = y0, v1 = y1;
        if (p.out_quant == FP8KIT_OUTQ_SCALED) {
            unsigned int a0 = fk_f2u(y0) & 0x7FFFFFFFu, a1 = two ? fk_f2u(y1) & 0x7FFFFFFFu : 0u;
            amax = max(amax, max(a0, a1));
            const float sd = p.scale_d[0];
            v0 = y0 / sd;
            v1 = y1 / sd;
        }
        uint8_t q0 = fk_f32_to_fp8(v0, e5), q1 = fk_f32_to_fp8(v1, e5);
        uint8_t *d = (uint8_t *)p.d + off;
        if (two && ((uintptr_t)d & 1u) == 0) {
            *(uint16_t *)d = (uint16_t)(q0 | (q1 << 8));
        } else {
            d[0] = q0;
            if (two)
                d[1] = q1;
        }
        break;
    }
    }
}

/* Finishes the fragment of one consumer thread: acc holds rows r0 and r0 + 8
 * (r0 = tile row + warp-in-group * 16 + lane / 4) and, per 8-column block j,
 * columns n0 + 8 j + 2 (lane % 4) + {0, 1}: acc[4 j + 2 i + e]. Rows and
 * columns past M, N are skipped. Block scales were applied in the main loop
 * (sa_mode BLOCK): only tensor/row scales are applied here. */
template <int BN>
static __device__ __forceinline__ void fk_epilogue(const fk_gemm_params &p, const float *acc,
                                                   int r0, int n0, int lane)
{
    float sa_r[2] = {1.0f, 1.0f};
    const bool row_ok[2] = {r0 < p.m, r0 + 8 < p.m};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (p.sa_mode == FP8KIT_SCALE_TENSOR)
            sa_r[i] = p.sa[0];
        else if (p.sa_mode == FP8KIT_SCALE_ROW && row_ok[i])
            sa_r[i] = p.sa[r0 + 8 * i];
    }
    const float sb_t = p.sb_mode == FP8KIT_SCALE_TENSOR ? p.sb[0] : 1.0f;
    float bias_r[2] = {0.0f, 0.0f};
    if (p.bias_mode == FP8KIT_BIAS_ROW) {
#pragma unroll
        for (int i = 0; i < 2; i++)
            if (row_ok[i])
                bias_r[i] = fk_epi_load(p.bias, r0 + 8 * i, p.bias_type);
    }
    unsigned int amax = 0;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const int col = n0 + j * 8 + (lane & 3) * 2;
        if (col >= p.n)
            continue;
        const bool two = col + 1 < p.n;
        float sb0 = sb_t, sb1 = sb_t;
        if (p.sb_mode == FP8KIT_SCALE_ROW) {
            sb0 = p.sb[col];
            sb1 = two ? p.sb[col + 1] : 1.0f;
        }
        float bc0 = 0.0f, bc1 = 0.0f;
        if (p.bias_mode == FP8KIT_BIAS_COL) {
            bc0 = fk_epi_load(p.bias, col, p.bias_type);
            bc1 = two ? fk_epi_load(p.bias, col + 1, p.bias_type) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if (!row_ok[i])
                continue;
            const int row = r0 + 8 * i;
            const bool brow = p.bias_mode == FP8KIT_BIAS_ROW;
            /* scale product in double, one rounding to fp32 (as the CPU backend) */
            const float s0 = (float)((double)acc[j * 4 + i * 2] * ((double)sa_r[i] * sb0));
            const float s1 = (float)((double)acc[j * 4 + i * 2 + 1] * ((double)sa_r[i] * sb1));
            float y0 = fk_epi_value(p, s0, row, col, brow ? bias_r[i] : bc0);
            float y1 = two ? fk_epi_value(p, s1, row, col + 1, brow ? bias_r[i] : bc1) : 0.0f;
            fk_epi_store(p, row, col, y0, y1, two, amax);
        }
    }
    if (p.out_quant == FP8KIT_OUTQ_SCALED && p.amax_bits) {
        amax = __reduce_max_sync(0xFFFFFFFFu, amax);
        if (lane == 0 && amax)
            atomicMax(p.amax_bits, amax);
    }
}

#endif /* __CUDACC__ */
#endif
