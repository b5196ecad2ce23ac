/* grouped.c - fp8kit_grouped_gemm: the mixture-of-experts grouped GEMM, one B
 * per expert, in two layouts: contiguous (A's rows grouped by expert through
 * int32 row ends) and masked (A as G slabs of M rows, int32 valid-row counts).
 * Both are seen as one matrix of T rows (masked: T = G x M) in which group g
 * owns rows [r0, r1). It checks the whole call - descriptor, layout,
 * operands, the alignment of every pointer, that no output (D, status)
 * overlaps another argument, then on the CPU every offset and each group's
 * fp8kit_gemm view - before anything runs. Scale counts and per-row / per-
 * expert scale offsets come from format/geometry.h.
 * Backends without a grouped kernel (CPU): each non-empty group runs as an
 * fp8kit_gemm on views of A, B, the scales, the bias, D and D's output
 * scales (each distinct group row count gets its own cached plan), so
 * act=swiglu (D of N/2 columns) and output quantization follow the dense
 * GEMM's one implementation; OUTQ_SCALED's amax_d is the max of the groups'.
 * Backends with one (CUDA): the offsets stay in device memory; the call is
 * checked as one fp8kit_gemm view over all T rows and runs as one grouped
 * job, whose kernel checks the offsets itself and fuses swiglu and the
 * output stage as the dense GEMM's (OUTQ_SCALED's amax_d: over the rows the
 * groups own; 0 when the offsets are invalid). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/check.h"
#include "format/geometry.h"

#define FN "fp8kit_grouped_gemm"

/* ------------------------------------------------ checks shared with k_grouped.c (check.h) */
fp8kit_status fk_check_group_words(const fp8kit_ctx *ctx, const char *fn, const int32_t *offsets,
                                   const int32_t *status)
{
    if (!offsets)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "%s: offsets is NULL", fn);
    /* int32 words, read (offsets) or written (status) as such: every backend */
    if ((uintptr_t)offsets & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, "%s: offsets (%p) is not 4-byte aligned (int32 entries)", fn,
                       (const void *)offsets);
    if ((uintptr_t)status & 3u)
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, "%s: status (%p) is not 4-byte aligned (an int32)", fn,
                       (const void *)status);
    return FP8KIT_OK;
}

fp8kit_status fk_check_group_ends(const fp8kit_ctx *ctx, const char *fn, const int32_t *offsets, int64_t g,
                                  int64_t limit, int64_t align, const char *what, int32_t *status)
{
    int64_t prev = 0;
    for (int64_t i = 0; i < g; i++) {
        const int64_t o = offsets[i];
        if (o < prev || o > limit || o % align) {
            if (status)
                *status = FP8KIT_ERR_INVALID_ARGUMENT;
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           "%s: offsets[%lld] = %lld; offsets must be non-decreasing%s, >= 0 and <= %s = %lld", fn,
                           (long long)i, (long long)o, align > 1 ? " multiples of 128" : "", what,
                           (long long)limit);
        }
        prev = o;
    }
    return FP8KIT_OK;
}

/* The call as one matrix of rows: A (t, k), D (t, n) with row strides lda,
 * ldd; g experts; masked_m rows per expert slab (0: contiguous layout); the
 * scale geometry of one A scale slab (ga: sa_rows rows; sa_slabs slabs one
 * after another) and of one expert's B (gb). A's scales are one slab over
 * all t rows, except mn_major block scales of the masked layout: one slab
 * per expert, each the mn_major buffer of its M rows (fp8kit.h). */
typedef struct fk_grp {
    int64_t t, k, n, g, masked_m, lda, ldd;
    int64_t dn; /* D's columns: n, or n / 2 with FP8KIT_ACT_SWIGLU */
    int64_t sa_rows, sa_slabs;
    fk_scale_geom ga, gb;
    fk_scale_geom gd; /* D's output scales over all t rows (OUTQ_MX / BLOCK1X128: one row of scales per row) */
} fk_grp;

/* Element offset of A's scale of row r (0 .. t - 1) at K block kb. */
static int64_t fk_grp_sa_off(const fk_grp *s, int64_t r, int64_t kb)
{
    const int64_t slab = s->sa_slabs > 1 ? r / s->sa_rows : 0;
    return slab * s->ga.count + fk_scale_off_rk(&s->ga, r - slab * s->sa_rows, kb);
}

