/* consumer_pipe.cuh - the pipelined consumer of the Hopper GEMM kernel: promotion every
 * 128 of K with two wgmma accumulator sets, so that one stage's promotion
 * overlaps the next stage's wgmma (block scales up to 128 wide, the f16
 * path). */
#ifndef FK_SM90_CONSUMER_PIPE_CUH
#define FK_SM90_CONSUMER_PIPE_CUH

#include "cuda/gemm/sm90/pipeline.cuh"
#include "cuda/gemm/sm90/streamk.cuh"
#include "cuda/gemm/sm90/mma.cuh"
#include "cuda/gemm/sm90/pipe_loop.cuh"
#include "cuda/gemm/sm90/epilogue_glu.cuh"

#ifdef FK_SM90_DEVICE
/* Consumer with promotion every stage (128 of K), pipelined: two wgmma
 * accumulator sets; the group of K block kb runs on the tensor cores while
 * the finished group of kb - 1 is promoted (and its stage released), so the
 * promotion is off the MMA critical path. Block scales are loaded two K
 * blocks ahead of their use from global memory, or with ST (staged scales)
 * read from the stage's scale table at sc0 (pipeline.cuh) when its group
 * is issued: the loop then reads no global memory. NS = 2: the gated tile
 * (kernels_glu.cu): both warpgroups multiply the tile's 64 rows of A, each
 * by its own BN rows of B ([gate | up], pipeline.cuh), with the block scales
 * of its gate and up rows, and end in the gated epilogue (epilogue_glu.cuh).
 * NS = 3: the paired gated tile: each warpgroup its own 64 rows of A (as NS
 * 1) by the stage's [gate | up] rows of B, the work item's two halves of D's
 * columns one after the other, each through the gated epilogue. */
