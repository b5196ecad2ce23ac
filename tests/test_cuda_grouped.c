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
 * Option: --small skips the many-groups cases (for compute-sanitizer). */
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
    BAD("mx scales", FP8KIT_ERR_UNSUPPORTED, dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
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
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_grouped");
#endif
}
