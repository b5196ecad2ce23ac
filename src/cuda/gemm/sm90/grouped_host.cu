/* gemm/sm90/grouped_host.cu - host side of the CUDA grouped GEMM (fp8kit_grouped_gemm):
 * the sm90 grouped family (gemm/family.h): fk_grp_plan picks a grouped variant of the general Hopper kernel
 * (gemm/sm90/kernels_dense.cu, GR = true: the same producer, consumers and epilogues, with
 * tiles mapped to groups through a table every CTA builds from the device
 * offsets; gemm/sm90/sched.cuh) and fk_grp_run launches it: A as one (T, K)
 * TMA map, B as one 2-D map over the experts' rows, no host sync and no
 * allocation (usable in CUDA graph capture). The offsets are checked by the
 * kernel: with invalid ones every CTA leaves before writing anything, and
 * the optional status word says so. Tuning overrides (core/tuning.h) it
 * reads: gemm_bn (128 / 192 / 256), grouped_gm (tile rows per L2 group),
 * gemm_lag, gemm_bulk, gemm_ts, gemm_pdl as in gemm/sm90/dense_host.cu. D leaves through the TMA-store
 * (staged block scales), the bulk-copy or the general store path (gemm/store.h, FK_STORES_GROUPED). MX scales run
 * the grouped MX kernel (the MX kernel's consumers and helper warps with the
 * same tile walk); given the workspace fk_cuda_grouped_workspace reports, A
 * and B are first normalized into it (mx_norm_kernel.cu, as for fp8kit_gemm) and the
 * kernel reads those copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/gemm/sm90/choose.h"
#include "cuda/cuda_state.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/family.h"
#include "cuda/gemm/host.h"
#include "cuda/gemm/store.h"
#include "cuda/driver.h"
#include "format/geometry.h"
#include "cuda/gemm/sm90/shape.cuh"

struct fk_grp_config {
    int32_t family;  /* FK_FAM_SM90_GROUPED */
    int32_t variant; /* index into fk_sm90_grouped_variants */
    int32_t group_m;
    int32_t device;
    int32_t no_bulk; /* tuning gemm_bulk=0: the general store path only */
    int32_t lag;
    int32_t pdl; /* launched with programmatic stream serialization (tuning gemm_pdl; gemm/sm90/dense_host.cu) */
    int32_t store; /* the store path (gemm/store.h) chosen for the job */
    float cost;    /* the cost model's figure for the pick (gemm/sm90/choose.c) */
    int16_t considered, dropped; /* candidates costed; tuning keys dropped (FK_SM90_DROP_*) */
};
static_assert(sizeof(fk_grp_config) <= FK_PLAN_CONFIG_BYTES, "plan config too large");

static int fk_grp_find_variant(int bn, int promo, fk_sm90_scaling scaling, fk_sm90_operands ops)
{
    for (int i = 0; i < fk_sm90_grouped_variant_count; i++) {
        const fk_sm90_variant *v = &fk_sm90_grouped_variants[i];
        if (v->bn == bn && v->promo == promo && v->scaling == scaling && v->ops == ops)
            return i;
    }
    return -1;
}

/* A's block scales (format/geometry.h, fk_grouped_a_scale_geom): the geometry of
 * one slab; *slab: values from one slab to the next (0: one slab of all rows). */
void fk_grp_sa_geom(const fk_grouped_job *gj, fk_scale_geom *ga, int64_t *slab)
{
    const fk_gemm_job *job = &gj->gemm;
    int64_t rows, slabs;
    fk_grouped_a_scale_geom(FP8KIT_SCALE_BLOCK, job->desc.scale_layout, job->m, gj->groups, gj->masked_m, job->k, ga,
                            &rows, &slabs);
    *slab = slabs > 1 ? ga->count : 0;
}

/* fk_staged_sb_count of a grouped job: every expert's B scales (sb_stride
 * apart), ceil(N / 128) rows of ceil(K / 128). */
static int64_t fk_grp_sb_count(const fk_grouped_job *gj)
{
    const int64_t nkb = fk_ceil_div(gj->gemm.k, FK_GEMM_BK);
    return fk_staged_sb_count(gj->groups, gj->sb_stride, fk_ceil_div(gj->gemm.n, 128), nkb, nkb);
}

