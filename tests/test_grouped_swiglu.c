/* test_grouped_swiglu.c - fp8kit_grouped_gemm with act=swiglu and with fused output quantization
 * (OUTQ_SCALED, OUTQ_MX, OUTQ_BLOCK1X128) on the CPU backend (docs/spec.md 3, "Grouped GEMM"), over
 * a random sweep of the space: both layouts (contiguous row ends, masked counts), G 1 to 6 with
 * empty groups, masked counts of 0 and of the full slab, a last row end short of T, odd row counts,
 * even N from 2 to a few hundred, odd K (every scale mode but mx), scale modes none / tensor / row
 * (mixed), block (A's scales plain or mn_major) and mx, bias on / off (f32 / bf16 / f16), padded
 * row strides, every output stage (f32 / bf16 / f16 cast, scaled e4m3 / e5m2 with and without
 * amax_d, mx, block1x128) with swiglu, without an activation and with an elementwise one. Checks:
 * (1) each group's D rows and output-scale rows equal, bit for bit, a dense fp8kit_gemm of that
 * group's rows, expert, scales and bias copied into fresh buffers; amax_d is the max of theirs;
 * rows no group owns, row padding and the bytes past D and scale_d stay untouched; (2) with
 * swiglu, D is fk_swiglu of the act=none y (f32 run of the same grouped call), then the output
 * cast or OUTQ_SCALED's fp8(y / scale_d); (3) OUTQ_MX / BLOCK1X128's codes and scales equal
 * fp8kit_quantize of the same grouped call's unquantized output in out_hp, and OUTQ_SCALED's those
 * of the f32 output; (4) cast outputs meet the fp64 oracle's bound (fk_ref_grouped_gemm); (5) bad
 * inputs (odd N, D of N columns, scale_d missing / miscounted / mistyped / overlapping, output
 * quantization into bf16 D, fp8 D without it, amax_d misuse, bad offsets, OUTQ_MX over D's N/2
 * columns not a multiple of 32) give their status and message and leave D, scale_d and amax_d
 * untouched, the size query agreeing. Part of CTest (tests/test_*.c). */
#include <math.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"
#include "test_hp.h"

static fp8kit_ctx *g_ctx;

static int is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }
static size_t dsz(fp8kit_dtype t) { return fp8kit_dtype_size(t); }

typedef struct gcase {
    int masked;            /* FP8KIT_GROUPED_MASKED: rows is M, the rows of each expert's slab */
    int64_t rows, g, n, k; /* rows: T (contiguous) or M (masked) */
    fp8kit_scale_mode sa, sb;
    int mn;                /* block: A's scales in the mn_major layout */
    int bias;              /* per-expert column bias */
    fp8kit_dtype biast;
    fp8kit_activation act;
    fp8kit_dtype dt, hp;   /* D; out_hp (OUTQ_MX / BLOCK1X128) */
    fp8kit_out_quant oq;
    int pow2, rceil, amax; /* amax: pass amax_d (OUTQ_SCALED) */
    int pad;               /* extra elements of A's and D's row strides */
    int empty;             /* 0 random offsets, 1 every group empty */
} gcase;

/* One case's operands (host memory) and its grouped call, less D and its output scales. */
typedef struct gops {
    int64_t t, nd, lda, ldd;
    int64_t sa_row, sb_exp; /* scale values per row of A / per expert of B (tensor: 1 for all of A) */
    size_t sa_esz, sb_esz;  /* bytes per scale value (f32 or e8m0) */
    uint8_t *a, *b;
    void *sa, *sb, *bias;
    float *sa_mn;           /* A's scales in the mn_major layout (c->mn) */
    int32_t *off;
    fp8kit_gemm_desc desc;  /* the call's (mn_major when c->mn) */
    fp8kit_grouped_gemm_args args;
    float scale_in;         /* OUTQ_SCALED's scale_d */
} gops;

/* Rows [*r0, *r1) of the T-row view that group i owns. */
static void group_rows(const gcase *c, const int32_t *off, int64_t i, int64_t *r0, int64_t *r1)
{
    *r0 = c->masked ? i * c->rows : i ? off[i - 1] : 0;
    *r1 = c->masked ? *r0 + off[i] : off[i];
}

/* Values fp8kit_gemm's scale tensor for operand op holds (0: no tensor), from fp8kit_gemm_scale_shape. */
static int64_t scale_count(const fp8kit_gemm_desc *d, int op, int64_t rows, int64_t k, fp8kit_dtype *dt)
{
    int64_t sh[2] = {0, 0};
    CHECK_STATUS(fp8kit_gemm_scale_shape(d, op, rows, k, dt, sh), FP8KIT_OK);
    return sh[0] * sh[1];
}

static void *make_scales(fk_rng *r, fp8kit_dtype dt, int64_t n)
{
    void *p = malloc((size_t)(n + 1) * 4);
    for (int64_t i = 0; i < n; i++) {
        if (dt == FP8KIT_E8M0)
            ((uint8_t *)p)[i] = (uint8_t)(124 + fk_rng_u32(r) % 7);
        else
            ((float *)p)[i] = (float)exp2(3.0 * fk_rng_unif(r) - 1.5);
    }
    return p;
}

/* G offsets: sorted row ends (the last T, or short of it) or counts (one slab empty, one full). */
static void make_offsets(const gcase *c, fk_rng *r, int32_t *off)
{
    const int64_t G = c->g, R = c->rows;
    for (int64_t i = 0; i < G; i++)
        off[i] = c->empty ? 0 : (int32_t)(fk_rng_u32(r) % (uint32_t)(R + 1));
    if (c->empty)
        return;
    if (c->masked) {
        const int64_t full = (int64_t)(fk_rng_u32(r) % (uint32_t)G), zero = (full + 1) % G;
        if (G > 1)
            off[zero] = 0;
        off[full] = (int32_t)R;
        return;
    }
    for (int64_t i = 1; i < G; i++)
        for (int64_t j = i; j > 0 && off[j - 1] > off[j]; j--) {
            const int32_t x = off[j];
            off[j] = off[j - 1], off[j - 1] = x;
        }
    if (fk_rng_u32(r) % 4) /* else the last end stays short of T */
        off[G - 1] = (int32_t)R;
}

