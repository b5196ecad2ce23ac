/* gemm_sm90.cu - the Hopper (sm_90a) FP8 GEMM kernel and its compiled variants
 * (the MX-scaled and K-grouped kernels, which promote with row x column
 * scales, are at the end of the file).
 *
 * Persistent and warp-specialized: 384 threads per CTA, one CTA per SM.
 * Warpgroup 2 is the producer: after giving registers back (setmaxnreg), one
 * thread walks the tile sequence and issues TMA loads (128-byte swizzle) of
 * the A (128 x 128) and B (BN x 128) K-major tiles of every K block into a
 * ring of shared-memory stages, guarded by full/empty mbarriers.
 * Warpgroups 0 and 1 are consumers: each owns 64 rows of the 128-row tile,
 * issues wgmma m64nBNk32 (fp8, fp32 accumulators; BN = 64, 128, 192, or 256
 * with fast accumulation) over a stage and, every
 * `PROMO` k32 steps, adds the wgmma accumulators into a separate fp32
 * accumulator set (Hopper's fp8 tensor-core accumulation keeps fewer bits
 * than fp32; this promotion is what meets docs/spec.md section 3). Block scales
 * (1x128 for A, 128x128 for B) multiply in at that promotion. PROMO = 0 is
 * fast accumulation: the wgmma accumulators run over the whole K range.
 * After the last K block each consumer warpgroup stages its accumulators in
 * shared memory, 32 columns at a time, and runs the fused epilogue with
 * coalesced stores (gemm_epilogue.cuh; its scales and biases were prefetched at
 * the start of the tile) while the producer already loads the next tile.
 * Consumer warpgroup 1 runs p.lag stages behind warpgroup 0, so that one
 * warpgroup's epilogue overlaps the other's multiplications. The _c2 kernels
 * run in clusters of 2 CTAs along M that share each B tile: each producer
 * loads half of it, multicast to both CTAs.
 * The kernel body exists only in the sm_90a pass; other passes get an empty
 * stub (the host never launches it on a device that is not sm_90). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <type_traits>
#include "cuda/gemm_epilogue.cuh"
#include "cuda/gemm_mx.cuh"
#include "cuda/ptx/ptx.cuh"
#include "cuda/sched.cuh"

/* Shared memory of one CTA: the stage ring, then per consumer warpgroup an
 * epilogue area (a 64 x 32 fp32 staging chunk, or the 64 staged output rows
 * of the bulk epilogue, whichever is larger) and its table of prefetched
 * factors (TS: large enough also for the 4 per-warp tables of the
 * row-scaled TMA-store epilogue), then the full + empty barriers; 1024
 * bytes of slack align the ring. The ring takes as many stages as fit in
 * 227 KB (at most 8). */
#define FK_SM90_SMEM_MAX (227 * 1024)
/* Floats of one warp's table in the TMA-store epilogue with row scales or
 * a bias: BN column factors (or, with a bias, the BN bias values), the 16
 * row scales of the warp's rows, the two tensor scales, padding to a
 * multiple of 4. */
#define FK_EPI_WTAB(BN) ((BN) + 32)
template <int BN, bool TS = false, int WV = 1> struct fk_sm90_shape {
    static constexpr int A_BYTES = WV * FK_GEMM_BM * FK_GEMM_BK; /* WV 128-row waves */
    static constexpr int B_BYTES = BN * FK_GEMM_BK;
    static constexpr int CHUNK_FLOATS = 64 * FK_EPI_CH;
    /* TS: no room for the bulk epilogue's staged rows; the TMA-store
     * epilogue's two 4 KB buffers fit in the general epilogue's chunk */
    static constexpr int ROWS_FLOATS = TS ? 0 : 64 * FK_EPI_ROW_BYTES(BN) / 4;
    /* per consumer warpgroup */
    static constexpr int STAGE_OUT_FLOATS = CHUNK_FLOATS > ROWS_FLOATS ? CHUNK_FLOATS : ROWS_FLOATS;
    static constexpr int TAB_FLOATS = /* per consumer warpgroup */
        TS && 4 * FK_EPI_WTAB(BN) > FK_EPI_TAB(BN) ? 4 * FK_EPI_WTAB(BN) : FK_EPI_TAB(BN);
    static constexpr int EPI_BYTES = 2 * (STAGE_OUT_FLOATS + TAB_FLOATS) * 4;
    static constexpr int FIXED = EPI_BYTES + 1024 + 2 * 8 * 8;
    static constexpr int FIT = (FK_SM90_SMEM_MAX - FIXED) / (A_BYTES + B_BYTES);
    static constexpr int STAGES = FIT < 8 ? FIT : 8;
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + FIXED;
    static constexpr int NACC = BN / 2; /* fp32 accumulators per consumer thread */
    static_assert(STAGES >= 3, "stage ring too shallow");
    static_assert(!TS || CHUNK_FLOATS * 4 == 2 * 4096, "TMA-store buffers");
    static_assert(TAB_FLOATS % 4 == 0, "tables stay 16-byte aligned");
    static_assert(!TS || STAGES == 8 || STAGES == fk_sm90_shape<BN>::STAGES + 1,
                  "the TS variants' per-warp tables must not cost their extra stage");
};

#ifdef FK_SM90_DEVICE
/* The TMA-store epilogue (p.d_bulk == 2, only in TS variants): tensor or
 * row scales, alpha, an optional column bias, an optional activation,
 * bf16/f16 D, no C. The warpgroup converts its 64 x BN fragment 32 columns
 * at a time into one of two 64 x 32 staging buffers at buf (1024-aligned;
 * 64-byte swizzle, so the fragment stores are free of bank conflicts). Each
 * warp owns the 16 rows of the buffers it writes and stores them itself,
 * one TMA tensor store (16 x 32 box, clipping rows past M and columns past
 * N) per chunk from its lane 0: the warps never wait for one another inside
 * the epilogue. A warp writes a buffer again only after its store from it
 * two chunks earlier has read it (also across tiles). y = acc * (sa * f),
 * or fma(acc, sa * f, bias) with a bias (bt: this lane's column pair of
 * 8-column group 0 in the warp's table, as fp32), then the activation (EXT:
 * bias or activation present): with per-column B scales f comes from the
 * warp's table (cf, laid out like bt), else every column has f = fu; sa_lo
 * / sa_hi are the row scales of the lane's two rows (1 without). */
