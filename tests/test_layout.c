/* test_layout.c - stored scale layouts of docs/spec.md 2.3 through the public API:
 * the blocked ("128x4") e8m0 layout against an independent derivation (the
 * 128x4 tiles enumerated as nested loops), zeroed padding (outputs poisoned
 * first), per-expert padding of 3-D tensors, mx axis -2 with blocked scales,
 * and the mn_major fp32 layout of block1x128 / block128x128 with its zeroed
 * padding; dequantize reads every layout back to the plain result.
 * Run: ctest -R test_layout (FK_TEST_SEED=n replays a seed). */
#include <math.h>
#include "fp8kit.h"
#include "test_util.h"
#include "format/scale.h"

static fp8kit_ctx *ctx;
static fk_rng rng;

/* Byte position of every (r, c) of an rp x cp blocked buffer, enumerated in
 * storage order: tiles of 128 rows x 4 columns in row-major tile order, each
 * tile stored as 32 lines of 16 bytes; line i holds rows i, i+32, i+64, i+96
 * (4 bytes = 4 columns each). pos has rp * cp entries, indexed r * cp + c. */
static void derive_blocked(int64_t rp, int64_t cp, int64_t *pos)
{
    int64_t p = 0;
    for (int64_t rt = 0; rt < rp / 128; rt++)
        for (int64_t ct = 0; ct < cp / 4; ct++)
            for (int64_t line = 0; line < 32; line++)
                for (int64_t quarter = 0; quarter < 4; quarter++)
                    for (int64_t cc = 0; cc < 4; cc++)
                        pos[(rt * 128 + quarter * 32 + line) * cp + ct * 4 + cc] = p++;
}

/* x (E, R, C) f32 with a random power-of-two magnitude per 32-element run and
 * per row, so neighbouring scales differ. */
static void fill(float *x, int64_t n, int64_t C)
{
    float mag = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        if (i % 32 == 0 || i % C == 0)
            mag = ldexpf(1.0f, (int)(fk_rng_u32(&rng) % 60) - 30);
        x[i] = (float)fk_rng_normal(&rng) * mag;
    }
}

static fp8kit_tensor mk(void *d, fp8kit_dtype t, int nd, int64_t E, int64_t R, int64_t C)
{
    int64_t sh[3] = {E, R, C};
    return nd == 3 ? fp8kit_tensor_make(d, t, 3, sh) : fp8kit_tensor_make(d, t, 2, sh + 1);
}

/* Quantizes x with desc into freshly allocated q and scale buffers (both
 * poisoned before the call). Returns the scale byte count via *sb. */
static void run(const fp8kit_quant_desc *d, int nd, int64_t E, int64_t R, int64_t C, float *x, uint8_t **q,
                void **s, size_t *sb, fp8kit_tensor *st_out)
{
    fp8kit_tensor xt = mk(x, FP8KIT_F32, nd, E, R, C), qt, st;
    CHECK_STATUS(fp8kit_quant_shapes(d, &xt, &qt, &st), FP8KIT_OK);
    *sb = (size_t)fp8kit_tensor_numel(&st) * fp8kit_dtype_size(st.dtype);
    *q = malloc((size_t)(E * R * C));
    *s = malloc(*sb + 1);
    fk_poison(*q, (size_t)(E * R * C));
    fk_poison(*s, *sb);
    qt.data = *q;
    st.data = *s;
    CHECK_STATUS(fp8kit_quantize(ctx, d, &xt, &qt, &st, NULL), FP8KIT_OK);
    *st_out = st;
}

static void dequant(const fp8kit_quant_desc *d, int nd, int64_t E, int64_t R, int64_t C, const uint8_t *q,
                    const void *s, float *y)
{
    fp8kit_tensor yt = mk(y, FP8KIT_F32, nd, E, R, C), qt, st;
    CHECK_STATUS(fp8kit_quant_shapes(d, &yt, &qt, &st), FP8KIT_OK);
    qt.data = (void *)q;
    st.data = (void *)s;
    CHECK_STATUS(fp8kit_dequantize(ctx, d, &qt, &st, &yt, NULL), FP8KIT_OK);
}

