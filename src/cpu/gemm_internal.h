/* gemm_internal.h - private interface between the three files of the CPU
 * scaled GEMM: cpu_gemm.c (plan, fp8 decode + panel packing, tiling, OpenMP
 * driver), gemm_kernel.c (fp32 register-blocked microkernels, one per ISA,
 * chosen at run time) and cpu_epilogue.c (scales, beta*C, bias, activation,
 * output cast and fused output quantization of finished accumulator rows). */
#ifndef FK_CPU_GEMM_INTERNAL_H
#define FK_CPU_GEMM_INTERNAL_H

#include <stdint.h>
#include "cpu/cpu.h"

/* Microkernel ISAs, best last. */
enum { FK_ISA_GENERIC = 0, FK_ISA_AVX2 = 1, FK_ISA_AVX512 = 2 };

/* The 64-byte plan config of the CPU GEMM (fk_plan.config). */
typedef struct fk_cpu_gemm_cfg {
    uint32_t magic;  /* FK_CPU_GEMM_MAGIC once filled */
    int32_t isa;     /* FK_ISA_* of the microkernel */
    int32_t mr, nr;  /* microkernel tile: rows of A x columns of B */
    int32_t kblk;    /* promotion block: partial sums restart from zero every kblk of K (128; 32 for MX) */
    int32_t kc;      /* K extent of one microkernel call (multiple of kblk) */
    int32_t mc, nc;  /* output tile of one task (mc % mr == 0, nc % nr == 0, nc % 128 == 0) */
    int64_t kch;     /* K extent decoded and packed at once (multiple of 128, or all of K) */
} fk_cpu_gemm_cfg;
#define FK_CPU_GEMM_MAGIC 0x46384D47u

/* Microkernel: for each promotion block [k0, k0 + kblk) of [0, kc) (the last
 * one may be shorter) it computes the fp32 partial product P (mr x nr) of the
 * packed panels a ([k][mr]) and b ([k][nr]) from zero, then
 *   acc[i][j] += P[i][j]                        when as == NULL
 *   acc[i][j] += P[i][j] * (as[i] * bs[j])       otherwise,
 * with as/bs advancing by mr/nr floats per block. acc has row stride ldacc. */
typedef void (*fk_ukernel_fn)(int64_t kc, int64_t kblk, const float *a, const float *b, float *acc, int64_t ldacc,
                              const float *as, const float *bs);

/* Best ISA this CPU runs (cached). */
int fk_gemm_cpu_isa(void);
/* Kernel for an ISA, with its tile; NULL for an unknown ISA. */
fk_ukernel_fn fk_gemm_ukernel(int isa, int *mr, int *nr);

/* Everything the epilogue needs besides the accumulators (built once a call). */
typedef struct fk_gemm_epi {
    const fk_gemm_job *job;
    const double *rowf; /* per m: alpha * row/tensor scale of A (length M) */
    const double *colf; /* per n: row/tensor scale of B, or NULL for 1 */
    const float *bias;  /* bias widened to f32 (length N or M) or NULL */
    int bias_row;       /* bias is per row (m) */
    float *yfull;       /* FP8KIT_ACT_SWIGLU: y of every row, M x N fp32 (row stride N); else NULL */
} fk_gemm_epi;

/* Finishes output rows [m0, m1) x columns [n0, n1) from fp32 accumulators
 * (acc[(m - m0) * ldacc + (n - n0)]), writing D (and the fused output scales).
 * n0 is a multiple of 128 and n1 is n0 + a multiple of 128 or N, so fused
 * quantization groups are whole. dbuf and buf hold n1 - n0 doubles / floats.
 * *amax_bits is max-ed with the |y| bits of these rows (OUTQ_SCALED). */
void fk_gemm_epilogue(const fk_gemm_epi *ep, const float *acc, int64_t ldacc, int64_t m0, int64_t m1, int64_t n0,
                      int64_t n1, double *dbuf, float *buf, uint32_t *amax_bits);

/* FP8KIT_ACT_SWIGLU, first half: the linear part y of rows [m0, m1) x
 * columns [n0, n1) (as fk_gemm_epilogue computes it) into ep->yfull; nothing
 * is written to D (a gate column and its up column lie in different tiles). */
void fk_gemm_epilogue_y(const fk_gemm_epi *ep, const float *acc, int64_t ldacc, int64_t m0, int64_t m1, int64_t n0,
                        int64_t n1, double *dbuf);

/* FP8KIT_ACT_SWIGLU, second half, once every tile's y is in ep->yfull: D's
 * rows [m0, m1) (N/2 columns each) from fk_swiglu of each gate / up pair,
 * then the output stage (cast or fused output quantization). Overwrites the
 * rows' y. *amax_bits as for fk_gemm_epilogue. */
void fk_gemm_swiglu_rows(const fk_gemm_epi *ep, int64_t m0, int64_t m1, uint32_t *amax_bits);

#endif
