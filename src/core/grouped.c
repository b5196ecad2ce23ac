/* grouped.c - fp8kit_grouped_gemm: the mixture-of-experts grouped GEMM
 * (A's rows grouped by expert through int32 offsets, one B per expert). It
 * checks the whole call - descriptor, operands, the alignment of every
 * pointer, that no output (D, status) overlaps another argument, then on the
 * CPU every offset and each group's fp8kit_gemm view - before anything runs.
 * CPU backend: each non-empty group runs as an fp8kit_gemm on views of A, B,
 * the scales, the bias and D (each distinct group row count gets its own
 * cached plan). CUDA backend: the offsets stay in device memory; the whole
 * call is checked as one fp8kit_gemm view over all T rows and runs as one
 * launch of the grouped kernel (gemm_grouped.cu), which checks the offsets
 * itself. */
#include <stdio.h>
#include <string.h>
#include "core/check.h"

#define FN "fp8kit_grouped_gemm"

/* A checked contiguous tensor of dtype dt (of f32 / f16 / bf16 when hp) holding n elements. */
static fp8kit_status fk_check_flat(const fp8kit_ctx *ctx, const char *name, const fp8kit_tensor *t, fp8kit_dtype dt,
                                   int hp, int64_t n, const char *what)
{
    if (hp && t->data && !fk_is_hp(t->dtype))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, FN ": %s->dtype is %s; %s needs f32, f16 or bf16", name,
                       fp8kit_dtype_name(t->dtype), what);
    return fk_check_count(ctx, FN, name, t, hp ? t->dtype : dt, n, what);
}

static fp8kit_tensor fk_vec(void *data, fp8kit_dtype dt, int ndim, int64_t n)
{
    fp8kit_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.ndim = ndim;
    if (ndim == 1) {
        t.shape[0] = n;
        t.strides[0] = 1;
    }
    return t;
}

/* The fp8kit_gemm operands of group g: rows r0 .. r1 - 1 of A and D. */
static void fk_group_view(const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a, int64_t g, int64_t r0,
                          int64_t r1, fp8kit_gemm_args *o)
{
    const int64_t n = a->b.shape[1], k = a->b.shape[2];
    const int64_t lda = fk_stride(&a->a, 0), ldd = fk_stride(&a->d, 0);
    const int64_t sbg = fk_stride(&a->b, 0), ldb = fk_stride(&a->b, 1);
    memset(o, 0, sizeof *o);
    o->a = fp8kit_tensor_2d((char *)a->a.data + r0 * lda, a->a.dtype, r1 - r0, k, lda);
    o->b = fp8kit_tensor_2d((char *)a->b.data + g * sbg, a->b.dtype, n, k, ldb);
    if (d->scale_a == FP8KIT_SCALE_TENSOR)
        o->scale_a = fk_vec(a->scale_a.data, FP8KIT_F32, 0, 1);
    else if (d->scale_a == FP8KIT_SCALE_ROW)
        o->scale_a = fk_vec((float *)a->scale_a.data + r0, FP8KIT_F32, 1, r1 - r0);
    if (d->scale_b == FP8KIT_SCALE_TENSOR)
        o->scale_b = fk_vec((float *)a->scale_b.data + g, FP8KIT_F32, 0, 1);
    else if (d->scale_b == FP8KIT_SCALE_ROW)
        o->scale_b = fk_vec((float *)a->scale_b.data + g * n, FP8KIT_F32, 1, n);
    if (d->bias == FP8KIT_BIAS_COL)
        o->bias = fk_vec((char *)a->bias.data + g * n * (int64_t)fp8kit_dtype_size(a->bias.dtype), a->bias.dtype, 1, n);
    o->alpha = a->alpha;
    o->d = fp8kit_tensor_2d((char *)a->d.data + r0 * ldd * (int64_t)fp8kit_dtype_size(a->d.dtype), a->d.dtype,
                            r1 - r0, n, ldd);
}

/* Whether the backend runs the whole call in its own grouped kernel (then
 * offsets and status live in the backend's memory and only its kernel
 * reads them); else the core runs one fp8kit_gemm per group. */
static int fk_grouped_on_device(const fp8kit_ctx *ctx) { return ctx->ops->grouped_run != NULL; }

