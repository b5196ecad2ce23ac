/* test_grouped.c - fp8kit_grouped_gemm on the CPU backend: random expert
 * groupings (empty groups, all rows in one group, rows past the last offset)
 * checked against the fp64 oracle of src/ref/gemm_ref.h (fk_ref_grouped_gemm:
 * each group as a GEMM of the dequantized operands; docs/spec.md section 3
 * bounds), in both layouts (contiguous row ends, masked counts per expert
 * slab), for none / tensor / row / block (1x128 x 128x128) scales, bias, every
 * activation, bf16 / f16 / f32 output, e4m3 and e5m2, padded strides; rows no
 * group owns stay untouched; every bad input returns its status and
 * leaves D unchanged; the optional status word reports the offsets' verdict
 * (0, or FP8KIT_ERR_INVALID_ARGUMENT for bad ones); with a CUDA context
 * (tests/test_cuda_grouped.c covers its kernel) zeroed arguments are refused
 * on the host. */
#include <math.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "ref/gemm_ref.h"
#include "test_util.h"
#include "test_hp.h"

typedef struct gcase {
    const char *name;
    int64_t t, n, k, g;
    fp8kit_dtype at, bt, dt, biast;
    fp8kit_scale_mode sa, sb;
    int bias, act, pad, layout; /* layout: 0 random offsets, 1 all rows in the last group, 2 short last offset */
    int masked;                 /* FP8KIT_GROUPED_MASKED: t is M, the rows of each expert's slab */
} gcase;

