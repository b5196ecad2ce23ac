/* cpu.h - the CPU backend's entry points, called through its ops table
 * (cpu_ops.c). Jobs are validated by the core; these only compute. */
#ifndef FK_CPU_H
#define FK_CPU_H

#include "core/backend_ops.h"

fp8kit_status fk_cpu_quantize(fp8kit_ctx *ctx, const fk_quant_job *job);
fp8kit_status fk_cpu_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job);
fp8kit_status fk_cpu_cast(fp8kit_ctx *ctx, const fk_cast_job *job);
fp8kit_status fk_cpu_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
/* plan NULL: a plan made for the job now */
fp8kit_status fk_cpu_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan);
void fk_cpu_plan_describe(const fk_plan *plan, char *buf, size_t n);
/* fp8kit_k_grouped_gemm (cpu_k_grouped.c): offsets checked by the core */
fp8kit_status fk_cpu_k_grouped(fp8kit_ctx *ctx, const fk_k_grouped_job *job);

extern const fk_backend_ops fk_cpu_backend;

#endif
