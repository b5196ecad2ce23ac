/* k_grouped.c - fp8kit_k_grouped_gemm, the K-grouped GEMM of a mixture-of-
 * experts weight gradient: G groups sharing M and N, group g owning the K
 * range [offsets[g-1], offsets[g]) of A (M, Ktot) and B (N, Ktot), D (G, M, N)
 * = alpha * A_g B_g^T (+ beta * D in place). It checks the whole call -
 * descriptor (no bias, activation or output quantization; scale modes NONE /
 * TENSOR or args->scales_1x128), operands, scale counts, the alignment of
 * every pointer, that no output (D, status) overlaps another argument, and on
 * backends working in host memory the offsets (non-decreasing multiples of
 * 128, <= Ktot) - before anything runs, then hands one fk_k_grouped_job to
 * the backend's k_grouped op (src/cpu/cpu_k_grouped.c, src/cuda/gemm/sm90/k_grouped_host.cu).
 * A backend without one answers FP8KIT_ERR_UNSUPPORTED. */
#include <string.h>
#include "core/check.h"

#define FN "fp8kit_k_grouped_gemm"

/* Whether the backend takes host pointers (then the core reads the offsets). */
static int fk_kg_host(const fp8kit_ctx *ctx) { return ctx->ops->mem == NULL; }

static fp8kit_status fk_kg_desc(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_k_grouped_gemm_args *a)
{
    fp8kit_status st = fk_check_gemm_desc(ctx, FN, d);
    if (st)
        return st;
    if (d->bias != FP8KIT_BIAS_NONE || d->act != FP8KIT_ACT_NONE || d->out_quant != FP8KIT_OUTQ_NONE)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": bias, activation and output quantization are not supported (desc->bias %d, act %d, "
                          "out_quant %d; all must be 0)",
                       (int)d->bias, (int)d->act, (int)d->out_quant);
    if (d->scale_layout != FP8KIT_LAYOUT_PLAIN)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": scales in the plain layout only");
    if (a->scales_1x128 != 0 && a->scales_1x128 != 1)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, FN ": args->scales_1x128 is %d; 0 or 1",
                       (int)a->scales_1x128);
    if (a->scales_1x128) {
        if (d->scale_a != FP8KIT_SCALE_NONE || d->scale_b != FP8KIT_SCALE_NONE)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           FN ": args->scales_1x128 gives both operands' scales; desc->scale_a and scale_b must be "
                              "FP8KIT_SCALE_NONE (got %d and %d)",
                           (int)d->scale_a, (int)d->scale_b);
        return FP8KIT_OK;
    }
    for (int i = 0; i < 2; i++) {
        const fp8kit_scale_mode m = i ? d->scale_b : d->scale_a;
        if (m == FP8KIT_SCALE_NONE || m == FP8KIT_SCALE_TENSOR)
            continue;
        if (m == FP8KIT_SCALE_BLOCK)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                           FN ": desc->scale_%c is FP8KIT_SCALE_BLOCK (128x128 for B); for 1x128 scales along K on "
                              "both operands set args->scales_1x128 = 1 and leave the descriptor's modes NONE",
                           i ? 'b' : 'a');
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": desc->scale_%c mode %d is not supported (NONE, TENSOR or args->scales_1x128)",
                       i ? 'b' : 'a', (int)m);
    }
    return FP8KIT_OK;
}

