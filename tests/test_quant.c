/* test_quant.c - CPU quantize / dequantize / cast through the public API against
 * docs/spec.md section 2: the mx edge-case table (FLOOR/RCEIL, f32/bf16, e4m3/e5m2),
 * fp32-scale special cases (zero, NaN/Inf, underflow, pow2), partial edge
 * groups, mx axis -2 vs axis -1 of an explicit transpose, strided rows, random
 * inputs against a scalar reference written here from docs/spec.md's formulas,
 * dequantize round trips, casts both ways, and the branch-free CPU codecs
 * against src/format/codec.h.
 * Run: ctest -R test_quant (FK_TEST_SEED=n replays a seed). */
#include <float.h>
#include <math.h>
#include "fp8kit.h"
#include "test_util.h"
#include "format/scale.h"
#include "cpu/quant_simd.h"

static fp8kit_ctx *ctx;
static fk_rng rng;

/* ------------------------------------------------------------ helpers */

static size_t dsize(fp8kit_dtype t) { return fp8kit_dtype_size(t); }

/* element i of a contiguous f32/f16/bf16 buffer, widened to f32 */
static float get_hp(const void *p, fp8kit_dtype t, int64_t i)
{
    if (t == FP8KIT_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == FP8KIT_BF16 ? fk_bf16_to_f32(h) : fk_f16_to_f32(h);
}

static void put_hp(void *p, fp8kit_dtype t, int64_t i, float v)
{
    if (t == FP8KIT_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == FP8KIT_BF16 ? fk_f32_to_bf16(v) : fk_f32_to_f16(v);
}

/* v rounded to t (RNE) and widened back */
static float round_to(float v, fp8kit_dtype t)
{
    if (t == FP8KIT_F32) return v;
    return t == FP8KIT_BF16 ? fk_bf16_to_f32(fk_f32_to_bf16(v)) : fk_f16_to_f32(fk_f32_to_f16(v));
}

static int same_f32(float a, float b) { return (isnan(a) && isnan(b)) || fk_t_f2u(a) == fk_t_f2u(b); }

static fp8kit_tensor mk(void *data, fp8kit_dtype t, int nd, int64_t E, int64_t R, int64_t C)
{
    int64_t sh[3] = {E, R, C};
    return nd == 3 ? fp8kit_tensor_make(data, t, 3, sh) : fp8kit_tensor_make(data, t, 2, sh + 1);
}

/* ----------------------------------------------- reference from docs/spec.md 2 */

static float ref_pow2_ceil(float s)
{
    int ex;
    float m = frexpf(s, &ex); /* s = m * 2^ex, m in [0.5, 1) */
    return m == 0.5f ? s : ldexpf(1.0f, ex);
}

/* docs/spec.md 2.1 scale from a group's amax (NaN if any NaN, Inf if any Inf) */
static float ref_scale_f32(float amax, int e5m2, int pow2)
{
    float fmax = e5m2 ? 57344.0f : 448.0f;
    if (amax == 0.0f)
        return 1.0f;
    if (isnan(amax) || isinf(amax))
        return NAN;
    float s = amax / fmax;
    if (s == 0.0f)
        s = 0x1p-149f;
    if (pow2)
        s = ref_pow2_ceil(s);
    return s;
}

static uint8_t ref_mx_scale(float amax, int e5m2, int rceil)
{
    float fmax = e5m2 ? 57344.0f : 448.0f;
    if (!rceil) {
        if (!isfinite(amax))
            return 255;
        int e = (int)((fk_t_f2u(amax) >> 23) & 0xFF) - 127 - (e5m2 ? 15 : 8);
        if (e < -127) e = -127;
        if (e > 128) e = 128;
        return (uint8_t)(e + 127);
    }
    if (isnan(amax))
        return 255;
    volatile float fm = fmax;
    float inv = 1.0f / fm;
    uint32_t d = fk_t_f2u(amax * inv);
    uint32_t E = (d >> 23) & 0xFF, M = d & 0x7FFFFF;
    if (E == 255) return 255;
    if (E == 0) return M > 0x400000;
    return (uint8_t)(E + (M != 0));
}

static float ref_mx_recip(uint8_t s)
{
    if (s == 255) return NAN;
    if (s == 254) return 0x1p-127f;
    return fk_t_u2f((uint32_t)(254 - s) << 23);
}

/* Group amax over a list of values with docs/spec.md's NaN / Inf rule. */
typedef struct { float m; int nan, inf; } amax_acc;
static void acc_add(amax_acc *a, float v)
{
    if (isnan(v)) a->nan = 1;
    else if (isinf(v)) a->inf = 1;
    else if (fabsf(v) > a->m) a->m = fabsf(v);
}
static float acc_get(const amax_acc *a) { return a->nan ? NAN : a->inf ? INFINITY : a->m; }

/* Reference quantization of x (contiguous (E, R, C), dtype t). q gets the
 * logical codes (E, R, C) or (E, C, R) for mx axis -2; scale the plain scales:
 * f32 [1] / [E*R] / [E][R][nb] / [E][nrb][ncb], or e8m0 [E][qR][qC/32]. */
static void ref_quantize(const fp8kit_quant_desc *d, fp8kit_dtype t, const void *x, int64_t E,
                         int64_t R, int64_t C, uint8_t *q, void *scale)
{
    const int e5m2 = d->elem == FP8KIT_E5M2;
    const uint8_t nanc = e5m2 ? 0x7E : 0x7F;
    if (d->scheme == FP8KIT_SCHEME_MX) {
        int t2 = d->axis == -2;
        int64_t qR = t2 ? C : R, qC = t2 ? R : C;
        uint8_t *S = (uint8_t *)scale;
        for (int64_t e = 0; e < E; e++)
            for (int64_t i = 0; i < qR; i++)
                for (int64_t b = 0; b < qC / 32; b++) {
                    /* element j of block (i, b) of the (transposed) operand */
#define XIDX(j) (t2 ? (e * R + b * 32 + (j)) * C + i : (e * R + i) * C + b * 32 + (j))
                    amax_acc a = {0, 0, 0};
                    for (int j = 0; j < 32; j++)
                        acc_add(&a, get_hp(x, t, XIDX(j)));
                    uint8_t s = ref_mx_scale(acc_get(&a), e5m2, d->rounding == FP8KIT_ROUND_RCEIL);
                    if (a.nan || a.inf)
                        s = 255;
                    float r = ref_mx_recip(s);
                    S[(e * qR + i) * (qC / 32) + b] = s;
                    for (int j = 0; j < 32; j++) {
                        float v = get_hp(x, t, XIDX(j));
                        q[(e * qR + i) * qC + b * 32 + j] = s == 255 ? nanc : fk_f32_to_fp8(v * r, e5m2);
                    }
#undef XIDX
                }
        return;
    }
    /* fp32 schemes: group index of (e, r, c) */
    int64_t nrg, ncg; /* groups per expert: rows x cols */
    int64_t gr = 1, gc = 1;
    switch (d->scheme) {
    case FP8KIT_SCHEME_TENSOR: gr = R * E; gc = C; break;
    case FP8KIT_SCHEME_ROW: gr = 1; gc = C; break;
    case FP8KIT_SCHEME_BLOCK1X128: gr = 1; gc = 128; break;
    default: gr = 128; gc = 128; break;
    }
    if (gr < 1) gr = 1;
    if (gc < 1) gc = 1;
    int tensor = d->scheme == FP8KIT_SCHEME_TENSOR;
    nrg = tensor ? 1 : (R + gr - 1) / gr;
    ncg = tensor ? 1 : (C + gc - 1) / gc;
    int64_t ng = tensor ? 1 : E * nrg * ncg;
    amax_acc *acc = calloc((size_t)ng, sizeof *acc);
    float *S = (float *)scale;
#define GIDX(e, r, c) (tensor ? 0 : ((e) * nrg + (r) / gr) * ncg + (c) / gc)
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++)
                acc_add(&acc[GIDX(e, r, c)], get_hp(x, t, (e * R + r) * C + c));
    for (int64_t g = 0; g < ng; g++)
        S[g] = ref_scale_f32(acc_get(&acc[g]), e5m2, d->pow2);
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                float s = S[GIDX(e, r, c)];
                float v = get_hp(x, t, (e * R + r) * C + c);
                q[(e * R + r) * C + c] = isnan(s) ? nanc : fk_f32_to_fp8(v / s, e5m2);
            }
#undef GIDX
    free(acc);
}

