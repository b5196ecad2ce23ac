/* gemm_api.c - public scaled-GEMM entry points: validate descriptor and
 * operands (docs/spec.md sections 3 and 4; alignment, no overlapping
 * outputs, D may be exactly C; scale shapes from format/geometry.h, also
 * answered by fp8kit_gemm_scale_shape) into an fk_gemm_job, find or build the
 * cached plan (hash + lookup), and dispatch to the backend. A thread repeating
 * its previous call's metadata with new data pointers skips the re-checks. */
#include <stdio.h>
#include <string.h>
#include "core/check.h"

#define FN "fp8kit_gemm"


/* (internal.h) */
fp8kit_status fk_check_gemm_desc(const fp8kit_ctx *ctx, const char *fn, const fp8kit_gemm_desc *d)
{
    if ((unsigned)d->scale_a > FP8KIT_SCALE_MX || (unsigned)d->scale_b > FP8KIT_SCALE_MX)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->scale_a/scale_b is not a fp8kit_scale_mode", fn);
    if ((unsigned)d->scale_layout > FP8KIT_LAYOUT_MN_MAJOR)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->scale_layout is not a fp8kit_scale_layout", fn);
    if ((unsigned)d->bias > FP8KIT_BIAS_ROW)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->bias %d is not a fp8kit_bias_mode", fn, (int)d->bias);
    if ((unsigned)d->act >= FP8KIT_ACT_COUNT)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->act %d is not a fp8kit_activation", fn, (int)d->act);
    if ((unsigned)d->out_quant > FP8KIT_OUTQ_BLOCK1X128)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->out_quant %d is not a fp8kit_out_quant", fn,
                       (int)d->out_quant);
    if ((unsigned)d->out_rounding > FP8KIT_ROUND_RCEIL)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_ARGUMENT, "%s: desc->out_rounding is not a fp8kit_rounding", fn);
    int ba = d->scale_a == FP8KIT_SCALE_BLOCK, bb = d->scale_b == FP8KIT_SCALE_BLOCK;
    int ma = d->scale_a == FP8KIT_SCALE_MX, mb = d->scale_b == FP8KIT_SCALE_MX;
    if (ba != bb || ma != mb)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       "%s: block and mx scaling must be used on both A and B (got scale_a %d, scale_b %d)", fn,
                       (int)d->scale_a, (int)d->scale_b);
    if (!fk_gemm_layout_ok(d->scale_a, d->scale_layout)) {
        if (d->scale_layout == FP8KIT_LAYOUT_BLOCKED)
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: the blocked scale layout is only defined for mx scaling", fn);
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: the mn_major scale layout is only defined for block scaling", fn);
    }
    if ((d->out_quant == FP8KIT_OUTQ_MX || d->out_quant == FP8KIT_OUTQ_BLOCK1X128) && !fk_is_hp(d->out_hp))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, "%s: desc->out_hp must be f32, f16 or bf16 for fused output quantization", fn);
    return FP8KIT_OK;
}

/* A checked tensor of exactly `ndim` = 2 dims rows x cols with contiguous rows. */
static fp8kit_status fk_check_mat2(const fp8kit_ctx *ctx, const char *name, const fp8kit_tensor *t, int64_t rows,
                                   int64_t cols, int64_t *ld)
{
    fp8kit_status st = fk_check_tensor(ctx, FN, name, t, 1);
    if (st)
        return st;
    if (t->ndim != 2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": %s must be 2-D (ndim is %d)", name, t->ndim);
    if (rows >= 0 && (t->shape[0] != rows || t->shape[1] != cols))
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": %s is %lld x %lld; expected %lld x %lld", name,
                       (long long)t->shape[0], (long long)t->shape[1], (long long)rows, (long long)cols);
    *ld = fk_stride(t, 0);
    return FP8KIT_OK;
}

/* A checked contiguous tensor of dtype `dt` holding exactly `n` elements. */
static fp8kit_status fk_check_vec(const fp8kit_ctx *ctx, const char *name, const fp8kit_tensor *t, fp8kit_dtype dt,
                                  int64_t n, const char *what)
{
    return fk_check_count(ctx, FN, name, t, dt, n, what);
}