static void make_ops(const gcase *c, fk_rng *r, gops *o)
{
    memset(o, 0, sizeof *o);
    const int64_t G = c->g, N = c->n, K = c->k;
    o->t = c->masked ? G * c->rows : c->rows;
    o->nd = c->act == FP8KIT_ACT_SWIGLU ? N / 2 : N;
    o->lda = K + c->pad, o->ldd = o->nd + c->pad;
    o->a = (uint8_t *)malloc((size_t)(o->t * o->lda + 1));
    o->b = (uint8_t *)malloc((size_t)(G * N * K + 1));
    for (int64_t i = 0; i < o->t * o->lda; i++)
        o->a[i] = fk_f32_to_fp8((float)fk_rng_normal(r), 0);
    for (int64_t i = 0; i < G * N * K; i++)
        o->b[i] = fk_f32_to_fp8((float)fk_rng_normal(r), 1);
    fp8kit_gemm_desc *d = &o->desc;
    d->scale_a = c->sa, d->scale_b = c->sb;
    d->bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d->act = c->act;
    d->out_quant = c->oq;
    d->out_hp = c->hp;
    d->out_rounding = c->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    d->out_pow2 = c->pow2;
    fp8kit_grouped_gemm_args *a = &o->args;
    if (c->masked) {
        int64_t as[3] = {G, c->rows, K};
        a->a = fp8kit_tensor_make(o->a, FP8KIT_E4M3, 3, as);
        a->a.strides[0] = c->rows * o->lda, a->a.strides[1] = o->lda, a->a.strides[2] = 1;
        a->layout = FP8KIT_GROUPED_MASKED;
    } else {
        a->a = fp8kit_tensor_2d(o->a, FP8KIT_E4M3, o->t, K, o->lda);
    }
    int64_t bs[3] = {G, N, K};
    a->b = fp8kit_tensor_make(o->b, FP8KIT_E5M2, 3, bs);
    /* scales: A's over all T rows (plain), B's per expert, by the dense GEMM's shapes */
    fp8kit_dtype sdt = FP8KIT_F32;
    if (c->sa) {
        const int64_t n1 = scale_count(d, 0, 1, K, &sdt);
        o->sa_row = c->sa == FP8KIT_SCALE_TENSOR ? 0 : n1;
        o->sa_esz = sdt == FP8KIT_E8M0 ? 1 : 4;
        const int64_t na = c->sa == FP8KIT_SCALE_TENSOR ? 1 : o->t * n1;
        o->sa = make_scales(r, sdt, na);
        a->scale_a = fp8kit_tensor_make(o->sa, sdt, 1, &na);
    }
    if (c->sb) {
        o->sb_exp = scale_count(d, 1, N, K, &sdt);
        o->sb_esz = sdt == FP8KIT_E8M0 ? 1 : 4;
        const int64_t nb = G * o->sb_exp;
        o->sb = make_scales(r, sdt, nb);
        a->scale_b = fp8kit_tensor_make(o->sb, sdt, 1, &nb);
    }
    if (c->mn) { /* the call reads the mn_major copy; the dense checks the plain scales */
        int64_t n_mn;
        o->sa_mn = fk_t_mn_major((const float *)o->sa, o->t, o->sa_row, c->masked ? G : 1, &n_mn);
        d->scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
        a->scale_a = fp8kit_tensor_make(o->sa_mn, FP8KIT_F32, 1, &n_mn);
    }
    if (c->bias) {
        int64_t gn[2] = {G, N};
        o->bias = malloc(dsz(c->biast) * (size_t)(G * N));
        for (int64_t i = 0; i < G * N; i++)
            store_hp(o->bias, i, c->biast, (float)(0.5 * fk_rng_normal(r)));
        a->bias = fp8kit_tensor_make(o->bias, c->biast, 2, gn);
    }
    /* y of order 1 around 0, where silu bends */
    a->alpha = (float)(1.5 / sqrt((double)K) / (c->sa == FP8KIT_SCALE_NONE ? 1.0 : 1.3));
    o->off = (int32_t *)malloc(sizeof(int32_t) * (size_t)G);
    make_offsets(c, r, o->off);
    a->offsets = o->off;
    o->scale_in = (float)exp2(-4.0 + 3.0 * fk_rng_unif(r));
}

static void free_ops(gops *o)
{
    free(o->a), free(o->b), free(o->sa), free(o->sb), free(o->bias), free(o->sa_mn), free(o->off);
}

/* An output D of dtype dt over the case's rows (nd columns, row stride ld), poisoned, with 64
 * guard bytes. */
static uint8_t *make_d(const gcase *c, const gops *o, fp8kit_dtype dt, int64_t nd, int64_t ld, fp8kit_tensor *t)
{
    const size_t bytes = dsz(dt) * (size_t)(o->t * ld);
    uint8_t *p = (uint8_t *)malloc(bytes + 64);
    fk_poison(p, bytes + 64);
    if (c->masked) {
        int64_t ds[3] = {c->g, c->rows, nd};
        *t = fp8kit_tensor_make(p, dt, 3, ds);
        t->strides[0] = c->rows * ld, t->strides[1] = ld, t->strides[2] = 1;
    } else {
        *t = fp8kit_tensor_2d(p, dt, o->t, nd, ld);
    }
    return p;
}

/* The same grouped call with act / output stage replaced: D (t, nd) of dtype dt, contiguous,
 * no output quantization. Returns D (zero rows no group owns: poison otherwise). */
static uint8_t *run_plain(const gcase *c, const gops *o, fp8kit_activation act, fp8kit_dtype dt)
{
    fp8kit_gemm_desc d = o->desc;
    d.act = act;
    d.out_quant = FP8KIT_OUTQ_NONE;
    fp8kit_grouped_gemm_args a = o->args;
    a.scale_d = (fp8kit_tensor){0};
    a.amax_d = NULL;
    const int64_t nd = act == FP8KIT_ACT_SWIGLU ? c->n / 2 : c->n;
    uint8_t *p = make_d(c, o, dt, nd, nd, &a.d);
    memset(p, 0, dsz(dt) * (size_t)(o->t * nd));
    fp8kit_status st = fp8kit_grouped_gemm(g_ctx, &d, &a, NULL);
    CHECK(st == FP8KIT_OK, "plain rerun: %s (%s)", fp8kit_status_string(st), fp8kit_last_error(g_ctx));
    return p;
}