/* ---------------------------------------- library call with options */

typedef struct {
    int nd;            /* 2 or 3 */
    int64_t E, R, C;
    int64_t ldx, ldq;  /* row strides (0 = contiguous) */
} geom;

/* Runs fp8kit_quantize on contiguous x (copied into a strided buffer when
 * ldx is set). q_out gets the logical codes, contiguous; scale_out the raw
 * stored scale buffer (size from fp8kit_quant_shapes). Returns the status. */
static fp8kit_status lib_quantize(const fp8kit_quant_desc *d, fp8kit_dtype t, const void *x,
                                  geom g, uint8_t *q_out, void *scale_out, size_t scale_bytes)
{
    const size_t es = dsize(t);
    int64_t E = g.E, R = g.R, C = g.C;
    int64_t ldx = g.ldx ? g.ldx : C;
    char *xb = malloc((size_t)(E * R * ldx) * es + 1);
    fk_poison(xb, (size_t)(E * R * ldx) * es);
    for (int64_t er = 0; er < E * R; er++)
        memcpy(xb + er * ldx * es, (const char *)x + er * C * es, (size_t)C * es);
    fp8kit_tensor xt = mk(xb, t, g.nd, E, R, C);
    xt.strides[g.nd - 1] = 1;
    xt.strides[g.nd - 2] = ldx;
    if (g.nd == 3) xt.strides[0] = R * ldx;
    fp8kit_tensor qt, st;
    fp8kit_status s = fp8kit_quant_shapes(d, &xt, &qt, &st);
    CHECK(s == FP8KIT_OK, "quant_shapes: %s", fp8kit_status_string(s));
    if (s) { free(xb); return s; }
    int64_t qR = qt.shape[g.nd - 2], qC = qt.shape[g.nd - 1];
    int64_t ldq = g.ldq ? g.ldq : qC;
    uint8_t *qb = malloc((size_t)(E * qR * ldq) + 1);
    fk_poison(qb, (size_t)(E * qR * ldq));
    qt.data = qb;
    qt.strides[g.nd - 1] = 1;
    qt.strides[g.nd - 2] = ldq;
    if (g.nd == 3) qt.strides[0] = qR * ldq;
    int64_t sn = fp8kit_tensor_numel(&st);
    CHECK((size_t)sn * dsize(st.dtype) == scale_bytes, "scale bytes %lld vs %zu",
          (long long)(sn * (int64_t)dsize(st.dtype)), scale_bytes);
    fk_poison(scale_out, scale_bytes);
    st.data = scale_out;
    s = fp8kit_quantize(ctx, d, &xt, &qt, &st, NULL);
    for (int64_t er = 0; er < E * qR; er++) {
        memcpy(q_out + er * qC, qb + er * ldq, (size_t)qC);
        if (ldq > qC && s == FP8KIT_OK)
            CHECK(fk_is_poisoned(qb + er * ldq + qC, (size_t)(ldq - qC)), "q row gap written");
    }
    free(xb);
    free(qb);
    return s;
}

/* Runs fp8kit_dequantize of q (logical, contiguous) + raw scales into y of
 * dtype yt (E, R, C) contiguous. */
