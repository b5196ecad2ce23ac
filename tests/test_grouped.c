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
 * on the host. MX scales (e8m0 per 32 of K, plain layout; both layouts, K 32
 * to 320, G 1 / 3 / 8, empty first / middle / last groups, scale bytes 0 and
 * NaN): each group must equal bit for bit a plain fp8kit_gemm (MX) of its own
 * rows, scales, expert and bias copied into fresh buffers (the CPU backend is
 * deterministic), and meet the fp64 oracle's bound (fk_ref_gemm on those
 * copies); the same call given a workspace writes the same bytes; the MX and
 * workspace rules' bad inputs (blocked layout, K % 32, non-e8m0 scales, scale
 * counts, a misaligned workspace or one overlapping any operand) and
 * fp8kit_grouped_gemm_workspace_size (0 on the CPU, placeholder pointers, the
 * call's statuses). A sweep of the space (odd M, N and K from 1, one and
 * three experts, empty groups, masked counts of 0 and M, every scale mode)
 * checks the same bounds. */
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
    int mn;                     /* block: A's scales in the mn_major layout (the reference reads the plain copy) */
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
    /* mn_major: the call reads that copy; the reference below the plain scales */
    float *sa_mn = NULL;
    fp8kit_gemm_desc cdesc = desc;
    fp8kit_grouped_gemm_args cga = ga;
    if (block && c->mn) {
        int64_t n_mn;
        sa_mn = fk_t_mn_major(sa, T, kb, c->masked ? G : 1, &n_mn);
        cdesc.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
        cga.scale_a = fp8kit_tensor_make(sa_mn, FP8KIT_F32, 1, &n_mn);
    }
    fp8kit_status st = fp8kit_grouped_gemm(ctx, &cdesc, &cga, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(ctx));
    if (sa_mn) { /* the same bytes as the plain layout's call (the CPU backend is deterministic) */
        void *d2 = malloc(dsz * (size_t)(T * ldd));
        memset(d2, 0x5A, dsz * (size_t)(T * ldd));
        fp8kit_grouped_gemm_args pga = ga;
        pga.d.data = d2;
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &pga, NULL), FP8KIT_OK);
        CHECK(!memcmp(d, d2, dsz * (size_t)(T * ldd)), "%s: mn_major and plain A scales wrote different bytes",
              c->name);
        free(d2);
        free(sa_mn);
    }

    /* the fp64 reference over the grouped rows; untouched bytes elsewhere */
    double *ref = malloc(sizeof(double) * (size_t)(T * N + 1));
    const int rst = fk_ref_grouped_gemm(&desc, &ga, ref);
    CHECK(rst == FK_REF_OK, "%s: the fp64 reference refused the case (%d)", c->name, rst);
    /* The magnitude of the products: the reference of |A| |B| (+ |bias|, no
     * activation). Where the sums cancel (D far smaller than that), fp32
     * accumulation error is bounded against it, not against D. */
    double *ref_abs = malloc(sizeof(double) * (size_t)(T * N + 1));
    {
        uint8_t *aa = malloc((size_t)(T * lda)), *ba = malloc((size_t)(G * N * ldb));
        void *biasa = malloc(bsz * (size_t)(G * N));
        for (int64_t i = 0; i < T * lda; i++)
            aa[i] = a[i] & 0x7F;
        for (int64_t i = 0; i < G * N * ldb; i++)
            ba[i] = b[i] & 0x7F;
        for (int64_t i = 0; i < G * N; i++)
            store_hp(biasa, i, c->biast, (float)fabs(load_hp(bias, i, c->biast)));
        fp8kit_gemm_desc da = desc;
        da.act = FP8KIT_ACT_NONE;
        fp8kit_grouped_gemm_args gabs = ga;
        gabs.a.data = aa;
        gabs.b.data = ba;
        if (c->bias)
            gabs.bias.data = biasa;
        CHECK(fk_ref_grouped_gemm(&da, &gabs, ref_abs) == FK_REF_OK, "%s: the |A| |B| reference refused", c->name);
        free(aa); free(ba); free(biasa);
    }
    double abs2 = 0.0;
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
            if (isfinite(ref_abs[m * N + n]))
                abs2 += ref_abs[m * N + n] * ref_abs[m * N + n];
        }
    }
    /* (relative to the dtype's normal range at least: test_util.h; and to
     * |A| |B| / (2 sqrt(K)), which random sums of K products exceed about
     * 1.6 times and only cancelling ones fall below) */
    const double rel = fk_t_rel_floor(norm.err2, fmax(norm.ref2, abs2 / (4.0 * (double)K)), norm.count, c->dt);
    const double bound = fk_ref_bound(c->dt, K);
    CHECK(rel <= bound, "%s: rel %.3g > %.3g", c->name, rel, bound);
    CHECK(!norm.nan_extra, "%s: NaN where the reference has none", c->name);
    CHECK(!norm.nan_missing, "%s: a number where the reference is NaN", c->name);
    CHECK(!touched, "%s: rows no group owns were written", c->name);
    printf("  %-28s T %4lld N %4lld K %4lld G %3lld used %4lld  rel %.2e\n", c->name, (long long)T, (long long)N,
           (long long)K, (long long)G, (long long)used, rel);
    free(a); free(b); free(sa); free(sb); free(bias); free(off); free(d); free(ref); free(ref_abs);
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
    /* mn_major A scales over T = 40 rows, K 32: 1 x 40 (40 is the plain count too; 39 is neither) */
    BAD("block mn_major scale_a count", FP8KIT_ERR_INVALID_SHAPE, dx.scale_a = dx.scale_b = FP8KIT_SCALE_BLOCK;
        dx.scale_layout = FP8KIT_LAYOUT_MN_MAJOR; x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &G);
        int64_t n39 = 39; x.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &n39));
    BAD("mn_major with row scales", FP8KIT_ERR_UNSUPPORTED, dx.scale_layout = FP8KIT_LAYOUT_MN_MAJOR);
    BAD("mx mn_major", FP8KIT_ERR_UNSUPPORTED, dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX;
        dx.scale_layout = FP8KIT_LAYOUT_MN_MAJOR);
    BAD("layout out of enum", FP8KIT_ERR_INVALID_ARGUMENT, x.layout = (fp8kit_grouped_layout)7);
    BAD("masked with 2-D a", FP8KIT_ERR_INVALID_SHAPE, x.layout = FP8KIT_GROUPED_MASKED);
    /* mx over these f32 tensors: T x K/32 = 40 and G x N x K/32 = 72 elements, the wrong dtype */
    BAD("mx with f32 scales", FP8KIT_ERR_INVALID_ARGUMENT, dx.scale_a = dx.scale_b = FP8KIT_SCALE_MX);
    BAD("output quantization into bf16 D", FP8KIT_ERR_UNSUPPORTED, dx.out_quant = FP8KIT_OUTQ_SCALED);
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

