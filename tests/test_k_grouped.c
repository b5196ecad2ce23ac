/* test_k_grouped.c - fp8kit_k_grouped_gemm (the MoE weight gradient) on the
 * CPU backend: random K groupings (empty groups, one group, group K sizes 128
 * .. 1024 in steps of 128, K columns past the last offset), M and N not
 * multiples of 16, 1x128 / tensor / no scales, beta 0 and 1 (accumulate in
 * place), f32 / bf16 / f16 D, e4m3 / e5m2, padded strides; checked against
 * the fp64 oracle (fk_ref_k_grouped_gemm, docs/spec.md 3 bounds), with empty
 * groups exactly beta * D (zeros, or D unchanged); every bad input returns its
 * status and leaves D unchanged. The CUDA backend: tests/test_cuda_k_grouped.c. */
#include <math.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "ref/gemm_ref.h"
#include "test_util.h"
#include "test_hp.h"

typedef struct kcase {
    const char *name;
    int64_t m, n, g;
    fp8kit_dtype at, bt, dt;
    int scales;     /* 0 none, 1 tensor x tensor, 2 1x128, 3 tensor x none */
    int beta;       /* 0 or 1 */
    int pad;        /* extra row stride of A, B and D, and K columns past the last offset */
    int layout;     /* 0 random sizes (some empty), 1 one group holds all, 2 every group non-empty */
} kcase;

