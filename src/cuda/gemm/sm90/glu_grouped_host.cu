/* glu_grouped_host.cu - host side of the grouped gated (swiglu) Hopper GEMM (the
 * sm90_glu_grouped family, kernels in gemm/sm90/kernels_glu_grouped.cu): fp8kit_grouped_gemm
 * with FP8KIT_ACT_SWIGLU, the mixture-of-experts gate / up projection with its SwiGLU and
 * output stage (cast, or the quantized input of the down projection) fused. It comes
 * before the sm90_grouped family, which declines swiglu jobs. As that family: one
 * launch, no host sync and no allocation (CUDA-graph capturable), the device offsets
 * checked by the kernel (invalid: nothing stored, the status word says so). Tiles are
 * 64 rows of D by 128 of its N/2 columns, or with promotion the paired tile's 128 rows
 * (gemm/sm90/shape.cuh NS 3) where the groups are large; each expert's B rows are
 * [gate; up]. */
#include <stdio.h>
#include <string.h>
#include "cuda/cuda_state.h"
#include "cuda/driver.h"
#include "format/geometry.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/family.h"
#include "cuda/gemm/host.h"

#define FK_GLUG_BND 128 /* columns of D per tile */

struct fk_glug_config {
    int32_t family;  /* FK_FAM_SM90_GLU_GROUPED */
    int32_t variant; /* index into fk_sm90_glu_grouped_variants */
    int32_t group_m; /* tile rows per L2 group (tuning grouped_gm) */
    int32_t device;
    int32_t pdl;
    int32_t lag;
};
static_assert(sizeof(fk_glug_config) <= FK_PLAN_CONFIG_BYTES, "plan config too large");

/* The variant of the job's operands and scaling: fast accumulation where the
 * ungated grouped family takes it (fast_accum, no block scales, output other
 * than fp32), else promotion every 128 of K; bm: rows per tile (64, or 128:
 * the paired tile, promotion only). */
static int fk_glug_variant_of(const fk_gemm_job *job, int bm)
{
    const int block = job->desc.scale_a == FP8KIT_SCALE_BLOCK;
    const fk_sm90_operands ops = fk_sm90_fp8_pair(job->a_type, job->b_type);
    const fk_sm90_scaling sc = block ? FK_SM90_SCALE_BLOCK : FK_SM90_SCALE_PLAIN;
    const int promo = job->desc.fast_accum && !block && job->d_type != FP8KIT_F32 ? 0 : 4;
    for (int i = 0; i < fk_sm90_glu_grouped_variant_count; i++) {
        const fk_sm90_variant *v = &fk_sm90_glu_grouped_variants[i];
        if (v->ops == ops && v->scaling == sc && v->promo == promo && v->bm == bm)
            return i;
    }
    return -1;
}

static fp8kit_status fk_glug_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the fk_grouped_job's first member) */
    const fp8kit_gemm_desc *dd = &job->desc;
    if (dd->act != FP8KIT_ACT_SWIGLU)
        return FK_DECLINED;
    fp8kit_status st = fk_grp_check(ctx, jp);
    if (st)
        return st;
    if (dd->scale_a == FP8KIT_SCALE_MX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: act=swiglu with mx scales is not implemented on the GPU yet");
    if (dd->scale_a == FP8KIT_SCALE_BLOCK && (job->n / 2) % 128)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: act=swiglu with block scales needs N/2 to be a multiple of 128 on the GPU "
                       "(the up rows must start a 128x128 scale block; N = %lld)",
                       (long long)job->n);
    if (fk_glug_variant_of(job, 64) < 0)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda grouped gemm: act=swiglu has no GPU kernel for these operands");
    return FP8KIT_OK;
}

