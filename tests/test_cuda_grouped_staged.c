/* test_cuda_grouped_staged.c - the CUDA grouped GEMM with A's block scales in the
 * mn_major layout (fp8kit_grouped_gemm, contiguous and masked): the staged
 * kernels (each stage brings its scales: slabs of at least one 132-row box,
 * 16-byte aligned scale pointers, any ceil(K/128); A's box
 * starts at the 4-row boundary below a tile that starts at any row) and the
 * global-load kernels that run every other mn_major call. Each case is planned
 * first (fp8kit_grouped_gemm_describe must name the scaling the rules give),
 * then run twice on the GPU, with the plain and with the mn_major layout of
 * the same scales: both must write the same bytes (the two kernels promote
 * with the same operations in the same order), meet the bound of
 * docs/spec.md 3 against the fp64 reference (src/ref, from the plain scales)
 * and leave rows no group owns untouched. The padding of the mn_major
 * buffers is NaN, so a read of it shows. Cases: groups starting at any row,
 * empty groups, rows past the last offset, masked slabs of M not a multiple
 * of 4 (or of 128), e5m2 on either side, bias and activations, a scale
 * pointer off 16 bytes (the global-load twin of the staged plan), K with
 * ceil(K/128) not a multiple of 4 (B's rows not 16-byte groups), tuning keys
 * no staged variant meets; the
 * staged tiles' TMA-store epilogue (group ends inside a warp's 16 rows) and
 * their bulk-copy one (tuning gemm_ts=0).
 * A call whose scale pointers are off 16 bytes plans the global-load
 * variant (their alignment is part of the plan key). Then 40 random cases
 * over the same space (not with --small).
 * Option --small: the smaller cases only (compute-sanitizer). Exits 77
 * without an sm_90 device. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "test_cuda_util.h"

typedef struct scase {
    const char *name;
    int masked;          /* 0: contiguous, t = T; 1: masked, t = M rows per slab */
    int64_t t, n, k, g;
    const int32_t *offs; /* G offsets (row ends or counts), or NULL: random, the last at T (masked: M) */
    int e5a, e5b;
    fp8kit_dtype dt;
    int bias;
    fp8kit_activation act;
    int misalign;        /* the mn_major scales one float past a 16-byte boundary */
    const char *keys;    /* tuning overrides, or "" */
    const char *want;    /* the scaling the plan must name: "staged" or "block" */
    int small;           /* part of --small */
} scase;

static fk_rng rng;
static fp8kit_ctx *gctx;
static char g_base[512];

static const int32_t k_off_odd[5] = {3, 130, 130, 517, 700};   /* groups start off 4 and 128 rows; one empty */
static const int32_t k_off_short[3] = {200, 201, 450};        /* rows 450 .. T - 1 owned by no group */
static const int32_t k_off_masked[4] = {300, 0, 1, 257};      /* masked counts: full, empty, 1, most */
static const int32_t k_off_cut[6] = {9, 25, 151, 151, 300, 461}; /* group ends inside a warp's 16 rows */