/* A checked tensor of dtype dt (of f32 / f16 / bf16 when hp) holding n elements. */
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

/* The scale view of `count` values at element `first` of s: f32 (a scalar
 * when mode is TENSOR), or e8m0 bytes for MX. */
static fp8kit_tensor fk_scale_view(const fp8kit_tensor *s, fp8kit_scale_mode mode, int64_t first, int64_t count)
{
    if (mode == FP8KIT_SCALE_MX)
        return fk_vec((unsigned char *)s->data + first, FP8KIT_E8M0, 1, count);
    if (mode == FP8KIT_SCALE_TENSOR)
        return fk_vec((float *)s->data + first, FP8KIT_F32, 0, 1);
    return fk_vec((float *)s->data + first, FP8KIT_F32, 1, count);
}

/* The output-scale operand of rows r0 .. r1 - 1 of D (desc->out_quant): OUTQ_SCALED's input
 * scalar itself, or those rows of the (t, cols) output-scale matrix of OUTQ_MX / BLOCK1X128. */
static fp8kit_tensor fk_scale_d_view(const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a, const fk_grp *s,
                                     int64_t r0, int64_t r1)
{
    if (d->out_quant == FP8KIT_OUTQ_SCALED)
        return a->scale_d;
    const int64_t cols = s->gd.cols;
    if (d->out_quant == FP8KIT_OUTQ_MX)
        return fk_vec((unsigned char *)a->scale_d.data + r0 * cols, FP8KIT_E8M0, 1, (r1 - r0) * cols);
    return fk_vec((float *)a->scale_d.data + r0 * cols, FP8KIT_F32, 1, (r1 - r0) * cols);
}

/* The fp8kit_gemm operands of group g: rows r0 .. r1 - 1 of A and D. */
static void fk_group_view(const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a, const fk_grp *s, int64_t g,
                          int64_t r0, int64_t r1, fp8kit_gemm_args *o)
{
    const int64_t n = s->n, k = s->k;
    const int64_t sbg = fk_stride(&a->b, 0), ldb = fk_stride(&a->b, 1);
    memset(o, 0, sizeof *o);
    o->a = fp8kit_tensor_2d((char *)a->a.data + r0 * s->lda, a->a.dtype, r1 - r0, k, s->lda);
    o->b = fp8kit_tensor_2d((char *)a->b.data + g * sbg, a->b.dtype, n, k, ldb);
    if (d->scale_a) { /* rows r0 .. r1 - 1 of A's scales (tensor: the one scale) */
        fk_scale_geom v;
        fk_gemm_scale_geom(d->scale_a, d->scale_layout, 0, r1 - r0, k, &v);
        const int64_t first = d->scale_a == FP8KIT_SCALE_TENSOR ? 0 : fk_grp_sa_off(s, r0, 0);
        o->scale_a = fk_scale_view(&a->scale_a, d->scale_a, first, v.count);
    }
    if (d->scale_b)
        o->scale_b = fk_scale_view(&a->scale_b, d->scale_b, g * s->gb.count, s->gb.count);
    if (d->bias == FP8KIT_BIAS_COL)
        o->bias = fk_vec((char *)a->bias.data + g * n * (int64_t)fp8kit_dtype_size(a->bias.dtype), a->bias.dtype, 1, n);
    o->alpha = a->alpha;
    o->d = fp8kit_tensor_2d((char *)a->d.data + r0 * s->ldd * (int64_t)fp8kit_dtype_size(a->d.dtype), a->d.dtype,
                            r1 - r0, s->dn, s->ldd);
    if (d->out_quant != FP8KIT_OUTQ_NONE)
        o->scale_d = fk_scale_d_view(d, a, s, r0, r1);
    if (d->out_quant == FP8KIT_OUTQ_SCALED)
        o->amax_d = a->amax_d; /* (the CPU run gives each group its own and takes the max) */
    o->workspace = a->workspace;
    o->workspace_bytes = a->workspace ? a->workspace_bytes : 0;
}