/* The offsets' rule, checked on the host (backends working in host memory). */
static fp8kit_status fk_kg_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_k_grouped_gemm_args *a,
                                 fk_k_grouped_job *j)
{
    fp8kit_status st = fk_kg_desc(ctx, d, a);
    if (st)
        return st;
    if ((st = fk_check_tensor(ctx, FN, "a", &a->a, 1)) || (st = fk_check_tensor(ctx, FN, "b", &a->b, 1)) ||
        (st = fk_check_tensor(ctx, FN, "d", &a->d, 1)))
        return st;
    if (a->a.ndim != 2 || a->b.ndim != 2 || a->d.ndim != 3)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": a must be 2-D (M, Ktot), b 2-D (N, Ktot), d 3-D (G, M, N) (ndim %d, %d, %d)",
                       a->a.ndim, a->b.ndim, a->d.ndim);
    memset(j, 0, sizeof *j);
    j->m = a->a.shape[0];
    j->ktot = a->a.shape[1];
    j->n = a->b.shape[0];
    j->groups = a->d.shape[0];
    if (a->b.shape[1] != j->ktot || a->d.shape[1] != j->m || a->d.shape[2] != j->n)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": a is %lld x %lld, b %lld x %lld, d %lld x %lld x %lld; expected a (M, Ktot), "
                          "b (N, Ktot), d (G, M, N)",
                       (long long)j->m, (long long)j->ktot, (long long)j->n, (long long)a->b.shape[1],
                       (long long)j->groups, (long long)a->d.shape[1], (long long)a->d.shape[2]);
    if (j->groups > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": %lld groups; at most 2^31 - 1", (long long)j->groups);
    if (!fk_is_fp8(a->a.dtype) || !fk_is_fp8(a->b.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": a and b must be e4m3 or e5m2 (got %s and %s)",
                       fp8kit_dtype_name(a->a.dtype), fp8kit_dtype_name(a->b.dtype));
    if (!fk_is_hp(a->d.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": d must be f32, f16 or bf16 (got %s)",
                       fp8kit_dtype_name(a->d.dtype));
    j->kb = (j->ktot + 127) / 128;
    j->scales_1x128 = a->scales_1x128;
    if (a->scales_1x128) {
        if ((st = fk_check_count(ctx, FN, "scale_a", &a->scale_a, FP8KIT_F32, fk_mul_ovf(j->m, j->kb),
                                 "1x128 scaling of A (M x ceil(Ktot/128))")) ||
            (st = fk_check_count(ctx, FN, "scale_b", &a->scale_b, FP8KIT_F32, fk_mul_ovf(j->n, j->kb),
                                 "1x128 scaling of B (N x ceil(Ktot/128))")))
            return st;
    } else {
        if (d->scale_a == FP8KIT_SCALE_TENSOR &&
            (st = fk_check_count(ctx, FN, "scale_a", &a->scale_a, FP8KIT_F32, 1, "tensor scaling")))
            return st;
        if (d->scale_b == FP8KIT_SCALE_TENSOR &&
            (st = fk_check_count(ctx, FN, "scale_b", &a->scale_b, FP8KIT_F32, 1, "tensor scaling")))
            return st;
    }
    const int sa = a->scales_1x128 || d->scale_a == FP8KIT_SCALE_TENSOR;
    const int sb = a->scales_1x128 || d->scale_b == FP8KIT_SCALE_TENSOR;
    if ((st = fk_check_group_words(ctx, FN, a->offsets, a->status)))
        return st;
    /* no output (D, status) overlaps another output or an input, offsets included */
    fk_region rg[7];
    int nr = 0;
    rg[nr++] = fk_region_tensor("a", &a->a, 0);
    rg[nr++] = fk_region_tensor("b", &a->b, 0);
    rg[nr++] = fk_region_bytes("offsets", a->offsets, (uint64_t)j->groups * 4u, 0);
    if (sa)
        rg[nr++] = fk_region_tensor("scale_a", &a->scale_a, 0);
    if (sb)
        rg[nr++] = fk_region_tensor("scale_b", &a->scale_b, 0);
    rg[nr++] = fk_region_tensor("d", &a->d, 1);
    rg[nr++] = fk_region_bytes("status", a->status, 4, 1);
    if ((st = fk_check_overlap(ctx, FN, rg, nr))) /* before *status may be written */
        return st;
    if (fk_kg_host(ctx) && (st = fk_check_group_ends(ctx, FN, a->offsets, j->groups, j->ktot, 128, "Ktot", a->status)))
        return st;
    j->a = a->a.data; j->a_type = a->a.dtype; j->lda = fk_stride(&a->a, 0);
    j->b = a->b.data; j->b_type = a->b.dtype; j->ldb = fk_stride(&a->b, 0);
    j->offsets = a->offsets;
    j->scale_a = sa ? (const float *)a->scale_a.data : NULL;
    j->scale_b = sb ? (const float *)a->scale_b.data : NULL;
    j->alpha = a->alpha;
    j->beta = a->beta;
    j->d = a->d.data; j->d_type = a->d.dtype; j->sdg = fk_stride(&a->d, 0); j->ldd = fk_stride(&a->d, 1);
    j->status = a->status;
    j->fast_accum = d->fast_accum != 0;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_k_grouped_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                    const fp8kit_k_grouped_gemm_args *args, void *stream)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, FN ": ctx is NULL");
    if (!desc || !args)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN ": %s is NULL", !desc ? "desc" : "args");
    fk_k_grouped_job j;
    fp8kit_status st = fk_kg_check(ctx, desc, args, &j);
    if (st)
        return st;
    if (!ctx->ops->k_grouped)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s k-grouped gemm: not implemented yet", ctx->ops->name);
    if ((st = ctx->ops->k_grouped(ctx, &j, stream)))
        return st;
    if (args->status && fk_kg_host(ctx))
        *args->status = FP8KIT_OK;
    return FP8KIT_OK;
}
