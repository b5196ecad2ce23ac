/* test_cuda_k_grouped.c - the CUDA K-grouped GEMM (fp8kit_k_grouped_gemm,
 * the MoE weight gradient, with device offsets; docs/spec.md 3 "K-grouped
 * GEMM"). Every case runs on the CUDA context and is compared, group by
 * group (rel = ||D[g] - ref||_F / ||ref||_F over the whole M x N of D[g]),
 * with the fp64 reference from the dequantized operands
 * (fk_ref_k_grouped_gemm) and with the CPU backend on the same inputs; bounds
 * bf16 4e-3, f16 1e-3, f32 3e-4 (f32 D needs fast_accum on CUDA: Hopper fp8
 * tensor cores promoted every 128 of K, the documented gap). The space:
 * G 1, 3, 8 and 33; M and N odd or not multiples of 128 (200 x 72, 129 x 257,
 * 384 x 1000, 257 x 129, one 1024 x 1536); group K sizes 0, 128, 384 and
 * several thousand, empty first / last groups, every group empty; a last
 * offset below Ktot (the K columns past it hold huge values, with huge 1x128
 * scales, that would wreck the result if read; the row padding past Ktot
 * holds NaN codes); Ktot not a multiple of 128 (1040 = lda) or of 16 (1100,
 * lda 1104); padded A / B rows, D with padded rows and groups (padding never
 * written); A / B e4m3 / e5m2 in all four pairs; D bf16, f16, f32; 1x128
 * scales over 2^-8 .. 2^8 on both operands, tensor x tensor, tensor x none,
 * none x tensor, none; alpha != 1 (one negative); beta 0 (D prefilled with
 * NaN: not read), 0.5 and 1 (accumulate in place into random D); empty groups
 * exactly beta * D (zeros for beta 0). Then: invalid device offsets (not a
 * multiple of 128, decreasing, past Ktot, negative, INT32_MIN / INT32_MAX)
 * return FP8KIT_OK, write nothing to D (beta 0 and 1) and set the status word
 * to INVALID_ARGUMENT, with a valid call afterwards giving 0 and the right D;
 * new offsets written to the same device buffer between two calls of one
 * plan, and between two replays of a captured CUDA graph, give the new
 * result; f32 D without fast_accum is UNSUPPORTED; the CUDA TMA rules (A / B
 * bases and row strides in bytes multiples of 16: MISALIGNED; D's group
 * stride a multiple of its row stride: UNSUPPORTED) and the host-checked bad
 * inputs (NULL pointers, shapes, scale counts and modes, overlaps) return
 * their status with D and the status word unchanged. Exits 77 without an
 * sm_90 device.
 * Option: --small skips the large cases (for compute-sanitizer). */
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

enum { S_NONE, S_TT, S_1X128, S_TN, S_NT }; /* scales: none, tensor x tensor, 1x128, tensor x none, none x tensor */

typedef struct kcase {
    const char *name;
    int64_t m, n, g;
    const int *kb;        /* G group K sizes in blocks of 128, or NULL: random (0 .. maxkb, a third empty) */
    int maxkb;
    int64_t tail;         /* Ktot - offsets[G-1]: K columns that are not read */
    int64_t apad, bpad;   /* lda - round16(Ktot), ldb - round16(Ktot) (multiples of 16) */
    int64_t dpad, gpad;   /* ldd - N; extra D rows per group (sdg = (M + gpad) * ldd) */
    fp8kit_dtype at, bt, dt;
    int scales;           /* S_* */
    int sexp;             /* 1x128 / tensor scales in 2^-sexp .. 2^sexp */
    float alpha, beta;
    int heavy;            /* A heavy-tailed (Student-t, saturating) */
    int small;            /* run with --small too */
} kcase;

/* The operands of one case on the host and on the device. D (G, M, N) has
 * strides (sdg, ldd, 1); d0 is its content before the call (padding 0x5A,
 * the entries random for beta != 0, NaN for beta == 0). */
typedef struct kops {
    int64_t M, N, G, K, lda, ldb, ldd, sdg, kb;
    uint8_t *a, *b;
    float *sa, *sb;
    int32_t *off;
    size_t dbytes, droom; /* D's bytes; the device buffer holds droom (D as f32) */
    unsigned char *d0;
    void *da, *db, *dsa, *dsb, *doff, *dd;
    int32_t *dstatus;
} kops;

static float rand_scale(int sexp)
{
    if (sexp <= 0)
        return (float)(0.5 + fk_rng_unif(&rng));
    const int e = -sexp + (int)(fk_rng_u32(&rng) % (uint32_t)(2 * sexp));
    return (float)ldexp(1.0 + fk_rng_unif(&rng), e); /* [2^-sexp, 2^sexp) */
}

static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

