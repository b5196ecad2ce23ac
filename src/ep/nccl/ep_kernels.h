/* ep_kernels.h - the expert-parallel layer's kernels (ep_kernels.cu), called
 * by its transport (ep_nccl.c) on the caller's stream; each returns the
 * launch's cudaError_t. The byte layout they work on is ep_impl.h's
 * fk_ep_geom; base is the object's device allocation. Arguments are the
 * entry points' checked ones. */
#ifndef FK_EP_KERNELS_H
#define FK_EP_KERNELS_H

#include <cuda_runtime_api.h>
#include "ep/ep_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Dispatch, before the exchange: this rank's chunk header (t) and top-k ids
 * (ids outside [-1, E) made -1 and reported in the status word, which must
 * be 0 before), the weights and each entry's return slot (off_retidx) for
 * the combine. t may be 0 (ids and w are then not read). */
cudaError_t fk_ep_launch_prep(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                              const int32_t *ids, const float *w, int64_t t, cudaStream_t s);

/* Dispatch, after the exchange: each local expert's rows from the received
 * chunks (by source rank, then token) - counts, return slots - then the
 * codes and scales copied into the recv layout. */
cudaError_t fk_ep_launch_unpack(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                int sm_count, cudaStream_t s);

/* Combine, before the exchange: every received row of y (bf16, expert and
 * row strides se, sr in elements; rows past the counts not read) into its
 * return slot of the peer's return chunk. */
cudaError_t fk_ep_launch_ret_pack(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                  const void *y, int64_t se, int64_t sr, int sm_count, cudaStream_t s);

/* Combine, after the exchange: out (t, H) bf16, row stride ld elements, from
 * the returned rows, the kept weights and return slots (t >= 1). */
cudaError_t fk_ep_launch_combine(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base, void *out,
                                 int64_t ld, int64_t t, cudaStream_t s);

/* NCCL_EP transport, before NCCL EP's dispatch: the ids it routes by into
 * the send chunk's id slots (invalid ids -1 and reported in the status word,
 * which must be 0 before; an expert listed again -1) and the combine weights
 * (off_w: an expert's weights summed at its first entry). Nothing for t = 0. */
cudaError_t fk_ep_launch_nep_prep(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                  const int32_t *ids, const float *w, int64_t t, cudaStream_t s);

/* NCCL_EP transport, mn_major: the plain f32 scales NCCL EP wrote at off_recv
 * into the recv scales' mn_major layout, rows below the counts (high
 * throughput: below the last row end). */
cudaError_t fk_ep_launch_nep_scales(const fk_ep_geom *g, unsigned char *base, int sm_count, cudaStream_t s);

/* NCCL_EP transport, high throughput, after NCCL EP's dispatch: its int64
 * per-expert rows (off_cnt64) into the counts and the contiguous layout's
 * row ends (off_ends). */
cudaError_t fk_ep_launch_nep_ends(const fk_ep_geom *g, unsigned char *base, cudaStream_t s);

/* NCCL_EP transport, high throughput, before NCCL EP's combine: y (R, H)
 * bf16 weighted row by row by the slots' weights (off_slotw) into off_yw. */
cudaError_t fk_ep_launch_nep_weight(const fp8kit_ep_config *cfg, const fk_ep_geom *g, unsigned char *base,
                                    const void *y, int sm_count, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
