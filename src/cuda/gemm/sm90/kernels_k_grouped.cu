/* kernels_k_grouped.cu - the compiled variants of the K-grouped Hopper GEMM kernel
 * (fp8kit_k_grouped_gemm; the sm90_k_grouped family, gemm/sm90/k_grouped_host.cu). */
#include "cuda/gemm/sm90/body_rc.cuh"

#define FK_VKG(BN, AB)                                                                               \
    {BN, 4, FK_SM90_SCALE_ROWCOL, AB, fk_sm90_kg_shape<BN>::STAGES, fk_sm90_kg_shape<BN>::SMEM,                   \
     fk_gemm_sm90_kg_kernel<BN, AB>, 1, 0}

/* The K-grouped kernels (row x column scales per 128 of K), 128 wide for every fp8
 * type pair, 192 wide for e4m3 x e4m3 (the planner's choice when it exists, gemm/sm90/k_grouped_host.cu). */
const fk_sm90_variant fk_sm90_kg_variants[] = {
    FK_VKG(128, FK_SM90_E4M3_E4M3), FK_VKG(128, FK_SM90_E4M3_E5M2), FK_VKG(128, FK_SM90_E5M2_E4M3),
    FK_VKG(128, FK_SM90_E5M2_E5M2), FK_VKG(192, FK_SM90_E4M3_E4M3),
};
const int fk_sm90_kg_variant_count = (int)(sizeof fk_sm90_kg_variants / sizeof fk_sm90_kg_variants[0]);
