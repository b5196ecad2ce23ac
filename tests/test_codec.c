/* test_codec.c - docs/spec.md section 1 (element codecs) and the scale rules of
 * sections 2.1 / 2.2, as implemented in src/format/codec.h and scale.h,
 * checked against the independent exact-arithmetic reference in
 * tests/ref_exact.h (value tables + exact comparison + 128-bit quotients; no
 * bit tricks shared with the code under test).
 *
 * Covered: decode of all 256 e4m3 / e5m2 / e8m0 codes and all 65,536 bf16 and
 * fp16 patterns; encode fp32 -> e4m3, e5m2, bf16, fp16 for all bf16 patterns,
 * >= 10^7 uniformly random fp32 patterns and dense sweeps around every fp8
 * boundary, saturation region, subnormal boundary and every fp32 exponent;
 * fk_pow2_ceil, fk_scale_f32, fk_mx_scale (FLOOR/RCEIL, e4m3/e5m2),
 * fk_mx_recip over strided + per-exponent samples of all positive amax
 * patterns; the per-element quantize steps; docs/spec.md 2.2's edge-case table.
 * Needs no library code. Run: build/test_codec (FK_TEST_SEED=N replays;
 * FK_CODEC_RANDOM=N changes the random count, FK_CODEC_STRIDE=N the amax stride;
 * FK_CODEC_EXHAUSTIVE=1 with FK_CODEC_STRIDE=1 checks all 2^32 fp32 patterns and
 * all 2^31 amax patterns: minutes on a 16-core machine). */
#include "format/codec.h"
#include "format/scale.h"
#include "ref_exact.h"
#include "test_util.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static ref_fmt F_E4M3, F_E5M2, F_F16, F_BF16;
static uint64_t tab_m[4][0x8000 + 2];
static int tab_e[4][0x8000 + 2];
static long long g_cases; /* total individual comparisons */
static long n_reported;

static void report(const char *what, uint32_t in, uint32_t got, uint32_t want)
{
#ifdef _OPENMP
#pragma omp critical(fk_codec_report)
#endif
    {
        if (n_reported++ < 30)
            fprintf(stderr, "MISMATCH %s: input 0x%08x (%.9g) got 0x%x want 0x%x\n", what, in,
                    (double)fk_t_u2f(in), got, want);
    }
}

/* ------------------------------------------------------------ input lists */
typedef struct vec {
    uint32_t *p;
    size_t n, cap;
} vec;

static void push(vec *v, uint32_t u)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 4096;
        v->p = (uint32_t *)realloc(v->p, v->cap * sizeof *v->p);
        if (!v->p) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    v->p[v->n++] = u;
}

/* all fp32 bit patterns in [c - w, c + w] of the magnitude c, both signs */
static void push_around(vec *v, uint32_t c, uint32_t w)
{
    uint32_t lo = c > w ? c - w : 0, hi = c + w > 0x7F800000u ? 0x7F800000u : c + w;
    for (uint32_t u = lo; u <= hi; u++) {
        push(v, u);
        push(v, u | 0x80000000u);
    }
}

/* ------------------------------------------------------ one encode check */
static int is_nan16(uint32_t h, uint32_t inf) { return (h & 0x7FFFu) > inf; }

/* fp32 pattern u -> e4m3, e5m2, bf16, fp16: returns the number of mismatches */
static int check_encode(uint32_t u)
{
    float x = fk_t_u2f(u);
    ref_val v = ref_from_f32(u);
    int bad = 0;
    uint32_t w, g;
    w = ref_encode(&F_E4M3, v);
    g = fk_f32_to_e4m3(x);
    if (g != w) {
        bad++;
        report("f32->e4m3", u, g, w);
    }
    w = ref_encode(&F_E5M2, v);
    g = fk_f32_to_e5m2(x);
    if (g != w) {
        bad++;
        report("f32->e5m2", u, g, w);
    }
    w = ref_encode(&F_BF16, v);
    g = fk_f32_to_bf16(x);
    if (v.kind == 2 ? !is_nan16(g, 0x7F80u) : g != w) {
        bad++;
        report("f32->bf16", u, g, w);
    }
    w = ref_encode(&F_F16, v);
    g = fk_f32_to_f16(x);
    if (v.kind == 2 ? !is_nan16(g, 0x7C00u) : g != w) {
        bad++;
        report("f32->f16", u, g, w);
    }
    return bad;
}

