/* test_hostile_api.c - hostile input for the public C API on the CPU backend
 * (issue 21): a thread count past the bound; strides and dims whose extents
 * overflow int64 (shape x stride of 2^63 on a tensor whose strided extent
 * still fits); data pointers one byte off their element alignment at every
 * entry point (FP8KIT_ERR_MISALIGNED); outputs overlapping another output or
 * an input (FP8KIT_ERR_INVALID_ARGUMENT naming both; GEMM D may be exactly C,
 * and rows interleaved at one stride are told apart exactly); infinite fp32
 * scales given to dequantize (a NaN group, as the mx byte 255). Each bad call
 * must return its
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

/* A bump allocator over the arena (256-byte aligned blocks); arena_reset() frees all. */
static size_t arena_top;
static void arena_reset(void) { arena_top = 0; }
static void *take(size_t n)
{
    void *p = arena + arena_top;
    arena_top += (n + 255) / 256 * 256 + 256; /* a gap: a pointer moved by a few bytes stays inside */
    if (arena_top > ARENA) {
        fprintf(stderr, "test_hostile_api: arena exhausted\n");
        exit(1);
    }
    return p;
}
static void *off(void *p, int bytes) { return (char *)p + bytes; }
static void fill_f32(void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ((float *)p)[i] = (float)((i * 37) % 101) / 16.0f - 3.0f;
}
static void fill_u8(void *p, int64_t n, uint8_t v) { memset(p, v, (size_t)n); }

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

/* ------------------------------------------ item 4: misaligned pointers */
/* Each case starts from a call that succeeds, moves one data pointer by one
 * byte (two for the int32 offsets) and expects FP8KIT_ERR_MISALIGNED naming
 * that argument; a pointer to 1-byte elements (fp8 codes, e8m0 scales) may
 * sit anywhere. The GEMM cases repeat the good call's metadata, so they go
 * through the per-thread fast path that skips the full checks. */
