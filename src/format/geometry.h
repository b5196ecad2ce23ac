/* geometry.h - scale geometry of docs/spec.md 2.3 and 3, for host and device (FK_HD): for
 * quantization (per scheme, layout and axis) and for the GEMM's operands (per scale mode,
 * layout and operand A / B, and D's fused output quantization), the grid of scales, the
 * stored matrix of one expert (padding included), its row stride, its element count, and
 * the element offset of scale (r, c); the blocked ("128x4") layout; overflow-safe sizes.
 * Every place that sizes or indexes a scale tensor uses these (the core's checks and
 * fp8kit_quant_shapes / fp8kit_gemm_scale_shape, the CPU backend, the CUDA GEMM's
 * parameters), so a layout is written once. */
#ifndef FK_GEOMETRY_H
#define FK_GEOMETRY_H

#include "fk_hd.h"

/* The values of fp8kit_scheme, fp8kit_scale_layout, fp8kit_scale_mode and
 * fp8kit_out_quant (src/format does not include fp8kit.h; src/core asserts that
 * they agree). Callers pass the public enums' values. */
enum { FK_GEO_TENSOR = 0, FK_GEO_ROW = 1, FK_GEO_1X128 = 2, FK_GEO_128X128 = 3, FK_GEO_MX = 4 };
enum { FK_GEO_PLAIN = 0, FK_GEO_BLOCKED = 1, FK_GEO_MN_MAJOR = 2 };
enum { FK_GEO_MODE_NONE = 0, FK_GEO_MODE_TENSOR = 1, FK_GEO_MODE_ROW = 2, FK_GEO_MODE_BLOCK = 3, FK_GEO_MODE_MX = 4 };
enum { FK_GEO_OUTQ_NONE = 0, FK_GEO_OUTQ_SCALED = 1, FK_GEO_OUTQ_MX = 2, FK_GEO_OUTQ_1X128 = 3 };

/* What a geometry function returns. */
enum {
    FK_GEO_OK = 0,
    FK_GEO_ERR_ARG = 1,      /* a scheme / mode / layout / axis value out of range */
    FK_GEO_ERR_COMBO = 2,    /* a combination the spec does not define (blocked without mx, ...) */
    FK_GEO_ERR_SHAPE = 3,    /* the mx blocked length (C, R or K; N for OUTQ_MX) is not a multiple of 32 */
    FK_GEO_ERR_OVERFLOW = 4  /* a size is negative or overflows int64 (the field is -1) */
};

/* ------------------------------------------------------------ safe sizes */
/* a * b for a, b >= 0; -1 when either is negative or the product overflows int64. */
FK_HD int64_t fk_mul_safe(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a))
        return -1;
    return a * b;
}
/* ceil(a / b) for b > 0 without the overflow of (a + b - 1) / b; -1 for a < 0. */
FK_HD int64_t fk_cdiv_safe(int64_t a, int64_t b) { return a < 0 ? -1 : a / b + (a % b != 0); }
/* a rounded up to a multiple of b (b > 0); -1 for a < 0 or when it overflows. */
FK_HD int64_t fk_rup_safe(int64_t a, int64_t b) { return fk_mul_safe(fk_cdiv_safe(a, b), b); }

/* ------------------------------------------------------- blocked layout */
/* docs/spec.md 2.3 blocked ("128x4") layout: offset of (r, c) in one expert's
 * padded buffer of Rp x Cp elements, Cp = 4 * ceil(C / 4). */
FK_HD int64_t fk_blocked_offset(int64_t r, int64_t c, int64_t cp)
{
    return ((r >> 7) * (cp >> 2) + (c >> 2)) * 512 + (r & 31) * 16 + ((r & 127) >> 5) * 4 + (c & 3);
}
FK_HD int64_t fk_blocked_rows(int64_t r) { return fk_round_up(r, 128); }
FK_HD int64_t fk_blocked_cols(int64_t c) { return fk_round_up(c, 4); }