/* Runs `check` (returning its mismatch count) over every input of a list in
 * parallel; `what` and `per` (checks per input) are for the report. */
static void check_list(const char *kind, const char *name, const vec *in, int (*check)(uint32_t), int per,
                       const char *what)
{
    long bad = 0;
    long long n = (long long)in->n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 8192) reduction(+ : bad)
#endif
    for (long long i = 0; i < n; i++)
        bad += check(in->p[i]);
    printf("  %s %-24s %10lld %s x %d %s: %ld mismatches\n", kind, name, n,
           kind[0] == 'e' ? "inputs" : "amax", per, what, bad);
    CHECK(bad == 0, "%s %s: %ld mismatches", kind, name, bad);
    g_cases += per * n;
}

static void check_encode_list(const char *name, const vec *in)
{
    check_list("encode", name, in, check_encode, 4, "conversions");
}

/* every fp32 bit pattern (FK_CODEC_EXHAUSTIVE=1; minutes on many cores) */
static void check_encode_all(void)
{
    long bad = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : bad)
#endif
    for (long long hi = 0; hi < 65536; hi++)
        for (uint32_t lo = 0; lo < 65536; lo++)
            bad += check_encode(((uint32_t)hi << 16) | lo);
    printf("  encode %-24s %10lld inputs x 4 conversions: %ld mismatches\n", "ALL fp32 patterns", 1LL << 32, bad);
    CHECK(bad == 0, "encode all fp32 patterns: %ld mismatches", bad);
    g_cases += 4LL << 32;
}

/* --------------------------------------------------------------- decoding */
/* value of a code from its fields via ldexp (double, exact), as fp32 bits */
static uint32_t field_value(uint32_t code, int ebits, int mbits, int bias)
{
    uint32_t s = code >> (ebits + mbits), E = (code >> mbits) & ((1u << ebits) - 1u);
    uint32_t m = code & ((1u << mbits) - 1u);
    double v = E ? ldexp((double)((1u << mbits) + m), (int)E - bias - mbits)
                 : ldexp((double)m, 1 - bias - mbits);
    return fk_t_f2u((float)(s ? -v : v));
}

