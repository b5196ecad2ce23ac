/* ep_stub.c - the expert-parallel layer's transport in a library built
 * without NCCL (no CUDA backend, or nccl.h not found when it was built):
 * fp8kit_ep_create reports FP8KIT_ERR_UNSUPPORTED, so no fp8kit_ep exists
 * and the other functions are never reached. CMakeLists.txt compiles this
 * file only when src/ep/nccl/ is not built. */
#include "core/backend_ops.h"
#include "ep/ep_impl.h"

fp8kit_status fk_ep_impl_create(fp8kit_ctx *ctx, void *comm, const fp8kit_ep_config *cfg, fp8kit_ep **out)
{
    (void)comm, (void)cfg, (void)out;
    return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                   "fp8kit_ep_create: this libfp8kit was built without NCCL (the expert-parallel layer needs the "
                   "CUDA backend and nccl.h when it is built)");
}

void fk_ep_impl_destroy(fp8kit_ep *ep) { (void)ep; }

fp8kit_status fk_ep_impl_dispatch(fp8kit_ep *ep, const fp8kit_tensor *x, const int32_t *topk_idx,
                                  const float *topk_w, int64_t t, void *stream)
{
    (void)x, (void)topk_idx, (void)topk_w, (void)t, (void)stream;
    return fk_fail(ep->ctx, FP8KIT_ERR_UNSUPPORTED, "fp8kit_ep_dispatch: built without NCCL");
}

fp8kit_status fk_ep_impl_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, void *stream)
{
    (void)y, (void)out, (void)stream;
    return fk_fail(ep->ctx, FP8KIT_ERR_UNSUPPORTED, "fp8kit_ep_combine: built without NCCL");
}
