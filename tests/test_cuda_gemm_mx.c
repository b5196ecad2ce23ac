/* test_cuda_gemm_mx.c - the CUDA (Hopper) GEMM with MX scaling (e8m0 per 32
 * of K on A and B, docs/spec.md section 3): the checks that the cross-backend
 * harness does not make. The table of CPU-vs-CUDA MX GEMM cases (plain and
 * blocked layouts, odd M / N, K = 32 .. 1024, scale bytes at the edges, huge
 * and NaN scale products, every fp8 type pair, tile widths 64 and 128,
 * bf16 / f16 / f32 outputs with alpha, beta * C, bias and activations) lives
 * in tests/test_xbackend.c. What stays here, against an fp64 reference
 * computed from the dequantized operands and against the CPU backend on the
 * same inputs (blocked padding bytes are garbage and must be ignored): K =
 * 4096 .. 16384, products below 2^-149 (subnormal results), misaligned scale
 * pointers, more tiles than SMs (the stage ring across tiles), and the
 * plan-time refusal of precise fp32 output (test_errors). Tile widths are
 * forced with fp8kit_ctx_set_tuning (gemm_bn).
 *
 * Every case runs twice: without a workspace (the operands as given; stages
 * whose scales differ inside their 128 of K promote every 32) and with the
 * workspace fp8kit_gemm_workspace_size reports (the GEMM first rewrites each
 * 128-wide K chunk of a row whose scales span at most FK_MX_NORM_SPREAD
 * binades to one common scale, format/mx_norm_rule.h, into copies in the
 * workspace, and promotes uniform stages once per 128). Both results meet the
 * same bounds; the one with the workspace is also held to an fp64 reference
 * of the host rule's normalized operands (the pipeline does what the rule
 * says), and on adversarial scales (SC_ADV) to at most 2x the error of the
 * run without. test_mx_norm compares the normalization kernel
 * (fk_cuda_mx_norm) byte for byte with the host rule.
 *
 * Options: --perf also times 8192^3 (CUDA events, median of 10), with and
 * without the workspace, next to the tensor-scaled kernel in the same run;
 * --small runs a few small shapes, the normalization kernel and the errors
 * only (for compute-sanitizer). Exits 77 without a usable device. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

static int g_small, g_perf; /* --small, --perf */

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "format/mx_norm_rule.h"
#include "mx_norm_host.h"
#include "test_cuda_util.h"

/* src/cuda/mx_norm_kernel.cu (C linkage; declared for the library in
 * src/cuda/cuda_state.h): the MX chunk normalization of one GEMM operand, rows x
 * k codes at x (row stride ldx) with e8m0 scales s (plain, or blocked when
 * `blocked`), into codes y (row stride ldy) and plain scales sy; with tab /
 * flags also the GEMM's stage tables (fp32 [k/128][4][rows up to band]) and
 * per (K block, band) {min, max finite byte, one scale per row, 0}. */
fp8kit_status fk_cuda_mx_norm(fp8kit_ctx *ctx, const void *x, int64_t ldx, const void *s, int blocked, int64_t rows,
                              int64_t k, int e5m2, void *y, int64_t ldy, void *sy, void *tab, void *flags, int band,
                              void *stream);

static fk_rng rng;
static fp8kit_ctx *gctx, *cctx;

enum {
    SC_REAL = 0, SC_EDGE = 1, SC_NAN = 2, SC_TINY = 3, SC_HUGE = 4,
    SC_NARROW = 5, SC_ADV = 6, SC_UFLOW = 7
};

typedef struct mcase {
    const char *name;
    int64_t m, n, k;
    fp8kit_dtype at, bt, dt;
    fp8kit_scale_layout layout;
    int scales;         /* SC_*: see make_exps */
    int ctr_lo, ctr_hi; /* SC_NARROW / SC_UFLOW: range of the per-chunk centers (0, 0: 110 .. 135) */
    int sc_off;         /* byte offset of both scale arrays from an aligned base */
    float alpha, beta;
    fp8kit_dtype ct;
    fp8kit_bias_mode bias;
    fp8kit_dtype biast;
    fp8kit_activation act;
    int fast;
    const char *bn;     /* tuning gemm_bn (fresh context) or NULL */
    double bound;       /* 0 = by output dtype */
} mcase;


static int rnd(int lo, int hi) { return lo + (int)(fk_rng_u32(&rng) % (uint32_t)(hi - lo + 1)); }

/* Scale exponents ea[M][KB], eb[N][KB]: SC_REAL draws both from [116, 126]
 * (a spread of 2^10 whose products keep f16 outputs finite). SC_EDGE gives
 * each k32 block a kind: 0 both in [127, 131], 1 A = 254 with B in [0, 8]
 * (B's 2^-127 is an fp32 subnormal; products 2^0 .. 2^8), 2 A in {0, 1}
 * with B in [250, 254] (products 2^-4 .. 2^1), 3 both tiny (the products
 * underflow fp32); every product stays finite, and the stages mixing kinds
 * take the kernel's exact path. SC_NAN: one NaN scale in A and one in B.
 * SC_TINY: every scale product 2^-156 .. 2^-152, below fp32's range, with
 * subnormal but nonzero results; SC_HUGE: every product 2^128 .. 2^131, past
 * fp32's range, with finite results (the operands are scaled down by 2^-11);
 * without the workspace both take the exact path; with it their chunks
 * (spreads of at most 2) are normalized and the stages promoted once, on
 * the same products out of fp32's range.
 *
 * The workspace path's kinds, drawn per row and 128-wide chunk of K (the
 * last chunk may have fewer than 4 blocks): SC_NARROW, the chunk's blocks
 * within 3 binades (center - 1 .. center + 2) of a center drawn from
 * [ctr_lo, ctr_hi] (default 110 .. 135) on both sides: nearly every chunk
 * is normalized, the blocks below the common scale shift their codes down
 * by up to 3 binades (a few small elements become subnormal and round), and
 * most stages are uniform. SC_ADV: every block's scale byte uniform in
 * [107, 147] (2^-20 .. 2^20), independent on A and B: chunks span many
 * binades, hardly one is normalized, every stage promotes every 32. SC_UFLOW:
 * A's chunks span exactly 4 binades (one block at center - 4, one at the
 * center, the others between), B's chunks one scale (spread 0); run_case
 * then draws A's codes below 2^-4, so the blocks shifted down underflow to
 * subnormals and zero: the rule's rounding is at its worst. f16 output needs
 * SC_REAL's range (SC_NARROW's products reach 2^20). */
