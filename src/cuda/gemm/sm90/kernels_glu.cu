/* kernels_glu.cu - the compiled variants of the gated (swiglu) dense Hopper GEMM (the
 * sm90_glu family, gemm/sm90/glu_host.cu): D (M x N/2) = silu(y[:, j]) *
 * y[:, N/2 + j] with y = A B^T scaled, biased, fused in one kernel.
 *
 * The general kernel's body (body.cuh) on the gated tile (NS = 2): 64 rows
 * of D by 128 of its columns. Both consumer warpgroups multiply the tile's
 * 64 rows of A; warpgroup w by 128 rows of B, the gate rows of D's columns
 * 64 w .. 64 w + 63 of the tile and their up rows (the producer loads them
 * as four 64-row boxes, pipeline.cuh), so each thread holds every gate value
 * with its up value, and a 1x128 group of D is the two warpgroups' halves
 * (epilogue_glu.cuh). The pipelined consumer (consumer_pipe.cuh) promotes
 * every 128 of K: with block scales each half by its own B scale, else by
 * A's row or tensor scale; fast accumulation takes the plain consumer
 * (consumer.cuh). */
#include "cuda/gemm/sm90/body.cuh"

#define FK_GLU_BN 128

template <int AB, bool BLOCK, int PROMO, int NS = 2>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_glu_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                            const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<FK_GLU_BN, PROMO, BLOCK, AB, 1, 0, false, 1, false, NS>(ta, tb, p);
}

/* The same in clusters of 2 CTAs on adjacent tile rows: the B boxes multicast (pipeline.cuh). */
template <int AB, bool BLOCK, int PROMO>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_glu_kernel_c2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                               const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<FK_GLU_BN, PROMO, BLOCK, AB, 2, 0, false, 1, false, 2>(ta, tb, p);
}

typedef fk_sm90_shape<FK_GLU_BN, false, 1, FK_SC_NONE, 2> fk_glu_shape;
typedef fk_sm90_shape<FK_GLU_BN, false, 1, FK_SC_NONE, 3> fk_glu_pair_shape;

#define FK_VG(AB, BLOCK, PROMO)                                                                                   \
    {FK_GLU_BN, PROMO, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_glu_shape::STAGES,              \
     fk_glu_shape::SMEM, fk_gemm_sm90_glu_kernel<AB, BLOCK, PROMO>, 1, 0, 0, 64}
/* the paired tile (128 rows by 2 x 64 of D's columns; promotion every 128 of K) */
#define FK_VGP(AB, BLOCK)                                                                                         \
    {FK_GLU_BN, 4, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_glu_pair_shape::STAGES,             \
     fk_glu_pair_shape::SMEM, fk_gemm_sm90_glu_kernel<AB, BLOCK, 4, 3>, 1, 0, 0, 128}

/* per fp8 pair: tensor / row scales (plain) with promotion every 128 of K
 * (4) or fast accumulation (0), and block scales; the precise fp32
 * output's fp16 copies (gemm/sm90/f16_widen.cu: promotion every 64 of K) */
#define FK_VG3(AB) FK_VG(AB, false, 4), FK_VG(AB, false, 0), FK_VG(AB, true, 4)
#define FK_VGC(AB, BLOCK, PROMO)                                                                                  \
    {FK_GLU_BN, PROMO, (BLOCK) ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN, AB, fk_glu_shape::STAGES,              \
     fk_glu_shape::SMEM, fk_gemm_sm90_glu_kernel_c2<AB, BLOCK, PROMO>, 2, 0, 0, 64}
const fk_sm90_variant fk_sm90_glu_variants[] = {
    FK_VG3(FK_SM90_E4M3_E4M3), FK_VG3(FK_SM90_E4M3_E5M2), FK_VG3(FK_SM90_E5M2_E4M3), FK_VG3(FK_SM90_E5M2_E5M2),
    FK_VG(FK_SM90_F16, false, 4),
    /* the paired tile, per fp8 pair: tensor / row and block scales */
    FK_VGP(FK_SM90_E4M3_E4M3, false), FK_VGP(FK_SM90_E4M3_E4M3, true), FK_VGP(FK_SM90_E4M3_E5M2, false),
    FK_VGP(FK_SM90_E4M3_E5M2, true), FK_VGP(FK_SM90_E5M2_E4M3, false), FK_VGP(FK_SM90_E5M2_E4M3, true),
    FK_VGP(FK_SM90_E5M2_E5M2, false), FK_VGP(FK_SM90_E5M2_E5M2, true),
    /* e4m3 x e4m3 in clusters of 2 */
    FK_VGC(FK_SM90_E4M3_E4M3, false, 4), FK_VGC(FK_SM90_E4M3_E4M3, false, 0), FK_VGC(FK_SM90_E4M3_E4M3, true, 4),
};
const int fk_sm90_glu_variant_count = (int)(sizeof fk_sm90_glu_variants / sizeof fk_sm90_glu_variants[0]);