static fp8kit_status fk_grouped_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a)
{
    fp8kit_status st = fk_check_gemm_desc(ctx, FN, d);
    if (st)
        return st;
    if (d->scale_a > FP8KIT_SCALE_ROW || d->scale_b > FP8KIT_SCALE_ROW)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": only none, tensor and row scales are supported (got %d, %d)",
                       (int)d->scale_a, (int)d->scale_b);
    if (d->out_quant != FP8KIT_OUTQ_NONE)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": output quantization is not supported");
    if (d->bias == FP8KIT_BIAS_ROW)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": only a per-column bias (G x N) is supported");
    if ((st = fk_check_tensor(ctx, FN, "a", &a->a, 1)) || (st = fk_check_tensor(ctx, FN, "b", &a->b, 1)) ||
        (st = fk_check_tensor(ctx, FN, "d", &a->d, 1)))
        return st;
    if (a->a.ndim != 2 || a->b.ndim != 3 || a->d.ndim != 2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": a must be 2-D (T, K), b 3-D (G, N, K), d 2-D (T, N) "
                                                      "(ndim %d, %d, %d)",
                       a->a.ndim, a->b.ndim, a->d.ndim);
    const int64_t t = a->a.shape[0], k = a->a.shape[1], g = a->b.shape[0], n = a->b.shape[1];
    if (a->b.shape[2] != k || a->d.shape[0] != t || a->d.shape[1] != n)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": a is %lld x %lld, b %lld x %lld x %lld, d %lld x %lld; expected a (T, K), b (G, N, K), "
                          "d (T, N)",
                       (long long)t, (long long)k, (long long)g, (long long)n, (long long)a->b.shape[2],
                       (long long)a->d.shape[0], (long long)a->d.shape[1]);
    if (g > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": %lld groups; at most 2^31 - 1", (long long)g);
    if (!fk_is_hp(a->d.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": d must be f32, f16 or bf16 (got %s)",
                       fp8kit_dtype_name(a->d.dtype));
    if (!fk_is_fp8(a->a.dtype) || !fk_is_fp8(a->b.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": a and b must be e4m3 or e5m2 (got %s and %s)",
                       fp8kit_dtype_name(a->a.dtype), fp8kit_dtype_name(a->b.dtype));
    if (d->scale_a == FP8KIT_SCALE_TENSOR && (st = fk_check_flat(ctx, "scale_a", &a->scale_a, FP8KIT_F32, 0, 1, "tensor scaling")))
        return st;
    if (d->scale_a == FP8KIT_SCALE_ROW && (st = fk_check_flat(ctx, "scale_a", &a->scale_a, FP8KIT_F32, 0, t, "row scaling of A (T)")))
        return st;
    if (d->scale_b == FP8KIT_SCALE_TENSOR &&
        (st = fk_check_flat(ctx, "scale_b", &a->scale_b, FP8KIT_F32, 0, g, "tensor scaling per expert (G)")))
        return st;
    if (d->scale_b == FP8KIT_SCALE_ROW &&
        (st = fk_check_flat(ctx, "scale_b", &a->scale_b, FP8KIT_F32, 0, fk_mul_ovf(g, n), "row scaling per expert (G x N)")))
        return st;
    if (d->bias == FP8KIT_BIAS_COL &&
        (st = fk_check_flat(ctx, "bias", &a->bias, FP8KIT_F32, 1, fk_mul_ovf(g, n), "a per-expert column bias (G x N)")))
        return st;
    if (!a->offsets)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN ": offsets is NULL");
    /* int32 words, read (offsets) or written (status) as such: both backends */
    if ((uintptr_t)a->offsets & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN ": offsets (%p) is not 4-byte aligned (int32 entries)",
                       (const void *)a->offsets);
    if ((uintptr_t)a->status & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN ": status (%p) is not 4-byte aligned (an int32)",
                       (void *)a->status);
    /* no output (D, status) overlaps another output or an input, offsets included */
    fk_region rg[8];
    int nr = 0;
    rg[nr++] = fk_region_tensor("a", &a->a, 0);
    rg[nr++] = fk_region_tensor("b", &a->b, 0);
    rg[nr++] = fk_region_bytes("offsets", a->offsets, (uint64_t)g * 4u, 0);
    if (d->scale_a)
        rg[nr++] = fk_region_tensor("scale_a", &a->scale_a, 0);
    if (d->scale_b)
        rg[nr++] = fk_region_tensor("scale_b", &a->scale_b, 0);
    if (d->bias)
        rg[nr++] = fk_region_tensor("bias", &a->bias, 0);
    rg[nr++] = fk_region_tensor("d", &a->d, 1);
    rg[nr++] = fk_region_bytes("status", a->status, 4, 1);
    if (fk_grouped_on_device(ctx)) {
        /* offsets are device memory: the kernel checks them. Everything
         * else as fp8kit_gemm sees the call over all T rows with expert 0's
         * B, scales and bias (every expert's have the same shape, dtype and
         * alignment); B's experts must be whole rows apart (one 2-D map). */
        const int64_t ldb = fk_stride(&a->b, 1), sbg = fk_stride(&a->b, 0);
        if (g > 1 && sbg % ldb)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           FN ": b's expert stride (%lld) must be a multiple of its row stride (%lld) on the %s "
                              "backend",
                           (long long)sbg, (long long)ldb, ctx->ops->name);
        if ((st = fk_check_overlap(ctx, FN, rg, nr)))
            return st;
        if (g == 0)
            return FP8KIT_OK; /* nothing runs (status, if given, gets 0) */
        fp8kit_gemm_args v;
        fk_group_view(d, a, 0, 0, t, &v);
        return fk_gemm_check(ctx, d, &v);
    }
    if ((st = fk_check_overlap(ctx, FN, rg, nr))) /* before *status may be written */
        return st;
    int64_t prev = 0;
    for (int64_t i = 0; i < g; i++) {
        const int64_t o = a->offsets[i];
        if (o < prev || o > t) {
            if (a->status)
                *a->status = FP8KIT_ERR_INVALID_ARGUMENT;
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           FN ": offsets[%lld] = %lld; offsets must be non-decreasing, >= 0 and <= T = %lld",
                           (long long)i, (long long)o, (long long)t);
        }
        prev = o;
    }
    /* every group as fp8kit_gemm would see it (dtypes, alignment, K rules) */
    prev = 0;
    for (int64_t i = 0; i < g; i++) {
        const int64_t r1 = a->offsets[i];
        if (r1 > prev) {
            fp8kit_gemm_args v;
            fk_group_view(d, a, i, prev, r1, &v);
            if ((st = fk_gemm_check(ctx, d, &v))) {
                char msg[400];
                snprintf(msg, sizeof msg, "%s", fp8kit_last_error(ctx));
                return fk_fail(ctx, st, FN ": group %lld: %s", (long long)i, msg);
            }
        }
        prev = r1;
    }
    return FP8KIT_OK;
}