static void test_decode(void)
{
    long bad = 0, n = 0;
    for (uint32_t c = 0; c < 256; c++, n += 3) {
        /* e4m3: only S.1111.111 is NaN */
        uint32_t g = fk_t_f2u(fk_e4m3_to_f32((uint8_t)c));
        if ((c & 0x7F) == 0x7F) {
            if (!ref_is_nan32(g)) { bad++; report("e4m3 decode NaN", c, g, 0x7FC00000u); }
        } else if (g != field_value(c, 4, 3, 7)) {
            bad++;
            report("e4m3 decode", c, g, field_value(c, 4, 3, 7));
        }
        /* e5m2: exponent 31 is Inf (mantissa 0) or NaN */
        g = fk_t_f2u(fk_e5m2_to_f32((uint8_t)c));
        if ((c & 0x7F) >= 0x7C) {
            uint32_t want = (c & 0x80 ? 0x80000000u : 0) | 0x7F800000u;
            if ((c & 0x7F) == 0x7C ? g != want : !ref_is_nan32(g)) { bad++; report("e5m2 decode special", c, g, want); }
        } else if (g != field_value(c, 5, 2, 15)) {
            bad++;
            report("e5m2 decode", c, g, field_value(c, 5, 2, 15));
        }
        /* e8m0: 2^(s-127), 0xFF NaN */
        g = fk_t_f2u(fk_e8m0_to_f32((uint8_t)c));
        if (c == 255) {
            if (!ref_is_nan32(g)) { bad++; report("e8m0 decode NaN", c, g, 0x7FC00000u); }
        } else if (g != fk_t_f2u((float)ldexp(1.0, (int)c - 127))) {
            bad++;
            report("e8m0 decode", c, g, fk_t_f2u((float)ldexp(1.0, (int)c - 127)));
        }
    }
    for (uint32_t h = 0; h < 65536; h++, n += 2) {
        uint32_t g = fk_t_f2u(fk_bf16_to_f32((uint16_t)h));
        uint32_t E = (h >> 7) & 0xFF;
        if (E == 255) {
            int nan = (h & 0x7F) != 0;
            if (nan ? !ref_is_nan32(g) : g != (((h & 0x8000u) << 16) | 0x7F800000u)) { bad++; report("bf16 decode special", h, g, 0); }
        } else if (g != field_value(h, 8, 7, 127)) {
            bad++;
            report("bf16 decode", h, g, field_value(h, 8, 7, 127));
        }
        g = fk_t_f2u(fk_f16_to_f32((uint16_t)h));
        E = (h >> 10) & 0x1F;
        if (E == 31) {
            int nan = (h & 0x3FF) != 0;
            uint32_t inf = ((h & 0x8000u) << 16) | 0x7F800000u;
            if (nan ? !ref_is_nan32(g) || (g >> 31) != (h >> 15) : g != inf) { bad++; report("f16 decode special", h, g, inf); }
        } else if (g != field_value(h, 5, 10, 15)) {
            bad++;
            report("f16 decode", h, g, field_value(h, 5, 10, 15));
        }
    }
    printf("  decode e4m3/e5m2/e8m0 (256 each), bf16/f16 (65536 each): %ld cases, %ld mismatches\n", n, bad);
    CHECK(bad == 0, "decode: %ld mismatches", bad);
    g_cases += n;

    /* round trips: code -> f32 -> code */
    bad = 0;
    n = 0;
    for (uint32_t h = 0; h < 65536; h++, n += 2) {
        uint32_t g = fk_f32_to_f16(fk_f16_to_f32((uint16_t)h));
        int nan = (h & 0x7FFF) > 0x7C00;
        if (nan ? !is_nan16(g, 0x7C00u) : g != h) { bad++; report("f16 round trip", h, g, h); }
        g = fk_f32_to_bf16(fk_bf16_to_f32((uint16_t)h));
        nan = (h & 0x7FFF) > 0x7F80;
        if (nan ? !is_nan16(g, 0x7F80u) : g != h) { bad++; report("bf16 round trip", h, g, h); }
    }
    for (uint32_t c = 0; c < 256; c++, n += 2) {
        uint32_t g = fk_f32_to_e4m3(fk_e4m3_to_f32((uint8_t)c));
        uint32_t want = (c & 0x7F) == 0x7F ? 0x7Fu : c;
        if (g != want) { bad++; report("e4m3 round trip", c, g, want); }
        g = fk_f32_to_e5m2(fk_e5m2_to_f32((uint8_t)c));
        /* Inf saturates to max finite; NaN becomes the canonical NaN */
        want = (c & 0x7F) > 0x7C ? 0x7Eu : (c & 0x7F) == 0x7C ? (c & 0x80) | 0x7Bu : c;
        if (g != want) { bad++; report("e5m2 round trip", c, g, want); }
    }
    printf("  round trips f16/bf16/e4m3/e5m2: %ld cases, %ld mismatches\n", n, bad);
    CHECK(bad == 0, "round trips: %ld mismatches", bad);
    g_cases += n;
}