static fp8kit_status lib_dequantize(const fp8kit_quant_desc *d, const uint8_t *q, const void *scale,
                                    geom g, fp8kit_dtype yt, void *y)
{
    fp8kit_tensor yt_ = mk(y, yt, g.nd, g.E, g.R, g.C), qt, st;
    fp8kit_status s = fp8kit_quant_shapes(d, &yt_, &qt, &st);
    if (s) return s;
    qt.data = (void *)q;
    st.data = (void *)scale;
    return fp8kit_dequantize(ctx, d, &qt, &st, &yt_, NULL);
}

static size_t scale_bytes_of(const fp8kit_quant_desc *d, fp8kit_dtype t, geom g)
{
    fp8kit_tensor xt = mk(NULL, t, g.nd, g.E, g.R, g.C), qt, st;
    if (fp8kit_quant_shapes(d, &xt, &qt, &st)) return 0;
    return (size_t)fp8kit_tensor_numel(&st) * dsize(st.dtype);
}

/* Quantizes with the library and the reference; compares q and plain scales.
 * Returns the number of mismatches. */
static long compare_quant(const char *what, const fp8kit_quant_desc *d, fp8kit_dtype t,
                          const void *x, geom g)
{
    int64_t n = g.E * g.R * g.C;
    size_t sb = scale_bytes_of(d, t, g);
    uint8_t *q = malloc((size_t)n + 1), *qr = malloc((size_t)n + 1);
    void *s = malloc(sb + 4), *sr = malloc(sb + 4);
    long bad = 0;
    fp8kit_status st = lib_quantize(d, t, x, g, q, s, sb);
    CHECK(st == FP8KIT_OK, "%s: quantize returned %s (%s)", what, fp8kit_status_string(st),
          fp8kit_last_error(ctx));
    ref_quantize(d, t, x, g.E, g.R, g.C, qr, sr);
    for (int64_t i = 0; i < n; i++)
        if (q[i] != qr[i]) {
            if (bad++ < 3)
                fprintf(stderr, "  %s: q[%lld] = 0x%02x, reference 0x%02x\n", what, (long long)i, q[i], qr[i]);
        }
    if (d->scheme == FP8KIT_SCHEME_MX) {
        for (size_t i = 0; i < sb; i++)
            if (((uint8_t *)s)[i] != ((uint8_t *)sr)[i]) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s: scale[%zu] = %u, reference %u\n", what, i, ((uint8_t *)s)[i],
                            ((uint8_t *)sr)[i]);
            }
    } else {
        for (size_t i = 0; i < sb / 4; i++)
            if (!same_f32(((float *)s)[i], ((float *)sr)[i])) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s: S[%zu] = %a, reference %a\n", what, i, ((float *)s)[i],
                            ((float *)sr)[i]);
            }
    }
    CHECK(bad == 0, "%s: %ld mismatches vs reference (E=%lld R=%lld C=%lld)", what, bad, (long long)g.E,
          (long long)g.R, (long long)g.C);
    free(q); free(qr); free(s); free(sr);
    return bad;
}

/* Fills n values: normal or heavy-tailed, a random power-of-two magnitude per
 * 37-element run (so groups see different ranges), a few zeros and
 * subnormal-range values; f16 inputs are kept in f16's range. */
static void fill_random(void *x, fp8kit_dtype t, int64_t n, int heavy)
{
    float mag = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        if (i % 37 == 0)
            mag = ldexpf(1.0f, (int)(fk_rng_u32(&rng) % 41) - 20);
        double v = heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng);
        uint32_t k = fk_rng_u32(&rng) % 200;
        float f = (float)v * mag;
        if (k == 0) f = 0.0f;
        else if (k == 1) f = -0.0f;
        else if (k == 2) f = (float)v * 1e-40f; /* fp32 subnormal range */
        if (t == FP8KIT_F16 && !(fabsf(f) < 60000.0f)) f = copysignf(60000.0f, f);
        put_hp(x, t, i, f);
    }
}

/* --------------------------------------------------------------- tests */

/* docs/spec.md 2.2 edge-case table, one block per row, axis -1 and (by transposing
 * the input) axis -2. */
