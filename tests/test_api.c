/* test_api.c - bad input for every public function of include/fp8kit.h (docs/spec.md
 * section 4), on the CPU backend: NULL pointers, invalid enums, negative and
 * overflowing shapes, bad ndim and strides, wrong dtypes, unsupported
 * scheme/layout/axis combinations, mx length rules, q/scale mismatches, and
 * every GEMM operand/epilogue rule. Each bad call starts from a baseline that
 * is checked to succeed and changes one thing; it must return the documented
 * status, leave a new last-error message naming the function and the culprit,
 * leave every output byte untouched (poisoned before the call) and add no
 * plan. Also: status/dtype/backend names, version, backend availability,
 * context lifetime, tensor helpers, a strided q whose row padding must stay
 * untouched. Run: ctest -R test_api. */
#include <stdint.h>
#include "fp8kit.h"
#include "test_util.h"

static fp8kit_ctx *ctx;
static fk_rng rng;

/* ------------------------------------------------------------- buffers */
#define XN (2 * 64 * 256)
static float xbuf[XN];                   /* quantize input / gemm C source */
static uint8_t qbuf[2 * 64 * 300];       /* q output (room for a row stride of 300) */
static unsigned char sbuf[64 * 1024];    /* scale output */
static float ybuf[XN];                   /* dequantize / cast output */
static uint8_t abuf[64 * 256], bbuf[96 * 256]; /* gemm operands */
static float sabuf[1024], sbbuf[1024];   /* gemm operand scales (max 256 x 4 f32) */
static unsigned char dbuf[64 * 96 * 4];  /* gemm D */
static unsigned char sdbuf[4096];        /* gemm scale_d output */
static float amaxbuf[1], biasbuf[256], cbuf[64 * 96], scaled_in[1];

static void poison_outputs(void)
{
    fk_poison(qbuf, sizeof qbuf);
    fk_poison(sbuf, sizeof sbuf);
    fk_poison(ybuf, sizeof ybuf);
    fk_poison(dbuf, sizeof dbuf);
    fk_poison(sdbuf, sizeof sdbuf);
    fk_poison(amaxbuf, sizeof amaxbuf);
}
static int outputs_untouched(void)
{
    return fk_is_poisoned(qbuf, sizeof qbuf) && fk_is_poisoned(sbuf, sizeof sbuf) &&
           fk_is_poisoned(ybuf, sizeof ybuf) && fk_is_poisoned(dbuf, sizeof dbuf) &&
           fk_is_poisoned(sdbuf, sizeof sdbuf) && fk_is_poisoned(amaxbuf, sizeof amaxbuf);
}

/* ------------------------------------------------- the bad-call checker */
/* Before a bad call, a known failing call leaves a marker message in the same
 * (context, thread) slot, so a message seen afterwards is the new call's. */
static char marker[512];
static void set_marker(const fp8kit_ctx *mctx)
{
    fp8kit_ctx *unused = NULL;
    if (mctx)
        fp8kit_ctx_set_threads((fp8kit_ctx *)mctx, -1);
    else
        fp8kit_ctx_create(FP8KIT_BACKEND_CPU, -12345, &unused); /* "device -12345 is negative" */
    snprintf(marker, sizeof marker, "%s", fp8kit_last_error(mctx));
}

/* word occurs in msg as a token: not inside a longer identifier */
static int is_ident(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'; }
static int mentions(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = msg; p && (p = strstr(p, word)) != NULL; p++) {
        int before_ok = p == msg || !is_ident(p[-1]) || !is_ident(word[0]);
        int after_ok = !is_ident(p[n]) || !is_ident(word[n - 1]);
        if (before_ok && after_ok)
            return 1;
    }
    return 0;
}

static long n_bad_cases;
static void check_bad(int line, const char *call, fp8kit_status got, fp8kit_status want, const fp8kit_ctx *mctx,
                      const char *fn, const char *sub, int64_t plans_before)
{
    const char *msg = fp8kit_last_error(mctx);
    n_bad_cases++;
    CHECK(got == want, "line %d: %s returned %s, want %s (message: %s)", line, call, fp8kit_status_string(got),
          fp8kit_status_string(want), msg);
    CHECK(msg && msg[0] && strcmp(msg, marker) != 0, "line %d: %s left no new last-error message", line, call);
    CHECK(msg && strstr(msg, fn), "line %d: message \"%s\" does not name %s", line, msg ? msg : "(null)", fn);
    CHECK(msg && mentions(msg, sub), "line %d: message \"%s\" does not mention \"%s\"", line, msg ? msg : "(null)", sub);
    CHECK(outputs_untouched(), "line %d: %s wrote to an output", line, call);
    CHECK(fp8kit_plan_cache_size(ctx) == plans_before, "line %d: %s added a plan", line, call);
}