static void run_case(const kcase *c, fk_rng *r, fp8kit_ctx *ctx)
{
    const int64_t M = c->m, N = c->n, G = c->g;
    int32_t *off = malloc(sizeof(int32_t) * (size_t)G);
    int64_t tot = 0;
    const int64_t hot = (int64_t)(fk_rng_u32(r) % (uint32_t)G);
    for (int64_t g = 0; g < G; g++) {
        int64_t kg = 128 * (1 + (int64_t)(fk_rng_u32(r) % 8)); /* 128 .. 1024 */
        if (c->layout == 0 && fk_rng_u32(r) % 3 == 0)
            kg = 0;
        if (c->layout == 1)
            kg = g == hot ? 640 : 0;
        tot += kg;
        off[g] = (int32_t)tot;
    }
    if (tot == 0) { /* every group drawn empty: give the first one a block */
        for (int64_t g = 0; g < G; g++)
            off[g] = 128;
        tot = 128;
    }
    const int64_t K = tot + c->pad; /* Ktot: columns past the last offset are not read */
    const int64_t lda = K + c->pad, ldb = K + c->pad, ldd = N + c->pad, sdg = M * ldd + c->pad;
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    uint8_t *a = malloc((size_t)(M * lda)), *b = malloc((size_t)(N * ldb));
    for (int64_t i = 0; i < M * lda; i++)
        a[i] = fk_f32_to_fp8((float)fk_rng_normal(r), e5a);
    for (int64_t i = 0; i < N * ldb; i++)
        b[i] = fk_f32_to_fp8((float)(fk_rng_normal(r) * 0.5), e5b);
    const int64_t kb = (K + 127) / 128;
    float *sa = malloc(sizeof(float) * (size_t)(M * kb)), *sb = malloc(sizeof(float) * (size_t)(N * kb));
    for (int64_t i = 0; i < M * kb; i++)
        sa[i] = (float)ldexp(1.0 + fk_rng_unif(r), -3 + (int)(fk_rng_u32(r) % 4));
    for (int64_t i = 0; i < N * kb; i++)
        sb[i] = (float)(0.25 + fk_rng_unif(r));
    const size_t dsz = fp8kit_dtype_size(c->dt);
    const int64_t dn = G * sdg;
    void *d = malloc(dsz * (size_t)dn), *d0 = malloc(dsz * (size_t)dn);
    for (int64_t i = 0; i < dn; i++)
        store_hp(d, i, c->dt, (float)(fk_rng_normal(r) * 4.0));
    memcpy(d0, d, dsz * (size_t)dn);

    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    fp8kit_k_grouped_gemm_args ka;
    memset(&ka, 0, sizeof ka);
    ka.a = fp8kit_tensor_2d(a, c->at, M, K, lda);
    ka.b = fp8kit_tensor_2d(b, c->bt, N, K, ldb);
    int64_t ds[3] = {G, M, N};
    ka.d = fp8kit_tensor_make(d, c->dt, 3, ds);
    ka.d.strides[0] = sdg, ka.d.strides[1] = ldd, ka.d.strides[2] = 1;
    ka.offsets = off;
    int64_t one = 1, mk[2] = {M, kb}, nk[2] = {N, kb};
    if (c->scales == 2) {
        ka.scales_1x128 = 1;
        ka.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 2, mk);
        ka.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, nk);
    } else if (c->scales == 1 || c->scales == 3) {
        desc.scale_a = FP8KIT_SCALE_TENSOR;
        ka.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 0, &one);
        if (c->scales == 1) {
            desc.scale_b = FP8KIT_SCALE_TENSOR;
            ka.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &one);
        }
    }
    ka.alpha = 0.75f;
    ka.beta = (float)c->beta;
    int32_t status = 12345;
    ka.status = &status;

    double *ref = malloc(sizeof(double) * (size_t)(G * M * N));
    const int rst = fk_ref_k_grouped_gemm(&desc, &ka, ref); /* before D is overwritten */
    CHECK(rst == FK_REF_OK, "%s: the fp64 reference refused the case (%d)", c->name, rst);
    fp8kit_status st = fp8kit_k_grouped_gemm(ctx, &desc, &ka, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(ctx));
    CHECK(status == FP8KIT_OK, "%s: status word %d", c->name, (int)status);

    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    int64_t kmax = 0, empty = 0, empty_bad = 0, pad_bad = 0;
    for (int64_t g = 0; g < G; g++) {
        const int64_t kg = off[g] - (g ? off[g - 1] : 0);
        kmax = kg > kmax ? kg : kmax;
        empty += kg == 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                const int64_t i = g * sdg + m * ldd + n;
                const double got = load_hp(d, i, c->dt);
                fk_ref_norm_add(&norm, got, ref[(g * M + m) * N + n]);
                if (kg == 0) /* exactly beta * D: zeros, or D unchanged */
                    empty_bad += c->beta ? memcmp((char *)d + i * dsz, (char *)d0 + i * dsz, dsz) != 0 : got != 0.0;
            }
    }
    for (int64_t g = 0; g < G && c->pad; g++) /* the gaps between rows and groups stay untouched */
        for (int64_t m = 0; m < M; m++)
            for (int64_t x = N; x < (m == M - 1 ? ldd + c->pad : ldd); x++) {
                const int64_t i = g * sdg + m * ldd + x;
                if (i < dn)
                    pad_bad += memcmp((char *)d + i * dsz, (char *)d0 + i * dsz, dsz) != 0;
            }
    const double rel = fk_ref_norm_rel(&norm), bound = fk_ref_bound(c->dt, kmax);
    CHECK(fk_ref_norm_ok(&norm, bound), "%s: rel %.3g > %.3g (NaN extra %lld, missing %lld)", c->name, rel, bound,
          (long long)norm.nan_extra, (long long)norm.nan_missing);
    CHECK(!empty_bad, "%s: %lld entries of empty groups are not beta * D", c->name, (long long)empty_bad);
    CHECK(!pad_bad, "%s: %lld padding entries of D were written", c->name, (long long)pad_bad);
    printf("  %-30s M %3lld N %3lld G %2lld Ktot %5lld empty %2lld  rel %.2e\n", c->name, (long long)M,
           (long long)N, (long long)G, (long long)K, (long long)empty, rel);
    free(off); free(a); free(b); free(sa); free(sb); free(d); free(d0); free(ref);
}

