/* epilogue.cuh - the Hopper GEMM's kernel parameters (fk_gemm_params, shared
 * by the host code in gemm.cu and the kernels in gemm_sm90.cu) and its fused
 * epilogue: tensor/row scales, alpha, beta*C, column/row bias, activation,
 * and the output cast (bf16/f16/f32, fp8 plain or OUTQ_SCALED with amax, or
 * fused mx / block1x128 quantization of each output row with its scales).
 * Each consumer warpgroup stages its accumulators in shared memory 32
 * columns at a time and stores rows with coalesced vector stores from one
 * compact loop (fused quantization works on the fragment in registers);
 * scales and biases are prefetched at the start of the tile. */
#ifndef FK_CUDA_EPILOGUE_CUH
#define FK_CUDA_EPILOGUE_CUH

#include <cuda.h>
#include <stdint.h>
#include "format/codec.h"
#include "format/epilogue.h"
#include "format/scale.h"
#include "fp8kit.h"
#include "cuda/ptx.cuh"
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
    int out_quant;          /* fp8kit_out_quant */
    const float *scale_d;   /* OUTQ_SCALED */
    unsigned int *amax_bits; /* OUTQ_SCALED, optional: max of |y| as fp32 bits */
    void *scale_d_out;      /* OUTQ_MX: e8m0 M x N/32; OUTQ_BLOCK1X128: f32 M x ceil(N/128) */
    int out_hp;             /* OUTQ_MX / BLOCK1X128: y is rounded to this dtype first */
    int out_rceil;          /* OUTQ_MX: RCEIL scale rounding (else FLOOR) */
    int out_pow2;           /* OUTQ_BLOCK1X128: power-of-two scales */
    int d_bulk;             /* 1: bf16/f16 D rows leave through bulk copies (fk_epilogue_bulk) */
    int lag;                /* stages consumer warpgroup 1 runs behind warpgroup 0 (gemm_sm90.cu) */
    CUtensorMap td;         /* d_bulk 2: D in 64 x 32 boxes, 64-byte swizzle (the TMA-store epilogue) */
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
    int cluster; /* CTAs per cluster along M sharing each B tile through TMA multicast (1 or 2) */
    int tma_store; /* 1: small epilogue area (TMA-store epilogue for plain epilogues), one stage more */
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

/* The activation as a real call: one copy of tanhf/erff/expf in the kernel
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
};

template <int BN>
static __device__ __forceinline__ fk_epi_pre fk_epi_prefetch(const fk_gemm_params &p, int m0, int n0, int tid)
{
    fk_epi_pre e;
    e.sat = p.sa_mode == FP8KIT_SCALE_TENSOR ? p.sa[0] : 1.0f;
    e.sbt = p.sb_mode == FP8KIT_SCALE_TENSOR ? p.sb[0] : 1.0f;
    const int ca = n0 + tid, cb = n0 + 128 + tid;
    const bool oka = tid < BN && ca < p.n, okb = tid + 128 < BN && cb < p.n;
    const bool rowb = p.sb_mode == FP8KIT_SCALE_ROW, colb = p.bias_mode == FP8KIT_BIAS_COL;
    e.c0 = oka ? (rowb ? p.sb[ca] : e.sbt) : 0.0f;
    e.c1 = okb ? (rowb ? p.sb[cb] : e.sbt) : 0.0f;
    e.b0 = oka && colb ? fk_epi_load(p.bias, ca, p.bias_type) : 0.0f;
    e.b1 = okb && colb ? fk_epi_load(p.bias, cb, p.bias_type) : 0.0f;
    const int row = m0 + (tid & 63);
    e.r = 0.0f;
    if (row < p.m) {
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

/* y * sigmoid(z) = y / (1 + exp(-z)) without a division's slow-path branch
 * (so that many of them interleave): expf, then the reciprocal of d >= 1
 * from the hardware estimate and one Newton step (within 1 ulp; d = Inf
 * gives 0), times y. gelu_tanh(y) = y * sigmoid(2 u) with u = k0 (y + k1
 * y^3) (= 0.5 y (1 + tanh u)); silu(y) = y * sigmoid(y). */
static __device__ __forceinline__ float fk_epi_ysig(float y, float z)
{
    const float d = 1.0f + expf(-z);
    float r = 0.0f;
#ifdef FK_SM90_DEVICE
    asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(d));
