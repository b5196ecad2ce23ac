/* test_cuda_grouped.c - the CUDA grouped GEMM (fp8kit_grouped_gemm with
 * device offsets): the checks that the cross-backend harness does not make.
 * The table of CPU-vs-CUDA grouped cases (empty groups, groups shorter than
 * a tile or spanning tile boundaries, a last offset < T, odd N, e5m2 on
 * either side, every activation, none / tensor / row scales, bias dtypes,
 * bf16 / f16 / f32 (fast) output, every tile width, padded B experts) lives
 * in tests/test_xbackend.c. What stays here: many tiles and groups (8 and 64
 * groups over 2048 rows, the planner's own tile width) against an fp64
 * reference from the dequantized operands (docs/spec.md section 3 bounds)
 * and against the CPU backend on the same inputs; invalid device offsets
 * (decreasing, past T, negative; masked counts above M or negative) leave D
 * unchanged and set the status word;
 * host-checked bad inputs return their status with D unchanged; a CUDA graph
 * captured once follows new offsets written to device memory. Exits 77
 * without an sm_90 device.
 * MX scales (e8m0 per 32 of K, plain; both layouts): each case runs on the
 * CPU backend and four times on the GPU - without a workspace, with the one
 * fp8kit_grouped_gemm_workspace_size reports (A and B normalized into it
 * first), with 16 bytes less and once more without (those two must write the
 * bytes of the first: the kernel splits no K across CTAs, so it is
 * deterministic) - each result against an fp64 reference of the
 * dequantized operands and against the CPU backend, with the bounds and
 * scale kinds of tests/test_cuda_gemm_mx.c (narrow chunks, adversarial
 * 2^-20 .. 2^20 scales: with the workspace at most 2x the error without +
 * 1e-6, underflowing shifted blocks); the workspace result also against the
 * reference of the host rule's normalized operands. Groups start at any row (not multiples of
 * 128), empty first / middle / last groups, rows past the last offset, T, N
 * and K off the tile sizes, G up to 33, padded experts and D, garbage (NaN)
 * in rows no group owns, 4096 x 1024 x 2048 with 8 experts; bytes no group
 * owns stay untouched, and the operands too. Invalid device offsets with and
 * without the workspace, host-checked MX and workspace errors, the
 * workspace-size query (placeholder pointers, row scales: 0), and a graph
 * capture of the call with its workspace.
 * Option: --small skips the many-groups cases and the larger MX ones (for
 * compute-sanitizer). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

static int g_small; /* --small */

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "format/mx_norm_rule.h"
#include "mx_norm_host.h"
#include "test_cuda_util.h"

static fk_rng rng;
static fp8kit_ctx *gctx, *cctx;
static char g_base[512]; /* gctx's overrides from its start (FP8KIT_TUNING) */

/* Sets gctx's overrides to g_base followed by keys ("" for none; of two
 * equal keys the later wins); plans made afterwards use them. */
static void set_tuning(const char *keys)
{
    char spec[sizeof g_base + 64];
    snprintf(spec, sizeof spec, "%s%s%s", g_base, g_base[0] && keys[0] ? "," : "", keys);
    fp8kit_status st = fp8kit_ctx_set_tuning(gctx, spec);
    CHECK(st == FP8KIT_OK, "fp8kit_ctx_set_tuning(\"%s\"): %s (%s)", spec, fp8kit_status_string(st),
          fp8kit_last_error(gctx));
}

typedef struct gcase {
    const char *name;
    int64_t t, n, k, g;
    const int32_t *offs; /* G offsets, or NULL: random cuts ending at T */
    fp8kit_dtype at, bt, dt, biast;
    fp8kit_scale_mode sa, sb;
    int bias, act, fast;
    int64_t bpad, dpad; /* extra B rows per expert, extra D columns */
    const char *bn;     /* tuning gemm_bn, or NULL */
} gcase;

/* The operands of one call, on the host and on the device. */
typedef struct gops {
    int64_t T, N, K, G, brows, ldd;
    uint8_t *a, *b;
    float *sa, *sb;
    void *bias;
    int32_t *off;
    size_t dbytes;
    void *da, *db, *dsa, *dsb, *dbias, *doff, *dd;
    int32_t *dstatus;
} gops;

static void ops_make(gops *o, const gcase *c)
{
    memset(o, 0, sizeof *o);
    const int64_t T = c->t, N = c->n, K = c->k, G = c->g;
    o->T = T; o->N = N; o->K = K; o->G = G;
    o->brows = N + c->bpad;
    o->ldd = N + c->dpad;
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    o->a = malloc((size_t)(T * K) + 1);
    o->b = malloc((size_t)(G * o->brows * K) + 1);
    for (int64_t i = 0; i < T * K; i++)
        o->a[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng), e5a);
    for (int64_t i = 0; i < G * o->brows * K; i++)
        o->b[i] = fk_f32_to_fp8((float)(fk_rng_normal(&rng) * 0.5), e5b);
    o->sa = malloc(sizeof(float) * (size_t)(T + 1));
    o->sb = malloc(sizeof(float) * (size_t)(G * N + 1));
    for (int64_t i = 0; i < T; i++)
        o->sa[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -3 + (int)(fk_rng_u32(&rng) % 4));
    for (int64_t i = 0; i < G * N; i++)
        o->sb[i] = (float)(0.25 + fk_rng_unif(&rng));
    o->bias = malloc(4 * (size_t)(G * N + 1));
    for (int64_t i = 0; i < G * N; i++)
        store_hp(o->bias, i, c->biast, (float)fk_rng_normal(&rng));
    o->off = malloc(sizeof(int32_t) * (size_t)(G + 1));
    if (c->offs) {
        memcpy(o->off, c->offs, sizeof(int32_t) * (size_t)G);
    } else {
        for (int64_t i = 0; i < G; i++)
            o->off[i] = (int32_t)(fk_rng_u32(&rng) % (uint32_t)(T + 1));
        for (int64_t i = 1; i < G; i++)
            for (int64_t j = i; j > 0 && o->off[j - 1] > o->off[j]; j--) {
                int32_t x = o->off[j];
                o->off[j] = o->off[j - 1];
                o->off[j - 1] = x;
            }
        o->off[G - 1] = (int32_t)T;
    }
    o->dbytes = fp8kit_dtype_size(c->dt) * (size_t)(T * o->ldd);
    o->da = dmalloc((size_t)(T * K));
    o->db = dmalloc((size_t)(G * o->brows * K));
    o->dsa = dmalloc(sizeof(float) * (size_t)T);
    o->dsb = dmalloc(sizeof(float) * (size_t)(G * N));
    o->dbias = dmalloc(fp8kit_dtype_size(c->biast) * (size_t)(G * N));
    o->doff = dmalloc(sizeof(int32_t) * (size_t)G);
    o->dd = dmalloc(4 * (size_t)(T * o->ldd)); /* room for D as f32 too (bad-argument cases retype it) */
    o->dstatus = dmalloc(sizeof(int32_t));
    h2d(o->da, o->a, (size_t)(T * K));
    h2d(o->db, o->b, (size_t)(G * o->brows * K));
    h2d(o->dsa, o->sa, sizeof(float) * (size_t)T);
    h2d(o->dsb, o->sb, sizeof(float) * (size_t)(G * N));
    h2d(o->dbias, o->bias, fp8kit_dtype_size(c->biast) * (size_t)(G * N));
    h2d(o->doff, o->off, sizeof(int32_t) * (size_t)G);
}

static void ops_free(gops *o)
{
    free(o->a); free(o->b); free(o->sa); free(o->sb); free(o->bias); free(o->off);
    cudaFree(o->da); cudaFree(o->db); cudaFree(o->dsa); cudaFree(o->dsb); cudaFree(o->dbias);
    cudaFree(o->doff); cudaFree(o->dd); cudaFree(o->dstatus);
}

static fp8kit_gemm_desc desc_of(const gcase *c)
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = c->sa;
    d.scale_b = c->sb;
    d.bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d.act = (fp8kit_activation)c->act;
    d.fast_accum = c->fast;
    return d;
}