/* The host offsets of c (or offs when given), the operands and D. */
static void ops_make(kops *o, const kcase *c, const int32_t *offs)
{
    memset(o, 0, sizeof *o);
    const int64_t M = c->m, N = c->n, G = c->g;
    o->M = M; o->N = N; o->G = G;
    o->off = malloc(sizeof(int32_t) * (size_t)G);
    int64_t tot = 0;
    for (int64_t g = 0; g < G; g++) {
        int64_t kg;
        if (offs)
            kg = offs[g] - tot;
        else if (c->kb)
            kg = 128 * (int64_t)c->kb[g];
        else
            kg = fk_rng_u32(&rng) % 3 == 0 ? 0 : 128 * (1 + (int64_t)(fk_rng_u32(&rng) % (uint32_t)c->maxkb));
        tot += kg;
        o->off[g] = (int32_t)tot;
    }
    const int64_t K = tot + c->tail, used = tot;
    o->K = K;
    o->lda = round16(K) + c->apad;
    o->ldb = round16(K) + c->bpad;
    o->ldd = N + c->dpad;
    o->sdg = (M + c->gpad) * o->ldd;
    o->kb = (K + 127) / 128;
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    /* used columns: random; columns used .. K-1: huge (if read, they would wreck D); past K: NaN codes */
    o->a = malloc((size_t)(M * o->lda));
    o->b = malloc((size_t)(N * o->ldb));
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < o->lda; k++) {
            const double x = c->heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng);
            o->a[m * o->lda + k] = k >= K      ? 0x7F
                                   : k >= used ? fk_f32_to_fp8(fk_rng_u32(&rng) & 1 ? 1e6f : -1e6f, e5a)
                                               : fk_f32_to_fp8((float)x, e5a);
        }
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < o->ldb; k++) {
            const double x = fk_rng_normal(&rng) * 0.5;
            o->b[n * o->ldb + k] = k >= K      ? 0x7F
                                   : k >= used ? fk_f32_to_fp8(fk_rng_u32(&rng) & 1 ? 1e6f : -1e6f, e5b)
                                               : fk_f32_to_fp8((float)x, e5b);
        }
    const int64_t kbu = used / 128; /* scale blocks past it cover only unread columns */
    o->sa = malloc(sizeof(float) * (size_t)(M * o->kb));
    o->sb = malloc(sizeof(float) * (size_t)(N * o->kb));
    for (int64_t i = 0; i < M * o->kb; i++)
        o->sa[i] = i % o->kb >= kbu && c->scales == S_1X128 ? 0x1p20f : rand_scale(c->sexp);
    for (int64_t i = 0; i < N * o->kb; i++)
        o->sb[i] = i % o->kb >= kbu && c->scales == S_1X128 ? 0x1p20f : rand_scale(c->sexp);
    /* D: padding 0x5A, entries random (beta != 0) or NaN (beta == 0: D must not be read) */
    const size_t dsz = fp8kit_dtype_size(c->dt);
    o->dbytes = dsz * (size_t)(G * o->sdg);
    o->droom = 4 * (size_t)(G * o->sdg);
    o->d0 = malloc(o->dbytes);
    memset(o->d0, 0x5A, o->dbytes);
    for (int64_t g = 0; g < G; g++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                store_hp(o->d0, g * o->sdg + m * o->ldd + n, c->dt,
                         c->beta != 0.0f ? (float)(fk_rng_normal(&rng) * 4.0) : NAN);
    o->da = dmalloc((size_t)(M * o->lda));
    o->db = dmalloc((size_t)(N * o->ldb));
    o->dsa = dmalloc(sizeof(float) * (size_t)(M * o->kb));
    o->dsb = dmalloc(sizeof(float) * (size_t)(N * o->kb));
    o->doff = dmalloc(sizeof(int32_t) * (size_t)G);
    o->dd = dmalloc(o->droom);
    o->dstatus = dmalloc(2 * sizeof(int32_t));
    h2d(o->da, o->a, (size_t)(M * o->lda));
    h2d(o->db, o->b, (size_t)(N * o->ldb));
    h2d(o->dsa, o->sa, sizeof(float) * (size_t)(M * o->kb));
    h2d(o->dsb, o->sb, sizeof(float) * (size_t)(N * o->kb));
    h2d(o->doff, o->off, sizeof(int32_t) * (size_t)G);
}

static void ops_free(kops *o)
{
    free(o->a); free(o->b); free(o->sa); free(o->sb); free(o->off); free(o->d0);
    cudaFree(o->da); cudaFree(o->db); cudaFree(o->dsa); cudaFree(o->dsb); cudaFree(o->doff); cudaFree(o->dd);
    cudaFree(o->dstatus);
}

/* Writes new host and device offsets (same G; each <= o->K). */
static void ops_set_offsets(kops *o, const int32_t *offs)
{
    memcpy(o->off, offs, sizeof(int32_t) * (size_t)o->G);
    h2d(o->doff, o->off, sizeof(int32_t) * (size_t)o->G);
}

static fp8kit_gemm_desc desc_of(const kcase *c)
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = c->scales == S_TT || c->scales == S_TN ? FP8KIT_SCALE_TENSOR : FP8KIT_SCALE_NONE;
    d.scale_b = c->scales == S_TT || c->scales == S_NT ? FP8KIT_SCALE_TENSOR : FP8KIT_SCALE_NONE;
    d.fast_accum = c->dt == FP8KIT_F32; /* the CUDA backend's f32 output needs it (the CPU ignores it) */
    return d;
}

