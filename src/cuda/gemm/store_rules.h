/* gemm/store_rules.h - the store paths of the CUDA GEMM epilogue (ids and
 * the families' sets of them) and what each asks of a job's D: plain C
 * over the job, so tests check the rules with no GPU and no CUDA compiler;
 * gemm/store.h builds the planners' table on them. */
#ifndef FK_CUDA_GEMM_STORE_RULES_H
#define FK_CUDA_GEMM_STORE_RULES_H

#include <stdint.h>
#include "core/backend_ops.h"

/* The store paths, each with what it supports, in the planners' order of
 * preference. A family declares the ids it has (a mask of FK_STORE_BIT);
 * its planner takes the first of them that fits the job (fk_store_plan)
 * into its config and a call re-checks it against its own pointers
 * (fk_store_run: a plan made for an aligned D still runs, through the
 * general path, on one that is not). The epilogue op itself (scales, alpha,
 * beta * C, bias, activation, output cast or quantization) is the same on
 * every path (fk_gemm_job_params). The predicates take the job and the
 * kernel variant (NULL in families without TMA-store variants). */
enum { FK_STORE_GENERAL = 0, FK_STORE_BULK = 1, FK_STORE_TMA = 2, FK_STORE_REDUCE = 3 };
#define FK_STORE_BIT(id) (1u << (id))
#define FK_STORES_SM90 (FK_STORE_BIT(FK_STORE_TMA) | FK_STORE_BIT(FK_STORE_BULK) | FK_STORE_BIT(FK_STORE_GENERAL))
#define FK_STORES_GROUPED (FK_STORE_BIT(FK_STORE_TMA) | FK_STORE_BIT(FK_STORE_BULK) | FK_STORE_BIT(FK_STORE_GENERAL))
#define FK_STORES_SMALL FK_STORE_BIT(FK_STORE_GENERAL)

/* 16-bit D that an epilogue may copy out of shared memory in bulk (the
 * bulk-copy and TMA-store paths), from the fields any family's job has: no
 * C, base 16-byte aligned, row stride a multiple of 8 elements. */
static inline int fk_d16_rows_copyable(fp8kit_dtype d_type, const void *d, int64_t ldd, const void *c)
{
    return (d_type == FP8KIT_BF16 || d_type == FP8KIT_F16) && !c && ((uintptr_t)d & 15u) == 0 && ldd % 8 == 0;
}

/* fk_d16_rows_copyable over a dense job, without output quantization. */
static inline int fk_d16_copyable(const fk_gemm_job *job)
{
    return fk_d16_rows_copyable(job->d_type, job->d, job->ldd, job->c) && job->desc.out_quant == FP8KIT_OUTQ_NONE;
}

/* Whether D leaves through the TMA-store epilogue in the variants that have
 * it: copyable D, N a multiple of 8, any activation, and no bias or a
 * column bias on a 4-byte boundary with B not row-scaled (the bias takes
 * the per-warp table's column factors' place, fetched with 4-byte
 * cp.async). N: a TMA store clips a row's end only to 16 bytes (H100,
 * 2026-11-22: N = 325 in a row stride of 328 wrote columns 325-327). */
static inline int fk_tma_store_ok(const fk_gemm_job *job)
{
    const int bias_ok = !job->bias || (job->desc.bias == FP8KIT_BIAS_COL && job->desc.scale_b != FP8KIT_SCALE_ROW &&
                                       ((uintptr_t)job->bias & 3u) == 0);
    return fk_d16_copyable(job) && job->n % 8 == 0 && bias_ok;
}

/* The TMA-store variants' kind for a job: 1 plain epilogue, 2 with a bias
 * or an activation (their own kernels, so the plain ones carry none of
 * that code; H100, 2026-11-22: putting it in the plain kernels cost them
 * 10-14%). */
static inline int fk_tma_store_kind(const fk_gemm_job *job)
{
    return job->bias || job->desc.act != FP8KIT_ACT_NONE ? 2 : 1;
}

/* fp32 D accumulated in place (D += y: beta 1, C is D) that an epilogue may
 * add from shared memory by bulk reduce-add copies (FK_STORE_REDUCE, the
 * K-grouped family's): no bias, activation or output quantization, base
 * 16-byte aligned, N and the row stride multiples of 4 elements. The adds
 * flush subnormal inputs and results to zero (fk_bulk_reduce_add_f32), as
 * DeepGEMM's K-grouped epilogue does; tuning gemm_bulk=0 keeps the general,
 * exact path. */
static inline int fk_d32_reducible(fp8kit_dtype d_type, const void *d, int64_t ldd, const void *c, int64_t ldc,
                                   float beta, int64_t n, int plain_epilogue)
{
    return d_type == FP8KIT_F32 && c == d && ldc == ldd && beta == 1.0f && plain_epilogue &&
           ((uintptr_t)d & 15u) == 0 && ldd % 4 == 0 && n % 4 == 0;
}

/* fk_d32_reducible over a dense job (C in fp32). */
static inline int fk_job_reducible(const fk_gemm_job *job)
{
    return job->c_type == FP8KIT_F32 &&
           fk_d32_reducible(job->d_type, job->d, job->ldd, job->c, job->ldc, job->beta, job->n,
                            !job->bias && job->desc.act == FP8KIT_ACT_NONE && job->desc.out_quant == FP8KIT_OUTQ_NONE);
}

/* Whether the K-grouped GEMM's D may leave through store path `store`: fp32
 * D += (beta 1) by bulk reduce-add copies, 16-bit D = (beta 0) by bulk
 * copies; the general path always. Its epilogue has no bias, activation or
 * output quantization. */
static inline int fk_kg_store_fits(const fk_k_grouped_job *j, int store)
{
    const void *c = j->beta != 0.0f ? j->d : NULL; /* C is D itself when read */
    const int work = j->m > 0 && j->n > 0 && j->ktot > 0;
    switch (store) {
    case FK_STORE_REDUCE:
        return work && fk_d32_reducible(j->d_type, j->d, j->ldd, c, j->ldd, j->beta, j->n, 1);
    case FK_STORE_BULK: /* rows of whole 16-byte units, as the dense bulk path */
        return work && fk_d16_rows_copyable(j->d_type, j->d, j->ldd, c) && j->n % 8 == 0;
    default:
        return store == FK_STORE_GENERAL;
    }
}

/* The K-grouped GEMM's store path: the reduce-add, else the bulk copies,
 * where D allows and bulk paths are allowed (tuning gemm_bulk), else the
 * general one. */
static inline int fk_kg_store_pick(const fk_k_grouped_job *j, int bulk_allowed)
{
    if (bulk_allowed && fk_kg_store_fits(j, FK_STORE_REDUCE))
        return FK_STORE_REDUCE;
    if (bulk_allowed && fk_kg_store_fits(j, FK_STORE_BULK))
        return FK_STORE_BULK;
    return FK_STORE_GENERAL;
}

#endif