/* The dense fp8kit_gemm of group g (rows r0 .. r1 - 1) on fresh copies of its operands: D rows
 * x nd (contiguous) into d, output scales into sd, amax into *amax. */
static void dense_group(const gcase *c, const gops *o, int64_t g, int64_t r0, int64_t r1, uint8_t *d, uint8_t *sd,
                        int64_t sd_cols, float *amax)
{
    const int64_t rows = r1 - r0, N = c->n, K = c->k;
    uint8_t *a = (uint8_t *)malloc((size_t)(rows * K + 1)), *b = (uint8_t *)malloc((size_t)(N * K + 1));
    for (int64_t r = 0; r < rows; r++)
        memcpy(a + r * K, o->a + (r0 + r) * o->lda, (size_t)K);
    memcpy(b, o->b + g * N * K, (size_t)(N * K));
    fp8kit_gemm_desc desc = o->desc;
    desc.scale_layout = FP8KIT_LAYOUT_PLAIN;
    fp8kit_gemm_args args;
    memset(&args, 0, sizeof args);
    args.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, rows, K, K);
    args.b = fp8kit_tensor_2d(b, FP8KIT_E5M2, N, K, K);
    void *sa = NULL, *sb = NULL, *bias = NULL;
    if (c->sa) {
        const int64_t n = c->sa == FP8KIT_SCALE_TENSOR ? 1 : rows * o->sa_row;
        const int64_t first = c->sa == FP8KIT_SCALE_TENSOR ? 0 : r0 * o->sa_row;
        sa = malloc((size_t)n * o->sa_esz);
        memcpy(sa, (const uint8_t *)o->sa + first * (int64_t)o->sa_esz, (size_t)n * o->sa_esz);
        args.scale_a = fp8kit_tensor_make(sa, o->sa_esz == 1 ? FP8KIT_E8M0 : FP8KIT_F32, 1, &n);
    }
    if (c->sb) {
        const int64_t n = o->sb_exp;
        sb = malloc((size_t)n * o->sb_esz);
        memcpy(sb, (const uint8_t *)o->sb + g * n * (int64_t)o->sb_esz, (size_t)n * o->sb_esz);
        args.scale_b = fp8kit_tensor_make(sb, o->sb_esz == 1 ? FP8KIT_E8M0 : FP8KIT_F32, 1, &n);
    }
    if (c->bias) {
        bias = malloc(dsz(c->biast) * (size_t)N);
        memcpy(bias, (const uint8_t *)o->bias + g * N * (int64_t)dsz(c->biast), dsz(c->biast) * (size_t)N);
        args.bias = fp8kit_tensor_make(bias, c->biast, 1, &N);
    }
    args.alpha = o->args.alpha;
    args.d = fp8kit_tensor_2d(d, c->dt, rows, o->nd, o->nd);
    float scale_in = o->scale_in;
    if (c->oq == FP8KIT_OUTQ_SCALED) {
        args.scale_d = fp8kit_tensor_make(&scale_in, FP8KIT_F32, 0, NULL);
        args.amax_d = c->amax ? amax : NULL;
    } else if (c->oq != FP8KIT_OUTQ_NONE) {
        int64_t sh[2] = {rows, sd_cols};
        args.scale_d = fp8kit_tensor_make(sd, c->oq == FP8KIT_OUTQ_MX ? FP8KIT_E8M0 : FP8KIT_F32, 2, sh);
    }
    fp8kit_status st = fp8kit_gemm(g_ctx, &desc, &args, NULL);
    CHECK(st == FP8KIT_OK, "dense group %lld: %s (%s)", (long long)g, fp8kit_status_string(st),
          fp8kit_last_error(g_ctx));
    free(a), free(b), free(sa), free(sb), free(bias);
}

/* Owner of each of the t rows (-1: none). */
static int64_t *row_owners(const gcase *c, const gops *o)
{
    int64_t *own = (int64_t *)malloc(sizeof(int64_t) * (size_t)(o->t + 1));
    for (int64_t m = 0; m < o->t; m++)
        own[m] = -1;
    for (int64_t i = 0; i < c->g; i++) {
        int64_t r0, r1;
        group_rows(c, o->off, i, &r0, &r1);
        for (int64_t m = r0; m < r1; m++)
            own[m] = i;
    }
    return own;
}

/* (2) swiglu: the output stage of fk_swiglu of the act=none y, element by element (cast or
 * OUTQ_SCALED; OUTQ_MX / BLOCK1X128 go through (3) on the hp output). */
static void check_swiglu_def(const gcase *c, const gops *o, const int64_t *own, const uint8_t *d, const char *name)
{
    float *y = (float *)run_plain(c, o, FP8KIT_ACT_NONE, FP8KIT_F32);
    const int64_t N = c->n, h = N / 2;
    const int e5 = c->dt == FP8KIT_E5M2;
    int64_t bad = 0;
    for (int64_t m = 0; m < o->t; m++) {
        if (own[m] < 0)
            continue;
        for (int64_t j = 0; j < h; j++) {
            const float v = fk_swiglu(y[m * N + j], y[m * N + j + h]);
            const int64_t i = m * o->ldd + j;
            uint32_t got, want;
            if (c->dt == FP8KIT_F32)
                memcpy(&got, d + 4 * i, 4), want = fk_t_f2u(v);
            else if (c->dt == FP8KIT_BF16 || c->dt == FP8KIT_F16) {
                uint16_t g16;
                memcpy(&g16, d + 2 * i, 2);
                got = g16, want = c->dt == FP8KIT_BF16 ? fk_f32_to_bf16(v) : fk_f32_to_f16(v);
            } else if (c->oq == FP8KIT_OUTQ_SCALED)
                got = d[i], want = fk_quant_f32_elem(v, o->scale_in, e5);
            else
                continue;
            if (got != want && bad++ < 3)
                fprintf(stderr, "  [%s] D[%lld, %lld] = %x, fk_swiglu of y gives %x\n", name, (long long)m,
                        (long long)j, got, want);
        }
    }
    CHECK(bad == 0, "[%s] %lld elements differ from fk_swiglu of the act=none y", name, (long long)bad);
    free(y);
}

