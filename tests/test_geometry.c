/* test_geometry.c - the scale geometry of src/format/geometry.h (docs/spec.md 2.3
 * and 3) against an independent, straightforward derivation, for every
 * quantization scheme / layout / axis and every GEMM scale mode / layout /
 * operand, over square, tall, wide, odd, 1 and 0 sizes: the stored shape, the
 * row stride, the element count, and where each scale lives (every scale of
 * the grid at a distinct in-range offset, found by enumerating the stored
 * layout in storage order; the padding is what is left), which elements a
 * scale covers, and the values the CUDA GEMM's parameters took before they
 * came from here. Then the public queries: fp8kit_quant_shapes for 2-D, 3-D
 * and 4-D inputs (E experts), and fp8kit_gemm_scale_shape against
 * fp8kit_gemm's own checks (a scale tensor of the reported shape passes
 * fp8kit_gemm_supported on the CPU, one element fewer does not) and all its
 * statuses; overflow-safe sizes at the edges of int64. CPU only. */
#include <stdint.h>
#include "fp8kit.h"
#include "test_util.h"
#include "format/geometry.h"

/* ------------------------------------------------------------ reference */
/* ceil(a / b) by counting: the smallest q with q * b >= a. */
static int64_t ref_cdiv(int64_t a, int64_t b)
{
    int64_t q = 0;
    while (q * b < a)
        q++;
    return q;
}
static int64_t ref_rup(int64_t a, int64_t b) { return ref_cdiv(a, b) * b; }

enum { L_PLAIN, L_MN, L_BLOCKED };

/* A reference geometry: the grid (gr x gc), the stored matrix (rows x cols),
 * which layout stores it, and the elements one scale covers (gh x gw; 0 = all). */
typedef struct ref_geom {
    int64_t gr, gc, rows, cols, gh, gw;
    int kind, e8m0;
} ref_geom;

/* pos[r * gc + c]: the offset of grid scale (r, c), by walking the stored
 * buffer in storage order and naming the grid entry each position holds (-1:
 * padding). Returns the number of positions walked (the buffer's size). */
static int64_t ref_positions(const ref_geom *g, int64_t *pos)
{
    int64_t p = 0;
    for (int64_t i = 0; i < g->gr * g->gc; i++)
        pos[i] = -1;
    if (g->kind == L_PLAIN) {
        for (int64_t r = 0; r < g->rows; r++)
            for (int64_t c = 0; c < g->cols; c++, p++)
                pos[r * g->gc + c] = p;
    } else if (g->kind == L_MN) { /* stored row i = grid column i; its entry j = grid row j */
        for (int64_t i = 0; i < g->rows; i++)
            for (int64_t j = 0; j < g->cols; j++, p++)
                if (j < g->gr)
                    pos[j * g->gc + i] = p;
    } else { /* 128x4 tiles in row-major tile order; 32 lines of 16 bytes each: line l holds
              * rows l, l+32, l+64, l+96 of the tile, 4 columns each */
        for (int64_t rt = 0; rt < g->rows / 128; rt++)
            for (int64_t ct = 0; ct < g->cols / 4; ct++)
                for (int64_t line = 0; line < 32; line++)
                    for (int64_t quarter = 0; quarter < 4; quarter++)
                        for (int64_t cc = 0; cc < 4; cc++, p++) {
                            int64_t r = rt * 128 + quarter * 32 + line, c = ct * 4 + cc;
                            if (r < g->gr && c < g->gc)
                                pos[r * g->gc + c] = p;
                        }
    }
    return p;
}

/* docs/spec.md 2 / 2.3: the scales of quantizing one (R, C) matrix. */
static ref_geom ref_quant(int scheme, int layout, int axis, int64_t R, int64_t C)
{
    ref_geom g = {0, 0, 0, 0, 0, 0, L_PLAIN, 0};
    switch (scheme) {
    case FP8KIT_SCHEME_TENSOR: g.gr = g.gc = 1; break;
    case FP8KIT_SCHEME_ROW: g.gr = R; g.gc = 1; g.gh = 1; break;
    case FP8KIT_SCHEME_BLOCK1X128: g.gr = R; g.gc = ref_cdiv(C, 128); g.gh = 1; g.gw = 128; break;
    case FP8KIT_SCHEME_BLOCK128X128: g.gr = ref_cdiv(R, 128); g.gc = ref_cdiv(C, 128); g.gh = g.gw = 128; break;
    default: /* mx: q is x, or its transpose for axis -2 */
        g.gr = axis == -1 ? R : C;
        g.gc = (axis == -1 ? C : R) / 32;
        g.gh = 1;
        g.gw = 32;
        g.e8m0 = 1;
        break;
    }
    g.rows = g.gr;
    g.cols = g.gc;
    if (layout == FP8KIT_LAYOUT_MN_MAJOR) {
        g.kind = L_MN;
        g.rows = g.gc;
        g.cols = ref_rup(g.gr, 4);
    } else if (layout == FP8KIT_LAYOUT_BLOCKED) {
        g.kind = L_BLOCKED;
        g.rows = ref_rup(g.gr, 128);
        g.cols = ref_rup(g.gc, 4);
    }
    return g;
}

