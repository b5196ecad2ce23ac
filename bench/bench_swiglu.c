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
 * Grouped mode (--grouped G, G > 0; 0 = the dense mode above): the same comparison for
 * fp8kit_grouped_gemm, the mixture-of-experts gate/up projection. A shape MxNxK is then T = M
 * tokens routed over G experts (a shape's ":G" overrides --grouped's G), unevenly: per-expert
 * rows around T/G, +-30%, from a fixed seed (an expert may get none when T/G is small); each
 * expert's B is (N, K) e4m3 = [gate; up] rows. --layout contiguous: A (T, K), offsets = the
 * experts' row ends; masked: A (G, Mx, K), Mx = the largest count rounded up to 64, offsets =
 * the counts (int32 offsets in device memory either way, the kernel's status word checked).
 * ours: the fused grouped kernel (act swiglu, e4m3 D of N/2 columns, out_quant block1x128 of
 * bf16 y, f32 scale_d over D's rows: T, masked G x Mx); peer: the same grouped GEMM with act
 * none and bf16 D (T x N, masked G x Mx x N), then fp8kit_quantize block1x128 of a bf16
 * T x N/2 tensor (masked: the T valid rows only, so still a lower bound); also the fused
 * grouped kernel with bf16 output and the bf16 grouped GEMM alone. Scale modes as above:
 * block (A 1x128 over all of A's rows, B 128x128 per expert; block_mn: A's MN-major, one
 * buffer over the T rows, masked one per expert slab of Mx rows) or row (A per row, B per
 * expert row). JSON rows as the dense mode's, op "grouped_swiglu", case "<mode>_g<G>_<layout>",
 * shape TxNxK, with G, layout, T, the per-expert rows (masked: max_m too) and the bf16 grouped
 * GEMM's plan (peer_plan). Inputs: e4m3 codes of normal draws as the dense mode's, one 16 MiB block
 * repeated (B's ~1 GB per shape would take long to draw element by element).
 * Usage: bench_swiglu [--reps N] [--shapes MxNxK[:G],...] [--modes block,block_mn,row] [--tuning SPEC]
 *        [--grouped G] [--layout contiguous|masked] [--json FILE] [--date D] [--commit C]
 *        (N: the GEMM's, 2 x the intermediate size; --tuning: fp8kit_ctx_set_tuning overrides,
 *        docs/tuning.md; --layout: grouped mode only, default contiguous)
 *        e.g. bench_swiglu --grouped 32 --layout masked --json swiglu.jsonl
 *        (default grouped shapes: DeepSeek-V3's expert gate/up, N 4096, K 7168, T 512, 4096 and
 *        16384 over the G given; Qwen3-30B-A3B's, N 1536, K 2048, T 4096 and 32768 over 64)
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

enum { MAX_G = 65536 }; /* experts (--grouped, :G) at most */

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

/* The grouped mode's step: fp8kit_grouped_gemm, then (quantize) fp8kit_quantize qd of qx. */
typedef struct gjob {
    fp8kit_ctx *ctx;
    fp8kit_gemm_desc desc;
    fp8kit_grouped_gemm_args args;
    int quantize;
    fp8kit_quant_desc qd;
    fp8kit_tensor qx, qq, qs;
} gjob;

static int gstep(gjob *j)
{
    fp8kit_status st = fp8kit_grouped_gemm(j->ctx, &j->desc, &j->args, NULL);
    if (st == FP8KIT_OK && j->quantize)
        st = fp8kit_quantize(j->ctx, &j->qd, &j->qx, &j->qq, &j->qs, NULL);
    if (st != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: %s: %s\n", fp8kit_status_string(st), fp8kit_last_error(j->ctx));
        return 1;
    }
    return 0;
}

static int gstep_v(void *j) { return gstep((gjob *)j); }

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

/* Device scales of operand op for the mode: random powers of two from 2^-4 to 2^3; slabs
 * (> 1: a 3-D tensor) of the scales fp8kit_gemm_scale_shape gives for rows x k each (the
 * grouped GEMM's per-expert B scales and masked MN-major A scales). */
static void *dev_scales(const fp8kit_gemm_desc *d, int op, int64_t slabs, int64_t rows, int64_t k, fp8kit_tensor *t)
{
    fp8kit_dtype dt;
    int64_t sh[2];
    const fp8kit_status st = fp8kit_gemm_scale_shape(d, op, rows, k, &dt, sh);
    if (st != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: fp8kit_gemm_scale_shape (operand %d, %lld x %lld): %s\n", op,
                (long long)rows, (long long)k, fp8kit_status_string(st));
        exit(1);
    }
    const size_t n = (size_t)(slabs * sh[0] * sh[1]);
    float *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        (void)rnorm();
        h[i] = ldexpf(1.0f, (int)(rng >> 61) - 4);
    }
    void *p = NULL;
    CK(cudaMalloc(&p, n * 4));
    CK(cudaMemcpy(p, h, n * 4, cudaMemcpyHostToDevice));
    free(h);
    const int64_t sh3[3] = {slabs, sh[0], sh[1]};
    *t = slabs > 1 ? fp8kit_tensor_make(p, dt, 3, sh3) : fp8kit_tensor_make(p, dt, 2, sh);
    return p;
}

/* Whether mode name is in the comma-separated list. */
static int mode_listed(const char *list, const char *name)
{
    char key[16], l[256];
    snprintf(key, sizeof key, ",%s,", name);
    snprintf(l, sizeof l, ",%s,", list);
    return strstr(l, key) != NULL;
}

/* Rows of T tokens per expert over G experts: weights 1 + 0.3 u (u uniform in [-1, 1], a
 * fixed seed, the same for every shape), the row ends rounded from the weights' running
 * sums, so each count is T/G +-30% (and rounding) and they add up to T; an expert whose
 * share rounds to nothing (T/G small) gets no rows. */
static void expert_rows(int64_t T, int G, int32_t *rows)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    double *w = malloc(sizeof(double) * (size_t)G), sum = 0.0, acc = 0.0;
    for (int g = 0; g < G; g++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = ((double)(s >> 11) + 0.5) * 0x1.0p-53;
        w[g] = 1.0 + 0.3 * (2.0 * u - 1.0);
        sum += w[g];
    }
    int64_t prev = 0;
    for (int g = 0; g < G; g++) {
        acc += w[g];
        const int64_t end = g == G - 1 ? T : llround((double)T * (acc / sum));
        rows[g] = (int32_t)(end - prev);
        prev = end;
    }
    free(w);
}

/* bytes of dst (device) from the host block src (n bytes) repeated, starting at src[phase % n]. */
static void fill_dev(void *dst, size_t bytes, const uint8_t *src, size_t n, size_t phase)
{
    for (size_t o = 0; o < bytes;) {
        const size_t at = (phase + o) % n, len = n - at < bytes - o ? n - at : bytes - o;
        CK(cudaMemcpy((char *)dst + o, src + at, len, cudaMemcpyHostToDevice));
        o += len;
    }
}

/* A (or D) of the grouped call: (rows, cols), or masked (G, rows, cols) with rows per expert. */
static fp8kit_tensor grouped_rows(void *p, fp8kit_dtype dt, int masked, int G, int64_t rows, int64_t cols)
{
    const int64_t sh[3] = {G, rows, cols};
    return masked ? fp8kit_tensor_make(p, dt, 3, sh) : fp8kit_tensor_2d(p, dt, rows, cols, cols);
}

/* What each benchmark row shares. */
typedef struct bench_env {
    fp8kit_ctx *ctx;
    int reps;
    const char *modes;
    void *flush;
    size_t flush_bytes;
    FILE *jf;
    const char *device, *date, *commit;
} bench_env;

/* Median us of j (fk_bench_time_us), -1 when a call failed or the kernel found the
 * offsets invalid (j's status word, set to -1 before the first call). */
static double time_grouped(const bench_env *e, gjob *j, const char *what)
{
    CK(cudaMemset(j->args.status, 0xFF, sizeof(int32_t)));
    double us = fk_bench_time_us(gstep_v, j, e->reps, e->flush, e->flush_bytes);
    int32_t status = -1;
    CK(cudaMemcpy(&status, j->args.status, sizeof status, cudaMemcpyDeviceToHost));
    if (us >= 0 && status != 0) {
        fprintf(stderr, "bench_swiglu: %s: the kernel's status word is %d (offsets rejected)\n", what, (int)status);
        us = -1.0;
    }
    return us;
}

/* One grouped shape: T tokens over G experts in layout, every mode of e->modes. */
static void run_grouped(const bench_env *e, int64_t T, int64_t N, int64_t K, int G, fp8kit_grouped_layout layout,
                        const uint8_t *blk, size_t blk_bytes)
{
    fp8kit_ctx *ctx = e->ctx;
    const int masked = layout == FP8KIT_GROUPED_MASKED;
    const char *lname = fp8kit_grouped_layout_name(layout);
    const int64_t H = N / 2;
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)G), *offs = malloc(sizeof(int32_t) * (size_t)G);
    char *rows_txt = malloc(12 * (size_t)G + 1);
    expert_rows(T, G, rows);
    int64_t end = 0, lo = T, hi = 0;
    int empty = 0;
    size_t tl = 0;
    rows_txt[0] = 0;
    for (int g = 0; g < G; g++) {
        end += rows[g];
        offs[g] = masked ? rows[g] : (int32_t)end;
        lo = rows[g] < lo ? rows[g] : lo;
        hi = rows[g] > hi ? rows[g] : hi;
        empty += rows[g] == 0;
        tl += (size_t)snprintf(rows_txt + tl, 12 * (size_t)G + 1 - tl, "%s%d", g ? ", " : "", (int)rows[g]);
    }
    const int64_t Mx = masked ? (hi + 63) / 64 * 64 : 0; /* masked: rows per expert slab */
    const int64_t R = masked ? G * Mx : T;               /* rows of A and D */
    const int64_t Dr = masked ? Mx : T;                  /* grouped_rows' rows (masked: per expert) */
    /* D's output scales over its R rows (fp8kit_gemm_scale_shape with the fused call's descriptor) */
    fp8kit_gemm_desc qdesc;
    memset(&qdesc, 0, sizeof qdesc);
    qdesc.act = FP8KIT_ACT_SWIGLU;
    qdesc.out_quant = FP8KIT_OUTQ_BLOCK1X128;
    qdesc.out_hp = FP8KIT_BF16;
    fp8kit_dtype sd_dt;
    int64_t sd_shape[2];
    const fp8kit_status sst = fp8kit_gemm_scale_shape(&qdesc, 2, R, N, &sd_dt, sd_shape);
    if (sst != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: fp8kit_gemm_scale_shape (scale_d, %lld x %lld): %s\n", (long long)R,
                (long long)N, fp8kit_status_string(sst));
        exit(1);
    }
    printf("T %lld over G %d experts, %s: rows %lld .. %lld, %d empty", (long long)T, G, lname, (long long)lo,
           (long long)hi, empty);
    if (masked)
        printf(", max rows per expert %lld", (long long)Mx);
    printf("\n");
    void *da, *db, *dy, *dh, *dq, *dsc, *doff, *dstatus;
    const size_t bbytes = (size_t)G * (size_t)N * (size_t)K;
    CK(cudaMalloc(&da, (size_t)(R * K)));
    CK(cudaMalloc(&db, bbytes));
    CK(cudaMalloc(&dy, (size_t)(R * N) * 2));
    CK(cudaMalloc(&dh, (size_t)(R * H) * 2));
    CK(cudaMalloc(&dq, (size_t)(R * H)));
    CK(cudaMalloc(&dsc, (size_t)(sd_shape[0] * sd_shape[1]) * 4));
    CK(cudaMalloc(&doff, sizeof(int32_t) * (size_t)G));
    CK(cudaMalloc(&dstatus, sizeof(int32_t)));
    fill_dev(da, (size_t)(R * K), blk, blk_bytes, 0);
    fill_dev(db, bbytes, blk, blk_bytes, blk_bytes / 2 + 4099); /* (not A's rows again) */
    CK(cudaMemcpy(doff, offs, sizeof(int32_t) * (size_t)G, cudaMemcpyHostToDevice));
    for (int mi = 0; mi < 3; mi++) {
        static const char *const names[3] = {"block", "block_mn", "row"};
        const char *mname = names[mi];
        if (!mode_listed(e->modes, mname))
            continue;
        gjob j;
        memset(&j, 0, sizeof j);
        j.ctx = ctx;
        j.desc.scale_a = j.desc.scale_b = mi < 2 ? FP8KIT_SCALE_BLOCK : FP8KIT_SCALE_ROW;
        if (mi == 1)
            j.desc.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
        j.args.a = grouped_rows(da, FP8KIT_E4M3, masked, G, Dr, K);
        const int64_t bs[3] = {G, N, K};
        j.args.b = fp8kit_tensor_make(db, FP8KIT_E4M3, 3, bs);
        j.args.offsets = (const int32_t *)doff;
        j.args.status = (int32_t *)dstatus;
        j.args.layout = layout;
        j.args.alpha = 1.0f / 4096;
        /* A's scales over its R rows, but masked MN-major: one buffer per expert's Mx rows
         * (fk_grouped_a_scale_geom); B's per expert */
        const int slab_a = mi == 1 && masked && G > 1;
        void *sa = dev_scales(&j.desc, 0, slab_a ? G : 1, slab_a ? Mx : R, K, &j.args.scale_a);
        void *sb = dev_scales(&j.desc, 1, G, N, K, &j.args.scale_b);
        /* the fused call */
        gjob f = j;
        f.desc.act = FP8KIT_ACT_SWIGLU;
        f.desc.out_quant = FP8KIT_OUTQ_BLOCK1X128;
        f.desc.out_hp = FP8KIT_BF16;
        f.args.d = grouped_rows(dq, FP8KIT_E4M3, masked, G, Dr, H);
        f.args.scale_d = fp8kit_tensor_make(dsc, sd_dt, 2, sd_shape);
        /* the fused call with bf16 output */
        gjob fb = j;
        fb.desc.act = FP8KIT_ACT_SWIGLU;
        fb.args.d = grouped_rows(dh, FP8KIT_BF16, masked, G, Dr, H);
        /* the peer: bf16 y, then quantize of a T x N/2 bf16 tensor (masked: as many rows as valid) */
        gjob p = j;
        p.args.d = grouped_rows(dy, FP8KIT_BF16, masked, G, Dr, N);
        p.quantize = 1;
        p.qd = fp8kit_quant_desc_default(FP8KIT_SCHEME_BLOCK1X128);
        const int64_t qs_shape[2] = {T, (H + 127) / 128};
        p.qx = fp8kit_tensor_2d(dh, FP8KIT_BF16, T, H, H);
        p.qq = fp8kit_tensor_2d(dq, FP8KIT_E4M3, T, H, H);
        p.qs = fp8kit_tensor_make(dsc, FP8KIT_F32, 2, qs_shape);
        gjob g = p;
        g.quantize = 0;
        const double us_f = time_grouped(e, &f, "fused");
        const double us_p = time_grouped(e, &p, "peer");
        const double us_fb = time_grouped(e, &fb, "fused bf16");
        const double us_g = time_grouped(e, &g, "bf16 gemm");
        char plan[400] = "", peer_plan[400] = "";
        fp8kit_status st = fp8kit_grouped_gemm_describe(ctx, &f.desc, &f.args, plan, sizeof plan);
        if (st != FP8KIT_OK)
            fprintf(stderr, "bench_swiglu: describe (fused): %s: %s\n", fp8kit_status_string(st),
                    fp8kit_last_error(ctx));
        st = fp8kit_grouped_gemm_describe(ctx, &g.desc, &g.args, peer_plan, sizeof peer_plan);
        if (st != FP8KIT_OK)
            fprintf(stderr, "bench_swiglu: describe (bf16 gemm): %s: %s\n", fp8kit_status_string(st),
                    fp8kit_last_error(ctx));
        char shp[64], cs[64], mx[40] = "";
        snprintf(shp, sizeof shp, "%lldx%lldx%lld", (long long)T, (long long)N, (long long)K);
        snprintf(cs, sizeof cs, "%s_g%d_%s", mname, G, lname);
        if (masked)
            snprintf(mx, sizeof mx, ", \"max_m\": %lld", (long long)Mx);
        const double ratio = us_f > 0 && us_p > 0 ? us_p / us_f : 0.0;
        const double over = us_f > 0 && us_g > 0 ? 100.0 * (us_f / us_g - 1.0) : 0.0;
        printf("%-8s %5d %-10s %-18s %11.1f %11.1f %7.3f %11.1f %11.1f %8.1f%%\n", mname, G, lname, shp, us_f, us_p,
               ratio, us_fb, us_g, over);
        if (e->jf)
            fprintf(e->jf,
                    "{\"op\": \"grouped_swiglu\", \"case\": \"%s\", \"shape\": \"%s\", \"G\": %d, \"layout\": \"%s\", "
                    "\"T\": %lld%s, \"rows\": [%s], \"ours\": %.2f, \"peer\": %.2f, \"peer_name\": \"fp8kit bf16 "
                    "grouped GEMM (act none, %s) + fp8kit_quantize block1x128 of T x N/2 bf16%s, same run (the "
                    "unfused path without its silu*mul pass)\", \"ratio\": %.3f, \"unit\": \"us\", "
                    "\"fused_bf16_us\": %.2f, \"bf16_gemm_us\": %.2f, \"overhead_pct\": %.2f, \"plan\": \"%s\", "
                    "\"peer_plan\": \"%s\", \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                    cs, shp, G, lname, (long long)T, mx, rows_txt, us_f, us_p, masked ? "G x M x N" : "T x N",
                    masked ? " (the valid rows)" : "", ratio, us_fb, us_g, over, plan, peer_plan, e->device, e->date,
                    e->commit);
        cudaFree(sa);
        cudaFree(sb);
    }
    free(rows);
    free(offs);
    free(rows_txt);
    cudaFree(da); cudaFree(db); cudaFree(dy); cudaFree(dh); cudaFree(dq); cudaFree(dsc);
    cudaFree(doff); cudaFree(dstatus);
}

