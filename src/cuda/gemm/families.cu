/* gemm/families.cu - the CUDA backend's GEMM planner: a loop over the
 * families (gemm/family.h) in order - sm90 gated (swiglu), sm90 small-M, sm90 general, sm90 grouped,
 * sm90 K-grouped, sm100 - where the first family of the job's kind and the
 * device's architecture that neither refuses nor declines the job plans it;
 * and the entry points that follow a plan to its family (run, workspace,
 * describe). The sm100 family is
 * declared here with its range and no kernels: it refuses every job, so a
 * Blackwell device gets a clear UNSUPPORTED rather than a Hopper kernel. */
#include <stdio.h>
#include <string.h>
#include "cuda/gemm/family.h"
#include "cuda/gemm/host.h"

static fp8kit_status fk_sm100_can_implement(fp8kit_ctx *ctx, const void *jp)
{
    (void)jp;
    const fk_cuda_state *cs = fk_cuda(ctx);
    return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                   "cuda gemm: device %d is sm_%d%d (Blackwell); the sm100 GEMM family has no kernels yet "
                   "(quantization runs; GEMMs need sm_90)",
                   cs->device, cs->cc_major, cs->cc_minor);
}

static fp8kit_status fk_sm100_plan(fp8kit_ctx *ctx, const void *jp, void *config)
{
    (void)config;
    return fk_sm100_can_implement(ctx, jp);
}

static fp8kit_status fk_sm100_run(fp8kit_ctx *ctx, const void *jp, const fk_plan *plan, void *stream)
{
    (void)plan;
    (void)stream;
    return fk_sm100_can_implement(ctx, jp);
}

static void fk_sm100_describe(const fk_plan *plan, char *buf, size_t n)
{
    (void)plan;
    snprintf(buf, n, "sm100 (no kernels)");
}

const fk_gemm_family fk_family_sm100 = {
    FK_FAM_SM100, "sm100", FK_FAM_DENSE, 100, 129, fk_sm100_can_implement, fk_sm100_plan, fk_sm100_run, NULL,
    fk_sm100_describe,
};

static const fk_gemm_family *const fk_families[] = {&fk_family_sm90_glu,         &fk_family_sm90_small,
                                                    &fk_family_sm90,             &fk_family_sm90_glu_grouped,
                                                    &fk_family_sm90_grouped,     &fk_family_sm90_k_grouped,
                                                    &fk_family_sm100};
#define FK_NFAM ((int)(sizeof fk_families / sizeof fk_families[0]))

const fk_gemm_family *fk_family_of(const fk_plan *plan)
{
    fk_family_config h;
    memcpy(&h, plan->config, sizeof h);
    for (int i = 0; i < FK_NFAM; i++)
        if (fk_families[i]->id == h.family)
            return fk_families[i];
    return NULL;
}

/* The planner: families of this kind and architecture in order; config
 * NULL: only whether one of them can implement the job (no plan made). */
static fp8kit_status fk_plan_families(fp8kit_ctx *ctx, const void *job, int kind, void *config)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    if (!cs)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: context has no CUDA state");
    const int cc = 10 * cs->cc_major + cs->cc_minor;
    /* (FP8KIT_ACT_SWIGLU, D of N/2 columns: the sm90_glu and sm90_glu_grouped
     * families, first of their kinds, plan or refuse every swiglu job; src/core
     * refuses the K-grouped swiglu jobs) */
    for (int i = 0; i < FK_NFAM; i++) {
        const fk_gemm_family *f = fk_families[i];
        if (f->kind != kind || cc < f->cc_min || cc > f->cc_max)
            continue;
        fp8kit_status st = f->can_implement(ctx, job);
        if (st == FP8KIT_OK && !config)
            return FP8KIT_OK;
        if (st == FP8KIT_OK) {
            memset(config, 0, FK_PLAN_CONFIG_BYTES);
            st = f->plan(ctx, job, config);
        }
        if (st != FK_DECLINED)
            return st;
    }
    return fk_fail(ctx, FP8KIT_ERR_ARCH_MISMATCH,
                   "cuda %s: no GEMM kernel family runs on device %d (sm_%d%d); fp8kit's GEMM kernels need sm_90 "
                   "(Hopper)",
                   kind == FK_FAM_GROUPED ? "grouped gemm" : kind == FK_FAM_K_GROUPED ? "k-grouped gemm" : "gemm",
                   cs->device, cs->cc_major, cs->cc_minor);
}