#endif
    r = fmaf(r, fmaf(-d, r, 1.0f), r);
    return y * (d == INFINITY ? 0.0f : r);
}

static __device__ __forceinline__ float fk_epi_gelu_tanh(float y)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return fk_epi_ysig(y, 2.0f * (k0 * (y + k1 * y * y * y)));
}

/* Applies the activation to n values: the branch on act is taken once, so
 * the n independent evaluations interleave. */
template <int N> static __device__ __forceinline__ void fk_epi_act_n(float (&y)[N], int act)
{
    if (act == 2) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = fk_epi_gelu_tanh(y[e]);
    } else if (act == 4) {
#pragma unroll
        for (int e = 0; e < N; e++)
            y[e] = fk_epi_ysig(y[e], y[e]);
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

/* y rounded to the high-precision type out_hp (RNE) and widened back: the
 * value fused output quantization works on (as the CPU backend). */
static __device__ __forceinline__ float fk_epi_round_hp(float y, int hp)
{
    if (hp == FP8KIT_BF16)
        return fk_bf16_to_f32(fk_f32_to_bf16(y));
    if (hp == FP8KIT_F16)
        return fk_f16_to_f32(fk_f32_to_f16(y));
    return y;
}

/* One y of fused output quantization (a real call: one copy per kernel):
 * the scaled sum a * (sa * cf) rounded once to fp32, then alpha, beta * C,
 * bias b and the activation as in fk_epilogue, then the rounding to out_hp. */
static __device__ __noinline__ float fk_epi_rowq_val(const fk_gemm_params &p, float a, float sa, float cf, float b,
                                                     int row, int col)
{
    const float s = (float)((double)a * ((double)sa * cf));
    return fk_epi_round_hp(fk_epi_value(p, s, row, col, b), p.out_hp);
}

/* One fp8 code of fused output quantization (a real call, as above):
 * mx: fp8(y * r) with the reciprocal r; block1x128: fp8(y / S). */
static __device__ __noinline__ uint32_t fk_epi_rowq_code(float y, float f, int mx, int e5)
{
    return mx ? fk_quant_mx_elem(y, f, e5) : fk_quant_f32_elem(y, f, e5);
}

/* Fused output quantization, step 1 for one 32-column chunk: the 16
 * fragment values acc[0 .. 15] (rows r_lo + 8 i of the warpgroup, columns
 * tc0 + 8 j + q2 + {0, 1} of the tile, at acc[4 j + 2 i + {0, 1}]) are
 * replaced by y rounded to out_hp - computed exactly as the general
 * epilogue computes it - or by 0 outside M x N; am_lo / am_hi collect the
 * two rows' max |y| bits. One pair per step, not unrolled (code size): the
 * 16 registers rotate down by 2, so after 8 steps they hold y in order. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epi_rowq_y(const fk_gemm_params &p, float (&acc)[NACC], const float *tab,
                                                     int m0, int n0, int tc0, int r_lo, int q2, uint32_t &am_lo,
                                                     uint32_t &am_hi)
{
    const bool brow = p.bias_mode == FP8KIT_BIAS_ROW;
#pragma unroll 1
    for (int k = 0; k < 8; k++) {
        const int i = k & 1, r = r_lo + 8 * i, row = m0 + r;
        const float sa = tab[2 * BN + r], br = tab[2 * BN + 64 + r];
        float y[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int tc = tc0 + 8 * (k >> 1) + q2 + e, col = n0 + tc;
            y[e] = 0.0f;
            if (row < p.m && col < p.n)
                y[e] = fk_epi_rowq_val(p, acc[e], sa, tab[tc], brow ? br : tab[BN + tc], row, col);
        }
        const uint32_t am = fk_max_u32(fk_abs_bits(y[0]), fk_abs_bits(y[1]));
        if (i)
            am_hi = fk_max_u32(am_hi, am);
        else
            am_lo = fk_max_u32(am_lo, am);
#pragma unroll
        for (int x = 0; x < 14; x++)
            acc[x] = acc[x + 2];
        acc[14] = y[0];
        acc[15] = y[1];
    }
}

/* Fused output quantization, step 2 for one 32-column chunk: encodes the y
 * values acc[0 .. 15] with their row's factor (mx: the scale's reciprocal
 * r, q = fp8(y * r); block1x128: the scale S, q = fp8(y / S)) and stores
 * them, two adjacent bytes per store; c is this thread's first column. One
 * pair per step (not unrolled); acc[0 .. 15] are consumed. */
template <int NACC>
static __device__ __forceinline__ void fk_epi_rowq_store(const fk_gemm_params &p, float (&acc)[NACC], int row_lo,
                                                         int c, bool mx, float f_lo, float f_hi, int e5)
{
#pragma unroll 1
    for (int k = 0; k < 8; k++) {
        const int row = row_lo + 8 * (k & 1), col = c + 8 * (k >> 1);
        const float f = (k & 1) ? f_hi : f_lo;
        if (row < p.m) {
            const uint32_t q0 = fk_epi_rowq_code(acc[0], f, mx, e5), q1 = fk_epi_rowq_code(acc[1], f, mx, e5);
            uint8_t *d = (uint8_t *)p.d + (long long)row * p.ldd + col;
            if (col + 1 < p.n && ((uintptr_t)d & 1u) == 0) {
                *(uint16_t *)d = (uint16_t)(q0 | (q1 << 8));
            } else {
                if (col < p.n)
                    d[0] = (uint8_t)q0;
                if (col + 1 < p.n)
                    d[1] = (uint8_t)q1;
            }
        }
#pragma unroll
        for (int x = 0; x < 14; x++)
            acc[x] = acc[x + 2];
    }
}

/* The epilogue with fused output quantization (OUTQ_MX: e8m0 scale per 32
 * columns of each row; OUTQ_BLOCK1X128: f32 scale per 128 columns, which
 * needs BN % 128 == 0 so that a group never spans two tiles - the planner
 * guarantees it). It works on the wgmma fragment in registers, group by
 * group: the 4 threads of a fragment row hold all of a group's values for
 * two rows (8 values per 32 columns each), so y, the group's amax (a
 * reduction over those 4 lanes), the scale (SPEC 2 through src/format, as
 * the CPU backend) and the codes need neither staging nor a second pass.
 * A 1x128 group is 4 chunks: each chunk's y replaces its accumulators and
 * the group's 64 registers rotate by 16, so after 4 chunks they hold the
 * group's y in order; then the chunks are encoded and shifted out. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_rowq(const fk_gemm_params &p, float (&acc)[NACC], float *tab,
                                                        const fk_epi_pre &pre, int m0, int n0, int tid, int bar_id)
{
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    fk_named_bar_sync(bar_id, 128);
    const int r_lo = warp * 16 + (lane >> 2), q2 = (lane & 3) * 2, row_lo = m0 + r_lo;
    const int e5 = p.d_type == FP8KIT_E5M2;
    const bool mx = p.out_quant == FP8KIT_OUTQ_MX;
    const int nsub = mx ? 1 : 4; /* 32-column chunks per group */
    if (mx || BN % 128 == 0) {
#pragma unroll 1
        for (int tc0 = 0; tc0 < BN && n0 + tc0 < p.n; tc0 += 32 * nsub) {
            uint32_t am_lo = 0, am_hi = 0;
#pragma unroll 1
            for (int sub = 0; sub < nsub; sub++) {
                fk_epi_rowq_y<BN>(p, acc, tab, m0, n0, tc0 + 32 * sub, r_lo, q2, am_lo, am_hi);
                if constexpr (BN % 128 == 0) {
                    if (!mx) { /* the group's 64 registers rotate down by 16 */
                        float t[16];
#pragma unroll
                        for (int x = 0; x < 16; x++)
                            t[x] = acc[x];
#pragma unroll
                        for (int x = 0; x < 48; x++)
                            acc[x] = acc[x + 16];
#pragma unroll
                        for (int x = 0; x < 16; x++)
                            acc[48 + x] = t[x];
                    }
                }
            }
            /* the group's amax over the 4 lanes of each fragment row */
#pragma unroll
            for (int o = 1; o <= 2; o <<= 1) {
                am_lo = fk_max_u32(am_lo, __shfl_xor_sync(0xFFFFFFFFu, am_lo, o));
                am_hi = fk_max_u32(am_hi, __shfl_xor_sync(0xFFFFFFFFu, am_hi, o));
            }
            float f_lo, f_hi;
            if (mx) {
                const uint8_t s_lo = fk_mx_scale(am_lo, e5, p.out_rceil), s_hi = fk_mx_scale(am_hi, e5, p.out_rceil);
                f_lo = fk_mx_recip(s_lo);
                f_hi = fk_mx_recip(s_hi);
                if ((lane & 3) == 0) {
                    uint8_t *sd = (uint8_t *)p.scale_d_out + (n0 + tc0) / 32;
                    const long long ld = p.n / 32;
                    if (row_lo < p.m)
                        sd[(long long)row_lo * ld] = s_lo;
                    if (row_lo + 8 < p.m)
                        sd[(long long)(row_lo + 8) * ld] = s_hi;
                }
            } else {
                f_lo = fk_scale_f32(am_lo, e5, p.out_pow2);
                f_hi = fk_scale_f32(am_hi, e5, p.out_pow2);
                if ((lane & 3) == 0) {
                    float *sd = (float *)p.scale_d_out + (n0 + tc0) / 128;
                    const long long ld = (p.n + 127) / 128;
                    if (row_lo < p.m)
                        sd[(long long)row_lo * ld] = f_lo;
                    if (row_lo + 8 < p.m)
                        sd[(long long)(row_lo + 8) * ld] = f_hi;
                }
            }
#pragma unroll 1
            for (int sub = 0; sub < nsub; sub++) {
                fk_epi_rowq_store(p, acc, row_lo, n0 + tc0 + 32 * sub + q2, mx, f_lo, f_hi, e5);
                /* the next chunk moves down into acc[0 .. 15] */
#pragma unroll
                for (int x = 0; x + 16 < NACC; x++)
                    acc[x] = acc[x + 16];
            }
        }
    }
    /* every thread is done reading the table before the next tile rewrites it */
    fk_named_bar_sync(bar_id, 128);
}