/* A's scale box of the grouped staged variants: FK_GST_ROWS rows from the 4-row
 * boundary below a tile (shape.cuh FK_SC_ANY_ROW: TMA boxes start 16-byte
 * aligned along their innermost dimension). */
#define FK_GST_ROWS (fk_sm90_shape<128, false, 1, FK_SC_ANY_ROW>::SC_ROWS)

/* Whether a block-scaled job can take the staged-scale variants (as the dense
 * planner's fk_sm90_staged_ok): A's scales mn_major with slabs of at least
 * one scale box (FK_GST_ROWS), and every expert's B scales in one vector
 * that 32-bit indices reach (p.tsb). */
static int fk_grp_staged_ok(const fk_grouped_job *gj)
{
    const fk_gemm_job *job = &gj->gemm;
    if (job->desc.scale_a != FP8KIT_SCALE_BLOCK || job->desc.scale_layout != FP8KIT_LAYOUT_MN_MAJOR || job->k <= 0)
        return 0;
    fk_scale_geom ga;
    int64_t slab;
    fk_grp_sa_geom(gj, &ga, &slab);
    return ga.cols >= FK_GST_ROWS && fk_grp_sb_count(gj) < FK_STAGED_SB_MAX && fk_staged_ptrs_ok(job);
}

/* The variant that runs what variant vi runs with block scales read from
 * global memory (vi itself unless it stages them). */
static int fk_grp_unstaged(int vi)
{
    const fk_sm90_variant *v = &fk_sm90_grouped_variants[vi];
    return v->scaling == FK_SM90_SCALE_STAGED ? fk_grp_find_variant(v->bn, v->promo, FK_SM90_SCALE_BLOCK, v->ops) : vi;
}

/* Rows of B's one 2-D tensor map per expert: its expert stride / its row stride. */
int64_t fk_grp_brows(const fk_grouped_job *gj)
{
    return gj->groups > 1 ? gj->b_stride / gj->gemm.ldb : gj->gemm.n;
}

/* The grouped MX GEMM's normalized copies in the workspace, each region
 * 256-byte aligned, at offsets o[0 .. 7]: A's codes (T rows, row stride K
 * rounded up to 16 bytes), B's (G x N rows, the experts one after another),
 * their plain scale bytes (T x K / 32, G x N x K / 32), then the kernel's
 * stage tables (fp32 [K block][k32 step][row]: A's T rows padded to 128 and
 * 128 more, since a tile may start at any row; B's N columns of each expert
 * padded to the tile width bn) and flags (mx_norm_kernel.cu, fk_mx_tables: A per
 * band of 32 rows, B per tile). Returns the bytes (0: not MX, or nothing to
 * multiply); bn 0: the most any grouped MX tile width needs. */
#define FK_GRP_MX_BAND 32
static size_t fk_grp_mx_copies(const fk_grouped_job *gj, int bn, size_t o[8])
{
    const fk_gemm_job *job = &gj->gemm;
    if (job->desc.scale_a != FP8KIT_SCALE_MX || job->m <= 0 || job->n <= 0 || job->k <= 0 || gj->groups <= 0)
        return 0;
    if (bn == 0) {
        const size_t a = fk_grp_mx_copies(gj, 128, o), b = fk_grp_mx_copies(gj, 192, o);
        return a > b ? a : b;
    }
    return fk_mx_regions(job->k, job->m, fk_round_up(job->m, FK_GEMM_BM) + FK_GEMM_BM, FK_GRP_MX_BAND,
                         gj->groups * job->n, gj->groups * fk_round_up(job->n, bn), bn, o);
}

extern "C" fp8kit_status fk_cuda_grouped_workspace(fp8kit_ctx *ctx, const fk_grouped_job *job, size_t *bytes)
{
    (void)ctx;
    size_t o[8];
    *bytes = fk_grp_mx_copies(job, 0, o);
    return FP8KIT_OK;
}

