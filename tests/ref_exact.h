/* ref_exact.h - an independent exact-arithmetic reference for docs/spec.md sections 1,
 * 2.1 and 2.2, written differently from src/format/codec.h and scale.h: every
 * finite value is an integer pair (m, e) meaning m * 2^e; small formats are
 * enumerated as sorted value tables and the nearest entry is chosen by exact
 * comparison with explicit ties-to-even on the code's last bit; fp32 results
 * of divisions and products come from 128-bit integer quotients rounded RNE.
 * Used by tests/test_codec.c (and usable by any other test). Host only. */
#ifndef FK_REF_EXACT_H
#define FK_REF_EXACT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ exact values */
typedef struct ref_val {
    int neg;   /* sign bit */
    int kind;  /* 0 finite, 1 infinite, 2 NaN */
    uint64_t m; /* |v| = m * 2^e when finite */
    int e;
} ref_val;

static inline uint32_t ref_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ref_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE binary32 from its definition: (-1)^s * 2^(E-127) * 1.F, or
 * 2^-126 * 0.F when E = 0. */
static inline ref_val ref_from_f32(uint32_t u)
{
    ref_val v;
    uint32_t E = (u >> 23) & 0xFF, F = u & 0x7FFFFF;
    v.neg = (int)(u >> 31);
    v.kind = E == 255 ? (F ? 2 : 1) : 0;
    v.m = E ? (uint64_t)F + (1u << 23) : F;
    v.e = E ? (int)E - 150 : -149;
    return v;
}

static inline int ref_bitlen(uint64_t m) { return m ? 64 - __builtin_clzll(m) : 0; }
static inline int ref_bitlen128(unsigned __int128 m)
{
    uint64_t hi = (uint64_t)(m >> 64);
    return hi ? 64 + ref_bitlen(hi) : ref_bitlen((uint64_t)m);
}

/* Compares a * 2^ea with b * 2^eb exactly: -1, 0 or 1. */
static inline int ref_cmp(uint64_t a, int ea, uint64_t b, int eb)
{
    if (!a || !b)
        return (a != 0) - (b != 0);
    int la = ref_bitlen(a) + ea, lb = ref_bitlen(b) + eb;
    if (la != lb)
        return la < lb ? -1 : 1;
    /* same binade: the shift keeps the aligned operand within 64 bits */
    if (ea > eb)
        a <<= (ea - eb);
    else
        b <<= (eb - ea);
    return a < b ? -1 : (a > b ? 1 : 0);
}

/* ---------------------------------------------- small formats as value tables */
/* A sign-magnitude binary format with `mbits` fraction bits and exponent bias
 * `bias`. Codes 0..maxcode are the finite non-negative values; code maxcode+1
 * ("next") is the value the format would have just above max finite, used
 * for rounding: rounding to it means overflow (saturate for fp8, Inf for
 * fp16/bf16, whose next code is the Inf code itself). */
typedef struct ref_fmt {
    const char *name;
    int mbits, bias;
    uint32_t maxcode;   /* largest finite positive code */
    uint32_t signbit;   /* 0x80 or 0x8000 */
    int satfinite;      /* 1: overflow -> max finite; 0: overflow -> Inf (= next code) */
    uint32_t nan_code;  /* canonical NaN (fp8); for 16-bit any NaN is accepted */
    uint32_t n;         /* maxcode + 2 entries */
    uint64_t *m;
    int *e;
} ref_fmt;

/* value of positive code c from its fields: 2^(1-bias) * 0.f (exp field 0) or
 * 2^(E-bias) * 1.f */
static inline void ref_code_value(int mbits, int bias, uint32_t c, uint64_t *m, int *e)
{
    uint32_t E = c >> mbits, f = c & ((1u << mbits) - 1u);
    *m = E ? (uint64_t)f + (1ull << mbits) : f;
    *e = (E ? (int)E : 1) - bias - mbits;
}

static inline void ref_fmt_init(ref_fmt *f, const char *name, int mbits, int bias, uint32_t maxcode,
                                uint32_t signbit, int satfinite, uint32_t nan_code, uint64_t *mbuf,
                                int *ebuf)
{
    f->name = name;
    f->mbits = mbits;
    f->bias = bias;
    f->maxcode = maxcode;
    f->signbit = signbit;
    f->satfinite = satfinite;
    f->nan_code = nan_code;
    f->n = maxcode + 2;
    f->m = mbuf;
    f->e = ebuf;
    for (uint32_t c = 0; c < f->n; c++)
        ref_code_value(mbits, bias, c, &mbuf[c], &ebuf[c]);
}

