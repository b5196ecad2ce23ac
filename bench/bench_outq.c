/* bench_outq.c - CUDA benchmark of fused output quantization in the fp8 GEMM
 * (desc.out_quant = OUTQ_MX or OUTQ_BLOCK1X128: e4m3 D plus its scales, y
 * rounded to bf16 first) against the unfused pipeline in the same run: the
 * same GEMM with bf16 output, then fp8kit_quantize (mx axis -1 / block1x128)
 * of that output - what a caller does without the fusion. Also times the bf16
 * GEMM alone (the fused epilogue's overhead over it). e4m3 x e4m3 with tensor
 * scales, normal random inputs. Cases: mx, b1x128 (y = the scaled sum) and
 * mx_bias_gelu (y = gelu_tanh(sum + bf16 column bias); the unfused pipeline
 * and the bf16 reference GEMM apply the same bias and activation). Median of N CUDA-event timings after warm-up,
 * L2 flushed before each. The fused and unfused results are compared (codes
 * and scales; they may differ where y differs in the last bit between the
 * two epilogues). Prints a table and one JSON line per row (op, case, shape,
 * ours, peer, peer_name, ratio = peer / ours time, unit us, device, date,
 * commit) to --json FILE.
 * Usage: bench_outq [--reps N] [--shapes MxNxK,...] [--json FILE] [--date D] [--commit C]
 * Build: part of the CMake tree (bench/bench_*.c), CUDA enabled. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench_cuda.h"

/* Everything one timed step needs. */
typedef struct job {
    fp8kit_ctx *ctx;
    fp8kit_gemm_desc fused, plain;
    fp8kit_gemm_args fa, pa;
    fp8kit_quant_desc qd;
    fp8kit_tensor qx, qq, qs; /* quantize: bf16 D in, codes + scales out */
    int what;                 /* 0 fused, 1 bf16 GEMM + quantize, 2 bf16 GEMM only */
} job;

static int step(job *j)
{
    fp8kit_status st;
    if (j->what == 0) {
        st = fp8kit_gemm(j->ctx, &j->fused, &j->fa, NULL);
    } else {
        st = fp8kit_gemm(j->ctx, &j->plain, &j->pa, NULL);
        if (st == FP8KIT_OK && j->what == 1)
            st = fp8kit_quantize(j->ctx, &j->qd, &j->qx, &j->qq, &j->qs, NULL);
    }
    if (st != FP8KIT_OK) {
        fprintf(stderr, "bench_outq: %s: %s\n", fp8kit_status_string(st), fp8kit_last_error(j->ctx));
        return 1;
    }
    return 0;
}

static int step_v(void *j) { return step((job *)j); }

static uint64_t rng = 0x0ddc0ffee5eedull;
static double rnorm(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(rng >> 11) + 0.5) * 0x1.0p-53;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

