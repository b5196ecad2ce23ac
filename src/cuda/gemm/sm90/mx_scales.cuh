/* mx_scales.cuh - the MX kernel's stage shape and its scale helper warps: per stage
 * the e8m0 scales of A and B as fp32 tables next to the stage, with the
 * flags the consumers promote by (decoded from the bytes, or copied from
 * the normalized workspace tables). */
#ifndef FK_SM90_MX_SCALES_CUH
#define FK_SM90_MX_SCALES_CUH

#include "cuda/gemm/sm90/pipeline.cuh"
#include "cuda/gemm/sm90/mx_math.cuh"

/* ---------------------------------------------------------------- MX (e8m0 per 32 of K on A and B)
 * Hopper has no block-scaled MMA, so the MX consumer promotes with
 * accf[r][c] += acc[r][c] * (sa[r][kb] * sb[c][kb]): once per stage where
 * every row of both tiles has one scale over the stage's 128 of K, else
 * after every wgmma k32 step (fk_sm90_consumer_rc). Two producer warps (one
 * for A, one for B) fill each stage's scale area: fp32 tables (A: 128 rows x
 * 4 k32 blocks, B: BN columns x 4), the min / max exponent (the consumers
 * take a slower exact path for stages where a scale product could leave
 * fp32's exact range) and the one-scale flags - decoded from the e8m0 bytes
 * (plain or blocked layout, loads issued one stage ahead), or on the
 * workspace copies copied from the tables fk_mx_norm wrote (mx_norm_kernel.cu); all
 * their lanes arrive on the stage's full barrier, whose count is 1 (the TMA
 * thread) + 64. The arithmetic (scale area, decoding, promotion) is in
 * gemm/sm90/mx_math.cuh. */
template <int BN> struct fk_sm90_mx_shape {
    /* (H100, 2026-11-26, dd9ac6e: the general store path's smaller epilogue
     * area gave BN 192 a 4th stage but cost more than it gained: 8192^3 1568
     * against 1483 us, 2048x14336x4096 584 against 532) */
    typedef fk_sm90_shape<BN> G;
    typedef fk_mx_area<BN> T;
    static constexpr int SA_FLOATS = T::SA_FLOATS;
    static constexpr int SC_BYTES = T::BYTES; /* one stage's scale area */
    static constexpr int FIXED = G::FIXED + 64 + 16; /* + the scale areas' empty barriers, alignment */
    static constexpr int FIT = (FK_SM90_SMEM_MAX - FIXED) / (G::A_BYTES + G::B_BYTES + SC_BYTES);
    static constexpr int STAGES = FIT < 8 ? FIT : 8;
    static constexpr int SMEM = STAGES * (G::A_BYTES + G::B_BYTES + SC_BYTES) + FIXED;
    static_assert(STAGES >= 3, "stage ring too shallow");
    static_assert(SC_BYTES % 16 == 0, "scale areas must stay 16-byte aligned");
};

#ifdef FK_SM90_DEVICE
/* Helper warp of one operand (A, or B when IS_B): for every (tile, K block)
 * of this CTA it decodes the stage's scale bytes into tab[kk * ROWS + row]
 * (0 for rows past the operand and blocks past K: their wgmma sums are 0,
 * TMA fills zeros), stores the min / max of the finite exponents next to the
 * tables and arrives on the stage's full barrier with all 32 lanes. The next
 * item's bytes are loaded before waiting for the stage's scale area to be
 * free (empty0 here: the scale areas' empty barriers). On the
 * workspace copies (p.mx_ta / mx_tb) the tables and flags exist already
 * (fk_mx_norm): the warp copies them with cp.async and has them arrive when
 * they land, running ahead by as many stages as are free. */
/* The first scale row of the current tile of walk w (A: its first row; B:
 * its first column, as row e x N + column of the scale bytes of expert e)
 * and the row limit past which scales read as 0 (A: all rows; B: expert e's
 * last column + 1). */
template <int BN, bool IS_B, class W>
static __device__ __forceinline__ void fk_mx_rows(const fk_gemm_params &p, W &w, int &row0, int &lim)
{
    int tm, tn;
    w.tile(p, tm, tn);
    if (IS_B) {
        row0 = w.g * p.n + tn * BN;
        lim = (w.g + 1) * p.n;
    } else {
        row0 = w.row0;
        lim = p.m;
    }
}