/* ------------------------------------------------------------- geometry */
/* The scales of one expert (quantization) or one operand (GEMM).
 *
 * The grid: grows x gcols scales proper, the plain matrix of docs/spec.md 2 / 3
 * (quantization: in q's orientation, so mx axis -2 has C rows of R/32; GEMM: operand
 * rows x K blocks). Scale (r, c) of the grid covers elements [r*gh, r*gh + gh) x
 * [c*gw, c*gw + gw) of q (quantization) or of the operand's rows x K (GEMM), clipped
 * at the edges; a group that spans a whole dim has gh or gw INT64_MAX.
 *
 * The stored matrix: rows x cols elements per expert, padding included (the E
 * experts of a batch follow each other, count elements apart); ld = cols is its row
 * stride (the blocked layout's Cp). Scale (r, c) lives at fk_scale_off(): r * sr +
 * c * sc for the strided layouts, fk_blocked_offset(r, c, cols) for blocked. Sizes
 * that overflow int64 are -1 (the function then returns FK_GEO_ERR_OVERFLOW). */
typedef struct fk_scale_geom {
    int64_t rows, cols, ld, count; /* stored matrix of one expert; count = rows * cols */
    int64_t grows, gcols;          /* the grid of scales */
    int64_t gh, gw;                /* elements per scale along rows and along columns (K) */
    int64_t sr, sc;                /* strided layouts: scale (r, c) at r * sr + c * sc */
    int32_t blocked;               /* 1: scale (r, c) at fk_blocked_offset(r, c, cols) */
    int32_t e8m0;                  /* 1: e8m0 bytes (mx), 0: f32 */
} fk_scale_geom;

/* Offset (in elements) of scale (r, c) of the grid within one expert's buffer. */
FK_HD int64_t fk_scale_off(const fk_scale_geom *g, int64_t r, int64_t c)
{
    return g->blocked ? fk_blocked_offset(r, c, g->cols) : r * g->sr + c * g->sc;
}

/* GEMM: offset of the scale of operand row `row` (of A: m, of B: n) at K block kb
 * (gw elements of K: 128 for block, 32 for mx). */
FK_HD int64_t fk_scale_off_rk(const fk_scale_geom *g, int64_t row, int64_t kb)
{
    return fk_scale_off(g, g->gh == 1 ? row : row / g->gh, kb);
}

/* Fills the sizes that follow from rows, cols and the grid; the overflow code. */
FK_HD int fk_geom_finish(fk_scale_geom *g)
{
    g->ld = g->cols;
    g->count = fk_mul_safe(g->rows, g->cols);
    return g->rows < 0 || g->cols < 0 || g->grows < 0 || g->gcols < 0 || g->count < 0 ? FK_GEO_ERR_OVERFLOW
                                                                                        : FK_GEO_OK;
}

FK_HD void fk_geom_clear(fk_scale_geom *g)
{
    g->rows = g->cols = g->ld = g->count = g->grows = g->gcols = g->sr = g->sc = 0;
    g->gh = g->gw = INT64_MAX;
    g->blocked = g->e8m0 = 0;
}

/* A plain row-major grid (stored as is). */
FK_HD void fk_geom_plain(fk_scale_geom *g, int64_t grows, int64_t gcols)
{
    g->rows = g->grows = grows;
    g->cols = g->gcols = gcols;
    g->sr = gcols;
    g->sc = 1;
}

/* mn_major (docs/spec.md 2.3): the grid stored transposed, its rows padded to 4. */
FK_HD void fk_geom_mn_major(fk_scale_geom *g, int64_t grows, int64_t gcols)
{
    g->grows = grows;
    g->gcols = gcols;
    g->rows = gcols;
    g->cols = fk_rup_safe(grows, 4);
    g->sr = 1;
    g->sc = g->cols;
}

/* blocked (docs/spec.md 2.3): the grid padded to 128 x 4 and tiled. */
FK_HD void fk_geom_blocked(fk_scale_geom *g, int64_t grows, int64_t gcols)
{
    g->grows = grows;
    g->gcols = gcols;
    g->rows = fk_rup_safe(grows, 128);
    g->cols = fk_rup_safe(gcols, 4);
    g->sr = g->sc = 0;
    g->blocked = 1;
}

/* 1 when `layout` is defined for quantization `scheme` (plain: all; blocked: mx;
 * mn_major: block1x128 and block128x128). */