/* BAD(message ctx, want, function name, substring, call) */
#define BAD(mctx, want, fn, sub, call)                                                                 \
    do {                                                                                            \
        poison_outputs();                                                                           \
        set_marker(mctx);                                                                           \
        int64_t plans_ = fp8kit_plan_cache_size(ctx);                                               \
        fp8kit_status st_ = (call);                                                                 \
        check_bad(__LINE__, #call, st_, want, mctx, fn, sub, plans_);                               \
    } while (0)

#define GOOD(call)                                                                                  \
    do {                                                                                            \
        poison_outputs();                                                                           \
        fp8kit_status st_ = (call);                                                                 \
        CHECK(st_ == FP8KIT_OK, "line %d: %s returned %s (%s)", __LINE__, #call, fp8kit_status_string(st_), \
              fp8kit_last_error(ctx));                                                              \
    } while (0)

/* ------------------------------------------------ names, versions, ctx */
static void test_names(void)
{
    const char *seen[16];
    for (int s = 0; s <= FP8KIT_ERR_INTERNAL; s++) {
        seen[s] = fp8kit_status_string((fp8kit_status)s);
        CHECK(seen[s] && strncmp(seen[s], "FP8KIT_", 7) == 0, "status %d string %s", s, seen[s] ? seen[s] : "NULL");
        for (int t = 0; t < s; t++)
            CHECK(strcmp(seen[s], seen[t]) != 0, "status %d and %d share a string", s, t);
    }
    CHECK(strstr(seen[FP8KIT_ERR_INVALID_SHAPE], "INVALID_SHAPE") != NULL, "shape string");
    CHECK(strstr(seen[FP8KIT_ERR_BACKEND_UNAVAILABLE], "BACKEND_UNAVAILABLE") != NULL, "backend string");
    const int odd[] = {-1, 16, 1000, INT32_MAX};
    for (int i = 0; i < 4; i++) {
        const char *s = fp8kit_status_string((fp8kit_status)odd[i]);
        CHECK(s != NULL && s[0], "out-of-range status %d gives a string", odd[i]);
        for (int t = 0; s && t <= FP8KIT_ERR_INTERNAL; t++)
            CHECK(strcmp(s, seen[t]) != 0, "out-of-range status %d named like %d", odd[i], t);
    }

    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", FP8KIT_VERSION_MAJOR, FP8KIT_VERSION_MINOR, FP8KIT_VERSION_PATCH);
    CHECK(strcmp(fp8kit_version_string(), v) == 0, "version string %s, header says %s", fp8kit_version_string(), v);
    CHECK(fp8kit_version() == FP8KIT_VERSION_MAJOR * 10000 + FP8KIT_VERSION_MINOR * 100 + FP8KIT_VERSION_PATCH,
          "version %d", fp8kit_version());

    const char *names[] = {"f32", "f16", "bf16", "e4m3", "e5m2", "e8m0"};
    const size_t sizes[] = {4, 2, 2, 1, 1, 1};
    for (int t = 0; t < FP8KIT_DTYPE_COUNT; t++) {
        CHECK(strcmp(fp8kit_dtype_name((fp8kit_dtype)t), names[t]) == 0, "dtype %d name %s", t,
              fp8kit_dtype_name((fp8kit_dtype)t));
        CHECK(fp8kit_dtype_size((fp8kit_dtype)t) == sizes[t], "dtype %d size", t);
    }
    const int bad_dt[] = {-1, FP8KIT_DTYPE_COUNT, 255, INT32_MAX};
    for (int i = 0; i < 4; i++) {
        const char *n = fp8kit_dtype_name((fp8kit_dtype)bad_dt[i]);
        CHECK(fp8kit_dtype_size((fp8kit_dtype)bad_dt[i]) == 0, "invalid dtype %d has a size", bad_dt[i]);
        CHECK(n != NULL, "invalid dtype %d name NULL", bad_dt[i]);
        for (int t = 0; n && t < FP8KIT_DTYPE_COUNT; t++)
            CHECK(strcmp(n, names[t]) != 0, "invalid dtype %d named %s", bad_dt[i], n);
    }
    CHECK(strcmp(fp8kit_backend_name(FP8KIT_BACKEND_CPU), "cpu") == 0, "cpu name");
    CHECK(strcmp(fp8kit_backend_name(FP8KIT_BACKEND_CUDA), "cuda") == 0, "cuda name");
    CHECK(strcmp(fp8kit_backend_name(FP8KIT_BACKEND_AUTO), "auto") == 0, "auto name");
    const char *bn = fp8kit_backend_name((fp8kit_backend)7);
    CHECK(bn && strcmp(bn, "cpu") && strcmp(bn, "cuda") && strcmp(bn, "auto"), "invalid backend name");
    CHECK(fp8kit_backend_available(FP8KIT_BACKEND_CPU) == 1, "cpu always available");
    CHECK(fp8kit_backend_available((fp8kit_backend)7) == 0, "invalid backend available");
    CHECK(fp8kit_backend_available((fp8kit_backend)-1) == 0, "invalid backend -1 available");
}

static void test_ctx(void)
{
    fp8kit_ctx *c = (fp8kit_ctx *)(uintptr_t)0x1234, *sentinel = c;
    int cuda = fp8kit_backend_available(FP8KIT_BACKEND_CUDA);
    printf("test_api: CUDA backend %s\n", cuda ? "available" : "not available");
    if (!cuda) {
        BAD(NULL, FP8KIT_ERR_BACKEND_UNAVAILABLE, "fp8kit_ctx_create", "CUDA", fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &c));
        CHECK(c == sentinel, "failed ctx_create wrote *out");
    } else {
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &c), FP8KIT_OK);
        CHECK(fp8kit_ctx_backend(c) == FP8KIT_BACKEND_CUDA, "cuda ctx backend");
        fp8kit_ctx_destroy(c);
        c = sentinel;
        fp8kit_status st = fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 1 << 20, &c);
        printf("test_api: CUDA device 1<<20 -> %s (%s)\n", fp8kit_status_string(st), fp8kit_last_error(NULL));
        CHECK(st != FP8KIT_OK && c == sentinel, "CUDA device 1<<20 accepted");
    }
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_AUTO, 0, &c), FP8KIT_OK);
    CHECK(fp8kit_ctx_backend(c) == (cuda ? FP8KIT_BACKEND_CUDA : FP8KIT_BACKEND_CPU), "AUTO resolved to %s",
          fp8kit_backend_name(fp8kit_ctx_backend(c)));
    CHECK(strcmp(fp8kit_last_error(c), "") == 0, "fresh context has message \"%s\"", fp8kit_last_error(c));
    CHECK(fp8kit_plan_cache_size(c) == 0, "fresh context has plans");
    CHECK_STATUS(fp8kit_ctx_destroy(c), FP8KIT_OK);
    c = sentinel;
    BAD(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_create", "backend", fp8kit_ctx_create((fp8kit_backend)3, 0, &c));
    BAD(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_create", "backend", fp8kit_ctx_create((fp8kit_backend)-1, 0, &c));
    BAD(NULL, FP8KIT_ERR_INVALID_ARGUMENT, "fp8kit_ctx_create", "device", fp8kit_ctx_create(FP8KIT_BACKEND_CPU, -1, &c));
    CHECK(c == sentinel, "failed ctx_create wrote *out");
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_create", "out", fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, NULL));
    CHECK_STATUS(fp8kit_ctx_destroy(NULL), FP8KIT_OK);

    BAD(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_ctx_set_threads", "ctx", fp8kit_ctx_set_threads(NULL, 1));
    /* the marker itself is set_threads(ctx, -1): check it explicitly */
    fp8kit_ctx_set_threads(ctx, 3);
    CHECK_STATUS(fp8kit_ctx_set_threads(ctx, -5), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(fp8kit_last_error(ctx), "nthreads") != NULL, "set_threads message %s", fp8kit_last_error(ctx));
    CHECK(strstr(fp8kit_ctx_describe(ctx), "3") != NULL, "failed set_threads changed the thread count: %s",
          fp8kit_ctx_describe(ctx));
    CHECK_STATUS(fp8kit_ctx_set_threads(ctx, 0), FP8KIT_OK);
    CHECK(fp8kit_ctx_backend(ctx) == FP8KIT_BACKEND_CPU, "ctx backend");
    CHECK(strstr(fp8kit_ctx_describe(ctx), "cpu") != NULL, "describe: %s", fp8kit_ctx_describe(ctx));
    CHECK(fp8kit_ctx_describe(NULL) != NULL, "describe(NULL)");
    CHECK(fp8kit_ctx_backend(NULL) != FP8KIT_BACKEND_CPU && fp8kit_ctx_backend(NULL) != FP8KIT_BACKEND_CUDA,
          "backend(NULL) names a real backend");
    CHECK(fp8kit_plan_cache_size(NULL) == 0, "plan_cache_size(NULL)");
    CHECK(fp8kit_last_error(NULL) != NULL, "last_error(NULL)");
}

static void test_tensor_helpers(void)
{
    int64_t shp[3] = {2, 3, 4};
    fp8kit_tensor t = fp8kit_tensor_make(xbuf, FP8KIT_F32, 3, shp);
    CHECK(t.data == xbuf && t.dtype == FP8KIT_F32 && t.ndim == 3, "tensor_make fields");
    CHECK(t.strides[0] == 12 && t.strides[1] == 4 && t.strides[2] == 1, "tensor_make strides");
    CHECK(fp8kit_tensor_numel(&t) == 24, "numel 24");
    t = fp8kit_tensor_2d(xbuf, FP8KIT_BF16, 5, 7, 9);
    CHECK(t.ndim == 2 && t.shape[0] == 5 && t.shape[1] == 7 && t.strides[0] == 9 && t.strides[1] == 1, "tensor_2d");
    CHECK(fp8kit_tensor_numel(NULL) == -1, "numel(NULL)");
    t = fp8kit_tensor_make(NULL, FP8KIT_F32, 0, NULL);
    CHECK(fp8kit_tensor_numel(&t) == 1, "scalar numel");
    int64_t neg[2] = {4, -3}, big[3] = {1LL << 32, 1LL << 32, 1LL << 32};
    t = fp8kit_tensor_make(NULL, FP8KIT_F32, 2, neg);
    CHECK(fp8kit_tensor_numel(&t) == -1, "numel with a negative dim");
    t = fp8kit_tensor_make(NULL, FP8KIT_F32, 3, big);
    CHECK(fp8kit_tensor_numel(&t) == -1, "numel overflow");
    t = fp8kit_tensor_make(NULL, FP8KIT_F32, 5, shp);
    CHECK(t.ndim == 5 && fp8kit_tensor_numel(&t) == -1, "ndim 5 kept and rejected by numel");
    t.ndim = -1;
    CHECK(fp8kit_tensor_numel(&t) == -1, "ndim -1");
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    CHECK(d.scheme == FP8KIT_SCHEME_MX && d.elem == FP8KIT_E4M3 && d.axis == -1 && d.rounding == FP8KIT_ROUND_FLOOR &&
              d.pow2 == 0 && d.scale_layout == FP8KIT_LAYOUT_PLAIN, "quant_desc_default");
}

/* ---------------------------------------------------------- quantize */
typedef struct qcase {
    fp8kit_quant_desc d;
    fp8kit_tensor x, q, s;
} qcase;

/* A valid quantize call on x f32 (2, 64, 256) (mx axis -2: (2, 64, 256) too). */
static qcase qbase(fp8kit_scheme sch, int axis, fp8kit_scale_layout layout)
{
    qcase c;
    c.d = fp8kit_quant_desc_default(sch);
    c.d.axis = axis;
    c.d.scale_layout = layout;
    int64_t shp[3] = {2, 64, 256};
    c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 3, shp);
    fp8kit_status st = fp8kit_quant_shapes(&c.d, &c.x, &c.q, &c.s);
    CHECK(st == FP8KIT_OK, "quant_shapes baseline scheme %d: %s", (int)sch, fp8kit_last_error(NULL));
    c.q.data = qbuf;
    c.s.data = sbuf;
    return c;
}

#define QF "fp8kit_quantize"
#define QBAD(want, sub, c) BAD(ctx, want, QF, sub, fp8kit_quantize(ctx, &(c).d, &(c).x, &(c).q, &(c).s, NULL))

static void test_quant_shapes(void)
{
    const char *fn = "fp8kit_quant_shapes";
    qcase c = qbase(FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_PLAIN);
    fp8kit_tensor q, s;
    CHECK(c.q.dtype == FP8KIT_E4M3 && c.q.ndim == 3 && c.q.shape[2] == 256, "mx q shape");
    CHECK(c.s.dtype == FP8KIT_E8M0 && c.s.ndim == 3 && c.s.shape[1] == 64 && c.s.shape[2] == 8, "mx scale shape");
    c = qbase(FP8KIT_SCHEME_MX, -2, FP8KIT_LAYOUT_BLOCKED);
    CHECK(c.q.shape[1] == 256 && c.q.shape[2] == 64, "mx axis -2 transposes q");
    CHECK(c.s.shape[0] == 2 && c.s.shape[1] == 256 && c.s.shape[2] == 4, "mx axis -2 blocked scale (256, 4)");
    c = qbase(FP8KIT_SCHEME_TENSOR, -1, FP8KIT_LAYOUT_PLAIN);
    CHECK(fp8kit_tensor_numel(&c.s) == 1 && c.s.dtype == FP8KIT_F32, "tensor scale is one f32");

    /* outputs of quant_shapes are the two structs: poison them */
    c = qbase(FP8KIT_SCHEME_ROW, -1, FP8KIT_LAYOUT_PLAIN);
#define SHAPES_BAD(want, sub, dp, xp, qp, sp)                                                       \
    do {                                                                                            \
        fk_poison(&q, sizeof q);                                                                    \
        fk_poison(&s, sizeof s);                                                                    \
        BAD(NULL, want, fn, sub, fp8kit_quant_shapes(dp, xp, qp, sp));                              \
        CHECK(fk_is_poisoned(&q, sizeof q) && fk_is_poisoned(&s, sizeof s), "quant_shapes wrote on failure"); \
    } while (0)
    SHAPES_BAD(FP8KIT_ERR_NULL_POINTER, "desc", NULL, &c.x, &q, &s);
    SHAPES_BAD(FP8KIT_ERR_NULL_POINTER, "x", &c.d, NULL, &q, &s);
    SHAPES_BAD(FP8KIT_ERR_NULL_POINTER, "q", &c.d, &c.x, NULL, &s);
    SHAPES_BAD(FP8KIT_ERR_NULL_POINTER, "scale", &c.d, &c.x, &q, NULL);
    c.d.scheme = (fp8kit_scheme)5;
    SHAPES_BAD(FP8KIT_ERR_INVALID_ARGUMENT, "scheme", &c.d, &c.x, &q, &s);
    c = qbase(FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_PLAIN);
    c.x.shape[2] = 48;
    SHAPES_BAD(FP8KIT_ERR_INVALID_SHAPE, "32", &c.d, &c.x, &q, &s);
    c.x.shape[2] = -256;
    SHAPES_BAD(FP8KIT_ERR_SIZE_OVERFLOW, "shape", &c.d, &c.x, &q, &s);
    c = qbase(FP8KIT_SCHEME_ROW, -1, FP8KIT_LAYOUT_PLAIN);
    c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 1, (int64_t[]){256});
    SHAPES_BAD(FP8KIT_ERR_INVALID_SHAPE, "ndim", &c.d, &c.x, &q, &s);
    /* the data pointer is not needed here */
    c = qbase(FP8KIT_SCHEME_ROW, -1, FP8KIT_LAYOUT_PLAIN);
    c.x.data = NULL;
    CHECK_STATUS(fp8kit_quant_shapes(&c.d, &c.x, &q, &s), FP8KIT_OK);
#undef SHAPES_BAD
}