/* docs/spec.md 3: the scales of GEMM operand A (is_b 0) or B, rows x K. */
static ref_geom ref_gemm(int mode, int layout, int is_b, int64_t rows, int64_t K)
{
    ref_geom g = {0, 0, 0, 0, 0, 0, L_PLAIN, 0};
    switch (mode) {
    case FP8KIT_SCALE_NONE: return g;
    case FP8KIT_SCALE_TENSOR: return ref_quant(FP8KIT_SCHEME_TENSOR, FP8KIT_LAYOUT_PLAIN, -1, rows, K);
    case FP8KIT_SCALE_ROW: return ref_quant(FP8KIT_SCHEME_ROW, FP8KIT_LAYOUT_PLAIN, -1, rows, K);
    case FP8KIT_SCALE_BLOCK:
        g.gr = is_b ? ref_cdiv(rows, 128) : rows;
        g.gc = ref_cdiv(K, 128);
        g.gh = is_b ? 128 : 1;
        g.gw = 128;
        g.rows = g.gr;
        g.cols = g.gc;
        if (!is_b && layout == FP8KIT_LAYOUT_MN_MAJOR) {
            g.kind = L_MN;
            g.rows = g.gc;
            g.cols = ref_rup(rows, 4);
        }
        return g;
    default:
        g.gr = rows;
        g.gc = K / 32;
        g.gh = 1;
        g.gw = 32;
        g.e8m0 = 1;
        g.rows = g.gr;
        g.cols = g.gc;
        if (layout == FP8KIT_LAYOUT_BLOCKED) {
            g.kind = L_BLOCKED;
            g.rows = ref_rup(rows, 128);
            g.cols = ref_rup(g.gc, 4);
        }
        return g;
    }
}

/* ------------------------------------------------------------ comparison */
static int64_t pos_buf[1 << 20];

/* g (from geometry.h) against the reference: sizes, every grid offset, and
 * (for an operand of er x ec elements) the scale each element uses. */
static void compare(const char *what, const fk_scale_geom *g, const ref_geom *w, int64_t er, int64_t ec)
{
    CHECK(g->rows == w->rows && g->cols == w->cols, "%s: stored %lld x %lld, want %lld x %lld", what,
          (long long)g->rows, (long long)g->cols, (long long)w->rows, (long long)w->cols);
    CHECK(g->count == w->rows * w->cols && g->ld == w->cols, "%s: count %lld ld %lld", what, (long long)g->count,
          (long long)g->ld);
    CHECK(g->grows == w->gr && g->gcols == w->gc, "%s: grid %lld x %lld, want %lld x %lld", what,
          (long long)g->grows, (long long)g->gcols, (long long)w->gr, (long long)w->gc);
    CHECK(g->e8m0 == w->e8m0 && g->blocked == (w->kind == L_BLOCKED), "%s: e8m0 %d blocked %d", what, g->e8m0,
          g->blocked);
    if (w->gr * w->gc > (int64_t)(sizeof pos_buf / sizeof pos_buf[0]) || g->grows != w->gr || g->gcols != w->gc)
        return;
    const int64_t walked = ref_positions(w, pos_buf);
    CHECK(walked == g->count, "%s: the layout walks %lld positions, count is %lld", what, (long long)walked,
          (long long)g->count);
    int64_t bad = 0;
    for (int64_t r = 0; r < w->gr; r++)
        for (int64_t c = 0; c < w->gc; c++) {
            const int64_t want = pos_buf[r * w->gc + c], got = fk_scale_off(g, r, c);
            if (want != got || got < 0 || got >= g->count) {
                if (bad++ < 3)
                    CHECK(0, "%s: scale (%lld, %lld) at %lld, want %lld", what, (long long)r, (long long)c,
                          (long long)got, (long long)want);
            }
        }
    CHECK(bad == 0, "%s: %lld scales misplaced", what, (long long)bad);
    /* the scale of element (i, j): its group (i / gh, j / gw), 0 for a whole dim
     * (every element of small operands; of large ones every step-th and the last) */
    bad = 0;
    const int64_t si = er <= 160 ? 1 : er / 61 + 1, sj = ec <= 160 ? 1 : ec / 67 + 1;
    for (int64_t i = 0; i < er; i = i + si < er || i == er - 1 ? i + si : er - 1)
        for (int64_t j = 0; j < ec; j = j + sj < ec || j == ec - 1 ? j + sj : ec - 1) {
            const int64_t r = w->gh ? i / w->gh : 0, c = w->gw ? j / w->gw : 0;
            if (r >= w->gr || c >= w->gc)
                continue; /* mx: elements past the last whole block do not exist */
            if (fk_scale_off_rk(g, i, j / g->gw) != pos_buf[r * w->gc + c] && bad++ < 3)
                CHECK(0, "%s: element (%lld, %lld) reads %lld, want %lld", what, (long long)i, (long long)j,
                      (long long)fk_scale_off_rk(g, i, j / g->gw), (long long)pos_buf[r * w->gc + c]);
        }
    CHECK(bad == 0, "%s: %lld elements read the wrong scale", what, (long long)bad);
}

