/* quant_simd.h - branch-free, vectorizable element codecs and row loaders/storers
 * for the CPU quantize, dequantize and cast kernels (src/cpu/quant*.c,
 * dequant*.c, cast*.c).
 *
 * The shared codecs in src/format/codec.h are the definition; they branch
 * (early returns, a variable-shift subnormal path), which stops GCC from
 * vectorizing a loop that calls them. The functions here compute the same bits
 * without control flow (see fkv_small_code), so GCC vectorizes them for
 * AVX-512, AVX2 and SSE2 alike.
 * tests/test_quant.c checks them against codec.h over large structured and
 * random sets of inputs; every fp32 pattern was also checked once offline.
 *
 * FK_CPU_CLONES marks the hot loops: GCC builds an AVX-512, an AVX2 and a
 * baseline copy and picks one at load time (ifunc). The inline helpers below are
 * always_inline so each copy gets its own vectorized body. */
#ifndef FK_CPU_QUANT_SIMD_H
#define FK_CPU_QUANT_SIMD_H

#include <stdint.h>
#include <string.h>
#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "cpu/cpu.h"
#include "format/scale.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FK_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FK_CPU_CLONES
#endif
#define FK_CPU_INLINE static inline __attribute__((always_inline))

/* Elements per chunk when a row is widened to fp32 on the stack. */
#define FK_CPU_CHUNK 1024

/* Code of a small float (mbits mantissa bits, bias `bias`, RNE, subnormals
 * included) for the magnitude bits ac, already clamped to the caller's
 * saturation threshold; a is the unclamped magnitude (only compared).
 * - normal target: round the fp32 mantissa to mbits bits in integers (nrm);
 * - subnormal target: one exact fp32 addition of magic = 2^(24-bias-mbits),
 *   whose ulp is the subnormal unit, lets the FPU round to nearest even
 *   (sub = the count of units). Needs the default rounding mode (RNE);
 *   FTZ/DAZ do not change the result (fp32 subnormal inputs round to 0 in
 *   every target, and the sum is >= magic).
 * For a at or above the smallest normal, sub >= nrm (sub grows like a, nrm
 * like log a), and below it nrm is forced to all ones, so min(sub, nrm) picks
 * the right one. Only min/max and masks: no select that GCC could turn into a
 * branch and then refuse to if-convert because the fp addition "may trap". */
FK_CPU_INLINE uint32_t fkv_small_code(uint32_t ac, uint32_t a, int mbits, int bias)
{
    const int sh = 23 - mbits;
    uint32_t nrm = ((ac + ((1u << (sh - 1)) - 1u) + ((ac >> sh) & 1u)) >> sh) -
                   ((uint32_t)(127 - bias) << mbits);
    const uint32_t magic = (uint32_t)(151 - bias - mbits) << 23;
    uint32_t sub = fk_f2u(fk_u2f(ac) + fk_u2f(magic)) - magic;
    nrm |= 0u - (uint32_t)(a < ((uint32_t)(128 - bias) << 23));
    return sub < nrm ? sub : nrm;
}

/* fp32 -> e4m3 / e5m2, satfinite RNE, canonical NaN (= fk_f32_to_fp8).
 * Magnitudes are clamped to max finite (which is its own code; Inf and NaN
 * included), then NaN is raised to the NaN code with max (the NaN code is the
 * largest unsigned magnitude code) and its sign cleared. */
FK_CPU_INLINE uint8_t fkv_f32_to_fp8(float x, int e5m2)
{
    uint32_t u = fk_f2u(x);
    uint32_t a = u & 0x7FFFFFFFu;
    const uint32_t maxb = e5m2 ? FK_E5M2_MAXBITS : FK_E4M3_MAXBITS;
    uint32_t c = fkv_small_code(a < maxb ? a : maxb, a, e5m2 ? 2 : 3, e5m2 ? 15 : 7);
    uint32_t nanm = 0u - (uint32_t)(a > FK_F32_INF);
    c |= ((u >> 24) & 0x80u) & ~nanm;
    uint32_t nc = nanm & (e5m2 ? FK_E5M2_NAN : FK_E4M3_NAN);
    return (uint8_t)(c > nc ? c : nc);
}