static fp8kit_status fk_glug_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    const fk_grouped_job *gj = (const fk_grouped_job *)job;
    const fk_cuda_state *cs = fk_cuda(ctx);
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    /* The paired tile (128 rows) where the groups are large enough for its
     * speed per row to outweigh its padding (each group wastes half a tile
     * on average: 32 rows with 64-row tiles, 64 with 128): from about 192
     * rows per group on (bench_swiglu --grouped at both heights,
     * bench/results/s25), and where its items fill every SM at least once.
     * Tuning gemm_bm (64 / 128) decides instead. */
    const int64_t items128 = (fk_ceil_div(job->m, 128) + gj->groups / 2) * fk_ceil_div(job->n / 2, FK_GLUG_BND);
    const int bm = fk_tuned(tu->gemm_bm, 0) == 64    ? 64
                   : fk_tuned(tu->gemm_bm, 0) == 128 ? 128
                   : job->m > 192 * gj->groups && items128 >= cs->sm_count ? 128 : 64;
    int vi = bm == 128 ? fk_glug_variant_of(job, 128) : -1;
    if (vi < 0)
        vi = fk_glug_variant_of(job, 64);
    if (vi < 0)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: no gated variant");
    const fk_sm90_variant *v = &fk_sm90_glu_grouped_variants[vi];
    const size_t tab = FK_GRP_TAB_BYTES((size_t)gj->groups);
    if (v->smem_bytes + tab > cs->smem_optin)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: %lld groups need a %zu-byte table that does not fit in shared memory "
                       "next to the gated kernel's %d bytes (device allows %zu)",
                       (long long)gj->groups, tab, v->smem_bytes, cs->smem_optin);
    FK_CUDA_CHECK(ctx, cudaSetDevice(cs->device));
    /* the device's limit, not this plan's need: plans of other G share the kernel */
    FK_CUDA_CHECK(ctx, cudaFuncSetAttribute((const void *)v->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)cs->smem_optin));
    fk_glug_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = FK_FAM_SM90_GLU_GROUPED;
    cfg.variant = vi;
    cfg.group_m = fk_tuned(tu->grouped_gm, 1024 / v->bm); /* 1024 rows of A, as the 128-row kernels' 8 */
    if (cfg.group_m < 1)
        cfg.group_m = 1;
    cfg.device = cs->device;
    cfg.pdl = fk_tuned(tu->gemm_pdl, 1) != 0;
    cfg.lag = fk_tuned(tu->gemm_lag, 0);
    if (cfg.lag < 0 || cfg.lag >= v->stages)
        cfg.lag = 0;
    memcpy(config, &cfg, sizeof cfg);
    return FP8KIT_OK;
}

