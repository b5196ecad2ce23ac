/* quant.h - host-side entry points of the CUDA quantization kernels, shared by
 * backend.cu (dispatch) and the kernel files quant_*.cu, dequant.cu, cast.cu.
 * Jobs are validated by the core (src/core/quant_api.c); these only launch. */
#ifndef FK_CUDA_QUANT_H
#define FK_CUDA_QUANT_H

#include "cuda/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Binds the calling host thread to the context's device. */
fp8kit_status fk_cuda_bind(fp8kit_ctx *ctx);

/* quant_seg.cu: groups along a row that fit in a warp: mx axis -1 (32) and
 * block1x128 (128); plus the tensor scheme (amax pass + quantize pass). */
fp8kit_status fk_cuda_quant_seg(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s);
fp8kit_status fk_cuda_quant_tensor(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s);

/* quant_tile.cu: row (one scale per row) and block128x128. */
fp8kit_status fk_cuda_quant_row(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s);
fp8kit_status fk_cuda_quant_128x128(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s);

/* quant_colwise.cu: mx along axis -2 (transposed output) and the fused kernel
 * that reads x once and writes both the axis -1 job's and the axis -2 job's
 * outputs. Either job may be NULL (not both). Both jobs must describe the
 * same input x (same data, dtype, E, R, C, strides), scheme mx, the same
 * element format and rounding; each has its own q, scale and scale layout.
 * The jobs are NOT validated here: callers other than fk_cuda_quantize must
 * build them the way src/core/quant_api.c does. */
fp8kit_status fk_cuda_quantize_mx_both(fp8kit_ctx *ctx, const fk_quant_job *rowwise, const fk_quant_job *colwise,
                                       cudaStream_t s);

/* dequant.cu */
fp8kit_status fk_cuda_dequant(fp8kit_ctx *ctx, const fk_quant_job *job, cudaStream_t s);

/* cast.cu */
fp8kit_status fk_cuda_cast_run(fp8kit_ctx *ctx, const fk_cast_job *job, cudaStream_t s);

/* tests/hooks/selfcheck.cu (test-only library): compares the hardware fp8 conversion of the quantization kernels
 * with the shared codec (format/codec.h) over all 2^32 fp32 bit patterns
 * (NaN excluded), for e4m3 [0] and e5m2 [1]: mismatch counts and the lowest
 * mismatching input bits (0xFFFFFFFF if none). Synchronous. */
fp8kit_status fk_cuda_cvt_selfcheck(fp8kit_ctx *ctx, unsigned long long *mismatches, unsigned int *first_bits);

#ifdef __cplusplus
}
#endif
#endif
