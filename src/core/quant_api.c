/* quant_api.c - public quantize / dequantize / cast entry points: validate
 * the descriptor and tensors (docs/spec.md sections 2 and 4; no output may
 * overlap another output or an input), build the canonical fk_quant_job,
 * and dispatch to the context's backend. */
#include <string.h>
#include "core/check.h"

fp8kit_quant_desc fp8kit_quant_desc_default(fp8kit_scheme scheme)
{
    fp8kit_quant_desc d;
    memset(&d, 0, sizeof d);
    d.scheme = scheme;
    d.elem = FP8KIT_E4M3;
    d.axis = -1;
    d.rounding = FP8KIT_ROUND_FLOOR;
    d.pow2 = 0;
    d.scale_layout = FP8KIT_LAYOUT_PLAIN;
    return d;
}


static fp8kit_status fk_check_desc(const fp8kit_ctx *ctx, const char *fn, const fp8kit_quant_desc *d)
{
    if (!d)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: desc is NULL", fn);
    if ((unsigned)d->scheme > FP8KIT_SCHEME_MX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->scheme %d is not a fp8kit_scheme", fn, (int)d->scheme);
    if ((unsigned)d->rounding > FP8KIT_ROUND_RCEIL)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->rounding %d is not a fp8kit_rounding", fn,
                       (int)d->rounding);
    if ((unsigned)d->scale_layout > FP8KIT_LAYOUT_MN_MAJOR)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->scale_layout %d is not a fp8kit_scale_layout", fn,
                       (int)d->scale_layout);
    if ((unsigned)d->elem >= FP8KIT_DTYPE_COUNT)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->elem %d is not a fp8kit_dtype", fn, (int)d->elem);
    if (!fk_is_fp8(d->elem))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: desc->elem is %s; quantized elements must be e4m3 or e5m2", fn,
                       fp8kit_dtype_name(d->elem));
    if (d->axis != -1 && d->axis != -2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->axis %d must be -1 or -2", fn, (int)d->axis);
    if (d->axis == -2 && d->scheme != FP8KIT_SCHEME_MX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: axis -2 is only supported by the mx scheme", fn);
    if (!fk_quant_layout_ok(d->scheme, d->scale_layout)) {
        if (d->scale_layout == FP8KIT_LAYOUT_BLOCKED)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: the blocked scale layout is only defined for the mx scheme",
                           fn);
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: the mn_major scale layout is only defined for the block1x128 and block128x128 schemes", fn);
    }
    return FP8KIT_OK;
}

/* Validates desc and the high-precision tensor x (meta only unless need_data),
 * fills the canonical view and the expected q / scale tensors. */