/* The scales of operand 0 (A: rows M, k K), 1 (B: rows N, k K) or 2 (D's output
 * scales: rows M, k N) under d (format/geometry.h); *what names the role in
 * messages. The geometry's code: FK_GEO_ERR_SHAPE for K (mx) or N (OUTQ_MX) not
 * a multiple of 32, FK_GEO_ERR_OVERFLOW with count -1 when a size overflows. */
static int fk_op_geom(const fp8kit_gemm_desc *d, int operand, int64_t rows, int64_t k, fk_scale_geom *g,
                      const char **what)
{
    if (operand == 2) {
        static const char *const oq[] = {"no output quantization", "OUTQ_SCALED", "OUTQ_MX", "OUTQ_BLOCK1X128"};
        *what = (unsigned)d->out_quant <= FP8KIT_OUTQ_BLOCK1X128 ? oq[d->out_quant] : "out_quant";
        return fk_gemm_out_scale_geom(d->out_quant, rows, k, g);
    }
    const fp8kit_scale_mode mode = operand ? d->scale_b : d->scale_a;
    switch (mode) {
    case FP8KIT_SCALE_TENSOR: *what = "tensor scaling"; break;
    case FP8KIT_SCALE_ROW: *what = "row scaling"; break;
    case FP8KIT_SCALE_BLOCK:
        *what = operand ? "128x128 block scaling of B"
                : d->scale_layout == FP8KIT_LAYOUT_MN_MAJOR ? "1x128 block scaling of A (mn_major)"
                                                            : "1x128 block scaling of A";
        break;
    case FP8KIT_SCALE_MX:
        *what = d->scale_layout == FP8KIT_LAYOUT_BLOCKED ? "mx scaling (blocked layout)" : "mx scaling";
        break;
    default: *what = "no scaling"; break;
    }
    return fk_gemm_scale_geom(mode, d->scale_layout, operand, rows, k, g);
}

/* Validates one operand's scales. rows = M (A) or N (B); K % 32 was checked for mx. */
static fp8kit_status fk_check_op_scale(const fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, int is_a,
                                       const fp8kit_tensor *s, int64_t rows, int64_t k, int64_t *ld)
{
    const char *name = is_a ? "scale_a" : "scale_b", *what;
    const fp8kit_scale_mode mode = is_a ? d->scale_a : d->scale_b;
    fk_scale_geom g;
    fk_op_geom(d, !is_a, rows, k, &g, &what);
    *ld = mode == FP8KIT_SCALE_BLOCK ? g.ld : 0; /* the stored row stride of block scales */
    if (mode == FP8KIT_SCALE_NONE)
        return FP8KIT_OK;
    return fk_check_vec(ctx, name, s, g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32, g.count, what);
}

fp8kit_status fp8kit_gemm_scale_shape(const fp8kit_gemm_desc *desc, int operand, int64_t rows, int64_t k,
                                      fp8kit_dtype *dtype, int64_t shape[2])
{
    const char *fn = "fp8kit_gemm_scale_shape";
    if (!desc || !dtype || !shape)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, "%s: %s is NULL", fn, !desc ? "desc" : !dtype ? "dtype" : "shape");
    fp8kit_status st = fk_check_gemm_desc(NULL, fn, desc);
    if (st)
        return st;
    if (operand < 0 || operand > 2)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "%s: operand %d is not 0 (A), 1 (B) or 2 (D)", fn, operand);
    const char *rn = operand == 1 ? "N" : "M", *kn = operand == 2 ? "N" : "K";
    if (rows < 0 || k < 0)
        return fk_fail(NULL, FP8KIT_ERR_SIZE_OVERFLOW, "%s: %s = %lld is negative", fn, rows < 0 ? rn : kn,
                       (long long)(rows < 0 ? rows : k));
    if (rows == 0 || k == 0)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_SHAPE, "%s: %s is 0 (empty operands are not accepted)", fn,
                       rows == 0 ? rn : kn);
    const int glu = operand == 2 && desc->act == FP8KIT_ACT_SWIGLU;
    if (glu && k % 2)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_SHAPE, "%s: act=swiglu needs an even N (D is M x N/2; N = %lld)", fn,
                       (long long)k);
    if (glu) {
        k /= 2; /* D's columns */
        kn = "N/2";
    }
    fk_scale_geom g;
    const char *what;
    const int gst = fk_op_geom(desc, operand, rows, k, &g, &what);
    if (gst == FK_GEO_ERR_SHAPE)
        return fk_fail(NULL, FP8KIT_ERR_INVALID_SHAPE, "%s: %s needs %s %% 32 == 0 (%s = %lld)", fn,
                       operand == 2 ? "OUTQ_MX" : "mx scaling", kn, kn, (long long)k);
    if (gst == FK_GEO_ERR_OVERFLOW)
        return fk_fail(NULL, FP8KIT_ERR_SIZE_OVERFLOW, "%s: the element count for %s overflows int64", fn, what);
    if (gst)
        return fk_fail(NULL, FP8KIT_ERR_INTERNAL, "%s: no scale geometry for this descriptor", fn);
    *dtype = g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32;
    shape[0] = g.rows;
    shape[1] = g.cols;
    return FP8KIT_OK;
}