/* fp64 reference over the owned rows (plain scales), bytes elsewhere 0x5A */
static void check_result(const scase *c, const fp8kit_gemm_desc *d, const fp8kit_grouped_gemm_args *hga,
                         const int32_t *off, int64_t T, const void *got, const char *what)
{
    double *ref = malloc(sizeof(double) * (size_t)(T * c->n + 1));
    CHECK(fk_ref_grouped_gemm(d, hga, ref) == FK_REF_OK, "%s: the fp64 reference refused the case", c->name);
    const size_t dsz = fp8kit_dtype_size(c->dt);
    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    int touched = 0;
    for (int64_t m = 0; m < T; m++) {
        const int owned = c->masked ? m % c->t < off[m / c->t] : m < off[c->g - 1];
        for (int64_t n = 0; n < c->n; n++) {
            if (!owned) {
                const unsigned char *cell = (const unsigned char *)got + (size_t)(m * c->n + n) * dsz;
                for (size_t q = 0; q < dsz; q++)
                    touched |= cell[q] != 0x5A;
                continue;
            }
            fk_ref_norm_add(&norm, load_hp(got, m * c->n + n, c->dt), ref[m * c->n + n]);
        }
    }
    const double rel = fk_t_rel_floor(norm.err2, norm.ref2, norm.count, c->dt);
    /* the grouped kernel's bounds (test_cuda_grouped.c): f32 output runs with fast accumulation */
    const double bound = c->dt == FP8KIT_F32 ? 2e-3 : c->dt == FP8KIT_F16 ? 1e-3 : 4e-3;
    CHECK(rel <= bound, "%s (%s): rel %.3g > %.3g", c->name, what, rel, bound);
    CHECK(!norm.nan_extra && !norm.nan_missing, "%s (%s): NaN where the reference has none, or the reverse",
          c->name, what);
    CHECK(!touched, "%s (%s): rows no group owns were written", c->name, what);
    printf("  %-40s %-7s T %5lld N %4lld K %5lld G %3lld  rel %.2e\n", c->name, what, (long long)T,
           (long long)c->n, (long long)c->k, (long long)c->g, rel);
    free(ref);
}

