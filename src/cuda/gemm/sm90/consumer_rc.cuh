/* consumer_rc.cuh - the row x column consumer of the Hopper GEMM kernels: promotion with
 * a row scale of A times a column scale of B from tables next to each stage,
 * once per 128 of K (K-grouped, normalized MX) or per 32 (raw MX). */
#ifndef FK_SM90_CONSUMER_RC_CUH
#define FK_SM90_CONSUMER_RC_CUH

#include "cuda/gemm/sm90/mma.cuh"
#include "cuda/gemm/sm90/pipe_loop.cuh"
#include "cuda/gemm/sm90/tile_epilogue.cuh"
#include "cuda/gemm/sm90/mx_math.cuh"

#ifdef FK_SM90_DEVICE
/* One wgmma k32 step into acc (overwriting it), committed as its own group;
 * da / db: the step's A and B descriptors. */
template <int BN, int AB, int NACC>
static __device__ __forceinline__ void fk_mx_issue(float (&acc)[NACC], uint64_t da, uint64_t db)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    fk_wgmma_fence();
    fk_wgmma<BN, AB>::mma(acc, da, db, 0);
    fk_wgmma_commit();
}

/* accf += acc * (ta[row] * tb[col]) (scale product rounded to fp32, then
 * one fused multiply-add, as the CPU backend): acc / accf are one thread's
 * m64nBN fragment (rows rl / rl + 8 of the tile, columns 8 j + cq + {0, 1}
 * at [4 j + {0, 1}] / [4 j + {2, 3}]); ta / tb are a stage's row and column
 * scale tables in shared memory. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_rc_promote(float (&accf)[NACC], float (&acc)[NACC], const float *ta,
                                                     const float *tb, int rl, int cq)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    const float a_lo = ta[rl], a_hi = ta[rl + 8];
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const float2 b = *(const float2 *)(tb + 8 * j + cq);
        accf[4 * j + 0] = fmaf(acc[4 * j + 0], a_lo * b.x, accf[4 * j + 0]);
        accf[4 * j + 1] = fmaf(acc[4 * j + 1], a_lo * b.y, accf[4 * j + 1]);
        accf[4 * j + 2] = fmaf(acc[4 * j + 2], a_hi * b.x, accf[4 * j + 2]);
        accf[4 * j + 3] = fmaf(acc[4 * j + 3], a_hi * b.y, accf[4 * j + 3]);
    }
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(accf[i]);
}

/* Consumer warpgroup wg of the kernels whose promotion multiplies a row
 * scale by a column scale, both from tables the helper warps put next to
 * each stage: the MX kernel (KG false; tables per k32 step, fk_mx_area) and
 * the K-grouped kernel (KG true, gemm/sm90/kg.cuh; one table pair per stage).
 * One accumulator set and the promoted set: per stage, either its four k32
 * steps as one wgmma group, then one promotion (every K-grouped stage; an MX
 * stage whose rows all have one scale over its 128 of K and no scale
 * product outside fp32's exact range: fk_mx_uniform, as the workspace
 * copies of fk_mx_norm mostly are), or (other MX stages) each k32 step as
 * its own group promoted with its own scales (fk_mx_promote, with its exact
 * path for extreme exponents). A stage's A and B tiles are released when
 * its last wgmma group is done (the producer refills them during the
 * promotion), its scale area after the last promotion, which reads its
 * tables (sempty0: the helper warps wait on those barriers). The two consumer warpgroups keep the
 * tensor cores busy in turn while the other promotes; with p.lag warpgroup
 * 1 runs that many stages behind, so that the warpgroups' epilogues do not
 * coincide (fk_sm90_lag_start). The K-grouped tiles up to 128 wide (PIPE)
 * keep two accumulator sets instead and promote each stage while the next
 * one's wgmma group runs. W: the work walk
 * (fk_sm90_walk, or fk_kg_walk with group g's D at rows g * kg_drows). */
