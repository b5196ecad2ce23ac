/* gemm_ref.c - an independent fp64 oracle of fp8kit's scaled GEMM (docs/spec.md section 3), not
 * part of libfp8kit: operands dequantized exactly in fp64 (codes through src/format/codec.h,
 * scales found through src/format/geometry.h's fk_gemm_scale_geom, the one scale-geometry
 * source), the sum over K in fp64, and alpha, beta * C, bias and the activation in fp64 with
 * its own formulas (never src/format/epilogue_math.h's fp32 ones). Used by the CLI's check and by
 * the CPU tests; see gemm_ref.h. */
#include "ref/gemm_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/codec.h"
#include "format/geometry.h"

/* ------------------------------------------------------------- elements */
double fk_ref_decode(const void *data, fp8kit_dtype t, int64_t i)
{
    switch (t) {
    case FP8KIT_F32: return ((const float *)data)[i];
    case FP8KIT_F16: return fk_f16_to_f32(((const uint16_t *)data)[i]);
    case FP8KIT_BF16: return fk_bf16_to_f32(((const uint16_t *)data)[i]);
    case FP8KIT_E4M3: return fk_e4m3_to_f32(((const uint8_t *)data)[i]);
    case FP8KIT_E5M2: return fk_e5m2_to_f32(((const uint8_t *)data)[i]);
    case FP8KIT_E8M0: return fk_e8m0_to_f32(((const uint8_t *)data)[i]);
    default: return NAN;
    }
}

double fk_ref_round(double v, fp8kit_dtype t)
{
    const float f = (float)v;
    switch (t) {
    case FP8KIT_F32: return f;
    case FP8KIT_F16: return fk_f16_to_f32(fk_f32_to_f16(f));
    case FP8KIT_BF16: return fk_bf16_to_f32(fk_f32_to_bf16(f));
    case FP8KIT_E4M3: return fk_e4m3_to_f32(fk_f32_to_e4m3(f));
    case FP8KIT_E5M2: return fk_e5m2_to_f32(fk_f32_to_e5m2(f));
    default: return NAN;
    }
}

/* docs/spec.md 3, step 4. An activation this oracle does not know gives NaN, so that a new
 * fp8kit_activation without its formula here fails every check instead of passing as identity. */
double fk_ref_act(double y, fp8kit_activation act)
{
    switch (act) {
    case FP8KIT_ACT_NONE: return y;
    case FP8KIT_ACT_RELU: return y < 0.0 ? 0.0 : y;
    case FP8KIT_ACT_GELU_TANH: return 0.5 * y * (1.0 + tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
    case FP8KIT_ACT_GELU_ERF: return 0.5 * y * (1.0 + erf(y * 0.70710678118654752));
    case FP8KIT_ACT_SILU: return y / (1.0 + exp(-y));
    case FP8KIT_ACT_SWIGLU: return NAN; /* a pair, not elementwise: fk_ref_swiglu */
    }
    return NAN;
}

/* docs/spec.md 3's FP8KIT_ACT_SWIGLU pair in fp64: silu(gate) * up, gate and up being the pre-activation
 * values y[m, j] and y[m, j + N/2]. */
double fk_ref_swiglu(double gate, double up)
{
    return gate / (1.0 + exp(-gate)) * up;
}

/* ------------------------------------------------------------- tensors */
static int is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }
static int is_hp(fp8kit_dtype t) { return t == FP8KIT_F32 || t == FP8KIT_F16 || t == FP8KIT_BF16; }

static int64_t numel(const fp8kit_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static int contiguous(const fp8kit_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i])
            return 0;
    return 1;
}

/* Stride (elements) of dim d; all strides 0 means contiguous row-major. */
static int64_t stride_of(const fp8kit_tensor *t, int d)
{
    if (!contiguous(t))
        return t->strides[d];
    int64_t s = 1;
    for (int i = d + 1; i < t->ndim; i++)
        s *= t->shape[i];
    return s;
}

