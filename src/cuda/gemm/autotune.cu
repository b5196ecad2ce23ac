/* gemm/autotune.cu - the CUDA GEMM autotuner (fp8kit_ctx_set_autotune): given the
 * candidate plan configs of a job, returns a choice remembered under the job's
 * text key, or times every candidate once on a scratch output and remembers
 * the fastest (core/tune.c keeps the table and the cache file). Runs inside
 * plan creation, under the context's plan lock. */
#include <stdio.h>
#include <string.h>
#include "cuda/cuda_state.h"

/* Average microseconds per launch of one config over a batch, or < 0 when the
 * config does not run on this job. */
static double fk_time_config(fp8kit_ctx *ctx, const fk_gemm_job *job, const unsigned char *config,
                             cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1)
{
    fk_plan plan;
    memset(&plan, 0, sizeof plan);
    memcpy(plan.config, config, FK_PLAN_CONFIG_BYTES);
    plan.valid = 1;
    if (fk_cuda_gemm(ctx, job, &plan, st) != FP8KIT_OK) /* warm-up */
        return -1.0;
    float ms = 0.0f;
    if (cudaEventRecord(e0, st) != cudaSuccess || fk_cuda_gemm(ctx, job, &plan, st) != FP8KIT_OK ||
        cudaEventRecord(e1, st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
        return -1.0;
    /* batches of ~2 ms (at least 2, at most 200 launches); best of three */
    int reps = ms > 0.0f ? (int)(2.0f / ms) : 200;
    reps = reps < 2 ? 2 : reps > 200 ? 200 : reps;
    double best = -1.0;
    for (int b = 0; b < 3; b++) {
        if (cudaEventRecord(e0, st) != cudaSuccess)
            return -1.0;
        for (int r = 0; r < reps; r++)
            if (fk_cuda_gemm(ctx, job, &plan, st) != FP8KIT_OK)
                return -1.0;
        if (cudaEventRecord(e1, st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
            cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            return -1.0;
        const double us = 1000.0 * ms / reps;
        if (best < 0.0 || us < best)
            best = us;
    }
    return best;
}

extern "C" fp8kit_status fk_cuda_gemm_autotune(fp8kit_ctx *ctx, const fk_gemm_job *job,
                                               const unsigned char *cands, int count,
                                               const char *signature, void *config)
{
    const fk_cuda_state *cs = fk_cuda(ctx);
    char prefix[200], key[FK_TUNE_KEY_BYTES];
    snprintf(prefix, sizeof prefix, "cuda:%s:%s", signature, cs->name);
    fk_gemm_key_text(ctx, job, prefix, key, sizeof key);
    if (fk_tune_find(ctx, key, config))
        return FP8KIT_OK;
    if (count <= 1 || job->m == 0 || job->n == 0) {
        memcpy(config, cands, FK_PLAN_CONFIG_BYTES);
        return count >= 1 ? fk_tune_add(ctx, key, config, 0.0) : FP8KIT_OK;
    }
    /* Scratch output (and amax) so the caller's D, C and amax are untouched
     * even when C aliases D; the caller's pending work must finish first. */
    const size_t esize = fp8kit_dtype_size(job->d_type);
    const size_t dbytes = (size_t)((job->m - 1) * job->ldd + job->n) * esize;
    fk_gemm_job tj = *job;
    void *dscratch = NULL;
    float *amax = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    fp8kit_status rc = FP8KIT_OK;
    int best = 0;
    double best_us = -1.0;
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce == cudaSuccess) ce = cudaMalloc(&dscratch, dbytes);
    if (ce == cudaSuccess && job->amax_d) ce = cudaMalloc((void **)&amax, sizeof(float));
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreate(&e0);
    if (ce == cudaSuccess) ce = cudaEventCreate(&e1);
    if (ce != cudaSuccess) {
        (void)cudaGetLastError();
        rc = fk_fail(ctx, ce == cudaErrorMemoryAllocation ? FP8KIT_ERR_OUT_OF_MEMORY : FP8KIT_ERR_DEVICE,
                     "cuda gemm autotune: %s", cudaGetErrorString(ce));
    } else {
        tj.d = dscratch;
        tj.amax_d = job->amax_d ? amax : NULL;
        for (int i = 0; i < count; i++) {
            const double us = fk_time_config(ctx, &tj, cands + (size_t)i * FK_PLAN_CONFIG_BYTES, st, e0, e1);
            if (us >= 0.0 && (best_us < 0.0 || us < best_us)) {
                best_us = us;
                best = i;
            }
        }
        ce = cudaStreamSynchronize(st);
        if (ce != cudaSuccess) {
            (void)cudaGetLastError();
            rc = fk_fail(ctx, FP8KIT_ERR_DEVICE, "cuda gemm autotune: %s", cudaGetErrorString(ce));
        } else if (best_us < 0.0) {
            rc = fk_fail(ctx, FP8KIT_ERR_INTERNAL,
                         "cuda gemm autotune: none of %d candidate configs ran", count);
        }
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (st) cudaStreamDestroy(st);
    cudaFree(amax);
    cudaFree(dscratch);
    if (rc != FP8KIT_OK)
        return rc;
    memcpy(config, cands + (size_t)best * FK_PLAN_CONFIG_BYTES, FK_PLAN_CONFIG_BYTES);
    /* a cache file that cannot be rewritten does not fail the GEMM: the choice
     * stays in memory (the file was proven writable when autotune was set) */
    (void)fk_tune_add(ctx, key, config, best_us);
    return FP8KIT_OK;
}
