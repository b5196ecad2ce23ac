/* cpu_ops.c - the CPU backend's ops table (core/backend_ops.h): host memory,
 * OpenMP threads, every op; the portable reference the CUDA backend is
 * checked against. */
#include <omp.h>
#include "cpu/cpu.h"

static int fk_cpu_available(void) { return 1; }
static const char *fk_cpu_unavailable_reason(void) { return ""; }

static void fk_cpu_describe(fp8kit_ctx *ctx)
{
    fk_ctx_set_describe(ctx, "cpu: %d OpenMP threads",
                        fk_ctx_threads(ctx) > 0 ? fk_ctx_threads(ctx) : omp_get_max_threads());
}

static fp8kit_status fk_cpu_init(fp8kit_ctx *ctx)
{
    fk_cpu_describe(ctx);
    return FP8KIT_OK;
}

static fp8kit_status fk_cpu_quantize_op(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream)
{
    (void)stream;
    return fk_cpu_quantize(ctx, job);
}

static fp8kit_status fk_cpu_dequantize_op(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream)
{
    (void)stream;
    return fk_cpu_dequantize(ctx, job);
}

static fp8kit_status fk_cpu_cast_op(fp8kit_ctx *ctx, const fk_cast_job *job, void *stream)
{
    (void)stream;
    return fk_cpu_cast(ctx, job);
}

static fp8kit_status fk_cpu_gemm_op(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream)
{
    (void)stream;
    return fk_cpu_gemm(ctx, job, plan);
}

static fp8kit_status fk_cpu_k_grouped_op(fp8kit_ctx *ctx, const fk_k_grouped_job *job, void *stream)
{
    (void)stream;
    return fk_cpu_k_grouped(ctx, job);
}

const fk_backend_ops fk_cpu_backend = {
    .id = FP8KIT_BACKEND_CPU,
    .name = "cpu",
    .available = fk_cpu_available,
    .unavailable_reason = fk_cpu_unavailable_reason,
    .init = fk_cpu_init,
    .threads_changed = fk_cpu_describe,
    .quantize = fk_cpu_quantize_op,
    .dequantize = fk_cpu_dequantize_op,
    .cast = fk_cpu_cast_op,
    .gemm_plan = fk_cpu_gemm_plan,
    .gemm_run = fk_cpu_gemm_op,
    .plan_describe = fk_cpu_plan_describe,
    .k_grouped = fk_cpu_k_grouped_op,
};