/* Arguments over the host (dev = 0) or device (dev = 1) copies; D at dptr. */
static fp8kit_k_grouped_gemm_args args_of(const kcase *c, const kops *o, int dev, void *dptr)
{
    fp8kit_k_grouped_gemm_args ka;
    memset(&ka, 0, sizeof ka);
    ka.a = fp8kit_tensor_2d(dev ? o->da : o->a, c->at, o->M, o->K, o->lda);
    ka.b = fp8kit_tensor_2d(dev ? o->db : o->b, c->bt, o->N, o->K, o->ldb);
    ka.offsets = dev ? (const int32_t *)o->doff : o->off;
    void *sa = dev ? o->dsa : o->sa, *sb = dev ? o->dsb : o->sb;
    int64_t one = 1, mk[2] = {o->M, o->kb}, nk[2] = {o->N, o->kb};
    if (c->scales == S_1X128) {
        ka.scales_1x128 = 1;
        ka.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 2, mk);
        ka.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, nk);
    }
    if (c->scales == S_TT || c->scales == S_TN)
        ka.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 0, &one); /* a scalar as ndim 0 */
    if (c->scales == S_TT || c->scales == S_NT)
        ka.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &one); /* and as shape (1) */
    ka.alpha = c->alpha;
    ka.beta = c->beta;
    int64_t ds[3] = {o->G, o->M, o->N};
    ka.d = fp8kit_tensor_make(dptr, c->dt, 3, ds);
    ka.d.strides[0] = o->sdg;
    ka.d.strides[1] = o->ldd;
    ka.d.strides[2] = 1;
    ka.status = dev ? o->dstatus : NULL;
    return ka;
}

static double bound_of(fp8kit_dtype t)
{
    return t == FP8KIT_F32 ? 3e-4 : t == FP8KIT_F16 ? 1e-3 : 4e-3; /* docs/spec.md 3; f32: fast_accum's gap */
}

/* The GPU's D (host copy, gpu) against the fp64 reference and the CPU
 * backend, both from o->d0 and the host offsets: per group, and the bytes
 * outside D's entries unchanged. */
static void verify(const kcase *c, const kops *o, const void *gpu, const char *what)
{
    const int64_t M = o->M, N = o->N, G = o->G;
    fp8kit_gemm_desc desc = desc_of(c);
    double *ref = malloc(sizeof(double) * (size_t)(G * M * N));
    fp8kit_k_grouped_gemm_args ha = args_of(c, o, 0, o->d0);
    const int rst = fk_ref_k_grouped_gemm(&desc, &ha, ref);
    CHECK(rst == FK_REF_OK, "%s%s: the fp64 reference refused the case (%d)", c->name, what, rst);
    void *cpu = malloc(o->dbytes);
    memcpy(cpu, o->d0, o->dbytes);
    fp8kit_k_grouped_gemm_args ca = args_of(c, o, 0, cpu);
    int32_t cst = 12345;
    ca.status = &cst;
    fp8kit_status st = fp8kit_k_grouped_gemm(cctx, &desc, &ca, NULL);
    CHECK(st == FP8KIT_OK && cst == 0, "%s%s: cpu %s (%s), status %d", c->name, what, fp8kit_status_string(st),
          fp8kit_last_error(cctx), (int)cst);

    const size_t dsz = fp8kit_dtype_size(c->dt);
    const double bound = bound_of(c->dt);
    double worst = 0.0, worstc = 0.0;
    int64_t empty = 0, empty_bad = 0, kmax = 0;
    for (int64_t g = 0; g < G; g++) {
        const int64_t kg = o->off[g] - (g ? o->off[g - 1] : 0);
        kmax = kg > kmax ? kg : kmax;
        fk_ref_norm nr, nc;
        memset(&nr, 0, sizeof nr);
        memset(&nc, 0, sizeof nc);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = g * o->sdg + m * o->ldd + n;
                const double got = load_hp(gpu, i, c->dt), r = ref[(g * M + m) * N + n];
                fk_ref_norm_add(&nr, got, r);
                fk_ref_norm_add(&nc, got, load_hp(cpu, i, c->dt));
                if (kg == 0) /* exactly beta * D (zeros when beta == 0) */
                    empty_bad += c->beta == 0.0f ? got != 0.0
                                                 : got != fk_ref_round((double)c->beta * load_hp(o->d0, i, c->dt), c->dt);
            }
        empty += kg == 0;
        const double rel = fk_ref_norm_rel(&nr), relc = fk_ref_norm_rel(&nc);
        worst = rel > worst || isnan(rel) ? rel : worst;
        worstc = relc > worstc || isnan(relc) ? relc : worstc;
        CHECK(fk_ref_norm_ok(&nr, bound), "%s%s: group %lld (K %lld): rel %.3g > %.3g (NaN extra %lld, missing %lld)",
              c->name, what, (long long)g, (long long)kg, rel, bound, (long long)nr.nan_extra,
              (long long)nr.nan_missing);
        CHECK(fk_ref_norm_ok(&nc, bound), "%s%s: group %lld (K %lld): rel to the CPU backend %.3g > %.3g (NaN %lld / %lld)",
              c->name, what, (long long)g, (long long)kg, relc, bound, (long long)nc.nan_extra,
              (long long)nc.nan_missing);
    }
    CHECK(!empty_bad, "%s%s: %lld entries of empty groups are not beta * D", c->name, what, (long long)empty_bad);
    int64_t pad_bad = 0;
    for (int64_t i = 0; i < G * o->sdg; i++) {
        const int64_t r = i % o->sdg;
        if (r / o->ldd < M && r % o->ldd < N)
            continue;
        pad_bad += memcmp((const char *)gpu + i * dsz, o->d0 + i * dsz, dsz) != 0;
    }
    CHECK(!pad_bad, "%s%s: %lld padding entries of D (row or group gaps) were written", c->name, what,
          (long long)pad_bad);
    char label[128];
    snprintf(label, sizeof label, "%s%s", c->name, what);
    printf("  %-50s M %4lld N %4lld G %2lld Ktot %5lld used %5lld kmax %4lld empty %2lld  rel %.2e (cpu %.2e)\n",
           label, (long long)M, (long long)N, (long long)G, (long long)o->K, (long long)o->off[G - 1],
           (long long)kmax, (long long)empty, worst, worstc);
    free(ref);
    free(cpu);
}