static void run_case(const gcase *c, fk_rng *r, fp8kit_ctx *ctx)
{
    const int64_t N = c->n, K = c->k, G = c->g;
    const int64_t T = c->masked ? G * c->t : c->t; /* rows of A and D in all */
    const int64_t lda = K + c->pad, ldb = K + c->pad, ldd = N + c->pad;
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    const int block = c->sa == FP8KIT_SCALE_BLOCK;
    const int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
    const int64_t sa_n = block ? T * kb : T, sb_n = block ? G * nb * kb : G * N;
    uint8_t *a = malloc((size_t)(T * lda)), *b = malloc((size_t)(G * N * ldb));
    for (int64_t i = 0; i < T * lda; i++)
        a[i] = fk_f32_to_fp8((float)fk_rng_normal(r), e5a);
    for (int64_t i = 0; i < G * N * ldb; i++)
        b[i] = fk_f32_to_fp8((float)(fk_rng_normal(r) * 0.5), e5b);
    float *sa = malloc(sizeof(float) * (size_t)sa_n), *sb = malloc(sizeof(float) * (size_t)sb_n);
    for (int64_t i = 0; i < sa_n; i++)
        sa[i] = (float)ldexp(1.0 + fk_rng_unif(r), -3 + (int)(fk_rng_u32(r) % 4));
    for (int64_t i = 0; i < sb_n; i++)
        sb[i] = (float)(0.25 + fk_rng_unif(r));
    const size_t bsz = fp8kit_dtype_size(c->biast), dsz = fp8kit_dtype_size(c->dt);
    void *bias = malloc(bsz * (size_t)(G * N));
    for (int64_t i = 0; i < G * N; i++)
        store_hp(bias, i, c->biast, (float)fk_rng_normal(r));
    int32_t *off = malloc(sizeof(int32_t) * (size_t)G);
    for (int64_t i = 0; i < G; i++) /* random cut points (sorted) or counts */
        off[i] = (int32_t)(fk_rng_u32(r) % (uint32_t)(c->t + 1));
    for (int64_t i = 1; i < G && !c->masked; i++)
        for (int64_t j = i; j > 0 && off[j - 1] > off[j]; j--) {
            int32_t x = off[j];
            off[j] = off[j - 1];
            off[j - 1] = x;
        }
    if (c->layout == 1) /* contiguous: all rows in the last group; masked: the last slab full, the others empty */
        for (int64_t i = 0; i < G; i++)
            off[i] = i == G - 1 ? (int32_t)c->t : 0;
    else if (c->layout != 2)
        off[G - 1] = (int32_t)c->t;
    void *d = malloc(dsz * (size_t)(T * ldd));
    memset(d, 0x5A, dsz * (size_t)(T * ldd));

    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = c->sa;
    desc.scale_b = c->sb;
    desc.bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    desc.act = (fp8kit_activation)c->act;
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    if (c->masked) {
        int64_t as[3] = {G, c->t, K}, ds[3] = {G, c->t, N};
        ga.a = fp8kit_tensor_make(a, c->at, 3, as);
        ga.a.strides[0] = c->t * lda, ga.a.strides[1] = lda, ga.a.strides[2] = 1;
        ga.d = fp8kit_tensor_make(d, c->dt, 3, ds);
        ga.d.strides[0] = c->t * ldd, ga.d.strides[1] = ldd, ga.d.strides[2] = 1;
        ga.layout = FP8KIT_GROUPED_MASKED;
    } else {
        ga.a = fp8kit_tensor_2d(a, c->at, T, K, lda);
        ga.d = fp8kit_tensor_2d(d, c->dt, T, N, ldd);
    }
    int64_t bshape[3] = {G, N, K};
    ga.b = fp8kit_tensor_make(b, c->bt, 3, bshape);
    ga.b.strides[0] = N * ldb;
    ga.b.strides[1] = ldb;
    ga.b.strides[2] = 1;
    ga.offsets = off;
    int64_t one = 1, gn[2] = {G, N}, tk[2] = {T, kb}, gnk[3] = {G, nb, kb};
    if (c->sa == FP8KIT_SCALE_TENSOR)
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &one);
    else if (c->sa == FP8KIT_SCALE_ROW)
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &T);
    else if (block)
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 2, tk);
    if (c->sb == FP8KIT_SCALE_TENSOR)
        ga.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &G);
    else if (c->sb == FP8KIT_SCALE_ROW)
        ga.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, gn);
    else if (block)
        ga.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 3, gnk);
    if (c->bias)
        ga.bias = fp8kit_tensor_make(bias, c->biast, 2, gn);
    ga.alpha = 0.75f;
    fp8kit_status st = fp8kit_grouped_gemm(ctx, &desc, &ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(ctx));

    /* the fp64 reference over the grouped rows; untouched bytes elsewhere */
    double *ref = malloc(sizeof(double) * (size_t)(T * N + 1));
    const int rst = fk_ref_grouped_gemm(&desc, &ga, ref);
    CHECK(rst == FK_REF_OK, "%s: the fp64 reference refused the case (%d)", c->name, rst);
    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    int touched = 0;
    int64_t used = 0;
    for (int64_t m = 0; m < T; m++) {
        const int owned = c->masked ? m % c->t < off[m / c->t] : m < off[G - 1];
        used += owned;
        for (int64_t n = 0; n < N; n++) {
            const unsigned char *cell = (const unsigned char *)d + (size_t)(m * ldd + n) * dsz;
            if (!owned) {
                for (size_t q = 0; q < dsz; q++)
                    touched |= cell[q] != 0x5A;
                continue;
            }
            fk_ref_norm_add(&norm, load_hp(d, m * ldd + n, c->dt), ref[m * N + n]);
        }
    }
    const double rel = fk_ref_norm_rel(&norm);
    const double bound = fk_ref_bound(c->dt, K);
    CHECK(rel <= bound, "%s: rel %.3g > %.3g", c->name, rel, bound);
    CHECK(!norm.nan_extra, "%s: NaN where the reference has none", c->name);
    CHECK(!norm.nan_missing, "%s: a number where the reference is NaN", c->name);
    CHECK(!touched, "%s: rows no group owns were written", c->name);
    printf("  %-28s T %4lld N %4lld K %4lld G %3lld used %4lld  rel %.2e\n", c->name, (long long)T, (long long)N,
           (long long)K, (long long)G, (long long)used, rel);
    free(a); free(b); free(sa); free(sb); free(bias); free(off); free(d); free(ref);
}

/* Bad inputs: the status, and D unchanged. */
static void bad_inputs(fp8kit_ctx *ctx)
{
    const int64_t T = 40, N = 24, K = 32, G = 3;
    uint8_t *a = calloc((size_t)(T * K), 1), *b = calloc((size_t)(G * N * K), 1);
    float sa[40], sb[72], bias[72];
    for (int i = 0; i < 40; i++) sa[i] = 1.0f;
    for (int i = 0; i < 72; i++) sb[i] = 1.0f, bias[i] = 0.5f;
    uint16_t d[40 * 24];
    int32_t off[3] = {10, 10, 40};
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = FP8KIT_SCALE_ROW;
    desc.scale_b = FP8KIT_SCALE_ROW;
    desc.bias = FP8KIT_BIAS_COL;
    fp8kit_grouped_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    ok.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, T, K, K);
    int64_t bs[3] = {G, N, K}, gn[2] = {G, N}, tt = T;
    ok.b = fp8kit_tensor_make(b, FP8KIT_E4M3, 3, bs);
    ok.offsets = off;
    ok.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &tt);
    ok.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, gn);
    ok.bias = fp8kit_tensor_make(bias, FP8KIT_F32, 2, gn);
    ok.alpha = 1.0f;
    ok.d = fp8kit_tensor_2d(d, FP8KIT_BF16, T, N, N);
    int32_t status = 12345;
    ok.status = &status;
    memset(d, 0x77, sizeof d);
    CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &ok, NULL), FP8KIT_OK);
    CHECK(status == FP8KIT_OK, "status word %d after a good call", (int)status);
    int changed = 0;
    for (int i = 0; i < 40 * 24; i++)
        changed |= d[i] != 0x7777;
    CHECK(changed, "the good call wrote nothing");