/* Group i's rows [*r0, *r1) from host offsets (CPU backend, checked). */
static void fk_group_rows(const fp8kit_grouped_gemm_args *a, const fk_grp *s, int64_t i, int64_t *r0, int64_t *r1)
{
    if (s->masked_m) {
        *r0 = i * s->masked_m;
        *r1 = *r0 + a->offsets[i];
    } else {
        *r0 = i ? a->offsets[i - 1] : 0;
        *r1 = a->offsets[i];
    }
}

/* Whether the backend runs the whole call in its own grouped kernel (then
 * offsets and status live in the backend's memory and only its kernel
 * reads them); else the core runs one fp8kit_gemm per group. */
static int fk_grouped_on_device(const fp8kit_ctx *ctx) { return ctx->ops->grouped_run != NULL; }

/* Shapes of A, B and D for the layout, into s (rows, strides); swiglu: D has N/2 columns. */
static fp8kit_status fk_grouped_shapes(fp8kit_ctx *ctx, const fp8kit_grouped_gemm_args *a, int swiglu, fk_grp *s)
{
    fp8kit_status st;
    if ((st = fk_check_tensor(ctx, FN, "a", &a->a, 1)) || (st = fk_check_tensor(ctx, FN, "b", &a->b, 1)) ||
        (st = fk_check_tensor(ctx, FN, "d", &a->d, 1)))
        return st;
    const int masked = a->layout == FP8KIT_GROUPED_MASKED;
    const int nd = masked ? 3 : 2;
    if (a->a.ndim != nd || a->b.ndim != 3 || a->d.ndim != nd)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       masked ? FN ": masked layout: a must be 3-D (G, M, K), b 3-D (G, N, K), d 3-D (G, M, N) "
                                   "(ndim %d, %d, %d)"
                              : FN ": a must be 2-D (T, K), b 3-D (G, N, K), d 2-D (T, N) (ndim %d, %d, %d)",
                       a->a.ndim, a->b.ndim, a->d.ndim);
    memset(s, 0, sizeof *s);
    s->g = a->b.shape[0];
    s->n = a->b.shape[1];
    s->k = a->a.shape[nd - 1];
    if (swiglu && s->n % 2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": act=swiglu needs an even N (each expert's B rows are [gate; up], D has N/2 columns; "
                          "N = %lld)",
                       (long long)s->n);
    s->dn = swiglu ? s->n / 2 : s->n;
    const char *dcols = swiglu ? "N/2" : "N";
    const int64_t rows = a->a.shape[nd - 2]; /* T, or M per expert */
    const int shape_ok = a->b.shape[2] == s->k && a->d.shape[nd - 2] == rows && a->d.shape[nd - 1] == s->dn &&
                         (!masked || (a->a.shape[0] == s->g && a->d.shape[0] == s->g));
    if (!shape_ok) {
        if (masked)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                           FN ": a is %lld x %lld x %lld, b %lld x %lld x %lld, d %lld x %lld x %lld; expected a "
                              "(G, M, K), b (G, N, K), d (G, M, %s)",
                           (long long)a->a.shape[0], (long long)a->a.shape[1], (long long)a->a.shape[2],
                           (long long)s->g, (long long)s->n, (long long)a->b.shape[2], (long long)a->d.shape[0],
                           (long long)a->d.shape[1], (long long)a->d.shape[2], dcols);
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": a is %lld x %lld, b %lld x %lld x %lld, d %lld x %lld; expected a (T, K), b (G, N, K), "
                          "d (T, %s)",
                       (long long)rows, (long long)s->k, (long long)s->g, (long long)s->n, (long long)a->b.shape[2],
                       (long long)a->d.shape[0], (long long)a->d.shape[1], dcols);
    }
    if (s->g > INT32_MAX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": %lld groups; at most 2^31 - 1", (long long)s->g);
    /* rows are K- (N-) contiguous; masked slabs one row stride apart */
    if ((s->k > 1 && fk_stride(&a->a, nd - 1) != 1) || (s->k > 1 && fk_stride(&a->b, 2) != 1) ||
        (s->dn > 1 && fk_stride(&a->d, nd - 1) != 1))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE, FN ": a, b and d need unit strides along their last dimension");
    s->lda = fk_stride(&a->a, nd - 2);
    s->ldd = fk_stride(&a->d, nd - 2);
    if (masked) {
        s->masked_m = rows;
        if (s->g > 1 && rows > 0 &&
            (fk_stride(&a->a, 0) != fk_mul_ovf(rows, s->lda) || fk_stride(&a->d, 0) != fk_mul_ovf(rows, s->ldd)))
            return fk_fail(ctx, FP8KIT_ERR_INVALID_STRIDE,
                           FN ": masked layout: a's and d's expert strides must be M times their row strides "
                              "(a %lld vs %lld x %lld, d %lld vs %lld x %lld)",
                           (long long)fk_stride(&a->a, 0), (long long)rows, (long long)s->lda,
                           (long long)fk_stride(&a->d, 0), (long long)rows, (long long)s->ldd);
        s->t = fk_mul_ovf(s->g, rows);
        if (s->t < 0 || s->t > INT64_MAX / 2)
            return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, FN ": G x M overflows");
    } else {
        s->t = rows;
    }
    return FP8KIT_OK;
}

