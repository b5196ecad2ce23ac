/* glu_host.cu - host side of the gated (swiglu) dense Hopper GEMM (the sm90_glu family,
 * kernels in gemm/sm90/kernels_glu.cu): fp8kit_gemm with FP8KIT_ACT_SWIGLU.
 * It comes first in the planner's order and declines every other job; the
 * other dense families never see a swiglu job. Tiles are 64 rows of D by 128
 * of its N/2 columns (both consumer warpgroups on the same rows), or with
 * promotion the paired tile's 128 rows by 128 columns in two halves
 * (gemm/sm90/shape.cuh NS 3); the plan is the variant (scaling, operands,
 * tile height) and the persistent grid. */
#include <stdio.h>
#include <string.h>
#include "cuda/cuda_state.h"
#include "cuda/driver.h"
#include "format/geometry.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/family.h"
#include "cuda/gemm/host.h"

#define FK_GLU_BND 128 /* columns of D per tile (the kernels' BN) */

fp8kit_status fk_f16_widen(fp8kit_ctx *ctx, const fk_gemm_job *job, void *ws, cudaStream_t st);

struct fk_glu_config {
    int32_t family;  /* FK_FAM_SM90_GLU */
    int32_t variant; /* index into fk_sm90_glu_variants */
    int32_t grid;
    int32_t group_m;
    int32_t device;
    int32_t pdl;
    int32_t items; /* tiles */
    int32_t lag;   /* stages consumer warpgroup 1 runs behind warpgroup 0 (tuning gemm_lag) */
};
static_assert(sizeof(fk_glu_config) <= FK_PLAN_CONFIG_BYTES, "plan config too large");

/* The variant of the job's operands, scaling and promotion, or -1: fast
 * accumulation (no promotion) where the dense family takes it - fast_accum,
 * no block scales, output other than fp32 - else promotion every 128 of K
 * (64 on the fp16 copies); cluster: CTAs per cluster (1, or 2: B multicast);
 * bm: rows per tile (64, or 128: the paired tile). */
static int fk_glu_variant_of(const fk_gemm_job *job, int cluster, int bm)
{
    const int f16 = fk_f16_path(job), block = job->desc.scale_a == FP8KIT_SCALE_BLOCK;
    const fk_sm90_operands ops = f16 ? FK_SM90_F16 : fk_sm90_fp8_pair(job->a_type, job->b_type);
    const fk_sm90_scaling sc = block ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN;
    const int promo = job->desc.fast_accum && !block && job->d_type != FP8KIT_F32 ? 0 : 4;
    for (int i = 0; i < fk_sm90_glu_variant_count; i++) {
        const fk_sm90_variant *v = &fk_sm90_glu_variants[i];
        if (v->ops == ops && v->scaling == sc && v->promo == promo && v->cluster == cluster && v->bm == bm)
            return i;
    }
    return -1;
}

static fp8kit_status fk_glu_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    const fp8kit_gemm_desc *dd = &job->desc;
    if (dd->act != FP8KIT_ACT_SWIGLU)
        return FK_DECLINED;
    fp8kit_status st = fk_sm90_can_implement(ctx, jp);
    if (st)
        return st;
    if (dd->scale_a == FP8KIT_SCALE_MX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: act=swiglu with mx scales is not implemented on the GPU yet");
    /* each warpgroup's gate and up rows promote with one B block scale each */
    if (dd->scale_a == FP8KIT_SCALE_BLOCK && (job->n / 2) % 128)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda gemm: act=swiglu with block scales needs N/2 to be a multiple of 128 on the GPU (the up "
                       "rows must start a 128x128 scale block; N = %lld)",
                       (long long)job->n);
    if (fk_glu_variant_of(job, 1, 64) < 0)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: act=swiglu has no GPU kernel for these operands");
    return FP8KIT_OK;
}