/* (3) OUTQ_MX / BLOCK1X128: codes and scales of fp8kit_quantize on the unquantized output in out_hp
 * (which, with swiglu, must itself be the hp rounding of fk_swiglu of the act=none y);
 * OUTQ_SCALED: fp8(y / scale_d) and amax of the f32 output. */
static void check_quantized(const gcase *c, const gops *o, const int64_t *own, const uint8_t *d, const uint8_t *sd,
                            int64_t sd_cols, float amax, const char *name)
{
    const int64_t nd = o->nd, t = o->t;
    const int e5 = c->dt == FP8KIT_E5M2;
    int64_t bad = 0;
    if (c->oq == FP8KIT_OUTQ_SCALED) {
        float *y = (float *)run_plain(c, o, c->act, FP8KIT_F32);
        uint32_t am = 0;
        for (int64_t m = 0; m < t; m++)
            for (int64_t j = 0; j < nd && own[m] >= 0; j++) {
                const float v = y[m * nd + j];
                am = fk_max_u32(am, fk_abs_bits(v));
                bad += d[m * o->ldd + j] != fk_quant_f32_elem(v, o->scale_in, e5);
            }
        CHECK(bad == 0, "[%s] %lld OUTQ_SCALED codes differ from fp8(y / scale_d)", name, (long long)bad);
        if (c->amax)
            CHECK(fk_t_f2u(amax) == am, "[%s] amax_d %g, the f32 output's max |y| %g", name, amax, fk_t_u2f(am));
        free(y);
        return;
    }
    uint8_t *dh = run_plain(c, o, c->act, c->hp);
    if (c->act == FP8KIT_ACT_SWIGLU) { /* the hp output is the hp rounding of fk_swiglu(y) */
        float *y = (float *)run_plain(c, o, FP8KIT_ACT_NONE, FP8KIT_F32);
        for (int64_t m = 0; m < t; m++)
            for (int64_t j = 0; j < nd && own[m] >= 0; j++) {
                const float v = fk_swiglu(y[m * 2 * nd + j], y[m * 2 * nd + j + nd]);
                const int64_t i = m * nd + j;
                if (c->hp == FP8KIT_F32)
                    bad += fk_t_f2u(v) != ((const uint32_t *)dh)[i];
                else
                    bad += (c->hp == FP8KIT_BF16 ? fk_f32_to_bf16(v) : fk_f32_to_f16(v)) != ((const uint16_t *)dh)[i];
            }
        CHECK(bad == 0, "[%s] %lld hp outputs differ from fk_swiglu of the act=none y", name, (long long)bad);
        free(y);
    }
    fp8kit_quant_desc qd = fp8kit_quant_desc_default(c->oq == FP8KIT_OUTQ_MX ? FP8KIT_SCHEME_MX
                                                                            : FP8KIT_SCHEME_BLOCK1X128);
    qd.elem = c->dt;
    qd.rounding = c->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    qd.pow2 = c->oq == FP8KIT_OUTQ_BLOCK1X128 ? c->pow2 : 0;
    fp8kit_tensor x = fp8kit_tensor_2d(dh, c->hp, t, nd, nd), q, s;
    CHECK_STATUS(fp8kit_quant_shapes(&qd, &x, &q, &s), FP8KIT_OK);
    CHECK(s.shape[0] == t && s.shape[1] == sd_cols, "[%s] quantize's scale shape %lld x %lld, scale_d's %lld x %lld",
          name, (long long)s.shape[0], (long long)s.shape[1], (long long)t, (long long)sd_cols);
    const size_t ssz = c->oq == FP8KIT_OUTQ_MX ? 1 : 4;
    q.data = malloc((size_t)(t * nd + 1));
    s.data = malloc((size_t)(t * sd_cols + 1) * ssz);
    CHECK_STATUS(fp8kit_quantize(g_ctx, &qd, &x, &q, &s, NULL), FP8KIT_OK);
    for (int64_t m = 0; m < t; m++) {
        if (own[m] < 0)
            continue;
        bad += memcmp(d + m * o->ldd, (const uint8_t *)q.data + m * nd, (size_t)nd) != 0;
        bad += memcmp(sd + (size_t)(m * sd_cols) * ssz, (const uint8_t *)s.data + (size_t)(m * sd_cols) * ssz,
                      (size_t)sd_cols * ssz) != 0;
    }
    CHECK(bad == 0, "[%s] %lld rows of codes / scales differ from fp8kit_quantize of the %s output", name,
          (long long)bad, fp8kit_dtype_name(c->hp));
    free(q.data), free(s.data), free(dh);
}

/* (4) cast outputs against the fp64 oracle (no mx scales: it reads the plain ones only). */
static void check_oracle(const gcase *c, const gops *o, const int64_t *own, const uint8_t *d, const char *name)
{
    fp8kit_gemm_desc desc = o->desc;
    fp8kit_grouped_gemm_args a = o->args;
    desc.scale_layout = FP8KIT_LAYOUT_PLAIN;
    if (c->mn)
        a.scale_a = fp8kit_tensor_make(o->sa, FP8KIT_F32, 1, &(int64_t){o->t * o->sa_row});
    double *ref = (double *)malloc(sizeof(double) * (size_t)(o->t * o->nd + 1));
    CHECK(fk_ref_grouped_gemm(&desc, &a, ref) == FK_REF_OK, "[%s] the fp64 reference refused", name);
    fk_ref_norm nrm;
    memset(&nrm, 0, sizeof nrm);
    for (int64_t m = 0; m < o->t; m++)
        for (int64_t j = 0; j < o->nd && own[m] >= 0; j++)
            fk_ref_norm_add(&nrm, load_hp(d, m * o->ldd + j, c->dt), ref[m * o->nd + j]);
    /* y is of order 1 by construction: a D that cancels to near 0 is bounded against that */
    const double rel = fk_t_rel_floor(nrm.err2, fmax(nrm.ref2, 0.01 * (double)nrm.count), nrm.count, c->dt);
    const double bound = fk_ref_bound(c->dt, c->k) * (c->act == FP8KIT_ACT_SWIGLU ? 2.0 : 1.0);
    CHECK(rel <= bound, "[%s] rel %.3g > %.3g against the fp64 oracle", name, rel, bound);
    CHECK(!nrm.nan_extra && !nrm.nan_missing, "[%s] NaN disagrees with the fp64 oracle", name);
    free(ref);
}