/* fp32 -> bf16 RNE, NaN quieted (= fk_f32_to_bf16). */
FK_CPU_INLINE uint16_t fkv_f32_to_bf16(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t n = (u >> 16) | 0x40u;
    return (uint16_t)((int32_t)(u & 0x7FFFFFFFu) > (int32_t)FK_F32_INF ? n : r);
}

/* fp32 -> fp16 RNE, overflow to Inf, NaN -> signed quiet NaN (= fk_f32_to_f16).
 * Clamping to 65520 (the first value that rounds to Inf) makes the rounding
 * carry produce the Inf code 0x7C00 for every larger magnitude. */
FK_CPU_INLINE uint16_t fkv_f32_to_f16(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t a = u & 0x7FFFFFFFu;
    uint32_t c = fkv_small_code(a < 0x477FF000u ? a : 0x477FF000u, a, 10, 15);
    uint32_t nc = (0u - (uint32_t)(a > FK_F32_INF)) & 0x7E00u;
    c = c > nc ? c : nc;
    return (uint16_t)(c | ((u >> 16) & 0x8000u));
}

/* fp16 -> fp32, exact (= fk_f16_to_f32, NaN payload kept). Subnormals:
 * (2^-14 + m * 2^-24) - 2^-14, exact. The select is written with masks: with
 * a ternary GCC sinks the fp subtraction into a branch (trapping math) and
 * the loop no longer vectorizes. */
FK_CPU_INLINE float fkv_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16;
    int32_t a = h & 0x7FFF;
    uint32_t nrm = ((uint32_t)a << 13) + (112u << 23);
    uint32_t spec = ((uint32_t)a << 13) | FK_F32_INF;
    uint32_t sub = fk_f2u(fk_u2f(0x38800000u | ((uint32_t)a << 13)) - 0x1p-14f);
    uint32_t msub = 0u - (uint32_t)(a < 0x400);
    uint32_t m = (sub & msub) | (nrm & ~msub);
    m = a >= 0x7C00 ? spec : m;
    return fk_u2f(s | m);
}

/* 256-entry decode tables (fp8 code -> fp32), built once from codec.h. */
const float *fk_cpu_fp8_lut(int e5m2);

/* Widens n elements of src (f32/f16/bf16, or e4m3/e5m2 through lut, which
 * may be NULL for the other types) to fp32. */
