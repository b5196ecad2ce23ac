/* bench_swiglu.c - CUDA benchmark of the fused SwiGLU GEMM (desc.act = FP8KIT_ACT_SWIGLU: D
 * (M x N/2) = silu(y[:, j]) * y[:, N/2 + j]) with e4m3 1x128-quantized output (y rounded to
 * bf16 first), the MoE gate/up projection that feeds the down projection, against the
 * unfused pipeline's GEMM and quantize in the same run: the same GEMM with act none and
 * bf16 y (M x N), then fp8kit_quantize (block1x128) of a bf16 M x N/2 tensor. That peer
 * leaves out the unfused path's silu * mul pass (one more read of y and write of its half),
 * so it is a lower bound of the unfused time; ratio = peer / ours. Also printed: the
 * fused kernel with bf16 output, and the bf16 GEMM alone (the fused epilogue's overhead).
 * Scaling: block (1x128 A, 128x128 B; block_mn: A's scales MN-major, which the kernels stage with
 * each stage) or row; e4m3 x e4m3, normal random inputs. Median
 * of N CUDA-event timings after warm-up, L2 flushed before each. One JSON line per row (op,
 * case, shape, ours, peer, peer_name, ratio, unit us, device, date, commit) to --json FILE.
 * Usage: bench_swiglu [--reps N] [--shapes MxNxK,...] [--modes block,block_mn,row] [--tuning SPEC]
 *        [--json FILE] [--date D] [--commit C]   (N: the GEMM's, 2 x the intermediate size;
 *        --tuning: fp8kit_ctx_set_tuning overrides, docs/tuning.md)
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

typedef struct job {
    fp8kit_ctx *ctx;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args;
    int quantize; /* then fp8kit_quantize qd of qx */
    fp8kit_quant_desc qd;
    fp8kit_tensor qx, qq, qs;
} job;

static int step(job *j)
{
    fp8kit_status st = fp8kit_gemm(j->ctx, &j->desc, &j->args, NULL);
    if (st == FP8KIT_OK && j->quantize)
        st = fp8kit_quantize(j->ctx, &j->qd, &j->qx, &j->qq, &j->qs, NULL);
    if (st != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: %s: %s\n", fp8kit_status_string(st), fp8kit_last_error(j->ctx));
        return 1;
    }
    return 0;
}

static int step_v(void *j) { return step((job *)j); }

static uint64_t rng = 0x5e1f00d5eedull;
static double rnorm(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u[i] = ((double)(rng >> 11) + 0.5) * 0x1.0p-53;
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* Device scales of operand op for the mode: random powers of two from 2^-4 to 2^3. */
static void *dev_scales(const fp8kit_gemm_desc *d, int op, int64_t rows, int64_t k, fp8kit_tensor *t)
{
    fp8kit_dtype dt;
    int64_t sh[2];
    if (fp8kit_gemm_scale_shape(d, op, rows, k, &dt, sh) != FP8KIT_OK)
        exit(1);
    const size_t n = (size_t)(sh[0] * sh[1]);
    float *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        (void)rnorm();
        h[i] = ldexpf(1.0f, (int)(rng >> 61) - 4);
    }
    void *p = NULL;
    CK(cudaMalloc(&p, n * 4));
    CK(cudaMemcpy(p, h, n * 4, cudaMemcpyHostToDevice));
    free(h);
    *t = fp8kit_tensor_make(p, dt, 2, sh);
    return p;
}

