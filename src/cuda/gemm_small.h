/* gemm_small.h - entry points of the small-M (decode) Hopper GEMM path in
 * gemm_sm90_small.cu, called from gemm.cu: the plan branch (takes the job or
 * declines it) and the launch of a plan it made; and what gemm.cu shares
 * with it (kernel parameters from the job, the kernel launch). */
#ifndef FK_CUDA_GEMM_SMALL_H
#define FK_CUDA_GEMM_SMALL_H

#include <cuda.h>
#include <cuda_runtime.h>
#include "core/backend.h"

/* Returns 1 and sets *st when the small-M kernel takes the job (config
 * filled on FP8KIT_OK), 0 when the general kernel should plan it. Called
 * after gemm.cu validated the job. */
int fk_small_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config, fp8kit_status *st);

/* What the sm90 kernels need beyond the core's checks (gemm.cu; the general
 * and small-M families' can_implement). */
fp8kit_status fk_sm90_can_implement(fp8kit_ctx *ctx, const fk_gemm_job *job);
/* Whether the job takes the precise fp32 path (fp16 copies; gemm_f16.cu),
 * and the workspace of those copies (0 off the path). */
int fk_f16_path(const fk_gemm_job *job);
size_t fk_f16_workspace_bytes(const fk_gemm_job *job);

/* Kernel parameters from the job: zeroed, then shape, scale and epilogue
 * fields (gemm.cu; the general, grouped and small-M launches use it). */
struct fk_gemm_params;
void fk_gemm_job_params(fk_gemm_params *p, const fk_gemm_job *job);

/* Fills *lc for a 1-D launch of grid x block threads with smem bytes of
 * dynamic shared memory on stream st, and its attributes in at: a cluster of
 * `cluster` CTAs along x when cluster > 1, then programmatic stream
 * serialization when pdl (gemm.cu; every GEMM launch and the cluster
 * occupancy query use it). */
void fk_launch_config(cudaLaunchConfig_t *lc, cudaLaunchAttribute at[2], unsigned grid, unsigned block, size_t smem,
                      cudaStream_t st, unsigned cluster, int pdl);

/* Launches kernel fn through cuLaunchKernelEx with its CUfunction cached in
 * *slot (NULL: none), else through the runtime (gemm.cu). */
fp8kit_status fk_cuda_launch(fp8kit_ctx *ctx, int device, CUfunction *slot, const void *fn,
                             const cudaLaunchConfig_t *lc, void **args, const char *what);

/* A plan of fk_small_plan in words (fk_cuda_plan_describe). */
void fk_small_describe(const fk_plan *plan, char *buf, size_t n);

/* Launches a plan made by fk_small_plan. */
fp8kit_status fk_small_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream);

#endif
