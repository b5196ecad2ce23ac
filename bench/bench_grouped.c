/* bench_grouped.c - CUDA grouped GEMM benchmark (fp8kit_grouped_gemm, the
 * mixture-of-experts case): A (T, K) e4m3 with rowwise scales, B (G, N, K)
 * e4m3 with per-expert rowwise scales, bf16 D, offsets in device memory;
 * precise (promotion every 128 of K) and fast accumulation. Cases: 8 x 2048
 * rows balanced, the same T split unevenly over 8 groups, 16 and 64 groups
 * at the same T; N = 4096, K = 7168. Median of N CUDA-event timings after
 * warm-up, L2 flushed before each; TFLOP/s count 2 x rows x N x K. Prints a
 * table and appends one JSON line per row (op, case, mode, T, N, K, G,
 * offsets, us, tflops, device, date, commit) to --json FILE, which
 * bench/torch_grouped_peer.py reads to time torch._scaled_grouped_mm on the
 * same cases in the same device run and print ours, peer and the ratio.
 * Usage: bench_grouped [--reps N] [--json FILE] [--date D] [--commit C]
 *        [--cases balanced,unbalanced,g16,g64] [--modes precise,fast] [--tag T] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench_cuda.h"

enum { T_ROWS = 16384, N_COLS = 4096, K_DIM = 7168, MAX_G = 64 };

typedef struct bcase {
    const char *name;
    int g;
    int sizes[MAX_G]; /* rows per group; all 0: T / G each */
} bcase;

