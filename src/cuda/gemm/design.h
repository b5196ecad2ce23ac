/* gemm/design.h - the names of the Hopper kernel designs: the promotion policy
 * of a variant's main loop (fk_sm90_scaling) and the operands its tensor
 * cores read (fk_sm90_operands). Plain C without CUDA headers (the planner's
 * cost model, gemm/sm90/choose.c, and its tests use them). */
#ifndef FK_CUDA_GEMM_DESIGN_H
#define FK_CUDA_GEMM_DESIGN_H

#include "fp8kit.h"

/* What a variant's main loop does with scales: the promotion policy of its
 * consumer (none / tensor / row scales are the epilogue's in every variant).
 * The values are stable: autotune cache files hold them. */
typedef enum fk_sm90_scaling {
    FK_SM90_SCALE_PLAIN = 0,  /* no scales in the main loop (consumer.cuh, consumer_pipe.cuh for f16) */
    FK_SM90_SCALE_BLOCK = 1,  /* 1x128 A x 128x128 B, per 128 of K (consumer_pipe / consumer / consumer_2w.cuh) */
    FK_SM90_SCALE_MX = 2,     /* e8m0 per 32 of K on row x column stage tables (body_rc.cuh) */
    FK_SM90_SCALE_ROWCOL = 3, /* 1x128 A x 1x128 B per 128 of K: the K-grouped kernel (kg.cuh) */
    FK_SM90_SCALE_STAGED = 4, /* BLOCK with both scales arriving in each stage's table (MN-major A by
                               * TMA, B by bulk copy): consumer_pipe.cuh reads no global memory */
} fk_sm90_scaling;
/* The operands a variant's tensor cores read: an fp8 pair (the kernels'
 * AB template argument), or fp16 copies of A and B (gemm/sm90/f16_widen.cu:
 * precise fp32 output, k16 steps). Stable values, as above. */
typedef enum fk_sm90_operands {
    FK_SM90_E4M3_E4M3 = 0,
    FK_SM90_E4M3_E5M2 = 1,
    FK_SM90_E5M2_E4M3 = 2,
    FK_SM90_E5M2_E5M2 = 3,
    FK_SM90_F16 = 4,
} fk_sm90_operands;
/* The fp8 pair of a job's A and B types. */
static inline fk_sm90_operands fk_sm90_fp8_pair(fp8kit_dtype a, fp8kit_dtype b)
{
    return (fk_sm90_operands)((a == FP8KIT_E5M2 ? 2 : 0) + (b == FP8KIT_E5M2 ? 1 : 0));
}
static inline const char *fk_sm90_scaling_name(fk_sm90_scaling s)
{
    return s == FK_SM90_SCALE_BLOCK    ? "block"
           : s == FK_SM90_SCALE_MX     ? "mx"
           : s == FK_SM90_SCALE_ROWCOL ? "rowcol"
           : s == FK_SM90_SCALE_STAGED ? "staged"
                                       : "plain";
}
static inline const char *fk_sm90_operands_name(fk_sm90_operands o)
{
    static const char *const n[] = {"e4m3.e4m3", "e4m3.e5m2", "e5m2.e4m3", "e5m2.e5m2", "f16"};
    return (unsigned)o < 5u ? n[o] : "?";
}

#endif
