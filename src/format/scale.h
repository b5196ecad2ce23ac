/* scale.h - scale rules of docs/spec.md section 2, shared by CPU and CUDA:
 * NaN-propagating amax on magnitude bits, fp32 group scales (with the pow2
 * option), the multiplier dequantization takes from a stored fp32 scale,
 * MX e8m0 scales (FLOOR and RCEIL) and their reciprocals, and the
 * per-element quantize steps. Where scales are stored (shapes, layouts,
 * offsets) is geometry.h. */
#ifndef FK_SCALE_H
#define FK_SCALE_H

#include "codec.h"
#include "geometry.h" /* scale layouts: fk_blocked_offset, ... (included for their users) */

/* amax is kept as the bits of |x|: as unsigned integers, NaN > Inf > finite,
 * so an integer max over (bits & 0x7FFFFFFF) is a NaN-propagating amax. */
FK_HD uint32_t fk_abs_bits(float x) { return fk_f2u(x) & 0x7FFFFFFFu; }
FK_HD uint32_t fk_max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

FK_HD float fk_fp8_max(int e5m2) { return e5m2 ? FK_E5M2_MAX : FK_E4M3_MAX; }

/* Smallest power of two >= s, for finite s > 0 (subnormal powers included). */
FK_HD float fk_pow2_ceil(float s)
{
    uint32_t u = fk_f2u(s);
    if (u >> 23) /* normal */
        return (u & 0x7FFFFFu) ? fk_u2f((u & 0xFF800000u) + 0x800000u) : s;
    uint32_t p = 1;
    while (p < u)
        p <<= 1;
    return fk_u2f(p);
}

/* docs/spec.md 2.1: the dequantization multiplier S of a group from its amax bits. */
FK_HD float fk_scale_f32(uint32_t amax_bits, int e5m2, int pow2)
{
    if (amax_bits >= FK_F32_INF)
        return fk_u2f(FK_F32_QNAN);
    if (amax_bits == 0)
        return 1.0f;
    float s = fk_u2f(amax_bits) / fk_fp8_max(e5m2);
    if (s == 0.0f)
        s = fk_u2f(1u); /* 2^-149 */
    if (pow2)
        s = fk_pow2_ceil(s);
    return s;
}

/* docs/spec.md 2.1 element step: q = fp8(fl32(x / S)); a NaN S (NaN/Inf group) gives
 * the canonical NaN, which the division produces on its own. */
FK_HD uint8_t fk_quant_f32_elem(float x, float s, int e5m2) { return fk_f32_to_fp8(x / s, e5m2); }

/* docs/spec.md 2.1 and 4: the multiplier dequantization applies for a
 * stored fp32 scale S. Quantization never stores an infinite S (a group
 * holding an Inf or a NaN gets S = NaN), so an infinite S marks a NaN group
 * as well: it becomes the canonical NaN and every element of the group
 * dequantizes to NaN, as with the mx byte 255, instead of +-Inf for nonzero
 * codes and NaN for zeros. Finite and NaN S are used as they are. */
FK_HD float fk_deq_scale_f32(float s)
{
    return (fk_f2u(s) & 0x7FFFFFFFu) == FK_F32_INF ? fk_u2f(FK_F32_QNAN) : s;
}

/* docs/spec.md 2: one dequantized element, decode(q) * S in fp32, with the
 * NaN a result carries fixed (IEEE leaves it open, and an x86 multiply's
 * choice depends on operand order): q's NaN quieted (sign kept) when q
 * decodes to NaN, else S's NaN quieted, else 0xFFC00000 (Inf * 0). */
FK_HD float fk_deq_mul(float d, float s)
{
    const float p = d * s;
    if (p == p)
        return p;
    return fk_u2f(d != d ? (fk_f2u(d) | 0x00400000u) : s != s ? (fk_f2u(s) | 0x00400000u) : 0xFFC00000u);
}

/* docs/spec.md 2.2: e8m0 scale byte of an MX block from its amax bits. */
FK_HD uint8_t fk_mx_scale(uint32_t amax_bits, int e5m2, int rceil)
{
    if (amax_bits > FK_F32_INF)
        return 0xFFu;
    if (!rceil) {
        if (amax_bits == FK_F32_INF)
            return 0xFFu;
        int e = (int)(amax_bits >> 23) - 127 - (e5m2 ? 15 : 8);
        e = e < -127 ? -127 : (e > 128 ? 128 : e);
        return (uint8_t)(e + 127);
    }
    const float inv = e5m2 ? (1.0f / 57344.0f) : (1.0f / 448.0f);
    uint32_t d = fk_f2u(fk_u2f(amax_bits) * inv);
    uint32_t E = (d >> 23) & 0xFFu, M = d & 0x7FFFFFu;
    if (E == 0xFFu)
        return 0xFFu;
    if (E == 0)
        return (uint8_t)(M > 0x400000u);
    return (uint8_t)(E + (M != 0));
}

/* Reciprocal multiplier r of an e8m0 scale byte (docs/spec.md 2.2). */
FK_HD float fk_mx_recip(uint8_t s)
{
    if (s == 0xFFu)
        return fk_u2f(FK_F32_QNAN);
    if (s == 0xFEu)
        return fk_u2f(0x00400000u); /* 2^-127 */
    return fk_u2f((uint32_t)(254u - s) << 23);
}

/* docs/spec.md 2.2 element step: q = fp8(fl32(x * r)); a NaN r gives canonical NaN. */
FK_HD uint8_t fk_quant_mx_elem(float x, float r, int e5m2) { return fk_f32_to_fp8(x * r, e5m2); }

#endif