static const int64_t SIZES[] = {1, 2, 3, 4, 5, 31, 32, 33, 64, 96, 127, 128, 129, 130, 200, 255, 256, 257, 300,
                                384, 1000, 1024, 4099};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static const char *const SCHEME[] = {"tensor", "row", "block1x128", "block128x128", "mx"};
static const char *const LAYOUT[] = {"plain", "blocked", "mn_major"};
static const char *const MODE[] = {"none", "tensor", "row", "block", "mx"};

static void test_quant_geometry(void)
{
    for (int scheme = 0; scheme <= FP8KIT_SCHEME_MX; scheme++)
        for (int layout = 0; layout <= FP8KIT_LAYOUT_MN_MAJOR; layout++)
            for (int axis = -2; axis <= -1; axis++)
                for (int a = 0; a < NSIZES; a++)
                    for (int b = 0; b < NSIZES; b++) {
                        const int64_t R = SIZES[a], C = SIZES[b];
                        char what[128];
                        snprintf(what, sizeof what, "quant %s %s axis %d R %lld C %lld", SCHEME[scheme],
                                 LAYOUT[layout], axis, (long long)R, (long long)C);
                        fk_scale_geom g;
                        const int st = fk_quant_scale_geom(scheme, layout, axis, R, C, &g);
                        const int lay_ok = layout == FP8KIT_LAYOUT_PLAIN ||
                                           (layout == FP8KIT_LAYOUT_BLOCKED && scheme == FP8KIT_SCHEME_MX) ||
                                           (layout == FP8KIT_LAYOUT_MN_MAJOR &&
                                            (scheme == FP8KIT_SCHEME_BLOCK1X128 || scheme == FP8KIT_SCHEME_BLOCK128X128));
                        const int defined = lay_ok && (axis == -1 || scheme == FP8KIT_SCHEME_MX);
                        CHECK(fk_quant_layout_ok(scheme, layout) == lay_ok, "%s: fk_quant_layout_ok", what);
                        const int64_t len = axis == -1 ? C : R;
                        if (!defined) {
                            CHECK(st == FK_GEO_ERR_COMBO, "%s: %d, want COMBO", what, st);
                            continue;
                        }
                        if (scheme == FP8KIT_SCHEME_MX && len % 32) {
                            CHECK(st == FK_GEO_ERR_SHAPE, "%s: %d, want SHAPE", what, st);
                            continue;
                        }
                        CHECK(st == FK_GEO_OK, "%s: %d", what, st);
                        ref_geom w = ref_quant(scheme, layout, axis, R, C);
                        const int t = scheme == FP8KIT_SCHEME_MX && axis == -2; /* q is (C, R) */
                        compare(what, &g, &w, t ? C : R, t ? R : C);
                    }
    /* layouts that pin their values: the spec's examples */
    fk_scale_geom g;
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_MX, FP8KIT_LAYOUT_BLOCKED, -1, 200, 192, &g) == 0 && g.rows == 256 &&
              g.cols == 8 && g.count == 2048 && fk_scale_off(&g, 0, 0) == 0 && fk_scale_off(&g, 1, 0) == 16 &&
              fk_scale_off(&g, 32, 0) == 4 && fk_scale_off(&g, 0, 1) == 1 && fk_scale_off(&g, 5, 6) == 594 &&
              fk_scale_off(&g, 130, 1) == 1057,
          "docs/spec.md 2.3 blocked example");
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_BLOCK1X128, FP8KIT_LAYOUT_MN_MAJOR, -1, 6, 300, &g) == 0 &&
              g.rows == 3 && g.cols == 8 && fk_scale_off(&g, 5, 2) == 2 * 8 + 5,
          "docs/spec.md 2.3 mn_major example");
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_MX, FP8KIT_LAYOUT_PLAIN, -2, 5120, 7168, &g) == 0 && g.rows == 7168 &&
              g.cols == 160,
          "docs/spec.md 2.2 axis -2 example (per expert)");
    /* size 0 (the geometry allows it; the public calls refuse empty tensors) */
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_BLOCK128X128, FP8KIT_LAYOUT_MN_MAJOR, -1, 0, 0, &g) == 0 && g.rows == 0 &&
              g.cols == 0 && g.count == 0,
          "0 x 0 block128x128 mn_major");
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_MX, FP8KIT_LAYOUT_BLOCKED, -1, 0, 64, &g) == 0 && g.rows == 0 &&
              g.cols == 4 && g.count == 0,
          "0 x 64 mx blocked");
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_TENSOR, FP8KIT_LAYOUT_PLAIN, -1, 0, 0, &g) == 0 && g.count == 1,
          "tensor scale of an empty matrix");
    /* out of range */
    CHECK(fk_quant_scale_geom(5, 0, -1, 4, 4, &g) == FK_GEO_ERR_ARG, "scheme 5");
    CHECK(fk_quant_scale_geom(0, 3, -1, 4, 4, &g) == FK_GEO_ERR_ARG, "layout 3");
    CHECK(fk_quant_scale_geom(4, 0, 0, 4, 32, &g) == FK_GEO_ERR_ARG, "axis 0");
    CHECK(fk_quant_scale_geom(1, 0, -1, -1, 4, &g) == FK_GEO_ERR_OVERFLOW && g.count == -1, "negative R");
}

