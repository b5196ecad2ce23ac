/* quickstart.c - the README's example: quantize two fp32 matrices to e4m3 with one
 * fp32 scale per row, multiply them with fp8kit_gemm on the CPU backend, compare with
 * the unquantized product. Built by CMake as example_quickstart (also a CTest test). */
#include <math.h>
#include <stdio.h>
#include "fp8kit.h"
#define TRY(call) do { fp8kit_status s_ = (call); if (s_) { fprintf(stderr, "%s: %s\n", \
    fp8kit_status_string(s_), fp8kit_last_error(ctx)); return 1; } } while (0)

enum { M = 64, N = 32, K = 256 };
static float a[M * K], b[N * K], sa[M], sb[N], d[M * N];
static unsigned char qa[M * K], qb[N * K];

int main(void)
{
    for (int i = 0; i < M * K; i++) a[i] = 1.0f + sinf(0.37f * i);
    for (int i = 0; i < N * K; i++) b[i] = 0.5f + cosf(0.11f * i);
    fp8kit_ctx *ctx = NULL;
    TRY(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx));
    fp8kit_quant_desc row = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW); /* e4m3, fp32 scale per row */
    fp8kit_gemm_args g = {.alpha = 1.0f};
    fp8kit_tensor x = fp8kit_tensor_2d(a, FP8KIT_F32, M, K, K);
    g.a = fp8kit_tensor_2d(qa, FP8KIT_E4M3, M, K, K), g.scale_a = fp8kit_tensor_2d(sa, FP8KIT_F32, M, 1, 1);
    TRY(fp8kit_quantize(ctx, &row, &x, &g.a, &g.scale_a, NULL));
    x = fp8kit_tensor_2d(b, FP8KIT_F32, N, K, K);
    g.b = fp8kit_tensor_2d(qb, FP8KIT_E4M3, N, K, K), g.scale_b = fp8kit_tensor_2d(sb, FP8KIT_F32, N, 1, 1);
    TRY(fp8kit_quantize(ctx, &row, &x, &g.b, &g.scale_b, NULL));
    g.d = fp8kit_tensor_2d(d, FP8KIT_F32, M, N, N);
    fp8kit_gemm_desc gd = {.scale_a = FP8KIT_SCALE_ROW, .scale_b = FP8KIT_SCALE_ROW};
    TRY(fp8kit_gemm(ctx, &gd, &g, NULL)); /* d = (qa*sa) (qb*sb)^T */
    double ref = 0, err = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double y = 0;
            for (int k = 0; k < K; k++) y += (double)a[m * K + k] * b[n * K + k];
            ref += y * y, err += (d[m * N + n] - y) * (d[m * N + n] - y);
        }
    printf("D[0][0] = %.4f, fp8 vs fp32 relative error %.4f\n", d[0], sqrt(err / ref));
    fp8kit_ctx_destroy(ctx);
    return sqrt(err / ref) < 0.01 ? 0 : 1;
}
