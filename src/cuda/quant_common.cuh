/* quant_common.cuh - device helpers shared by the CUDA quantization kernels:
 * input dtype traits (16-byte chunk load, unpack to fp32 with the shared
 * codecs), fast 32-bit division by a run-time constant, the stores of the
 * scale layouts (plain, blocked with zeroed padding, mn_major), and small
 * host helpers (alignment tests, launch-size limits). Included by the
 * quant_*.cu, dequant.cu and cast.cu files only. */
#ifndef FK_CUDA_QUANT_COMMON_CUH
#define FK_CUDA_QUANT_COMMON_CUH

#include <stdint.h>
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

/* Packs V (4 or 8) codes into lo/hi. */
template <int V>
__device__ __forceinline__ void fk_pack_codes(const uint8_t *c, uint32_t &lo, uint32_t &hi)
{
    lo = (uint32_t)c[0] | ((uint32_t)c[1] << 8) | ((uint32_t)c[2] << 16) | ((uint32_t)c[3] << 24);
    hi = 0;
    if (V == 8)
        hi = (uint32_t)c[4] | ((uint32_t)c[5] << 8) | ((uint32_t)c[6] << 16) | ((uint32_t)c[7] << 24);
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
