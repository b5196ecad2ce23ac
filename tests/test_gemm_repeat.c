/* test_gemm_repeat.c - fp8kit_gemm's per-thread shortcut for a call that
 * repeats the previous call's descriptor and operand metadata with new data
 * pointers (src/core/gemm_api.c), on a CPU context: repeated calls with
 * other buffers equal the same calls on a fresh context bit for bit, and
 * after a successful call every bad variant that keeps the metadata still
 * fails with the status the full checks give (a required pointer NULL, amax_d
 * without OUTQ_SCALED, C NULL with beta != 0, bias NULL with a bias mode)
 * and writes nothing; a changed shape, stride, dtype or descriptor field is
 * checked again too. Run: ctest -R test_gemm_repeat (well under a second). */
#include "fp8kit.h"
#include "test_util.h"

#define M 24
#define N 40
#define K 64

typedef struct bufs {
    uint8_t a[M * K], b[N * K];
    float sa[M], sb[N], bias[N];
    uint16_t d[M * N];
} bufs;

static void fill(bufs *x, fk_rng *r)
{
    for (int i = 0; i < M * K; i++)
        x->a[i] = (uint8_t)(fk_rng_u32(r) & 0x77); /* finite e4m3 codes of both signs */
    for (int i = 0; i < N * K; i++)
        x->b[i] = (uint8_t)(fk_rng_u32(r) & 0x77);
    for (int i = 0; i < M; i++)
        x->sa[i] = (float)(0.5 + fk_rng_unif(r));
    for (int i = 0; i < N; i++)
        x->sb[i] = (float)(0.5 + fk_rng_unif(r)), x->bias[i] = (float)fk_rng_normal(r);
    memset(x->d, 0, sizeof x->d);
}

static void make(bufs *x, fp8kit_gemm_desc *gd, fp8kit_gemm_args *ga)
{
    memset(gd, 0, sizeof *gd);
    gd->scale_a = gd->scale_b = FP8KIT_SCALE_ROW;
    gd->bias = FP8KIT_BIAS_COL;
    gd->act = FP8KIT_ACT_RELU;
    memset(ga, 0, sizeof *ga);
    ga->a = fp8kit_tensor_2d(x->a, FP8KIT_E4M3, M, K, K);
    ga->b = fp8kit_tensor_2d(x->b, FP8KIT_E4M3, N, K, K);
    ga->scale_a = fp8kit_tensor_make(x->sa, FP8KIT_F32, 1, (int64_t[]){M});
    ga->scale_b = fp8kit_tensor_make(x->sb, FP8KIT_F32, 1, (int64_t[]){N});
    ga->bias = fp8kit_tensor_make(x->bias, FP8KIT_F32, 1, (int64_t[]){N});
    ga->alpha = 1.0f;
    ga->d = fp8kit_tensor_2d(x->d, FP8KIT_BF16, M, N, N);
}

static int untouched(const bufs *x)
{
    for (int i = 0; i < M * N; i++)
        if (x->d[i] != 0xFFFF)
            return 0;
    return 1;
}

int main(void)
{
    fk_rng r = {20261122};
    static bufs x[4], ref;
    for (int i = 0; i < 4; i++)
        fill(&x[i], &r);
    fp8kit_ctx *ctx = NULL, *fresh = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    fp8kit_gemm_desc gd;
    fp8kit_gemm_args ga;

    /* repeated calls cycling through buffers equal one call each on a fresh context */
    for (int it = 0; it < 12; it++) {
        bufs *b = &x[it % 4];
        make(b, &gd, &ga);
        CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK);
    }
    for (int i = 0; i < 4; i++) {
        ref = x[i];
        memset(ref.d, 0, sizeof ref.d);
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &fresh), FP8KIT_OK);
        make(&ref, &gd, &ga);
        CHECK_STATUS(fp8kit_gemm(fresh, &gd, &ga, NULL), FP8KIT_OK);
        fp8kit_ctx_destroy(fresh);
        CHECK(memcmp(ref.d, x[i].d, sizeof ref.d) == 0, "buffer set %d differs from a fresh context's result", i);
    }
    CHECK(fp8kit_plan_cache_size(ctx) == 1, "one plan expected, got %lld", (long long)fp8kit_plan_cache_size(ctx));

    /* after a successful call: bad variants with the same metadata still fail and write nothing */
    struct {
        const char *what;
        fp8kit_status want;
    } bad[] = {{"a NULL", FP8KIT_ERR_NULL_POINTER},       {"b NULL", FP8KIT_ERR_NULL_POINTER},
               {"scale_a NULL", FP8KIT_ERR_NULL_POINTER}, {"scale_b NULL", FP8KIT_ERR_NULL_POINTER},
               {"bias NULL", FP8KIT_ERR_NULL_POINTER},    {"d NULL", FP8KIT_ERR_NULL_POINTER},
               {"amax_d set", FP8KIT_ERR_UNSUPPORTED},    {"beta 1, c NULL", FP8KIT_ERR_NULL_POINTER},
               {"K stride 2", FP8KIT_ERR_INVALID_STRIDE}, {"b dtype f32", FP8KIT_ERR_UNSUPPORTED},
               {"d rows M+1", FP8KIT_ERR_INVALID_SHAPE},  {"desc act 99", FP8KIT_ERR_INVALID_ARGUMENT}};
    float amax = 0;
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        bufs *b = &x[c % 4];
        make(b, &gd, &ga);
        CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK); /* the call the shortcut remembers */
        memset(b->d, 0xFF, sizeof b->d);
        switch (c) {
        case 0: ga.a.data = NULL; break;
        case 1: ga.b.data = NULL; break;
        case 2: ga.scale_a.data = NULL; break;
        case 3: ga.scale_b.data = NULL; break;
        case 4: ga.bias.data = NULL; break;
        case 5: ga.d.data = NULL; break;
        case 6: ga.amax_d = &amax; break;
        case 7: ga.beta = 1.0f; break;
        case 8: ga.a.strides[1] = 2; break;
        case 9: ga.b.dtype = FP8KIT_F32; break;
        case 10: ga.d.shape[0] = M + 1; break;
        case 11: gd.act = (fp8kit_activation)99; break;
        }
        fp8kit_status st = fp8kit_gemm(ctx, &gd, &ga, NULL);
        CHECK(st == bad[c].want, "%s: got %s, want %s", bad[c].what, fp8kit_status_string(st),
              fp8kit_status_string(bad[c].want));
        CHECK(untouched(b), "%s: d was written", bad[c].what);
        CHECK(*fp8kit_last_error(ctx) != '\0', "%s: no message", bad[c].what);
    }
    /* and a good call right after a failed one still runs */
    make(&x[0], &gd, &ga);
    memset(x[0].d, 0xFF, sizeof x[0].d);
    CHECK_STATUS(fp8kit_gemm(ctx, &gd, &ga, NULL), FP8KIT_OK);
    CHECK(!untouched(&x[0]), "the good call wrote nothing");
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_gemm_repeat");
}
