/* ptx/cvt.cuh - conversions: fp32 pairs to packed bf16x2 / f16x2 / fp8x2 (fk_cvt2), f16 to fp32. */
#ifndef FK_CUDA_PTX_CVT_CUH
#define FK_CUDA_PTX_CVT_CUH

#include "cuda/ptx/common.cuh"
#include "format/codec.h"

/* Two fp32 -> packed bf16x2 / f16x2, round to nearest even (no flush to
 * zero; overflow to Inf for f16): lo in bits 0-15, hi in bits 16-31. Equal
 * to the docs/spec.md codecs except that a NaN comes out as the canonical NaN. */
FK_DEV uint32_t fk_cvt_bf16x2(float lo, float hi)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    (void)lo, (void)hi;
#endif
    return r;
}

FK_DEV uint32_t fk_cvt_f16x2(float lo, float hi)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    (void)lo, (void)hi;
#endif
    return r;
}

/* Two fp32 values -> two fp8 codes (lo in bits 0-7, hi in bits 8-15), satfinite
 * RNE; E5: e5m2, else e4m3. On sm_89+ this is the hardware conversion (one F2FP
 * for the pair), which equals fk_f32_to_e4m3 / fk_f32_to_e5m2 for every non-NaN
 * fp32 input: checked exhaustively over all 2^32 bit patterns by
 * fk_cuda_cvt_selfcheck (run by test_cuda_quant). Its code for a NaN input may
 * carry the sign, so NaN must not reach it or its code must be replaced: the
 * quantization kernels write NaN groups (scale NaN / e8m0 255, the only way a
 * NaN arises in the element step) as the canonical code directly; the cast
 * replaces NaN lanes; the GEMM epilogue overwrites the codes of NaN / Inf
 * groups. Elsewhere (sm_80, the host) and with FK_CUDA_SOFT_CVT it is the
 * shared integer codec. The quantization kernels, the cast and the GEMM
 * epilogue all use this one function. */
template <int E5> FK_DEV uint32_t fk_cvt2(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(FK_CUDA_SOFT_CVT)
    unsigned short r;
    if (E5)
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (uint32_t)fk_f32_to_fp8(lo, E5) | ((uint32_t)fk_f32_to_fp8(hi, E5) << 8);
#endif
}

/* Two fp8 codes (lo in the low byte) widened to f16x2 (exact), sm_89+. */
template <int E5> FK_DEV uint32_t fk_cvt_f16x2_fp8x2(uint16_t v)
{
    uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (E5)
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(r) : "h"((unsigned short)v));
    else
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((unsigned short)v));
#else
    (void)v;
#endif
    return r;
}

/* f16x2 -> two fp8 codes (lo in the low byte), nearest-even, finite values
 * saturated, sm_89+. */
template <int E5> FK_DEV uint16_t fk_cvt_fp8x2_f16x2(uint32_t v)
{
    unsigned short r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (E5)
        asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(r) : "r"(v));
    else
        asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(v));
#else
    (void)v;
#endif
    return r;
}

/* f16x2 product, nearest-even. */
FK_DEV uint32_t fk_mul_f16x2(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 530
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
#else
    (void)a;
    (void)b;
#endif
    return r;
}

/* f16 bits -> fp32 (exact). */
FK_DEV float fk_cvt_f32_f16(uint16_t h)
{
    float f = 0.0f;
#ifdef FK_SM90_DEVICE
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
#else
    (void)h;
#endif
    return f;
}

#endif