static void test_gemm_geometry(void)
{
    for (int mode = 0; mode <= FP8KIT_SCALE_MX; mode++)
        for (int layout = 0; layout <= FP8KIT_LAYOUT_MN_MAJOR; layout++)
            for (int is_b = 0; is_b <= 1; is_b++)
                for (int a = 0; a < NSIZES; a++)
                    for (int b = 0; b < NSIZES; b++) {
                        const int64_t rows = SIZES[a], K = SIZES[b];
                        char what[128];
                        snprintf(what, sizeof what, "gemm %s %s %s rows %lld K %lld", MODE[mode], LAYOUT[layout],
                                 is_b ? "B" : "A", (long long)rows, (long long)K);
                        fk_scale_geom g;
                        const int st = fk_gemm_scale_geom(mode, layout, is_b, rows, K, &g);
                        const int defined = layout == FP8KIT_LAYOUT_PLAIN ||
                                            (layout == FP8KIT_LAYOUT_BLOCKED && mode == FP8KIT_SCALE_MX) ||
                                            (layout == FP8KIT_LAYOUT_MN_MAJOR && mode == FP8KIT_SCALE_BLOCK);
                        CHECK(fk_gemm_layout_ok(mode, layout) == defined, "%s: fk_gemm_layout_ok", what);
                        if (!defined) {
                            CHECK(st == FK_GEO_ERR_COMBO, "%s: %d, want COMBO", what, st);
                            continue;
                        }
                        if (mode == FP8KIT_SCALE_MX && K % 32) {
                            CHECK(st == FK_GEO_ERR_SHAPE, "%s: %d, want SHAPE", what, st);
                            continue;
                        }
                        CHECK(st == FK_GEO_OK, "%s: %d", what, st);
                        ref_geom w = ref_gemm(mode, layout, is_b, rows, K);
                        compare(what, &g, &w, rows, K);
                        /* what the CUDA GEMM's parameters were before they came from here */
                        const int64_t ka = (K + 127) / 128;
                        if (mode == FP8KIT_SCALE_BLOCK && !is_b) {
                            const int64_t ld = layout == FP8KIT_LAYOUT_MN_MAJOR ? (rows + 3) / 4 * 4 : ka;
                            CHECK(g.ld == ld, "%s: scale_a_ld %lld, want %lld", what, (long long)g.ld, (long long)ld);
                            CHECK(g.sr == (layout == FP8KIT_LAYOUT_MN_MAJOR ? 1 : ld) &&
                                      g.sc == (layout == FP8KIT_LAYOUT_MN_MAJOR ? ld : 1),
                                  "%s: sa_sm %lld sa_sk %lld", what, (long long)g.sr, (long long)g.sc);
                        }
                        if (mode == FP8KIT_SCALE_BLOCK && is_b)
                            CHECK(g.sr == ka && g.sc == 1, "%s: sb_ld %lld", what, (long long)g.sr);
                        if (mode == FP8KIT_SCALE_MX)
                            CHECK(g.gcols == K / 32 && g.blocked == (layout == FP8KIT_LAYOUT_BLOCKED),
                                  "%s: sa_sm %lld sa_sk %d", what, (long long)g.gcols, g.blocked);
                        /* the GEMM reads what quantize writes (docs/spec.md 3) */
                        fk_scale_geom q;
                        int qs = -1;
                        if (mode == FP8KIT_SCALE_ROW)
                            qs = fk_quant_scale_geom(FP8KIT_SCHEME_ROW, 0, -1, rows, K, &q);
                        else if (mode == FP8KIT_SCALE_BLOCK)
                            qs = fk_quant_scale_geom(is_b ? FP8KIT_SCHEME_BLOCK128X128 : FP8KIT_SCHEME_BLOCK1X128,
                                                     is_b ? 0 : layout, -1, rows, K, &q);
                        else if (mode == FP8KIT_SCALE_MX)
                            qs = fk_quant_scale_geom(FP8KIT_SCHEME_MX, layout, -1, rows, K, &q);
                        if (qs >= 0)
                            CHECK(qs == 0 && q.rows == g.rows && q.cols == g.cols && q.sr == g.sr && q.sc == g.sc &&
                                      q.blocked == g.blocked && q.e8m0 == g.e8m0,
                                  "%s: differs from the quantize geometry", what);
                    }
    fk_scale_geom g;
    for (int a = 0; a < NSIZES; a++)
        for (int b = 0; b < NSIZES; b++) {
            const int64_t M = SIZES[a], N = SIZES[b];
            fk_scale_geom q;
            CHECK(fk_gemm_out_scale_geom(FP8KIT_OUTQ_BLOCK1X128, M, N, &g) == 0 &&
                      fk_quant_scale_geom(FP8KIT_SCHEME_BLOCK1X128, 0, -1, M, N, &q) == 0 && g.rows == M &&
                      g.cols == ref_cdiv(N, 128) && g.sr == q.sr && !g.e8m0,
                  "OUTQ_BLOCK1X128 %lld x %lld", (long long)M, (long long)N);
            const int st = fk_gemm_out_scale_geom(FP8KIT_OUTQ_MX, M, N, &g);
            CHECK(N % 32 ? st == FK_GEO_ERR_SHAPE : st == 0 && g.rows == M && g.cols == N / 32 && g.e8m0,
                  "OUTQ_MX %lld x %lld", (long long)M, (long long)N);
        }
    CHECK(fk_gemm_out_scale_geom(FP8KIT_OUTQ_SCALED, 7, 9, &g) == 0 && g.count == 1 && !g.e8m0, "OUTQ_SCALED");
    CHECK(fk_gemm_out_scale_geom(FP8KIT_OUTQ_NONE, 7, 9, &g) == 0 && g.count == 0, "OUTQ_NONE");
    CHECK(fk_gemm_out_scale_geom(4, 7, 9, &g) == FK_GEO_ERR_ARG, "out_quant 4");
    /* 0 where the geometry allows it */
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR, 0, 0, 0, &g) == 0 && g.count == 0,
          "block mn_major 0 x 0");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED, 1, 0, 0, &g) == 0 && g.count == 0,
          "mx blocked 0 x 0");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_NONE, 0, 0, 5, 5, &g) == 0 && g.count == 0, "none");
    CHECK(fk_gemm_scale_geom(5, 0, 0, 5, 5, &g) == FK_GEO_ERR_ARG, "mode 5");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_ROW, FP8KIT_LAYOUT_BLOCKED, 0, 5, 5, &g) == FK_GEO_ERR_COMBO,
          "row blocked");
}