/* ------------------------------------------------------------------ MX */
/* Which groups of an MX case are empty: none forced (random cuts / counts),
 * the first, the last, one in the middle; MX_SHORT (contiguous): the last
 * offset below T, the rows past it owned by no group. */
enum { MX_RANDOM = 0, MX_FIRST = 1, MX_LAST = 2, MX_MIDDLE = 3, MX_SHORT = 4 };

typedef struct mxcase {
    const char *name;
    int64_t t, n, k, g;        /* masked: t is M, the rows of each expert's slab */
    fp8kit_dtype at, bt, dt, biast;
    int bias, act, pad, masked;
    int empty;                 /* MX_* */
    int edge;                  /* scale bytes 0 (2^-127) and 255 (NaN) among the others */
    int sdim;                  /* scales as (T, K/32) or (G, M, K/32), and (G, N, K/32); else 1-D */
} mxcase;

/* G offsets of an MX case: row ends (contiguous) or counts (masked). */
static void mx_offsets(const mxcase *c, fk_rng *r, int32_t *off)
{
    const int64_t G = c->g, T = c->t;
    for (int64_t i = 0; i < G; i++)
        off[i] = (int32_t)(fk_rng_u32(r) % (uint32_t)(T + 1));
    if (c->masked) { /* one full slab, not the one emptied below */
        const int64_t emptied = c->empty == MX_FIRST    ? 0
                                : c->empty == MX_LAST   ? G - 1
                                : c->empty == MX_MIDDLE ? G / 2
                                                        : -1;
        int64_t full = (int64_t)(fk_rng_u32(r) % (uint32_t)G);
        if (full == emptied && G > 1)
            full = (full + 1) % G;
        off[full] = (int32_t)T;
    } else {
        for (int64_t i = 1; i < G; i++)
            for (int64_t j = i; j > 0 && off[j - 1] > off[j]; j--) {
                int32_t x = off[j];
                off[j] = off[j - 1];
                off[j - 1] = x;
            }
        off[G - 1] = (int32_t)T;
        if (c->empty == MX_SHORT) { /* the last end 1 .. T/3 rows short of T */
            off[G - 1] = (int32_t)(T - 1 - (int64_t)(fk_rng_u32(r) % (uint32_t)(T / 3 + 1)));
            for (int64_t i = 0; i < G - 1; i++)
                if (off[i] > off[G - 1])
                    off[i] = off[G - 1];
        }
    }
    if (c->empty == MX_FIRST)
        off[0] = 0;
    if (c->empty == MX_LAST && c->masked)
        off[G - 1] = 0;
    else if (c->empty == MX_LAST) /* the one before ends at T */
        off[G - 2] = (int32_t)T;
    if (c->empty == MX_MIDDLE) /* contiguous: ends where the one before ends */
        off[G / 2] = c->masked ? 0 : off[G / 2 - 1];
}

/* Rows [*r0, *r1) of A and D that group i owns. */
static void mx_rows(const mxcase *c, const int32_t *off, int64_t i, int64_t *r0, int64_t *r1)
{
    *r0 = c->masked ? i * c->t : i ? off[i - 1] : 0;
    *r1 = c->masked ? *r0 + off[i] : off[i];
}