extern "C" fp8kit_status fk_cuda_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config)
{
    return fk_plan_families(ctx, job, FK_FAM_DENSE, config);
}

extern "C" fp8kit_status fk_cuda_grouped_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config)
{
    return fk_plan_families(ctx, job, FK_FAM_GROUPED, config);
}

/* The GEMM half of ops->supports (cuda_ops.cu's fk_cuda_supports_op sends
 * quantize, dequantize and cast to their kernels' can_run rules, quant.h):
 * whether a family of the device's architecture can implement the job (its
 * can_implement: arch, alignment, combinations; no plan made, nothing run). */
extern "C" fp8kit_status fk_cuda_supports(fp8kit_ctx *ctx, fk_op op, const void *job)
{
    if (op == FK_OP_GEMM)
        return fk_plan_families(ctx, (const fk_gemm_job *)job, FK_FAM_DENSE, NULL);
    if (op == FK_OP_GROUPED_GEMM)
        return fk_plan_families(ctx, &((const fk_grouped_job *)job)->gemm, FK_FAM_GROUPED, NULL);
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream)
{
    const fk_gemm_family *f = fk_family_of(plan);
    if (!f || f->kind != FK_FAM_DENSE)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda gemm: bad plan");
    return f->run(ctx, job, plan, stream);
}

extern "C" fp8kit_status fk_cuda_grouped_gemm(fp8kit_ctx *ctx, const fk_grouped_job *job, const fk_plan *plan,
                                              void *stream)
{
    const fk_gemm_family *f = fk_family_of(plan);
    if (!f || f->kind != FK_FAM_GROUPED)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda grouped gemm: bad plan");
    return f->run(ctx, &job->gemm, plan, stream);
}

/* fp8kit_k_grouped_gemm: planned per call (the core keeps no plan for it;
 * choosing the variant is a table lookup), then run by its family. */
extern "C" fp8kit_status fk_cuda_k_grouped_gemm(fp8kit_ctx *ctx, const fk_k_grouped_job *job, void *stream)
{
    fk_plan plan;
    memset(&plan, 0, sizeof plan);
    fp8kit_status st = fk_plan_families(ctx, job, FK_FAM_K_GROUPED, plan.config);
    if (st)
        return st;
    plan.valid = 1;
    const fk_gemm_family *f = fk_family_of(&plan);
    if (!f || f->kind != FK_FAM_K_GROUPED)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cuda k-grouped gemm: bad plan");
    return f->run(ctx, job, &plan, stream);
}

extern "C" void fk_cuda_plan_describe(const fk_plan *plan, char *buf, size_t n)
{
    const fk_gemm_family *f = fk_family_of(plan);
    if (f)
        f->describe(plan, buf, n);
    else
        snprintf(buf, n, "cuda (bad plan)");
}

/* The workspace a call must have: precise fp32 output's fp16 copies of A
 * and B (gemm/sm90/f16_widen.cu); nothing otherwise. Decided from the job alone. */
extern "C" fp8kit_status fk_cuda_gemm_workspace(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes)
{
    (void)ctx;
    *bytes = fk_f16_path(job) ? fk_f16_workspace_bytes(job) : 0;
    return FP8KIT_OK;
}

extern "C" fp8kit_status fk_cuda_gemm_workspace_size(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes)
{
    *bytes = 0;
    if (fk_ctx_autotune(ctx)) { /* any plan the tuner may choose, made without timing */
        const int cc = 10 * fk_cuda(ctx)->cc_major + fk_cuda(ctx)->cc_minor;
        for (int i = 0; i < FK_NFAM; i++) {
            const fk_gemm_family *f = fk_families[i];
            if (f->kind == FK_FAM_DENSE && f->workspace && cc >= f->cc_min && cc <= f->cc_max) {
                const size_t b = f->workspace(ctx, job, NULL);
                *bytes = b > *bytes ? b : *bytes;
            }
        }
        return FP8KIT_OK;
    }
    fp8kit_status st;
    const fk_plan *plan = fk_gemm_plan_of(ctx, job, &st);
    if (!plan)
        return st;
    const fk_gemm_family *f = fk_family_of(plan);
    *bytes = f && f->workspace ? f->workspace(ctx, job, plan) : 0;
    return FP8KIT_OK;
}
