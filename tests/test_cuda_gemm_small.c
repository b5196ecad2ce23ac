/* test_cuda_gemm_small.c - the small-M (decode) CUDA GEMM path
 * (src/cuda/gemm/sm90/small.cu) with its plan forced: the checks that the
 * cross-backend harness does not make. The table of CPU-vs-CUDA cases of the
 * small-M family at the planner's choice (every M class 1..128, every fp8
 * type pair, the epilogue options and output dtypes, K of 1 and 2 blocks)
 * lives in tests/test_xbackend.c. What stays here, each case against an fp64
 * reference from the dequantized operands (docs/spec.md section 3 bounds)
 * and against the CPU backend: every band height class and cluster split
 * (small_r / small_split), A multicast and the warpgroup column split
 * (small_mc / small_cs), launches with and without PDL, with and without the
 * per-cluster K rotation, M in two parts (small_mh), one or two accumulator
 * sets, ring depths, prefetch distance, B's L2 hint and promotion, odd
 * K-block counts per cluster member, K up to 16384 and the benchmark's
 * decode shapes. Every case runs twice and must give the same bits
 * (determinism). Each case's context has the tuning overrides (after those
 * it starts with, FP8KIT_TUNING) gemm_small=2, which makes a call fail when
 * the small path declines, so every case is known to run on it, and the
 * keys the case forces; fp8kit_gemm_describe shows the plan took them
 * (the small_* plan fields).
 * Exits 77 (skipped) without a usable CUDA device. Option: --small runs a
 * few small shapes (for compute-sanitizer). */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

static int g_small; /* --small */

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "test_cuda_util.h"

static fk_rng rng;
static fp8kit_ctx *cctx;

typedef struct scase {
    const char *name;
    int64_t m, n, k;
    fp8kit_dtype at, bt, dt;
    fp8kit_scale_mode sa, sb;
    float alpha, beta;
    fp8kit_dtype ct;
    fp8kit_bias_mode bias;
    fp8kit_dtype biast;
    fp8kit_activation act;
    fp8kit_out_quant oq;
    int fast;
    int heavy;
    int64_t ldd_pad;
    int r, split; /* tuning small_r / small_split, 0 = planner's choice */
    int mc, cs;   /* small_mc / small_cs (cs 1: on, -1: off = small_cs=0), 0 = planner's choice */
    int no_pdl;   /* small_pdl=0 */
    int rot;      /* small_rot=1: each cluster starts its K range at its own offset */
    const char *xk, *xv; /* one more tuning key (small_bpol, _bpromo, _pf, _stages, _pp, _mh) and its value */
    double bound; /* 0 = by output dtype */
} scase;

static float rand_val(int heavy) { return (float)(heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng)); }

static float rand_scale(int lo, int hi)
{
    return (float)ldexp(1.0 + fk_rng_unif(&rng), lo + (int)(fk_rng_u32(&rng) % (uint32_t)(hi - lo)));
}

/* Appends to the text in buf (n bytes). */
static void append(char *buf, size_t n, const char *fmt, ...)
{
    const size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
}

/* The value of " key=" in a plan description (fp8kit_gemm_describe), or -1. */
static int plan_field(const char *plan, const char *key)
{
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(plan, pat);
    return p ? atoi(p + strlen(pat)) : -1;
}

/* The flags field's bits (src/cuda/gemm/sm90/small.cu) */
#define PLAN_ROT 1
#define PLAN_BNOHINT 2
#define PLAN_NOPP 4

/* Gives c the overrides it starts with, then gemm_small=2 and the keys g
 * forces; checks that the plan of the call (desc, ga), written to plan (n
 * bytes), took them. */
