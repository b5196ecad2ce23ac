/* bench_quant.c - CUDA quantization bandwidth against a device-to-device copy
 * measured in the same run. For each case: median of FK_BENCH_REPS (default
 * 30) CUDA-event timings after warm-up, L2 flushed (a 256 MiB memset) before
 * every timed call, random bf16 input (never zeros). Bandwidth counts bytes
 * moved: 2 B in per bf16 element + 1 B out per q element + the scale bytes;
 * the copy counts read + write of a buffer as large as the input. Prints a
 * table and one JSON line per case (stdout, and appended to the file named by
 * argv[1] if given). The tensor scheme reads x twice (amax pass, quantize
 * pass): its line also gives the bytes actually moved (2 reads of x + q) and
 * that figure's ratio ("moved", "moved_ratio"). Env: FK_COMMIT, FK_DATE
 * (default today, UTC), FK_BENCH_REPS, FK_BENCH_QUICK=1 (one shape),
 * FK_BENCH_ONLY=a,b (cases whose name contains one of the words),
 * FK_BENCH_SHAPE=n (only the n-th shape: 0 16384x8192, 1 8192x7168, 2 3-D),
 * FK_BENCH_PROFILE=1 (each case called once, untimed: for ncu).
 * Build: part of the CMake build (bench/bench_*.c); run: ./bench_quant [out.jsonl] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "bench_date.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static int reps = 30, profile;
static void *flush_buf;
static size_t flush_bytes = (size_t)256 << 20;
static char device_name[256];
static const char *commit = "unknown", *date;
static FILE *jout;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* One timed operation. */
typedef struct op {
    int kind; /* 0 quantize, 1 fused both axes, 2 copy, 3 cast */
    fp8kit_ctx *ctx;
    fp8kit_quant_desc d;
    fp8kit_tensor x, q, s;
    fp8kit_tensor q2, s2; /* fused: the columnwise (axis -2) outputs */
    void *dst, *src;
    size_t bytes;
} op;

static int run_op(op *o)
{
    switch (o->kind) {
    case 0: {
        fp8kit_status st = fp8kit_quantize(o->ctx, &o->d, &o->x, &o->q, &o->s, NULL);
        if (st) {
            fprintf(stderr, "quantize failed: %s\n", fp8kit_last_error(o->ctx));
            return 1;
        }
        return 0;
    }
    case 1: {
        fp8kit_status st = fp8kit_quantize_mx_both(o->ctx, &o->d, &o->x, &o->q, &o->s, &o->q2, &o->s2, NULL);
        if (st) {
            fprintf(stderr, "fused failed: %s\n", fp8kit_last_error(o->ctx));
            return 1;
        }
        return 0;
    }
    case 3: {
        fp8kit_status st = fp8kit_cast(o->ctx, &o->x, &o->q, NULL);
        if (st) {
            fprintf(stderr, "cast failed: %s\n", fp8kit_last_error(o->ctx));
            return 1;
        }
        return 0;
    }
    default:
        return cudaMemcpyAsync(o->dst, o->src, o->bytes, cudaMemcpyDeviceToDevice, NULL) != cudaSuccess;
    }
}

/* Median milliseconds of `reps` timed calls, L2 flushed before each. */
static float time_op(op *o)
{
    if (profile) { /* one untimed call (ncu profiles it) */
        if (run_op(o))
            exit(1);
        CK(cudaDeviceSynchronize());
        return 1.0f;
    }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++)
        if (run_op(o))
            exit(1);
    float *ms = malloc(sizeof(float) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        CK(cudaMemsetAsync(flush_buf, i & 0xFF, flush_bytes, NULL));
        CK(cudaEventRecord(a, NULL));
        if (run_op(o))
            exit(1);
        CK(cudaEventRecord(b, NULL));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CK(cudaGetLastError());
    qsort(ms, (size_t)reps, sizeof(float), cmp_float);
    float med = reps % 2 ? ms[reps / 2] : 0.5f * (ms[reps / 2 - 1] + ms[reps / 2]);
    free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

/* bytes: the counted bytes; moved: the bytes the kernels actually move when
 * that differs (tensor: x read twice), else 0. */
static void report(const char *cname, const char *shape, double bytes, double moved, float ms, double copy_tbs)
{
    double tbs = bytes / (ms * 1e-3) / 1e12;
    double ratio = tbs / copy_tbs;
    char extra[160] = "";
    printf("%-28s %-16s %9.3f ms %7.3f TB/s  copy %6.3f TB/s  ratio %.3f", cname, shape, ms, tbs, copy_tbs, ratio);
    if (moved > 0) {
        double mt = moved / (ms * 1e-3) / 1e12;
        printf("  moved %.3f TB/s ratio %.3f", mt, mt / copy_tbs);
        snprintf(extra, sizeof extra, ", \"moved\": %.4f, \"moved_ratio\": %.4f", mt, mt / copy_tbs);
    }
    printf("\n");
    char line[1024];
    snprintf(line, sizeof line,
             "{\"op\": \"quantize\", \"case\": \"%s\", \"shape\": \"%s\", \"ours\": %.4f, \"peer\": %.4f, "
             "\"peer_name\": \"cudaMemcpy D2D (read+write)\", \"ratio\": %.4f%s, \"unit\": \"TB/s\", "
             "\"ms\": %.5f, \"device\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}",
             cname, shape, tbs, copy_tbs, ratio, extra, ms, device_name, date, commit);
    printf("JSON %s\n", line);
    if (jout) {
        fprintf(jout, "%s\n", line);
        fflush(jout);
    }
}

/* FK_BENCH_ONLY: comma-separated words; a case runs when its name contains one. */
static const char *only;
static int selected(const char *name)
{
    if (!only || !*only)
        return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", only);
    for (char *w = strtok(buf, ","); w; w = strtok(NULL, ","))
        if (*w && strstr(name, w))
            return 1;
    return 0;
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random bf16: sign, exponent 2^-8 .. 2^7 with a random per-row magnitude, random mantissa. */
static void fill_bf16(uint16_t *h, int64_t rows, int64_t cols, uint64_t seed)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        uint32_t base = 119u + (uint32_t)(mix64(seed ^ (uint64_t)r) % 8u);
        for (int64_t c = 0; c < cols; c++) {
            uint64_t z = mix64(seed + (uint64_t)(r * cols + c));
            h[r * cols + c] = (uint16_t)(((z >> 16) & 0x8000u) | ((base + (uint32_t)(z & 7u)) << 7) | ((z >> 8) & 0x7Fu));
        }
    }
}

