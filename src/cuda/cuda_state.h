/* cuda_state.h - CUDA backend state shared by the backend plumbing (cuda_ops.cu)
 * and the kernels' host code: device properties read once per context, and
 * the error-check macro that maps a CUDA error to a status with file:line. */
#ifndef FK_CUDA_STATE_H
#define FK_CUDA_STATE_H

#include <cuda_runtime.h>
#include "core/backend_ops.h"

typedef struct fk_cuda_state {
    int device;
    int cc_major, cc_minor;
    int sm_count;
    size_t smem_optin;   /* max dynamic shared memory per block after opt-in */
    char name[256];
} fk_cuda_state;

static inline fk_cuda_state *fk_cuda(const fp8kit_ctx *ctx) { return (fk_cuda_state *)fk_ctx_state(ctx); }

/* The backend's entry points (its ops table is in cuda_ops.cu). */
#ifdef __cplusplus
extern "C" {
#endif
int fk_cuda_available(void);
/* Why no CUDA device is usable, e.g. "no NVIDIA driver found (libcuda.so.1 not
 * loadable): the CUDA backend is unavailable". */
const char *fk_cuda_unavailable_reason(void);
int fk_cuda_device_count(void);
fp8kit_status fk_cuda_ctx_init(fp8kit_ctx *ctx);
void fk_cuda_ctx_free(fp8kit_ctx *ctx);
fp8kit_status fk_cuda_quantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
fp8kit_status fk_cuda_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job, void *stream);
fp8kit_status fk_cuda_quantize_both(fp8kit_ctx *ctx, const fk_quant_job *rowwise, const fk_quant_job *colwise,
                                    void *stream);
fp8kit_status fk_cuda_cast(fp8kit_ctx *ctx, const fk_cast_job *job, void *stream);
/* gemm/families.cu and gemm/sm90/dense_host.cu: plan (the families' loop), run, workspace */
fp8kit_status fk_cuda_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
fp8kit_status fk_cuda_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan, void *stream);
/* the workspace a call must have (precise fp32 output's fp16 copies) */
fp8kit_status fk_cuda_gemm_workspace(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
/* what fp8kit_gemm_workspace_size reports: the plan's fastest path, or with
 * autotune on a bound over every plan the tuner may choose (planning would
 * time kernels on pointers a size query need not make real) */
fp8kit_status fk_cuda_gemm_workspace_size(fp8kit_ctx *ctx, const fk_gemm_job *job, size_t *bytes);
void fk_cuda_plan_describe(const fk_plan *plan, char *buf, size_t n);
/* ops->supports for GEMMs (gemm/families.cu); the table's supports
 * (cuda_ops.cu) sends quantize / dequantize / cast jobs to the kernels'
 * can_run rules (quant.h) and every other op here */
fp8kit_status fk_cuda_supports(fp8kit_ctx *ctx, fk_op op, const void *job);
/* gemm/sm90/grouped_host.cu */
fp8kit_status fk_cuda_grouped_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config);
fp8kit_status fk_cuda_grouped_gemm(fp8kit_ctx *ctx, const fk_grouped_job *job, const fk_plan *plan, void *stream);
/* mx_norm_kernel.cu: the MX chunk normalization (format/mx_norm_rule.h) of one GEMM
 * operand (rows x k codes, row stride ldx; e8m0 scales s, plain or blocked)
 * into y (row stride ldy) and plain scales sy; optional (NULL: none) the MX
 * kernel's stage tables of the result (tab: fp32 [k / 128][4][rows rounded
 * up to band]) and per (K block, band of `band` rows) 4 int32 (flags: min
 * and max finite scale byte, whether every row has one scale byte over the
 * block, unused), on the stream */
fp8kit_status fk_cuda_mx_norm(fp8kit_ctx *ctx, const void *x, int64_t ldx, const void *s, int blocked, int64_t rows,
                              int64_t k, int e5m2, void *y, int64_t ldy, void *sy, void *tab, void *flags, int band,
                              void *stream);
/* mx_norm_kernel.cu: the stage tables and band flags of normalized scale bytes sy
 * (rows x K / 32), rows taken as groups of gn, each padded to rpg (a
 * multiple of band) in the tables (fk_mx_tables_kernel) */
fp8kit_status fk_cuda_mx_tables(fp8kit_ctx *ctx, const void *sy, int64_t rows, int64_t k, int band, int64_t gn,
                                int64_t rpg, void *tab, void *flags, void *stream);
/* gemm/sm90/grouped_host.cu: the workspace of a grouped job's fastest path (the MX copies) */
fp8kit_status fk_cuda_grouped_workspace(fp8kit_ctx *ctx, const fk_grouped_job *job, size_t *bytes);
/* gemm/sm90/k_grouped_host.cu: fp8kit_k_grouped_gemm (offsets in device memory, checked by the kernel) */
fp8kit_status fk_cuda_k_grouped_gemm(fp8kit_ctx *ctx, const fk_k_grouped_job *job, void *stream);
#ifdef __cplusplus
}
#endif

/* Returns from the enclosing function with FP8KIT_ERR_DEVICE (or OUT_OF_MEMORY)
 * and a message naming the call, the CUDA error and file:line. */
#define FK_CUDA_CHECK(ctx, call)                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            (void)cudaGetLastError();                                                         \
            return fk_fail((ctx), e_ == cudaErrorMemoryAllocation ? FP8KIT_ERR_OUT_OF_MEMORY  \
                                                                  : FP8KIT_ERR_DEVICE,        \
                           "%s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__,  \
                           __LINE__);                                                         \
        }                                                                                     \
    } while (0)

/* How many clusters of `cluster` CTAs (threads each, smem dynamic shared
 * bytes, one CTA per SM) of kernel fn fit on the device at once (gemm/launch.cu). */
cudaError_t fk_cuda_max_clusters(const void *fn, int cluster, int threads, size_t smem, int sm_count, int *count);


/* A launch hook: when set, the general sm90 kernel's next launches are
 * handed to it (kernel host stub, grid, block, dynamic shared memory, the
 * parameters with their sizes, PDL) instead of the GPU, and its status is
 * the call's. Only the test-only library (tests/hooks) sets one. */
typedef fp8kit_status (*fk_launch_hook_fn)(const void *fn, const unsigned grid[3], const unsigned block[3],
                                           size_t smem, void *const *args, const size_t *sizes, int nargs,
                                           int pdl);
#ifdef __cplusplus
extern "C" {
#endif
void fk_cuda_set_launch_hook(fk_launch_hook_fn hook);
fk_launch_hook_fn fk_cuda_launch_hook(void);
#ifdef __cplusplus
}
#endif

/* Checks a kernel launch (cudaGetLastError after <<<>>>). */
#define FK_CUDA_LAUNCH_CHECK(ctx) FK_CUDA_CHECK(ctx, cudaGetLastError())

#endif
