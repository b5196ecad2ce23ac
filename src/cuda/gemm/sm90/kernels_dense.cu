/* kernels_dense.cu - the compiled variants of the dense Hopper GEMM kernels (the
 * sm90 family, gemm/sm90/dense.cu, picks one): the general kernel (tile
 * width, promotion, block scales, fp8 types, clusters, TMA-store epilogue,
 * two-wave tiles; body.cuh) and the MX kernel (body_rc.cuh).
 *
 * Persistent and warp-specialized: 384 threads per CTA, one CTA per SM.
 * Warpgroup 2 is the producer (pipeline.cuh): one thread walks the tile
 * sequence (walk.cuh) and issues TMA loads (128-byte swizzle) of the A
 * (128 x 128) and B (BN x 128) K-major tiles of every K block into a ring
 * of shared-memory stages (shape.cuh), guarded by full/empty mbarriers.
 * Warpgroups 0 and 1 are consumers: each owns 64 rows of the 128-row tile,
 * issues wgmma m64nBNk32 over a stage and promotes the wgmma accumulators
 * into an fp32 set every 128 of K (consumer*.cuh; block and MX scales
 * multiply in there), then runs the fused epilogue of the tile
 * (epilogue.cuh, store_*.cuh) while the producer loads the next tile. */
#include "cuda/gemm/sm90/body.cuh"
#include "cuda/gemm/sm90/body_rc.cuh"

/* BLOCK: block scales in the main loop (the kernels' template flag) */
#define FK_SC(BLOCK) ((BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN)

#define FK_V(BN, PROMO, BLOCK, AB)                                                      \
    {BN, PROMO, FK_SC(BLOCK), AB, fk_sm90_shape<BN>::STAGES, fk_sm90_shape<BN>::SMEM,         \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB>, 1, 0}

#define FK_VTS(BN, PROMO, BLOCK, AB)                                                    \
    {BN, PROMO, FK_SC(BLOCK), AB, fk_sm90_shape<BN, true>::STAGES, fk_sm90_shape<BN, true>::SMEM, \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB, 1>, 1, 1}

#define FK_VTS2(BN, PROMO)                                                              \
    {BN, PROMO, FK_SM90_SCALE_PLAIN, FK_SM90_E4M3_E4M3, fk_sm90_shape<BN, true>::STAGES,                      \
     fk_sm90_shape<BN, true>::SMEM,                                                                              \
     fk_gemm_sm90_kernel<BN, PROMO, false, FK_SM90_E4M3_E4M3, 2>, 1, 2}

#define FK_VC2(BN, PROMO, BLOCK, AB)                                                    \
    {BN, PROMO, FK_SC(BLOCK), AB, fk_sm90_shape<BN>::STAGES, fk_sm90_shape<BN>::SMEM,         \
     fk_gemm_sm90_kernel_c2<BN, PROMO, BLOCK, AB>, 2, 0}

#define FK_VST(BN, AB, KERNEL, CLUSTER)                                                           \
    {BN, 4, FK_SM90_SCALE_STAGED, AB, fk_sm90_shape<BN, false, 1, FK_SC_ALIGNED>::STAGES,          \
     fk_sm90_shape<BN, false, 1, FK_SC_ALIGNED>::SMEM, KERNEL<BN, AB>, CLUSTER, 0}

#define FK_VSTTS(BN, AB, TS)                                                                     \
    {BN, 4, FK_SM90_SCALE_STAGED, AB, fk_sm90_shape<BN, true, 1, FK_SC_ALIGNED>::STAGES,            \
     fk_sm90_shape<BN, true, 1, FK_SC_ALIGNED>::SMEM, fk_gemm_sm90_kernel_st<BN, AB, false, TS>, 1, TS}

#define FK_VMX(BN, AB)                                                                   \
    {BN, 1, FK_SM90_SCALE_MX, AB, fk_sm90_mx_shape<BN>::STAGES, fk_sm90_mx_shape<BN>::SMEM,                       \
     fk_gemm_sm90_mx_kernel<BN, AB>, 1, 0}