static void run_case(const gcase *c, fk_rng *r, const char *name)
{
    gops o;
    make_ops(c, r, &o);
    const int64_t t = o.t, nd = o.nd;
    uint8_t *d = make_d(c, &o, c->dt, nd, o.ldd, &o.args.d);
    const size_t dbytes = dsz(c->dt) * (size_t)(t * o.ldd);
    /* D's output scales: the shape fp8kit_gemm_scale_shape gives for T rows and the GEMM's N */
    fp8kit_dtype sdt = FP8KIT_F32;
    int64_t sh[2] = {0, 0};
    CHECK_STATUS(fp8kit_gemm_scale_shape(&o.desc, 2, t, c->n, &sdt, sh), FP8KIT_OK);
    const int quant_rows = c->oq == FP8KIT_OUTQ_MX || c->oq == FP8KIT_OUTQ_BLOCK1X128;
    const int64_t sd_cols = quant_rows ? sh[1] : 0;
    const size_t ssz = sdt == FP8KIT_E8M0 ? 1 : 4, sdbytes = (size_t)(t * sd_cols) * ssz;
    uint8_t *sd = (uint8_t *)malloc(sdbytes + 64);
    fk_poison(sd, sdbytes + 64);
    float amax = -1.0f, scale_in = o.scale_in;
    if (c->oq == FP8KIT_OUTQ_SCALED) {
        o.args.scale_d = fp8kit_tensor_make(&scale_in, FP8KIT_F32, 1, &(int64_t){1});
        o.args.amax_d = c->amax ? &amax : NULL;
    } else if (quant_rows) {
        CHECK(sh[0] == t && sh[1] == (c->oq == FP8KIT_OUTQ_MX ? nd / 32 : (nd + 127) / 128),
              "[%s] scale_d shape %lld x %lld for D of %lld columns", name, (long long)sh[0], (long long)sh[1],
              (long long)nd);
        o.args.scale_d = fp8kit_tensor_make(sd, sdt, 2, sh);
    }
    fp8kit_status st = fp8kit_grouped_gemm(g_ctx, &o.desc, &o.args, NULL);
    CHECK(st == FP8KIT_OK, "[%s] %s (%s)", name, fp8kit_status_string(st), fp8kit_last_error(g_ctx));
    if (st != FP8KIT_OK) {
        free(d), free(sd), free_ops(&o);
        return;
    }
    CHECK(fk_is_poisoned(d + dbytes, 64), "[%s] bytes past D written", name);
    CHECK(fk_is_poisoned(sd + sdbytes, 64), "[%s] bytes past scale_d written", name);

    /* (1) each group against the dense GEMM; untouched rows and padding */
    int64_t *own = row_owners(c, &o);
    const size_t rowb = dsz(c->dt) * (size_t)nd, ldb = dsz(c->dt) * (size_t)o.ldd;
    uint32_t am = 0;
    for (int64_t g = 0; g < c->g; g++) {
        int64_t r0, r1;
        group_rows(c, o.off, g, &r0, &r1);
        if (r1 == r0)
            continue;
        uint8_t *dd = (uint8_t *)malloc(rowb * (size_t)(r1 - r0));
        uint8_t *ds = (uint8_t *)malloc((size_t)((r1 - r0) * sd_cols) * ssz + 1);
        float ga = -1.0f;
        dense_group(c, &o, g, r0, r1, dd, ds, sd_cols, &ga);
        int64_t bad = 0;
        for (int64_t m = r0; m < r1; m++)
            bad += memcmp(d + (size_t)m * ldb, dd + (size_t)(m - r0) * rowb, rowb) != 0;
        CHECK(bad == 0, "[%s] group %lld: %lld rows of D differ from the dense fp8kit_gemm's", name, (long long)g,
              (long long)bad);
        if (quant_rows)
            CHECK(!memcmp(sd + (size_t)(r0 * sd_cols) * ssz, ds, (size_t)((r1 - r0) * sd_cols) * ssz),
                  "[%s] group %lld: output scales differ from the dense fp8kit_gemm's", name, (long long)g);
        am = fk_max_u32(am, fk_abs_bits(ga));
        free(dd), free(ds);
    }
    if (c->oq == FP8KIT_OUTQ_SCALED && c->amax)
        CHECK(fk_t_f2u(amax) == am, "[%s] amax_d %g, the groups' dense max %g", name, amax, fk_t_u2f(am));
    int64_t touched = 0;
    for (int64_t m = 0; m < t; m++) {
        const size_t from = own[m] < 0 ? 0 : rowb;
        touched += !fk_is_poisoned(d + (size_t)m * ldb + from, ldb - from);
        if (own[m] < 0 && quant_rows)
            touched += !fk_is_poisoned(sd + (size_t)(m * sd_cols) * ssz, (size_t)sd_cols * ssz);
    }
    CHECK(touched == 0, "[%s] %lld rows no group owns (or row padding) written", name, (long long)touched);

    /* (2) - (4) */
    if (c->act == FP8KIT_ACT_SWIGLU)
        check_swiglu_def(c, &o, own, d, name);
    if (c->oq != FP8KIT_OUTQ_NONE)
        check_quantized(c, &o, own, d, sd, sd_cols, amax, name);
    if (!is_fp8(c->dt) && c->sa != FP8KIT_SCALE_MX)
        check_oracle(c, &o, own, d, name);
    free(own), free(d), free(sd);
    free_ops(&o);
}

/* --------------------------------------------------------------------------- the sweep */
typedef struct ostage {
    fp8kit_dtype dt, hp;
    fp8kit_out_quant oq;
    int pow2, rceil, amax;
} ostage;