static fp8kit_status fk_plan_quant(const fp8kit_ctx *ctx, const char *fn, const fp8kit_quant_desc *d,
                                   const fp8kit_tensor *x, const char *xname, int need_data, fk_mat *xm,
                                   fp8kit_tensor *q, fp8kit_tensor *scale, int64_t *srows, int64_t *scols)
{
    fp8kit_status st = fk_check_desc(ctx, fn, d);
    if (st)
        return st;
    if ((st = fk_check_tensor(ctx, fn, xname, x, need_data)))
        return st;
    if (!fk_is_hp(x->dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: %s->dtype is %s; expected f32, f16 or bf16", fn, xname,
                       fp8kit_dtype_name(x->dtype));
    if (d->scheme != FP8KIT_SCHEME_TENSOR && x->ndim < 2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: %s->ndim is %d; the row, block and mx schemes need 2..4 dims",
                       fn, xname, x->ndim);
    if ((st = fk_to_mat(ctx, fn, xname, x, xm)))
        return st;
    /* the scales of one expert, stored layout and padding included (format/geometry.h) */
    fk_scale_geom g;
    const int gst = fk_quant_scale_geom(d->scheme, d->scale_layout, d->axis, xm->R, xm->C, &g);
    if (gst == FK_GEO_ERR_SHAPE)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       "%s: mx blocks run along axis %d, whose length %lld is not a multiple of 32", fn,
                       (int)d->axis, (long long)(d->axis == -1 ? xm->C : xm->R));
    if (gst == FK_GEO_ERR_OVERFLOW || fk_mul_ovf(xm->E, g.count) < 0)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, "%s: the scale tensor's size overflows int64", fn);
    if (gst)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "%s: no scale geometry for this descriptor", fn);
    *srows = g.rows;
    *scols = g.cols;
    int nd = x->ndim;
    int64_t qshape[FP8KIT_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        qshape[i] = x->shape[i];
    if (d->scheme == FP8KIT_SCHEME_MX && d->axis == -2) {
        qshape[nd - 2] = x->shape[nd - 1];
        qshape[nd - 1] = x->shape[nd - 2];
    }
    *q = fp8kit_tensor_make(NULL, d->elem, nd, qshape);
    int64_t sshape[FP8KIT_MAX_DIMS];
    int snd = 0;
    if (d->scheme != FP8KIT_SCHEME_TENSOR) {
        for (int i = 0; i < nd - 2; i++)
            sshape[snd++] = x->shape[i];
        sshape[snd++] = *srows;
        sshape[snd++] = *scols;
    }
    *scale = fp8kit_tensor_make(NULL, g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32, snd, sshape);
    /* the outputs' byte counts too (an f32 scale per row of 2^62 f16 rows
     * overflows where the input does not): the tensor rule, checked once */
    if ((st = fk_check_tensor(ctx, fn, "q (as planned)", q, 0)) ||
        (st = fk_check_tensor(ctx, fn, "scale (as planned)", scale, 0)))
        return st;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_quant_shapes(const fp8kit_quant_desc *desc, const fp8kit_tensor *x, fp8kit_tensor *q,
                                  fp8kit_tensor *scale)
{
    const char *fn = "fp8kit_quant_shapes";
    if (!q || !scale)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", fn, !q ? "q" : "scale");
    fk_mat xm;
    fp8kit_tensor tq, ts;
    int64_t r, c;
    fp8kit_status st = fk_plan_quant(NULL, fn, desc, x, "x", 0, &xm, &tq, &ts, &r, &c);
    if (st)
        return st;
    *q = tq;
    *scale = ts;
    return FP8KIT_OK;
}

/* The fp8 tensor q must have exactly the expected shape and dtype; only its
 * row stride may exceed the row length. */
static fp8kit_status fk_check_q(const fp8kit_ctx *ctx, const char *fn, const fp8kit_tensor *q,
                                const fp8kit_tensor *want, fk_mat *qm)
{
    fp8kit_status st = fk_check_tensor(ctx, fn, "q", q, 1);
    if (st)
        return st;
    if (q->dtype != want->dtype)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: q->dtype is %s but desc->elem is %s", fn,
                       fp8kit_dtype_name(q->dtype), fp8kit_dtype_name(want->dtype));
    int same = q->ndim == want->ndim;
    for (int i = 0; same && i < q->ndim; i++)
        same = q->shape[i] == want->shape[i];
    if (!same)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: q's shape does not match the input's%s", fn,
                       want->ndim >= 2 && want->shape[want->ndim - 1] != q->shape[q->ndim > 0 ? q->ndim - 1 : 0]
                           ? " (mx axis -2 writes the transposed shape)" : "");
    return fk_to_mat(ctx, fn, "q", q, qm);
}

static fp8kit_status fk_check_scale(const fp8kit_ctx *ctx, const char *fn, const fp8kit_tensor *s,
                                    const fp8kit_tensor *want)
{
    fp8kit_status st = fk_check_tensor(ctx, fn, "scale", s, 1);
    if (st)
        return st;
    if (s->dtype != want->dtype)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: scale->dtype is %s; this scheme stores %s scales", fn,
                       fp8kit_dtype_name(s->dtype), fp8kit_dtype_name(want->dtype));
    if (fp8kit_tensor_numel(s) != fp8kit_tensor_numel(want))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: scale holds %lld elements; this scheme and layout need %lld",
                       fn, (long long)fp8kit_tensor_numel(s), (long long)fp8kit_tensor_numel(want));
    if (!fk_is_contiguous(s))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE, "%s: scale must be contiguous", fn);
    return FP8KIT_OK;
}

