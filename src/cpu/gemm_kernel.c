/* gemm_kernel.c - fp32 register-blocked microkernels of the CPU scaled GEMM,
 * one per ISA (AVX-512: 12 x 32, AVX2+FMA: 6 x 16, baseline SSE2: 4 x 8),
 * generated from gemm_kernel_body.h with GCC vector extensions and picked at
 * run time from the CPU's features, so one build runs everywhere
 * (the tuning key cpu_isa lowers the choice, core/tuning.h).
 * This file alone is compiled with -ffp-contract=fast (see CMakeLists.txt):
 * the multiply-adds of the dot products become FMAs. Nothing here needs to
 * be bit-exact; the GEMM's contract is the error bound of docs/spec.md section 3. */
#include <stdlib.h>
#include <string.h>
#include "cpu/gemm_internal.h"

typedef float fk_v16f __attribute__((vector_size(64)));
typedef float fk_v8f __attribute__((vector_size(32)));
typedef float fk_v4f __attribute__((vector_size(16)));

#define FK_UK_NAME fk_ukernel_avx512
#define FK_UK_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define FK_UK_VT fk_v16f
#define FK_UK_VW 16
#define FK_UK_MR 12
#define FK_UK_NV 2
#include "cpu/gemm_kernel_body.h"

#define FK_UK_NAME fk_ukernel_avx2
#define FK_UK_TARGET __attribute__((target("avx2,fma")))
#define FK_UK_VT fk_v8f
#define FK_UK_VW 8
#define FK_UK_MR 6
#define FK_UK_NV 2
#include "cpu/gemm_kernel_body.h"

#define FK_UK_NAME fk_ukernel_generic
#define FK_UK_TARGET
#define FK_UK_VT fk_v4f
#define FK_UK_VW 4
#define FK_UK_MR 4
#define FK_UK_NV 2
#include "cpu/gemm_kernel_body.h"

int fk_gemm_cpu_isa(void)
{
    static int isa = -1; /* benign race: every thread computes the same value */
    int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
    if (v >= 0)
        return v;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
        v = FK_ISA_AVX512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        v = FK_ISA_AVX2;
    else
        v = FK_ISA_GENERIC;
    __atomic_store_n(&isa, v, __ATOMIC_RELAXED);
    return v;
}

fk_ukernel_fn fk_gemm_ukernel(int isa, int *mr, int *nr)
{
    switch (isa) {
    case FK_ISA_AVX512:
        *mr = 12, *nr = 32;
        return fk_ukernel_avx512;
    case FK_ISA_AVX2:
        *mr = 6, *nr = 16;
        return fk_ukernel_avx2;
    case FK_ISA_GENERIC:
        *mr = 4, *nr = 8;
        return fk_ukernel_generic;
    }
    return NULL;
}