static void test_quantize(void)
{
    /* baselines: every scheme and layout works as set up */
    const struct { fp8kit_scheme s; int axis; fp8kit_scale_layout l; } ok[] = {
        {FP8KIT_SCHEME_TENSOR, -1, 0}, {FP8KIT_SCHEME_ROW, -1, 0}, {FP8KIT_SCHEME_BLOCK1X128, -1, 0},
        {FP8KIT_SCHEME_BLOCK1X128, -1, 2}, {FP8KIT_SCHEME_BLOCK128X128, -1, 0}, {FP8KIT_SCHEME_BLOCK128X128, -1, 2},
        {FP8KIT_SCHEME_MX, -1, 0}, {FP8KIT_SCHEME_MX, -1, 1}, {FP8KIT_SCHEME_MX, -2, 0}, {FP8KIT_SCHEME_MX, -2, 1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        qcase c = qbase(ok[i].s, ok[i].axis, ok[i].l);
        GOOD(fp8kit_quantize(ctx, &c.d, &c.x, &c.q, &c.s, NULL));
    }

    qcase c = qbase(FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_PLAIN), b = c;
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, QF, "ctx", fp8kit_quantize(NULL, &c.d, &c.x, &c.q, &c.s, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, QF, "desc", fp8kit_quantize(ctx, NULL, &c.x, &c.q, &c.s, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, QF, "x", fp8kit_quantize(ctx, &c.d, NULL, &c.q, &c.s, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, QF, "q", fp8kit_quantize(ctx, &c.d, &c.x, NULL, &c.s, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, QF, "scale", fp8kit_quantize(ctx, &c.d, &c.x, &c.q, NULL, NULL));
    c.x.data = NULL;
    QBAD(FP8KIT_ERR_NULL_POINTER, "x->data", c);
    c = b, c.q.data = NULL;
    QBAD(FP8KIT_ERR_NULL_POINTER, "q->data", c);
    c = b, c.s.data = NULL;
    QBAD(FP8KIT_ERR_NULL_POINTER, "scale->data", c);

    /* invalid enums / values in the descriptor */
    c = b, c.d.scheme = (fp8kit_scheme)5;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scheme", c);
    c = b, c.d.scheme = (fp8kit_scheme)-1;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scheme", c);
    c = b, c.d.rounding = (fp8kit_rounding)2;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "rounding", c);
    c = b, c.d.scale_layout = (fp8kit_scale_layout)3;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_layout", c);
    c = b, c.d.elem = (fp8kit_dtype)99;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "elem", c);
    c = b, c.d.elem = FP8KIT_F32;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "elem", c);
    c = b, c.d.elem = FP8KIT_E8M0;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "elem", c);
    const int axes[] = {0, 1, -3, 2};
    for (int i = 0; i < 4; i++) {
        c = b, c.d.axis = axes[i];
        QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "axis", c);
    }

    /* unsupported scheme / layout / axis combinations */
    c = qbase(FP8KIT_SCHEME_BLOCK1X128, -1, 0), c.d.scale_layout = FP8KIT_LAYOUT_BLOCKED;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "blocked", c);
    c = qbase(FP8KIT_SCHEME_ROW, -1, 0), c.d.scale_layout = FP8KIT_LAYOUT_BLOCKED;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "blocked", c);
    c = b, c.d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "mn_major", c);
    c = qbase(FP8KIT_SCHEME_TENSOR, -1, 0), c.d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "mn_major", c);
    c = qbase(FP8KIT_SCHEME_ROW, -1, 0), c.d.axis = -2;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "axis", c);
    c = qbase(FP8KIT_SCHEME_BLOCK128X128, -1, 0), c.d.axis = -2;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "axis", c);

    /* dtypes */
    c = b, c.x.dtype = FP8KIT_E4M3;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "x->dtype", c);
    c = b, c.x.dtype = FP8KIT_E8M0;
    QBAD(FP8KIT_ERR_UNSUPPORTED, "x->dtype", c);
    c = b, c.x.dtype = (fp8kit_dtype)-3;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "x->dtype", c);
    c = b, c.q.dtype = FP8KIT_F32;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "q->dtype", c);
    c = b, c.q.dtype = FP8KIT_E5M2;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "q->dtype", c);
    c = b, c.s.dtype = FP8KIT_F32;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale->dtype", c);
    c = qbase(FP8KIT_SCHEME_ROW, -1, 0), c.s.dtype = FP8KIT_E8M0;
    QBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale->dtype", c);

    /* ndim and shapes */
    c = b, c.x.ndim = 5;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "ndim", c);
    c = b, c.x.ndim = -1;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "ndim", c);
    c = qbase(FP8KIT_SCHEME_BLOCK1X128, -1, 0), c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 1, (int64_t[]){256});
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "ndim", c);
    c = b, c.x.shape[1] = -64;
    QBAD(FP8KIT_ERR_SIZE_OVERFLOW, "shape[1]", c);
    c = b, c.x.shape[0] = 0;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "shape[0]", c);
    /* element count overflows int64; element count fits but bytes do not */
    c = b, c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 3, (int64_t[]){1LL << 22, 1LL << 22, 1LL << 22});
    QBAD(FP8KIT_ERR_SIZE_OVERFLOW, "overflows", c);
    c = b, c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 2, (int64_t[]){1LL << 31, 1LL << 31});
    QBAD(FP8KIT_ERR_SIZE_OVERFLOW, "overflows", c);
    /* a strided extent that overflows while the element count does not */
    c = b, c.x = fp8kit_tensor_2d(xbuf, FP8KIT_F32, 3, 256, INT64_MAX / 2);
    QBAD(FP8KIT_ERR_SIZE_OVERFLOW, "overflows", c);
    /* mx: blocked axis not a multiple of 32 */
    c = b, c.x.shape[2] = 48, c.x.strides[1] = 48, c.x.strides[0] = 64 * 48, c.q = c.x, c.q.dtype = FP8KIT_E4M3,
    c.q.data = qbuf;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "32", c);
    c = qbase(FP8KIT_SCHEME_MX, -2, 0), c.x.shape[1] = 40, c.x.strides[0] = 40 * 256;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "32", c);
    /* q must match x (transposed for axis -2) */
    c = b, c.q.shape[2] = 128, c.q.strides[1] = 128, c.q.strides[0] = 64 * 128;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "q", c);
    c = b, c.q = fp8kit_tensor_make(qbuf, FP8KIT_E4M3, 2, (int64_t[]){128, 256});
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "q", c);
    c = qbase(FP8KIT_SCHEME_MX, -2, 0), c.q = fp8kit_tensor_make(qbuf, FP8KIT_E4M3, 3, (int64_t[]){2, 64, 256});
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "transposed", c);
    /* scale must hold exactly the scheme's count */
    c = b, c.s.shape[2] = 7, c.s.strides[1] = 7, c.s.strides[0] = 64 * 7;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "scale", c);
    c = qbase(FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_BLOCKED), c.s = qbase(FP8KIT_SCHEME_MX, -1, 0).s;
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "scale", c); /* 64 rows are padded to 128 when blocked */
    c = qbase(FP8KIT_SCHEME_TENSOR, -1, 0), c.s = fp8kit_tensor_make(sbuf, FP8KIT_F32, 1, (int64_t[]){2});
    QBAD(FP8KIT_ERR_INVALID_SHAPE, "scale", c);
    c = qbase(FP8KIT_SCHEME_ROW, -1, 0), c.s.strides[0] = 64 * 2, c.s.strides[1] = 2, c.s.strides[2] = 1;
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "scale", c); /* (2, 64, 1) with a gap between rows */

    /* strides */
    c = b, c.x = fp8kit_tensor_2d(xbuf, FP8KIT_F32, 64, 256, 100);
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "strides[0]", c);
    c = b, c.x.strides[2] = 2;
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "strides[2]", c);
    c = b, c.x.strides[0] = 256 * 63;
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "strides[0]", c);
    c = b, c.q.strides[1] = 255;
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "q->strides[1]", c);
    c = b, c.q.strides[2] = 0;
    QBAD(FP8KIT_ERR_INVALID_STRIDE, "q->strides[2]", c);
    /* 4-D with leading dims that do not fold into one */
    c = qbase(FP8KIT_SCHEME_ROW, -1, 0);
    c.x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 4, (int64_t[]){2, 2, 16, 64});
    c.x.strides[0] = 2 * 16 * 64 + 64;
    c.x.data = ybuf; /* big enough for the padded extent; not written */
    BAD(ctx, FP8KIT_ERR_INVALID_STRIDE, QF, "collapsible", fp8kit_quantize(ctx, &c.d, &c.x, &c.q, &c.s, NULL));
}