#define BAD(label, want, ...)                                                                         \
    do {                                                                                              \
        fp8kit_grouped_gemm_args x = ok;                                                              \
        fp8kit_gemm_desc dx = desc;                                                                   \
        int32_t ox[3] = {10, 10, 40};                                                                 \
        x.offsets = ox;                                                                               \
        __VA_ARGS__;                                                                                  \
        memset(d, 0x77, sizeof d);                                                                    \
        fp8kit_status st_ = fp8kit_grouped_gemm(ctx, &dx, &x, NULL);                                  \
        CHECK(st_ == (want), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_),           \
              fp8kit_last_error(ctx), fp8kit_status_string(want));                                    \
        int ch_ = 0;                                                                                  \
        for (int i_ = 0; i_ < 40 * 24; i_++)                                                          \
            ch_ |= d[i_] != 0x7777;                                                                   \
        CHECK(!ch_, "%s: D changed on error", label);                                                 \
    } while (0)

    /* bad offsets: the status word says so */
    {
        int32_t ox[3] = {10, 9, 40};
        fp8kit_grouped_gemm_args x = ok;
        x.offsets = ox;
        status = 12345;
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &x, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "status word %d after bad offsets", (int)status);
    }

    CHECK_STATUS(fp8kit_grouped_gemm(NULL, &desc, &ok, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_grouped_gemm(ctx, NULL, &ok, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, NULL, NULL), FP8KIT_ERR_NULL_POINTER);
    BAD("offsets NULL", FP8KIT_ERR_NULL_POINTER, x.offsets = NULL);
    BAD("offsets decreasing", FP8KIT_ERR_INVALID_ARGUMENT, ox[1] = 5);
    BAD("offset past T", FP8KIT_ERR_INVALID_ARGUMENT, ox[2] = 41);
    BAD("offset negative", FP8KIT_ERR_INVALID_ARGUMENT, ox[0] = -1);
    BAD("a NULL", FP8KIT_ERR_NULL_POINTER, x.a.data = NULL);
    BAD("d NULL", FP8KIT_ERR_NULL_POINTER, x.d.data = NULL);
    BAD("b 2-D", FP8KIT_ERR_INVALID_SHAPE, x.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, G * N, K, K));
    BAD("K mismatch", FP8KIT_ERR_INVALID_SHAPE, x.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, T, 16, K));
    BAD("d rows", FP8KIT_ERR_INVALID_SHAPE, x.d = fp8kit_tensor_2d(d, FP8KIT_BF16, T - 1, N, N));
    BAD("d fp8", FP8KIT_ERR_UNSUPPORTED, x.d = fp8kit_tensor_2d(d, FP8KIT_E4M3, T, N, N));
    BAD("a bf16", FP8KIT_ERR_UNSUPPORTED, x.a = fp8kit_tensor_2d(d, FP8KIT_BF16, T, K, K));
    BAD("scale_b count", FP8KIT_ERR_INVALID_SHAPE, x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &tt));
    BAD("scale_a count", FP8KIT_ERR_INVALID_SHAPE, x.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &gn[1]));
    BAD("scale_b dtype", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_b.dtype = FP8KIT_BF16);
    BAD("bias count", FP8KIT_ERR_INVALID_SHAPE, x.bias = fp8kit_tensor_make(bias, FP8KIT_F32, 1, &gn[1]));
    BAD("bias fp8", FP8KIT_ERR_INVALID_ARGUMENT, x.bias.dtype = FP8KIT_E4M3);
    BAD("block scale_a count", FP8KIT_ERR_INVALID_SHAPE, dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK;
        x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &G); /* right: G x 1 x 1 for N 24, K 32 */
        x.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &gn[1]));
    BAD("block scale_b count", FP8KIT_ERR_INVALID_SHAPE, dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK;
        x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, gn));
    BAD("block mn_major", FP8KIT_ERR_UNSUPPORTED, dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK;
        dx.scale_layout = FP8KIT_LAYOUT_MN_MAJOR; x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &G));
    BAD("layout out of enum", FP8KIT_ERR_INVALID_ARGUMENT, x.layout = (fp8kit_grouped_layout)7);
    BAD("masked with 2-D a", FP8KIT_ERR_INVALID_SHAPE, x.layout = FP8KIT_GROUPED_MASKED);
    BAD("mx scales", FP8KIT_ERR_UNSUPPORTED, dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
    BAD("output quantization", FP8KIT_ERR_UNSUPPORTED, dx.out_quant = FP8KIT_OUTQ_SCALED);
    BAD("row bias", FP8KIT_ERR_UNSUPPORTED, dx.bias = FP8KIT_BIAS_ROW);
    BAD("act out of enum", FP8KIT_ERR_INVALID_ARGUMENT, dx.act = (fp8kit_activation)99);
    BAD("b stride", FP8KIT_ERR_INVALID_STRIDE, x.b.strides[2] = 2);
    BAD("a inner stride", FP8KIT_ERR_INVALID_STRIDE, x.a.strides[0] = 2 * K; x.a.strides[1] = 2);
    {   /* masked: (G, M, K) slabs with counts; M = T / G */
        int64_t ms[3] = {G, T / G - 1, K}, md[3] = {G, T / G - 1, N};
        fp8kit_grouped_gemm_args m = ok;
        m.layout = FP8KIT_GROUPED_MASKED;
        m.a = fp8kit_tensor_make(a, FP8KIT_E4M3, 3, ms);
        m.d = fp8kit_tensor_make(d, FP8KIT_BF16, 3, md);
        int64_t tm = G * ms[1];
        m.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &tm);
        int32_t cnt[3] = {0, 12, 12};
        m.offsets = cnt;
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_OK);
        cnt[1] = 13; /* > M = 12 */
        status = 12345;
        m.status = &status;
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
        CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "masked: status word %d after a count > M", (int)status);
        cnt[1] = -1;
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_ERR_INVALID_ARGUMENT);
        cnt[1] = 3;
        m.a.strides[0] = 13 * K, m.a.strides[1] = K, m.a.strides[2] = 1; /* slabs not M rows apart */
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_ERR_INVALID_STRIDE);
        m.a.strides[0] = 0, m.a.strides[1] = 0, m.a.strides[2] = 0;
        m.d.shape[1] = 11; /* d's M disagrees */
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_ERR_INVALID_SHAPE);
        m.d.shape[1] = 12;
        tm = G * 12 - 1; /* row scales one short of G x M */
        m.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &tm);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_ERR_INVALID_SHAPE);
    }
    BAD("overflowing shape", FP8KIT_ERR_SIZE_OVERFLOW, x.d.shape[0] = INT64_MAX / 2; x.d.shape[1] = INT64_MAX / 2);
    free(a);
    free(b);
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_grouped");
    fp8kit_ctx *ctx = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "no CPU context\n");
        return 1;
    }
    const gcase cases[] = {
        {"row row bias gelu bf16", 300, 72, 96, 8, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_GELU_TANH, 0, 0, 0},
        {"tensor f32 padded", 130, 40, 64, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_ACT_NONE, 16, 0, 0},
        {"none e5m2 silu f16", 77, 33, 48, 4, FP8KIT_E5M2, FP8KIT_E4M3, FP8KIT_F16, FP8KIT_F32,
         FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, 1, FP8KIT_ACT_SILU, 0, 0, 0},
        {"tensor x row relu, one group", 64, 48, 32, 6, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_BF16, FP8KIT_F16,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_RELU, 0, 1, 0},
        {"row x tensor erf, short", 90, 20, 160, 7, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_TENSOR, 1, FP8KIT_ACT_GELU_ERF, 8, 2, 0},
        {"single expert", 50, 64, 64, 1, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0, FP8KIT_ACT_NONE, 0, 0, 0},
        {"block bf16, K 300 N 200", 260, 200, 300, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_SILU, 0, 0, 0},
        {"block e5m2 f32 padded", 140, 136, 256, 3, FP8KIT_E5M2, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_ACT_NONE, 16, 2, 0},
        {"block, one group", 129, 64, 128, 4, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F16, FP8KIT_F32,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_GELU_TANH, 0, 1, 0},
        {"masked row bias gelu", 70, 72, 96, 6, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_GELU_TANH, 0, 0, 1},
        {"masked block padded", 130, 160, 384, 4, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_ACT_NONE, 16, 2, 1},
        {"masked tensor, last full", 40, 48, 64, 5, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_ACT_RELU, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], &rng, ctx);
    bad_inputs(ctx);
    fp8kit_ctx_destroy(ctx);

    /* a CUDA context refuses zeroed arguments on the host (when a device exists) */
    fp8kit_ctx *cu = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &cu) == FP8KIT_OK) {
        fp8kit_gemm_desc desc;
        memset(&desc, 0, sizeof desc);
        fp8kit_grouped_gemm_args ga;
        memset(&ga, 0, sizeof ga);
        CHECK_STATUS(fp8kit_grouped_gemm(cu, &desc, &ga, NULL), FP8KIT_ERR_NULL_POINTER);
        fp8kit_ctx_destroy(cu);
    }
    return fk_test_summary("test_grouped");
}