template <int BN, bool COLSC, bool BF, bool EXT, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma_chunks(const fk_gemm_params &p, float (&acc)[NACC],
                                                              uint32_t buf, const float *cf, const float *bt,
                                                              float sa_lo, float sa_hi, float fu, int m0, int n0,
                                                              int tid)
{
    const int warp = tid >> 5, lane = tid & 31;
    const int r_lo = warp * 16 + (lane >> 2), r_hi = r_lo + 8, q = lane & 3;
    const float fu_lo = sa_lo * fu, fu_hi = sa_hi * fu;
    const uint32_t w_lo = buf + r_lo * 64 + 4 * q, w_hi = buf + r_hi * 64 + 4 * q;
    const int x_lo = (r_lo >> 1) & 3, x_hi = (r_hi >> 1) & 3; /* the swizzle of each row's 16-byte units */
    const bool rows_in = m0 + warp * 16 < p.m;
    /* the factors of chunk c + 1 are read at the start of chunk c, so their
     * latency hides behind chunk c's arithmetic */
    float2 fn[4];
    if (COLSC) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            fn[j] = *(const float2 *)&cf[8 * j];
    }
#pragma unroll
    for (int c = 0; c < BN / 32; c++) {
        const uint32_t b = (c & 1) * 4096;
        float2 f[4];
        if (COLSC) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                f[j] = fn[j];
                if (c + 1 < BN / 32)
                    fn[j] = *(const float2 *)&cf[8 * (4 * (c + 1) + j)];
            }
        }
        /* Two loops on purpose: the plain one stores each 8-column group as
         * soon as it is scaled; the EXT one collects the chunk's 16 values
         * for the activation first. Written as one (EXT's with no bias and
         * no activation), the plain kernels' epilogue scheduled differently
         * and 4096^3 tensor ran ~1% slower in 3 of 3 same-run rounds (H100,
         * 2026-11-22: 111.1-111.7 vs 109.7-110.3 us). */
        if constexpr (!EXT) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int g = 4 * c + j; /* 8-column group of the fragment */
                float y0, y1, y2, y3;
                if (COLSC) {
                    y0 = acc[4 * g] * (sa_lo * f[j].x);
                    y1 = acc[4 * g + 1] * (sa_lo * f[j].y);
                    y2 = acc[4 * g + 2] * (sa_hi * f[j].x);
                    y3 = acc[4 * g + 3] * (sa_hi * f[j].y);
                } else {
                    y0 = acc[4 * g] * fu_lo;
                    y1 = acc[4 * g + 1] * fu_lo;
                    y2 = acc[4 * g + 2] * fu_hi;
                    y3 = acc[4 * g + 3] * fu_hi;
                }
                fk_st_shared_u32(w_lo + b + 16 * (j ^ x_lo), BF ? fk_cvt_bf16x2(y0, y1) : fk_cvt_f16x2(y0, y1));
                fk_st_shared_u32(w_hi + b + 16 * (j ^ x_hi), BF ? fk_cvt_bf16x2(y2, y3) : fk_cvt_f16x2(y2, y3));
            }
        } else {
            float y[16];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int g = 4 * c + j;
                const float f0 = COLSC ? sa_lo * f[j].x : fu_lo, f1 = COLSC ? sa_lo * f[j].y : fu_lo;
                const float f2 = COLSC ? sa_hi * f[j].x : fu_hi, f3 = COLSC ? sa_hi * f[j].y : fu_hi;
                if (bt) {
                    const float2 bb = *(const float2 *)&bt[8 * g];
                    y[4 * j] = fmaf(acc[4 * g], f0, bb.x);
                    y[4 * j + 1] = fmaf(acc[4 * g + 1], f1, bb.y);
                    y[4 * j + 2] = fmaf(acc[4 * g + 2], f2, bb.x);
                    y[4 * j + 3] = fmaf(acc[4 * g + 3], f3, bb.y);
                } else {
                    y[4 * j] = acc[4 * g] * f0;
                    y[4 * j + 1] = acc[4 * g + 1] * f1;
                    y[4 * j + 2] = acc[4 * g + 2] * f2;
                    y[4 * j + 3] = acc[4 * g + 3] * f3;
                }
            }
            fk_epi_act_n(y, p.act);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                fk_st_shared_u32(w_lo + b + 16 * (j ^ x_lo),
                                 BF ? fk_cvt_bf16x2(y[4 * j], y[4 * j + 1]) : fk_cvt_f16x2(y[4 * j], y[4 * j + 1]));
                fk_st_shared_u32(w_hi + b + 16 * (j ^ x_hi), BF ? fk_cvt_bf16x2(y[4 * j + 2], y[4 * j + 3])
                                                                : fk_cvt_f16x2(y[4 * j + 2], y[4 * j + 3]));
            }
        }
        fk_fence_proxy_async();
        __syncwarp();
        if (lane == 0 && rows_in) {
            fk_tma_store_2d(&p.td, buf + b + warp * 1024, n0 + 32 * c, m0 + warp * 16);
            fk_bulk_commit();
            fk_bulk_wait_read<1>(); /* this warp's store of chunk c - 1 has read the other buffer */
        }
        __syncwarp();
    }
}

/* The chunks with D's type (BF: bf16, else f16) as a template argument (one
 * conversion per pair instead of both under a predicate); EXT: the variants
 * for a bias or an activation (TS 2), so that the plain variants (TS 1)
 * carry none of that code. */
template <int BN, bool COLSC, bool EXT, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma_d(const fk_gemm_params &p, float (&acc)[NACC], uint32_t buf,
                                                         const float *cf, const float *bt, float sa_lo, float sa_hi,
                                                         float fu, int m0, int n0, int tid)
{
    if (p.d_type == FP8KIT_BF16)
        fk_epilogue_tma_chunks<BN, COLSC, true, EXT>(p, acc, buf, cf, bt, sa_lo, sa_hi, fu, m0, n0, tid);
    else
        fk_epilogue_tma_chunks<BN, COLSC, false, EXT>(p, acc, buf, cf, bt, sa_lo, sa_hi, fu, m0, n0, tid);
}

/* Whether the TMA-store epilogue reads per-warp tables (FK_EPI_WTAB floats
 * at tab + warp * FK_EPI_WTAB(BN) in the warpgroup's table area): with
 * per-row or per-column scales, or (EXT) a column bias. */
template <bool EXT> static __device__ __forceinline__ bool fk_epi_tma_tab(const fk_gemm_params &p)
{
    return p.sa_mode == FP8KIT_SCALE_ROW || p.sb_mode == FP8KIT_SCALE_ROW || (EXT && p.bias);
}

/* At the start of a tile (fk_epi_tma_tab): each warp copies what its
 * epilogue will read into its own table with cp.async, so that no register
 * waits for these loads and they complete behind the main loop: the BN B
 * scales of the tile's columns (lane l: columns l, l + 32, ...) or, in
 * their place, its BN bias values (B is not row-scaled with a bias,
 * gemm.cu; bf16 / f16 bias as BN / 2 raw column pairs, widened in the
 * epilogue), the A scales of the warp's 16 rows (lanes 0-15) and the
 * tensor scales (lanes 16, 17). Columns past N and rows past M read the
 * last one (their outputs are clipped). The warp's epilogue of the previous
 * tile read the table before its last __syncwarp, which precedes these
 * copies. */