static void run_mx_case(const mxcase *c, fk_rng *r, fp8kit_ctx *ctx)
{
    const int64_t N = c->n, K = c->k, G = c->g, kbs = K / 32;
    const int64_t T = c->masked ? G * c->t : c->t;
    const int64_t lda = K + c->pad, ldb = K + c->pad, ldd = N + c->pad;
    const int64_t brows = N + (c->pad ? 3 : 0); /* rows from one expert to the next (padding: NaN codes) */
    const int e5a = c->at == FP8KIT_E5M2, e5b = c->bt == FP8KIT_E5M2;
    const size_t bsz = fp8kit_dtype_size(c->biast), dsz = fp8kit_dtype_size(c->dt);
    int32_t *off = malloc(sizeof(int32_t) * (size_t)G);
    mx_offsets(c, r, off);
    /* owner[m]: the group of row m, or -1 */
    int64_t *owner = malloc(sizeof(int64_t) * (size_t)T);
    for (int64_t m = 0; m < T; m++)
        owner[m] = -1;
    for (int64_t i = 0; i < G; i++) {
        int64_t r0, r1;
        mx_rows(c, off, i, &r0, &r1);
        for (int64_t m = r0; m < r1; m++)
            owner[m] = i;
    }
    /* codes; padding columns, B's padding rows and the rows no group owns
     * are NaN codes with NaN scales: read by mistake, they show */
    uint8_t *a = malloc((size_t)(T * lda)), *b = malloc((size_t)(G * brows * ldb));
    memset(a, 0x7F, (size_t)(T * lda));
    memset(b, 0x7F, (size_t)(G * brows * ldb));
    for (int64_t m = 0; m < T; m++)
        for (int64_t k = 0; k < K && owner[m] >= 0; k++)
            a[m * lda + k] = fk_f32_to_fp8((float)(fk_rng_normal(r) * 8.0), e5a);
    for (int64_t e = 0; e < G; e++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++)
                b[(e * brows + n) * ldb + k] = fk_f32_to_fp8((float)(fk_rng_normal(r) * 8.0), e5b);
    /* scale bytes 116 .. 127 (2^-11 .. 2^0), independent per 32 of K; edge:
     * one in 16 is 0 (2^-127, an fp32 subnormal), one in 64 is 255 (NaN) */
    uint8_t *sa = malloc((size_t)(T * kbs)), *sb = malloc((size_t)(G * N * kbs));
    for (int64_t i = 0; i < T * kbs + G * N * kbs; i++) {
        const uint32_t u = fk_rng_u32(r);
        uint8_t v = (uint8_t)(116 + u % 12);
        if (c->edge && (u >> 8) % 16 == 0)
            v = 0;
        if (c->edge && (u >> 16) % 64 == 0)
            v = 255;
        if (i < T * kbs)
            sa[i] = owner[i / kbs] >= 0 ? v : 255;
        else
            sb[i - T * kbs] = v;
    }
    void *bias = malloc(bsz * (size_t)(G * N));
    for (int64_t i = 0; i < G * N; i++)
        store_hp(bias, i, c->biast, (float)fk_rng_normal(r));
    const size_t dbytes = dsz * (size_t)(T * ldd);
    unsigned char *d = malloc(dbytes), *dw = malloc(dbytes);
    memset(d, 0x5A, dbytes);
    memset(dw, 0x5A, dbytes);

    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = FP8KIT_SCALE_MX;
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
    ga.b.strides[0] = brows * ldb, ga.b.strides[1] = ldb, ga.b.strides[2] = 1;
    ga.offsets = off;
    const int64_t nsa = T * kbs, nsb = G * N * kbs;
    if (c->sdim && c->masked) {
        int64_t s3[3] = {G, c->t, kbs};
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 3, s3);
    } else if (c->sdim) {
        int64_t s2[2] = {T, kbs};
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 2, s2);
    } else {
        ga.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 1, &nsa);
    }
    if (c->sdim) {
        int64_t s3[3] = {G, N, kbs};
        ga.scale_b = fp8kit_tensor_make(sb, FP8KIT_E8M0, 3, s3);
    } else {
        ga.scale_b = fp8kit_tensor_make(sb, FP8KIT_E8M0, 1, &nsb);
    }
    int64_t gn[2] = {G, N};
    if (c->bias)
        ga.bias = fp8kit_tensor_make(bias, c->biast, 2, gn);
    ga.alpha = 0.75f;
    int32_t status = 12345;
    ga.status = &status;
    fp8kit_status st = fp8kit_grouped_gemm(ctx, &desc, &ga, NULL);
    CHECK(st == FP8KIT_OK, "%s: %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(ctx));
    CHECK(status == FP8KIT_OK, "%s: status word %d after valid offsets", c->name, (int)status);
    /* the workspace query says 0 on the CPU; a call given a workspace anyway
     * computes the same bytes */
    size_t wsb = 777;
    st = fp8kit_grouped_gemm_workspace_size(ctx, &desc, &ga, &wsb);
    CHECK(st == FP8KIT_OK && wsb == 0, "%s: workspace size %s (%s), %zu bytes; want 0", c->name,
          fp8kit_status_string(st), fp8kit_last_error(ctx), wsb);
    {
        fp8kit_grouped_gemm_args gw = ga;
        void *ws = aligned_alloc(64, 4096);
        memset(ws, 0xA5, 4096);
        gw.d.data = dw;
        gw.workspace = ws;
        gw.workspace_bytes = 4096;
        st = fp8kit_grouped_gemm(ctx, &desc, &gw, NULL);
        CHECK(st == FP8KIT_OK, "%s (workspace): %s (%s)", c->name, fp8kit_status_string(st), fp8kit_last_error(ctx));
        CHECK(memcmp(d, dw, dbytes) == 0, "%s: D with a workspace differs from D without", c->name);
        free(ws);
    }

    /* each group again: its operands copied into fresh contiguous buffers,
     * one fp8kit_gemm (MX) - the same bytes - and the fp64 oracle on them */
    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    int64_t used = 0, rows_differ = 0, nonempty = 0;
    for (int64_t i = 0; i < G; i++) {
        int64_t r0, r1;
        mx_rows(c, off, i, &r0, &r1);
        const int64_t rows = r1 - r0;
        if (rows == 0)
            continue;
        nonempty++;
        used += rows;
        uint8_t *fa = malloc((size_t)(rows * K)), *fb = malloc((size_t)(N * K));
        uint8_t *fsa = malloc((size_t)(rows * kbs)), *fsb = malloc((size_t)(N * kbs));
        void *fbias = malloc(bsz * (size_t)N), *fd = malloc(dsz * (size_t)(rows * N));
        double *ref = malloc(sizeof(double) * (size_t)(rows * N));
        for (int64_t m = 0; m < rows; m++)
            memcpy(fa + m * K, a + (r0 + m) * lda, (size_t)K);
        for (int64_t n = 0; n < N; n++)
            memcpy(fb + n * K, b + (i * brows + n) * ldb, (size_t)K);
        memcpy(fsa, sa + r0 * kbs, (size_t)(rows * kbs));
        memcpy(fsb, sb + i * N * kbs, (size_t)(N * kbs));
        memcpy(fbias, (char *)bias + (size_t)(i * N) * bsz, bsz * (size_t)N);
        memset(fd, 0x33, dsz * (size_t)(rows * N));
        fp8kit_gemm_args fg;
        memset(&fg, 0, sizeof fg);
        fg.a = fp8kit_tensor_2d(fa, c->at, rows, K, K);
        fg.b = fp8kit_tensor_2d(fb, c->bt, N, K, K);
        const int64_t fna = rows * kbs, fnb = N * kbs;
        fg.scale_a = fp8kit_tensor_make(fsa, FP8KIT_E8M0, 1, &fna);
        fg.scale_b = fp8kit_tensor_make(fsb, FP8KIT_E8M0, 1, &fnb);
        if (c->bias)
            fg.bias = fp8kit_tensor_make(fbias, c->biast, 1, &N);
        fg.alpha = 0.75f;
        fg.d = fp8kit_tensor_2d(fd, c->dt, rows, N, N);
        st = fp8kit_gemm(ctx, &desc, &fg, NULL);
        CHECK(st == FP8KIT_OK, "%s: group %lld's fp8kit_gemm: %s (%s)", c->name, (long long)i,
              fp8kit_status_string(st), fp8kit_last_error(ctx));
        const int rst = fk_ref_gemm(&desc, &fg, NULL, rows, ref);
        CHECK(rst == FK_REF_OK, "%s: the fp64 reference refused group %lld (%d)", c->name, (long long)i, rst);
        for (int64_t m = 0; m < rows; m++) {
            const unsigned char *row = d + (size_t)((r0 + m) * ldd) * dsz;
            if (memcmp(row, (unsigned char *)fd + (size_t)(m * N) * dsz, dsz * (size_t)N) && rows_differ++ < 3)
                fprintf(stderr, "  %s: row %lld (group %lld, its row %lld) differs from fp8kit_gemm's\n", c->name,
                        (long long)(r0 + m), (long long)i, (long long)m);
            for (int64_t n = 0; n < N && rst == FK_REF_OK; n++)
                fk_ref_norm_add(&norm, load_hp(d, (r0 + m) * ldd + n, c->dt), ref[m * N + n]);
        }
        free(fa); free(fb); free(fsa); free(fsb); free(fbias); free(fd); free(ref);
    }
    /* bytes no group owns: rows of no group, D's padding columns */
    int64_t touched = 0;
    for (int64_t m = 0; m < T; m++)
        for (int64_t q = owner[m] >= 0 ? N * (int64_t)dsz : 0; q < ldd * (int64_t)dsz; q++)
            touched += d[(size_t)(m * ldd) * dsz + (size_t)q] != 0x5A;
    const double rel = fk_ref_norm_rel(&norm), bound = fk_ref_bound(c->dt, K);
    CHECK(rows_differ == 0, "%s: %lld rows differ from fp8kit_gemm on the group's own copies", c->name,
          (long long)rows_differ);
    CHECK(touched == 0, "%s: %lld bytes no group owns were written", c->name, (long long)touched);
    CHECK(rel <= bound, "%s: rel %.3g > %.3g against the fp64 reference", c->name, rel, bound);
    CHECK(!norm.nan_extra, "%s: %lld NaN where the reference has none", c->name, (long long)norm.nan_extra);
    CHECK(!norm.nan_missing, "%s: %lld numbers where the reference is NaN", c->name, (long long)norm.nan_missing);
    CHECK(norm.count > 0 && norm.ref2 > 0, "%s: nothing compared", c->name);
    printf("  %-34s T %4lld N %4lld K %4lld G %2lld groups %2lld used %4lld  bit-exact, rel %.2e\n", c->name,
           (long long)T, (long long)N, (long long)K, (long long)G, (long long)nonempty, (long long)used, rel);
    free(off); free(owner); free(a); free(b); free(sa); free(sb); free(bias); free(d); free(dw);
}

