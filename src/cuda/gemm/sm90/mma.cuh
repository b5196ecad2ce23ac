/* mma.cuh - one stage of wgmma and its fp32 promotion, shared by the Hopper GEMM
 * consumers: the four k32 steps of a stage as one group, and accf += acc
 * with or without a row scale. */
#ifndef FK_SM90_MMA_CUH
#define FK_SM90_MMA_CUH

#include "cuda/gemm/sm90/shape.cuh"

#ifdef FK_SM90_DEVICE
/* The descriptor of the tile off bytes (a multiple of 16) past the one d
 * describes: only the start address field, in the low bits, changes (shared
 * memory addresses stay below 2^18, so the add cannot carry out of it). One
 * 64-bit add on a descriptor the consumer computed once, instead of building
 * each from an address: ptxas emits it as one uniform 64-bit add, where
 * adding to the low word alone made it rewrite the constant high word
 * before every wgmma. */
static __device__ __forceinline__ uint64_t fk_sm90_desc_at(uint64_t d, uint32_t off)
{
    return d + (uint64_t)(off >> 4);
}

/* Issues the 4 k32 wgmma steps of one stage into acc (overwriting it) and
 * commits them as one group; da / db: the descriptors of the stage's A and
 * B tiles (fk_wgmma_desc_sw128). */
template <int BN, int AB, int NACC>
static __device__ __forceinline__ void fk_sm90_issue(float (&acc)[NACC], uint64_t da, uint64_t db)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    fk_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < FK_GEMM_BK / 32; ks++)
        fk_wgmma<BN, AB>::mma(acc, fk_sm90_desc_at(da, ks * 32), fk_sm90_desc_at(db, ks * 32), ks > 0);
    fk_wgmma_commit();
}

/* accf += acc times block scales that change at accumulator SPLIT (a tile
 * spanning two 128-column scale blocks of B, consumer.cuh; the gated tile's
 * [gate | up] halves, consumer_pipe.cuh): accumulators below SPLIT (columns
 * below 2 SPLIT) take the first scales (lo / hi: rows r0 / r0 + 8), the
 * others the second. */
template <int SPLIT, int NACC>
static __device__ __forceinline__ void fk_sm90_promote2(float (&accf)[NACC], const float (&acc)[NACC], float lo,
                                                        float hi, float lo2, float hi2)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        accf[i] = fmaf(acc[i], i < SPLIT ? ((i & 2) ? hi : lo) : ((i & 2) ? hi2 : lo2), accf[i]);
}

/* accf += acc (times the block scales of rows r0 / r0 + 8 when BLOCK; from
 * accumulator SPLIT on, s_lo2 / s_hi2: fk_sm90_promote2). */
template <bool BLOCK, int NACC, int SPLIT = NACC>
static __device__ __forceinline__ void fk_sm90_promote(float (&accf)[NACC], float (&acc)[NACC], float s_lo,
                                                       float s_hi, float s_lo2 = 0.0f, float s_hi2 = 0.0f)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    if (BLOCK) {
        /* fmaf: one rounding and one instruction (the build has
         * --fmad=false; a separate multiply and add made block-scaled
         * GEMMs 8-13% slower, H100, 2026-11-25: 8192^3 1202 vs 1090 us) */
        fk_sm90_promote2<SPLIT>(accf, acc, s_lo, s_hi, s_lo2, s_hi2);
    } else {
#pragma unroll
        for (int i = 0; i < NACC; i++)
            accf[i] = accf[i] + acc[i];
    }
}
#endif /* FK_SM90_DEVICE */
#endif
