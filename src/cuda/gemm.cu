/* gemm.cu - host side of the CUDA scaled GEMM (fk_cuda_gemm_plan, fk_cuda_gemm,
 * fk_cuda_gemm_workspace). Placeholder until the sm_90a kernel lands: every
 * GEMM request is answered FP8KIT_ERR_UNSUPPORTED with a message. */
#include "cuda/backend.h"

extern "C" fp8kit_status fk_cuda_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config)
{
    (void)job;
    (void)config;
    return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: no kernel built yet");
}

extern "C" fp8kit_status fk_cuda_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan,
                                      void *stream)
{
    (void)job;
    (void)plan;
    (void)stream;
    return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "cuda gemm: no kernel built yet");
}

extern "C" fp8kit_status fk_cuda_gemm_workspace(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes)
{
    (void)ctx;
    (void)job;
    *bytes = 0;
    return FP8KIT_OK;
}