/* MX bad inputs (status and D unchanged), the workspace's rules and the
 * workspace-size query. */
static void mx_bad_inputs(fp8kit_ctx *ctx)
{
    enum { T = 40, N = 24, K = 64, G = 3, KB = K / 32 };
    const size_t dbytes = sizeof(uint16_t) * T * N;
    uint8_t *a = aligned_alloc(64, T * K), *b = aligned_alloc(64, G * N * K);
    uint8_t *sa = aligned_alloc(64, 256), *sb = aligned_alloc(64, 256);
    uint16_t *d = aligned_alloc(64, dbytes + 256); /* room past D for a workspace right behind it */
    unsigned char *ws = aligned_alloc(64, 1024);
    int32_t *words = aligned_alloc(64, 64); /* offsets [0..2], status [8] */
    float bias[G * N];
    for (int i = 0; i < T * K; i++) a[i] = (uint8_t)(0x30 + i % 13);
    for (int i = 0; i < G * N * K; i++) b[i] = (uint8_t)(0x2C + i % 7);
    for (int i = 0; i < 256; i++) sa[i] = (uint8_t)(125 + i % 4), sb[i] = (uint8_t)(126 - i % 3);
    for (int i = 0; i < G * N; i++) bias[i] = 0.25f * (float)(i % 5);
    int32_t *off = words, *status = words + 8;
    off[0] = 10, off[1] = 10, off[2] = 40;
    fp8kit_gemm_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.scale_a = desc.scale_b = FP8KIT_SCALE_MX;
    desc.bias = FP8KIT_BIAS_COL;
    desc.act = FP8KIT_ACT_SILU;
    fp8kit_grouped_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    int64_t bs[3] = {G, N, K}, gn[2] = {G, N}, nsa = T * KB, nsb = G * N * KB, sa2[2] = {T, KB};
    ok.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, T, K, K);
    ok.b = fp8kit_tensor_make(b, FP8KIT_E4M3, 3, bs);
    ok.offsets = off;
    ok.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 2, sa2);
    ok.scale_b = fp8kit_tensor_make(sb, FP8KIT_E8M0, 1, &nsb);
    ok.bias = fp8kit_tensor_make(bias, FP8KIT_F32, 2, gn);
    ok.alpha = 1.0f;
    ok.d = fp8kit_tensor_2d(d, FP8KIT_BF16, T, N, N);
    ok.status = status;
    *status = 12345;
    memset(d, 0x77, dbytes);
    CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &ok, NULL), FP8KIT_OK);
    CHECK(*status == FP8KIT_OK, "mx: status word %d after a good call", (int)*status);
    uint16_t *want = malloc(dbytes);
    memcpy(want, d, dbytes);
    int changed = 0;
    for (int i = 0; i < T * N; i++)
        changed |= d[i] != 0x7777;
    CHECK(changed, "mx: the good call wrote nothing");
    /* a workspace: anywhere it overlaps nothing, right behind D included */
    {
        fp8kit_grouped_gemm_args x = ok;
        x.workspace = ws, x.workspace_bytes = 1024;
        memset(d, 0x77, dbytes);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &x, NULL), FP8KIT_OK);
        CHECK(memcmp(d, want, dbytes) == 0, "mx: D with a workspace differs");
        x.workspace = (char *)d + dbytes, x.workspace_bytes = 256; /* dbytes is a multiple of 16 */
        memset(d, 0x77, dbytes);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &x, NULL), FP8KIT_OK);
        CHECK(memcmp(d, want, dbytes) == 0, "mx: D with the workspace right behind it differs");
        x.workspace = ws + 16, x.workspace_bytes = 0; /* no bytes: overlaps nothing */
        memset(d, 0x77, dbytes);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &x, NULL), FP8KIT_OK);
        CHECK(memcmp(d, want, dbytes) == 0, "mx: D with an empty workspace differs");
    }

    /* label, status, a word the message names, then the changes; the
     * status word stays as it was (want_word) but for bad offsets */
    int32_t want_word = 12345;
