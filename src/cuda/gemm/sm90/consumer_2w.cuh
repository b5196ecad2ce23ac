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
 * covering this one's promotion. Scales are read one K block ahead. */
template <int BN, int AB, int CL>
static __device__ __forceinline__ void fk_sm90_consumer_2w(const fk_gemm_params &p, int wg, uint32_t sa0,
                                                           uint32_t sb0, uint32_t full0, uint32_t empty0,
                                                           float *stage_out, float *tab)
{
    typedef fk_sm90_shape<BN, false, 2> S;
    static_assert(BN <= 128, "one B scale block per tile");
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    float acc[S::NACC], accf0[S::NACC], accf1[S::NACC];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0;
    /* the descriptors of stage 0's tiles: this warpgroup's 64 rows of wave 0's A, B */
    const uint64_t da0 = fk_wgmma_desc_sw128(sa0 + wg * 64 * FK_GEMM_BK), db0 = fk_wgmma_desc_sw128(sb0);
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, false, 2> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int nkb = w.kb1 - w.kb0;
#pragma unroll
        for (int i = 0; i < S::NACC; i++) {
            accf0[i] = 0.0f;
            accf1[i] = 0.0f;
        }
        /* A scales of rows r, r + 8 of each wave (clamped: rows past M are never stored) */
        const int r = w.row0 + wg * 64 + warp * 16 + (lane >> 2);
        const float *sa[4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            sa[j] = p.sa + (long long)min(r + (j >> 1) * FK_GEMM_BM + (j & 1) * 8, p.m - 1) * p.sa_sm;
        const float *sb_t = p.sb + (long long)((tn * BN) >> 7) * p.sb_ld;
        float va[4], vb = 0.0f;
        if (nkb > 0) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                va[j] = sa[j][0];
            vb = sb_t[0];
        }
        for (int kb = 0; kb < nkb; kb++) {
            float s[4];
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
            fk_mbar_wait(full0 + 8 * stage, phase);
            const uint64_t da = fk_sm90_desc_at(da0, stage * S::A_BYTES), db = fk_sm90_desc_at(db0, stage * S::B_BYTES);
            fk_sm90_issue<BN, AB>(acc, da, db);
            fk_wgmma_wait<0>();
            fk_sm90_promote<true>(accf0, acc, s[0], s[1]);
            fk_sm90_issue<BN, AB>(acc, fk_sm90_desc_at(da, FK_GEMM_BM * FK_GEMM_BK), db);
            fk_wgmma_wait<0>();
            if (lane == 0)
                fk_sm90_release<CL>(empty0 + 8 * stage);
            fk_sm90_promote<true>(accf1, acc, s[2], s[3]);
            fk_sm90_lag_step(p, wg, ++issued);
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        }
        fk_epi_pre pre = fk_sm90_epi_start<BN, 0>(p, tab, w.row0 + wg * 64, tn * BN, tid, w.m_end, 0);
        fk_sm90_epilogue<BN, 0>(p, accf0, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        pre = fk_sm90_epi_start<BN, 0>(p, tab, w.row0 + FK_GEMM_BM + wg * 64, tn * BN, tid, w.m_end, 0);
        fk_sm90_epilogue<BN, 0>(p, accf1, stage_out, tab, pre, w.row0 + FK_GEMM_BM + wg * 64, tn * BN, tid, 1 + wg);
    }
    fk_sm90_lag_end(p, wg, issued);
}
#endif /* FK_SM90_DEVICE */
#endif