static void make_exps(const mcase *g, uint8_t *ea, uint8_t *eb, int64_t kbs)
{
    for (int64_t kb = 0; kb < kbs; kb++) {
        const int edge = g->scales == SC_EDGE;
        int kind = edge ? (int)(kb % 4) : 0;
        if (edge && kbs == 1)
            kind = 2; /* one block, one stage: the fast path with a subnormal scale */
        for (int64_t m = 0; m < g->m; m++)
            ea[m * kbs + kb] = (uint8_t)(kind == 1 ? 254 : kind >= 2 ? rnd(0, 1) : edge ? rnd(127, 131) : rnd(116, 126));
        for (int64_t n = 0; n < g->n; n++)
            eb[n * kbs + kb] = (uint8_t)(kind == 1 ? rnd(0, 8) : kind == 2 ? rnd(250, 254) : kind == 3 ? rnd(1, 2)
                                         : edge ? rnd(127, 131) : rnd(116, 126));
    }
    if (g->scales == SC_TINY || g->scales == SC_HUGE)
        for (int64_t kb = 0; kb < kbs; kb++) {
            for (int64_t m = 0; m < g->m; m++)
                ea[m * kbs + kb] = (uint8_t)(g->scales == SC_TINY ? rnd(0, 1) : rnd(253, 254));
            for (int64_t n = 0; n < g->n; n++)
                eb[n * kbs + kb] = (uint8_t)(g->scales == SC_TINY ? rnd(99, 101) : rnd(129, 131));
        }
    if (g->scales == SC_NAN) {
        ea[(g->m / 2) * kbs + kbs - 1] = 255; /* row M/2 of D is NaN */
        eb[(g->n / 3) * kbs] = 255;           /* column N/3 of D is NaN */
    }
    if (g->scales == SC_NARROW || g->scales == SC_ADV || g->scales == SC_UFLOW) {
        const int clo = g->ctr_hi ? g->ctr_lo : 110, chi = g->ctr_hi ? g->ctr_hi : 135;
        for (int side = 0; side < 2; side++) {
            uint8_t *e = side ? eb : ea;
            const int64_t rows = side ? g->n : g->m;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c0 = 0; c0 < kbs; c0 += 4) {
                    const int nb = (int)(kbs - c0 < 4 ? kbs - c0 : 4);
                    uint8_t *p = e + r * kbs + c0;
                    const int ctr = rnd(clo, chi);
                    for (int j = 0; j < nb; j++)
                        p[j] = (uint8_t)(g->scales == SC_NARROW ? ctr - 1 + rnd(0, 3)
                                         : g->scales == SC_ADV  ? rnd(107, 147)
                                         : side                 ? ctr
                                                                : ctr - rnd(0, 4));
                    if (g->scales == SC_UFLOW && !side && nb > 1) { /* A: a spread of exactly 4 */
                        const int lo = rnd(0, nb - 1), hi = (lo + 1 + rnd(0, nb - 2)) % nb;
                        p[lo] = (uint8_t)(ctr - 4);
                        p[hi] = (uint8_t)ctr;
                    }
                }
        }
    }
}

/* The scale array in the case's layout: plain (rows x kbs) or blocked
 * (padded, garbage in the padding), after sc_off garbage bytes. */
static uint8_t *layout_scales(const mcase *g, const uint8_t *e, int64_t rows, int64_t kbs, int64_t *count)
{
    const int blocked = g->layout == FP8KIT_LAYOUT_BLOCKED;
    const int64_t n = blocked ? fk_blocked_rows(rows) * fk_blocked_cols(kbs) : rows * kbs;
    uint8_t *s = malloc((size_t)(n + g->sc_off + 1));
    for (int64_t i = 0; i < n + g->sc_off; i++)
        s[i] = (uint8_t)fk_rng_u32(&rng); /* garbage, NaN codes included */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < kbs; c++)
            s[g->sc_off + (blocked ? fk_blocked_offset(r, c, fk_blocked_cols(kbs)) : r * kbs + c)] = e[r * kbs + c];
    *count = n;
    return s;
}

/* gctx, or for a case with a tile width a fresh context given gemm_bn after
 * the overrides it starts with (FP8KIT_TUNING); NULL on failure. */
static fp8kit_ctx *ctx_for(const mcase *g)
{
    if (!g->bn)
        return gctx;
    fp8kit_ctx *c = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &c), FP8KIT_OK);
    char spec[600] = "";
    if (c && fp8kit_ctx_get_tuning(c, spec, 512) == FP8KIT_OK) {
        snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "%sgemm_bn=%s", spec[0] ? "," : "", g->bn);
        fp8kit_status st = fp8kit_ctx_set_tuning(c, spec);
        CHECK(st == FP8KIT_OK, "set_tuning(\"%s\"): %s (%s)", spec, fp8kit_status_string(st), fp8kit_last_error(c));
        if (st == FP8KIT_OK)
            return c;
    }
    CHECK(0, "%s: no context with gemm_bn=%s", g->name, g->bn);
    fp8kit_ctx_destroy(c);
    return NULL;
}

/* x * 2^(e - 127) of rows x K codes with plain scale bytes e (K/32 per row);
 * e = 255 is NaN. */
static double *dequant(const uint8_t *x, const uint8_t *e, int64_t rows, int64_t K, int e5m2)
{
    double *d = malloc((size_t)(rows * K) * sizeof(double));
    const int64_t kbs = K / 32;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < K; k++) {
            const uint8_t s = e[r * kbs + k / 32];
            d[r * K + k] = s == 255 ? NAN : ldexp(fk_fp8_to_f32(x[r * K + k], e5m2), s - 127);
        }
    return d;
}

/* The fp64 reference of case g from codes A (M x K), B (N x K) and their
 * plain scale bytes ea, eb, into ref (M x N): the dequantized operands'
 * products summed in fp64, then the epilogue (alpha, beta * C, bias, act). */
static void reference(const mcase *g, const uint8_t *A, const uint8_t *ea, const uint8_t *B, const uint8_t *eb,
                      const void *C, const void *BI, double *ref)
{
    const int64_t M = g->m, N = g->n, K = g->k;
    double *da = dequant(A, ea, M, K, g->at == FP8KIT_E5M2), *db = dequant(B, eb, N, K, g->bt == FP8KIT_E5M2);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double *a = da + m * K, *b = db + n * K;
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
            for (int64_t k = 0; k < K; k += 4) { /* K is a multiple of 32 */
                s0 += a[k] * b[k];
                s1 += a[k + 1] * b[k + 1];
                s2 += a[k + 2] * b[k + 2];
                s3 += a[k + 3] * b[k + 3];
            }
            double y = (double)g->alpha * ((s0 + s1) + (s2 + s3));
            if (g->beta != 0.0f) y += (double)g->beta * load_hp(C, m * N + n, g->ct);
            if (g->bias == FP8KIT_BIAS_COL) y += load_hp(BI, n, g->biast);
            if (g->bias == FP8KIT_BIAS_ROW) y += load_hp(BI, m, g->biast);
            ref[m * N + n] = fk_ref_act(y, g->act);
        }
    free(da);
    free(db);
}

/* One output against the reference and the CPU backend's output Dc. */
typedef struct ostat {
    double rel;  /* ||D - ref|| / ||ref|| over the elements whose reference is not NaN */
    double relc; /* ||D - Dc|| / ||ref|| */
    long nan_bad, nan_miss, bad;
    double den;
} ostat;

static ostat compare_out(const mcase *g, const char *tag, const void *D, const void *Dc, const double *ref)
{
    const int64_t M = g->m, N = g->n;
    ostat o;
    memset(&o, 0, sizeof o);
    double num = 0, numc = 0;
    long nref = 0;
    for (int64_t i = 0; i < M * N; i++)
        if (!isnan(ref[i])) {
            o.den += ref[i] * ref[i];
            nref++;
        }
    const double rms = sqrt(o.den / (double)(nref ? nref : 1));
    for (int64_t i = 0; i < M * N; i++) {
        const double r = ref[i], v = load_hp(D, i, g->dt), vc = load_hp(Dc, i, g->dt);
        if (isnan(r)) {
            if (!isnan(v) && o.nan_miss++ < 3)
                fprintf(stderr, "  %s%s: (%lld, %lld) = %g, ref NaN\n", g->name, tag, (long long)(i / N),
                        (long long)(i % N), v);
            continue;
        }
        if (isnan(v)) {
            if (o.nan_bad++ < 3)
                fprintf(stderr, "  %s%s: NaN at (%lld, %lld), ref %g\n", g->name, tag, (long long)(i / N),
                        (long long)(i % N), r);
            continue;
        }
        num += (v - r) * (v - r);
        numc += (v - vc) * (v - vc);
        if (fabs(v - r) > 0.02 * fmax(fabs(r), rms) + 1e-30 && o.bad++ < 3)
            fprintf(stderr, "  %s%s: (%lld, %lld) = %g, ref %g, cpu %g\n", g->name, tag, (long long)(i / N),
                    (long long)(i % N), v, r, vc);
    }
    o.rel = o.den > 0 ? sqrt(num / o.den) : sqrt(num);
    o.relc = o.den > 0 ? sqrt(numc / o.den) : sqrt(numc);
    return o;
}