/* a q with row stride > row length: rows written, the gaps left alone */
static void test_quantize_strided_q(void)
{
    qcase c = qbase(FP8KIT_SCHEME_MX, -1, 0);
    c.q.strides[1] = 300;
    c.q.strides[0] = 64 * 300;
    CHECK(2 * 64 * 300 <= (int64_t)sizeof qbuf, "qbuf size");
    GOOD(fp8kit_quantize(ctx, &c.d, &c.x, &c.q, &c.s, NULL));
    long gap_written = 0, row_unwritten = 0;
    for (int r = 0; r < 128; r++)
        for (int j = 0; j < 300; j++) {
            uint8_t v = qbuf[r * 300 + j];
            float xv = xbuf[r * 256 + (j < 256 ? j : 0)];
            if (j >= 256 && v != FK_POISON)
                gap_written++;
            if (j < 256 && xv == 0.0f && v == FK_POISON)
                row_unwritten++; /* x != 0 may legitimately encode to 0xA5 */
        }
    CHECK(gap_written == 0, "strided q: %ld padding bytes written", gap_written);
    CHECK(row_unwritten == 0, "strided q: %ld zero inputs left as poison", row_unwritten);
    CHECK(!fk_is_poisoned(sbuf, 2 * 64 * 8), "scales written");
    CHECK(fk_is_poisoned(sbuf + 2 * 64 * 8, sizeof sbuf - 2 * 64 * 8), "bytes after the scales written");
}