#define MIS FP8KIT_ERR_MISALIGNED
static void test_misaligned_quant(void)
{
    const char *QF = "fp8kit_quantize", *DF = "fp8kit_dequantize", *BF = "fp8kit_quantize_mx_both", *CF = "fp8kit_cast";
    int64_t shp[2] = {64, 256};
    arena_reset();
    const fp8kit_scheme schemes[] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK1X128,
                                     FP8KIT_SCHEME_BLOCK128X128, FP8KIT_SCHEME_MX};
    const fp8kit_dtype xts[] = {FP8KIT_F32, FP8KIT_BF16, FP8KIT_F16};
    void *xb = take(64 * 256 * 4), *qb = take(64 * 256), *sb = take(64 * 8 * 4), *yb = take(64 * 256 * 4);
    void *sb2 = take(64 * 8);
    fill_f32(xb, 64 * 256);
    for (int si = 0; si < 5; si++)
        for (int ti = 0; ti < 3; ti++) {
            fp8kit_quant_desc d = fp8kit_quant_desc_default(schemes[si]);
            if (si == 3 && ti == 0)
                d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
            const int s1 = schemes[si] == FP8KIT_SCHEME_MX; /* e8m0 scales: 1-byte elements */
            fp8kit_tensor x = fp8kit_tensor_make(xb, xts[ti], 2, shp), q, sc;
            GOOD(fp8kit_quant_shapes(&d, &x, &q, &sc));
            q.data = qb, sc.data = sb;
            fp8kit_tensor y = x;
            y.data = yb;
            GOOD(fp8kit_quantize(ctx, &d, &x, &q, &sc, NULL));
            GOOD(fp8kit_dequantize(ctx, &d, &q, &sc, &y, NULL));
            fp8kit_tensor t = x;
            t.data = off(xb, 1);
            BAD(MIS, QF, "x->data", "aligned", fp8kit_quantize(ctx, &d, &t, &q, &sc, NULL));
            t = y, t.data = off(yb, 1);
            BAD(MIS, DF, "y->data", "aligned", fp8kit_dequantize(ctx, &d, &q, &sc, &t, NULL));
            if (xts[ti] != FP8KIT_F32) { /* 2-byte elements: 2-byte alignment is enough */
                t = x, t.data = off(xb, 2);
                GOOD(fp8kit_quantize(ctx, &d, &t, &q, &sc, NULL));
                t = y, t.data = off(yb, 2);
                GOOD(fp8kit_dequantize(ctx, &d, &q, &sc, &t, NULL));
            }
            t = sc, t.data = off(sb, 1);
            if (s1) {
                GOOD(fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
                GOOD(fp8kit_dequantize(ctx, &d, &q, &t, &y, NULL));
            } else {
                BAD(MIS, QF, "scale->data", "aligned", fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
                BAD(MIS, DF, "scale->data", "aligned", fp8kit_dequantize(ctx, &d, &q, &t, &y, NULL));
            }
            t = q, t.data = off(qb, 1); /* fp8 codes: any address */
            GOOD(fp8kit_quantize(ctx, &d, &x, &t, &sc, NULL));
            GOOD(fp8kit_dequantize(ctx, &d, &t, &sc, &y, NULL));
        }
    /* both axes at once: x misaligned; the e8m0 / fp8 outputs may sit anywhere */
    fp8kit_quant_desc md = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    fp8kit_tensor x = fp8kit_tensor_make(xb, FP8KIT_F32, 2, shp), qr, sr, qc, scl;
    md.axis = -1;
    GOOD(fp8kit_quant_shapes(&md, &x, &qr, &sr));
    md.axis = -2;
    GOOD(fp8kit_quant_shapes(&md, &x, &qc, &scl));
    qr.data = qb, sr.data = sb, qc.data = yb, scl.data = sb2;
    GOOD(fp8kit_quantize_mx_both(ctx, &md, &x, &qr, &sr, &qc, &scl, NULL));
    fp8kit_tensor t = x;
    t.data = off(xb, 1);
    BAD(MIS, BF, "x->data", "aligned", fp8kit_quantize_mx_both(ctx, &md, &t, &qr, &sr, &qc, &scl, NULL));
    t = x, t.dtype = FP8KIT_BF16, t.data = off(xb, 3);
    BAD(MIS, BF, "x->data", "aligned", fp8kit_quantize_mx_both(ctx, &md, &t, &qr, &sr, &qc, &scl, NULL));
    qr.data = off(qb, 1), sr.data = off(sb, 1), qc.data = off(yb, 1), scl.data = off(sb2, 1);
    GOOD(fp8kit_quantize_mx_both(ctx, &md, &x, &qr, &sr, &qc, &scl, NULL));
    /* casts, both directions */
    for (int ti = 0; ti < 3; ti++) {
        fp8kit_tensor hp = fp8kit_tensor_make(xb, xts[ti], 2, shp), f8 = fp8kit_tensor_make(qb, FP8KIT_E5M2, 2, shp);
        GOOD(fp8kit_cast(ctx, &hp, &f8, NULL));
        GOOD(fp8kit_cast(ctx, &f8, &hp, NULL));
        t = hp, t.data = off(xb, 1);
        BAD(MIS, CF, "x->data", "aligned", fp8kit_cast(ctx, &t, &f8, NULL));
        BAD(MIS, CF, "y->data", "aligned", fp8kit_cast(ctx, &f8, &t, NULL));
        t = f8, t.data = off(qb, 1);
        GOOD(fp8kit_cast(ctx, &hp, &t, NULL));
        GOOD(fp8kit_cast(ctx, &t, &hp, NULL));
    }
}

/* a GEMM call: M 32, N 48, K 64; row scales for A, a tensor scale for B, a
 * bf16 column bias, f32 C with beta 0.5, bf16 D */
typedef struct {
    fp8kit_gemm_desc d;
    fp8kit_gemm_args a;
} gcall;
enum { GM = 32, GN = 48, GK = 64 };
static gcall gemm_base(void)
{
    gcall g;
    memset(&g, 0, sizeof g);
    g.d.scale_a = FP8KIT_SCALE_ROW;
    g.d.scale_b = FP8KIT_SCALE_TENSOR;
    g.d.bias = FP8KIT_BIAS_COL;
    void *a = take(GM * GK), *b = take(GN * GK), *sa = take(GM * 4), *sb = take(4), *bias = take(GN * 2);
    void *c = take(GM * GN * 4), *d = take(GM * GN * 2);
    for (int i = 0; i < GM * GK; i++)
        ((uint8_t *)a)[i] = (uint8_t)(0x30 + i % 17);
    for (int i = 0; i < GN * GK; i++)
        ((uint8_t *)b)[i] = (uint8_t)(0xB0 + i % 13);
    fill_f32(sa, GM);
    *(float *)sb = 0.5f;
    fill_u8(bias, GN * 2, 0x3F);
    fill_f32(c, GM * GN);
    g.a.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, GM, GK, GK);
    g.a.b = fp8kit_tensor_2d(b, FP8KIT_E4M3, GN, GK, GK);
    g.a.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, (int64_t[]){GM});
    g.a.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 0, NULL);
    g.a.alpha = 1.0f;
    g.a.beta = 0.5f;
    g.a.c = fp8kit_tensor_2d(c, FP8KIT_F32, GM, GN, GN);
    g.a.bias = fp8kit_tensor_make(bias, FP8KIT_BF16, 1, (int64_t[]){GN});
    g.a.d = fp8kit_tensor_2d(d, FP8KIT_BF16, GM, GN, GN);
    return g;
}

