/* ep_nccl.c - the expert-parallel layer's transport on NCCL (ep_impl.h's
 * fk_ep_impl_*): the object and its one device allocation, the ranks'
 * agreement on the configuration at creation, and the dispatch and combine
 * as fp8kit_quantize + kernels (ep_kernels.cu) around one NCCL group of
 * ncclSend / ncclRecv per peer over fixed-size buffers, all on the caller's
 * stream: no host synchronization, no allocation, capturable in a CUDA graph.
 * NCCL through dlopen (nccl_lib.c). With transport NCCL_EP the exchange and
 * the combine's sum are NCCL EP's (ncclep.c) instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "core/backend_ops.h"
#include "ep/ep_impl.h"
#include "ep/nccl/ep_kernels.h"
#include "ep/nccl/nccl_lib.h"
#include "ep/nccl/ncclep.h"

/* A CUDA runtime failure as FP8KIT_ERR_DEVICE (OUT_OF_MEMORY for an
 * allocation) naming the call. */
static fp8kit_status fk_ep_cuda(const fp8kit_ctx *ctx, const char *fn, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return FP8KIT_OK;
    (void)cudaGetLastError();
    return fk_fail(ctx, e == cudaErrorMemoryAllocation ? FP8KIT_ERR_OUT_OF_MEMORY : FP8KIT_ERR_DEVICE,
                   "%s: %s failed: %s", fn, what, cudaGetErrorString(e));
}

/* Binds the calling thread to the context's device. */
static fp8kit_status fk_ep_bind(const fp8kit_ctx *ctx, const char *fn)
{
    int cur = -1;
    fp8kit_status st = fk_ep_cuda(ctx, fn, cudaGetDevice(&cur), "cudaGetDevice");
    if (!st && cur != fk_ctx_device(ctx))
        st = fk_ep_cuda(ctx, fn, cudaSetDevice(fk_ctx_device(ctx)), "cudaSetDevice");
    return st;
}

static fp8kit_status fk_ep_nccl_fail(const fp8kit_ctx *ctx, const fk_nccl *nc, ncclComm_t comm, const char *fn,
                                     const char *what, ncclResult_t r)
{
    const char *last = nc->GetLastError ? nc->GetLastError(comm) : NULL;
    return fk_fail(ctx, FP8KIT_ERR_DEVICE, "%s: %s failed: %s%s%s", fn, what, nc->GetErrorString(r),
                   last && *last ? ": " : "", last ? last : "");
}

/* ------------------------------------------------------------------ create */

/* The fields every rank must agree on, and whether this rank's checks
 * passed: compared through one all-reduce of (v, -v) with max. */
enum { FK_EP_NAGREE = 7 };
static void fk_ep_agree_vec(const fp8kit_ep_config *cfg, int64_t failed, int64_t *v)
{
    v[0] = failed;
    v[1] = cfg->num_experts;
    v[2] = cfg->hidden;
    v[3] = cfg->top_k;
    v[4] = cfg->max_tokens;
    v[5] = (int64_t)cfg->fp8 * 16 + cfg->mx;
    v[6] = (int64_t)cfg->mode * 65536 + (int64_t)cfg->transport * 4096 + (int64_t)cfg->rounding * 256 +
           (int64_t)cfg->pow2 * 16 + (int64_t)cfg->scale_layout;
}

/* Meets the other ranks on the communicator's device, on the internal
 * stream s (synchronized): on return *others_failed says whether another
 * rank's checks failed, *differs names the first field that differs (NULL
 * when none). */
