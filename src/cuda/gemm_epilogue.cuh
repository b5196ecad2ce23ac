/* gemm_epilogue.cuh - the Hopper GEMM kernels' fused epilogue (device code;
 * the kernel parameters are in gemm_params.h): tensor/row scales, alpha, beta*C, column/row bias, activation,
 * and the output cast (bf16/f16/f32, fp8 plain or OUTQ_SCALED with amax, or
 * fused mx / block1x128 quantization of each output row with its scales).
 * Each consumer warpgroup stages its accumulators in shared memory 32
 * columns at a time and stores rows with coalesced vector stores from one
 * compact loop (fused quantization works on the fragment in registers);
 * scales and biases are prefetched at the start of the tile. */
#ifndef FK_CUDA_GEMM_EPILOGUE_CUH
#define FK_CUDA_GEMM_EPILOGUE_CUH

#include <cuda.h>
#include <stdint.h>
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/scale.h"
#include "fp8kit.h"
#include "cuda/ptx/ptx.cuh"
#include "cuda/gemm_params.h"

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

/* ------------------------------------------------ fused output quantization
 * (OUTQ_MX: e8m0 scale per 32 columns of each row; OUTQ_BLOCK1X128: f32
 * scale per 128 columns). The wgmma fragment is worked on in registers,
 * 32 columns (one chunk) at a time: thread (warp w, lane l) holds rows
 * r_lo = 16 w + l / 4 and r_lo + 8, columns 8 jj + 2 (l % 4) + {0, 1} of the
 * chunk (jj = 0..3) at y[4 jj + 2 i + e]. The 4 lanes of a fragment row hold
 * all of a chunk's values of their two rows, so a group's amax is a
 * reduction over those 4 lanes, and a 4 x 4 transpose of 16-bit code pairs
 * among them gives each lane 8 consecutive codes of each row: one 8-byte
 * store per row and chunk, 32 contiguous bytes per row and warp store. */

/* y of one chunk in place: act(acc * (sa * cf) + bias + beta * C) (cf =
 * alpha * tensor scales * column scale, rounded once from double; sa the
 * row scale or 1; the bias of the unused kind is 0 in the table), rounded to
 * out_hp (RNE) and widened back - the value docs/spec.md 3 quantizes - and 0 in
 * columns past N (they must not reach a group's amax). */
template <int BN>
static __device__ __forceinline__ void fk_epi_rowq_y16(const fk_gemm_params &p, float (&y)[16], const float *tab,
                                                       int row_lo, int n0, int tc0, int q2, float sa_lo, float sa_hi,
                                                       float br_lo, float br_hi)
{
    const float *cf = tab + 2 * BN + 128, *bc = tab + BN;
    if (p.sa_mode != FP8KIT_SCALE_ROW && p.bias_mode != FP8KIT_BIAS_ROW) { /* sa = 1, br = 0 */
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int tc = tc0 + 8 * jj + q2;
            const float2 f = *(const float2 *)&cf[tc], b = *(const float2 *)&bc[tc];
            y[4 * jj] = fmaf(y[4 * jj], f.x, b.x);
            y[4 * jj + 1] = fmaf(y[4 * jj + 1], f.y, b.y);
            y[4 * jj + 2] = fmaf(y[4 * jj + 2], f.x, b.x);
            y[4 * jj + 3] = fmaf(y[4 * jj + 3], f.y, b.y);
        }
    } else {
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int tc = tc0 + 8 * jj + q2;
            const float2 f = *(const float2 *)&cf[tc], b = *(const float2 *)&bc[tc];
            y[4 * jj] = fmaf(y[4 * jj], sa_lo * f.x, br_lo + b.x);
            y[4 * jj + 1] = fmaf(y[4 * jj + 1], sa_lo * f.y, br_lo + b.y);
            y[4 * jj + 2] = fmaf(y[4 * jj + 2], sa_hi * f.x, br_hi + b.x);
            y[4 * jj + 3] = fmaf(y[4 * jj + 3], sa_hi * f.y, br_hi + b.y);
        }
    }
    if (p.c) {
#pragma unroll
        for (int x = 0; x < 16; x++) {
            const int row = row_lo + 8 * ((x >> 1) & 1), col = n0 + tc0 + 8 * (x >> 2) + q2 + (x & 1);
            if (row < p.m && col < p.n)
                y[x] = fmaf(p.beta, fk_epi_load(p.c, (long long)row * p.ldc + col, p.c_type), y[x]);
        }
    }
    fk_epi_act_n(y, p.act);
    if (p.out_hp == FP8KIT_BF16) {
#pragma unroll
        for (int x = 0; x < 16; x += 2) {
            const uint32_t w = fk_cvt_bf16x2(y[x], y[x + 1]);
            y[x] = fk_u2f(w << 16);
            y[x + 1] = fk_u2f(w & 0xFFFF0000u);
        }
    } else if (p.out_hp == FP8KIT_F16) {
#pragma unroll
        for (int x = 0; x < 16; x += 2) {
            const uint32_t w = fk_cvt_f16x2(y[x], y[x + 1]);
            y[x] = fk_epi_f16_f32(w & 0xFFFFu);
            y[x + 1] = fk_epi_f16_f32(w >> 16);
        }
    }
    if (n0 + tc0 + 32 > p.n) {
#pragma unroll
        for (int x = 0; x < 16; x++)
            y[x] = n0 + tc0 + 8 * (x >> 2) + q2 + (x & 1) < p.n ? y[x] : 0.0f;
    }
}