/* The job's data pointers from args (the only fields of a job that differ
 * between two calls with equal descriptors and operand metadata): each used
 * operand's pointer, NULL for unused ones. */
static void fk_job_pointers(fk_gemm_job *j, const fp8kit_gemm_args *a)
{
    const fp8kit_gemm_desc *d = &j->desc;
    j->a = a->a.data;
    j->b = a->b.data;
    j->scale_a = d->scale_a ? a->scale_a.data : NULL;
    j->scale_b = d->scale_b ? a->scale_b.data : NULL;
    j->d = a->d.data;
    j->scale_d_in = d->out_quant == FP8KIT_OUTQ_SCALED ? (const float *)a->scale_d.data : NULL;
    j->amax_d = d->out_quant == FP8KIT_OUTQ_SCALED ? a->amax_d : NULL;
    j->scale_d_out = d->out_quant == FP8KIT_OUTQ_MX || d->out_quant == FP8KIT_OUTQ_BLOCK1X128 ? a->scale_d.data : NULL;
    j->c = a->beta != 0.0f ? a->c.data : NULL;
    j->bias = d->bias != FP8KIT_BIAS_NONE ? a->bias.data : NULL;
    j->workspace = a->workspace;
}

/* The byte regions of a call's operands (the overlap rule of fp8kit.h),
 * sized from the validated tensors; their pointers come from the job, so
 * the per-thread fast path reuses the sizes with new pointers. */
enum { FK_R_A, FK_R_B, FK_R_SA, FK_R_SB, FK_R_C, FK_R_BIAS, FK_R_D, FK_R_SD, FK_R_AMAX, FK_R_N };

static void fk_gemm_regions(const fp8kit_gemm_desc *d, const fp8kit_gemm_args *a, fk_region *r)
{
    const int sd_out = d->out_quant == FP8KIT_OUTQ_MX || d->out_quant == FP8KIT_OUTQ_BLOCK1X128;
    r[FK_R_A] = fk_region_tensor("a", &a->a, 0);
    r[FK_R_B] = fk_region_tensor("b", &a->b, 0);
    r[FK_R_SA] = d->scale_a ? fk_region_tensor("scale_a", &a->scale_a, 0) : fk_region_bytes("scale_a", NULL, 0, 0);
    r[FK_R_SB] = d->scale_b ? fk_region_tensor("scale_b", &a->scale_b, 0) : fk_region_bytes("scale_b", NULL, 0, 0);
    r[FK_R_C] = a->beta != 0.0f ? fk_region_tensor("c", &a->c, 0) : fk_region_bytes("c", NULL, 0, 0);
    r[FK_R_BIAS] = d->bias ? fk_region_tensor("bias", &a->bias, 0) : fk_region_bytes("bias", NULL, 0, 0);
    r[FK_R_D] = fk_region_tensor("d", &a->d, 1);
    r[FK_R_SD] = d->out_quant ? fk_region_tensor("scale_d", &a->scale_d, sd_out) : fk_region_bytes("scale_d", NULL, 0, 0);
    r[FK_R_AMAX] = fk_region_bytes("amax_d", NULL, sizeof(float), 1);
}

/* No output overlaps another output or an input; D may be exactly C (the same
 * data, dtype and row stride: in-place accumulation, each element of C read
 * before the same element of D is written). meta: fk_gemm_regions' sizes. */