/* The checks every GPU output of a case gets. */
static void check_out(const mcase *g, const char *tag, const ostat *o, double bound)
{
    CHECK(o->rel <= bound, "%s%s: rel error %.3e > %.1e", g->name, tag, o->rel, bound);
    CHECK(o->relc <= 2 * bound, "%s%s: differs from the CPU backend by %.3e", g->name, tag, o->relc);
    CHECK(o->nan_bad == 0, "%s%s: %ld NaN outputs where the reference has none", g->name, tag, o->nan_bad);
    CHECK(o->nan_miss == 0, "%s%s: %ld finite outputs where the reference is NaN", g->name, tag, o->nan_miss);
    CHECK(o->bad == 0, "%s%s: %ld elements far from the reference", g->name, tag, o->bad);
    CHECK(o->den > 0, "%s%s: degenerate reference", g->name, tag);
}

/* Whether n device bytes at d still equal the host bytes h. */
static int same_bytes(const void *d, const void *h, size_t n)
{
    unsigned char *t = malloc(n ? n : 1);
    d2h(t, d, n);
    const int same = memcmp(t, h, n) == 0;
    free(t);
    return same;
}

/* One MX GEMM on both backends, on the GPU without and with the workspace;
 * checks the GPU results. */
static void run_case(const mcase *g)
{
    const int64_t M = g->m, N = g->n, K = g->k, kbs = K / 32;
    const int e5a = g->at == FP8KIT_E5M2, e5b = g->bt == FP8KIT_E5M2;
    uint8_t *A = malloc((size_t)(M * K + 1)), *B = malloc((size_t)(N * K + 1));
    const float small = g->scales == SC_HUGE ? 0x1p-11f : 1.0f;
    for (int64_t i = 0; i < M * K; i++)
        A[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * (e5a ? 64.0f : 32.0f) * small, e5a);
    if (g->scales == SC_UFLOW) /* A's codes below 2^-4 (zeros and subnormals included) */
        for (int64_t i = 0; i < M * K; i++) {
            uint8_t c;
            float v;
            do {
                c = (uint8_t)fk_rng_u32(&rng);
                v = fk_fp8_to_f32(c, e5a);
            } while (!(fabsf(v) < 0x1p-4f));
            A[i] = c;
        }
    for (int64_t i = 0; i < N * K; i++)
        B[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * (e5b ? 64.0f : 32.0f) * small, e5b);
    uint8_t *ea = malloc((size_t)(M * kbs + 1)), *eb = malloc((size_t)(N * kbs + 1));
    make_exps(g, ea, eb, kbs);
    int64_t nsa = 0, nsb = 0;
    uint8_t *SA = layout_scales(g, ea, M, kbs, &nsa), *SB = layout_scales(g, eb, N, kbs, &nsb);
    const size_t hs = fp8kit_dtype_size(g->ct ? g->ct : FP8KIT_F32);
    void *C = malloc((size_t)(M * N) * 4 + 4);
    for (int64_t i = 0; i < M * N; i++)
        store_hp(C, i, g->ct, (float)fk_rng_normal(&rng));
    const int64_t nb = g->bias == FP8KIT_BIAS_ROW ? M : N;
    void *BI = malloc((size_t)nb * 4 + 4);
    for (int64_t i = 0; i < nb; i++)
        store_hp(BI, i, g->biast, (float)fk_rng_normal(&rng));

    /* fp64 reference from the dequantized operands: x * 2^(e - 127), e = 255 NaN */
    double *ref = malloc((size_t)(M * N) * sizeof(double));
    reference(g, A, ea, B, eb, C, BI, ref);
    /* and from the operands the host rule normalizes (what the workspace path multiplies) */
    uint8_t *An = malloc((size_t)(M * K + 1)), *Bn = malloc((size_t)(N * K + 1));
    uint8_t *ean = malloc((size_t)(M * kbs + 1)), *ebn = malloc((size_t)(N * kbs + 1));
    const int64_t rounded = host_norm(A, K, ea, 0, M, K, e5a, An, K, ean) + host_norm(B, K, eb, 0, N, K, e5b, Bn, K, ebn);
    double *refn = ref;
    if (rounded) {
        refn = malloc((size_t)(M * N) * sizeof(double));
        reference(g, An, ean, Bn, ebn, C, BI, refn);
    }

    const size_t ds = fp8kit_dtype_size(g->dt), dbytes = (size_t)(M * N) * ds;
    void *dA = dmalloc((size_t)(M * K)), *dB = dmalloc((size_t)(N * K));
    uint8_t *dSA = dmalloc((size_t)(nsa + g->sc_off)), *dSB = dmalloc((size_t)(nsb + g->sc_off));
    void *dC = dmalloc((size_t)(M * N) * hs), *dBI = dmalloc((size_t)nb * 4), *dD = dmalloc(dbytes);
    h2d(dA, A, (size_t)(M * K));
    h2d(dB, B, (size_t)(N * K));
    h2d(dSA, SA, (size_t)(nsa + g->sc_off));
    h2d(dSB, SB, (size_t)(nsb + g->sc_off));
    h2d(dC, C, (size_t)(M * N) * hs);
    h2d(dBI, BI, (size_t)nb * fp8kit_dtype_size(g->biast ? g->biast : FP8KIT_F32));

    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = FP8KIT_SCALE_MX;
    desc.scale_layout = g->layout;
    desc.bias = g->bias;
    desc.act = g->act;
    desc.fast_accum = g->fast;
    fp8kit_gemm_args ga, ca;
    memset(&ga, 0, sizeof ga);
    ga.a = fp8kit_tensor_2d(dA, g->at, M, K, K);
    ga.b = fp8kit_tensor_2d(dB, g->bt, N, K, K);
    ga.scale_a = fp8kit_tensor_make(dSA + g->sc_off, FP8KIT_E8M0, 1, &nsa);
    ga.scale_b = fp8kit_tensor_make(dSB + g->sc_off, FP8KIT_E8M0, 1, &nsb);
    ga.alpha = g->alpha;
    ga.beta = g->beta;
    if (g->beta != 0.0f) ga.c = fp8kit_tensor_2d(dC, g->ct, M, N, N);
    if (g->bias) ga.bias = fp8kit_tensor_make(dBI, g->biast, 1, &nb);
    ga.d = fp8kit_tensor_2d(dD, g->dt, M, N, N);
    fp8kit_ctx *c = ctx_for(g);
    char plan[512] = "";
    if (c && g->bn)
        CHECK_STATUS(fp8kit_gemm_describe(c, &desc, &ga, plan, sizeof plan), FP8KIT_OK);
    size_t wsb = 0;
    if (c)
        CHECK_STATUS(fp8kit_gemm_workspace_size(c, &desc, &ga, &wsb), FP8KIT_OK);
    unsigned char *D = malloc(dbytes), *Dw = malloc(dbytes), *Dc = malloc(dbytes);

    /* run 0: no workspace (the operands as given); run 1: the workspace reported */
    for (int run = 0; run < 2; run++) {
        if (run == 1 && wsb == 0)
            break;
        void *dW = NULL;
        if (run == 1) {
            dW = dmalloc(wsb);
            CHECK(cudaMemset(dW, 0xA5, wsb) == cudaSuccess, "memset"); /* its content need not be cleared */
            ga.workspace = dW;
            ga.workspace_bytes = wsb;
        }
        CHECK(cudaMemset(dD, 0xFF, dbytes) == cudaSuccess, "memset"); /* NaN poison */
        fp8kit_status st = c ? fp8kit_gemm(c, &desc, &ga, NULL) : FP8KIT_ERR_INTERNAL;
        CHECK(st == FP8KIT_OK, "%s: fp8kit_gemm (cuda%s) returned %s: %s", g->name, run ? ", workspace" : "",
              fp8kit_status_string(st), c ? fp8kit_last_error(c) : "no context");
        cudaError_t ce = cudaDeviceSynchronize();
        CHECK(ce == cudaSuccess, "%s: kernel failed%s: %s", g->name, run ? " (workspace)" : "", cudaGetErrorString(ce));
        d2h(run ? Dw : D, dD, dbytes);
        if (run == 1) { /* the normalization wrote its copies into the workspace, not over the operands */
            CHECK(same_bytes(dA, A, (size_t)(M * K)) && same_bytes(dB, B, (size_t)(N * K)) &&
                      same_bytes(dSA, SA, (size_t)(nsa + g->sc_off)) && same_bytes(dSB, SB, (size_t)(nsb + g->sc_off)),
                  "%s: the call with a workspace changed its operands", g->name);
            ga.workspace = NULL;
            ga.workspace_bytes = 0;
            cudaFree(dW);
        }
    }
    if (g->bn && c)
        fp8kit_ctx_destroy(c);

    ca = ga;
    ca.a.data = A; ca.b.data = B; ca.scale_a.data = SA + g->sc_off; ca.scale_b.data = SB + g->sc_off;
    ca.c.data = g->beta != 0.0f ? C : NULL; ca.bias.data = g->bias ? BI : NULL; ca.d.data = Dc;
    memset(Dc, 0xFF, dbytes);
    fp8kit_status cst = fp8kit_gemm(cctx, &desc, &ca, NULL);
    CHECK(cst == FP8KIT_OK, "%s: fp8kit_gemm (cpu) returned %s: %s", g->name, fp8kit_status_string(cst),
          fp8kit_last_error(cctx));

    double bound = g->bound;
    if (bound == 0.0)
        /* f32 (fast_accum): the tensor cores sum 32 (128 on uniform stages) products before each
         * promotion: rel ~1e-4, up to 2.1e-4 seen (H100, 2026-11-26) */
        bound = g->dt == FP8KIT_F32 ? 3e-4 : g->dt == FP8KIT_BF16 ? 4e-3 : 1e-3;
    const ostat o = compare_out(g, "", D, Dc, ref);
    ostat ow, own;
    memset(&ow, 0, sizeof ow);
    memset(&own, 0, sizeof own);
    if (wsb) {
        ow = compare_out(g, " (workspace)", Dw, Dc, ref);
        own = refn == ref ? ow : compare_out(g, " (workspace vs the normalized operands)", Dw, Dc, refn);
    }
    printf("  %-34s %5lldx%5lldx%5lld  rel %.3e  ws %.3e  (vs cpu %.3e, ws %.3e)  bound %.0e\n", g->name,
           (long long)M, (long long)N, (long long)K, o.rel, wsb ? ow.rel : NAN, o.relc, wsb ? ow.relc : NAN, bound);
    if (wsb && rounded) {
        /* the rule's own error: the normalized operands' reference against the exact one */
        double num = 0;
        for (int64_t i = 0; i < M * N; i++)
            if (!isnan(ref[i]))
                num += (refn[i] - ref[i]) * (refn[i] - ref[i]);
        const double rule = o.den > 0 ? sqrt(num / o.den) : sqrt(num);
        printf("  %-34s ws: %lld codes rounded (the rule alone: rel %.2e), vs the normalized operands %.3e\n", "",
               (long long)rounded, rule, own.rel);
    }
    if (wsb && (g->scales == SC_ADV || g->scales == SC_UFLOW))
        printf("  %-34s ws / no ws = %.2f%s\n", "", o.rel > 0 ? ow.rel / o.rel : NAN,
               g->scales == SC_ADV ? " (at most 2)" : "");
    if (plan[0])
        printf("  %-34s gemm_bn=%s: %s\n", "", g->bn, plan);
    check_out(g, "", &o, bound);
    if (wsb) {
        check_out(g, " (workspace)", &ow, bound);
        CHECK(own.rel <= bound, "%s (workspace): rel error %.3e > %.1e against the reference of the normalized "
              "operands (the rule alone explains the rest)", g->name, own.rel, bound);
        /* adversarial scales: at most twice the exact per-32 path's error. The
         * 1e-6: with f32 output both errors are near fp32 rounding (a few 1e-8),
         * where their ratio means little, and the few chunks whose four scales
         * happen to fall within FK_MX_NORM_SPREAD are normalized, rounding some
         * small codes: that alone costs up to about 6e-7 (host emulation of the
         * rule, 800 draws of these shapes), up to about 15x the f32 error
         * without the workspace; with bf16 output the two errors agree to 1% */
        if (g->scales == SC_ADV)
            CHECK(ow.rel <= 2 * o.rel + 1e-6, "%s: with the workspace rel %.3e > 2 x %.3e (without) + 1e-6",
                  g->name, ow.rel, o.rel);
    }
    free(A); free(B); free(ea); free(eb); free(SA); free(SB); free(C); free(BI); free(ref);
    if (refn != ref)
        free(refn);
    free(An); free(Bn); free(ean); free(ebn);
    free(D); free(Dw); free(Dc);
    cudaFree(dA); cudaFree(dB); cudaFree(dSA); cudaFree(dSB); cudaFree(dC); cudaFree(dBI); cudaFree(dD);
}