static void test_offset_formula(void)
{
    int64_t rps[3] = {128, 256, 384}, cps[3] = {4, 8, 20};
    long bad = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int64_t rp = rps[i], cp = cps[j];
            int64_t *pos = malloc((size_t)(rp * cp) * sizeof *pos);
            derive_blocked(rp, cp, pos);
            for (int64_t r = 0; r < rp; r++)
                for (int64_t c = 0; c < cp; c++)
                    bad += fk_blocked_offset(r, c, cp) != pos[r * cp + c];
            free(pos);
        }
    CHECK(bad == 0, "fk_blocked_offset disagrees with the nested-loop derivation at %ld places", bad);
}

/* mx blocked vs plain, axis -1 and -2, 2-D and 3-D. */
static void test_blocked(void)
{
    /* (R, C) of x; for axis -2 the scale matrix is C x R/32 */
    const int64_t Rs[] = {1, 32, 100, 128, 129, 300}, Ks[] = {1, 3, 4, 5, 9};
    for (int ax = 0; ax < 2; ax++)
        for (int nd = 2; nd <= 3; nd++)
            for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++)
                for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
                    /* rows / cols of the scale matrix */
                    int64_t srows = Rs[ri], scols = Ks[ki];
                    int64_t E = nd == 3 ? 3 : 1;
                    /* 2 threads for 3-D only: libgomp's spinning workers slow the serial checks */
                    fp8kit_ctx_set_threads(ctx, nd == 3 ? 2 : 1);
                    int64_t R = ax ? scols * 32 : srows, C = ax ? srows : scols * 32;
                    int64_t n = E * R * C;
                    float *x = malloc((size_t)n * 4);
                    fill(x, n, C);
                    fp8kit_quant_desc dp = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX), db;
                    dp.axis = ax ? -2 : -1;
                    dp.rounding = (ri + ki) & 1 ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                    db = dp;
                    db.scale_layout = FP8KIT_LAYOUT_BLOCKED;
                    uint8_t *qp, *qb;
                    void *sp, *sbuf;
                    size_t np, nb;
                    fp8kit_tensor stp, stb;
                    run(&dp, nd, E, R, C, x, &qp, &sp, &np, &stp);
                    run(&db, nd, E, R, C, x, &qb, &sbuf, &nb, &stb);
                    int64_t rp = 128 * ((srows + 127) / 128), cp = 4 * ((scols + 3) / 4);
                    CHECK(nb == (size_t)(E * rp * cp), "blocked size %zu, want %lld", nb, (long long)(E * rp * cp));
                    CHECK(stb.shape[stb.ndim - 2] == rp && stb.shape[stb.ndim - 1] == cp &&
                              (nd == 2 || stb.shape[0] == E),
                          "blocked scale shape (%lld, %lld)", (long long)stb.shape[stb.ndim - 2],
                          (long long)stb.shape[stb.ndim - 1]);
                    CHECK(memcmp(qp, qb, (size_t)n) == 0, "q differs between plain and blocked runs");
                    /* expected buffer: plain scales placed by the derivation, zeros elsewhere */
                    uint8_t *want = calloc((size_t)(E * rp * cp), 1);
                    int64_t *pos = malloc((size_t)(rp * cp) * sizeof *pos);
                    derive_blocked(rp, cp, pos);
                    for (int64_t e = 0; e < E; e++)
                        for (int64_t r = 0; r < srows; r++)
                            for (int64_t c = 0; c < scols; c++)
                                want[e * rp * cp + pos[r * cp + c]] = ((uint8_t *)sp)[(e * srows + r) * scols + c];
                    long bad = 0, badpad = 0;
                    for (int64_t i = 0; i < E * rp * cp; i++) {
                        if (((uint8_t *)sbuf)[i] != want[i]) {
                            bad++;
                            int64_t e = i / (rp * cp), k = i % (rp * cp);
                            /* is k a padding byte? */
                            for (int64_t rc = 0; rc < rp * cp; rc++)
                                if (pos[rc] == k) {
                                    badpad += rc / cp >= srows || rc % cp >= scols;
                                    break;
                                }
                            (void)e;
                        }
                    }
                    CHECK(bad == 0, "blocked axis %d nd %d scales %lldx%lld: %ld wrong bytes (%ld of them padding)",
                          dp.axis, nd, (long long)srows, (long long)scols, bad, badpad);
                    /* dequantize from blocked == from plain */
                    float *yp = malloc((size_t)n * 4), *yb = malloc((size_t)n * 4);
                    dequant(&dp, nd, E, R, C, qp, sp, yp);
                    dequant(&db, nd, E, R, C, qb, sbuf, yb);
                    CHECK(memcmp(yp, yb, (size_t)n * 4) == 0, "dequantize from blocked != from plain (axis %d)", dp.axis);
                    free(x); free(qp); free(qb); free(sp); free(sbuf); free(want); free(pos); free(yp); free(yb);
                }
}