static fp8kit_status fk_gemm_overlaps(const fp8kit_ctx *ctx, const fk_gemm_job *j, const fk_region *meta)
{
    fk_region r[FK_R_N];
    memcpy(r, meta, sizeof r);
    r[FK_R_A].p = (uintptr_t)j->a;
    r[FK_R_B].p = (uintptr_t)j->b;
    r[FK_R_SA].p = (uintptr_t)j->scale_a;
    r[FK_R_SB].p = (uintptr_t)j->scale_b;
    r[FK_R_C].p = (uintptr_t)j->c;
    r[FK_R_BIAS].p = (uintptr_t)j->bias;
    r[FK_R_D].p = (uintptr_t)j->d;
    r[FK_R_SD].p = (uintptr_t)(j->scale_d_out ? j->scale_d_out : (const void *)j->scale_d_in);
    r[FK_R_AMAX].p = (uintptr_t)j->amax_d;
    if (j->c && j->c == j->d && j->c_type == j->d_type && j->ldc == j->ldd)
        r[FK_R_C].p = 0; /* D is C: allowed */
    return fk_check_overlap(ctx, FN, r, FK_R_N);
}

/* FP8KIT_ACT_SWIGLU's own rules (docs/spec.md 3): N even (D is M x N/2) and
 * no C (it would be the M x N pre-activation; no caller needs it yet). */
static fp8kit_status fk_check_swiglu(const fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_gemm_args *a,
                                     int64_t n)
{
    if (d->act != FP8KIT_ACT_SWIGLU)
        return FP8KIT_OK;
    if (n % 2)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE,
                       FN ": act=swiglu needs an even N (B's rows are [gate; up], D is M x N/2; N = %lld)",
                       (long long)n);
    if (a->beta != 0.0f)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED,
                       FN ": act=swiglu with beta != 0 is not supported (C would be the M x N pre-activation)");
    return FP8KIT_OK;
}

/* overlap: apply the no-overlap rule (not for a size query, whose pointers
 * need not be real buffers) */