static void test_mx_table(void)
{
    struct { const char *name; float v, odd; int f32_only; uint8_t fs, fq, rs, rq, fq_odd, rq_odd; int elem5; } T[] = {
        {"zeros", 0.0f, 0.0f, 0, 0, 0x00, 0, 0x00, 0x00, 0x00, 0},
        {"2^-126", 0x1p-126f, 0x1p-126f, 0, 0, 0x40, 0, 0x40, 0x40, 0x40, 0},
        {"448", 448.0f, 448.0f, 0, 127, 0x7E, 127, 0x7E, 0x7E, 0x7E, 0},
        {"480", 480.0f, 480.0f, 0, 127, 0x7E, 128, 0x77, 0x7E, 0x77, 0},
        {"-480", -480.0f, -480.0f, 0, 127, 0xFE, 128, 0xF7, 0xFE, 0xF7, 0},
        {"FLT_MAX", FLT_MAX, FLT_MAX, 1, 246, 0x7E, 247, 0x78, 0x7E, 0x78, 0},
        {"1 + 2^-149", 1.0f, 0x1p-149f, 1, 119, 0x78, 119, 0x78, 0x00, 0x00, 0},
        {"1 + 2^-133", 1.0f, 0x1p-133f, 0, 119, 0x78, 119, 0x78, 0x00, 0x00, 0},
        {"NaN", 1.0f, NAN, 0, 255, 0x7F, 255, 0x7F, 0x7F, 0x7F, 0},
        {"Inf", 2.0f, INFINITY, 0, 255, 0x7F, 255, 0x7F, 0x7F, 0x7F, 0},
        {"-Inf", 2.0f, -INFINITY, 0, 255, 0x7F, 255, 0x7F, 0x7F, 0x7F, 0},
        /* e5m2, derived by hand from docs/spec.md 2.2 */
        {"e5m2 zeros", 0.0f, 0.0f, 0, 0, 0x00, 0, 0x00, 0x00, 0x00, 1},
        {"e5m2 1.0", 1.0f, 1.0f, 0, 112, 0x78, 112, 0x78, 0x78, 0x78, 1},
        {"e5m2 480", 480.0f, 480.0f, 0, 120, 0x7B, 121, 0x78, 0x7B, 0x78, 1},
        {"e5m2 57344", 57344.0f, 57344.0f, 0, 127, 0x7B, 127, 0x7B, 0x7B, 0x7B, 1},
        {"e5m2 NaN", 1.0f, NAN, 0, 255, 0x7E, 255, 0x7E, 0x7E, 0x7E, 1},
    };
    const int nt = (int)(sizeof T / sizeof T[0]);
    fp8kit_dtype dts[2] = {FP8KIT_F32, FP8KIT_BF16};
    for (int di = 0; di < 2; di++)
        for (int rc = 0; rc < 2; rc++)
            for (int ax = 0; ax < 2; ax++)
                for (int e5 = 0; e5 < 2; e5++) {
                    /* rows = table entries of this element type; the odd value sits at column 7 */
                    int idx[32], R = 0;
                    for (int i = 0; i < nt; i++)
                        if (T[i].elem5 == e5 && !(T[i].f32_only && dts[di] != FP8KIT_F32)) idx[R++] = i;
                    int64_t rows = ax ? 32 : R, cols = ax ? R : 32;
                    void *x = malloc((size_t)(rows * cols) * 4);
                    for (int i = 0; i < R; i++)
                        for (int j = 0; j < 32; j++) {
                            float v = j == 7 ? T[idx[i]].odd : T[idx[i]].v;
                            put_hp(x, dts[di], ax ? j * cols + i : i * cols + j, v);
                        }
                    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
                    d.rounding = rc ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                    d.axis = ax ? -2 : -1;
                    d.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                    geom g = {2, 1, rows, cols, 0, 0};
                    uint8_t q[32 * 32], s[32];
                    fp8kit_status st = lib_quantize(&d, dts[di], x, g, q, s, (size_t)R);
                    CHECK(st == FP8KIT_OK, "table quantize %s", fp8kit_status_string(st));
                    for (int i = 0; i < R; i++) {
                        int k = idx[i];
                        uint8_t ws = rc ? T[k].rs : T[k].fs, wq = rc ? T[k].rq : T[k].fq;
                        uint8_t wo = rc ? T[k].rq_odd : T[k].fq_odd;
                        CHECK(s[i] == ws, "%s %s %s axis %d: s = %u, want %u", T[k].name,
                              fp8kit_dtype_name(dts[di]), rc ? "rceil" : "floor", d.axis, s[i], ws);
                        int okq = 1;
                        for (int j = 0; j < 32; j++)
                            okq &= q[i * 32 + j] == (j == 7 ? wo : wq);
                        CHECK(okq, "%s %s %s axis %d: q = 0x%02x / 0x%02x, want 0x%02x / 0x%02x", T[k].name,
                              fp8kit_dtype_name(dts[di]), rc ? "rceil" : "floor", d.axis, q[i * 32],
                              q[i * 32 + 7], wq, wo);
                    }
                    free(x);
                }
}

/* docs/spec.md 2.1 special groups for every fp32 scheme. */
static void test_fp32_specials(void)
{
    fp8kit_scheme schemes[4] = {FP8KIT_SCHEME_TENSOR, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK1X128,
                                FP8KIT_SCHEME_BLOCK128X128};
    struct { const char *name; float v, odd; int pow2; float wS4, wS5; uint8_t wq4, wq5, wodd4, wodd5; } T[] = {
        {"zeros", 0.0f, -0.0f, 0, 1.0f, 1.0f, 0x00, 0x00, 0x80, 0x80},
        {"NaN", 1.0f, NAN, 0, NAN, NAN, 0x7F, 0x7E, 0x7F, 0x7E},
        {"Inf", 1.0f, INFINITY, 0, NAN, NAN, 0x7F, 0x7E, 0x7F, 0x7E},
        {"-Inf", 1.0f, -INFINITY, 1, NAN, NAN, 0x7F, 0x7E, 0x7F, 0x7E},
        {"underflow", 0x1p-149f, 0x1p-149f, 0, 0x1p-149f, 0x1p-149f, 0x38, 0x3C, 0x38, 0x3C},
        {"underflow pow2", 0x1p-149f, -0x1p-149f, 1, 0x1p-149f, 0x1p-149f, 0x38, 0x3C, 0xB8, 0xBC},
        /* 3/448 -> pow2 2^-7: 3 * 2^7 = 384 (e4m3 0x7C); 3/57344 -> 2^-14: 3 * 2^14 = 49152 (e5m2 0x7A) */
        {"pow2", 3.0f, 3.0f, 1, 0x1p-7f, 0x1p-14f, 0x7C, 0x7A, 0x7C, 0x7A},
        {"448", 448.0f, -448.0f, 0, 1.0f, 448.0f / 57344.0f, 0x7E, 0x7B, 0xFE, 0xFB},
    };
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++)
        for (int si = 0; si < 4; si++)
            for (int e5 = 0; e5 < 2; e5++) {
                int64_t R = 3, C = 200; /* partial 128 groups */
                float *x = malloc((size_t)(R * C) * 4);
                for (int64_t i = 0; i < R * C; i++)
                    x[i] = i == 5 ? T[k].odd : T[k].v;
                fp8kit_quant_desc d = fp8kit_quant_desc_default(schemes[si]);
                d.pow2 = T[k].pow2;
                d.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                geom g = {2, 1, R, C, 0, 0};
                size_t sb = scale_bytes_of(&d, FP8KIT_F32, g);
                uint8_t *q = malloc((size_t)(R * C));
                float *s = malloc(sb);
                CHECK_STATUS(lib_quantize(&d, FP8KIT_F32, x, g, q, s, sb), FP8KIT_OK);
                /* the group holding element 5 is S[0] in every scheme */
                float wS = e5 ? T[k].wS5 : T[k].wS4;
                uint8_t wq = e5 ? T[k].wq5 : T[k].wq4, wo = e5 ? T[k].wodd5 : T[k].wodd4;
                CHECK(same_f32(s[0], wS), "%s scheme %d e5m2=%d: S = %a, want %a", T[k].name, si, e5, s[0], wS);
                /* every element of group 0: rows 0 .. gr-1, columns 0 .. gc-1 */
                int64_t gr = si == 0 || si == 3 ? R : 1, gc = si <= 1 ? C : 128;
                long bad = 0;
                for (int64_t r = 0; r < gr; r++)
                    for (int64_t c = 0; c < gc; c++)
                        bad += q[r * C + c] != (r == 0 && c == 5 ? wo : wq);
                CHECK(bad == 0, "%s scheme %d e5m2=%d: %ld codes of group 0 differ (q = 0x%02x 0x%02x, want 0x%02x 0x%02x)",
                      T[k].name, si, e5, bad, q[0], q[5], wq, wo);
                free(x); free(q); free(s);
            }
}

