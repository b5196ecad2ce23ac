/* mx_math.cuh - the MX (e8m0 per 32 of K) pieces of the Hopper GEMM that are
 * plain arithmetic: the per-stage scale area (fp32 tables decoded from the
 * scale bytes, plain or blocked layout) and the promotion of one wgmma k32
 * fragment with the row x column scale products. gemm/sm90/kernels_dense.cu uses them in
 * its MX kernel; tests/emu/gemm_mx_emu.cpp compiles this header as host C++
 * (no __CUDACC__) and checks them against the CPU backend. */
#ifndef FK_CUDA_GEMM_MX_CUH
#define FK_CUDA_GEMM_MX_CUH

#include <stdint.h>
#include <stdlib.h>

#ifdef __CUDACC__
#include "cuda/ptx/ptx.cuh"
#define FK_MX_FN static __device__ __forceinline__
#define FK_MX_FENCE(x) fk_reg_fence(x)
#define FK_MX_LDG(p) __ldg(p)
#else
#include <algorithm>
#include <cmath>
#include <cstring>
#define FK_MX_FN static inline
#define FK_MX_FENCE(x) ((void)0)
#define FK_MX_LDG(p) (*(p))
using std::max;
using std::min;
static inline float __uint_as_float(unsigned int u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned int __float_as_uint(float f)
{
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
}
#endif

/* One stage's scale area for tile width BN: A's table [k32 step][128 rows],
 * B's [k32 step][BN columns] (fp32; 0 for rows past the operand and blocks
 * past K), then 24 ints, six records of 4: A's, B's, then four more of A's
 * (the grouped kernel's tiles start at any row, so their rows come from up
 * to five 32-row bands of A's flags; the others leave them unread). A
 * record: the min and max finite exponent byte, whether every row has one
 * scale for all four k32 steps (then the stage is promoted once:
 * fk_mx_uniform), one unused. */
template <int BN> struct fk_mx_area {
    static constexpr int SA_FLOATS = 4 * 128;
    static constexpr int SB_FLOATS = 4 * BN;
    static constexpr int MM = SA_FLOATS + SB_FLOATS; /* float offset of the 24 ints */
    static constexpr int BYTES = MM * 4 + 96;
};
/* The int offset of A's record q (0 .. 4) in the 24 ints (B's is at 4). */
FK_MX_FN int fk_mx_rec_a(int q) { return q == 0 ? 0 : 4 + 4 * q; }

/* p[0], p[1] (p 8-byte aligned) */
FK_MX_FN void fk_mx_ld2(const float *p, float &x, float &y)
{
#ifdef __CUDACC__
    const float2 v = *(const float2 *)p;
    x = v.x;
    y = v.y;
#else
    x = p[0];
    y = p[1];
#endif
}

/* docs/spec.md 2.1 e8m0 -> fp32 (as fk_e8m0_to_f32): 2^(e-127), 0 -> 2^-127, 255 -> NaN. */
FK_MX_FN float fk_mx_e8m0(unsigned int e)
{
    return __uint_as_float(e == 255u ? 0x7FC00000u : e ? e << 23 : 0x00400000u);
}

/* Byte offset of scale (row r, k32 block c): blocked (docs/spec.md 2.3: 128 x 4 tiles
 * of 512 bytes, nkb = ceil(K / 128) tiles per band of 128 rows) or plain
 * (kbs = K / 32 bytes per row). */
FK_MX_FN long long fk_mx_off(bool blocked, int nkb, int kbs, long long r, int c)
{
    if (blocked)
        return ((r >> 7) * nkb + (c >> 2)) * 512 + (r & 31) * 16 + ((r >> 5) & 3) * 4 + (c & 3);
    return r * kbs + c;
}

/* The 4 scale bytes (k32 blocks kc0 .. kc0 + 3) of rows row0 + lane + 32 i,
 * little-endian in w[i]: one aligned word each when `word` (blocked layout, or
 * plain with K / 32 % 4 == 0 and 4-byte aligned bases), else byte loads; rows
 * past the operand and blocks past K are not read. */
template <int NW>
FK_MX_FN void fk_mx_load(const unsigned char *s, bool blocked, int nkb, int kbs, bool word, int row0, int nrows,
                         int kc0, int lane, unsigned int (&w)[NW])
{
#pragma unroll
    for (int i = 0; i < NW; i++) {
        const int r = row0 + lane + 32 * i;
        w[i] = 0;
        if (r < nrows) {
            const unsigned char *q = s + fk_mx_off(blocked, nkb, kbs, r, kc0);
            if (word) {
                w[i] = FK_MX_LDG((const unsigned int *)q);
            } else {
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    if (kc0 + kk < kbs)
                        w[i] |= (unsigned int)FK_MX_LDG(q + kk) << (8 * kk);
            }
        }
    }
}

/* One lane's part of a table (ROWS rows): decodes w (from fk_mx_load) into
 * tab[kk * ROWS + lane + 32 i] (0 where masked), folds the finite exponent
 * bytes into emin / emax and clears `uniform` unless each of the lane's rows
 * has the same scale byte in all its blocks inside K. */
template <int ROWS, int NW>
FK_MX_FN void fk_mx_decode(const unsigned int (&w)[NW], int row0, int nrows, int kc0, int kbs, int lane, float *tab,
                           int &emin, int &emax, bool &uniform)
{
#pragma unroll
    for (int i = 0; i < NW; i++) {
        const bool rv = row0 + lane + 32 * i < nrows;
        const unsigned int e0 = w[i] & 255u;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const unsigned int e = (w[i] >> (8 * kk)) & 255u;
            const bool v = rv && kc0 + kk < kbs;
            tab[kk * ROWS + lane + 32 * i] = v ? fk_mx_e8m0(e) : 0.0f;
            if (v && e < 255u) {
                emin = min(emin, (int)e);
                emax = max(emax, (int)e);
            }
            if (v && e != e0)
                uniform = false;
        }
    }
}