static const ostage k_outs[] = {
    {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},
    {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},
    {FP8KIT_F16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 1},
    {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_MX, 0, 1, 0},
    {FP8KIT_E5M2, FP8KIT_F16, FP8KIT_OUTQ_MX, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_MX, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 1, 0, 0},
    {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F16, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0},
};
#define NOUTS ((int)(sizeof k_outs / sizeof k_outs[0]))

/* scale setups: {A, B, A's mn_major} */
static const struct { fp8kit_scale_mode sa, sb; int mn; } k_modes[] = {
    {FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, 0},   {FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0},
    {FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0},     {FP8KIT_SCALE_ROW, FP8KIT_SCALE_TENSOR, 0},
    {FP8KIT_SCALE_NONE, FP8KIT_SCALE_ROW, 0},    {FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0},
    {FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1}, {FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, 0},
};
#define NMODES ((int)(sizeof k_modes / sizeof k_modes[0]))

static int64_t pick(fk_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(fk_rng_u32(r) % (uint32_t)(hi - lo + 1));
}

/* A random case of the given layout, activation, output stage and scales. */
static void draw_case(fk_rng *r, int masked, fp8kit_activation act, const ostage *os, int mi, gcase *c)
{
    memset(c, 0, sizeof *c);
    c->masked = masked;
    c->act = act;
    c->dt = os->dt, c->hp = os->hp, c->oq = os->oq;
    c->pow2 = os->pow2, c->rceil = os->rceil, c->amax = os->amax;
    c->sa = k_modes[mi].sa, c->sb = k_modes[mi].sb, c->mn = k_modes[mi].mn;
    c->g = pick(r, 1, 6);
    c->rows = masked ? pick(r, 1, 13) * 2 - 1 + (int64_t)(fk_rng_u32(r) % 2) : pick(r, 1, 40) * 2 - 1;
    const int glu = act == FP8KIT_ACT_SWIGLU;
    if (c->oq == FP8KIT_OUTQ_MX) /* D's columns a multiple of 32 */
        c->n = 32 * pick(r, 1, glu ? 5 : 8) * (glu ? 2 : 1);
    else
        c->n = 2 * pick(r, 1, fk_rng_u32(r) % 3 ? 40 : 170);
    c->k = c->sa == FP8KIT_SCALE_MX ? 32 * pick(r, 1, 8) : pick(r, 1, 300) | (fk_rng_u32(r) % 3 ? 1 : 0);
    c->bias = (int)(fk_rng_u32(r) % 2);
    static const fp8kit_dtype bt[] = {FP8KIT_F32, FP8KIT_BF16, FP8KIT_F16};
    c->biast = bt[fk_rng_u32(r) % 3];
    c->pad = fk_rng_u32(r) % 4 ? 0 : (int)pick(r, 1, 9);
    c->empty = fk_rng_u32(r) % 25 == 0;
}

/* ------------------------------------------------------------------------ bad inputs */
typedef struct bad_env {
    uint8_t *d, *sd;
    size_t dbytes, sdbytes;
    float *amax;
} bad_env;

/* The call refused with status want and a message naming sub; D, scale_d and amax untouched;
 * query: the size query gives the same status (not for the overlap rule and the offsets, which
 * it does not apply / read). */
static void refused(const char *what, fp8kit_status want, const char *sub, int query, const fp8kit_gemm_desc *d,
                    const fp8kit_grouped_gemm_args *a, const bad_env *e)
{
    fk_poison(e->d, e->dbytes);
    fk_poison(e->sd, e->sdbytes);
    *e->amax = -3.0f;
    fp8kit_status st = fp8kit_grouped_gemm(g_ctx, d, a, NULL);
    CHECK(st == want, "%s: status %s (%s), want %s", what, fp8kit_status_string(st), fp8kit_last_error(g_ctx),
          fp8kit_status_string(want));
    const char *msg = fp8kit_last_error(g_ctx);
    CHECK(msg && strstr(msg, sub), "%s: message '%s' does not mention '%s'", what, msg ? msg : "", sub);
    CHECK(fk_is_poisoned(e->d, e->dbytes), "%s: D was written", what);
    CHECK(fk_is_poisoned(e->sd, e->sdbytes), "%s: scale_d was written", what);
    CHECK(*e->amax == -3.0f, "%s: amax_d was written", what);
    if (query) {
        size_t bytes = 77;
        CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(g_ctx, d, a, &bytes), want);
        CHECK(bytes == 77, "%s: the size query wrote its answer", what);
    }
}

static void bad_inputs(void)
{
    enum { T = 40, G = 3, N = 64, K = 32, H = N / 2 };
    uint8_t *a = (uint8_t *)malloc(T * K), *b = (uint8_t *)malloc(G * N * K);
    memset(a, 0x38, T * K); /* e4m3 1.0 */
    memset(b, 0x30, G * N * K); /* e4m3 0.5 */
    static float sa[T], sb[G * N], sdf[2 * T * 4];
    static uint8_t sde[2 * T * 4];
    for (int i = 0; i < T; i++)
        sa[i] = 1.0f;
    for (int i = 0; i < G * N; i++)
        sb[i] = 1.0f;
    int32_t off[G] = {10, 10, T}, status = 5;
    float amax_store[2] = {0, 0};
    bad_env e = {(uint8_t *)malloc(4 * T * N + 16), (uint8_t *)sdf, 4 * T * N + 16, sizeof sdf, &amax_store[0]};
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = d.scale_b = FP8KIT_SCALE_ROW;
    d.act = FP8KIT_ACT_SWIGLU;
    d.out_quant = FP8KIT_OUTQ_BLOCK1X128;
    d.out_hp = FP8KIT_BF16;
    fp8kit_grouped_gemm_args ok;
    memset(&ok, 0, sizeof ok);
    int64_t bs[3] = {G, N, K}, nt = T, ngn = G * N, sds[2] = {T, 1};
    ok.a = fp8kit_tensor_2d(a, FP8KIT_E4M3, T, K, K);
    ok.b = fp8kit_tensor_make(b, FP8KIT_E4M3, 3, bs);
    ok.offsets = off;
    ok.status = &status;
    ok.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &nt);
    ok.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &ngn);
    ok.alpha = 1.0f;
    ok.d = fp8kit_tensor_2d(e.d, FP8KIT_E4M3, T, H, H);
    ok.scale_d = fp8kit_tensor_make(sdf, FP8KIT_F32, 2, sds);
    CHECK_STATUS(fp8kit_grouped_gemm(g_ctx, &d, &ok, NULL), FP8KIT_OK);
    CHECK(status == FP8KIT_OK, "status word %d after a good call", (int)status);
    {
        char buf[128];
        size_t bytes = 99;
        CHECK_STATUS(fp8kit_grouped_gemm_workspace_size(g_ctx, &d, &ok, &bytes), FP8KIT_OK);
        CHECK(bytes == 0, "CPU workspace %zu", bytes);
        CHECK_STATUS(fp8kit_grouped_gemm_describe(g_ctx, &d, &ok, buf, sizeof buf), FP8KIT_OK);
        CHECK(strstr(buf, "one gemm per group") != NULL, "describe: '%s'", buf);
    }
    fp8kit_grouped_gemm_args x;
    fp8kit_gemm_desc dx;