/* Arguments over host (dev = 0) or device (dev = 1) copies; D at dptr. */
static fp8kit_grouped_gemm_args args_of(const gcase *c, const gops *o, int dev, void *dptr)
{
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    ga.a = fp8kit_tensor_2d(dev ? o->da : o->a, c->at, o->T, o->K, o->K);
    int64_t bshape[3] = {o->G, o->N, o->K};
    ga.b = fp8kit_tensor_make(dev ? o->db : o->b, c->bt, 3, bshape);
    ga.b.strides[0] = o->brows * o->K;
    ga.b.strides[1] = o->K;
    ga.b.strides[2] = 1;
    ga.offsets = dev ? (const int32_t *)o->doff : o->off;
    int64_t one = 1, gn[2] = {o->G, o->N};
    if (c->sa == FP8KIT_SCALE_TENSOR)
        ga.scale_a = fp8kit_tensor_make(dev ? o->dsa : o->sa, FP8KIT_F32, 1, &one);
    else if (c->sa == FP8KIT_SCALE_ROW)
        ga.scale_a = fp8kit_tensor_make(dev ? o->dsa : o->sa, FP8KIT_F32, 1, &o->T);
    if (c->sb == FP8KIT_SCALE_TENSOR)
        ga.scale_b = fp8kit_tensor_make(dev ? o->dsb : o->sb, FP8KIT_F32, 1, &o->G);
    else if (c->sb == FP8KIT_SCALE_ROW)
        ga.scale_b = fp8kit_tensor_make(dev ? o->dsb : o->sb, FP8KIT_F32, 2, gn);
    if (c->bias)
        ga.bias = fp8kit_tensor_make(dev ? o->dbias : o->bias, c->biast, 2, gn);
    ga.alpha = 0.75f;
    ga.d = fp8kit_tensor_2d(dptr, c->dt, o->T, o->N, o->ldd);
    ga.status = dev ? o->dstatus : NULL;
    return ga;
}

/* gpu (host copy of the device D) against the fp64 reference and the CPU
 * backend's cpu over the grouped rows; bytes elsewhere stay 0x5A. */
static void compare(const gcase *c, const gops *o, const void *gpu, const void *cpu, const char *what)
{
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    const size_t dsz = fp8kit_dtype_size(c->dt);
    const int64_t used = o->off[o->G - 1];
    double num = 0.0, den = 0.0, numc = 0.0, denc = 0.0;
    int nan_bad = 0, touched = 0;
    int64_t g = 0;
    for (int64_t m = 0; m < o->T; m++) {
        while (g < o->G && m >= o->off[g])
            g++;
        for (int64_t n = 0; n < o->ldd; n++) {
            if (m >= used || n >= o->N) {
                const unsigned char *cell = (const unsigned char *)gpu + (size_t)(m * o->ldd + n) * dsz;
                for (size_t q = 0; q < dsz; q++)
                    touched |= cell[q] != 0x5A;
                continue;
            }
            double acc = 0.0;
            for (int64_t k = 0; k < o->K; k++)
                acc += (double)fk_fp8_to_f32(o->a[m * o->K + k], e5a) *
                       (double)fk_fp8_to_f32(o->b[(g * o->brows + n) * o->K + k], e5b);
            const double s_a = c->sa == FP8KIT_SCALE_ROW ? o->sa[m] : c->sa == FP8KIT_SCALE_TENSOR ? o->sa[0] : 1.0;
            const double s_b = c->sb == FP8KIT_SCALE_ROW      ? o->sb[g * o->N + n]
                               : c->sb == FP8KIT_SCALE_TENSOR ? o->sb[g]
                                                               : 1.0;
            const double y = fk_ref_act(0.75 * acc * s_a * s_b + (c->bias ? load_hp(o->bias, g * o->N + n, c->biast) : 0.0),
                                       (fp8kit_activation)c->act);
            const double got = load_hp(gpu, m * o->ldd + n, c->dt), ref = load_hp(cpu, m * o->ldd + n, c->dt);
            nan_bad |= isnan(got) && !isnan(y);
            num += (got - y) * (got - y);
            den += y * y;
            numc += (got - ref) * (got - ref);
            denc += ref * ref;
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num), relc = denc > 0 ? sqrt(numc / denc) : sqrt(numc);
    /* docs/spec.md 3; f32 output runs with fast accumulation: 1.5x cuBLASLt's fast mode */
    const double bound = c->dt == FP8KIT_F32 ? 2e-3 : c->dt == FP8KIT_F16 ? 1e-3 : 4e-3;
    CHECK(rel <= bound, "%s%s: rel %.3g > %.3g", c->name, what, rel, bound);
    CHECK(relc <= bound, "%s%s: rel to the CPU backend %.3g > %.3g", c->name, what, relc, bound);
    CHECK(!nan_bad, "%s%s: NaN where the reference has none", c->name, what);
    CHECK(!touched, "%s%s: rows past offsets[G-1] = %lld or padding columns were written", c->name, what,
          (long long)used);
    printf("  %-34s%s T %5lld N %4lld K %4lld G %3lld used %5lld  rel %.2e (cpu %.2e)\n", c->name, what,
           (long long)o->T, (long long)o->N, (long long)o->K, (long long)o->G, (long long)used, rel, relc);
}

/* Runs the CPU backend into a host D (0x5A first) for the current offsets. */
static void *run_cpu(const gcase *c, const gops *o)
{
    void *cpu = malloc(o->dbytes);
    memset(cpu, 0x5A, o->dbytes);
    fp8kit_gemm_desc d = desc_of(c);
    if (c->dt == FP8KIT_F32)
        d.fast_accum = 1;
    fp8kit_grouped_gemm_args ga = args_of(c, o, 0, cpu);
    fp8kit_status st = fp8kit_grouped_gemm(cctx, &d, &ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: cpu %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(cctx));
    return cpu;
}

static void run_case(const gcase *c)
{
    if (c->bn) {
        char keys[32];
        snprintf(keys, sizeof keys, "gemm_bn=%s", c->bn);
        set_tuning(keys);
    }
    gops o;
    ops_make(&o, c);
    void *cpu = run_cpu(c, &o);
    CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
    const int32_t junk = 12345;
    h2d(o.dstatus, &junk, sizeof junk);
    fp8kit_gemm_desc d = desc_of(c);
    fp8kit_grouped_gemm_args ga = args_of(c, &o, 1, o.dd);
    fp8kit_status st = fp8kit_grouped_gemm(gctx, &d, &ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(gctx));
    void *gpu = malloc(o.dbytes);
    int32_t status = -1;
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed", c->name);
    d2h(gpu, o.dd, o.dbytes);
    d2h(&status, o.dstatus, sizeof status);
    CHECK(status == 0, "%s: status word %d after valid offsets", c->name, (int)status);
    compare(c, &o, gpu, cpu, "");
    free(gpu);
    free(cpu);
    ops_free(&o);
    if (c->bn)
        set_tuning("");
}

/* A call with offsets the kernel must reject: it returns OK (it cannot read
 * them), the kernel writes nothing to D and sets the status word (when ga
 * has one) to FP8KIT_ERR_INVALID_ARGUMENT. back: a host buffer of D's bytes. */
static void check_rejected(const gops *o, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *ga,
                           unsigned char *back, const char *what)
{
    CHECK(cudaMemset(o->dd, 0x5A, o->dbytes) == cudaSuccess, "memset");
    const int32_t junk = 12345;
    h2d(o->dstatus, &junk, sizeof junk);
    CHECK_STATUS(fp8kit_grouped_gemm(gctx, d, ga, NULL), FP8KIT_OK);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed", what);
    int32_t status = 0;
    d2h(&status, o->dstatus, sizeof status);
    d2h(back, o->dd, o->dbytes);
    int changed = 0;
    for (size_t j = 0; j < o->dbytes; j++)
        changed |= back[j] != 0x5A;
    if (ga->status)
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "%s: status %d", what, (int)status);
    CHECK(!changed, "%s: D changed", what);
}

/* Invalid device offsets: the call returns OK (it cannot read them), the
 * kernel writes nothing to D and sets the status word. */