static int64_t dtype_bytes(fp8kit_dtype t) { return t == FP8KIT_F32 ? 4 : is_fp8(t) || t == FP8KIT_E8M0 ? 1 : 2; }

/* ------------------------------------------------------------- operands */
typedef struct ref_op {
    const uint8_t *q;
    int64_t rows, k, ld;
    int e5m2;
    int mode;          /* fp8kit_scale_mode */
    fk_scale_geom g;   /* where its scales are (mode != NONE) */
    const void *s;     /* f32 or e8m0 scales */
} ref_op;

static int op_init(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, int is_b, ref_op *op)
{
    const fp8kit_tensor *t = is_b ? &args->b : &args->a, *s = is_b ? &args->scale_b : &args->scale_a;
    memset(op, 0, sizeof *op);
    if (t->ndim != 2 || !is_fp8(t->dtype) || !t->data || t->shape[0] < 0 || t->shape[1] < 0)
        return FK_REF_ERR_ARG;
    op->q = (const uint8_t *)t->data;
    op->rows = t->shape[0];
    op->k = t->shape[1];
    op->ld = stride_of(t, 0);
    op->e5m2 = t->dtype == FP8KIT_E5M2;
    op->mode = is_b ? (int)desc->scale_b : (int)desc->scale_a;
    if (op->mode == FP8KIT_SCALE_NONE)
        return FK_REF_OK;
    if (fk_gemm_scale_geom(op->mode, (int)desc->scale_layout, is_b, op->rows, op->k, &op->g) != FK_GEO_OK)
        return FK_REF_ERR_ARG;
    if (!s->data || s->dtype != (op->g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32) || numel(s) < op->g.count)
        return FK_REF_ERR_ARG;
    op->s = s->data;
    return FK_REF_OK;
}

/* The dequantization multiplier of element (r, kk). */
static double op_scale(const ref_op *op, int64_t r, int64_t kk)
{
    if (op->mode == FP8KIT_SCALE_NONE)
        return 1.0;
    const int64_t off = fk_scale_off_rk(&op->g, r, kk / op->g.gw);
    return op->g.e8m0 ? (double)fk_e8m0_to_f32(((const uint8_t *)op->s)[off]) : (double)((const float *)op->s)[off];
}

/* deq(op)[r, :] in fp64: exact (a 4-bit significand times an fp32 scale). */
static void op_deq_row(const ref_op *op, int64_t r, double *out)
{
    const uint8_t *q = op->q + r * op->ld;
    for (int64_t kk = 0; kk < op->k; kk++)
        out[kk] = (double)fk_fp8_to_f32(q[kk], op->e5m2) * op_scale(op, r, kk);
}

/* sum a[i] b[i] in four interleaved fp64 partial sums. */
static double dot(const double *a, const double *b, int64_t k)
{
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int j = 0; j < 4; j++)
            s[j] += a[i + j] * b[i + j];
    for (; i < k; i++)
        s[0] += a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* dot's sum and sum |a[i] b[i]|. */
static void dot_abs(const double *a, const double *b, int64_t k, double *sum, double *sum_abs)
{
    double s[4] = {0, 0, 0, 0}, t[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int j = 0; j < 4; j++) {
            const double p = a[i + j] * b[i + j];
            s[j] += p;
            t[j] += fabs(p);
        }
    for (; i < k; i++) {
        const double p = a[i] * b[i];
        s[0] += p;
        t[0] += fabs(p);
    }
    *sum = (s[0] + s[1]) + (s[2] + s[3]);
    *sum_abs = (t[0] + t[1]) + (t[2] + t[3]);
}