static fp8kit_status fk_ep_agree(fp8kit_ctx *ctx, const fk_nccl *nc, ncclComm_t comm, cudaStream_t s,
                                 const fp8kit_ep_config *cfg, int64_t failed, int *others_failed,
                                 const char **differs)
{
    static const char *const names[FK_EP_NAGREE] = {"", "num_experts", "hidden", "top_k", "max_tokens",
                                                    "fp8 / mx", "mode / transport / rounding / pow2 / scale_layout"};
    const char *fn = "fp8kit_ep_create";
    int64_t h[2 * FK_EP_NAGREE];
    fk_ep_agree_vec(cfg, failed, h);
    for (int i = 0; i < FK_EP_NAGREE; i++)
        h[FK_EP_NAGREE + i] = -h[i];
    int64_t *d = NULL;
    fp8kit_status st = fk_ep_cuda(ctx, fn, cudaMalloc((void **)&d, sizeof h), "cudaMalloc (112 bytes)");
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
    if (!st) {
        ncclResult_t r = fk_nccl_settle(nc, comm, nc->AllReduce(d, d, 2 * FK_EP_NAGREE, ncclInt64, ncclMax, comm, s));
        if (r != ncclSuccess)
            st = fk_ep_nccl_fail(ctx, nc, comm, fn, "ncclAllReduce (the ranks' configurations)", r);
    }
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (d)
        (void)cudaFree(d);
    if (st)
        return st;
    *others_failed = h[0] != 0 && !failed;
    *differs = NULL;
    for (int i = 1; i < FK_EP_NAGREE && !*differs; i++)
        if (h[i] != -h[FK_EP_NAGREE + i]) /* max != min */
            *differs = names[i];
    return FP8KIT_OK;
}

fp8kit_status fk_ep_impl_create(fp8kit_ctx *ctx, void *comm, const fp8kit_ep_config *cfg, fp8kit_ep **out)
{
    const char *fn = "fp8kit_ep_create", *why = NULL;
    const fk_nccl *nc = fk_nccl_get(&why);
    if (!nc)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: %s", fn, why);
    ncclComm_t c = (ncclComm_t)comm;
    int world = 0, rank = 0, dev = -1;
    ncclResult_t r = nc->CommCount(c, &world);
    if (r == ncclSuccess)
        r = nc->CommUserRank(c, &rank);
    if (r == ncclSuccess)
        r = nc->CommCuDevice(c, &dev);
    if (r != ncclSuccess)
        return fk_ep_nccl_fail(ctx, nc, c, fn, "querying the communicator", r);
    /* the ranks meet on the communicator's device, which must be the context's */
    int cur = -1;
    cudaStream_t s = NULL;
    fp8kit_status st = fk_ep_cuda(ctx, fn, cudaGetDevice(&cur), "cudaGetDevice");
    if (!st && cur != dev)
        st = fk_ep_cuda(ctx, fn, cudaSetDevice(dev), "cudaSetDevice");
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st)
        return st;

    /* this rank's own checks, then its buffers; the verdict is shared below */
    fk_ep_geom g;
    memset(&g, 0, sizeof g);
    if (dev != fk_ctx_device(ctx))
        st = fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: the communicator is on device %d, the context on device %d",
                     fn, dev, fk_ctx_device(ctx));
    else
        st = fk_ep_geometry(ctx, fn, cfg, world, rank, &g);
    const char *nep_why = NULL;
    if (!st && cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP && (nep_why = fk_ncclep_available()))
        st = fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: transport NCCL_EP: %s", fn, nep_why);
    unsigned char *base = NULL;
    int sm = 0;
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaMalloc((void **)&base, g.total), "cudaMalloc of the layer's buffers");
    if (!st) /* counts 0 before the first dispatch, the mn_major padding 0; synchronized by fk_ep_agree */
        st = fk_ep_cuda(ctx, fn, cudaMemsetAsync(base, 0, g.total, s), "cudaMemsetAsync");
    if (!st)
        st = fk_ep_cuda(ctx, fn, cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, dev),
                        "cudaDeviceGetAttribute");
    fp8kit_ep *ep = NULL;
    if (!st && !(ep = (fp8kit_ep *)calloc(1, sizeof *ep)))
        st = fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);

    char mine[512] = "";
    if (st) /* keep this rank's message across the all-reduce */
        snprintf(mine, sizeof mine, "%s", fp8kit_last_error(ctx));
    int others = 0;
    const char *differs = NULL;
    fp8kit_status ast = fk_ep_agree(ctx, nc, c, s, cfg, st != FP8KIT_OK, &others, &differs);
    (void)cudaStreamDestroy(s);
    if (st)
        st = fk_fail(ctx, st, "%s", mine);
    else if (ast)
        st = ast;
    else if (others)
        st = fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                     "%s: another rank's fp8kit_ep_create failed (its own status says why); no rank made the layer",
                     fn);
    else if (differs)
        st = fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: the ranks' configurations differ (%s)", fn, differs);
    if (!st) {
        ep->ctx = ctx;
        ep->cfg = *cfg;
        ep->g = g;
        ep->comm = comm;
        ep->base = base;
        ep->last_t = -1;
        ep->sm_count = sm;
        /* NCCL EP's group and handle: collective, every rank got this far */
        if (cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP)
            st = fk_ncclep_create(ep);
    }
    if (st) {
        if (base)
            (void)cudaFree(base);
        free(ep);
    } else {
        *out = ep;
    }
    if (cur >= 0 && cur != dev)
        (void)cudaSetDevice(cur);
    return st;
}