static void force(fp8kit_ctx *c, const scase *g, const fp8kit_gemm_desc *desc, const fp8kit_gemm_args *ga,
                  char *plan, size_t n)
{
    char spec[768] = "";
    CHECK_STATUS(fp8kit_ctx_get_tuning(c, spec, 512), FP8KIT_OK);
    append(spec, sizeof spec, "%sgemm_small=2", spec[0] ? "," : "");
    if (g->r) append(spec, sizeof spec, ",small_r=%d", g->r);
    if (g->split) append(spec, sizeof spec, ",small_split=%d", g->split);
    if (g->mc) append(spec, sizeof spec, ",small_mc=%d", g->mc);
    if (g->cs) append(spec, sizeof spec, ",small_cs=%d", g->cs > 0);
    if (g->no_pdl) append(spec, sizeof spec, ",small_pdl=0");
    if (g->rot) append(spec, sizeof spec, ",small_rot=1");
    if (g->xk) append(spec, sizeof spec, ",%s=%s", g->xk, g->xv);
    fp8kit_status st = fp8kit_ctx_set_tuning(c, spec);
    CHECK(st == FP8KIT_OK, "%s: set_tuning(\"%s\"): %s (%s)", g->name, spec, fp8kit_status_string(st),
          fp8kit_last_error(c));
    st = fp8kit_gemm_describe(c, desc, ga, plan, n);
    CHECK(st == FP8KIT_OK, "%s: fp8kit_gemm_describe: %s (%s)", g->name, fp8kit_status_string(st),
          fp8kit_last_error(c));
    if (st != FP8KIT_OK)
        return;
    CHECK(strncmp(plan, "sm90_small ", 11) == 0, "%s: not the small-M kernel: %s", g->name, plan);
    const int bw = plan_field(plan, "bw"), w = plan_field(plan, "w"), flags = plan_field(plan, "flags");
    const int xv = g->xv ? atoi(g->xv) : 0;
    CHECK(!g->r || plan_field(plan, "r") == g->r, "%s: small_r=%d, plan %s", g->name, g->r, plan);
    CHECK(!g->split || plan_field(plan, "split") == g->split, "%s: small_split=%d, plan %s", g->name, g->split, plan);
    CHECK(!g->mc || plan_field(plan, "mc") == g->mc, "%s: small_mc=%d, plan %s", g->name, g->mc, plan);
    /* column split: two warpgroups over the band's columns (w 2 of a band 1 wide) */
    CHECK(g->cs <= 0 || (bw == 1 && w == 2), "%s: small_cs=1, plan %s", g->name, plan);
    CHECK(g->cs >= 0 || w == bw, "%s: small_cs=0 (off), plan %s", g->name, plan);
    CHECK(!g->no_pdl || (plan_field(plan, "pdl") == 0 && plan_field(plan, "pf") == 0), "%s: small_pdl=0, plan %s",
          g->name, plan);
    CHECK(!g->rot || (flags >= 0 && (flags & PLAN_ROT)), "%s: small_rot=1, plan %s", g->name, plan);
    if (g->xk && strcmp(g->xk, "small_bpol") == 0)
        CHECK(flags >= 0 && !(flags & PLAN_BNOHINT) == !xv, "%s: small_bpol=%d, plan %s", g->name, xv, plan);
    if (g->xk && strcmp(g->xk, "small_pp") == 0)
        CHECK(flags >= 0 && !(flags & PLAN_NOPP) == !!xv, "%s: small_pp=%d, plan %s", g->name, xv, plan);
    if (g->xk && strcmp(g->xk, "small_bpromo") == 0)
        CHECK(plan_field(plan, "bpromo") == xv, "%s: small_bpromo=%d, plan %s", g->name, xv, plan);
    if (g->xk && strcmp(g->xk, "small_pf") == 0)
        CHECK(plan_field(plan, "pf") == xv, "%s: small_pf=%d, plan %s", g->name, xv, plan);
    if (g->xk && strcmp(g->xk, "small_mh") == 0)
        CHECK(plan_field(plan, "mh") == xv, "%s: small_mh=%d, plan %s", g->name, xv, plan);
    /* A's rows per stage: M rounded up to 8 below the row width (32 / 64 / 128 by M, 64 in parts), alone
     * only (a multicast cluster shares A's box in halves) */
    {
        const int mh = plan_field(plan, "mh"), mc = plan_field(plan, "mc");
        const int nt = g->m <= 32 ? 32 : g->m <= 64 || mh == 2 ? 64 : 128;
        const int ra = mh == 1 && mc == 1 && (g->m + 7) / 8 * 8 < nt ? (int)((g->m + 7) / 8 * 8) : nt;
        CHECK(plan_field(plan, "ra") == ra, "%s: A's rows per stage %d expected, plan %s", g->name, ra, plan);
    }
    if (g->xk && strcmp(g->xk, "small_stages") == 0) /* deeper than the default 8, as deep as shared memory allows */
        CHECK(plan_field(plan, "stages") > 8 && plan_field(plan, "stages") <= xv, "%s: small_stages=%d, plan %s",
              g->name, xv, plan);
}