/* ------------------------------------------------------------------ GEMM */
int fk_ref_gemm_acc(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, const int64_t *rows,
                    int64_t nrows, const int64_t *cols, int64_t ncols, double *acc, double *acc_abs)
{
    ref_op A, B;
    if (!desc || !args || !acc || op_init(desc, args, 0, &A) || op_init(desc, args, 1, &B) || A.k != B.k)
        return FK_REF_ERR_ARG;
    if (!rows)
        nrows = A.rows;
    if (!cols)
        ncols = B.rows;
    if (nrows < 0 || ncols < 0)
        return FK_REF_ERR_ARG;
    for (int64_t i = 0; rows && i < nrows; i++)
        if (rows[i] < 0 || rows[i] >= A.rows)
            return FK_REF_ERR_ARG;
    for (int64_t j = 0; cols && j < ncols; j++)
        if (cols[j] < 0 || cols[j] >= B.rows)
            return FK_REF_ERR_ARG;
    const int64_t K = A.k;
    if ((K && (nrows > INT64_MAX / 8 / K || ncols > INT64_MAX / 8 / K)))
        return FK_REF_ERR_NOMEM;
    double *da = (double *)malloc(sizeof(double) * (size_t)(nrows * K + 1));
    double *db = (double *)malloc(sizeof(double) * (size_t)(ncols * K + 1));
    if (!da || !db) {
        free(da);
        free(db);
        return FK_REF_ERR_NOMEM;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nrows; i++)
        op_deq_row(&A, rows ? rows[i] : i, da + i * K);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < ncols; j++)
        op_deq_row(&B, cols ? cols[j] : j, db + j * K);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t j = 0; j < ncols; j++) {
            if (acc_abs)
                dot_abs(da + i * K, db + j * K, K, &acc[i * ncols + j], &acc_abs[i * ncols + j]);
            else
                acc[i * ncols + j] = dot(da + i * K, db + j * K, K);
        }
    free(da);
    free(db);
    return FK_REF_OK;
}

/* The epilogue's inputs the oracle reads: C when beta != 0, the bias of the descriptor's mode. */
static int epilogue_ok(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args)
{
    if ((unsigned)desc->act >= FP8KIT_ACT_COUNT || (unsigned)desc->bias > FP8KIT_BIAS_ROW)
        return 0;
    if (args->beta != 0.0f && (!args->c.data || args->c.ndim != 2 || !is_hp(args->c.dtype)))
        return 0;
    if (desc->bias != FP8KIT_BIAS_NONE && (!args->bias.data || !is_hp(args->bias.dtype)))
        return 0;
    if (desc->act == FP8KIT_ACT_SWIGLU && (args->beta != 0.0f || args->b.ndim != 2 || args->b.shape[0] % 2))
        return 0; /* swiglu: no C, N even */
    return 1;
}

double fk_ref_epilogue(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, int64_t m, int64_t n,
                       double acc, fk_ref_parts *parts)
{
    double c = 0.0, bias = 0.0;
    if (args->beta != 0.0f)
        c = (double)args->beta * fk_ref_decode(args->c.data, args->c.dtype, m * stride_of(&args->c, 0) + n);
    if (desc->bias != FP8KIT_BIAS_NONE) {
        const int64_t i = desc->bias == FP8KIT_BIAS_ROW ? m : n;
        bias = fk_ref_decode(args->bias.data, args->bias.dtype, i * (args->bias.ndim ? stride_of(&args->bias, args->bias.ndim - 1) : 1));
    }
    const double pre = (double)args->alpha * acc + c + bias;
    if (parts) {
        parts->c = c;
        parts->bias = bias;
        parts->pre = pre;
    }
    return fk_ref_act(pre, desc->act);
}

/* fk_ref_gemm for FP8KIT_ACT_SWIGLU: the pre-activation y of all N columns (act none), then
 * out[i * N/2 + j] = fk_ref_swiglu(y[i, j], y[i, j + N/2]). */