/* Overflow-safe sizes at the edges of int64. */
static void test_overflow(void)
{
    const int64_t MAX = INT64_MAX;
    CHECK(fk_mul_safe(MAX, 1) == MAX && fk_mul_safe(MAX, 2) == -1 && fk_mul_safe(0, MAX) == 0 &&
              fk_mul_safe(-1, 2) == -1 && fk_mul_safe((int64_t)1 << 31, (int64_t)1 << 31) == (int64_t)1 << 62 &&
              fk_mul_safe((int64_t)1 << 32, (int64_t)1 << 31) == -1,
          "fk_mul_safe");
    CHECK(fk_cdiv_safe(MAX, 128) == MAX / 128 + 1 && fk_cdiv_safe(0, 4) == 0 && fk_cdiv_safe(-5, 4) == -1 &&
              fk_cdiv_safe(MAX - 127, 128) == MAX / 128,
          "fk_cdiv_safe");
    CHECK(fk_rup_safe(MAX, 4) == -1 && fk_rup_safe(MAX - 3, 4) == MAX - 3 && fk_rup_safe(5, 4) == 8, "fk_rup_safe");
    fk_scale_geom g;
    /* mx blocked, K = 2^63 - 32: 128 rows x 4*ceil(K/32/4) overflows */
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_BLOCKED, 0, 128, MAX - 31, &g) == FK_GEO_ERR_OVERFLOW &&
              g.count == -1,
          "mx blocked count overflow");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_MX, FP8KIT_LAYOUT_PLAIN, 0, 1, MAX - 31, &g) == 0 &&
              g.count == (MAX - 31) / 32,
          "mx plain, huge K: fits");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR, 0, MAX, 1, &g) == FK_GEO_ERR_OVERFLOW &&
              g.cols == -1 && g.count == -1,
          "mn_major ld overflow");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, 0, MAX, MAX, &g) == FK_GEO_ERR_OVERFLOW &&
              g.count == -1,
          "block count overflow");
    CHECK(fk_gemm_scale_geom(FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, 1, MAX, 128, &g) == 0 &&
              g.rows == MAX / 128 + 1 && g.cols == 1 && g.count == MAX / 128 + 1,
          "B's 128x128 grid of a huge operand fits");
    CHECK(fk_quant_scale_geom(FP8KIT_SCHEME_MX, FP8KIT_LAYOUT_BLOCKED, -2, MAX - 31, MAX, &g) == FK_GEO_ERR_OVERFLOW,
          "mx axis -2 blocked overflow");
}