/* docs/spec.md section 1's table, spelled out (independent of both implementations) */
static void test_spec_table(void)
{
    const float inf = INFINITY;
    CHECK(fk_f32_to_e4m3(448.0f) == 0x7E, "448");
    CHECK(fk_f32_to_e4m3(464.0f) == 0x7E, "464 ties to 448");
    CHECK(fk_f32_to_e4m3(nextafterf(464.0f, 0.0f)) == 0x7E, "just below 464");
    CHECK(fk_f32_to_e4m3(nextafterf(464.0f, 1e9f)) == 0x7E, "just above 464 saturates");
    CHECK(fk_f32_to_e4m3(480.0f) == 0x7E, "480 saturates");
    CHECK(fk_f32_to_e4m3(-1e30f) == 0xFE, "-1e30 saturates");
    CHECK(fk_f32_to_e4m3(inf) == 0x7E && fk_f32_to_e4m3(-inf) == 0xFE, "e4m3 Inf saturates");
    CHECK(fk_f32_to_e4m3(NAN) == 0x7F && fk_f32_to_e4m3(-NAN) == 0x7F, "e4m3 canonical NaN");
    CHECK(fk_f32_to_e4m3(-0.0f) == 0x80 && fk_f32_to_e4m3(0.0f) == 0x00, "e4m3 signed zero");
    CHECK(fk_f32_to_e4m3(0x1p-9f) == 0x01, "e4m3 min subnormal");
    CHECK(fk_f32_to_e4m3(0x1p-10f) == 0x00, "e4m3 half min subnormal ties to 0");
    CHECK(fk_f32_to_e4m3(0x1.8p-9f) == 0x02, "e4m3 1.5 * 2^-9 ties to 2 * 2^-9");
    CHECK(fk_f32_to_e4m3(-0x1p-11f) == 0x80, "e4m3 tiny negative -> -0");
    CHECK(fk_f32_to_e5m2(57344.0f) == 0x7B && fk_f32_to_e5m2(61440.0f) == 0x7B, "e5m2 max");
    CHECK(fk_f32_to_e5m2(inf) == 0x7B && fk_f32_to_e5m2(-inf) == 0xFB, "e5m2 Inf saturates");
    CHECK(fk_f32_to_e5m2(NAN) == 0x7E, "e5m2 canonical NaN");
    CHECK(fk_f32_to_e5m2(0x1p-16f) == 0x01 && fk_f32_to_e5m2(0x1p-17f) == 0x00, "e5m2 subnormal");
    CHECK(fk_f32_to_e5m2(-0.0f) == 0x80, "e5m2 -0");
    CHECK(fk_e4m3_to_f32(0x7E) == 448.0f && isnan(fk_e4m3_to_f32(0x7F)) && isnan(fk_e4m3_to_f32(0xFF)), "e4m3 decode");
    CHECK(fk_e5m2_to_f32(0x7B) == 57344.0f && fk_e5m2_to_f32(0x7C) == inf && fk_e5m2_to_f32(0xFC) == -inf, "e5m2 decode");
    CHECK(isnan(fk_e5m2_to_f32(0x7D)) && isnan(fk_e5m2_to_f32(0xFF)), "e5m2 NaN decode");
    CHECK(fk_e8m0_to_f32(0xFE) == 0x1p127f && fk_e8m0_to_f32(127) == 1.0f && isnan(fk_e8m0_to_f32(0xFF)), "e8m0");
    CHECK(fk_e8m0_to_f32(0) == 0x1p-127f, "e8m0 0 is 2^-127");
    CHECK(fk_f32_to_f16(65504.0f) == 0x7BFF && fk_f32_to_f16(65520.0f) == 0x7C00, "f16 overflow tie");
    CHECK(fk_f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7BFF, "f16 below overflow tie");
    CHECK(fk_f32_to_bf16(0x1.01p0f) == 0x3F80 && fk_f32_to_bf16(0x1.03p0f) == 0x3F82, "bf16 ties to even");
}