static void bad_device_offsets(void)
{
    static const int32_t good[4] = {40, 40, 200, 300};
    gcase c = {"bad offsets", 300, 96, 128, 4, good, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_F32,
               FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_NONE, 0, 0, 0, NULL};
    gops o;
    ops_make(&o, &c);
    static const int32_t bad[4][4] = {{40, 39, 200, 300}, {40, 40, 200, 301}, {-1, 40, 200, 300}, {40, 40, 300, 200}};
    static const char *names[4] = {"decreasing", "past T", "negative", "last below previous"};
    unsigned char *back = malloc(o.dbytes);
    for (int i = 0; i < 4; i++) {
        h2d(o.doff, bad[i], sizeof bad[i]);
        fp8kit_gemm_desc d = desc_of(&c);
        fp8kit_grouped_gemm_args ga = args_of(&c, &o, 1, o.dd);
        char what[64];
        snprintf(what, sizeof what, "bad offsets %s", names[i]);
        check_rejected(&o, &d, &ga, back, what);
    }
    /* without a status word too */
    h2d(o.doff, bad[0], sizeof bad[0]);
    fp8kit_gemm_desc d = desc_of(&c);
    fp8kit_grouped_gemm_args ga = args_of(&c, &o, 1, o.dd);
    ga.status = NULL;
    check_rejected(&o, &d, &ga, back, "bad offsets, no status");

    /* masked layout over the same buffers (4 slabs of M = 75 rows): counts
     * above M or negative are invalid, checked by the kernel */
    static const int32_t badm[2][4] = {{0, 76, 3, 3}, {5, 5, -1, 75}};
    for (int i = 0; i < 2; i++) {
        h2d(o.doff, badm[i], sizeof badm[i]);
        fp8kit_grouped_gemm_args gm = args_of(&c, &o, 1, o.dd);
        const int64_t as[3] = {4, 75, o.K}, ds[3] = {4, 75, o.N};
        gm.a = fp8kit_tensor_make(o.da, c.at, 3, as);
        gm.d = fp8kit_tensor_make(o.dd, c.dt, 3, ds);
        gm.d.strides[0] = 75 * o.ldd, gm.d.strides[1] = o.ldd, gm.d.strides[2] = 1;
        gm.layout = FP8KIT_GROUPED_MASKED;
        check_rejected(&o, &d, &gm, back, i ? "bad masked count -1" : "bad masked count M + 1");
    }
    h2d(o.doff, good, sizeof good);

    /* host-checked bad inputs: their status, D unchanged */
#define BAD(label, want, ...)                                                                      \
    do {                                                                                           \
        fp8kit_grouped_gemm_args x = args_of(&c, &o, 1, o.dd);                                     \
        fp8kit_gemm_desc dx = desc_of(&c);                                                         \
        __VA_ARGS__;                                                                               \
        CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");                          \
        fp8kit_status st_ = fp8kit_grouped_gemm(gctx, &dx, &x, NULL);                              \
        CHECK(st_ == (want), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_),        \
              fp8kit_last_error(gctx), fp8kit_status_string(want));                                \
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: sync", label);                          \
        d2h(back, o.dd, o.dbytes);                                                                 \
        int ch_ = 0;                                                                               \
        for (size_t j_ = 0; j_ < o.dbytes; j_++)                                                   \
            ch_ |= back[j_] != 0x5A;                                                               \
        CHECK(!ch_, "%s: D changed on error", label);                                              \
    } while (0)
    BAD("offsets NULL", FP8KIT_ERR_NULL_POINTER, x.offsets = NULL);
    BAD("offsets misaligned", FP8KIT_ERR_MISALIGNED, x.offsets = (const int32_t *)((char *)o.doff + 2));
    BAD("f32 without fast_accum", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_F32);
    BAD("b expert stride", FP8KIT_ERR_UNSUPPORTED, x.b.strides[0] = o.N * o.K + 16);
    BAD("block scale_b count", FP8KIT_ERR_INVALID_SHAPE, dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK);
    BAD("mx with f32 scales", FP8KIT_ERR_INVALID_ARGUMENT, dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
    BAD("a misaligned", FP8KIT_ERR_MISALIGNED, x.a.data = (char *)o.da + 1);
    BAD("K not a multiple of 16", FP8KIT_ERR_MISALIGNED, x.a.shape[1] = 120; x.b.shape[2] = 120);
    BAD("bias count", FP8KIT_ERR_INVALID_SHAPE, x.bias = fp8kit_tensor_make(o.dbias, c.biast, 1, &o.N));
#undef BAD
    free(back);
    ops_free(&o);
}

/* A graph captured once reads the offsets when it runs: new offsets written
 * to device memory between replays give the new grouping. */
static void graph_capture(void)
{
    static const int32_t first[5] = {100, 100, 260, 300, 512};
    static const int32_t second[5] = {0, 250, 251, 400, 450};
    gcase c = {"graph", 512, 160, 256, 5, first, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
               FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_SILU, 0, 0, 8, NULL};
    gops o;
    ops_make(&o, &c);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    fp8kit_gemm_desc d = desc_of(&c);
    fp8kit_grouped_gemm_args ga = args_of(&c, &o, 1, o.dd);
    /* plan first (plans may set kernel attributes), then capture */
    CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
    CHECK_STATUS(fp8kit_grouped_gemm(gctx, &d, &ga, s), FP8KIT_OK);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph: warm-up");
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    fp8kit_status st = fp8kit_grouped_gemm(gctx, &d, &ga, s);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
    CHECK(st == FP8KIT_OK, "graph: captured call %s (%s)", fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    void *gpu = malloc(o.dbytes);
    for (int pass = 0; pass < 2 && exec; pass++) {
        memcpy(o.off, pass ? second : first, sizeof first);
        h2d(o.doff, o.off, sizeof first);
        CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "graph launch");
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph run");
        d2h(gpu, o.dd, o.dbytes);
        void *cpu = run_cpu(&c, &o);
        compare(&c, &o, gpu, cpu, pass ? " (replay, new offsets)" : " (replay)");
        free(cpu);
    }
    free(gpu);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    ops_free(&o);
}

/* ------------------------------------------------------------------ MX */
/* Scale kinds of the MX cases, drawn per row and 128-wide chunk of K as in
 * tests/test_cuda_gemm_mx.c: SC_REAL bytes 116 .. 126 independent per block;
 * SC_NARROW a chunk's blocks within 3 binades (center - 1 .. center + 2) of a
 * center in 110 .. 135 (ctr_lo .. ctr_hi when set): with the workspace nearly
 * every chunk is normalized and most stages promote once; SC_ADV bytes
 * 107 .. 147 (2^-20 .. 2^20) independent per block on A and B: hardly a chunk
 * normalized, every stage promotes every 32; SC_UFLOW A's chunks spanning
 * exactly 4 binades with codes below 2^-4 (the shifted blocks underflow), B's
 * chunks one scale. f16 output needs SC_REAL's range. */
enum { SC_REAL = 0, SC_NARROW = 1, SC_ADV = 2, SC_UFLOW = 3 };

typedef struct xcase {
    const char *name;
    int64_t t, n, k, g;  /* masked: t is M, the rows of each expert's slab */
    const int32_t *offs; /* G offsets (row ends or counts), or NULL: random */
    fp8kit_dtype at, bt, dt, biast;
    int bias, act, masked;
    int scales;          /* SC_* */
    int ctr_lo, ctr_hi;  /* SC_NARROW: the centers' range (0, 0: 110 .. 135) */
    int empty;           /* random offsets: the first, a middle and the last group empty */
    int short_last;      /* random row ends: the last below T (rows past it owned by no group) */
    int garbage;         /* rows no group owns: NaN codes and NaN scale bytes (else data like the rest) */
    int64_t bpad, dpad;  /* extra B rows per expert (NaN codes), extra D columns */
    const char *bn;      /* tuning gemm_bn, or NULL */
} xcase;

static xcase xbase(const char *name, int64_t t, int64_t n, int64_t k, int64_t g)
{
    xcase c;
    memset(&c, 0, sizeof c);
    c.name = name; c.t = t; c.n = n; c.k = k; c.g = g;
    c.at = c.bt = FP8KIT_E4M3;
    c.dt = FP8KIT_BF16;
    c.biast = FP8KIT_F32;
    return c;
}

/* One MX call's operands, on the host and on the device: A (T, K) codes and
 * plain scale bytes ea (T, K/32); B G experts of brows rows (the first N
 * used), eb (G x N, K/32); owner: each row's group or -1. */
typedef struct xops {
    int64_t T, N, K, G, kbs, brows, ldd;
    uint8_t *a, *b, *ea, *eb;
    void *bias;
    int32_t *off;
    int64_t *owner;
    size_t dbytes;
    void *da, *db, *dea, *deb, *dbias, *doff, *dd;
    int32_t *dstatus;
} xops;

static int rnd(int lo, int hi) { return lo + (int)(fk_rng_u32(&rng) % (uint32_t)(hi - lo + 1)); }

