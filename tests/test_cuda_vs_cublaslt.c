/* test_cuda_vs_cublaslt.c - docs/spec.md section 3's relative accuracy rule on the GPU:
 * our GEMM's error against an fp64 reference (from the dequantized operands)
 * must never exceed 1.5x the error of cuBLASLt on the same inputs, in the
 * same mode (per-tensor and per-row "outer vector" scales, precise and fast
 * accumulation; fast bf16/f16 are reported, not held to it), for bf16, f16
 * and fp32 outputs, on normal and heavy-tailed data up to K = 16384; precise
 * fp32 output (our fp16-copy path) is also held to docs/spec.md's absolute 1e-5,
 * which cuBLASLt's fp8 path does not reach (its error is printed).
 * With --bench [--json FILE] [--commit C] [--reps N] (--bench-only: no
 * accuracy part; the shape set is 4096 and 8192 cubed): times precise fp32
 * output, ours (widening + GEMM) against cuBLASLt's precise fp32 output in
 * the same run, at 4096^3 and 8192^3 (median of N CUDA-event timings, L2
 * flushed before each), one JSON line per row.
 * Exits 77 without a CUDA device (or a build without cuBLASLt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "test_util.h"

#if defined(FP8KIT_HAVE_CUDA) && defined(FK_HAVE_CUBLASLT)
#include <cublasLt.h>
#include <cuda_runtime.h>
#include "test_cuda_util.h"

enum { MODE_TENSOR, MODE_ROW };
static const char *mode_name[2][2] = {{"tensor", "tensor_fast"}, {"row", "row_fast"}};
static fk_rng rng;



static cudaDataType_t lt_type(fp8kit_dtype t)
{
    return t == FP8KIT_F32 ? CUDA_R_32F : t == FP8KIT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* cuBLASLt: D (column-major M x N with ld N... i.e. our row-major M x N seen as
 * column-major N x M) = B (N x K rows) * A^T. We ask for D^T = B A^T in
 * column-major, which is D row-major. A call set up once (heuristic's first
 * algorithm, 32 MiB workspace) and run any number of times. */
typedef struct lt_plan {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    const void *a, *b;
    void *d, *ws;
    size_t ws_bytes;
} lt_plan;

static void lt_free(lt_plan *p)
{
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->h) cublasLtDestroy(p->h);
    cudaFree(p->ws);
    memset(p, 0, sizeof *p);
}

/* Returns 0 when cuBLASLt has an algorithm for the case. */
static int lt_make(lt_plan *p, int mode, int fast, int64_t M, int64_t N, int64_t K, const void *a, const void *b,
                   void *d, fp8kit_dtype dt, const float *sa, const float *sb)
{
    memset(p, 0, sizeof *p);
    if (cublasLtCreate(&p->h) != CUBLAS_STATUS_SUCCESS)
        return 1;
    cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    /* column-major: out (N x M) = Bt^T (N x K) * At (K x M); Bt = B as K x N col-major */
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    /* cuBLASLt's "A" is our B (N rows), its "B" is our A (M rows) */
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
    if (fast) {
        int8_t on = 1;
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on);
    }
    if (mode == MODE_ROW) {
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 9)
        int32_t m = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &m, sizeof m);
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &m, sizeof m);
#else
        lt_free(p);
        return 1;
#endif
    }
    cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K);
    cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)M, K);
    cublasLtMatrixLayoutCreate(&p->ld, lt_type(dt), (uint64_t)N, (uint64_t)M, N);
    p->ws_bytes = 32u << 20;
    p->ws = dmalloc(p->ws_bytes);
    p->a = a;
    p->b = b;
    p->d = d;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &p->ws_bytes,
                                         sizeof p->ws_bytes);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    const int ok = cublasLtMatmulAlgoGetHeuristic(p->h, p->op, p->la, p->lb, p->ld, p->ld, pref, 1, &res, &found) ==
                       CUBLAS_STATUS_SUCCESS && found > 0;
    cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) {
        lt_free(p);
        return 1;
    }
    p->algo = res.algo;
    return 0;
}

