/* ep_kernels.cu - the launches of the expert-parallel layer's kernels
 * (ep_kernels.cuh) on the caller's stream, as ep_kernels.h declares them:
 * grids, block sizes, and the pointers into the object's allocation from its
 * geometry (ep_impl.h). */
#include "ep/nccl/ep_kernels.h"
#include "ep/nccl/ep_kernels.cuh"

/* Blocks along y for the row loops: about 4 per SM over all experts. */
static unsigned fk_ep_rows_grid(int64_t el, int64_t m, int sm_count)
{
    int64_t gy = 4 * (int64_t)(sm_count > 0 ? sm_count : 1) / el + 1;
    if (gy > m)
        gy = m;
    if (gy > 65535)
        gy = 65535;
    return (unsigned)(gy < 1 ? 1 : gy);
}

extern "C" cudaError_t fk_ep_launch_prep(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                         const int32_t *ids, const float *w, int64_t t, cudaStream_t s)
{
    unsigned char *send = base + g->off_send;
    const int64_t blocks = t > 0 ? (t + FK_EP_THREADS - 1) / FK_EP_THREADS : 1;
    fk_ep_prep_kernel<<<(unsigned)blocks, FK_EP_THREADS, 0, s>>>(
        (int32_t *)send, (int32_t *)(send + g->ck_ids), (float *)(base + g->off_w), (int32_t *)(base + g->off_retidx),
        (int32_t *)(base + g->off_status), ids, w, t, (int)cfg->top_k, (int32_t)cfg->num_experts, (int32_t)g->el,
        (int32_t)(cfg->max_tokens * g->kp), (int32_t)g->kp);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_unpack(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                           int sm_count, cudaStream_t s)
{
    const unsigned char *recv = base + g->off_recv;
    int32_t *counts = (int32_t *)(base + g->off_counts), *slot = (int32_t *)(base + g->off_slot);
    fk_ep_scan_kernel<<<(unsigned)g->el, FK_EP_THREADS, 0, s>>>(
        recv, g->chunk, g->ck_ids, counts, slot, (int)g->world, (int32_t)g->rank, (int)cfg->top_k, (int32_t)g->el,
        (int32_t)cfg->max_tokens, (int32_t)g->kp, (int32_t)g->m);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    /* high throughput: the contiguous layout's row ends first */
    int32_t *ends = g->rows ? (int32_t *)(base + g->off_ends) : NULL;
    if (ends) {
        fk_ep_ends_kernel<<<1, 1, 0, s>>>(counts, counts, ends, (int32_t)g->el);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    const dim3 grid((unsigned)g->el, fk_ep_rows_grid(g->el, g->m, sm_count));
    fk_ep_copy_kernel<<<grid, FK_EP_THREADS, 0, s>>>(
        recv, g->chunk, g->ck_codes, g->ck_scales, counts, slot, base + g->off_x, base + g->off_scale, cfg->hidden,
        (int32_t)g->m, (int32_t)cfg->max_tokens, (int32_t)g->kp, cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR,
        (int32_t)g->mp4, ends);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_ret_pack(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                             const void *y, int64_t se, int64_t sr, int sm_count, cudaStream_t s)
{
    const int vec = (uintptr_t)y % 16 == 0 && (se * 2) % 16 == 0 && (sr * 2) % 16 == 0;
    const dim3 grid((unsigned)g->el, fk_ep_rows_grid(g->el, g->m, sm_count));
    fk_ep_ret_pack_kernel<<<grid, FK_EP_THREADS, 0, s>>>(
        (const uint16_t *)y, se, sr, vec, (const int32_t *)(base + g->off_counts),
        (const int32_t *)(base + g->off_slot), base + g->off_ret_send, g->ret_chunk, cfg->hidden, (int32_t)g->m,
        (int32_t)cfg->max_tokens, (int32_t)g->kp, g->rows ? (const int32_t *)(base + g->off_ends) : NULL);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_combine(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                            void *out, int64_t ld, int64_t t, cudaStream_t s)
{
    const int vec = (uintptr_t)out % 16 == 0 && (ld * 2) % 16 == 0;
    fk_ep_combine_kernel<<<(unsigned)t, 128, 0, s>>>(
        base + g->off_ret_recv, g->ret_chunk, (const int32_t *)(base + g->off_retidx), (const float *)(base + g->off_w),
        (uint16_t *)out, ld, vec, cfg->hidden, (int)cfg->top_k, (int32_t)(cfg->max_tokens * g->kp));
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_nep_prep(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                             const int32_t *ids, const float *w, int64_t t, cudaStream_t s)
{
    if (t <= 0)
        return cudaSuccess;
    unsigned char *send = base + g->off_send;
    fk_ep_nep_prep_kernel<<<(unsigned)((t + FK_EP_THREADS - 1) / FK_EP_THREADS), FK_EP_THREADS, 0, s>>>(
        (int32_t *)(send + g->ck_ids), (float *)(base + g->off_w), (int32_t *)(base + g->off_status), ids, w, t,
        (int)cfg->top_k, (int32_t)cfg->num_experts);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_nep_scales(const fk_ep_geom *g, unsigned char *base, int sm_count, cudaStream_t s)
{
    if (g->rows) { /* high throughput: one (R, nb) block, rows below the last row end */
        const dim3 grid(1u, fk_ep_rows_grid(1, g->rows, sm_count));
        fk_ep_nep_scales_kernel<<<grid, FK_EP_THREADS, 0, s>>>(
            (const float *)(base + g->off_recv), (float *)(base + g->off_scale),
            (const int32_t *)(base + g->off_ends) + (g->el - 1), (int32_t)g->rows, (int32_t)g->nb, (int32_t)g->mp4);
        return cudaGetLastError();
    }
    const dim3 grid((unsigned)g->el, fk_ep_rows_grid(g->el, g->m, sm_count));
    fk_ep_nep_scales_kernel<<<grid, FK_EP_THREADS, 0, s>>>(
        (const float *)(base + g->off_recv), (float *)(base + g->off_scale), (const int32_t *)(base + g->off_counts),
        (int32_t)g->m, (int32_t)g->nb, (int32_t)g->mp4);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_nep_ends(const fk_ep_geom *g, unsigned char *base, cudaStream_t s)
{
    fk_ep_ends_kernel<<<1, 1, 0, s>>>((const int64_t *)(base + g->off_cnt64), (int32_t *)(base + g->off_counts),
                                      (int32_t *)(base + g->off_ends), (int32_t)g->el);
    return cudaGetLastError();
}

extern "C" cudaError_t fk_ep_launch_nep_weight(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                               const void *y, int sm_count, cudaStream_t s)
{
    fk_ep_nep_weight_kernel<<<(unsigned)(4 * (sm_count > 0 ? sm_count : 1)), FK_EP_THREADS, 0, s>>>(
        (const uint16_t *)y, (const float *)(base + g->off_slotw), (uint16_t *)(base + g->off_yw),
        (const int32_t *)(base + g->off_ends) + (g->el - 1), cfg->hidden);
    return cudaGetLastError();
}
