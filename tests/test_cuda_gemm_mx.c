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
 * forced with fp8kit_ctx_set_tuning (gemm_bn). Options: --perf also times
 * 8192^3 (CUDA events, median of 10) next to the tensor-scaled kernel in the
 * same run; --small runs one small shape and the errors only (for
 * compute-sanitizer). Exits 77 without a usable device. */
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
#include "test_cuda_util.h"

static fk_rng rng;
static fp8kit_ctx *gctx, *cctx;

enum { SC_REAL = 0, SC_EDGE = 1, SC_NAN = 2, SC_TINY = 3, SC_HUGE = 4 };

typedef struct mcase {
    const char *name;
    int64_t m, n, k;
    fp8kit_dtype at, bt, dt;
    fp8kit_scale_layout layout;
    int scales;         /* SC_REAL, SC_EDGE, SC_NAN, SC_TINY, SC_HUGE: see make_exps */
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
 * both only come out right through the exact path. */
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

/* One MX GEMM on both backends; checks the GPU result. */
static void run_case(const mcase *g)
{
    const int64_t M = g->m, N = g->n, K = g->k, kbs = K / 32;
    const int e5a = g->at == FP8KIT_E5M2, e5b = g->bt == FP8KIT_E5M2;
    uint8_t *A = malloc((size_t)(M * K + 1)), *B = malloc((size_t)(N * K + 1));
    const float small = g->scales == SC_HUGE ? 0x1p-11f : 1.0f;
    for (int64_t i = 0; i < M * K; i++)
        A[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * (e5a ? 64.0f : 32.0f) * small, e5a);
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
    double *da = malloc((size_t)K * sizeof(double)), *db = malloc((size_t)(N * K) * sizeof(double));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const uint8_t e = eb[n * kbs + k / 32];
            db[n * K + k] = e == 255 ? NAN : ldexp(fk_fp8_to_f32(B[n * K + k], e5b), e - 127);
        }
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            const uint8_t e = ea[m * kbs + k / 32];
            da[k] = e == 255 ? NAN : ldexp(fk_fp8_to_f32(A[m * K + k], e5a), e - 127);
        }
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            const double *b = db + n * K;
            for (int64_t k = 0; k < K; k++)
                acc += da[k] * b[k];
            double y = (double)g->alpha * acc;
            if (g->beta != 0.0f) y += (double)g->beta * load_hp(C, m * N + n, g->ct);
            if (g->bias == FP8KIT_BIAS_COL) y += load_hp(BI, n, g->biast);
            if (g->bias == FP8KIT_BIAS_ROW) y += load_hp(BI, m, g->biast);
            ref[m * N + n] = fk_ref_act(y, g->act);
        }
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
    CHECK(cudaMemset(dD, 0xFF, dbytes) == cudaSuccess, "memset"); /* NaN poison */

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
    fp8kit_status st = c ? fp8kit_gemm(c, &desc, &ga, NULL) : FP8KIT_ERR_INTERNAL;
    CHECK(st == FP8KIT_OK, "%s: fp8kit_gemm (cuda) returned %s: %s", g->name, fp8kit_status_string(st),
          c ? fp8kit_last_error(c) : "no context");
    cudaError_t ce = cudaDeviceSynchronize();
    CHECK(ce == cudaSuccess, "%s: kernel failed: %s", g->name, cudaGetErrorString(ce));
    if (g->bn && c)
        fp8kit_ctx_destroy(c);
    unsigned char *D = malloc(dbytes), *Dc = malloc(dbytes);
    d2h(D, dD, dbytes);

    ca = ga;
    ca.a.data = A; ca.b.data = B; ca.scale_a.data = SA + g->sc_off; ca.scale_b.data = SB + g->sc_off;
    ca.c.data = g->beta != 0.0f ? C : NULL; ca.bias.data = g->bias ? BI : NULL; ca.d.data = Dc;
    memset(Dc, 0xFF, dbytes);
    fp8kit_status cst = fp8kit_gemm(cctx, &desc, &ca, NULL);
    CHECK(cst == FP8KIT_OK, "%s: fp8kit_gemm (cpu) returned %s: %s", g->name, fp8kit_status_string(cst),
          fp8kit_last_error(cctx));

    double bound = g->bound;
    if (bound == 0.0)
        bound = g->dt == FP8KIT_F32 ? 2e-4 : g->dt == FP8KIT_BF16 ? 4e-3 : 1e-3;
    double num = 0, den = 0, numc = 0;
    long nan_bad = 0, nan_miss = 0, bad = 0, nref = 0;
    for (int64_t i = 0; i < M * N; i++)
        if (!isnan(ref[i])) {
            den += ref[i] * ref[i];
            nref++;
        }
    const double rms = sqrt(den / (double)(nref ? nref : 1));
    for (int64_t i = 0; i < M * N; i++) {
        const double r = ref[i], v = load_hp(D, i, g->dt), vc = load_hp(Dc, i, g->dt);
        if (isnan(r)) {
            if (!isnan(v) && nan_miss++ < 3)
                fprintf(stderr, "  %s: (%lld, %lld) = %g, ref NaN\n", g->name, (long long)(i / N), (long long)(i % N), v);
            continue;
        }
        if (isnan(v)) {
            if (nan_bad++ < 3)
                fprintf(stderr, "  %s: NaN at (%lld, %lld), ref %g\n", g->name, (long long)(i / N), (long long)(i % N), r);
            continue;
        }
        num += (v - r) * (v - r);
        numc += (v - vc) * (v - vc);
        if (fabs(v - r) > 0.02 * fmax(fabs(r), rms) + 1e-30 && bad++ < 3)
            fprintf(stderr, "  %s: (%lld, %lld) = %g, ref %g, cpu %g\n", g->name, (long long)(i / N),
                    (long long)(i % N), v, r, vc);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num), relc = den > 0 ? sqrt(numc / den) : sqrt(numc);
    printf("  %-34s %5lldx%5lldx%5lld  rel %.3e  (vs cpu %.3e)  bound %.0e\n", g->name, (long long)M, (long long)N,
           (long long)K, rel, relc, bound);
    if (plan[0])
        printf("  %-34s gemm_bn=%s: %s\n", "", g->bn, plan);
    CHECK(rel <= bound, "%s: rel error %.3e > %.1e", g->name, rel, bound);
    CHECK(relc <= 2 * bound, "%s: differs from the CPU backend by %.3e", g->name, relc);
    CHECK(nan_bad == 0, "%s: %ld NaN outputs where the reference has none", g->name, nan_bad);
    CHECK(nan_miss == 0, "%s: %ld finite outputs where the reference is NaN", g->name, nan_miss);
    CHECK(bad == 0, "%s: %ld elements far from the reference", g->name, bad);
    CHECK(den > 0, "%s: degenerate reference", g->name);
    free(A); free(B); free(ea); free(eb); free(SA); free(SB); free(C); free(BI); free(ref); free(da); free(db);
    free(D); free(Dc);
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

