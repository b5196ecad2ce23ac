/* gemm/params.h - what the Hopper GEMM kernels receive besides their tensor
 * maps (fk_gemm_params: shape, scales, the epilogue op, the store path and
 * the schedule), filled on the host (gemm/launch.cu, fk_gemm_job_params, and each
 * family's run) and read by the kernels; and the compiled-variant table
 * entry (fk_sm90_variant). Host and device. */
#ifndef FK_CUDA_GEMM_PARAMS_H
#define FK_CUDA_GEMM_PARAMS_H

#include <cuda.h>
#include <stdint.h>
#include "fp8kit.h"
#include "cuda/gemm/sm90/sched.cuh"
#include "format/fk_hd.h"
#include "cuda/gemm/design.h"

/* Everything a GEMM kernel reads besides the two tensor maps. Scale modes are
 * fp8kit_scale_mode values; dtypes fp8kit_dtype values. */
struct fk_gemm_params {
    int m, n, k;
    int num_kb; /* ceil(k / 128): K blocks of one smem stage */
    fk_tile_sched sched;
    int sa_mode, sb_mode;
    const float *sa, *sb;
    long long sa_sm, sa_sk; /* BLOCK: A scale (m, kb) at sa[m * sa_sm + kb * sa_sk] */
    CUtensorMap tsa;        /* STAGED: A's MN-major scales as (kb, sa_sk) f32, boxes of 128 rows of one K block */
    long long sb_ld;        /* BLOCK: B scale (n / 128, kb) at sb[(n / 128) * sb_ld + kb] */
    long long sb_g;         /* BLOCK, grouped: scale values from one expert's B scales to the next */
    CUtensorMap tsb;        /* STAGED: B's block scales as one f32 vector (every expert's), boxes of 4 */
    float alpha, beta;
    const void *c;          /* NULL unless beta != 0 */
    long long ldc;
    int c_type;
    const void *bias;       /* NULL unless bias_mode != NONE */
    int bias_type, bias_mode;
    int act;
    void *d;
    long long ldd;
    int d_type;
    int out_quant;          /* fp8kit_out_quant */
    const float *scale_d;   /* OUTQ_SCALED */
    unsigned int *amax_bits; /* OUTQ_SCALED, optional: max of |y| as fp32 bits */
    void *scale_d_out;      /* OUTQ_MX: e8m0 M x N/32; OUTQ_BLOCK1X128: f32 M x ceil(N/128) */
    int out_hp;             /* OUTQ_MX / BLOCK1X128: y is rounded to this dtype first */
    int out_rceil;          /* OUTQ_MX: RCEIL scale rounding (else FLOOR) */
    int out_pow2;           /* OUTQ_BLOCK1X128: power-of-two scales */
    int d_bulk;             /* D's store path (gemm/store.h's ids): 0 general, 1 bf16/f16 rows by bulk copies
                             * (fk_epilogue_bulk), 2 TMA stores, 3 fp32 D += by bulk reduce-add copies
                             * (fk_epilogue_reduce) */
    int lag;                /* stages consumer warpgroup 1 runs behind warpgroup 0 (gemm/sm90/kernels_dense.cu) */
    CUtensorMap td;         /* d_bulk 2: D in 16 x 32 boxes, 64-byte swizzle (the TMA-store epilogue) */
    /* dense one-wave tiles (gemm/sm90/pipeline.cuh): the tile starting at A's row a_tail_row0 loads
     * a_tail_rows rows (M's rest rounded up to 8) through ta_tail instead of a 128-row box reaching past
     * M; a_tail_rows 0: none */
    CUtensorMap ta_tail;
    int a_tail_row0, a_tail_rows;
    /* stream-K tail (general kernel, gemm/sm90/kernels_dense.cu): the last sk_tail tiles
     * are split along K into sk_parts parts each (sk_parts 0 or 1: none) */
    int sk_parts, sk_tail;
    float *sk_ws;                 /* the partial sums: sk_tail (sk_parts - 1) slots of 128 x BN fp32 */
    unsigned long long *sk_flags; /* 2 words per slot (one per consumer warpgroup) */
    unsigned long long sk_token;  /* this launch's flag value (gemm/sm90/dense_host.cu, fk_sm90_sk_token) */
    /* MX kernel on the workspace copies (gemm/sm90/dense_host.cu, mx_norm_kernel.cu; NULL otherwise):
     * stage tables [K block][k32 step][mx_rpa / mx_rpb rows] and per (K block,
     * tile band) flags {min, max finite scale byte, one scale per row, 0} */
    const float *mx_ta, *mx_tb;
    const int *mx_fa, *mx_fb;
    int mx_rpa, mx_rpb;
    int mx_bda; /* rows of A's flag bands (128; grouped 32: a tile starts at any row) */
    int mx_rgb; /* B's table rows per expert (grouped: N padded to the tile; else mx_rpb) */
    /* grouped kernels only (gemm/sm90/grouped_host.cu; m = T rows of A and D): */
    const int *grp_offs;    /* G int32 in device memory, read by every CTA: row ends, or (masked) counts */
    int grp_count;          /* G */
    int grp_masked_m;       /* 0: contiguous layout; else rows per expert slab (the masked layout) */
    int grp_brows;          /* rows of B's 2-D map per expert (its expert stride / ldb) */
    int grp_tab;            /* byte offset of the table of gemm/sm90/sched.cuh in dynamic shared memory */
    int *grp_status;        /* optional: 0 (offsets valid) or FP8KIT_ERR_INVALID_ARGUMENT, by CTA 0 */
    /* the K-grouped kernel (gemm/sm90/kg.cuh) reuses grp_offs (K ends), grp_count, grp_tab and grp_status */
    /* (there m is the rows of D viewed as one matrix: (G - 1) kg_drows + kg_m) */
    int kg_drows;           /* rows of D from one group to the next (its group stride / ldd) */
    int kg_m;               /* M: rows of A and of each group's D */
    int glu_up;             /* the gated kernel (gemm/sm90/kernels_glu.cu; there n is D's N / 2 columns): the row of B
                             * where the up rows start, and the column of y that pairs with D's column 0 */
    long long sa_g;         /* BLOCK, grouped masked with mn_major A scales: values from one expert's slab of
                             * A scales to the next (rows then count within the slab); 0: one slab of all rows */
};