/* gemm_base with fp8 D quantized by a given scale_d, amax_d written, no C or bias */
static gcall gemm_outq_base(void)
{
    gcall o = gemm_base();
    o.d.bias = FP8KIT_BIAS_NONE, o.a.beta = 0.0f;
    o.d.out_quant = FP8KIT_OUTQ_SCALED;
    o.a.d.dtype = FP8KIT_E4M3;
    float *sd = (float *)take(8);
    *sd = 2.0f;
    o.a.scale_d = fp8kit_tensor_make(sd, FP8KIT_F32, 0, NULL);
    o.a.amax_d = (float *)take(8);
    return o;
}

/* the GEMM call g with the data pointer of one operand moved by `by` bytes */
static gcall gcall_tmp;
static fp8kit_status gemm_moved(fp8kit_tensor *which, int by)
{
    which->data = off(which->data, by);
    return fp8kit_gemm(ctx, &gcall_tmp.d, &gcall_tmp.a, NULL);
}
#define GEMM_MOVED(g, field, by) (gcall_tmp = (g), gemm_moved(&gcall_tmp.a.field, by))

static void test_misaligned_gemm(void)
{
    const char *GF = "fp8kit_gemm";
    arena_reset();
    gcall g = gemm_base();
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    /* fast path (same metadata as the good call) and full path (a new plan key) alike */
    for (int path = 0; path < 2; path++) {
        if (path == 1)
            g.a.alpha = 2.0f, g.a.d.dtype = FP8KIT_F32, g.a.d.data = take(GM * GN * 4);
        GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
        BAD(MIS, GF, "scale_a->data", "aligned", GEMM_MOVED(g, scale_a, 1));
        BAD(MIS, GF, "scale_b->data", "aligned", GEMM_MOVED(g, scale_b, 2));
        BAD(MIS, GF, "c->data", "aligned", GEMM_MOVED(g, c, 1));
        BAD(MIS, GF, "bias->data", "aligned", GEMM_MOVED(g, bias, 1));
        BAD(MIS, GF, "d->data", "aligned", GEMM_MOVED(g, d, path ? 2 : 1));
        GOOD(GEMM_MOVED(g, a, 1)); /* fp8 operands: any address */
        GOOD(GEMM_MOVED(g, b, 3));
        GOOD(GEMM_MOVED(g, bias, 2)); /* bf16: 2-byte aligned */
    }
    size_t ws = 777;
    gcall t = g;
    t.a.scale_a.data = off(t.a.scale_a.data, 1);
    BAD(MIS, GF, "scale_a->data", "aligned", fp8kit_gemm_workspace_size(ctx, &t.d, &t.a, &ws));
    CHECK(ws == 777, "a failing workspace_size wrote *bytes");
    /* the prepared-call form (the Python hot path) */
    fp8kit_gemm_call call = {ctx, &g.d, &g.a, NULL};
    GOOD(fp8kit_gemm_call_run(&call));
    void *p[7] = {g.a.a.data, g.a.b.data, g.a.scale_a.data, g.a.scale_b.data, g.a.bias.data, g.a.d.data, NULL};
    GOOD(fp8kit_gemm_call_ptrs(&call, p));
    p[2] = off(p[2], 1);
    BAD(MIS, GF, "scale_a->data", "aligned", fp8kit_gemm_call_ptrs(&call, p));
    p[2] = g.a.scale_a.data, p[5] = off(p[5], 2);
    BAD(MIS, GF, "d->data", "aligned", fp8kit_gemm_call_ptrs(&call, p));

    /* fused output quantization: scale_d (input or output scales) and amax_d */
    gcall o = gemm_outq_base();
    GOOD(fp8kit_gemm(ctx, &o.d, &o.a, NULL));
    GOOD(GEMM_MOVED(o, d, 1)); /* fp8 D */
    BAD(MIS, GF, "scale_d->data", "aligned", GEMM_MOVED(o, scale_d, 1));
    gcall t2 = o;
    t2.a.amax_d = (float *)off(o.a.amax_d, 2);
    BAD(MIS, GF, "amax_d", "aligned", fp8kit_gemm(ctx, &t2.d, &t2.a, NULL));
    o.d.out_quant = FP8KIT_OUTQ_BLOCK1X128, o.d.out_hp = FP8KIT_BF16, o.a.amax_d = NULL;
    o.a.scale_d = fp8kit_tensor_make(take(GM * 4), FP8KIT_F32, 2, (int64_t[]){GM, 1});
    GOOD(fp8kit_gemm(ctx, &o.d, &o.a, NULL));
    BAD(MIS, GF, "scale_d->data", "aligned", GEMM_MOVED(o, scale_d, 1));
    o.d.out_quant = FP8KIT_OUTQ_MX; /* e8m0 output scales: any address (N = 32 here) */
    o.a.b.shape[0] = 32;
    o.a.d = fp8kit_tensor_2d(o.a.d.data, FP8KIT_E4M3, GM, 32, 32);
    o.a.scale_d = fp8kit_tensor_make(take(GM + 1), FP8KIT_E8M0, 2, (int64_t[]){GM, 1});
    GOOD(fp8kit_gemm(ctx, &o.d, &o.a, NULL));
    GOOD(GEMM_MOVED(o, scale_d, 1));
    /* mx operands: e8m0 scales anywhere */
    gcall m = gemm_base();
    m.d.scale_a = m.d.scale_b = FP8KIT_SCALE_MX, m.d.bias = FP8KIT_BIAS_NONE, m.a.beta = 0.0f;
    m.a.scale_a = fp8kit_tensor_make(take(GM * 2 + 1), FP8KIT_E8M0, 2, (int64_t[]){GM, GK / 32});
    m.a.scale_b = fp8kit_tensor_make(take(GN * 2 + 1), FP8KIT_E8M0, 2, (int64_t[]){GN, GK / 32});
    fill_u8(m.a.scale_a.data, GM * 2 + 1, 127);
    fill_u8(m.a.scale_b.data, GN * 2 + 1, 127);
    GOOD(fp8kit_gemm(ctx, &m.d, &m.a, NULL));
    GOOD(GEMM_MOVED(m, scale_a, 1));
    GOOD(GEMM_MOVED(m, scale_b, 1));
}

