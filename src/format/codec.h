/* codec.h - element codecs of docs/spec.md section 1, shared by the CPU backend and the
 * CUDA kernels: fp32 -> e4m3/e5m2 (satfinite, round to nearest even, target
 * subnormals kept), fp8/e8m0/bf16/fp16 -> fp32 (exact), fp32 -> bf16/fp16 (RNE).
 * Integer arithmetic only, so host and device agree bit for bit. */
#ifndef FK_CODEC_H
#define FK_CODEC_H

#include "fk_hd.h"

#define FK_E4M3_MAX 448.0f
#define FK_E5M2_MAX 57344.0f
#define FK_E4M3_NAN 0x7Fu
#define FK_E5M2_NAN 0x7Eu
#define FK_E4M3_MAXBITS 0x43E00000u /* 448.0f */
#define FK_E5M2_MAXBITS 0x47600000u /* 57344.0f */
#define FK_F32_INF 0x7F800000u
#define FK_F32_QNAN 0x7FC00000u

/* Rounds a finite, non-negative fp32 magnitude (bits a) to the nearest value,
 * ties to even, of a small float with `mbits` mantissa bits and exponent bias
 * `bias`, subnormals included. Returns the unsigned code; the caller handles
 * NaN and saturation (a carry into the exponent is a correct round-up). */
FK_HD uint32_t fk_round_small(uint32_t a, int mbits, int bias)
{
    int e = (int)(a >> 23);
    if (e - 127 + bias >= 1) { /* normal in the target */
        int sh = 23 - mbits;
        uint32_t r = a + ((1u << (sh - 1)) - 1u) + ((a >> sh) & 1u);
        return (r >> sh) - ((uint32_t)(127 - bias) << mbits);
    }
    /* target subnormal: value = mant * 2^(ee-150), unit = 2^(1-bias-mbits) */
    uint32_t mant = (a & 0x7FFFFFu) | (e ? 0x800000u : 0u);
    int ee = e ? e : 1;
    int shift = 151 - bias - mbits - ee; /* >= 24 - mbits here */
    if (shift > 24)
        return 0; /* mant < 2^24 <= half a unit */
    uint32_t n = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (n & 1u)))
        n++;
    return n;
}

/* fp32 -> e4m3 (OCP E4M3FN), satfinite RNE; NaN -> 0x7F. */
FK_HD uint8_t fk_f32_to_e4m3(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > FK_F32_INF)
        return (uint8_t)FK_E4M3_NAN;
    if (a >= FK_E4M3_MAXBITS) /* includes Inf; 448 < |x| <= 464 rounds to 448 anyway */
        return (uint8_t)(sign | 0x7Eu);
    return (uint8_t)(sign | fk_round_small(a, 3, 7));
}

/* fp32 -> e5m2, satfinite RNE; NaN -> 0x7E. */
FK_HD uint8_t fk_f32_to_e5m2(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > FK_F32_INF)
        return (uint8_t)FK_E5M2_NAN;
    if (a >= FK_E5M2_MAXBITS)
        return (uint8_t)(sign | 0x7Bu);
    return (uint8_t)(sign | fk_round_small(a, 2, 15));
}

/* Decodes an unsigned small-float code (no sign, not Inf/NaN) to fp32 bits. */
FK_HD uint32_t fk_decode_small(uint32_t code, int mbits, int bias)
{
    uint32_t e = code >> mbits;
    uint32_t m = code & ((1u << mbits) - 1u);
    if (e)
        return ((e + 127u - (uint32_t)bias) << 23) | (m << (23 - mbits));
    if (!m)
        return 0;
    int p = 0; /* index of the highest set bit of m */
    while ((m >> (p + 1)) != 0)
        p++;
    return ((uint32_t)(p + 1 - bias - mbits + 127) << 23) | ((m << (23 - p)) & 0x7FFFFFu);
}

FK_HD float fk_e4m3_to_f32(uint8_t c)
{
    uint32_t s = (uint32_t)(c & 0x80u) << 24;
    if ((c & 0x7Fu) == 0x7Fu)
        return fk_u2f(s | FK_F32_QNAN);
    return fk_u2f(s | fk_decode_small(c & 0x7Fu, 3, 7));
}

FK_HD float fk_e5m2_to_f32(uint8_t c)
{
    uint32_t s = (uint32_t)(c & 0x80u) << 24;
    uint32_t a = c & 0x7Fu;
    if (a >= 0x7Cu)
        return fk_u2f(s | (a == 0x7Cu ? FK_F32_INF : FK_F32_QNAN));
    return fk_u2f(s | fk_decode_small(a, 2, 15));
}

/* e8m0 scale byte -> 2^(s-127); 0xFF -> NaN; 0 -> 2^-127 (fp32 subnormal). */
FK_HD float fk_e8m0_to_f32(uint8_t s)
{
    if (s == 0xFFu)
        return fk_u2f(FK_F32_QNAN);
    return fk_u2f(s ? (uint32_t)s << 23 : 0x00400000u);
}

FK_HD float fk_bf16_to_f32(uint16_t h) { return fk_u2f((uint32_t)h << 16); }

/* fp32 -> bf16, RNE; NaN stays NaN (quiet bit set). */
FK_HD uint16_t fk_f32_to_bf16(float x)
{
    uint32_t u = fk_f2u(x);
    if ((u & 0x7FFFFFFFu) > FK_F32_INF)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

FK_HD float fk_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16;
    uint32_t a = h & 0x7FFFu;
    if (a >= 0x7C00u) /* Inf or NaN (payload kept) */
        return fk_u2f(s | FK_F32_INF | ((a & 0x3FFu) << 13));
    return fk_u2f(s | fk_decode_small(a, 10, 15));
}

/* fp32 -> fp16, RNE; overflow -> Inf; NaN -> quiet NaN. */
FK_HD uint16_t fk_f32_to_f16(float x)
{
    uint32_t u = fk_f2u(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > FK_F32_INF)
        return (uint16_t)(sign | 0x7E00u);
    if (a >= 0x477FF000u) /* >= 65520 rounds to Inf */
        return (uint16_t)(sign | 0x7C00u);
    return (uint16_t)(sign | fk_round_small(a, 10, 15));
}

/* fp32 -> fp8 of the given kind (1 = e5m2, 0 = e4m3). */
FK_HD uint8_t fk_f32_to_fp8(float x, int e5m2) { return e5m2 ? fk_f32_to_e5m2(x) : fk_f32_to_e4m3(x); }
FK_HD float fk_fp8_to_f32(uint8_t c, int e5m2) { return e5m2 ? fk_e5m2_to_f32(c) : fk_e4m3_to_f32(c); }

#endif