static mcase base(const char *name, int64_t m, int64_t n, int64_t k, fp8kit_scale_layout layout)
{
    mcase g;
    memset(&g, 0, sizeof g);
    g.name = name; g.m = m; g.n = n; g.k = k;
    g.at = g.bt = FP8KIT_E4M3;
    g.dt = FP8KIT_BF16;
    g.layout = layout;
    g.alpha = 1.0f;
    g.ct = FP8KIT_F32;
    g.biast = FP8KIT_F32;
    return g;
}

/* The host rule itself (format/mx_norm_rule.h) against its definition, for every
 * code and shift 0 .. FK_MX_NORM_SPREAD + 2: NaN / Inf codes unchanged, else
 * the fp8 code nearest to decode(c) * 2^-d with its sign (ties to the even
 * code, i.e. the even mantissa; a result of zero keeps the sign). */
static void test_norm_rule(void)
{
    long bad = 0;
    for (int e5 = 0; e5 < 2; e5++)
        for (int c = 0; c < 256; c++)
            for (int d = 0; d <= FK_MX_NORM_SPREAD + 2; d++) {
                const double v = fk_fp8_to_f32((uint8_t)c, e5);
                int want = c;
                if (!isnan(v) && !isinf(v)) {
                    const double t = ldexp(v, -d);
                    double best = INFINITY;
                    for (int q = 0; q < 256; q++) {
                        const double w = fk_fp8_to_f32((uint8_t)q, e5);
                        if (isnan(w) || isinf(w) || (q & 0x80) != (c & 0x80))
                            continue;
                        const double dist = fabs(w - t);
                        if (dist < best || (dist == best && !(q & 1))) {
                            best = dist;
                            want = q;
                        }
                    }
                }
                const int got = fk_mx_norm_code((uint8_t)c, d, e5);
                if (got != want && bad++ < 5)
                    fprintf(stderr, "  fk_mx_norm_code(0x%02x, %d, %s) = 0x%02x, want 0x%02x\n", c, d,
                            e5 ? "e5m2" : "e4m3", got, want);
            }
    CHECK(bad == 0, "fk_mx_norm_code: %ld codes off the rule", bad);
}