/* a grouped GEMM: T 24 rows in G 3 groups, N 16, K 32; row scales, f32 bias, bf16 D */
typedef struct {
    fp8kit_gemm_desc d;
    fp8kit_grouped_gemm_args a;
} ggcall;
static ggcall grouped_base(void)
{
    ggcall g;
    memset(&g, 0, sizeof g);
    g.d.scale_a = g.d.scale_b = FP8KIT_SCALE_ROW;
    g.d.bias = FP8KIT_BIAS_COL;
    int32_t *offs = (int32_t *)take(16);
    offs[0] = 5, offs[1] = 5, offs[2] = 24;
    void *a = take(24 * 32), *b = take(3 * 16 * 32), *sa = take(24 * 4), *sb = take(48 * 4), *bias = take(48 * 4);
    fill_u8(a, 24 * 32, 0x38);
    fill_u8(b, 3 * 16 * 32, 0x30);
    fill_f32(sa, 24);
    fill_f32(sb, 48);
    fill_f32(bias, 48);
    g.a.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, 24, 32, 32);
    g.a.b = fp8kit_tensor_make(b, FP8KIT_E4M3, 3, (int64_t[]){3, 16, 32});
    g.a.offsets = offs;
    g.a.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, (int64_t[]){24});
    g.a.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 2, (int64_t[]){3, 16});
    g.a.alpha = 1.0f;
    g.a.bias = fp8kit_tensor_make(bias, FP8KIT_F32, 2, (int64_t[]){3, 16});
    g.a.d = fp8kit_tensor_2d(take(24 * 16 * 2), FP8KIT_BF16, 24, 16, 16);
    g.a.status = (int32_t *)take(8);
    return g;
}