void fk_ep_impl_destroy(fp8kit_ep *ep)
{
    if (ep->base && !fk_ep_bind(ep->ctx, "fp8kit_ep_destroy")) {
        (void)cudaDeviceSynchronize(); /* work in flight on any stream may still use the buffers */
        fk_ncclep_destroy(ep);
        (void)cudaFree(ep->base);
        (void)cudaGetLastError();
    }
    free(ep);
}

/* ------------------------------------------------------------ the exchange */

/* One NCCL group: to every peer p, bytes from send + p x send_stride (the
 * same buffer for all when send_stride is 0); from every peer p, bytes into
 * recv + p x bytes. */
static fp8kit_status fk_ep_exchange(fp8kit_ep *ep, const char *fn, const unsigned char *send, size_t send_stride,
                                    unsigned char *recv, size_t bytes, cudaStream_t s)
{
    const char *why = NULL;
    const fk_nccl *nc = fk_nccl_get(&why);
    if (!nc)
        return fk_fail(ep->ctx, FP8KIT_ERR_UNSUPPORTED, "%s: %s", fn, why);
    ncclComm_t c = (ncclComm_t)ep->comm;
    ncclResult_t r = nc->GroupStart();
    if (r != ncclSuccess)
        return fk_ep_nccl_fail(ep->ctx, nc, c, fn, "ncclGroupStart", r);
    /* inside a group the calls are only recorded (a non-blocking communicator
     * may say ncclInProgress); ncclGroupEnd enqueues them on the stream */
    const char *what = "ncclSend";
    for (int64_t p = 0; p < ep->g.world && (r == ncclSuccess || r == ncclInProgress); p++) {
        r = nc->Send(send + (size_t)p * send_stride, bytes, ncclUint8, (int)p, c, s);
        if (r == ncclSuccess || r == ncclInProgress) {
            what = "ncclRecv";
            r = nc->Recv(recv + (size_t)p * bytes, bytes, ncclUint8, (int)p, c, s);
        }
    }
    if (r == ncclInProgress)
        r = ncclSuccess;
    /* closes the group even after a failure; the kernels after it must find the transfers enqueued */
    const ncclResult_t r2 = fk_nccl_settle(nc, c, nc->GroupEnd());
    if (r != ncclSuccess)
        return fk_ep_nccl_fail(ep->ctx, nc, c, fn, what, r);
    if (r2 != ncclSuccess)
        return fk_ep_nccl_fail(ep->ctx, nc, c, fn, "ncclGroupEnd", r2);
    return FP8KIT_OK;
}

/* A failure after work was enqueued: the buffers' contents are unspecified,
 * and there is no routing to combine any more. */
static fp8kit_status fk_ep_broken(fp8kit_ep *ep, fp8kit_status st)
{
    ep->last_t = -1;
    return st;
}

/* ---------------------------------------------------------------- dispatch */

/* x (t, H) quantized into this rank's chunk: codes (t, H), scales (t, H /
 * 128) f32 or (t, H / 32) e8m0, by fp8kit_quantize on the stream. */
static fp8kit_status fk_ep_quantize(fp8kit_ep *ep, const fp8kit_tensor *x, int64_t t, void *stream)
{
    const fp8kit_ep_config *cfg = &ep->cfg;
    const int64_t H = cfg->hidden;
    unsigned char *send = ep->base + ep->g.off_send;
    const fp8kit_quant_desc d = fk_ep_quant_desc(cfg);
    fp8kit_tensor q = fp8kit_tensor_2d(send + ep->g.ck_codes, cfg->fp8, t, H, H);
    fp8kit_tensor sc = cfg->mx ? fp8kit_tensor_2d(send + ep->g.ck_scales, FP8KIT_E8M0, t, H / 32, H / 32)
                               : fp8kit_tensor_2d(send + ep->g.ck_scales, FP8KIT_F32, t, H / 128, H / 128);
    fp8kit_status st = fp8kit_quantize(ep->ctx, &d, x, &q, &sc, stream);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", fp8kit_last_error(ep->ctx));
        return fk_fail(ep->ctx, st, "fp8kit_ep_dispatch: quantizing x: %s", msg);
    }
    return FP8KIT_OK;
}

