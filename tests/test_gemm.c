/* test_gemm.c - tests of the scaled FP8 GEMM (docs/spec.md section 3) on the CPU
 * backend through the public API (fp8kit_gemm), against the fp64 oracle of
 * src/ref/gemm_ref.h (operands dequantized exactly in fp64, the epilogue in
 * fp64): each output element must lie within a rigorous per-element error
 * bound (fp32 accumulation with promotion every K-block, sized by the oracle's
 * sum of |terms|) plus the rounding of the output type; the Frobenius error
 * must meet docs/spec.md's bounds (f32 1e-5, bf16 4e-3, f16 1e-3). The test
 * data are laid out by the test's own formulas (the blocked layout from the
 * docs/spec.md formula, mn_major with NaN padding), so the oracle's
 * geometry.h indexing is checked too. Fused output quantization is checked
 * against the oracle's y: scales within the range the tolerance allows,
 * every code inside the interval its y allows, and decode(q) * scale
 * consistent with y. Also: odd shapes, M = 1, N = 1, K = 16384, K split into
 * chunks, strided operands with poisoned padding, extreme block scales
 * (double promotion path), NaN propagation, every activation, thread-count
 * independence and plan reuse. Build: part of CTest (tests/test_*.c). */
#include <float.h>
#include <math.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

#define U32 (1.0 / 16777216.0) /* unit roundoff of fp32 */

