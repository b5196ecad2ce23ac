/* test_hostile_api.c - hostile input for the public C API on the CPU backend
 * (issue 21): a thread count past the bound; strides and dims whose extents
 * overflow int64 (shape x stride of 2^63 on a tensor whose strided extent
 * still fits). Each bad call must return its
 * specific status, leave a new message naming the function and the culprit,
 * and change no byte of any buffer (the whole arena the call's tensors live
 * in is poisoned first and compared after). Run: ctest -R test_hostile_api;
 * built with -DFP8KIT_SANITIZE=ON, UBSan aborts on any misaligned access or
 * signed overflow inside the library. */
#include <stdint.h>
#include <unistd.h>
#include "fp8kit.h"
#include "test_util.h"

static fp8kit_ctx *ctx;

/* ------------------------------------------------------------- the arena */
#define ARENA (1 << 20)
static _Alignas(64) unsigned char arena[ARENA];
static unsigned char arena_copy[ARENA];

static void arena_snapshot(void) { memcpy(arena_copy, arena, ARENA); }
static int arena_unchanged(void) { return memcmp(arena_copy, arena, ARENA) == 0; }

/* ------------------------------------------------- the bad-call checker */
static long n_bad;
static char marker[512];
static void set_marker(void)
{
    fp8kit_ctx_set_threads(ctx, -1); /* a known failure leaves a known message */
    snprintf(marker, sizeof marker, "%s", fp8kit_last_error(ctx));
}

/* A failing call: want, a new message naming fn and both words (w2 may be
 * NULL), and the arena unchanged since the snapshot. */
static void check_bad(int line, fp8kit_status got, fp8kit_status want, const char *fn, const char *w1, const char *w2)
{
    const char *msg = fp8kit_last_error(ctx);
    n_bad++;
    CHECK(got == want, "line %d: got %s, want %s (%s)", line, fp8kit_status_string(got), fp8kit_status_string(want),
          msg);
    CHECK(msg[0] && strcmp(msg, marker) != 0, "line %d: no new message", line);
    CHECK(strstr(msg, fn) != NULL, "line %d: message \"%s\" does not name %s", line, msg, fn);
    CHECK(strstr(msg, w1) != NULL, "line %d: message \"%s\" does not mention %s", line, msg, w1);
    CHECK(!w2 || strstr(msg, w2) != NULL, "line %d: message \"%s\" does not mention %s", line, msg, w2);
    CHECK(arena_unchanged(), "line %d: the failing call changed memory", line);
}

#define BAD(want, fn, w1, w2, call)                                                                              \
    do {                                                                                                         \
        set_marker();                                                                                            \
        arena_snapshot();                                                                                        \
        fp8kit_status st_ = (call);                                                                              \
        check_bad(__LINE__, st_, want, fn, w1, w2);                                                              \
    } while (0)

#define GOOD(call)                                                                                               \
    do {                                                                                                         \
        fp8kit_status st_ = (call);                                                                              \
        CHECK(st_ == FP8KIT_OK, "line %d: %s returned %s (%s)", __LINE__, #call, fp8kit_status_string(st_),      \
              fp8kit_last_error(ctx));                                                                           \
    } while (0)

static void *at(size_t off) { return arena + off; }

/* ------------------------------------------------------- item 3: threads */
static void test_thread_bound(void)
{
    const char *fn = "fp8kit_ctx_set_threads";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int bound = ncpu * 4 > 64 ? (int)ncpu * 4 : 64;
    char bs[32];
    snprintf(bs, sizeof bs, "%d", bound);
    GOOD(fp8kit_ctx_set_threads(ctx, 2));
    const int over[] = {100000, 40000, INT32_MAX, bound + 1};
    for (int i = 0; i < 4; i++) {
        BAD(FP8KIT_ERR_INVALID_ARGUMENT, fn, "nthreads", bs, fp8kit_ctx_set_threads(ctx, over[i]));
        CHECK(strstr(fp8kit_ctx_describe(ctx), " 2 ") != NULL, "a refused count changed the setting: %s",
              fp8kit_ctx_describe(ctx));
    }
    /* the bound itself is usable (64 threads at least, even on a small machine) */
    int64_t shp[2] = {64, 256};
    float *x = (float *)at(0);
    for (int i = 0; i < 64 * 256; i++)
        x[i] = (float)(i % 97) - 48.0f;
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
    fp8kit_tensor xt = fp8kit_tensor_make(x, FP8KIT_F32, 2, shp), q, s;
    GOOD(fp8kit_quant_shapes(&d, &xt, &q, &s));
    q.data = at(65536);
    s.data = at(65536 + 16384);
    GOOD(fp8kit_ctx_set_threads(ctx, 64));
    GOOD(fp8kit_quantize(ctx, &d, &xt, &q, &s, NULL));
    GOOD(fp8kit_ctx_set_threads(ctx, bound));
    GOOD(fp8kit_ctx_set_threads(ctx, 2));
}

/* --------------------------------------- item 5b: extents that overflow */
/* An fp8 (1-byte) tensor (2, 32) with row stride 2^62 has a strided extent of
 * 2^62 + 32 bytes (fits int64) but 2 x 2^62 = 2^63 (rows x row stride) does
 * not; the buffers are tiny: a call that got past validation would read or
 * write far outside them. */