/* Epilogue of one consumer warpgroup (threads tid 0..127) for its 64 rows
 * m0 .. m0 + 63 and columns n0 .. n0 + BN - 1 of the output. acc holds the
 * wgmma m64nBN fragment (rows warp * 16 + lane / 4 + {0, 8}, columns
 * 8 j + 2 (lane % 4) + {0, 1}, value acc[4 j + 2 i + e]); it is consumed
 * (shifted down) chunk by chunk. The prefetched factors go to the table tab.
 * For each chunk of 32 columns:
 * 1. each thread writes its part of the fragment to the staging chunk;
 * 2. after a warpgroup barrier, each thread takes 4 consecutive columns of a
 *    row (8 threads per row: 64-byte segments of bf16 output), applies
 *    tensor/row scales (block scales were applied in the main loop), alpha,
 *    beta * C, bias, activation and the output cast, and stores them. Rows
 *    and columns past M, N are skipped.
 * The chunk and row loops are not unrolled: one copy of the epilogue code,
 * whatever the options and the tile width. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue(const fk_gemm_params &p, float (&acc)[NACC], float *stage,
                                                   float *tab, const fk_epi_pre &pre, int m0, int n0, int tid,
                                                   int bar_id)
{
    if (p.out_quant == FP8KIT_OUTQ_MX || p.out_quant == FP8KIT_OUTQ_BLOCK1X128) {
        fk_epilogue_rowq<BN>(p, acc, tab, pre, m0, n0, tid, bar_id);
        return;
    }
    constexpr int CH = FK_EPI_CH;
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);

    constexpr int TPR = CH / 4;       /* threads per row */
    constexpr int RSTEP = 128 / TPR;  /* rows per pass */
    const int c4 = (tid % TPR) * 4;
    unsigned int amax = 0;
    const bool lean = !p.c && !p.bias && !p.act && p.out_quant == FP8KIT_OUTQ_NONE &&
                      (p.d_type == FP8KIT_BF16 || p.d_type == FP8KIT_F16 || p.d_type == FP8KIT_F32);
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
#pragma unroll 1
    for (int ch = 0; ch < BN / CH; ch++) {
#pragma unroll
        for (int j = 0; j < CH / 8; j++) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = warp * 16 + (lane >> 2) + 8 * i, c = 8 * j + (lane & 3) * 2;
                *(float2 *)&stage[fk_stage_idx(r, c)] = make_float2(acc[4 * j + 2 * i], acc[4 * j + 2 * i + 1]);
            }
        }
        /* the next chunk's fragment moves down into acc[0 .. CH / 2 - 1] */