/* One compiled kernel variant: tile width, promotion interval (wgmma k32 steps
 * between fp32 promotions; 0 = fast accumulation: promote once per tile),
 * scaling policy, operands, pipeline depth and the kernel itself. */
typedef void (*fk_sm90_kernel_fn)(const CUtensorMap, const CUtensorMap, const fk_gemm_params);
struct fk_sm90_variant {
    int bn, promo;
    fk_sm90_scaling scaling;
    fk_sm90_operands ops;
    int stages;
    int smem_bytes;
    fk_sm90_kernel_fn fn;
    int cluster; /* CTAs per cluster along M sharing each B tile through TMA multicast (1 or 2) */
    int tma_store; /* small epilogue area, one stage more: the TMA-store epilogue for plain epilogues (1) or
                    * with a column bias and / or an activation (2) */
    int waves;     /* 128-row waves per tile (tile height 128 x waves; 0 means 1) */
    int bm;        /* the gated families' rows per tile (64: both warpgroups on the same rows; 128: the
                    * paired tile, gemm/sm90/shape.cuh NS 3); 0 elsewhere */
    int mc_a;      /* 1: the cluster's CTAs lie along N instead and share each A tile through multicast */
};
extern const fk_sm90_variant fk_sm90_variants[];
extern const int fk_sm90_variant_count;
extern const fk_sm90_variant fk_sm90_grouped_variants[]; /* the grouped GEMM's (gemm/sm90/grouped_host.cu) */
extern const int fk_sm90_grouped_variant_count;
extern const fk_sm90_variant fk_sm90_glu_variants[]; /* the gated (swiglu) GEMM's (gemm/sm90/kernels_glu.cu) */
extern const int fk_sm90_glu_variant_count;
extern const fk_sm90_variant fk_sm90_glu_grouped_variants[]; /* the grouped gated GEMM's (gemm/sm90/kernels_glu_grouped.cu) */
extern const int fk_sm90_glu_grouped_variant_count;
extern const fk_sm90_variant fk_sm90_kg_variants[]; /* the K-grouped GEMM's (gemm/sm90/k_grouped_host.cu), one per fp8 pair */
extern const int fk_sm90_kg_variant_count;

#define FK_GEMM_THREADS 384 /* two consumer warpgroups + one producer warpgroup */
#define FK_GEMM_BM 128
#define FK_GEMM_BK 128

#endif