int main(int argc, char **argv)
{
    int reps = 20;
    const char *json = NULL, *date = fk_bench_today(), *commit = getenv("FK_COMMIT"), *shapes_arg = NULL;
    const char *modes = "block,block_mn,row", *tuning = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--date") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes_arg = argv[++i];
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc) modes = argv[++i];
        else if (!strcmp(argv[i], "--tuning") && i + 1 < argc) tuning = argv[++i];
        else {
            fprintf(stderr, "usage: bench_swiglu [--reps N] [--shapes MxNxK,...] [--modes block,block_mn,row] [--tuning SPEC] "
                            "[--json FILE] [--date D] [--commit C]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    /* DeepSeek-V3 expert gate/up (2 x 2048, K 7168) at prefill and decode row counts, Qwen3-30B-A3B's
     * (2 x 768, K 2048), Llama-3 8B's MLP (2 x 14336, K 4096) */
    int64_t shapes[12][3] = {{4096, 4096, 7168}, {512, 4096, 7168}, {128, 4096, 7168},
                             {8192, 1536, 2048}, {4096, 28672, 4096}};
    int nshapes = 5;
    if (shapes_arg) {
        nshapes = 0;
        for (const char *p = shapes_arg; *p && nshapes < 12;) {
            long long m, n, k;
            if (sscanf(p, "%lldx%lldx%lld", &m, &n, &k) != 3 || m < 1 || n < 256 || k < 16 || n % 256 || k % 128) {
                fprintf(stderr, "bench_swiglu: bad shape at '%s' (N %% 256 == 0, K %% 128 == 0)\n", p);
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
    fp8kit_ctx *ctx = NULL;
    FILE *jf = NULL;
    struct cudaDeviceProp prop;
    const int rc = fk_bench_open("bench_swiglu", json, &ctx, &prop, &jf);
    if (rc >= 0)
        return rc;
    if (tuning && fp8kit_ctx_set_tuning(ctx, tuning) != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: --tuning %s: %s\n", tuning, fp8kit_last_error(ctx));
        return 2;
    }
    const size_t flush_bytes = 256u << 20;
    void *flush = NULL;
    CK(cudaMalloc(&flush, flush_bytes));
    printf("%s, commit %s\n", prop.name, commit ? commit : "?");
    printf("%-8s %-18s %11s %11s %7s %11s %11s %9s\n", "mode", "M x N x K", "fused us", "peer us", "ratio",
           "fused bf16", "bf16 gemm", "overhead");
    for (int si = 0; si < nshapes; si++) {
        const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], H = N / 2;
        uint8_t *ha = malloc((size_t)(M * K)), *hb = malloc((size_t)(N * K));
        for (int64_t i = 0; i < M * K; i++) ha[i] = fk_f32_to_e4m3((float)rnorm() * 16.0f);
        for (int64_t i = 0; i < N * K; i++) hb[i] = fk_f32_to_e4m3((float)rnorm() * 16.0f);
        void *da, *db, *dy, *dh, *dq, *dsc;
        CK(cudaMalloc(&da, (size_t)(M * K)));
        CK(cudaMalloc(&db, (size_t)(N * K)));
        CK(cudaMalloc(&dy, (size_t)(M * N) * 2));
        CK(cudaMalloc(&dh, (size_t)(M * H) * 2));
        CK(cudaMalloc(&dq, (size_t)(M * H)));
        CK(cudaMalloc(&dsc, (size_t)(M * ((H + 127) / 128)) * 4));
        CK(cudaMemcpy(da, ha, (size_t)(M * K), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(db, hb, (size_t)(N * K), cudaMemcpyHostToDevice));
        for (int mi = 0; mi < 3; mi++) {
            static const char *const names[3] = {"block", "block_mn", "row"};
            const char *mname = names[mi];
            char key[16];
            snprintf(key, sizeof key, ",%s,", mname);
            char list[256];
            snprintf(list, sizeof list, ",%s,", modes);
            if (!strstr(list, key))
                continue;
            job j;
            memset(&j, 0, sizeof j);
            j.ctx = ctx;
            j.desc.scale_a = j.desc.scale_b = mi < 2 ? FP8KIT_SCALE_BLOCK : FP8KIT_SCALE_ROW;
            if (mi == 1) /* MN-major A scales: both kernels stage the block scales with each stage */
                j.desc.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
            j.args.a = fp8kit_tensor_2d(da, FP8KIT_E4M3, M, K, K);
            j.args.b = fp8kit_tensor_2d(db, FP8KIT_E4M3, N, K, K);
            void *sa = dev_scales(&j.desc, 0, M, K, &j.args.scale_a), *sb = dev_scales(&j.desc, 1, N, K, &j.args.scale_b);
            j.args.alpha = 1.0f / 4096;
            int64_t sd_shape[2] = {M, (H + 127) / 128};
            /* the fused call */
            job f = j;
            f.desc.act = FP8KIT_ACT_SWIGLU;
            f.desc.out_quant = FP8KIT_OUTQ_BLOCK1X128;
            f.desc.out_hp = FP8KIT_BF16;
            f.args.d = fp8kit_tensor_2d(dq, FP8KIT_E4M3, M, H, H);
            f.args.scale_d = fp8kit_tensor_make(dsc, FP8KIT_F32, 2, sd_shape);
            /* the fused call with bf16 output */
            job fb = j;
            fb.desc.act = FP8KIT_ACT_SWIGLU;
            fb.args.d = fp8kit_tensor_2d(dh, FP8KIT_BF16, M, H, H);
            /* the peer: bf16 y, then quantize of an M x N/2 bf16 tensor */
            job p = j;
            p.args.d = fp8kit_tensor_2d(dy, FP8KIT_BF16, M, N, N);
            p.quantize = 1;
            p.qd = fp8kit_quant_desc_default(FP8KIT_SCHEME_BLOCK1X128);
            p.qx = fp8kit_tensor_2d(dh, FP8KIT_BF16, M, H, H);
            p.qq = fp8kit_tensor_2d(dq, FP8KIT_E4M3, M, H, H);
            p.qs = fp8kit_tensor_make(dsc, FP8KIT_F32, 2, sd_shape);
            job g = p;
            g.quantize = 0;
            const double us_f = fk_bench_time_us(step_v, &f, reps, flush, flush_bytes);
            const double us_p = fk_bench_time_us(step_v, &p, reps, flush, flush_bytes);
            const double us_fb = fk_bench_time_us(step_v, &fb, reps, flush, flush_bytes);
            const double us_g = fk_bench_time_us(step_v, &g, reps, flush, flush_bytes);
            char plan[400] = "";
            fp8kit_gemm_describe(ctx, &f.desc, &f.args, plan, sizeof plan);
            char shp[64];
            snprintf(shp, sizeof shp, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
            const double ratio = us_f > 0 && us_p > 0 ? us_p / us_f : 0.0;
            const double over = us_f > 0 && us_g > 0 ? 100.0 * (us_f / us_g - 1.0) : 0.0;
            printf("%-8s %-18s %11.1f %11.1f %7.3f %11.1f %11.1f %8.1f%%\n", mname, shp, us_f, us_p, ratio, us_fb, us_g,
                   over);
            if (jf)
                fprintf(jf,
                        "{\"op\": \"gemm_swiglu_b1x128\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.2f, "
                        "\"peer\": %.2f, \"peer_name\": \"fp8kit bf16 GEMM (act none, M x N) + fp8kit_quantize "
                        "block1x128 of M x N/2 bf16, same run (the unfused path without its silu*mul pass)\", "
                        "\"ratio\": %.3f, \"unit\": \"us\", \"fused_bf16_us\": %.2f, \"bf16_gemm_us\": %.2f, "
                        "\"overhead_pct\": %.2f, \"plan\": \"%s\", \"device\": \"%s\", \"date\": \"%s\", "
                        "\"commit\": \"%s\"}\n",
                        mname, shp, us_f, us_p, ratio, us_fb, us_g, over, plan, prop.name, date,
                        commit ? commit : "?");
            cudaFree(sa);
            cudaFree(sb);
        }
        free(ha);
        free(hb);
        cudaFree(da); cudaFree(db); cudaFree(dy); cudaFree(dh); cudaFree(dq); cudaFree(dsc);
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
    printf("bench_swiglu: built without CUDA, skipped\n");
    return 77;
}
#endif
