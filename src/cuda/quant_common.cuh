/* quant_common.cuh - device helpers shared by the CUDA quantization kernels:
 * input dtype traits (16-byte chunk load, unpack to fp32 with the shared
 * codecs), fast 32-bit division by a run-time constant, the stores of the
 * scale layouts (plain, blocked with zeroed padding, mn_major), and small
 * host helpers (alignment tests, launch-size limits). Included by the
 * quant_*.cu, dequant.cu and cast.cu files only. */
#ifndef FK_CUDA_QUANT_COMMON_CUH
#define FK_CUDA_QUANT_COMMON_CUH

#include <stdint.h>
#include "cuda/ptx/cvt.cuh" /* fk_cvt2 */
#include "cuda/ptx/mem.cuh" /* fk_cp_async16, fk_cp_async_commit, fk_cp_async_wait */
#include "cuda/quant.h"
#include "format/scale.h"

/* ------------------------------------------------------------ division */

/* n / d and n % d for 32-bit n by a divisor fixed at launch
 * (Granlund-Montgomery: q = (umulhi(n, mul) + n) >> shr, in 64 bits). */
struct fk_divmod {
    uint32_t d, mul, shr;
};

static inline fk_divmod fk_divmod_make(uint32_t d)
{
    fk_divmod r;
    r.d = d ? d : 1;
    uint32_t l = 0;
    while (l < 32 && ((uint64_t)1 << l) < r.d)
        l++;
    r.shr = l;
    r.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - r.d)) / r.d + 1);
    return r;
}

__device__ __forceinline__ uint32_t fk_div(const fk_divmod &m, uint32_t n)
{
    return (uint32_t)(((uint64_t)__umulhi(n, m.mul) + n) >> m.shr);
}

/* ---------------------------------------------------------- input dtypes */

/* DT is a fp8kit_dtype value: FP8KIT_F32, FP8KIT_F16 or FP8KIT_BF16. A chunk
 * is 16 bytes: V elements. */
template <int DT> struct fk_in;

template <> struct fk_in<FP8KIT_F32> {
    static constexpr int V = 4, SIZE = 4;
    __device__ static __forceinline__ float elem(const void *p, int64_t i) { return ((const float *)p)[i]; }
    __device__ static __forceinline__ void unpack(const uint4 &v, float *f)
    {
        f[0] = fk_u2f(v.x); f[1] = fk_u2f(v.y); f[2] = fk_u2f(v.z); f[3] = fk_u2f(v.w);
    }
};

template <> struct fk_in<FP8KIT_BF16> {
    static constexpr int V = 8, SIZE = 2;
    __device__ static __forceinline__ float elem(const void *p, int64_t i)
    {
        return fk_bf16_to_f32(((const uint16_t *)p)[i]);
    }
    __device__ static __forceinline__ void unpack(const uint4 &v, float *f)
    {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = fk_bf16_to_f32((uint16_t)(w[i] & 0xFFFFu));
            f[2 * i + 1] = fk_bf16_to_f32((uint16_t)(w[i] >> 16));
        }
    }
};

template <> struct fk_in<FP8KIT_F16> {
    static constexpr int V = 8, SIZE = 2;
    __device__ static __forceinline__ float elem(const void *p, int64_t i)
    {
        return fk_f16_to_f32(((const uint16_t *)p)[i]);
    }
    __device__ static __forceinline__ void unpack(const uint4 &v, float *f)
    {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = fk_f16_to_f32((uint16_t)(w[i] & 0xFFFFu));
            f[2 * i + 1] = fk_f16_to_f32((uint16_t)(w[i] >> 16));
        }
    }
};

/* amax bits of one chunk (docs/spec.md 2.1: integer max of |x| bits, NaN > Inf >
 * finite). For bf16 the same max is taken on the 16-bit halves (|x| bits are
 * the bf16 bits << 16, so the order is the same): 2 elements per operation. */
template <int DT> __device__ __forceinline__ uint32_t fk_chunk_amax(const uint4 &v, const float *f)
{
    if constexpr (DT == FP8KIT_BF16) {
        const uint32_t k = 0x7FFF7FFFu;
        const uint32_t m2 = __vmaxu2(__vmaxu2(v.x & k, v.y & k), __vmaxu2(v.z & k, v.w & k));
        return fk_max_u32(m2 & 0xFFFFu, m2 >> 16) << 16;
    } else {
        uint32_t m = 0;
#pragma unroll
        for (int i = 0; i < fk_in<DT>::V; i++)
            m = fk_max_u32(m, fk_abs_bits(f[i]));
        return m;
    }
}