/* Whether every row of both tiles of a stage has one scale over the
 * stage's 128 of K (the helper warps' flags): then the four k32 products
 * can be summed by the tensor cores and promoted once with step 0's table. */
template <int BN, int NQ = 1> FK_MX_FN bool fk_mx_uniform(const float *area)
{
    const int *mm = (const int *)(area + fk_mx_area<BN>::MM);
    int one = mm[2] & mm[6];
    for (int q = 1; q < NQ; q++) /* (NQ: A's records in use) */
        one &= mm[fk_mx_rec_a(q) + 2];
    return one != 0;
}

/* Unbiased exponent of a decoded scale (2^-127 is the subnormal 0x00400000;
 * 0 from a masked entry counts as -127, NaN as 128). */
FK_MX_FN int fk_mx_exp(float s)
{
    const unsigned int u = __float_as_uint(s);
    return u < 0x00800000u ? -127 : (int)(u >> 23) - 127;
}

/* x * 2^(ea + eb) rounded once to fp32, for decoded scales a = 2^ea, b = 2^eb.
 * Outside [-149, 127] the product a * b is not an fp32 value; then both
 * exponents have the sign of the sum, and x times the scale nearer 1 is exact
 * (x is a sum of fp8 products, so |x| >= 2^-32, and it overflows only when
 * the result does), which leaves one rounding for the second multiply. */
FK_MX_FN float fk_mx_scale_exact(float x, float a, int ea, float b, int eb)
{
    const int e = ea + eb;
    if (e >= -149 && e <= 127)
        return x * (a * b);
    const bool a_first = abs(ea) <= abs(eb);
    return (x * (a_first ? a : b)) * (a_first ? b : a);
}

/* Whether a stage (its scale area) could give a scale product outside fp32's
 * exact range: exponent bytes ea + eb outside [105, 381] (the products
 * 2^(ea + eb - 254) are exact fp32 values down to the subnormal 2^-149). */
template <int BN, int NQ = 1> FK_MX_FN bool fk_mx_slow(const float *area)
{
    const int *mm = (const int *)(area + fk_mx_area<BN>::MM);
    int lo = mm[0], hi = mm[1];
    for (int q = 1; q < NQ; q++) { /* (NQ: A's records in use) */
        lo = min(lo, mm[fk_mx_rec_a(q)]);
        hi = max(hi, mm[fk_mx_rec_a(q) + 1]);
    }
    return lo + mm[4] < 105 || hi + mm[5] > 381;
}

/* accf += acc * (sa * sb) for k32 step ks of the stage whose scale area is
 * `area`; acc / accf are one thread's m64nBN wgmma fragment: rows rl / rl + 8
 * (tile-local), columns 8 j + cq + {0, 1} at [4 j + {0, 1}] / [4 j + {2, 3}].
 * A `slow` stage (fk_mx_slow) takes fk_mx_scale_exact: acc * sa * sb rounded once, as the CPU backend's exact
 * path computes it, then added to accf. */
template <int BN, int NACC>
FK_MX_FN void fk_mx_promote(float (&accf)[NACC], float (&acc)[NACC], const float *area, bool slow, int ks, int rl,
                            int cq)
{
    typedef fk_mx_area<BN> T;
#pragma unroll
    for (int i = 0; i < NACC; i++)
        FK_MX_FENCE(acc[i]);
    const float *ta = area + ks * 128, *tb = area + T::SA_FLOATS + ks * BN + cq;
    const float a_lo = ta[rl], a_hi = ta[rl + 8];
    if (!slow) {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            float bx, by;
            fk_mx_ld2(tb + 8 * j, bx, by);
            accf[4 * j + 0] = fmaf(acc[4 * j + 0], a_lo * bx, accf[4 * j + 0]);
            accf[4 * j + 1] = fmaf(acc[4 * j + 1], a_lo * by, accf[4 * j + 1]);
            accf[4 * j + 2] = fmaf(acc[4 * j + 2], a_hi * bx, accf[4 * j + 2]);
            accf[4 * j + 3] = fmaf(acc[4 * j + 3], a_hi * by, accf[4 * j + 3]);
        }
    } else {
        const int ea_lo = fk_mx_exp(a_lo), ea_hi = fk_mx_exp(a_hi);
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            float bx, by;
            fk_mx_ld2(tb + 8 * j, bx, by);
            const int ebx = fk_mx_exp(bx), eby = fk_mx_exp(by);
            accf[4 * j + 0] += fk_mx_scale_exact(acc[4 * j + 0], a_lo, ea_lo, bx, ebx);
            accf[4 * j + 1] += fk_mx_scale_exact(acc[4 * j + 1], a_lo, ea_lo, by, eby);
            accf[4 * j + 2] += fk_mx_scale_exact(acc[4 * j + 2], a_hi, ea_hi, bx, ebx);
            accf[4 * j + 3] += fk_mx_scale_exact(acc[4 * j + 3], a_hi, ea_hi, by, eby);
        }
    }
    /* pins the reads of acc before the next wgmma on it (no accumulator copies) */
#pragma unroll
    for (int i = 0; i < NACC; i++)
        FK_MX_FENCE(accf[i]);
}

#undef FK_MX_FN
#undef FK_MX_LDG

#endif