/* One call on gctx into the device D reset to d0; returns the host copy of
 * D (status word checked to be 0). */
static void *run_gpu(const kcase *c, kops *o, cudaStream_t s, const char *what)
{
    h2d(o->dd, o->d0, o->dbytes);
    const int32_t junk = 12345;
    h2d(o->dstatus, &junk, sizeof junk);
    fp8kit_gemm_desc d = desc_of(c);
    fp8kit_k_grouped_gemm_args ka = args_of(c, o, 1, o->dd);
    fp8kit_status st = fp8kit_k_grouped_gemm(gctx, &d, &ka, s);
    CHECK(st == FP8KIT_OK, "%s%s: %s (%s)", c->name, what, fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s%s: kernel failed", c->name, what);
    void *gpu = malloc(o->dbytes);
    int32_t status = -1;
    d2h(gpu, o->dd, o->dbytes);
    d2h(&status, o->dstatus, sizeof status);
    CHECK(status == 0, "%s%s: status word %d after valid offsets", c->name, what, (int)status);
    return gpu;
}

static void run_case(const kcase *c)
{
    kops o;
    ops_make(&o, c, NULL);
    void *gpu = run_gpu(c, &o, NULL, "");
    verify(c, &o, gpu, "");
    free(gpu);
    ops_free(&o);
}

/* A call with offsets the kernel must reject returns OK, writes nothing to D
 * and sets the status word (when ka has one) to INVALID_ARGUMENT. */
static void check_rejected(kops *o, const fp8kit_gemm_desc *d, const fp8kit_k_grouped_gemm_args *ka,
                           unsigned char *back, const char *what)
{
    h2d(o->dd, o->d0, o->dbytes);
    const int32_t junk = 12345;
    h2d(o->dstatus, &junk, sizeof junk);
    fp8kit_status st = fp8kit_k_grouped_gemm(gctx, d, ka, NULL);
    CHECK(st == FP8KIT_OK, "%s: returned %s (%s); the host cannot read device offsets", what,
          fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: kernel failed", what);
    int32_t status = 0;
    d2h(&status, o->dstatus, sizeof status);
    d2h(back, o->dd, o->dbytes);
    if (ka->status)
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "%s: status word %d, want %d", what, (int)status,
              (int)FP8KIT_ERR_INVALID_ARGUMENT);
    else
        CHECK(status == junk, "%s: a status word was written though none was passed", what);
    CHECK(memcmp(back, o->d0, o->dbytes) == 0, "%s: D changed", what);
}

/* Invalid device offsets: every kind, beta 0 and 1, with and without a
 * status word; then valid offsets on the same plan. */
static void bad_device_offsets(void)
{
    static const int kbg[3] = {1, 0, 7}; /* offsets 128, 128, 1024; Ktot 1040 */
    kcase c = {"bad offsets", 129, 72, 3, kbg, 0, 16, 32, 16, 0, 1, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_BF16,
               S_1X128, 4, 1.0f, 1.0f, 0, 1};
    const int32_t good[3] = {128, 128, 1024};
    static const struct {
        const char *name;
        int32_t off[3];
    } bad[] = {
        {"first not a multiple of 128", {100, 128, 1024}},
        {"middle not a multiple of 128", {128, 320, 1024}},
        {"last not a multiple of 128", {128, 128, 1000}},
        {"decreasing", {256, 128, 1024}},
        {"last below the previous", {128, 1024, 896}},
        {"last past Ktot (1152 > 1040)", {128, 128, 1152}},
        {"first past Ktot", {2048, 2048, 2048}},
        {"negative first", {-128, 128, 1024}},
        {"negative last", {0, 0, -128}},
        {"INT32_MIN", {INT32_MIN, 0, 1024}},
        {"INT32_MAX rounded to 128", {0, 128, INT32_MAX / 128 * 128}},
    };
    for (int beta = 0; beta < 2; beta++) {
        c.beta = (float)beta;
        kops o;
        ops_make(&o, &c, good); /* D prefilled as the case wants (NaN for beta 0) */
        unsigned char *back = malloc(o.dbytes);
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            h2d(o.doff, bad[i].off, sizeof bad[i].off);
            fp8kit_gemm_desc d = desc_of(&c);
            fp8kit_k_grouped_gemm_args ka = args_of(&c, &o, 1, o.dd);
            char what[96];
            snprintf(what, sizeof what, "bad offsets (%s), beta %d", bad[i].name, beta);
            check_rejected(&o, &d, &ka, back, what);
        }
        /* without a status word */
        h2d(o.doff, bad[0].off, sizeof bad[0].off);
        fp8kit_gemm_desc d = desc_of(&c);
        fp8kit_k_grouped_gemm_args ka = args_of(&c, &o, 1, o.dd);
        ka.status = NULL;
        char what[64];
        snprintf(what, sizeof what, "bad offsets, no status word, beta %d", beta);
        check_rejected(&o, &d, &ka, back, what);
        /* f32 D with fast_accum: rejected the same way */
        h2d(o.doff, bad[3].off, sizeof bad[3].off);
        kcase c32 = c;
        c32.dt = FP8KIT_F32;
        fp8kit_gemm_desc d32 = desc_of(&c32);
        kops o32 = o;
        o32.dbytes = 4 * (size_t)(o.G * o.sdg);
        o32.d0 = malloc(o32.dbytes);
        memset(o32.d0, 0x5A, o32.dbytes);
        unsigned char *back32 = malloc(o32.dbytes);
        fp8kit_k_grouped_gemm_args k32 = args_of(&c32, &o32, 1, o32.dd);
        snprintf(what, sizeof what, "bad offsets, f32 fast, beta %d", beta);
        check_rejected(&o32, &d32, &k32, back32, what);
        free(back32);
        free(o32.d0);
        /* valid offsets again, same plan: status 0 and the right D */
        ops_set_offsets(&o, good);
        void *gpu = run_gpu(&c, &o, NULL, " (valid after invalid)");
        verify(&c, &o, gpu, beta ? " (valid after invalid, beta 1)" : " (valid after invalid, beta 0)");
        free(gpu);
        free(back);
        ops_free(&o);
    }
    printf("  invalid device offsets: %zu kinds x beta 0 / 1 rejected, D unchanged\n", sizeof bad / sizeof bad[0]);
}