/* Scale bytes of rows x kbs blocks of one operand (side 0: A, 1: B). */
static void mx_exps(const xcase *c, uint8_t *e, int64_t rows, int64_t kbs, int side)
{
    const int clo = c->ctr_hi ? c->ctr_lo : 110, chi = c->ctr_hi ? c->ctr_hi : 135;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < kbs; c0 += 4) {
            const int nb = (int)(kbs - c0 < 4 ? kbs - c0 : 4);
            uint8_t *p = e + r * kbs + c0;
            const int ctr = rnd(clo, chi);
            for (int j = 0; j < nb; j++)
                p[j] = (uint8_t)(c->scales == SC_REAL     ? rnd(116, 126)
                                 : c->scales == SC_NARROW ? ctr - 1 + rnd(0, 3)
                                 : c->scales == SC_ADV    ? rnd(107, 147)
                                 : side                   ? ctr
                                                          : ctr - rnd(0, 4));
            if (c->scales == SC_UFLOW && !side && nb > 1) { /* A: a spread of exactly 4 */
                const int lo = rnd(0, nb - 1), hi = (lo + 1 + rnd(0, nb - 2)) % nb;
                p[lo] = (uint8_t)(ctr - 4);
                p[hi] = (uint8_t)ctr;
            }
        }
}

/* The rows each group owns, from o->off: o->owner. Returns the rows owned. */
static int64_t mx_owners(const xcase *c, xops *o)
{
    int64_t used = 0;
    for (int64_t m = 0; m < o->T; m++)
        o->owner[m] = -1;
    for (int64_t i = 0; i < o->G; i++) {
        const int64_t r0 = c->masked ? i * c->t : i ? o->off[i - 1] : 0;
        const int64_t r1 = c->masked ? r0 + o->off[i] : o->off[i];
        for (int64_t m = r0; m < r1; m++)
            o->owner[m] = i, used++;
    }
    return used;
}

static void mx_random_offsets(const xcase *c, int32_t *off)
{
    const int64_t G = c->g, T = c->t;
    for (int64_t i = 0; i < G; i++)
        off[i] = (int32_t)rnd(0, (int)T);
    if (c->masked) {
        int64_t full = rnd(0, (int)G - 1); /* one full slab, not one emptied below */
        while (c->empty && G > 3 && (full == 0 || full == G / 2 || full == G - 1))
            full = (full + 1) % G;
        off[full] = (int32_t)T;
        if (c->empty)
            off[0] = off[G / 2] = off[G - 1] = 0;
        return;
    }
    for (int64_t i = 1; i < G; i++)
        for (int64_t j = i; j > 0 && off[j - 1] > off[j]; j--) {
            int32_t x = off[j];
            off[j] = off[j - 1];
            off[j - 1] = x;
        }
    off[G - 1] = (int32_t)T;
    if (c->short_last) { /* the last end 1 .. T/4 rows short of T */
        off[G - 1] = (int32_t)(T - rnd(1, (int)(T / 4)));
        for (int64_t i = 0; i < G - 1; i++)
            if (off[i] > off[G - 1])
                off[i] = off[G - 1];
    }
    if (c->empty && G >= 3) {
        off[0] = 0;
        off[G / 2] = off[G / 2 - 1];
        off[G - 2] = off[G - 1];
    }
}

static void mx_make(xops *o, const xcase *c)
{
    memset(o, 0, sizeof *o);
    const int64_t G = c->g, N = c->n, K = c->k, T = c->masked ? G * c->t : c->t, kbs = K / 32;
    o->T = T; o->N = N; o->K = K; o->G = G; o->kbs = kbs;
    o->brows = N + c->bpad;
    o->ldd = N + c->dpad;
    o->off = malloc(sizeof(int32_t) * (size_t)G);
    if (c->offs)
        memcpy(o->off, c->offs, sizeof(int32_t) * (size_t)G);
    else
        mx_random_offsets(c, o->off);
    o->owner = malloc(sizeof(int64_t) * (size_t)T);
    mx_owners(c, o);
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    o->a = malloc((size_t)(T * K));
    o->b = malloc((size_t)(G * o->brows * K));
    o->ea = malloc((size_t)(T * kbs));
    o->eb = malloc((size_t)(G * N * kbs));
    memset(o->b, 0x7F, (size_t)(G * o->brows * K)); /* B's padding rows: NaN codes */
    for (int64_t i = 0; i < T * K; i++)
        o->a[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * (e5a ? 64.0f : 32.0f), e5a);
    if (c->scales == SC_UFLOW) /* A's codes below 2^-4 (zeros and subnormals included) */
        for (int64_t i = 0; i < T * K; i++) {
            uint8_t x;
            do
                x = (uint8_t)fk_rng_u32(&rng);
            while (!(fabsf(fk_fp8_to_f32(x, e5a)) < 0x1p-4f));
            o->a[i] = x;
        }
    for (int64_t e = 0; e < G; e++)
        for (int64_t i = 0; i < N * K; i++)
            o->b[e * o->brows * K + i] = fk_f32_to_fp8((float)fk_rng_normal(&rng) * (e5b ? 64.0f : 32.0f), e5b);
    mx_exps(c, o->ea, T, kbs, 0);
    mx_exps(c, o->eb, G * N, kbs, 1);
    if (c->garbage)
        for (int64_t m = 0; m < T; m++)
            if (o->owner[m] < 0) {
                memset(o->a + m * K, 0x7F, (size_t)K);
                memset(o->ea + m * kbs, 0xFF, (size_t)kbs);
            }
    o->bias = malloc(4 * (size_t)(G * N));
    for (int64_t i = 0; i < G * N; i++)
        store_hp(o->bias, i, c->biast, (float)fk_rng_normal(&rng));
    o->dbytes = fp8kit_dtype_size(c->dt) * (size_t)(T * o->ldd);
    o->da = dmalloc((size_t)(T * K));
    o->db = dmalloc((size_t)(G * o->brows * K));
    o->dea = dmalloc((size_t)(T * kbs));
    o->deb = dmalloc((size_t)(G * N * kbs));
    o->dbias = dmalloc(fp8kit_dtype_size(c->biast) * (size_t)(G * N));
    o->doff = dmalloc(sizeof(int32_t) * (size_t)G);
    o->dd = dmalloc(4 * (size_t)(T * o->ldd)); /* room for D as f32 too (bad-argument cases retype it) */
    o->dstatus = dmalloc(sizeof(int32_t));
    h2d(o->da, o->a, (size_t)(T * K));
    h2d(o->db, o->b, (size_t)(G * o->brows * K));
    h2d(o->dea, o->ea, (size_t)(T * kbs));
    h2d(o->deb, o->eb, (size_t)(G * N * kbs));
    h2d(o->dbias, o->bias, fp8kit_dtype_size(c->biast) * (size_t)(G * N));
    h2d(o->doff, o->off, sizeof(int32_t) * (size_t)G);
}

static void mx_free(xops *o)
{
    free(o->a); free(o->b); free(o->ea); free(o->eb); free(o->bias); free(o->off); free(o->owner);
    cudaFree(o->da); cudaFree(o->db); cudaFree(o->dea); cudaFree(o->deb); cudaFree(o->dbias);
    cudaFree(o->doff); cudaFree(o->dd); cudaFree(o->dstatus);
}

static fp8kit_gemm_desc mx_desc(const xcase *c)
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_MX;
    d.bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d.act = (fp8kit_activation)c->act;
    d.fast_accum = c->dt == FP8KIT_F32; /* the CUDA grouped GEMM's f32 output (the CPU ignores it) */
    return d;
}

/* Arguments over host (dev = 0) or device (dev = 1) copies; D at dptr. The
 * scales: A's as (T, K/32) or (G, M, K/32), B's as (G, N, K/32). */
