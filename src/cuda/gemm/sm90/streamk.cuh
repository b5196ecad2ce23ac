/* streamk.cuh - the stream-K tail of the dense Hopper GEMM kernel: tail tiles split
 * along K, partial sums handed to the reducing CTA through the workspace. */
#ifndef FK_SM90_STREAMK_CUH
#define FK_SM90_STREAMK_CUH

#include "cuda/gemm/sm90/tile_epilogue.cuh"
#include "cuda/gemm/sm90/walk.cuh"

#ifdef FK_SM90_DEVICE
/* Stream-K tail (fk_sm90_sk_plan in gemm/sm90/dense_host.cu). A tail tile is split along K
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
#endif /* FK_SM90_DEVICE */
#endif