#define MXBAD(label, want_st, word, ...)                                                              \
    do {                                                                                              \
        fp8kit_grouped_gemm_args x = ok;                                                              \
        fp8kit_gemm_desc dx = desc;                                                                   \
        __VA_ARGS__;                                                                                  \
        memset(d, 0x77, dbytes);                                                                      \
        *status = 12345;                                                                              \
        fp8kit_status st_ = fp8kit_grouped_gemm(ctx, &dx, &x, NULL);                                  \
        const char *msg_ = fp8kit_last_error(ctx);                                                    \
        CHECK(st_ == (want_st), "%s: got %s (%s), want %s", label, fp8kit_status_string(st_), msg_,   \
              fp8kit_status_string(want_st));                                                         \
        CHECK(strstr(msg_, word) != NULL, "%s: the message \"%s\" does not name %s", label, msg_, word); \
        int ch_ = 0;                                                                                  \
        for (int i_ = 0; i_ < T * N; i_++)                                                            \
            ch_ |= d[i_] != 0x7777;                                                                   \
        CHECK(!ch_, "%s: D changed on error", label);                                                 \
        CHECK(*status == want_word, "%s: status word %d, want %d", label, (int)*status, (int)want_word); \
    } while (0)

    MXBAD("mx blocked layout", FP8KIT_ERR_UNSUPPORTED, "plain", dx.scale_layout = FP8KIT_LAYOUT_BLOCKED);
    MXBAD("mx mn_major layout", FP8KIT_ERR_UNSUPPORTED, "mn_major", dx.scale_layout = FP8KIT_LAYOUT_MN_MAJOR);
    MXBAD("mx on A only", FP8KIT_ERR_UNSUPPORTED, "both", dx.scale_b = FP8KIT_SCALE_ROW);
    MXBAD("mx output quantization", FP8KIT_ERR_UNSUPPORTED, "quantization", dx.out_quant = FP8KIT_OUTQ_SCALED);
    MXBAD("mx K = 48", FP8KIT_ERR_INVALID_SHAPE, "48", x.a.shape[1] = 48; x.b.shape[2] = 48);
    MXBAD("mx K = 16", FP8KIT_ERR_INVALID_SHAPE, "16", x.a.shape[1] = 16; x.b.shape[2] = 16;
          x.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 1, &gn[1]));
    MXBAD("mx scale_a f32", FP8KIT_ERR_INVALID_ARGUMENT, "e8m0", x.scale_a.dtype = FP8KIT_F32;
          x.scale_a.shape[0] = T / 4); /* the same 80 bytes as f32 */
    MXBAD("mx scale_b f32", FP8KIT_ERR_INVALID_ARGUMENT, "e8m0", x.scale_b.dtype = FP8KIT_F32);
    MXBAD("mx scale_a bf16", FP8KIT_ERR_INVALID_ARGUMENT, "e8m0", x.scale_a.dtype = FP8KIT_BF16);
    MXBAD("mx scale_a one short", FP8KIT_ERR_INVALID_SHAPE, "scale_a", x.scale_a.shape[0] = T - 1);
    MXBAD("mx scale_a per 128 of K", FP8KIT_ERR_INVALID_SHAPE, "scale_a",
          x.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 1, &sa2[0]));
    MXBAD("mx scale_b one expert", FP8KIT_ERR_INVALID_SHAPE, "scale_b", nsb = N * KB;
          x.scale_b = fp8kit_tensor_make(sb, FP8KIT_E8M0, 1, &nsb));
    nsb = G * N * KB;
    MXBAD("mx scale_b one too many", FP8KIT_ERR_INVALID_SHAPE, "scale_b", nsb = G * N * KB + 1;
          x.scale_b = fp8kit_tensor_make(sb, FP8KIT_E8M0, 1, &nsb));
    nsb = G * N * KB;
    MXBAD("mx scale_a strided", FP8KIT_ERR_INVALID_STRIDE, "scale_a", x.scale_a.shape[0] = T / 2;
          x.scale_a.shape[1] = 2 * KB; x.scale_a.strides[0] = 2 * KB + 1; x.scale_a.strides[1] = 1);
    MXBAD("mx scale_a NULL", FP8KIT_ERR_NULL_POINTER, "scale_a", x.scale_a.data = NULL);
    MXBAD("mx scale_b NULL", FP8KIT_ERR_NULL_POINTER, "scale_b", x.scale_b.data = NULL);
    want_word = FP8KIT_ERR_INVALID_ARGUMENT; /* the offsets' verdict */
    MXBAD("mx bad offsets", FP8KIT_ERR_INVALID_ARGUMENT, "offsets", off[1] = 5);
    off[1] = 10;
    MXBAD("mx offset past T", FP8KIT_ERR_INVALID_ARGUMENT, "offsets", off[2] = T + 1);
    off[2] = T;
    want_word = 12345;
    MXBAD("workspace misaligned", FP8KIT_ERR_MISALIGNED, "workspace", x.workspace = ws + 8; x.workspace_bytes = 64);
    MXBAD("workspace misaligned, no bytes", FP8KIT_ERR_MISALIGNED, "workspace", x.workspace = ws + 4);
    MXBAD("workspace over d", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = d; x.workspace_bytes = 16);
    MXBAD("workspace into d's end", FP8KIT_ERR_INVALID_ARGUMENT, "workspace",
          x.workspace = (char *)d + dbytes - 16; x.workspace_bytes = 256);
    MXBAD("workspace around d", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = d;
          x.workspace_bytes = dbytes + 256);
    MXBAD("workspace over a", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = a + 1024; x.workspace_bytes = 32);
    MXBAD("workspace over b", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = b; x.workspace_bytes = 4096);
    MXBAD("workspace over scale_a", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = sa + 64;
          x.workspace_bytes = 16);
    MXBAD("workspace over scale_b", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = sb;
          x.workspace_bytes = 1024);
    MXBAD("workspace over offsets", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = words;
          x.workspace_bytes = 16);
    MXBAD("workspace over status", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.workspace = words + 8;
          x.workspace_bytes = 16);
    MXBAD("workspace over bias", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x.bias.data = ws + 512;
          x.workspace = ws; x.workspace_bytes = 1024);
    /* masked: A's scales over G x M rows (M = 12: 36 x 2, not 40 x 2) */
    {
        int64_t ms[3] = {G, 12, K}, md[3] = {G, 12, N}, s3[3] = {G, 12, KB}, tm = G * 12 * KB;
        fp8kit_grouped_gemm_args m = ok;
        m.layout = FP8KIT_GROUPED_MASKED;
        m.a = fp8kit_tensor_make(a, FP8KIT_E4M3, 3, ms);
        m.d = fp8kit_tensor_make(d, FP8KIT_BF16, 3, md);
        m.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 3, s3);
        off[0] = 0, off[1] = 12, off[2] = 7;
        memset(d, 0x77, dbytes);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_OK);
        m.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 1, &tm);
        CHECK_STATUS(fp8kit_grouped_gemm(ctx, &desc, &m, NULL), FP8KIT_OK);
        MXBAD("mx masked scale_a over T = 40 rows", FP8KIT_ERR_INVALID_SHAPE, "scale_a", x = m;
              x.scale_a = fp8kit_tensor_make(sa, FP8KIT_E8M0, 1, &nsa));
        want_word = FP8KIT_ERR_INVALID_ARGUMENT;
        MXBAD("mx masked count > M", FP8KIT_ERR_INVALID_ARGUMENT, "offsets", x = m; off[2] = 13);
        want_word = 12345;
        off[2] = 7;
        MXBAD("mx masked workspace over d", FP8KIT_ERR_INVALID_ARGUMENT, "workspace", x = m;
              x.workspace = (char *)d + 1024; x.workspace_bytes = 16);
        off[0] = 10, off[1] = 10, off[2] = 40;
    }

    /* the workspace-size query: 0 on the CPU; the call's checks but for the
     * pointers, which may be placeholders (never read: offsets included) */
    size_t bytes = 777;
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(ctx, &desc, &ok, &bytes), FP8KIT_OK);
    CHECK(bytes == 0, "mx: the CPU's workspace is %zu bytes, want 0", bytes);
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(ctx, &desc, &ok, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK(strstr(fp8kit_last_error(ctx), "bytes") != NULL, "workspace size, NULL bytes: message \"%s\"",
          fp8kit_last_error(ctx));
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(NULL, &desc, &ok, &bytes), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(ctx, NULL, &ok, &bytes), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(ctx, &desc, NULL, &bytes), FP8KIT_ERR_NULL_POINTER);
    {
        void *ph = (void *)(uintptr_t)0x1000; /* placeholder: 16-byte aligned, never dereferenced */
        fp8kit_grouped_gemm_args x = ok;
        x.a.data = x.b.data = x.scale_a.data = x.scale_b.data = x.bias.data = x.d.data = ph;
        x.offsets = (const int32_t *)ph;
        x.status = (int32_t *)ph;
        x.workspace = ph, x.workspace_bytes = 4096;
        bytes = 777;
        fp8kit_status st = fp8kit_grouped_gemm_workspace_size(ctx, &desc, &x, &bytes);
        CHECK(st == FP8KIT_OK && bytes == 0, "workspace size, placeholders: %s (%s), %zu bytes",
              fp8kit_status_string(st), fp8kit_last_error(ctx), bytes);
        x.layout = FP8KIT_GROUPED_MASKED; /* masked placeholders */
        int64_t ms[3] = {G, 12, K}, md[3] = {G, 12, N}, tm = G * 12 * KB;
        x.a = fp8kit_tensor_make(ph, FP8KIT_E5M2, 3, ms);
        x.d = fp8kit_tensor_make(ph, FP8KIT_F16, 3, md);
        x.scale_a = fp8kit_tensor_make(ph, FP8KIT_E8M0, 1, &tm);
        bytes = 777;
        st = fp8kit_grouped_gemm_workspace_size(ctx, &desc, &x, &bytes);
        CHECK(st == FP8KIT_OK && bytes == 0, "workspace size, masked placeholders: %s (%s), %zu bytes",
              fp8kit_status_string(st), fp8kit_last_error(ctx), bytes);
    }
    /* ... and the call's statuses, *bytes untouched */