template <int BN, bool EXT>
static __device__ __forceinline__ void fk_epi_tma_fetch(const fk_gemm_params &p, float *tab, int m0, int n0, int tid)
{
    const int warp = tid >> 5, lane = tid & 31;
    const uint32_t wt = fk_smem_addr(tab + warp * FK_EPI_WTAB(BN));
    if (p.sb_mode == FP8KIT_SCALE_ROW) {
#pragma unroll
        for (int i = 0; i < BN / 32; i++)
            fk_cp_async4(wt + 4 * (lane + 32 * i), p.sb + min(n0 + lane + 32 * i, p.n - 1));
    } else if (EXT && p.bias) {
        if (p.bias_type == FP8KIT_F32) {
#pragma unroll
            for (int i = 0; i < BN / 32; i++)
                fk_cp_async4(wt + 4 * (lane + 32 * i), (const float *)p.bias + min(n0 + lane + 32 * i, p.n - 1));
        } else { /* N is even here: pairs never straddle it */
#pragma unroll
            for (int i = 0; i < BN / 64; i++)
                fk_cp_async4(wt + 4 * (lane + 32 * i),
                             (const uint16_t *)p.bias + min(n0 + 2 * (lane + 32 * i), p.n - 2));
        }
    }
    if (lane < 16 && p.sa_mode == FP8KIT_SCALE_ROW)
        fk_cp_async4(wt + 4 * (BN + lane), p.sa + min(m0 + warp * 16 + lane, p.m - 1));
    if (lane == 16 && p.sa_mode == FP8KIT_SCALE_TENSOR)
        fk_cp_async4(wt + 4 * (BN + 16), p.sa);
    if (lane == 17 && p.sb_mode == FP8KIT_SCALE_TENSOR)
        fk_cp_async4(wt + 4 * (BN + 17), p.sb);
}

/* The TMA-store epilogue of a tile. Tensor scales and no bias: one factor
 * fu = alpha * sa * sb rounded once from double. Otherwise
 * (fk_epi_tma_tab) from the warp's table, no warpgroup barrier: each lane
 * turns its own columns' B scales into the factors alpha * sa * sb rounded
 * once from double (with sa = 1 - A row-scaled or unscaled - the fp32
 * product alpha * sb is that value: the double product of two floats is
 * exact), or widens its bf16 / f16 bias pairs to fp32 in place,
 * __syncwarp, then the chunks read them. */
template <int BN, bool EXT, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma(const fk_gemm_params &p, float (&acc)[NACC], uint32_t buf,
                                                       float *tab, const fk_epi_pre &pre, int m0, int n0, int tid)
{
    if (!fk_epi_tma_tab<EXT>(p)) {
        const float fu = (float)((double)p.alpha * (double)pre.sat * (double)pre.sbt);
        fk_epilogue_tma_d<BN, false, EXT>(p, acc, buf, nullptr, nullptr, 1.0f, 1.0f, fu, m0, n0, tid);
        return;
    }
    const int warp = tid >> 5, lane = tid & 31;
    float *wt = tab + warp * FK_EPI_WTAB(BN);
    fk_cp_async_wait_all();
    __syncwarp(); /* the other lanes' copies (row and tensor scales) are visible */
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
    const float sa_lo = rowsc ? wt[BN + (lane >> 2)] : 1.0f, sa_hi = rowsc ? wt[BN + 8 + (lane >> 2)] : 1.0f;
    if (p.sb_mode == FP8KIT_SCALE_ROW) {
        if (p.sa_mode != FP8KIT_SCALE_TENSOR) {
#pragma unroll
            for (int i = 0; i < BN / 32; i++)
                wt[lane + 32 * i] = __fmul_rn(p.alpha, wt[lane + 32 * i]);
        } else {
            const double ar = (double)p.alpha * (double)wt[BN + 16];
#pragma unroll
            for (int i = 0; i < BN / 32; i++)
                wt[lane + 32 * i] = (float)(ar * (double)wt[lane + 32 * i]);
        }
        __syncwarp();
        fk_epilogue_tma_d<BN, true, EXT>(p, acc, buf, wt + 2 * (lane & 3), nullptr, sa_lo, sa_hi, 1.0f, m0, n0,
                                         tid);
    } else {
        /* B tensor-scaled or unscaled; A row- or tensor-scaled or unscaled */
        double fd = (double)p.alpha;
        if (p.sa_mode == FP8KIT_SCALE_TENSOR)
            fd *= (double)wt[BN + 16];
        if (p.sb_mode == FP8KIT_SCALE_TENSOR)
            fd *= (double)wt[BN + 17];
        const float fu = (float)fd;
        if (EXT && p.bias && p.bias_type != FP8KIT_F32) {
            uint32_t pr[BN / 64];
#pragma unroll
            for (int i = 0; i < BN / 64; i++)
                pr[i] = ((const uint32_t *)wt)[lane + 32 * i];
            __syncwarp();
            const bool bf = p.bias_type == FP8KIT_BF16;
#pragma unroll
            for (int i = 0; i < BN / 64; i++) {
                const int k = lane + 32 * i;
                wt[2 * k] = bf ? fk_u2f(pr[i] << 16) : fk_epi_f16_f32(pr[i] & 0xFFFFu);
                wt[2 * k + 1] = bf ? fk_u2f(pr[i] & 0xFFFF0000u) : fk_epi_f16_f32(pr[i] >> 16);
            }
            __syncwarp();
        }
        fk_epilogue_tma_d<BN, false, EXT>(p, acc, buf, nullptr, EXT && p.bias ? wt + 2 * (lane & 3) : nullptr, sa_lo,
                                          sa_hi, fu, m0, n0, tid);
    }
}

/* The tile's epilogue inputs, at its start: copied to the warps' tables
 * (TS variants' TMA-store epilogue with row scales or a bias), else
 * prefetched into registers (gemm_epilogue.cuh). */
template <int BN, int TS>
static __device__ __forceinline__ fk_epi_pre fk_sm90_epi_start(const fk_gemm_params &p, float *tab, int m0, int n0,
                                                               int tid, int m_end, int g)
{
    if (TS && p.d_bulk == 2 && fk_epi_tma_tab<TS == 2>(p)) {
        fk_epi_tma_fetch<BN, TS == 2>(p, tab, m0, n0, tid);
        fk_epi_pre e = {};
        e.m_end = m_end;
        return e;
    }
    return fk_epi_prefetch<BN>(p, m0, n0, tid, m_end, g);
}

/* The epilogue of one finished tile: the TMA-store path (TS variants), the
 * bulk-copy path (the others) or the general one. */
template <int BN, int TS = 0, int NACC>
static __device__ __forceinline__ void fk_sm90_epilogue(const fk_gemm_params &p, float (&acc)[NACC], float *area,
                                                        float *tab, const fk_epi_pre &pre, int m0, int n0, int tid,
                                                        int bar_id)
{
    if (TS && p.d_bulk == 2)
        fk_epilogue_tma<BN, TS == 2>(p, acc, fk_smem_addr(area), tab, pre, m0, n0, tid);
    else if (!TS && p.d_bulk)
        fk_epilogue_bulk<BN>(p, acc, (unsigned char *)area, tab, pre, m0, n0, tid, bar_id);
    else
        fk_epilogue<BN>(p, acc, area, tab, pre, m0, n0, tid, bar_id);
}