/* Bad inputs: the status, and D unchanged. */
static void bad_inputs(fp8kit_ctx *ctx)
{
    enum { M = 20, N = 24, K = 512, G = 3, KB = K / 128 };
    uint8_t *a = calloc((size_t)(M * K), 1), *b = calloc((size_t)(N * K), 1);
    for (int i = 0; i < M * K; i++)
        a[i] = (uint8_t)(i * 7 % 0x70);
    for (int i = 0; i < N * K; i++)
        b[i] = (uint8_t)(i * 5 % 0x70);
    static float sa[M * KB], sb[N * KB];
    for (int i = 0; i < M * KB; i++) sa[i] = 1.0f;
    for (int i = 0; i < N * KB; i++) sb[i] = 0.5f;
    static uint16_t d[G * M * N] __attribute__((aligned(16)));
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    fp8kit_k_grouped_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    ok.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, M, K, K);
    ok.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, N, K, K);
    int32_t off[G] = {128, 128, 512};
    ok.offsets = off;
    ok.scales_1x128 = 1;
    int64_t mk[2] = {M, KB}, nk[2] = {N, KB}, gmn[3] = {G, M, N};
    ok.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 2, mk);
    ok.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, nk);
    ok.alpha = 1.0f;
    ok.beta = 1.0f;
    ok.d = fp8kit_tensor_make(d, FP8KIT_BF16, 3, gmn);
    int32_t status = 12345;
    ok.status = &status;
    memset(d, 0, sizeof d);
    CHECK_STATUS(fp8kit_k_grouped_gemm(ctx, &desc, &ok, NULL), FP8KIT_OK);
    CHECK(status == FP8KIT_OK, "status word %d after a good call", (int)status);
    int changed = 0;
    for (int i = 0; i < G * M * N; i++)
        changed |= d[i] != 0;
    CHECK(changed, "the good call wrote nothing");

