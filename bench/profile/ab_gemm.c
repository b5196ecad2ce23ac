/* ab_gemm.c - same-process A/B timing of fp8kit_gemm from two builds of
 * libfp8kit.so (e.g. before and after a restructuring): both libraries are
 * dlopen'ed into one process, run on the same device buffers, and their
 * calls are timed interleaved (A, B, B, A, ...; CUDA events; L2 flushed
 * before each call), so clock, temperature and memory-placement drift fall
 * on both alike. One line per case: median us of each, B's speed relative
 * to A's; JSON rows with --json (peer_name: library A).
 *
 * build: cc -O2 -std=gnu11 -I include bench/profile/ab_gemm.c -o ab_gemm \
 *          -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -ldl -lm
 * run:   ./ab_gemm LIB_A LIB_B [--reps N] [--json FILE] [--shapes MxNxK,...] [--grouped]
 * --grouped: fp8kit_grouped_gemm instead, T 16384 N 4096 K 7168 with row
 * scales and bf16 out: 8 balanced, 8 unbalanced, 16 and 64 groups, precise
 * and fast accumulation (bench_grouped's cases). */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"

typedef fp8kit_status (*ctx_create_fn)(fp8kit_backend, int, fp8kit_ctx **);
typedef fp8kit_status (*gemm_fn)(fp8kit_ctx *, const fp8kit_gemm_desc *, const fp8kit_gemm_args *, void *);
typedef fp8kit_status (*ws_fn)(fp8kit_ctx *, const fp8kit_gemm_desc *, const fp8kit_gemm_args *, size_t *);
typedef fp8kit_tensor (*t2d_fn)(void *, fp8kit_dtype, int64_t, int64_t, int64_t);
typedef const char *(*err_fn)(const fp8kit_ctx *);
typedef fp8kit_status (*ggemm_fn)(fp8kit_ctx *, const fp8kit_gemm_desc *, const fp8kit_grouped_gemm_args *, void *);
typedef fp8kit_tensor (*tmake_fn)(void *, fp8kit_dtype, int32_t, const int64_t *);

typedef struct lib {
    const char *path;
    fp8kit_ctx *ctx;
    gemm_fn gemm;
    ws_fn ws;
    t2d_fn t2d;
    err_fn err;
    ggemm_fn ggemm;
    tmake_fn tmake;
} lib;

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static void load(lib *l, const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    l->path = path;
    ctx_create_fn create = (ctx_create_fn)dlsym(h, "fp8kit_ctx_create");
    l->gemm = (gemm_fn)dlsym(h, "fp8kit_gemm");
    l->ws = (ws_fn)dlsym(h, "fp8kit_gemm_workspace_size");
    l->t2d = (t2d_fn)dlsym(h, "fp8kit_tensor_2d");
    l->err = (err_fn)dlsym(h, "fp8kit_last_error");
    l->ggemm = (ggemm_fn)dlsym(h, "fp8kit_grouped_gemm");
    l->tmake = (tmake_fn)dlsym(h, "fp8kit_tensor_make");
    if (!create || !l->gemm || !l->ws || !l->t2d || !l->err || create(FP8KIT_BACKEND_CUDA, 0, &l->ctx)) {
        fprintf(stderr, "%s: no fp8kit API or no CUDA context\n", path);
        exit(1);
    }
}