static fp8kit_status fk_build_job(fp8kit_ctx *ctx, const char *fn, const fp8kit_quant_desc *desc,
                                  const fp8kit_tensor *x, const char *xname, const fp8kit_tensor *q,
                                  const fp8kit_tensor *scale, fk_quant_job *job)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
    memset(job, 0, sizeof *job);
    fp8kit_tensor wq, ws;
    fp8kit_status st = fk_plan_quant(ctx, fn, desc, x, xname, 1, &job->x, &wq, &ws, &job->scale_rows, &job->scale_cols);
    if (st)
        return st;
    if ((st = fk_check_q(ctx, fn, q, &wq, &job->q)))
        return st;
    if ((st = fk_check_scale(ctx, fn, scale, &ws)))
        return st;
    job->desc = *desc;
    job->e5m2 = desc->elem == FP8KIT_E5M2;
    job->scale = scale->data;
    if (desc->scheme == FP8KIT_SCHEME_TENSOR) {
        /* one group over the whole tensor: E = 1 with the experts as rows
         * when they are evenly strided, which the canonical view guarantees */
        if (job->x.E > 1) {
            if (job->x.se != job->x.R * job->x.sr || job->q.se != job->q.R * job->q.sr)
                return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                               "%s: the tensor scheme needs the leading dims to be evenly strided with the rows", fn);
            job->x.R *= job->x.E;
            job->q.R *= job->q.E;
            job->x.E = job->q.E = 1;
            job->x.se = job->x.R * job->x.sr;
            job->q.se = job->q.R * job->q.sr;
        }
    }
    return FP8KIT_OK;
}

fp8kit_status fp8kit_quantize(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc, const fp8kit_tensor *x,
                              fp8kit_tensor *q, fp8kit_tensor *scale, void *stream)
{
    fk_quant_job job;
    fp8kit_status st = fk_build_job(ctx, "fp8kit_quantize", desc, x, "x", q, scale, &job);
    if (st)
        return st;
    const fk_region rg[] = {fk_region_tensor("x", x, 0), fk_region_tensor("q", q, 1),
                            fk_region_tensor("scale", scale, 1)};
    if ((st = fk_check_overlap(ctx, "fp8kit_quantize", rg, 3)))
        return st;
    return ctx->ops->quantize(ctx, &job, stream);
}

fp8kit_status fp8kit_quantize_mx_both(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc, const fp8kit_tensor *x,
                                      fp8kit_tensor *q_row, fp8kit_tensor *scale_row, fp8kit_tensor *q_col,
                                      fp8kit_tensor *scale_col, void *stream)
{
    const char *fn = "fp8kit_quantize_mx_both";
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
    if (!desc)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: desc is NULL", fn);
    if (desc->scheme != FP8KIT_SCHEME_MX)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: desc->scheme must be mx", fn);
    fp8kit_quant_desc dr = *desc, dc = *desc;
    dr.axis = -1;
    dc.axis = -2;
    fk_quant_job jr, jc;
    fp8kit_status st = fk_build_job(ctx, fn, &dr, x, "x", q_row, scale_row, &jr);
    if (st)
        return st;
    if ((st = fk_build_job(ctx, fn, &dc, x, "x", q_col, scale_col, &jc)))
        return st;
    const fk_region rg[] = {fk_region_tensor("x", x, 0), fk_region_tensor("q_row", q_row, 1),
                            fk_region_tensor("scale_row", scale_row, 1), fk_region_tensor("q_col", q_col, 1),
                            fk_region_tensor("scale_col", scale_col, 1)};
    if ((st = fk_check_overlap(ctx, fn, rg, 5)))
        return st;
    if (ctx->ops->quantize_both)
        return ctx->ops->quantize_both(ctx, &jr, &jc, stream);
    if ((st = ctx->ops->quantize(ctx, &jr, stream)))
        return st;
    return ctx->ops->quantize(ctx, &jc, stream);
}