/* max |y| bits (NaN > Inf > finite as unsigned) of this lane's values of
 * one chunk in row r_lo (i = 0) or r_lo + 8 (i = 1), and its maximum over
 * the 4 lanes of the fragment row. */
static __device__ __forceinline__ uint32_t fk_epi_rowq_amax(const float (&y)[16], int i)
{
    uint32_t am = 0;
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
        am = fk_max_u32(am, fk_max_u32(fk_abs_bits(y[4 * jj + 2 * i]), fk_abs_bits(y[4 * jj + 2 * i + 1])));
    return am;
}

static __device__ __forceinline__ uint32_t fk_epi_quad_max(uint32_t am)
{
    am = fk_max_u32(am, __shfl_xor_sync(0xFFFFFFFFu, am, 1));
    return fk_max_u32(am, __shfl_xor_sync(0xFFFFFFFFu, am, 2));
}

/* The 4 x 4 transpose of 16-bit code pairs among the 4 lanes (q = lane % 4)
 * of a fragment row: w0 / w1 hold this lane's pairs of column blocks jj = 0,
 * 1 / 2, 3 of one row; afterwards they hold the 8 codes of block jj = q,
 * i.e. columns 8 q .. 8 q + 7 of the chunk. Two shuffles. */
static __device__ __forceinline__ void fk_epi_quad_transpose(uint32_t &w0, uint32_t &w1, int q)
{
    const int h = q >> 1, b = q & 1;
    const uint32_t lo = 0x5410u, hi = 0x7632u; /* low / high halves of two words */
    const uint32_t keep = h ? w1 : w0;          /* blocks 2h, 2h + 1 from this lane */
    const uint32_t recv = __shfl_xor_sync(0xFFFFFFFFu, h ? w0 : w1, 2); /* ... from lane q ^ 2 */
    const uint32_t mine = fk_epi_prmt(keep, recv, b ? hi : lo);       /* block q from q, q ^ 2 */
    const uint32_t got = __shfl_xor_sync(0xFFFFFFFFu, fk_epi_prmt(keep, recv, b ? lo : hi), 1); /* q ^ 1, q ^ 3 */
    const uint32_t ev = b ? got : mine, od = b ? mine : got; /* from lanes (0, 2) / (1, 3); swapped if h */
    w0 = fk_epi_prmt(ev, od, h ? hi : lo);
    w1 = fk_epi_prmt(ev, od, h ? lo : hi);
}

/* Stores 8 codes (w0, w1) of row `row` at column col (edge: byte stores). */
static __device__ __forceinline__ void fk_epi_rowq_put8(const fk_gemm_params &p, int row, int col, uint32_t w0,
                                                        uint32_t w1, bool vec)
{
    if (row >= p.m || col >= p.n)
        return;
    uint8_t *d = (uint8_t *)p.d + (long long)row * p.ldd + col;
    if (vec && col + 8 <= p.n) {
        *(uint2 *)d = make_uint2(w0, w1);
    } else {
        const uint64_t w = ((uint64_t)w1 << 32) | w0;
#pragma unroll 1
        for (int e = 0; e < 8 && col + e < p.n; e++)
            d[e] = (uint8_t)(w >> (8 * e));
    }
}