static int ref_gemm_swiglu(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, const int64_t *rows,
                           int64_t nrows, double *out)
{
    const int64_t N = args->b.shape[0], H = N / 2;
    if (!rows)
        nrows = args->a.shape[0];
    if (nrows < 0 || (N && nrows > INT64_MAX / 8 / N))
        return FK_REF_ERR_ARG;
    double *y = (double *)malloc(sizeof(double) * (size_t)(nrows * N + 1));
    if (!y)
        return FK_REF_ERR_NOMEM;
    int st = fk_ref_gemm_acc(desc, args, rows, nrows, NULL, N, y, NULL);
    if (st) {
        free(y);
        return st;
    }
    fp8kit_gemm_desc lin = *desc;
    lin.act = FP8KIT_ACT_NONE;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nrows; i++) {
        const int64_t m = rows ? rows[i] : i;
        for (int64_t n = 0; n < H; n++) {
            const double gate = fk_ref_epilogue(&lin, args, m, n, y[i * N + n], NULL);
            const double up = fk_ref_epilogue(&lin, args, m, n + H, y[i * N + n + H], NULL);
            out[i * H + n] = fk_ref_swiglu(gate, up);
        }
    }
    free(y);
    return FK_REF_OK;
}

int fk_ref_gemm(const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *args, const int64_t *rows,
                int64_t nrows, double *out)
{
    if (!desc || !args || !out || !epilogue_ok(desc, args) || args->b.ndim != 2)
        return FK_REF_ERR_ARG;
    const int64_t N = args->b.shape[0];
    if (desc->act == FP8KIT_ACT_SWIGLU)
        return ref_gemm_swiglu(desc, args, rows, nrows, out);
    int st = fk_ref_gemm_acc(desc, args, rows, nrows, NULL, N, out, NULL);
    if (st)
        return st;
    if (!rows)
        nrows = args->a.shape[0];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < nrows; i++)
        for (int64_t n = 0; n < N; n++)
            out[i * N + n] = fk_ref_epilogue(desc, args, rows ? rows[i] : i, n, out[i * N + n], NULL);
    return FK_REF_OK;
}

/* A view of `count` elements of t starting `first` elements in, as a 1-D contiguous vector
 * (for per-expert scales and biases), or as the scalar itself when count is 1. */
static fp8kit_tensor sub_vec(const fp8kit_tensor *t, int64_t first, int64_t count)
{
    fp8kit_tensor v;
    memset(&v, 0, sizeof v);
    v.data = (char *)t->data + first * dtype_bytes(t->dtype);
    v.dtype = t->dtype;
    v.ndim = 1;
    v.shape[0] = count;
    v.strides[0] = 1;
    return v;
}