/* The offsets' rule for the layout, checked on the host (CPU backend). */
static fp8kit_status fk_grouped_offsets(fp8kit_ctx *ctx, const fp8kit_grouped_gemm_args *a, const fk_grp *s)
{
    if (!s->masked_m)
        return fk_check_group_ends(ctx, FN, a->offsets, s->g, s->t, 1, "T", a->status);
    for (int64_t i = 0; i < s->g; i++) {
        const int64_t o = a->offsets[i];
        if (o < 0 || o > s->masked_m) {
            if (a->status)
                *a->status = FP8KIT_ERR_INVALID_ARGUMENT;
            return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT,
                           FN ": offsets[%lld] = %lld; masked counts must be >= 0 and <= M = %lld", (long long)i,
                           (long long)o, (long long)s->masked_m);
        }
    }
    return FP8KIT_OK;
}

/* D's dtype and the output stage (desc->out_quant) over D's t x dn: OUTQ_NONE casts to an
 * f32 / f16 / bf16 D; output quantization needs an e4m3 / e5m2 D and scale_d (SCALED: one f32;
 * MX / BLOCK1X128: the output scales of every row of D, s->gd); amax_d with SCALED only. */
static fp8kit_status fk_grouped_out_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d,
                                          const fp8kit_grouped_gemm_args *a, fk_grp *s)
{
    const fp8kit_out_quant oq = d->out_quant;
    if (oq == FP8KIT_OUTQ_NONE && !fk_is_hp(a->d.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": d must be f32, f16 or bf16 (got %s; an e4m3 / e5m2 D needs output quantization)",
                       fp8kit_dtype_name(a->d.dtype));
    if (oq != FP8KIT_OUTQ_NONE && !fk_is_fp8(a->d.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": output quantization needs an e4m3/e5m2 D (d is %s)",
                       fp8kit_dtype_name(a->d.dtype));
    if (oq != FP8KIT_OUTQ_SCALED && a->amax_d)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": amax_d is only written with OUTQ_SCALED");
    if ((uintptr_t)a->amax_d % sizeof(float))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN ": amax_d (%p) is not aligned to its 4-byte f32 element",
                       (void *)a->amax_d);
    const int gst = fk_gemm_out_scale_geom(oq, s->t, s->dn, &s->gd);
    if (gst == FK_GEO_ERR_SHAPE)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": OUTQ_MX needs %s %% 32 == 0 (%s = %lld)",
                       s->dn == s->n ? "N" : "D's N/2 columns (act=swiglu)", s->dn == s->n ? "N" : "N/2",
                       (long long)s->dn);
    if (gst)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, FN ": the element count of D's output scales overflows int64");
    if (oq == FP8KIT_OUTQ_NONE)
        return FP8KIT_OK;
    static const char *const what[2][4] = {
        {"", "OUTQ_SCALED (one f32 input scale)", "OUTQ_MX's output scales (T x Nd/32, Nd = D's columns)",
         "OUTQ_BLOCK1X128's output scales (T x ceil(Nd/128), Nd = D's columns)"},
        {"", "OUTQ_SCALED (one f32 input scale)", "OUTQ_MX's output scales (G x M x Nd/32, Nd = D's columns)",
         "OUTQ_BLOCK1X128's output scales (G x M x ceil(Nd/128), Nd = D's columns)"}};
    return fk_check_flat(ctx, "scale_d", &a->scale_d, s->gd.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32, 0, s->gd.count,
                         what[s->masked_m != 0][oq]);
}

