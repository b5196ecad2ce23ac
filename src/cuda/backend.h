/* backend.h - CUDA backend state shared by the backend plumbing (backend.cu)
 * and the kernels' host code: device properties read once per context, and
 * the error-check macro that maps a CUDA error to a status with file:line. */
#ifndef FK_CUDA_BACKEND_H
#define FK_CUDA_BACKEND_H

#include <cuda_runtime.h>
#include "core/internal.h"

typedef struct fk_cuda_state {
    int device;
    int cc_major, cc_minor;
    int sm_count;
    size_t smem_optin;   /* max dynamic shared memory per block after opt-in */
    size_t l2_bytes;
    char name[256];
} fk_cuda_state;

static inline fk_cuda_state *fk_cuda(const fp8kit_ctx *ctx) { return (fk_cuda_state *)ctx->cuda; }

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
 * bytes, one CTA per SM) of kernel fn fit on the device at once (gemm.cu). */
cudaError_t fk_cuda_max_clusters(const void *fn, int cluster, int threads, size_t smem, int sm_count, int *count);

/* An integer knob from the environment, dflt when unset or empty (gemm.cu). */
int fk_env_int(const char *name, int dflt);

/* The general kernel's tile width when every SM has work (gemm.cu): of 256
 * (fast accumulation only), 192 and 128, the lowest waves x width x
 * per-column weight over tile_rows x N tiles, w128 the weight of 128 (192
 * weighs 1, 256 0.98); ties go wider. */
int fk_sm90_wide_bn(int64_t tile_rows, int64_t n, int sm_count, int promo, double w128);

/* Checks a kernel launch (cudaGetLastError after <<<>>>). */
#define FK_CUDA_LAUNCH_CHECK(ctx) FK_CUDA_CHECK(ctx, cudaGetLastError())

#endif
