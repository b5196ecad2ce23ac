/* pipeline.cuh - the Hopper GEMM pipeline: the TMA producer that streams A and B
 * tiles into the stage ring, the stage release, and the consumer lag. */
#ifndef FK_SM90_PIPELINE_CUH
#define FK_SM90_PIPELINE_CUH

#include "cuda/gemm/sm90/shape.cuh"
#include "cuda/gemm/sm90/walk.cuh"

#ifdef FK_SM90_DEVICE
/* Releases a stage: one arrival per consumer warp on the stage's empty
 * barrier in every CTA of the cluster (with multicast, each CTA's producer
 * writes part of every CTA's stage). */
template <int CL> static __device__ __forceinline__ void fk_sm90_release(uint32_t bar)
{
    if (CL == 1) {
        fk_mbar_arrive(bar);
    } else {
#pragma unroll
        for (int r = 0; r < CL; r++)
            fk_mbar_arrive_cta(bar, (uint32_t)r);
    }
}

/* Staged block scales: the index in p.tsb's vector of B's scale of K block 0
 * for tile column tn (of expert g): its 128-column row, N's last where the
 * tile starts past N. K block kb's scale is in the 16-byte group starting at
 * (base + kb) & ~3 (a TMA box's first index is 16-byte aligned), at slot
 * (base + kb) & 3. */
template <int BN, bool GR>
static __device__ __forceinline__ int fk_sm90_sb_base(const fk_gemm_params &p, int g, int tn)
{
    return (GR ? g * (int)p.sb_g : 0) + min((tn * BN) >> 7, (p.n - 1) >> 7) * (int)p.sb_ld;
}

/* Producer: one thread streams every (tile, K block) of this CTA into the
 * ring. With clusters (CL = 2) it loads its A tile and 1 / CL of the B tile,
 * multicast to the same stage of every CTA of the cluster (which share B).
 * SC (staged block scales, dense): each stage also gets its scale table at
 * sc0: A's scales of the tile rows by TMA (p.tsa), and the 16 bytes of B's
 * scales holding the K block's (p.tsb, a 1-D box over all of them: B's rows
 * need not be whole 16-byte groups; fk_sm90_sb_base), on the same barrier.
 * NS = 2 (the gated tile, kernels_glu.cu): 64 rows of A (A's map has 64-row
 * boxes) and four BN / 2-row boxes of B (B's map has BN / 2-row boxes): for
 * each consumer warpgroup w its gate rows tn BN + w BN / 2 and the up rows
 * p.glu_up past them, so each warpgroup's B operand is [gate | up]; in
 * clusters (CTAs on adjacent tile rows, the same B) each CTA loads 4 / CL of
 * the boxes, multicast to every CTA of the cluster.
 * NS = 3 (the paired gated tile): per work item, for each of its halves
 * (fk_glu_halves: D's columns tn BN + h BN / 2 ..) every K block again: A's
 * 128 rows (a 128-row box) and two BN / 2-row boxes of B, the half's gate
 * rows and their up rows.
 * MCA (clusters along N, two-wave tiles): the CTAs share A's rows; CTA rank r
 * loads the waves l with l % CL == r, multicast to every CTA of the cluster,
 * and its own B tile and scale rows. */
template <int BN, int STAGES = fk_sm90_shape<BN>::STAGES, int CL = 1, bool GR = false, int WV = 1,
          class W = fk_sm90_walk<CL, GR, WV>, int SC = FK_SC_NONE, int NS = 1, bool MCA = false>
