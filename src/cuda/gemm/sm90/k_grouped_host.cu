/* gemm/sm90/k_grouped_host.cu - the sm90 K-grouped GEMM family
 * (fp8kit_k_grouped_gemm; kernels: gemm/sm90/kernels_k_grouped.cu, from the
 * pieces in gemm/sm90/kg.cuh): what the kernel needs beyond the core's
 * checks, the plan (variant, consumer lag, launch mode), tensor maps of A
 * (M, Ktot) and B (N, Ktot), the parameters (D as one (G x drows, N) view,
 * beta * D read in place) and the launch. The offsets stay in device
 * memory: the kernel checks them and writes nothing when they are invalid
 * (the optional status word says so); no host sync, no allocation. */
#include <stdio.h>
#include <string.h>
#include "cuda/cuda_state.h"
#include "cuda/driver.h"
#include "cuda/gemm/family.h"
#include "cuda/gemm/host.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/store.h"
#include "core/tuning.h"

#define FN "cuda k-grouped gemm"

static fp8kit_status fk_kg_can_run(fp8kit_ctx *ctx, const fk_k_grouped_job *j, const fk_sm90_variant *v)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    if (j->d_type == FP8KIT_F32 && !j->fast_accum)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": f32 output needs desc->fast_accum: Hopper fp8 tensor cores promoted every 128 of K "
                          "reach rel ~1e-4, not the 1e-5 of docs/spec.md section 3");
    if (j->m > INT32_MAX || j->n > INT32_MAX || j->ktot > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": M, N and Ktot must be < 2^31");
    if (j->groups > 1 && j->sdg % j->ldd)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": d's group stride (%lld) must be a multiple of its row stride (%lld)",
                       (long long)j->sdg, (long long)j->ldd);
    const int64_t drows = j->groups > 1 ? j->sdg / j->ldd : j->m;
    if (drows < j->m)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": d's groups overlap (group stride %lld < M x row stride)",
                       (long long)j->sdg);
    const int64_t tiles = fk_ceil_div(j->m, FK_GEMM_BM) * fk_ceil_div(j->n, v->bn);
    if (j->groups * drows > INT32_MAX || j->groups * tiles > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": G x M rows and G x output tiles must be < 2^31");
    if (((uintptr_t)j->a & 15u) || ((uintptr_t)j->b & 15u) || (j->lda % 16) || (j->ldb % 16))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED,
                       FN ": A and B need 16-byte aligned bases and row strides that are multiples of 16 bytes "
                          "(TMA; lda %lld, ldb %lld)",
                       (long long)j->lda, (long long)j->ldb);
    if ((size_t)v->smem_bytes + 4 * (size_t)j->groups > cs->smem_optin)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": %lld groups need a %lld-byte table that does not fit in shared memory next to the "
                          "kernel's %d bytes (device allows %zu)",
                       (long long)j->groups, 4 * (long long)j->groups, v->smem_bytes, cs->smem_optin);
    return FP8KIT_OK;
}

/* The plan's config bytes. */
typedef struct fk_kg_config {
    int32_t family;  /* FK_FAM_SM90_K_GROUPED */
    int32_t variant; /* index into fk_sm90_kg_variants */
    int32_t lag;     /* stages consumer warpgroup 1 runs behind warpgroup 0 */
    int32_t pdl;     /* programmatic dependent launch */
    int32_t store;   /* D's store path (gemm/store.h): reduce, bulk or general */
} fk_kg_config;
static_assert(sizeof(fk_kg_config) <= FK_PLAN_CONFIG_BYTES, "plan config too large");

/* The variant: 192 wide for e4m3 x e4m3 (H100, 2026-11-26, 8bd7612: 3193 vs 3438 us at G 4, M 4096,
 * N 7168, K 34304), else 128, or what tuning gemm_bn asks for where that kernel exists. */
