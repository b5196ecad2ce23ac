/* test_hp.h - host helpers shared by the GEMM tests: loads and stores of the
 * 16/32-bit float types, an output element as double (fp8 outputs decoded),
 * and the fp64 activations of docs/spec.md section 3. Include after test_util.h and
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
/* docs/spec.md section 3's activations in fp64. */
static inline double act_ref(double y, int act)
{
    switch (act) {
    case FP8KIT_ACT_RELU: return y < 0 ? 0 : y;
    case FP8KIT_ACT_GELU_TANH: return 0.5 * y * (1.0 + tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
    case FP8KIT_ACT_GELU_ERF: return 0.5 * y * (1.0 + erf(y * 0.7071067811865476));
    case FP8KIT_ACT_SILU: return y / (1.0 + exp(-y));
    default: return y;
    }
}

#endif