#define WSBAD(label, want_st, ...)                                                                    \
    do {                                                                                              \
        fp8kit_grouped_gemm_args x = ok;                                                              \
        fp8kit_gemm_desc dx = desc;                                                                   \
        __VA_ARGS__;                                                                                  \
        size_t b_ = 777;                                                                              \
        fp8kit_status st_ = fp8kit_grouped_gemm_workspace_size(ctx, &dx, &x, &b_);                    \
        CHECK(st_ == (want_st) && b_ == 777, "workspace size, %s: got %s (%s), bytes %zu; want %s", label, \
              fp8kit_status_string(st_), fp8kit_last_error(ctx), b_, fp8kit_status_string(want_st));  \
    } while (0)
    WSBAD("blocked", FP8KIT_ERR_UNSUPPORTED, dx.scale_layout = FP8KIT_LAYOUT_BLOCKED);
    WSBAD("K = 48", FP8KIT_ERR_INVALID_SHAPE, x.a.shape[1] = 48; x.b.shape[2] = 48);
    WSBAD("scale_a f32", FP8KIT_ERR_INVALID_ARGUMENT, x.scale_a.dtype = FP8KIT_F32; x.scale_a.shape[0] = T / 4);
    WSBAD("scale_b count", FP8KIT_ERR_INVALID_SHAPE, x.scale_b.shape[0] = G * N);
    WSBAD("misaligned workspace", FP8KIT_ERR_MISALIGNED, x.workspace = ws + 8; x.workspace_bytes = 64);
    WSBAD("offsets NULL", FP8KIT_ERR_NULL_POINTER, x.offsets = NULL);
    WSBAD("d fp8", FP8KIT_ERR_UNSUPPORTED, x.d.dtype = FP8KIT_E4M3);