/* Plan key of a backend's grouped kernel: a tag (no fp8kit_gemm key starts
 * with it), the options, the dtypes, the shapes and strides, alignment bits. */
typedef struct fk_grouped_key {
    int32_t tag, scale_a, scale_b, bias, act, fast_accum, a_type, b_type, bias_type, d_type, align;
    int64_t t, n, k, g, lda, ldb, b_rows, ldd, tuning;
} fk_grouped_key;

static fp8kit_status fk_grouped_native(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a,
                                     void *stream)
{
    fk_grouped_job gj;
    memset(&gj, 0, sizeof gj);
    fk_gemm_job *j = &gj.gemm;
    fp8kit_gemm_args v;
    fk_group_view(d, a, 0, 0, a->a.shape[0], &v);
    j->desc = *d;
    j->m = a->a.shape[0];
    j->n = a->b.shape[1];
    j->k = a->b.shape[2];
    j->a = v.a.data; j->a_type = v.a.dtype; j->lda = fk_stride(&v.a, 0);
    j->b = v.b.data; j->b_type = v.b.dtype; j->ldb = fk_stride(&v.b, 0);
    j->scale_a = d->scale_a ? v.scale_a.data : NULL;
    j->scale_b = d->scale_b ? v.scale_b.data : NULL;
    j->alpha = a->alpha;
    j->bias = d->bias != FP8KIT_BIAS_NONE ? v.bias.data : NULL;
    j->bias_type = v.bias.dtype;
    j->d = v.d.data; j->d_type = v.d.dtype; j->ldd = fk_stride(&v.d, 0);
    gj.groups = a->b.shape[0];
    gj.b_rows = gj.groups > 1 ? fk_stride(&a->b, 0) / j->ldb : j->n;
    gj.offsets = a->offsets;
    gj.status = a->status;
    fk_grouped_key key;
    memset(&key, 0, sizeof key);
    key.tag = 0x47525031; /* "GRP1" */
    key.tuning = (int64_t)ctx->tuning_key;
    key.scale_a = d->scale_a; key.scale_b = d->scale_b; key.bias = d->bias; key.act = d->act;
    key.fast_accum = d->fast_accum != 0;
    key.a_type = j->a_type; key.b_type = j->b_type; key.bias_type = j->bias ? (int32_t)j->bias_type : -1;
    key.d_type = j->d_type;
    key.align = (((uintptr_t)j->a & 15) == 0) | ((((uintptr_t)j->b & 15) == 0) << 1) |
                ((((uintptr_t)j->d & 15) == 0) << 2);
    key.t = j->m; key.n = j->n; key.k = j->k; key.g = gj.groups;
    key.lda = j->lda; key.ldb = j->ldb; key.b_rows = gj.b_rows; key.ldd = j->ldd;
    fp8kit_status st;
    const fk_plan *plan = fk_plan_get(ctx, &key, sizeof key, j, ctx->ops->grouped_plan, &st);
    if (!plan)
        return st;
    return ctx->ops->grouped_run(ctx, &gj, plan, stream);
}

fp8kit_status fp8kit_grouped_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_grouped_gemm_args *args,
                                  void *stream)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, FN ": ctx is NULL");
    if (!desc || !args)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN ": %s is NULL", !desc ? "desc" : "args");
    fp8kit_status st = fk_grouped_check(ctx, desc, args);
    if (st)
        return st;
    if (fk_grouped_on_device(ctx))
        return fk_grouped_native(ctx, desc, args, stream);
    int64_t prev = 0;
    for (int64_t i = 0; i < args->b.shape[0]; i++) {
        const int64_t r1 = args->offsets[i];
        if (r1 > prev) {
            fp8kit_gemm_args v;
            fk_group_view(desc, args, i, prev, r1, &v);
            if ((st = fp8kit_gemm(ctx, desc, &v, stream)))
                return st;
        }
        prev = r1;
    }
    if (args->status)
        *args->status = FP8KIT_OK;
    return FP8KIT_OK;
}
