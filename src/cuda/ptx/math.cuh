/* ptx/math.cuh - arithmetic: rcp / ex2 estimates, prmt, and the opaque mov / add the compiler cannot fold. */
#ifndef FK_CUDA_PTX_MATH_CUH
#define FK_CUDA_PTX_MATH_CUH

#include "cuda/ptx/common.cuh"

/* 1 / d from the hardware estimate, subnormals flushed (rcp.approx.ftz). */
FK_DEV float fk_rcp_approx_ftz(float d)
{
    float r = 0.0f;
#ifdef FK_SM90_DEVICE
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
#else
    (void)d;
#endif
    return r;
}

/* 2^x from the hardware estimate, subnormals flushed (ex2.approx.ftz). */
FK_DEV float fk_ex2_approx_ftz(float x)
{
    float r = 0.0f;
#ifdef FK_SM90_DEVICE
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
#else
    (void)x;
#endif
    return r;
}

/* prmt.b32: byte i of the result is byte (sel >> 4 i) & 7 of {b, a}. */
FK_DEV uint32_t fk_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t r = 0;
#ifdef FK_SM90_DEVICE
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
#else
    (void)a, (void)b, (void)sel;
#endif
    return r;
}

/* The fp32 constant with bit pattern BITS, produced by an instruction the
 * compiler cannot see through (a volatile mov), so that it is not folded
 * into the code that uses it. */
template <uint32_t BITS> FK_DEV float fk_opaque_f32(void)
{
    float r = 0.0f;
#ifdef FK_SM90_DEVICE
    asm volatile("mov.b32 %0, %1;" : "=f"(r) : "n"(BITS));
#endif
    return r;
}

/* a + b by a volatile add: the instruction is issued where it stands, so it
 * waits for a and b (the FK_SMALL_TRACE stamps use it to wait for loads). */
FK_DEV float fk_opaque_add_f32(float a, float b)
{
    float r = 0.0f;
#ifdef FK_SM90_DEVICE
    asm volatile("add.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
#else
    r = a + b;
#endif
    return r;
}

#endif