/* The tile sequence of a CTA. Without clusters (CL = 1): work items
 * blockIdx.x, + gridDim.x, ... are tiles. With clusters of CL CTAs along M:
 * items are cluster tiles of CL x 128 rows (p.sched counts tile rows in
 * units of CL), cluster c takes items c, c + gridDim.x / CL, ... and CTA
 * rank r of it the tile row item_row * CL + r (past the last tile row for
 * an odd count: its A loads are zero-filled and its epilogue writes no row). */
template <int CL, bool GR = false, int WV = 1> struct fk_sm90_walk {
    int t, step, rank;
    int row0, m_end, g; /* of the current tile: first row, row limit, group */
    int kb0, kb1;       /* its K blocks */
    int part, slot;     /* stream-K: part of the tail tile (-1: a whole tile), its first slot */
    __device__ __forceinline__ fk_sm90_walk()
        : t((int)blockIdx.x / CL), step((int)gridDim.x / CL), rank(CL > 1 ? (int)fk_cluster_ctarank() : 0)
    {
    }
    /* GR: the group table (sched.cuh), read where needed rather than kept in registers */
    static __device__ __forceinline__ const int *gtab(const fk_gemm_params &p)
    {
        extern __shared__ __align__(1024) unsigned char fk_smem[];
        return (const int *)(fk_smem + p.grp_tab);
    }
    __device__ __forceinline__ bool more(const fk_gemm_params &p) const
    {
        if constexpr (GR)
            return t < gtab(p)[2 * p.grp_count] * p.sched.tiles_n;
        else
            return t < p.sched.count() + (CL == 1 ? p.sk_tail * (p.sk_parts - 1) : 0);
    }
    /* Grouped (GR): tile row tm of the sequence of all groups' tile rows
     * (the same raster order over them) maps to group g's rows. */
    __device__ __forceinline__ void tile(const fk_gemm_params &p, int &tm, int &tn)
    {
        kb0 = 0; /* a whole tile unless the stream-K tail says otherwise */
        kb1 = p.num_kb;
        part = -1;
        if constexpr (GR) {
            const int G = p.grp_count;
            const int *gtab = fk_sm90_walk::gtab(p);
            fk_tile_sched s = p.sched;
            s.tiles_m = gtab[2 * G];
            s.tile(t, tm, tn);
            g = fk_grp_find(gtab + G, G, tm);
            row0 = fk_grp_start(gtab, g, p.grp_masked_m) + (tm - gtab[G + g]) * FK_GEMM_BM;
            m_end = gtab[g];
        } else {
            int idx = t;
            const int full = p.sched.count() - p.sk_tail;
            if (CL == 1 && t >= full) {
                /* the stream-K tail (see fk_sm90_sk_plan in gemm.cu): item
                 * full + u is part u / tail of tail tile u % tail; part p
                 * takes K range s - 1 - p, so the reducing part s - 1 (the
                 * highest CTAs) has the first, shortest one */
                const int u = t - full, s = p.sk_parts, j = u % p.sk_tail;
                part = u / p.sk_tail;
                slot = j * (s - 1);
                idx = full + j;
                const int r = s - 1 - part;
                kb0 = r * p.num_kb / s;
                kb1 = (r + 1) * p.num_kb / s;
            }
            p.sched.tile(idx, tm, tn);
            tm = tm * CL + rank;
            row0 = tm * FK_GEMM_BM * WV;
            m_end = p.m;
            g = 0;
        }
    }
};

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

/* Producer: one thread streams every (tile, K block) of this CTA into the
 * ring. With clusters (CL = 2) it loads its A tile and 1 / CL of the B tile,
 * multicast to the same stage of every CTA of the cluster (which share B). */
template <int BN, int STAGES = fk_sm90_shape<BN>::STAGES, int CL = 1, bool GR = false, int WV = 1,
          class W = fk_sm90_walk<CL, GR, WV>>