/* --------------------------------------------------------- encode sweeps */
static void test_encode(fk_rng *rng, long long n_random)
{
    vec v = {0};
    for (uint32_t h = 0; h < 65536; h++)
        push(&v, h << 16);
    check_encode_list("all bf16 patterns", &v);

    v.n = 0;
    for (long long i = 0; i < n_random; i++)
        push(&v, fk_rng_u32(rng));
    check_encode_list("random fp32 patterns", &v);

    /* every fp8 value and every midpoint between neighbours (incl. the one
     * above max finite), +-256 ulps, both signs */
    v.n = 0;
    const ref_fmt *fp8[2] = {&F_E4M3, &F_E5M2};
    for (int f = 0; f < 2; f++) {
        for (uint32_t c = 0; c + 1 < fp8[f]->n; c++) {
            double lo = ldexp((double)fp8[f]->m[c], fp8[f]->e[c]);
            double hi = ldexp((double)fp8[f]->m[c + 1], fp8[f]->e[c + 1]);
            push_around(&v, fk_t_f2u((float)lo), 256);
            push_around(&v, fk_t_f2u((float)((lo + hi) / 2)), 256); /* exact in fp32 */
        }
        push_around(&v, fk_t_f2u((float)ldexp((double)fp8[f]->m[fp8[f]->n - 1], fp8[f]->e[fp8[f]->n - 1])), 256);
    }
    check_encode_list("fp8 values and midpoints", &v);

    /* saturation regions: every fp32 in [440, 490] and [57000, 66000] */
    v.n = 0;
    for (uint32_t u = fk_t_f2u(440.0f); u <= fk_t_f2u(490.0f); u++) {
        push(&v, u);
        push(&v, u | 0x80000000u);
    }
    for (uint32_t u = fk_t_f2u(57000.0f); u <= fk_t_f2u(66000.0f); u++) {
        push(&v, u);
        push(&v, u | 0x80000000u);
    }
    check_encode_list("all fp32 in 440..490, 57000..66000", &v);

    /* subnormal / min-normal boundaries of e4m3 (2^-9, 2^-6) and e5m2 (2^-16, 2^-14),
     * their halves, and fp16's (2^-24, 2^-14) */
    v.n = 0;
    const int pw[] = {-9, -10, -6, -7, -16, -17, -14, -15, -24, -25, -126, -127};
    for (size_t i = 0; i < sizeof pw / sizeof pw[0]; i++)
        push_around(&v, fk_t_f2u(ldexpf(1.0f, pw[i])), 32768);
    push_around(&v, 0, 65536); /* fp32 subnormals near zero */
    check_encode_list("subnormal boundaries", &v);

    /* specials: zeros, Inf, NaN payloads, extremes */
    v.n = 0;
    const uint32_t sp[] = {0x00000000u, 0x7F800000u, 0x7F800001u, 0x7FBFFFFFu, 0x7FC00000u, 0x7FC00001u,
                           0x7FFFFFFFu, 0x7F7FFFFFu, 0x00800000u, 0x00000001u, 0x007FFFFFu};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        push(&v, sp[i]);
        push(&v, sp[i] | 0x80000000u);
    }
    for (int i = 0; i < 65536; i++) {
        uint32_t pay = 1u + fk_rng_u32(rng) % 0x7FFFFFu;
        push(&v, 0x7F800000u | pay);
        push(&v, 0xFF800000u | pay);
    }
    check_encode_list("zeros, Inf, NaN payloads", &v);

    /* every exponent x random mantissas, plus mantissas at and next to the
     * rounding half-points of f16 (bit 12), bf16 (15), e4m3 (19), e5m2 (20) */
    v.n = 0;
    for (uint32_t E = 0; E < 256; E++)
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t base = (s << 31) | (E << 23);
            push(&v, base);
            push(&v, base | 0x7FFFFFu);
            push(&v, base | 0x400000u);
            for (int i = 0; i < 2048; i++)
                push(&v, base | (fk_rng_u32(rng) & 0x7FFFFFu));
            const int hb[] = {12, 15, 19, 20};
            for (int b = 0; b < 4; b++)
                for (int i = 0; i < 64; i++) {
                    uint32_t up = fk_rng_u32(rng) & (0x7FFFFFu << (hb[b] + 1)) & 0x7FFFFFu;
                    uint32_t h = up | (1u << hb[b]);
                    push(&v, base | h);
                    push(&v, base | (h - 1));
                    push(&v, base | (h + 1));
                    push(&v, base | up);
                }
        }
    check_encode_list("all exponents x mantissas", &v);
    free(v.p);
    if (getenv("FK_CODEC_EXHAUSTIVE") && atoi(getenv("FK_CODEC_EXHAUSTIVE")))
        check_encode_all();
}

/* ----------------------------------------------------- scales (docs/spec.md 2.1/2.2) */
/* one amax pattern: scale_f32 (2 formats x pow2), mx_scale (2 x FLOOR/RCEIL),
 * pow2_ceil; returns mismatches */
static int check_amax(uint32_t a)
{
    int bad = 0;
    for (int e5 = 0; e5 < 2; e5++) {
        for (int p2 = 0; p2 < 2; p2++) {
            uint32_t g = fk_t_f2u(fk_scale_f32(a, e5, p2)), w = ref_scale_f32(a, e5, p2);
            if (ref_is_nan32(w) ? !ref_is_nan32(g) : g != w) {
                bad++;
                report(e5 ? (p2 ? "scale_f32 e5m2 pow2" : "scale_f32 e5m2") : (p2 ? "scale_f32 e4m3 pow2" : "scale_f32 e4m3"), a, g, w);
            }
        }
        for (int rc = 0; rc < 2; rc++) {
            uint32_t g = fk_mx_scale(a, e5, rc), w = ref_mx_scale(a, e5, rc);
            if (g != w) {
                bad++;
                report(e5 ? (rc ? "mx_scale e5m2 rceil" : "mx_scale e5m2 floor") : (rc ? "mx_scale e4m3 rceil" : "mx_scale e4m3 floor"), a, g, w);
            }
        }
    }
    if (a > 0 && a < 0x7F800000u) {
        uint32_t g = fk_t_f2u(fk_pow2_ceil(fk_t_u2f(a))), w = ref_pow2_ceil(a);
        if (g != w) {
            bad++;
            report("pow2_ceil", a, g, w);
        }
    }
    return bad;
}