/* The q / scale tensors fp8kit_quant_shapes gives for o->d and o->x, on the
 * buffers q and s; returns the scale bytes. */
static size_t set_outputs(op *o, fp8kit_tensor *q, fp8kit_tensor *sc, void *qbuf, void *sbuf, size_t sbytes,
                          const char *name)
{
    if (fp8kit_quant_shapes(&o->d, &o->x, q, sc)) {
        fprintf(stderr, "quant_shapes failed for %s\n", name);
        exit(1);
    }
    q->data = qbuf;
    sc->data = sbuf;
    const size_t sb = (size_t)fp8kit_tensor_numel(sc) * fp8kit_dtype_size(sc->dtype);
    if (sb > sbytes) {
        fprintf(stderr, "scale buffer too small for %s\n", name);
        exit(1);
    }
    return sb;
}

typedef struct bcase {
    const char *name;
    fp8kit_scheme scheme;
    int axis, rceil, blocked, fused; /* fused: 1 both mx axes, 2 plain cast to e4m3 */
} bcase;

static void bench_shape(fp8kit_ctx *ctx, int64_t E, int64_t R, int64_t C, const bcase *cases, int ncases)
{
    const int64_t n = E * R * C;
    char shape[64];
    if (E > 1)
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)E, (long long)R, (long long)C);
    else
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)R, (long long)C);
    uint16_t *hx = malloc((size_t)n * 2);
    fill_bf16(hx, E * R, C, (uint64_t)(R * 131 + C));
    void *dx, *dq, *dq2, *ds, *ds2;
    const size_t sbytes = (size_t)(E * (R + 128) * (C / 32 + 4)) * 4 + (1 << 20); /* >= any scale layout */
    CK(cudaMalloc(&dx, (size_t)n * 2));
    CK(cudaMalloc(&dq, (size_t)n));
    CK(cudaMalloc(&dq2, (size_t)n));
    CK(cudaMalloc(&ds, sbytes));
    CK(cudaMalloc(&ds2, sbytes));
    CK(cudaMemcpy(dx, hx, (size_t)n * 2, cudaMemcpyHostToDevice));
    free(hx);

    op cp;
    memset(&cp, 0, sizeof cp);
    cp.kind = 2;
    cp.src = dx;
    cp.bytes = (size_t)n * 2;
    CK(cudaMalloc(&cp.dst, cp.bytes));
    const float cms = time_op(&cp);
    const double copy_tbs = 2.0 * (double)cp.bytes / (cms * 1e-3) / 1e12;
    printf("%-28s %-16s %9.3f ms %7.3f TB/s (read+write)\n", "copy", shape, cms, copy_tbs);
    CK(cudaFree(cp.dst));

    int64_t shp[3] = {E, R, C};
    for (int i = 0; i < ncases; i++) {
        const bcase *c = &cases[i];
        if (!selected(c->name))
            continue;
        op o;
        memset(&o, 0, sizeof o);
        o.ctx = ctx;
        double bytes = (double)n * 3.0, moved = 0.0;
        if (c->fused == 2) {
            o.kind = 3;
            o.x = fp8kit_tensor_make(dx, FP8KIT_BF16, 2, shp + 1);
            if (E > 1)
                o.x = fp8kit_tensor_make(dx, FP8KIT_BF16, 3, shp);
            o.q = o.x;
            o.q.data = dq;
            o.q.dtype = FP8KIT_E4M3;
        } else {
            o.kind = c->fused ? 1 : 0;
            o.d = fp8kit_quant_desc_default(c->scheme);
            o.d.axis = c->axis;
            o.d.rounding = c->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
            o.d.scale_layout = c->blocked ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
            o.x = E > 1 ? fp8kit_tensor_make(dx, FP8KIT_BF16, 3, shp) : fp8kit_tensor_make(dx, FP8KIT_BF16, 2, shp + 1);
            bytes += (double)set_outputs(&o, &o.q, &o.s, dq, ds, sbytes, c->name);
            if (c->fused) { /* the columnwise copy: another q and its scales */
                o.d.axis = -2;
                bytes += (double)n + (double)set_outputs(&o, &o.q2, &o.s2, dq2, ds2, sbytes, c->name);
                o.d.axis = c->axis;
            }
            if (c->scheme == FP8KIT_SCHEME_TENSOR)
                moved = bytes + (double)n * 2.0; /* the quantize pass reads x again */
        }
        const float ms = time_op(&o);
        report(c->name, shape, bytes, moved, ms, copy_tbs);
    }
    CK(cudaFree(dx));
    CK(cudaFree(dq));
    CK(cudaFree(dq2));
    CK(cudaFree(ds));
    CK(cudaFree(ds2));
}