static int cmpf(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Milliseconds from e0 (recorded before the call) to now on stream 0. */
static float elapsed_ms(cudaEvent_t e0, cudaEvent_t e1)
{
    float ms = 0;
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
}

static void grouped(lib L[2], int reps, FILE *jf, void *flush, size_t flush_bytes, cudaEvent_t e0, cudaEvent_t e1)
{
    const int64_t T = 16384, N = 4096, K = 7168;
    static const struct {
        const char *name;
        int g;
        int sizes[8];
    } cases[] = {{"balanced", 8, {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}},
                 {"unbalanced", 8, {5120, 256, 3072, 1024, 2560, 16, 4080, 256}},
                 {"g16", 16, {0}},
                 {"g64", 64, {0}}};
    void *A, *B, *D, *sa, *sb, *offs, *status;
    CK(cudaMalloc(&A, (size_t)(T * K)));
    CK(cudaMalloc(&B, (size_t)(64 * N * K)));
    CK(cudaMalloc(&D, (size_t)(T * N) * 2));
    CK(cudaMalloc(&sa, (size_t)T * 4));
    CK(cudaMalloc(&sb, (size_t)(64 * N) * 4));
    CK(cudaMalloc(&offs, 64 * 4));
    CK(cudaMalloc(&status, 4));
    const size_t chunk = (size_t)16 << 20; /* 16 MiB of random codes, repeated */
    uint8_t *h = malloc(chunk);
    for (size_t i = 0; i < chunk; i++)
        h[i] = (uint8_t)(0x30 + (rand() & 0x1F)) | (uint8_t)(rand() & 0x80);
    for (size_t off = 0; off < (size_t)(64 * N * K); off += chunk)
        CK(cudaMemcpy((uint8_t *)B + off, h, chunk, cudaMemcpyHostToDevice));
    for (size_t off = 0; off < (size_t)(T * K); off += chunk)
        CK(cudaMemcpy((uint8_t *)A + off, h, chunk, cudaMemcpyHostToDevice));
    free(h);
    float *hs = malloc((size_t)(64 * N) * 4);
    for (int64_t i = 0; i < 64 * N; i++) hs[i] = 1.0f / 64;
    CK(cudaMemcpy(sa, hs, (size_t)T * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sb, hs, (size_t)(64 * N) * 4, cudaMemcpyHostToDevice));
    free(hs);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int G = cases[c].g;
        int32_t o[64];
        int64_t acc = 0;
        for (int g = 0; g < G; g++) {
            acc += cases[c].sizes[0] ? cases[c].sizes[g] : T / G;
            o[g] = (int32_t)acc;
        }
        CK(cudaMemcpy(offs, o, (size_t)G * 4, cudaMemcpyHostToDevice));
        for (int fast = 0; fast < 2; fast++) {
            fp8kit_gemm_desc d;
            memset(&d, 0, sizeof d);
            d.scale_a = d.scale_b = FP8KIT_SCALE_ROW;
            d.fast_accum = fast;
            d.out_hp = FP8KIT_BF16;
            fp8kit_grouped_gemm_args a[2];
            for (int s = 0; s < 2; s++) {
                memset(&a[s], 0, sizeof a[s]);
                const int64_t ash[2] = {T, K}, bsh[3] = {G, N, K}, dsh[2] = {T, N}, sas[1] = {T}, sbs[2] = {G, N};
                a[s].a = L[s].tmake(A, FP8KIT_E4M3, 2, ash);
                a[s].b = L[s].tmake(B, FP8KIT_E4M3, 3, bsh);
                a[s].offsets = (const int32_t *)offs;
                a[s].scale_a = L[s].tmake(sa, FP8KIT_F32, 1, sas);
                a[s].scale_b = L[s].tmake(sb, FP8KIT_F32, 2, sbs);
                a[s].alpha = 1.0f;
                a[s].d = L[s].tmake(D, FP8KIT_BF16, 2, dsh);
                a[s].status = (int32_t *)status;
            }
            float *t[2] = {malloc(sizeof(float) * (size_t)reps), malloc(sizeof(float) * (size_t)reps)};
            int ok = 1;
            for (int r = -3; ok && r < reps; r++)
                for (int k = 0; k < 2 && ok; k++) {
                    const int s = (r & 1) ? 1 - k : k;
                    CK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes, 0));
                    CK(cudaEventRecord(e0, 0));
                    if (L[s].ggemm(L[s].ctx, &d, &a[s], NULL) != FP8KIT_OK) {
                        fprintf(stderr, "%s: %s\n", L[s].path, L[s].err(L[s].ctx));
                        ok = 0;
                        break;
                    }
                    const float ms = elapsed_ms(e0, e1);
                    if (r >= 0)
                        t[s][r] = ms * 1e3f;
                }
            if (ok) {
                qsort(t[0], (size_t)reps, sizeof(float), cmpf);
                qsort(t[1], (size_t)reps, sizeof(float), cmpf);
                const float ma = t[0][reps / 2], mb = t[1][reps / 2];
                const double tf = 2.0 * (double)T * (double)N * (double)K / 1e12;
                printf("grouped %-10s %-12s %10.1f %10.1f %8.3f\n", cases[c].name, fast ? "fast" : "precise", ma,
                       mb, ma / mb);
                if (jf)
                    fprintf(jf,
                            "{\"op\": \"grouped_gemm_ab\", \"case\": \"%s\", \"mode\": \"%s\", \"shape\": "
                            "\"T16384 N4096 K7168 G%d\", \"ours\": %.1f, \"peer\": %.1f, \"peer_name\": \"%s (same "
                            "process, interleaved)\", \"ratio\": %.3f, \"unit\": \"TFLOP/s\", \"lib\": \"%s\"}\n",
                            cases[c].name, fast ? "fast" : "precise", G, tf / (mb * 1e-6), tf / (ma * 1e-6), L[0].path,
                            ma / mb, L[1].path);
            }
            free(t[0]);
            free(t[1]);
        }
    }
    cudaFree(A); cudaFree(B); cudaFree(D); cudaFree(sa); cudaFree(sb); cudaFree(offs); cudaFree(status);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ab_gemm LIB_A LIB_B [--reps N] [--json FILE] [--shapes MxNxK,...]\n");
        return 2;
    }
    int reps = 40, do_grouped = 0;
    const char *json = NULL, *shapes = "8192x8192x8192,4096x7168x16384,4096x24576x1536,16384x8192x8192,4096x4096x4096,"
                                       "2048x14336x4096,64x7168x7168,128x7168x16384";
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--grouped")) do_grouped = 1;
    }
    lib L[2];
    load(&L[0], argv[1]);
    load(&L[1], argv[2]);
    FILE *jf = json ? fopen(json, "a") : NULL;
    const size_t flush_bytes = (size_t)256 << 20;
    void *flush;
    CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    if (do_grouped) {
        grouped(L, reps, jf, flush, flush_bytes, e0, e1);
        if (jf)
            fclose(jf);
        return 0;
    }
    static const char *mode_name[5] = {"tensor", "tensor_fast", "row", "block", "bias_gelu"};
    char buf[512];
    snprintf(buf, sizeof buf, "%s", shapes);
    printf("%-18s %-12s %10s %10s %8s\n", "shape", "mode", "A us", "B us", "B/A spd");
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long long M, N, K;
        if (sscanf(tok, "%lldx%lldx%lld", &M, &N, &K) != 3)
            continue;
        void *A, *B, *D, *sa, *sb, *bias;
        CK(cudaMalloc(&A, (size_t)(M * K)));
        CK(cudaMalloc(&B, (size_t)(N * K)));
        CK(cudaMalloc(&D, (size_t)(M * N) * 2));
        CK(cudaMalloc(&sa, (size_t)(M + 1) * (size_t)((K + 127) / 128) * 4 + 4096));
        CK(cudaMalloc(&sb, (size_t)(N + 128) * (size_t)((K + 127) / 128) * 4 + 4096));
        CK(cudaMalloc(&bias, (size_t)N * 2));
        /* operands: small finite e4m3 codes (0x30..0x4F and their negatives), scales 1/64 */
        uint8_t *h = malloc((size_t)(M > N ? M : N) * (size_t)K);
        for (long long i = 0; i < (M > N ? M : N) * K; i++)
            h[i] = (uint8_t)(0x30 + (rand() & 0x1F)) | (uint8_t)(rand() & 0x80);
        CK(cudaMemcpy(A, h, (size_t)(M * K), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, h, (size_t)(N * K), cudaMemcpyHostToDevice));
        free(h);
        const size_t ns = (size_t)(N + 128) * (size_t)((K + 127) / 128) + 1024;
        float *hs = malloc(ns * 4);
        for (size_t i = 0; i < ns; i++) hs[i] = 1.0f / 64;
        CK(cudaMemcpy(sa, hs, (size_t)(M + 1) * (size_t)((K + 127) / 128) * 4 < ns * 4 ? (size_t)(M + 1) * (size_t)((K + 127) / 128) * 4 : ns * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(sb, hs, ns * 4, cudaMemcpyHostToDevice));
        free(hs);
        CK(cudaMemset(bias, 0, (size_t)N * 2));
        for (int mode = 0; mode < 5; mode++) {
            fp8kit_gemm_desc d;
            memset(&d, 0, sizeof d);
            d.scale_a = d.scale_b = mode == 2 ? FP8KIT_SCALE_ROW : mode == 3 ? FP8KIT_SCALE_BLOCK : FP8KIT_SCALE_TENSOR;
            d.fast_accum = mode == 1;
            d.bias = mode == 4 ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
            d.act = mode == 4 ? FP8KIT_ACT_GELU_TANH : FP8KIT_ACT_NONE;
            d.out_hp = FP8KIT_BF16;
            fp8kit_gemm_args a[2];
            void *ws[2] = {NULL, NULL};
            int ok = 1;
            for (int s = 0; s < 2; s++) {
                memset(&a[s], 0, sizeof a[s]);
                a[s].a = L[s].t2d(A, FP8KIT_E4M3, M, K, K);
                a[s].b = L[s].t2d(B, FP8KIT_E4M3, N, K, K);
                const int64_t ka = (K + 127) / 128;
                if (mode == 3) {
                    a[s].scale_a = L[s].t2d(sa, FP8KIT_F32, M, ka, ka);
                    a[s].scale_b = L[s].t2d(sb, FP8KIT_F32, (N + 127) / 128, ka, ka);
                } else if (mode == 2) {
                    a[s].scale_a = L[s].t2d(sa, FP8KIT_F32, 1, M, M);
                    a[s].scale_b = L[s].t2d(sb, FP8KIT_F32, 1, N, N);
                } else {
                    a[s].scale_a = L[s].t2d(sa, FP8KIT_F32, 1, 1, 1);
                    a[s].scale_b = L[s].t2d(sb, FP8KIT_F32, 1, 1, 1);
                }
                if (mode == 4)
                    a[s].bias = L[s].t2d(bias, FP8KIT_BF16, 1, N, N);
                a[s].alpha = 1.0f;
                a[s].d = L[s].t2d(D, FP8KIT_BF16, M, N, N);
                size_t wb = 0;
                if (L[s].ws(L[s].ctx, &d, &a[s], &wb) != FP8KIT_OK) {
                    fprintf(stderr, "%s: %s\n", L[s].path, L[s].err(L[s].ctx));
                    ok = 0;
                }
                if (wb) {
                    CK(cudaMalloc(&ws[s], wb));
                    a[s].workspace = ws[s];
                    a[s].workspace_bytes = wb;
                }
            }
            float *t[2] = {malloc(sizeof(float) * (size_t)reps), malloc(sizeof(float) * (size_t)reps)};
            for (int r = -3; ok && r < reps; r++) {
                for (int k = 0; k < 2; k++) {
                    const int s = (r & 1) ? 1 - k : k; /* A B, B A, ... */
                    CK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes, 0));
                    CK(cudaEventRecord(e0, 0));
                    if (L[s].gemm(L[s].ctx, &d, &a[s], NULL) != FP8KIT_OK) {
                        fprintf(stderr, "%s: %s\n", L[s].path, L[s].err(L[s].ctx));
                        ok = 0;
                        break;
                    }
                    CK(cudaEventRecord(e1, 0));
                    CK(cudaEventSynchronize(e1));
                    float ms = 0;
                    CK(cudaEventElapsedTime(&ms, e0, e1));
                    if (r >= 0)
                        t[s][r] = ms * 1e3f;
                }
            }
            if (ok) {
                qsort(t[0], (size_t)reps, sizeof(float), cmpf);
                qsort(t[1], (size_t)reps, sizeof(float), cmpf);
                const float ma = t[0][reps / 2], mb = t[1][reps / 2];
                const double tf = 2.0 * (double)M * (double)N * (double)K / 1e12;
                printf("%-18s %-12s %10.1f %10.1f %8.3f\n", tok, mode_name[mode], ma, mb, ma / mb);
                if (jf)
                    fprintf(jf,
                            "{\"op\": \"gemm_e4m3_bf16_ab\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.1f, "
                            "\"peer\": %.1f, \"peer_name\": \"%s (same process, interleaved)\", \"ratio\": %.3f, "
                            "\"unit\": \"TFLOP/s\", \"ours_us\": %.2f, \"peer_us\": %.2f, \"lib\": \"%s\"}\n",
                            mode_name[mode], tok, tf / (mb * 1e-6), tf / (ma * 1e-6), L[0].path, ma / mb, mb, ma,
                            L[1].path);
            }
            free(t[0]);
            free(t[1]);
            cudaFree(ws[0]);
            cudaFree(ws[1]);
        }
        cudaFree(A); cudaFree(B); cudaFree(D); cudaFree(sa); cudaFree(sb); cudaFree(bias);
    }
    if (jf)
        fclose(jf);
    return 0;
}