/* fk_cuda_mx_norm (the GEMM's normalization kernel) against host_norm, byte
 * for byte: codes uniform over all 256 (NaN 0x7F / 0xFF of e4m3, Inf and NaN
 * of e5m2, zeros, subnormals, each also drawn more often), the chunks' scale
 * spreads 0 .. 6 (some at the ends of the e8m0 range, one chunk in 12 with a
 * NaN scale byte), K = 32 .. 1056 (not all multiples of 128: a last chunk of
 * 1 .. 3 blocks), 130 rows (two 128-row bands of the blocked layout), scales
 * plain and blocked (garbage padding), and four placements: aligned (ldx =
 * ldy = K: 16-byte loads and stores), strided (ldx = K + 32, ldy = K + 16:
 * y's columns K .. ldy - 1 must stay untouched), x one byte past an aligned
 * base and y one byte past one (byte loads / stores). Bytes around y and sy
 * must stay untouched too. */
static void test_mx_norm(void)
{
    static const int64_t Ks[] = {32, 96, 160, 512, 1056};
    static const uint8_t special[] = {0x00, 0x80, 0x01, 0x81, 0x03, 0x83, 0x04, 0x84, 0x07, 0x87, 0x08, 0x88,
                                      0x7C, 0xFC, 0x7D, 0xFD, 0x7E, 0xFE, 0x7F, 0xFF};
    static const char *vname[4] = {"aligned", "strided", "x+1", "y+1"};
    const int nspecial = (int)(sizeof special / sizeof special[0]);
    const int64_t rows = 130;
    test_norm_rule();
    for (int e5 = 0; e5 < 2; e5++)
        for (int ki = 0; ki < (int)(sizeof Ks / sizeof Ks[0]); ki++) {
            const int64_t K = Ks[ki], kbs = K / 32, chunks = (kbs + 3) / 4;
            if (g_small && K != 160 && K != 1056)
                continue;
            uint8_t *x = malloc((size_t)(rows * K)), *e = malloc((size_t)(rows * kbs));
            for (int64_t i = 0; i < rows * K; i++)
                x[i] = (fk_rng_u32(&rng) & 7) == 0 ? special[rnd(0, nspecial - 1)] : (uint8_t)fk_rng_u32(&rng);
            /* one block in 6 of small codes only (magnitudes up to 2^-9 .. 2^3 for e4m3), so that
             * the rule's amax condition (format/mx_norm_rule.h) both holds and fails */
            for (int64_t b = 0; b < rows * kbs; b++)
                if (rnd(0, 5) == 0) {
                    const int top = rnd(1, 0x48);
                    for (int t = 0; t < 32; t++)
                        x[b * 32 + t] = (uint8_t)(rnd(0, top) | (rnd(0, 1) << 7));
                }
            int64_t normed = 0;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c0 = 0; c0 < kbs; c0 += 4) {
                    const int nb = (int)(kbs - c0 < 4 ? kbs - c0 : 4);
                    uint8_t *p = e + r * kbs + c0;
                    const int spread = rnd(0, 6);
                    const int lo = rnd(0, 3) ? rnd(0, 254 - spread) : rnd(0, 1) ? 0 : 254 - spread;
                    for (int j = 0; j < nb; j++)
                        p[j] = (uint8_t)(lo + rnd(0, spread));
                    if (nb > 1) { /* the spread exactly */
                        const int a = rnd(0, nb - 1), b = (a + 1 + rnd(0, nb - 2)) % nb;
                        p[a] = (uint8_t)lo;
                        p[b] = (uint8_t)(lo + spread);
                    }
                    if (rnd(0, 11) == 0)
                        p[rnd(0, nb - 1)] = 255;
                    normed += fk_mx_norm_scale(p, x + r * K + c0 * 32, nb, e5) >= 0;
                }
            uint8_t *yh = malloc((size_t)(rows * K)), *syh = malloc((size_t)(rows * kbs));
            const int64_t rounded = host_norm(x, K, e, 0, rows, K, e5, yh, K, syh);
            const int64_t nbl = fk_blocked_rows(rows) * fk_blocked_cols(kbs);
            uint8_t *eblk = malloc((size_t)nbl);
            for (int64_t i = 0; i < nbl; i++)
                eblk[i] = (uint8_t)fk_rng_u32(&rng); /* garbage padding */
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < kbs; c++)
                    eblk[fk_blocked_offset(r, c, fk_blocked_cols(kbs))] = e[r * kbs + c];
            long runs = 0, fails = 0;
            for (int blocked = 0; blocked < 2; blocked++)
                for (int v = 0; v < 4; v++) {
                    if (g_small && (v == 1 || v == 3))
                        continue;
                    const int64_t ldx = v == 1 ? K + 32 : K, ldy = v == 1 ? K + 16 : K;
                    const int64_t xo = v == 2, yo = v == 3, so = v == 2, ns = blocked ? nbl : rows * kbs;
                    const size_t xbytes = (size_t)(rows * ldx), ybytes = (size_t)(rows * ldy + yo + 64);
                    const size_t sybytes = (size_t)(rows * kbs + 64);
                    uint8_t *xs = malloc(xbytes);
                    for (size_t i = 0; i < xbytes; i++)
                        xs[i] = (uint8_t)fk_rng_u32(&rng); /* garbage between the rows */
                    for (int64_t r = 0; r < rows; r++)
                        memcpy(xs + r * ldx, x + r * K, (size_t)K);
                    uint8_t *dx = dmalloc(xbytes + (size_t)xo), *ds = dmalloc((size_t)(ns + so));
                    uint8_t *dy = dmalloc(ybytes), *dsy = dmalloc(sybytes);
                    h2d(dx + xo, xs, xbytes);
                    h2d(ds + so, blocked ? eblk : e, (size_t)ns);
                    CHECK(cudaMemset(dy, 0xA5, ybytes) == cudaSuccess, "memset");
                    CHECK(cudaMemset(dsy, 0xA5, sybytes) == cudaSuccess, "memset");
                    /* the stage tables and band flags too (bands of 64 rows: 130 rows make 3, the last partial) */
                    const int band = 64;
                    const int64_t nkb = (K + 127) / 128, rp = (rows + band - 1) / band * band, nbd = rp / band;
                    float *dtab = dmalloc((size_t)(nkb * 4 * rp) * 4);
                    uint32_t *dfl = dmalloc((size_t)(nkb * nbd) * 16);
                    CHECK(cudaMemset(dtab, 0xA5, (size_t)(nkb * 4 * rp) * 4) == cudaSuccess, "memset");
                    const fp8kit_status st = fk_cuda_mx_norm(gctx, dx + xo, ldx, ds + so, blocked, rows, K, e5, dy + yo,
                                                             ldy, dsy, dtab, dfl, band, NULL);
                    const cudaError_t ce = cudaDeviceSynchronize();
                    char what[96];
                    snprintf(what, sizeof what, "mx_norm %s K=%lld %s %s", e5 ? "e5m2" : "e4m3", (long long)K,
                             blocked ? "blocked" : "plain", vname[v]);
                    CHECK(st == FP8KIT_OK, "%s: %s (%s)", what, fp8kit_status_string(st), fp8kit_last_error(gctx));
                    CHECK(ce == cudaSuccess, "%s: kernel failed: %s", what, cudaGetErrorString(ce));
                    uint8_t *y = malloc(ybytes), *sy = malloc(sybytes);
                    d2h(y, dy, ybytes);
                    d2h(sy, dsy, sybytes);
                    long mism = 0, stray = 0;
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t col = 0; col < ldy; col++) {
                            const uint8_t got = y[yo + r * ldy + col];
                            if (col >= K) {
                                stray += got != 0xA5;
                                continue;
                            }
                            const uint8_t want = yh[r * K + col];
                            if (got != want && mism++ < 4) {
                                const int64_t c0 = col / 128 * 4, nb = kbs - c0 < 4 ? kbs - c0 : 4;
                                fprintf(stderr, "  %s: y(%lld, %lld) = 0x%02x, want 0x%02x (code 0x%02x, chunk "
                                        "scales", what, (long long)r, (long long)col, got, want, x[r * K + col]);
                                for (int64_t j = 0; j < nb; j++)
                                    fprintf(stderr, " %d", e[r * kbs + c0 + j]);
                                fprintf(stderr, ", block %lld)\n", (long long)(col / 32 - c0));
                            }
                        }
                    for (int64_t i = 0; i < yo; i++)
                        stray += y[i] != 0xA5;
                    for (size_t i = (size_t)(yo + rows * ldy); i < ybytes; i++)
                        stray += y[i] != 0xA5;
                    for (int64_t i = 0; i < rows * kbs; i++)
                        if (sy[i] != syh[i] && mism++ < 8)
                            fprintf(stderr, "  %s: sy(%lld, %lld) = %d, want %d\n", what, (long long)(i / kbs),
                                    (long long)(i % kbs), sy[i], syh[i]);
                    for (size_t i = (size_t)(rows * kbs); i < sybytes; i++)
                        stray += sy[i] != 0xA5;
                    { /* tables: the final scale bytes decoded (0 in the padding rows); flags: their folds */
                        float *tab = malloc((size_t)(nkb * 4 * rp) * 4);
                        uint32_t *fl = malloc((size_t)(nkb * nbd) * 16);
                        d2h(tab, dtab, (size_t)(nkb * 4 * rp) * 4);
                        d2h(fl, dfl, (size_t)(nkb * nbd) * 16);
                        long tbad = 0, fbad = 0;
                        for (int64_t kb = 0; kb < nkb; kb++) {
                            for (int64_t j = 0; j < 4; j++)
                                for (int64_t r = 0; r < rp; r++) {
                                    const int64_t blk = kb * 4 + j;
                                    const float want = r < rows && blk < kbs ? fk_e8m0_to_f32(syh[r * kbs + blk]) : 0.0f;
                                    const float got = tab[(kb * 4 + j) * rp + r];
                                    if (!(got == want || (isnan(got) && isnan(want))) && tbad++ < 4)
                                        fprintf(stderr, "  %s: table (kb %lld, step %lld, row %lld) = %g, want %g\n",
                                                what, (long long)kb, (long long)j, (long long)r, got, want);
                                }
                            for (int64_t bd = 0; bd < nbd; bd++) {
                                uint32_t lo = 255, hi = 0, one = 1;
                                for (int64_t r = bd * band; r < rows && r < (bd + 1) * band; r++) {
                                    const int64_t nb = kbs - kb * 4 < 4 ? kbs - kb * 4 : 4;
                                    const uint8_t *b = syh + r * kbs + kb * 4;
                                    for (int64_t j = 0; j < nb; j++) {
                                        if (b[j] != 255) {
                                            lo = b[j] < lo ? b[j] : lo;
                                            hi = b[j] > hi ? b[j] : hi;
                                        }
                                        one &= b[j] == b[0];
                                    }
                                }
                                const uint32_t *f = fl + (kb * nbd + bd) * 4;
                                if ((f[0] != lo || f[1] != hi || f[2] != one) && fbad++ < 4)
                                    fprintf(stderr, "  %s: flags (kb %lld, band %lld) = {%u, %u, %u}, want {%u, %u, %u}\n",
                                            what, (long long)kb, (long long)bd, f[0], f[1], f[2], lo, hi, one);
                            }
                        }
                        CHECK(tbad == 0, "%s: %ld stage-table entries differ", what, tbad);
                        CHECK(fbad == 0, "%s: %ld band flag records differ", what, fbad);
                        mism += tbad + fbad;
                        free(tab);
                        free(fl);
                        cudaFree(dtab);
                        cudaFree(dfl);
                    }
                    CHECK(mism == 0, "%s: %ld bytes differ from the host rule", what, mism);
                    CHECK(stray == 0, "%s: %ld bytes written outside y's rows x K and sy", what, stray);
                    runs++;
                    fails += mism != 0 || stray != 0 || st != FP8KIT_OK;
                    free(xs); free(y); free(sy);
                    cudaFree(dx); cudaFree(ds); cudaFree(dy); cudaFree(dsy);
                }
            printf("  mx_norm %s K=%4lld: %lld of %lld chunks normalized, %lld codes rounded; %ld of %ld "
                   "layouts x placements exact\n", e5 ? "e5m2" : "e4m3", (long long)K, (long long)normed,
                   (long long)(rows * chunks), (long long)rounded, runs - fails, runs);
            free(x); free(e); free(yh); free(syh); free(eblk);
        }
}