static __device__ __forceinline__ void fk_sm90_producer(const CUtensorMap *ta, const CUtensorMap *tb,
                                                        const fk_gemm_params &p, uint32_t sa0,
                                                        uint32_t sb0, uint32_t full0,
                                                        uint32_t empty0)
{
    typedef fk_sm90_shape<BN, false, WV> S;
    if (p.num_kb > 0) {
        fk_tma_prefetch_desc(ta);
        fk_tma_prefetch_desc(tb);
    }
    int stage = 0;
    uint32_t phase = 0;
    W w; /* (the K-grouped kernel walks its own sequence: gemm_kg.cuh) */
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int brow = GR ? w.g * p.grp_brows : 0; /* grouped: expert g's rows of B */
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            fk_mbar_wait(empty0 + 8 * stage, phase ^ 1u);
            const uint32_t full = full0 + 8 * stage;
            fk_mbar_arrive_expect_tx(full, S::A_BYTES + S::B_BYTES);
#pragma unroll
            for (int l = 0; l < WV; l++) /* one 128-row box per wave */
                fk_tma_load_2d(sa0 + stage * S::A_BYTES + l * FK_GEMM_BM * FK_GEMM_BK, ta, full, kb * FK_GEMM_BK,
                               w.row0 + l * FK_GEMM_BM);
            if (CL == 1)
                fk_tma_load_2d(sb0 + stage * S::B_BYTES, tb, full, kb * FK_GEMM_BK, brow + tn * BN);
            else
                fk_tma_load_2d_mc(sb0 + stage * S::B_BYTES + w.rank * (S::B_BYTES / CL), tb, full, kb * FK_GEMM_BK,
                                  tn * BN + w.rank * (BN / CL), (uint16_t)((1u << CL) - 1u));
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

/* Stream-K tail (fk_sm90_sk_plan in gemm.cu). A tail tile is split along K
 * into s = p.sk_parts parts, run by s different CTAs as the last item of
 * each. Parts 0 .. s - 2 write their fp32 sums to their slots of the
 * workspace, in the consumer threads' own register order (coalesced
 * 16-byte stores), and raise their flags; part s - 1, in the highest CTAs,
 * waits for the flags, adds the slots to its own sums in part order (the
 * result is the same in every run) and runs the epilogue. The writers never
 * wait, so the reducer's wait always ends even when not every CTA of the
 * grid can be resident at once. A flag holds this launch's token
 * p.sk_token (a fresh 64-bit value per launch; a launch captured in a CUDA
 * graph keeps its token, and the host puts a memset of the flags before it),
 * so a flag left by an earlier launch or whatever the workspace held before
 * does not match. Each consumer warpgroup hands off its own 64 rows. */
template <int BN, int TS, class W>
static __device__ __forceinline__ fk_epi_pre fk_sm90_sk_start(const fk_gemm_params &p, const W &w, float *tab, int n0,
                                                              int wg, int tid)
{
    if (w.part >= 0 && w.part < p.sk_parts - 1)
        return fk_epi_pre{}; /* a writer part: no epilogue */
    return fk_sm90_epi_start<BN, TS>(p, tab, w.row0 + wg * 64, n0, tid, w.m_end, w.g);
}

/* After the item's last K block: whether this warpgroup runs the epilogue
 * (a whole tile, or the reducing part with the other parts added in). */
template <class W, int NACC>
static __device__ __forceinline__ bool fk_sm90_sk_finish(const fk_gemm_params &p, const W &w, float (&acc)[NACC],
                                                         int wg, int tid)
{
    if (w.part < 0)
        return true;
    constexpr int V = NACC / 4; /* float4 per thread */
    const int s1 = p.sk_parts - 1;
    const uint64_t token = p.sk_token;
    if (w.part < s1) {
        const int slot = w.slot + w.part;
        float4 *dst = (float4 *)p.sk_ws + (size_t)(2 * slot + wg) * V * 128 + tid;
#pragma unroll
        for (int i = 0; i < V; i++)
            __stcg(dst + i * 128, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
        __threadfence();
        fk_named_bar_sync(1 + wg, 128);
        if (tid == 0)
            fk_st_release_u64(p.sk_flags + 2 * slot + wg, token);
        return false;
    }
    if (tid == 0) {
        for (int q = 0; q < s1; q++)
            while (fk_ld_acquire_u64(p.sk_flags + 2 * (w.slot + q) + wg) != token)
                __nanosleep(100);
    }
    fk_named_bar_sync(1 + wg, 128);
    for (int q = 0; q < s1; q++) {
        const float4 *src = (const float4 *)p.sk_ws + (size_t)(2 * (w.slot + q) + wg) * V * 128 + tid;
#pragma unroll
        for (int i = 0; i < V; i++) {
            const float4 v = __ldcg(src + i * 128);
            acc[4 * i] += v.x;
            acc[4 * i + 1] += v.y;
            acc[4 * i + 2] += v.z;
            acc[4 * i + 3] += v.w;
        }
    }
    return true;
}

/* Consumer warpgroup wg (0 or 1): rows wg * 64 .. wg * 64 + 63 of each tile. */
/* accf += acc times the block scales of a tile spanning two 128-column scale
 * blocks of B: accumulators below SPLIT (columns below 2 SPLIT) take the
 * first block's (lo / hi: rows r0 / r0 + 8), the others the second's. */
template <int SPLIT, int NACC>
static __device__ __forceinline__ void fk_sm90_promote2(float (&accf)[NACC], const float (&acc)[NACC], float lo,
                                                        float hi, float lo2, float hi2)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        accf[i] = fmaf(acc[i], i < SPLIT ? ((i & 2) ? hi : lo) : ((i & 2) ? hi2 : lo2), accf[i]);
}

template <int BN, int PROMO, bool BLOCK, int AB, int CL, int TS, bool GR = false>
static __device__ __forceinline__ void fk_sm90_consumer(const fk_gemm_params &p, int wg,
                                                        uint32_t sa0, uint32_t sb0,
                                                        uint32_t full0, uint32_t empty0,
                                                        float *stage_out, float *tab)
{
    typedef fk_sm90_shape<BN, (TS != 0)> S;
    constexpr int KSTEPS = FK_GEMM_BK / 32; /* wgmma k32 steps per stage */
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    /* fast accumulation (PROMO 0) needs no second set: the epilogue reads acc */
    float acc[S::NACC], accf[PROMO ? S::NACC : 1];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0; /* stages this warpgroup has issued (for the lag) */
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, GR> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int r0 = w.row0 + wg * 64 + warp * 16 + (lane >> 2); /* (grouped: tm is not the tile's row) */
        const fk_epi_pre pre = fk_sm90_sk_start<BN, TS>(p, w, tab, tn * BN, wg, tid);
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
        const float *sa_lo = BLOCK ? p.sa + (long long)min(r0, p.m - 1) * p.sa_sm + w.kb0 * p.sa_sk : nullptr;
        const float *sa_hi = BLOCK ? p.sa + (long long)min(r0 + 8, p.m - 1) * p.sa_sm + w.kb0 * p.sa_sk : nullptr;
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
            const uint32_t a_base = sa0 + stage * S::A_BYTES + wg * 64 * FK_GEMM_BK;
            const uint32_t b_base = sb0 + stage * S::B_BYTES;
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
                fk_wgmma<BN, AB>::mma(acc, fk_wgmma_desc_sw128(a_base + ks * 32),
                                      fk_wgmma_desc_sw128(b_base + ks * 32), sd);
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
            if (fk_sm90_sk_finish(p, w, acc, wg, tid))
                fk_sm90_epilogue<BN, TS>(p, acc, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        } else {
            if (fk_sm90_sk_finish(p, w, accf, wg, tid))
                fk_sm90_epilogue<BN, TS>(p, accf, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
        }
    }
    fk_sm90_lag_end(p, wg, issued);
}

/* Issues the 4 k32 wgmma steps of one stage into acc (overwriting it) and
 * commits them as one group. */
template <int BN, int AB, int NACC>
static __device__ __forceinline__ void fk_sm90_issue(float (&acc)[NACC], uint32_t a_base, uint32_t b_base)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    fk_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < FK_GEMM_BK / 32; ks++)
        fk_wgmma<BN, AB>::mma(acc, fk_wgmma_desc_sw128(a_base + ks * 32),
                              fk_wgmma_desc_sw128(b_base + ks * 32), ks > 0);
    fk_wgmma_commit();
}

/* accf += acc (times the block scales of rows r0 / r0 + 8 when BLOCK). */
template <bool BLOCK, int NACC>
static __device__ __forceinline__ void fk_sm90_promote(float (&accf)[NACC], float (&acc)[NACC], float s_lo,
                                                       float s_hi)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    if (BLOCK) {
        /* fmaf: one rounding and one instruction (the build has
         * --fmad=false; a separate multiply and add made block-scaled
         * GEMMs 8-13% slower, H100, 2026-11-25: 8192^3 1202 vs 1090 us) */
#pragma unroll
        for (int i = 0; i < NACC; i++)
            accf[i] = fmaf(acc[i], (i & 2) ? s_hi : s_lo, accf[i]);
    } else {
#pragma unroll
        for (int i = 0; i < NACC; i++)
            accf[i] = accf[i] + acc[i];
    }
}

/* Consumer with promotion every stage (128 of K), pipelined: two wgmma
 * accumulator sets; the group of K block kb runs on the tensor cores while
 * the finished group of kb - 1 is promoted (and its stage released), so the
 * promotion is off the MMA critical path. Block scales are loaded two K
 * blocks ahead of their use. */