/* Loads chunk elements [0, n) of p (n <= V) into a uint4 with zero bits past
 * n; vec: p is 16-byte aligned and n == V. */
template <int DT>
__device__ __forceinline__ uint4 fk_load_chunk(const void *p, int n, bool vec)
{
    if (vec && n == fk_in<DT>::V)
        return *(const uint4 *)p;
    uint32_t w[4] = {0, 0, 0, 0};
    if (fk_in<DT>::SIZE == 4) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (i < n)
                w[i] = ((const uint32_t *)p)[i];
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (i < n)
                w[i >> 1] |= (uint32_t)((const uint16_t *)p)[i] << (16 * (i & 1));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Stores n (<= 8) fp8 codes packed little-endian in lo/hi; vec: p aligned to
 * n bytes and n == V. */
__device__ __forceinline__ void fk_store_codes(uint8_t *p, uint32_t lo, uint32_t hi, int n, int V, bool vec)
{
    if (vec && n == V) {
        if (V == 8)
            *(uint2 *)p = make_uint2(lo, hi);
        else
            *(uint32_t *)p = lo;
        return;
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        if (i < n)
            p[i] = (uint8_t)((i < 4 ? lo : hi) >> (8 * (i & 3)));
}

/* ------------------------------------------------- fp8 element conversion */

/* Canonical NaN code of the element format (docs/spec.md 1). */
template <int E5> __device__ __forceinline__ uint32_t fk_nan_code() { return E5 ? FK_E5M2_NAN : FK_E4M3_NAN; }

/* fk_cvt2<E5>(lo, hi), two fp32 -> two fp8 codes (satfinite RNE, the
 * hardware conversion on sm_89+), is in ptx/cvt.cuh. */

/* N (multiple of 4) elements of an MX block with reciprocal r (docs/spec.md 2.2 element
 * step q = fp8(fl32(x * r))) packed 4 codes per word; nan: s == 255. */
template <int E5, int N>
__device__ __forceinline__ void fk_quant_mx_words(const float *f, float r, bool nan, uint32_t *w)
{
#pragma unroll
    for (int i = 0; i < N / 4; i++)
        w[i] = nan ? fk_nan_code<E5>() * 0x01010101u
                   : fk_cvt2<E5>(f[4 * i] * r, f[4 * i + 1] * r) | (fk_cvt2<E5>(f[4 * i + 2] * r, f[4 * i + 3] * r) << 16);
}

/* Division by a group scale S (docs/spec.md 2.1 element step fl32(x / S), IEEE
 * round to nearest) without a full division per element. y = fl32(1 / S) is
 * computed once per group (IEEE division); per element q0 = fl32(x * y), then
 * two residual steps q += fl32(x - S * q) * y with fused multiply-adds: the
 * first makes q faithful (within 1 ulp), the second is Markstein's correctly
 * rounded step (q faithful, y within half an ulp of 1 / S). This is the fast
 * path of the compiler's own division with the reciprocal hoisted; its range
 * check is the group's: 2^-80 <= S <= 2^80 (else `fast` is false and the
 * kernels divide). In that range the remainders are exact for every quotient
 * that reaches a nonzero fp8 code (|x / S| >= 2^-18 means |x| >= 2^-98);
 * smaller quotients round to +-0 in fp8 whatever their low bits, and the sign
 * is set from x (x = -0 gives -0). fk_cuda_div_selfcheck (cast.cu, run by
 * test_cuda_quant) compares the fp8 codes with the division for every bf16
 * and f16 x and every scale a bf16 / f16 amax >= |x| gives. */
struct fk_div_s {
    float s, y;
    bool fast, nan;
};

__device__ __forceinline__ fk_div_s fk_div_prep(float S)
{
    fk_div_s d;
    d.s = S;
    d.nan = S != S;
    d.fast = S >= 0x1p-80f && S <= 0x1p80f;
    d.y = d.fast ? 1.0f / S : 0.0f;
    return d;
}

/* fl32(x / S) for d.fast (see above). */
__device__ __forceinline__ float fk_div_q(float x, const fk_div_s &d)
{
    float q = __fmul_rn(x, d.y);
    q = __fmaf_rn(__fmaf_rn(-d.s, q, x), d.y, q);
    q = __fmaf_rn(__fmaf_rn(-d.s, q, x), d.y, q);
    return copysignf(q, x);
}

/* N (multiple of 4) elements of an fp32-scale group (docs/spec.md 2.1 element step
 * q = fp8(fl32(x / S))) packed 4 per word; a NaN S (NaN/Inf group) gives
 * canonical NaN codes. */
template <int E5, int N>
__device__ __forceinline__ void fk_quant_div_words(const float *f, const fk_div_s &d, uint32_t *w)
{
    if (d.nan) {
#pragma unroll
        for (int i = 0; i < N / 4; i++)
            w[i] = fk_nan_code<E5>() * 0x01010101u;
    } else if (d.fast) {
#pragma unroll
        for (int i = 0; i < N / 4; i++)
            w[i] = fk_cvt2<E5>(fk_div_q(f[4 * i], d), fk_div_q(f[4 * i + 1], d)) |
                   (fk_cvt2<E5>(fk_div_q(f[4 * i + 2], d), fk_div_q(f[4 * i + 3], d)) << 16);
    } else {
        const float S = d.s;
#pragma unroll
        for (int i = 0; i < N / 4; i++)
            w[i] = fk_cvt2<E5>(f[4 * i] / S, f[4 * i + 1] / S) | (fk_cvt2<E5>(f[4 * i + 2] / S, f[4 * i + 3] / S) << 16);
    }
}

/* ------------------------------------------------------- scale layouts */

/* Where the e8m0 scale of (expert e, row r, block column c) of a matrix with
 * R rows and C32 block columns goes, and the zero padding of the blocked
 * layout: the writer of (r, C32-1) zeroes columns [C32, Cp) of row r; the
 * writer of (R-1, c) zeroes rows [R, Rp) of column c, and of the padding
 * columns too when c == C32-1. So every padding byte has exactly one writer. */
struct fk_mx_scale_out {
    uint8_t *p;
    int64_t R, C32;    /* logical scale matrix per expert */
    int64_t Rp, Cp;    /* blocked padding (== R, C32 when plain) */
    int blocked;
};

__device__ __forceinline__ void fk_mx_scale_store(const fk_mx_scale_out &o, int64_t e, int64_t r, int64_t c,
                                                  uint8_t s)
{
    if (!o.blocked) {
        o.p[(e * o.R + r) * o.C32 + c] = s;
        return;
    }
    uint8_t *b = o.p + e * o.Rp * o.Cp;
    b[fk_blocked_offset(r, c, o.Cp)] = s;
    if (c == o.C32 - 1)
        for (int64_t cc = o.C32; cc < o.Cp; cc++)
            b[fk_blocked_offset(r, cc, o.Cp)] = 0;
    if (r == o.R - 1)
        for (int64_t rr = o.R; rr < o.Rp; rr++) {
            b[fk_blocked_offset(rr, c, o.Cp)] = 0;
            if (c == o.C32 - 1)
                for (int64_t cc = o.C32; cc < o.Cp; cc++)
                    b[fk_blocked_offset(rr, cc, o.Cp)] = 0;
        }
}

/* fp32 group scales: plain (rows x cols per expert) or mn_major (cols x ld per
 * expert, element (r, c) at c * ld + r, entries [rows, ld) of each line zero;
 * the writer of (rows-1, c) zeroes them). */
struct fk_f32_scale_out {
    float *p;
    int64_t rows, cols, ld; /* ld = 4 * ceil(rows / 4) for mn_major */
    int mn;
};

__device__ __forceinline__ void fk_f32_scale_store(const fk_f32_scale_out &o, int64_t e, int64_t r, int64_t c,
                                                   float s)
{
    if (!o.mn) {
        o.p[(e * o.rows + r) * o.cols + c] = s;
        return;
    }
    float *b = o.p + e * o.cols * o.ld + c * o.ld;
    b[r] = s;
    if (r == o.rows - 1)
        for (int64_t rr = o.rows; rr < o.ld; rr++)
            b[rr] = 0.0f;
}

/* ---------------------------------------------------------- host helpers */

static inline bool fk_aligned(const void *p, int64_t a) { return ((uintptr_t)p % (uintptr_t)a) == 0; }

/* x (E, R, C) allows 16-byte chunk loads at every row start. */
static inline bool fk_mat_vec_ok(const fk_mat &m, int64_t bytes)
{
    int64_t es = (int64_t)fk_dtype_bytes(m.dtype);
    return fk_aligned(m.data, bytes) && (m.sr * es) % bytes == 0 && (m.se * es) % bytes == 0;
}

#define FK_THREADS 256

#endif