/* -------------------------------------------------------- dequantize */
#define DF "fp8kit_dequantize"
static void test_dequantize(void)
{
    qcase b = qbase(FP8KIT_SCHEME_BLOCK1X128, -1, 0);
    /* real q and scales to read (kept in separate buffers: qbuf/sbuf get poisoned) */
    static uint8_t q_in[XN];
    static float s_in[2 * 64 * 2];
    GOOD(fp8kit_quantize(ctx, &b.d, &b.x, &b.q, &b.s, NULL));
    memcpy(q_in, qbuf, sizeof q_in);
    memcpy(s_in, sbuf, sizeof s_in);
    b.q.data = q_in;
    b.s.data = s_in;
    fp8kit_tensor y = b.x;
    y.data = ybuf;
    qcase c = b;
    fp8kit_tensor yy = y;
#define DBAD(want, sub) BAD(ctx, want, DF, sub, fp8kit_dequantize(ctx, &c.d, &c.q, &c.s, &yy, NULL))
    GOOD(fp8kit_dequantize(ctx, &b.d, &b.q, &b.s, &y, NULL));
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, DF, "ctx", fp8kit_dequantize(NULL, &c.d, &c.q, &c.s, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, DF, "desc", fp8kit_dequantize(ctx, NULL, &c.q, &c.s, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, DF, "q", fp8kit_dequantize(ctx, &c.d, NULL, &c.s, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, DF, "scale", fp8kit_dequantize(ctx, &c.d, &c.q, NULL, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, DF, "y", fp8kit_dequantize(ctx, &c.d, &c.q, &c.s, NULL, NULL));
    yy.data = NULL;
    DBAD(FP8KIT_ERR_NULL_POINTER, "y->data");
    yy = y, c.q.data = NULL;
    DBAD(FP8KIT_ERR_NULL_POINTER, "q->data");
    c = b, c.s.data = NULL;
    DBAD(FP8KIT_ERR_NULL_POINTER, "scale->data");
    c = b, yy.dtype = FP8KIT_E4M3;
    DBAD(FP8KIT_ERR_UNSUPPORTED, "y->dtype");
    yy = y, c.q.dtype = FP8KIT_BF16;
    DBAD(FP8KIT_ERR_INVALID_ARGUMENT, "q->dtype");
    c = b, c.s.dtype = FP8KIT_E8M0;
    DBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale->dtype");
    c = b, c.d.scheme = (fp8kit_scheme)9;
    DBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scheme");
    c = b, yy.shape[2] = 128, yy.strides[1] = 128, yy.strides[0] = 64 * 128;
    DBAD(FP8KIT_ERR_INVALID_SHAPE, "q"); /* q no longer matches y; the scale count would differ too */
    yy = y, yy.strides[1] = 200;
    DBAD(FP8KIT_ERR_INVALID_STRIDE, "y->strides[1]");
    yy = y, yy.shape[0] = -2;
    DBAD(FP8KIT_ERR_SIZE_OVERFLOW, "y->shape[0]");
    /* mx with a y length that is not a multiple of 32 */
    c = qbase(FP8KIT_SCHEME_MX, -1, 0);
    c.q.data = q_in;
    c.s.data = s_in;
    yy = c.x, yy.data = ybuf, yy.shape[2] = 80, yy.strides[1] = 80, yy.strides[0] = 64 * 80;
    c.q.shape[2] = 80, c.q.strides[1] = 80, c.q.strides[0] = 64 * 80;
    DBAD(FP8KIT_ERR_INVALID_SHAPE, "32");
#undef DBAD
}

/* ------------------------------------------------------------- cast */
#define CF "fp8kit_cast"
static void test_cast(void)
{
    fp8kit_tensor x = fp8kit_tensor_make(xbuf, FP8KIT_F32, 2, (int64_t[]){64, 256});
    fp8kit_tensor y = fp8kit_tensor_make(qbuf, FP8KIT_E4M3, 2, (int64_t[]){64, 256});
    fp8kit_tensor xx = x, yy = y;
#define CBAD(want, sub) BAD(ctx, want, CF, sub, fp8kit_cast(ctx, &xx, &yy, NULL))
    GOOD(fp8kit_cast(ctx, &x, &y, NULL));
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, CF, "ctx", fp8kit_cast(NULL, &x, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, CF, "x", fp8kit_cast(ctx, NULL, &y, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, CF, "y", fp8kit_cast(ctx, &x, NULL, NULL));
    xx.data = NULL;
    CBAD(FP8KIT_ERR_NULL_POINTER, "x->data");
    xx = x, yy.data = NULL;
    CBAD(FP8KIT_ERR_NULL_POINTER, "y->data");
    yy = y, yy.dtype = FP8KIT_F32, yy.data = ybuf;
    CBAD(FP8KIT_ERR_UNSUPPORTED, "f32 -> f32");
    yy = y, yy.dtype = FP8KIT_E8M0;
    CBAD(FP8KIT_ERR_UNSUPPORTED, "e8m0");
    xx = y, xx.data = abuf, yy = y, yy.dtype = FP8KIT_E5M2;
    CBAD(FP8KIT_ERR_UNSUPPORTED, "e4m3 -> e5m2");
    xx = x, yy = y, yy.dtype = (fp8kit_dtype)17;
    CBAD(FP8KIT_ERR_INVALID_ARGUMENT, "y->dtype");
    yy = y, yy.shape[1] = 128, yy.strides[0] = 128;
    CBAD(FP8KIT_ERR_INVALID_SHAPE, "shape");
    yy = fp8kit_tensor_make(qbuf, FP8KIT_E4M3, 3, (int64_t[]){1, 64, 256});
    CBAD(FP8KIT_ERR_INVALID_SHAPE, "shape");
    yy = y, yy.strides[0] = 255;
    CBAD(FP8KIT_ERR_INVALID_STRIDE, "y->strides[0]");
    yy = y, xx.shape[0] = -64;
    CBAD(FP8KIT_ERR_SIZE_OVERFLOW, "x->shape[0]");
    xx = x, xx.ndim = 7;
    CBAD(FP8KIT_ERR_INVALID_SHAPE, "ndim");
#undef CBAD
}

/* ------------------------------------------------------------- GEMM */
#define GF "fp8kit_gemm"
#define M_ 64
#define N_ 96
#define K_ 256
typedef struct gcase {
    fp8kit_gemm_desc d;
    fp8kit_gemm_args a;
} gcase;

static gcase gbase(fp8kit_scale_mode mode, fp8kit_scale_layout layout)
{
    gcase g;
    memset(&g, 0, sizeof g);
    g.d.scale_a = g.d.scale_b = mode;
    g.d.scale_layout = layout;
    g.a.a = fp8kit_tensor_make(abuf, FP8KIT_E4M3, 2, (int64_t[]){M_, K_});
    g.a.b = fp8kit_tensor_make(bbuf, FP8KIT_E4M3, 2, (int64_t[]){N_, K_});
    g.a.d = fp8kit_tensor_make(dbuf, FP8KIT_BF16, 2, (int64_t[]){M_, N_});
    g.a.alpha = 1.0f;
    switch (mode) {
    case FP8KIT_SCALE_NONE: break;
    case FP8KIT_SCALE_TENSOR:
        g.a.scale_a = fp8kit_tensor_make(sabuf, FP8KIT_F32, 0, NULL);
        g.a.scale_b = fp8kit_tensor_make(sbbuf, FP8KIT_F32, 1, (int64_t[]){1});
        break;
    case FP8KIT_SCALE_ROW:
        g.a.scale_a = fp8kit_tensor_make(sabuf, FP8KIT_F32, 2, (int64_t[]){M_, 1});
        g.a.scale_b = fp8kit_tensor_make(sbbuf, FP8KIT_F32, 1, (int64_t[]){N_});
        break;
    case FP8KIT_SCALE_BLOCK:
        g.a.scale_a = layout == FP8KIT_LAYOUT_MN_MAJOR ? fp8kit_tensor_make(sabuf, FP8KIT_F32, 2, (int64_t[]){2, M_})
                                                       : fp8kit_tensor_make(sabuf, FP8KIT_F32, 2, (int64_t[]){M_, 2});
        g.a.scale_b = fp8kit_tensor_make(sbbuf, FP8KIT_F32, 2, (int64_t[]){1, 2});
        break;
    case FP8KIT_SCALE_MX:
        g.a.scale_a = layout == FP8KIT_LAYOUT_BLOCKED ? fp8kit_tensor_make(sabuf, FP8KIT_E8M0, 2, (int64_t[]){128, 8})
                                                      : fp8kit_tensor_make(sabuf, FP8KIT_E8M0, 2, (int64_t[]){M_, 8});
        g.a.scale_b = layout == FP8KIT_LAYOUT_BLOCKED ? fp8kit_tensor_make(sbbuf, FP8KIT_E8M0, 2, (int64_t[]){128, 8})
                                                      : fp8kit_tensor_make(sbbuf, FP8KIT_E8M0, 2, (int64_t[]){N_, 8});
        break;
    }
    return g;
}

#define GBAD(want, sub, g) BAD(ctx, want, GF, sub, fp8kit_gemm(ctx, &(g).d, &(g).a, NULL))

static void fill_gemm_inputs(void)
{
    for (size_t i = 0; i < sizeof abuf; i++)
        abuf[i] = (uint8_t)(fk_rng_u32(&rng) & 0x77); /* finite, |v| <= 240 */
    for (size_t i = 0; i < sizeof bbuf; i++)
        bbuf[i] = (uint8_t)(fk_rng_u32(&rng) & 0x77);
    for (int i = 0; i < 1024; i++) {
        sabuf[i] = sbbuf[i] = 0.01f * (float)(1 + i % 7);
    }
    uint8_t *ea = (uint8_t *)sabuf, *eb = (uint8_t *)sbbuf; /* e8m0 views start with sane bytes */
    for (int i = 0; i < 1024; i++)
        ea[i] = eb[i] = (uint8_t)(120 + i % 5);
    for (int i = 0; i < 256; i++)
        biasbuf[i] = 0.5f;
    for (int i = 0; i < M_ * N_; i++)
        cbuf[i] = 1.0f;
    scaled_in[0] = 2.0f;
}

static void test_gemm(void)
{
    fill_gemm_inputs();
    /* baselines */
    const struct { fp8kit_scale_mode m; fp8kit_scale_layout l; } ok[] = {
        {FP8KIT_SCALE_NONE, 0}, {FP8KIT_SCALE_TENSOR, 0}, {FP8KIT_SCALE_ROW, 0}, {FP8KIT_SCALE_BLOCK, 0},
        {FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR}, {FP8KIT_SCALE_MX, 0}, {FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        gcase g = gbase(ok[i].m, ok[i].l);
        GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    }
    gcase b = gbase(FP8KIT_SCALE_ROW, 0), g = b;
    size_t ws = 12345;
    CHECK_STATUS(fp8kit_gemm_workspace_size(ctx, &g.d, &g.a, &ws), FP8KIT_OK);
    CHECK(ws == 0, "CPU workspace %zu", ws);

    BAD(NULL, FP8KIT_ERR_NULL_POINTER, GF, "ctx", fp8kit_gemm(NULL, &g.d, &g.a, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "desc", fp8kit_gemm(ctx, NULL, &g.a, NULL));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "args", fp8kit_gemm(ctx, &g.d, NULL, NULL));
    /* workspace query: same validation, *bytes untouched on failure */
    const char *WF = "fp8kit_gemm_workspace_size";
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, WF, "bytes", fp8kit_gemm_workspace_size(ctx, &g.d, &g.a, NULL));
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, GF, "ctx", fp8kit_gemm_workspace_size(NULL, &g.d, &g.a, &ws));
    g.a.b.shape[1] = K_ - 32;
    ws = 777;
    BAD(ctx, FP8KIT_ERR_INVALID_SHAPE, GF, "K", fp8kit_gemm_workspace_size(ctx, &g.d, &g.a, &ws));
    CHECK(ws == 777, "failed workspace query wrote *bytes");

    /* descriptor enums and combinations */
    g = b, g.d.scale_a = (fp8kit_scale_mode)5;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_a", g);
    g = b, g.d.scale_b = (fp8kit_scale_mode)-1;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_b", g);
    g = b, g.d.scale_layout = (fp8kit_scale_layout)3;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_layout", g);
    g = b, g.d.bias = (fp8kit_bias_mode)3;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "bias", g);
    g = b, g.d.act = (fp8kit_activation)FP8KIT_ACT_COUNT;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "act", g);
    g = b, g.d.out_quant = (fp8kit_out_quant)4;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "out_quant", g);
    g = b, g.d.out_rounding = (fp8kit_rounding)2;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "out_rounding", g);
    g = gbase(FP8KIT_SCALE_BLOCK, 0), g.d.scale_b = FP8KIT_SCALE_TENSOR, g.a.scale_b = gbase(FP8KIT_SCALE_TENSOR, 0).a.scale_b;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "both", g);
    g = gbase(FP8KIT_SCALE_ROW, 0), g.d.scale_b = FP8KIT_SCALE_BLOCK, g.a.scale_b = gbase(FP8KIT_SCALE_BLOCK, 0).a.scale_b;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "both", g);
    g = gbase(FP8KIT_SCALE_MX, 0), g.d.scale_a = FP8KIT_SCALE_NONE;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "both", g);
    g = gbase(FP8KIT_SCALE_MX, 0), g.d.scale_b = FP8KIT_SCALE_BLOCK;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "both", g);
    g = gbase(FP8KIT_SCALE_TENSOR, 0), g.d.scale_layout = FP8KIT_LAYOUT_BLOCKED;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "blocked", g);
    g = gbase(FP8KIT_SCALE_MX, 0), g.d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "mn_major", g);

    /* A and B */
    g = b, g.a.a.data = NULL;
    GBAD(FP8KIT_ERR_NULL_POINTER, "a->data", g);
    g = b, memset(&g.a.b, 0, sizeof g.a.b);
    GBAD(FP8KIT_ERR_NULL_POINTER, "b->data", g);
    g = b, g.a.a.dtype = FP8KIT_BF16;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "e4m3", g);
    g = b, g.a.b.dtype = FP8KIT_E8M0;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "e4m3", g);
    g = b, g.a.a = fp8kit_tensor_make(abuf, FP8KIT_E4M3, 3, (int64_t[]){1, M_, K_});
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "2-D", g);
    g = b, g.a.b.shape[1] = K_ - 32, g.a.b.strides[0] = K_ - 32;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "K", g);
    g = b, g.a.a.shape[0] = -M_;
    GBAD(FP8KIT_ERR_SIZE_OVERFLOW, "shape[0]", g);
    g = b, g.a.a = fp8kit_tensor_make(abuf, FP8KIT_E4M3, 2, (int64_t[]){1LL << 40, 1LL << 40});
    GBAD(FP8KIT_ERR_SIZE_OVERFLOW, "overflows", g);
    g = b, g.a.a.strides[0] = K_ - 1;
    GBAD(FP8KIT_ERR_INVALID_STRIDE, "a->strides[0]", g);
    g = b, g.a.b.strides[1] = 2;
    GBAD(FP8KIT_ERR_INVALID_STRIDE, "b->strides[1]", g);
    g = gbase(FP8KIT_SCALE_MX, 0);
    g.a.a.shape[1] = g.a.b.shape[1] = K_ - 16; /* row strides stay K_: a valid strided view */
    g.a.scale_a.shape[1] = g.a.scale_b.shape[1] = 7;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "32", g);

    /* operand scales */
    g = gbase(FP8KIT_SCALE_TENSOR, 0), memset(&g.a.scale_a, 0, sizeof g.a.scale_a);
    GBAD(FP8KIT_ERR_NULL_POINTER, "scale_a", g);
    g = gbase(FP8KIT_SCALE_MX, 0), g.a.scale_b.data = NULL;
    GBAD(FP8KIT_ERR_NULL_POINTER, "scale_b", g);
    g = b, g.a.scale_b.shape[0] = N_ + 1;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_b", g);
    g = b, g.a.scale_a.dtype = FP8KIT_BF16;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_a", g);
    g = gbase(FP8KIT_SCALE_TENSOR, 0), g.a.scale_a = fp8kit_tensor_make(sabuf, FP8KIT_F32, 1, (int64_t[]){2});
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_a", g);
    g = gbase(FP8KIT_SCALE_BLOCK, 0), g.a.scale_a.shape[1] = 1;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_a", g);
    g = gbase(FP8KIT_SCALE_BLOCK, 0), g.a.scale_b = fp8kit_tensor_make(sbbuf, FP8KIT_F32, 2, (int64_t[]){1, 3});
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_b", g);
    g = gbase(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR), g.a.scale_a.shape[1] = M_ - 4;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_a", g);
    g = gbase(FP8KIT_SCALE_MX, 0), g.a.scale_a.dtype = FP8KIT_F32;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_a", g);
    g = gbase(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED), g.a.scale_a = gbase(FP8KIT_SCALE_MX, 0).a.scale_a;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_a", g); /* blocked needs M padded to 128 */
    g = b, g.a.scale_a.strides[0] = 2, g.a.scale_a.strides[1] = 1;
    GBAD(FP8KIT_ERR_INVALID_STRIDE, "scale_a", g);

    /* D */
    g = b, g.a.d.data = NULL;
    GBAD(FP8KIT_ERR_NULL_POINTER, "d->data", g);
    g = b, g.a.d.shape[1] = N_ + 1, g.a.d.strides[0] = N_ + 1;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "d", g);
    g = b, g.a.d = fp8kit_tensor_make(dbuf, FP8KIT_BF16, 1, (int64_t[]){M_ * N_});
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "d", g);
    g = b, g.a.d.dtype = FP8KIT_E8M0;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "d->dtype", g);
    g = b, g.a.d.dtype = (fp8kit_dtype)6;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "d->dtype", g);
    g = b, g.a.d.strides[0] = N_ - 1;
    GBAD(FP8KIT_ERR_INVALID_STRIDE, "d->strides[0]", g);

    /* C and bias */
    g = b, g.a.beta = 0.5f;
    GBAD(FP8KIT_ERR_NULL_POINTER, "c", g);
    g.a.c = fp8kit_tensor_make(cbuf, FP8KIT_F32, 2, (int64_t[]){M_, N_});
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    gcase gc = g;
    g = gc, g.a.c.shape[0] = M_ - 1;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "c", g);
    g = gc, g.a.c.dtype = FP8KIT_E4M3;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "c->dtype", g);
    g = b, g.a.c.dtype = FP8KIT_E4M3; /* C ignored when beta == 0 */
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    g = b, g.d.bias = FP8KIT_BIAS_COL;
    GBAD(FP8KIT_ERR_NULL_POINTER, "bias", g);
    g.a.bias = fp8kit_tensor_make(biasbuf, FP8KIT_F32, 1, (int64_t[]){N_});
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    gcase gb = g;
    g = gb, g.a.bias.shape[0] = M_;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "bias", g);
    g = gb, g.d.bias = FP8KIT_BIAS_ROW;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "bias", g);
    g = gb, g.a.bias.dtype = FP8KIT_E5M2;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "bias->dtype", g);

    /* output quantization */
    gcase gq = b;
    gq.a.d.dtype = FP8KIT_E4M3;
    GOOD(fp8kit_gemm(ctx, &gq.d, &gq.a, NULL)); /* plain fp8 cast of y */
    g = gq, g.d.out_quant = FP8KIT_OUTQ_SCALED;
    GBAD(FP8KIT_ERR_NULL_POINTER, "scale_d", g);
    g.a.scale_d = fp8kit_tensor_make(scaled_in, FP8KIT_F32, 0, NULL);
    g.a.amax_d = amaxbuf;
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    CHECK(!fk_is_poisoned(amaxbuf, sizeof amaxbuf), "amax_d written");
    gcase gs = g;
    g = gs, g.a.scale_d.dtype = FP8KIT_BF16;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_d", g);
    g = gs, g.a.d.dtype = FP8KIT_BF16;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "e4m3/e5m2", g);
    g = gq, g.a.amax_d = amaxbuf;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "amax_d", g);
    g = gq, g.d.out_quant = FP8KIT_OUTQ_MX, g.d.out_hp = FP8KIT_BF16;
    g.a.scale_d = fp8kit_tensor_make(sdbuf, FP8KIT_E8M0, 2, (int64_t[]){M_, N_ / 32});
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    gcase gm = g;
    g = gm, g.d.out_hp = FP8KIT_E4M3;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "out_hp", g);
    g = gm, g.a.scale_d.shape[1] = 2;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_d", g);
    g = gm, g.a.scale_d.dtype = FP8KIT_F32;
    GBAD(FP8KIT_ERR_INVALID_ARGUMENT, "scale_d", g);
    g = gm, g.a.d.dtype = FP8KIT_F16;
    GBAD(FP8KIT_ERR_UNSUPPORTED, "e4m3/e5m2", g);
    /* OUTQ_MX with N % 32 != 0: N = 80 */
    g = gm, g.a.b.shape[0] = 80, g.a.scale_b.shape[0] = 80, g.a.d.shape[1] = 80, g.a.d.strides[0] = 80;
    g.a.scale_d.shape[1] = 2;
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "N", g);
    g = gq, g.d.out_quant = FP8KIT_OUTQ_BLOCK1X128, g.d.out_hp = FP8KIT_F32;
    g.a.scale_d = fp8kit_tensor_make(sdbuf, FP8KIT_F32, 2, (int64_t[]){M_, 1});
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    g.a.scale_d = fp8kit_tensor_make(sdbuf, FP8KIT_F32, 2, (int64_t[]){M_, 2});
    GBAD(FP8KIT_ERR_INVALID_SHAPE, "scale_d", g);
    g.a.scale_d = fp8kit_tensor_make(NULL, FP8KIT_F32, 2, (int64_t[]){M_, 1});
    GBAD(FP8KIT_ERR_NULL_POINTER, "scale_d", g);
}

