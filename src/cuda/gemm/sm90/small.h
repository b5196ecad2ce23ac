/* gemm/sm90/small.h - the small-M (decode) family's host entry points in
 * gemm/sm90/small.cu: its plan (takes the job or declines it), the plan in
 * words, and the launch of a plan it made. */
#ifndef FK_CUDA_GEMM_SMALL_H
#define FK_CUDA_GEMM_SMALL_H

#include <cuda.h>
#include <cuda_runtime.h>
#include "cuda/gemm/host.h"

/* Returns 1 and sets *st when the small-M kernel takes the job (config
 * filled on FP8KIT_OK), 0 when the general kernel should plan it. Called
 * after gemm/sm90/dense_host.cu validated the job. */
int fk_small_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config, fp8kit_status *st);

/* A plan of fk_small_plan in words (fk_cuda_plan_describe). */
void fk_small_describe(const fk_plan *plan, char *buf, size_t n);

/* Launches a plan made by fk_small_plan. */
fp8kit_status fk_small_gemm(fp8kit_ctx *ctx, const void *job, const fk_plan *plan, void *stream);

#endif