int main(int argc, char **argv)
{
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("bench_quant: no usable CUDA device, skipped\n");
        return 0;
    }
    const char *e;
    if ((e = getenv("FK_BENCH_REPS")) && atoi(e) >= 5)
        reps = atoi(e);
    if ((e = getenv("FK_COMMIT")))
        commit = e;
    date = (e = getenv("FK_DATE")) ? e : fk_bench_today();
    const int quick = (e = getenv("FK_BENCH_QUICK")) && atoi(e);
    const int shape_only = (e = getenv("FK_BENCH_SHAPE")) ? atoi(e) : -1;
    only = getenv("FK_BENCH_ONLY");
    profile = (e = getenv("FK_BENCH_PROFILE")) && atoi(e);
    if (argc > 1 && !(jout = fopen(argv[1], "a"))) {
        perror(argv[1]);
        return 1;
    }
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx)) {
        fprintf(stderr, "ctx: %s\n", fp8kit_last_error(NULL));
        return 1;
    }
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    snprintf(device_name, sizeof device_name, "%s", p.name);
    printf("bench_quant: %s, %d reps, commit %s\n", fp8kit_ctx_describe(ctx), reps, commit);
    CK(cudaMalloc(&flush_buf, flush_bytes));

    static const bcase all[] = {
        {"mx_axis-1_floor", FP8KIT_SCHEME_MX, -1, 0, 0, 0},
        {"mx_axis-1_rceil", FP8KIT_SCHEME_MX, -1, 1, 0, 0},
        {"mx_axis-1_blocked", FP8KIT_SCHEME_MX, -1, 0, 1, 0},
        {"mx_axis-2_plain", FP8KIT_SCHEME_MX, -2, 0, 0, 0},
        {"mx_axis-2_blocked", FP8KIT_SCHEME_MX, -2, 0, 1, 0},
        {"block1x128", FP8KIT_SCHEME_BLOCK1X128, -1, 0, 0, 0},
        {"block128x128", FP8KIT_SCHEME_BLOCK128X128, -1, 0, 0, 0},
        {"row", FP8KIT_SCHEME_ROW, -1, 0, 0, 0},
        {"tensor", FP8KIT_SCHEME_TENSOR, -1, 0, 0, 0},
        {"mx_fused_both_axes", FP8KIT_SCHEME_MX, -1, 0, 0, 1},
        {"cast_bf16_to_e4m3", FP8KIT_SCHEME_TENSOR, -1, 0, 0, 2},
    };
    static const bcase moe[] = {
        {"mx_axis-2_blocked_3d", FP8KIT_SCHEME_MX, -2, 0, 1, 0},
        {"mx_axis-1_blocked_3d", FP8KIT_SCHEME_MX, -1, 0, 1, 0},
    };
    const int nall = (int)(sizeof all / sizeof all[0]);
    if (shape_only < 0 || shape_only == 0)
        bench_shape(ctx, 1, 16384, 8192, all, nall);
    if (!quick && (shape_only < 0 || shape_only == 1))
        bench_shape(ctx, 1, 8192, 7168, all, nall);
    if (!quick && (shape_only < 0 || shape_only == 2))
        bench_shape(ctx, 8, 7168, 5120, moe, 2);
    CK(cudaFree(flush_buf));
    fp8kit_ctx_destroy(ctx);
    if (jout)
        fclose(jout);
    return 0;
}

#else
int main(void)
{
    printf("bench_quant: built without CUDA, skipped\n");
    return 0;
}
#endif