/* mx scales (e8m0, one per 32 of len along each of rows), plain or blocked;
 * 0 when len is not a multiple of 32. Shared by quantization and GEMM. */
FK_HD int fk_geom_mx(fk_scale_geom *g, int64_t rows, int64_t len, int layout)
{
    g->e8m0 = 1;
    if (len % 32)
        return 0;
    if (layout == FK_GEO_BLOCKED)
        fk_geom_blocked(g, rows, len / 32);
    else
        fk_geom_plain(g, rows, len / 32);
    g->gh = 1;
    g->gw = 32;
    return 1;
}

FK_HD int fk_quant_layout_ok(int scheme, int layout)
{
    return layout == FK_GEO_PLAIN || (layout == FK_GEO_BLOCKED && scheme == FK_GEO_MX) ||
           (layout == FK_GEO_MN_MAJOR && (scheme == FK_GEO_1X128 || scheme == FK_GEO_128X128));
}

/* Quantization (docs/spec.md 2, 2.3): the scales of one (R, C) matrix x (one expert)
 * under scheme / layout / axis (-1 or -2; -2 only for mx). The tensor scheme is one
 * scale for the whole tensor (1 x 1, offset 0). */
FK_HD int fk_quant_scale_geom(int scheme, int layout, int axis, int64_t R, int64_t C, fk_scale_geom *g)
{
    fk_geom_clear(g);
    if (scheme < FK_GEO_TENSOR || scheme > FK_GEO_MX || layout < FK_GEO_PLAIN || layout > FK_GEO_MN_MAJOR ||
        (axis != -1 && axis != -2))
        return FK_GEO_ERR_ARG;
    if (!fk_quant_layout_ok(scheme, layout) || (axis == -2 && scheme != FK_GEO_MX))
        return FK_GEO_ERR_COMBO;
    if (R < 0 || C < 0) {
        g->rows = g->cols = g->ld = g->count = -1;
        return FK_GEO_ERR_OVERFLOW;
    }
    switch (scheme) {
    case FK_GEO_TENSOR:
        g->rows = g->cols = g->grows = g->gcols = 1;
        break;
    case FK_GEO_ROW:
        fk_geom_plain(g, R, 1);
        g->sr = 1;
        g->sc = 0;
        g->gh = 1;
        break;
    case FK_GEO_1X128:
    case FK_GEO_128X128: {
        const int64_t gr = scheme == FK_GEO_1X128 ? R : fk_cdiv_safe(R, 128), gc = fk_cdiv_safe(C, 128);
        if (layout == FK_GEO_MN_MAJOR)
            fk_geom_mn_major(g, gr, gc);
        else
            fk_geom_plain(g, gr, gc);
        g->gh = scheme == FK_GEO_1X128 ? 1 : 128;
        g->gw = 128;
        break;
    }
    default: { /* mx: blocks of 32 along the axis; the grid in q's orientation */
        const int64_t qr = axis == -1 ? R : C, len = axis == -1 ? C : R;
        if (!fk_geom_mx(g, qr, len, layout))
            return FK_GEO_ERR_SHAPE;
        break;
    }
    }
    return fk_geom_finish(g);
}

/* 1 when `layout` is defined for GEMM scale `mode` (docs/spec.md 3: blocked for mx,
 * mn_major for block; plain for every mode). */
FK_HD int fk_gemm_layout_ok(int mode, int layout)
{
    return layout == FK_GEO_PLAIN || (layout == FK_GEO_BLOCKED && mode == FK_GEO_MODE_MX) ||
           (layout == FK_GEO_MN_MAJOR && mode == FK_GEO_MODE_BLOCK);
}

/* GEMM (docs/spec.md 3): the scales of operand A (is_b 0, rows = M) or B (is_b 1,
 * rows = N) with K = k under scale `mode` and the descriptor's `layout`:
 *   NONE    nothing (0 x 0)
 *   TENSOR  1 x 1 f32
 *   ROW     rows x 1 f32
 *   BLOCK   A: 1x128 (M, ceil(K/128)) plain, or mn_major (ceil(K/128), 4*ceil(M/4));
 *           B: 128x128 (ceil(N/128), ceil(K/128)), plain whatever the layout
 *   MX      e8m0 (rows, K/32) plain, or blocked (128*ceil(rows/128), 4*ceil(K/32/4)) */
