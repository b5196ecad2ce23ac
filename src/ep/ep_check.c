/* ep_check.c - the checks of fp8kit_ep_dispatch's and fp8kit_ep_combine's
 * arguments against the object's configuration and geometry (ep_geom.c):
 * pointers, dtypes, shapes, strides, alignment, and no overlap with each
 * other or with the object's buffers. Plain C with no CUDA or NCCL: built in
 * every configuration, so the rules are tested on machines without a GPU
 * (tests/test_ep_ref.c). */
#include <stdio.h>
#include <string.h>
#include "core/check.h"
#include "ep/ep_impl.h"

/* "(d0, d1, ...)" of a checked tensor. */
static const char *fk_ep_shape(const fp8kit_tensor *t, char *buf, size_t n)
{
    size_t w = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (w < n)
        snprintf(buf + w, n - w, ")");
    return buf;
}

#define FN_D "fp8kit_ep_dispatch"
#define FN_C "fp8kit_ep_combine"

fp8kit_status fk_ep_check_dispatch(const fp8kit_ctx *ctx, const fp8kit_ep_config *cfg, const fk_ep_geom *g,
                                   const void *base, const fp8kit_tensor *x, const int32_t *topk_idx,
                                   const float *topk_w, int64_t t)
{
    char sh[96];
    if (t < 0 || t > cfg->max_tokens)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, FN_D ": t = %lld is outside 0 .. max_tokens = %lld",
                       (long long)t, (long long)cfg->max_tokens);
    if (t == 0)
        return FP8KIT_OK; /* nothing is read */
    if (!x)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN_D ": x is NULL");
    if (!topk_idx)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN_D ": topk_idx is NULL");
    if (!topk_w)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN_D ": topk_w is NULL");
    fp8kit_status st = fk_check_tensor(ctx, FN_D, "x", x, 1);
    if (st)
        return st;
    if (!fk_is_hp(x->dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN_D ": x->dtype is %s; the tokens must be f32, f16 or bf16",
                       fp8kit_dtype_name(x->dtype));
    if (x->ndim != 2 || x->shape[0] != t || x->shape[1] != cfg->hidden)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN_D ": x is %s; it must be (t, H) = (%lld, %lld)",
                       fk_ep_shape(x, sh, sizeof sh), (long long)t, (long long)cfg->hidden);
    if ((uintptr_t)topk_idx & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN_D ": topk_idx (%p) is not 4-byte aligned (int32 entries)",
                       (const void *)topk_idx);
    if ((uintptr_t)topk_w & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN_D ": topk_w (%p) is not 4-byte aligned (f32 entries)",
                       (const void *)topk_w);
    const uint64_t tk = (uint64_t)t * (uint64_t)cfg->top_k * 4u;
    const fk_region r[4] = {fk_region_tensor("x", x, 0), fk_region_bytes("topk_idx", topk_idx, tk, 0),
                            fk_region_bytes("topk_w", topk_w, tk, 0),
                            fk_region_bytes("the fp8kit_ep's buffers", base, g->total, 1)};
    return fk_check_overlap(ctx, FN_D, r, 4);
}

fp8kit_status fk_ep_check_combine(const fp8kit_ctx *ctx, const fp8kit_ep_config *cfg, const fk_ep_geom *g,
                                  const void *base, int64_t last_t, const fp8kit_tensor *y,
                                  const fp8kit_tensor *out)
{
    char sh[96];
    if (last_t < 0)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                       FN_C ": no dispatch to combine (call fp8kit_ep_dispatch first)");
    if (!y)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN_C ": y is NULL");
    fp8kit_status st = fk_check_tensor(ctx, FN_C, "y", y, 1);
    if (st)
        return st;
    if (y->dtype != FP8KIT_BF16)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN_C ": y->dtype is %s; the experts' outputs must be bf16",
                       fp8kit_dtype_name(y->dtype));
    const int64_t H = cfg->hidden;
    if (cfg->mode == FP8KIT_EP_HIGH_THROUGHPUT) {
        if (y->ndim != 2 || y->shape[0] != g->rows || y->shape[1] != H)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN_C ": y is %s; it must be (R, H) = (%lld, %lld)",
                           fk_ep_shape(y, sh, sizeof sh), (long long)g->rows, (long long)H);
        if (cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP && y->strides[0] && y->strides[0] != H)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           FN_C ": y has row stride %lld; the NCCL EP transport takes a contiguous y (stride %lld)",
                           (long long)y->strides[0], (long long)H);
    } else {
        if (y->ndim != 3 || y->shape[0] != g->el || y->shape[1] != g->m || y->shape[2] != H)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                           FN_C ": y is %s; it must be (E_local, M, H) = (%lld, %lld, %lld)",
                           fk_ep_shape(y, sh, sizeof sh), (long long)g->el, (long long)g->m, (long long)H);
        const int64_t ysr = y->strides[1] ? y->strides[1] : H, yse = y->strides[0] ? y->strides[0] : g->m * ysr;
        if (cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP && (ysr != H || yse != g->m * H))
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           FN_C ": y has strides (%lld, %lld); the NCCL EP transport takes a contiguous y (%lld, %lld)",
                           (long long)yse, (long long)ysr, (long long)(g->m * H), (long long)H);
    }
    if (last_t == 0) { /* out is not written */
        const fk_region r[2] = {fk_region_tensor("y", y, 0),
                                fk_region_bytes("the fp8kit_ep's buffers", base, g->total, 1)};
        return fk_check_overlap(ctx, FN_C, r, 2);
    }
    if (!out)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN_C ": out is NULL");
    if ((st = fk_check_tensor(ctx, FN_C, "out", out, 1)))
        return st;
    if (out->dtype != FP8KIT_BF16)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN_C ": out->dtype is %s; the combined tokens are bf16",
                       fp8kit_dtype_name(out->dtype));
    if (out->ndim != 2 || out->shape[0] != last_t || out->shape[1] != cfg->hidden)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN_C ": out is %s; it must be (t, H) = (%lld, %lld), t of the last dispatch",
                       fk_ep_shape(out, sh, sizeof sh), (long long)last_t, (long long)cfg->hidden);
    if (cfg->transport == FP8KIT_EP_TRANSPORT_NCCL_EP && out->strides[0] && out->strides[0] != H)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN_C ": out has row stride %lld; the NCCL EP transport writes a contiguous out (stride %lld)",
                       (long long)out->strides[0], (long long)H);
    const fk_region r[3] = {fk_region_tensor("y", y, 0), fk_region_tensor("out", out, 1),
                            fk_region_bytes("the fp8kit_ep's buffers", base, g->total, 1)};
    return fk_check_overlap(ctx, FN_C, r, 3);
}