/* Random inputs against the reference, every scheme/option/dtype/shape. */
static void test_random_vs_ref(void)
{
    static const geom shapes[] = {
        {2, 1, 1, 32, 0, 0},    {2, 1, 7, 64, 0, 0},     {2, 1, 130, 300, 0, 0}, {2, 1, 96, 160, 0, 0},
        {2, 1, 64, 100, 0, 0},  {3, 3, 32, 64, 0, 0},    {3, 2, 160, 96, 0, 0},  {3, 2, 130, 257, 0, 0},
        {2, 1, 5, 2080, 0, 0},  {2, 1, 3, 17024, 0, 0},
    };
    fp8kit_dtype dts[3] = {FP8KIT_F32, FP8KIT_F16, FP8KIT_BF16};
    int combo = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        geom g = shapes[si];
        int64_t n = g.E * g.R * g.C;
        void *x = malloc((size_t)n * 4);
        for (int di = 0; di < 3; di++)
            for (int sc = 0; sc <= FP8KIT_SCHEME_MX; sc++)
                for (int opt = 0; opt < 4; opt++)
                    for (int e5 = 0; e5 < 2; e5++) {
                        fp8kit_quant_desc d = fp8kit_quant_desc_default((fp8kit_scheme)sc);
                        d.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                        if (sc == FP8KIT_SCHEME_MX) {
                            d.rounding = (opt & 1) ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                            d.axis = (opt & 2) ? -2 : -1;
                            if ((d.axis == -1 ? g.C : g.R) % 32) continue;
                        } else {
                            if (opt >= 2) continue;
                            d.pow2 = opt;
                        }
                        fill_random(x, dts[di], n, combo++ & 1);
                        char what[96];
                        snprintf(what, sizeof what, "random %s scheme %d opt %d %s", fp8kit_dtype_name(dts[di]), sc,
                                 opt, e5 ? "e5m2" : "e4m3");
                        compare_quant(what, &d, dts[di], x, g);
                    }
        free(x);
    }
}

/* Strided input and q rows (and expert gaps) give the contiguous result. */
static void test_strides(void)
{
    geom g = {3, 2, 96, 160, 0, 0};
    int64_t n = g.E * g.R * g.C;
    float *x = malloc((size_t)n * 4);
    for (int sc = 0; sc <= FP8KIT_SCHEME_MX; sc++)
        for (int ax = 0; ax < 2; ax++) {
            if (ax && sc != FP8KIT_SCHEME_MX) continue;
            fp8kit_quant_desc d = fp8kit_quant_desc_default((fp8kit_scheme)sc);
            d.axis = ax ? -2 : -1;
            fill_random(x, FP8KIT_BF16, n, sc & 1);
            geom gs = g;
            gs.ldx = g.C + 13;
            gs.ldq = (ax ? g.R : g.C) + 7;
            compare_quant("strided rows", &d, FP8KIT_BF16, x, gs);
            gs.nd = 2; gs.E = 1; gs.R = 150; gs.C = 64; gs.ldx = 100; gs.ldq = ax ? 170 : 65;
            if (ax) gs.R = 160;
            compare_quant("strided rows 2-D", &d, FP8KIT_BF16, x, gs);
        }
    free(x);
}

/* mx axis -2 == axis -1 of an explicitly transposed copy, bit for bit. */
static void test_axis2_vs_transpose(void)
{
    geom gs[3] = {{2, 1, 96, 100, 0, 0}, {3, 3, 64, 160, 0, 0}, {3, 2, 224, 33, 0, 0}};
    for (int k = 0; k < 3; k++)
        for (int rc = 0; rc < 2; rc++)
            for (int di = 0; di < 3; di++) {
                fp8kit_dtype t = di == 0 ? FP8KIT_F32 : di == 1 ? FP8KIT_F16 : FP8KIT_BF16;
                geom g = gs[k], gt = g;
                gt.R = g.C; gt.C = g.R;
                int64_t n = g.E * g.R * g.C;
                size_t es = dsize(t);
                char *x = malloc((size_t)n * es), *xt = malloc((size_t)n * es);
                fill_random(x, t, n, rc);
                for (int64_t e = 0; e < g.E; e++)
                    for (int64_t r = 0; r < g.R; r++)
                        for (int64_t c = 0; c < g.C; c++)
                            memcpy(xt + ((e * g.C + c) * g.R + r) * es, x + ((e * g.R + r) * g.C + c) * es, es);
                for (int lay = 0; lay < 2; lay++) {
                    fp8kit_quant_desc d2 = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX), d1;
                    d2.rounding = rc ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                    d2.elem = (k + di) & 1 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                    d2.scale_layout = lay ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
                    d1 = d2;
                    d2.axis = -2;
                    size_t sb = scale_bytes_of(&d2, t, g);
                    CHECK(sb == scale_bytes_of(&d1, t, gt), "axis -2 scale size differs from transpose's");
                    uint8_t *q2 = malloc((size_t)n), *q1 = malloc((size_t)n), *s2 = malloc(sb), *s1 = malloc(sb);
                    CHECK_STATUS(lib_quantize(&d2, t, x, g, q2, s2, sb), FP8KIT_OK);
                    CHECK_STATUS(lib_quantize(&d1, t, xt, gt, q1, s1, sb), FP8KIT_OK);
                    CHECK(memcmp(q1, q2, (size_t)n) == 0, "axis -2 q != axis -1 q of transpose (shape %d, %s)", k,
                          fp8kit_dtype_name(t));
                    CHECK(memcmp(s1, s2, sb) == 0, "axis -2 scales != axis -1 scales of transpose (shape %d)", k);
                    free(q1); free(q2); free(s1); free(s2);
                }
                free(x); free(xt);
            }
}