static fp8kit_status fk_glug_run(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp;
    const fk_grouped_job *gj = (const fk_grouped_job *)job;
    const fp8kit_gemm_desc *dd = &job->desc;
    fk_glug_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_glu_grouped_variant_count)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: bad plan");
    const fk_sm90_variant *v = &fk_sm90_glu_grouped_variants[cfg.variant];
    const fk_cuda_state *cs = fk_cuda(ctx);
    cudaStream_t st = (cudaStream_t)stream;
    FK_CUDA_CHECK(ctx, cudaSetDevice(cfg.device));
    if (dd->out_quant == FP8KIT_OUTQ_SCALED && job->amax_d) /* (the kernel's atomic maxima start at 0) */
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(job->amax_d, 0, sizeof(float), st));
    if (gj->groups == 0) { /* nothing to check or compute */
        if (gj->status)
            FK_CUDA_CHECK(ctx, cudaMemsetAsync(gj->status, 0, sizeof(int32_t), st));
        return FP8KIT_OK;
    }
    /* no maps when there is nothing to load (the kernel still checks the offsets) */
    const int load = job->m > 0 && job->n > 0 && job->k > 0;
    CUtensorMap tmaps[2];
    memset(tmaps, 0, sizeof tmaps);
    if (load) {
        /* A (T, K); B's experts as rows g * brows + n of one map */
        const uint64_t brows = (uint64_t)((gj->groups - 1) * fk_grp_brows(gj) + job->n);
        const fp8kit_status mst = fk_glu_maps(ctx, plan, cfg.device, job->a, (uint64_t)job->m, (uint64_t)job->lda,
                                              job->b, brows, (uint64_t)job->ldb, (uint64_t)job->k, v->bm, tmaps);
        if (mst)
            return mst;
    }
    fk_gemm_params p;
    fk_gemm_job_params(&p, job);
    p.n = (int)(job->n / 2); /* D's columns; y's up column of D's column c is glu_up + c */
    p.glu_up = (int)(job->n / 2);
    p.num_kb = load ? (int)fk_ceil_div(job->k, FK_GEMM_BK) : 0;
    /* tiles_m is set by each CTA from the offsets; the upper bound sizes the grid */
    const int64_t tn = fk_ceil_div(job->n / 2, FK_GLUG_BND);
    const int64_t tiles = (fk_ceil_div(job->m, v->bm) + gj->groups) * tn;
    p.sched.tiles_m = 0;
    p.sched.tiles_n = (int)tn;
    p.sched.group_m = cfg.group_m;
    p.grp_offs = gj->offsets;
    p.grp_count = (int)gj->groups;
    p.grp_brows = (int)fk_grp_brows(gj);
    p.grp_masked_m = (int)gj->masked_m;
    p.grp_tab = v->smem_bytes;
    p.grp_status = gj->status;
    p.lag = cfg.lag;
    if (dd->scale_a == FP8KIT_SCALE_BLOCK) { /* A: one slab's geometry (masked mn_major: per expert); B per expert */
        fk_scale_geom ga, gb;
        int64_t slab;
        fk_grp_sa_geom(gj, &ga, &slab);
        fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, 1, job->n, job->k, &gb);
        p.sa_sm = ga.sr;
        p.sa_sk = ga.sc;
        p.sa_g = slab;
        p.sb_ld = gb.sr;
        p.sb_g = gj->sb_stride;
    }
    const unsigned grid = (unsigned)(tiles < cs->sm_count ? (tiles > 0 ? tiles : 1) : cs->sm_count);
    const size_t smem = (size_t)v->smem_bytes + FK_GRP_TAB_BYTES((size_t)gj->groups);
    void *args[3] = {(void *)&tmaps[0], (void *)&tmaps[1], &p};
    if (fk_launch_hook_fn hook = fk_cuda_launch_hook()) { /* set by test-only code (tests/hooks) */
        const unsigned grid3[3] = {grid, 1, 1}, block[3] = {FK_GEMM_THREADS, 1, 1};
        const size_t sizes[3] = {sizeof tmaps[0], sizeof tmaps[1], sizeof p};
        return hook((const void *)v->fn, grid3, block, smem, args, sizes, 3, cfg.pdl);
    }
    cudaLaunchConfig_t lc;
    cudaLaunchAttribute at[2];
    fk_launch_config(&lc, at, grid, FK_GEMM_THREADS, smem, st, 1, cfg.pdl);
    return fk_cuda_launch(ctx, cfg.device, NULL, (const void *)v->fn, &lc, args, "cuda grouped gemm (swiglu)");
}

static void fk_glug_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_glug_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_glu_grouped_variant_count) {
        snprintf(buf, n, "sm90_glu_grouped (bad plan)");
        return;
    }
    const fk_sm90_variant *v = &fk_sm90_glu_grouped_variants[cfg.variant];
    snprintf(buf, n, "sm90_glu_grouped variant=%d bn=%d bm=%d promo=%d scaling=%s ops=%s stages=%d group_m=%d lag=%d pdl=%d",
             cfg.variant, FK_GLUG_BND, v->bm, v->promo, fk_sm90_scaling_name(v->scaling),
             fk_sm90_operands_name(v->ops), v->stages, cfg.group_m, cfg.lag, cfg.pdl);
}

const fk_gemm_family fk_family_sm90_glu_grouped = {
    FK_FAM_SM90_GLU_GROUPED, "sm90_glu_grouped", FK_FAM_GROUPED, 90, 90, fk_glug_can_implement, fk_glug_plan,
    fk_glug_run, NULL, fk_glug_describe,
};