/* query: a workspace-size query (placeholder pointers: no overlap rule, no
 * host offsets read). */
static fp8kit_status fk_grouped_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a,
                                      fk_grp *s, int query)
{
    fp8kit_status st = fk_check_gemm_desc(ctx, FN, d);
    if (st)
        return st;
    if ((unsigned)a->layout > FP8KIT_GROUPED_MASKED)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, FN ": args->layout %d is not a fp8kit_grouped_layout",
                       (int)a->layout);
    const int mx = d->scale_a == FP8KIT_SCALE_MX; /* (on both: fk_check_gemm_desc) */
    if (mx && d->scale_layout != FP8KIT_LAYOUT_PLAIN) /* (block: plain or mn_major, fk_check_gemm_desc) */
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": mx scales in the plain layout only");
    if (d->bias == FP8KIT_BIAS_ROW)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": only a per-column bias (G x N) is supported");
    if ((st = fk_grouped_shapes(ctx, a, d->act == FP8KIT_ACT_SWIGLU, s)))
        return st;
    if (mx && s->k % 32)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": mx scaling needs K %% 32 == 0 (K = %lld)", (long long)s->k);
    if (a->workspace && ((uintptr_t)a->workspace & 15u))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN ": workspace (%p) is not 16-byte aligned", a->workspace);
    if (!fk_is_fp8(a->a.dtype) || !fk_is_fp8(a->b.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": a and b must be e4m3 or e5m2 (got %s and %s)",
                       fp8kit_dtype_name(a->a.dtype), fp8kit_dtype_name(a->b.dtype));
    if ((st = fk_grouped_out_check(ctx, d, a, s)))
        return st;
    /* scale counts: A's over all T rows (mn_major, masked: per expert), B's per expert (format/geometry.h) */
    const int mn = d->scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    static const char *const wa[] = {"", "tensor scaling", "row scaling of A (T)", "block scaling of A (T x ceil(K/128))",
                                     "mx scaling of A (T x K/32)"};
    const char *wa_mn = s->masked_m ? "mn_major block scaling of A (G x ceil(K/128) x 4*ceil(M/4))"
                                    : "mn_major block scaling of A (ceil(K/128) x 4*ceil(T/4))";
    static const char *const wb[] = {"", "tensor scaling per expert (G)", "row scaling per expert (G x N)",
                                     "block scaling per expert (G x ceil(N/128) x ceil(K/128))",
                                     "mx scaling per expert (G x N x K/32)"};
    const fp8kit_dtype sdt = mx ? FP8KIT_E8M0 : FP8KIT_F32;
    if (fk_grouped_a_scale_geom(d->scale_a, d->scale_layout, s->t, s->g, s->masked_m, s->k, &s->ga, &s->sa_rows,
                                &s->sa_slabs) ||
        fk_gemm_scale_geom(d->scale_b, d->scale_layout, 1, s->n, s->k, &s->gb) ||
        fk_mul_ovf(s->sa_slabs, s->ga.count) < 0)
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, FN ": the scale counts overflow int64");
    if (d->scale_a && (st = fk_check_flat(ctx, "scale_a", &a->scale_a, sdt, 0, fk_mul_ovf(s->sa_slabs, s->ga.count),
                                          mn ? wa_mn : wa[d->scale_a])))
        return st;
    if (d->scale_b &&
        (st = fk_check_flat(ctx, "scale_b", &a->scale_b, sdt, 0, fk_mul_ovf(s->g, s->gb.count), wb[d->scale_b])))
        return st;
    if (d->bias == FP8KIT_BIAS_COL &&
        (st = fk_check_flat(ctx, "bias", &a->bias, FP8KIT_F32, 1, fk_mul_ovf(s->g, s->n), "a per-expert column bias (G x N)")))
        return st;
    if ((st = fk_check_group_words(ctx, FN, a->offsets, a->status)))
        return st;
    /* no output (D, scale_d, amax_d, status, workspace) overlaps another output or an input, offsets included */
    fk_region rg[11];
    int nr = 0;
    rg[nr++] = fk_region_tensor("a", &a->a, 0);
    rg[nr++] = fk_region_tensor("b", &a->b, 0);
    rg[nr++] = fk_region_bytes("offsets", a->offsets, (uint64_t)s->g * 4u, 0);
    if (d->scale_a)
        rg[nr++] = fk_region_tensor("scale_a", &a->scale_a, 0);
    if (d->scale_b)
        rg[nr++] = fk_region_tensor("scale_b", &a->scale_b, 0);
    if (d->bias)
        rg[nr++] = fk_region_tensor("bias", &a->bias, 0);
    rg[nr++] = fk_region_tensor("d", &a->d, 1);
    if (d->out_quant != FP8KIT_OUTQ_NONE) /* SCALED's input, MX / BLOCK1X128's output */
        rg[nr++] = fk_region_tensor("scale_d", &a->scale_d, d->out_quant != FP8KIT_OUTQ_SCALED);
    rg[nr++] = fk_region_bytes("amax_d", a->amax_d, sizeof(float), 1);
    rg[nr++] = fk_region_bytes("status", a->status, 4, 1);
    if (a->workspace)
        rg[nr++] = fk_region_bytes("workspace", a->workspace, (uint64_t)a->workspace_bytes, 1);
    if (!query && (st = fk_check_overlap(ctx, FN, rg, nr))) /* before *status may be written */
        return st;
    if (fk_grouped_on_device(ctx)) {
        /* offsets are device memory: the kernel checks them. Everything
         * else as fp8kit_gemm sees the call over all T rows with expert 0's
         * B, scales and bias (every expert's have the same shape, dtype and
         * alignment); what the kernel itself needs is its backend's rule. */
        if (s->g == 0)
            return FP8KIT_OK; /* nothing runs (status, if given, gets 0) */
        fp8kit_gemm_args v;
        fk_group_view(d, a, s, 0, 0, s->t, &v);
        return fk_gemm_check(ctx, d, &v, !query);
    }
    if (query) /* placeholder pointers: the host offsets are not read */
        return FP8KIT_OK;
    if ((st = fk_grouped_offsets(ctx, a, s)))
        return st;
    /* every group as fp8kit_gemm would see it (dtypes, alignment, K rules);
     * mn_major A scales: as the plain call fk_grouped_plain makes sees them */
    for (int64_t i = 0; i < s->g && !mn; i++) {
        int64_t r0, r1;
        fk_group_rows(a, s, i, &r0, &r1);
        if (r1 > r0) {
            fp8kit_gemm_args v;
            fk_group_view(d, a, s, i, r0, r1, &v);
            if ((st = fk_gemm_check(ctx, d, &v, 1))) {
                char msg[400];
                snprintf(msg, sizeof msg, "%s", fp8kit_last_error(ctx));
                return fk_fail(ctx, st, FN ": group %lld: %s", (long long)i, msg);
            }
        }
    }
    return FP8KIT_OK;
}