static __device__ __forceinline__ void fk_sm90_producer(const CUtensorMap *ta, const CUtensorMap *tb,
                                                        const fk_gemm_params &p, uint32_t sa0,
                                                        uint32_t sb0, uint32_t full0,
                                                        uint32_t empty0, uint32_t sc0 = 0)
{
    typedef fk_sm90_shape<BN, false, WV, SC, NS> S;
    static_assert(SC != FK_SC_ALIGNED || !GR, "grouped tiles start at any row: FK_SC_ANY_ROW tables");
    static_assert(!MCA || (NS == 1 && WV % CL == 0), "A multicast: whole waves per CTA");
    if (p.num_kb > 0) {
        fk_tma_prefetch_desc(ta);
        fk_tma_prefetch_desc(tb);
    }
    int stage = 0;
    uint32_t phase = 0;
    W w; /* (the K-grouped kernel walks its own sequence: gemm/sm90/kg.cuh) */
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int brow = GR ? w.g * p.grp_brows : 0; /* grouped: expert g's rows of B */
        const int halves = NS == 3 ? fk_glu_halves(p, tn, BN) : 1;
        for (int hf = 0; hf < halves; hf++)
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
            const uint32_t full = full0 + 8 * stage;
            /* the last tile of A's rows: a box of M's rest only (the stage's other rows keep stale bytes,
             * which reach only the sums of rows past M, never stored) */
            const bool atail = NS == 1 && WV == 1 && !MCA && p.a_tail_rows && w.row0 == p.a_tail_row0;
            fk_mbar_arrive_expect_tx(full, S::A_BYTES + S::B_BYTES + (SC ? S::SC_ROWS * 4 + 16 : 0) -
                                               (atail ? (uint32_t)(FK_GEMM_BM - p.a_tail_rows) * FK_GEMM_BK : 0u));
            if constexpr (SC) {
                const uint32_t t = sc0 + stage * S::SC_BYTES;
                /* (FK_SC_ANY_ROW: from the 4-row boundary below the tile; the consumers skip the rows before it;
                 * two-wave tiles: one 128-row box per wave) */
#pragma unroll
                for (int l = 0; l < WV; l++)
                    fk_tma_load_2d(t + l * FK_GEMM_BM * 4, &p.tsa, full,
                                   (SC == FK_SC_ANY_ROW ? w.sa_x(p) & ~3 : w.sa_x(p)) + l * FK_GEMM_BM, w.sa_y(p, kb));
                /* B's 16-byte group holding the K block's scale (fk_sm90_sb_base) */
                fk_tma_load_1d(t + S::SC_B * 4, &p.tsb, full, (fk_sm90_sb_base<BN, GR>(p, w.g, tn) + kb) & ~3);
            }
            if constexpr (NS == 3) {
                fk_tma_load_2d(sa0 + stage * S::A_BYTES, ta, full, kb * FK_GEMM_BK, w.row0);
#pragma unroll
                for (int u = 0; u < 2; u++) /* the half's gate rows, then their up rows */
                    fk_tma_load_2d(sb0 + stage * S::B_BYTES + u * (BN / 2) * FK_GEMM_BK, tb, full, kb * FK_GEMM_BK,
                                   brow + (u ? p.glu_up : 0) + tn * BN + hf * (BN / 2));
            } else if constexpr (NS == 2) {
                fk_tma_load_2d(sa0 + stage * S::A_BYTES, ta, full, kb * FK_GEMM_BK, w.row0);
#pragma unroll
                for (int h = 0; h < 4; h++) { /* h = 2 w + (up); in clusters each CTA multicasts its 4 / CL */
                    const uint32_t dst = sb0 + stage * S::B_BYTES + h * (BN / 2) * FK_GEMM_BK;
                    const int row = brow + (h & 1 ? p.glu_up : 0) + tn * BN + (h >> 1) * (BN / 2);
                    if (CL == 1)
                        fk_tma_load_2d(dst, tb, full, kb * FK_GEMM_BK, row);
                    else if (h / (4 / CL) == w.rank)
                        fk_tma_load_2d_mc(dst, tb, full, kb * FK_GEMM_BK, row, (uint16_t)((1u << CL) - 1u));
                }
            } else {
#pragma unroll
                for (int l = 0; l < WV; l++) { /* one 128-row box per wave */
                    const uint32_t dst = sa0 + stage * S::A_BYTES + l * FK_GEMM_BM * FK_GEMM_BK;
                    if (!MCA)
                        fk_tma_load_2d(dst, atail ? &p.ta_tail : ta, full, kb * FK_GEMM_BK, w.row0 + l * FK_GEMM_BM);
                    else if (l % CL == w.rank)
                        fk_tma_load_2d_mc(dst, ta, full, kb * FK_GEMM_BK, w.row0 + l * FK_GEMM_BM,
                                          (uint16_t)((1u << CL) - 1u));
                }
                if (CL == 1 || MCA)
                    fk_tma_load_2d(sb0 + stage * S::B_BYTES, tb, full, kb * FK_GEMM_BK, brow + tn * BN);
                else
                    fk_tma_load_2d_mc(sb0 + stage * S::B_BYTES + w.rank * (S::B_BYTES / CL), tb, full,
                                      kb * FK_GEMM_BK, tn * BN + w.rank * (BN / CL), (uint16_t)((1u << CL) - 1u));
            }
            if (++stage == STAGES) {
                stage = 0;
                phase ^= 1u;
            }
        }
    }
}

/* Lag (p.lag = d > 0): warpgroup 1 starts only once warpgroup 0 has issued
 * its first d stages, and stays about d stages behind: the ring holds the
 * stages of both, and within a tile both progress at the tensor cores' pace.
 * At the end of a tile warpgroup 0 runs its epilogue while warpgroup 1
 * still multiplies its last d stages, and warpgroup 1's epilogue overlaps
 * warpgroup 0's first stages of the next tile, instead of both running the
 * epilogue together while the tensor cores idle. Named barrier 3 (1 and 2
 * are the epilogue's); warpgroup 0 arrives exactly once. */
#define FK_LAG_BAR 3
static __device__ __forceinline__ void fk_sm90_lag_start(const fk_gemm_params &p, int wg)
{
    if (p.lag > 0 && wg == 1)
        fk_named_bar_sync(FK_LAG_BAR, 256);
}
static __device__ __forceinline__ void fk_sm90_lag_step(const fk_gemm_params &p, int wg, int issued)
{
    if (wg == 0 && issued == p.lag)
        fk_named_bar_arrive(FK_LAG_BAR, 256);
}
static __device__ __forceinline__ void fk_sm90_lag_end(const fk_gemm_params &p, int wg, int issued)
{
    if (p.lag > 0 && wg == 0 && issued < p.lag)
        fk_named_bar_arrive(FK_LAG_BAR, 256);
}
#endif /* FK_SM90_DEVICE */
#endif