/* What the grouped kernels (this family's and the gated one's) need beyond the core's checks. */
fp8kit_status fk_grp_check(fp8kit_ctx *ctx, const void *jp)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    const fk_grouped_job *gj = (const fk_grouped_job *)job; /* job is gj->gemm, its first member */
    if (!fk_cuda(ctx))
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: context has no CUDA state");
    if (job->d_type == FP8KIT_F32 && !job->desc.fast_accum)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: fp32 output needs fast_accum: Hopper fp8 tensor cores reach rel "
                       "~1e-4, not the 1e-5 of docs/spec.md section 3");
    if (gj->groups > 1 && gj->b_stride % job->ldb)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: b's expert stride (%lld) must be a multiple of its row stride (%lld): "
                       "the experts are read through one 2-D tensor map",
                       (long long)gj->b_stride, (long long)job->ldb);
    if (job->m > INT32_MAX || job->n > INT32_MAX || job->k > INT32_MAX || gj->groups * fk_grp_brows(gj) > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda grouped gemm: T, N, K and G x N must be < 2^31");
    if (job->k % 16)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, "cuda grouped gemm: K = %lld must be a multiple of 16",
                       (long long)job->k);
    if (((uintptr_t)job->a & 15u) || ((uintptr_t)job->b & 15u) || (job->lda % 16) || (job->ldb % 16))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED,
                       "cuda grouped gemm: A and B need 16-byte aligned bases and leading dims that are "
                       "multiples of 16 bytes (TMA)");
    return FP8KIT_OK;
}

static fp8kit_status fk_grp_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    if (((const fk_gemm_job *)jp)->desc.act == FP8KIT_ACT_SWIGLU) /* the gated family's (glu_grouped_host.cu) */
        return FK_DECLINED;
    return fk_grp_check(ctx, jp);
}

/* Whether variant vi (-1: none) leaves room for a group table of tab bytes
 * in the device's shared memory. */
static int fk_grp_fits(int vi, size_t tab, const fk_cuda_state *cs)
{
    return vi >= 0 && (size_t)fk_sm90_grouped_variants[vi].smem_bytes + tab <= cs->smem_optin;
}