template <int BN, bool BLOCK, int AB, int CL, int TS, bool GR = false>
static __device__ __forceinline__ void fk_sm90_consumer_pipe(const fk_gemm_params &p, int wg,
                                                             uint32_t sa0, uint32_t sb0,
                                                             uint32_t full0, uint32_t empty0,
                                                             float *stage_out, float *tab)
{
    typedef fk_sm90_shape<BN, (TS != 0)> S;
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    float acc0[S::NACC], acc1[S::NACC], accf[S::NACC];
    int stage = 0;
    uint32_t phase = 0;
    int issued = 0; /* stages this warpgroup has issued (for the lag) */
    fk_sm90_lag_start(p, wg);
    fk_sm90_walk<CL, GR> w;
    for (; w.more(p); w.t += w.step) {
        int tm, tn;
        w.tile(p, tm, tn);
        const int r0 = w.row0 + wg * 64 + warp * 16 + (lane >> 2); /* (grouped: tm is not the tile's row) */
        const fk_epi_pre pre = fk_sm90_sk_start<BN, TS>(p, w, tab, tn * BN, wg, tid);
        const int nkb = w.kb1 - w.kb0;
#pragma unroll
        for (int i = 0; i < S::NACC; i++)
            accf[i] = 0.0f;
        /* (K blocks counted from the item's first, w.kb0) */
        const float *sa_lo = BLOCK ? p.sa + (long long)min(r0, p.m - 1) * p.sa_sm + w.kb0 * p.sa_sk : nullptr;
        const float *sa_hi = BLOCK ? p.sa + (long long)min(r0 + 8, p.m - 1) * p.sa_sm + w.kb0 * p.sa_sk : nullptr;
        const float *sb_t = BLOCK ? p.sb + (GR ? w.g * p.sb_g : 0) + (long long)((tn * BN) >> 7) * p.sb_ld + w.kb0
                                  : nullptr;
        /* v = scales of the block promoted next, w = of the one after */
        float v_lo = 1.0f, v_hi = 1.0f, v_b = 1.0f, w_lo = 1.0f, w_hi = 1.0f, w_b = 1.0f;
        if (!BLOCK) {
            /* (the f16 variants) an opaque 1: promoting through the block
             * variants' multiply-add keeps ptxas from serializing the wgmma
             * groups (C7514), which it does for a plain add; acc * 1 is exact */
            v_lo = fk_opaque_f32<0x3f800000u>();
            v_hi = v_lo;
            v_b = v_lo;
        }
        if (BLOCK && nkb > 0) {
            v_lo = sa_lo[0];
            v_hi = sa_hi[0];
            v_b = sb_t[0];
            if (nkb > 1) {
                w_lo = sa_lo[p.sa_sk];
                w_hi = sa_hi[p.sa_sk];
                w_b = sb_t[1];
            }
        }
        if (nkb > 0) {
            fk_mbar_wait(full0 + 8 * stage, phase);
            fk_sm90_issue<BN, AB>(acc0, sa0 + stage * S::A_BYTES + wg * 64 * FK_GEMM_BK,
                                  sb0 + stage * S::B_BYTES);
            int pstage = stage; /* stage of the group in flight */
            fk_sm90_lag_step(p, wg, ++issued);
            if (++stage == S::STAGES) {
                stage = 0;
                phase ^= 1u;
            }
            /* Step kb: issue kb into one set, wait for kb - 1 in the other,
             * promote it, release its stage, shift the scale registers. */
#define FK_PIPE_STEP(NEW, OLD)                                                                   \
    {                                                                                            \
        fk_mbar_wait(full0 + 8 * stage, phase);                                                  \
        fk_sm90_issue<BN, AB>(NEW, sa0 + stage * S::A_BYTES + wg * 64 * FK_GEMM_BK,              \
                              sb0 + stage * S::B_BYTES);                                         \
        fk_wgmma_wait<1>();                                                                      \
        if (lane == 0)                                                                           \
            fk_sm90_release<CL>(empty0 + 8 * pstage);                                            \
        fk_sm90_promote<true>(accf, OLD, v_lo * v_b, v_hi * v_b);                                \
        pstage = stage;                                                                          \
        fk_sm90_lag_step(p, wg, ++issued);                                                       \
        if (++stage == S::STAGES) {                                                              \
            stage = 0;                                                                           \
            phase ^= 1u;                                                                         \
        }                                                                                        \
        if (BLOCK) {                                                                             \
            v_lo = w_lo;                                                                         \
            v_hi = w_hi;                                                                         \
            v_b = w_b;                                                                           \
            if (kb + 1 < nkb) {                                                                  \
                w_lo = sa_lo[(long long)(kb + 1) * p.sa_sk];                                     \
                w_hi = sa_hi[(long long)(kb + 1) * p.sa_sk];                                     \
                w_b = sb_t[kb + 1];                                                              \
            }                                                                                    \
        }                                                                                        \
        kb++;                                                                                    \
    }
            /* invariant at the loop head: the group of kb - 1 is in acc0 */
            int kb = 1;
            for (; kb + 1 < nkb;) {
                FK_PIPE_STEP(acc1, acc0)
                FK_PIPE_STEP(acc0, acc1)
            }
            if (kb < nkb) {
                FK_PIPE_STEP(acc1, acc0)
                fk_wgmma_wait<0>();
                if (lane == 0)
                    fk_sm90_release<CL>(empty0 + 8 * pstage);
                fk_sm90_promote<true>(accf, acc1, v_lo * v_b, v_hi * v_b);
            } else {
                fk_wgmma_wait<0>();
                if (lane == 0)
                    fk_sm90_release<CL>(empty0 + 8 * pstage);
                fk_sm90_promote<true>(accf, acc0, v_lo * v_b, v_hi * v_b);
            }
#undef FK_PIPE_STEP
        }
        if (fk_sm90_sk_finish(p, w, accf, wg, tid))
            fk_sm90_epilogue<BN, TS>(p, accf, stage_out, tab, pre, w.row0 + wg * 64, tn * BN, tid, 1 + wg);
    }
    fk_sm90_lag_end(p, wg, issued);
}
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
            const uint32_t a_base = sa0 + stage * S::A_BYTES + wg * 64 * FK_GEMM_BK;
            const uint32_t b_base = sb0 + stage * S::B_BYTES;
            fk_sm90_issue<BN, AB>(acc, a_base, b_base);
            fk_wgmma_wait<0>();
            fk_sm90_promote<true>(accf0, acc, s[0], s[1]);
            fk_sm90_issue<BN, AB>(acc, a_base + FK_GEMM_BM * FK_GEMM_BK, b_base);
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

#endif

/* The general kernel's body; CL = CTAs per cluster (1 or 2). GR: the
 * grouped GEMM (gemm_grouped.cu): every CTA first checks the device offsets
 * and builds the group table of sched.cuh; with invalid offsets every CTA
 * leaves before loading or storing anything. */