#pragma unroll
        for (int i = 0; i + CH / 2 < NACC; i++)
            acc[i] = acc[i + CH / 2];
        fk_named_bar_sync(bar_id, 128);

        const int tc = ch * CH + c4; /* column inside the tile */
        const int col = n0 + tc;
        const int nv = min(4, p.n - col); /* valid columns of this thread (<= 0: none) */
        const float4 cv = *(const float4 *)&tab[tc];
        const float colf[4] = {cv.x, cv.y, cv.z, cv.w};
        if (lean) {
            /* The common case - scales and alpha only, 16/32-bit output: y =
             * acc * (alpha * sa * sb) in fp32 (the factor rounded once from
             * double in the tensor case), hardware conversion, one vector
             * store. */
            float cf[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                cf[e] = (float)((double)p.alpha * (double)(rowsc ? 1.0f : pre.sat) * (double)colf[e]);
#pragma unroll 1
            for (int r = tid / TPR; r < 64; r += RSTEP) {
                const int row = m0 + r;
                if (row >= p.m || nv <= 0)
                    continue;
                const float4 v = *(const float4 *)&stage[fk_stage_idx(r, c4)];
                float y[4] = {v.x, v.y, v.z, v.w};
                const float sa = rowsc ? tab[2 * BN + r] : 1.0f;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    y[e] = rowsc ? y[e] * (sa * cf[e]) : y[e] * cf[e];
                const long long off = (long long)row * p.ldd + col;
                if (p.d_type != FP8KIT_F32 && nv == 4 && (((uintptr_t)p.d + 2 * off) & 7u) == 0) {
                    const bool bf = p.d_type == FP8KIT_BF16;
                    const uint32_t lo = bf ? fk_cvt_bf16x2(y[0], y[1]) : fk_cvt_f16x2(y[0], y[1]);
                    const uint32_t hi = bf ? fk_cvt_bf16x2(y[2], y[3]) : fk_cvt_f16x2(y[2], y[3]);
                    *(uint2 *)((uint16_t *)p.d + off) = make_uint2(lo, hi);
                } else {
                    fk_epi_store4(p, row, col, y, nv, amax);
                }
            }
        } else {
            const float4 bv = *(const float4 *)&tab[BN + tc];
            const float bcol[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll 1
            for (int r = tid / TPR; r < 64; r += RSTEP) {
                const int row = m0 + r;
                if (row >= p.m || nv <= 0)
                    continue;
                const float4 v = *(const float4 *)&stage[fk_stage_idx(r, c4)];
                const float sa = tab[2 * BN + r]; /* row or tensor scale */
                const float brow = tab[2 * BN + 64 + r];
                const float a[4] = {v.x, v.y, v.z, v.w};
                float y[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    /* scale product in double, one rounding to fp32 (as the CPU backend) */
                    const float s = (float)((double)a[e] * ((double)sa * colf[e]));
                    const int cc = e < nv ? col + e : col; /* never read C past N */
                    y[e] = fk_epi_value(p, s, row, cc, p.bias_mode == FP8KIT_BIAS_ROW ? brow : bcol[e]);
                }
                fk_epi_store4(p, row, col, y, nv, amax);
            }
        }
        /* the staging chunk is rewritten by the next chunk */
        fk_named_bar_sync(bar_id, 128);
    }
    if (p.out_quant == FP8KIT_OUTQ_SCALED && p.amax_bits) {
        amax = __reduce_max_sync(0xFFFFFFFFu, amax);
        if (lane == 0 && amax)
            atomicMax(p.amax_bits, amax);
    }
}