/* dequantize(quantize(x)) == decode(q) * S rounded to y's dtype, every scheme
 * and layout, axis -2 back in the original orientation. */
static void test_dequant(void)
{
    geom gs[3] = {{2, 1, 130, 288, 0, 0}, {3, 2, 96, 160, 0, 0}, {2, 1, 256, 64, 0, 0}};
    fp8kit_dtype yts[3] = {FP8KIT_F32, FP8KIT_F16, FP8KIT_BF16};
    for (int k = 0; k < 3; k++) {
        geom g = gs[k];
        int64_t n = g.E * g.R * g.C;
        float *x = malloc((size_t)n * 4);
        for (int sc = 0; sc <= FP8KIT_SCHEME_MX; sc++)
            for (int var = 0; var < 4; var++) {
                fp8kit_quant_desc d = fp8kit_quant_desc_default((fp8kit_scheme)sc);
                d.elem = var & 1 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                if (sc == FP8KIT_SCHEME_MX) {
                    d.axis = var & 2 ? -2 : -1;
                    d.scale_layout = (var + k) & 1 ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
                    if ((d.axis == -1 ? g.C : g.R) % 32) continue;
                } else if (sc >= FP8KIT_SCHEME_BLOCK1X128 && (var & 2)) {
                    d.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
                } else if (var & 2) {
                    d.pow2 = 1;
                }
                fill_random(x, FP8KIT_F32, n, var & 1);
                if (var == 3) x[n / 2] = NAN; /* one NaN group */
                size_t sb = scale_bytes_of(&d, FP8KIT_F32, g);
                uint8_t *q = malloc((size_t)n), *qr = malloc((size_t)n);
                void *s = malloc(sb), *sr = malloc(sb > 4 ? (size_t)n * 4 : 4);
                CHECK_STATUS(lib_quantize(&d, FP8KIT_F32, x, g, q, s, sb), FP8KIT_OK);
                /* logical (plain) scales from the reference: compare against
                 * decode(q) * S computed from them */
                fp8kit_quant_desc dp = d;
                dp.scale_layout = FP8KIT_LAYOUT_PLAIN;
                ref_quantize(&dp, FP8KIT_F32, x, g.E, g.R, g.C, qr, sr);
                int t2 = sc == FP8KIT_SCHEME_MX && d.axis == -2;
                for (int yi = 0; yi < 3; yi++) {
                    size_t es = dsize(yts[yi]);
                    char *y = malloc((size_t)n * es);
                    fk_poison(y, (size_t)n * es);
                    CHECK_STATUS(lib_dequantize(&d, q, s, g, yts[yi], y), FP8KIT_OK);
                    long bad = 0;
                    int64_t nb = (g.C + 127) / 128, nrb = (g.R + 127) / 128;
                    for (int64_t e = 0; e < g.E; e++)
                        for (int64_t r = 0; r < g.R; r++)
                            for (int64_t c = 0; c < g.C; c++) {
                                int64_t qi = t2 ? (e * g.C + c) * g.R + r : (e * g.R + r) * g.C + c;
                                float S;
                                switch (sc) {
                                case FP8KIT_SCHEME_TENSOR: S = ((float *)sr)[0]; break;
                                case FP8KIT_SCHEME_ROW: S = ((float *)sr)[e * g.R + r]; break;
                                case FP8KIT_SCHEME_BLOCK1X128: S = ((float *)sr)[(e * g.R + r) * nb + c / 128]; break;
                                case FP8KIT_SCHEME_BLOCK128X128: S = ((float *)sr)[(e * nrb + r / 128) * nb + c / 128]; break;
                                default: {
                                    uint8_t sv = t2 ? ((uint8_t *)sr)[(e * g.C + c) * (g.R / 32) + r / 32]
                                                    : ((uint8_t *)sr)[(e * g.R + r) * (g.C / 32) + c / 32];
                                    S = sv == 255 ? NAN : ldexpf(1.0f, sv - 127);
                                }
                                }
                                float v = fk_fp8_to_f32(q[qi], d.elem == FP8KIT_E5M2) * S;
                                float got = get_hp(y, yts[yi], (e * g.R + r) * g.C + c);
                                float want = round_to(v, yts[yi]);
                                if (!same_f32(got, want) && bad++ < 3)
                                    fprintf(stderr, "  dequant scheme %d var %d %s (%lld,%lld,%lld): %a want %a\n", sc, var,
                                            fp8kit_dtype_name(yts[yi]), (long long)e, (long long)r, (long long)c, got, want);
                            }
                    CHECK(bad == 0, "dequant scheme %d var %d shape %d to %s: %ld mismatches", sc, var, k,
                          fp8kit_dtype_name(yts[yi]), bad);
                    free(y);
                }
                free(q); free(qr); free(s); free(sr);
            }
        free(x);
    }
}

