/* store_tma.cuh - the TMA-store path of the Hopper GEMM epilogue (the TS variants):
 * bf16/f16 D through swizzled staging buffers and TMA tensor stores, one
 * warp per 16 rows. */
#ifndef FK_SM90_STORE_TMA_CUH
#define FK_SM90_STORE_TMA_CUH

#include "cuda/gemm/sm90/shape.cuh"

#ifdef __CUDACC__ /* (also compiled as host C++ by tests/emu/store_tma_emu.cpp) */
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
template <int BN, bool COLSC, bool BF, bool EXT, bool GR, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma_chunks(const fk_gemm_params &p, float (&acc)[NACC],
                                                              uint32_t buf, const float *cf, const float *bt,
                                                              float sa_lo, float sa_hi, float fu, int m0, int n0,
                                                              int tid, int m_end)
{
    const int warp = tid >> 5, lane = tid & 31;
    const int r_lo = warp * 16 + (lane >> 2), r_hi = r_lo + 8, q = lane & 3;
    const float fu_lo = sa_lo * fu, fu_hi = sa_hi * fu;
    const uint32_t w_lo = buf + r_lo * 64 + 4 * q, w_hi = buf + r_hi * 64 + 4 * q;
    const int x_lo = (r_lo >> 1) & 3, x_hi = (r_hi >> 1) & 3; /* the swizzle of each row's 16-byte units */
    const bool rows_in = m0 + warp * 16 < (GR ? m_end : p.m);
    /* GR: a warp whose 16 rows run past its group's last row, m_end, into rows of
     * D that belong to the next group (or to no group, in the masked layout), which
     * the TMA store would not clip: its lanes store the rows before m_end instead */
    const bool rows_cut = GR && m0 + warp * 16 + 16 > m_end && m_end < p.m;
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
        if (!rows_cut) {
            if (lane == 0 && rows_in) {
                fk_tma_store_2d(&p.td, buf + b + warp * 1024, n0 + 32 * c, m0 + warp * 16);
                fk_bulk_commit();
                fk_bulk_wait_read<1>(); /* this warp's store of chunk c - 1 has read the other buffer */
            }
        } else if (GR) {
            /* the warp's 16 rows x 4 swizzled 16-byte units (8 columns each; N is a
             * multiple of 8 on this path): lane l stores units l and l + 32 */
#pragma unroll
            for (int u = lane; u < 64; u += 32) {
                const int r = u >> 2, j = u & 3, row = m0 + warp * 16 + r, col = n0 + 32 * c + 8 * j;
                const uint4 v = fk_ld_shared_v4(buf + b + warp * 1024 + r * 64 + 16 * (j ^ ((r >> 1) & 3)));
                if (row < m_end && col < p.n)
                    *(uint4 *)((uint16_t *)p.d + ((long long)row * p.ldd + col)) = v;
            }
            if (lane == 0)
                fk_bulk_wait_read<0>(); /* (no store of this chunk: the one of chunk c - 1 is the latest) */
        }
        __syncwarp();
    }
}

/* The chunks with D's type (BF: bf16, else f16) as a template argument (one
 * conversion per pair instead of both under a predicate); EXT: the variants
 * for a bias or an activation (TS 2), so that the plain variants (TS 1)
 * carry none of that code. */
template <int BN, bool COLSC, bool EXT, bool GR, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma_d(const fk_gemm_params &p, float (&acc)[NACC], uint32_t buf,
                                                         const float *cf, const float *bt, float sa_lo, float sa_hi,
                                                         float fu, int m0, int n0, int tid, int m_end)
{
    if (p.d_type == FP8KIT_BF16)
        fk_epilogue_tma_chunks<BN, COLSC, true, EXT, GR>(p, acc, buf, cf, bt, sa_lo, sa_hi, fu, m0, n0, tid, m_end);
    else
        fk_epilogue_tma_chunks<BN, COLSC, false, EXT, GR>(p, acc, buf, cf, bt, sa_lo, sa_hi, fu, m0, n0, tid, m_end);
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
 * gemm/sm90/dense_host.cu; bf16 / f16 bias as BN / 2 raw column pairs, widened in the
 * epilogue), the A scales of the warp's 16 rows (lanes 0-15) and the
 * tensor scales (lanes 16, 17). Columns past N and rows past M read the
 * last one (their outputs are clipped). The warp's epilogue of the previous
 * tile read the table before its last __syncwarp, which precedes these
 * copies. */
template <int BN, bool EXT>
static __device__ __forceinline__ void fk_epi_tma_fetch(const fk_gemm_params &p, float *tab, int m0, int n0, int tid,
                                                        int g)
{
    const int warp = tid >> 5, lane = tid & 31;
    const uint32_t wt = fk_smem_addr(tab + warp * FK_EPI_WTAB(BN));
    const long long cg = (long long)g * p.n; /* (grouped: group g's row of B scales or bias) */
    if (p.sb_mode == FP8KIT_SCALE_ROW) {
#pragma unroll
        for (int i = 0; i < BN / 32; i++)
            fk_cp_async4(wt + 4 * (lane + 32 * i), p.sb + cg + min(n0 + lane + 32 * i, p.n - 1));
    } else if (EXT && p.bias) {
        if (p.bias_type == FP8KIT_F32) {
#pragma unroll
            for (int i = 0; i < BN / 32; i++)
                fk_cp_async4(wt + 4 * (lane + 32 * i), (const float *)p.bias + cg + min(n0 + lane + 32 * i, p.n - 1));
        } else { /* N is even here: pairs never straddle it */
#pragma unroll
            for (int i = 0; i < BN / 64; i++)
                fk_cp_async4(wt + 4 * (lane + 32 * i),
                             (const uint16_t *)p.bias + cg + min(n0 + 2 * (lane + 32 * i), p.n - 2));
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
template <int BN, bool EXT, bool GR, int NACC>
static __device__ __forceinline__ void fk_epilogue_tma(const fk_gemm_params &p, float (&acc)[NACC], uint32_t buf,
                                                       float *tab, const fk_epi_pre &pre, int m0, int n0, int tid)
{
    const int m_end = pre.m_end;
    if (!fk_epi_tma_tab<EXT>(p)) {
        const float fu = (float)((double)p.alpha * (double)pre.sat * (double)pre.sbt);
        fk_epilogue_tma_d<BN, false, EXT, GR>(p, acc, buf, nullptr, nullptr, 1.0f, 1.0f, fu, m0, n0, tid, m_end);
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
        fk_epilogue_tma_d<BN, true, EXT, GR>(p, acc, buf, wt + 2 * (lane & 3), nullptr, sa_lo, sa_hi, 1.0f, m0, n0,
                                             tid, m_end);
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
        fk_epilogue_tma_d<BN, false, EXT, GR>(p, acc, buf, nullptr, EXT && p.bias ? wt + 2 * (lane & 3) : nullptr,
                                              sa_lo, sa_hi, fu, m0, n0, tid, m_end);
    }
}
#endif /* __CUDACC__ */
#endif