#define RESET() (x = ok, dx = d)

    /* swiglu's shapes */
    RESET();
    x.b.shape[1] = N - 1; /* odd N: (G, 63, K), experts still N rows apart */
    x.b.strides[0] = N * K, x.b.strides[1] = K, x.b.strides[2] = 1;
    x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &(int64_t){G * (N - 1)});
    x.d = fp8kit_tensor_2d(e.d, FP8KIT_E4M3, T, 31, 31);
    refused("odd N", FP8KIT_ERR_INVALID_SHAPE, "even N", 1, &dx, &x, &e);
    RESET();
    x.d = fp8kit_tensor_2d(e.d, FP8KIT_E4M3, T, N, N);
    refused("D of N columns", FP8KIT_ERR_INVALID_SHAPE, "N/2", 1, &dx, &x, &e);
    RESET();
    dx.bias = FP8KIT_BIAS_ROW;
    x.bias = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &nt);
    refused("row bias", FP8KIT_ERR_UNSUPPORTED, "bias", 1, &dx, &x, &e);

    /* scale_d */
    RESET();
    x.scale_d = (fp8kit_tensor){0};
    refused("scale_d missing", FP8KIT_ERR_NULL_POINTER, "scale_d", 1, &dx, &x, &e);
    RESET();
    x.scale_d = fp8kit_tensor_make(sdf, FP8KIT_F32, 2, (int64_t[2]){T, 2});
    refused("scale_d count", FP8KIT_ERR_INVALID_SHAPE, "scale_d", 1, &dx, &x, &e);
    RESET();
    x.scale_d.dtype = FP8KIT_E8M0, x.scale_d.data = sde;
    refused("scale_d e8m0 for block1x128", FP8KIT_ERR_INVALID_ARGUMENT, "scale_d", 1, &dx, &x, &e);
    RESET();
    x.scale_d.strides[0] = 2, x.scale_d.strides[1] = 1;
    refused("scale_d strided", FP8KIT_ERR_INVALID_STRIDE, "scale_d", 1, &dx, &x, &e);
    RESET();
    x.scale_d.data = e.d + 64; /* inside D */
    refused("scale_d overlapping D", FP8KIT_ERR_INVALID_ARGUMENT, "scale_d", 0, &dx, &x, &e);
    RESET();
    dx.out_quant = FP8KIT_OUTQ_MX; /* D's N/2 = 32 columns: one e8m0 per row, placed inside A */
    x.scale_d = fp8kit_tensor_make(a + 8, FP8KIT_E8M0, 2, sds);
    refused("scale_d overlapping A", FP8KIT_ERR_INVALID_ARGUMENT, "scale_d", 0, &dx, &x, &e);
    RESET();
    dx.out_quant = FP8KIT_OUTQ_MX; /* N = 48 of each expert's 64 rows: N/2 = 24 is not a multiple of 32 */
    x.b.shape[1] = 48;
    x.b.strides[0] = N * K, x.b.strides[1] = K, x.b.strides[2] = 1;
    x.scale_b = fp8kit_tensor_make(sb, FP8KIT_F32, 1, &(int64_t){G * 48});
    x.d = fp8kit_tensor_2d(e.d, FP8KIT_E4M3, T, 24, 24);
    x.scale_d = fp8kit_tensor_make(sde, FP8KIT_E8M0, 2, sds);
    refused("OUTQ_MX over N/2 = 24", FP8KIT_ERR_INVALID_SHAPE, "N/2", 1, &dx, &x, &e);
    RESET();
    dx.act = FP8KIT_ACT_NONE, dx.out_quant = FP8KIT_OUTQ_MX; /* without swiglu: N = 64 columns, 2 scales a row */
    x.d = fp8kit_tensor_2d(e.d, FP8KIT_E4M3, T, N, N);
    x.scale_d = fp8kit_tensor_make(sde, FP8KIT_E8M0, 2, sds); /* T x 1: one short per row */
    refused("OUTQ_MX scale count", FP8KIT_ERR_INVALID_SHAPE, "OUTQ_MX", 1, &dx, &x, &e);
    x.scale_d = fp8kit_tensor_make(sde, FP8KIT_E8M0, 2, (int64_t[2]){T, 2});
    CHECK_STATUS(fp8kit_grouped_gemm(g_ctx, &dx, &x, NULL), FP8KIT_OK);

    /* D's dtype and the output stage */
    RESET();
    x.d.dtype = FP8KIT_BF16;
    refused("quantization into bf16 D", FP8KIT_ERR_UNSUPPORTED, "e4m3/e5m2 D", 1, &dx, &x, &e);
    RESET();
    dx.out_quant = FP8KIT_OUTQ_NONE;
    refused("fp8 D without output quantization", FP8KIT_ERR_UNSUPPORTED, "output quantization", 1, &dx, &x, &e);
    RESET();
    dx.out_hp = FP8KIT_E4M3;
    refused("out_hp e4m3", FP8KIT_ERR_UNSUPPORTED, "out_hp", 1, &dx, &x, &e);
    RESET();
    dx.out_quant = (fp8kit_out_quant)9;
    refused("out_quant out of enum", FP8KIT_ERR_INVALID_ARGUMENT, "out_quant", 1, &dx, &x, &e);
    RESET();
    x.amax_d = e.amax;
    refused("amax_d without OUTQ_SCALED", FP8KIT_ERR_UNSUPPORTED, "amax_d", 1, &dx, &x, &e);

    /* OUTQ_SCALED */
    float s_in = 0.5f;
    RESET();
    dx.out_quant = FP8KIT_OUTQ_SCALED;
    x.scale_d = fp8kit_tensor_make(&s_in, FP8KIT_F32, 0, NULL);
    x.amax_d = e.amax;
    CHECK_STATUS(fp8kit_grouped_gemm(g_ctx, &dx, &x, NULL), FP8KIT_OK);
    CHECK(*e.amax > 0.0f, "OUTQ_SCALED amax_d %g", *e.amax);
    x.amax_d = (float *)((char *)e.amax + 1);
    refused("amax_d misaligned", FP8KIT_ERR_MISALIGNED, "amax_d", 1, &dx, &x, &e);
    x.amax_d = (float *)e.sd;
    x.scale_d = fp8kit_tensor_make(e.sd, FP8KIT_F32, 0, NULL);
    refused("amax_d on scale_d", FP8KIT_ERR_INVALID_ARGUMENT, "amax_d", 0, &dx, &x, &e);
    x.amax_d = e.amax;
    x.scale_d = fp8kit_tensor_make(sdf, FP8KIT_F32, 1, &(int64_t){2});
    refused("OUTQ_SCALED scale_d of 2", FP8KIT_ERR_INVALID_SHAPE, "scale_d", 1, &dx, &x, &e);
    x.scale_d = fp8kit_tensor_make(&s_in, FP8KIT_F32, 0, NULL);
    x.amax_d = (float *)(e.d + 8); /* inside D */
    refused("amax_d inside D", FP8KIT_ERR_INVALID_ARGUMENT, "amax_d", 0, &dx, &x, &e);

    /* offsets: checked before anything is written; the status word says so */
    RESET();
    int32_t bad_off[G] = {10, 9, T};
    x.offsets = bad_off;
    status = 5;
    refused("offsets decreasing", FP8KIT_ERR_INVALID_ARGUMENT, "offsets", 0, &dx, &x, &e);
    CHECK(status == FP8KIT_ERR_INVALID_ARGUMENT, "status word %d after bad offsets", (int)status);

    /* masked: (G, M, K) slabs, D (G, M, N/2), scales over G x M rows */
    {
        enum { M = 13 };
        int64_t as[3] = {G, M, K}, dsh[3] = {G, M, H}, gm = G * M, sdm[2] = {G * M, 1};
        int32_t cnt[G] = {0, M, 5};
        fp8kit_grouped_gemm_args m = ok;
        m.layout = FP8KIT_GROUPED_MASKED;
        m.a = fp8kit_tensor_make(a, FP8KIT_E4M3, 3, as);
        m.d = fp8kit_tensor_make(e.d, FP8KIT_E4M3, 3, dsh);
        m.scale_a = fp8kit_tensor_make(sa, FP8KIT_F32, 1, &gm);
        m.scale_d = fp8kit_tensor_make(sdf, FP8KIT_F32, 2, sdm);
        m.offsets = cnt;
        CHECK_STATUS(fp8kit_grouped_gemm(g_ctx, &d, &m, NULL), FP8KIT_OK);
        x = m, dx = d;
        x.scale_d = fp8kit_tensor_make(sdf, FP8KIT_F32, 2, (int64_t[2]){G * M - 1, 1});
        refused("masked scale_d rows", FP8KIT_ERR_INVALID_SHAPE, "G x M", 1, &dx, &x, &e);
        x = m;
        x.d = fp8kit_tensor_make(e.d, FP8KIT_E4M3, 3, (int64_t[3]){G, M, N});
        refused("masked D of N columns", FP8KIT_ERR_INVALID_SHAPE, "N/2", 1, &dx, &x, &e);
        x = m;
        int32_t cnt_bad[G] = {0, M + 1, 5};
        x.offsets = cnt_bad;
        refused("masked count > M", FP8KIT_ERR_INVALID_ARGUMENT, "offsets", 0, &dx, &x, &e);
    }