/* fp8kit_cast both ways, against codec.h element by element. */
/* The NaN a dequantized value carries (docs/spec.md 2): q's NaN (sign kept)
 * when q decodes to NaN, else S's, else 0xFFC00000 (Inf * 0); for every
 * output dtype (f16 / bf16 keep the sign and the quiet bit). */
static void test_dequant_nan(void)
{
    static const struct {
        uint8_t q;
        int e5m2;
        float s;
        uint32_t want; /* f32 bits */
    } t[] = {
        {0xFF, 0, 0.0f, 0xFFC00000u},            /* -NaN code, zero S: the code's NaN */
        {0xFF, 0, 2.0f, 0xFFC00000u},            /* -NaN code */
        {0x7F, 0, 2.0f, 0x7FC00000u},            /* +NaN code */
        {0x40, 0, 0.0f, 0x00000000u},            /* 2 * 0 */
        {0x7C, 1, 0.0f, 0xFFC00000u},            /* e5m2 +Inf * 0: the default NaN */
        {0xFC, 1, 0.0f, 0xFFC00000u},            /* -Inf * 0 */
        {0xFE, 1, 0.0f, 0xFFC00000u},            /* e5m2 -NaN code */
        {0x7E, 1, 0.0f, 0x7FC00000u},            /* e5m2 +NaN code */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        for (int nans = 0; nans < 2; nans++) {
            fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
            d.elem = t[i].e5m2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
            /* nans = 1: S is NaN too (the NaN group); the code's NaN still wins when q is NaN */
            const float s = nans ? fk_t_u2f(0x7FC00001u) : t[i].s;
            const int qnan = t[i].e5m2 ? (t[i].q & 0x7F) > 0x7C : (t[i].q & 0x7F) == 0x7F;
            const uint32_t want = nans && !qnan ? 0x7FC00001u : t[i].want;
            uint8_t q[4] = {t[i].q, t[i].q, t[i].q, t[i].q};
            geom g = {2, 1, 1, 4, 0, 0};
            float y32[4];
            uint16_t y16[4];
            CHECK_STATUS(lib_dequantize(&d, q, &s, g, FP8KIT_F32, y32), FP8KIT_OK);
            CHECK(fk_t_f2u(y32[0]) == want, "case %zu nans %d: f32 0x%08x, want 0x%08x", i, nans, fk_t_f2u(y32[0]),
                  want);
            CHECK_STATUS(lib_dequantize(&d, q, &s, g, FP8KIT_BF16, y16), FP8KIT_OK);
            CHECK(y16[0] == fk_f32_to_bf16(fk_t_u2f(want)), "case %zu nans %d: bf16 0x%04x", i, nans, y16[0]);
            CHECK_STATUS(lib_dequantize(&d, q, &s, g, FP8KIT_F16, y16), FP8KIT_OK);
            CHECK(y16[0] == fk_f32_to_f16(fk_t_u2f(want)), "case %zu nans %d: f16 0x%04x", i, nans, y16[0]);
        }
    }
}

static void test_cast(void)
{
    /* hp -> fp8: every bf16 and f16 pattern, f32 patterns with every upper
     * half and several low halves plus random ones */
    const int64_t n = 65536;
    uint16_t *h = malloc((size_t)n * 2);
    uint8_t *o = malloc((size_t)n);
    float *f = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    for (int e5 = 0; e5 < 2; e5++) {
        fp8kit_dtype ft = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
        for (int ti = 0; ti < 2; ti++) {
            fp8kit_dtype ht = ti ? FP8KIT_F16 : FP8KIT_BF16;
            fp8kit_tensor xt = fp8kit_tensor_2d(h, ht, 256, 256, 256), yt = fp8kit_tensor_2d(o, ft, 256, 256, 256);
            CHECK_STATUS(fp8kit_cast(ctx, &xt, &yt, NULL), FP8KIT_OK);
            long bad = 0;
            for (int64_t i = 0; i < n; i++)
                bad += o[i] != fk_f32_to_fp8(get_hp(h, ht, i), e5);
            CHECK(bad == 0, "cast %s -> %s: %ld mismatches", fp8kit_dtype_name(ht), fp8kit_dtype_name(ft), bad);
        }
        const uint32_t lows[] = {0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x0FFF, 0x1000, 0x1001, 0x4000};
        for (int li = 0; li < 12; li++) {
            for (int64_t i = 0; i < n; i++)
                f[i] = fk_t_u2f(li < 10 ? ((uint32_t)i << 16) | lows[li] : fk_rng_u32(&rng));
            fp8kit_tensor xt = fp8kit_tensor_2d(f, FP8KIT_F32, 1, n, n), yt = fp8kit_tensor_2d(o, ft, 1, n, n);
            CHECK_STATUS(fp8kit_cast(ctx, &xt, &yt, NULL), FP8KIT_OK);
            long bad = 0;
            for (int64_t i = 0; i < n; i++)
                bad += o[i] != fk_f32_to_fp8(f[i], e5);
            CHECK(bad == 0, "cast f32 -> %s (pattern %d): %ld mismatches", fp8kit_dtype_name(ft), li, bad);
        }
        /* fp8 -> hp, all 256 codes, strided */
        uint8_t codes[4 * 80];
        for (int i = 0; i < 4 * 80; i++) codes[i] = (uint8_t)((i / 80) * 64 + i % 80); /* row r: codes 64r .. 64r+63 */
        for (int ti = 0; ti < 3; ti++) {
            fp8kit_dtype ht = ti == 0 ? FP8KIT_F32 : ti == 1 ? FP8KIT_F16 : FP8KIT_BF16;
            fp8kit_tensor xt = fp8kit_tensor_2d(codes, ft, 4, 64, 80), yt = fp8kit_tensor_2d(f, ht, 4, 64, 70);
            fk_poison(f, 4 * 70 * 4);
            CHECK_STATUS(fp8kit_cast(ctx, &xt, &yt, NULL), FP8KIT_OK);
            long bad = 0;
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 64; c++) {
                    float v = fk_fp8_to_f32(codes[r * 80 + c], e5);
                    float got = get_hp(f, ht, r * 70 + c);
                    bad += !same_f32(got, v); /* every fp8 value is exact in f16 and bf16 */
                }
            CHECK(bad == 0, "cast %s -> %s: %ld mismatches", fp8kit_dtype_name(ft), fp8kit_dtype_name(ht), bad);
        }
    }
    free(h); free(o); free(f);
}