static const bcase cases[] = {
    {"balanced", 8, {0}},
    {"unbalanced", 8, {5120, 256, 3072, 1024, 2560, 16, 4080, 256}},
    {"g16", 16, {0}},
    {"g64", 64, {0}},
};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static int listed(const char *list, const char *name)
{
    if (!list)
        return 1;
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 30;
    const char *json = NULL, *date = fk_bench_today(), *commit = getenv("FK_COMMIT"), *only = NULL, *modes = NULL;
    const char *tag = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--date") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc) modes = argv[++i];
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc) tag = argv[++i];
    }
    if (!commit) commit = "unknown";
    if (reps < 5) reps = 5;
    fp8kit_ctx *ctx;
    struct cudaDeviceProp prop;
    FILE *jf;
    const int rc = fk_bench_open("bench_grouped", json, &ctx, &prop, &jf);
    if (rc >= 0)
        return rc;
    const int64_t T = T_ROWS, N = N_COLS, K = K_DIM;
    const size_t abytes = (size_t)(T * K), bbytes = (size_t)MAX_G * (size_t)(N * K);
    /* random e4m3 codes with |x| < 2 (top exponent bit clear: never NaN), 64 MiB repeated */
    const size_t chunk = 64u << 20;
    uint8_t *h = malloc(chunk);
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < chunk; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (uint8_t)(r >> 56) & 0xBF;
    }
    void *dA, *dB, *dD, *dSA, *dSB, *dOff, *dStatus, *flush;
    const size_t flush_bytes = 256u << 20;
    CK(cudaMalloc(&dA, abytes));
    CK(cudaMalloc(&dB, bbytes));
    CK(cudaMalloc(&dD, (size_t)(T * N) * 2));
    CK(cudaMalloc(&dSA, sizeof(float) * (size_t)T));
    CK(cudaMalloc(&dSB, sizeof(float) * (size_t)(MAX_G * N)));
    CK(cudaMalloc(&dOff, sizeof(int32_t) * MAX_G));
    CK(cudaMalloc(&dStatus, sizeof(int32_t)));
    CK(cudaMalloc(&flush, flush_bytes));
    for (size_t o = 0; o < abytes; o += chunk)
        CK(cudaMemcpy((char *)dA + o, h, abytes - o < chunk ? abytes - o : chunk, cudaMemcpyHostToDevice));
    for (size_t o = 0; o < bbytes; o += chunk)
        CK(cudaMemcpy((char *)dB + o, h, bbytes - o < chunk ? bbytes - o : chunk, cudaMemcpyHostToDevice));
    float *hs = malloc(sizeof(float) * (size_t)(MAX_G * N > T ? MAX_G * N : T));
    for (int64_t i = 0; i < (MAX_G * N > T ? MAX_G * N : T); i++)
        hs[i] = 0.5f + (float)((i * 7919) % 1000) / 1000.0f;
    CK(cudaMemcpy(dSA, hs, sizeof(float) * (size_t)T, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dSB, hs, sizeof(float) * (size_t)(MAX_G * N), cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *t = malloc(sizeof(float) * (size_t)reps);

    printf("bench_grouped: %s, T %lld N %lld K %lld, rowwise scales, bf16 out, %d reps (median, L2 flushed)\n",
           prop.name, (long long)T, (long long)N, (long long)K, reps);
    printf("%-11s %-8s %4s %10s %9s\n", "case", "mode", "G", "us", "TFLOP/s");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bcase *c = &cases[ci];
        if (!listed(only, c->name))
            continue;
        int32_t off[MAX_G];
        int64_t acc = 0;
        char offs_txt[16 * MAX_G] = "";
        for (int g = 0; g < c->g; g++) {
            acc += c->sizes[0] ? c->sizes[g] : T / c->g;
            off[g] = (int32_t)acc;
            snprintf(offs_txt + strlen(offs_txt), sizeof offs_txt - strlen(offs_txt), "%s%d", g ? "," : "",
                     (int)off[g]);
        }
        CK(cudaMemcpy(dOff, off, sizeof(int32_t) * (size_t)c->g, cudaMemcpyHostToDevice));
        const int64_t used = off[c->g - 1];
        for (int fast = 0; fast < 2; fast++) {
            const char *mode = fast ? "fast" : "precise";
            if (!listed(modes, mode))
                continue;
            fp8kit_gemm_desc desc;
            memset(&desc, 0, sizeof desc);
            desc.scale_a = desc.scale_b = FP8KIT_SCALE_ROW;
            desc.fast_accum = fast;
            fp8kit_grouped_gemm_args ga;
            memset(&ga, 0, sizeof ga);
            ga.a = fp8kit_tensor_2d(dA, FP8KIT_E4M3, T, K, K);
            const int64_t bs[3] = {c->g, N, K}, gn[2] = {c->g, N};
            ga.b = fp8kit_tensor_make(dB, FP8KIT_E4M3, 3, bs);
            ga.offsets = (const int32_t *)dOff;
            ga.scale_a = fp8kit_tensor_make(dSA, FP8KIT_F32, 1, &T);
            ga.scale_b = fp8kit_tensor_make(dSB, FP8KIT_F32, 2, gn);
            ga.alpha = 1.0f;
            ga.d = fp8kit_tensor_2d(dD, FP8KIT_BF16, T, N, N);
            ga.status = (int32_t *)dStatus;
            int failed = 0;
            for (int i = 0; i < 3 && !failed; i++)
                failed = fp8kit_grouped_gemm(ctx, &desc, &ga, NULL) != FP8KIT_OK;
            for (int i = 0; i < reps && !failed; i++) {
                CK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, 0));
                CK(cudaEventRecord(e0, 0));
                failed = fp8kit_grouped_gemm(ctx, &desc, &ga, NULL) != FP8KIT_OK;
                CK(cudaEventRecord(e1, 0));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&t[i], e0, e1));
            }
            int32_t status = -1;
            CK(cudaMemcpy(&status, dStatus, sizeof status, cudaMemcpyDeviceToHost));
            if (failed || status != 0) {
                printf("%-11s %-8s %4d  failed: %s (status %d)\n", c->name, mode, c->g, fp8kit_last_error(ctx),
                       (int)status);
                continue;
            }
            qsort(t, (size_t)reps, sizeof(float), cmp_float);
            const double us = 1000.0 * t[reps / 2];
            const double tflops = 2.0 * (double)used * (double)N * (double)K / (us * 1e-6) / 1e12;
            printf("%-11s %-8s %4d %10.1f %9.1f\n", c->name, mode, c->g, us, tflops);
            if (jf)
                fprintf(jf,
                        "{\"op\": \"grouped_gemm\", \"case\": \"%s\", \"mode\": \"%s\", \"T\": %lld, \"N\": %lld, "
                        "\"K\": %lld, \"G\": %d, \"offsets\": [%s], \"us\": %.2f, \"tflops\": %.1f, "
                        "\"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\", \"tag\": \"%s\"}\n",
                        c->name, mode, (long long)T, (long long)N, (long long)K, c->g, offs_txt, us, tflops,
                        prop.name, date, commit, tag);
        }
    }
    if (jf)
        fclose(jf);
    free(t);
    free(h);
    free(hs);
    cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dSA); cudaFree(dSB); cudaFree(dOff); cudaFree(dStatus);
    cudaFree(flush);
    fp8kit_ctx_destroy(ctx);
    return 0;
}
#else
int main(void)
{
    printf("bench_grouped: built without CUDA\n");
    return 0;
}
#endif