FK_CPU_INLINE void fkv_widen(const void *src, fp8kit_dtype t, int64_t n, float *restrict dst,
                             const float *lut)
{
    switch (t) {
    case FP8KIT_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case FP8KIT_BF16: {
        const uint16_t *restrict s = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = fk_u2f((uint32_t)s[i] << 16);
        break;
    }
    case FP8KIT_F16: {
        const uint16_t *restrict s = (const uint16_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = fkv_f16_to_f32(s[i]);
        break;
    }
    default: {
        const uint8_t *restrict s = (const uint8_t *)src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = lut[s[i]];
        break;
    }
    }
}

/* Narrows n fp32 values to dst of type t (RNE; fp8 satfinite). */
FK_CPU_INLINE void fkv_narrow(const float *restrict src, int64_t n, fp8kit_dtype t, void *dst)
{
    switch (t) {
    case FP8KIT_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case FP8KIT_BF16: {
        uint16_t *restrict d = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = fkv_f32_to_bf16(src[i]);
        break;
    }
    case FP8KIT_F16: {
        uint16_t *restrict d = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = fkv_f32_to_f16(src[i]);
        break;
    }
    case FP8KIT_E5M2: {
        uint8_t *restrict d = (uint8_t *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = fkv_f32_to_fp8(src[i], 1);
        break;
    }
    default: {
        uint8_t *restrict d = (uint8_t *)dst;
        for (int64_t i = 0; i < n; i++)
            d[i] = fkv_f32_to_fp8(src[i], 0);
        break;
    }
    }
}

/* NaN-propagating amax (bits of |x|) of n fp32 values. */
FK_CPU_INLINE uint32_t fkv_amax(const float *restrict f, int64_t n)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fk_max_u32(m, fk_abs_bits(f[i]));
    return m;
}

#if defined(__SSE2__)
/* 16x16 byte transpose: dst row j = src column j (SSE2: four unpack stages). */
FK_CPU_INLINE void fkv_tr16(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds)
{
    __m128i a[16], b[16], c[16], d[16];
    for (int i = 0; i < 16; i++)
        a[i] = _mm_loadu_si128((const __m128i *)(src + i * ss));
    for (int k = 0; k < 8; k++) { /* b[k]: columns 0..7, b[8+k]: 8..15; rows 2k, 2k+1 */
        b[k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
        b[8 + k] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
    }
    for (int h = 0; h < 16; h += 8) /* c[4g+m]: columns 4g..4g+3, rows 4m..4m+3 */
        for (int m = 0; m < 4; m++) {
            c[h + m] = _mm_unpacklo_epi16(b[h + 2 * m], b[h + 2 * m + 1]);
            c[h + 4 + m] = _mm_unpackhi_epi16(b[h + 2 * m], b[h + 2 * m + 1]);
        }
    for (int g = 0; g < 4; g++) /* d[4g+2h+p]: columns 4g+2h, +1; rows 8p..8p+7 */
        for (int p = 0; p < 2; p++) {
            d[4 * g + p] = _mm_unpacklo_epi32(c[4 * g + 2 * p], c[4 * g + 2 * p + 1]);
            d[4 * g + 2 + p] = _mm_unpackhi_epi32(c[4 * g + 2 * p], c[4 * g + 2 * p + 1]);
        }
    for (int g = 0; g < 4; g++)
        for (int h = 0; h < 2; h++) {
            int j = 4 * g + 2 * h;
            _mm_storeu_si128((__m128i *)(dst + j * ds), _mm_unpacklo_epi64(d[4 * g + 2 * h], d[4 * g + 2 * h + 1]));
            _mm_storeu_si128((__m128i *)(dst + (j + 1) * ds), _mm_unpackhi_epi64(d[4 * g + 2 * h], d[4 * g + 2 * h + 1]));
        }
}
#endif

/* Byte transpose of a rows x cols block: dst[j * ds + i] = src[i * ss + j]
 * (whole 16x16 blocks with SSE2, the rest element by element). */
FK_CPU_INLINE void fkv_transpose_bytes(const uint8_t *src, int64_t ss, uint8_t *dst, int64_t ds, int rows, int cols)
{
    int r16 = 0, c16 = 0;
#if defined(__SSE2__)
    r16 = rows & ~15;
    c16 = cols & ~15;
    for (int j = 0; j < c16; j += 16)
        for (int i = 0; i < r16; i += 16)
            fkv_tr16(src + i * ss + j, ss, dst + j * ds + i, ds);
#endif
    for (int j = 0; j < cols; j++)
        for (int i = j < c16 ? r16 : 0; i < rows; i++)
            dst[j * ds + i] = src[i * ss + j];
}

/* Address of element (e, r, c) of a batch of matrices. */
static inline void *fk_cpu_at(const fk_mat *m, int64_t e, int64_t r, int64_t c)
{
    return (char *)m->data + (e * m->se + r * m->sr + c) * (int64_t)fk_dtype_bytes(m->dtype);
}

/* Shared by the quantize / dequantize files. */
/* Writes 0 to the padding bytes of E blocked (docs/spec.md 2.3) e8m0 buffers of
 * rp x cp bytes holding rows x cols scales each. */
void fk_cpu_blocked_zero_pad(uint8_t *scale, int64_t E, int64_t rows, int64_t cols, int64_t rp,
                             int64_t cp, int nthreads);
/* mx quantization along axis -2 (transposed output), quant_mx_t.c. */
fp8kit_status fk_cpu_quant_mx_t(int nthreads, const fk_quant_job *job);
/* mx dequantization of a transposed q (axis -2), dequant_mx_t.c. */
fp8kit_status fk_cpu_dequant_mx_t(int nthreads, const fk_quant_job *job);

/* OpenMP thread count for a context (0 asked for = OpenMP's default). */
static inline int fk_cpu_quant_threads(const fp8kit_ctx *ctx)
{
    return fk_ctx_threads(ctx) > 0 ? fk_ctx_threads(ctx) : omp_get_max_threads();
}

#endif