static void run_case(const scase *g)
{
    const int64_t M = g->m, N = g->n, K = g->k;
    const int e5a = g->at == FP8KIT_E5M2, e5b = g->bt == FP8KIT_E5M2;
    uint8_t *A = malloc((size_t)(M * K)), *B = malloc((size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++) A[i] = fk_f32_to_fp8(rand_val(g->heavy) * (e5a ? 64.0f : 32.0f), e5a);
    for (int64_t i = 0; i < N * K; i++) B[i] = fk_f32_to_fp8(rand_val(g->heavy) * (e5b ? 64.0f : 32.0f), e5b);
    int64_t nsa = g->sa == FP8KIT_SCALE_ROW ? M : 1, nsb = g->sb == FP8KIT_SCALE_ROW ? N : 1;
    float *SA = malloc((size_t)nsa * 4), *SB = malloc((size_t)nsb * 4);
    for (int64_t i = 0; i < nsa; i++) SA[i] = rand_scale(-9, -5);
    for (int64_t i = 0; i < nsb; i++) SB[i] = rand_scale(-9, -5);
    const fp8kit_dtype ct = g->ct ? g->ct : FP8KIT_F32, biast = g->biast ? g->biast : FP8KIT_F32;
    const size_t hs = fp8kit_dtype_size(ct);
    void *C = malloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * N; i++) store_hp(C, i, ct, rand_val(0));
    const int64_t nb = g->bias == FP8KIT_BIAS_ROW ? M : N;
    void *BI = malloc((size_t)nb * 4);
    for (int64_t i = 0; i < nb; i++) store_hp(BI, i, biast, rand_val(0));
    const float scale_d = 0.25f;

    /* fp64 reference y */
    double *ref = malloc((size_t)(M * N) * sizeof(double)), *da = malloc((size_t)K * sizeof(double));
    for (int64_t m = 0; m < M; m++) {
        const double s = g->sa == FP8KIT_SCALE_TENSOR ? SA[0] : g->sa == FP8KIT_SCALE_ROW ? SA[m] : 1.0;
        for (int64_t k = 0; k < K; k++) da[k] = fk_fp8_to_f32(A[m * K + k], e5a) * s;
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            const uint8_t *b = B + n * K;
            for (int64_t k = 0; k < K; k++) acc += da[k] * fk_fp8_to_f32(b[k], e5b);
            if (g->sb == FP8KIT_SCALE_TENSOR) acc *= SB[0];
            else if (g->sb == FP8KIT_SCALE_ROW) acc *= SB[n];
            double y = (double)g->alpha * acc;
            if (g->beta != 0.0f) y += (double)g->beta * load_hp(C, m * N + n, ct);
            if (g->bias == FP8KIT_BIAS_COL) y += load_hp(BI, n, biast);
            if (g->bias == FP8KIT_BIAS_ROW) y += load_hp(BI, m, biast);
            ref[m * N + n] = fk_ref_act(y, g->act);
        }
    }

    const size_t ds = fp8kit_dtype_size(g->dt);
    const int64_t ldd = N + g->ldd_pad;
    const size_t dbytes = (size_t)(M * ldd) * ds;
    void *dA = dmalloc((size_t)(M * K)), *dB = dmalloc((size_t)(N * K));
    void *dSA = dmalloc((size_t)nsa * 4), *dSB = dmalloc((size_t)nsb * 4);
    void *dC = dmalloc((size_t)(M * N) * hs), *dBI = dmalloc((size_t)nb * 4), *dD = dmalloc(dbytes);
    void *dSD = dmalloc(4), *dAM = dmalloc(4);
    h2d(dA, A, (size_t)(M * K));
    h2d(dB, B, (size_t)(N * K));
    h2d(dSA, SA, (size_t)nsa * 4);
    h2d(dSB, SB, (size_t)nsb * 4);
    h2d(dC, C, (size_t)(M * N) * hs);
    h2d(dBI, BI, (size_t)nb * fp8kit_dtype_size(biast));
    h2d(dSD, &scale_d, 4);

    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = g->sa;
    desc.scale_b = g->sb;
    desc.bias = g->bias;
    desc.act = g->act;
    desc.out_quant = g->oq;
    desc.fast_accum = g->fast;
    int64_t one = 1;
    fp8kit_gemm_args ga, ca;
    memset(&ga, 0, sizeof ga);
    ga.a = fp8kit_tensor_2d(dA, g->at, M, K, K);
    ga.b = fp8kit_tensor_2d(dB, g->bt, N, K, K);
    if (g->sa) ga.scale_a = fp8kit_tensor_make(dSA, FP8KIT_F32, 1, g->sa == FP8KIT_SCALE_TENSOR ? &one : &nsa);
    if (g->sb) ga.scale_b = fp8kit_tensor_make(dSB, FP8KIT_F32, 1, g->sb == FP8KIT_SCALE_TENSOR ? &one : &nsb);
    ga.alpha = g->alpha;
    ga.beta = g->beta;
    if (g->beta != 0.0f) ga.c = fp8kit_tensor_2d(dC, ct, M, N, N);
    if (g->bias) ga.bias = fp8kit_tensor_make(dBI, biast, 1, &nb);
    ga.d = fp8kit_tensor_2d(dD, g->dt, M, N, ldd);
    if (g->oq == FP8KIT_OUTQ_SCALED) {
        ga.scale_d = fp8kit_tensor_make(dSD, FP8KIT_F32, 1, &one);
        ga.amax_d = (float *)dAM;
    }
    /* a fresh context per case with the case's tuning */
    fp8kit_ctx *gctx = NULL;
    char plan[512] = "";
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx), FP8KIT_OK);
    if (gctx)
        force(gctx, g, &desc, &ga, plan, sizeof plan);
    unsigned char *D = malloc(dbytes), *D2 = malloc(dbytes);
    float amax = 0.0f, amax2 = -1.0f;
    for (int rep = 0; rep < 2; rep++) {
        CHECK(cudaMemset(dD, 0xFF, dbytes) == cudaSuccess, "memset"); /* NaN poison */
        CHECK(cudaMemset(dAM, 0xFF, 4) == cudaSuccess, "memset");
        fp8kit_status st = fp8kit_gemm(gctx, &desc, &ga, NULL);
        CHECK(st == FP8KIT_OK, "%s: fp8kit_gemm (cuda) returned %s: %s", g->name, fp8kit_status_string(st),
              fp8kit_last_error(gctx));
        cudaError_t ce = cudaDeviceSynchronize();
        CHECK(ce == cudaSuccess, "%s: kernel failed: %s", g->name, cudaGetErrorString(ce));
        if (ce != cudaSuccess) exit(1); /* the context is unusable */
        d2h(rep ? D2 : D, dD, dbytes);
        d2h(rep ? &amax2 : &amax, dAM, 4);
    }
    fp8kit_ctx_destroy(gctx);
    CHECK(memcmp(D, D2, dbytes) == 0 && memcmp(&amax, &amax2, 4) == 0, "%s: two runs differ (not deterministic)",
          g->name);

    /* the CPU backend on the same inputs */
    unsigned char *Dc = malloc(dbytes);
    memset(Dc, 0xFF, dbytes);
    float amax_c = -1.0f, sd_host = scale_d;
    ca = ga;
    ca.a.data = A; ca.b.data = B; ca.scale_a.data = g->sa ? SA : NULL; ca.scale_b.data = g->sb ? SB : NULL;
    ca.c.data = g->beta != 0.0f ? C : NULL; ca.bias.data = g->bias ? BI : NULL; ca.d.data = Dc;
    if (g->oq == FP8KIT_OUTQ_SCALED) { ca.scale_d.data = &sd_host; ca.amax_d = &amax_c; }
    fp8kit_status cst = fp8kit_gemm(cctx, &desc, &ca, NULL);
    CHECK(cst == FP8KIT_OK, "%s: fp8kit_gemm (cpu) returned %s: %s", g->name, fp8kit_status_string(cst),
          fp8kit_last_error(cctx));

    const int fp8out = g->dt == FP8KIT_E4M3 || g->dt == FP8KIT_E5M2;
    const double oscale = g->oq == FP8KIT_OUTQ_SCALED ? scale_d : 1.0;
    double bound = g->bound;
    if (bound == 0.0)
        bound = g->dt == FP8KIT_F32 ? 1e-5 : g->dt == FP8KIT_BF16 ? 4e-3 : g->dt == FP8KIT_F16 ? 1e-3
              : g->dt == FP8KIT_E4M3 ? 0.05 : 0.09;
    double num = 0, den = 0, numc = 0, ref_amax = 0, ref_rms = 0;
    for (int64_t i = 0; i < M * N; i++) ref_rms += ref[i] * ref[i];
    ref_rms = sqrt(ref_rms / (double)(M * N));
    long bad = 0, nan_bad = 0, pad_bad = 0, fp8_far = 0;
    const double el = g->dt == FP8KIT_E5M2 ? 0.13 : g->dt == FP8KIT_E4M3 ? 0.07 : 0.02;
    const double fp8_lim = g->dt == FP8KIT_E5M2 ? 57344.0 : 448.0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t n = 0; n < N; n++) {
            const double y = ref[m * N + n];
            if (fabs(y) > ref_amax) ref_amax = fabs(y);
            /* fp8 D saturates (docs/spec.md section 1, satfinite): compare with the saturated reference */
            const double r = fp8out && !isnan(y) ? fmax(-fp8_lim * oscale, fmin(fp8_lim * oscale, y)) : y;
            const double v = out_val(D, m * ldd + n, g->dt) * oscale, vc = out_val(Dc, m * ldd + n, g->dt) * oscale;
            if (isnan(v) && !isnan(r)) {
                if (nan_bad++ < 3) fprintf(stderr, "  %s: NaN at (%lld, %lld)\n", g->name, (long long)m, (long long)n);
                continue;
            }
            num += (v - r) * (v - r);
            den += r * r;
            numc += (v - vc) * (v - vc);
            if (fabs(v - r) > el * fmax(fabs(r), ref_rms) + 1e-30 && bad++ < 3)
                fprintf(stderr, "  %s: (%lld, %lld) = %g, ref %g\n", g->name, (long long)m, (long long)n, v, r);
            if (fp8out && fabs(r) > 1e-2 * ref_rms) {
                const uint8_t q = D[m * ldd + n], qc = Dc[m * ldd + n];
                const int dq = (q & 0x80) == (qc & 0x80) ? abs((q & 0x7F) - (qc & 0x7F)) : (q & 0x7F) + (qc & 0x7F);
                if (dq > 1 && fp8_far++ < 3)
                    fprintf(stderr, "  %s: fp8 code %02x vs cpu %02x at (%lld, %lld)\n", g->name, q, qc, (long long)m,
                            (long long)n);
            }
        }
        for (int64_t n = N; n < ldd; n++)
            for (size_t b = 0; b < ds; b++) pad_bad += D[(size_t)(m * ldd + n) * ds + b] != 0xFF;
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num), relc = den > 0 ? sqrt(numc / den) : sqrt(numc);
    printf("  %-30s %4lldx%5lldx%5lld R %3d split %d mc %d cs %2d  rel %.3e (vs cpu %.3e) bound %.0e\n", g->name,
           (long long)M, (long long)N, (long long)K, g->r, g->split, g->mc, g->cs, rel, relc, bound);
    printf("  %-30s %s\n", "", plan);
    CHECK(rel <= bound, "%s: rel error %.3e > %.1e", g->name, rel, bound);
    CHECK(relc <= 2 * bound, "%s: differs from the CPU backend by %.3e", g->name, relc);
    CHECK(nan_bad == 0, "%s: %ld NaN outputs", g->name, nan_bad);
    CHECK(bad == 0, "%s: %ld elements far from the reference", g->name, bad);
    CHECK(pad_bad == 0, "%s: %ld bytes written in D's row padding", g->name, pad_bad);
    CHECK(fp8_far == 0, "%s: %ld fp8 codes more than one step from the CPU's", g->name, fp8_far);
    if (g->oq == FP8KIT_OUTQ_SCALED) {
        CHECK(fabs(amax - ref_amax) <= 1e-3 * ref_amax, "%s: amax %g, ref %g", g->name, amax, ref_amax);
        CHECK(fabs(amax - amax_c) <= 1e-3 * ref_amax, "%s: amax %g, cpu %g", g->name, amax, amax_c);
    }
    free(A); free(B); free(SA); free(SB); free(C); free(BI); free(ref); free(da); free(D); free(D2); free(Dc);
    cudaFree(dA); cudaFree(dB); cudaFree(dSA); cudaFree(dSB); cudaFree(dC); cudaFree(dBI); cudaFree(dD);
    cudaFree(dSD); cudaFree(dAM);
}

