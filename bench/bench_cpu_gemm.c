/* bench_cpu_gemm.c - CPU scaled FP8 GEMM benchmark: fp8kit_gemm on the CPU
 * backend (e4m3 x e4m3, per-tensor scales, bf16 out) against OpenBLAS
 * cblas_sgemm on f32 copies of the same (dequantized) data, measured in the
 * same run: medians after a warm-up, ours and the peer timed in alternating
 * rounds so both see the same load on a shared machine; GFLOP/s = 2*M*N*K /
 * time. Prints a table (with the 1-minute load average after each row) and
 * one JSON line per shape. Without OpenBLAS (FK_HAVE_OPENBLAS undefined)
 * it prints ours only.
 * OpenBLAS 0.3.21 does not recognise every recent Xeon and then falls back
 * to its SSE3 ("Prescott") kernels, a peer 5x slower than it can be; so
 * unless OPENBLAS_CORETYPE is set, the benchmark re-runs itself with
 * OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) and prints the core
 * OpenBLAS reports.
 * Run: build/bench_cpu_gemm [threads]   (threads 0 = OpenMP default) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fp8kit.h"
#include "format/codec.h"
#ifdef FK_HAVE_OPENBLAS
#include <cblas.h>
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_state = 0x1234567887654321ull;
static double rng_normal(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(rng_state >> 11) + 0.5) * 0x1.0p-53;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* Medians of timed runs of fn[0] (ours) and fn[1] (the peer, may be NULL),
 * interleaved in rounds (a few runs of one, then of the other) so both see
 * the same machine load on a shared machine; one warm-up run each first, and
 * about `budget` seconds in all. Returns -1 in *med on failure. */
typedef int (*run_fn)(void *arg);
static void time_medians(run_fn fn[2], void *arg, double budget, double med[2])
{
    enum { ROUNDS = 5, MAXR = 60 };
    double once = 0, t[2][MAXR];
    int nf = fn[1] ? 2 : 1, n[2] = {0, 0};
    med[0] = med[1] = -1;
    for (int f = 0; f < nf; f++) {
        double t0 = now_s();
        if (fn[f](arg))
            return;
        once += now_s() - t0;
    }
    int per = once > 0 ? (int)(budget / once / ROUNDS) : 10; /* runs of each per round */
    per = per < 1 ? 1 : per > MAXR / ROUNDS ? MAXR / ROUNDS : per;
    for (int r = 0; r < ROUNDS; r++)
        for (int f = 0; f < nf; f++)
            for (int i = 0; i < per; i++) {
                double s0 = now_s();
                if (fn[f](arg))
                    return;
                t[f][n[f]++] = now_s() - s0;
            }
    for (int f = 0; f < nf; f++) {
        qsort(t[f], (size_t)n[f], sizeof t[f][0], cmp_dbl);
        med[f] = t[f][n[f] / 2];
    }
}

typedef struct gemm_arg {
    fp8kit_ctx *ctx;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args;
    int64_t m, n, k;
    float *af, *bf, *cf;
} gemm_arg;

static int run_ours(void *p)
{
    gemm_arg *g = (gemm_arg *)p;
    fp8kit_status st = fp8kit_gemm(g->ctx, &g->desc, &g->args, NULL);
    if (st != FP8KIT_OK) {
        fprintf(stderr, "fp8kit_gemm: %s: %s\n", fp8kit_status_string(st), fp8kit_last_error(g->ctx));
        return 1;
    }
    return 0;
}

#ifdef FK_HAVE_OPENBLAS
static int run_peer(void *p)
{
    gemm_arg *g = (gemm_arg *)p;
    /* C (M x N) = A (M x K) * B (N x K)^T, all row-major, like the fp8 call */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f, g->af, (int)g->k,
                g->bf, (int)g->k, 0.0f, g->cf, (int)g->n);
    return 0;
}
#endif

static double load_avg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static void cpu_name(char *out, size_t n)
{
    snprintf(out, n, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
#ifdef FK_HAVE_OPENBLAS
    if (!getenv("OPENBLAS_CORETYPE")) {
        __builtin_cpu_init();
        const char *core = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                           : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
        if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0)
            execv("/proc/self/exe", argv); /* returns only on failure: go on as we are */
    }
#endif
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    static const int64_t shapes[][3] = {{512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 4096}, {4096, 4096, 1024}};
    fp8kit_ctx *ctx = NULL;
    fp8kit_status st = fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx);
    if (st != FP8KIT_OK) {
        fprintf(stderr, "fp8kit_ctx_create: %s\n", fp8kit_status_string(st));
        return 1;
    }
    fp8kit_ctx_set_threads(ctx, threads);
    char dev[256], desc[400], date[32];
    cpu_name(dev, sizeof dev);
    snprintf(desc, sizeof desc, "%s, %s", dev, fp8kit_ctx_describe(ctx));
    time_t tt = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tt));