static fp8kit_grouped_gemm_args mx_args(const xcase *c, const xops *o, int dev, void *dptr)
{
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    const int64_t M = c->t;
    if (c->masked) {
        const int64_t as[3] = {o->G, M, o->K}, ds[3] = {o->G, M, o->N}, ss[3] = {o->G, M, o->kbs};
        ga.a = fp8kit_tensor_make(dev ? o->da : o->a, c->at, 3, as);
        ga.d = fp8kit_tensor_make(dptr, c->dt, 3, ds);
        ga.d.strides[0] = M * o->ldd, ga.d.strides[1] = o->ldd, ga.d.strides[2] = 1;
        ga.scale_a = fp8kit_tensor_make(dev ? o->dea : o->ea, FP8KIT_E8M0, 3, ss);
        ga.layout = FP8KIT_GROUPED_MASKED;
    } else {
        const int64_t ss[2] = {o->T, o->kbs};
        ga.a = fp8kit_tensor_2d(dev ? o->da : o->a, c->at, o->T, o->K, o->K);
        ga.d = fp8kit_tensor_2d(dptr, c->dt, o->T, o->N, o->ldd);
        ga.scale_a = fp8kit_tensor_make(dev ? o->dea : o->ea, FP8KIT_E8M0, 2, ss);
    }
    const int64_t bshape[3] = {o->G, o->N, o->K}, sb[3] = {o->G, o->N, o->kbs}, gn[2] = {o->G, o->N};
    ga.b = fp8kit_tensor_make(dev ? o->db : o->b, c->bt, 3, bshape);
    ga.b.strides[0] = o->brows * o->K;
    ga.b.strides[1] = o->K;
    ga.b.strides[2] = 1;
    ga.scale_b = fp8kit_tensor_make(dev ? o->deb : o->eb, FP8KIT_E8M0, 3, sb);
    ga.offsets = dev ? (const int32_t *)o->doff : o->off;
    if (c->bias)
        ga.bias = fp8kit_tensor_make(dev ? o->dbias : o->bias, c->biast, 2, gn);
    ga.alpha = 0.75f;
    ga.status = dev ? o->dstatus : NULL;
    return ga;
}

/* The fp64 reference of the owned rows from codes A, B (o's layouts) and
 * plain scale bytes ea, eb: act(alpha * sum of the dequantized products +
 * bias) into ref (T x N; rows no group owns are not written). */
static void mx_reference(const xcase *c, const xops *o, const uint8_t *A, const uint8_t *ea, const uint8_t *B,
                         const uint8_t *eb, double *ref)
{
    const int64_t T = o->T, N = o->N, K = o->K, G = o->G, kbs = o->kbs;
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    double *da = malloc(sizeof(double) * (size_t)(T * K)), *db = malloc(sizeof(double) * (size_t)(G * N * K));
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < T; m++)
        for (int64_t k = 0; k < K && o->owner[m] >= 0; k++) {
            const uint8_t s = ea[m * kbs + k / 32];
            da[m * K + k] = s == 255 ? NAN : ldexp(fk_fp8_to_f32(A[m * K + k], e5a), s - 127);
        }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < G * N; r++)
        for (int64_t k = 0; k < K; k++) {
            const uint8_t s = eb[r * kbs + k / 32];
            const uint8_t x = B[((r / N) * o->brows + r % N) * K + k];
            db[r * K + k] = s == 255 ? NAN : ldexp(fk_fp8_to_f32(x, e5b), s - 127);
        }
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t m = 0; m < T; m++) {
        const int64_t g = o->owner[m];
        if (g < 0)
            continue;
        for (int64_t n = 0; n < N; n++) {
            const double *a = da + m * K, *b = db + (g * N + n) * K;
            double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
            for (int64_t k = 0; k < K; k += 4) { /* K is a multiple of 32 */
                s0 += a[k] * b[k];
                s1 += a[k + 1] * b[k + 1];
                s2 += a[k + 2] * b[k + 2];
                s3 += a[k + 3] * b[k + 3];
            }
            double y = 0.75 * ((s0 + s1) + (s2 + s3));
            if (c->bias)
                y += load_hp(o->bias, g * N + n, c->biast);
            ref[m * N + n] = fk_ref_act(y, (fp8kit_activation)c->act);
        }
    }
    free(da);
    free(db);
}

/* One GPU output D against the reference and the CPU backend's Dc over the
 * owned rows; bytes elsewhere (rows no group owns, D's padding columns)
 * must still be 0x5A. */
typedef struct ostat {
    double rel;  /* ||D - ref|| / ||ref|| over the elements whose reference is not NaN */
    double relc; /* ||D - Dc|| / ||ref|| */
    double den;
    long nan_bad, nan_miss, bad;
    int64_t touched;
} ostat;

static ostat mx_compare(const xcase *c, const xops *o, const char *tag, const unsigned char *D, const unsigned char *Dc,
                        const double *ref)
{
    const int64_t T = o->T, N = o->N, ldd = o->ldd;
    const size_t dsz = fp8kit_dtype_size(c->dt);
    ostat s;
    memset(&s, 0, sizeof s);
    long nref = 0;
    for (int64_t m = 0; m < T; m++)
        for (int64_t n = 0; n < N && o->owner[m] >= 0; n++)
            if (!isnan(ref[m * N + n]))
                s.den += ref[m * N + n] * ref[m * N + n], nref++;
    const double rms = sqrt(s.den / (double)(nref ? nref : 1));
    double num = 0.0, numc = 0.0;
    for (int64_t m = 0; m < T; m++) {
        for (int64_t q = o->owner[m] >= 0 ? N * (int64_t)dsz : 0; q < ldd * (int64_t)dsz; q++)
            s.touched += D[(size_t)(m * ldd) * dsz + (size_t)q] != 0x5A;
        if (o->owner[m] < 0)
            continue;
        for (int64_t n = 0; n < N; n++) {
            const double r = ref[m * N + n], v = load_hp(D, m * ldd + n, c->dt), vc = load_hp(Dc, m * ldd + n, c->dt);
            if (isnan(r)) {
                if (!isnan(v) && s.nan_miss++ < 3)
                    fprintf(stderr, "  %s%s: (%lld, %lld) = %g, ref NaN\n", c->name, tag, (long long)m,
                            (long long)n, v);
                continue;
            }
            if (isnan(v)) {
                if (s.nan_bad++ < 3)
                    fprintf(stderr, "  %s%s: NaN at (%lld, %lld), ref %g\n", c->name, tag, (long long)m,
                            (long long)n, r);
                continue;
            }
            num += (v - r) * (v - r);
            numc += (v - vc) * (v - vc);
            if (fabs(v - r) > 0.02 * fmax(fabs(r), rms) + 1e-30 && s.bad++ < 3)
                fprintf(stderr, "  %s%s: (%lld, %lld) = %g, ref %g, cpu %g (group %lld)\n", c->name, tag,
                        (long long)m, (long long)n, v, r, vc, (long long)o->owner[m]);
        }
    }
    s.rel = s.den > 0 ? sqrt(num / s.den) : sqrt(num);
    s.relc = s.den > 0 ? sqrt(numc / s.den) : sqrt(numc);
    return s;
}

static void mx_check(const xcase *c, const char *tag, const ostat *s, double bound)
{
    CHECK(s->rel <= bound, "%s%s: rel error %.3e > %.1e", c->name, tag, s->rel, bound);
    CHECK(s->relc <= 2 * bound, "%s%s: differs from the CPU backend by %.3e", c->name, tag, s->relc);
    CHECK(s->nan_bad == 0, "%s%s: %ld NaN outputs where the reference has none", c->name, tag, s->nan_bad);
    CHECK(s->nan_miss == 0, "%s%s: %ld finite outputs where the reference is NaN", c->name, tag, s->nan_miss);
    CHECK(s->bad == 0, "%s%s: %ld elements far from the reference", c->name, tag, s->bad);
    CHECK(s->den > 0, "%s%s: degenerate reference", c->name, tag);
    CHECK(s->touched == 0, "%s%s: %lld bytes no group owns were written", c->name, tag, (long long)s->touched);
}

/* Whether two GPU results are the same bytes; else prints the first few
 * elements that differ (row, column, the row's group). */
static int mx_same(const xcase *c, const xops *o, const unsigned char *x, const unsigned char *y, const char *tag)
{
    const size_t dsz = fp8kit_dtype_size(c->dt);
    int64_t diff = 0;
    for (int64_t m = 0; m < o->T; m++)
        for (int64_t n = 0; n < o->ldd; n++) {
            const size_t at = (size_t)(m * o->ldd + n) * dsz;
            if (!memcmp(x + at, y + at, dsz))
                continue;
            if (diff++ < 4)
                fprintf(stderr, "  %s%s: (%lld, %lld) group %lld: %.9g vs %.9g\n", c->name, tag, (long long)m,
                        (long long)n, (long long)o->owner[m], load_hp(x, m * o->ldd + n, c->dt),
                        load_hp(y, m * o->ldd + n, c->dt));
        }
    if (diff)
        fprintf(stderr, "  %s%s: %lld elements differ\n", c->name, tag, (long long)diff);
    return diff == 0;
}