/* Plan key of a backend's grouped kernel: a tag (no fp8kit_gemm key starts
 * with it), the options, the dtypes, the shapes and strides, alignment bits. */
typedef struct fk_grouped_key {
    int32_t tag, scale_a, scale_b, scale_layout, bias, act, fast_accum, a_type, b_type, bias_type, d_type, align, layout;
    int32_t out_quant, out_hp, out_rounding, out_pow2, has_amax;
    int64_t t, n, k, g, masked_m, lda, ldb, b_stride, ldd, tuning;
} fk_grouped_key;

/* The call as one grouped job of a backend with its own grouped kernel. */
static void fk_grouped_job_of(const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a, const fk_grp *s,
                              fk_grouped_job *out)
{
    fk_grouped_job gj;
    memset(&gj, 0, sizeof gj);
    fk_gemm_job *j = &gj.gemm;
    fp8kit_gemm_args v;
    fk_group_view(d, a, s, 0, 0, s->t, &v);
    j->desc = *d;
    j->m = s->t;
    j->n = s->n;
    j->k = s->k;
    j->a = v.a.data; j->a_type = v.a.dtype; j->lda = s->lda;
    j->b = v.b.data; j->b_type = v.b.dtype; j->ldb = fk_stride(&v.b, 0);
    j->scale_a = d->scale_a ? v.scale_a.data : NULL;
    j->scale_b = d->scale_b ? v.scale_b.data : NULL;
    j->alpha = a->alpha;
    j->bias = d->bias != FP8KIT_BIAS_NONE ? v.bias.data : NULL;
    j->bias_type = v.bias.dtype;
    j->d = v.d.data; j->d_type = v.d.dtype; j->ldd = s->ldd;
    j->scale_d_in = d->out_quant == FP8KIT_OUTQ_SCALED ? (const float *)v.scale_d.data : NULL;
    j->amax_d = d->out_quant == FP8KIT_OUTQ_SCALED ? v.amax_d : NULL;
    j->scale_d_out = d->out_quant == FP8KIT_OUTQ_MX || d->out_quant == FP8KIT_OUTQ_BLOCK1X128 ? v.scale_d.data : NULL;
    gj.groups = s->g;
    gj.b_stride = s->g > 1 ? fk_stride(&a->b, 0) : s->n * j->ldb;
    gj.sb_stride = d->scale_b ? s->gb.count : 0;
    gj.masked_m = s->masked_m;
    gj.offsets = a->offsets;
    gj.status = a->status;
    j->workspace = a->workspace;
    j->workspace_bytes = a->workspace ? a->workspace_bytes : 0;
    *out = gj;
}

