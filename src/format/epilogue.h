/* epilogue.h - GEMM epilogue math of docs/spec.md section 3 shared by CPU and CUDA:
 * activations and the output casts, on fp32 values. */
#ifndef FK_EPILOGUE_H
#define FK_EPILOGUE_H

#include <math.h>
#include "codec.h"

/* Activation codes match fp8kit_activation. */
FK_HD float fk_act(float y, int act)
{
    switch (act) {
    case 1: /* relu; NaN stays NaN */
        return y < 0.0f ? 0.0f : y;
    case 2: { /* gelu, tanh approximation */
        const float k0 = 0.7978845608028654f, k1 = 0.044715f;
        return 0.5f * y * (1.0f + tanhf(k0 * (y + k1 * y * y * y)));
    }
    case 3: /* gelu, exact (erf) */
        return 0.5f * y * (1.0f + erff(y * 0.7071067811865476f));
    case 4: /* silu */
        return y / (1.0f + expf(-y));
    default:
        return y;
    }
}

#endif