/* Per-row factor of a group's element step: mx: q = fp8(y * f) with f the
 * scale's reciprocal; block1x128: q = fp8(fl32(y / S)) computed as in
 * quant_common.cuh (fk_div_q: y = fl32(1 / s) once, q0 = y x, two residual
 * steps, the second Markstein's correctly rounded one) for s in
 * [2^-80, 2^80]; S outside that range is first scaled by xs = 2^100 or
 * 2^-100 (s = S xs, x xs: exact, or below 2^-126 where the quotient is far
 * under the smallest fp8 value and only its sign matters). */
struct fk_epi_qf {
    float f, s, xs;
    bool nan; /* NaN / Inf in the group: every code is the canonical NaN */
};

static __device__ __forceinline__ fk_epi_qf fk_epi_qf_div(float S)
{
    fk_epi_qf d;
    d.nan = !(S == S);
    d.xs = S < 0x1p-80f ? 0x1p100f : (S > 0x1p80f ? 0x1p-100f : 1.0f);
    d.s = S * d.xs;
    d.f = 1.0f / d.s;
    return d;
}

template <bool MX> static __device__ __forceinline__ float fk_epi_qval(float x, const fk_epi_qf &d)
{
    if (MX)
        return x * d.f;
    const float xs = x * d.xs;
    float q = xs * d.f;
    q = fmaf(fmaf(-d.s, q, xs), d.f, q);
    q = fmaf(fmaf(-d.s, q, xs), d.f, q);
    return copysignf(q, xs);
}

/* Encodes one chunk y[0 .. 15] with the row factors and stores it (the
 * fp8 type is a branch around the 8 conversions only). */
template <bool MX>
static __device__ __forceinline__ void fk_epi_rowq_codes(const fk_gemm_params &p, const float *y, const fk_epi_qf &lo,
                                                         const fk_epi_qf &hi, int row_lo, int col0, int q, bool e5,
                                                         bool vec)
{
    float v[16];
#pragma unroll
    for (int x = 0; x < 16; x++)
        v[x] = fk_epi_qval<MX>(y[x], (x & 2) ? hi : lo);
    uint32_t c[8]; /* pairs: row lo blocks 0-3, row hi blocks 0-3 */
    if (e5) {
#pragma unroll
        for (int x = 0; x < 8; x++)
            c[x] = fk_cvt2<1>(v[4 * (x & 3) + 2 * (x >> 2)], v[4 * (x & 3) + 2 * (x >> 2) + 1]);
    } else {
#pragma unroll
        for (int x = 0; x < 8; x++)
            c[x] = fk_cvt2<0>(v[4 * (x & 3) + 2 * (x >> 2)], v[4 * (x & 3) + 2 * (x >> 2) + 1]);
    }
    const uint32_t nan = e5 ? FK_E5M2_NAN * 0x01010101u : FK_E4M3_NAN * 0x01010101u;
    uint32_t w0 = lo.nan ? nan : c[0] | (c[1] << 16), w1 = lo.nan ? nan : c[2] | (c[3] << 16);
    uint32_t w2 = hi.nan ? nan : c[4] | (c[5] << 16), w3 = hi.nan ? nan : c[6] | (c[7] << 16);
    fk_epi_quad_transpose(w0, w1, q);
    fk_epi_quad_transpose(w2, w3, q);
    fk_epi_rowq_put8(p, row_lo, col0 + 8 * q, w0, w1, vec);
    fk_epi_rowq_put8(p, row_lo + 8, col0 + 8 * q, w2, w3, vec);
}

/* mx: scales and codes of one 32-column chunk (= one group) of y. */
static __device__ __forceinline__ void fk_epi_rowq_mx(const fk_gemm_params &p, const float (&y)[16], int row_lo,
                                                      int col0, int q, bool e5, bool vec)
{
    const uint8_t s_lo = fk_mx_scale(fk_epi_quad_max(fk_epi_rowq_amax(y, 0)), e5, p.out_rceil);
    const uint8_t s_hi = fk_mx_scale(fk_epi_quad_max(fk_epi_rowq_amax(y, 1)), e5, p.out_rceil);
    if (q == 0) {
        uint8_t *sd = (uint8_t *)p.scale_d_out + col0 / 32;
        const long long ld = p.n / 32;
        if (row_lo < p.m)
            sd[(long long)row_lo * ld] = s_lo;
        if (row_lo + 8 < p.m)
            sd[(long long)(row_lo + 8) * ld] = s_hi;
    }
    fk_epi_qf lo, hi;
    lo.f = fk_mx_recip(s_lo);
    hi.f = fk_mx_recip(s_hi);
    lo.nan = s_lo == 0xFFu;
    hi.nan = s_hi == 0xFFu;
    lo.s = hi.s = lo.xs = hi.xs = 1.0f;
    fk_epi_rowq_codes<true>(p, y, lo, hi, row_lo, col0, q, e5, vec);
}