static fp8kit_status fk_grp_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    const fk_grouped_job *gj = (const fk_grouped_job *)job;
    const fk_cuda_state *cs = fk_cuda(ctx);
    const size_t tab = FK_GRP_TAB_BYTES((size_t)gj->groups);
    const fk_sm90_operands ab = fk_sm90_fp8_pair(job->a_type, job->b_type);
    /* fp32 output keeps the promotion (as gemm/sm90/dense_host.cu); e5m2 has precise 128-wide variants only */
    const int mx = job->desc.scale_a == FP8KIT_SCALE_MX; /* the MX kernel: promo 1 */
    const int block = job->desc.scale_a == FP8KIT_SCALE_BLOCK; /* (promotion every 128 of K, 128 wide) */
    fk_sm90_scaling scaling = mx      ? FK_SM90_SCALE_MX
                              : block ? (fk_grp_staged_ok(gj) ? FK_SM90_SCALE_STAGED : FK_SM90_SCALE_BLOCK)
                                      : FK_SM90_SCALE_PLAIN;
    const int precise = mx ? 1 : 4; /* the promotion every variant of the kind has */
    const int plain = scaling == FK_SM90_SCALE_PLAIN;
    int promo = job->desc.fast_accum && job->d_type != FP8KIT_F32 && ab == FK_SM90_E4M3_E4M3 && plain ? 0 : precise;
    const fk_tuning *tu = fk_ctx_tuning(ctx);
    /* every variant of the design is a candidate and the dense planner's cost
     * model picks (gemm/sm90/choose.c), on an estimate of the tile rows: each
     * group adds at most one partial tile row (half of one on average); the
     * grouped kernel has no stream-K tail */
    fk_sm90_ask ask = fk_sm90_ask_of((fk_ceil_div(job->m, FK_GEMM_BM) + (gj->groups + 1) / 2) * FK_GEMM_BM, job->n,
                                     fk_ceil_div(job->k, FK_GEMM_BK), cs->sm_count, (int)scaling, (int)ab, promo);
    ask.bn = fk_tuned(tu->gemm_bn, 0);
    ask.sk = 0;
    ask.width_128 = job->desc.out_quant == FP8KIT_OUTQ_BLOCK1X128; /* a 1x128 group must not span two tiles */
    /* the TMA-store epilogue's variants (staged block scales; one stage more) where D fits that path */
    ask.ts_kind = fk_tma_store_ok(job) && fk_tuned(tu->gemm_ts, 1) != 0 ? fk_tma_store_kind(job) : 0;
    fk_sm90_cand cands[64];
    const int nc = fk_sm90_cands_of(fk_sm90_grouped_variants, fk_sm90_grouped_variant_count, cands, 64);
    fk_sm90_choice pick;
    int vi = fk_sm90_choose(cands, nc, &ask, &pick);
    if (vi >= 0 && fk_sm90_grouped_variants[vi].tma_store && !fk_grp_fits(vi, tab, cs)) {
        ask.ts_kind = 0; /* no room for the group table beside the extra stage: the bulk-copy epilogue */
        vi = fk_sm90_choose(cands, nc, &ask, &pick);
    }
    if (scaling == FK_SM90_SCALE_STAGED && (pick.dropped || !fk_grp_fits(vi, tab, cs))) {
        /* tuning keys no staged variant satisfies, or no room for the group table: global-load block scales */
        scaling = FK_SM90_SCALE_BLOCK;
        ask.scaling = (int)scaling;
        vi = fk_sm90_choose(cands, nc, &ask, &pick);
    }
    if (vi >= 0 && !fk_grp_fits(vi, tab, cs))
        vi = fk_grp_find_variant(128, precise, scaling, ab); /* the variant with the most room for the group table */
    if (vi < 0)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda grouped gemm: no kernel variant for this case");
    const fk_sm90_variant *v = &fk_sm90_grouped_variants[vi];
    if (!fk_grp_fits(vi, tab, cs))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "cuda grouped gemm: %lld groups need a %zu-byte table that does not fit in shared memory "
                       "next to the kernel's %d bytes (device allows %zu)",
                       (long long)gj->groups, tab, v->smem_bytes, cs->smem_optin);
    int prev = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&prev));
    if (prev != cs->device)
        FK_CUDA_CHECK(ctx, cudaSetDevice(cs->device));
    /* the device's limit, not this plan's need: plans of other G share the kernel */
    cudaError_t e = cudaFuncSetAttribute((const void *)v->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)cs->smem_optin);
    const int twin = fk_grp_unstaged(vi); /* (what a call whose scale pointers do not fit runs) */
    if (e == cudaSuccess && twin >= 0 && twin != vi)
        e = cudaFuncSetAttribute((const void *)fk_sm90_grouped_variants[twin].fn,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cs->smem_optin);
    if (e == cudaSuccess && twin < 0)
        e = cudaErrorInvalidDeviceFunction;
    if (prev != cs->device)
        (void)cudaSetDevice(prev);
    FK_CUDA_CHECK(ctx, e);
    fk_grp_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.family = FK_FAM_SM90_GROUPED;
    cfg.cost = (float)pick.cost;
    cfg.considered = (int16_t)pick.considered;
    cfg.dropped = (int16_t)pick.dropped;
    cfg.variant = vi;
    cfg.group_m = fk_tuned(tu->grouped_gm, 8);
    if (cfg.group_m < 1)
        cfg.group_m = 1;
    cfg.device = cs->device;
    cfg.no_bulk = fk_tuned(tu->gemm_bulk, 1) == 0;
    cfg.store = fk_store_plan(FK_STORES_GROUPED, v, job, cfg.no_bulk);
    cfg.lag = fk_tuned(tu->gemm_lag, mx ? 0 : 1); /* MX: no lag, as the dense MX plan */
    cfg.pdl = fk_tuned(tu->gemm_pdl, 1) != 0;
    if (cfg.lag < 0 || cfg.lag >= v->stages)
        cfg.lag = 0;
    memcpy(config, &cfg, sizeof cfg);
    return FP8KIT_OK;
}

