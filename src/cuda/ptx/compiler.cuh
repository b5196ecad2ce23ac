/* ptx/compiler.cuh - empty inline-PTX statements: no instruction, they only constrain the compiler. */
#ifndef FK_CUDA_PTX_COMPILER_CUH
#define FK_CUDA_PTX_COMPILER_CUH

#include "cuda/ptx/common.cuh"

/* Keeps the compiler from moving accesses of an accumulator register across
 * the asynchronous wgmma window. */
FK_DEV void fk_reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Makes the compiler materialize the given values (e.g. issue their loads)
 * here, without using them: one empty statement taking them all in
 * registers. The operand list is that of gemm/sm90/small.cu's fk_small_warm:
 * two 64-bit values, four 32-bit integers, two floats. */
FK_DEV void fk_keep_live(const void *a0, long long a1, int b0, int b1, int b2, int b3, float c0, float c1)
{
#ifdef FK_SM90_DEVICE
    asm volatile("" ::"l"(a0), "l"(a1), "r"(b0), "r"(b1), "r"(b2), "r"(b3), "f"(c0), "f"(c1));
#else
    (void)a0, (void)a1, (void)b0, (void)b1, (void)b2, (void)b3, (void)c0, (void)c1;
#endif
}

#endif