/* One dense shape M x N x K, every mode of e->modes. */
static void run_dense(const bench_env *e, int64_t M, int64_t N, int64_t K)
{
    fp8kit_ctx *ctx = e->ctx;
    const int64_t H = N / 2;
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
        if (!mode_listed(e->modes, mname))
            continue;
        job j;
        memset(&j, 0, sizeof j);
        j.ctx = ctx;
        j.desc.scale_a = j.desc.scale_b = mi < 2 ? FP8KIT_SCALE_BLOCK : FP8KIT_SCALE_ROW;
        if (mi == 1) /* MN-major A scales: both kernels stage the block scales with each stage */
            j.desc.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
        j.args.a = fp8kit_tensor_2d(da, FP8KIT_E4M3, M, K, K);
        j.args.b = fp8kit_tensor_2d(db, FP8KIT_E4M3, N, K, K);
        void *sa = dev_scales(&j.desc, 0, 1, M, K, &j.args.scale_a);
        void *sb = dev_scales(&j.desc, 1, 1, N, K, &j.args.scale_b);
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
        const double us_f = fk_bench_time_us(step_v, &f, e->reps, e->flush, e->flush_bytes);
        const double us_p = fk_bench_time_us(step_v, &p, e->reps, e->flush, e->flush_bytes);
        const double us_fb = fk_bench_time_us(step_v, &fb, e->reps, e->flush, e->flush_bytes);
        const double us_g = fk_bench_time_us(step_v, &g, e->reps, e->flush, e->flush_bytes);
        char plan[400] = "";
        const fp8kit_status st = fp8kit_gemm_describe(ctx, &f.desc, &f.args, plan, sizeof plan);
        if (st != FP8KIT_OK)
            fprintf(stderr, "bench_swiglu: describe: %s: %s\n", fp8kit_status_string(st), fp8kit_last_error(ctx));
        char shp[64];
        snprintf(shp, sizeof shp, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
        const double ratio = us_f > 0 && us_p > 0 ? us_p / us_f : 0.0;
        const double over = us_f > 0 && us_g > 0 ? 100.0 * (us_f / us_g - 1.0) : 0.0;
        printf("%-8s %-18s %11.1f %11.1f %7.3f %11.1f %11.1f %8.1f%%\n", mname, shp, us_f, us_p, ratio, us_fb, us_g,
               over);
        if (e->jf)
            fprintf(e->jf,
                    "{\"op\": \"gemm_swiglu_b1x128\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.2f, "
                    "\"peer\": %.2f, \"peer_name\": \"fp8kit bf16 GEMM (act none, M x N) + fp8kit_quantize "
                    "block1x128 of M x N/2 bf16, same run (the unfused path without its silu*mul pass)\", "
                    "\"ratio\": %.3f, \"unit\": \"us\", \"fused_bf16_us\": %.2f, \"bf16_gemm_us\": %.2f, "
                    "\"overhead_pct\": %.2f, \"plan\": \"%s\", \"device\": \"%s\", \"date\": \"%s\", "
                    "\"commit\": \"%s\"}\n",
                    mname, shp, us_f, us_p, ratio, us_fb, us_g, over, plan, e->device, e->date, e->commit);
        cudaFree(sa);
        cudaFree(sb);
    }
    free(ha);
    free(hb);
    cudaFree(da); cudaFree(db); cudaFree(dy); cudaFree(dh); cudaFree(dq); cudaFree(dsc);
}