/* Whether n device bytes at d still equal the host bytes h. */
static int same_bytes(const void *d, const void *h, size_t n)
{
    unsigned char *t = malloc(n ? n : 1);
    d2h(t, d, n);
    const int same = memcmp(t, h, n) == 0;
    free(t);
    return same;
}

/* The least the workspace can be: the normalized copies of A and B and their scale bytes. */
static size_t mx_copies_min(const xops *o)
{
    return (size_t)((o->T + o->G * o->N) * (o->K + o->kbs));
}

/* One MX grouped call on the CPU backend and on the GPU: without a
 * workspace, with the one fp8kit_grouped_gemm_workspace_size reports, with
 * 16 bytes less (too small: the operands as given, the same bytes as
 * without) and again without (the same bytes). D starts as 0x5A; the status
 * word as junk. */
static void run_mx_case(const xcase *c)
{
    if (c->bn) {
        char keys[32];
        snprintf(keys, sizeof keys, "gemm_bn=%s", c->bn);
        set_tuning(keys);
    }
    xops o;
    mx_make(&o, c);
    const int64_t T = o.T, N = o.N, K = o.K, G = o.G, kbs = o.kbs, used = mx_owners(c, &o);
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    fp8kit_gemm_desc desc = mx_desc(c);

    /* the fp64 references: the operands as given, and as the host rule normalizes them */
    double *ref = malloc(sizeof(double) * (size_t)(T * N)), *refn = ref;
    mx_reference(c, &o, o.a, o.ea, o.b, o.eb, ref);
    uint8_t *an = malloc((size_t)(T * K)), *bn = malloc((size_t)(G * o.brows * K));
    uint8_t *ean = malloc((size_t)(T * kbs)), *ebn = malloc((size_t)(G * N * kbs));
    memcpy(bn, o.b, (size_t)(G * o.brows * K));
    int64_t rounded = host_norm(o.a, K, o.ea, 0, T, K, e5a, an, K, ean);
    for (int64_t e = 0; e < G; e++)
        rounded += host_norm(o.b + e * o.brows * K, K, o.eb + e * N * kbs, 0, N, K, e5b, bn + e * o.brows * K, K,
                             ebn + e * N * kbs);
    if (rounded) {
        refn = malloc(sizeof(double) * (size_t)(T * N));
        mx_reference(c, &o, an, ean, bn, ebn, refn);
    }

    /* the CPU backend */
    unsigned char *Dc = malloc(o.dbytes), *D[4];
    memset(Dc, 0x5A, o.dbytes);
    fp8kit_grouped_gemm_args ca = mx_args(c, &o, 0, Dc);
    fp8kit_status st = fp8kit_grouped_gemm(cctx, &desc, &ca, NULL);
    CHECK(st == FP8KIT_OK, "%s: cpu %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(cctx));

    /* the GPU: run 0 without a workspace, 1 with the one reported, 2 with 16 bytes less, 3 without */
    fp8kit_grouped_gemm_args ga = mx_args(c, &o, 1, o.dd);
    size_t wsb = 0;
    st = fp8kit_grouped_gemm_workspace_size(gctx, &desc, &ga, &wsb);
    CHECK(st == FP8KIT_OK, "%s: workspace size %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(wsb >= mx_copies_min(&o), "%s: workspace %zu bytes, less than the normalized copies' %zu", c->name, wsb,
          mx_copies_min(&o));
    void *dw = wsb ? dmalloc(wsb) : NULL;
    for (int run = 0; run < 4; run++) {
        D[run] = malloc(o.dbytes);
        fp8kit_grouped_gemm_args x = ga;
        if (run && run < 3 && dw) {
            CHECK(cudaMemset(dw, 0xA5, wsb) == cudaSuccess, "memset"); /* its content need not be cleared */
            x.workspace = dw;
            x.workspace_bytes = run == 1 ? wsb : wsb - 16;
        }
        CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
        const int32_t junk = 12345;
        h2d(o.dstatus, &junk, sizeof junk);
        st = fp8kit_grouped_gemm(gctx, &desc, &x, NULL);
        CHECK(st == FP8KIT_OK, "%s (run %d): %s (%s)", c->name, run, fp8kit_status_string(st), fp8kit_last_error(gctx));
        const cudaError_t ce = cudaDeviceSynchronize();
        CHECK(ce == cudaSuccess, "%s (run %d): kernel failed: %s", c->name, run, cudaGetErrorString(ce));
        int32_t status = -1;
        d2h(D[run], o.dd, o.dbytes);
        d2h(&status, o.dstatus, sizeof status);
        CHECK(status == 0, "%s (run %d): status word %d after valid offsets", c->name, run, (int)status);
    }
    /* the normalization wrote into the workspace, not over the operands */
    CHECK(same_bytes(o.da, o.a, (size_t)(T * K)) && same_bytes(o.db, o.b, (size_t)(G * o.brows * K)) &&
              same_bytes(o.dea, o.ea, (size_t)(T * kbs)) && same_bytes(o.deb, o.eb, (size_t)(G * N * kbs)),
          "%s: a call with a workspace changed its operands", c->name);
    CHECK(mx_same(c, &o, D[0], D[2], " (workspace 16 bytes short vs none)"),
          "%s: a workspace 16 bytes short changed D (it must run as without)", c->name);
    CHECK(mx_same(c, &o, D[0], D[3], " (none, again)"), "%s: D differs between two runs without workspace", c->name);

    /* f32 (fast_accum): the tensor cores sum 32 (128 on uniform stages)
     * products before each promotion (tests/test_cuda_gemm_mx.c's bound) */
    const double bound = c->dt == FP8KIT_F32 ? 3e-4 : c->dt == FP8KIT_BF16 ? 4e-3 : 1e-3;
    const ostat s0 = mx_compare(c, &o, "", D[0], Dc, ref);
    const ostat s1 = mx_compare(c, &o, " (workspace)", D[1], Dc, ref);
    const ostat sn = refn == ref ? s1 : mx_compare(c, &o, " (workspace vs the normalized operands)", D[1], Dc, refn);
    printf("  %-36s T %5lld N %4lld K %4lld G %2lld used %5lld  rel %.3e  ws %.3e  (vs cpu %.3e, ws %.3e)\n",
           c->name, (long long)T, (long long)N, (long long)K, (long long)G, (long long)used, s0.rel, s1.rel, s0.relc,
           s1.relc);
    if (c->scales == SC_ADV || c->scales == SC_UFLOW)
        printf("  %-36s ws / no ws = %.2f%s; %lld codes rounded by the rule\n", "", s0.rel > 0 ? s1.rel / s0.rel : NAN,
               c->scales == SC_ADV ? " (at most 2)" : "", (long long)rounded);
    mx_check(c, "", &s0, bound);
    mx_check(c, " (workspace)", &s1, bound);
    CHECK(sn.rel <= bound, "%s (workspace): rel error %.3e > %.1e against the reference of the normalized operands",
          c->name, sn.rel, bound);
    /* adversarial scales: at most twice the per-32 path's error (+ 1e-6 for
     * f32 output, where both are near fp32 rounding: tests/test_cuda_gemm_mx.c) */
    if (c->scales == SC_ADV)
        CHECK(s1.rel <= 2 * s0.rel + 1e-6, "%s: with the workspace rel %.3e > 2 x %.3e (without) + 1e-6", c->name,
              s1.rel, s0.rel);
    for (int run = 0; run < 4; run++)
        free(D[run]);
    free(Dc); free(ref); free(an); free(bn); free(ean); free(ebn);
    if (refn != ref)
        free(refn);
    cudaFree(dw);
    mx_free(&o);
    if (c->bn)
        set_tuning("");
}

/* Rejected device offsets (the kernel's check), without and with the
 * workspace: the call returns OK, D stays 0x5A, the status word (when
 * given) says FP8KIT_ERR_INVALID_ARGUMENT. */
static void mx_rejected(const xops *o, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *ga,
                        unsigned char *back, const char *what)
{
    CHECK(cudaMemset(o->dd, 0x5A, o->dbytes) == cudaSuccess, "memset");
    const int32_t junk = 12345;
    h2d(o->dstatus, &junk, sizeof junk);
    fp8kit_status st = fp8kit_grouped_gemm(gctx, d, ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", what, fp8kit_status_string(st), fp8kit_last_error(gctx));
    const cudaError_t ce = cudaDeviceSynchronize();
    CHECK(ce == cudaSuccess, "%s: kernel failed: %s", what, cudaGetErrorString(ce));
    int32_t status = 0;
    d2h(&status, o->dstatus, sizeof status);
    d2h(back, o->dd, o->dbytes);
    int64_t changed = 0;
    for (size_t j = 0; j < o->dbytes; j++)
        changed += back[j] != 0x5A;
    if (ga->status)
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "%s: status %d", what, (int)status);
    CHECK(changed == 0, "%s: %lld bytes of D changed", what, (long long)changed);
}

/* MX: invalid device offsets, host-checked bad inputs (their status, D
 * unchanged) and the workspace-size query. */
static void mx_errors(void)
{
    static const int32_t good[4] = {40, 40, 200, 300};
    xcase c = xbase("mx errors", 300, 96, 256, 4);
    c.offs = good;
    c.bias = 1;
    xops o;
    mx_make(&o, &c);
    unsigned char *back = malloc(o.dbytes);
    fp8kit_gemm_desc d = mx_desc(&c);
    fp8kit_grouped_gemm_args ga = mx_args(&c, &o, 1, o.dd);
    size_t wsb = 0;
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(gctx, &d, &ga, &wsb), FP8KIT_OK);
    CHECK(wsb >= mx_copies_min(&o), "mx errors: workspace %zu bytes, less than the copies' %zu", wsb,
          mx_copies_min(&o));
    void *dw = dmalloc(wsb + 256);

    static const int32_t bad[4][4] = {{40, 39, 200, 300}, {40, 40, 200, 301}, {-1, 40, 200, 300}, {40, 40, 300, 200}};
    static const char *names[4] = {"decreasing", "past T", "negative", "last below previous"};
    for (int ws = 0; ws < 2; ws++)
        for (int i = 0; i < 4; i++) {
            h2d(o.doff, bad[i], sizeof bad[i]);
            fp8kit_grouped_gemm_args x = ga;
            if (ws)
                x.workspace = dw, x.workspace_bytes = wsb;
            char what[96];
            snprintf(what, sizeof what, "mx bad offsets %s%s", names[i], ws ? " (workspace)" : "");
            mx_rejected(&o, &d, &x, back, what);
        }
    {   /* without a status word */
        h2d(o.doff, bad[0], sizeof bad[0]);
        fp8kit_grouped_gemm_args x = ga;
        x.status = NULL;
        x.workspace = dw, x.workspace_bytes = wsb;
        mx_rejected(&o, &d, &x, back, "mx bad offsets, no status (workspace)");
    }
    /* masked over the same buffers (4 slabs of M = 75 rows): counts above M or negative */
    static const int32_t badm[2][4] = {{0, 76, 3, 3}, {5, 5, -1, 75}};
    for (int ws = 0; ws < 2; ws++)
        for (int i = 0; i < 2; i++) {
            h2d(o.doff, badm[i], sizeof badm[i]);
            fp8kit_grouped_gemm_args gm = ga;
            const int64_t as[3] = {4, 75, o.K}, ds[3] = {4, 75, o.N}, ss[3] = {4, 75, o.kbs};
            gm.a = fp8kit_tensor_make(o.da, c.at, 3, as);
            gm.d = fp8kit_tensor_make(o.dd, c.dt, 3, ds);
            gm.scale_a = fp8kit_tensor_make(o.dea, FP8KIT_E8M0, 3, ss);
            gm.layout = FP8KIT_GROUPED_MASKED;
            if (ws)
                gm.workspace = dw, gm.workspace_bytes = wsb;
            char what[96];
            snprintf(what, sizeof what, "mx bad masked count %s%s", i ? "-1" : "M + 1", ws ? " (workspace)" : "");
            mx_rejected(&o, &d, &gm, back, what);
        }
    h2d(o.doff, good, sizeof good);

    /* host-checked bad inputs: their status, D unchanged */
#define MXBAD(label, want, ...)                                                                    \
    do {                                                                                           \
        fp8kit_grouped_gemm_args x = ga;                                                           \
        fp8kit_gemm_desc dx = d;                                                                   \
        x.workspace = dw, x.workspace_bytes = wsb;                                                 \
        __VA_ARGS__;                                                                               \
        CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");                          \
        fp8kit_status st_ = fp8kit_grouped_gemm(gctx, &dx, &x, NULL);                              \
        CHECK(st_ == (want), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_),        \
              fp8kit_last_error(gctx), fp8kit_status_string(want));                                \
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: sync", label);                          \
        d2h(back, o.dd, o.dbytes);                                                                 \
        int ch_ = 0;                                                                               \
        for (size_t j_ = 0; j_ < o.dbytes; j_++)                                                   \
            ch_ |= back[j_] != 0x5A;                                                               \
        CHECK(!ch_, "%s: D changed on error", label);                                              \
    } while (0)
    MXBAD("mx blocked layout", FP8KIT_ERR_UNSUPPORTED, dx.scale_layout = FP8KIT_LAYOUT_BLOCKED);
    MXBAD("mx K = 48", FP8KIT_ERR_INVALID_SHAPE, x.a.shape[1] = 48; x.b.shape[2] = 48);
    MXBAD("mx f32 without fast_accum", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_F32);
    MXBAD("mx scale_a f32", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.dtype = FP8KIT_F32; x.scale_a.shape[1] = o.kbs / 4);
    MXBAD("mx scale_b count", FP8KIT_ERR_INVALID_SHAPE, x.scale_b.shape[0] = 3);
    MXBAD("mx a misaligned", FP8KIT_ERR_MISALIGNED, x.a.data = (char *)o.da + 1);
    MXBAD("workspace misaligned", FP8KIT_ERR_MISALIGNED, x.workspace = (char *)dw + 8);
    MXBAD("workspace over d", FP8KIT_ERR_INVALID_ARGUMENT, x.workspace = (char *)o.dd + 4096);
    MXBAD("workspace over a", FP8KIT_ERR_INVALID_ARGUMENT, x.workspace = o.da; x.workspace_bytes = 16);
    MXBAD("workspace over scale_b", FP8KIT_ERR_INVALID_ARGUMENT, x.workspace = o.deb; x.workspace_bytes = 16);
    MXBAD("workspace over status", FP8KIT_ERR_INVALID_ARGUMENT, x.workspace = o.dstatus; x.workspace_bytes = 16);
    MXBAD("workspace over offsets", FP8KIT_ERR_INVALID_ARGUMENT, x.workspace = o.doff; x.workspace_bytes = 16);