static void test_misaligned_grouped(void)
{
    const char *F = "fp8kit_grouped_gemm";
    arena_reset();
    ggcall g = grouped_base();
    GOOD(fp8kit_grouped_gemm(ctx, &g.d, &g.a, NULL));
    ggcall t = g;
    t.a.scale_a.data = off(g.a.scale_a.data, 1);
    BAD(MIS, F, "scale_a->data", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.scale_b.data = off(g.a.scale_b.data, 2);
    BAD(MIS, F, "scale_b->data", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.bias.data = off(g.a.bias.data, 3);
    BAD(MIS, F, "bias->data", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.d.data = off(g.a.d.data, 1);
    BAD(MIS, F, "d->data", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.offsets = (const int32_t *)off((void *)g.a.offsets, 2);
    BAD(MIS, F, "offsets", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.status = (int32_t *)off(g.a.status, 1);
    BAD(MIS, F, "status", "aligned", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.a.data = off(g.a.a.data, 1), t.a.b.data = off(g.a.b.data, 1);
    GOOD(fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
}

/* ------------------------------------------- item 2: overlapping outputs */
#define OVL FP8KIT_ERR_INVALID_ARGUMENT
static void test_overlap_quant(void)
{
    const char *QF = "fp8kit_quantize", *DF = "fp8kit_dequantize", *BF = "fp8kit_quantize_mx_both", *CF = "fp8kit_cast";
    int64_t shp[2] = {64, 256};
    arena_reset();
    void *xb = take(64 * 256 * 4), *qb = take(64 * 512), *sb = take(64 * 4), *yb = take(64 * 256 * 4);
    fill_f32(xb, 64 * 256);
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_ROW);
    fp8kit_tensor x = fp8kit_tensor_make(xb, FP8KIT_F32, 2, shp), q, sc, y = x, t;
    GOOD(fp8kit_quant_shapes(&d, &x, &q, &sc));
    q.data = qb, sc.data = sb, y.data = yb;
    GOOD(fp8kit_quantize(ctx, &d, &x, &q, &sc, NULL));
    GOOD(fp8kit_dequantize(ctx, &d, &q, &sc, &y, NULL));
    /* quantize: the scales inside the codes (the campaign's case), either inside x, q over x */
    t = sc, t.data = off(qb, 1024);
    BAD(OVL, QF, "overlap", "output q overlaps output scale", fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
    t = sc, t.data = off(qb, 64 * 256 - 4); /* the last scale on the last code */
    BAD(OVL, QF, "overlap", "output q overlaps output scale", fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
    t = sc, t.data = off(qb, 64 * 256); /* right after the codes: fine */
    GOOD(fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
    t = q, t.data = off(xb, 4096);
    BAD(OVL, QF, "overlap", "output q overlaps input x", fp8kit_quantize(ctx, &d, &x, &t, &sc, NULL));
    t = q, t.data = xb; /* "in place" */
    BAD(OVL, QF, "overlap", "output q overlaps input x", fp8kit_quantize(ctx, &d, &x, &t, &sc, NULL));
    t = sc, t.data = off(xb, 64 * 256 * 4 - 8);
    BAD(OVL, QF, "overlap", "output scale overlaps input x", fp8kit_quantize(ctx, &d, &x, &q, &t, NULL));
    /* rows of q 512 bytes apart: the scales may sit in the gap after row 0, not on row 1 */
    fp8kit_tensor qs = fp8kit_tensor_2d(qb, FP8KIT_E4M3, 64, 256, 512);
    t = sc, t.data = off(qb, 256);
    GOOD(fp8kit_quantize(ctx, &d, &x, &qs, &t, NULL));
    t = sc, t.data = off(qb, 260);
    BAD(OVL, QF, "overlap", "output q overlaps output scale", fp8kit_quantize(ctx, &d, &x, &qs, &t, NULL));
    /* the tensor scheme's scalar scale among the codes */
    fp8kit_quant_desc td = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
    fp8kit_tensor s0 = fp8kit_tensor_make(off(qb, 300), FP8KIT_F32, 0, NULL);
    BAD(OVL, QF, "overlap", "output q overlaps output scale", fp8kit_quantize(ctx, &td, &x, &q, &s0, NULL));
    /* dequantize: y over the codes or the scales */
    t = y, t.data = off(qb, 0);
    BAD(OVL, DF, "overlap", "output y overlaps input q", fp8kit_dequantize(ctx, &d, &q, &sc, &t, NULL));
    t = y, t.data = off(sb, 4);
    BAD(OVL, DF, "overlap", "output y overlaps input scale", fp8kit_dequantize(ctx, &d, &q, &sc, &t, NULL));
    /* both axes at once */
    fp8kit_quant_desc md = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    fp8kit_tensor qr, sr, qc, scl;
    md.axis = -1;
    GOOD(fp8kit_quant_shapes(&md, &x, &qr, &sr));
    md.axis = -2;
    GOOD(fp8kit_quant_shapes(&md, &x, &qc, &scl));
    void *qcb = take(64 * 256), *srb = take(64 * 8), *scb = take(256 * 2);
    qr.data = qb, sr.data = srb, qc.data = qcb, scl.data = scb;
    GOOD(fp8kit_quantize_mx_both(ctx, &md, &x, &qr, &sr, &qc, &scl, NULL));
    t = qc, t.data = off(qb, 100);
    BAD(OVL, BF, "overlap", "output q_row overlaps output q_col", fp8kit_quantize_mx_both(ctx, &md, &x, &qr, &sr, &t, &scl, NULL));
    t = scl, t.data = off(srb, 1);
    BAD(OVL, BF, "overlap", "output scale_row overlaps output scale_col",
        fp8kit_quantize_mx_both(ctx, &md, &x, &qr, &sr, &qc, &t, NULL));
    t = qr, t.data = off(xb, 8);
    BAD(OVL, BF, "overlap", "output q_row overlaps input x", fp8kit_quantize_mx_both(ctx, &md, &x, &t, &sr, &qc, &scl, NULL));
    /* cast in place, or shifted */
    fp8kit_tensor f8 = fp8kit_tensor_make(qb, FP8KIT_E4M3, 2, shp);
    GOOD(fp8kit_cast(ctx, &x, &f8, NULL));
    t = f8, t.data = xb;
    BAD(OVL, CF, "overlap", "output y overlaps input x", fp8kit_cast(ctx, &x, &t, NULL));
    t = x, t.data = off(qb, -64 * 256 * 4 + 64);
    BAD(OVL, CF, "overlap", "output y overlaps input x", fp8kit_cast(ctx, &f8, &t, NULL));
}

static void test_overlap_gemm(void)
{
    const char *GF = "fp8kit_gemm";
    arena_reset();
    gcall g = gemm_base();
    g.a.c.dtype = FP8KIT_BF16; /* C like D: bf16 GM x GN, ld GN */
    fill_u8(g.a.c.data, GM * GN * 2, 0x3E);
    GOOD(fp8kit_gemm(ctx, &g.d, &g.a, NULL));
    static unsigned char dref[GM * GN * 2];
    memcpy(dref, g.a.d.data, sizeof dref);
    /* D over each input (the fast path: same metadata as the good call) */
    gcall t = g;
    t.a.d.data = t.a.a.data;
    BAD(OVL, GF, "overlap", "output d overlaps input a", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.d.data = off(t.a.b.data, GN * GK - 2);
    BAD(OVL, GF, "overlap", "output d overlaps input b", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.d.data = off(t.a.scale_a.data, 4);
    BAD(OVL, GF, "overlap", "output d overlaps input scale_a", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.scale_b.data = off(t.a.d.data, 64);
    BAD(OVL, GF, "overlap", "output d overlaps input scale_b", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.bias.data = off(t.a.d.data, 2 * GN * 2 + 6);
    BAD(OVL, GF, "overlap", "output d overlaps input bias", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.c.data = off(t.a.d.data, GN * 2); /* C one row below D */
    BAD(OVL, GF, "overlap", "output d overlaps input c", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    size_t ws = 99; /* a size query reads no operand: placeholder pointers, even shared ones, are fine */
    CHECK_STATUS(fp8kit_gemm_workspace_size(ctx, &t.d, &t.a, &ws), FP8KIT_OK);
    CHECK(ws == 0, "the CPU's workspace size is 0 (got %zu)", ws);
    t = g, t.a.c.data = t.a.d.data, t.a.c.dtype = FP8KIT_F16; /* the same bytes read as f16 */
    BAD(OVL, GF, "overlap", "output d overlaps input c", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.c.data = t.a.d.data, t.a.c.shape[0] = GM / 2, t.a.c.strides[0] = 2 * GN; /* another row stride */
    t.a.d.shape[0] = GM / 2;
    t.a.a.shape[0] = GM / 2;
    t.a.scale_a.shape[0] = GM / 2;
    BAD(OVL, GF, "overlap", "output d overlaps input c", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    /* beta 0: C is not read, so it may be anything */
    t = g, t.a.beta = 0.0f, t.a.c.data = t.a.d.data;
    GOOD(fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    /* D exactly C: in-place accumulation, the same result as a separate C */
    t = g;
    memcpy(t.a.d.data, t.a.c.data, GM * GN * 2);
    t.a.c.data = t.a.d.data;
    GOOD(fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    CHECK(memcmp(t.a.d.data, dref, sizeof dref) == 0, "D = C in place differs from a separate C");
    /* column slices of one (GM, 2 GN) matrix: D the left half, C the right half */
    unsigned char *y = (unsigned char *)take(GM * GN * 4);
    for (int r = 0; r < GM; r++)
        memcpy(y + (size_t)r * GN * 4 + GN * 2, (unsigned char *)g.a.c.data + (size_t)r * GN * 2, GN * 2);
    t = g;
    t.a.d = fp8kit_tensor_2d(y, FP8KIT_BF16, GM, GN, 2 * GN);
    t.a.c = fp8kit_tensor_2d(y + GN * 2, FP8KIT_BF16, GM, GN, 2 * GN);
    GOOD(fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    int same = 1;
    for (int r = 0; r < GM; r++)
        same &= memcmp(y + (size_t)r * GN * 4, dref + (size_t)r * GN * 2, GN * 2) == 0;
    CHECK(same, "D as a column slice next to C differs");
    t.a.c.data = y + GN * 2 - 2; /* one column into D */
    BAD(OVL, GF, "overlap", "output d overlaps input c", fp8kit_gemm(ctx, &t.d, &t.a, NULL));
    /* the prepared-call form */
    fp8kit_gemm_call call = {ctx, &g.d, &g.a, NULL};
    void *p[7] = {g.a.a.data, g.a.b.data, g.a.scale_a.data, g.a.scale_b.data, g.a.bias.data, g.a.d.data, NULL};
    GOOD(fp8kit_gemm_call_ptrs(&call, p));
    p[5] = g.a.scale_a.data;
    BAD(OVL, GF, "overlap", "output d overlaps input scale_a", fp8kit_gemm_call_ptrs(&call, p));

    /* fused output quantization: scale_d and amax_d */
    gcall o = gemm_outq_base();
    GOOD(fp8kit_gemm(ctx, &o.d, &o.a, NULL));
    gcall u = o;
    u.a.amax_d = (float *)off(o.a.d.data, 40);
    BAD(OVL, GF, "overlap", "output d overlaps output amax_d", fp8kit_gemm(ctx, &u.d, &u.a, NULL));
    u = o, u.a.amax_d = (float *)o.a.scale_d.data;
    BAD(OVL, GF, "overlap", "output amax_d overlaps input scale_d", fp8kit_gemm(ctx, &u.d, &u.a, NULL));
    u = o, u.a.scale_d.data = off(o.a.d.data, 8);
    BAD(OVL, GF, "overlap", "output d overlaps input scale_d", fp8kit_gemm(ctx, &u.d, &u.a, NULL));
    o.d.out_quant = FP8KIT_OUTQ_BLOCK1X128, o.d.out_hp = FP8KIT_BF16, o.a.amax_d = NULL;
    o.a.scale_d = fp8kit_tensor_make(take(GM * 4), FP8KIT_F32, 2, (int64_t[]){GM, 1});
    GOOD(fp8kit_gemm(ctx, &o.d, &o.a, NULL));
    u = o, u.a.scale_d.data = off(o.a.d.data, GM * GN - 8);
    BAD(OVL, GF, "overlap", "output d overlaps output scale_d", fp8kit_gemm(ctx, &u.d, &u.a, NULL));
    u = o, u.a.scale_d.data = o.a.a.data;
    BAD(OVL, GF, "overlap", "output scale_d overlaps input a", fp8kit_gemm(ctx, &u.d, &u.a, NULL));
}

static void test_overlap_grouped(void)
{
    const char *F = "fp8kit_grouped_gemm";
    arena_reset();
    ggcall g = grouped_base();
    GOOD(fp8kit_grouped_gemm(ctx, &g.d, &g.a, NULL));
    ggcall t = g;
    t.a.d.data = off(g.a.a.data, 64);
    BAD(OVL, F, "overlap", "output d overlaps input a", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.d.data = off(g.a.b.data, 3 * 16 * 32 - 2);
    BAD(OVL, F, "overlap", "output d overlaps input b", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.offsets = (const int32_t *)off(g.a.d.data, 200);
    BAD(OVL, F, "overlap", "output d overlaps input offsets", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.scale_b.data = off(g.a.d.data, 16);
    BAD(OVL, F, "overlap", "output d overlaps input scale_b", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.bias.data = off(g.a.d.data, 0);
    BAD(OVL, F, "overlap", "output d overlaps input bias", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.status = (int32_t *)off(g.a.d.data, 24 * 16 * 2 - 4);
    BAD(OVL, F, "overlap", "output d overlaps output status", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.status = (int32_t *)off((void *)g.a.offsets, 8);
    BAD(OVL, F, "overlap", "output status overlaps input offsets", fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
    t = g, t.a.status = (int32_t *)off((void *)g.a.offsets, 12); /* just past the 3 offsets */
    GOOD(fp8kit_grouped_gemm(ctx, &t.d, &t.a, NULL));
}

/* ------------------------------------- item 8d: infinite scales, NaN groups */
static int is_nan_out(const void *y, int64_t i, fp8kit_dtype t)
{
    if (t == FP8KIT_F32)
        return isnan(((const float *)y)[i]);
    uint16_t h = ((const uint16_t *)y)[i] & 0x7FFF;
    return t == FP8KIT_BF16 ? h > 0x7F80 : h > 0x7C00;
}

/* Scale index of element (r, c) for x (R, C) in the stored layout (scols: the
 * scale tensor's last dim). */
static int64_t scale_index(const fp8kit_quant_desc *d, int64_t r, int64_t c, int64_t C, int64_t scols)
{
    const int mn = d->scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    switch (d->scheme) {
    case FP8KIT_SCHEME_TENSOR: return 0;
    case FP8KIT_SCHEME_ROW: return r;
    case FP8KIT_SCHEME_BLOCK1X128: return mn ? (c / 128) * scols + r : r * scols + c / 128;
    case FP8KIT_SCHEME_BLOCK128X128: return mn ? (c / 128) * scols + r / 128 : (r / 128) * scols + c / 128;
    default: return r * (C / 32) + c / 32;
    }
}

static void test_inf_scale(void)
{
    enum { R = 160, C = 256 };
    int64_t shp[2] = {R, C};
    arena_reset();
    void *xb = take(R * C * 4), *qb = take(R * C), *sb = take(R * 8 * 4), *yb = take(R * C * 4), *yr = take(R * C * 4);
    fill_f32(xb, R * C);
    ((float *)xb)[3] = 0.0f; /* a zero code in the first group */
    const fp8kit_scheme schemes[] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK1X128,
                                     FP8KIT_SCHEME_BLOCK1X128, FP8KIT_SCHEME_BLOCK128X128,
                                     FP8KIT_SCHEME_BLOCK128X128, FP8KIT_SCHEME_MX};
    const fp8kit_dtype yts[] = {FP8KIT_F32, FP8KIT_BF16, FP8KIT_F16};
    for (int si = 0; si < 7; si++)
        for (int ti = 0; ti < 3; ti++) {
            fp8kit_quant_desc d = fp8kit_quant_desc_default(schemes[si]);
            if (si == 3 || si == 5)
                d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
            fp8kit_tensor x = fp8kit_tensor_make(xb, FP8KIT_F32, 2, shp), q, sc;
            GOOD(fp8kit_quant_shapes(&d, &x, &q, &sc));
            q.data = qb, sc.data = sb;
            GOOD(fp8kit_quantize(ctx, &d, &x, &q, &sc, NULL));
            fp8kit_tensor y = fp8kit_tensor_make(yr, yts[ti], 2, shp);
            GOOD(fp8kit_dequantize(ctx, &d, &q, &sc, &y, NULL)); /* the reference */
            const int64_t scols = sc.ndim ? sc.shape[sc.ndim - 1] : 1;
            const int64_t g0 = scale_index(&d, 0, 0, C, scols), g1 = scale_index(&d, R - 1, C - 1, C, scols);
            if (d.scheme == FP8KIT_SCHEME_MX) {
                ((uint8_t *)sb)[g0] = ((uint8_t *)sb)[g1] = 255; /* the e8m0 NaN */
            } else {
                ((float *)sb)[g0] = INFINITY;
                ((float *)sb)[g1] = -INFINITY;
            }
            y.data = yb;
            GOOD(fp8kit_dequantize(ctx, &d, &q, &sc, &y, NULL));
            const size_t es = fp8kit_dtype_size(yts[ti]);
            long bad_nan = 0, bad_other = 0;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++) {
                    const int64_t gi = scale_index(&d, r, c, C, scols), i = r * C + c;
                    if (gi == g0 || gi == g1)
                        bad_nan += !is_nan_out(yb, i, yts[ti]);
                    else
                        bad_other += memcmp((char *)yb + i * es, (char *)yr + i * es, es) != 0;
                }
            CHECK(bad_nan == 0, "scheme %d layout %d y %s: %ld elements of an Inf-scale group are not NaN",
                  (int)d.scheme, (int)d.scale_layout, fp8kit_dtype_name(yts[ti]), bad_nan);
            CHECK(bad_other == 0, "scheme %d layout %d y %s: %ld elements of other groups changed", (int)d.scheme,
                  (int)d.scale_layout, fp8kit_dtype_name(yts[ti]), bad_other);
        }
}

int main(void)
{
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (!ctx)
        return fk_test_summary("test_hostile_api");
    test_thread_bound();
    test_extent_overflow();
    test_misaligned_quant();
    test_misaligned_gemm();
    test_misaligned_grouped();
    test_overlap_quant();
    test_overlap_gemm();
    test_overlap_grouped();
    test_inf_scale();
    printf("test_hostile_api: %ld bad calls checked (status, message, memory unchanged)\n", n_bad);
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_hostile_api");
}