/* One plan, new offsets written to the same device buffer between calls,
 * then between replays of a CUDA graph captured once. */
static void repeat_offsets(void)
{
    static const int kbr[5] = {0, 3, 0, 5, 8}; /* 0, 384, 384, 1024, 2048; Ktot 2048 + 80 */
    kcase c = {"repeat", 200, 257, 5, kbr, 0, 80, 16, 0, 5, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, S_1X128,
               6, 0.5f, 0.5f, 0, 1};
    kops o;
    ops_make(&o, &c, NULL);
    static const int32_t second[5] = {128, 1280, 1280, 1280, 1920};
    static const int32_t third[5] = {0, 0, 640, 2048, 2048};
    void *gpu = run_gpu(&c, &o, NULL, " (first offsets)");
    verify(&c, &o, gpu, " (first offsets)");
    free(gpu);
    ops_set_offsets(&o, second);
    gpu = run_gpu(&c, &o, NULL, " (new offsets, same plan)");
    verify(&c, &o, gpu, " (new offsets, same plan)");
    free(gpu);

    /* a graph captured once reads the offsets when it runs */
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    fp8kit_gemm_desc d = desc_of(&c);
    fp8kit_k_grouped_gemm_args ka = args_of(&c, &o, 1, o.dd);
    h2d(o.dd, o.d0, o.dbytes);
    CHECK_STATUS(fp8kit_k_grouped_gemm(gctx, &d, &ka, s), FP8KIT_OK); /* planned on this stream first */
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph: warm-up");
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    fp8kit_status st = fp8kit_k_grouped_gemm(gctx, &d, &ka, s);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
    CHECK(st == FP8KIT_OK, "graph: captured call %s (%s)", fp8kit_status_string(st), fp8kit_last_error(gctx));
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    const int32_t *passes[2] = {third, second};
    for (int p = 0; p < 2 && exec; p++) {
        ops_set_offsets(&o, passes[p]);
        h2d(o.dd, o.d0, o.dbytes);
        const int32_t junk = 12345;
        h2d(o.dstatus, &junk, sizeof junk);
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "graph launch");
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "graph run");
        int32_t status = -1;
        d2h(&status, o.dstatus, sizeof status);
        CHECK(status == 0, "graph replay %d: status word %d", p, (int)status);
        gpu = malloc(o.dbytes);
        d2h(gpu, o.dd, o.dbytes);
        verify(&c, &o, gpu, p ? " (graph replay, offsets back)" : " (graph replay, new offsets)");
        free(gpu);
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    ops_free(&o);
}

/* Host-checked bad inputs and the CUDA-only rules: their status, D and the
 * status word unchanged. */