static void check_amax_list(const char *name, const vec *in)
{
    check_list("scales", name, in, check_amax, 9, "functions");
}

static void test_scales(fk_rng *rng, uint32_t stride)
{
    /* the reference's own constants against docs/spec.md numbers */
    CHECK(ref_inv_fmax(0) == fk_t_f2u(1.0f / 448.0f), "fl32(1/448)");
    CHECK(ref_inv_fmax(1) == fk_t_f2u(1.0f / 57344.0f), "fl32(1/57344)");

    /* every stride-th positive pattern from a random offset (no list: stride
     * 1 means all 2^31) */
    uint32_t off = fk_rng_u32(rng) % stride;
    long long n = (0x7FFFFFFFLL - off) / stride + 1;
    long bad = check_amax(0) + check_amax(0x7F800000u);
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 65536) reduction(+ : bad)
#endif
    for (long long i = 0; i < n; i++)
        bad += check_amax((uint32_t)(off + (uint64_t)i * stride));
    printf("  scales every %u-th pattern %14lld amax x 9 functions: %ld mismatches\n", stride, n + 2, bad);
    CHECK(bad == 0, "scales every %u-th pattern: %ld mismatches", stride, bad);
    g_cases += 9 * (n + 2);

    vec v = {0};
    for (uint32_t E = 0; E < 256; E++) {
        push(&v, E << 23);
        push(&v, (E << 23) | 1u);
        push(&v, (E << 23) | 0x7FFFFFu);
        for (int i = 0; i < 4096; i++)
            push(&v, (E << 23) | (fk_rng_u32(rng) & 0x7FFFFFu));
    }
    /* RCEIL / scale thresholds sit near 2^k * fmax: +-2048 ulps for every k */
    for (int k = -160; k <= 128; k++)
        for (int f = 0; f < 2; f++) {
            double c = ldexp(f ? 57344.0 : 448.0, k);
            if (c < 0x1p-149 || c > 3.4e38)
                continue;
            uint32_t cb = fk_t_f2u((float)c);
            for (uint32_t u = cb > 2048 ? cb - 2048 : 0; u <= cb + 2048 && u < 0x7F800000u; u++)
                push(&v, u);
        }
    check_amax_list("exponents x mantissas", &v);
    free(v.p);

    /* reciprocal of every scale byte */
    bad = 0;
    for (uint32_t s = 0; s < 256; s++) {
        uint32_t g = fk_t_f2u(fk_mx_recip((uint8_t)s)), w = ref_mx_recip(s);
        if (ref_is_nan32(w) ? !ref_is_nan32(g) : g != w) {
            bad++;
            report("mx_recip", s, g, w);
        }
    }
    printf("  mx_recip all 256 bytes: %ld mismatches\n", bad);
    CHECK(bad == 0, "mx_recip: %ld mismatches", bad);
    g_cases += 256;
}

/* per-element quantize steps: fp8(fl32(x / S)) and fp8(fl32(x * r)) */
static int check_elem(uint32_t x, uint32_t abits, int e5)
{
    const ref_fmt *f = e5 ? &F_E5M2 : &F_E4M3;
    int bad = 0;
    for (int p2 = 0; p2 < 2; p2++) {
        uint32_t S = ref_scale_f32(abits, e5, p2);
        uint32_t want = ref_is_nan32(S) ? f->nan_code : ref_encode(f, ref_from_f32(ref_div_signed(x, S)));
        uint32_t got = fk_quant_f32_elem(fk_t_u2f(x), fk_t_u2f(S), e5);
        if (got != want) {
            bad++;
            report(e5 ? "quant_f32_elem e5m2" : "quant_f32_elem e4m3", x, got, want);
        }
    }
    for (int rc = 0; rc < 2; rc++) {
        uint32_t r = ref_mx_recip(ref_mx_scale(abits, e5, rc));
        uint32_t want = ref_is_nan32(r) ? f->nan_code : ref_encode(f, ref_from_f32(ref_mul_signed(x, r)));
        uint32_t got = fk_quant_mx_elem(fk_t_u2f(x), fk_t_u2f(r), e5);
        if (got != want) {
            bad++;
            report(e5 ? "quant_mx_elem e5m2" : "quant_mx_elem e4m3", x, got, want);
        }
    }
    return bad;
}