/* The variants the planner may pick (gemm/sm90/dense_host.cu). Precise accumulation promotes
 * every 128 of K (PROMO 4); PROMO 1 and 2 exist to measure the accuracy of
 * shorter intervals. */
const fk_sm90_variant fk_sm90_variants[] = {
    FK_V(128, 4, false, FK_SM90_E4M3_E4M3), FK_V(128, 4, false, FK_SM90_E4M3_E5M2),
    FK_V(128, 4, false, FK_SM90_E5M2_E4M3), FK_V(128, 4, false, FK_SM90_E5M2_E5M2),
    FK_V(64, 4, false, FK_SM90_E4M3_E4M3), FK_V(128, 0, false, FK_SM90_E4M3_E4M3),
    FK_V(64, 0, false, FK_SM90_E4M3_E4M3), FK_V(128, 4, true, FK_SM90_E4M3_E4M3),
    FK_V(64, 4, true, FK_SM90_E4M3_E4M3), FK_V(128, 2, false, FK_SM90_E4M3_E4M3),
    FK_V(128, 1, false, FK_SM90_E4M3_E4M3), FK_V(192, 4, false, FK_SM90_E4M3_E4M3),
    FK_V(192, 0, false, FK_SM90_E4M3_E4M3), FK_V(256, 0, false, FK_SM90_E4M3_E4M3),
    /* block scaling with e5m2 on either side (128 wide only: the planner
     * falls back from 64 to 128 for these) */
    FK_V(128, 4, true, FK_SM90_E4M3_E5M2), FK_V(128, 4, true, FK_SM90_E5M2_E4M3),
    FK_V(128, 4, true, FK_SM90_E5M2_E5M2),
    /* block scaling, 192 wide (two B scale blocks per tile; the plain consumer) */
    FK_V(192, 4, true, FK_SM90_E4M3_E4M3),
    /* MX: promotion after every k32 step (promo 1) */
    FK_VMX(128, FK_SM90_E4M3_E4M3), FK_VMX(128, FK_SM90_E4M3_E5M2), FK_VMX(128, FK_SM90_E5M2_E4M3),
    FK_VMX(128, FK_SM90_E5M2_E5M2),
    FK_VMX(64, FK_SM90_E4M3_E4M3),          FK_VMX(192, FK_SM90_E4M3_E4M3),
    /* clusters of 2 along M with B multicast (tuning gemm_cluster=2, or autotune): the wide tiles of
     * large shapes. H100, 2026-11-22: within +-2% of the single-CTA kernel at large shapes (L2 is
     * not the limit there), 15-18% slower at 4096-class shapes (no TMA-store epilogue, no
     * stream-K, each stage waits for the slower CTA of the pair), so the heuristic does not pick
     * them. */
    FK_VC2(192, 4, false, FK_SM90_E4M3_E4M3), FK_VC2(256, 0, false, FK_SM90_E4M3_E4M3),
    /* block scaling in clusters of 2 (B multicast halves B's L2 reads per CTA) */
    FK_VC2(128, 4, true, FK_SM90_E4M3_E4M3), FK_VC2(192, 4, true, FK_SM90_E4M3_E4M3),
    /* block scaling with staged scales (MN-major A scales, B's scale rows in 16-byte groups): both
     * arrive with each stage, the pipelined consumer reads no global memory */
    FK_VST(128, FK_SM90_E4M3_E4M3, fk_gemm_sm90_kernel_st, 1), FK_VST(128, FK_SM90_E4M3_E5M2, fk_gemm_sm90_kernel_st, 1),
    FK_VST(128, FK_SM90_E5M2_E4M3, fk_gemm_sm90_kernel_st, 1), FK_VST(128, FK_SM90_E5M2_E5M2, fk_gemm_sm90_kernel_st, 1),
    FK_VST(64, FK_SM90_E4M3_E4M3, fk_gemm_sm90_kernel_st, 1), FK_VST(128, FK_SM90_E4M3_E4M3, fk_gemm_sm90_kernel_stc2, 2),
    /* the same with the TMA-store epilogue (one TMA store per warp and 32 columns instead of a bulk copy
     * per row; one stage more), plain (1) and with a column bias and / or an activation (2) */
    FK_VSTTS(128, FK_SM90_E4M3_E4M3, 1), FK_VSTTS(128, FK_SM90_E4M3_E4M3, 2),
    /* and with block scales read from global memory (plain A scale layout; the staged ones' twins) */
    FK_VTS(128, 4, true, FK_SM90_E4M3_E4M3),
    {128, 4, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, fk_sm90_shape<128, true>::STAGES, fk_sm90_shape<128, true>::SMEM,
     fk_gemm_sm90_kernel<128, 4, true, FK_SM90_E4M3_E4M3, 2>, 1, 2},
    /* block scaling on 256-row tiles (two waves; tuning gemm_bm=256), alone and in clusters of 2 */
    {128, 4, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, fk_sm90_shape<128, false, 2>::STAGES,
     fk_sm90_shape<128, false, 2>::SMEM, fk_gemm_sm90_kernel_w2<128, FK_SM90_E4M3_E4M3>, 1, 0, 2},
    {128, 4, FK_SM90_SCALE_BLOCK, FK_SM90_E4M3_E4M3, fk_sm90_shape<128, false, 2>::STAGES,
     fk_sm90_shape<128, false, 2>::SMEM, fk_gemm_sm90_kernel_w2c2<128, FK_SM90_E4M3_E4M3>, 2, 0, 2},
    /* the same with staged scales: single CTAs, and clusters of 2 along N sharing A (multicast) */
    {128, 4, FK_SM90_SCALE_STAGED, FK_SM90_E4M3_E4M3, fk_sm90_shape<128, false, 2, FK_SC_ALIGNED>::STAGES,
     fk_sm90_shape<128, false, 2, FK_SC_ALIGNED>::SMEM, fk_gemm_sm90_kernel_w2<128, FK_SM90_E4M3_E4M3, true>, 1, 0, 2},
    {128, 4, FK_SM90_SCALE_STAGED, FK_SM90_E4M3_E4M3, fk_sm90_shape<128, false, 2, FK_SC_ALIGNED>::STAGES,
     fk_sm90_shape<128, false, 2, FK_SC_ALIGNED>::SMEM, fk_gemm_sm90_kernel_w2c2<128, FK_SM90_E4M3_E4M3, true, true>, 2, 0, 2, 0,
     1},
    /* TMA-store epilogue (plain epilogues): a smaller epilogue area, one stage more */
    FK_VTS(256, 0, false, FK_SM90_E4M3_E4M3), FK_VTS(192, 4, false, FK_SM90_E4M3_E4M3),
    FK_VTS(192, 0, false, FK_SM90_E4M3_E4M3), FK_VTS(128, 4, false, FK_SM90_E4M3_E4M3),
    FK_VTS(128, 0, false, FK_SM90_E4M3_E4M3),
    /* the same with a column bias and / or an activation in the TMA-store epilogue (tma_store 2) */
    FK_VTS2(256, 0), FK_VTS2(192, 4), FK_VTS2(192, 0), FK_VTS2(128, 4), FK_VTS2(128, 0),
    /* precise fp32 output on fp16 copies of A and B (FK_SM90_F16, gemm/sm90/f16_widen.cu): promotion every 64 of K
     * (4 k16 steps); promo 0 only measures the f16 tensor cores' own accumulation */
    FK_V(128, 4, false, FK_SM90_F16), FK_V(64, 4, false, FK_SM90_F16), FK_V(192, 4, false, FK_SM90_F16),
    FK_V(128, 0, false, FK_SM90_F16),
};
const int fk_sm90_variant_count = (int)(sizeof fk_sm90_variants / sizeof fk_sm90_variants[0]);