fp8kit_status fk_ep_impl_dispatch(fp8kit_ep *ep, const fp8kit_tensor *x, const int32_t *topk_idx,
                                  const float *topk_w, int64_t t, void *stream)
{
    const char *fn = "fp8kit_ep_dispatch";
    const fk_ep_geom *g = &ep->g;
    cudaStream_t s = (cudaStream_t)stream;
    fp8kit_status st = fk_ep_bind(ep->ctx, fn);
    if (st)
        return st;
    /* fp8kit_quantize checks its call before it writes: a refusal leaves everything as it was */
    if (t > 0 && (st = fk_ep_quantize(ep, x, t, stream)))
        return st;
    if (ep->nep) {
        if ((st = fk_ep_cuda(ep->ctx, fn, cudaMemsetAsync(ep->base + g->off_status, 0, 4, s), "cudaMemsetAsync")) ||
            (st = fk_ncclep_dispatch(ep, topk_idx, topk_w, t, s)))
            return fk_ep_broken(ep, st);
        return FP8KIT_OK;
    }
    if ((st = fk_ep_cuda(ep->ctx, fn, cudaMemsetAsync(ep->base + g->off_status, 0, 4, s), "cudaMemsetAsync")) ||
        (st = fk_ep_cuda(ep->ctx, fn, fk_ep_launch_prep(&ep->cfg, g, ep->base, topk_idx, topk_w, t, s),
                         "the prep kernel")) ||
        (st = fk_ep_exchange(ep, fn, ep->base + g->off_send, 0, ep->base + g->off_recv, g->chunk, s)) ||
        (st = fk_ep_cuda(ep->ctx, fn, fk_ep_launch_unpack(&ep->cfg, g, ep->base, ep->sm_count, s),
                         "the unpack kernels")))
        return fk_ep_broken(ep, st);
    return FP8KIT_OK;
}

/* ----------------------------------------------------------------- combine */

fp8kit_status fk_ep_impl_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, void *stream)
{
    const char *fn = "fp8kit_ep_combine";
    const fk_ep_geom *g = &ep->g;
    cudaStream_t s = (cudaStream_t)stream;
    fp8kit_status st = fk_ep_bind(ep->ctx, fn);
    if (st)
        return st;
    if (ep->nep)
        return (st = fk_ncclep_combine(ep, y, out, s)) ? fk_ep_broken(ep, st) : FP8KIT_OK;
    /* y is (E_local, M, H): its expert and row strides in elements; high throughput (R, H): its row stride */
    const int ht = ep->cfg.mode == FP8KIT_EP_HIGH_THROUGHPUT;
    const int64_t sr = y->strides[ht ? 0 : 1] ? y->strides[ht ? 0 : 1] : ep->cfg.hidden;
    const int64_t se = ht ? 0 : y->strides[0] ? y->strides[0] : g->m * sr;
    if ((st = fk_ep_cuda(ep->ctx, fn, fk_ep_launch_ret_pack(&ep->cfg, g, ep->base, y->data, se, sr, ep->sm_count, s),
                         "the pack kernel")) ||
        (st = fk_ep_exchange(ep, fn, ep->base + g->off_ret_send, g->ret_chunk, ep->base + g->off_ret_recv,
                             g->ret_chunk, s)))
        return fk_ep_broken(ep, st);
    if (ep->last_t > 0) {
        const int64_t ld = out->strides[0] ? out->strides[0] : ep->cfg.hidden;
        if ((st = fk_ep_cuda(ep->ctx, fn,
                             fk_ep_launch_combine(&ep->cfg, g, ep->base, out->data, ld, ep->last_t, s),
                             "the combine kernel")))
            return fk_ep_broken(ep, st);
    }
    return FP8KIT_OK;
}
