/* gemm/family.h - CUDA GEMM families: each family is one kernel design (its
 * kernels, variant table and host code) for a range of architectures. It
 * declares what it can run, plans (candidate configs + cost model, with a
 * typed config), runs a plan, and sizes its workspace. The planner
 * (gemm/families.cu) is a loop over fk_gemm_families: the first family of
 * the device's architecture that neither refuses nor declines the job
 * plans it. Every family's config begins with its id (fk_family_config). */
#ifndef FK_CUDA_FAMILY_H
#define FK_CUDA_FAMILY_H

#include "cuda/cuda_state.h"

/* Family ids: the first int32 of every plan config made by a family. */
enum { FK_FAM_SM90 = 1, FK_FAM_SM90_SMALL = 2, FK_FAM_SM90_GROUPED = 3, FK_FAM_SM100 = 4, FK_FAM_SM90_K_GROUPED = 5, FK_FAM_SM90_GLU = 6,
       FK_FAM_SM90_GLU_GROUPED = 7 };
/* What a family runs, and the job its functions receive (const void *job):
 * fp8kit_gemm (an fk_gemm_job), fp8kit_grouped_gemm (the fk_gemm_job that
 * begins an fk_grouped_job) or fp8kit_k_grouped_gemm (an fk_k_grouped_job). */
enum { FK_FAM_DENSE = 0, FK_FAM_GROUPED = 1, FK_FAM_K_GROUPED = 2 };
/* A family's answer meaning "not me, ask the next family" (never returned
 * to a caller; outside fp8kit_status's range). */
#define FK_DECLINED ((fp8kit_status)-1)

typedef struct fk_family_config {
    int32_t family;
} fk_family_config;

typedef struct fk_gemm_family {
    int id;
    const char *name;
    int kind;           /* FK_FAM_DENSE, FK_FAM_GROUPED or FK_FAM_K_GROUPED: the type of job */
    int cc_min, cc_max; /* compute capabilities it runs on, as 10 x major + minor */
    /* FP8KIT_OK when the family can run the job, FK_DECLINED to leave it to
     * the next family, else the refusal (status and message recorded) */
    fp8kit_status (*can_implement)(fp8kit_ctx *ctx, const void *job);
    /* fills config (FK_PLAN_CONFIG_BYTES, zeroed, first int32 = id): the
     * cost model's pick of the family's candidates, or the fastest when
     * autotune is on; FK_DECLINED when its cost model prefers the next family */
    fp8kit_status (*plan)(fp8kit_ctx *ctx, const void *job, void *config);
    /* runs a plan of this family (a grouped family's job is the start of an fk_grouped_job) */
    fp8kit_status (*run)(fp8kit_ctx *ctx, const void *job, const fk_plan *plan, void *stream);
    /* the workspace of the plan's fastest path; plan NULL: a bound over every
     * plan the family could make for the job (NULL entry: none) */
    size_t (*workspace)(fp8kit_ctx *ctx, const void *job, const fk_plan *plan);
    void (*describe)(const fk_plan *plan, char *buf, size_t n);
} fk_gemm_family;

/* The families, in the planner's order (gemm/families.cu). */
extern const fk_gemm_family fk_family_sm90_glu;   /* gemm/sm90/glu_host.cu: act=swiglu only */
extern const fk_gemm_family fk_family_sm90_small; /* gemm/sm90/small.cu */
extern const fk_gemm_family fk_family_sm90;       /* gemm/sm90/dense_host.cu */
extern const fk_gemm_family fk_family_sm90_glu_grouped; /* gemm/sm90/glu_grouped_host.cu: grouped act=swiglu only */
extern const fk_gemm_family fk_family_sm90_grouped; /* gemm/sm90/grouped_host.cu */
extern const fk_gemm_family fk_family_sm90_k_grouped; /* gemm/sm90/k_grouped_host.cu */
extern const fk_gemm_family fk_family_sm100;      /* gemm/families.cu: declared, no kernels yet */

/* The family that made a plan, or NULL (a config of no known family). */
const fk_gemm_family *fk_family_of(const fk_plan *plan);

#endif