#undef MXBAD

    /* the workspace-size query: the same size with placeholder pointers (never read) */
    {
        void *ph = (void *)(uintptr_t)0x10000;
        fp8kit_grouped_gemm_args x = ga;
        x.a.data = x.b.data = x.scale_a.data = x.scale_b.data = x.bias.data = x.d.data = ph;
        x.offsets = (const int32_t *)ph;
        x.status = (int32_t *)ph;
        size_t b = 777;
        fp8kit_status st = fp8kit_grouped_gemm_workspace_size(gctx, &d, &x, &b);
        CHECK(st == FP8KIT_OK && b == wsb, "mx workspace size, placeholder pointers: %s (%s), %zu bytes, want %zu",
              fp8kit_status_string(st), fp8kit_last_error(gctx), b, wsb);
        b = 777;
        CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(gctx, &d, &ga, NULL), FP8KIT_ERR_NULL_POINTER);
        x = ga;
        x.workspace = (char *)dw + 8;
        st = fp8kit_grouped_gemm_workspace_size(gctx, &d, &x, &b);
        CHECK(st == FP8KIT_ERR_MISALIGNED && b == 777, "mx workspace size, misaligned workspace: %s, %zu bytes",
              fp8kit_status_string(st), b);
        fp8kit_gemm_desc dx = d;
        dx.scale_layout = FP8KIT_LAYOUT_BLOCKED;
        st = fp8kit_grouped_gemm_workspace_size(gctx, &dx, &ga, &b);
        CHECK(st == FP8KIT_ERR_UNSUPPORTED && b == 777, "mx workspace size, blocked: %s, %zu bytes",
              fp8kit_status_string(st), b);
        /* row scales: no MX copies, nothing to gain from a workspace */
        dx = d;
        dx.scale_a = dx.scale_b = FP8KIT_SCALE_ROW;
        x = ga;
        x.scale_a = fp8kit_tensor_make(o.dea, FP8KIT_F32, 1, &o.T);
        const int64_t gn[2] = {o.G, o.N};
        x.scale_b = fp8kit_tensor_make(o.deb, FP8KIT_F32, 2, gn);
        st = fp8kit_grouped_gemm_workspace_size(gctx, &dx, &x, &b);
        CHECK(st == FP8KIT_OK && b == 0, "row-scaled workspace size: %s (%s), %zu bytes, want 0",
              fp8kit_status_string(st), fp8kit_last_error(gctx), b);
    }
    cudaFree(dw);
    free(back);
    mx_free(&o);
}