#undef WSBAD
#undef MXBAD
    free(want);
    free(a); free(b); free(sa); free(sb); free(d); free(ws); free(words);
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
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_GELU_TANH, 0, 0, 0, 0},
        {"tensor f32 padded", 130, 40, 64, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_ACT_NONE, 16, 0, 0, 0},
        {"none e5m2 silu f16", 77, 33, 48, 4, FP8KIT_E5M2, FP8KIT_E4M3, FP8KIT_F16, FP8KIT_F32,
         FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, 1, FP8KIT_ACT_SILU, 0, 0, 0, 0},
        {"tensor x row relu, one group", 64, 48, 32, 6, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_BF16, FP8KIT_F16,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_RELU, 0, 1, 0, 0},
        {"row x tensor erf, short", 90, 20, 160, 7, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_TENSOR, 1, FP8KIT_ACT_GELU_ERF, 8, 2, 0, 0},
        {"single expert", 50, 64, 64, 1, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0, FP8KIT_ACT_NONE, 0, 0, 0, 0},
        {"block bf16, K 300 N 200", 260, 200, 300, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_SILU, 0, 0, 0, 0},
        {"block e5m2 f32 padded", 140, 136, 256, 3, FP8KIT_E5M2, FP8KIT_E4M3, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_ACT_NONE, 16, 2, 0, 0},
        {"block, one group", 129, 64, 128, 4, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_F16, FP8KIT_F32,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_GELU_TANH, 0, 1, 0, 0},
        {"masked row bias gelu", 70, 72, 96, 6, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 1, FP8KIT_ACT_GELU_TANH, 0, 0, 1, 0},
        {"masked block padded", 130, 160, 384, 4, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_ACT_NONE, 16, 2, 1, 0},
        {"masked tensor, last full", 40, 48, 64, 5, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_F32, FP8KIT_F32,
         FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0, FP8KIT_ACT_RELU, 0, 1, 1, 0},
        {"block mn_major, K 300 N 200", 261, 200, 300, 5, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_SILU, 0, 0, 0, 1},
        {"masked block mn_major, M 130", 130, 160, 384, 4, FP8KIT_E4M3, FP8KIT_E5M2, FP8KIT_F16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0, FP8KIT_ACT_NONE, 16, 2, 1, 1},
        {"masked block mn_major, one full", 63, 96, 640, 3, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_BF16,
         FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1, FP8KIT_ACT_GELU_TANH, 0, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], &rng, ctx);
    /* The space: odd M (rows per expert), N and K from 1, one and three
     * experts, both layouts, random groupings (empty groups; masked counts
     * from 0 to M, the last M) and one-full-group ones (masked: counts 0 and
     * M), every scale mode, output type, bias and activation in turn. */
    {
        static const int64_t tv[] = {1, 17, 129}, nv[] = {1, 33, 131}, kv[] = {1, 33, 257}, gv[] = {1, 3};
        static const fp8kit_scale_mode sv[] = {FP8KIT_SCALE_NONE, FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW,
                                               FP8KIT_SCALE_BLOCK};
        static const fp8kit_dtype dv[] = {FP8KIT_BF16, FP8KIT_F16, FP8KIT_F32};
        int idx = 0, ran = 0;
        for (int masked = 0; masked < 2; masked++)
            for (int layout = 0; layout < 2; layout++)
                for (int ti = 0; ti < 3; ti++)
                    for (int ni = 0; ni < 3; ni++)
                        for (int ki = 0; ki < 3; ki++)
                            for (int gi = 0; gi < 2; gi++)
                                for (int si = 0; si < 4; si++, idx++) {
                                    char name[64];
                                    snprintf(name, sizeof name, "space %s%s %s #%d", masked ? "masked" : "contig",
                                             layout ? " one-full" : "", fp8kit_scale_mode_name(sv[si]), idx);
                                    const gcase c = {name, tv[ti], nv[ni], kv[ki], gv[gi],
                                                     FP8KIT_E4M3, idx % 5 == 0 ? FP8KIT_E5M2 : FP8KIT_E4M3,
                                                     dv[idx % 3], FP8KIT_BF16, sv[si], sv[si], idx % 2,
                                                     idx % 2 ? FP8KIT_ACT_SILU : FP8KIT_ACT_NONE, idx % 4 == 1 ? 16 : 0,
                                                     layout, masked, 0};
                                    run_case(&c, &rng, ctx);
                                    ran++;
                                    if (sv[si] == FP8KIT_SCALE_BLOCK) { /* and with mn_major A scales */
                                        char mname[80];
                                        snprintf(mname, sizeof mname, "%s mn_major", name);
                                        gcase m = c;
                                        m.name = mname;
                                        m.mn = 1;
                                        run_case(&m, &rng, ctx);
                                        ran++;
                                    }
                                }
        printf("  the space: %d cases\n", ran);
    }
    const fp8kit_dtype E4 = FP8KIT_E4M3, E5 = FP8KIT_E5M2;
    const mxcase mx[] = {
        {"mx bias gelu bf16, G 8", 301, 72, 96, 8, E4, E4, FP8KIT_BF16, FP8KIT_BF16, 1, FP8KIT_ACT_GELU_TANH, 0, 0,
         MX_RANDOM, 0, 0},
        {"mx e5m2 x e4m3 silu f16, first empty", 77, 33, 160, 3, E5, E4, FP8KIT_F16, FP8KIT_F32, 1, FP8KIT_ACT_SILU,
         16, 0, MX_FIRST, 0, 1},
        {"mx e4m3 x e5m2 f32, last empty", 131, 40, 32, 8, E4, E5, FP8KIT_F32, FP8KIT_F32, 0, FP8KIT_ACT_NONE, 0, 0,
         MX_LAST, 0, 0},
        {"mx e5m2 relu bf16, middle empty", 255, 129, 320, 8, E5, E5, FP8KIT_BF16, FP8KIT_F16, 1, FP8KIT_ACT_RELU, 8,
         0, MX_MIDDLE, 0, 1},
        {"mx one expert erf f32", 53, 64, 320, 1, E4, E4, FP8KIT_F32, FP8KIT_F32, 1, FP8KIT_ACT_GELU_ERF, 0, 0,
         MX_RANDOM, 0, 0},
        {"mx short last, K 320", 200, 25, 320, 3, E4, E4, FP8KIT_BF16, FP8KIT_BF16, 1, FP8KIT_ACT_NONE, 16, 0,
         MX_SHORT, 0, 1},
        {"mx edge scales (0, NaN) bf16", 99, 48, 96, 3, E4, E5, FP8KIT_BF16, FP8KIT_F32, 1, FP8KIT_ACT_SILU, 0, 0,
         MX_SHORT, 1, 0},
        {"mx edge scales f32 padded", 70, 31, 160, 8, E5, E4, FP8KIT_F32, FP8KIT_F32, 0, FP8KIT_ACT_NONE, 8, 0,
         MX_MIDDLE, 1, 1},
        {"mx masked bias silu bf16", 37, 72, 96, 3, E4, E4, FP8KIT_BF16, FP8KIT_BF16, 1, FP8KIT_ACT_SILU, 0, 1,
         MX_FIRST, 0, 0},
        {"mx masked e5m2 f16 padded, middle", 64, 33, 160, 8, E5, E4, FP8KIT_F16, FP8KIT_F16, 1, FP8KIT_ACT_GELU_TANH,
         16, 1, MX_MIDDLE, 0, 1},
        {"mx masked f32, last empty", 21, 40, 32, 3, E4, E5, FP8KIT_F32, FP8KIT_F32, 0, FP8KIT_ACT_RELU, 0, 1,
         MX_LAST, 0, 0},
        {"mx masked one expert K 320", 45, 17, 320, 1, E5, E5, FP8KIT_F16, FP8KIT_BF16, 1, FP8KIT_ACT_GELU_ERF, 0, 1,
         MX_RANDOM, 0, 1},
        {"mx masked edge scales", 29, 50, 96, 8, E4, E4, FP8KIT_BF16, FP8KIT_F32, 1, FP8KIT_ACT_NONE, 8, 1,
         MX_RANDOM, 1, 0},
    };
    for (size_t i = 0; i < sizeof mx / sizeof mx[0]; i++)
        run_mx_case(&mx[i], &rng, ctx);
    bad_inputs(ctx);
    mx_bad_inputs(ctx);
    fp8kit_ctx_destroy(ctx);

    /* a CUDA context refuses zeroed arguments on the host (when a device exists) */
    fp8kit_ctx *cu = NULL;
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &cu) == FP8KIT_OK) {
        fp8kit_gemm_desc desc;
        memset(&desc, 0, sizeof desc);
        fp8kit_grouped_gemm_args ga;
        memset(&ga, 0, sizeof ga);
        CHECK_STATUS(fp8kit_grouped_gemm(cu, &desc, &ga, NULL), FP8KIT_ERR_NULL_POINTER);
        size_t bytes = 777;
        CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(cu, &desc, &ga, &bytes), FP8KIT_ERR_NULL_POINTER);
        CHECK(bytes == 777, "workspace size on a refused call: bytes written (%zu)", bytes);
        fp8kit_ctx_destroy(cu);
    }
    return fk_test_summary("test_grouped");
}
