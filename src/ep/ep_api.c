/* ep_api.c - the public entry points of the expert-parallel layer
 * (include/fp8kit_ep.h): pointer and context checks, the argument checks of
 * ep_check.c, then the transport (nccl/ep_nccl.c; ep_stub.c in builds
 * without NCCL, whose functions say so). Built in every configuration. */
#include <string.h>
#include "core/check.h"
#include "ep/ep_impl.h"

fp8kit_status fp8kit_ep_buffer_size(const fp8kit_ep_config *cfg, int64_t world, size_t *bytes)
{
    if (!bytes)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_buffer_size: bytes is NULL");
    fk_ep_geom g;
    fp8kit_status st = fk_ep_geometry(NULL, "fp8kit_ep_buffer_size", cfg, world, 0, &g);
    if (st)
        return st;
    *bytes = g.total;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ep_create(fp8kit_ctx *ctx, void *nccl_comm, const fp8kit_ep_config *cfg, fp8kit_ep **out)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_create: ctx is NULL");
    if (!nccl_comm)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_create: nccl_comm is NULL");
    if (!cfg)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_create: cfg is NULL");
    if (!out)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_create: out is NULL");
    if (fp8kit_ctx_backend(ctx) != FP8KIT_BACKEND_CUDA)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "fp8kit_ep_create: the expert-parallel layer runs on the CUDA backend; ctx is a %s context",
                       fp8kit_backend_name(fp8kit_ctx_backend(ctx)));
    /* the configuration is checked by the transport, after the ranks have
     * met (every rank fails alike when one rank's is refused) */
    return fk_ep_impl_create(ctx, nccl_comm, cfg, out);
}

fp8kit_status fp8kit_ep_destroy(fp8kit_ep *ep)
{
    if (ep)
        fk_ep_impl_destroy(ep);
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ep_recv_view(const fp8kit_ep *ep, fp8kit_ep_recv *recv)
{
    if (!ep)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_recv_view: ep is NULL");
    if (!recv)
        return fk_fail(ep->ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_recv_view: recv is NULL");
    fk_ep_views(&ep->cfg, &ep->g, ep->base, recv);
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ep_dispatch(fp8kit_ep *ep, const fp8kit_tensor *x, const int32_t *topk_idx,
                                 const float *topk_w, int64_t t, fp8kit_ep_recv *recv, void *stream)
{
    if (!ep)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_dispatch: ep is NULL");
    fp8kit_status st = fk_ep_check_dispatch(ep->ctx, &ep->cfg, &ep->g, ep->base, x, topk_idx, topk_w, t);
    if (st)
        return st;
    if ((st = fk_ep_impl_dispatch(ep, x, topk_idx, topk_w, t, stream)))
        return st;
    ep->last_t = t;
    if (recv)
        fk_ep_views(&ep->cfg, &ep->g, ep->base, recv);
    return FP8KIT_OK;
}

fp8kit_status fp8kit_ep_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, void *stream)
{
    if (!ep)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ep_combine: ep is NULL");
    fp8kit_status st = fk_ep_check_combine(ep->ctx, &ep->cfg, &ep->g, ep->base, ep->last_t, y, out);
    if (st)
        return st;
    return fk_ep_impl_combine(ep, y, out, stream);
}