static int fk_kg_variant(fp8kit_ctx *ctx, const fk_k_grouped_job *j)
{
    const fk_sm90_operands ab = fk_sm90_fp8_pair(j->a_type, j->b_type);
    const int bn = fk_tuned(fk_ctx_tuning(ctx)->gemm_bn, ab == FK_SM90_E4M3_E4M3 ? 192 : 128);
    int vi = -1;
    for (int i = 0; i < fk_sm90_kg_variant_count; i++)
        if (fk_sm90_kg_variants[i].ops == ab &&
            (fk_sm90_kg_variants[i].bn == bn || (vi < 0 && fk_sm90_kg_variants[i].bn == 128)))
            vi = i;
    return vi;
}

static fp8kit_status fk_kg_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    const fk_k_grouped_job *j = (const fk_k_grouped_job *)jp;
    const int vi = fk_kg_variant(ctx, j);
    if (vi < 0)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, FN ": no kernel for this fp8 type pair");
    return fk_kg_can_run(ctx, j, &fk_sm90_kg_variants[vi]);
}

static fp8kit_status fk_kg_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    fk_kg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = FK_FAM_SM90_K_GROUPED;
    cfg.variant = fk_kg_variant(ctx, (const fk_k_grouped_job *)jp);
    /* consumer warpgroup 1 a stage behind (gemm/sm90/pipeline.cuh); programmatic dependent launch
     * as the other GEMMs (tuning gemm_pdl=0: off) */
    cfg.lag = fk_tuned(fk_ctx_tuning(ctx)->gemm_lag, 1);
    if (cfg.lag < 0 || cfg.lag >= fk_sm90_kg_variants[cfg.variant].stages)
        cfg.lag = 0;
    cfg.pdl = fk_tuned(fk_ctx_tuning(ctx)->gemm_pdl, 1) != 0;
    /* D through bulk copies (fp32 D += by bulk reduce-add copies) where D allows: H200, 2026-11-29,
     * G 4, M 4096, N 7168, K 34304: fp32 D += 3408 us through the general path, 2503 reduced; tuning
     * gemm_bulk=0: the general path */
    cfg.store = fk_kg_store_pick((const fk_k_grouped_job *)jp, fk_tuned(fk_ctx_tuning(ctx)->gemm_bulk, 1) != 0);
    memcpy(config, &cfg, sizeof cfg);
    return FP8KIT_OK;
}

static void fk_kg_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_kg_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    const fk_sm90_variant *v = &fk_sm90_kg_variants[cfg.variant];
    snprintf(buf, n, "sm90_k_grouped variant=%d bn=%d bm=%d ops=%s stages=%d lag=%d pdl=%d store=%s", cfg.variant,
             v->bn, FK_GEMM_BM, fk_sm90_operands_name(v->ops), v->stages, cfg.lag, cfg.pdl,
             fk_store_name(cfg.store));
}