/* block1x128: scales and codes of one 128-column group, y[0 .. 63] (its 4
 * chunks in order; chunks past N are skipped); am_lo / am_hi: this lane's
 * amax bits of the group's two rows (taken from the chunks' y before they
 * went to the accumulator registers: a bit cast of those registers here
 * makes the compiler carry them as integers through the main loop, where
 * ptxas then has to wait for every wgmma group). */
static __device__ __forceinline__ void fk_epi_rowq_b128(const fk_gemm_params &p, const float *y, uint32_t am_lo,
                                                        uint32_t am_hi, int row_lo, int col0, int q, bool e5,
                                                        bool vec)
{
    const float s_lo = fk_scale_f32(fk_epi_quad_max(am_lo), e5, p.out_pow2);
    const float s_hi = fk_scale_f32(fk_epi_quad_max(am_hi), e5, p.out_pow2);
    if (q == 0) {
        float *sd = (float *)p.scale_d_out + col0 / 128;
        const long long ld = (p.n + 127) / 128;
        if (row_lo < p.m)
            sd[(long long)row_lo * ld] = s_lo;
        if (row_lo + 8 < p.m)
            sd[(long long)(row_lo + 8) * ld] = s_hi;
    }
    const fk_epi_qf lo = fk_epi_qf_div(s_lo), hi = fk_epi_qf_div(s_hi);
#pragma unroll
    for (int c = 0; c < 4; c++)
        if (col0 + 32 * c < p.n)
            fk_epi_rowq_codes<false>(p, y + 16 * c, lo, hi, row_lo, col0 + 32 * c, q, e5, vec);
}

/* The epilogue with fused output quantization: one compact loop over the
 * tile's 32-column chunks (one copy of the y code whatever the options and
 * the tile width). Each chunk's y (as the other epilogues define it) is
 * computed from acc[0 .. 15]. mx: the chunk is a group: its scales and
 * codes follow, and the next chunk's accumulators move down into
 * acc[0 .. 15]. block1x128 (BN % 128 == 0, which the planner guarantees, so
 * that a group never spans two tiles): the y replace the accumulators while
 * the group's 64 registers rotate by 16, so after the group's 4 chunks they
 * hold its y in order; then its scales and codes, and the next group moves
 * down. Scales through src/format (docs/spec.md 2, as the CPU backend); codes from
 * the hardware conversion (equal to the shared codec); 8-byte code stores
 * where D's base and row stride allow. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_rowq(const fk_gemm_params &p, float (&acc)[NACC], float *tab,
                                                        const fk_epi_pre &pre, int m0, int n0, int tid, int bar_id)
{
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    fk_named_bar_sync(bar_id, 128);
    const int r_lo = warp * 16 + (lane >> 2), q = lane & 3, q2 = 2 * q, row_lo = m0 + r_lo;
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
    const float sa_lo = rowsc ? tab[2 * BN + r_lo] : 1.0f, sa_hi = rowsc ? tab[2 * BN + r_lo + 8] : 1.0f;
    const float br_lo = tab[2 * BN + 64 + r_lo], br_hi = tab[2 * BN + 64 + r_lo + 8];
    const bool e5 = p.d_type == FP8KIT_E5M2, mx = p.out_quant == FP8KIT_OUTQ_MX;
    const bool vec = (((uintptr_t)p.d | (uintptr_t)p.ldd) & 7u) == 0;
    const int width = mx || BN % 128 == 0 ? BN : 0; /* 1x128 needs BN % 128 == 0 (planned so) */
    uint32_t am_lo = 0, am_hi = 0; /* 1x128: the group's amax bits so far */
