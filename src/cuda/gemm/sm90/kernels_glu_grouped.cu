/* kernels_glu_grouped.cu - the compiled variants of the grouped gated (swiglu) Hopper GEMM
 * (the sm90_glu_grouped family, gemm/sm90/glu_grouped_host.cu): the mixture-of-experts
 * gate / up projection, D (T x N/2) = silu(y[:, j]) * y[:, N/2 + j] with y = A B_g^T of
 * each row's expert g, scaled, biased, fused in one kernel.
 *
 * The gated tile of kernels_glu.cu (64 rows of D by 128 of its columns; both consumer
 * warpgroups on the tile's 64 rows of A, each with its own gate and up rows of B) on the
 * grouped walk (walk.cuh, GR): the tile rows of all experts form one sequence, 64 rows
 * each, and a tile's rows past its expert's end are loaded but never stored. */
#include "cuda/gemm/sm90/body.cuh"

#define FK_GLUG_BN 128

template <int AB, bool BLOCK, int PROMO, int NS = 2>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_glu_grouped_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                                    const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<FK_GLUG_BN, PROMO, BLOCK, AB, 1, 0, true, 1, false, NS>(ta, tb, p);
}

typedef fk_sm90_shape<FK_GLUG_BN, false, 1, FK_SC_NONE, 2> fk_glug_shape;
typedef fk_sm90_shape<FK_GLUG_BN, false, 1, FK_SC_NONE, 3> fk_glug_pair_shape;

#define FK_VGG(AB, BLOCK, PROMO)                                                                                  \
    {FK_GLUG_BN, PROMO, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_glug_shape::STAGES,            \
     fk_glug_shape::SMEM, fk_gemm_sm90_glu_grouped_kernel<AB, BLOCK, PROMO>, 1, 0, 0, 64}
/* the paired tile (shape.cuh NS 3: 128 rows by 2 x 64 of D's columns; promotion every 128 of K) */
#define FK_VGGP(AB, BLOCK)                                                                                        \
    {FK_GLUG_BN, 4, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_glug_pair_shape::STAGES,           \
     fk_glug_pair_shape::SMEM, fk_gemm_sm90_glu_grouped_kernel<AB, BLOCK, 4, 3>, 1, 0, 0, 128}

/* per fp8 pair: tensor / row scales (plain) with promotion every 128 of K (4) or fast
 * accumulation (0), and block scales (1x128 x 128x128, global-load) */
#define FK_VGG3(AB) FK_VGG(AB, false, 4), FK_VGG(AB, false, 0), FK_VGG(AB, true, 4)
const fk_sm90_variant fk_sm90_glu_grouped_variants[] = {
    FK_VGG3(FK_SM90_E4M3_E4M3), FK_VGG3(FK_SM90_E4M3_E5M2), FK_VGG3(FK_SM90_E5M2_E4M3), FK_VGG3(FK_SM90_E5M2_E5M2),
    FK_VGGP(FK_SM90_E4M3_E4M3, false), FK_VGGP(FK_SM90_E4M3_E4M3, true), FK_VGGP(FK_SM90_E4M3_E5M2, false),
    FK_VGGP(FK_SM90_E4M3_E5M2, true), FK_VGGP(FK_SM90_E5M2_E4M3, false), FK_VGGP(FK_SM90_E5M2_E4M3, true),
    FK_VGGP(FK_SM90_E5M2_E5M2, false), FK_VGGP(FK_SM90_E5M2_E5M2, true),
};
const int fk_sm90_glu_grouped_variant_count =
    (int)(sizeof fk_sm90_glu_grouped_variants / sizeof fk_sm90_glu_grouped_variants[0]);