/* The CPU's branch-free codecs against codec.h (structured + random sets;
 * all 2^32 fp32 patterns were checked once offline). */
static void test_cpu_codecs(void)
{
    long bad = 0;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        uint16_t hh = (uint16_t)hi;
        bad += fk_t_f2u(fkv_f16_to_f32(hh)) != fk_t_f2u(fk_f16_to_f32(hh));
        for (int k = 0; k < 8; k++) {
            uint32_t lo = k == 0 ? 0 : k == 1 ? 0xFFFF : k == 2 ? 0x8000 : k == 3 ? 0x7FFF : k == 4 ? 1 : fk_rng_u32(&rng) & 0xFFFF;
            float x = fk_t_u2f((hi << 16) | lo);
            bad += fkv_f32_to_fp8(x, 0) != fk_f32_to_e4m3(x);
            bad += fkv_f32_to_fp8(x, 1) != fk_f32_to_e5m2(x);
            bad += fkv_f32_to_bf16(x) != fk_f32_to_bf16(x);
            bad += fkv_f32_to_f16(x) != fk_f32_to_f16(x);
        }
    }
    CHECK(bad == 0, "branch-free codecs: %ld mismatches vs codec.h", bad);
}

/* A few status checks that touch this backend's contract. */
static void test_errors_and_threads(void)
{
    float x[64 * 40];
    uint8_t q[64 * 40], s[256];
    fill_random(x, FP8KIT_F32, 64 * 40, 0);
    fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
    fp8kit_tensor xt = fp8kit_tensor_2d(x, FP8KIT_F32, 64, 40, 40), qt = fp8kit_tensor_2d(q, FP8KIT_E4M3, 64, 40, 40);
    int64_t ss[2] = {64, 1};
    fp8kit_tensor st = fp8kit_tensor_make(s, FP8KIT_E8M0, 2, ss);
    fk_poison(q, sizeof q);
    fk_poison(s, sizeof s);
    CHECK_STATUS(fp8kit_quantize(ctx, &d, &xt, &qt, &st, NULL), FP8KIT_ERR_INVALID_SHAPE);
    CHECK(fk_is_poisoned(q, sizeof q) && fk_is_poisoned(s, sizeof s), "failed call wrote output");
    /* 1 thread and 2 threads agree (the other tests run on 1 thread: libgomp's
     * spinning workers would otherwise slow the serial reference code) */
    geom gs[2] = {{3, 2, 96, 320, 0, 0}, {2, 1, 5, 40000, 0, 0}};
    for (int k = 0; k < 2; k++) {
        geom g = gs[k];
        int64_t n = g.E * g.R * g.C;
        float *xx = malloc((size_t)n * 4);
        fill_random(xx, FP8KIT_F32, n, 1);
        for (int sc = 0; sc <= FP8KIT_SCHEME_MX; sc++)
            for (int var = 0; var < 4; var++) {
                fp8kit_quant_desc dd = fp8kit_quant_desc_default((fp8kit_scheme)sc);
                if (sc == FP8KIT_SCHEME_MX) {
                    dd.axis = var & 1 ? -2 : -1;
                    dd.scale_layout = var & 2 ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
                    if ((dd.axis == -1 ? g.C : g.R) % 32) continue;
                } else if (var & 1) {
                    if (sc < FP8KIT_SCHEME_BLOCK1X128) continue;
                    dd.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
                } else if (var) {
                    continue;
                }
                size_t sb = scale_bytes_of(&dd, FP8KIT_F32, g);
                uint8_t *q1 = malloc((size_t)n), *q2 = malloc((size_t)n), *s1 = malloc(sb), *s2 = malloc(sb);
                float *y1 = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
                fp8kit_ctx_set_threads(ctx, 1);
                CHECK_STATUS(lib_quantize(&dd, FP8KIT_F32, xx, g, q1, s1, sb), FP8KIT_OK);
                CHECK_STATUS(lib_dequantize(&dd, q1, s1, g, FP8KIT_F32, y1), FP8KIT_OK);
                fp8kit_ctx_set_threads(ctx, 2);
                CHECK_STATUS(lib_quantize(&dd, FP8KIT_F32, xx, g, q2, s2, sb), FP8KIT_OK);
                CHECK_STATUS(lib_dequantize(&dd, q1, s1, g, FP8KIT_F32, y2), FP8KIT_OK);
                CHECK(memcmp(q1, q2, (size_t)n) == 0 && memcmp(s1, s2, sb) == 0,
                      "quantize: 1 vs 2 threads differ, scheme %d var %d", sc, var);
                CHECK(memcmp(y1, y2, (size_t)n * 4) == 0, "dequantize: 1 vs 2 threads differ, scheme %d var %d", sc, var);
                free(q1); free(q2); free(s1); free(s2); free(y1); free(y2);
            }
        free(xx);
    }
    fp8kit_ctx_set_threads(ctx, 1);
}

int main(void)
{
    rng = fk_rng_seeded("test_quant");
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "cannot create a CPU context\n");
        return 1;
    }
    fp8kit_ctx_set_threads(ctx, 1); /* see test_errors_and_threads */
    test_cpu_codecs();
    test_mx_table();
    test_fp32_specials();
    test_random_vs_ref();
    test_strides();
    test_axis2_vs_transpose();
    test_dequant();
    test_dequant_nan();
    test_cast();
    test_errors_and_threads();
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_quant");
}
