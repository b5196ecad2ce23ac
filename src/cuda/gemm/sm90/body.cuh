/* body.cuh - the body of the general Hopper GEMM kernel and its kernels: shared
 * memory, barriers, the grouped offsets check, the producer warp and the
 * two consumer warpgroups (which consumer runs is a compile-time choice).
 * The body exists only in the sm_90a pass; other passes get an empty stub
 * (the host never launches it on a device that is not sm_90). */
#ifndef FK_SM90_BODY_CUH
#define FK_SM90_BODY_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include "cuda/gemm/sm90/consumer.cuh"
#include "cuda/gemm/sm90/consumer_pipe.cuh"
#include "cuda/gemm/sm90/consumer_2w.cuh"

/* The general kernel's body; CL = CTAs per cluster (1 or 2). GR: the
 * grouped GEMM (gemm/sm90/grouped_host.cu): every CTA first checks the device offsets
 * and builds the group table of gemm/sm90/sched.cuh; with invalid offsets every CTA
 * leaves before loading or storing anything. */
template <int BN, int PROMO, bool BLOCK, int AB, int CL, int TS, bool GR = false, int WV = 1, bool ST = false,
          int NS = 1, bool MCA = false>
static __device__ __forceinline__ void fk_sm90_body(const CUtensorMap &ta, const CUtensorMap &tb,
                                                    const fk_gemm_params &p)
{
#ifdef FK_SM90_DEVICE
    constexpr int SCT = FK_SC_OF(ST, GR); /* the scale tables' shape (shape.cuh) */
    typedef fk_sm90_shape<BN, (TS != 0), WV, SCT, NS> S;
    static_assert(!ST || (BLOCK && PROMO == 4 && BN <= 128), "staged scales: the pipelined or two-wave consumer");
    static_assert(!MCA || (WV == 2 && CL == 2), "A multicast: two-wave tiles in clusters of 2 along N");
    static_assert(WV == 1 || (BLOCK && PROMO == 4 && TS == 0 && !GR), "two-wave tiles: block scales, general epilogue");
    static_assert(NS != 3 || (PROMO == 4 && CL == 1), "the paired gated tile: the pipelined consumer, single CTAs");
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    const uint32_t base = (fk_smem_addr(fk_smem) + 1023u) & ~1023u;
    const uint32_t sa0 = base;
    const uint32_t sb0 = sa0 + S::STAGES * S::A_BYTES;
    const uint32_t out0 = sb0 + S::STAGES * S::B_BYTES;
    /* ST: the stages' scale tables, 128-byte aligned (S::FIXED has the room) */
    const uint32_t sc0 = ST ? (out0 + S::EPI_BYTES + 127u) & ~127u : out0 + S::EPI_BYTES;
    const uint32_t full0 = sc0 + S::STAGES * S::SC_BYTES;
    const uint32_t empty0 = full0 + 8 * S::STAGES;
    if (threadIdx.x == 0) {
        fk_grid_dep_launch(); /* the next grid may take SMs as ours leave */
        for (int s = 0; s < S::STAGES; s++) {
            fk_mbar_init(full0 + 8 * s, 1);
            fk_mbar_init(empty0 + 8 * s, 8 * CL); /* one arrival per consumer warp of the cluster */
        }
        fk_fence_mbar_init();
    }
    /* with clusters, no peer may multicast into this CTA or arrive on its
     * barriers before they are initialised */
    if (CL > 1)
        fk_cluster_barrier();
    else
        __syncthreads();
    /* launched with programmatic dependent launch (gemm/sm90/dense_host.cu): no global
     * memory access before the previous grid's writes are visible */
    fk_grid_dep_wait();
    if constexpr (GR) {
        static_assert(CL == 1 && (!TS || ST), "grouped: single CTAs; the TMA-store epilogue with staged scales");
        const bool ok = fk_grp_prepare<NS == 2 ? 64 : FK_GEMM_BM>(p.grp_offs, p.grp_count, p.m, p.grp_masked_m, (int *)(fk_smem + p.grp_tab));
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.grp_status)
            *p.grp_status = ok ? 0 : (int)FP8KIT_ERR_INVALID_ARGUMENT;
        if (!ok)
            return;
    }
    /* (warp-uniform through the shuffle, so the consumers keep their wgmma
     * descriptors in uniform registers) */
    const int wg = __shfl_sync(0xFFFFFFFFu, (int)(threadIdx.x >> 7), 0);
    if (wg == 2) {
        fk_setmaxnreg_dec<40>();
        if (threadIdx.x == 256)
            fk_sm90_producer<BN, S::STAGES, CL, GR, WV, fk_sm90_walk<CL, GR, WV, NS == 2 ? 64 : FK_GEMM_BM * WV, MCA>,
                             SCT, NS, MCA>(&ta, &tb, p, sa0, sb0, full0, empty0, sc0);
    } else {
        fk_setmaxnreg_inc<232>();
        /* TS: both staging areas first, so each stays 1024-aligned for the
         * swizzled TMA stores; then the two tables (NS 2: the exchange buffers only) */
        float *out = (float *)(fk_smem + (out0 - fk_smem_addr(fk_smem)));
        float *stage_out = out + wg * (S::STAGE_OUT_FLOATS + (TS ? 0 : S::TAB_FLOATS));
        float *tab = TS ? out + 2 * S::STAGE_OUT_FLOATS + wg * S::TAB_FLOATS : stage_out + S::STAGE_OUT_FLOATS;
        /* The pipelined consumer only where ptxas keeps the wgmma groups
         * asynchronous (block variants; for the others it serializes them,
         * warning C7514, because of accumulator copies at loop joins), and
         * for the f16 variants up to BN 128 (promotion every 64 of K there).
         * (With its opaque-1 multiply, the fp8 BN 128 tiles without block
         * scales compile without C7514 too, but ran 20-30% slower than BN
         * 192 at 4096-class shapes on H100, 2026-11-22, so they stay here.)
         * Block tiles wider than 128 take the plain consumer: three sets of
         * BN / 2 accumulators do not fit in the registers. The gated tile
         * (NS 2): the pipelined consumer with promotion, the plain one for
         * fast accumulation; the paired gated tile (NS 3) the pipelined one. */
        if constexpr (WV == 2)
            fk_sm90_consumer_2w<BN, AB, CL, ST, MCA>(p, wg, sa0, sb0, full0, empty0, stage_out, tab, sc0);
        else if constexpr ((NS >= 2 && PROMO == 4) || (NS == 1 && PROMO == 4 && (BLOCK || AB == 4) && BN <= 128))
            fk_sm90_consumer_pipe<BN, BLOCK, AB, CL, TS, GR, ST, NS>(p, wg, sa0, sb0, full0, empty0, stage_out, tab,
                                                                     sc0);
        else
            fk_sm90_consumer<BN, PROMO, BLOCK, AB, CL, TS, GR, NS>(p, wg, sa0, sb0, full0, empty0, stage_out, tab);
        /* the last bulk copies / TMA stores must be done before the CTA's
         * memory goes (threads that issued none return at once) */
        if (p.d_bulk)
            fk_bulk_wait<0>();
    }
    /* no CTA leaves while a peer may still arrive on its empty barriers */
    if (CL > 1) {
        __syncwarp();
        fk_cluster_barrier();
    }