static void test_elements(fk_rng *rng, long long groups)
{
    /* groups: random amax over all finite exponents (and some Inf/NaN), 16
     * elements each drawn at or below amax, the amax element itself, and
     * unrelated random patterns */
    vec xs = {0}, as = {0};
    for (long long g = 0; g < groups; g++) {
        uint32_t a = fk_rng_u32(rng) & 0x7FFFFFFFu;
        if (g % 97 == 0)
            a = 0x7F800000u;
        else if (g % 89 == 0)
            a = 0x7FC00000u;
        else if (g % 83 == 0)
            a = 0;
        else if (a >= 0x7F800000u)
            a &= 0x7F7FFFFFu;
        for (int i = 0; i < 16; i++) {
            uint32_t x;
            if (i == 0)
                x = a;
            else if (i < 12 && a && a < 0x7F800000u)
                x = fk_rng_u32(rng) % (a + 1); /* |x| <= amax */
            else
                x = fk_rng_u32(rng);
            push(&xs, x | (fk_rng_u32(rng) & 0x80000000u));
            push(&as, a);
        }
    }
    long bad = 0;
    long long n = (long long)xs.n;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 8192) reduction(+ : bad)
#endif
    for (long long i = 0; i < n; i++)
        bad += check_elem(xs.p[i], as.p[i], 0) + check_elem(xs.p[i], as.p[i], 1);
    printf("  element steps %lld (x, amax) pairs x 8 variants: %ld mismatches\n", n, bad);
    CHECK(bad == 0, "element steps: %ld mismatches", bad);
    g_cases += 8 * n;
    free(xs.p);
    free(as.p);
}

/* docs/spec.md 2.2's edge-case table (e4m3), checked on both the code under test
 * and the reference */