static fp8kit_status fk_glu_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    const fk_cuda_state *cs = fk_cuda(ctx);
    /* the paired tile where its 128-row items fill every SM at least once
     * (else 64-row tiles, twice as many), unless tuning gemm_bm says which;
     * clusters of 2 (tuning gemm_cluster=2, 64-row tiles) where the operands
     * have a variant; else single CTAs */
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    const int want = fk_tuned(tu->gemm_cluster, 1);
    const int64_t items128 = fk_ceil_div(job->m, 128) * fk_ceil_div(job->n / 2, FK_GLU_BND);
    const int bm = fk_tuned(tu->gemm_bm, 0) == 64    ? 64
                   : fk_tuned(tu->gemm_bm, 0) == 128 ? 128
                   : items128 >= cs->sm_count && want != 2 ? 128 : 64;
    int vi = want == 2 ? fk_glu_variant_of(job, 2, 64) : -1;
    if (vi < 0 && bm == 128)
        vi = fk_glu_variant_of(job, 1, 128);
    if (vi < 0)
        vi = fk_glu_variant_of(job, 1, 64);
    if (vi < 0)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: no gated variant");
    const fk_sm90_variant *v = &fk_sm90_glu_variants[vi];
    if ((size_t)v->smem_bytes > cs->smem_optin)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: kernel needs %d bytes of shared memory, device allows %zu",
                       v->smem_bytes, cs->smem_optin);
    FK_CUDA_CHECK(ctx, cudaSetDevice(cs->device));
    FK_CUDA_CHECK(ctx, cudaFuncSetAttribute((const void *)v->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            v->smem_bytes));
    /* work items: tiles, or (clusters) pairs of tiles on adjacent tile rows */
    const int64_t tiles =
        fk_ceil_div(fk_ceil_div(job->m, v->bm), v->cluster) * fk_ceil_div(job->n / 2, FK_GLU_BND);
    if (tiles > INT32_MAX / 2)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: too many output tiles");
    int slots = cs->sm_count;
    if (v->cluster > 1) {
        FK_CUDA_CHECK(ctx, fk_cuda_max_clusters((const void *)v->fn, v->cluster, FK_GEMM_THREADS,
                                                (size_t)v->smem_bytes, cs->sm_count, &slots));
        if (slots < 1)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: no 2-CTA cluster of the gated kernel fits");
    }
    fk_glu_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = FK_FAM_SM90_GLU;
    cfg.variant = vi;
    cfg.grid = (int32_t)((tiles < slots ? (tiles > 0 ? tiles : 1) : slots) * v->cluster);
    cfg.items = (int32_t)tiles;
    cfg.group_m = 1024 / v->bm / v->cluster; /* 1024 rows of A, as an L2 group of the 128-row kernels */
    cfg.device = cs->device;
    cfg.pdl = fk_tuned(tu->gemm_pdl, 1) != 0;
    cfg.lag = fk_tuned(tu->gemm_lag, 0);
    if (cfg.lag < 0 || cfg.lag >= v->stages)
        cfg.lag = 0;
    memcpy(config, &cfg, sizeof cfg);
    return FP8KIT_OK;
}

/* The gated families' tensor maps (host.h): A (rows_a, kbytes) in boxes of
 * the tile's bm rows, B (rows_b, kbytes) in 64-row boxes (gate or up rows),
 * memoized per plan. */
fp8kit_status fk_glu_maps(fp8kit_ctx *ctx, const fk_plan *plan, int device, const void *a, uint64_t rows_a,
                          uint64_t lda, const void *b, uint64_t rows_b, uint64_t ldb, uint64_t kbytes, int bm,
                          CUtensorMap tmaps[2])
{
    enum { FK_GLU_MAPS_BYTES = 2 * sizeof(CUtensorMap) };
    memset(tmaps, 0, FK_GLU_MAPS_BYTES);
    const uint64_t key[8] = {(uint64_t)(uintptr_t)a, rows_a, kbytes, lda, (uint64_t)(uintptr_t)b, rows_b, ldb,
                             0x474c5500u + (uint64_t)bm};
    static_assert(8 + FK_GLU_MAPS_BYTES / 8 <= FK_PLAN_MEMO_WORDS, "plan memo too small");
    if (fk_plan_memo_get(plan, key, 8, tmaps, FK_GLU_MAPS_BYTES))
        return FP8KIT_OK;
    CUresult r = fk_tma_map_2d_u8(&tmaps[0], a, rows_a, kbytes, lda, FK_GEMM_BK, (uint32_t)bm);
    if (r == CUDA_ERROR_INVALID_CONTEXT) { /* a new thread: make the primary context current */
        FK_CUDA_CHECK(ctx, cudaSetDevice(device));
        r = fk_tma_map_2d_u8(&tmaps[0], a, rows_a, kbytes, lda, FK_GEMM_BK, (uint32_t)bm);
    }
    if (r == CUDA_SUCCESS)
        r = fk_tma_map_2d_u8(&tmaps[1], b, rows_b, kbytes, ldb, FK_GEMM_BK, FK_GLU_BND / 2);
    if (r != CUDA_SUCCESS)
        return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm: cuTensorMapEncodeTiled failed (%d)", (int)r);
    fk_plan_memo_put(plan, key, 8, tmaps, FK_GLU_MAPS_BYTES);
    return FP8KIT_OK;
}

#define FK_GLU_MAX_DEVICES 64
#define FK_GLU_MAX_VARIANTS 32 /* (more: launched without the cached CUfunction) */
static CUfunction fk_glu_cufn[FK_GLU_MAX_DEVICES][FK_GLU_MAX_VARIANTS];