static int lt_exec(const lt_plan *p)
{
    float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(p->h, p->op, &alpha, p->b, p->la, p->a, p->lb, &beta, p->d, p->ld, p->d, p->ld, &p->algo,
                          p->ws, p->ws_bytes, 0) != CUBLAS_STATUS_SUCCESS;
}

/* One checked call; returns 0 when it ran. */
static int lt_run(int mode, int fast, int64_t M, int64_t N, int64_t K, const void *a, const void *b, void *d,
                  fp8kit_dtype dt, const float *sa, const float *sb)
{
    lt_plan p;
    if (lt_make(&p, mode, fast, M, N, K, a, b, d, dt, sa, sb))
        return 1;
    int rc = lt_exec(&p);
    rc |= cudaDeviceSynchronize() != cudaSuccess;
    lt_free(&p);
    return rc;
}

/* The call's descriptor and arguments; the workspace (precise fp32 output
 * only) is the caller's, of fp8kit_gemm_workspace_size's bytes. */
static void ours_args(fp8kit_gemm_desc *desc, fp8kit_gemm_args *args, int mode, int fast, int64_t M, int64_t N,
                      int64_t K, void *a, void *b, void *d, fp8kit_dtype dt, float *sa, float *sb)
{
    static int64_t nm, nn; /* the scale shapes (fp8kit_tensor_make copies them) */
    memset(desc, 0, sizeof *desc);
    desc->scale_a = desc->scale_b = mode == MODE_ROW ? FP8KIT_SCALE_ROW : FP8KIT_SCALE_TENSOR;
    desc->fast_accum = fast;
    memset(args, 0, sizeof *args);
    args->a = fp8kit_tensor_2d(a, FP8KIT_E4M3, M, K, K);
    args->b = fp8kit_tensor_2d(b, FP8KIT_E4M3, N, K, K);
    nm = M;
    nn = N;
    args->scale_a = mode == MODE_ROW ? fp8kit_tensor_make(sa, FP8KIT_F32, 1, &nm) : fp8kit_tensor_make(sa, FP8KIT_F32, 0, NULL);
    args->scale_b = mode == MODE_ROW ? fp8kit_tensor_make(sb, FP8KIT_F32, 1, &nn) : fp8kit_tensor_make(sb, FP8KIT_F32, 0, NULL);
    args->alpha = 1.0f;
    args->d = fp8kit_tensor_2d(d, dt, M, N, N);
}

static int ours_run(fp8kit_ctx *ctx, int mode, int fast, int64_t M, int64_t N, int64_t K, void *a, void *b, void *d,
                    fp8kit_dtype dt, float *sa, float *sb)
{
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args;
    ours_args(&desc, &args, mode, fast, M, N, K, a, b, d, dt, sa, sb);
    size_t ws = 0;
    if (fp8kit_gemm_workspace_size(ctx, &desc, &args, &ws) != FP8KIT_OK)
        return 1;
    args.workspace = ws ? dmalloc(ws) : NULL;
    args.workspace_bytes = ws;
    fp8kit_status st = fp8kit_gemm(ctx, &desc, &args, NULL);
    if (st != FP8KIT_OK)
        fprintf(stderr, "fp8kit_gemm: %s\n", fp8kit_last_error(ctx));
    const int bad = st != FP8KIT_OK || cudaDeviceSynchronize() != cudaSuccess;
    cudaFree(args.workspace);
    return bad;
}