static fp8kit_status fk_build_gemm_job(fp8kit_ctx *ctx, const fp8kit_gemm_desc *d, const fp8kit_gemm_args *a,
                                       fk_gemm_job *j, fk_region *rg, int overlap)
{
    if (!ctx)
        return fk_fail(NULL, FP8KIT_ERR_NULL_POINTER, FN ": ctx is NULL");
    if (!d || !a)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, FN ": %s is NULL", !d ? "desc" : "args");
    fp8kit_status st = fk_check_gemm_desc(ctx, FN, d);
    if (st)
        return st;
    memset(j, 0, sizeof *j);
    j->desc = *d;
    if ((st = fk_check_mat2(ctx, "a", &a->a, -1, -1, &j->lda)) || (st = fk_check_mat2(ctx, "b", &a->b, -1, -1, &j->ldb)))
        return st;
    if (!fk_is_fp8(a->a.dtype) || !fk_is_fp8(a->b.dtype))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": A and B must be e4m3 or e5m2 (got %s and %s)",
                       fp8kit_dtype_name(a->a.dtype), fp8kit_dtype_name(a->b.dtype));
    j->m = a->a.shape[0];
    j->k = a->a.shape[1];
    j->n = a->b.shape[0];
    if (a->b.shape[1] != j->k)
        return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": A is M x K = %lld x %lld but B is N x K = %lld x %lld",
                       (long long)j->m, (long long)j->k, (long long)j->n, (long long)a->b.shape[1]);
    {
        fk_scale_geom g;
        const char *what;
        if (fk_op_geom(d, 0, j->m, j->k, &g, &what) == FK_GEO_ERR_SHAPE) /* mx: K % 32 */
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": mx scaling needs K %% 32 == 0 (K = %lld)", (long long)j->k);
    }
    j->a_type = a->a.dtype;
    j->b_type = a->b.dtype;
    int64_t ldb_scale; /* B's block-scale row stride is always ceil(K/128) */
    if ((st = fk_check_op_scale(ctx, d, 1, &a->scale_a, j->m, j->k, &j->scale_a_ld)) ||
        (st = fk_check_op_scale(ctx, d, 0, &a->scale_b, j->n, j->k, &ldb_scale)))
        return st;
    (void)ldb_scale;
    j->alpha = a->alpha;
    j->beta = a->beta;
    if ((st = fk_check_swiglu(ctx, d, a, j->n)))
        return st;
    const int64_t dn = fk_job_d_cols(j); /* D's columns */

    /* D and output quantization */
    if ((st = fk_check_mat2(ctx, "d", &a->d, j->m, dn, &j->ldd)))
        return st;
    j->d_type = a->d.dtype;
    if (!fk_is_hp(j->d_type) && !fk_is_fp8(j->d_type))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": d->dtype %s is not an output type", fp8kit_dtype_name(j->d_type));
    if (d->out_quant != FP8KIT_OUTQ_NONE && !fk_is_fp8(j->d_type))
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": output quantization needs an e4m3/e5m2 D (d is %s)",
                       fp8kit_dtype_name(j->d_type));
    if (d->out_quant != FP8KIT_OUTQ_NONE) { /* scale_d: SCALED's input scale, MX / BLOCK1X128's output scales */
        fk_scale_geom g;
        const char *what;
        if (fk_op_geom(d, 2, j->m, dn, &g, &what) == FK_GEO_ERR_SHAPE)
            return fk_fail(ctx, FP8KIT_ERR_INVALID_SHAPE, FN ": OUTQ_MX needs %s %% 32 == 0 (%s = %lld)",
                           dn == j->n ? "N" : "D's N/2 columns (act=swiglu)", dn == j->n ? "N" : "N/2", (long long)dn);
        if ((st = fk_check_vec(ctx, "scale_d", &a->scale_d, g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32, g.count, what)))
            return st;
    }
    if (d->out_quant != FP8KIT_OUTQ_SCALED && a->amax_d)
        return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": amax_d is only written with OUTQ_SCALED");
    if ((uintptr_t)a->amax_d % sizeof(float))
        return fk_fail(ctx, FP8KIT_ERR_MISALIGNED, FN ": amax_d (%p) is not aligned to its 4-byte f32 element",
                       (void *)a->amax_d);

    /* C (read only when beta != 0) and bias */
    if (a->beta != 0.0f) {
        if ((st = fk_check_mat2(ctx, "c", &a->c, j->m, j->n, &j->ldc)))
            return st;
        if (!fk_is_hp(a->c.dtype))
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": c->dtype must be f32, f16 or bf16 (is %s)",
                           fp8kit_dtype_name(a->c.dtype));
        j->c_type = a->c.dtype;
    }
    if (d->bias != FP8KIT_BIAS_NONE) {
        int64_t len = d->bias == FP8KIT_BIAS_COL ? j->n : j->m;
        if ((st = fk_check_tensor(ctx, FN, "bias", &a->bias, 1)))
            return st;
        if (!fk_is_hp(a->bias.dtype))
            return fk_fail(ctx, FP8KIT_ERR_UNSUPPORTED, FN ": bias->dtype must be f32, f16 or bf16 (is %s)",
                           fp8kit_dtype_name(a->bias.dtype));
        if ((st = fk_check_vec(ctx, "bias", &a->bias, a->bias.dtype, len,
                               d->bias == FP8KIT_BIAS_COL ? "a column bias (length N)" : "a row bias (length M)")))
            return st;
        j->bias_type = a->bias.dtype;
    }
    j->workspace_bytes = a->workspace_bytes;
    fk_job_pointers(j, a);
    fk_region own[FK_R_N];
    if (!rg)
        rg = own;
    fk_gemm_regions(d, a, rg);
    return overlap ? fk_gemm_overlaps(ctx, j, rg) : FP8KIT_OK;
}

/* Plan key: everything a backend may specialise on, never the data. The one
 * key of a GEMM plan: the plan cache hashes it (fk_gemm_plan_of) and the
 * autotune file stores it as text (fk_gemm_key_text). */
typedef struct fk_gemm_key {
    int32_t backend, scale_a, scale_b, layout, bias, act, out_quant, out_hp, out_rounding, out_pow2, fast_accum;
    int32_t a_type, b_type, c_type, bias_type, d_type, has_c, has_amax, align;
    int64_t m, n, k, lda, ldb, ldc, ldd, tuning;
} fk_gemm_key;

/* (internal.h) The alignment bits of a job's pointers that plans depend on, one bit
 * each: 16 bytes for A, B, C and D (TMA), 4 bytes for the bias (the
 * TMA-store path fetches it in 4 bytes) and, with block scales, 16 bytes
 * for both scale pointers (the staged-scale variants load them by TMA and
 * bulk copies). */
