/* consumer.cuh - the general consumer of the Hopper GEMM kernel: per stage its wgmma
 * steps, promotion every PROMO k32 steps (none, tensor and row scales;
 * block scales on tiles wider than 128), or fast accumulation over the
 * whole K range; then the epilogue. */
#ifndef FK_SM90_CONSUMER_CUH
#define FK_SM90_CONSUMER_CUH

#include "cuda/gemm/sm90/pipeline.cuh"
#include "cuda/gemm/sm90/streamk.cuh"
#include "cuda/gemm/sm90/mma.cuh"
#include "cuda/gemm/sm90/epilogue_glu.cuh"

#ifdef FK_SM90_DEVICE
/* Consumer warpgroup wg (0 or 1): rows wg * 64 .. wg * 64 + 63 of each tile. */
/* NS = 2: the gated tile with fast accumulation (kernels_glu.cu; as in consumer_pipe.cuh, which
 * takes it with promotion: both warpgroups on the tile's 64 rows of A, each with its own BN rows
 * of B, the gated epilogue). */
template <int BN, int PROMO, bool BLOCK, int AB, int CL, int TS, bool GR = false, int NS = 1>
static __device__ __forceinline__ void fk_sm90_consumer(const fk_gemm_params &p, int wg,
                                                        uint32_t sa0, uint32_t sb0,
                                                        uint32_t full0, uint32_t empty0,
                                                        float *stage_out, float *tab)
{
    typedef fk_sm90_shape<BN, (TS != 0), 1, FK_SC_NONE, NS> S;
    constexpr bool GLU = NS == 2;
    static_assert(!GLU || (PROMO == 0 && !BLOCK && !TS), "the gated tile: fast accumulation");
    constexpr int KSTEPS = FK_GEMM_BK / 32; /* wgmma k32 steps per stage */
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    /* fast accumulation (PROMO 0) needs no second set: the epilogue reads acc */
    float acc[S::NACC], accf[PROMO ? S::NACC : 1];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0; /* stages this warpgroup has issued (for the lag) */
    /* this warpgroup's first-stage descriptors, advanced by fk_sm90_desc_at */
    const uint64_t da0 = fk_wgmma_desc_sw128(sa0 + (GLU ? 0 : wg * 64 * FK_GEMM_BK)),
                   db0 = fk_wgmma_desc_sw128(sb0 + (GLU ? wg * BN * FK_GEMM_BK : 0));
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, GR, 1, GLU ? 64 : FK_GEMM_BM> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int r0 = w.row0 + wg * 64 + warp * 16 + (lane >> 2); /* (grouped: tm is not the tile's row) */
        const fk_epi_pre pre = GLU ? fk_epi_pre{} : fk_sm90_sk_start<BN, TS>(p, w, tab, tn * BN, wg, tid);
        const int nkb = w.kb1 - w.kb0;
        if constexpr (PROMO != 0) {
#pragma unroll
            for (int i = 0; i < S::NACC; i++)
                accf[i] = 0.0f;
        }
        int prev_stage = -1;
        /* Block scales of rows r0 and r0 + 8 (A) and of this tile's
         * columns (B), loaded one K block ahead so their latency hides
         * behind a whole K block of wgmma. Tiles wider than 128 (BN2) span
         * two 128-column scale blocks of B: columns below bnd take the
         * first's scale, the others the second's (clamped to the last block
         * of B: columns past N are never stored). */
        /* (K blocks counted from the item's first, w.kb0) */
        constexpr bool BN2 = BLOCK && BN > 128;
        const float *sa_lo = BLOCK ? w.sa_row(p, r0) : nullptr;
        const float *sa_hi = BLOCK ? w.sa_row(p, r0 + 8) : nullptr;
        const int bj = (tn * BN) >> 7, bnd = 128 - ((tn * BN) & 127);
        const float *sb_t = BLOCK ? p.sb + (GR ? w.g * p.sb_g : 0) + (long long)bj * p.sb_ld + w.kb0 : nullptr;
        const float *sb_t2 = BN2 ? sb_t + (bj + 1 < ((p.n + 127) >> 7) ? p.sb_ld : 0) : nullptr;
        float a_lo = 0.0f, a_hi = 0.0f, b_k = 0.0f, b_k2 = 0.0f;
        if (BLOCK && nkb > 0) {
            a_lo = sa_lo[0];
            a_hi = sa_hi[0];
            b_k = sb_t[0];
            if (BN2)
                b_k2 = sb_t2[0];
        }
        for (int kb = 0; kb < nkb; kb++) {
            float s_lo = 1.0f, s_hi = 1.0f, s_lo2 = 1.0f, s_hi2 = 1.0f;
            if (BLOCK) {
                s_lo = a_lo * b_k;
                s_hi = a_hi * b_k;
                if (BN2) {
                    s_lo2 = a_lo * b_k2;
                    s_hi2 = a_hi * b_k2;
                }
                if (kb + 1 < nkb) {
                    const long long o = (long long)(kb + 1) * p.sa_sk;
                    a_lo = sa_lo[o];
                    a_hi = sa_hi[o];
                    b_k = sb_t[kb + 1];
                    if (BN2)
                        b_k2 = sb_t2[kb + 1];
                }
            }
            fk_mbar_wait(full0 + 8 * stage, phase);
            const uint64_t da = fk_sm90_desc_at(da0, stage * S::A_BYTES),
                           db = fk_sm90_desc_at(db0, stage * S::B_BYTES);
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++) {
                const bool first = PROMO ? (ks % PROMO == 0) : (ks == 0);
                if (first) {
#pragma unroll
                    for (int i = 0; i < S::NACC; i++)
                        fk_reg_fence(acc[i]);
                    fk_wgmma_fence();
                }
                const int sd = PROMO ? (ks % PROMO != 0) : (kb > 0 || ks > 0);
                fk_wgmma<BN, AB>::mma(acc, fk_sm90_desc_at(da, ks * 32), fk_sm90_desc_at(db, ks * 32), sd);
                if (PROMO && (ks + 1) % PROMO == 0) {
                    fk_wgmma_commit();
#pragma unroll
                    for (int i = 0; i < S::NACC; i++)
                        fk_reg_fence(acc[i]);
                    fk_wgmma_wait<0>();
                    /* the stage's last group is done: release it before promoting */
                    if (ks == KSTEPS - 1 && lane == 0)
                        fk_sm90_release<CL>(empty0 + 8 * stage);
                    if constexpr (PROMO != 0) {
                        if (BN2) { /* acc[i] holds column 8 (i / 4) + ...: block 1 from i = bnd / 2 */
                            if (bnd == 128)
                                fk_sm90_promote2<64>(accf, acc, s_lo, s_hi, s_lo2, s_hi2);
                            else
                                fk_sm90_promote2<32>(accf, acc, s_lo, s_hi, s_lo2, s_hi2);
                        } else if (BLOCK) { /* (fmaf: see fk_sm90_promote) */
#pragma unroll
                            for (int i = 0; i < S::NACC; i++)
                                accf[i] = fmaf(acc[i], (i & 2) ? s_hi : s_lo, accf[i]);
                        } else {
#pragma unroll
                            for (int i = 0; i < S::NACC; i++)
                                accf[i] = accf[i] + acc[i];
                        }
                    }
                }
            }
            if (!PROMO) {
                /* Fast accumulation: keep one wgmma group in flight and
                 * release the stage the previous group read. */
                fk_wgmma_commit();
#pragma unroll
                for (int i = 0; i < S::NACC; i++)
                    fk_reg_fence(acc[i]);
                fk_wgmma_wait<1>();
                if (prev_stage >= 0 && lane == 0)
                    fk_sm90_release<CL>(empty0 + 8 * prev_stage);
                prev_stage = stage;
            }
            fk_sm90_lag_step(p, wg, ++issued);
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        }
        if constexpr (!PROMO) {
            fk_wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < S::NACC; i++)
                fk_reg_fence(acc[i]);
            if (prev_stage >= 0 && lane == 0)
                fk_sm90_release<CL>(empty0 + 8 * prev_stage);
            if (nkb == 0) {
#pragma unroll
                for (int i = 0; i < S::NACC; i++)
                    acc[i] = 0.0f;
            }
            if constexpr (GLU)
                fk_glu_epilogue(p, acc, stage_out, w.row0, w.m_end, w.g, tn * BN + wg * (BN / 2), wg, tid,
                                (w.t / w.step) & 1);
            else if (fk_sm90_sk_finish(p, w, acc, wg, tid))
                fk_sm90_epilogue<BN, TS, GR>(p, acc, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        } else {
            if (fk_sm90_sk_finish(p, w, accf, wg, tid))
                fk_sm90_epilogue<BN, TS, GR>(p, accf, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        }
    }
    fk_sm90_lag_end(p, wg, issued);
}
#endif /* FK_SM90_DEVICE */
#endif