/* ----------------------------------------------------------- public API */
/* fp8kit_quant_shapes of 2-D, 3-D and 4-D inputs against the geometry with the
 * leading dims prepended (E experts, each padded on its own). */
static void test_quant_shapes(void)
{
    const int64_t lead[][2] = {{0, 0}, {3, 0}, {2, 4}, {1, 0}};
    const int64_t sizes[] = {1, 7, 32, 128, 130, 300};
    for (int scheme = 0; scheme <= FP8KIT_SCHEME_MX; scheme++)
        for (int layout = 0; layout <= 2; layout++)
            for (int axis = -2; axis <= -1; axis++)
                for (int li = 0; li < 4; li++)
                    for (int a = 0; a < 6; a++)
                        for (int b = 0; b < 6; b++) {
                            fp8kit_quant_desc d = fp8kit_quant_desc_default((fp8kit_scheme)scheme);
                            d.scale_layout = (fp8kit_scale_layout)layout;
                            d.axis = axis;
                            int64_t shape[4];
                            int nd = 0;
                            for (int i = 0; i < 2 && lead[li][i]; i++)
                                shape[nd++] = lead[li][i];
                            shape[nd++] = sizes[a];
                            shape[nd++] = sizes[b];
                            fp8kit_tensor x = fp8kit_tensor_make(NULL, FP8KIT_BF16, nd, shape), q, s;
                            fk_scale_geom g;
                            const int gs = fk_quant_scale_geom(scheme, layout, axis, sizes[a], sizes[b], &g);
                            const fp8kit_status st = fp8kit_quant_shapes(&d, &x, &q, &s);
                            const fp8kit_status want = gs == FK_GEO_OK            ? FP8KIT_OK
                                                       : gs == FK_GEO_ERR_SHAPE ? FP8KIT_ERR_INVALID_SHAPE
                                                                                : FP8KIT_ERR_UNSUPPORTED;
                            CHECK(st == want, "quant_shapes %s %s axis %d nd %d %lld x %lld: %s, want %s",
                                  SCHEME[scheme], LAYOUT[layout], axis, nd, (long long)sizes[a], (long long)sizes[b],
                                  fp8kit_status_string(st), fp8kit_status_string(want));
                            if (st || want)
                                continue;
                            int ok = s.dtype == (g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32);
                            if (scheme == FP8KIT_SCHEME_TENSOR) {
                                ok = ok && s.ndim == 0;
                            } else {
                                ok = ok && s.ndim == nd && s.shape[nd - 2] == g.rows && s.shape[nd - 1] == g.cols;
                                for (int i = 0; i < nd - 2; i++)
                                    ok = ok && s.shape[i] == shape[i];
                            }
                            CHECK(ok, "quant_shapes %s %s axis %d nd %d %lld x %lld: scale shape", SCHEME[scheme],
                                  LAYOUT[layout], axis, nd, (long long)sizes[a], (long long)sizes[b]);
                        }
}

static fp8kit_status query(int mode_a, int mode_b, int layout, int operand, int64_t rows, int64_t k,
                           fp8kit_dtype *dt, int64_t shape[2])
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = (fp8kit_scale_mode)mode_a;
    d.scale_b = (fp8kit_scale_mode)mode_b;
    d.scale_layout = (fp8kit_scale_layout)layout;
    return fp8kit_gemm_scale_shape(&d, operand, rows, k, dt, shape);
}

/* fp8kit_gemm_scale_shape's answers against the geometry, and against the
 * GEMM's own checks: scale tensors of the reported shape (and D's scales for
 * fused output quantization) pass fp8kit_gemm_supported on the CPU backend;
 * one element fewer is INVALID_SHAPE. */