static fp8kit_status fk_grp_run(fp8kit_ctx *ctx, const fk_grouped_job *gj, const fk_plan *plan,
                                              void *stream)
{
    const fk_gemm_job *job = &gj->gemm;
    fk_grp_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_grouped_variant_count)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: bad plan");
    if (!fk_staged_ptrs_ok(job)) /* this call's scale pointers do not fit a staged plan: its twin */
        cfg.variant = fk_grp_unstaged(cfg.variant);
    if (cfg.variant < 0)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: no unstaged twin of the planned variant");
    const fk_sm90_variant *v = &fk_sm90_grouped_variants[cfg.variant];
    const fk_cuda_state *cs = fk_cuda(ctx);
    cudaStream_t st = (cudaStream_t)stream;
    int prev = -1;
    FK_CUDA_CHECK(ctx, cudaGetDevice(&prev));
    if (prev != cfg.device)
        FK_CUDA_CHECK(ctx, cudaSetDevice(cfg.device));
    if (job->desc.out_quant == FP8KIT_OUTQ_SCALED && job->amax_d) /* (the kernel's atomic maxima start at 0) */
        FK_CUDA_CHECK(ctx, cudaMemsetAsync(job->amax_d, 0, sizeof(float), st));
    if (gj->groups == 0) { /* nothing to check or compute */
        if (gj->status)
            FK_CUDA_CHECK(ctx, cudaMemsetAsync(gj->status, 0, sizeof(int32_t), st));
        return FP8KIT_OK;
    }
    /* MX with room for the normalized copies (the size fk_cuda_grouped_workspace
     * reports, for every plan; with less the call runs as without): the kernel
     * reads those */
    size_t mo[8];
    const size_t mxb = fk_grp_mx_copies(gj, 0, mo);
    fk_grp_mx_copies(gj, v->bn, mo);
    unsigned char *mxw = mxb && job->workspace && job->workspace_bytes >= mxb && ((uintptr_t)job->workspace & 15u) == 0
                             ? (unsigned char *)job->workspace
                             : NULL;
    const void *opa = mxw ? (const void *)(mxw + mo[0]) : job->a, *opb = mxw ? (const void *)(mxw + mo[1]) : job->b;
    const int64_t lda = mxw ? fk_round_up(job->k, 16) : job->lda, ldb = mxw ? lda : job->ldb;
    const int64_t b_rows = mxw ? job->n : fk_grp_brows(gj); /* rows from one expert of B to the next */
    /* Tensor maps (memoized per plan): A (T, K); B's experts as rows
     * g * b_rows + n of one map ending at the last expert's row N - 1. None
     * when there is nothing to load (the kernel still checks the offsets). */
    const int load = job->m > 0 && job->n > 0 && job->k > 0;
    const uint64_t brows = (uint64_t)((gj->groups - 1) * b_rows + job->n);
    /* D's store path: the plan's if this call's pointers fit it, else the general one; the
     * TMA-store path also maps D (T rows, or G x masked_m) in 16 x 32 boxes */
    const int store = fk_store_run(FK_STORES_GROUPED, cfg.store, v, job);
    const int tstore = load && store == FK_STORE_TMA;
    CUtensorMap tmaps[3];
    memset(tmaps, 0, sizeof tmaps);
    if (load) {
        const uint64_t tkey[13] = {(uint64_t)(uintptr_t)opa, (uint64_t)job->m,  (uint64_t)job->k,
                                   (uint64_t)lda,              (uint64_t)(uintptr_t)opb, brows,
                                   (uint64_t)ldb,              (uint64_t)v->bn,    0x475250u,
                                   (uint64_t)tstore, tstore ? (uint64_t)(uintptr_t)job->d : 0,
                                   tstore ? (uint64_t)job->ldd : 0, tstore ? (uint64_t)job->d_type : 0};
        static_assert(13 + sizeof tmaps / 8 <= FK_PLAN_MEMO_WORDS, "plan memo too small");
        if (!fk_plan_memo_get(plan, tkey, 13, tmaps, sizeof tmaps)) {
            CUresult r = fk_tma_map_2d_u8(&tmaps[0], opa, (uint64_t)job->m, (uint64_t)job->k, (uint64_t)lda,
                                          FK_GEMM_BK, FK_GEMM_BM);
            if (r == CUDA_ERROR_INVALID_CONTEXT) { /* a new thread: make the primary context current */
                FK_CUDA_CHECK(ctx, cudaSetDevice(cfg.device));
                r = fk_tma_map_2d_u8(&tmaps[0], opa, (uint64_t)job->m, (uint64_t)job->k, (uint64_t)lda, FK_GEMM_BK,
                                     FK_GEMM_BM);
            }
            if (r == CUDA_SUCCESS)
                r = fk_tma_map_2d_u8(&tmaps[1], opb, brows, (uint64_t)job->k, (uint64_t)ldb, FK_GEMM_BK,
                                     (uint32_t)v->bn);
            if (r == CUDA_SUCCESS && tstore)
                r = fk_tma_map_2d_u16_sw64(&tmaps[2], job->d, job->d_type == FP8KIT_BF16, (uint64_t)job->m,
                                           (uint64_t)job->n, (uint64_t)job->ldd, 32, 16);
            if (r != CUDA_SUCCESS)
                return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda grouped gemm: cuTensorMapEncodeTiled failed (%d)",
                               (int)r);
            fk_plan_memo_put(plan, tkey, 13, tmaps, sizeof tmaps);
        }
    }
    fk_gemm_params p;
    fk_gemm_job_params(&p, job);
    p.num_kb = load ? (int)fk_ceil_div(job->k, FK_GEMM_BK) : 0;
    /* tiles_m is set by each CTA from the offsets; here the upper bound sizes the grid */
    const int64_t tn = fk_ceil_div(job->n, v->bn);
    const int64_t tiles = (fk_ceil_div(job->m, FK_GEMM_BM) + gj->groups) * tn;
    p.sched.tiles_m = 0;
    p.sched.tiles_n = (int)tn;
    p.sched.group_m = cfg.group_m;
    p.grp_offs = gj->offsets;
    p.grp_count = (int)gj->groups;
    p.grp_brows = (int)b_rows;
    p.grp_masked_m = (int)gj->masked_m;
    if (job->desc.scale_a == FP8KIT_SCALE_BLOCK) { /* A: fk_grp_sa_geom; B (nb, kb) per expert */
        fk_scale_geom ga, gb;
        int64_t slab;
        fk_grp_sa_geom(gj, &ga, &slab);
        fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, 1, job->n, job->k, &gb);
        p.sa_sm = ga.sr;
        p.sa_sk = ga.sc;
        p.sa_g = slab;
        p.sb_ld = gb.sr;
        p.sb_g = gj->sb_stride;
        if (v->scaling == FK_SM90_SCALE_STAGED && load) { /* A's scales by TMA: 128 rows of one K block per stage */
            const uint64_t kbs = (uint64_t)(slab ? gj->groups : 1) * (uint64_t)p.num_kb;
            CUresult r = fk_tma_map_2d_f32(&p.tsa, p.sa, kbs, (uint64_t)ga.sc, (uint64_t)ga.sc * 4,
                                           FK_GST_ROWS, 1);
            if (r == CUDA_SUCCESS) /* B's: one vector over every expert's (boxes of 16 bytes) */
                r = fk_tma_map_1d_f32(&p.tsb, p.sb, (uint64_t)fk_grp_sb_count(gj), 4);
            if (r != CUDA_SUCCESS) {
                if (prev != cfg.device)
                    (void)cudaSetDevice(prev);
                return fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda grouped gemm: block scale tensor map failed (CUresult %d)",
                               (int)r);
            }
        }
    } else if (job->desc.scale_a == FP8KIT_SCALE_MX) { /* e8m0 bytes, plain: A (T, K / 32), B (G x N, K / 32) */
        p.sa_sm = job->k / 32;
        p.sa_sk = 0;
        if (mxw) { /* the copies' scales: the helper warps copy the stage tables and flags */
            p.sa = (const float *)(mxw + mo[2]);
            p.sb = (const float *)(mxw + mo[3]);
            p.mx_ta = (const float *)(mxw + mo[4]);
            p.mx_tb = (const float *)(mxw + mo[5]);
            p.mx_fa = (const int *)(mxw + mo[6]);
            p.mx_fb = (const int *)(mxw + mo[7]);
            p.mx_rpa = (int)fk_round_up(job->m, FK_GEMM_BM) + FK_GEMM_BM;
            p.mx_rgb = (int)fk_round_up(job->n, v->bn);
            p.mx_rpb = (int)(gj->groups * p.mx_rgb);
            p.mx_bda = FK_GRP_MX_BAND;
        }
    }
    p.grp_tab = v->smem_bytes;
    p.grp_status = gj->status;
    if (tstore) {
        p.d_bulk = 2;
        p.td = tmaps[2];
    } else if (store == FK_STORE_BULK) {
        p.d_bulk = 1;
    }
    p.lag = cfg.lag;
    const unsigned grid = (unsigned)(tiles < cs->sm_count ? (tiles > 0 ? tiles : 1) : cs->sm_count);
    const size_t smem = (size_t)v->smem_bytes + FK_GRP_TAB_BYTES((size_t)gj->groups);
    void *args[3] = {(void *)&tmaps[0], (void *)&tmaps[1], &p};
    /* programmatic dependent launch as in gemm/sm90/dense_host.cu: the kernel waits before
     * any global access (the offsets included) */
    cudaLaunchConfig_t lc;
    cudaLaunchAttribute at[2];
    fk_launch_config(&lc, at, grid, FK_GEMM_THREADS, smem, st, 1, cfg.pdl);
    if (mxw && load) { /* the normalized copies (mx_norm_kernel.cu): A over all T rows, B over every expert's N */
        const int64_t ld = lda;
        int64_t n = job->n, g = gj->groups;
        fp8kit_status nst = fk_cuda_mx_norm(ctx, job->a, job->lda, job->scale_a, 0, job->m, job->k,
                                            job->a_type == FP8KIT_E5M2, mxw + mo[0], ld, mxw + mo[2], NULL, NULL, 0,
                                            (void *)st);
        const int64_t kbs = job->k / 32;
        if (g == 1 || gj->b_stride == n * job->ldb) /* the experts as one (G x N, K) matrix */
        {
            g = 1;
            n *= gj->groups;
        }
        for (int64_t e = 0; e < g && nst == FP8KIT_OK; e++)
            nst = fk_cuda_mx_norm(ctx, (const unsigned char *)job->b + e * gj->b_stride, job->ldb,
                                  (const unsigned char *)job->scale_b + e * n * kbs, 0, n, job->k,
                                  job->b_type == FP8KIT_E5M2, mxw + mo[1] + e * n * ld, ld, mxw + mo[3] + e * n * kbs,
                                  NULL, NULL, 0, (void *)st);
        if (nst == FP8KIT_OK) /* A: one group of T rows; B: G experts of N, each padded to the tile */
            nst = fk_cuda_mx_tables(ctx, mxw + mo[2], job->m, job->k, FK_GRP_MX_BAND, job->m, p.mx_rpa, mxw + mo[4],
                                    mxw + mo[6], (void *)st);
        if (nst == FP8KIT_OK)
            nst = fk_cuda_mx_tables(ctx, mxw + mo[3], gj->groups * job->n, job->k, v->bn, job->n, p.mx_rgb,
                                    mxw + mo[5], mxw + mo[7], (void *)st);
        if (nst != FP8KIT_OK) {
            if (prev != cfg.device)
                (void)cudaSetDevice(prev);
            return nst;
        }
    }
    cudaError_t e = cudaLaunchKernelExC(&lc, (const void *)v->fn, args);
    if (prev != cfg.device)
        (void)cudaSetDevice(prev);
    FK_CUDA_CHECK(ctx, e);
    return FP8KIT_OK;
}