template <int BN, bool BLOCK, int AB, int CL, int TS, bool GR = false, bool ST = false, int NS = 1>
static __device__ __forceinline__ void fk_sm90_consumer_pipe(const fk_gemm_params &p, int wg,
                                                             uint32_t sa0, uint32_t sb0,
                                                             uint32_t full0, uint32_t empty0,
                                                             float *stage_out, float *tab, uint32_t sc0 = 0)
{
    typedef fk_sm90_shape<BN, (TS != 0), 1, FK_SC_OF(ST, GR), NS> S;
    constexpr bool GLU = NS >= 2, PAIR = NS == 3; /* the gated tiles; PAIR: the paired one (shape.cuh) */
    static_assert(!ST || BLOCK, "staged scales are block scales");
    static_assert(!GLU || (!ST && !TS), "the gated tile: global-load block scales");
    /* AROW: the gated tile without block scales promotes with A's row (or
     * tensor) scale, reloaded every K block like a block scale: with a factor
     * that is the same in every K block ptxas serializes the wgmma groups
     * (C7514); the epilogue then leaves A's scale out (epilogue_glu.cuh) */
    constexpr bool AROW = GLU && !BLOCK, SCL = BLOCK || AROW;
    constexpr int SPLIT = GLU ? S::NACC / 2 : S::NACC; /* GLU: the up half's accumulators take v_u */
    /* ST: this thread's A rows in stage 0's table; B's 4-block group after them */
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    const float *sct = (const float *)(fk_smem + (sc0 - fk_smem_addr(fk_smem)));
    const int rl = (NS == 2 ? 0 : wg * 64) + (threadIdx.x & 127) / 32 * 16 + (threadIdx.x & 31) / 4;
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    float acc0[S::NACC], acc1[S::NACC], accf[S::NACC];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0; /* stages this warpgroup has issued (for the lag) */
    /* the descriptors of stage 0's tiles: this warpgroup's 64 rows of A, B (NS 2: both
     * warpgroups' A, each its own BN rows of B) */
    const uint64_t da0 = fk_wgmma_desc_sw128(sa0 + (NS == 2 ? 0 : wg * 64 * FK_GEMM_BK)),
                   db0 = fk_wgmma_desc_sw128(sb0 + (NS == 2 ? wg * BN * FK_GEMM_BK : 0));
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, GR, 1, NS == 2 ? 64 : FK_GEMM_BM> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int r0 = w.row0 + (NS == 2 ? 0 : wg * 64) + warp * 16 + (lane >> 2); /* (grouped: tm is not the tile's row) */
        const fk_epi_pre pre = GLU ? fk_epi_pre{} : fk_sm90_sk_start<BN, TS>(p, w, tab, tn * BN, wg, tid);
        /* ST, grouped: the table starts at the 4-row boundary below the tile (shape.cuh FK_SC_ANY_ROW) */
        const int skew = ST && GR ? w.sa_x(p) & 3 : 0;
        const int sbo = ST ? fk_sm90_sb_base<BN, GR>(p, w.g, tn) & 3 : 0; /* B's slot of K block 0 */
        const int nkb = w.kb1 - w.kb0;
        /* PAIR: the item's halves one after the other (hold_*: the first's 1x128 row maxima) */
        const int halves = PAIR ? fk_glu_halves(p, tn, BN) : 1;
        uint32_t hold_lo = 0, hold_hi = 0;
        for (int hf = 0; hf < halves; hf++) {
            const int bc = tn * BN + (PAIR ? hf * (BN / 2) : 0); /* B's first gate row of this half */
#pragma unroll
            for (int i = 0; i < S::NACC; i++)
                accf[i] = 0.0f;
            /* (K blocks counted from the item's first, w.kb0) */
            const float *sa_lo = BLOCK && !ST ? w.sa_row(p, r0) : AROW ? fk_glu_arow(p, r0) : nullptr;
            const float *sa_hi = BLOCK && !ST ? w.sa_row(p, r0 + 8) : AROW ? fk_glu_arow(p, r0 + 8) : nullptr;
            const long long sk = AROW ? 0 : p.sa_sk; /* (AROW: the same scale in every K block) */
            const float *sb_t = BLOCK && !ST ? p.sb + (GR ? w.g * p.sb_g : 0) + (long long)(bc >> 7) * p.sb_ld + w.kb0
                                      : nullptr;
            /* GLU: the scale row of the up rows (p.glu_up is a multiple of 128 with block scales) */
            const float *sb_u = BLOCK && GLU ? p.sb + (GR ? w.g * p.sb_g : 0) + (long long)((p.glu_up + bc) >> 7) * p.sb_ld + w.kb0
                                             : nullptr;
            /* v = scales of the block promoted next, w = of the one after (_u: GLU's up rows) */
            float v_lo = 1.0f, v_hi = 1.0f, v_b = 1.0f, w_lo = 1.0f, w_hi = 1.0f, w_b = 1.0f, v_u = 1.0f, w_u = 1.0f;
            if (!SCL) {
                /* (the f16 variants) an opaque 1: promoting through the block
                 * variants' multiply-add keeps ptxas from serializing the wgmma
                 * groups (C7514), which it does for a plain add; acc * 1 is exact */
                v_lo = fk_opaque_f32<0x3f800000u>();
                v_hi = v_lo;
                v_b = v_lo;
                v_u = v_lo;
            }
            if (SCL && !ST && nkb > 0) {
                v_lo = sa_lo[0];
                v_hi = sa_hi[0];
                if (BLOCK) {
                    v_b = sb_t[0];
                    if (GLU)
                        v_u = sb_u[0];
                }
                if (nkb > 1) {
                    w_lo = sa_lo[sk];
                    w_hi = sa_hi[sk];
                    if (BLOCK) {
                        w_b = sb_t[1];
                        if (GLU)
                            w_u = sb_u[1];
                    }
                }
            }
            /* Releases stage S (lane 0 of each warp); ST: after every lane's reads of
             * its scale table (the producer's next copies rewrite it) */
#define FK_PIPE_RELEASE(S)                                                                       \
        if (ST)                                                                                      \
            __syncwarp();                                                                            \
        if (lane == 0)                                                                               \
            fk_sm90_release<CL>(empty0 + 8 * (S));
            /* ST: the scales of K block KB (issued from `stage`), from its table. B's (the
             * same for the whole warp) read by lane 0, the lane that releases the stage, and
             * passed to the others by shuffle. Read by every lane, the code is as correct
             * (__syncwarp orders the other lanes' reads before lane 0's release), but
             * compute-sanitizer's racecheck does not model that order (__syncwarp compiles
             * to nothing here) and reported the reads against the next bulk copy into the
             * table, in every kernel with these tables (the single-CTA dense ones once a
             * test ran their 128-wide tiles under it). */
#define FK_PIPE_TAB(LO, HI, B, KB)                                                               \
        if (ST) {                                                                                    \
            const float *t_ = sct + stage * (S::SC_BYTES / 4);                                       \
            const int q_ = S::SC_B + ((sbo + w.kb0 + (KB)) & 3);                                         \
            LO = t_[rl + skew];                                                                      \
            HI = t_[rl + skew + 8];                                                                  \
            B = __shfl_sync(0xFFFFFFFFu, lane == 0 ? t_[q_] : 0.0f, 0);                                \
        }
            if (nkb > 0) {
                fk_mbar_wait(full0 + 8 * stage, phase);
                fk_sm90_issue<BN, AB>(acc0, fk_sm90_desc_at(da0, stage * S::A_BYTES),
                                      fk_sm90_desc_at(db0, stage * S::B_BYTES));
                FK_PIPE_TAB(v_lo, v_hi, v_b, 0)
                int pstage; /* stage of the group in flight */
                FK_PIPE_NEXT(S::STAGES)
                /* Step kb: issue kb into one set, wait for kb - 1 in the other,
                 * promote it, release its stage, shift the scale registers. */
#define FK_PIPE_STEP(NEW, OLD)                                                                   \
        {                                                                                            \
            fk_mbar_wait(full0 + 8 * stage, phase);                                                  \
            fk_sm90_issue<BN, AB>(NEW, fk_sm90_desc_at(da0, stage * S::A_BYTES),                     \
                                  fk_sm90_desc_at(db0, stage * S::B_BYTES));                         \
            FK_PIPE_TAB(w_lo, w_hi, w_b, kb)                                                         \
            fk_wgmma_wait<1>();                                                                      \
            FK_PIPE_RELEASE(pstage)                                                                  \
            fk_sm90_promote<true, S::NACC, SPLIT>(accf, OLD, v_lo * v_b, v_hi * v_b, v_lo * v_u, v_hi * v_u); \
            FK_PIPE_NEXT(S::STAGES)                                                                  \
            if (SCL) {                                                                               \
                v_lo = w_lo;                                                                         \
                v_hi = w_hi;                                                                         \
                v_b = w_b;                                                                           \
                v_u = w_u;                                                                           \
                if (!ST && kb + 1 < nkb) {                                                           \
                    w_lo = sa_lo[(long long)(kb + 1) * sk];                                          \
                    w_hi = sa_hi[(long long)(kb + 1) * sk];                                          \
                    if (BLOCK) {                                                                     \
                        w_b = sb_t[kb + 1];                                                          \
                        if (GLU)                                                                     \
                            w_u = sb_u[kb + 1];                                                      \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
            kb++;                                                                                    \
        }
#define FK_PIPE_LAST(X)                                                                          \
        FK_PIPE_RELEASE(pstage)                                                                      \
        fk_sm90_promote<true, S::NACC, SPLIT>(accf, X, v_lo * v_b, v_hi * v_b, v_lo * v_u, v_hi * v_u);
                /* (the f16 variants keep two K blocks per trip: eight spill there) */
                FK_PIPE_K(acc0, acc1, FK_PIPE_STEP, FK_PIPE_LAST, AB != FK_SM90_F16)
#undef FK_PIPE_LAST
#undef FK_PIPE_STEP
#undef FK_PIPE_TAB
#undef FK_PIPE_RELEASE
            }
            if constexpr (PAIR) /* this warpgroup's 64 rows of the half's BN / 2 columns of D */
                fk_glu_epilogue<S::NACC, AROW, true>(p, accf, stage_out, w.row0 + wg * 64, w.m_end, w.g, bc, wg, tid,
                                                     hf, hf == halves - 1, &hold_lo, &hold_hi);
            else if constexpr (GLU)
                fk_glu_epilogue<S::NACC, AROW>(p, accf, stage_out, w.row0, w.m_end, w.g, tn * BN + wg * (BN / 2), wg, tid,
                                               (w.t / w.step) & 1);
            else if (fk_sm90_sk_finish(p, w, accf, wg, tid))
                fk_sm90_epilogue<BN, TS, GR>(p, accf, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        }
    }
    fk_sm90_lag_end(p, wg, issued);
}
#endif /* FK_SM90_DEVICE */
#endif