/* --------------------------------------------------------- test data */
/* docs/spec.md 2.3's blocked ("128x4") layout: where scale (r, c) of a grid with cols columns is stored */
static int64_t blocked_off(int64_t r, int64_t c, int64_t cols)
{
    int64_t cp = (cols + 3) / 4 * 4;
    return ((r / 128) * (cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
/* f32 -> hp storage (shared RNE codecs) */
static void put_hp(void *p, fp8kit_dtype t, int64_t i, float v)
{
    if (t == FP8KIT_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == FP8KIT_BF16 ? fk_f32_to_bf16(v) : fk_f32_to_f16(v);
}
static size_t dsize(fp8kit_dtype t) { return t == FP8KIT_F32 ? 4 : (t == FP8KIT_E4M3 || t == FP8KIT_E5M2) ? 1 : 2; }
static int is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }

/* ------------------------------------------------------------------ operand */
typedef struct opnd {
    int is_a;
    int64_t rows, k, ld;
    fp8kit_dtype t;
    uint8_t *q;
    fp8kit_scale_mode mode;
    fp8kit_scale_layout layout;
    float *sf;    /* f32 scales (tensor, row, block) */
    uint8_t *se;  /* e8m0 scales (mx) */
    int64_t s_ld; /* block A: row stride of the stored layout */
    fp8kit_tensor st;
} opnd;

/* special: 0 normal, 1 tiny values with huge block scales (A ~1e30, B ~1e8:
 * their fp32 product often overflows although every accumulator is finite) */
static void make_opnd(opnd *o, fk_rng *r, int is_a, int64_t rows, int64_t k, int64_t pad, fp8kit_dtype t,
                      fp8kit_scale_mode mode, fp8kit_scale_layout layout, int heavy, int special)
{
    memset(o, 0, sizeof *o);
    o->is_a = is_a, o->rows = rows, o->k = k, o->ld = k + pad, o->t = t, o->mode = mode, o->layout = layout;
    o->q = (uint8_t *)malloc((size_t)(rows * o->ld));
    double mag = ldexp(1.0, (int)(fk_rng_u32(r) % 7) - 3);
    if (special == 1)
        mag = ldexp(1.0, -7);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < o->ld; j++) {
            float x = (float)((heavy ? fk_rng_heavy(r) : fk_rng_normal(r)) * mag);
            /* padding holds NaN codes: reading it would show */
            o->q[i * o->ld + j] = j < k ? fk_f32_to_fp8(x, t == FP8KIT_E5M2) : (t == FP8KIT_E4M3 ? 0x7F : 0x7E);
        }
    int64_t ka = (k + 127) / 128, n = 0;
    int64_t shape[2] = {1, 1};
    switch (mode) {
    case FP8KIT_SCALE_NONE:
        return;
    case FP8KIT_SCALE_TENSOR: n = 1, shape[0] = 1; break;
    case FP8KIT_SCALE_ROW: n = rows, shape[0] = rows; break;
    case FP8KIT_SCALE_BLOCK:
        if (!is_a)
            shape[0] = (rows + 127) / 128, shape[1] = ka, o->s_ld = ka;
        else if (layout == FP8KIT_LAYOUT_MN_MAJOR)
            shape[0] = ka, shape[1] = o->s_ld = (rows + 3) / 4 * 4;
        else
            shape[0] = rows, shape[1] = o->s_ld = ka;
        n = shape[0] * shape[1];
        break;
    case FP8KIT_SCALE_MX:
        shape[0] = layout == FP8KIT_LAYOUT_BLOCKED ? (rows + 127) / 128 * 128 : rows;
        shape[1] = layout == FP8KIT_LAYOUT_BLOCKED ? (k / 32 + 3) / 4 * 4 : k / 32;
        o->se = (uint8_t *)malloc((size_t)(shape[0] * shape[1]));
        memset(o->se, 0xFF, (size_t)(shape[0] * shape[1])); /* padding NaN: must not be read */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t c = 0; c < k / 32; c++) {
                uint8_t s = (uint8_t)(120 + fk_rng_u32(r) % 15);
                o->se[layout == FP8KIT_LAYOUT_BLOCKED ? blocked_off(i, c, k / 32) : i * (k / 32) + c] = s;
            }
        o->st = fp8kit_tensor_make(o->se, FP8KIT_E8M0, 2, shape);
        return;
    }
    o->sf = (float *)malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        o->sf[i] = (float)exp2(4.0 * fk_rng_unif(r) - 2.0) * (special == 1 ? (is_a ? 1e30f : 1e8f) : 1.0f);
    if (mode == FP8KIT_SCALE_BLOCK && is_a && layout == FP8KIT_LAYOUT_MN_MAJOR)
        for (int64_t kb = 0; kb < ka; kb++)
            for (int64_t i = rows; i < o->s_ld; i++)
                o->sf[kb * o->s_ld + i] = NAN; /* padding: must not be read */
    o->st = fp8kit_tensor_make(o->sf, FP8KIT_F32, mode == FP8KIT_SCALE_BLOCK ? 2 : 1, shape);
}

static void free_opnd(opnd *o) { free(o->q), free(o->sf), free(o->se); }

/* ---------------------------------------------------------------- one case */
typedef struct tcase {
    const char *name;
    int64_t m, n, k;
    int pad;              /* extra columns in the row strides of A, B, C, D */
    fp8kit_dtype at, bt;
    fp8kit_scale_mode sa, sb;
    fp8kit_scale_layout layout;
    int heavy, special;   /* special: 1 huge block scales, 2 a NaN code in A */
    double target;        /* alpha is chosen so that max |alpha * acc| is about this */
    float beta;
    fp8kit_dtype ct, biast, dt, out_hp;
    fp8kit_bias_mode bias;
    fp8kit_activation act;
    fp8kit_out_quant oq;
    fp8kit_rounding rnd;
    int pow2, with_amax, nthreads, sample;
} tcase;

static fp8kit_ctx *g_ctx;

/* Runs the case; when out is not NULL, D's bytes are copied there. */
static void run_case(const tcase *tc, fk_rng *rng, uint8_t *out)
{
    const int64_t M = tc->m, N = tc->n, K = tc->k, pad = tc->pad;
    opnd A, B;
    make_opnd(&A, rng, 1, M, K, pad, tc->at, tc->sa, tc->layout, tc->heavy, tc->special);
    make_opnd(&B, rng, 0, N, K, pad, tc->bt, tc->sb, tc->layout, tc->heavy, tc->special);
    if (tc->special == 2)
        A.q[(M / 2) * A.ld + K / 3] = tc->at == FP8KIT_E4M3 ? 0xFF : 0x7D; /* a NaN in row M/2 */

    /* rows and columns checked: all, or a sample for large shapes */
    int64_t nr = M, nc = N;
    int64_t *rows = (int64_t *)malloc(sizeof(int64_t) * (size_t)M), *cols = (int64_t *)malloc(sizeof(int64_t) * (size_t)N);
    for (int64_t i = 0; i < M; i++) rows[i] = i;
    for (int64_t i = 0; i < N; i++) cols[i] = i;
    if (tc->sample) {
        nr = M < 24 ? M : 24, nc = N < 48 ? N : 48;
        for (int64_t i = 0; i < nr; i++) rows[i] = (int64_t)(fk_rng_u32(rng) % (uint32_t)M);
        for (int64_t i = 0; i < nc; i++) cols[i] = (int64_t)(fk_rng_u32(rng) % (uint32_t)N);
    }
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = tc->sa, desc.scale_b = tc->sb, desc.scale_layout = tc->layout, desc.bias = tc->bias;
    desc.act = tc->act, desc.out_quant = tc->oq, desc.out_hp = tc->out_hp, desc.out_rounding = tc->rnd;
    desc.out_pow2 = tc->pow2;
    fp8kit_gemm_args args;
    memset(&args, 0, sizeof args);
    args.a = fp8kit_tensor_2d(A.q, tc->at, M, K, A.ld);
    args.b = fp8kit_tensor_2d(B.q, tc->bt, N, K, B.ld);
    args.scale_a = A.st, args.scale_b = B.st;

    /* the oracle's accumulators: acc and sum |terms| */
    double *acc = (double *)malloc(sizeof(double) * (size_t)(nr * nc)), *sabs = (double *)malloc(sizeof(double) * (size_t)(nr * nc));
    int rst = fk_ref_gemm_acc(&desc, &args, rows, nr, cols, nc, acc, sabs);
    CHECK(rst == FK_REF_OK, "[%s] the fp64 reference refused the case (%d)", tc->name, rst);
    double amax_acc = 0;
    for (int64_t i = 0; i < nr * nc; i++)
        if (fabs(acc[i]) > amax_acc)
            amax_acc = fabs(acc[i]);
    float alpha = (float)(tc->target / (amax_acc > 0 && isfinite(amax_acc) ? amax_acc : 1.0));
    if (fk_rng_u32(rng) & 1)
        alpha = -alpha;

    /* C, bias, D */
    const int64_t ld = N + pad;
    void *c = NULL, *bias = NULL;
    if (tc->beta != 0.0f) {
        c = malloc(dsize(tc->ct) * (size_t)(M * ld));
        for (int64_t i = 0; i < M * ld; i++)
            put_hp(c, tc->ct, i, (float)(fk_rng_normal(rng) * tc->target * 0.5));
    }
    int64_t blen = tc->bias == FP8KIT_BIAS_ROW ? M : N;
    if (tc->bias) {
        bias = malloc(dsize(tc->biast) * (size_t)blen);
        for (int64_t i = 0; i < blen; i++)
            put_hp(bias, tc->biast, i, (float)(fk_rng_normal(rng) * tc->target * 0.5));
    }
    size_t dbytes = dsize(tc->dt) * (size_t)(M * ld);
    uint8_t *d = (uint8_t *)malloc(dbytes);
    fk_poison(d, dbytes);
    int64_t sd_n = tc->oq == FP8KIT_OUTQ_MX ? M * (N / 32) : tc->oq == FP8KIT_OUTQ_BLOCK1X128 ? M * ((N + 127) / 128) : 1;
    size_t sd_bytes = (tc->oq == FP8KIT_OUTQ_MX ? 1 : 4) * (size_t)sd_n;
    uint8_t *sd = (uint8_t *)malloc(sd_bytes + 64);
    fk_poison(sd, sd_bytes + 64);
    float scale_d = (float)(tc->target / 300.0), amax_d = -1.0f;
    if (tc->oq == FP8KIT_OUTQ_SCALED)
        memcpy(sd, &scale_d, 4);

    args.alpha = alpha, args.beta = tc->beta;
    if (c)
        args.c = fp8kit_tensor_2d(c, tc->ct, M, N, ld);
    if (bias)
        args.bias = fp8kit_tensor_make(bias, tc->biast, 1, &blen);
    args.d = fp8kit_tensor_2d(d, tc->dt, M, N, ld);
    if (tc->oq == FP8KIT_OUTQ_SCALED) {
        int64_t one = 1;
        args.scale_d = fp8kit_tensor_make(sd, FP8KIT_F32, 1, &one);
        if (tc->with_amax)
            args.amax_d = &amax_d;
    } else if (tc->oq != FP8KIT_OUTQ_NONE) {
        int64_t sh[2] = {M, tc->oq == FP8KIT_OUTQ_MX ? N / 32 : (N + 127) / 128};
        args.scale_d = fp8kit_tensor_make(sd, tc->oq == FP8KIT_OUTQ_MX ? FP8KIT_E8M0 : FP8KIT_F32, 2, sh);
    }
    CHECK_STATUS(fp8kit_ctx_set_threads(g_ctx, tc->nthreads), FP8KIT_OK);
    fp8kit_status st = fp8kit_gemm(g_ctx, &desc, &args, NULL);
    CHECK(st == FP8KIT_OK, "[%s] fp8kit_gemm: %s (%s)", tc->name, fp8kit_status_string(st), fp8kit_last_error(g_ctx));
    if (out)
        memcpy(out, d, dbytes);

    /* nothing outside D's rows and the scales' extent is written */
    int untouched = 1;
    for (int64_t i = 0; i < M && pad; i++)
        untouched &= fk_is_poisoned(d + dsize(tc->dt) * (size_t)(i * ld + N), dsize(tc->dt) * (size_t)pad);
    if (tc->oq == FP8KIT_OUTQ_MX || tc->oq == FP8KIT_OUTQ_BLOCK1X128)
        untouched &= fk_is_poisoned(sd + sd_bytes, 64);
    CHECK(untouched, "[%s] bytes outside D / scale_d were written", tc->name);

    /* per-element check */
    const int kblk = tc->sa == FP8KIT_SCALE_MX ? 32 : 128;
    const double L = kblk + (K + kblk - 1) / kblk + 6;
    const int e5 = tc->dt == FP8KIT_E5M2;
    double worst = 0, max_ref = 0, max_tol = 0;
    fk_ref_norm norm; /* the Frobenius error of non-fp8 D */
    memset(&norm, 0, sizeof norm);
    long bad = 0, nan_bad = 0;
    double act2 = 0; /* sum of squared activation allowances */
    double *yv = (double *)malloc(sizeof(double) * (size_t)nc), *tv = (double *)malloc(sizeof(double) * (size_t)nc);
    for (int64_t ii = 0; ii < nr; ii++) {
        int64_t m = rows[ii];
        for (int64_t jj = 0; jj < nc; jj++) {
            int64_t n = cols[jj];
            fk_ref_parts pt; /* y = alpha * acc + beta * C + bias, r = act(y) */
            double r = fk_ref_epilogue(&desc, &args, m, n, acc[ii * nc + jj], &pt);
            double cc = pt.c, bb = pt.bias, y = pt.pre;
            double tol = L * U32 * fabs((double)alpha) * sabs[ii * nc + jj] + 4 * U32 * (fabs(cc) + fabs(bb) + fabs(y));
            double act_err = 0; /* fk_act runs in fp32: gelu/silu tails cancel (1 + erf ~ 0) */
            if (tc->act) {
                act_err = 16 * U32 * (fabs(y) + fabs(r));
                tol = 1.2 * tol + act_err + 1e-30;
            }
            yv[jj] = r, tv[jj] = tol;
            if (fabs(r) > max_ref) max_ref = fabs(r);
            if (tol > max_tol) max_tol = tol;
            if (!is_fp8(tc->dt)) {
                double got = fk_ref_decode(d, tc->dt, m * ld + n);
                double rr = tc->dt == FP8KIT_F32 ? 2 * U32 : tc->dt == FP8KIT_BF16 ? 1.0 / 256 : 1.0 / 1024;
                double lim = tol + rr * fabs(r) + (tc->dt == FP8KIT_F16 ? ldexp(1, -24) : 1e-44);
                if (isnan(r)) {
                    CHECK(isnan(got), "[%s] D[%lld,%lld] = %g, reference NaN", tc->name, (long long)m, (long long)n, got);
                    continue;
                }
                fk_ref_norm_add(&norm, got, r), act2 += act_err * act_err;
                if (!(fabs(got - r) <= lim) && bad++ < 3)
                    fprintf(stderr, "  [%s] D[%lld,%lld] = %.9g, ref %.9g, tol %.3g\n", tc->name, (long long)m,
                            (long long)n, got, r, lim);
                nan_bad += isnan(got);
                if (fabs(got - r) / (fabs(r) + 1e-300) > worst && fabs(r) > 1e-30) worst = fabs(got - r) / fabs(r);
            } else if (tc->oq == FP8KIT_OUTQ_NONE || tc->oq == FP8KIT_OUTQ_SCALED) {
                double s = tc->oq == FP8KIT_OUTQ_SCALED ? scale_d : 1.0;
                double lo = (r - tol) / s, hi = (r + tol) / s;
                lo -= 4 * U32 * fabs(lo), hi += 4 * U32 * fabs(hi);
                double got = fk_ref_decode(d, tc->dt, m * ld + n);
                double qlo = fk_ref_round(lo, tc->dt), qhi = fk_ref_round(hi, tc->dt);
                if (isnan(r)) {
                    CHECK(isnan(got), "[%s] D[%lld,%lld] = %g, reference NaN", tc->name, (long long)m, (long long)n, got);
                    continue;
                }
                nan_bad += isnan(got);
                if (!(got >= qlo && got <= qhi) && bad++ < 3)
                    fprintf(stderr, "  [%s] D[%lld,%lld] = %g, allowed [%g, %g] (y %.9g / %g)\n", tc->name,
                            (long long)m, (long long)n, got, qlo, qhi, r, s);
            }
        }
        if (tc->oq == FP8KIT_OUTQ_MX || tc->oq == FP8KIT_OUTQ_BLOCK1X128) {
            /* whole rows (never sampled): per group, the scale range the
             * tolerance allows, each code's interval, and decode(q) * S vs y */
            const int mx = tc->oq == FP8KIT_OUTQ_MX;
            const int64_t gs = mx ? 32 : 128;
            for (int64_t g = 0; g < N; g += gs) {
                int64_t ge = g + gs < N ? g + gs : N;
                uint32_t alo = 0, ahi = 0;
                for (int64_t n = g; n < ge; n++) {
                    float lo = (float)fk_ref_round(yv[n] - tv[n] - 4 * U32 * fabs(yv[n]), tc->out_hp);
                    float hi = (float)fk_ref_round(yv[n] + tv[n] + 4 * U32 * fabs(yv[n]), tc->out_hp);
                    float mn = (lo <= 0 && hi >= 0) ? 0.0f : fminf(fabsf(lo), fabsf(hi));
                    alo = fk_max_u32(alo, fk_abs_bits(mn));
                    ahi = fk_max_u32(ahi, fk_max_u32(fk_abs_bits(lo), fk_abs_bits(hi)));
                }
                double S, Smin, Smax;
                float r = 0.0f;
                if (mx) {
                    uint8_t s = sd[m * (N / 32) + g / 32];
                    uint8_t slo = fk_mx_scale(alo, e5, tc->rnd), shi = fk_mx_scale(ahi, e5, tc->rnd);
                    CHECK(s >= slo && s <= shi, "[%s] row %lld group %lld: e8m0 scale %u outside [%u, %u]", tc->name,
                          (long long)m, (long long)g, s, slo, shi);
                    S = fk_ref_decode(&s, FP8KIT_E8M0, 0), r = fk_mx_recip(s), Smin = Smax = S;
                } else {
                    float s;
                    memcpy(&s, sd + 4 * (size_t)(m * ((N + 127) / 128) + g / 128), 4);
                    /* S(amax) is monotone except S(0) = 1 */
                    Smin = alo ? fk_scale_f32(alo, e5, tc->pow2) : 0.0, Smax = fk_scale_f32(ahi, e5, tc->pow2);
                    CHECK((s >= Smin && s <= Smax) || (alo == 0 && s == 1.0f), "[%s] row %lld group %lld: scale %g outside [%g, %g]",
                          tc->name, (long long)m, (long long)g, s, Smin, Smax);
                    if (tc->pow2)
                        CHECK(s > 0 && frexp(s, &(int){0}) == 0.5, "[%s] pow2 scale %g is not a power of two", tc->name, s);
                    S = s;
                }
                for (int64_t n = g; n < ge; n++) {
                    float lo = (float)fk_ref_round(yv[n] - tv[n] - 4 * U32 * fabs(yv[n]), tc->out_hp);
                    float hi = (float)fk_ref_round(yv[n] + tv[n] + 4 * U32 * fabs(yv[n]), tc->out_hp);
                    uint8_t q = d[m * ld + n];
                    uint8_t qa = mx ? fk_quant_mx_elem(lo, r, e5) : fk_quant_f32_elem(lo, (float)S, e5);
                    uint8_t qb = mx ? fk_quant_mx_elem(hi, r, e5) : fk_quant_f32_elem(hi, (float)S, e5);
                    double got = fk_ref_decode(&q, tc->dt, 0);
                    nan_bad += isnan(got);
                    const double ga = fk_ref_decode(&qa, tc->dt, 0), gb = fk_ref_decode(&qb, tc->dt, 0);
                    if (!(got >= ga && got <= gb) && bad++ < 3)
                        fprintf(stderr, "  [%s] q[%lld,%lld] = %g outside [%g, %g] (y %.9g, S %g)\n", tc->name,
                                (long long)m, (long long)n, got, ga, gb, yv[n], S);
                    /* decode(q) * S reproduces y within the quantization error
                     * (half an fp8 step, or saturation for mx floor) */
                    double qerr = (mx ? 0.13 : (e5 ? 0.126 : 0.0626)) * fabs(yv[n]) + S * (e5 ? ldexp(1, -16) : ldexp(1, -9)) +
                                  2 * tv[n] + (tc->out_hp == FP8KIT_BF16 ? 1.0 / 256 : 1.0 / 1024) * fabs(yv[n]) +
                                  (tc->out_hp == FP8KIT_F16 ? ldexp(1, -24) : 1e-37);
                    if (!(fabs(got * S - yv[n]) <= qerr) && bad++ < 3)
                        fprintf(stderr, "  [%s] decode(q[%lld,%lld]) * S = %g vs y %g\n", tc->name, (long long)m,
                                (long long)n, got * S, yv[n]);
                }
            }
        }
    }
    CHECK(bad == 0, "[%s] %ld elements out of tolerance", tc->name, bad);
    CHECK(nan_bad == 0, "[%s] %ld NaN outputs where the reference has none", tc->name, nan_bad);
    if (!is_fp8(tc->dt) && norm.ref2 > 0) {
        /* docs/spec.md's bounds, plus (with an activation) the norm of the fp32
         * activation's own allowances: ||D - ref|| <= bound ||ref|| + ||act_err|| */
        double bound = fk_ref_bound(tc->dt, K);
        double rel = (sqrt(norm.err2) - sqrt(act2)) / sqrt(norm.ref2);
        CHECK(rel <= bound, "[%s] Frobenius rel error (less the activation allowance) %.3g > %.g", tc->name, rel, bound);
        if (getenv("FK_TEST_VERBOSE") || rel > bound)
            printf("  %-28s %5lld x %5lld x %5lld act %d rel %.3g (worst elem %.3g)\n", tc->name, (long long)M,
                   (long long)N, (long long)K, (int)tc->act, rel, worst);
    }
    if (tc->oq == FP8KIT_OUTQ_SCALED && tc->with_amax)
        CHECK(fabs(amax_d - max_ref) <= max_tol + 8 * U32 * max_ref, "[%s] amax_d %.9g, reference %.9g", tc->name,
              amax_d, max_ref);
    free(yv), free(tv), free(rows), free(cols), free(acc), free(sabs);
    free(c), free(bias), free(d), free(sd);
    free_opnd(&A), free_opnd(&B);
}

/* ------------------------------------------------------------------- cases */
static const fp8kit_dtype HP[3] = {FP8KIT_F32, FP8KIT_BF16, FP8KIT_F16};

/* A case with random shape, operand types and epilogue for a scale config
 * and output config; fixed by the caller where it matters. */
static tcase random_case(fk_rng *r, const char *name, fp8kit_scale_mode sa, fp8kit_scale_mode sb,
                         fp8kit_scale_layout layout, fp8kit_dtype dt, fp8kit_out_quant oq)
{
    tcase t;
    memset(&t, 0, sizeof t);
    t.name = name, t.sa = sa, t.sb = sb, t.layout = layout, t.dt = dt, t.oq = oq;
    t.m = 1 + fk_rng_u32(r) % 150;
    t.n = oq == FP8KIT_OUTQ_MX ? 32 * (1 + fk_rng_u32(r) % 6) : 1 + fk_rng_u32(r) % 200;
    t.k = sa == FP8KIT_SCALE_MX ? 32 * (1 + fk_rng_u32(r) % 12) : 1 + fk_rng_u32(r) % 400;
    t.pad = (fk_rng_u32(r) & 1) ? 5 : 0;
    t.at = (fk_rng_u32(r) & 1) ? FP8KIT_E5M2 : FP8KIT_E4M3;
    t.bt = (fk_rng_u32(r) & 1) ? FP8KIT_E5M2 : FP8KIT_E4M3;
    t.heavy = fk_rng_u32(r) & 1;
    t.target = dt == FP8KIT_F16 ? 200.0 : exp2(12.0 * fk_rng_unif(r) - 4.0);
    if (is_fp8(dt) && oq == FP8KIT_OUTQ_NONE)
        t.target = dt == FP8KIT_E4M3 ? 300.0 : 3000.0; /* some values saturate */
    if (oq == FP8KIT_OUTQ_SCALED)
        t.target = 100.0;
    t.beta = (fk_rng_u32(r) & 1) ? (float)(2.0 * fk_rng_unif(r) - 1.0) : 0.0f;
    t.ct = HP[fk_rng_u32(r) % 3];
    t.bias = (fp8kit_bias_mode)(fk_rng_u32(r) % 3);
    t.biast = HP[fk_rng_u32(r) % 3];
    t.act = (fp8kit_activation)(fk_rng_u32(r) % FP8KIT_ACT_SWIGLU); /* elementwise ones (swiglu: test_gemm_swiglu.c) */
    t.out_hp = HP[fk_rng_u32(r) % 3];
    t.nthreads = (int)(fk_rng_u32(r) % 3);
    return t;
}

typedef struct scfg { const char *name; fp8kit_scale_mode sa, sb; fp8kit_scale_layout layout; } scfg;
typedef struct ocfg { const char *name; fp8kit_dtype dt; fp8kit_out_quant oq; fp8kit_dtype hp; fp8kit_rounding rnd; int pow2, amax; } ocfg;

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_gemm");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_ctx), FP8KIT_OK);
    if (!g_ctx)
        return fk_test_summary("test_gemm");

    static const scfg S[] = {
        {"none/none", FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, FP8KIT_LAYOUT_PLAIN},
        {"tensor/tensor", FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, FP8KIT_LAYOUT_PLAIN},
        {"row/row", FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, FP8KIT_LAYOUT_PLAIN},
        {"tensor/row", FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW, FP8KIT_LAYOUT_PLAIN},
        {"row/none", FP8KIT_SCALE_ROW, FP8KIT_SCALE_NONE, FP8KIT_LAYOUT_PLAIN},
        {"none/tensor", FP8KIT_SCALE_NONE, FP8KIT_SCALE_TENSOR, FP8KIT_LAYOUT_PLAIN},
        {"block", FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN},
        {"block mn_major", FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR},
        {"mx", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN},
        {"mx blocked", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED},
    };
    static const ocfg O[] = {
        {"f32", FP8KIT_F32, FP8KIT_OUTQ_NONE, FP8KIT_F32, 0, 0, 0},
        {"bf16", FP8KIT_BF16, FP8KIT_OUTQ_NONE, FP8KIT_F32, 0, 0, 0},
        {"f16", FP8KIT_F16, FP8KIT_OUTQ_NONE, FP8KIT_F32, 0, 0, 0},
        {"e4m3", FP8KIT_E4M3, FP8KIT_OUTQ_NONE, FP8KIT_F32, 0, 0, 0},
        {"e5m2", FP8KIT_E5M2, FP8KIT_OUTQ_NONE, FP8KIT_F32, 0, 0, 0},
        {"scaled e4m3 +amax", FP8KIT_E4M3, FP8KIT_OUTQ_SCALED, FP8KIT_F32, 0, 0, 1},
        {"scaled e5m2", FP8KIT_E5M2, FP8KIT_OUTQ_SCALED, FP8KIT_F32, 0, 0, 0},
        {"mx floor bf16 e4m3", FP8KIT_E4M3, FP8KIT_OUTQ_MX, FP8KIT_BF16, FP8KIT_ROUND_FLOOR, 0, 0},
        {"mx rceil f32 e5m2", FP8KIT_E5M2, FP8KIT_OUTQ_MX, FP8KIT_F32, FP8KIT_ROUND_RCEIL, 0, 0},
        {"mx rceil f16 e4m3", FP8KIT_E4M3, FP8KIT_OUTQ_MX, FP8KIT_F16, FP8KIT_ROUND_RCEIL, 0, 0},
        {"b1x128 bf16 e4m3", FP8KIT_E4M3, FP8KIT_OUTQ_BLOCK1X128, FP8KIT_BF16, 0, 0, 0},
        {"b1x128 pow2 f32 e5m2", FP8KIT_E5M2, FP8KIT_OUTQ_BLOCK1X128, FP8KIT_F32, 0, 1, 0},
        {"b1x128 pow2 f16 e4m3", FP8KIT_E4M3, FP8KIT_OUTQ_BLOCK1X128, FP8KIT_F16, 0, 1, 0},
    };
    char names[64][96];
    int ni = 0;
    /* 1. every scale mode x every output type / quantization, random epilogue */
    for (size_t si = 0; si < sizeof S / sizeof S[0]; si++)
        for (size_t oi = 0; oi < sizeof O / sizeof O[0]; oi++) {
            snprintf(names[ni % 64], sizeof names[0], "%s -> %s", S[si].name, O[oi].name);
            tcase t = random_case(&rng, names[ni++ % 64], S[si].sa, S[si].sb, S[si].layout, O[oi].dt, O[oi].oq);
            if (O[oi].oq == FP8KIT_OUTQ_MX || O[oi].oq == FP8KIT_OUTQ_BLOCK1X128) {
                t.out_hp = O[oi].hp;
                if (t.out_hp == FP8KIT_F16)
                    t.target = 200.0;
            }
            t.rnd = O[oi].rnd, t.pow2 = O[oi].pow2, t.with_amax = O[oi].amax;
            run_case(&t, &rng, NULL);
        }
    /* 2. every epilogue option: activation x bias mode x beta, dtypes cycling */
    for (int act = 0; act < FP8KIT_ACT_SWIGLU; act++) /* swiglu's D is M x N/2: test_gemm_swiglu.c */
        for (int bm = 0; bm < 3; bm++)
            for (int withc = 0; withc < 2; withc++) {
                int idx = act * 6 + bm * 2 + withc;
                snprintf(names[ni % 64], sizeof names[0], "epilogue act %d bias %d beta %d", act, bm, withc);
                tcase t = random_case(&rng, names[ni++ % 64], idx % 2 ? FP8KIT_SCALE_ROW : FP8KIT_SCALE_TENSOR,
                                      FP8KIT_SCALE_ROW, FP8KIT_LAYOUT_PLAIN, HP[idx % 3], FP8KIT_OUTQ_NONE);
                t.act = (fp8kit_activation)act, t.bias = (fp8kit_bias_mode)bm, t.biast = HP[(idx / 3) % 3];
                t.beta = withc ? -0.75f : 0.0f, t.ct = HP[(idx / 2) % 3];
                t.target = t.dt == FP8KIT_F16 ? 200.0 : 8.0; /* activations are interesting near 0 */
                run_case(&t, &rng, NULL);
            }
    /* 3. shapes: M = 1, N = 1, K = 1, large K (docs/spec.md's 1e-5 bound at K = 16384) */
    {
        tcase t = random_case(&rng, "1x1x1", FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_F32, 0);
        t.m = t.n = t.k = 1;
        run_case(&t, &rng, NULL);
        t = random_case(&rng, "M=1 row bf16", FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0, FP8KIT_BF16, 0);
        t.m = 1, t.n = 257, t.k = 1000;
        run_case(&t, &rng, NULL);
        t = random_case(&rng, "N=1 block f32", FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_F32, 0);
        t.m = 300, t.n = 1, t.k = 129;
        run_case(&t, &rng, NULL);
        t = random_case(&rng, "M=1 mx -> mx", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, 0, FP8KIT_E4M3, FP8KIT_OUTQ_MX);
        t.m = 1, t.n = 64, t.k = 64;
        run_case(&t, &rng, NULL);
        static const scfg L[] = {{"K=16384 tensor/row f32", FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW, 0},
                                 {"K=16384 none f32", FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, 0},
                                 {"K=16384 block f32", FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0},
                                 {"K=16384 mx f32", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED}};
        for (int i = 0; i < 4; i++)
            for (int heavy = 0; heavy < 2; heavy++) {
                t = random_case(&rng, L[i].name, L[i].sa, L[i].sb, L[i].layout, FP8KIT_F32, 0);
                t.m = 13 + 20 * heavy, t.n = 37, t.k = 16384, t.heavy = heavy, t.act = 0;
                run_case(&t, &rng, NULL);
            }
    }
    /* 4. many tiles; results must not depend on the thread count */
    {
        tcase t = random_case(&rng, "300x520x777 row bf16", FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0, FP8KIT_BF16, 0);
        t.m = 300, t.n = 520, t.k = 777, t.pad = 3;
        size_t bytes = 2 * (size_t)(t.m * (t.n + t.pad));
        uint8_t *o1 = (uint8_t *)malloc(bytes), *o2 = (uint8_t *)malloc(bytes);
        fk_rng r1 = rng, r2 = rng;
        int64_t plans = fp8kit_plan_cache_size(g_ctx);
        t.nthreads = 1;
        run_case(&t, &r1, o1);
        int64_t plans1 = fp8kit_plan_cache_size(g_ctx);
        t.nthreads = 2;
        run_case(&t, &r2, o2);
        CHECK(memcmp(o1, o2, bytes) == 0, "D differs between 1 and 2 threads");
        CHECK(plans1 <= plans + 1 && fp8kit_plan_cache_size(g_ctx) == plans1,
              "plan cache grew on a repeated call (%lld -> %lld -> %lld)", (long long)plans, (long long)plans1,
              (long long)fp8kit_plan_cache_size(g_ctx));
        rng = r2;
        t = random_case(&rng, "300x520x768 mx blocked -> b1x128", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX,
                        FP8KIT_LAYOUT_BLOCKED, FP8KIT_E4M3, FP8KIT_OUTQ_BLOCK1X128);
        t.m = 300, t.n = 520, t.k = 768, t.out_hp = FP8KIT_BF16, t.nthreads = 2;
        run_case(&t, &rng, NULL);
        free(o1), free(o2);
    }
    /* 5. K split into chunks (the packed panels of 800 + 800 rows x 16384 exceed
     *    the backend's packing budget), checked on a sample of entries */
    {
        tcase t = random_case(&rng, "800x800x16384 chunked", FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_F32, 0);
        t.m = 800, t.n = 800, t.k = 16384, t.sample = 1, t.nthreads = 0, t.pad = 0;
        run_case(&t, &rng, NULL);
    }
    /* 6. block scales whose fp32 product overflows (results finite), NaN input */
    {
        tcase t = random_case(&rng, "huge block scales", FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_F32, 0);
        t.m = 40, t.n = 150, t.k = 300, t.special = 1, t.beta = 0, t.bias = 0, t.act = 0, t.heavy = 0;
        run_case(&t, &rng, NULL);
        t = random_case(&rng, "NaN in A f32", FP8KIT_SCALE_ROW, FP8KIT_SCALE_TENSOR, 0, FP8KIT_F32, 0);
        t.m = 20, t.n = 33, t.k = 70, t.special = 2;
        run_case(&t, &rng, NULL);
        t = random_case(&rng, "NaN in A mx bf16", FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, 0, FP8KIT_BF16, 0);
        t.m = 20, t.n = 33, t.k = 96, t.special = 2;
        run_case(&t, &rng, NULL);
    }
    fp8kit_ctx_destroy(g_ctx);
    return fk_test_summary("test_gemm");
}