static double rel_err(const void *d, fp8kit_dtype dt, const double *ref, int64_t n, int *nan)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = out_val(d, i, dt);
        if (isnan(v)) *nan = 1;
        num += (v - ref[i]) * (v - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

/* ---------------------------------------------------------------- --bench */
static int cmp_float(const void *x, const void *y)
{
    const float a = *(const float *)x, b = *(const float *)y;
    return a < b ? -1 : a > b;
}

typedef struct timed {
    fp8kit_ctx *ctx; /* ours when set, else cuBLASLt */
    const fp8kit_gemm_desc *desc;
    const fp8kit_gemm_args *args;
    const lt_plan *lt;
} timed;

static int timed_call(const timed *t)
{
    if (t->ctx)
        return fp8kit_gemm(t->ctx, t->desc, t->args, NULL) != FP8KIT_OK;
    return lt_exec(t->lt);
}

/* Median milliseconds of reps calls (3 warm-up calls; L2 flushed before each
 * timed call), or -1 when a call fails. */
static float time_median(const timed *t, int reps, void *flush, size_t flush_bytes)
{
    cudaEvent_t e0, e1;
    float *ms = malloc(sizeof(float) * (size_t)reps), med = -1.0f;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    int bad = 0;
    for (int i = 0; i < 3 && !bad; i++)
        bad |= timed_call(t);
    for (int i = 0; i < reps && !bad; i++) {
        cudaMemsetAsync(flush, i & 0xFF, flush_bytes, 0);
        cudaEventRecord(e0, 0);
        bad |= timed_call(t);
        cudaEventRecord(e1, 0);
        bad |= cudaEventSynchronize(e1) != cudaSuccess;
        cudaEventElapsedTime(&ms[i], e0, e1);
    }
    if (!bad) {
        qsort(ms, (size_t)reps, sizeof(float), cmp_float);
        med = ms[reps / 2];
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(ms);
    return med;
}

/* Precise fp32 output, ours against cuBLASLt's, tensor and row scales. */
static void bench(fp8kit_ctx *ctx, int reps, const char *json, const char *commit)
{
    static const int64_t sizes[] = {4096, 8192};
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    FILE *jf = json ? fopen(json, "a") : NULL;
    CHECK(!json || jf, "cannot open %s", json);
    const size_t flush_bytes = 256u << 20;
    void *flush = dmalloc(flush_bytes);
    printf("\nprecise fp32 output, TFLOP/s (ours = e4m3 -> fp16 widening + f16 wgmma GEMM; median of %d)\n", reps);
    printf("%-16s %-7s %10s %10s %7s\n", "shape", "mode", "ours", "cublasLt", "ratio");
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t M = sizes[si], N = M, K = M;
        uint8_t *A = malloc((size_t)(M * K));
        for (int64_t i = 0; i < M * K; i++) { /* any finite e4m3 code */
            uint8_t c = (uint8_t)(fk_rng_u32(&rng) >> 7);
            A[i] = (c & 0x7F) == 0x7F ? (uint8_t)(c - 1) : c;
        }
        void *dA = dmalloc((size_t)(M * K)), *dB = dmalloc((size_t)(N * K)), *dD = dmalloc((size_t)(M * N) * 4);
        float *S = malloc((size_t)M * 4);
        for (int64_t i = 0; i < M; i++) S[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -8);
        float *dSA = dmalloc((size_t)M * 4), *dSB = dmalloc((size_t)N * 4);
        h2d(dA, A, (size_t)(M * K));
        h2d(dB, A, (size_t)(N * K)); /* B = A's bytes: the timing does not depend on the values */
        h2d(dSA, S, (size_t)M * 4);
        h2d(dSB, S, (size_t)N * 4);
        const double flop = 2.0 * (double)M * (double)N * (double)K;
        for (int mode = 0; mode < 2; mode++) {
            fp8kit_gemm_desc desc;
            fp8kit_gemm_args args;
            ours_args(&desc, &args, mode, 0, M, N, K, dA, dB, dD, FP8KIT_F32, dSA, dSB);
            size_t ws = 0;
            CHECK_STATUS(fp8kit_gemm_workspace_size(ctx, &desc, &args, &ws), FP8KIT_OK);
            args.workspace = ws ? dmalloc(ws) : NULL;
            args.workspace_bytes = ws;
            timed to = {ctx, &desc, &args, NULL};
            const float ours = time_median(&to, reps, flush, flush_bytes);
            lt_plan lp;
            float peer = -1.0f;
            if (lt_make(&lp, mode, 0, M, N, K, dA, dB, dD, FP8KIT_F32, dSA, dSB) == 0) {
                timed tl = {NULL, NULL, NULL, &lp};
                peer = time_median(&tl, reps, flush, flush_bytes);
                lt_free(&lp);
            }
            cudaFree(args.workspace);
            CHECK(ours > 0, "bench: our call failed: %s", fp8kit_last_error(ctx));
            const double to_tf = ours > 0 ? flop / (ours * 1e9) : 0, tl_tf = peer > 0 ? flop / (peer * 1e9) : 0;
            char sh[32];
            snprintf(sh, sizeof sh, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
            printf("%-16s %-7s %10.1f %10.1f %7.3f\n", sh, mode_name[mode][0], to_tf, tl_tf,
                   tl_tf > 0 ? to_tf / tl_tf : 0.0);
            if (jf)
                fprintf(jf,
                        "{\"op\": \"gemm_e4m3_f32_precise\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.1f, "
                        "\"peer\": %.1f, \"peer_name\": \"cublasLt %s precise, fp32 out (heuristic first algo, 32 MiB "
                        "workspace)\", \"ratio\": %.3f, \"unit\": \"TFLOP/s\", \"timing\": \"median of %d, L2 flushed; "
                        "ours includes the fp8 -> fp16 widening\", \"ours_ms\": %.4f, \"peer_ms\": %.4f, \"device\": "
                        "\"%s\", \"date\": \"2026-11-22\", \"commit\": \"%s\"}\n",
                        mode_name[mode][0], sh, to_tf, tl_tf, mode_name[mode][0], tl_tf > 0 ? to_tf / tl_tf : 0.0,
                        reps, ours, peer, prop.name, commit ? commit : "unknown");
        }
        cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dSA); cudaFree(dSB);
        free(A); free(S);
    }
    cudaFree(flush);
    if (jf)
        fclose(jf);
}

int main(int argc, char **argv)
{
    int do_bench = 0, reps = 20;
    const char *json = NULL, *commit = getenv("FK_COMMIT");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench")) do_bench = 1;
        else if (!strcmp(argv[i], "--bench-only")) do_bench = 2;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: test_cuda_vs_cublaslt [--bench | --bench-only] [--json FILE] [--commit C] "
                            "[--reps N]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("test_cuda_vs_cublaslt: no CUDA device, skipped\n");
        return 77;
    }
    fp8kit_ctx *ctx = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx), FP8KIT_OK);
    rng = fk_rng_seeded("test_cuda_vs_cublaslt");
    static const struct { int64_t m, n, k; int heavy; } shapes[] = {
        {256, 384, 16384, 0}, {256, 384, 16384, 1}, {200, 136, 4096, 0}, {512, 512, 1024, 1}};
    static const fp8kit_dtype outs[] = {FP8KIT_BF16, FP8KIT_F16, FP8KIT_F32};
    printf("%-22s %-11s %-5s %12s %12s %7s\n", "shape", "mode", "out", "ours rel", "cublasLt rel", "ratio");
    for (size_t si = 0; do_bench < 2 && si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t M = shapes[si].m, N = shapes[si].n, K = shapes[si].k;
        uint8_t *A = malloc((size_t)(M * K)), *B = malloc((size_t)(N * K));
        for (int64_t i = 0; i < M * K; i++)
            A[i] = fk_f32_to_e4m3((float)(shapes[si].heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng)) * 32.0f);
        for (int64_t i = 0; i < N * K; i++)
            B[i] = fk_f32_to_e4m3((float)(shapes[si].heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng)) * 32.0f);
        float *SA = malloc((size_t)M * 4), *SB = malloc((size_t)N * 4);
        for (int64_t i = 0; i < M; i++) SA[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -6);
        for (int64_t i = 0; i < N; i++) SB[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -7);
        /* fp64 dot products of the fp8 values (scales applied per mode below) */
        double *dot = malloc((size_t)(M * N) * sizeof(double)), *ref = malloc((size_t)(M * N) * sizeof(double));
        double *fa = malloc((size_t)K * sizeof(double)), *fb = malloc((size_t)(N * K) * sizeof(double));
        for (int64_t i = 0; i < N * K; i++) fb[i] = fk_e4m3_to_f32(B[i]);
        for (int64_t m = 0; m < M; m++) {
            for (int64_t k = 0; k < K; k++) fa[k] = fk_e4m3_to_f32(A[m * K + k]);
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                const double *bb = fb + n * K;
                for (int64_t k = 0; k < K; k++) s += fa[k] * bb[k];
                dot[m * N + n] = s;
            }
        }
        void *dA = dmalloc((size_t)(M * K)), *dB = dmalloc((size_t)(N * K));
        float *dSA = dmalloc((size_t)M * 4), *dSB = dmalloc((size_t)N * 4);
        void *dD = dmalloc((size_t)(M * N) * 4);
        void *hD = malloc((size_t)(M * N) * 4);
        cudaMemcpy(dA, A, (size_t)(M * K), cudaMemcpyHostToDevice);
        cudaMemcpy(dB, B, (size_t)(N * K), cudaMemcpyHostToDevice);
        cudaMemcpy(dSA, SA, (size_t)M * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dSB, SB, (size_t)N * 4, cudaMemcpyHostToDevice);
        for (int mode = 0; mode < 2; mode++) {
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++)
                    ref[m * N + n] = dot[m * N + n] * (mode == MODE_ROW ? (double)SA[m] * SB[n] : (double)SA[0] * SB[0]);
            for (size_t oi = 0; oi < sizeof outs / sizeof *outs; oi++)
                for (int fast = 0; fast < 2; fast++) {
                    const fp8kit_dtype dt = outs[oi];
                    const size_t bytes = (size_t)(M * N) * fp8kit_dtype_size(dt);
                    char sh[40];
                    snprintf(sh, sizeof sh, "%lldx%lldx%lld%s", (long long)M, (long long)N, (long long)K,
                             shapes[si].heavy ? " heavy" : "");
                    int nan_o = 0, nan_l = 0;
                    double rl = -1, ro = -1;
                    cudaMemset(dD, 0xFF, bytes);
                    const int lt_ok = lt_run(mode, fast, M, N, K, dA, dB, dD, dt, dSA, dSB) == 0;
                    if (lt_ok) {
                        cudaMemcpy(hD, dD, bytes, cudaMemcpyDeviceToHost);
                        rl = rel_err(hD, dt, ref, M * N, &nan_l);
                    }
                    cudaMemset(dD, 0xFF, bytes);
                    CHECK(ours_run(ctx, mode, fast, M, N, K, dA, dB, dD, dt, dSA, dSB) == 0, "ours failed");
                    cudaMemcpy(hD, dD, bytes, cudaMemcpyDeviceToHost);
                    ro = rel_err(hD, dt, ref, M * N, &nan_o);
                    printf("%-22s %-11s %-5s %12.3e %12.3e %7.3f%s\n", sh, mode_name[mode][fast],
                           fp8kit_dtype_name(dt), ro, rl, rl > 0 ? ro / rl : -1.0,
                           lt_ok ? "" : "  (cuBLASLt declined)");
                    CHECK(!nan_o, "%s: NaN in our output", sh);
                    if (!fast) { /* docs/spec.md bounds are for the default (precise) accumulation */
                        const double bound = dt == FP8KIT_BF16 ? 4e-3 : dt == FP8KIT_F16 ? 1e-3 : 1e-5;
                        CHECK(ro <= bound, "%s %s %s: rel %.3e > docs/spec.md bound %.1e", sh, mode_name[mode][fast],
                              fp8kit_dtype_name(dt), ro, bound);
                    }
                    /* docs/spec.md 3's 1.5x-cuBLASLt rule is for fp32 output; precise bf16/f16
                     * are held to it too (same kernel); fast bf16/f16 (opt-in, no
                     * promotion) are reported only: cuBLASLt's fast mode may pick a
                     * split-K algorithm whose fp32 partial sums are more accurate */
                    if (lt_ok && (dt == FP8KIT_F32 || !fast))
                        CHECK(ro <= 1.5 * rl + 1e-9, "%s %s %s: ours %.3e > 1.5 x cuBLASLt %.3e", sh,
                              mode_name[mode][fast], fp8kit_dtype_name(dt), ro, rl);
                }
        }
        cudaFree(dA); cudaFree(dB); cudaFree(dSA); cudaFree(dSB); cudaFree(dD);
        free(A); free(B); free(SA); free(SB); free(dot); free(ref); free(fa); free(fb); free(hD);
    }
    if (do_bench)
        bench(ctx, reps, json, commit);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_cuda_vs_cublaslt");
}
#else
int main(void)
{
    printf("test_cuda_vs_cublaslt: built without CUDA or cuBLASLt, skipped\n");
    return 77;
}
#endif