template <int BN, int PROMO, bool BLOCK, int AB, int CL, int TS, bool GR = false, int WV = 1>
static __device__ __forceinline__ void fk_sm90_body(const CUtensorMap &ta, const CUtensorMap &tb,
                                                    const fk_gemm_params &p)
{
#ifdef FK_SM90_DEVICE
    typedef fk_sm90_shape<BN, (TS != 0), WV> S;
    static_assert(WV == 1 || (BLOCK && PROMO == 4 && TS == 0 && !GR), "two-wave tiles: block scales, general epilogue");
    extern __shared__ __align__(1024) unsigned char fk_smem[];
    const uint32_t base = (fk_smem_addr(fk_smem) + 1023u) & ~1023u;
    const uint32_t sa0 = base;
    const uint32_t sb0 = sa0 + S::STAGES * S::A_BYTES;
    const uint32_t out0 = sb0 + S::STAGES * S::B_BYTES;
    const uint32_t full0 = out0 + S::EPI_BYTES;
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
    /* launched with programmatic dependent launch (gemm.cu): no global
     * memory access before the previous grid's writes are visible */
    fk_grid_dep_wait();
    if constexpr (GR) {
        static_assert(CL == 1 && !TS, "grouped: single CTAs, general epilogues");
        const bool ok = fk_grp_prepare(p.grp_offs, p.grp_count, p.m, p.grp_masked_m, (int *)(fk_smem + p.grp_tab));
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.grp_status)
            *p.grp_status = ok ? 0 : (int)FP8KIT_ERR_INVALID_ARGUMENT;
        if (!ok)
            return;
    }
    const int wg = threadIdx.x >> 7;
    if (wg == 2) {
        fk_setmaxnreg_dec<40>();
        if (threadIdx.x == 256)
            fk_sm90_producer<BN, S::STAGES, CL, GR, WV>(&ta, &tb, p, sa0, sb0, full0, empty0);
    } else {
        fk_setmaxnreg_inc<232>();
        /* TS: both staging areas first, so each stays 1024-aligned for the
         * swizzled TMA stores; then the two tables */
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
         * BN / 2 accumulators do not fit in the registers. */
        if constexpr (WV == 2)
            fk_sm90_consumer_2w<BN, AB, CL>(p, wg, sa0, sb0, full0, empty0, stage_out, tab);
        else if constexpr (PROMO == 4 && (BLOCK || AB == 4) && BN <= 128)
            fk_sm90_consumer_pipe<BN, BLOCK, AB, CL, TS, GR>(p, wg, sa0, sb0, full0, empty0, stage_out, tab);
        else
            fk_sm90_consumer<BN, PROMO, BLOCK, AB, CL, TS, GR>(p, wg, sa0, sb0, full0, empty0, stage_out, tab);
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

/* Two-wave (256-row) block-scaled tiles, single CTAs and clusters of 2 along M. */
template <int BN, int AB>
__global__ void __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_w2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                           const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 1, 0, false, 2>(ta, tb, p);
}
template <int BN, int AB>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(FK_GEMM_THREADS, 1)
    fk_gemm_sm90_kernel_w2c2(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                             const __grid_constant__ fk_gemm_params p)
{
    fk_sm90_body<BN, 4, true, AB, 2, 0, false, 2>(ta, tb, p);
}

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
 * gemm_mx.cuh. */
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