#define BAD(label, want, ...)                                                                         \
    do {                                                                                              \
        fp8kit_k_grouped_gemm_args x = ok;                                                            \
        fp8kit_gemm_desc dx = desc;                                                                   \
        int32_t ox[G] = {128, 128, 512};                                                              \
        x.offsets = ox;                                                                               \
        __VA_ARGS__;                                                                                  \
        memset(d, 0x77, sizeof d);                                                                    \
        fp8kit_status st_ = fp8kit_k_grouped_gemm(ctx, &dx, &x, NULL);                                \
        CHECK(st_ == (want), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_),           \
              fp8kit_last_error(ctx), fp8kit_status_string(want));                                    \
        int ch_ = 0;                                                                                  \
        for (int i_ = 0; i_ < G * M * N; i_++)                                                        \
            ch_ |= d[i_] != 0x7777;                                                                   \
        CHECK(!ch_, "%s: D changed on error", label);                                                 \
    } while (0)

    { /* bad offsets: the status word says so */
        int32_t ox[G] = {128, 64, 512};
        fp8kit_k_grouped_gemm_args x = ok;
        x.offsets = ox;
        status = 12345;
        CHECK_STATUS(fp8kit_k_grouped_gemm(ctx, &desc, &x, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "status word %d after bad offsets", (int)status);
    }
    CHECK_STATUS(fp8kit_k_grouped_gemm(NULL, &desc, &ok, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_k_grouped_gemm(ctx, NULL, &ok, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_k_grouped_gemm(ctx, &desc, NULL, NULL), FP8KIT_ERR_NULL_POINTER);
    BAD("offsets NULL", FP8KIT_ERR_NULL_POINTER, x.offsets = NULL);
    BAD("a NULL", FP8KIT_ERR_NULL_POINTER, x.a.data = NULL);
    BAD("b NULL", FP8KIT_ERR_NULL_POINTER, x.b.data = NULL);
    BAD("d NULL", FP8KIT_ERR_NULL_POINTER, x.d.data = NULL);
    BAD("scale_a NULL", FP8KIT_ERR_NULL_POINTER, x.scale_a.data = NULL);
    BAD("scale_b NULL", FP8KIT_ERR_NULL_POINTER, x.scale_b.data = NULL);
    BAD("offset not a multiple of 128", FP8KIT_ERR_INVALID_ARGUMENT, ox[0] = 100);
    BAD("group size not a multiple of 128", FP8KIT_ERR_INVALID_ARGUMENT, ox[1] = 200);
    BAD("offsets decreasing", FP8KIT_ERR_INVALID_ARGUMENT, ox[1] = 0);
    BAD("offset negative", FP8KIT_ERR_INVALID_ARGUMENT, ox[0] = -128);
    BAD("last offset past Ktot", FP8KIT_ERR_INVALID_ARGUMENT, ox[2] = 640);
    BAD("offsets misaligned", FP8KIT_ERR_MISALIGNED, x.offsets = (const int32_t *)((const char *)ox + 1));
    BAD("scale_a count", FP8KIT_ERR_INVALID_SHAPE, x.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 2, nk));
    BAD("scale_b count", FP8KIT_ERR_INVALID_SHAPE, x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, mk));
    BAD("scale_b count (128x128 grid)", FP8KIT_ERR_INVALID_SHAPE, int64_t g2[2] = {1, KB};
        x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, g2));
    BAD("scale_a dtype", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.dtype = FP8KIT_E8M0);
    BAD("tensor scale count", FP8KIT_ERR_INVALID_SHAPE, x.scales_1x128 = 0; dx.scale_a = FP8KIT_SCALE_TENSOR);
    BAD("scales_1x128 out of range", FP8KIT_ERR_INVALID_ARGUMENT, x.scales_1x128 = 2);
    BAD("1x128 with a descriptor mode", FP8KIT_ERR_INVALID_ARGUMENT, dx.scale_a = FP8KIT_SCALE_TENSOR);
    BAD("block scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK);
    BAD("row scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = FP8KIT_SCALE_ROW);
    BAD("mx scales", FP8KIT_ERR_UNSUPPORTED, x.scales_1x128 = 0; dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
    BAD("bias", FP8KIT_ERR_UNSUPPORTED, dx.bias = FP8KIT_BIAS_COL);
    BAD("activation", FP8KIT_ERR_UNSUPPORTED, dx.act = FP8KIT_ACT_RELU);
    BAD("output quantization", FP8KIT_ERR_UNSUPPORTED, dx.out_quant = FP8KIT_OUTQ_SCALED);
    BAD("act out of enum", FP8KIT_ERR_INVALID_ARGUMENT, dx.act = (fp8kit_activation)99);
    BAD("d 2-D", FP8KIT_ERR_INVALID_SHAPE, x.d = fp8kit_tensor_2d(d, FP8KIT_BF16, M, N, N));
    BAD("d wrong M", FP8KIT_ERR_INVALID_SHAPE, x.d.shape[1] = M - 1);
    BAD("d wrong N", FP8KIT_ERR_INVALID_SHAPE, x.d.shape[2] = N - 1);
    BAD("b wrong Ktot", FP8KIT_ERR_INVALID_SHAPE, x.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, N, K - 128, K));
    BAD("d fp8", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_E4M3);
    BAD("a bf16", FP8KIT_ERR_UNSUPPORTED, x.a.dtype = FP8KIT_BF16);
    BAD("a stride", FP8KIT_ERR_INVALID_STRIDE, x.a.strides[0] = K - 1);
    BAD("d misaligned", FP8KIT_ERR_MISALIGNED, x.d.data = (char *)d + 1);
    BAD("d overlaps scale_a", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.data = d);
    BAD("d overlaps offsets", FP8KIT_ERR_INVALID_ARGUMENT, x.offsets = (const int32_t *)(void *)d);
    BAD("status inside d", FP8KIT_ERR_INVALID_ARGUMENT, x.status = (int32_t *)(void *)(d + 8));
    BAD("overflowing shape", FP8KIT_ERR_SIZE_OVERFLOW, x.d.shape[0] = INT64_MAX / 4; x.d.strides[0] = 0;
        x.d.strides[1] = 0; x.d.strides[2] = 0);
    free(a);
    free(b);
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_k_grouped");
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "no CPU context\n");
        return 1;
    }
    const kcase cases[] = {
        {"1x128 bf16 beta 0", 77, 130, 6, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, 2, 0, 0, 0},
        {"1x128 f32 beta 1 (accumulate)", 77, 130, 6, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, 2, 1, 0, 0},
        {"1x128 f16 beta 1 padded", 45, 70, 5, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_F16, 2, 1, 8, 0},
        {"1x128 e5m2 f32 padded", 33, 47, 4, FP8KIT_E5M2, FP8KIT_E5M2, FP8KIT_F32, 2, 0, 16, 2},
        {"1x128 one group of 640", 50, 61, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, 2, 1, 0, 1},
        {"1x128 single group", 29, 38, 1, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, 2, 0, 0, 2},
        {"tensor x tensor bf16 beta 1", 61, 90, 7, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, 1, 1, 0, 0},
        {"tensor x none f16", 40, 33, 3, FP8KIT_E5M2, FP8KIT_E4M3, FP8KIT_F16, 3, 0, 0, 2},
        {"no scales f32 padded", 21, 19, 4, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, 0, 1, 8, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], &rng, ctx);
    bad_inputs(ctx);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_k_grouped");
}
