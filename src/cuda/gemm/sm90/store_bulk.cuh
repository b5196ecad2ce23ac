/* store_bulk.cuh - the bulk-copy store paths of the Hopper GEMM epilogue: bf16/f16 rows
 * staged in shared memory and sent to D with one bulk copy per row, and fp32
 * rows added to D in place with one bulk reduce-add copy per row. */
#ifndef FK_SM90_STORE_BULK_CUH
#define FK_SM90_STORE_BULK_CUH

#include "cuda/gemm/sm90/epilogue_op.cuh"

#ifdef __CUDACC__
/* The epilogue for bf16/f16 output without C or output quantization, with
 * D 16-byte aligned and N and its row stride multiples of 8 (p.d_bulk):
 * each thread computes its fragment in registers - y = act(acc * (sa * f) +
 * bias), f from the table - and stores the 16-bit values into a staged
 * copy of the warpgroup's 64 x BN rows in shared memory (buf); then 64
 * threads each send one row to global memory with a bulk copy and the
 * warpgroup goes on to the next tile while the copies drain. Before buf is
 * written again each of those threads waits until its copy has read it. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_bulk(const fk_gemm_params &p, float (&acc)[NACC],
                                                        unsigned char *buf, float *tab, const fk_epi_pre &pre,
                                                        int m0, int n0, int tid, int bar_id)
{
    constexpr int RB = FK_EPI_ROW_BYTES(BN);
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    if (tid < 64)
        fk_bulk_wait_read<0>();
    fk_named_bar_sync(bar_id, 128);

    const int r_lo = warp * 16 + (lane >> 2), q2 = (lane & 3) * 2;
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW, bf = p.d_type == FP8KIT_BF16;
    const float sa_lo = rowsc ? tab[2 * BN + r_lo] : 1.0f, sa_hi = rowsc ? tab[2 * BN + r_lo + 8] : 1.0f;
    uint32_t *o_lo = (uint32_t *)(buf + r_lo * RB + q2 * 2), *o_hi = (uint32_t *)(buf + (r_lo + 8) * RB + q2 * 2);
    const float *cf = tab + 2 * BN + 128 + q2;
    if (!p.bias && !p.act) {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const float2 f = *(const float2 *)&cf[8 * j];
            const float y0 = acc[4 * j] * (sa_lo * f.x), y1 = acc[4 * j + 1] * (sa_lo * f.y);
            const float y2 = acc[4 * j + 2] * (sa_hi * f.x), y3 = acc[4 * j + 3] * (sa_hi * f.y);
            o_lo[4 * j] = bf ? fk_cvt_bf16x2(y0, y1) : fk_cvt_f16x2(y0, y1);
            o_hi[4 * j] = bf ? fk_cvt_bf16x2(y2, y3) : fk_cvt_f16x2(y2, y3);
        }
    } else {
        /* bias and activation: 64 columns per pass (not unrolled: one copy
         * of the activation code for 32 values, which interleave), the next
         * 32 accumulators shifted down after each pass; y = acc * (sa * f) +
         * (row bias + column bias) with one rounding (fma) */
        const bool brow = p.bias_mode == FP8KIT_BIAS_ROW;
        const float b_lo = brow ? tab[2 * BN + 64 + r_lo] : 0.0f, b_hi = brow ? tab[2 * BN + 64 + r_lo + 8] : 0.0f;
        const int act = p.act;
        constexpr int CW = BN % 64 == 0 ? 64 : 32; /* columns per pass */
#pragma unroll 1
        for (int jj = 0; jj < BN / CW; jj++) {
            float y[CW / 2];
            if (!rowsc && !brow) { /* the common case: one fma per value */
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    const int c = CW * jj + 8 * j4;
                    const float2 f = *(const float2 *)&cf[c], bc = *(const float2 *)&tab[BN + c + q2];
                    y[4 * j4] = fmaf(acc[4 * j4], f.x, bc.x);
                    y[4 * j4 + 1] = fmaf(acc[4 * j4 + 1], f.y, bc.y);
                    y[4 * j4 + 2] = fmaf(acc[4 * j4 + 2], f.x, bc.x);
                    y[4 * j4 + 3] = fmaf(acc[4 * j4 + 3], f.y, bc.y);
                }
            } else {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    const int c = CW * jj + 8 * j4;
                    const float2 f = *(const float2 *)&cf[c];
                    const float2 bc = brow ? make_float2(0.0f, 0.0f) : *(const float2 *)&tab[BN + c + q2];
                    y[4 * j4] = fmaf(acc[4 * j4], sa_lo * f.x, b_lo + bc.x);
                    y[4 * j4 + 1] = fmaf(acc[4 * j4 + 1], sa_lo * f.y, b_lo + bc.y);
                    y[4 * j4 + 2] = fmaf(acc[4 * j4 + 2], sa_hi * f.x, b_hi + bc.x);
                    y[4 * j4 + 3] = fmaf(acc[4 * j4 + 3], sa_hi * f.y, b_hi + bc.y);
                }
            }
            fk_epi_act_n(y, act);
            if (bf) {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    o_lo[(CW * jj + 8 * j4) / 2] = fk_cvt_bf16x2(y[4 * j4], y[4 * j4 + 1]);
                    o_hi[(CW * jj + 8 * j4) / 2] = fk_cvt_bf16x2(y[4 * j4 + 2], y[4 * j4 + 3]);
                }
            } else {
#pragma unroll
                for (int j4 = 0; j4 < CW / 8; j4++) {
                    o_lo[(CW * jj + 8 * j4) / 2] = fk_cvt_f16x2(y[4 * j4], y[4 * j4 + 1]);
                    o_hi[(CW * jj + 8 * j4) / 2] = fk_cvt_f16x2(y[4 * j4 + 2], y[4 * j4 + 3]);
                }
            }
