/* ncclep.h - the NCCL_EP transport (ncclep.c) as ep_nccl.c calls it: NCCL
 * EP's group and handle made for an object whose allocation and geometry
 * exist, its dispatch after fp8kit has quantized the tokens into the send
 * chunk, and its combine; arguments already checked. */
#ifndef FK_EP_NCCLEP_H
#define FK_EP_NCCLEP_H

#include <cuda_runtime_api.h>
#include "ep/ep_impl.h"

/* NULL when libnccl_ep.so is loaded (once per process) with every function
 * the transport calls; else why not. */
const char *fk_ncclep_available(void);
/* Collective: NCCL EP's group on ep->comm and its handle (ep->nep). */
fp8kit_status fk_ncclep_create(fp8kit_ep *ep);
void fk_ncclep_destroy(fp8kit_ep *ep);
/* The ids and weights of t tokens prepared (ep_kernels.h), the handle updated
 * with them, NCCL EP's dispatch into the recv views, the scales transposed
 * for mn_major. */
fp8kit_status fk_ncclep_dispatch(fp8kit_ep *ep, const int32_t *topk_idx, const float *topk_w, int64_t t,
                                 cudaStream_t s);
fp8kit_status fk_ncclep_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, cudaStream_t s);

#endif