#endif
}

template <int BN, int PROMO, bool BLOCK, int AB, int TS = 0, bool GR = false>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                        const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, PROMO, BLOCK, AB, 1, TS, GR>(ta, tb, p);
}

/* The same in clusters of 2 CTAs along M (B tiles multicast). */
template <int BN, int PROMO, bool BLOCK, int AB>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_c2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, PROMO, BLOCK, AB, 2, false>(ta, tb, p);
}

/* Block-scaled tiles with staged scales (FK_SM90_SCALE_STAGED), single CTAs (GR: the grouped
 * GEMM; TS: the dense TMA-store epilogue kinds) and clusters of 2 along M. */
template <int BN, int AB, bool GR = false, int TS = 0>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_st(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 1, TS, GR, 1, true>(ta, tb, p);
}
template <int BN, int AB>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_stc2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                             const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 2, 0, false, 1, true>(ta, tb, p);
}

/* Two-wave (256-row) block-scaled tiles, single CTAs and clusters of 2 along M; with staged
 * scales (ST), single CTAs and clusters of 2 along N (MCA: A multicast, the pair's tiles share A's rows). */
template <int BN, int AB, bool ST = false>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_w2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 1, 0, false, 2, ST>(ta, tb, p);
}
template <int BN, int AB, bool ST = false, bool MCA = false>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_w2c2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                             const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 2, 0, false, 2, ST, 1, MCA>(ta, tb, p);
}
#endif