int main(int argc, char **argv)
{
    int reps = 20, groups = 0;
    const char *json = NULL, *date = fk_bench_today(), *commit = getenv("FK_COMMIT"), *shapes_arg = NULL;
    const char *modes = "block,block_mn,row", *tuning = NULL, *layout_arg = "contiguous";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--date") && i + 1 < argc) date = argv[++i];
        else if (!strcmp(argv[i], "--commit") && i + 1 < argc) commit = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes_arg = argv[++i];
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc) modes = argv[++i];
        else if (!strcmp(argv[i], "--tuning") && i + 1 < argc) tuning = argv[++i];
        else if (!strcmp(argv[i], "--grouped") && i + 1 < argc) groups = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc) layout_arg = argv[++i];
        else {
            fprintf(stderr, "usage: bench_swiglu [--reps N] [--shapes MxNxK[:G],...] [--modes block,block_mn,row] "
                            "[--tuning SPEC] [--grouped G] [--layout contiguous|masked] [--json FILE] [--date D] "
                            "[--commit C]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    if (groups < 0 || groups > MAX_G) {
        fprintf(stderr, "bench_swiglu: --grouped %d: G must be 0 (the dense mode) to %d\n", groups, MAX_G);
        return 2;
    }
    fp8kit_grouped_layout layout;
    if (fp8kit_grouped_layout_parse(layout_arg, &layout) != FP8KIT_OK) {
        fprintf(stderr, "bench_swiglu: --layout %s: %s\n", layout_arg, fp8kit_last_error(NULL));
        return 2;
    }
    /* dense: DeepSeek-V3 expert gate/up (2 x 2048, K 7168) at prefill and decode row counts, Qwen3-30B-A3B's
     * (2 x 768, K 2048), Llama-3 8B's MLP (2 x 14336, K 4096); grouped: DeepSeek-V3's over the G given
     * (column 3 = 0) at T 512, 4096 and 16384, Qwen3-30B-A3B's over 64 experts at T 4096 and 32768 */
    int64_t shapes[12][4] = {{4096, 4096, 7168, 0}, {512, 4096, 7168, 0}, {128, 4096, 7168, 0},
                             {8192, 1536, 2048, 0}, {4096, 28672, 4096, 0}};
    static const int64_t grouped_shapes[5][4] = {{512, 4096, 7168, 0},   {4096, 4096, 7168, 0},
                                                 {16384, 4096, 7168, 0}, {4096, 1536, 2048, 64},
                                                 {32768, 1536, 2048, 64}};
    int nshapes = 5;
    if (groups > 0)
        memcpy(shapes, grouped_shapes, sizeof grouped_shapes);
    if (shapes_arg) {
        nshapes = 0;
        for (const char *p = shapes_arg; *p && nshapes < 12;) {
            long long m, n, k, g = 0;
            int used = 0;
            int bad = sscanf(p, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 || m < 1 || n < 256 || k < 16 ||
                      n % 256 || k % 128 || (groups > 0 && m > INT32_MAX);
            if (!bad && p[used] == ':') /* a grouped shape's own expert count */
                bad = groups == 0 || sscanf(p + used + 1, "%lld", &g) != 1 || g < 1 || g > MAX_G;
            if (bad) {
                fprintf(stderr, "bench_swiglu: bad shape at '%s' (N %% 256 == 0, K %% 128 == 0; grouped: M < 2^31, "
                                ":G from 1 to %d, with --grouped only)\n",
                        p, MAX_G);
                return 2;
            }
            shapes[nshapes][0] = m, shapes[nshapes][1] = n, shapes[nshapes][2] = k, shapes[nshapes][3] = g;
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
    const bench_env env = {ctx, reps, modes, flush, flush_bytes, jf, prop.name, date, commit ? commit : "?"};
    if (groups > 0) {
        /* the inputs' block: e4m3 codes of normal draws, as the dense mode's */
        const size_t blk_bytes = 16u << 20;
        uint8_t *blk = malloc(blk_bytes);
        for (size_t i = 0; i < blk_bytes; i++)
            blk[i] = fk_f32_to_e4m3((float)rnorm() * 16.0f);
        printf("%-8s %5s %-10s %-18s %11s %11s %7s %11s %11s %9s\n", "mode", "G", "layout", "T x N x K", "fused us",
               "peer us", "ratio", "fused bf16", "bf16 gemm", "overhead");
        for (int si = 0; si < nshapes; si++)
            run_grouped(&env, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3] ? (int)shapes[si][3] : groups,
                        layout, blk, blk_bytes);
        free(blk);
    } else {
        printf("%-8s %-18s %11s %11s %7s %11s %11s %9s\n", "mode", "M x N x K", "fused us", "peer us", "ratio",
               "fused bf16", "bf16 gemm", "overhead");
        for (int si = 0; si < nshapes; si++)
            run_dense(&env, shapes[si][0], shapes[si][1], shapes[si][2]);
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