/* Nearest code of the finite non-negative value m * 2^e (RNE on the code's last
 * bit); returns maxcode+1 when the value rounds to or beyond the "next" value. */
static inline uint32_t ref_nearest_code(const ref_fmt *f, uint64_t m, int e)
{
    uint32_t top = f->n - 1;
    if (ref_cmp(m, e, f->m[top], f->e[top]) >= 0)
        return top;
    /* largest lo with value(lo) <= x; value(0) = 0 <= x always */
    uint32_t lo = 0, hi = top; /* invariant: value(lo) <= x < value(hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ref_cmp(f->m[mid], f->e[mid], m, e) <= 0)
            lo = mid;
        else
            hi = mid;
    }
    if (ref_cmp(f->m[lo], f->e[lo], m, e) == 0)
        return lo;
    /* compare 2x with value(lo) + value(hi) */
    int el = f->e[lo], eh = f->e[hi];
    int emin = el < eh ? el : eh;
    uint64_t sum = (f->m[lo] << (el - emin)) + (f->m[hi] << (eh - emin));
    int c = ref_cmp(m, e + 1, sum, emin);
    if (c < 0)
        return lo;
    if (c > 0)
        return hi;
    return (lo & 1u) ? hi : lo;
}

/* Encodes a value per docs/spec.md section 1 (fp8: satfinite RNE, canonical NaN;
 * fp16/bf16: RNE with overflow to Inf, NaN -> some NaN, reported as the
 * format's Inf code | 1 so the caller can test "is NaN"). */
static inline uint32_t ref_encode(const ref_fmt *f, ref_val v)
{
    uint32_t sign = v.neg ? f->signbit : 0;
    if (v.kind == 2)
        return f->satfinite ? f->nan_code : (f->maxcode + 1) | 1u;
    uint32_t c = v.kind == 1 ? f->maxcode + 1 : ref_nearest_code(f, v.m, v.e);
    if (c > f->maxcode && f->satfinite)
        c = f->maxcode;
    return sign | c;
}

/* -------------------------------------------- exact rational -> fp32 RNE */
/* fp32 bits of the exact non-negative value (n / d) * 2^e, rounded to nearest
 * even with subnormals and overflow to Inf. n < 2^100, 0 < d < 2^26. */
static inline uint32_t ref_round_f32(unsigned __int128 n, uint64_t d, int e)
{
    if (n == 0)
        return 0;
    int s = 126 - ref_bitlen128(n); /* n << s fits in 127 bits */
    unsigned __int128 N = n << s;
    unsigned __int128 Q = N / d, R = N % d;
    /* value = (Q + R/d) * 2^(e - s); Q has >= 100 bits */
    int ql = ref_bitlen128(Q);
    int lg = ql - 1 + e - s;          /* floor(log2 value) */
    int u = lg - 23 < -149 ? -149 : lg - 23; /* exponent of the last kept bit */
    int k = u - (e - s);              /* bits of Q below the kept ones (>= 76) */
    if (k >= 127)                     /* Q < 2^126 <= half an ulp: rounds to 0 */
        return 0;
    unsigned __int128 one = 1;
    unsigned __int128 mant = Q >> k;
    unsigned __int128 rem = Q & ((one << k) - 1);
    unsigned __int128 half = one << (k - 1);
    if (rem > half || (rem == half && (R != 0 || (mant & 1))))
        mant++;
    if (mant == ((unsigned __int128)1 << 24)) {
        mant >>= 1;
        u++;
    }
    if (mant < (1u << 23)) /* subnormal (u == -149); 2^23 falls through */
        return (uint32_t)mant;
    if (u + 150 >= 255)
        return 0x7F800000u;
    return ((uint32_t)(u + 150) << 23) + (uint32_t)(mant - (1u << 23));
}

/* fl32(a / b) for finite a, b > 0 given as values. */
static inline uint32_t ref_div_f32(ref_val a, ref_val b) { return ref_round_f32(a.m, b.m, a.e - b.e); }
/* fl32(a * b) for finite a, b >= 0. */
static inline uint32_t ref_mul_f32(ref_val a, ref_val b)
{
    return ref_round_f32((unsigned __int128)a.m * b.m, 1, a.e + b.e);
}