unsigned fk_job_align_bits(const fk_gemm_job *j)
{
    const int blk = j->desc.scale_a == FP8KIT_SCALE_BLOCK;
    return (((uintptr_t)j->a & 15) == 0) | ((((uintptr_t)j->b & 15) == 0) << 1) |
           ((((uintptr_t)j->c & 15) == 0) << 2) | ((((uintptr_t)j->d & 15) == 0) << 3) |
           ((((uintptr_t)j->bias & 3) == 0) << 4) | ((blk && ((uintptr_t)j->scale_a & 15) == 0) << 5) |
           ((blk && ((uintptr_t)j->scale_b & 15) == 0) << 6);
}

static void fk_gemm_key_of(const fp8kit_ctx *ctx, const fk_gemm_job *j, fk_gemm_key *key)
{
    memset(key, 0, sizeof *key);
    key->backend = ctx->backend;
    key->tuning = (int64_t)ctx->tuning_key;
    key->scale_a = j->desc.scale_a; key->scale_b = j->desc.scale_b; key->layout = j->desc.scale_layout;
    key->bias = j->desc.bias; key->act = j->desc.act; key->out_quant = j->desc.out_quant;
    key->out_hp = j->desc.out_hp; key->out_rounding = j->desc.out_rounding; key->out_pow2 = j->desc.out_pow2 != 0;
    key->fast_accum = j->desc.fast_accum != 0;
    key->a_type = j->a_type; key->b_type = j->b_type; key->c_type = j->c ? (int32_t)j->c_type : -1;
    key->bias_type = j->bias ? (int32_t)j->bias_type : -1; key->d_type = j->d_type;
    key->has_c = j->c != NULL; key->has_amax = j->amax_d != NULL;
    key->align = (int32_t)fk_job_align_bits(j);
    key->m = j->m; key->n = j->n; key->k = j->k;
    key->lda = j->lda; key->ldb = j->ldb; key->ldc = j->ldc; key->ldd = j->ldd;
}