static void bad_inputs(void)
{
    static const int kbg[3] = {1, 0, 7}; /* offsets 128, 128, 1024; Ktot 1040, lda 1072, ldb 1056 */
    kcase c = {"bad inputs", 129, 72, 3, kbg, 0, 16, 32, 16, 0, 1, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, S_1X128,
               4, 1.0f, 1.0f, 0, 1};
    kops o;
    ops_make(&o, &c, NULL);
    unsigned char *back = malloc(o.droom), *pattern = malloc(o.droom);
    memset(pattern, 0x5A, o.droom);
    memcpy(pattern, o.d0, o.dbytes);
    const int64_t M = o.M, N = o.N, K = o.K, kb = o.kb;
    int64_t mk[2] = {M, kb}, nk[2] = {N, kb}, g2[2] = {1, kb};
    int nbad = 0;

#define BAD(label, want, ...)                                                                            \
    do {                                                                                                 \
        fp8kit_k_grouped_gemm_args x = args_of(&c, &o, 1, o.dd);                                         \
        fp8kit_gemm_desc dx = desc_of(&c);                                                               \
        __VA_ARGS__;                                                                                     \
        h2d(o.dd, pattern, o.droom);                                                                     \
        const int32_t junk_ = 12345;                                                                     \
        h2d(o.dstatus, &junk_, sizeof junk_);                                                            \
        fp8kit_status st_ = fp8kit_k_grouped_gemm(gctx, &dx, &x, NULL);                                  \
        CHECK(st_ == (want), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_),              \
              fp8kit_last_error(gctx), fp8kit_status_string(want));                                      \
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s: sync", label);                                \
        d2h(back, o.dd, o.droom);                                                                        \
        CHECK(memcmp(back, pattern, o.droom) == 0, "%s: D changed on error", label);                     \
        int32_t sw_ = 0;                                                                                 \
        d2h(&sw_, o.dstatus, sizeof sw_);                                                                \
        CHECK(sw_ == junk_, "%s: the status word was written (%d) on a host-checked error", label,      \
              (int)sw_);                                                                                 \
        nbad++;                                                                                          \
    } while (0)

    /* the good call first: it runs */
    {
        fp8kit_k_grouped_gemm_args x = args_of(&c, &o, 1, o.dd);
        fp8kit_gemm_desc dx = desc_of(&c);
        CHECK_STATUS(fp8kit_k_grouped_gemm(gctx, &dx, &x, NULL), FP8KIT_OK);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "good call: sync");
        CHECK_STATUS(fp8kit_k_grouped_gemm(NULL, &dx, &x, NULL), FP8KIT_ERR_NULL_POINTER);
        CHECK_STATUS(fp8kit_k_grouped_gemm(gctx, NULL, &x, NULL), FP8KIT_ERR_NULL_POINTER);
        CHECK_STATUS(fp8kit_k_grouped_gemm(gctx, &dx, NULL, NULL), FP8KIT_ERR_NULL_POINTER);
    }
    /* the CUDA backend's own rules */
    BAD("f32 D without fast_accum", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_F32; dx.fast_accum = 0);
    BAD("a base + 1 byte", FP8KIT_ERR_MISALIGNED, x.a.data = (char *)o.da + 1);
    BAD("a base + 8 bytes", FP8KIT_ERR_MISALIGNED, x.a.data = (char *)o.da + 8);
    BAD("b base + 8 bytes", FP8KIT_ERR_MISALIGNED, x.b.data = (char *)o.db + 8);
    BAD("lda not a multiple of 16", FP8KIT_ERR_MISALIGNED, x.a.strides[0] = o.lda - 8);
    BAD("ldb not a multiple of 16", FP8KIT_ERR_MISALIGNED, x.b.strides[0] = o.ldb - 8);
    BAD("lda = Ktot + 1", FP8KIT_ERR_MISALIGNED, x.a.strides[0] = K + 1);
    BAD("d group stride not a multiple of its row stride", FP8KIT_ERR_UNSUPPORTED, x.d.strides[0] = M * o.ldd + 1);
    /* host-checked, as on the CPU backend */
    BAD("offsets NULL", FP8KIT_ERR_NULL_POINTER, x.offsets = NULL);
    BAD("a NULL", FP8KIT_ERR_NULL_POINTER, x.a.data = NULL);
    BAD("b NULL", FP8KIT_ERR_NULL_POINTER, x.b.data = NULL);
    BAD("d NULL", FP8KIT_ERR_NULL_POINTER, x.d.data = NULL);
    BAD("scale_a NULL", FP8KIT_ERR_NULL_POINTER, x.scale_a.data = NULL);
    BAD("scale_b NULL", FP8KIT_ERR_NULL_POINTER, x.scale_b.data = NULL);
    BAD("offsets misaligned", FP8KIT_ERR_MISALIGNED, x.offsets = (const int32_t *)((char *)o.doff + 2));
    BAD("status misaligned", FP8KIT_ERR_MISALIGNED, x.status = (int32_t *)((char *)o.dstatus + 2));
    BAD("d misaligned", FP8KIT_ERR_MISALIGNED, x.d.data = (char *)o.dd + 1);
    BAD("d 2-D", FP8KIT_ERR_INVALID_SHAPE, x.d = fp8kit_tensor_2d(o.dd, FP8KIT_BF16, M, N, o.ldd));
    BAD("d wrong M", FP8KIT_ERR_INVALID_SHAPE, x.d.shape[1] = M - 1);
    BAD("d wrong N", FP8KIT_ERR_INVALID_SHAPE, x.d.shape[2] = N - 1);
    BAD("b wrong Ktot", FP8KIT_ERR_INVALID_SHAPE, x.b.shape[1] = K - 128);
    BAD("a 3-D", FP8KIT_ERR_INVALID_SHAPE, int64_t s3[3] = {1, M, K}; x.a = fp8kit_tensor_make(o.da, c.at, 3, s3));
    BAD("scale_a count", FP8KIT_ERR_INVALID_SHAPE, x.scale_a = fp8kit_tensor_make(o.dsa, FP8KIT_F32, 2, nk));
    BAD("scale_b count", FP8KIT_ERR_INVALID_SHAPE, x.scale_b = fp8kit_tensor_make(o.dsb, FP8KIT_F32, 2, mk));
    BAD("scale_b count (128x128 grid)", FP8KIT_ERR_INVALID_SHAPE,
        x.scale_b = fp8kit_tensor_make(o.dsb, FP8KIT_F32, 2, g2));
    BAD("scale_a dtype", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.dtype = FP8KIT_E8M0);
    BAD("tensor scale count", FP8KIT_ERR_INVALID_SHAPE, x.scales_1x128 = 0; dx.scale_a = FP8KIT_SCALE_TENSOR);
    BAD("scales_1x128 out of range", FP8KIT_ERR_INVALID_ARGUMENT, x.scales_1x128 = 2);
    BAD("1x128 with a descriptor mode", FP8KIT_ERR_INVALID_ARGUMENT, dx.scale_b = FP8KIT_SCALE_TENSOR);
    BAD("block scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK);
    BAD("row scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = FP8KIT_SCALE_ROW);
    BAD("mx scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
    BAD("bias", FP8KIT_ERR_UNSUPPORTED, dx.bias = FP8KIT_BIAS_COL);
    BAD("activation", FP8KIT_ERR_UNSUPPORTED, dx.act = FP8KIT_ACT_RELU);
    BAD("output quantization", FP8KIT_ERR_UNSUPPORTED, dx.out_quant = FP8KIT_OUTQ_SCALED);
    BAD("act out of enum", FP8KIT_ERR_INVALID_ARGUMENT, dx.act = (fp8kit_activation)99);
    BAD("d fp8", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_E4M3);
    BAD("a bf16", FP8KIT_ERR_UNSUPPORTED, x.a.dtype = FP8KIT_BF16);
    BAD("a stride below Ktot", FP8KIT_ERR_INVALID_STRIDE, x.a.strides[0] = K - 16);
    BAD("d overlaps scale_a", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.data = o.dd);
    BAD("d overlaps offsets", FP8KIT_ERR_INVALID_ARGUMENT, x.offsets = (const int32_t *)o.dd);
    BAD("status inside d", FP8KIT_ERR_INVALID_ARGUMENT, x.status = (int32_t *)((char *)o.dd + 64));
    BAD("overflowing shape", FP8KIT_ERR_SIZE_OVERFLOW, x.d.shape[0] = INT64_MAX / 4; x.d.strides[0] = 0;
        x.d.strides[1] = 0; x.d.strides[2] = 0);
#undef BAD
    printf("  host-checked and CUDA-rule bad inputs: %d, each its status with D unchanged\n", nbad);

    /* the rules' good side: f32 with fast_accum; A and B seen 16 bytes in
     * (bases 16-byte aligned, strides unchanged; Ktot 1024, offsets up to
     * 896), with 1x128 scales of their own; D's group stride a multiple of
     * its row stride (gpad 1) */
    {
        kcase c32 = c;
        c32.name = "f32 fast, A / B bases + 16 bytes";
        c32.dt = FP8KIT_F32;
        kops v = o; /* a view of o's buffers */
        v.K = K - 16;
        v.kb = (v.K + 127) / 128;
        v.a = o.a + 16;
        v.b = o.b + 16;
        v.da = (char *)o.da + 16;
        v.db = (char *)o.db + 16;
        const int32_t offs[3] = {128, 128, 896};
        v.off = malloc(sizeof offs);
        memcpy(v.off, offs, sizeof offs);
        h2d(o.doff, offs, sizeof offs);
        v.sa = malloc(sizeof(float) * (size_t)(M * v.kb));
        v.sb = malloc(sizeof(float) * (size_t)(N * v.kb));
        for (int64_t i = 0; i < M * v.kb; i++)
            v.sa[i] = rand_scale(8);
        for (int64_t i = 0; i < N * v.kb; i++)
            v.sb[i] = rand_scale(8);
        v.dsa = dmalloc(sizeof(float) * (size_t)(M * v.kb));
        v.dsb = dmalloc(sizeof(float) * (size_t)(N * v.kb));
        h2d(v.dsa, v.sa, sizeof(float) * (size_t)(M * v.kb));
        h2d(v.dsb, v.sb, sizeof(float) * (size_t)(N * v.kb));
        v.dbytes = 4 * (size_t)(o.G * o.sdg);
        v.d0 = malloc(v.dbytes);
        memset(v.d0, 0x5A, v.dbytes);
        for (int64_t g = 0; g < o.G; g++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++)
                    store_hp(v.d0, g * o.sdg + m * o.ldd + n, FP8KIT_F32, (float)fk_rng_normal(&rng));
        void *gpu = run_gpu(&c32, &v, NULL, "");
        verify(&c32, &v, gpu, "");
        free(gpu);
        free(v.d0);
        free(v.off);
        free(v.sa);
        free(v.sb);
        cudaFree(v.dsa);
        cudaFree(v.dsb);
    }
    free(back);
    free(pattern);
    ops_free(&o);
}
#endif

/* Reads the options; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv)
{
    const fk_test_flag flags[] = {
        {"small", &g_small, "the small cases only (for compute-sanitizer)"},
    };
    return fk_test_flags("test_cuda_k_grouped", argc, argv, flags, (int)(sizeof flags / sizeof flags[0]));
}

int main(int argc, char **argv)
{
    const int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
#ifndef FP8KIT_HAVE_CUDA
    printf("test_cuda_k_grouped: built without CUDA, skipped\n");
    return FK_TEST_SKIP;
#else
    struct cudaDeviceProp prop;
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA) || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
        prop.major != 9 || prop.minor != 0) {
        printf("test_cuda_k_grouped: no sm_90 CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx) != FP8KIT_OK) {
        printf("test_cuda_k_grouped: no CUDA context, skipped\n");
        return FK_TEST_SKIP;
    }
    rng = fk_rng_seeded("test_cuda_k_grouped");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
    if (!cctx)
        return fk_test_summary("test_cuda_k_grouped");
    printf("  %s\n", fp8kit_ctx_describe(gctx));

    /* group K sizes in blocks of 128 */
    static const int kb_g1[] = {20};                          /* 2560 */
    static const int kb_g3a[] = {0, 3, 1};                    /* empty first, 384, 128 */
    static const int kb_g8a[] = {0, 1, 3, 24, 0, 2, 40, 0};   /* empty first and last, 128 .. 5120 */
    static const int kb_g8b[] = {1, 0, 2, 1, 0, 3, 1, 0};     /* last offset 1024, Ktot 1040 = lda */
    static const int kb_big[] = {2, 4, 8, 6, 0, 5, 3, 4};     /* 4096 */
    static const int kb_g3b[] = {3, 0, 1};
    static const int kb_g1b[] = {24};                         /* 3072 */
    static const int kb_g3c[] = {8, 32, 1};                   /* 1024, 4096, 128 */
    static const int kb_g3d[] = {2, 0, 6};                    /* 1024 of Ktot 1100 (lda 1104) */
    static const int kb_empty[] = {0, 0, 0};
    const fp8kit_dtype E4 = FP8KIT_E4M3, E5 = FP8KIT_E5M2, BF = FP8KIT_BF16, H = FP8KIT_F16, F = FP8KIT_F32;
    /* name, M, N, G, kb, maxkb, tail, apad, bpad, dpad, gpad, at, bt, dt, scales, sexp, alpha, beta, heavy, small */
    const kcase cases[] = {
        {"1x128 e4m3 x e4m3 bf16 G1", 200, 72, 1, kb_g1, 0, 0, 0, 0, 0, 0, E4, E4, BF, S_1X128, 8, 1.5f, 0.0f, 0, 1},
        {"1x128 e4m3 x e5m2 bf16 G3 padded, beta .5", 129, 257, 3, kb_g3a, 0, 16, 32, 16, 3, 2, E4, E5, BF, S_1X128, 8,
         0.75f, 0.5f, 0, 1},
        {"1x128 e5m2 x e4m3 f32 fast G8, beta 1", 384, 1000, 8, kb_g8a, 0, 0, 16, 0, 0, 0, E5, E4, F, S_1X128, 8, 1.0f,
         1.0f, 0, 0},
        {"1x128 e5m2 x e5m2 f16 G8 Ktot 1040 = lda", 200, 72, 8, kb_g8b, 0, 16, 0, 0, 8, 1, E5, E5, H, S_1X128, 3,
         0.25f, 0.0f, 0, 1},
        {"1x128 bf16 1024 x 1536 G8 heavy-tailed A", 1024, 1536, 8, kb_big, 0, 0, 0, 0, 0, 0, E4, E4, BF, S_1X128, 8,
         1.0f, 0.0f, 1, 0},
        {"tensor x tensor bf16 G33 random, beta 1", 257, 129, 33, NULL, 6, 228, 16, 48, 0, 0, E4, E4, BF, S_TT, 2,
         0.75f, 1.0f, 0, 1},
        {"tensor x none f16 G3, beta .5", 129, 72, 3, kb_g3b, 0, 0, 0, 16, 1, 0, E4, E5, H, S_TN, 2, 0.25f, 0.5f, 0, 1},
        {"none x tensor f32 fast G1, beta .5", 200, 257, 1, kb_g1b, 0, 192, 0, 0, 0, 3, E5, E4, F, S_NT, 2, 1.25f, 0.5f,
         0, 1},
        {"no scales bf16 G3 alpha < 0", 384, 1000, 3, kb_g3c, 0, 0, 0, 0, 24, 0, E4, E4, BF, S_NONE, 0, -1.25f, 0.0f,
         1, 0},
        {"1x128 f32 fast Ktot 1100 (lda 1104), beta 1", 129, 72, 3, kb_g3d, 0, 76, 0, 16, 0, 0, E4, E4, F, S_1X128, 8,
         1.0f, 1.0f, 0, 1},
        {"1x128 f16 every group empty, beta .5", 129, 72, 3, kb_empty, 0, 256, 0, 0, 0, 1, E4, E4, H, S_1X128, 8, 1.0f,
         0.5f, 0, 1},
        {"tensor x tensor bf16 every group empty", 200, 72, 3, kb_empty, 0, 256, 0, 0, 2, 0, E5, E5, BF, S_TT, 2,
         1.0f, 0.0f, 0, 1},
        /* the store paths: fp32 D = (the general path), fp32 D += with N 258 (not a multiple of 4: the
         * general path, not the reduce-add) */
        {"1x128 f32 fast G3, beta 0", 256, 1000, 3, kb_g3c, 0, 0, 0, 0, 8, 0, E4, E4, F, S_1X128, 8,
         1.0f, 0.0f, 0, 1},
        {"1x128 f32 fast G3 N 258, beta 1", 129, 258, 3, kb_g3a, 0, 0, 0, 0, 2, 1, E4, E4, F, S_1X128, 8, 0.5f, 1.0f,
         0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].small || !g_small)
            run_case(&cases[i]);
    /* the fp32 D += cases again through the general epilogue (tuning gemm_bulk=0: the exact path
     * instead of the bulk reduce-add copies) */
    CHECK(fp8kit_ctx_set_tuning(gctx, "gemm_bulk=0") == FP8KIT_OK, "set_tuning gemm_bulk=0");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].dt == F && cases[i].beta == 1.0f && (cases[i].small || !g_small)) {
            char name[128];
            snprintf(name, sizeof name, "%s, gemm_bulk=0", cases[i].name);
            kcase c = cases[i];
            c.name = name;
            run_case(&c);
        }
    CHECK(fp8kit_ctx_set_tuning(gctx, NULL) == FP8KIT_OK, "set_tuning cleared");
    bad_device_offsets();
    repeat_offsets();
    bad_inputs();
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_k_grouped");
#endif
}