static fp8kit_status fk_glu_run(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    const fp8kit_gemm_desc *dd = &job->desc;
    fk_glu_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_glu_variant_count)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: bad plan");
    const fk_sm90_variant *v = &fk_sm90_glu_variants[cfg.variant];
    cudaStream_t st = (cudaStream_t)stream;
    const void *opa = job->a, *opb = job->b;
    uint64_t kbytes = (uint64_t)job->k, lda = (uint64_t)job->lda, ldb = (uint64_t)job->ldb;
    const int f16 = v->ops == FK_SM90_F16;
    if (f16) { /* precise fp32 output: fp16 copies of A and B (gemm/sm90/f16_widen.cu) */
        const fp8kit_status fst = fk_f16_operands(ctx, job, &opa, &opb, &kbytes, &lda, &ldb);
        if (fst)
            return fst;
    }
    FK_CUDA_CHECK(ctx, cudaSetDevice(cfg.device));
    if (dd->out_quant == FP8KIT_OUTQ_SCALED && job->amax_d)
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(job->amax_d, 0, sizeof(float), st));
    if (job->m == 0 || job->n == 0)
        return FP8KIT_OK;
    CUtensorMap tmaps[2]; /* (zeros when K = 0: nothing is loaded) */
    memset(tmaps, 0, sizeof tmaps);
    if (job->k > 0) {
        const fp8kit_status mst = fk_glu_maps(ctx, plan, cfg.device, opa, (uint64_t)job->m, lda, opb, (uint64_t)job->n,
                                              ldb, kbytes, v->bm, tmaps);
        if (mst)
            return mst;
    }
    fk_gemm_params p;
    fk_gemm_job_params(&p, job);
    p.n = (int)(job->n / 2); /* D's columns; y's up column of D's column c is glu_up + c */
    p.glu_up = (int)(job->n / 2);
    p.num_kb = (int)fk_ceil_div((int64_t)kbytes, FK_GEMM_BK);
    p.sched.tiles_m = (int)fk_ceil_div(fk_ceil_div(job->m, v->bm), v->cluster); /* in clusters */
    p.sched.tiles_n = (int)fk_ceil_div(job->n / 2, FK_GLU_BND);
    p.sched.group_m = cfg.group_m;
    p.lag = cfg.lag;
    if (dd->scale_a == FP8KIT_SCALE_BLOCK) { /* A (m, kb) at m * sa_sm + kb * sa_sk, B at (n / 128) * sb_ld + kb */
        fk_scale_geom ga, gb;
        fk_gemm_scale_geom(dd->scale_a, dd->scale_layout, 0, job->m, job->k, &ga);
        fk_gemm_scale_geom(dd->scale_b, dd->scale_layout, 1, job->n, job->k, &gb);
        p.sa_sm = ga.sr;
        p.sa_sk = ga.sc;
        p.sb_ld = gb.sr;
    }
    if (f16 && job->k > 0) {
        fp8kit_status wst = fk_f16_widen(ctx, job, job->workspace, st);
        if (wst)
            return wst;
    }
    void *args[3] = {(void *)&tmaps[0], (void *)&tmaps[1], &p};
    const unsigned grid = (unsigned)cfg.grid;
    if (fk_launch_hook_fn hook = fk_cuda_launch_hook()) { /* set by test-only code (tests/hooks) */
        const unsigned grid3[3] = {grid, 1, 1}, block[3] = {FK_GEMM_THREADS, 1, 1};
        const size_t sizes[3] = {sizeof tmaps[0], sizeof tmaps[1], sizeof p};
        return hook((const void *)v->fn, grid3, block, (size_t)v->smem_bytes, args, sizes, 3, cfg.pdl);
    }
    cudaLaunchConfig_t lc;
    cudaLaunchAttribute at[2];
    fk_launch_config(&lc, at, grid, FK_GEMM_THREADS, (size_t)v->smem_bytes, st, 1, cfg.pdl);
    CUfunction *slot = cfg.device >= 0 && cfg.device < FK_GLU_MAX_DEVICES && cfg.variant < FK_GLU_MAX_VARIANTS
                           ? &fk_glu_cufn[cfg.device][cfg.variant]
                           : NULL;
    return fk_cuda_launch(ctx, cfg.device, slot, (const void *)v->fn, &lc, args, "cuda gemm (swiglu)");
}

static size_t fk_glu_workspace(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan)
{
    (void)ctx;
    (void)plan;
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    return job->desc.act == FP8KIT_ACT_SWIGLU && fk_f16_path(job) ? fk_f16_workspace_bytes(job) : 0;
}

static void fk_glu_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_glu_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_glu_variant_count) {
        snprintf(buf, n, "sm90_glu (bad plan)");
        return;
    }
    const fk_sm90_variant *v = &fk_sm90_glu_variants[cfg.variant];
    snprintf(buf, n,
             "sm90_glu variant=%d bn=%d bm=%d promo=%d scaling=%s ops=%s cluster=%d stages=%d grid=%d group_m=%d "
             "lag=%d pdl=%d items=%d",
             cfg.variant, FK_GLU_BND, v->bm, v->promo, fk_sm90_scaling_name(v->scaling),
             fk_sm90_operands_name(v->ops), v->cluster, v->stages, cfg.grid, cfg.group_m, cfg.lag, cfg.pdl, cfg.items);
}

const fk_gemm_family fk_family_sm90_glu = {
    FK_FAM_SM90_GLU, "sm90_glu", FK_FAM_DENSE, 90, 90, fk_glu_can_implement, fk_glu_plan, fk_glu_run,
    fk_glu_workspace, fk_glu_describe,
};