static void test_gemm_query(fp8kit_ctx *ctx)
{
    static const int64_t mnk[][3] = {{1, 1, 32}, {7, 5, 64}, {128, 128, 128}, {130, 200, 96},
                                     {300, 64, 320}, {64, 512, 1024}, {33, 257, 4096}};
    static const int modes[][3] = {/* scale_a, scale_b, layout */
                                   {0, 0, 0}, {1, 1, 0}, {2, 2, 0}, {1, 2, 0}, {2, 0, 0}, {3, 3, 0}, {3, 3, 2}, {4, 4, 0},
                                   {4, 4, 1}};
    void *buf = calloc(1, (size_t)64 << 20);
    for (size_t i = 0; i < sizeof mnk / sizeof mnk[0]; i++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
            for (int oq = 0; oq <= FP8KIT_OUTQ_BLOCK1X128; oq++)
                for (int shrink = -1; shrink <= 2; shrink++) { /* -1 none; 0 a, 1 b, 2 d one element fewer */
                    const int64_t M = mnk[i][0], N = mnk[i][1], K = mnk[i][2];
                    fp8kit_gemm_desc d;
                    memset(&d, 0, sizeof d);
                    d.scale_a = (fp8kit_scale_mode)modes[m][0];
                    d.scale_b = (fp8kit_scale_mode)modes[m][1];
                    d.scale_layout = (fp8kit_scale_layout)modes[m][2];
                    d.out_quant = (fp8kit_out_quant)oq;
                    d.out_hp = FP8KIT_BF16;
                    fp8kit_dtype dt[3];
                    int64_t sh[3][2];
                    const int64_t rows[3] = {M, N, M}, ks[3] = {K, K, N};
                    int skip = 0;
                    for (int op = 0; op < 3; op++) {
                        const fp8kit_status st = fp8kit_gemm_scale_shape(&d, op, rows[op], ks[op], &dt[op], sh[op]);
                        if (op == 2 && oq == FP8KIT_OUTQ_MX && N % 32) {
                            CHECK(st == FP8KIT_ERR_INVALID_SHAPE, "OUTQ_MX N %lld: %s", (long long)N,
                                  fp8kit_status_string(st));
                            skip = 1;
                            continue;
                        }
                        CHECK(st == FP8KIT_OK, "query op %d modes %d/%d/%d: %s (%s)", op, modes[m][0], modes[m][1],
                              modes[m][2], fp8kit_status_string(st), fp8kit_last_error(NULL));
                        if (st)
                            return;
                        fk_scale_geom g;
                        if (op < 2)
                            fk_gemm_scale_geom(op ? d.scale_b : d.scale_a, d.scale_layout, op, rows[op], ks[op], &g);
                        else
                            fk_gemm_out_scale_geom(oq, M, N, &g);
                        CHECK(sh[op][0] == g.rows && sh[op][1] == g.cols && dt[op] == (g.e8m0 ? FP8KIT_E8M0 : FP8KIT_F32),
                              "query op %d: %lld x %lld", op, (long long)sh[op][0], (long long)sh[op][1]);
                    }
                    const int used[3] = {d.scale_a != 0, d.scale_b != 0, oq != 0};
                    if (skip || (shrink >= 0 && !used[shrink]))
                        continue;
                    /* the GEMM with those shapes (placeholder data: nothing runs) */
                    char *p = (char *)buf;
                    fp8kit_gemm_args a;
                    memset(&a, 0, sizeof a);
                    a.a = fp8kit_tensor_2d(p, FP8KIT_E4M3, M, K, K);
                    a.b = fp8kit_tensor_2d(p + ((size_t)1 << 22), FP8KIT_E4M3, N, K, K);
                    a.d = fp8kit_tensor_2d(p + ((size_t)8 << 22), oq ? FP8KIT_E4M3 : FP8KIT_F32, M, N, N);
                    a.alpha = 1.0f;
                    fp8kit_tensor *st_[3] = {&a.scale_a, &a.scale_b, &a.scale_d};
                    for (int op = 0; op < 3; op++) {
                        if (!used[op])
                            continue;
                        int64_t n = sh[op][0] * sh[op][1] - (shrink == op);
                        *st_[op] = fp8kit_tensor_make(p + ((size_t)(10 + 2 * op) << 22), dt[op], 1, &n);
                    }
                    const fp8kit_status st = fp8kit_gemm_supported(ctx, &d, &a);
                    const fp8kit_status want = shrink < 0 ? FP8KIT_OK : FP8KIT_ERR_INVALID_SHAPE;
                    CHECK(st == want, "gemm %lldx%lldx%lld modes %d/%d/%d oq %d shrink %d: %s, want %s (%s)",
                          (long long)M, (long long)N, (long long)K, modes[m][0], modes[m][1], modes[m][2], oq, shrink,
                          fp8kit_status_string(st), fp8kit_status_string(want), fp8kit_last_error(ctx));
                }
    free(buf);

    /* statuses */
    fp8kit_dtype dt;
    int64_t sh[2];
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    CHECK_STATUS(fp8kit_gemm_scale_shape(NULL, 0, 4, 4, &dt, sh), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 0, 4, 4, NULL, sh), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 0, 4, 4, &dt, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 3, 4, 4, &dt, sh), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, -1, 4, 4, &dt, sh), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(query(7, 0, 0, 0, 4, 4, &dt, sh), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(query(0, 0, 3, 0, 4, 4, &dt, sh), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(query(3, 2, 0, 0, 4, 4, &dt, sh), FP8KIT_ERR_UNSUPPORTED);  /* block on A only */
    CHECK_STATUS(query(4, 1, 0, 1, 4, 32, &dt, sh), FP8KIT_ERR_UNSUPPORTED); /* mx on A only */
    CHECK_STATUS(query(3, 3, 1, 0, 4, 4, &dt, sh), FP8KIT_ERR_UNSUPPORTED);  /* blocked with block */
    CHECK_STATUS(query(4, 4, 2, 0, 4, 32, &dt, sh), FP8KIT_ERR_UNSUPPORTED); /* mn_major with mx */
    CHECK_STATUS(query(2, 2, 2, 0, 4, 32, &dt, sh), FP8KIT_ERR_UNSUPPORTED); /* mn_major with row */
    CHECK_STATUS(query(4, 4, 0, 0, 4, 48, &dt, sh), FP8KIT_ERR_INVALID_SHAPE);
    CHECK_STATUS(query(4, 4, 1, 1, 4, 48, &dt, sh), FP8KIT_ERR_INVALID_SHAPE);
    CHECK_STATUS(query(1, 1, 0, 0, 0, 4, &dt, sh), FP8KIT_ERR_INVALID_SHAPE);
    CHECK_STATUS(query(1, 1, 0, 1, 4, 0, &dt, sh), FP8KIT_ERR_INVALID_SHAPE);
    CHECK_STATUS(query(1, 1, 0, 0, -1, 4, &dt, sh), FP8KIT_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(query(1, 1, 0, 0, 4, -4, &dt, sh), FP8KIT_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(query(4, 4, 1, 0, 128, INT64_MAX - 31, &dt, sh), FP8KIT_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(query(3, 3, 2, 0, INT64_MAX, 1, &dt, sh), FP8KIT_ERR_SIZE_OVERFLOW);
    CHECK_STATUS(query(3, 3, 0, 0, INT64_MAX, INT64_MAX, &dt, sh), FP8KIT_ERR_SIZE_OVERFLOW);
    d.out_quant = FP8KIT_OUTQ_MX;
    d.out_hp = FP8KIT_E4M3;
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 2, 4, 64, &dt, sh), FP8KIT_ERR_UNSUPPORTED); /* out_hp not hp */
    d.out_hp = FP8KIT_F16;
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 2, 4, 80, &dt, sh), FP8KIT_ERR_INVALID_SHAPE);
    CHECK(fp8kit_gemm_scale_shape(&d, 2, 4, 96, &dt, sh) == FP8KIT_OK && dt == FP8KIT_E8M0 && sh[0] == 4 && sh[1] == 3,
          "OUTQ_MX 4 x 96");
    d.out_quant = (fp8kit_out_quant)9;
    CHECK_STATUS(fp8kit_gemm_scale_shape(&d, 2, 4, 96, &dt, sh), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(query(0, 0, 0, 0, 4, 4, &dt, sh) == FP8KIT_OK && sh[0] == 0 && sh[1] == 0, "none: 0 x 0");
    CHECK(query(1, 0, 0, 0, 4, 4, &dt, sh) == FP8KIT_OK && sh[0] == 1 && sh[1] == 1 && dt == FP8KIT_F32, "tensor");
    CHECK(query(2, 0, 0, 0, 9, 4, &dt, sh) == FP8KIT_OK && sh[0] == 9 && sh[1] == 1, "row");
    CHECK(query(3, 3, 2, 0, 6, 300, &dt, sh) == FP8KIT_OK && sh[0] == 3 && sh[1] == 8, "block A mn_major 6 x 300");
    CHECK(query(3, 3, 2, 1, 300, 300, &dt, sh) == FP8KIT_OK && sh[0] == 3 && sh[1] == 3,
          "block B stays plain with mn_major");
    CHECK(query(4, 4, 1, 1, 200, 192, &dt, sh) == FP8KIT_OK && sh[0] == 256 && sh[1] == 8 && dt == FP8KIT_E8M0,
          "mx blocked 200 x 192");
    CHECK(query(4, 4, 0, 0, INT64_MAX, 32, &dt, sh) == FP8KIT_OK && sh[0] == INT64_MAX && sh[1] == 1,
          "mx plain, huge M");
}

int main(void)
{
    test_quant_geometry();
    test_gemm_geometry();
    test_overflow();
    test_quant_shapes();
    fp8kit_ctx *ctx = NULL;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx), FP8KIT_OK);
    if (ctx) {
        test_gemm_query(ctx);
        fp8kit_ctx_destroy(ctx);
    }
    return fk_test_summary("test_geometry");
}
