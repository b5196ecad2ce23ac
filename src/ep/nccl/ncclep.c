/* ncclep.c - the expert-parallel layer's NCCL_EP transport: NCCL EP
 * (libnccl_ep.so, loaded with dlopen once per process; ncclep_abi.h) in
 * low-latency mode with the expert-major layout, which is fp8kit's masked
 * layout. fp8kit quantizes the tokens into its send chunk as the NCCL
 * transport does, and NCCL EP forwards codes and scales as they are
 * (NCCL_EP_DISP_QUANT_FWD) into the recv views; NCCL EP's combine sums the
 * experts' rows with the router's weights. High-throughput mode: NCCL EP's
 * high-throughput kernels with static receive slots, the contiguous layout
 * (its expert-major 2-D output), and y weighted before its combine. Called by
 * ep_nccl.c, which owns
 * the object, its allocation and the ranks' agreement. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/backend_ops.h"
#include "ep/nccl/ep_kernels.h"
#include "ep/nccl/nccl_lib.h"
#include "ep/nccl/ncclep.h"
#include "ep/nccl/ncclep_abi.h"

struct fk_ncclep {
    fk_nep_group_t group;
    fk_nep_handle_t handle;
};

static pthread_once_t fk_nep_once = PTHREAD_ONCE_INIT;
static fk_nep_fns fk_nep;
static int fk_nep_ok;
static char fk_nep_why[768];

static void fk_nep_load(void)
{
    /* the soname first: a process that loaded NCCL EP by path (its Python
     * package does) gets that library back */
    void *lib = dlopen("libnccl_ep.so.0", RTLD_NOW | RTLD_LOCAL);
    const char *e1 = lib ? NULL : dlerror();
    char first[384] = "";
    if (e1)
        snprintf(first, sizeof first, "%s", e1);
    if (!lib)
        lib = dlopen("libnccl_ep.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e2 = dlerror();
        snprintf(fk_nep_why, sizeof fk_nep_why,
                 "libnccl_ep.so could not be loaded (%s%s%s): the NCCL EP transport needs NCCL EP and NCCL 2.30 or "
                 "newer in the process",
                 first, *first ? "; " : "", e2 ? e2 : "dlopen failed");
        return;
    }
    fk_nep_fns *f = &fk_nep;
    const fk_dl_fn fns[] = {
        {"ncclEpGetVersion", (void **)&f->GetVersion},
        {"ncclEpCreateGroup", (void **)&f->CreateGroup},
        {"ncclEpGroupDestroy", (void **)&f->GroupDestroy},
        {"ncclEpInitHandle", (void **)&f->InitHandle},
        {"ncclEpUpdateHandle", (void **)&f->UpdateHandle},
        {"ncclEpHandleDestroy", (void **)&f->HandleDestroy},
        {"ncclEpDispatch", (void **)&f->Dispatch},
        {"ncclEpCombine", (void **)&f->Combine},
    };
    if (!fk_dl_bind(lib, fns, (int)(sizeof fns / sizeof fns[0]), "libnccl_ep.so", "NCCL EP 0.2 or newer is needed",
                    fk_nep_why, sizeof fk_nep_why))
        return;
    if (f->GetVersion(&f->version) != ncclSuccess || f->version < 200) {
        snprintf(fk_nep_why, sizeof fk_nep_why,
                 "libnccl_ep.so is version code %d; the NCCL EP transport needs 0.2 or newer (forwarded scales)",
                 f->version);
        return;
    }
    fk_nep_ok = 1;
}

const char *fk_ncclep_available(void)
{
    pthread_once(&fk_nep_once, fk_nep_load);
    return fk_nep_ok ? NULL : fk_nep_why;
}

static fp8kit_status fk_nep_fail(const fp8kit_ctx *ctx, const char *fn, const char *what, ncclResult_t r)
{
    const fk_nccl *nc = fk_nccl_get(NULL);
    return fk_fail(ctx, FP8KIT_ERR_DEVICE, "%s: NCCL EP's %s failed: %s (ncclResult_t %d; NCCL EP prints the cause "
                   "on stderr)", fn, what, nc ? nc->GetErrorString(r) : "", (int)r);
}

static fk_nep_tensor fk_nep_tensor_of(void *data, ncclDataType_t dt, unsigned ndim, size_t *dims)
{
    fk_nep_tensor t;
    memset(&t, 0, sizeof t);
    t.size = sizeof t;
    t.magic = FK_NEP_TENSOR_MAGIC;
    t.ndim = ndim;
    t.dtype = dt;
    t.data = data;
    t.dims = dims;
    return t;
}

#define FK_NEP_INIT(v)                                                                                               \
    do {                                                                                                             \
        memset(&(v), 0, sizeof(v));                                                                                  \
        (v).size = sizeof(v);                                                                                        \
        (v).magic = FK_NEP_MAGIC;                                                                                    \
    } while (0)

