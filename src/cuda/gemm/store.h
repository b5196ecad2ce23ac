/* gemm/store.h - the CUDA GEMM epilogue's D store paths (p.d_bulk): one table shared by the families' host code,
 * over the rules of gemm/store_rules.h. */
#ifndef FK_CUDA_GEMM_STORE_H
#define FK_CUDA_GEMM_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "cuda/cuda_state.h"
#include "cuda/gemm/params.h"
#include "cuda/gemm/store_rules.h"

/* Whether variant v runs this job's D through its TMA-store epilogue (a TS
 * variant of the job's kind, and the job fits that path). */
static inline int fk_variant_tstore(const fk_sm90_variant *v, const fk_gemm_job *job)
{
    return v && v->tma_store && fk_tma_store_ok(job) && v->tma_store == fk_tma_store_kind(job);
}

static inline int fk_store_tma_fits(const fk_sm90_variant *v, const fk_gemm_job *job)
{
    return fk_variant_tstore(v, job) && job->k > 0; /* TS variants; their maps need K > 0 */
}
static inline int fk_store_bulk_fits(const fk_sm90_variant *v, const fk_gemm_job *job)
{
    return !(v && v->tma_store) && fk_d16_copyable(job) && job->n % 8 == 0; /* rows of whole 16-byte units */
}
static inline int fk_store_general_fits(const fk_sm90_variant *v, const fk_gemm_job *job)
{
    (void)v;
    (void)job;
    return 1; /* every epilogue op, every output dtype, fused row quantization */
}

static inline int fk_store_reduce_fits(const fk_sm90_variant *v, const fk_gemm_job *job)
{
    return !(v && v->tma_store) && fk_job_reducible(job);
}

typedef struct fk_store_path {
    int id;
    const char *name;
    int (*fits)(const fk_sm90_variant *v, const fk_gemm_job *job);
} fk_store_path;

/* The table, in order of preference; *count its entries. */
static inline const fk_store_path *fk_store_paths(size_t *count)
{
    static const fk_store_path paths[] = {
        {FK_STORE_REDUCE, "reduce", fk_store_reduce_fits},
        {FK_STORE_TMA, "tma", fk_store_tma_fits},
        {FK_STORE_BULK, "bulk", fk_store_bulk_fits},
        {FK_STORE_GENERAL, "general", fk_store_general_fits},
    };
    *count = sizeof paths / sizeof paths[0];
    return paths;
}

/* Plan time: the first path of the family's ids that fits the job; the
 * general one when general_only (tuning gemm_bulk=0) or none fits. */
static inline int fk_store_plan(unsigned ids, const fk_sm90_variant *v, const fk_gemm_job *job, int general_only)
{
    size_t count;
    const fk_store_path *s = fk_store_paths(&count);
    for (size_t i = 0; !general_only && i < count; i++)
        if ((ids & FK_STORE_BIT(s[i].id)) && s[i].fits(v, job))
            return s[i].id;
    return FK_STORE_GENERAL;
}

/* Run time: the plan's path if it is one of the family's and this call's
 * job fits it, else the general one. */
static inline int fk_store_run(unsigned ids, int store, const fk_sm90_variant *v, const fk_gemm_job *job)
{
    size_t count;
    const fk_store_path *s = fk_store_paths(&count);
    for (size_t i = 0; i < count; i++)
        if (s[i].id == store)
            return (ids & FK_STORE_BIT(store)) && s[i].fits(v, job) ? store : FK_STORE_GENERAL;
    return FK_STORE_GENERAL;
}

/* A path's name (describe's store=), "?" for no known id. */
static inline const char *fk_store_name(int id)
{
    size_t count;
    const fk_store_path *s = fk_store_paths(&count);
    for (size_t i = 0; i < count; i++)
        if (s[i].id == id)
            return s[i].name;
    return "?";
}

#endif
