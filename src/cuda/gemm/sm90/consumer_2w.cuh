/* consumer_2w.cuh - the consumer of the two-wave (256-row) block-scaled tile of the
 * Hopper GEMM kernel. */
#ifndef FK_SM90_CONSUMER_2W_CUH
#define FK_SM90_CONSUMER_2W_CUH

#include "cuda/gemm/sm90/pipeline.cuh"
#include "cuda/gemm/sm90/tile_epilogue.cuh"
#include "cuda/gemm/sm90/mma.cuh"

#ifdef FK_SM90_DEVICE
/* Consumer of the two-wave block-scaled tile (WV = 2: 256 rows x BN, one B
 * tile shared by both waves): warpgroup wg owns rows wg * 64 .. of each
 * 128-row wave. Per K block it runs wave 0's four wgmma into acc, waits,
 * promotes them into accf0 with that wave's block scales, then the same for
 * wave 1 into accf1, and releases the stage: one accumulator set and two
 * promoted sets (3 x BN / 2 registers), the other warpgroup's wgmma
 * covering this one's promotion. Scales are read one K block ahead from
 * global memory, or (ST, staged scales) from the stage's scale table at sc0
 * once its full barrier has completed. MCA: clusters along N (walk.cuh). */
template <int BN, int AB, int CL, bool ST = false, bool MCA = false>
static __device__ __forceinline__ void fk_sm90_consumer_2w(const fk_gemm_params &p, int wg, uint32_t sa0,
                                                           uint32_t sb0, uint32_t full0, uint32_t empty0,
                                                           float *stage_out, float *tab, uint32_t sc0 = 0)
{
    typedef fk_sm90_shape<BN, false, 2, ST ? FK_SC_ALIGNED : FK_SC_NONE> S;
    static_assert(BN <= 128, "one B scale block per tile");
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    const float *sct = (const float *)(fk_smem + (sc0 - fk_smem_addr(fk_smem)));
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    const int rl = wg * 64 + warp * 16 + (lane >> 2); /* ST: this thread's wave-0 row in a table */
    float acc[S::NACC], accf0[S::NACC], accf1[S::NACC];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0;
    /* the descriptors of stage 0's tiles: this warpgroup's 64 rows of wave 0's A, B */
    const uint64_t da0 = fk_wgmma_desc_sw128(sa0 + wg * 64 * FK_GEMM_BK), db0 = fk_wgmma_desc_sw128(sb0);
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, false, 2, 2 * FK_GEMM_BM, MCA> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int nkb = w.kb1 - w.kb0;
        const int sbo = ST ? fk_sm90_sb_base<BN, false>(p, 0, tn) & 3 : 0; /* B's slot of K block 0 */
#pragma unroll
        for (int i = 0; i < S::NACC; i++) {
            accf0[i] = 0.0f;
            accf1[i] = 0.0f;
        }
        /* A scales of rows r, r + 8 of each wave (clamped: rows past M are never stored) */
        const int r = w.row0 + rl;
        const float *sa[4];
        const float *sb_t = nullptr;
        float va[4] = {0.0f, 0.0f, 0.0f, 0.0f}, vb = 0.0f;
        if (!ST) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                sa[j] = p.sa + (long long)min(r + (j >> 1) * FK_GEMM_BM + (j & 1) * 8, p.m - 1) * p.sa_sm;
            sb_t = p.sb + (long long)((tn * BN) >> 7) * p.sb_ld;
            if (nkb > 0) {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    va[j] = sa[j][0];
                vb = sb_t[0];
            }
        }
        auto step = [&](int kb) {
            float s[4];
            if (!ST) {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s[j] = va[j] * vb;
                if (kb + 1 < nkb) {
                    const long long o = (long long)(kb + 1) * p.sa_sk;
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        va[j] = sa[j][o];
                    vb = sb_t[kb + 1];
                }
            }
            fk_mbar_wait(full0 + 8 * stage, phase);
            const uint64_t da = fk_sm90_desc_at(da0, stage * S::A_BYTES), db = fk_sm90_desc_at(db0, stage * S::B_BYTES);
            fk_sm90_issue<BN, AB>(acc, da, db);
            if (ST) { /* the stage's table: A's rows of both waves, B's 4-block group after them (B's read by
                       * lane 0, the lane that releases the stage, and shuffled: compute-sanitizer's racecheck
                       * reported the other lanes' uniform read of it against the next bulk copy, H200, 2026-11-29) */
                const float *t_ = sct + stage * (S::SC_BYTES / 4);
                const float b_ = __shfl_sync(0xFFFFFFFFu, lane == 0 ? t_[S::SC_B + ((sbo + w.kb0 + kb) & 3)] : 0.0f, 0);
#pragma unroll
                for (int j = 0; j < 4; j++)
                    s[j] = t_[rl + (j >> 1) * FK_GEMM_BM + (j & 1) * 8] * b_;
            }
            fk_wgmma_wait<0>();
            fk_sm90_promote<true>(accf0, acc, s[0], s[1]);
            fk_sm90_issue<BN, AB>(acc, fk_sm90_desc_at(da, FK_GEMM_BM * FK_GEMM_BK), db);
            fk_wgmma_wait<0>();
            if (ST) /* every lane's table reads are done (their products are in s) */
                __syncwarp();
            if (lane == 0)
                fk_sm90_release<CL>(empty0 + 8 * stage);
            fk_sm90_promote<true>(accf1, acc, s[2], s[3]);
            fk_sm90_lag_step(p, wg, ++issued);
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        };
        /* eight K blocks per trip, then the rest one by one: the unrolled body lets the compiler
         * move the next block's barrier wait and descriptors above this block's promotion */
        int kb = 0;
        for (; kb + 8 <= nkb; kb += 8) {
#pragma unroll
            for (int j = 0; j < 8; j++)
                step(kb + j);
        }
        for (; kb < nkb; kb++)
            step(kb);
        if (MCA && tn * BN >= p.n) /* a cluster's tile past N: nothing to store */
            continue;
        fk_epi_pre pre = fk_sm90_epi_start<BN, 0>(p, tab, w.row0 + wg * 64, tn * BN, tid, w.m_end, 0);
        fk_sm90_epilogue<BN, 0>(p, accf0, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        pre = fk_sm90_epi_start<BN, 0>(p, tab, w.row0 + FK_GEMM_BM + wg * 64, tn * BN, tid, w.m_end, 0);
        fk_sm90_epilogue<BN, 0>(p, accf1, stage_out, tab, pre, w.row0 + FK_GEMM_BM + wg * 64, tn * BN, tid, 1 + wg);
    }
    fk_sm90_lag_end(p, wg, issued);
}
#endif /* FK_SM90_DEVICE */
#endif