#pragma unroll
            for (int i = 0; i + CW / 2 < NACC; i++)
                acc[i] = acc[i + CW / 2];
        }
    }
    fk_fence_proxy_async();
    fk_named_bar_sync(bar_id, 128);
    if (tid < 64 && m0 + tid < pre.m_end) {
        const int bytes = min(BN, p.n - n0) * 2;
        fk_bulk_store((uint16_t *)p.d + ((long long)(m0 + tid) * p.ldd + n0), fk_smem_addr(buf + tid * RB),
                      (uint32_t)bytes);
        fk_bulk_commit();
    }
}

/* The epilogue for fp32 D += y in place (p.d_bulk == FK_STORE_REDUCE: beta 1
 * and C = D, no bias, activation or output quantization, D 16-byte aligned,
 * N and its row stride multiples of 4; gemm/store.h fk_d32_reducible): y =
 * acc * (sa * f) as fk_epilogue_bulk computes it, in two passes of BN / 2
 * columns, each staged as fp32 rows in buf (the bulk path's rows: 2 BN + 16
 * bytes) and added to D by 64 threads, one bulk reduce-add copy per row; the
 * add happens in L2, so no thread waits for D, and the warpgroup goes on
 * while the copies drain. Before buf is written again each of those threads
 * waits until its copy has read it. */
template <int BN, int NACC>
static __device__ __forceinline__ void fk_epilogue_reduce(const fk_gemm_params &p, float (&acc)[NACC],
                                                          unsigned char *buf, float *tab, const fk_epi_pre &pre,
                                                          int m0, int n0, int tid, int bar_id)
{
    constexpr int RB = FK_EPI_ROW_BYTES(BN), H = BN / 2;
    static_assert(H % 8 == 0 && H * 4 + 16 <= RB, "a pass's fp32 row fits a staged row");
    const int warp = tid >> 5, lane = tid & 31;
    fk_epi_tab_write<BN>(p, tab, pre, tid);
    const int r_lo = warp * 16 + (lane >> 2);
    const bool rowsc = p.sa_mode == FP8KIT_SCALE_ROW;
    const float *cf = tab + 2 * BN + 128 + 2 * (lane & 3);
    float2 *o_lo = (float2 *)(buf + r_lo * RB) + (lane & 3), *o_hi = (float2 *)(buf + (r_lo + 8) * RB) + (lane & 3);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (tid < 64)
            fk_bulk_wait_read<0>();
        fk_named_bar_sync(bar_id, 128);
        const float sa_lo = rowsc ? tab[2 * BN + r_lo] : 1.0f, sa_hi = rowsc ? tab[2 * BN + r_lo + 8] : 1.0f;
#pragma unroll
        for (int j = 0; j < H / 8; j++) {
            const int a = 4 * (h * H / 8 + j);
            const float2 f = *(const float2 *)&cf[2 * a];
            o_lo[4 * j] = make_float2(acc[a] * (sa_lo * f.x), acc[a + 1] * (sa_lo * f.y));
            o_hi[4 * j] = make_float2(acc[a + 2] * (sa_hi * f.x), acc[a + 3] * (sa_hi * f.y));
        }
        fk_fence_proxy_async();
        fk_named_bar_sync(bar_id, 128);
        const int c0 = n0 + h * H, cols = min(H, p.n - c0);
        if (tid < 64 && m0 + tid < pre.m_end && cols > 0) {
            fk_bulk_reduce_add_f32((float *)p.d + ((long long)(m0 + tid) * p.ldd + c0), fk_smem_addr(buf + tid * RB),
                                   (uint32_t)cols * 4u);
            fk_bulk_commit();
        }
    }
}
#endif /* __CUDACC__ */
#endif
