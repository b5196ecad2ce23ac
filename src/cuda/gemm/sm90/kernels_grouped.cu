/* kernels_grouped.cu - the compiled variants of the grouped Hopper GEMM kernels
 * (fp8kit_grouped_gemm; the sm90_grouped family, gemm/sm90/grouped.cu):
 * the general kernel with the group walk, and the grouped MX kernel. */
#include "cuda/gemm/sm90/body.cuh"
#include "cuda/gemm/sm90/body_rc.cuh"

/* The grouped GEMM's variants (gemm/sm90/grouped_host.cu): the general kernel with the
 * group mapping (GR); the group table follows the variant's shared memory. */
#define FK_VG(BN, PROMO, BLOCK, AB)                                                     \
    {BN, PROMO, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_sm90_shape<BN>::STAGES,              \
     fk_sm90_shape<BN>::SMEM,                                                                                    \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB, false, true>, 1, 0}
#define FK_VGST(BN, AB)                                                                                       \
    {BN, 4, FK_SM90_SCALE_STAGED, AB, fk_sm90_shape<BN, false, 1, FK_SC_ANY_ROW>::STAGES,                    \
     fk_sm90_shape<BN, false, 1, FK_SC_ANY_ROW>::SMEM, fk_gemm_sm90_kernel_st<BN, AB, true>, 1, 0}
#define FK_VGSTTS(BN, AB, TS)                                                                                 \
    {BN, 4, FK_SM90_SCALE_STAGED, AB, fk_sm90_shape<BN, true, 1, FK_SC_ANY_ROW>::STAGES,                     \
     fk_sm90_shape<BN, true, 1, FK_SC_ANY_ROW>::SMEM, fk_gemm_sm90_kernel_st<BN, AB, true, TS>, 1, TS}
#define FK_VMXG(BN, AB)                                                                  \
    {BN, 1, FK_SM90_SCALE_MX, AB, fk_sm90_mx_shape<BN>::STAGES, fk_sm90_mx_shape<BN>::SMEM,                       \
     fk_gemm_sm90_mxg_kernel<BN, AB>, 1, 0}
const fk_sm90_variant fk_sm90_grouped_variants[] = {
    FK_VG(128, 4, false, FK_SM90_E4M3_E4M3), FK_VG(128, 4, false, FK_SM90_E4M3_E5M2),
    FK_VG(128, 4, false, FK_SM90_E5M2_E4M3), FK_VG(128, 4, false, FK_SM90_E5M2_E5M2),
    FK_VG(128, 0, false, FK_SM90_E4M3_E4M3), FK_VG(192, 4, false, FK_SM90_E4M3_E4M3),
    FK_VG(192, 0, false, FK_SM90_E4M3_E4M3), FK_VG(256, 0, false, FK_SM90_E4M3_E4M3),
    /* block scales (1x128 x 128x128): the dense kernel's block consumer, 128 wide */
    FK_VG(128, 4, true, FK_SM90_E4M3_E4M3), FK_VG(128, 4, true, FK_SM90_E4M3_E5M2),
    FK_VG(128, 4, true, FK_SM90_E5M2_E4M3), FK_VG(128, 4, true, FK_SM90_E5M2_E5M2),
    /* block scales staged with each stage (mn_major A scales; pipeline.cuh) */
    FK_VGST(128, FK_SM90_E4M3_E4M3), FK_VGST(128, FK_SM90_E4M3_E5M2), FK_VGST(128, FK_SM90_E5M2_E4M3),
    FK_VGST(128, FK_SM90_E5M2_E5M2),
    /* the same with the TMA-store epilogue (store_tma.cuh; a warp whose rows run past its group's end
     * stores them itself), plain (1) and with a bias and / or an activation (2) */
    FK_VGSTTS(128, FK_SM90_E4M3_E4M3, 1), FK_VGSTTS(128, FK_SM90_E4M3_E4M3, 2),
    /* MX: the MX kernel's consumers and helper warps (promo 1: every k32 step unless
     * a stage's rows have one scale each) */
    FK_VMXG(128, FK_SM90_E4M3_E4M3), FK_VMXG(128, FK_SM90_E4M3_E5M2), FK_VMXG(128, FK_SM90_E5M2_E4M3),
    FK_VMXG(128, FK_SM90_E5M2_E5M2), FK_VMXG(192, FK_SM90_E4M3_E4M3),
};
const int fk_sm90_grouped_variant_count =
    (int)(sizeof fk_sm90_grouped_variants / sizeof fk_sm90_grouped_variants[0]);