/* The epilogue for bf16/f16 output without C or output quantization, with
 * D 16-byte aligned and N and its row stride multiples of 8 (p.d_bulk):
 * each thread computes its fragment in registers - y = act(acc * (sa * f) +
 * bias), f from the table - and stores the 16-bit values into a staged
 * copy of the warpgroup's 64 x BN rows in shared memory (buf); then 64
 * threads each send one row to global memory with a bulk copy and the
 * warpgroup goes on to the next tile while the copies drain. Before buf is
 * written again each of those threads waits until its copy has read it. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_bulk(const fk_gemm_params &p, float (&acc)[NACC],
                                                        unsigned char *buf, float *tab, const fk_epi_pre &pre,
                                                        int m0, int n0, int tid, int bar_id)
{
    constexpr int RB = FK_EPI_ROW_BYTES(BN);
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    if (tid < 64)
        fk_bulk_wait_read<0>();
    fk_named_bar_sync(bar_id, 128);

    const int r_lo = warp * 16 + (lane >> 2), q2 = (lane & 3) * 2;
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW, bf = p.d_type == FP8KIT_BF16;
    const float sa_lo = rowsc ? tab[2 * BN + r_lo] : 1.0f, sa_hi = rowsc ? tab[2 * BN + r_lo + 8] : 1.0f;
    uint32_t *o_lo = (uint32_t *)(buf + r_lo * RB + q2 * 2), *o_hi = (uint32_t *)(buf + (r_lo + 8) * RB + q2 * 2);
    const float *cf = tab + 2 * BN + 128 + q2;
    if (!p.bias && !p.act) {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const float2 f = *(const float2 *)&cf[8 * j];
            const float y0 = acc[4 * j] * (sa_lo * f.x), y1 = acc[4 * j + 1] * (sa_lo * f.y);
            const float y2 = acc[4 * j + 2] * (sa_hi * f.x), y3 = acc[4 * j + 3] * (sa_hi * f.y);
            o_lo[4 * j] = bf ? fk_cvt_bf16x2(y0, y1) : fk_cvt_f16x2(y0, y1);
            o_hi[4 * j] = bf ? fk_cvt_bf16x2(y2, y3) : fk_cvt_f16x2(y2, y3);
        }
    } else {
        /* bias and activation: 32 columns per pass (not unrolled), the next
         * 16 accumulators shifted down after each pass */
        const bool brow = p.bias_mode == FP8KIT_BIAS_ROW;
        const float b_lo = brow ? tab[2 * BN + 64 + r_lo] : 0.0f, b_hi = brow ? tab[2 * BN + 64 + r_lo + 8] : 0.0f;
        const int act = p.act;