static void run_case(const scase *c)
{
    const int64_t N = c->n, K = c->k, G = c->g, M = c->t;
    const int64_t T = c->masked ? G * M : c->t, kb = (K + 127) / 128, nb = (N + 127) / 128;
    const size_t dsz = fp8kit_dtype_size(c->dt), dbytes = dsz * (size_t)(T * N);
    uint8_t *a = malloc((size_t)(T * K) + 1), *b = malloc((size_t)(G * N * K) + 1);
    for (int64_t i = 0; i < T * K; i++)
        a[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng), c->e5a);
    for (int64_t i = 0; i < G * N * K; i++)
        b[i] = fk_f32_to_fp8((float)(fk_rng_normal(&rng) * 0.5), c->e5b);
    float *sa = malloc(sizeof(float) * (size_t)(T * kb + 1)), *sb = malloc(sizeof(float) * (size_t)(G * nb * kb + 1));
    for (int64_t i = 0; i < T * kb; i++)
        sa[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -3 + (int)(fk_rng_u32(&rng) % 4));
    for (int64_t i = 0; i < G * nb * kb; i++)
        sb[i] = (float)(0.25 + fk_rng_unif(&rng));
    float *bias = malloc(sizeof(float) * (size_t)(G * N + 1));
    for (int64_t i = 0; i < G * N; i++)
        bias[i] = (float)fk_rng_normal(&rng);
    int32_t *off = malloc(sizeof(int32_t) * (size_t)G);
    if (c->offs) {
        memcpy(off, c->offs, sizeof(int32_t) * (size_t)G);
    } else {
        for (int64_t i = 0; i < G; i++)
            off[i] = (int32_t)(fk_rng_u32(&rng) % (uint32_t)(M + 1));
        for (int64_t i = 1; i < G && !c->masked; i++)
            for (int64_t j = i; j > 0 && off[j - 1] > off[j]; j--) {
                const int32_t x = off[j];
                off[j] = off[j - 1];
                off[j - 1] = x;
            }
        if (!c->masked)
            off[G - 1] = (int32_t)T;
    }
    int64_t n_mn;
    float *sa_mn = fk_t_mn_major(sa, T, kb, c->masked ? G : 1, &n_mn);

    /* device copies; the mn_major scales at a 16-byte boundary, or 4 bytes past one */
    void *da = dmalloc((size_t)(T * K)), *db = dmalloc((size_t)(G * N * K)), *dsb = dmalloc(sizeof(float) * (size_t)(G * nb * kb));
    float *dsa = dmalloc(sizeof(float) * (size_t)(T * kb)), *dsa_mn0 = dmalloc(sizeof(float) * (size_t)(n_mn + 4));
    float *dsa_mn = dsa_mn0 + (c->misalign ? 1 : 0);
    void *dbias = dmalloc(sizeof(float) * (size_t)(G * N)), *doff = dmalloc(sizeof(int32_t) * (size_t)G);
    void *dd = dmalloc(dbytes);
    h2d(da, a, (size_t)(T * K));
    h2d(db, b, (size_t)(G * N * K));
    h2d(dsa, sa, sizeof(float) * (size_t)(T * kb));
    h2d(dsa_mn, sa_mn, sizeof(float) * (size_t)n_mn);
    h2d(dsb, sb, sizeof(float) * (size_t)(G * nb * kb));
    h2d(dbias, bias, sizeof(float) * (size_t)(G * N));
    h2d(doff, off, sizeof(int32_t) * (size_t)G);

    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_BLOCK;
    d.bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d.act = c->act;
    d.fast_accum = c->dt == FP8KIT_F32;
    fp8kit_grouped_gemm_args ga, hga;
    memset(&ga, 0, sizeof ga);
    const fp8kit_dtype at = c->e5a ? FP8KIT_E5M2 : FP8KIT_E4M3, bt = c->e5b ? FP8KIT_E5M2 : FP8KIT_E4M3;
    const int64_t as[3] = {G, M, K}, ds[3] = {G, M, N}, bs[3] = {G, N, K}, gn[2] = {G, N}, sa_n = T * kb,
                  sb_n = G * nb * kb;
    if (c->masked) {
        ga.a = fp8kit_tensor_make(da, at, 3, as);
        ga.d = fp8kit_tensor_make(dd, c->dt, 3, ds);
        ga.layout = FP8KIT_GROUPED_MASKED;
    } else {
        ga.a = fp8kit_tensor_2d(da, at, T, K, K);
        ga.d = fp8kit_tensor_2d(dd, c->dt, T, N, N);
    }
    ga.b = fp8kit_tensor_make(db, bt, 3, bs);
    ga.offsets = doff;
    ga.scale_a = fp8kit_tensor_make(dsa, FP8KIT_F32, 1, &sa_n);
    ga.scale_b = fp8kit_tensor_make(dsb, FP8KIT_F32, 1, &sb_n);
    if (c->bias)
        ga.bias = fp8kit_tensor_make(dbias, FP8KIT_F32, 2, gn);
    ga.alpha = 0.75f;
    /* the host copy of the plain call, for the reference */
    hga = ga;
    hga.a.data = a;
    hga.b.data = b;
    hga.offsets = off;
    hga.scale_a.data = sa;
    hga.scale_b.data = sb;
    hga.bias.data = bias;
    fp8kit_grouped_gemm_args mga = ga;
    mga.scale_a = fp8kit_tensor_make(dsa_mn, FP8KIT_F32, 1, &n_mn);
    fp8kit_gemm_desc md = d;
    md.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;

    char spec[sizeof g_base + 64];
    snprintf(spec, sizeof spec, "%s%s%s", g_base, g_base[0] && c->keys[0] ? "," : "", c->keys);
    CHECK_STATUS(fp8kit_ctx_set_tuning(gctx, spec), FP8KIT_OK);
    char plan[512];
    fp8kit_status st = fp8kit_grouped_gemm_describe(gctx, &md, &mga, plan, sizeof plan);
    CHECK(st == FP8KIT_OK, "%s: describe: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(gctx));
    char want[64];
    snprintf(want, sizeof want, "scaling=%s ", c->want);
    /* (the scale pointers' alignment is part of the plan key: a call whose scales are off 16 bytes
     * plans the global-load variant) */
    CHECK(strstr(plan, want) != NULL, "%s: the plan \"%s\" does not have %s", c->name, plan, want);
    /* the staged e4m3 x e4m3 tiles store 16-bit D by TMA where N is a multiple of 8 (unless gemm_ts=0);
     * the bytes must be the bulk-copy path's (the plain call's) all the same */
    const int tma = !strcmp(c->want, "staged") && !c->e5a && !c->e5b && c->dt != FP8KIT_F32 && N % 8 == 0 &&
                    !strstr(c->keys, "gemm_ts=0");
    CHECK(!!strstr(plan, "store=tma ") == tma, "%s: the plan \"%s\" %s the TMA store", c->name, plan,
          tma ? "lacks" : "has");

    void *plain = malloc(dbytes), *mn = malloc(dbytes);
    CHECK(cudaMemset(dd, 0x5A, dbytes) == cudaSuccess, "memset");
    st = fp8kit_grouped_gemm(gctx, &d, &ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: plain: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: plain: the kernel failed", c->name);
    d2h(plain, dd, dbytes);
    CHECK(cudaMemset(dd, 0x5A, dbytes) == cudaSuccess, "memset");
    st = fp8kit_grouped_gemm(gctx, &md, &mga, NULL);
    CHECK(st == FP8KIT_OK, "%s: mn_major: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: mn_major: the kernel failed", c->name);
    d2h(mn, dd, dbytes);
    CHECK(!memcmp(plain, mn, dbytes), "%s: the mn_major call wrote other bytes than the plain one (%s)", c->name,
          plan);
    check_result(c, &d, &hga, off, T, mn, "mn_major");
    if (memcmp(plain, mn, dbytes))
        check_result(c, &d, &hga, off, T, plain, "plain");

    free(plain); free(mn); free(a); free(b); free(sa); free(sb); free(bias); free(off); free(sa_mn);
    cudaFree(da); cudaFree(db); cudaFree(dsb); cudaFree(dsa); cudaFree(dsa_mn0); cudaFree(dbias); cudaFree(doff);
    cudaFree(dd);
}

/* The space: n random cases (layout, rows from 1, odd N, K with ceil(K/128) a multiple of 4 or
 * not, 1 to 40 experts (masked 12), random groupings, every fp8 pair, output type, bias and activation, scales
 * off 16 bytes now and then); the plan must be staged exactly where the rules say. */
static void sweep(int n)
{
    static const int64_t kv[] = {256, 384, 512, 640, 1024, 1536, 2048};
    static const fp8kit_dtype dv[] = {FP8KIT_BF16, FP8KIT_F16, FP8KIT_F32};
    static const fp8kit_activation av[] = {FP8KIT_ACT_NONE, FP8KIT_ACT_SILU, FP8KIT_ACT_GELU_TANH};
    for (int i = 0; i < n; i++) {
        char name[64];
        scase c;
        memset(&c, 0, sizeof c);
        c.masked = (int)(fk_rng_u32(&rng) % 2);
        /* (T x N x K at most about 1e9: the fp64 reference runs on the host) */
        c.g = 1 + (int64_t)(fk_rng_u32(&rng) % (c.masked ? 12 : 40));
        c.t = c.masked ? 1 + (int64_t)(fk_rng_u32(&rng) % 300) : 1 + (int64_t)(fk_rng_u32(&rng) % 1200);
        c.n = 1 + (int64_t)(fk_rng_u32(&rng) % 320);
        c.k = kv[fk_rng_u32(&rng) % 7];
        c.e5a = fk_rng_u32(&rng) % 4 == 0;
        c.e5b = fk_rng_u32(&rng) % 4 == 0;
        c.dt = dv[fk_rng_u32(&rng) % 3];
        c.bias = (int)(fk_rng_u32(&rng) % 2);
        c.act = av[fk_rng_u32(&rng) % 3];
        c.misalign = fk_rng_u32(&rng) % 8 == 0;
        c.keys = "";
        /* staged: slabs (masked M, else T) of at least one 132-row box once padded to 4, 16-byte aligned
         * scales (K blocks not in 4s: B's rows not 16-byte groups) */
        const int64_t rp = (c.t + 3) / 4 * 4;
        c.want = rp >= 132 && !c.misalign ? "staged" : "block";
        snprintf(name, sizeof name, "space #%d %s", i, c.masked ? "masked" : "contig");
        c.name = name;
        run_case(&c);
    }
}

/* Bad mn_major inputs on the GPU: the host's statuses, D unchanged. */
static void bad_inputs(void)
{
    const int64_t T = 256, N = 128, K = 512, G = 2, kb = 4;
    void *da = dmalloc((size_t)(T * K)), *db = dmalloc((size_t)(G * N * K)), *dd = dmalloc((size_t)(T * N) * 2);
    float *dsa = dmalloc(sizeof(float) * (size_t)(T * kb)), *dsb = dmalloc(sizeof(float) * (size_t)(G * kb));
    int32_t *doff = dmalloc(8);
    CHECK(cudaMemset(dd, 0x77, (size_t)(T * N) * 2) == cudaSuccess, "memset");
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_BLOCK;
    d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    const int64_t bs[3] = {G, N, K}, good = kb * T, short_n = kb * T - 1, sb_n = G * kb;
    ga.a = fp8kit_tensor_2d(da, FP8KIT_E4M3, T, K, K);
    ga.b = fp8kit_tensor_make(db, FP8KIT_E4M3, 3, bs);
    ga.d = fp8kit_tensor_2d(dd, FP8KIT_BF16, T, N, N);
    ga.offsets = doff;
    ga.scale_b = fp8kit_tensor_make(dsb, FP8KIT_F32, 1, &sb_n);
    ga.alpha = 1.0f;
    ga.scale_a = fp8kit_tensor_make(dsa, FP8KIT_F32, 1, &short_n);
    CHECK_STATUS(fp8kit_grouped_gemm(gctx, &d, &ga, NULL), FP8KIT_ERR_INVALID_SHAPE);
    ga.scale_a = fp8kit_tensor_make(dsa, FP8KIT_F32, 1, &good);
    d.scale_a = d.scale_b = FP8KIT_SCALE_ROW;
    CHECK_STATUS(fp8kit_grouped_gemm(gctx, &d, &ga, NULL), FP8KIT_ERR_UNSUPPORTED);
    char buf[8];
    CHECK_STATUS(fp8kit_grouped_gemm_describe(gctx, &d, &ga, buf, 0), FP8KIT_ERR_NULL_POINTER);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    uint16_t *h = malloc((size_t)(T * N) * 2);
    d2h(h, dd, (size_t)(T * N) * 2);
    int changed = 0;
    for (int64_t i = 0; i < T * N; i++)
        changed |= h[i] != 0x7777;
    CHECK(!changed, "bad mn_major inputs: D changed");
    free(h);
    cudaFree(da); cudaFree(db); cudaFree(dd); cudaFree(dsa); cudaFree(dsb); cudaFree(doff);
}
#endif

int main(int argc, char **argv)
{
    int small = 0;
    static const struct option opts[] = {{"small", no_argument, NULL, 's'}, {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o != 's') {
            fprintf(stderr, "usage: %s [--small]\n", argv[0]);
            return 2;
        }
        small = 1;
    }
    const int skip = fk_test_cuda_skip("test_cuda_grouped_staged");
    if (skip >= 0)
        return skip;
#ifdef FP8KIT_HAVE_CUDA
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9 || prop.minor != 0) {
        printf("test_cuda_grouped_staged: no sm_90 CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    rng = fk_rng_seeded("test_cuda_grouped_staged");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx), FP8KIT_OK);
    if (!gctx)
        return fk_test_summary("test_cuda_grouped_staged");
    CHECK_STATUS(fp8kit_ctx_get_tuning(gctx, g_base, sizeof g_base), FP8KIT_OK);
    const fp8kit_dtype BF = FP8KIT_BF16, F16 = FP8KIT_F16, F32 = FP8KIT_F32;
    const fp8kit_activation NONE = FP8KIT_ACT_NONE, SILU = FP8KIT_ACT_SILU, GELU = FP8KIT_ACT_GELU_TANH,
                            RELU = FP8KIT_ACT_RELU;
    const scase cases[] = {
        /* contiguous */
        {"contig, groups off 4 rows", 0, 700, 256, 512, 5, k_off_odd, 0, 0, BF, 1, SILU, 0, "", "staged", 1},
        {"contig, short last, K 2048", 0, 451, 200, 2048, 3, k_off_short, 0, 0, BF, 0, NONE, 0, "", "staged", 1},
        {"contig e5m2 x e4m3 f16", 0, 333, 136, 1024, 4, NULL, 1, 0, F16, 1, GELU, 0, "", "staged", 1},
        {"contig e4m3 x e5m2 f32 fast", 0, 300, 256, 512, 3, NULL, 0, 1, F32, 0, NONE, 0, "", "staged", 1},
        {"contig e5m2 x e5m2", 0, 257, 128, 512, 2, NULL, 1, 1, BF, 1, NONE, 0, "", "staged", 0},
        {"contig, bulk-copy store (gemm_ts=0)", 0, 700, 256, 512, 5, k_off_odd, 0, 0, BF, 1, SILU, 0, "gemm_ts=0",
         "staged", 1},
        {"contig, rows cut mid-warp, f16 relu", 0, 461, 264, 1024, 6, k_off_cut, 0, 0, F16, 0, RELU, 0, "", "staged",
         1},
        {"contig, scales off 16 bytes", 0, 700, 256, 512, 5, k_off_odd, 0, 0, BF, 1, SILU, 1, "", "block", 1},
        {"contig, kb 3 (B's rows not 16-byte groups)", 0, 333, 256, 384, 4, NULL, 0, 0, BF, 0, NONE, 0, "", "staged", 1},
        {"contig, kb 23 (K 2880)", 0, 520, 384, 2880, 4, NULL, 0, 0, BF, 1, SILU, 0, "", "staged", 0},
        {"contig, kb 6 (K 768), 16 groups", 0, 900, 256, 768, 16, NULL, 0, 0, BF, 0, NONE, 0, "", "staged", 1},
        {"contig, T 100 (under one box)", 0, 100, 128, 512, 3, NULL, 0, 0, BF, 0, NONE, 0, "", "block", 1},
        {"contig, gemm_bn=192 (global loads)", 0, 400, 384, 512, 3, NULL, 0, 0, BF, 0, NONE, 0, "gemm_bn=192", "block",
         0},
        {"contig 32 groups, K 7168", 0, 1024, 256, 7168, 32, NULL, 0, 0, BF, 0, NONE, 0, "", "staged", 0},
        /* masked: slabs of M rows, the scales one mn_major buffer per expert */
        {"masked M 300, counts", 1, 300, 256, 512, 4, k_off_masked, 0, 0, BF, 1, SILU, 0, "", "staged", 1},
        {"masked M 130 (Mp 132)", 1, 130, 200, 1024, 5, NULL, 0, 0, BF, 0, NONE, 0, "", "staged", 1},
        {"masked M 300, counts, bulk-copy store", 1, 300, 256, 512, 4, k_off_masked, 0, 0, BF, 1, SILU, 0, "gemm_ts=0",
         "staged", 0},
        {"masked M 129 e5m2 f16", 1, 129, 128, 512, 3, NULL, 1, 0, F16, 1, GELU, 0, "", "staged", 1},
        {"masked M 257, scales off 16 bytes", 1, 257, 256, 512, 3, NULL, 0, 0, BF, 0, NONE, 1, "", "block", 1},
        {"masked M 64 (under one box)", 1, 64, 256, 512, 6, NULL, 0, 0, BF, 1, NONE, 0, "", "block", 1},
        {"masked M 128 (under one 132-row box)", 1, 128, 128, 512, 3, NULL, 0, 0, BF, 0, NONE, 0, "", "block", 0},
        {"masked M 190, kb 5", 1, 190, 256, 640, 4, NULL, 0, 0, BF, 0, SILU, 0, "", "staged", 1},
        {"masked M 256, 8 experts, K 7168", 1, 256, 256, 7168, 8, NULL, 0, 0, BF, 0, NONE, 0, "", "staged", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!small || cases[i].small)
            run_case(&cases[i]);
    if (!small)
        sweep(40);
    bad_inputs();
    fp8kit_ctx_destroy(gctx);
#else
    (void)small;
#endif
    return fk_test_summary("test_cuda_grouped_staged");
}