/* One wgmma k32 step into acc (overwriting it), committed as its own group. */
template <int BN, int AB, int NACC>
static __device__ __forceinline__ void fk_mx_issue(float (&acc)[NACC], uint32_t a, uint32_t b)
{
#pragma unroll
    for (int i = 0; i < NACC; i++)
        fk_reg_fence(acc[i]);
    fk_wgmma_fence();
    fk_wgmma<BN, AB>::mma(acc, fk_wgmma_desc_sw128(a), fk_wgmma_desc_sw128(b), 0);
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
 * the K-grouped kernel (KG true, gemm_kg.cuh; one table pair per stage).
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
 * coincide (fk_sm90_lag_start). W: the work walk
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
    const uint32_t wa = sa0 + wg * 64 * FK_GEMM_BK; /* this warpgroup's 64 rows of A */
    float acc[G::NACC], accf[G::NACC];
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
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            fk_mbar_wait(full0 + 8 * stage, phase);
            const float *area = (const float *)(sc0 + stage * S::SC_BYTES);
            const uint32_t a = wa + stage * G::A_BYTES, b = sb0 + stage * G::B_BYTES;
            bool one = true, slow = false;
            if (!KG) {
                slow = fk_mx_slow<BN, NQ>(area);
                one = fk_mx_uniform<BN, NQ>(area) && !slow;
            }
            /* the stage's A and B tiles are released as soon as its last
             * wgmma group is done, before the promotion; its scale area
             * (read by the promotion) after it */
            if (one) {
                fk_sm90_issue<BN, AB>(acc, a, b);
                fk_wgmma_wait<0>();
                if (lane == 0)
                    fk_mbar_arrive(empty0 + 8 * stage);
                fk_rc_promote<BN>(accf, acc, area, area + TB, rl, cq);
            } else {
#pragma unroll 1
                for (int ks = 0; ks < 4; ks++) {
                    fk_mx_issue<BN, AB>(acc, a + 32 * ks, b + 32 * ks);
                    fk_wgmma_wait<0>();
                    if (ks == 3 && lane == 0)
                        fk_mbar_arrive(empty0 + 8 * stage);
                    fk_mx_promote<BN>(accf, acc, area, slow, ks, rl, cq);
                }
            }
            __syncwarp();
            if (lane == 0)
                fk_mbar_arrive(sempty0 + 8 * stage);
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
#endif

#include "cuda/gemm_kg.cuh" /* the K-grouped kernel's shape, walk and helper warps */

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
            fk_mbar_init(sempty0 + 8 * s, 8);    /* the scale area: the same, after the promotion */
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

#define FK_V(BN, PROMO, BLOCK, AB)                                                      \
    {BN, PROMO, BLOCK, AB, fk_sm90_shape<BN>::STAGES, fk_sm90_shape<BN>::SMEM,         \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB>, 1, 0}

#define FK_VTS(BN, PROMO, BLOCK, AB)                                                    \
    {BN, PROMO, BLOCK, AB, fk_sm90_shape<BN, true>::STAGES, fk_sm90_shape<BN, true>::SMEM, \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB, 1>, 1, 1}

#define FK_VTS2(BN, PROMO)                                                              \
    {BN, PROMO, false, 0, fk_sm90_shape<BN, true>::STAGES, fk_sm90_shape<BN, true>::SMEM, \
     fk_gemm_sm90_kernel<BN, PROMO, false, 0, 2>, 1, 2}

#define FK_VC2(BN, PROMO, BLOCK, AB)                                                    \
    {BN, PROMO, BLOCK, AB, fk_sm90_shape<BN>::STAGES, fk_sm90_shape<BN>::SMEM,         \
     fk_gemm_sm90_kernel_c2<BN, PROMO, BLOCK, AB>, 2, 0}

#define FK_VMX(BN, AB)                                                                   \
    {BN, 1, 2, AB, fk_sm90_mx_shape<BN>::STAGES, fk_sm90_mx_shape<BN>::SMEM, fk_gemm_sm90_mx_kernel<BN, AB>, 1, 0}

/* The variants the planner may pick (gemm.cu). Precise accumulation promotes
 * every 128 of K (PROMO 4); PROMO 1 and 2 exist to measure the accuracy of
 * shorter intervals. */
const fk_sm90_variant fk_sm90_variants[] = {
    FK_V(128, 4, false, 0), FK_V(128, 4, false, 1), FK_V(128, 4, false, 2), FK_V(128, 4, false, 3),
    FK_V(64, 4, false, 0),  FK_V(128, 0, false, 0), FK_V(64, 0, false, 0),  FK_V(128, 4, true, 0),
    FK_V(64, 4, true, 0),   FK_V(128, 2, false, 0), FK_V(128, 1, false, 0), FK_V(192, 4, false, 0),
    FK_V(192, 0, false, 0), FK_V(256, 0, false, 0),
    /* block scaling with e5m2 on either side (128 wide only: the planner
     * falls back from 64 to 128 for these) */
    FK_V(128, 4, true, 1),  FK_V(128, 4, true, 2),  FK_V(128, 4, true, 3),
    /* block scaling, 192 wide (two B scale blocks per tile; the plain consumer) */
    FK_V(192, 4, true, 0),
    /* MX (block 2): promotion after every k32 step (promo 1) */
    FK_VMX(128, 0),         FK_VMX(128, 1),         FK_VMX(128, 2),         FK_VMX(128, 3),
    FK_VMX(64, 0),          FK_VMX(192, 0),
    /* clusters of 2 along M with B multicast (tuning gemm_cluster=2, or autotune): the wide tiles of
     * large shapes. H100, 2026-11-22: within +-2% of the single-CTA kernel at large shapes (L2 is
     * not the limit there), 15-18% slower at 4096-class shapes (no TMA-store epilogue, no
     * stream-K, each stage waits for the slower CTA of the pair), so the heuristic does not pick
     * them. */
    FK_VC2(192, 4, false, 0), FK_VC2(256, 0, false, 0),
    /* block scaling in clusters of 2 (B multicast halves B's L2 reads per CTA) */
    FK_VC2(128, 4, true, 0), FK_VC2(192, 4, true, 0),
    /* block scaling on 256-row tiles (two waves; tuning gemm_bm=256), alone and in clusters of 2 */
    {128, 4, true, 0, fk_sm90_shape<128, false, 2>::STAGES, fk_sm90_shape<128, false, 2>::SMEM,
     fk_gemm_sm90_kernel_w2<128, 0>, 1, 0, 2},
    {128, 4, true, 0, fk_sm90_shape<128, false, 2>::STAGES, fk_sm90_shape<128, false, 2>::SMEM,
     fk_gemm_sm90_kernel_w2c2<128, 0>, 2, 0, 2},
    /* TMA-store epilogue (plain epilogues): a smaller epilogue area, one stage more */
    FK_VTS(256, 0, false, 0), FK_VTS(192, 4, false, 0), FK_VTS(192, 0, false, 0), FK_VTS(128, 4, false, 0),
    FK_VTS(128, 0, false, 0),
    /* the same with a column bias and / or an activation in the TMA-store epilogue (tma_store 2) */
    FK_VTS2(256, 0), FK_VTS2(192, 4), FK_VTS2(192, 0), FK_VTS2(128, 4), FK_VTS2(128, 0),
    /* precise fp32 output on fp16 copies of A and B (ab 4, gemm_f16.cu): promotion every 64 of K
     * (4 k16 steps); promo 0 only measures the f16 tensor cores' own accumulation */
    FK_V(128, 4, false, 4), FK_V(64, 4, false, 4), FK_V(192, 4, false, 4), FK_V(128, 0, false, 4),
};
const int fk_sm90_variant_count = (int)(sizeof fk_sm90_variants / sizeof fk_sm90_variants[0]);

/* The grouped GEMM's variants (gemm_grouped.cu): the general kernel with the
 * group mapping (GR); the group table follows the variant's shared memory. */
#define FK_VG(BN, PROMO, BLOCK, AB)                                                     \
    {BN, PROMO, BLOCK, AB, fk_sm90_shape<BN>::STAGES, fk_sm90_shape<BN>::SMEM,         \
     fk_gemm_sm90_kernel<BN, PROMO, BLOCK, AB, false, true>, 1, 0}
#define FK_VMXG(BN, AB)                                                                  \
    {BN, 1, 2, AB, fk_sm90_mx_shape<BN>::STAGES, fk_sm90_mx_shape<BN>::SMEM, fk_gemm_sm90_mxg_kernel<BN, AB>, 1, 0}
const fk_sm90_variant fk_sm90_grouped_variants[] = {
    FK_VG(128, 4, false, 0), FK_VG(128, 4, false, 1), FK_VG(128, 4, false, 2), FK_VG(128, 4, false, 3),
    FK_VG(128, 0, false, 0), FK_VG(192, 4, false, 0), FK_VG(192, 0, false, 0), FK_VG(256, 0, false, 0),
    /* block scales (1x128 x 128x128): the dense kernel's block consumer, 128 wide */
    FK_VG(128, 4, true, 0),  FK_VG(128, 4, true, 1),  FK_VG(128, 4, true, 2),  FK_VG(128, 4, true, 3),
    /* MX (block 2): the MX kernel's consumers and helper warps (promo 1: every k32 step unless
     * a stage's rows have one scale each) */
    FK_VMXG(128, 0), FK_VMXG(128, 1), FK_VMXG(128, 2), FK_VMXG(128, 3), FK_VMXG(192, 0),
};
const int fk_sm90_grouped_variant_count =
    (int)(sizeof fk_sm90_grouped_variants / sizeof fk_sm90_grouped_variants[0]);

#define FK_VKG(BN, AB)                                                                               \
    {BN, 4, 3, AB, fk_sm90_kg_shape<BN>::STAGES, fk_sm90_kg_shape<BN>::SMEM, fk_gemm_sm90_kg_kernel<BN, AB>, 1, 0}

/* The K-grouped kernels (block 3: row x column scales per 128 of K), 128 wide for every fp8
 * type pair, 192 wide for e4m3 x e4m3 (the planner's choice when it exists, gemm_k_grouped.cu). */
const fk_sm90_variant fk_sm90_kg_variants[] = {FK_VKG(128, 0), FK_VKG(128, 1), FK_VKG(128, 2), FK_VKG(128, 3),
                                               FK_VKG(192, 0)};
const int fk_sm90_kg_variant_count = (int)(sizeof fk_sm90_kg_variants / sizeof fk_sm90_kg_variants[0]);