#pragma unroll 1
    for (int tc0 = 0; tc0 < width && n0 + (mx ? tc0 : tc0 & ~127) < p.n; tc0 += 32) {
        float y[16];
#pragma unroll
        for (int x = 0; x < 16; x++)
            y[x] = acc[x];
        fk_epi_rowq_y16<BN>(p, y, tab, row_lo, n0, tc0, q2, sa_lo, sa_hi, br_lo, br_hi);
        if (mx) {
            fk_epi_rowq_mx(p, y, row_lo, n0 + tc0, q, e5, vec);
#pragma unroll
            for (int x = 0; x + 16 < NACC; x++)
                acc[x] = acc[x + 16];
        } else if constexpr (BN % 128 == 0) {
            const bool first = (tc0 & 127) == 0;
            am_lo = fk_max_u32(first ? 0u : am_lo, fk_epi_rowq_amax(y, 0));
            am_hi = fk_max_u32(first ? 0u : am_hi, fk_epi_rowq_amax(y, 1));
#pragma unroll
            for (int x = 0; x < 48; x++)
                acc[x] = acc[x + 16];
#pragma unroll
            for (int x = 0; x < 16; x++)
                acc[48 + x] = y[x];
            if ((tc0 & 127) == 96) {
                fk_epi_rowq_b128(p, acc, am_lo, am_hi, row_lo, n0 + tc0 - 96, q, e5, vec);
#pragma unroll
                for (int x = 0; x + 64 < NACC; x++)
                    acc[x] = acc[x + 64];
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
                if (row >= pre.m_end || nv <= 0)
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
                if (row >= pre.m_end || nv <= 0)
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
        /* bias and activation: 64 columns per pass (not unrolled: one copy
         * of the activation code for 32 values, which interleave), the next
         * 32 accumulators shifted down after each pass; y = acc * (sa * f) +
         * (row bias + column bias) with one rounding (fma) */
        const bool brow = p.bias_mode == FP8KIT_BIAS_ROW;
        const float b_lo = brow ? tab[2 * BN + 64 + r_lo] : 0.0f, b_hi = brow ? tab[2 * BN + 64 + r_lo + 8] : 0.0f;
        const int act = p.act;
        constexpr int CW = BN % 64 == 0 ? 64 : 32; /* columns per pass */
#pragma unroll 1
        for (int jj = 0; jj < BN / CW; jj++) {
            float y[CW / 2];
            if (!rowsc && !brow) { /* the common case: one fma per value */
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    const int c = CW * jj + 8 * j4;
                    const float2 f = *(const float2 *)&cf[c], bc = *(const float2 *)&tab[BN + c + q2];
                    y[4 * j4] = fmaf(acc[4 * j4], f.x, bc.x);
                    y[4 * j4 + 1] = fmaf(acc[4 * j4 + 1], f.y, bc.y);
                    y[4 * j4 + 2] = fmaf(acc[4 * j4 + 2], f.x, bc.x);
                    y[4 * j4 + 3] = fmaf(acc[4 * j4 + 3], f.y, bc.y);
                }
            } else {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    const int c = CW * jj + 8 * j4;
                    const float2 f = *(const float2 *)&cf[c];
                    const float2 bc = brow ? make_float2(0.0f, 0.0f) : *(const float2 *)&tab[BN + c + q2];
                    y[4 * j4] = fmaf(acc[4 * j4], sa_lo * f.x, b_lo + bc.x);
                    y[4 * j4 + 1] = fmaf(acc[4 * j4 + 1], sa_lo * f.y, b_lo + bc.y);
                    y[4 * j4 + 2] = fmaf(acc[4 * j4 + 2], sa_hi * f.x, b_hi + bc.x);
                    y[4 * j4 + 3] = fmaf(acc[4 * j4 + 3], sa_hi * f.y, b_hi + bc.y);
                }
            }
            fk_epi_act_n(y, act);
            if (bf) {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    o_lo[(CW * jj + 8 * j4) / 2] = fk_cvt_bf16x2(y[4 * j4], y[4 * j4 + 1]);
                    o_hi[(CW * jj + 8 * j4) / 2] = fk_cvt_bf16x2(y[4 * j4 + 2], y[4 * j4 + 3]);
                }
            } else {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    o_lo[(CW * jj + 8 * j4) / 2] = fk_cvt_f16x2(y[4 * j4], y[4 * j4 + 1]);
                    o_hi[(CW * jj + 8 * j4) / 2] = fk_cvt_f16x2(y[4 * j4 + 2], y[4 * j4 + 3]);
                }
            }
#pragma unroll
            for (int i = 0; i + CW / 2 < NACC; i++)
                acc[i] = acc[i + CW / 2];
        }
    }
    fk_fence_proxy_async();
    fk_named_bar_sync(bar_id, 128);
    if (tid < 64 && m0 + tid < pre.m_end) {
        const int bytes = min(BN, p.n - n0) * 2;
        fk_bulk_store((uint16_t *)p.d + ((long long)(m0 + tid) * p.ldd + n0), fk_smem_addr(buf + tid * RB),
                      (uint32_t)bytes);
        fk_bulk_commit();
    }
}

#endif /* __CUDACC__ */
#endif