/* operands at odd addresses and leading dims: valid on the CPU (alignment is
 * a CUDA/TMA rule) and equal to the aligned result */
static void test_gemm_unaligned(void)
{
    static uint8_t a2[M_ * (K_ + 1) + 1], b2[N_ * (K_ + 1) + 1];
    static unsigned char d_ref[M_ * N_ * 2];
    gcase g = gbase(FP8KIT_SCALE_TENSOR, 0);
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    memcpy(d_ref, dbuf, sizeof d_ref);
    for (int i = 0; i < M_; i++)
        memcpy(a2 + 1 + i * (K_ + 1), abuf + i * K_, K_);
    for (int i = 0; i < N_; i++)
        memcpy(b2 + 1 + i * (K_ + 1), bbuf + i * K_, K_);
    g.a.a = fp8kit_tensor_2d(a2 + 1, FP8KIT_E4M3, M_, K_, K_ + 1);
    g.a.b = fp8kit_tensor_2d(b2 + 1, FP8KIT_E4M3, N_, K_, K_ + 1);
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    CHECK(memcmp(dbuf, d_ref, sizeof d_ref) == 0, "unaligned operands change D");
}

/* fp8kit_gemm_call_run: the one-struct form of fp8kit_gemm (the Python hot path's call) */
static void test_gemm_call(void)
{
    static unsigned char d_ref[M_ * N_ * 2];
    gcase g = gbase(FP8KIT_SCALE_ROW, 0);
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    memcpy(d_ref, dbuf, sizeof d_ref);
    fp8kit_gemm_call c = {ctx, &g.d, &g.a, NULL};
    GOOD(fp8kit_gemm_call_run(&c));
    CHECK(memcmp(dbuf, d_ref, sizeof d_ref) == 0, "fp8kit_gemm_call_run D differs from fp8kit_gemm's");
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, "fp8kit_gemm_call_run", "call", fp8kit_gemm_call_run(NULL));
    c.ctx = NULL;
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, GF, "ctx", fp8kit_gemm_call_run(&c));
    c.ctx = ctx, c.desc = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "desc", fp8kit_gemm_call_run(&c));
    c.desc = &g.d, c.args = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "args", fp8kit_gemm_call_run(&c));
    /* every fp8kit_gemm check applies: a bad K, a bad enum, a NULL operand, right after a good call */
    c.args = &g.a;
    GOOD(fp8kit_gemm_call_run(&c));
    gcase b = g;
    c.desc = &b.d, c.args = &b.a;
    b.a.b.shape[1] = K_ - 32;
    BAD(ctx, FP8KIT_ERR_INVALID_SHAPE, GF, "K", fp8kit_gemm_call_run(&c));
    b = g, b.d.act = (fp8kit_activation)9;
    BAD(ctx, FP8KIT_ERR_INVALID_ARGUMENT, GF, "act", fp8kit_gemm_call_run(&c));
    b = g, b.a.d.data = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "d", fp8kit_gemm_call_run(&c));
}