#ifdef FK_HAVE_OPENBLAS
    char peer_buf[128];
    snprintf(peer_buf, sizeof peer_buf, "OpenBLAS cblas_sgemm (f32, core %s)", openblas_get_corename());
    const char *peer_name = peer_buf;
    if (threads > 0)
        openblas_set_num_threads(threads);
#else
    const char *peer_name = "none (built without OpenBLAS)";
#endif
    printf("fp8kit CPU GEMM, e4m3 x e4m3 (TN), per-tensor scales, bf16 out; peer: %s\n", peer_name);
    printf("device: %s\n\n", desc);
    printf("%-20s %14s %14s %8s %6s\n", "shape (MxNxK)", "ours GFLOP/s", "peer GFLOP/s", "ratio", "load");
    char json[64][1024];
    int nj = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        uint8_t *a = (uint8_t *)malloc((size_t)(M * K)), *b = (uint8_t *)malloc((size_t)(N * K));
        uint16_t *d = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(M * N));
        float sa = 0.02f, sb = 0.03f;
        gemm_arg g;
        memset(&g, 0, sizeof g);
        g.ctx = ctx, g.m = M, g.n = N, g.k = K;
        g.af = (float *)malloc(sizeof(float) * (size_t)(M * K));
        g.bf = (float *)malloc(sizeof(float) * (size_t)(N * K));
        g.cf = (float *)malloc(sizeof(float) * (size_t)(M * N));
        if (!a || !b || !d || !g.af || !g.bf || !g.cf) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < M * K; i++) {
            a[i] = fk_f32_to_e4m3((float)(rng_normal() * 64.0));
            g.af[i] = fk_e4m3_to_f32(a[i]) * sa;
        }
        for (int64_t i = 0; i < N * K; i++) {
            b[i] = fk_f32_to_e4m3((float)(rng_normal() * 64.0));
            g.bf[i] = fk_e4m3_to_f32(b[i]) * sb;
        }
        int64_t one = 1;
        g.desc.scale_a = FP8KIT_SCALE_TENSOR, g.desc.scale_b = FP8KIT_SCALE_TENSOR;
        g.args.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, M, K, K);
        g.args.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, N, K, K);
        g.args.scale_a = fp8kit_tensor_make(&sa, FP8KIT_F32, 1, &one);
        g.args.scale_b = fp8kit_tensor_make(&sb, FP8KIT_F32, 1, &one);
        g.args.alpha = 1.0f;
        g.args.d = fp8kit_tensor_2d(d, FP8KIT_BF16, M, N, N);
        double flop = 2.0 * (double)M * (double)N * (double)K;
#ifdef FK_HAVE_OPENBLAS
        run_fn fns[2] = {run_ours, run_peer};
#else
        run_fn fns[2] = {run_ours, NULL};
#endif
        double med[2];
        time_medians(fns, &g, 6.0, med);
        if (med[0] <= 0)
            return 1;
        double ours = flop / med[0] * 1e-9, peer = med[1] > 0 ? flop / med[1] * 1e-9 : 0.0;
#ifdef FK_HAVE_OPENBLAS
        /* sanity: the two results agree to bf16 precision */
        double num = 0, den = 0;
        for (int64_t i = 0; i < M * N; i++) {
            double x = fk_bf16_to_f32(d[i]), y = g.cf[i];
            num += (x - y) * (x - y), den += y * y;
        }
        if (!(sqrt(num / den) < 4e-3)) {
            fprintf(stderr, "results disagree: rel %.3g\n", sqrt(num / den));
            return 1;
        }
#endif
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
        char peer_s[32] = "-", ratio_s[32] = "-", peer_j[32] = "null", ratio_j[32] = "null";
        if (peer > 0) {
            snprintf(peer_s, sizeof peer_s, "%.1f", peer);
            snprintf(ratio_s, sizeof ratio_s, "%.2f", ours / peer);
            snprintf(peer_j, sizeof peer_j, "%.2f", peer);
            snprintf(ratio_j, sizeof ratio_j, "%.3f", ours / peer);
        }
        double load = load_avg();
        printf("%-20s %14.1f %14s %8s %6.2f\n", shape, ours, peer_s, ratio_s, load);
        fflush(stdout);
        snprintf(json[nj++], sizeof json[0],
                 "{\"op\": \"gemm_e4m3_tensor_bf16\", \"backend\": \"cpu\", \"shape\": \"%s\", \"ours\": %.2f, "
                 "\"peer\": %s, \"peer_name\": \"%s\", \"ratio\": %s, \"unit\": \"GFLOP/s\", \"device\": \"%s\", "
                 "\"date\": \"%s\", \"load\": %.2f}",
                 shape, ours, peer_j, peer_name, ratio_j, desc, date, load);
        free(a), free(b), free(d), free(g.af), free(g.bf), free(g.cf);
    }
    printf("\n");
    for (int i = 0; i < nj; i++)
        printf("%s\n", json[i]);
    fp8kit_ctx_destroy(ctx);
    return 0;
}