#undef RESET
    free(a), free(b), free(e.d);
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_grouped_swiglu");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_ctx), FP8KIT_OK);
    if (!g_ctx)
        return fk_test_summary("test_grouped_swiglu");
    static const fp8kit_activation acts[] = {FP8KIT_ACT_SWIGLU, FP8KIT_ACT_NONE};
    static const fp8kit_activation elementwise[] = {FP8KIT_ACT_RELU, FP8KIT_ACT_GELU_TANH, FP8KIT_ACT_GELU_ERF,
                                                    FP8KIT_ACT_SILU};
    char name[200];
    int n = 0;
    for (int masked = 0; masked < 2; masked++)
        for (int ai = 0; ai < 3; ai++)
            for (int oi = 0; oi < NOUTS; oi++)
                for (int mi = 0; mi < NMODES; mi++) {
                    /* ai 2: an elementwise activation, with the output stages that are new here */
                    if (ai == 2 && (k_outs[oi].oq == FP8KIT_OUTQ_NONE || mi % 2))
                        continue;
                    const fp8kit_activation act = ai < 2 ? acts[ai] : elementwise[(oi + mi) % 4];
                    gcase c;
                    draw_case(&rng, masked, act, &k_outs[oi], mi, &c);
                    snprintf(name, sizeof name,
                             "#%d %s act %d out %d scales %d/%d%s: rows %lld G %lld N %lld K %lld bias %d pad %d%s",
                             n, masked ? "masked" : "contiguous", (int)c.act, oi, (int)c.sa, (int)c.sb,
                             c.mn ? " mn_major" : "", (long long)c.rows, (long long)c.g, (long long)c.n,
                             (long long)c.k, c.bias, c.pad, c.empty ? " all empty" : "");
                    run_case(&c, &rng, name);
                    n++;
                }
    printf("  %d random cases\n", n);
    bad_inputs();
    fp8kit_ctx_destroy(g_ctx);
    return fk_test_summary("test_grouped_swiglu");
}