/* An MX call with the workspace captured once in a CUDA graph (the
 * normalization and the kernel): replays follow new offsets written to
 * device memory. */
static void mx_graph(void)
{
    static const int32_t first[5] = {100, 100, 260, 300, 512};
    static const int32_t second[5] = {0, 250, 251, 400, 450};
    xcase c = xbase("mx graph", 512, 160, 384, 5);
    c.offs = first;
    c.scales = SC_NARROW;
    c.bias = 1;
    c.act = FP8KIT_ACT_SILU;
    c.dpad = 8;
    xops o;
    mx_make(&o, &c);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    fp8kit_gemm_desc d = mx_desc(&c);
    fp8kit_grouped_gemm_args ga = mx_args(&c, &o, 1, o.dd);
    size_t wsb = 0;
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(gctx, &d, &ga, &wsb), FP8KIT_OK);
    void *dw = dmalloc(wsb);
    ga.workspace = dw;
    ga.workspace_bytes = wsb;
    CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
    CHECK_STATUS(fp8kit_grouped_gemm(gctx, &d, &ga, s), FP8KIT_OK); /* plan first, then capture */
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "mx graph: warm-up");
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    fp8kit_status st = fp8kit_grouped_gemm(gctx, &d, &ga, s);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
    CHECK(st == FP8KIT_OK, "mx graph: captured call %s (%s)", fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    unsigned char *gpu = malloc(o.dbytes), *cpu = malloc(o.dbytes);
    double *ref = malloc(sizeof(double) * (size_t)(o.T * o.N));
    for (int pass = 0; pass < 2 && exec; pass++) {
        memcpy(o.off, pass ? second : first, sizeof first);
        mx_owners(&c, &o);
        h2d(o.doff, o.off, sizeof first);
        CHECK(cudaMemset(o.dd, 0x5A, o.dbytes) == cudaSuccess, "memset");
        CHECK(cudaMemset(dw, 0xA5, wsb) == cudaSuccess, "memset");
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "graph launch");
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph run");
        d2h(gpu, o.dd, o.dbytes);
        memset(cpu, 0x5A, o.dbytes);
        fp8kit_grouped_gemm_args ca = mx_args(&c, &o, 0, cpu);
        CHECK_STATUS(fp8kit_grouped_gemm(cctx, &d, &ca, NULL), FP8KIT_OK);
        mx_reference(&c, &o, o.a, o.ea, o.b, o.eb, ref);
        const char *tag = pass ? " (replay, new offsets)" : " (replay)";
        const ostat r = mx_compare(&c, &o, tag, gpu, cpu, ref);
        printf("  %-36s%s rel %.3e (vs cpu %.3e)\n", c.name, tag, r.rel, r.relc);
        mx_check(&c, tag, &r, 4e-3);
    }
    free(gpu); free(cpu); free(ref);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    cudaFree(dw);
    mx_free(&o);
}

/* The MX cases (--small: the small ones only). */
static void mx_cases(int small)
{
    static const int32_t odd7[7] = {77, 77, 300, 429, 429, 901, 1000}; /* starts 0, 77, 300, 429, 901; two empty */
    static const int32_t first_last[6] = {0, 1, 130, 255, 500, 500};     /* the first and the last empty */
    xcase c;
    c = xbase("mx odd starts, bias gelu", 1000, 200, 544, 7); c.offs = odd7; c.bias = 1;
    c.biast = FP8KIT_BF16; c.act = FP8KIT_ACT_GELU_TANH; c.dpad = 8; run_mx_case(&c);
    c = xbase("mx f16 bias silu, first + last empty", 511, 100, 160, 6); c.offs = first_last; c.dt = FP8KIT_F16;
    c.bias = 1; c.biast = FP8KIT_F16; c.act = FP8KIT_ACT_SILU; c.garbage = 1; run_mx_case(&c);
    c = xbase("mx adv e5m2 x e4m3 K 288", 513, 264, 288, 9); c.scales = SC_ADV; c.at = FP8KIT_E5M2; c.empty = 1;
    run_mx_case(&c);
    c = xbase("mx masked adv f32", 130, 72, 96, 4); c.masked = 1; c.scales = SC_ADV; c.dt = FP8KIT_F32;
    c.dpad = 8; c.garbage = 1; run_mx_case(&c);
    if (small)
        return;
    c = xbase("mx narrow G 33, short last", 2100, 320, 1024, 33); c.scales = SC_NARROW; c.short_last = 1;
    c.empty = 1; c.garbage = 1; run_mx_case(&c);
    c = xbase("mx adv f32, N 136", 777, 136, 640, 5); c.scales = SC_ADV; c.dt = FP8KIT_F32; c.bias = 1;
    c.act = FP8KIT_ACT_RELU; run_mx_case(&c);
    c = xbase("mx uflow K 1024", 600, 192, 1024, 4); c.scales = SC_UFLOW; c.short_last = 1; run_mx_case(&c);
    c = xbase("mx masked narrow, padded experts", 300, 256, 512, 6); c.masked = 1; c.scales = SC_NARROW;
    c.bpad = 16; c.empty = 1; c.bias = 1; c.act = FP8KIT_ACT_GELU_ERF; run_mx_case(&c);
    c = xbase("mx masked adv e4m3 x e5m2", 512, 256, 1024, 4); c.masked = 1; c.scales = SC_ADV;
    c.bt = FP8KIT_E5M2; run_mx_case(&c);
    c = xbase("mx e5m2 x e5m2 narrow bn 128", 700, 384, 256, 3); c.scales = SC_NARROW;
    c.at = c.bt = FP8KIT_E5M2; c.bn = "128"; c.empty = 1; run_mx_case(&c);
    c = xbase("mx narrow bn 192, N 400", 1300, 400, 384, 5); c.scales = SC_NARROW; c.bn = "192"; c.bias = 1;
    c.ctr_lo = 118; c.ctr_hi = 122; c.act = FP8KIT_ACT_GELU_TANH; c.dpad = 16; run_mx_case(&c);
    c = xbase("mx G 33 f16, empty groups, short", 1500, 200, 160, 33); c.dt = FP8KIT_F16; c.empty = 1; c.short_last = 1;
    run_mx_case(&c);
    c = xbase("mx big 4096 x 1024 x 2048, G 8", 4096, 1024, 2048, 8); c.scales = SC_NARROW; c.ctr_lo = 116;
    c.ctr_hi = 124; run_mx_case(&c);
}
#endif

/* Reads the options; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv)
{
    const fk_test_flag flags[] = {
        {"small", &g_small, "the small cases only (for compute-sanitizer)"},
    };
    return fk_test_flags("test_cuda_grouped", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
}

int main(int argc, char **argv)
{
    const int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
#ifndef FP8KIT_HAVE_CUDA
    printf("test_cuda_grouped: built without CUDA, skipped\n");
    return FK_TEST_SKIP;
#else
    struct cudaDeviceProp prop;
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA) || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        prop.major != 9 || prop.minor != 0) {
        printf("test_cuda_grouped: no sm_90 CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    rng = fk_rng_seeded("test_cuda_grouped");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
    if (!gctx || !cctx)
        return fk_test_summary("test_cuda_grouped");
    printf("  %s\n", fp8kit_ctx_describe(gctx));
    CHECK_STATUS(fp8kit_ctx_get_tuning(gctx, g_base, sizeof g_base), FP8KIT_OK);
    const int small = g_small;
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    if (!small) {
        /* many tiles and groups: the planner's own tile width */
        gcase big = {"balanced 8 x 256 (planner)", 2048, 512, 512, 8, NULL, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16,
                     FP8KIT_BF16, FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0, FP8KIT_ACT_NONE, 0, 0, 0, NULL};
        run_case(&big);
        big.name = "64 groups, fast (planner)";
        big.g = 64;
        big.fast = 1;
        run_case(&big);
    }
    bad_device_offsets();
    graph_capture();
    mx_cases(small);
    mx_errors();
    mx_graph();
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_grouped");
#endif
}