static fp8kit_status fk_kg_run(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_k_grouped_job *j = (const fk_k_grouped_job *)jp;
    fk_kg_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    const fk_sm90_variant *v = &fk_sm90_kg_variants[cfg.variant];
    const fk_cuda_state *cs = fk_cuda(ctx);
    cudaStream_t s = (cudaStream_t)stream;
    if (j->groups == 0) { /* nothing to check or compute */
        if (j->status)
            FK_CUDA_CHECK(ctx, cudaMemsetAsync(j->status, 0, sizeof(int32_t), s));
        return FP8KIT_OK;
    }
    int prev = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&prev));
    if (prev != cs->device)
        FK_CUDA_CHECK(ctx, cudaSetDevice(cs->device));
    /* Tensor maps; none when there is nothing to load (the kernel still
     * checks the offsets and writes beta * D). */
    const int load = j->m > 0 && j->n > 0 && j->ktot > 0;
    CUtensorMap tmaps[2];
    memset(tmaps, 0, sizeof tmaps);
    if (load) {
        CUresult r = fk_tma_map_2d_u8(&tmaps[0], j->a, (uint64_t)j->m, (uint64_t)j->ktot, (uint64_t)j->lda,
                                      FK_GEMM_BK, FK_GEMM_BM);
        if (r == CUDA_SUCCESS)
            r = fk_tma_map_2d_u8(&tmaps[1], j->b, (uint64_t)j->n, (uint64_t)j->ktot, (uint64_t)j->ldb, FK_GEMM_BK,
                                 (uint32_t)v->bn);
        if (r != CUDA_SUCCESS) {
            if (prev != cs->device)
                (void)cudaSetDevice(prev);
            return fk_fail(ctx, FP8KIT_ERR_DEVICE, FN ": cuTensorMapEncodeTiled failed (%d)", (int)r);
        }
    }
    fk_gemm_params p;
    memset(&p, 0, sizeof p);
    const int64_t drows = j->groups > 1 ? j->sdg / j->ldd : j->m;
    p.m = (int)((j->groups - 1) * drows + j->m); /* D as one matrix (the epilogue's row bound) */
    p.kg_m = (int)j->m;
    p.kg_drows = (int)drows;
    p.n = (int)j->n;
    p.k = (int)j->ktot;
    p.num_kb = load ? (int)fk_ceil_div(j->ktot, FK_GEMM_BK) : 0;
    p.sched.tiles_m = (int)fk_ceil_div(j->m, FK_GEMM_BM);
    p.sched.tiles_n = (int)fk_ceil_div(j->n, v->bn);
    p.sched.group_m = 8;
    if (j->scales_1x128) { /* per-row scales along K, read by the kernel's helper warps */
        p.sa_mode = p.sb_mode = FP8KIT_SCALE_BLOCK;
        p.sa_sm = p.sb_ld = j->kb;
    } else { /* tensor scales (or none) in the epilogue */
        p.sa_mode = j->scale_a ? FP8KIT_SCALE_TENSOR : FP8KIT_SCALE_NONE;
        p.sb_mode = j->scale_b ? FP8KIT_SCALE_TENSOR : FP8KIT_SCALE_NONE;
    }
    p.sa = j->scale_a;
    p.sb = j->scale_b;
    p.alpha = j->alpha;
    p.beta = j->beta;
    p.d = j->d;
    p.ldd = j->ldd;
    p.d_type = j->d_type;
    if (j->beta != 0.0f) { /* C is D itself: each element is read, then written, by one thread */
        p.c = j->d;
        p.ldc = j->ldd;
        p.c_type = j->d_type;
    }
    p.bias_mode = FP8KIT_BIAS_NONE;
    p.act = FP8KIT_ACT_NONE;
    p.out_quant = FP8KIT_OUTQ_NONE;
    p.grp_offs = j->offsets;
    p.grp_count = (int)j->groups;
    p.grp_tab = v->smem_bytes;
    p.grp_status = j->status;
    p.lag = cfg.lag;
    /* the plan's store path when this call's D still allows it */
    if (fk_kg_store_fits(j, cfg.store))
        p.d_bulk = cfg.store;
    const int64_t tiles = j->groups * (int64_t)p.sched.count();
    const unsigned grid = (unsigned)(tiles < cs->sm_count ? (tiles > 0 ? tiles : 1) : cs->sm_count);
    const size_t smem = (size_t)v->smem_bytes + 4 * (size_t)j->groups;
    cudaError_t e = cudaFuncSetAttribute((const void *)v->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)cs->smem_optin);
    if (e == cudaSuccess) {
        void *args[3] = {(void *)&tmaps[0], (void *)&tmaps[1], &p};
        cudaLaunchConfig_t lc;
        cudaLaunchAttribute at[2];
        fk_launch_config(&lc, at, grid, FK_GEMM_THREADS, smem, s, 1, cfg.pdl != 0);
        e = cudaLaunchKernelExC(&lc, (const void *)v->fn, args);
    }
    if (prev != cs->device)
        (void)cudaSetDevice(prev);
    FK_CUDA_CHECK(ctx, e);
    return FP8KIT_OK;
}

const fk_gemm_family fk_family_sm90_k_grouped = {
    FK_FAM_SM90_K_GROUPED, "sm90_k_grouped", FK_FAM_K_GROUPED, 90, 90, fk_kg_can_implement, fk_kg_plan,
    fk_kg_run, NULL, fk_kg_describe,
};