int fk_ref_grouped_gemm(const fp8kit_gemm_desc *desc, const fp8kit_grouped_gemm_args *args, double *out)
{
    const int masked = args && args->layout == FP8KIT_GROUPED_MASKED, nd = masked ? 3 : 2;
    if (!desc || !args || !out || !args->offsets || args->a.ndim != nd || args->b.ndim != 3 || args->d.ndim != nd)
        return FK_REF_ERR_ARG;
    if (desc->scale_a == FP8KIT_SCALE_MX || desc->scale_b == FP8KIT_SCALE_MX || desc->bias == FP8KIT_BIAS_ROW ||
        (desc->scale_a == FP8KIT_SCALE_BLOCK && desc->scale_layout))
        return FK_REF_ERR_ARG; /* the grouped GEMM's subset (docs/spec.md 3) */
    const int64_t G = args->b.shape[0], N = args->b.shape[1], K = args->a.shape[nd - 1];
    const int64_t ND = desc->act == FP8KIT_ACT_SWIGLU ? N / 2 : N; /* D's columns (swiglu: N even, fk_ref_gemm) */
    const int64_t M = masked ? args->a.shape[1] : 0, T = masked ? G * M : args->a.shape[0];
    if (args->b.shape[2] != K || (masked && args->a.shape[0] != G))
        return FK_REF_ERR_ARG;
    for (int64_t g = 0, prev = 0; g < G; prev = args->offsets[g++])
        if (masked ? (args->offsets[g] < 0 || args->offsets[g] > M)
                   : (args->offsets[g] < prev || args->offsets[g] > T))
            return FK_REF_ERR_ARG;
    /* scale values per row of A (1x128 blocks: ceil(K / 128)) and per expert of B */
    fk_scale_geom gb, g1;
    if (fk_gemm_scale_geom(desc->scale_b, FK_GEO_PLAIN, 1, N, K, &gb) ||
        fk_gemm_scale_geom(desc->scale_a, FK_GEO_PLAIN, 0, 1, K, &g1))
        return FK_REF_ERR_ARG;
    const int64_t sa_row = g1.count; /* row: 1; block: ceil(K / 128) */
    const int64_t lda = stride_of(&args->a, nd - 2), sbe = stride_of(&args->b, 0), ldb = stride_of(&args->b, 1);
    for (int64_t g = 0; g < G; g++) {
        const int64_t r0 = masked ? g * M : (g ? args->offsets[g - 1] : 0);
        const int64_t r1 = masked ? r0 + args->offsets[g] : args->offsets[g];
        if (r1 == r0)
            continue;
        fp8kit_gemm_args ga;
        memset(&ga, 0, sizeof ga);
        ga.a.data = (uint8_t *)args->a.data + r0 * lda;
        ga.a.dtype = args->a.dtype;
        ga.a.ndim = 2;
        ga.a.shape[0] = r1 - r0, ga.a.shape[1] = K;
        ga.a.strides[0] = lda, ga.a.strides[1] = 1;
        ga.b.data = (uint8_t *)args->b.data + g * sbe;
        ga.b.dtype = args->b.dtype;
        ga.b.ndim = 2;
        ga.b.shape[0] = N, ga.b.shape[1] = K;
        ga.b.strides[0] = ldb, ga.b.strides[1] = 1;
        if (desc->scale_a == FP8KIT_SCALE_TENSOR)
            ga.scale_a = sub_vec(&args->scale_a, 0, 1);
        else if (desc->scale_a != FP8KIT_SCALE_NONE)
            ga.scale_a = sub_vec(&args->scale_a, r0 * sa_row, (r1 - r0) * sa_row);
        if (desc->scale_b != FP8KIT_SCALE_NONE)
            ga.scale_b = sub_vec(&args->scale_b, g * gb.count, gb.count);
        if (desc->bias == FP8KIT_BIAS_COL)
            ga.bias = sub_vec(&args->bias, g * (args->bias.ndim == 2 ? stride_of(&args->bias, 0) : N), N);
        ga.alpha = args->alpha;
        ga.beta = 0.0f;
        const int st = fk_ref_gemm(desc, &ga, NULL, r1 - r0, out + r0 * ND);
        if (st)
            return st;
    }
    return FK_REF_OK;
}