static fp8kit_status fk_grp_run_job(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    const fk_gemm_job *job = (const fk_gemm_job *)jp; /* (the dense kinds' job) */
    return fk_grp_run(ctx, (const fk_grouped_job *)job, plan, stream); /* job is the fk_grouped_job's first member */
}

static void fk_grp_describe(const fk_plan *plan, char *buf, size_t n)
{
    fk_grp_config cfg;
    memcpy(&cfg, plan->config, sizeof cfg);
    if (cfg.variant < 0 || cfg.variant >= fk_sm90_grouped_variant_count) {
        snprintf(buf, n, "sm90_grouped (bad plan)");
        return;
    }
    const fk_sm90_variant *v = &fk_sm90_grouped_variants[cfg.variant];
    snprintf(buf, n, "sm90_grouped variant=%d bn=%d promo=%d scaling=%s ops=%s stages=%d group_m=%d lag=%d bulk=%d store=%s pdl=%d",
             cfg.variant, v->bn, v->promo, fk_sm90_scaling_name(v->scaling), fk_sm90_operands_name(v->ops), v->stages, cfg.group_m, cfg.lag, !cfg.no_bulk,
             fk_store_name(cfg.store), cfg.pdl);
    fk_sm90_describe_pick(buf, n, cfg.cost, cfg.considered, cfg.dropped);
}

const fk_gemm_family fk_family_sm90_grouped = {
    FK_FAM_SM90_GROUPED, "sm90_grouped", FK_FAM_GROUPED, 90, 90, fk_grp_can_implement, fk_grp_plan,
    fk_grp_run_job, NULL, fk_grp_describe,
};
