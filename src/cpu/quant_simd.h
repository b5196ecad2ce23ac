/* quant_simd.h - branch-free, vectorizable element codecs and row loaders/storers
 * for the CPU quantize, dequantize and cast kernels (src/cpu/quant*.c,
 * dequant*.c, cast*.c).
 *
 * The shared codecs in src/format/codec.h are the definition; they branch
 * (early returns, a variable-shift subnormal path), which stops GCC from
 * vectorizing a loop that calls them. The functions here compute the same bits
 * without control flow: both the normal and the subnormal result are computed
 * and the right one is selected. The subnormal rounding uses one exact IEEE
 * fp32 addition of a "magic" power of two whose ulp is the target's subnormal
 * unit, so the FPU's round-to-nearest-even does the rounding (this needs the
 * default MXCSR state: RNE, no FTZ/DAZ, as does the rest of SPEC.md).
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
#include "core/internal.h"
#include "format/scale.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define FK_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FK_CPU_CLONES
#endif
#define FK_CPU_INLINE static inline __attribute__((always_inline))

/* Elements per chunk when a row is widened to fp32 on the stack. */
#define FK_CPU_CHUNK 1024

/* Round a non-negative fp32 magnitude a (bits, finite, below the caller's
 * saturation threshold) to a small float with mbits mantissa bits and bias
 * `bias`, RNE, subnormals included: the same result as fk_round_small. */
FK_CPU_INLINE uint32_t fkv_round_small(uint32_t a, int mbits, int bias)
{
    const int sh = 23 - mbits;
    uint32_t nrm = ((a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u)) >> sh) -
                   ((uint32_t)(127 - bias) << mbits);
    /* magic = 2^(24 - bias - mbits): its ulp is the subnormal unit 2^(1-bias-mbits) */
    const uint32_t mbits_magic = (uint32_t)(151 - bias - mbits) << 23;
    uint32_t sub = fk_f2u(fk_u2f(a) + fk_u2f(mbits_magic)) - mbits_magic;
    return (int32_t)a < (int32_t)((uint32_t)(128 - bias) << 23) ? sub : nrm;
}

/* fp32 -> e4m3 / e5m2, satfinite RNE, canonical NaN (= fk_f32_to_fp8). */
FK_CPU_INLINE uint8_t fkv_f32_to_fp8(float x, int e5m2)
{
    uint32_t u = fk_f2u(x);
    uint32_t sign = (u >> 24) & 0x80u;
    int32_t a = (int32_t)(u & 0x7FFFFFFFu);
    uint32_t c = fkv_round_small((uint32_t)a, e5m2 ? 2 : 3, e5m2 ? 15 : 7);
    c = a >= (int32_t)(e5m2 ? FK_E5M2_MAXBITS : FK_E4M3_MAXBITS) ? (e5m2 ? 0x7Bu : 0x7Eu) : c;
    c |= sign;
    c = a > (int32_t)FK_F32_INF ? (e5m2 ? FK_E5M2_NAN : FK_E4M3_NAN) : c;
    return (uint8_t)c;
}

/* fp32 -> bf16 RNE, NaN quieted (= fk_f32_to_bf16). */
FK_CPU_INLINE uint16_t fkv_f32_to_bf16(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t n = (u >> 16) | 0x40u;
    return (uint16_t)((int32_t)(u & 0x7FFFFFFFu) > (int32_t)FK_F32_INF ? n : r);
}

/* fp32 -> fp16 RNE, overflow to Inf, NaN -> signed quiet NaN (= fk_f32_to_f16). */
FK_CPU_INLINE uint16_t fkv_f32_to_f16(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t a = (int32_t)(u & 0x7FFFFFFFu);
    uint32_t c = fkv_round_small((uint32_t)a, 10, 15);
    c = a >= 0x477FF000 ? 0x7C00u : c;
    c = a > (int32_t)FK_F32_INF ? 0x7E00u : c;
    return (uint16_t)(sign | c);
}

/* fp16 -> fp32, exact (= fk_f16_to_f32, NaN payload kept). */
FK_CPU_INLINE float fkv_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16;
    int32_t a = h & 0x7FFF;
    uint32_t nrm = ((uint32_t)a << 13) + (112u << 23);
    uint32_t spec = ((uint32_t)a << 13) | FK_F32_INF;
    uint32_t sub = fk_f2u((float)a * 0x1.0p-24f);
    uint32_t m = a >= 0x7C00 ? spec : (a >= 0x400 ? nrm : sub);
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

/* Address of element (e, r, c) of a batch of matrices. */
static inline void *fk_cpu_at(const fk_mat *m, int64_t e, int64_t r, int64_t c)
{
    return (char *)m->data + (e * m->se + r * m->sr + c) * (int64_t)fk_dtype_bytes(m->dtype);
}

/* Shared by the quantize / dequantize files. */
/* Writes 0 to the padding bytes of E blocked (SPEC 2.3) e8m0 buffers of
 * rp x cp bytes holding rows x cols scales each. */
void fk_cpu_blocked_zero_pad(uint8_t *scale, int64_t E, int64_t rows, int64_t cols, int64_t rp,
                             int64_t cp, int nthreads);
/* mx quantization along axis -2 (transposed output), quant_mx_t.c. */
fp8kit_status fk_cpu_quant_mx_t(int nthreads, const fk_quant_job *job);
/* mx dequantization of a transposed q (axis -2), dequant_mx_t.c. */
fp8kit_status fk_cpu_dequant_mx_t(int nthreads, const fk_quant_job *job);

/* OpenMP thread count for a context (ctx->nthreads 0 = OpenMP's default). */
static inline int fk_cpu_quant_threads(const fp8kit_ctx *ctx)
{
    return ctx && ctx->nthreads > 0 ? ctx->nthreads : omp_get_max_threads();
}

#endif