fp8kit_status fp8kit_dequantize(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc, const fp8kit_tensor *q,
                                const fp8kit_tensor *scale, fp8kit_tensor *y, void *stream)
{
    fk_quant_job job;
    fp8kit_status st = fk_build_job(ctx, "fp8kit_dequantize", desc, y, "y", q, scale, &job);
    if (st)
        return st;
    const fk_region rg[] = {fk_region_tensor("q", q, 0), fk_region_tensor("scale", scale, 0),
                            fk_region_tensor("y", y, 1)};
    if ((st = fk_check_overlap(ctx, "fp8kit_dequantize", rg, 3)))
        return st;
    return ctx->ops->dequantize(ctx, &job, stream);
}

/* Validates a cast x -> y and builds its job (the no-overlap rule is the
 * caller's). */
static fp8kit_status fk_build_cast_job(fp8kit_ctx *ctx, const char *fn, const fp8kit_tensor *x,
                                       const fp8kit_tensor *y, fk_cast_job *job)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: ctx is NULL", fn);
    fp8kit_status st;
    if ((st = fk_check_tensor(ctx, fn, "x", x, 1)) || (st = fk_check_tensor(ctx, fn, "y", y, 1)))
        return st;
    if (!((fk_is_hp(x->dtype) && fk_is_fp8(y->dtype)) || (fk_is_fp8(x->dtype) && fk_is_hp(y->dtype))))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: casts go between f32/f16/bf16 and e4m3/e5m2 (got %s -> %s)", fn,
                       fp8kit_dtype_name(x->dtype), fp8kit_dtype_name(y->dtype));
    int same = x->ndim == y->ndim;
    for (int i = 0; same && i < x->ndim; i++)
        same = x->shape[i] == y->shape[i];
    if (!same)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, "%s: x and y must have the same shape", fn);
    if ((st = fk_to_mat(ctx, fn, "x", x, &job->src)) || (st = fk_to_mat(ctx, fn, "y", y, &job->dst)))
        return st;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_cast(fp8kit_ctx *ctx, const fp8kit_tensor *x, fp8kit_tensor *y, void *stream)
{
    const char *fn = "fp8kit_cast";
    fk_cast_job job;
    fp8kit_status st = fk_build_cast_job(ctx, fn, x, y, &job);
    if (st)
        return st;
    const fk_region rg[] = {fk_region_tensor("x", x, 0), fk_region_tensor("y", y, 1)};
    if ((st = fk_check_overlap(ctx, fn, rg, 2)))
        return st;
    return ctx->ops->cast(ctx, &job, stream);
}

/* fp8kit_*_supported: the call validated as it would be (the no-overlap rule
 * aside: the pointers may be placeholders), then the backend's supports
 * (a NULL supports: every validated job); nothing runs, nothing is read. */
static fp8kit_status fk_supports(fp8kit_ctx *ctx, fk_op op, const void *job)
{
    return ctx->ops->supports ? ctx->ops->supports(ctx, op, job) : FP8KIT_OK;
}

fp8kit_status fp8kit_quantize_supported(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc, const fp8kit_tensor *x,
                                        const fp8kit_tensor *q, const fp8kit_tensor *scale)
{
    fk_quant_job job;
    fp8kit_status st = fk_build_job(ctx, "fp8kit_quantize", desc, x, "x", q, scale, &job);
    return st ? st : fk_supports(ctx, FK_OP_QUANTIZE, &job);
}

fp8kit_status fp8kit_dequantize_supported(fp8kit_ctx *ctx, const fp8kit_quant_desc *desc, const fp8kit_tensor *q,
                                          const fp8kit_tensor *scale, const fp8kit_tensor *y)
{
    fk_quant_job job;
    fp8kit_status st = fk_build_job(ctx, "fp8kit_dequantize", desc, y, "y", q, scale, &job);
    return st ? st : fk_supports(ctx, FK_OP_DEQUANTIZE, &job);
}

fp8kit_status fp8kit_cast_supported(fp8kit_ctx *ctx, const fp8kit_tensor *x, const fp8kit_tensor *y)
{
    fk_cast_job job;
    fp8kit_status st = fk_build_cast_job(ctx, "fp8kit_cast", x, y, &job);
    return st ? st : fk_supports(ctx, FK_OP_CAST, &job);
}