/* The plan of the backend's grouped kernel for the call (cached), and its job. */
static const fk_plan *fk_grouped_plan(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a,
                                      const fk_grp *s, fk_grouped_job *out, fp8kit_status *st)
{
    fk_grouped_job_of(d, a, s, out);
    const fk_gemm_job *j = &out->gemm;
    fk_grouped_key key;
    memset(&key, 0, sizeof key);
    key.tag = 0x47525032; /* "GRP2" */
    key.tuning = (int64_t)ctx->tuning_key;
    key.scale_a = d->scale_a; key.scale_b = d->scale_b; key.scale_layout = d->scale_layout;
    key.bias = d->bias; key.act = d->act;
    key.fast_accum = d->fast_accum != 0;
    key.out_quant = d->out_quant; key.out_hp = d->out_hp; key.out_rounding = d->out_rounding;
    key.out_pow2 = d->out_pow2 != 0; key.has_amax = j->amax_d != NULL;
    key.a_type = j->a_type; key.b_type = j->b_type; key.bias_type = j->bias ? (int32_t)j->bias_type : -1;
    key.d_type = j->d_type;
    key.align = (int32_t)fk_job_align_bits(j);
    key.layout = a->layout;
    key.t = j->m; key.n = j->n; key.k = j->k; key.g = out->groups; key.masked_m = out->masked_m;
    key.lda = j->lda; key.ldb = j->ldb; key.b_stride = out->b_stride; key.ldd = j->ldd;
    return fk_plan_get(ctx, &key, sizeof key, j, ctx->ops->grouped_plan, st);
}

static fp8kit_status fk_grouped_native(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *a,
                                       const fk_grp *s, void *stream)
{
    fk_grouped_job gj;
    fp8kit_status st;
    const fk_plan *plan = fk_grouped_plan(ctx, d, a, s, &gj, &st);
    if (!plan)
        return st;
    return ctx->ops->grouped_run(ctx, &gj, plan, stream);
}

/* Backends without a grouped kernel, mn_major A scales: the call again with
 * A's scales copied into the plain layout (T x ceil(K/128); a group's rows of
 * an mn_major buffer are not one fp8kit_gemm scale tensor). */