/* Signed fl32(x / s) and fl32(x * r) for any x and a positive finite s or r. */
static inline uint32_t ref_div_signed(uint32_t xb, uint32_t sb)
{
    ref_val x = ref_from_f32(xb), s = ref_from_f32(sb);
    uint32_t sign = xb & 0x80000000u;
    if (x.kind == 2)
        return 0x7FC00000u;
    if (x.kind == 1)
        return sign | 0x7F800000u;
    return sign | ref_div_f32(x, s);
}
static inline uint32_t ref_mul_signed(uint32_t xb, uint32_t rb)
{
    ref_val x = ref_from_f32(xb), r = ref_from_f32(rb);
    uint32_t sign = xb & 0x80000000u;
    if (x.kind == 2)
        return 0x7FC00000u;
    if (x.kind == 1)
        return sign | 0x7F800000u;
    return sign | ref_mul_f32(x, r);
}

/* fp32 bits of 2^p (p in -149..127; p >= 128 -> Inf) via ldexpf. */
static inline uint32_t ref_pow2_bits(int p) { return ref_bits(p >= 128 ? INFINITY : ldexpf(1.0f, p)); }

/* ceil(log2 v) for v = m * 2^e > 0 */
static inline int ref_ceil_log2(uint64_t m, int e)
{
    int l = ref_bitlen(m);
    return (m & (m - 1)) ? l + e : l - 1 + e;
}

/* ------------------------------------------------------- docs/spec.md 2.1 and 2.2 */
static inline ref_val ref_fmax(int e5m2)
{
    ref_val v = {0, 0, 7, e5m2 ? 13 : 6}; /* 448 = 7 * 2^6, 57344 = 7 * 2^13 */
    return v;
}

/* smallest power of two >= s (s finite > 0) */
static inline uint32_t ref_pow2_ceil(uint32_t sb)
{
    ref_val s = ref_from_f32(sb);
    return ref_pow2_bits(ref_ceil_log2(s.m, s.e));
}

/* docs/spec.md 2.1 S from amax (given as |x| bits, NaN-propagated). */
static inline uint32_t ref_scale_f32(uint32_t amax_bits, int e5m2, int pow2)
{
    ref_val a = ref_from_f32(amax_bits);
    if (a.kind)
        return 0x7FC00000u; /* NaN */
    if (a.m == 0)
        return ref_bits(1.0f);
    uint32_t s = ref_div_f32(a, ref_fmax(e5m2));
    if (s == 0)
        s = ref_pow2_bits(-149);
    if (pow2)
        s = ref_pow2_ceil(s);
    return s;
}

/* fl32(1 / fmax) */
static inline uint32_t ref_inv_fmax(int e5m2)
{
    ref_val one = {0, 0, 1, 0};
    return ref_div_f32(one, ref_fmax(e5m2));
}

/* docs/spec.md 2.2 e8m0 scale byte. FLOOR: exponent of amax (as floor(log2) of the
 * exact value; 0 for zero and subnormals) minus emax_elem, clamped. RCEIL: the
 * byte of the smallest power of two >= d = fl32(amax * fl32(1/fmax)), with
 * d <= 2^-127 giving 0. */
static inline uint32_t ref_mx_scale(uint32_t amax_bits, int e5m2, int rceil)
{
    ref_val a = ref_from_f32(amax_bits);
    if (a.kind == 2)
        return 255;
    if (!rceil) {
        if (a.kind == 1)
            return 255;
        int efield = 0;
        if (a.m && ref_bitlen(a.m) - 1 + a.e >= -126)
            efield = ref_bitlen(a.m) - 1 + a.e + 127;
        int t = efield - 127 - (e5m2 ? 15 : 8);
        t = t < -127 ? -127 : (t > 128 ? 128 : t);
        return (uint32_t)(t + 127);
    }
    if (a.kind == 1)
        return 255;
    uint32_t db = ref_mul_f32(a, ref_from_f32(ref_inv_fmax(e5m2)));
    ref_val d = ref_from_f32(db);
    if (d.kind)
        return 255;
    if (d.m == 0)
        return 0;
    int s = 127 + ref_ceil_log2(d.m, d.e);
    return s < 0 ? 0 : (s > 255 ? 255 : (uint32_t)s);
}

/* docs/spec.md 2.2 reciprocal: 2^(127 - s); s == 255 -> NaN */
static inline uint32_t ref_mx_recip(uint32_t s)
{
    return s == 255 ? 0x7FC00000u : ref_pow2_bits(127 - (int)s);
}

static inline int ref_is_nan32(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

#endif
