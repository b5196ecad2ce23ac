/* store_general.cuh - the general store path of the Hopper GEMM epilogue: accumulators
 * staged in shared memory 32 columns at a time, every epilogue option,
 * coalesced row stores (output quantization through epilogue_quant.cuh). */
#ifndef FK_SM90_STORE_GENERAL_CUH
#define FK_SM90_STORE_GENERAL_CUH

#include "cuda/gemm/sm90/epilogue_quant.cuh"

#ifdef __CUDACC__
/* Epilogue of one consumer warpgroup (threads tid 0..127) for its 64 rows
 * m0 .. m0 + 63 and columns n0 .. n0 + BN - 1 of the output. acc holds the
 * wgmma m64nBN fragment (rows warp * 16 + lane / 4 + {0, 8}, columns
 * 8 j + 2 (lane % 4) + {0, 1}, value acc[4 j + 2 i + e]); it is consumed
 * (shifted down) chunk by chunk. The prefetched factors go to the table tab.
 * For each chunk of 32 columns:
 * 1. each thread writes its part of the fragment to the staging chunk;
 * 2. after a warpgroup barrier, each thread takes 4 consecutive columns of a
 *    row (8 threads per row: 64-byte segments of bf16 output), applies
 *    tensor/row scales (block scales were applied in the main loop), alpha,
 *    beta * C, bias, activation and the output cast, and stores them. Rows
 *    and columns past M, N are skipped.
 * The chunk and row loops are not unrolled: one copy of the epilogue code,
 * whatever the options and the tile width. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue(const fk_gemm_params &p, float (&acc)[NACC], float *stage,
                                                   float *tab, const fk_epi_pre &pre, int m0, int n0, int tid,
                                                   int bar_id)
{
    if (p.out_quant == FP8KIT_OUTQ_MX || p.out_quant == FP8KIT_OUTQ_BLOCK1X128) {
        fk_epilogue_rowq<BN>(p, acc, tab, pre, m0, n0, tid, bar_id);
        return;
    }
    constexpr int CH = FK_EPI_CH;
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);

    constexpr int TPR = CH / 4;       /* threads per row */
    constexpr int RSTEP = 128 / TPR;  /* rows per pass */
    const int c4 = (tid % TPR) * 4;
    unsigned int amax = 0;
    const bool lean = !p.c && !p.bias && !p.act && p.out_quant == FP8KIT_OUTQ_NONE &&
                      (p.d_type == FP8KIT_BF16 || p.d_type == FP8KIT_F16 || p.d_type == FP8KIT_F32);
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
#pragma unroll 1
    for (int ch = 0; ch < BN / CH; ch++) {
#pragma unroll
        for (int j = 0; j < CH / 8; j++) {
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = warp * 16 + (lane >> 2) + 8 * i, c = 8 * j + (lane & 3) * 2;
                *(float2 *)&stage[fk_stage_idx(r, c)] = make_float2(acc[4 * j + 2 * i], acc[4 * j + 2 * i + 1]);
            }
        }
        /* the next chunk's fragment moves down into acc[0 .. CH / 2 - 1] */
#pragma unroll
        for (int i = 0; i + CH / 2 < NACC; i++)
            acc[i] = acc[i + CH / 2];
        fk_named_bar_sync(bar_id, 128);

        const int tc = ch * CH + c4; /* column inside the tile */
        const int col = n0 + tc;
        const int nv = min(4, p.n - col); /* valid columns of this thread (<= 0: none) */
        const float4 cv = *(const float4 *)&tab[tc];
        const float colf[4] = {cv.x, cv.y, cv.z, cv.w};
        if (lean) {
            /* The common case - scales and alpha only, 16/32-bit output: y =
             * acc * (alpha * sa * sb) in fp32 (the factor rounded once from
             * double in the tensor case), hardware conversion, one vector
             * store. */
            float cf[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                cf[e] = (float)((double)p.alpha * (double)(rowsc ? 1.0f : pre.sat) * (double)colf[e]);
#pragma unroll 1
            for (int r = tid / TPR; r < 64; r += RSTEP) {
                const int row = m0 + r;
                if (row >= pre.m_end || nv <= 0)
                    continue;
                const float4 v = *(const float4 *)&stage[fk_stage_idx(r, c4)];
                float y[4] = {v.x, v.y, v.z, v.w};
                const float sa = rowsc ? tab[2 * BN + r] : 1.0f;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    y[e] = rowsc ? y[e] * (sa * cf[e]) : y[e] * cf[e];
                const long long off = (long long)row * p.ldd + col;
                if (p.d_type != FP8KIT_F32 && nv == 4 && (((uintptr_t)p.d + 2 * off) & 7u) == 0) {
                    const bool bf = p.d_type == FP8KIT_BF16;
                    const uint32_t lo = bf ? fk_cvt_bf16x2(y[0], y[1]) : fk_cvt_f16x2(y[0], y[1]);
                    const uint32_t hi = bf ? fk_cvt_bf16x2(y[2], y[3]) : fk_cvt_f16x2(y[2], y[3]);
                    *(uint2 *)((uint16_t *)p.d + off) = make_uint2(lo, hi);
                } else {
                    fk_epi_store4(p, row, col, y, nv, amax);
                }
            }
        } else {
            const float4 bv = *(const float4 *)&tab[BN + tc];
            const float bcol[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll 1
            for (int r = tid / TPR; r < 64; r += RSTEP) {
                const int row = m0 + r;
                if (row >= pre.m_end || nv <= 0)
                    continue;
                const float4 v = *(const float4 *)&stage[fk_stage_idx(r, c4)];
                const float sa = tab[2 * BN + r]; /* row or tensor scale */
                const float brow = tab[2 * BN + 64 + r];
                const float a[4] = {v.x, v.y, v.z, v.w};
                float y[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    /* scale product in double, one rounding to fp32 (as the CPU backend) */
                    const float s = (float)((double)a[e] * ((double)sa * colf[e]));
                    const int cc = e < nv ? col + e : col; /* never read C past N */
                    y[e] = fk_epi_value(p, s, row, cc, p.bias_mode == FP8KIT_BIAS_ROW ? brow : bcol[e]);
                }
                fk_epi_store4(p, row, col, y, nv, amax);
            }
        }
        /* the staging chunk is rewritten by the next chunk */
        fk_named_bar_sync(bar_id, 128);
    }
    if (p.out_quant == FP8KIT_OUTQ_SCALED && p.amax_bits) {
        amax = __reduce_max_sync(0xFFFFFFFFu, amax);
        if (lane == 0 && amax)
            atomicMax(p.amax_bits, amax);
    }
}
#endif /* __CUDACC__ */
#endif