/* fp8kit_gemm_call_ptrs: one prepared call (pointers NULL in its args), the data
 * pointers and the stream given per call as a packed buffer (the Python hot path's call) */
static void test_gemm_call_ptrs(void)
{
    static unsigned char d_ref[M_ * N_ * 2];
    const char *PF = "fp8kit_gemm_call_ptrs";
    gcase g = gbase(FP8KIT_SCALE_ROW, 0);
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    memcpy(d_ref, dbuf, sizeof d_ref);
    gcase t = g;
    t.a.a.data = t.a.b.data = t.a.scale_a.data = t.a.scale_b.data = t.a.d.data = NULL;
    const gcase t0 = t;
    fp8kit_gemm_call c = {ctx, &t.d, &t.a, (void *)&c}; /* call->stream is not read */
    void *p[7] = {abuf, bbuf, sabuf, sbbuf, NULL, dbuf, NULL};
    unsigned char packed[1 + sizeof p]; /* an unaligned buffer */
    memcpy(packed + 1, p, sizeof p);
    GOOD(fp8kit_gemm_call_ptrs(&c, packed + 1));
    CHECK(memcmp(dbuf, d_ref, sizeof d_ref) == 0, "fp8kit_gemm_call_ptrs D differs from fp8kit_gemm's");
    CHECK(memcmp(&t, &t0, sizeof t) == 0, "fp8kit_gemm_call_ptrs changed the prepared args");
    GOOD(fp8kit_gemm_call_ptrs(&c, p));
    CHECK(memcmp(dbuf, d_ref, sizeof d_ref) == 0, "fp8kit_gemm_call_ptrs D differs (aligned ptrs)");
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, PF, "call", fp8kit_gemm_call_ptrs(NULL, p));
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, PF, "ptrs", fp8kit_gemm_call_ptrs(&c, NULL));
    c.args = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, PF, "args", fp8kit_gemm_call_ptrs(&c, p));
    c.args = &t.a, c.ctx = NULL;
    BAD(NULL, FP8KIT_ERR_NULL_POINTER, GF, "ctx", fp8kit_gemm_call_ptrs(&c, p));
    c.ctx = ctx, c.desc = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "desc", fp8kit_gemm_call_ptrs(&c, p));
    c.desc = &t.d;
    /* every fp8kit_gemm check applies, right after a good call: NULL operands, a bad K, a bad enum */
    GOOD(fp8kit_gemm_call_ptrs(&c, p));
    p[1] = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "b", fp8kit_gemm_call_ptrs(&c, p));
    p[1] = bbuf, p[3] = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "scale_b", fp8kit_gemm_call_ptrs(&c, p));
    p[3] = sbbuf, p[5] = NULL;
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "d", fp8kit_gemm_call_ptrs(&c, p));
    p[5] = dbuf;
    t.a.b.shape[1] = K_ - 32;
    BAD(ctx, FP8KIT_ERR_INVALID_SHAPE, GF, "K", fp8kit_gemm_call_ptrs(&c, p));
    t = t0, t.d.act = (fp8kit_activation)9;
    BAD(ctx, FP8KIT_ERR_INVALID_ARGUMENT, GF, "act", fp8kit_gemm_call_ptrs(&c, p));
    t = t0, t.d.bias = FP8KIT_BIAS_COL; /* a bias the template describes but ptrs[4] leaves NULL */
    t.a.bias = fp8kit_tensor_make(NULL, FP8KIT_F32, 1, (int64_t[]){N_});
    BAD(ctx, FP8KIT_ERR_NULL_POINTER, GF, "bias", fp8kit_gemm_call_ptrs(&c, p));
    t = t0;
    GOOD(fp8kit_gemm_call_ptrs(&c, p));
    CHECK(memcmp(dbuf, d_ref, sizeof d_ref) == 0, "fp8kit_gemm_call_ptrs D differs after the bad calls");
}

int main(void)
{
    rng = fk_rng_seeded("test_api");
    for (int i = 0; i < XN; i++)
        xbuf[i] = (float)fk_rng_normal(&rng);
    xbuf[5] = 0.0f; /* a zero input for the strided-q check */
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_api");
    test_names();
    test_ctx();
    test_tensor_helpers();
    test_quant_shapes();
    test_quantize();
    test_quantize_strided_q();
    test_dequantize();
    test_cast();
    test_gemm();
    test_gemm_unaligned();
    test_gemm_call();
    test_gemm_call_ptrs();
    printf("test_api: %ld bad calls checked (status, message, outputs untouched, no plan added)\n", n_bad_cases);
    CHECK_STATUS(fp8kit_ctx_destroy(ctx), FP8KIT_OK);
    return fk_test_summary("test_api");
}