#pragma unroll 1
        for (int jj = 0; jj < BN / 32; jj++) {
            float y[16];
#pragma unroll
            for (int j4 = 0; j4 < 4; j4++) {
                const int c = 8 * (4 * jj + j4);
                const float2 f = *(const float2 *)&cf[c];
                const float2 bc = brow ? make_float2(0.0f, 0.0f) : *(const float2 *)&tab[BN + c + q2];
                y[4 * j4] = acc[4 * j4] * (sa_lo * f.x) + (b_lo + bc.x);
                y[4 * j4 + 1] = acc[4 * j4 + 1] * (sa_lo * f.y) + (b_lo + bc.y);
                y[4 * j4 + 2] = acc[4 * j4 + 2] * (sa_hi * f.x) + (b_hi + bc.x);
                y[4 * j4 + 3] = acc[4 * j4 + 3] * (sa_hi * f.y) + (b_hi + bc.y);
            }
            fk_epi_act_n(y, act);
#pragma unroll
            for (int j4 = 0; j4 < 4; j4++) {
                const int c = 8 * (4 * jj + j4);
                o_lo[c / 2] = bf ? fk_cvt_bf16x2(y[4 * j4], y[4 * j4 + 1]) : fk_cvt_f16x2(y[4 * j4], y[4 * j4 + 1]);
                o_hi[c / 2] = bf ? fk_cvt_bf16x2(y[4 * j4 + 2], y[4 * j4 + 3])
                                 : fk_cvt_f16x2(y[4 * j4 + 2], y[4 * j4 + 3]);
            }
#pragma unroll
            for (int i = 0; i + 16 < NACC; i++)
                acc[i] = acc[i + 16];
        }
    }
    fk_fence_proxy_async();
    fk_named_bar_sync(bar_id, 128);
    if (tid < 64 && m0 + tid < p.m) {
        const int bytes = min(BN, p.n - n0) * 2;
        fk_bulk_store((uint16_t *)p.d + ((long long)(m0 + tid) * p.ldd + n0), fk_smem_addr(buf + tid * RB),
                      (uint32_t)bytes);
        fk_bulk_commit();
    }
}

#endif /* __CUDACC__ */
#endif
