/* body_rc.cuh - the body of the Hopper GEMM kernels with row x column scales per
 * stage (the MX, grouped MX and K-grouped kernels) and those kernels. */
#ifndef FK_SM90_BODY_RC_CUH
#define FK_SM90_BODY_RC_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <type_traits>
#include "cuda/gemm/sm90/mx_scales.cuh"
#include "cuda/gemm/sm90/consumer_rc.cuh"
#include "cuda/gemm/sm90/kg.cuh"

/* The body of the kernels with row x column scales per stage (the MX and
 * K-grouped kernels): the general kernel's shared-memory layout with a scale
 * area per stage after the barriers (shape S), then (KG) the K table; the
 * producer thread, two helper warps that fill each stage's scale area (their
 * lanes arrive on its full barrier too) and the two consumer warpgroups of
 * fk_sm90_consumer_rc. KG: every CTA first checks the device offsets
 * (fk_kg_prepare) and leaves when they are invalid. */
template <int BN, int AB, bool KG, bool GR = false>
static __device__ __forceinline__ void fk_sm90_rc_body(const CUtensorMap &ta, const CUtensorMap &tb,
                                                       const fk_gemm_params &p)
{
#ifdef FK_SM90_DEVICE
    typedef typename std::conditional<KG, fk_sm90_kg_shape<BN>, fk_sm90_mx_shape<BN>>::type S;
    typedef typename S::G G;
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    const uint32_t sbase = fk_smem_addr(fk_smem);
    const uint32_t base = (sbase + 1023u) & ~1023u;
    const uint32_t sa0 = base;
    const uint32_t sb0 = sa0 + S::STAGES * G::A_BYTES;
    const uint32_t out0 = sb0 + S::STAGES * G::B_BYTES;
    const uint32_t full0 = out0 + G::EPI_BYTES;
    const uint32_t empty0 = full0 + 8 * S::STAGES;
    const uint32_t sempty0 = full0 + 2 * 8 * 8; /* the scale areas' empty barriers */
    const uint32_t scs = (full0 + 3 * 8 * 8 + 15u) & ~15u;
    unsigned char *sc0 = fk_smem + (scs - sbase);
    if (threadIdx.x == 0) {
        fk_grid_dep_launch();
        for (int s = 0; s < S::STAGES; s++) {
            fk_mbar_init(full0 + 8 * s, 1 + 64); /* the TMA thread + the two helper warps */
            fk_mbar_init(empty0 + 8 * s, 8);     /* A and B tiles: one arrival per consumer warp */
            fk_mbar_init(sempty0 + 8 * s, KG ? 256 : 8); /* the scale area, after the promotion: every consumer lane (KG) or warp */
        }
        fk_fence_mbar_init();
    }
    __syncthreads();
    fk_grid_dep_wait(); /* as in fk_sm90_body */
    if constexpr (KG) {
        const bool ok = fk_kg_prepare(p.grp_offs, p.grp_count, p.k, (int *)(fk_smem + p.grp_tab));
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.grp_status)
            *p.grp_status = ok ? 0 : (int)FP8KIT_ERR_INVALID_ARGUMENT;
        if (!ok)
            return;
    }
    if constexpr (GR) { /* the grouped MX kernel: the group table from the device offsets, as fk_sm90_body */
        const bool ok = fk_grp_prepare(p.grp_offs, p.grp_count, p.m, p.grp_masked_m, (int *)(fk_smem + p.grp_tab));
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.grp_status)
            *p.grp_status = ok ? 0 : (int)FP8KIT_ERR_INVALID_ARGUMENT;
        if (!ok)
            return;
    }
    const int wg = threadIdx.x >> 7;
    if (wg == 2) {
        fk_setmaxnreg_dec<40>();
        const int pw = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
        if constexpr (KG) {
            if (threadIdx.x == 256)
                fk_sm90_producer<BN, S::STAGES, 1, false, 1, fk_kg_walk>(&ta, &tb, p, sa0, sb0, full0, empty0);
            else if (pw == 1)
                fk_kg_scales<BN, false>(p, sc0, full0, sempty0, lane);
            else if (pw == 2)
                fk_kg_scales<BN, true>(p, sc0, full0, sempty0, lane);
        } else {
            if (threadIdx.x == 256)
                fk_sm90_producer<BN, S::STAGES, 1, GR>(&ta, &tb, p, sa0, sb0, full0, empty0);
            else if (pw == 1)
                fk_sm90_mx_scales<BN, false, GR>(p, sc0, full0, sempty0, lane);
            else if (pw == 2)
                fk_sm90_mx_scales<BN, true, GR>(p, sc0, full0, sempty0, lane);
        }
    } else {
        fk_setmaxnreg_inc<232>();
        float *epi = (float *)(fk_smem + (out0 - sbase)) + wg * (G::STAGE_OUT_FLOATS + G::TAB_FLOATS);
        typedef typename std::conditional<KG, fk_kg_walk, fk_sm90_walk<1, GR>>::type W;
        fk_sm90_consumer_rc<BN, AB, KG, S, W, GR ? 5 : 1>(p, wg, sa0, sb0, sc0, full0, empty0, sempty0, epi,
                                                         epi + G::STAGE_OUT_FLOATS);
        if (p.d_bulk) /* (threads that issued no bulk copy return at once) */
            fk_bulk_wait<0>();
    }
#endif
}

/* The MX kernel (e8m0 per 32 of K on A and B). */
template <int BN, int AB>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_mx_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_rc_body<BN, AB, false>(ta, tb, p);
}

/* The grouped MX kernel (fp8kit_grouped_gemm with MX scales): the MX kernel
 * with the grouped GEMM's tile walk (group table after the shared memory). */
template <int BN, int AB>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_mxg_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                            const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_rc_body<BN, AB, false, true>(ta, tb, p);
}

/* The K-grouped kernel (fp8kit_k_grouped_gemm). */
template <int BN, int AB>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kg_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_rc_body<BN, AB, true>(ta, tb, p);
}
#endif