static void test_mx_table(void)
{
    struct row {
        const char *name;
        float amax;
        float x[2];
        uint8_t s_floor, s_rceil, q_floor[2], q_rceil[2];
    } t[] = {
        {"all zeros", 0.0f, {0.0f, 0.0f}, 0, 0, {0x00, 0x00}, {0x00, 0x00}},
        {"all 2^-126", 0x1p-126f, {0x1p-126f, 0x1p-126f}, 0, 0, {0x40, 0x40}, {0x40, 0x40}},
        {"all 448", 448.0f, {448.0f, 448.0f}, 127, 127, {0x7E, 0x7E}, {0x7E, 0x7E}},
        {"all 480", 480.0f, {480.0f, 480.0f}, 127, 128, {0x7E, 0x7E}, {0x77, 0x77}},
        {"all -480", 480.0f, {-480.0f, -480.0f}, 127, 128, {0xFE, 0xFE}, {0xF7, 0xF7}},
        {"all FLT_MAX", 0x1.fffffep127f, {0x1.fffffep127f, 0x1.fffffep127f}, 246, 247, {0x7E, 0x7E}, {0x78, 0x78}},
        {"1.0 x31 + 2^-149", 1.0f, {1.0f, 0x1p-149f}, 119, 119, {0x78, 0x00}, {0x78, 0x00}},
        {"NaN in block", NAN, {1.0f, NAN}, 255, 255, {0x7F, 0x7F}, {0x7F, 0x7F}},
        {"Inf in block", INFINITY, {1.0f, INFINITY}, 255, 255, {0x7F, 0x7F}, {0x7F, 0x7F}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint32_t ab = fk_abs_bits(t[i].amax);
        for (int rc = 0; rc < 2; rc++) {
            uint8_t ws = rc ? t[i].s_rceil : t[i].s_floor;
            uint8_t s = fk_mx_scale(ab, 0, rc);
            CHECK(s == ws, "%s %s: s %u want %u", t[i].name, rc ? "rceil" : "floor", s, ws);
            CHECK(ref_mx_scale(ab, 0, rc) == ws, "reference %s %s", t[i].name, rc ? "rceil" : "floor");
            for (int j = 0; j < 2; j++) {
                uint8_t wq = rc ? t[i].q_rceil[j] : t[i].q_floor[j];
                uint8_t q = fk_quant_mx_elem(t[i].x[j], fk_mx_recip(s), 0);
                CHECK(q == wq, "%s %s: q[%d] 0x%02x want 0x%02x", t[i].name, rc ? "rceil" : "floor", j, q, wq);
            }
        }
    }
    /* docs/spec.md 2.1 edge rules */
    CHECK(fk_scale_f32(0, 0, 0) == 1.0f && fk_scale_f32(0, 1, 1) == 1.0f, "amax 0 -> S = 1");
    CHECK(isnan(fk_scale_f32(0x7F800000u, 0, 0)) && isnan(fk_scale_f32(0x7FC00000u, 1, 1)), "Inf/NaN -> NaN");
    CHECK(fk_scale_f32(1u, 0, 0) == 0x1p-149f && fk_scale_f32(1u, 1, 1) == 0x1p-149f, "underflow -> 2^-149");
    CHECK(fk_scale_f32(fk_t_f2u(1.0f), 0, 1) == 0x1p-8f, "pow2(1/448) = 2^-8");
    CHECK(fk_scale_f32(fk_t_f2u(448.0f), 0, 0) == 1.0f && fk_scale_f32(fk_t_f2u(57344.0f), 1, 0) == 1.0f, "fmax -> 1");
    CHECK(fk_quant_f32_elem(1.0f, NAN, 0) == 0x7F && fk_quant_f32_elem(0.0f, NAN, 1) == 0x7E, "NaN S -> NaN q");
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_codec");
    const char *e = getenv("FK_CODEC_RANDOM");
    long long n_random = e ? atoll(e) : 12000000LL;
    e = getenv("FK_CODEC_STRIDE");
    uint32_t stride = e ? (uint32_t)atol(e) : 37u;
    if (stride == 0)
        stride = 1;
#ifdef _OPENMP
    printf("test_codec: %d OpenMP threads\n", omp_get_max_threads());
#endif
    ref_fmt_init(&F_E4M3, "e4m3", 3, 7, 0x7E, 0x80, 1, 0x7F, tab_m[0], tab_e[0]);
    ref_fmt_init(&F_E5M2, "e5m2", 2, 15, 0x7B, 0x80, 1, 0x7E, tab_m[1], tab_e[1]);
    ref_fmt_init(&F_F16, "f16", 10, 15, 0x7BFF, 0x8000, 0, 0, tab_m[2], tab_e[2]);
    ref_fmt_init(&F_BF16, "bf16", 7, 127, 0x7F7F, 0x8000, 0, 0, tab_m[3], tab_e[3]);
    /* sanity of the value tables against docs/spec.md's numbers */
    CHECK(ldexp((double)F_E4M3.m[0x7E], F_E4M3.e[0x7E]) == 448.0, "e4m3 max 448");
    CHECK(ldexp((double)F_E4M3.m[0x7F], F_E4M3.e[0x7F]) == 480.0, "e4m3 next 480");
    CHECK(ldexp((double)F_E5M2.m[0x7B], F_E5M2.e[0x7B]) == 57344.0, "e5m2 max 57344");
    CHECK(ldexp((double)F_E4M3.m[1], F_E4M3.e[1]) == 0x1p-9 && ldexp((double)F_E5M2.m[1], F_E5M2.e[1]) == 0x1p-16,
          "min subnormals");
    CHECK(ldexp((double)F_F16.m[0x7BFF], F_F16.e[0x7BFF]) == 65504.0, "f16 max");

    test_spec_table();
    test_decode();
    test_encode(&rng, n_random);
    test_scales(&rng, stride);
    test_elements(&rng, 250000);
    test_mx_table();
    printf("test_codec: %lld individual comparisons against the exact reference\n", g_cases);
    return fk_test_summary("test_codec");
}