void fk_gemm_key_text(const fp8kit_ctx *ctx, const fk_gemm_job *j, const char *prefix, char *out, size_t n)
{
    fk_gemm_key k;
    fk_gemm_key_of(ctx, j, &k);
    snprintf(out, n,
             "%s|m%lld,n%lld,k%lld,lda%lld,ldb%lld,ldc%lld,ldd%lld|t%d,%d,%d,%d,%d|s%d,%d,%d|e%d,%d,%d,%d,%d,%d|"
             "f%d,c%d,x%d,al%d,b%d,tu%016llx",
             prefix, (long long)k.m, (long long)k.n, (long long)k.k, (long long)k.lda, (long long)k.ldb,
             (long long)k.ldc, (long long)k.ldd, k.a_type, k.b_type, k.d_type, k.c_type, k.bias_type, k.scale_a,
             k.scale_b, k.layout, k.bias, k.act, k.out_quant, k.out_hp, k.out_rounding, k.out_pow2, k.has_amax,
             k.fast_accum, k.has_c, k.align, k.backend, (unsigned long long)k.tuning);
    for (char *c = out; *c; c++)
        if (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n')
            *c = '_';
}

const fk_plan *fk_gemm_plan_of(fp8kit_ctx *ctx, const fk_gemm_job *j, fp8kit_status *st)
{
    fk_gemm_key key;
    fk_gemm_key_of(ctx, j, &key);
    return fk_plan_get(ctx, &key, sizeof key, j, ctx->ops->gemm_plan, st);
}

fp8kit_status fp8kit_gemm_workspace_size(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args,
                                         size_t *bytes)
{
    if (!bytes)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_gemm_workspace_size: bytes is NULL");
    fk_gemm_job j;
    fp8kit_status st = fk_build_gemm_job(ctx, desc, args, &j, NULL, 0);
    if (st)
        return st;
    size_t b = 0;
    if (ctx->ops->gemm_workspace_size && (st = ctx->ops->gemm_workspace_size(ctx, &j, &b)))
        return st;
    *bytes = b;
    return FP8KIT_OK;
}

/* Each thread's last fully checked call (validation, plan, workspace): a
 * call on the same context whose descriptor and operand metadata - every
 * byte of args except the data pointers - are equal, whose required pointers
 * are non-NULL and whose pointers have the same alignment bits (all the plan
 * key reads from pointers) passes exactly the checks that call passed and
 * maps to the same plan, so only its pointers go into the saved job. */
typedef struct fk_gemm_memo {
    uint64_t cache_id; /* ctx->plans.id (never reused); 0 = empty */
    const fp8kit_ctx *ctx;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args meta; /* args with every pointer zeroed */
    unsigned need;         /* FK_P_* bits of the pointers that must be non-NULL (and FK_P_AMAX) */
    unsigned amax;         /* FK_P_AMAX when that call's amax_d was non-NULL: its checks read that */
    unsigned ptr_bits;     /* alignment and has-amax bits of the job's pointers */
    fk_gemm_job job;
    fk_region regions[FK_R_N]; /* the operands' byte sizes (overlap rule) */
    const fk_plan *plan;
} fk_gemm_memo;
static __thread fk_gemm_memo fk_gmemo;

enum { FK_P_A = 1, FK_P_B = 2, FK_P_SA = 4, FK_P_SB = 8, FK_P_C = 16, FK_P_BIAS = 32, FK_P_D = 64,
       FK_P_SD = 128, FK_P_WS = 256, FK_P_AMAX = 512 };

static void fk_args_meta(const fp8kit_gemm_args *a, fp8kit_gemm_args *m)
{
    *m = *a;
    m->a.data = m->b.data = m->scale_a.data = m->scale_b.data = NULL;
    m->c.data = m->bias.data = m->d.data = m->scale_d.data = NULL;
    m->amax_d = NULL;
    m->workspace = NULL;
}

static unsigned fk_nonnull(const fp8kit_gemm_args *a)
{
    return (a->a.data ? FK_P_A : 0) | (a->b.data ? FK_P_B : 0) | (a->scale_a.data ? FK_P_SA : 0) |
           (a->scale_b.data ? FK_P_SB : 0) | (a->c.data ? FK_P_C : 0) | (a->bias.data ? FK_P_BIAS : 0) |
           (a->d.data ? FK_P_D : 0) | (a->scale_d.data ? FK_P_SD : 0) | (a->workspace ? FK_P_WS : 0) |
           (a->amax_d ? FK_P_AMAX : 0);
}

/* 1 when a pointer of the job is not aligned to its element size (the
 * checks refuse that: FP8KIT_ERR_MISALIGNED). */
static unsigned fk_job_misaligned(const fk_gemm_job *j)
{
    const uintptr_t sa = j->desc.scale_a == FP8KIT_SCALE_MX ? 1 : 4, sb = j->desc.scale_b == FP8KIT_SCALE_MX ? 1 : 4;
    const uintptr_t sd = j->desc.out_quant == FP8KIT_OUTQ_MX ? 1 : 4;
    return ((uintptr_t)j->scale_a % sa | (uintptr_t)j->scale_b % sb | (uintptr_t)j->c % fk_dtype_bytes(j->c_type) |
            (uintptr_t)j->bias % fk_dtype_bytes(j->bias_type) | (uintptr_t)j->d % fk_dtype_bytes(j->d_type) |
            (uintptr_t)j->scale_d_in % 4 | (uintptr_t)j->scale_d_out % sd | (uintptr_t)j->amax_d % 4) != 0;
}

/* What the plan key and the checks read from a job's pointers. */
static unsigned fk_ptr_bits(const fk_gemm_job *j)
{
    return fk_job_align_bits(j) | ((j->amax_d != NULL) << 7) | (fk_job_misaligned(j) << 8);
}

static fp8kit_status fk_gemm_run(fp8kit_ctx *ctx, fk_gemm_job *j, const fk_plan *plan, void *stream)
{
    return ctx->ops->gemm_run(ctx, j, plan, stream);
}

fp8kit_status fp8kit_gemm(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, void *stream)
{
    fk_gemm_memo *mo = &fk_gmemo;
    if (ctx && desc && args && mo->cache_id == ctx->plans.id && mo->ctx == ctx &&
        (fk_nonnull(args) & mo->need) == (mo->need & ~FK_P_AMAX) + mo->amax &&
        memcmp(desc, &mo->desc, sizeof *desc) == 0) {
        fp8kit_gemm_args m;
        fk_args_meta(args, &m);
        if (memcmp(&m, &mo->meta, sizeof m) == 0) {
            fk_gemm_job j = mo->job;
            fk_job_pointers(&j, args);
            if (fk_ptr_bits(&j) == mo->ptr_bits) {
                fp8kit_status st = fk_gemm_overlaps(ctx, &j, mo->regions);
                return st ? st : fk_gemm_run(ctx, &j, mo->plan, stream);
            }
        }
    }
    fk_gemm_job j;
    fk_region rg[FK_R_N];
    fp8kit_status st = fk_build_gemm_job(ctx, desc, args, &j, rg, 1);
    if (st)
        return st;
    const fk_plan *plan = fk_gemm_plan_of(ctx, &j, &st);
    if (!plan)
        return st;
    size_t need = 0;
    if (ctx->ops->gemm_workspace_need && (st = ctx->ops->gemm_workspace_need(ctx, &j, &need)))
        return st;
    if (need > j.workspace_bytes || (need && !j.workspace))
        return fk_fail(ctx, FP8KIT_ERR_WORKSPACE_TOO_SMALL, FN ": this call needs %zu bytes of workspace, got %zu",
                       need, j.workspace ? j.workspace_bytes : (size_t)0);
    /* remember this checked call (the pointers its checks required) */
    mo->cache_id = 0;
    mo->ctx = ctx;
    mo->desc = *desc;
    fk_args_meta(args, &mo->meta);
    mo->need = FK_P_A | FK_P_B | FK_P_D | (desc->scale_a ? FK_P_SA : 0) | (desc->scale_b ? FK_P_SB : 0) |
               (args->beta != 0.0f ? FK_P_C : 0) | (desc->bias != FP8KIT_BIAS_NONE ? FK_P_BIAS : 0) |
               (desc->out_quant != FP8KIT_OUTQ_NONE ? FK_P_SD : 0) | (need ? FK_P_WS : 0) | FK_P_AMAX;
    mo->amax = args->amax_d ? FK_P_AMAX : 0;
    mo->ptr_bits = fk_ptr_bits(&j);
    mo->job = j;
    memcpy(mo->regions, rg, sizeof rg);
    mo->plan = plan;
    mo->cache_id = ctx->plans.id;
    return fk_gemm_run(ctx, &j, plan, stream);
}

/* fp8kit_gemm_supported / fp8kit_gemm_describe: the call checked and
 * planned as fp8kit_gemm would (the plan is cached for it), nothing run;
 * as for a workspace-size query, the pointers may be placeholders (the
 * no-overlap rule and the workspace are not checked). */
static fp8kit_status fk_gemm_plan_call(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args,
                                       const fk_plan **plan)
{
    fk_gemm_job j;
    fp8kit_status st = fk_build_gemm_job(ctx, desc, args, &j, NULL, 0);
    if (st)
        return st;
    if (ctx->ops->supports && (st = ctx->ops->supports(ctx, FK_OP_GEMM, &j)))
        return st;
    return (*plan = fk_gemm_plan_of(ctx, &j, &st)) ? FP8KIT_OK : st;
}

fp8kit_status fp8kit_gemm_supported(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args)
{
    const fk_plan *plan = NULL;
    return fk_gemm_plan_call(ctx, desc, args, &plan);
}

fp8kit_status fp8kit_gemm_describe(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args,
                                   char *buf, size_t n)
{
    if (!buf || n == 0)
        return fk_fail(ctx, FP8KIT_ERR_NULL_POINTER, "fp8kit_gemm_describe: buf is NULL or empty");
    buf[0] = 0;
    const fk_plan *plan = NULL;
    fp8kit_status st = fk_gemm_plan_call(ctx, desc, args, &plan);
    if (st)
        return st;
    fk_describe_plan(ctx, plan, buf, n);
    return FP8KIT_OK;
}

/* (internal.h) */
void fk_describe_plan(const fp8kit_ctx *ctx, const fk_plan *plan, char *buf, size_t n)
{
    if (ctx->ops->plan_describe)
        ctx->ops->plan_describe(plan, buf, n);
    else
        snprintf(buf, n, "%s", ctx->ops->name);
}

fp8kit_status fk_gemm_check(fp8kit_ctx *ctx, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, int overlap)
{
    fk_gemm_job j;
    return fk_build_gemm_job(ctx, desc, args, &j, NULL, overlap);
}

int64_t fp8kit_plan_cache_size(const fp8kit_ctx *ctx)
{
    if (!ctx)
        return 0;
    fk_plan_cache *pc = (fk_plan_cache *)&ctx->plans;
    pthread_mutex_lock(&pc->lock);
    int64_t n = pc->count;
    pthread_mutex_unlock(&pc->lock);
    return n;
}