template <int BN, bool IS_B, bool GR = false>
static __device__ __forceinline__ void fk_sm90_mx_scales(const fk_gemm_params &p, unsigned char *sc0, uint32_t full0,
                                                         uint32_t empty0, int lane)
{
    typedef fk_sm90_mx_shape<BN> S;
    constexpr int ROWS = IS_B ? BN : FK_GEMM_BM, NW = ROWS / 32;
    const unsigned char *src = (const unsigned char *)(IS_B ? p.sb : p.sa);
    const int kbs = p.k / 32, nkb = p.num_kb;
    const bool blocked = p.sa_sk != 0;
    const bool word =
        ((uintptr_t)p.sa % 4 == 0) && ((uintptr_t)p.sb % 4 == 0) && (p.sa_sk || kbs % 4 == 0);
    if (IS_B ? p.mx_tb : p.mx_ta) { /* the workspace copies: tables and flags made by fk_mx_tables */
        const float *tsrc = IS_B ? p.mx_tb : p.mx_ta;
        const int *fsrc = IS_B ? p.mx_fb : p.mx_fa;
        const int rp = IS_B ? p.mx_rpb : p.mx_rpa, bands = rp / (IS_B ? BN : p.mx_bda);
        int stage = 0;
        uint32_t phase = 0;
        fk_sm90_walk<1, GR> w;
        for (; w.more(p); w.t += w.step) {
            int tm, tn;
            w.tile(p, tm, tn);
            /* the tile's first table row and its first flag band (B: expert g's
             * columns padded to mx_rgb; A: any row, bands of mx_bda rows) */
            const int r0 = IS_B ? w.g * p.mx_rgb + tn * BN : w.row0;
            const int b0 = IS_B ? r0 / BN : r0 / p.mx_bda;
            for (int kb = 0; kb < nkb; kb++) {
                fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
                float *area = (float *)(sc0 + stage * S::SC_BYTES);
                float *tab = area + (IS_B ? S::SA_FLOATS : 0);
                if (r0 % 4 == 0) {
#pragma unroll
                    for (int i = lane; i < ROWS; i += 32) { /* ROWS 16-byte units: 4 k32 steps x ROWS / 4 */
                        const int ks = i / (ROWS / 4), u = i - ks * (ROWS / 4);
                        fk_cp_async16(tab + ks * ROWS + 4 * u, tsrc + ((long long)(kb * 4 + ks) * rp + r0 + 4 * u), 16);
                    }
                } else { /* (grouped A: a group starting off a 4-row boundary) */
#pragma unroll 4
                    for (int i = lane; i < 4 * ROWS; i += 32) {
                        const int ks = i / ROWS, u = i - ks * ROWS;
                        fk_cp_async4(fk_smem_addr(tab + i), tsrc + ((long long)(kb * 4 + ks) * rp + r0 + u));
                    }
                }
                int *mm = (int *)(area + fk_mx_area<BN>::MM);
                if (IS_B) {
                    if (lane == 0)
                        fk_cp_async16(mm + 4, fsrc + ((long long)kb * bands + b0) * 4, 16);
                } else if (lane < (GR ? 5 : 1)) { /* the bands the tile's 128 rows touch (clamped: repeats are harmless) */
                    const int b = min(b0 + lane, bands - 1);
                    fk_cp_async16(mm + fk_mx_rec_a(lane), fsrc + ((long long)kb * bands + b) * 4, 16);
                }
                fk_cp_async_mbar_arrive(full0 + 8 * stage);
                if (++stage == S::STAGES) {
                    stage = 0;
                    phase ^= 1u;
                }
            }
        }
        return;
    }
    /* the operands as given (or, grouped, the normalized copies' bytes):
     * decoded here, the next item's bytes loaded one stage ahead */
    fk_sm90_walk<1, GR> w;
    if (nkb == 0 || !w.more(p))
        return;
    int kb = 0, row0, lim;
    fk_mx_rows<BN, IS_B>(p, w, row0, lim);
    unsigned int wv[NW];
    fk_mx_load<NW>(src, blocked, nkb, kbs, word, row0, lim, 0, lane, wv);
    int stage = 0;
    uint32_t phase = 0;
    for (;;) {
        fk_sm90_walk<1, GR> wn = w;
        int nk = kb + 1, nrow0 = row0, nlim = lim;
        if (nk == nkb) {
            nk = 0;
            wn.t += wn.step;
            if (wn.more(p))
                fk_mx_rows<BN, IS_B>(p, wn, nrow0, nlim);
        }
        const bool more = wn.more(p);
        unsigned int wx[NW];
        if (more)
            fk_mx_load<NW>(src, blocked, nkb, kbs, word, nrow0, nlim, nk * 4, lane, wx);
        fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
        float *area = (float *)(sc0 + stage * S::SC_BYTES);
        float *tab = area + (IS_B ? S::SA_FLOATS : 0);
        int emin = 1024, emax = -1024;
        bool uniform = true;
        fk_mx_decode<ROWS>(wv, row0, lim, kb * 4, kbs, lane, tab, emin, emax, uniform);
        emin = __reduce_min_sync(0xffffffffu, emin);
        emax = __reduce_max_sync(0xffffffffu, emax);
        uniform = __all_sync(0xffffffffu, uniform);
        if (lane < (!IS_B && GR ? 5 : 1)) { /* (grouped: A's five records, all the same here) */
            int *mm = (int *)(area + fk_mx_area<BN>::MM) + (IS_B ? 4 : fk_mx_rec_a(lane));
            mm[0] = emin;
            mm[1] = emax;
            mm[2] = uniform;
        }
        fk_mbar_arrive(full0 + 8 * stage); /* release: this lane's writes */
        if (++stage == S::STAGES) {
            stage = 0;
            phase ^= 1u;
        }
        if (!more)
            break;
        w = wn;
        kb = nk;
        row0 = nrow0;
        lim = nlim;
#pragma unroll
        for (int i = 0; i < NW; i++)
            wv[i] = wx[i];
    }
}
#endif
#endif
