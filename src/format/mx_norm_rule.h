/* mx_norm_rule.h - the MX chunk normalization (docs/spec.md 3, "MX GEMM on
 * Hopper"): the rule that rewrites the (up to) four 32-blocks of one
 * 128-wide K chunk of a row to one common e8m0 scale, so that a GEMM can
 * promote once per 128 of K instead of once per 32. Used by the CUDA MX GEMM
 * (src/cuda/mx_norm_kernel.cu, on copies in the workspace) and by the tests (the
 * host build of the same functions).
 *
 * A chunk is rewritten when its scale bytes are finite (not 0xFF), span at
 * most FK_MX_NORM_SPREAD binades (max E - min), and every block that would
 * move down d > 0 binades has a largest finite code magnitude (amax, in
 * the block's own units) of at least 2^(d + 2) for e4m3, 2^(d - 5) for e5m2
 * (or is all zeros / NaN / Inf). Then every block takes the scale E and each
 * code c of a block with scale e becomes encode(decode(c) * 2^(e - E)),
 * rounded to nearest-even on the fp8 grid (subnormals kept). That is exact
 * for values that stay in the format's normal range at scale E; smaller ones
 * lose low bits, at most half a subnormal step at E, 2^-10 (e4m3) or 2^-17
 * (e5m2) times 2^d in the block's units - by the amax condition at most
 * 2^-12 of the block's largest element. NaN and Inf codes stay as they are.
 * Other chunks are left unchanged (the GEMM then promotes them every 32).
 * Real MX data (fp8kit_quantize, OCP: each block's amax lands in the
 * format's top binades) meets the amax condition; blocks that are nearly
 * zero except for tiny values do not, and keep their exact path. */
#ifndef FK_FORMAT_MX_NORM_RULE_H
#define FK_FORMAT_MX_NORM_RULE_H

#include <stdint.h>
#include "format/codec.h"
#include "format/fk_hd.h"

#define FK_MX_NORM_SPREAD 4 /* largest scale spread (binades) a chunk is rewritten at */

/* Largest finite magnitude of n codes (NaN / Inf ignored; 0 when none). */
FK_HD float fk_mx_norm_amax(const uint8_t *c, int n, int e5m2)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++) {
        const float v = fk_fp8_to_f32(c[i], e5m2);
        const float a = v < 0.0f ? -v : v;
        if (a - a == 0.0f && a > m)
            m = a;
    }
    return m;
}

/* Whether a block with largest finite magnitude amax may move d binades down. */
FK_HD int fk_mx_norm_block_ok(float amax, int d, int e5m2)
{
    return d == 0 || amax == 0.0f || amax >= fk_u2f((uint32_t)(127 + d + (e5m2 ? -5 : 2)) << 23);
}

/* The common scale byte of a chunk of nb (1..4) blocks with scale bytes s
 * and largest finite magnitudes amax, or -1 when the chunk stays as it is. */
FK_HD int fk_mx_norm_pick(const uint8_t *s, const float *amax, int nb, int e5m2)
{
    int lo = 255, hi = 0;
    for (int j = 0; j < nb; j++) {
        if (s[j] == 255u)
            return -1;
        lo = s[j] < lo ? s[j] : lo;
        hi = s[j] > hi ? s[j] : hi;
    }
    if (hi - lo > FK_MX_NORM_SPREAD)
        return -1;
    for (int j = 0; j < nb; j++)
        if (!fk_mx_norm_block_ok(amax[j], hi - s[j], e5m2))
            return -1;
    return hi;
}

/* The same from the chunk's 32 nb codes (contiguous, from its first). */
FK_HD int fk_mx_norm_scale(const uint8_t *s, const uint8_t *codes, int nb, int e5m2)
{
    float amax[4];
    for (int j = 0; j < nb; j++)
        amax[j] = fk_mx_norm_amax(codes + 32 * j, 32, e5m2);
    return fk_mx_norm_pick(s, amax, nb, e5m2);
}

/* Code c of a block d binades (0..FK_MX_NORM_SPREAD) below the chunk's common scale. */
FK_HD uint8_t fk_mx_norm_code(uint8_t c, int d, int e5m2)
{
    if (d == 0)
        return c;
    const float v = fk_fp8_to_f32(c, e5m2);
    if (!(v - v == 0.0f)) /* NaN or Inf */
        return c;
    return fk_f32_to_fp8(v * fk_u2f((uint32_t)(127 - d) << 23), e5m2);
}

#endif