int fk_ref_k_grouped_gemm(const fp8kit_gemm_desc *desc, const fp8kit_k_grouped_gemm_args *args, double *out)
{
    if (!desc || !args || !out || !args->offsets || args->a.ndim != 2 || args->b.ndim != 2 || args->d.ndim != 3 ||
        !args->a.data || !args->b.data || !args->d.data || !is_fp8(args->a.dtype) || !is_fp8(args->b.dtype) ||
        !is_hp(args->d.dtype))
        return FK_REF_ERR_ARG;
    const int s128 = args->scales_1x128 != 0;
    if (desc->bias != FP8KIT_BIAS_NONE || desc->act != FP8KIT_ACT_NONE || desc->out_quant != FP8KIT_OUTQ_NONE ||
        (s128 && (desc->scale_a != FP8KIT_SCALE_NONE || desc->scale_b != FP8KIT_SCALE_NONE)) ||
        (unsigned)desc->scale_a > FP8KIT_SCALE_TENSOR || (unsigned)desc->scale_b > FP8KIT_SCALE_TENSOR)
        return FK_REF_ERR_ARG;
    const int64_t M = args->a.shape[0], K = args->a.shape[1], N = args->b.shape[0], G = args->d.shape[0];
    if (args->b.shape[1] != K || args->d.shape[1] != M || args->d.shape[2] != N || M < 1 || N < 1 || G < 1)
        return FK_REF_ERR_ARG;
    for (int64_t g = 0, prev = 0; g < G; prev = args->offsets[g++])
        if (args->offsets[g] < prev || args->offsets[g] > K || args->offsets[g] % 128)
            return FK_REF_ERR_ARG;
    const int64_t kb = (K + 127) / 128;
    const fp8kit_tensor *ta = &args->scale_a, *tb = &args->scale_b;
    if (s128 && (!ta->data || !tb->data || ta->dtype != FP8KIT_F32 || tb->dtype != FP8KIT_F32 ||
                 numel(ta) < M * kb || numel(tb) < N * kb))
        return FK_REF_ERR_ARG;
    if ((desc->scale_a == FP8KIT_SCALE_TENSOR && (!ta->data || ta->dtype != FP8KIT_F32)) ||
        (desc->scale_b == FP8KIT_SCALE_TENSOR && (!tb->data || tb->dtype != FP8KIT_F32)))
        return FK_REF_ERR_ARG;
    const double sa_t = desc->scale_a == FP8KIT_SCALE_TENSOR ? ((const float *)ta->data)[0] : 1.0;
    const double sb_t = desc->scale_b == FP8KIT_SCALE_TENSOR ? ((const float *)tb->data)[0] : 1.0;
    const int64_t lda = stride_of(&args->a, 0), ldb = stride_of(&args->b, 0);
    const int64_t sdg = stride_of(&args->d, 0), ldd = stride_of(&args->d, 1);
    const int e5a = args->a.dtype == FP8KIT_E5M2, e5b = args->b.dtype == FP8KIT_E5M2;
    double *da = (double *)malloc(sizeof(double) * (size_t)(M * K + 1));
    double *db = (double *)malloc(sizeof(double) * (size_t)(N * K + 1));
    if (!da || !db) {
        free(da);
        free(db);
        return FK_REF_ERR_NOMEM;
    }
    /* every operand element dequantized once (exact: a short significand times an fp32 scale) */
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++)
            da[m * K + k] = (double)fk_fp8_to_f32(((const uint8_t *)args->a.data)[m * lda + k], e5a) *
                            (s128 ? (double)((const float *)ta->data)[m * kb + k / 128] : sa_t);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            db[n * K + k] = (double)fk_fp8_to_f32(((const uint8_t *)args->b.data)[n * ldb + k], e5b) *
                            (s128 ? (double)((const float *)tb->data)[n * kb + k / 128] : sb_t);
    const double alpha = args->alpha, beta = args->beta;
    for (int64_t g = 0; g < G; g++) {
        const int64_t k0 = g ? args->offsets[g - 1] : 0, kl = args->offsets[g] - k0;
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double y = alpha * dot(da + m * K + k0, db + n * K + k0, kl);
                if (beta != 0.0)
                    y += beta * fk_ref_decode(args->d.data, args->d.dtype, g * sdg + m * ldd + n);
                out[(g * M + m) * N + n] = y;
            }
    }
    free(da);
    free(db);
    return FK_REF_OK;
}

/* ------------------------------------------------------------- tolerance */
double fk_ref_bound(fp8kit_dtype d, int64_t k)
{
    switch (d) {
    case FP8KIT_F32: return k > 16384 ? 1e-5 * sqrt((double)k / 16384.0) : 1e-5;
    case FP8KIT_BF16: return 4e-3;
    case FP8KIT_F16: return 1e-3;
    default: return 0.0;
    }
}

void fk_ref_norm_add(fk_ref_norm *s, double got, double ref)
{
    if (isnan(ref)) {
        s->nan_missing += !isnan(got);
        return;
    }
    if (isnan(got)) {
        s->nan_extra++;
        return;
    }
    s->err2 += (got - ref) * (got - ref);
    s->ref2 += ref * ref;
    s->count++;
}

double fk_ref_norm_rel(const fk_ref_norm *s)
{
    return s->ref2 > 0.0 ? sqrt(s->err2) / sqrt(s->ref2) : sqrt(s->err2);
}

int fk_ref_norm_ok(const fk_ref_norm *s, double bound)
{
    const double rel = fk_ref_norm_rel(s);
    return s->nan_extra == 0 && s->nan_missing == 0 && rel <= bound;
}