FK_HD int fk_gemm_scale_geom(int mode, int layout, int is_b, int64_t rows, int64_t k, fk_scale_geom *g)
{
    fk_geom_clear(g);
    if (mode < FK_GEO_MODE_NONE || mode > FK_GEO_MODE_MX || layout < FK_GEO_PLAIN || layout > FK_GEO_MN_MAJOR)
        return FK_GEO_ERR_ARG;
    if (!fk_gemm_layout_ok(mode, layout))
        return FK_GEO_ERR_COMBO;
    if (rows < 0 || k < 0) {
        g->rows = g->cols = g->ld = g->count = -1;
        return FK_GEO_ERR_OVERFLOW;
    }
    switch (mode) {
    case FK_GEO_MODE_NONE:
        break;
    case FK_GEO_MODE_TENSOR:
        g->rows = g->cols = g->grows = g->gcols = 1;
        break;
    case FK_GEO_MODE_ROW:
        fk_geom_plain(g, rows, 1);
        g->sr = 1;
        g->sc = 0;
        g->gh = 1;
        break;
    case FK_GEO_MODE_BLOCK: {
        const int64_t ka = fk_cdiv_safe(k, 128);
        if (is_b)
            fk_geom_plain(g, fk_cdiv_safe(rows, 128), ka);
        else if (layout == FK_GEO_MN_MAJOR)
            fk_geom_mn_major(g, rows, ka);
        else
            fk_geom_plain(g, rows, ka);
        g->gh = is_b ? 128 : 1;
        g->gw = 128;
        break;
    }
    default: /* mx */
        if (!fk_geom_mx(g, rows, k, layout))
            return FK_GEO_ERR_SHAPE;
        break;
    }
    return fk_geom_finish(g);
}

/* Grouped GEMM (fp8kit_grouped_gemm): A's scales over its t rows under mode and
 * layout, as slabs one after another: one slab of all t rows, except mn_major
 * block scales of the masked layout (masked_m > 0 rows per expert), which are
 * one mn_major buffer per expert. Fills the geometry of one slab, its rows and
 * the number of slabs; the code of fk_gemm_scale_geom. */
FK_HD int fk_grouped_a_scale_geom(int mode, int layout, int64_t t, int64_t experts, int64_t masked_m, int64_t k,
                                  fk_scale_geom *g, int64_t *slab_rows, int64_t *slabs)
{
    const int per_expert = layout == FK_GEO_MN_MAJOR && masked_m > 0 && experts > 1;
    *slabs = per_expert ? experts : 1;
    *slab_rows = per_expert ? masked_m : t;
    return fk_gemm_scale_geom(mode, layout, 0, *slab_rows, k, g);
}

/* GEMM (docs/spec.md 3, "Outputs"): the scales of D (M x N) under out_quant:
 * NONE nothing; SCALED the 1 x 1 f32 input scale_d; MX e8m0 (M, N/32) and
 * BLOCK1X128 f32 (M, ceil(N/128)): the plain mx axis -1 / block1x128 geometry of
 * quantization. */
FK_HD int fk_gemm_out_scale_geom(int out_quant, int64_t m, int64_t n, fk_scale_geom *g)
{
    switch (out_quant) {
    case FK_GEO_OUTQ_NONE:
        fk_geom_clear(g);
        return m < 0 || n < 0 ? FK_GEO_ERR_OVERFLOW : FK_GEO_OK;
    case FK_GEO_OUTQ_SCALED:
        return fk_quant_scale_geom(FK_GEO_TENSOR, FK_GEO_PLAIN, -1, m, n, g);
    case FK_GEO_OUTQ_MX:
        return fk_quant_scale_geom(FK_GEO_MX, FK_GEO_PLAIN, -1, m, n, g);
    case FK_GEO_OUTQ_1X128:
        return fk_quant_scale_geom(FK_GEO_1X128, FK_GEO_PLAIN, -1, m, n, g);
    default:
        fk_geom_clear(g);
        return FK_GEO_ERR_ARG;
    }
}

#endif