fp8kit_status fk_ncclep_create(fp8kit_ep *ep)
{
    const char *fn = "fp8kit_ep_create", *why = fk_ncclep_available();
    if (why)
        return fk_fail(ep->ctx, FP8KIT_ERR_UNSUPPORTED, "%s: %s", fn, why);
    const fp8kit_ep_config *cfg = &ep->cfg;
    struct fk_ncclep *n = (struct fk_ncclep *)calloc(1, sizeof *n);
    if (!n)
        return fk_fail(ep->ctx, FP8KIT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    fk_nep_group_config gc;
    FK_NEP_INIT(gc);
    gc.version = FK_NEP_API_VERSION;
    const int ht = cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT;
    gc.algorithm = ht ? FK_NEP_ALGO_HIGH_THROUGHPUT : FK_NEP_ALGO_LOW_LATENCY;
    gc.num_experts = (unsigned)cfg->num_experts;
    gc.max_tokens_per_rank = (unsigned)cfg->max_tokens;
    if (ht) { /* static receive slots: no host synchronization, capturable */
        gc.max_recv_tokens_per_rank = (unsigned)ep->g.rows;
        gc.num_topk = (unsigned)cfg->top_k;
    }
    /* a token: H codes + H / 32 scale bytes out, H bf16 back */
    gc.max_token_bytes = (unsigned)(2 * cfg->hidden);
    ncclResult_t r = fk_nep.CreateGroup(&n->group, (ncclComm_t)ep->comm, &gc);
    if (r != ncclSuccess) {
        free(n);
        return fk_nep_fail(ep->ctx, fn, "ncclEpCreateGroup", r);
    }
    r = fk_nep.InitHandle(&n->handle, n->group, FK_NEP_LAYOUT_EXPERT_MAJOR, NULL, (int)cfg->top_k, NULL);
    if (r != ncclSuccess) {
        (void)fk_nep.GroupDestroy(n->group);
        free(n);
        return fk_nep_fail(ep->ctx, fn, "ncclEpInitHandle", r);
    }
    ep->nep = n;
    return FP8KIT_OK;
}

void fk_ncclep_destroy(fp8kit_ep *ep)
{
    struct fk_ncclep *n = ep->nep;
    if (!n)
        return;
    (void)fk_nep.HandleDestroy(n->handle);
    (void)fk_nep.GroupDestroy(n->group);
    free(n);
    ep->nep = NULL;
}

fp8kit_status fk_ncclep_dispatch(fp8kit_ep *ep, const int32_t *topk_idx, const float *topk_w, int64_t t,
                                 cudaStream_t s)
{
    const char *fn = "fp8kit_ep_dispatch";
    const fp8kit_ep_config *cfg = &ep->cfg;
    const fk_ep_geom *g = &ep->g;
    struct fk_ncclep *n = ep->nep;
    unsigned char *send = ep->base + g->off_send;
    cudaError_t ce = fk_ep_launch_nep_prep(cfg, g, ep->base, topk_idx, topk_w, t, s);
    if (ce != cudaSuccess)
        return fk_fail(ep->ctx, FP8KIT_ERR_DEVICE, "%s: the prep kernel failed: %s", fn, cudaGetErrorString(ce));
    const int64_t H = cfg->hidden;
    const ncclDataType_t code = cfg->fp8 == FP8KIT_E5M2 ? ncclFloat8e5m2 : ncclFloat8e4m3;
    /* scales travel as bytes: f32 per 128 or e8m0 per 32, H / 32 bytes a token either way */
    const ncclDataType_t sdt = cfg->mx ? ncclUint8 : ncclFloat32;
    const int mn = cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR, ht = cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT;
    /* received: low latency (el, m, .) expert-major 3-D; high throughput (R, .) 2-D */
    size_t d_ids[2] = {(size_t)t, (size_t)cfg->top_k}, d_x[2] = {(size_t)t, (size_t)H},
           d_s[2] = {(size_t)t, (size_t)g->nb}, d_c[1] = {(size_t)g->el};
    size_t d_rx[3] = {(size_t)g->el, (size_t)g->m, (size_t)H}, d_rs[3] = {(size_t)g->el, (size_t)g->m, (size_t)g->nb};
    size_t h_rx[2] = {(size_t)g->rows, (size_t)H}, h_rs[2] = {(size_t)g->rows, (size_t)g->nb},
           h_w[1] = {(size_t)g->rows};
    fk_nep_tensor ids = fk_nep_tensor_of(send + g->ck_ids, ncclInt32, 2, d_ids);
    fk_nep_tensor x = fk_nep_tensor_of(send + g->ck_codes, code, 2, d_x);
    fk_nep_tensor sc = fk_nep_tensor_of(send + g->ck_scales, sdt, 2, d_s);
    fk_nep_tensor w = fk_nep_tensor_of(ep->base + g->off_w, ncclFloat32, 2, d_ids);
    fk_nep_tensor rx = fk_nep_tensor_of(ep->base + g->off_x, code, ht ? 2 : 3, ht ? h_rx : d_rx);
    fk_nep_tensor rs = fk_nep_tensor_of(ep->base + (mn ? g->off_recv : g->off_scale), sdt, ht ? 2 : 3, ht ? h_rs : d_rs);
    fk_nep_tensor rw = fk_nep_tensor_of(ep->base + g->off_slotw, ncclFloat32, 1, h_w);
    fk_nep_tensor cnt = ht ? fk_nep_tensor_of(ep->base + g->off_cnt64, ncclInt64, 1, d_c)
                           : fk_nep_tensor_of(ep->base + g->off_counts, ncclInt32, 1, d_c);
    fk_nep_layout_info info;
    FK_NEP_INIT(info);
    info.expert_counters = &cnt;
    /* high throughput: the routing's metadata is exchanged here, the counts written */
    ncclResult_t r = fk_nep.UpdateHandle(n->handle, &ids, ht ? &info : NULL, s);
    if (r != ncclSuccess)
        return fk_nep_fail(ep->ctx, fn, "ncclEpUpdateHandle", r);
    fk_nep_dispatch_in in;
    fk_nep_dispatch_out out;
    fk_nep_dispatch_config dc;
    FK_NEP_INIT(in);
    FK_NEP_INIT(out);
    FK_NEP_INIT(dc);
    in.tokens = &x;
    in.scales = &sc;
    out.tokens = &rx;
    out.scales = &rs;
    if (ht) { /* each slot's weight comes along, for the combine */
        in.topk_weights = &w;
        out.topk_weights = &rw;
    }
    dc.quant_recipe = FK_NEP_DISP_QUANT_FWD;
    if ((r = fk_nep.Dispatch(n->handle, &in, &out, ht ? NULL : &info, &dc, s)) != ncclSuccess)
        return fk_nep_fail(ep->ctx, fn, "ncclEpDispatch", r);
    if (ht && (ce = fk_ep_launch_nep_ends(g, ep->base, s)) != cudaSuccess)
        return fk_fail(ep->ctx, FP8KIT_ERR_DEVICE, "%s: the row-ends kernel failed: %s", fn, cudaGetErrorString(ce));
    if (mn && (ce = fk_ep_launch_nep_scales(g, ep->base, ep->sm_count, s)) != cudaSuccess)
        return fk_fail(ep->ctx, FP8KIT_ERR_DEVICE, "%s: the scale transpose kernel failed: %s", fn,
                       cudaGetErrorString(ce));
    return FP8KIT_OK;
}

fp8kit_status fk_ncclep_combine(fp8kit_ep *ep, const fp8kit_tensor *y, fp8kit_tensor *out, cudaStream_t s)
{
    const fp8kit_ep_config *cfg = &ep->cfg;
    const fk_ep_geom *g = &ep->g;
    const int64_t t = ep->last_t, H = cfg->hidden;
    size_t d_y[3] = {(size_t)g->el, (size_t)g->m, (size_t)H}, d_o[2] = {(size_t)t, (size_t)H},
           d_w[2] = {(size_t)t, (size_t)cfg->top_k};
    const int ht = cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT;
    size_t h_y[2] = {(size_t)g->rows, (size_t)H};
    if (ht) { /* NCCL EP's high-throughput combine sums rows weighted beforehand */
        cudaError_t ce = fk_ep_launch_nep_weight(cfg, g, ep->base, y->data, ep->sm_count, s);
        if (ce != cudaSuccess)
            return fk_fail(ep->ctx, FP8KIT_ERR_DEVICE, "fp8kit_ep_combine: the weighting kernel failed: %s",
                           cudaGetErrorString(ce));
    }
    fk_nep_tensor ty = ht ? fk_nep_tensor_of(ep->base + g->off_yw, ncclBfloat16, 2, h_y)
                          : fk_nep_tensor_of(y->data, ncclBfloat16, 3, d_y);
    /* t = 0: out is not written (may be NULL); the call still takes part */
    fk_nep_tensor to = fk_nep_tensor_of(t > 0 ? out->data : ep->base + g->off_x, ncclBfloat16, 2, d_o);
    fk_nep_tensor tw = fk_nep_tensor_of(ep->base + g->off_w, ncclFloat32, 2, d_w);
    fk_nep_combine_in in;
    fk_nep_combine_out o;
    FK_NEP_INIT(in);
    FK_NEP_INIT(o);
    in.tokens = &ty;
    o.tokens = &to;
    if (!ht) /* low latency: NCCL EP weights the rows as it sums them */
        o.topk_weights = &tw;
    ncclResult_t r = fk_nep.Combine(ep->nep->handle, &in, &o, NULL, s);
    if (r != ncclSuccess)
        return fk_nep_fail(ep->ctx, "fp8kit_ep_combine", "ncclEpCombine", r);
    return FP8KIT_OK;
}