template <int BN, int AB, bool KG, class S, class W, int NQ = 1>
static __device__ __forceinline__ void fk_sm90_consumer_rc(const fk_gemm_params &p, int wg, uint32_t sa0, uint32_t sb0,
                                                           const unsigned char *sc0, uint32_t full0, uint32_t empty0,
                                                           uint32_t sempty0, float *stage_out, float *tab)
{
    typedef typename S::G G;
    constexpr int TB = KG ? FK_GEMM_BM : fk_mx_area<BN>::SA_FLOATS; /* float offset of the column table */
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    const int rl = wg * 64 + warp * 16 + (lane >> 2), cq = 2 * (lane & 3);
    /* the first stage's descriptors of this warpgroup's 64 rows of A and of B, advanced by
     * fk_sm90_desc_at */
    const uint64_t da0 = fk_wgmma_desc_sw128(sa0 + wg * 64 * FK_GEMM_BK), db0 = fk_wgmma_desc_sw128(sb0);
    /* PIPE: the pipelined K-grouped loop (its second accumulator set) */
    constexpr bool PIPE = KG && BN <= 128;
    float acc[G::NACC], accf[G::NACC], acc2[PIPE ? G::NACC : 1];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0; /* stages this warpgroup has finished (for the lag: warpgroup 1 runs p.lag behind) */
    fk_sm90_lag_start(p, wg);
    W w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int d0 = KG ? w.g * p.kg_drows : 0; /* the item's first row of D */
        const int m0 = d0 + w.row0 + wg * 64, n0 = tn * BN;
        int m_end, eg; /* rows past m_end are not stored; eg: the expert of the B scales and bias */
        if constexpr (KG) {
            m_end = d0 + p.kg_m;
            eg = 0;
        } else {
            m_end = w.m_end; /* (p.m, or grouped: the group's end) */
            eg = w.g;
        }
        const fk_epi_pre pre = fk_epi_prefetch<BN>(p, m0, n0, tid, m_end, eg);
#pragma unroll
        for (int i = 0; i < G::NACC; i++)
            accf[i] = 0.0f;
        if constexpr (PIPE) {
            /* the K-grouped tile up to 128 wide: two wgmma accumulator sets, so that each stage's
             * promotion runs while the next stage's wgmma group is on the tensor cores (as
             * consumer_pipe.cuh); the stage's A and B tiles are released once its group is done,
             * its scale area (every lane) after its promotion */
            const int nkb = w.kb1 - w.kb0;
            if (nkb > 0) {
                fk_mbar_wait(full0 + 8 * stage, phase);
                fk_sm90_issue<BN, AB>(acc, fk_sm90_desc_at(da0, stage * G::A_BYTES),
                                      fk_sm90_desc_at(db0, stage * G::B_BYTES));
                int pstage; /* stage of the group in flight */
                FK_PIPE_NEXT(S::STAGES)
#define FK_RC_DONE(OLD)                                                                          \
        {                                                                                            \
            if (lane == 0)                                                                           \
                fk_mbar_arrive(empty0 + 8 * pstage);                                                 \
            const float *area_ = (const float *)(sc0 + pstage * S::SC_BYTES);                        \
            fk_rc_promote<BN>(accf, OLD, area_, area_ + TB, rl, cq);                                 \
            fk_mbar_arrive(sempty0 + 8 * pstage);                                                    \
        }
#define FK_RC_STEP(NEW, OLD)                                                                     \
        {                                                                                            \
            fk_mbar_wait(full0 + 8 * stage, phase);                                                  \
            fk_sm90_issue<BN, AB>(NEW, fk_sm90_desc_at(da0, stage * G::A_BYTES),                     \
                                  fk_sm90_desc_at(db0, stage * G::B_BYTES));                         \
            fk_wgmma_wait<1>();                                                                      \
            FK_RC_DONE(OLD)                                                                          \
            FK_PIPE_NEXT(S::STAGES)                                                                  \
            kb++;                                                                                    \
        }
                FK_PIPE_K(acc, acc2, FK_RC_STEP, FK_RC_DONE, false)
#undef FK_RC_STEP
#undef FK_RC_DONE
            }
        } else
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            fk_mbar_wait(full0 + 8 * stage, phase);
            const float *area = (const float *)(sc0 + stage * S::SC_BYTES);
            const uint64_t da = fk_sm90_desc_at(da0, stage * G::A_BYTES), db = fk_sm90_desc_at(db0, stage * G::B_BYTES);
            bool one = true, slow = false;
            if (!KG) {
                slow = fk_mx_slow<BN, NQ>(area);
                one = fk_mx_uniform<BN, NQ>(area) && !slow;
            }
            /* the stage's A and B tiles are released as soon as its last
             * wgmma group is done, before the promotion; its scale area
             * (read by the promotion) after it */
            if (one) {
                fk_sm90_issue<BN, AB>(acc, da, db);
                fk_wgmma_wait<0>();
                if (lane == 0)
                    fk_mbar_arrive(empty0 + 8 * stage);
                fk_rc_promote<BN>(accf, acc, area, area + TB, rl, cq);
            } else {
#pragma unroll 1
                for (int ks = 0; ks < 4; ks++) {
                    fk_mx_issue<BN, AB>(acc, fk_sm90_desc_at(da, 32 * ks), fk_sm90_desc_at(db, 32 * ks));
                    fk_wgmma_wait<0>();
                    if (ks == 3 && lane == 0)
                        fk_mbar_arrive(empty0 + 8 * stage);
                    fk_mx_promote<BN>(accf, acc, area, slow, ks, rl, cq);
                }
            }
            /* K-grouped: every lane arrives on its own, so that each lane's
             * table reads are ordered before the helper warps' next cp.async
             * writes by its own release. One arrival per warp after
             * __syncwarp orders them too, but compute-sanitizer's racecheck
             * does not follow that link and reports each refill as a WAR
             * hazard. MX keeps the one arrival per warp: racecheck reports
             * nothing there, and all lanes arriving cost the MX kernel 6-8%
             * at 8192^3 (H200, 2026-11-28) */
            if (KG) {
                fk_mbar_arrive(sempty0 + 8 * stage);
            } else {
                __syncwarp();
                if (lane == 0)
                    fk_mbar_arrive(sempty0 + 8 * stage);
            }
            fk_sm90_lag_step(p, wg, ++issued);
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        }
        fk_sm90_epilogue<BN>(p, accf, stage_out, tab, pre, m0, n0, tid, 1 + wg);
    }
    fk_sm90_lag_end(p, wg, issued);
}
#endif /* FK_SM90_DEVICE */
#endif