/* Precise fp32 output is refused as for the other modes; D is not written. */
static void test_errors(void)
{
    const int64_t M = 128, N = 128, K = 256, ns = M * (K / 32);
    uint8_t *dA = dmalloc(M * K), *dB = dmalloc(N * K), *dS = dmalloc(ns);
    float *dD = dmalloc(M * N * 4);
    CHECK(cudaMemset(dA, 0x38, M * K) == cudaSuccess, "memset");
    CHECK(cudaMemset(dB, 0x38, N * K) == cudaSuccess, "memset");
    CHECK(cudaMemset(dS, 127, ns) == cudaSuccess, "memset");
    CHECK(cudaMemset(dD, 0xFF, M * N * 4) == cudaSuccess, "memset");
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = FP8KIT_SCALE_MX;
    fp8kit_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    ga.alpha = 1.0f;
    ga.a = fp8kit_tensor_2d(dA, FP8KIT_E4M3, M, K, K);
    ga.b = fp8kit_tensor_2d(dB, FP8KIT_E4M3, N, K, K);
    int64_t n1 = ns;
    ga.scale_a = fp8kit_tensor_make(dS, FP8KIT_E8M0, 1, &n1);
    ga.scale_b = fp8kit_tensor_make(dS, FP8KIT_E8M0, 1, &n1);
    ga.d = fp8kit_tensor_2d(dD, FP8KIT_F32, M, N, N);
    fp8kit_status st = fp8kit_gemm(gctx, &desc, &ga, NULL);
    CHECK(st == FP8KIT_ERR_UNSUPPORTED, "mx precise f32 output: got %s", fp8kit_status_string(st));
    printf("  error case %-24s -> %s (%s)\n", "mx precise f32 output", fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    unsigned char *D = malloc(M * N * 4);
    d2h(D, dD, M * N * 4);
    long touched = 0;
    for (int64_t i = 0; i < M * N * 4; i++)
        touched += D[i] != 0xFF;
    CHECK(touched == 0, "mx precise f32: D was written");
    free(D);
    cudaFree(dA); cudaFree(dB); cudaFree(dS); cudaFree(dD);
}

static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Median time of 10 calls (after 2 warm-ups) of one 8192^3 GEMM, bf16 out;
 * with use_ws, given the workspace fp8kit_gemm_workspace_size reports (its
 * size in *wsb; for MX the calls then include the normalization of A and B). */
static double time_gemm(fp8kit_scale_mode mode, fp8kit_scale_layout layout, void *dA, void *dB, void *dSA, void *dSB,
                        int64_t nsa, void *dD, int64_t S, int use_ws, size_t *wsb)
{
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = mode;
    desc.scale_layout = layout;
    fp8kit_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    int64_t one = 1;
    ga.alpha = 1.0f;
    ga.a = fp8kit_tensor_2d(dA, FP8KIT_E4M3, S, S, S);
    ga.b = fp8kit_tensor_2d(dB, FP8KIT_E4M3, S, S, S);
    if (mode == FP8KIT_SCALE_MX) {
        ga.scale_a = fp8kit_tensor_make(dSA, FP8KIT_E8M0, 1, &nsa);
        ga.scale_b = fp8kit_tensor_make(dSB, FP8KIT_E8M0, 1, &nsa);
    } else {
        ga.scale_a = fp8kit_tensor_make(dSA, FP8KIT_F32, 1, &one);
        ga.scale_b = fp8kit_tensor_make(dSB, FP8KIT_F32, 1, &one);
    }
    ga.d = fp8kit_tensor_2d(dD, FP8KIT_BF16, S, S, S);
    size_t ws = 0;
    if (use_ws)
        CHECK_STATUS(fp8kit_gemm_workspace_size(gctx, &desc, &ga, &ws), FP8KIT_OK);
    void *dW = ws ? dmalloc(ws) : NULL;
    ga.workspace = dW;
    ga.workspace_bytes = ws;
    if (wsb)
        *wsb = ws;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float ms[10];
    for (int i = 0; i < 12; i++) {
        cudaEventRecord(e0, 0);
        fp8kit_status st = fp8kit_gemm(gctx, &desc, &ga, NULL);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        CHECK(st == FP8KIT_OK, "perf gemm: %s: %s", fp8kit_status_string(st), fp8kit_last_error(gctx));
        if (i >= 2)
            cudaEventElapsedTime(&ms[i - 2], e0, e1);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(dW);
    qsort(ms, 10, sizeof ms[0], cmp_f);
    return 0.5 * (ms[4] + ms[5]);
}

/* 8192^3, bf16 out: MX plain and blocked with scale bytes independent per
 * block in [120, 134] (few chunks normalized: the workspace mostly costs the
 * copies), MX plain with each row's 128-chunks within 3 binades (every chunk
 * normalized, every stage promoted once), each without and with the
 * workspace; then the tensor-scaled kernel on the same operands. */
static void perf(void)
{
    const int64_t S = 8192, kbs = S / 32, nsa = S * kbs;
    uint8_t *h = malloc((size_t)(S * S));
    for (int64_t i = 0; i < S * S; i++)
        h[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * 32.0f, 0);
    uint8_t *hs = malloc((size_t)nsa), *hn = malloc((size_t)nsa);
    for (int64_t i = 0; i < nsa; i++)
        hs[i] = (uint8_t)rnd(120, 134);
    for (int64_t i = 0; i < nsa; i += 4) { /* kbs is a multiple of 4: chunks never straddle rows */
        const int ctr = rnd(118, 130);
        for (int j = 0; j < 4; j++)
            hn[i + j] = (uint8_t)(ctr - 1 + rnd(0, 3));
    }
    void *dA = dmalloc((size_t)(S * S)), *dB = dmalloc((size_t)(S * S)), *dD = dmalloc((size_t)(S * S) * 2);
    void *dSA = dmalloc((size_t)nsa), *dSB = dmalloc((size_t)nsa), *dNA = dmalloc((size_t)nsa);
    float *dT = dmalloc(8);
    const float ones[2] = {1.0f, 1.0f};
    h2d(dA, h, (size_t)(S * S));
    h2d(dB, h, (size_t)(S * S));
    h2d(dSA, hs, (size_t)nsa);
    h2d(dSB, hs, (size_t)nsa);
    h2d(dNA, hn, (size_t)nsa);
    h2d(dT, ones, 8);
    const double flop = 2.0 * (double)S * (double)S * (double)S;
    size_t w1 = 0, w2 = 0, w3 = 0;
    const double t_mx = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, dA, dB, dSA, dSB, nsa, dD, S, 0, NULL);
    const double t_mxw = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, dA, dB, dSA, dSB, nsa, dD, S, 1, &w1);
    const double t_mxb = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED, dA, dB, dSA, dSB, nsa, dD, S, 0, NULL);
    const double t_mxbw = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED, dA, dB, dSA, dSB, nsa, dD, S, 1, &w2);
    const double t_mxn = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, dA, dB, dNA, dNA, nsa, dD, S, 0, NULL);
    const double t_mxnw = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, dA, dB, dNA, dNA, nsa, dD, S, 1, &w3);
    const double t_t = time_gemm(FP8KIT_SCALE_TENSOR, FP8KIT_LAYOUT_PLAIN, dA, dB, dT, dT + 1, 1, dD, S, 0, NULL);
    printf("  perf 8192^3 bf16 out, median of 10 (CUDA events); ws: with the workspace fp8kit_gemm_workspace_size "
           "reports\n");
    printf("    mx plain           %8.3f ms  %7.1f TFLOP/s   ws %8.3f ms  %7.1f TFLOP/s  (%.1f MiB)\n", t_mx,
           flop / (t_mx * 1e-3) / 1e12, t_mxw, flop / (t_mxw * 1e-3) / 1e12, (double)w1 / 1048576.0);
    printf("    mx blocked         %8.3f ms  %7.1f TFLOP/s   ws %8.3f ms  %7.1f TFLOP/s  (%.1f MiB)\n", t_mxb,
           flop / (t_mxb * 1e-3) / 1e12, t_mxbw, flop / (t_mxbw * 1e-3) / 1e12, (double)w2 / 1048576.0);
    printf("    mx plain, narrow   %8.3f ms  %7.1f TFLOP/s   ws %8.3f ms  %7.1f TFLOP/s  (%.1f MiB; chunks within "
           "3 binades)\n", t_mxn, flop / (t_mxn * 1e-3) / 1e12, t_mxnw, flop / (t_mxnw * 1e-3) / 1e12,
           (double)w3 / 1048576.0);
    printf("    tensor             %8.3f ms  %7.1f TFLOP/s  (same run; tensor / mx = %.2f, ws %.2f, narrow ws %.2f)\n",
           t_t, flop / (t_t * 1e-3) / 1e12, t_t / t_mx, t_t / t_mxw, t_t / t_mxnw);
    free(h); free(hs); free(hn);
    cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dSA); cudaFree(dSB); cudaFree(dNA); cudaFree(dT);
}
#endif /* FP8KIT_HAVE_CUDA */