static void test_extent_overflow(void)
{
    const int64_t big = (int64_t)1 << 62;
    const char *QF = "fp8kit_quantize", *DF = "fp8kit_dequantize", *CF = "fp8kit_cast", *GF = "fp8kit_gemm";
    int64_t shp[2] = {2, 32};
    fp8kit_quant_desc rd = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
    fp8kit_tensor x = fp8kit_tensor_make(at(0), FP8KIT_F32, 2, shp), q, s;
    GOOD(fp8kit_quant_shapes(&rd, &x, &q, &s));
    q.data = at(4096);
    s.data = at(8192);
    GOOD(fp8kit_quantize(ctx, &rd, &x, &q, &s, NULL));
    fp8kit_tensor qb = fp8kit_tensor_2d(at(4096), FP8KIT_E4M3, 2, 32, big);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, QF, "q", "overflows", fp8kit_quantize(ctx, &rd, &x, &qb, &s, NULL));
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, DF, "q", "overflows", fp8kit_dequantize(ctx, &rd, &qb, &s, &x, NULL));
    fp8kit_tensor y = fp8kit_tensor_make(at(12288), FP8KIT_F32, 2, shp);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, CF, "x", "overflows", fp8kit_cast(ctx, &qb, &y, NULL));
    /* 3-D: experts 3 x 2^60 apart: 2 x that + 64 fits, 3 x that overflows */
    int64_t shp3[3] = {3, 2, 32};
    fp8kit_tensor q3 = fp8kit_tensor_make(at(4096), FP8KIT_E4M3, 3, shp3);
    q3.strides[0] = (int64_t)3 << 60;
    fp8kit_tensor x3 = fp8kit_tensor_make(at(0), FP8KIT_F32, 3, shp3), s3;
    fp8kit_tensor qq3;
    GOOD(fp8kit_quant_shapes(&rd, &x3, &qq3, &s3));
    s3.data = at(8192);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, QF, "q", "shape[0]", fp8kit_quantize(ctx, &rd, &x3, &q3, &s3, NULL));
    fp8kit_quant_desc td = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
    fp8kit_tensor st = fp8kit_tensor_make(at(8192), FP8KIT_F32, 0, NULL);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, DF, "q", "overflows", fp8kit_dequantize(ctx, &td, &q3, &st, &x3, NULL));
    /* dims near INT64_MAX: an fp8 row of INT64_MAX codes is a valid byte count, its f32 output is not */
    fp8kit_tensor qh = fp8kit_tensor_2d(at(4096), FP8KIT_E4M3, 1, INT64_MAX, INT64_MAX);
    fp8kit_tensor yh = fp8kit_tensor_2d(at(12288), FP8KIT_F32, 1, INT64_MAX, INT64_MAX);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, CF, "y", "overflows", fp8kit_cast(ctx, &qh, &yh, NULL));
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, DF, "y", "overflows", fp8kit_dequantize(ctx, &td, &qh, &st, &yh, NULL));
    fp8kit_tensor q2 = fp8kit_tensor_2d(at(4096), FP8KIT_E4M3, 2, INT64_MAX / 2, INT64_MAX / 2 + 1);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, DF, "q", "overflows", fp8kit_dequantize(ctx, &td, &q2, &st, &yh, NULL));

    /* GEMM: A or B rows 2^62 apart, D rows 2^61 apart (f32: x 4 bytes overflows) */
    fp8kit_gemm_desc gd;
    memset(&gd, 0, sizeof gd);
    fp8kit_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    ga.a = fp8kit_tensor_2d(at(0), FP8KIT_E4M3, 2, 32, 32);
    ga.b = fp8kit_tensor_2d(at(1024), FP8KIT_E4M3, 2, 32, 32);
    ga.d = fp8kit_tensor_2d(at(2048), FP8KIT_F32, 2, 2, 2);
    ga.alpha = 1.0f;
    memset(at(0), 0x38, 2048); /* e4m3 1.0 */
    GOOD(fp8kit_gemm(ctx, &gd, &ga, NULL));
    fp8kit_gemm_args g2 = ga;
    g2.a.strides[0] = big;
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, GF, "a", "overflows", fp8kit_gemm(ctx, &gd, &g2, NULL));
    size_t ws = 12345;
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, GF, "a", "overflows", /* its messages name fp8kit_gemm */
        fp8kit_gemm_workspace_size(ctx, &gd, &g2, &ws));
    CHECK(ws == 12345, "a failing workspace_size wrote *bytes");
    g2 = ga, g2.b.strides[0] = big;
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, GF, "b", "overflows", fp8kit_gemm(ctx, &gd, &g2, NULL));
    g2 = ga, g2.d.strides[0] = (int64_t)1 << 61;
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, GF, "d", "overflows", fp8kit_gemm(ctx, &gd, &g2, NULL));
    g2 = ga, g2.beta = 1.0f, g2.c = fp8kit_tensor_2d(at(4096), FP8KIT_BF16, 2, 2, big);
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, GF, "c", "overflows", fp8kit_gemm(ctx, &gd, &g2, NULL));

    /* grouped GEMM: experts of B 2^62 apart (G = 2) */
    fp8kit_grouped_gemm_args gg;
    memset(&gg, 0, sizeof gg);
    int64_t bshp[3] = {2, 2, 32};
    int32_t *offs = (int32_t *)at(8192);
    offs[0] = 1, offs[1] = 2;
    gg.a = ga.a;
    gg.b = fp8kit_tensor_make(at(1024), FP8KIT_E4M3, 3, bshp);
    gg.offsets = offs;
    gg.alpha = 1.0f;
    gg.d = ga.d;
    GOOD(fp8kit_grouped_gemm(ctx, &gd, &gg, NULL));
    gg.b.strides[0] = big;
    BAD(FP8KIT_ERR_SIZE_OVERFLOW, "fp8kit_grouped_gemm", "b", "overflows", fp8kit_grouped_gemm(ctx, &gd, &gg, NULL));
}

int main(void)
{
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_hostile_api");
    test_thread_bound();
    test_extent_overflow();
    printf("test_hostile_api: %ld bad calls checked (status, message, memory unchanged)\n", n_bad);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_hostile_api");
}
