/* epilogue_math.h - GEMM epilogue math of docs/spec.md section 3 shared by CPU and CUDA:
 * the activations and swiglu's pairing rule, on fp32 values. */
#ifndef FK_EPILOGUE_MATH_H
#define FK_EPILOGUE_MATH_H

#include <math.h>
#include "codec.h"

/* gelu_tanh and silu are both y * sigmoid(-z ln 2) = y / (1 + 2^z), with
 *   gelu_tanh: 0.5 y (1 + tanh u) = y sigmoid(2 u), u = k0 (y + k1 y^3),
 *              so z = y (K0 + K1 y^2), K0 = -2 k0 log2(e), K1 = -2 k0 k1 log2(e);
 *   silu:      z = -y log2(e).
 * fk_act_z gives z; every backend evaluates y / (1 + 2^z) from it, the CPU with
 * exp2f and a division (fk_act), the CUDA kernels with the hardware's 2^x and
 * 1 / x estimates (src/cuda/gemm/sm90/epilogue_op.cuh): the formula is this one. Where
 * 2^z overflows the result is a signed 0 for finite y (the exact value is
 * below 2^-126 |y| there); y = -Inf gives NaN (Inf / Inf), y = +Inf gives +Inf,
 * a NaN y gives NaN. */
#define FK_ACT_K0 (-2.3022082f)  /* -2 * 0.7978845608 * log2(e) */
#define FK_ACT_K1 (-0.10294324f) /* -2 * 0.7978845608 * 0.044715 * log2(e) */
#define FK_ACT_NLOG2E (-1.442695f)

/* z of y / (1 + 2^z) for gelu_tanh (2) and silu (4). */
FK_HD float fk_act_z(float y, int act)
{
    return act == 2 ? y * fmaf(y * y, FK_ACT_K1, FK_ACT_K0) : y * FK_ACT_NLOG2E;
}

/* Activation codes match fp8kit_activation. */
FK_HD float fk_act(float y, int act)
{
    switch (act) {
    case 1: /* relu; NaN stays NaN */
        return y < 0.0f ? 0.0f : y;
    case 2: /* gelu, tanh approximation */
    case 4: /* silu */
        return y / (1.0f + exp2f(fk_act_z(y, act)));
    case 3: /* gelu, exact (erf) */
        return 0.5f * y * (1.0f + erff(y * 0.7071067811865476f));
    default:
        return y;
    }
}

/* The pairing rule of FP8KIT_ACT_SWIGLU (docs/spec.md 3): silu of the gate
 * (fk_act's silu, code 4) times the up value, one fp32 multiply. gate is
 * y[m, j] and up is y[m, j + N/2], both the fp32 y of the linear part. */
FK_HD float fk_swiglu(float gate, float up)
{
    return fk_act(gate, 4) * up;
}

#endif
