/* quant.h - host-side entry points of the CUDA quantization kernels, shared by
 * cuda_ops.cu (dispatch) and the kernel files quant_*.cu, dequant.cu, cast.cu.
 * Jobs are validated by the core (src/core/quant_api.c); these only launch,
 * after asking their kernel's can_run rule below. */
#ifndef FK_CUDA_QUANT_H
#define FK_CUDA_QUANT_H

#include "cuda/cuda_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Binds the calling host thread to the context's device. */
fp8kit_status fk_cuda_bind(fp8kit_ctx *ctx);

/* ---- what the kernels need beyond the core's validation (index ranges,
 * grid dimensions, shared memory, the combinations a kernel handles): each
 * *_can_run answers FP8KIT_OK when its kernel runs the job, else the status
 * its run path returns (UNSUPPORTED with a message naming the limit, ...),
 * with that message recorded on ctx. They read no tensor data, bind no
 * device and launch nothing (placeholder pointers are fine). ops->supports
 * (cuda_ops.cu) asks them; every run path below calls its own first, so each
 * rule is written once and a call fails exactly as supports said. */

/* The quantize op (cuda_ops.cu): the rule of the kernel the job's scheme
 * runs on (fk_cuda_quantize's dispatch). */
fp8kit_status fk_cuda_quantize_can_run(fp8kit_ctx *ctx, const fk_quant_job *job);
/* quant_seg.cu: tensor, block1x128, mx axis -1. */
fp8kit_status fk_cuda_seg_can_run(fp8kit_ctx *ctx, const fk_quant_job *job);
/* quant_tile.cu: row, block128x128. */
fp8kit_status fk_cuda_tile_can_run(fp8kit_ctx *ctx, const fk_quant_job *job);
/* quant_colwise.cu: the pair fk_cuda_quantize_mx_both takes (rowwise may be
 * NULL: mx axis -2 alone; colwise NULL: rowwise alone, fk_cuda_seg_can_run). */
fp8kit_status fk_cuda_mx_both_can_run(fp8kit_ctx *ctx, const fk_quant_job *rowwise, const fk_quant_job *colwise);
/* dequant.cu: the dequantize op. */
fp8kit_status fk_cuda_dequant_can_run(fp8kit_ctx *ctx, const fk_quant_job *job);
/* cast.cu: the cast op. */
fp8kit_status fk_cuda_cast_can_run(fp8kit_ctx *ctx, const fk_cast_job *job);

/* The rows rule of the elementwise kernels (dequant.cu, cast.cu): one thread
 * per 8 elements of a row, rows of x (E x R of them) below 2^32 and of at most
 * 2^29 elements; fn names the op in the message. */
fp8kit_status fk_cuda_rows_can_run(fp8kit_ctx *ctx, const char *fn, const fk_mat *x);

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