int main(int argc, char **argv)
{
    int reps = 20;
    const char *json = NULL, *date = fk_bench_today(), *commit = getenv("FK_COMMIT"), *shapes_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--date") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes_arg = argv[++i];
        else {
            fprintf(stderr, "usage: bench_outq [--reps N] [--shapes MxNxK,...] [--json FILE] [--date D] [--commit C]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("bench_outq: no usable CUDA device, skipped\n");
        return 77;
    }
    int64_t shapes[8][3] = {{8192, 8192, 8192}, {8192, 7168, 2048}, {16384, 4096, 1024}};
    int nshapes = 3;
    if (shapes_arg) {
        nshapes = 0;
        for (const char *p = shapes_arg; *p && nshapes < 8;) {
            long long m, n, k;
            if (sscanf(p, "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 32 || k < 16 || n % 32 || k % 16) {
                fprintf(stderr, "bench_outq: bad shape at '%s' (N %% 32 == 0, K %% 16 == 0)\n", p);
                return 2;
            }
            shapes[nshapes][0] = m, shapes[nshapes][1] = n, shapes[nshapes][2] = k;
            nshapes++;
            const char *c = strchr(p, ',');
            if (!c)
                break;
            p = c + 1;
        }
    }
    FILE *jf = json ? fopen(json, "a") : NULL;
    if (json && !jf) {
        fprintf(stderr, "bench_outq: cannot open %s\n", json);
        return 1;
    }
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "bench_outq: no CUDA context\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const size_t flush_bytes = 256u << 20;
    void *flush = NULL;
    CK(cudaMalloc(&flush, flush_bytes));
    printf("%s, commit %s\n", prop.name, commit ? commit : "?");
    printf("%-13s %-18s %11s %11s %7s %11s %9s  %s\n", "case", "M x N x K", "fused us", "unfused us", "ratio",
           "bf16 gemm", "overhead", "fused vs unfused (codes, scales differing)");
    for (int si = 0; si < nshapes; si++) {
        const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        uint8_t *ha = malloc((size_t)(M * K)), *hb = malloc((size_t)(N * K));
        for (int64_t i = 0; i < M * K; i++) ha[i] = fk_f32_to_e4m3((float)rnorm() * 16.0f);
        for (int64_t i = 0; i < N * K; i++) hb[i] = fk_f32_to_e4m3((float)rnorm() * 16.0f);
        const float sab[2] = {1.0f / 64, 1.0f / 128};
        void *da, *db, *ds, *dd16, *dq, *dsc, *dq2, *dsc2, *dbias;
        const int64_t sc_row = (N + 127) / 128 * 4 > N / 32 ? (N + 127) / 128 * 4 : N / 32; /* bytes per row */
        const size_t sc_bytes = (size_t)(M * sc_row);
        CK(cudaMalloc(&da, (size_t)(M * K)));
        CK(cudaMalloc(&db, (size_t)(N * K)));
        CK(cudaMalloc(&ds, 8));
        CK(cudaMalloc(&dd16, (size_t)(M * N) * 2));
        CK(cudaMalloc(&dq, (size_t)(M * N)));
        CK(cudaMalloc(&dq2, (size_t)(M * N)));
        CK(cudaMalloc(&dsc, sc_bytes));
        CK(cudaMalloc(&dsc2, sc_bytes));
        CK(cudaMalloc(&dbias, (size_t)N * 2));
        uint16_t *hbias = malloc((size_t)N * 2);
        for (int64_t i = 0; i < N; i++) hbias[i] = fk_f32_to_bf16((float)rnorm() * 4.0f);
        CK(cudaMemcpy(dbias, hbias, (size_t)N * 2, cudaMemcpyHostToDevice));
        free(hbias);
        CK(cudaMemcpy(da, ha, (size_t)(M * K), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(db, hb, (size_t)(N * K), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(ds, sab, 8, cudaMemcpyHostToDevice));
        for (int cs_i = 0; cs_i < 3; cs_i++) {
            const int mx = cs_i != 1, gelu = cs_i == 2;
            job j;
            memset(&j, 0, sizeof j);
            j.ctx = ctx;
            int64_t one = 1, sd_shape[2] = {M, mx ? N / 32 : (N + 127) / 128};
            j.plain.scale_a = j.plain.scale_b = FP8KIT_SCALE_TENSOR;
            j.pa.a = fp8kit_tensor_2d(da, FP8KIT_E4M3, M, K, K);
            j.pa.b = fp8kit_tensor_2d(db, FP8KIT_E4M3, N, K, K);
            j.pa.scale_a = fp8kit_tensor_make(ds, FP8KIT_F32, 1, &one);
            j.pa.scale_b = fp8kit_tensor_make((char *)ds + 4, FP8KIT_F32, 1, &one);
            j.pa.alpha = 1.0f;
            j.pa.d = fp8kit_tensor_2d(dd16, FP8KIT_BF16, M, N, N);
            if (gelu) {
                int64_t nb = N;
                j.plain.bias = FP8KIT_BIAS_COL;
                j.plain.act = FP8KIT_ACT_GELU_TANH;
                j.pa.bias = fp8kit_tensor_make(dbias, FP8KIT_BF16, 1, &nb);
            }
            j.fused = j.plain;
            j.fused.out_quant = mx ? FP8KIT_OUTQ_MX : FP8KIT_OUTQ_BLOCK1X128;
            j.fused.out_hp = FP8KIT_BF16;
            j.fused.out_rounding = FP8KIT_ROUND_FLOOR;
            j.fa = j.pa;
            j.fa.d = fp8kit_tensor_2d(dq, FP8KIT_E4M3, M, N, N);
            j.fa.scale_d = fp8kit_tensor_make(dsc, mx ? FP8KIT_E8M0 : FP8KIT_F32, 2, sd_shape);
            j.qd = fp8kit_quant_desc_default(mx ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK1X128);
            j.qx = fp8kit_tensor_2d(dd16, FP8KIT_BF16, M, N, N);
            j.qq = fp8kit_tensor_2d(dq2, FP8KIT_E4M3, M, N, N);
            j.qs = fp8kit_tensor_make(dsc2, mx ? FP8KIT_E8M0 : FP8KIT_F32, 2, sd_shape);
            double us[3];
            for (int w = 0; w < 3; w++) {
                j.what = w;
                us[w] = fk_bench_time_us(step_v, &j, reps, flush, flush_bytes);
            }
            /* fused vs unfused results (the unfused ones are from the last timed step) */
            j.what = 0;
            if (step(&j))
                return 1;
            CK(cudaDeviceSynchronize());
            const size_t nsc = (size_t)(sd_shape[0] * sd_shape[1]) * (mx ? 1 : 4);
            unsigned char *q1 = malloc((size_t)(M * N)), *q2 = malloc((size_t)(M * N)), *s1 = malloc(nsc),
                          *s2 = malloc(nsc);
            CK(cudaMemcpy(q1, dq, (size_t)(M * N), cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(q2, dq2, (size_t)(M * N), cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(s1, dsc, nsc, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(s2, dsc2, nsc, cudaMemcpyDeviceToHost));
            long qd = 0, sd = 0;
            for (int64_t i = 0; i < M * N; i++) qd += q1[i] != q2[i];
            for (size_t i = 0; i < nsc; i += mx ? 1 : 4) sd += memcmp(s1 + i, s2 + i, mx ? 1 : 4) != 0;
            free(q1); free(q2); free(s1); free(s2);
            char shp[64];
            snprintf(shp, sizeof shp, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
            const char *cs = gelu ? "mx_bias_gelu" : mx ? "mx" : "b1x128";
            const double ratio = us[0] > 0 && us[1] > 0 ? us[1] / us[0] : 0.0;
            const double over = us[0] > 0 && us[2] > 0 ? 100.0 * (us[0] / us[2] - 1.0) : 0.0;
            printf("%-13s %-18s %11.1f %11.1f %7.3f %11.1f %8.1f%%  %.2e, %.2e\n", cs, shp, us[0], us[1], ratio, us[2],
                   over, (double)qd / (double)(M * N), (double)sd / (double)(sd_shape[0] * sd_shape[1]));
            if (jf)
                fprintf(jf,
                        "{\"op\": \"gemm_e4m3_outq\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.2f, \"peer\": %.2f, "
                        "\"peer_name\": \"fp8kit bf16 GEMM + fp8kit_quantize (%s), same run\", \"ratio\": %.3f, "
                        "\"unit\": \"us\", \"bf16_gemm_us\": %.2f, \"overhead_pct\": %.2f, \"codes_differing\": %.3e, "
                        "\"scales_differing\": %.3e, \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                        cs, shp, us[0], us[1], mx ? "mx" : "block1x128", ratio, us[2], over,
                        (double)qd / (double)(M * N), (double)sd / (double)(sd_shape[0] * sd_shape[1]), prop.name,
                        date, commit ? commit : "?");
        }
        free(ha);
        free(hb);
        cudaFree(da); cudaFree(db); cudaFree(ds); cudaFree(dd16); cudaFree(dq); cudaFree(dq2); cudaFree(dsc);
        cudaFree(dsc2); cudaFree(dbias);
    }
    if (jf)
        fclose(jf);
    cudaFree(flush);
    fp8kit_ctx_destroy(ctx);
    return 0;
}
#else
int main(void)
{
    printf("bench_outq: built without CUDA, skipped\n");
    return 77;
}
#endif
