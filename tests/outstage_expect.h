/* outstage_expect.h - the expected output stage of one row of a GEMM's D (docs/spec.md 3, step 5)
 * from its fp32 values, by the shared src/format rules: cast to f32 / bf16 / f16 / fp8,
 * OUTQ_SCALED (codes of v / scale_in, amax), OUTQ_MX and OUTQ_BLOCK1X128 (values rounded to out_hp,
 * then per-group scales and codes). For the tests that check fused epilogues bit for bit
 * (test_gemm_swiglu.c, test_cuda_gemm_swiglu.c). Include after format/codec.h and format/scale.h. */
#ifndef FK_TEST_OUTSTAGE_EXPECT_H
#define FK_TEST_OUTSTAGE_EXPECT_H

#include <string.h>

typedef struct fk_outstage {
    fp8kit_dtype dt, hp;   /* D's dtype; the value's rounding before MX / 1x128 quantization */
    fp8kit_out_quant oq;
    int pow2, rceil;       /* OUTQ_BLOCK1X128's power-of-two scales; OUTQ_MX's RCEIL rounding */
    float scale_in;        /* OUTQ_SCALED's divisor */
} fk_outstage;

static inline float fk_outstage_hp(float y, fp8kit_dtype t)
{
    return t == FP8KIT_BF16 ? fk_bf16_to_f32(fk_f32_to_bf16(y)) : t == FP8KIT_F16 ? fk_f16_to_f32(fk_f32_to_f16(y)) : y;
}

/* D's row of n values v (rounded in place to hp for MX / 1x128) into d (n elements of D's
 * dtype), its scales into sd (MX: n/32 bytes; 1x128: ceil(n/128) floats), |v|'s maximum bits
 * into *am (OUTQ_SCALED). */
static inline void fk_outstage_row(const fk_outstage *s, float *v, int64_t n, uint8_t *d, uint8_t *sd, uint32_t *am)
{
    const int e5 = s->dt == FP8KIT_E5M2;
    if (s->oq != FP8KIT_OUTQ_MX && s->oq != FP8KIT_OUTQ_BLOCK1X128) {
        for (int64_t j = 0; j < n; j++) {
            if (s->dt == FP8KIT_F32) {
                memcpy(d + 4 * j, &v[j], 4);
            } else if (s->dt == FP8KIT_BF16 || s->dt == FP8KIT_F16) {
                const uint16_t h = s->dt == FP8KIT_BF16 ? fk_f32_to_bf16(v[j]) : fk_f32_to_f16(v[j]);
                memcpy(d + 2 * j, &h, 2);
            } else if (s->oq == FP8KIT_OUTQ_NONE) {
                d[j] = fk_f32_to_fp8(v[j], e5);
            } else {
                d[j] = fk_quant_f32_elem(v[j], s->scale_in, e5);
                *am = fk_max_u32(*am, fk_abs_bits(v[j]));
            }
        }
        return;
    }
    for (int64_t j = 0; j < n; j++)
        v[j] = fk_outstage_hp(v[j], s->hp);
    const int64_t gs = s->oq == FP8KIT_OUTQ_MX ? 32 : 128, ng = (n + gs - 1) / gs;
    for (int64_t g = 0; g < ng; g++) {
        const int64_t j0 = g * gs, j1 = j0 + gs < n ? j0 + gs : n;
        uint32_t ga = 0;
        for (int64_t j = j0; j < j1; j++)
            ga = fk_max_u32(ga, fk_abs_bits(v[j]));
        if (s->oq == FP8KIT_OUTQ_MX) {
            const uint8_t sc = fk_mx_scale(ga, e5, s->rceil);
            const float rc = fk_mx_recip(sc);
            sd[g] = sc;
            for (int64_t j = j0; j < j1; j++)
                d[j] = fk_quant_mx_elem(v[j], rc, e5);
        } else {
            const float sc = fk_scale_f32(ga, e5, s->pow2);
            memcpy(sd + 4 * g, &sc, 4);
            for (int64_t j = j0; j < j1; j++)
                d[j] = fk_quant_f32_elem(v[j], sc, e5);
        }
    }
}

#endif
