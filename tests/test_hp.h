/* test_hp.h - host helpers shared by the GEMM tests: loads and stores of the
 * 16/32-bit float types and an output element as double (fp8 outputs decoded).
 * The fp64 activations of docs/spec.md section 3 are src/ref's fk_ref_act
 * (ref/gemm_ref.h, library fp8kit_ref). Include after test_util.h and
 * format/codec.h. */
#ifndef FK_TEST_HP_H
#define FK_TEST_HP_H

#include <math.h>

static inline double load_hp(const void *p, int64_t i, fp8kit_dtype t)
{
    if (t == FP8KIT_F32)
        return ((const float *)p)[i];
    if (t == FP8KIT_BF16)
        return fk_bf16_to_f32(((const uint16_t *)p)[i]);
    return fk_f16_to_f32(((const uint16_t *)p)[i]);
}
static inline void store_hp(void *p, int64_t i, fp8kit_dtype t, float v)
{
    if (t == FP8KIT_F32)
        ((float *)p)[i] = v;
    else if (t == FP8KIT_BF16)
        ((uint16_t *)p)[i] = fk_f32_to_bf16(v);
    else
        ((uint16_t *)p)[i] = fk_f32_to_f16(v);
}
/* Element i of an output of dtype t (fp8 decoded) as double. */
static inline double out_val(const void *d, int64_t i, fp8kit_dtype t)
{
    if (t == FP8KIT_E4M3 || t == FP8KIT_E5M2)
        return fk_fp8_to_f32(((const uint8_t *)d)[i], t == FP8KIT_E5M2);
    return load_hp(d, i, t);
}
#endif