/* Median time of 10 calls (after 2 warm-ups) of one 8192^3 GEMM, bf16 out. */
static double time_gemm(fp8kit_scale_mode mode, fp8kit_scale_layout layout, void *dA, void *dB, void *dSA, void *dSB,
                        int64_t nsa, void *dD, int64_t S)
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
    qsort(ms, 10, sizeof ms[0], cmp_f);
    return 0.5 * (ms[4] + ms[5]);
}

static void perf(void)
{
    const int64_t S = 8192, kbs = S / 32, nsa = S * kbs;
    uint8_t *h = malloc((size_t)(S * S));
    for (int64_t i = 0; i < S * S; i++)
        h[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * 32.0f, 0);
    uint8_t *hs = malloc((size_t)nsa);
    for (int64_t i = 0; i < nsa; i++)
        hs[i] = (uint8_t)rnd(120, 134);
    void *dA = dmalloc((size_t)(S * S)), *dB = dmalloc((size_t)(S * S)), *dD = dmalloc((size_t)(S * S) * 2);
    void *dSA = dmalloc((size_t)nsa), *dSB = dmalloc((size_t)nsa);
    float *dT = dmalloc(8);
    const float ones[2] = {1.0f, 1.0f};
    h2d(dA, h, (size_t)(S * S));
    h2d(dB, h, (size_t)(S * S));
    h2d(dSA, hs, (size_t)nsa);
    h2d(dSB, hs, (size_t)nsa);
    h2d(dT, ones, 8);
    const double flop = 2.0 * (double)S * (double)S * (double)S;
    const double t_mx = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, dA, dB, dSA, dSB, nsa, dD, S);
    const double t_mxb = time_gemm(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED, dA, dB, dSA, dSB, nsa, dD, S);
    const double t_t = time_gemm(FP8KIT_SCALE_TENSOR, FP8KIT_LAYOUT_PLAIN, dA, dB, dT, dT + 1, 1, dD, S);
    printf("  perf 8192^3 bf16 out, median of 10 (CUDA events):\n");
    printf("    mx plain    %8.3f ms  %7.1f TFLOP/s\n", t_mx, flop / (t_mx * 1e-3) / 1e12);
    printf("    mx blocked  %8.3f ms  %7.1f TFLOP/s\n", t_mxb, flop / (t_mxb * 1e-3) / 1e12);
    printf("    tensor      %8.3f ms  %7.1f TFLOP/s  (same run; mx / tensor = %.2f)\n", t_t,
           flop / (t_t * 1e-3) / 1e12, t_t / t_mx);
    free(h); free(hs);
    cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dSA); cudaFree(dSB); cudaFree(dT);
}
#endif /* FP8KIT_HAVE_CUDA */

/* Reads the options; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv)
{
    const fk_test_flag flags[] = {
        {"small", &g_small, "a few small shapes only (for compute-sanitizer)"},
        {"perf", &g_perf, "also time 8192^3 next to the tensor-scaled kernel"},
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
        test_errors();
        fp8kit_ctx_destroy(gctx);
        fp8kit_ctx_destroy(cctx);
        return fk_test_summary("test_cuda_gemm_mx");
    }

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
