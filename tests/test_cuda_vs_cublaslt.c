/* test_cuda_vs_cublaslt.c - SPEC section 3's relative accuracy rule on the GPU:
 * our GEMM's error against an fp64 reference (from the dequantized operands)
 * must never exceed 1.5x the error of cuBLASLt on the same inputs, in the
 * same mode (per-tensor and per-row "outer vector" scales, precise and fast
 * accumulation; fast bf16/f16 are reported, not held to it), for bf16, f16
 * and fp32 outputs, on normal and
 * heavy-tailed data up to K = 16384. Also prints cuBLASLt's own fp32 error,
 * which shows where SPEC's absolute 1e-5 bound stands on Hopper's fp8 tensor
 * cores. Exits 77 without a CUDA device (or a build without cuBLASLt). */
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
 * column-major, which is D row-major. Returns 0 when it ran. */
static int lt_run(int mode, int fast, int64_t M, int64_t N, int64_t K, const void *a, const void *b, void *d,
                  fp8kit_dtype dt, const float *sa, const float *sb)
{
    cublasLtHandle_t h = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    int rc = 1;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return 1;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    /* column-major: out (N x M) = Bt^T (N x K) * At (K x M); Bt = B as K x N col-major */
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    /* cuBLASLt's "A" is our B (N rows), its "B" is our A (M rows) */
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
    if (fast) {
        int8_t on = 1;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on);
    }
    if (mode == MODE_ROW) {
#if CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 9)
        int32_t m = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &m, sizeof m);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &m, sizeof m);
#else
        goto done;
#endif
    }
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)M, K);
    cublasLtMatrixLayoutCreate(&ld, lt_type(dt), (uint64_t)N, (uint64_t)M, N);
    {
        cublasLtMatmulPreference_t pref;
        size_t ws_bytes = 32u << 20;
        void *ws = dmalloc(ws_bytes);
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                             sizeof ws_bytes);
        cublasLtMatmulHeuristicResult_t res;
        int found = 0;
        if (cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found) ==
                CUBLAS_STATUS_SUCCESS &&
            found > 0) {
            float alpha = 1.0f, beta = 0.0f;
            rc = cublasLtMatmul(h, op, &alpha, b, la, a, lb, &beta, d, ld, d, ld, &res.algo, ws, ws_bytes,
                                0) != CUBLAS_STATUS_SUCCESS;
            rc |= cudaDeviceSynchronize() != cudaSuccess;
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cudaFree(ws);
    }
#if !(CUBLAS_VER_MAJOR > 12 || (CUBLAS_VER_MAJOR == 12 && CUBLAS_VER_MINOR >= 9))
done:
#endif
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
    return rc;
}

static int ours_run(fp8kit_ctx *ctx, int mode, int fast, int64_t M, int64_t N, int64_t K, void *a, void *b, void *d,
                    fp8kit_dtype dt, float *sa, float *sb)
{
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = mode == MODE_ROW ? FP8KIT_SCALE_ROW : FP8KIT_SCALE_TENSOR;
    desc.fast_accum = fast;
    fp8kit_gemm_args args;
    memset(&args, 0, sizeof args);
    args.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, M, K, K);
    args.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, N, K, K);
    int64_t nm = M, nn = N;
    args.scale_a = mode == MODE_ROW ? fp8kit_tensor_make(sa, FP8KIT_F32, 1, &nm) : fp8kit_tensor_make(sa, FP8KIT_F32, 0, NULL);
    args.scale_b = mode == MODE_ROW ? fp8kit_tensor_make(sb, FP8KIT_F32, 1, &nn) : fp8kit_tensor_make(sb, FP8KIT_F32, 0, NULL);
    args.alpha = 1.0f;
    args.d = fp8kit_tensor_2d(d, dt, M, N, N);
    fp8kit_status st = fp8kit_gemm(ctx, &desc, &args, NULL);
    if (st != FP8KIT_OK)
        fprintf(stderr, "fp8kit_gemm: %s\n", fp8kit_last_error(ctx));
    return st != FP8KIT_OK || cudaDeviceSynchronize() != cudaSuccess;
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

int main(void)
{
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
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
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
                    if (dt == FP8KIT_F32 && !fast) {
                        /* precise fp32 output is refused on Hopper (docs/perf-gemm.md):
                         * check the refusal and record cuBLASLt's error next to SPEC's 1e-5 */
                        CHECK(ours_run(ctx, mode, 0, M, N, K, dA, dB, dD, dt, dSA, dSB) != 0,
                              "precise fp32 output ran");
                        printf("%-22s %-11s %-5s %12s %12.3e   (ours refused; SPEC asks <= 1e-5)\n", sh,
                               mode_name[mode][0], "f32", "-", rl);
                        continue;
                    }
                    cudaMemset(dD, 0xFF, bytes);
                    CHECK(ours_run(ctx, mode, fast, M, N, K, dA, dB, dD, dt, dSA, dSB) == 0, "ours failed");
                    cudaMemcpy(hD, dD, bytes, cudaMemcpyDeviceToHost);
                    ro = rel_err(hD, dt, ref, M * N, &nan_o);
                    printf("%-22s %-11s %-5s %12.3e %12.3e %7.3f%s\n", sh, mode_name[mode][fast],
                           fp8kit_dtype_name(dt), ro, rl, rl > 0 ? ro / rl : -1.0,
                           lt_ok ? "" : "  (cuBLASLt declined)");
                    CHECK(!nan_o, "%s: NaN in our output", sh);
                    if (!fast) { /* SPEC bounds are for the default (precise) accumulation */
                        const double bound = dt == FP8KIT_BF16 ? 4e-3 : 1e-3;
                        CHECK(ro <= bound, "%s %s %s: rel %.3e > SPEC bound %.1e", sh, mode_name[mode][fast],
                              fp8kit_dtype_name(dt), ro, bound);
                    }
                    /* SPEC 3's 1.5x-cuBLASLt rule is for fp32 output; precise bf16/f16
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