/* Reads the options; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv)
{
    const fk_test_flag flags[] = {
        {"small", &g_small, "a few small shapes only (for compute-sanitizer)"},
        {"perf", &g_perf, "also time 8192^3, with and without the workspace, next to the tensor-scaled kernel"},
    };
    return fk_test_flags("test_cuda_gemm_mx", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
}

int main(int argc, char **argv)
{
    const int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    const int skip = fk_test_cuda_skip("test_cuda_gemm_mx");
    if (skip >= 0)
        return skip;
#ifdef FP8KIT_HAVE_CUDA
    setvbuf(stdout, NULL, _IOLBF, 0); /* the case lines in order with the failures on stderr */
    rng = fk_rng_seeded("test_cuda_gemm_mx");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
    if (!gctx || !cctx)
        return fk_test_summary("test_cuda_gemm_mx");
    printf("  %s\n", fp8kit_ctx_describe(gctx));
    const fp8kit_scale_layout P = FP8KIT_LAYOUT_PLAIN, BL = FP8KIT_LAYOUT_BLOCKED;
    mcase g;
    if (g_small) { /* a few small shapes (for compute-sanitizer) */
        /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
        g = base("small misaligned blocked", 190, 72, 160, BL); g.sc_off = 1; run_case(&g);
        g = base("small narrow K=544 blocked", 200, 72, 544, BL); g.scales = SC_NARROW; g.sc_off = 1; run_case(&g);
        g = base("small adv f32 fast", 130, 72, 288, P); g.scales = SC_ADV; g.dt = FP8KIT_F32; g.fast = 1;
        run_case(&g);
        test_mx_norm();
        test_errors();
        fp8kit_ctx_destroy(gctx);
        fp8kit_ctx_destroy(cctx);
        return fk_test_summary("test_cuda_gemm_mx");
    }

    /* the normalization kernel of the workspace path, byte for byte */
    test_mx_norm();
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    g = base("blocked K=4096 bias gelu", 300, 520, 4096, BL);
    g.bias = FP8KIT_BIAS_COL; g.biast = FP8KIT_BF16; g.act = FP8KIT_ACT_GELU_TANH; g.alpha = 0.5f; run_case(&g);
    g = base("plain K=4096 f16 beta row-bias silu", 257, 200, 4096, P); g.dt = FP8KIT_F16;
    g.beta = -0.5f; g.ct = FP8KIT_F16; g.bias = FP8KIT_BIAS_ROW; g.biast = FP8KIT_F16; g.act = FP8KIT_ACT_SILU;
    run_case(&g);
    g = base("plain K=16384 f16", 128, 256, 16384, P); g.dt = FP8KIT_F16; run_case(&g);
    g = base("blocked K=16384 bf16 odd", 129, 136, 16384, BL); run_case(&g);
    g = base("plain f32 fast K=4096", 192, 256, 4096, P); g.dt = FP8KIT_F32; g.fast = 1; run_case(&g);
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* subnormal results keep few bits (the CPU rounds each block the same way): looser vs fp64 */
    g = base("tiny products f32 (subnormal D)", 130, 100, 256, P); g.scales = SC_TINY; g.dt = FP8KIT_F32;
    g.fast = 1; g.bound = 3e-3; run_case(&g);
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* scale arrays at odd addresses: byte loads for the blocked layout too */
    g = base("blocked misaligned scales", 190, 200, 512, BL); g.sc_off = 1; run_case(&g);
    g = base("plain misaligned scales", 190, 200, 512, P); g.sc_off = 3; run_case(&g);
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* more tiles than SMs (stage ring across tiles) */
    g = base("multi-tile bn128 blocked", 1100, 2048, 256, BL); g.bn = "128"; run_case(&g);
    g = base("multi-tile bn128 K=96 plain", 1300, 2000, 96, P); g.bn = "128"; run_case(&g);
    g = base("multi-tile bn64 gelu f16", 1999, 1000, 160, BL); g.bn = "64"; g.dt = FP8KIT_F16;
    g.bias = FP8KIT_BIAS_COL; g.act = FP8KIT_ACT_GELU_TANH; run_case(&g);
    /* 192-wide tiles (the planner's choice for e4m3 when every SM has a tile; B tables of 192 rows) */
    g = base("multi-tile bn192 narrow", 1100, 2000, 640, P); g.scales = SC_NARROW; g.bn = "192"; run_case(&g);
    g = base("multi-tile bn192 blocked bias", 1300, 1000, 288, BL); g.bn = "192"; g.bias = FP8KIT_BIAS_COL;
    run_case(&g);

    /* the workspace path: SC_NARROW (nearly every chunk normalized, most
     * stages promoted once), SC_ADV (2^-20 .. 2^20 mixed inside every chunk:
     * with the workspace at most 2x the error without), SC_UFLOW (A's
     * shifted blocks underflow) */
    g = base("narrow 512^3", 512, 512, 512, P); g.scales = SC_NARROW; run_case(&g);
    g = base("narrow 512^3 blocked f32 fast", 512, 512, 512, BL); g.scales = SC_NARROW; g.dt = FP8KIT_F32;
    g.fast = 1; run_case(&g);
    g = base("adv 512^3 f32 fast", 512, 512, 512, P); g.scales = SC_ADV; g.dt = FP8KIT_F32; g.fast = 1;
    run_case(&g);
    g = base("adv 512^3 blocked", 512, 512, 512, BL); g.scales = SC_ADV; run_case(&g);
    g = base("narrow tall", 2048, 256, 1024, P); g.scales = SC_NARROW; run_case(&g);
    g = base("adv tall blocked f32 fast", 2048, 256, 1024, BL); g.scales = SC_ADV; g.dt = FP8KIT_F32; g.fast = 1;
    run_case(&g);
    /* K = 544: four whole chunks and one of a single block */
    g = base("narrow odd K=544 plain", 200, 72, 544, P); g.scales = SC_NARROW; run_case(&g);
    g = base("narrow odd K=544 blocked", 200, 72, 544, BL); g.scales = SC_NARROW; run_case(&g);
    g = base("adv odd K=544 plain f32 fast", 200, 72, 544, P); g.scales = SC_ADV; g.dt = FP8KIT_F32; g.fast = 1;
    run_case(&g);
    g = base("adv odd K=544 blocked", 200, 72, 544, BL); g.scales = SC_ADV; run_case(&g);
    g = base("narrow e5m2 x e4m3", 256, 320, 1024, P); g.scales = SC_NARROW; g.at = FP8KIT_E5M2; run_case(&g);
    g = base("narrow e4m3 x e5m2 blocked", 256, 320, 1024, BL); g.scales = SC_NARROW; g.bt = FP8KIT_E5M2;
    run_case(&g);
    g = base("adv e5m2 x e5m2 f32 fast", 256, 192, 640, P); g.scales = SC_ADV; g.at = g.bt = FP8KIT_E5M2;
    g.dt = FP8KIT_F32; g.fast = 1; run_case(&g);
    /* products near 1 (centers 118 .. 122): the bias and the activation matter */
    g = base("narrow beta bias gelu K=640", 384, 320, 640, BL); g.scales = SC_NARROW; g.ctr_lo = 118;
    g.ctr_hi = 122; g.alpha = 0.75f; g.beta = 0.5f; g.ct = FP8KIT_BF16; g.bias = FP8KIT_BIAS_COL;
    g.biast = FP8KIT_BF16; g.act = FP8KIT_ACT_GELU_TANH; run_case(&g);
    /* A's codes below 2^-4 in chunks spanning exactly 4 binades, B's chunks
     * uniform: the shifted blocks underflow to subnormals and zero, and the
     * rounding is a large part of what those blocks contribute ("the rule
     * alone" line: the normalized operands' fp64 result against the exact
     * one; "ws / no ws": the errors with and without the workspace) */
    g = base("uflow A spread 4, tiny codes", 256, 192, 1024, P); g.scales = SC_UFLOW; run_case(&g);
    /* a real model's shapes, blocked scales, centers 116 .. 124 */
    g = base("narrow model 1024x1536x4096", 1024, 1536, 4096, BL); g.scales = SC_NARROW; g.ctr_lo = 116;
    g.ctr_hi = 124; run_case(&g);
    test_errors();
    if (g_perf)
        perf();
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_gemm_mx");
#else
    return FK_TEST_SKIP; /* (fk_test_cuda_skip said so) */
#endif
}