/* block1x128 / block128x128 mn_major vs plain. */
static void test_mn_major(void)
{
    const int64_t shapes[][2] = {{1, 100}, {5, 128}, {130, 300}, {257, 129}, {520, 200}, {4, 1000}};
    for (int sc = FP8KIT_SCHEME_BLOCK1X128; sc <= FP8KIT_SCHEME_BLOCK128X128; sc++)
        for (int nd = 2; nd <= 3; nd++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                int64_t E = nd == 3 ? 2 : 1, R = shapes[si][0], C = shapes[si][1], n = E * R * C;
                fp8kit_ctx_set_threads(ctx, nd == 3 ? 2 : 1);
                float *x = malloc((size_t)n * 4);
                fill(x, n, C);
                fp8kit_quant_desc dp = fp8kit_quant_desc_default((fp8kit_scheme)sc), dm;
                dp.pow2 = (int)(si & 1);
                dm = dp;
                dm.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
                uint8_t *qp, *qm;
                void *sp, *sm;
                size_t np, nm;
                fp8kit_tensor stp, stm;
                run(&dp, nd, E, R, C, x, &qp, &sp, &np, &stp);
                run(&dm, nd, E, R, C, x, &qm, &sm, &nm, &stm);
                /* plain: rows x nb per expert; mn_major: nb x ld, ld = rows rounded up to 4 */
                int64_t rows = sc == FP8KIT_SCHEME_BLOCK1X128 ? R : (R + 127) / 128, nb = (C + 127) / 128;
                int64_t ld = (rows + 3) / 4 * 4;
                CHECK(nm == (size_t)(E * nb * ld) * 4, "mn_major bytes %zu, want %lld", nm, (long long)(E * nb * ld * 4));
                CHECK(stm.shape[stm.ndim - 2] == nb && stm.shape[stm.ndim - 1] == ld, "mn_major shape (%lld, %lld)",
                      (long long)stm.shape[stm.ndim - 2], (long long)stm.shape[stm.ndim - 1]);
                CHECK(memcmp(qp, qm, (size_t)n) == 0, "q differs between plain and mn_major runs");
                long bad = 0, badpad = 0;
                const float *P = (const float *)sp, *M = (const float *)sm;
                for (int64_t e = 0; e < E; e++)
                    for (int64_t b = 0; b < nb; b++)
                        for (int64_t j = 0; j < ld; j++) {
                            uint32_t got = fk_t_f2u(M[(e * nb + b) * ld + j]);
                            uint32_t want = j < rows ? fk_t_f2u(P[(e * rows + j) * nb + b]) : 0u;
                            if (got != want) {
                                bad++;
                                badpad += j >= rows;
                            }
                        }
                CHECK(bad == 0, "mn_major scheme %d nd %d %lldx%lld: %ld wrong entries (%ld padding)", sc, nd,
                      (long long)R, (long long)C, bad, badpad);
                float *yp = malloc((size_t)n * 4), *ym = malloc((size_t)n * 4);
                dequant(&dp, nd, E, R, C, qp, sp, yp);
                dequant(&dm, nd, E, R, C, qm, sm, ym);
                CHECK(memcmp(yp, ym, (size_t)n * 4) == 0, "dequantize from mn_major != from plain");
                free(x); free(qp); free(qm); free(sp); free(sm); free(yp); free(ym);
            }
}

int main(void)
{
    rng = fk_rng_seeded("test_layout");
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &ctx) != FP8KIT_OK) {
        fprintf(stderr, "cannot create a CPU context\n");
        return 1;
    }
    test_offset_formula();
    test_blocked();
    test_mn_major();
    fp8kit_ctx_destroy(ctx);
    return fk_test_summary("test_layout");
}