static scase base(const char *name, int64_t m, int64_t n, int64_t k)
{
    scase g;
    memset(&g, 0, sizeof g);
    g.name = name; g.m = m; g.n = n; g.k = k;
    g.at = g.bt = FP8KIT_E4M3;
    g.dt = FP8KIT_BF16;
    g.sa = g.sb = FP8KIT_SCALE_TENSOR;
    g.alpha = 1.0f;
    return g;
}

/* fp32 output with fast_accum (precise fp32 takes the general fp16-copy path);
 * this path still promotes every 128 of K: the tensor-core floor bound of
 * test_cuda_gemm.c. */
static void f32(scase *g)
{
    g->dt = FP8KIT_F32;
    g->fast = 1;
    g->bound = 5e-4;
}
#endif

/* Reads the options; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv)
{
    const fk_test_flag flags[] = {
        {"small", &g_small, "a few small shapes only (for compute-sanitizer)"},
    };
    return fk_test_flags("test_cuda_gemm_small", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
}

int main(int argc, char **argv)
{
    const int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    const int skip = fk_test_cuda_skip("test_cuda_gemm_small");
    if (skip >= 0)
        return skip;
#ifdef FP8KIT_HAVE_CUDA
    rng = fk_rng_seeded("test_cuda_gemm_small");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
    if (!cctx)
        return fk_test_summary("test_cuda_gemm_small");
    const int small = g_small;
    scase g;

    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    g = base("odd R 55", 20, 700, 384); g.r = 55; run_case(&g);
    g = base("R 24 split 2 K 1168", 70, 500, 1168); g.split = 2; g.r = 24; run_case(&g);
    g = base("split 2 R 64 row bias", 37, 333, 1024); g.r = 64; g.split = 2;
    g.sa = g.sb = FP8KIT_SCALE_ROW; g.bias = FP8KIT_BIAS_COL; run_case(&g);
    g = base("split 4 R 128 fp8 scaled", 100, 300, 2048); g.r = 128; g.split = 4;
    g.dt = FP8KIT_E4M3; g.oq = FP8KIT_OUTQ_SCALED; g.act = FP8KIT_ACT_GELU_TANH; run_case(&g);
    g = base("mc 2 R 40 odd bands cs", 100, 500, 768); g.r = 40; g.mc = 2; g.cs = 1; run_case(&g);
    g = base("mc 2 split 2 R 32 row scales", 128, 300, 1024); g.r = 32; g.split = 2; g.mc = 2;
    g.sa = g.sb = FP8KIT_SCALE_ROW; run_case(&g);
    g = base("mc 2 M 5 no PDL", 5, 400, 512); g.mc = 2; g.no_pdl = 1; run_case(&g);
    g = base("M in 2 parts M 100 split 2 row", 100, 700, 1024); g.xk = "small_mh"; g.xv = "2"; g.split = 2;
    g.r = 32; g.sa = g.sb = FP8KIT_SCALE_ROW; g.bias = FP8KIT_BIAS_ROW; run_case(&g);
    if (small) {
        fp8kit_ctx_destroy(cctx);
        return fk_test_summary("test_cuda_gemm_small");
    }

    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* band heights and splits: W = 1 and 2, R not a multiple of 64, edges */
    static const int rs[][2] = {{8, 1},  {16, 2},  {56, 1},  {64, 4}, {72, 2}, {112, 2},
                                {120, 1}, {128, 4}, {40, 4},  {55, 1}, {13, 2}, {101, 4}};
    static char rnames[12][32];
    for (int i = 0; i < 12; i++) {
        snprintf(rnames[i], sizeof rnames[i], "R %d split %d", rs[i][0], rs[i][1]);
        g = base(rnames[i], i % 2 ? 128 : 61, 1000 + 7 * i, 1024 + 16 * i);
        g.r = rs[i][0]; g.split = rs[i][1];
        run_case(&g);
    }
    /* A multicast over 2 bands (mc), column split of the two warpgroups
     * (cs), clusters of up to 8, launches without PDL */
    g = base("mc 2 R 56 M 64", 64, 1000, 1024); g.r = 56; g.mc = 2; run_case(&g);
    g = base("mc 2 M 16 half box OOB", 16, 1200, 2048); g.mc = 2; g.r = 48; run_case(&g);
    g = base("mc 2 split 2 M 128 cs", 128, 900, 2048); g.r = 32; g.split = 2; g.mc = 2; run_case(&g);
    g = base("mc 2 split 4 M 33 cluster 8", 33, 600, 2048); g.r = 64; g.split = 4; g.mc = 2; run_case(&g);
    g = base("mc 2 R 120 M 96", 96, 1000, 1536); g.r = 120; g.mc = 2; run_case(&g);
    g = base("mc 1 cs off M 128 R 48", 128, 700, 1024); g.r = 48; g.mc = 1; g.cs = -1; run_case(&g);
    g = base("cs M 64 R 24 split 2 f32", 64, 333, 1536); f32(&g); g.r = 24; g.split = 2; g.cs = 1; run_case(&g);
    g = base("mc 2 fp8 scaled gelu_erf", 70, 640, 1024); g.mc = 2; g.dt = FP8KIT_E5M2; g.oq = FP8KIT_OUTQ_SCALED;
    g.act = FP8KIT_ACT_GELU_ERF; g.bias = FP8KIT_BIAS_COL; g.beta = 0.5f; g.ct = FP8KIT_BF16; run_case(&g);
    g = base("no PDL split 2", 40, 900, 1024); g.split = 2; g.no_pdl = 1; run_case(&g);
    g = base("K rotation mc 2", 64, 1000, 1168); g.r = 56; g.mc = 2; g.rot = 1; run_case(&g);
    g = base("K rotation split 4 K 1040", 128, 1100, 1040); g.r = 24; g.split = 4; g.rot = 1; run_case(&g);
    g = base("B without L2 hint", 20, 900, 1024); g.xk = "small_bpol"; g.xv = "1"; run_case(&g);
    g = base("B promotion none", 48, 700, 768); g.xk = "small_bpromo"; g.xv = "0"; g.split = 2; run_case(&g);
    g = base("B promotion 128 B", 1, 1500, 2048); g.xk = "small_bpromo"; g.xv = "2"; run_case(&g);
    g = base("prefetch 40 K blocks", 8, 1200, 4096); g.xk = "small_pf"; g.xv = "40"; run_case(&g);
    g = base("B promotion 256 B", 64, 1000, 1024); g.xk = "small_bpromo"; g.xv = "3"; run_case(&g);
    g = base("M in 2 parts M 128 R 64 split 4", 128, 2112, 1792); g.xk = "small_mh"; g.xv = "2"; g.r = 64;
    g.split = 4; run_case(&g);
    g = base("M in 2 parts M 65 mc 2 fp8", 65, 900, 1024); g.xk = "small_mh"; g.xv = "2"; g.mc = 2;
    g.dt = FP8KIT_E4M3; g.oq = FP8KIT_OUTQ_SCALED; g.act = FP8KIT_ACT_SILU; run_case(&g);
    g = base("M in 2 parts M 127 cs off R 120", 127, 1000, 2048); g.xk = "small_mh"; g.xv = "2"; g.cs = -1;
    g.r = 120; g.sb = FP8KIT_SCALE_ROW; run_case(&g);
    g = base("16 stages", 32, 1300, 3072); g.xk = "small_stages"; g.xv = "16"; run_case(&g);
    g = base("one accumulator set M 64", 64, 900, 1152); g.xk = "small_pp"; g.xv = "0"; run_case(&g);
    g = base("one accumulator set split 2", 17, 800, 2048); g.xk = "small_pp"; g.xv = "0"; g.split = 2;
    run_case(&g);
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* K blocks per CTA 1 + 2 (the two accumulator sets' odd and even tails) */
    g = base("split 2 K 384 (1 + 2 blocks)", 64, 500, 384); g.split = 2; g.r = 40; run_case(&g);
    /* odd K-block counts per cluster member */
    g = base("R 56 split 2 K 1040", 64, 1500, 1040); g.r = 56; g.split = 2; run_case(&g);
    g = base("R 16 K 2064", 5, 900, 2064); g.r = 16; g.sb = FP8KIT_SCALE_ROW; run_case(&g);
    g = base("R 128 split 2 K 1536", 20, 1300, 1536); g.r = 128; g.split = 2; run_case(&g);
    g = base("R 96 M 128 K 656", 128, 1000, 656); g.r = 96; run_case(&g);
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    /* long K, and the decode shapes of the benchmark with the planner's choice */
    g = base("f32 K=16384", 128, 264, 16384); f32(&g); run_case(&g);
    g = base("bf16 K=16384 M=5", 5, 2000, 16384); run_case(&g);
    g = base("decode 64x7168x7168", 64, 7168, 7168); run_case(&g);
    g = base("decode 128x2112x7168", 128, 2112, 7168); run_case(&g);
    g = base("decode 1x7168x7168 row", 1, 7168, 7168); g.sa = g.sb = FP8KIT_SCALE_ROW; run_case(&g);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_gemm_small");
#else
    return FK_TEST_SKIP; /* (fk_test_cuda_skip said so) */
#endif
}