static fp8kit_status fk_grouped_plain(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                      const fp8kit_grouped_gemm_args *args, const fk_grp *s, void *stream)
{
    const int64_t nkb = s->ga.gcols, n = fk_mul_ovf(s->t, nkb);
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float))
        return fk_fail(ctx, FP8KIT_ERR_SIZE_OVERFLOW, FN ": T x ceil(K/128) overflows");
    float *plain = (float *)malloc(n ? (size_t)n * sizeof(float) : sizeof(float));
    if (!plain)
        return fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, FN ": no memory for a plain copy of A's scales (%lld floats)",
                       (long long)n);
    const float *sa = (const float *)args->scale_a.data;
    for (int64_t r = 0; r < s->t; r++)
        for (int64_t kb = 0; kb < nkb; kb++)
            plain[r * nkb + kb] = sa[fk_grp_sa_off(s, r, kb)];
    fp8kit_gemm_desc d2 = *desc;
    d2.scale_layout = FP8KIT_LAYOUT_PLAIN;
    fp8kit_grouped_gemm_args a2 = *args;
    a2.scale_a = fk_vec(plain, FP8KIT_F32, 1, n);
    const fp8kit_status st = fp8kit_grouped_gemm(ctx, &d2, &a2, stream);
    free(plain);
    return st;
}

fp8kit_status fp8kit_grouped_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_grouped_gemm_args *args,
                                  void *stream)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, FN ": ctx is NULL");
    if (!desc || !args)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN ": %s is NULL", !desc ? "desc" : "args");
    fk_grp s;
    fp8kit_status st = fk_grouped_check(ctx, desc, args, &s, 0);
    if (st)
        return st;
    if (fk_grouped_on_device(ctx))
        return fk_grouped_native(ctx, desc, args, &s, stream);
    if (desc->scale_layout == FP8KIT_LAYOUT_MN_MAJOR)
        return fk_grouped_plain(ctx, desc, args, &s, stream);
    uint32_t amax = 0; /* OUTQ_SCALED: the max of the groups' |y| bits, as one fp8kit_gemm reduces them */
    for (int64_t i = 0; i < s.g; i++) {
        int64_t r0, r1;
        fk_group_rows(args, &s, i, &r0, &r1);
        if (r1 > r0) {
            fp8kit_gemm_args v;
            float group_amax = 0.0f;
            fk_group_view(desc, args, &s, i, r0, r1, &v);
            if (v.amax_d)
                v.amax_d = &group_amax;
            if ((st = fp8kit_gemm(ctx, desc, &v, stream)))
                return st;
            amax = fk_max_u32(amax, fk_abs_bits(group_amax));
        }
    }
    if (args->amax_d)
        *args->amax_d = fk_u2f(amax); /* 0 when no group has a row */
    if (args->status)
        *args->status = FP8KIT_OK;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_grouped_gemm_workspace_size(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                                 const fp8kit_grouped_gemm_args *args, size_t *bytes)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_grouped_gemm_workspace_size: ctx is NULL");
    if (!desc || !args || !bytes)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_grouped_gemm_workspace_size: %s is NULL",
                       !desc ? "desc" : !args ? "args" : "bytes");
    fk_grp s;
    fp8kit_status st = fk_grouped_check(ctx, desc, args, &s, 1);
    if (st)
        return st;
    size_t b = 0;
    if (fk_grouped_on_device(ctx) && ctx->ops->grouped_workspace && s.g > 0) {
        fk_grouped_job gj;
        fk_grouped_job_of(desc, args, &s, &gj);
        if ((st = ctx->ops->grouped_workspace(ctx, &gj, &b)))
            return st;
    }
    *bytes = b;
    return FP8KIT_OK;
}

fp8kit_status fp8kit_grouped_gemm_describe(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc,
                                           const fp8kit_grouped_gemm_args *args, char *buf, size_t n)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_grouped_gemm_describe: ctx is NULL");
    if (!desc || !args || !buf || n == 0)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_grouped_gemm_describe: %s is NULL%s",
                       !desc ? "desc" : !args ? "args" : "buf", buf && !n ? " or empty" : "");
    buf[0] = 0;
    fk_grp s;
    fp8kit_status st = fk_grouped_check(ctx, desc, args, &s, 1);
    if (st)
        return st;
    if (!fk_grouped_on_device(ctx) || s.g == 0) { /* one fp8kit_gemm per group (CPU), or nothing to run */
        snprintf(buf, n, "%s: %s", ctx->ops->name, s.g ? "one gemm per group" : "no groups");
        return FP8KIT_OK;
    }
    fk_grouped_job gj;
    const fk_plan *plan = fk_grouped_plan(ctx, desc, args, &s, &gj, &st);
    if (!plan)
        return st;
    fk_describe_plan(ctx, plan, buf, n);
    return FP8KIT_OK;
}
