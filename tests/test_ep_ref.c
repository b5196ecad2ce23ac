/* test_ep_ref.c - the expert-parallel layer on the CPU (include/fp8kit_ep.h,
 * docs/ep.md): (1) the CPU reference (src/ep/ep_ref.c, the oracle of
 * tests/ep_multi_gpu.c) on random routings - uniform, skewed, tokens with
 * fewer than top_k experts, repeated and invalid ids, experts that get no
 * token, everything to one rank - for 1 to 4 ranks, T from 0 to max_tokens,
 * block1x128 (plain and mn_major scales) and MX: each row checked against
 * that token quantized alone, the order, the counts, the padding, the status;
 * the combine against exact sums and against fp64; (2) the received layout
 * fed to fp8kit_grouped_gemm (masked) on the CPU backend, each row against a
 * dense fp8kit_gemm of its source token; (3) the API's checks: the config
 * rules (fp8kit_ep_buffer_size), fp8kit_ep_create refusing a CPU context,
 * NULL arguments, and the dispatch / combine argument rules (ep_check.c).
 * FK_TEST_SEED=n replays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit_ep.h"
#include "test_util.h"
#include "ep_test_util.h"
#include "ep/ep_impl.h"

static fk_rng rng;
static fp8kit_ctx *cpu;

static fp8kit_ep_config cfg_make(int64_t E, int64_t H, int64_t k, int64_t mt, int mx, int layout)
{
    fp8kit_ep_config c;
    memset(&c, 0, sizeof c);
    c.num_experts = E;
    c.hidden = H;
    c.top_k = k;
    c.max_tokens = mt;
    c.fp8 = FP8KIT_E4M3;
    c.mx = mx;
    c.scale_layout = (fp8kit_scale_layout)layout;
    return c;
}

/* ------------------------------------------------------------ the reference's layout */

/* Token (r, i) quantized on its own: codes q (H) and scale bytes s (H / 32). */
static void quant_row(const fp8kit_ep_config *cfg, const uint16_t *x, uint8_t *q, uint8_t *s)
{
    const int64_t H = cfg->hidden;
    fp8kit_quant_desc d = fp8kit_quant_desc_default(cfg->mx ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK1X128);
    d.elem = cfg->fp8;
    d.rounding = cfg->mx ? cfg->rounding : FP8KIT_ROUND_FLOOR;
    d.pow2 = cfg->mx ? 0 : cfg->pow2;
    fp8kit_tensor xt = fp8kit_tensor_2d((void *)x, FP8KIT_BF16, 1, H, H);
    fp8kit_tensor qt = fp8kit_tensor_2d(q, cfg->fp8, 1, H, H);
    fp8kit_tensor st = cfg->mx ? fp8kit_tensor_2d(s, FP8KIT_E8M0, 1, H / 32, H / 32)
                               : fp8kit_tensor_2d(s, FP8KIT_F32, 1, H / 128, H / 128);
    CHECK_STATUS(fp8kit_quantize(cpu, &d, &xt, &qt, &st, NULL), FP8KIT_OK);
}

static int lists(const fp8kit_ep_config *cfg, const int32_t *ids, int32_t g)
{
    for (int64_t j = 0; j < cfg->top_k; j++)
        if (ids[j] == g && g >= 0 && g < cfg->num_experts)
            return 1;
    return 0;
}

/* The dispatch result of every rank, checked from first principles. */
static void check_layout(const char *what, const fp8kit_ep_config *cfg, int world, const ep_t_inputs *c,
                         const fk_ep_ref_rank *res)
{
    const int64_t E = cfg->num_experts, H = cfg->hidden, k = cfg->top_k, mt = cfg->max_tokens;
    const int64_t el = E / world, m = world * mt, sb = H / 32, nbf = H / 128, mp4 = (m + 3) / 4 * 4;
    const int mn = cfg->scale_layout == FP8KIT_LAYOUT_MN_MAJOR;
    uint8_t q[4096], s[4096 / 32];
    int64_t rows_total = 0, pairs = 0;
    for (int r = 0; r < world; r++) { /* the distinct (token, valid expert) pairs, and the status */
        int bad = 0;
        for (int64_t i = 0; i < c->in[r].t; i++)
            for (int64_t j = 0; j < k; j++) {
                const int32_t g = c->ids[r][i * k + j];
                bad |= g < -1 || g >= E;
                if (g >= 0 && g < E) {
                    int first = 1;
                    for (int64_t j2 = 0; j2 < j; j2++)
                        first &= c->ids[r][i * k + j2] != g;
                    pairs += first;
                }
            }
        CHECK(res[r].status == (bad ? FP8KIT_ERR_INVALID_ARGUMENT : 0), "%s: rank %d status %d, want %d", what, r,
              res[r].status, bad ? FP8KIT_ERR_INVALID_ARGUMENT : 0);
    }
    for (int p = 0; p < world; p++) {
        const fk_ep_ref_rank *o = &res[p];
        CHECK(o->el == el && o->m == m, "%s: rank %d geometry el %lld m %lld", what, p, (long long)o->el,
              (long long)o->m);
        for (int64_t e = 0; e < el; e++) {
            const int32_t g = (int32_t)(p * el + e);
            int64_t want = 0;
            for (int r = 0; r < world; r++)
                for (int64_t i = 0; i < c->in[r].t; i++)
                    want += lists(cfg, c->ids[r] + i * k, g);
            CHECK(o->counts[e] == want, "%s: rank %d expert %lld: count %d, want %lld", what, p, (long long)e,
                  o->counts[e], (long long)want);
            rows_total += o->counts[e];
            int32_t prev = -1;
            for (int64_t row = 0; row < m; row++) {
                const int64_t at = e * m + row;
                const int32_t src = o->src[at];
                if (row >= o->counts[e]) { /* padding: untouched zeros */
                    int zero = src == -1;
                    for (int64_t h = 0; h < H; h++)
                        zero &= o->x[at * H + h] == 0;
                    CHECK(zero, "%s: rank %d expert %lld row %lld past the count is not empty", what, p, (long long)e,
                          (long long)row);
                    continue;
                }
                const int r = src / (int32_t)mt;
                const int64_t i = src % mt;
                CHECK(src > prev, "%s: rank %d expert %lld row %lld: source %d after %d (order)", what, p,
                      (long long)e, (long long)row, src, prev);
                prev = src;
                if (!(r < world && i < c->in[r].t && lists(cfg, c->ids[r] + i * k, g))) {
                    CHECK(0, "%s: rank %d expert %lld row %lld: source %d does not route there", what, p, (long long)e,
                          (long long)row, src);
                    continue;
                }
                quant_row(cfg, c->x[r] + i * H, q, s);
                CHECK(memcmp(o->x + at * H, q, (size_t)H) == 0, "%s: rank %d expert %lld row %lld: codes differ", what,
                      p, (long long)e, (long long)row);
                int same = 1;
                for (int64_t b = 0; b < (mn ? nbf : sb); b++) {
                    if (mn)
                        same &= memcmp((const uint8_t *)o->scale + ((e * nbf + b) * mp4 + row) * 4, s + b * 4, 4) == 0;
                    else
                        same &= ((const uint8_t *)o->scale)[at * sb + b] == s[b];
                }
                CHECK(same, "%s: rank %d expert %lld row %lld: scales differ", what, p, (long long)e, (long long)row);
            }
        }
    }
    CHECK(rows_total == pairs, "%s: %lld rows in all, want %lld (token, expert) pairs", what, (long long)rows_total,
          (long long)pairs);
}

/* Combine with y rows that say which expert and token they are (small
 * integers) and weights that are powers of two: every product and sum is
 * exact, so the expected bf16 is that of the exact sum; NaN rows past the
 * counts would show if read. */
static void check_combine_exact(const char *what, const fp8kit_ep_config *cfg, int world, const ep_t_inputs *c,
                                fk_ep_ref_rank *res)
{
    const int64_t E = cfg->num_experts, H = cfg->hidden, k = cfg->top_k, mt = cfg->max_tokens;
    uint16_t **y = (uint16_t **)calloc((size_t)world, sizeof *y);
    float **w = (float **)calloc((size_t)world, sizeof *w);
    fk_ep_ref_in *in = (fk_ep_ref_in *)calloc((size_t)world, sizeof *in);
    for (int p = 0; p < world; p++) {
        const int64_t el = res[p].el, m = res[p].m;
        y[p] = (uint16_t *)malloc((size_t)(el * m * H) * 2);
        for (int64_t e = 0; e < el; e++)
            for (int64_t row = 0; row < m; row++) {
                const int32_t src = res[p].src[e * m + row];
                for (int64_t h = 0; h < H; h++) {
                    const float v = (float)((p * el + e) % 16 + (src % (int32_t)mt) % 7 + src / (int32_t)mt + h % 5);
                    y[p][(e * m + row) * H + h] = row < res[p].counts[e] ? fk_f32_to_bf16(v) : (uint16_t)0x7FC0;
                }
            }
    }
    for (int r = 0; r < world; r++) {
        in[r] = c->in[r];
        w[r] = (float *)malloc((size_t)(c->in[r].t * k) * 4 + 4);
        for (int64_t j = 0; j < c->in[r].t * k; j++)
            w[r][j] = ldexpf(fk_rng_u32(&rng) & 1 ? 1.0f : -1.0f, (int)(fk_rng_u32(&rng) % 5) - 2);
        in[r].w = w[r];
    }
    CHECK_STATUS(fk_ep_ref_combine(cpu, cfg, world, in, (const uint16_t *const *)y, res), FP8KIT_OK);
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < c->in[r].t; i++) {
            int ok = 1;
            for (int64_t h = 0; h < H && ok; h++) {
                double sum = 0;
                for (int64_t j = 0; j < k; j++) {
                    const int32_t g = c->ids[r][i * k + j];
                    if (g < 0 || g >= E)
                        continue;
                    const double v = (double)(g % 16 + i % 7 + r + h % 5);
                    sum += w[r][i * k + j] * v;
                }
                ok = res[r].out[i * H + h] == fk_f32_to_bf16((float)sum);
                CHECK(ok, "%s: rank %d token %lld col %lld: out 0x%04x, want bf16(%g)", what, r, (long long)i,
                      (long long)h, res[r].out[i * H + h], sum);
            }
        }
    for (int p = 0; p < world; p++) {
        free(y[p]);
        free(w[p]);
    }
    free(y);
    free(w);
    free(in);
}

/* Combine with random y and weights against fp64: one bf16 rounding plus
 * the fp32 sum's error. */
static void check_combine_random(const char *what, const fp8kit_ep_config *cfg, int world, const ep_t_inputs *c,
                                 fk_ep_ref_rank *res)
{
    const int64_t E = cfg->num_experts, H = cfg->hidden, k = cfg->top_k, el = E / world;
    uint16_t **y = ep_t_make_y(&rng, cfg, world, res);
    CHECK_STATUS(fk_ep_ref_combine(cpu, cfg, world, c->in, (const uint16_t *const *)y, res), FP8KIT_OK);
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < c->in[r].t; i++)
            for (int64_t h = 0; h < H; h++) {
                double sum = 0, mag = 0;
                for (int64_t j = 0; j < k; j++) {
                    const int32_t g = c->ids[r][i * k + j];
                    if (g < 0 || g >= E)
                        continue;
                    const fk_ep_ref_rank *p = &res[g / el];
                    int64_t row = -1;
                    for (int64_t q = 0; q < p->counts[g % el]; q++)
                        if (p->src[(g % el) * p->m + q] == (int32_t)(r * cfg->max_tokens + i))
                            row = q;
                    if (row < 0)
                        continue; /* check_layout reports it */
                    const double v = fk_bf16_to_f32(y[g / el][((g % el) * p->m + row) * H + h]);
                    sum += c->w[r][i * k + j] * v;
                    mag += fabs(c->w[r][i * k + j] * v);
                }
                const double got = fk_bf16_to_f32(res[r].out[i * H + h]);
                const double tol = fabs(sum) * 0x1p-8 + mag * (double)k * 0x1p-23 + 1e-30;
                if (!(fabs(got - sum) <= tol)) {
                    CHECK(0, "%s: rank %d token %lld col %lld: out %g, fp64 %g", what, r, (long long)i, (long long)h,
                          got, sum);
                    h = H;
                }
            }
    ep_t_free_y(y, world);
}

static void layout_cases(void)
{
    static const int worlds[] = {1, 2, 3, 4};
    long cases = 0;
    for (int wi = 0; wi < 4; wi++)
        for (int rep = 0; rep < 12; rep++) {
            const int world = worlds[wi];
            const int64_t el = 1 + (int64_t)(fk_rng_u32(&rng) % 5);
            const int64_t E = el * world;
            const int64_t kmax = E < 8 ? E : 8;
            const int64_t k = 1 + (int64_t)(fk_rng_u32(&rng) % (uint32_t)kmax);
            const int64_t H = 128 * (1 + (int64_t)(fk_rng_u32(&rng) % 3));
            static const int64_t mts[] = {1, 3, 16, 37};
            const int64_t mt = mts[fk_rng_u32(&rng) % 4];
            const int mode = (int)(fk_rng_u32(&rng) % 3); /* block plain, block mn_major, mx */
            fp8kit_ep_config cfg = cfg_make(E, H, k, mt, mode == 2, mode == 1 ? FP8KIT_LAYOUT_MN_MAJOR : 0);
            cfg.fp8 = fk_rng_u32(&rng) & 1 ? FP8KIT_E5M2 : FP8KIT_E4M3;
            if (cfg.mx && (fk_rng_u32(&rng) & 1))
                cfg.rounding = FP8KIT_ROUND_RCEIL;
            if (!cfg.mx && (fk_rng_u32(&rng) & 1))
                cfg.pow2 = 1;
            const int route = (int)((rep + wi) % EP_ROUTE_COUNT);
            int64_t t[4];
            for (int r = 0; r < world; r++) /* 1, max_tokens, 0 and random counts */
                t[r] = r == 0 ? (rep % 3 == 0 ? 1 : mt) : (int64_t)(fk_rng_u32(&rng) % (uint32_t)(mt + 1));
            char what[160];
            snprintf(what, sizeof what, "W=%d E=%lld k=%lld H=%lld mt=%lld %s %s %s", world, (long long)E,
                     (long long)k, (long long)H, (long long)mt, mode == 2 ? "mx" : "1x128",
                     mode == 1 ? "mn_major" : "plain", ep_route_names[route]);
            ep_t_inputs c;
            if (ep_t_make(&c, &cfg, world, t, route, &rng)) {
                CHECK(0, "%s: out of memory", what);
                return;
            }
            fk_ep_ref_rank res[4];
            CHECK_STATUS(fk_ep_ref_dispatch(cpu, &cfg, world, c.in, res), FP8KIT_OK);
            check_layout(what, &cfg, world, &c, res);
            check_combine_exact(what, &cfg, world, &c, res);
            check_combine_random(what, &cfg, world, &c, res);
            fk_ep_ref_free(res, world);
            ep_t_free(&c);
            cases++;
        }
    printf("test_ep_ref: %ld reference cases\n", cases);
}

/* ------------------------------------------------ the recv layout in the grouped GEMM */

/* Rank 0's received layout as fp8kit_grouped_gemm's masked A against random
 * experts B (el, N, H): each valid row against a dense fp8kit_gemm of its
 * source token's own codes and scales. */
static void grouped_case(int mode)
{
    const int world = 2;
    const int64_t E = 6, H = 256, k = 3, mt = 9, N = 128, el = E / world, m = world * mt;
    fp8kit_ep_config cfg = cfg_make(E, H, k, mt, mode == 2, mode == 1 ? FP8KIT_LAYOUT_MN_MAJOR : 0);
    const int64_t t[2] = {mt, 5};
    ep_t_inputs c;
    if (ep_t_make(&c, &cfg, world, t, EP_ROUTE_SKEWED, &rng))
        return;
    fk_ep_ref_rank res[2];
    CHECK_STATUS(fk_ep_ref_dispatch(cpu, &cfg, world, c.in, res), FP8KIT_OK);
    /* experts: (el, N, H) f32 -> fp8 with 128x128 (block) or MX scales */
    float *bf = (float *)malloc(sizeof(float) * (size_t)(el * N * H));
    uint8_t *bq = (uint8_t *)malloc((size_t)(el * N * H));
    float *bs = (float *)malloc(sizeof(float) * (size_t)(el * N * H / 32));
    float *d = (float *)malloc(sizeof(float) * (size_t)(el * m * N));
    float *dd = (float *)malloc(sizeof(float) * (size_t)N);
    for (int64_t i = 0; i < el * N * H; i++)
        bf[i] = (float)fk_rng_normal(&rng);
    const int64_t bshape[3] = {el, N, H};
    fp8kit_tensor bx = fp8kit_tensor_make(bf, FP8KIT_F32, 3, bshape);
    fp8kit_tensor bt = fp8kit_tensor_make(bq, FP8KIT_E4M3, 3, bshape);
    fp8kit_quant_desc qd = fp8kit_quant_desc_default(mode == 2 ? FP8KIT_SCHEME_MX : FP8KIT_SCHEME_BLOCK128X128);
    fp8kit_tensor bst, tmp;
    CHECK_STATUS(fp8kit_quant_shapes(&qd, &bx, &tmp, &bst), FP8KIT_OK);
    bst.data = bs;
    CHECK_STATUS(fp8kit_quantize(cpu, &qd, &bx, &bt, &bst, NULL), FP8KIT_OK);

    fp8kit_gemm_desc gd;
    memset(&gd, 0, sizeof gd);
    gd.scale_a = gd.scale_b = mode == 2 ? FP8KIT_SCALE_MX : FP8KIT_SCALE_BLOCK;
    gd.scale_layout = mode == 1 ? FP8KIT_LAYOUT_MN_MAJOR : FP8KIT_LAYOUT_PLAIN;
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    const int64_t ashape[3] = {el, m, H}, dshape[3] = {el, m, N};
    ga.a = fp8kit_tensor_make(res[0].x, cfg.fp8, 3, ashape);
    const int64_t scount = (int64_t)(res[0].scale_bytes / (mode == 2 ? 1 : 4));
    ga.scale_a = fp8kit_tensor_make(res[0].scale, mode == 2 ? FP8KIT_E8M0 : FP8KIT_F32, 1, &scount);
    ga.b = bt;
    ga.scale_b = bst;
    ga.offsets = res[0].counts;
    ga.alpha = 1.0f;
    ga.d = fp8kit_tensor_make(d, FP8KIT_F32, 3, dshape);
    ga.layout = FP8KIT_GROUPED_MASKED;
    CHECK_STATUS(fp8kit_grouped_gemm(cpu, &gd, &ga, NULL), FP8KIT_OK);

    fp8kit_gemm_desc dg = gd;
    dg.scale_layout = FP8KIT_LAYOUT_PLAIN;
    const int64_t kb = mode == 2 ? H / 32 : H / 128, nb = mode == 2 ? N : N / 128;
    long rows = 0;
    for (int64_t e = 0; e < el; e++)
        for (int64_t row = 0; row < res[0].counts[e]; row++) {
            const int32_t src = res[0].src[e * m + row];
            const int r = src / (int32_t)mt;
            const int64_t i = src % mt;
            fp8kit_gemm_args a;
            memset(&a, 0, sizeof a);
            a.a = fp8kit_tensor_2d(res[r].q + i * H, cfg.fp8, 1, H, H);
            a.scale_a = fp8kit_tensor_2d(res[r].qs + i * (H / 32), mode == 2 ? FP8KIT_E8M0 : FP8KIT_F32, 1, kb, kb);
            a.b = fp8kit_tensor_2d(bq + e * N * H, FP8KIT_E4M3, N, H, H);
            a.scale_b = fp8kit_tensor_2d(mode == 2 ? (void *)((uint8_t *)bs + e * N * kb) : (void *)(bs + e * nb * kb),
                                         mode == 2 ? FP8KIT_E8M0 : FP8KIT_F32, nb, kb, kb);
            a.alpha = 1.0f;
            a.d = fp8kit_tensor_2d(dd, FP8KIT_F32, 1, N, N);
            CHECK_STATUS(fp8kit_gemm(cpu, &dg, &a, NULL), FP8KIT_OK);
            double err = 0, ref = 0;
            for (int64_t n = 0; n < N; n++) {
                const double g = d[(e * m + row) * N + n];
                err += (g - dd[n]) * (g - dd[n]);
                ref += (double)dd[n] * dd[n];
            }
            CHECK(err <= 1e-12 * ref, "grouped %d: expert %lld row %lld (rank %d token %lld): rel %g", mode,
                  (long long)e, (long long)row, r, (long long)i, sqrt(err / (ref + 1e-300)));
            rows++;
        }
    CHECK(rows > 0, "grouped %d: no rows", mode);
    free(bf);
    free(bq);
    free(bs);
    free(d);
    free(dd);
    fk_ep_ref_free(res, world);
    ep_t_free(&c);
}

/* ------------------------------------------------------------------ the API's checks */

static void config_checks(void)
{
    const fp8kit_ep_config good = cfg_make(8, 256, 2, 16, 0, 0);
    size_t bytes = 0, good_bytes = 0;
    CHECK_STATUS(fp8kit_ep_buffer_size(&good, 2, &good_bytes), FP8KIT_OK);
    bytes = good_bytes;
    /* at least every section: chunks, A and its scales, the slots, the return chunks */
    const size_t want = (size_t)(3 * (16 * (256 + 8 + 8)) + 4 * 32 * (256 + 8) + 4 * 32 * 4 + 4 * 16 * 2 * 256 * 2);
    CHECK(bytes >= want && bytes < want + 64 * 1024, "buffer size %zu, want about %zu", bytes, want);
    CHECK_STATUS(fp8kit_ep_buffer_size(&good, 2, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_buffer_size(NULL, 2, &bytes), FP8KIT_ERR_NULL_POINTER);
    struct {
        const char *what;
        fp8kit_status want;
        int64_t world;
        fp8kit_ep_config c;
    } bad[32];
    int n = 0;
#define BAD(w, st, wld, ...)                                   \
    do {                                                       \
        bad[n].what = w, bad[n].want = st, bad[n].world = wld; \
        bad[n].c = good;                                       \
        fp8kit_ep_config *c = &bad[n].c;                       \
        __VA_ARGS__;                                           \
        n++;                                                   \
    } while (0)
    BAD("E 0", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->num_experts = 0);
    BAD("E 2^31", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->num_experts = (int64_t)1 << 31);
    BAD("H 100", FP8KIT_ERR_INVALID_SHAPE, 1, c->hidden = 100);
    BAD("H 0", FP8KIT_ERR_INVALID_SHAPE, 1, c->hidden = 0);
    BAD("H -128", FP8KIT_ERR_INVALID_SHAPE, 1, c->hidden = -128);
    BAD("top_k 0", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->top_k = 0);
    BAD("top_k > E", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->top_k = 9);
    BAD("top_k 65", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->num_experts = 128, c->top_k = 65);
    BAD("max_tokens 0", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->max_tokens = 0);
    BAD("max_tokens -1", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->max_tokens = -1);
    BAD("fp8 f32", FP8KIT_ERR_UNSUPPORTED, 1, c->fp8 = FP8KIT_F32);
    BAD("fp8 e8m0", FP8KIT_ERR_UNSUPPORTED, 1, c->fp8 = FP8KIT_E8M0);
    BAD("fp8 99", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->fp8 = (fp8kit_dtype)99);
    BAD("mx 2", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->mx = 2);
    BAD("rceil without mx", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->rounding = FP8KIT_ROUND_RCEIL);
    BAD("rounding 7", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->mx = 1, c->rounding = (fp8kit_rounding)7);
    BAD("pow2 with mx", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->mx = 1, c->pow2 = 1);
    BAD("pow2 2", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->pow2 = 2);
    BAD("mn_major with mx", FP8KIT_ERR_UNSUPPORTED, 1, c->mx = 1, c->scale_layout = FP8KIT_LAYOUT_MN_MAJOR);
    BAD("blocked", FP8KIT_ERR_UNSUPPORTED, 1, c->scale_layout = FP8KIT_LAYOUT_BLOCKED);
    BAD("layout 9", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->scale_layout = (fp8kit_scale_layout)9);
    BAD("E % world", FP8KIT_ERR_INVALID_ARGUMENT, 3, (void)c);
    BAD("world 0", FP8KIT_ERR_INVALID_ARGUMENT, 0, (void)c);
    BAD("rows 2^31", FP8KIT_ERR_SIZE_OVERFLOW, 8, c->max_tokens = (int64_t)1 << 30);
    BAD("transport 2", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->transport = (fp8kit_ep_transport)2);
    BAD("nccl_ep H 256", FP8KIT_ERR_UNSUPPORTED, 1, c->transport = FP8KIT_EP_TRANSPORT_NCCL_EP);
    BAD("mode 2", FP8KIT_ERR_INVALID_ARGUMENT, 1, c->mode = (fp8kit_ep_mode)2);
    BAD("high throughput E/W 2", FP8KIT_ERR_UNSUPPORTED, 4, c->hidden = 512, c->transport = FP8KIT_EP_TRANSPORT_NCCL_EP,
        c->mode = FP8KIT_EP_HIGH_THROUGHPUT);
    BAD("high throughput max_tokens 18", FP8KIT_ERR_UNSUPPORTED, 1, c->hidden = 512, c->max_tokens = 18,
        c->transport = FP8KIT_EP_TRANSPORT_NCCL_EP, c->mode = FP8KIT_EP_HIGH_THROUGHPUT);
#undef BAD
    for (int i = 0; i < n; i++) {
        bytes = 12345;
        fp8kit_status st = fp8kit_ep_buffer_size(&bad[i].c, bad[i].world, &bytes);
        CHECK(st == bad[i].want && bytes == 12345, "buffer_size(%s): %s (%s), want %s, bytes %zu", bad[i].what,
              fp8kit_status_string(st), fp8kit_last_error(NULL), fp8kit_status_string(bad[i].want), bytes);
    }
    /* the mn_major rows are padded to 4, the mx scales are bytes */
    fp8kit_ep_config mn = good, mx = good;
    mn.scale_layout = FP8KIT_LAYOUT_MN_MAJOR;
    mx.mx = 1;
    size_t bm = 0, bx = 0;
    CHECK_STATUS(fp8kit_ep_buffer_size(&mn, 2, &bm), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ep_buffer_size(&mx, 2, &bx), FP8KIT_OK);
    CHECK(bm == good_bytes, "mn_major size %zu, plain %zu (M = 32 needs no padding)", bm, good_bytes);
    CHECK(bx == good_bytes, "mx size %zu, 1x128 %zu (both H / 32 scale bytes per token)", bx, good_bytes);
    /* NCCL EP keeps no chunks of ours; its high-throughput layout has R = W x max_tokens x min(top_k, E / W)
     * rows (here 2 x 16 x 2 = 64 of the masked layout's 4 x 32 = 128) */
    fp8kit_ep_config ne = good, ht;
    ne.hidden = 512;
    ne.transport = FP8KIT_EP_TRANSPORT_NCCL_EP;
    ht = ne;
    ht.mode = FP8KIT_EP_HIGH_THROUGHPUT;
    fp8kit_ep_config nl = good;
    nl.hidden = 512;
    size_t bn = 0, bl = 0, bh = 0;
    CHECK_STATUS(fp8kit_ep_buffer_size(&nl, 2, &bl), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ep_buffer_size(&ne, 2, &bn), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ep_buffer_size(&ht, 2, &bh), FP8KIT_OK);
    CHECK(bn < bl, "nccl_ep buffers %zu, nccl %zu", bn, bl);
    const size_t ht_min = (size_t)64 * 512 * (1 + 2) + (size_t)64 * 16; /* x, y weighted, scales */
    CHECK(bh >= ht_min && bh < ht_min + 64 * 1024, "high-throughput buffers %zu, want about %zu", bh, ht_min);
    fk_ep_geom g;
    CHECK_STATUS(fk_ep_geometry(NULL, "test", &ht, 2, 1, &g), FP8KIT_OK);
    CHECK(g.rows == 64, "high-throughput rows %lld, want 64", (long long)g.rows);
    /* the NCCL transport's high-throughput mode: its chunks and the contiguous layout, no NCCL EP rule on E / W
     * or max_tokens */
    fp8kit_ep_config hn = good;
    hn.mode = FP8KIT_EP_HIGH_THROUGHPUT;
    hn.max_tokens = 18;
    size_t bhn = 0;
    CHECK_STATUS(fp8kit_ep_buffer_size(&hn, 4, &bhn), FP8KIT_OK);
    fk_ep_geom gn;
    CHECK_STATUS(fk_ep_geometry(NULL, "test", &hn, 4, 0, &gn), FP8KIT_OK);
    CHECK(gn.rows == 4 * 18 * 2 && gn.chunk > 0 && gn.ret_chunk > 0, "nccl high throughput: rows %lld",
          (long long)gn.rows);
    /* its combine takes y (R, H), contiguous; the masked shape is refused */
    const fp8kit_ctx *cc = cpu;
    unsigned char *base = (unsigned char *)malloc(g.total);
    uint16_t *yb = (uint16_t *)malloc((size_t)64 * 600 * 2), *ob = (uint16_t *)malloc((size_t)16 * 512 * 2);
    fp8kit_tensor y2 = fp8kit_tensor_2d(yb, FP8KIT_BF16, 64, 512, 512), out = fp8kit_tensor_2d(ob, FP8KIT_BF16, 5, 512, 512);
    CHECK_STATUS(fk_ep_check_combine(cc, &ht, &g, base, 5, &y2, &out), FP8KIT_OK);
    fp8kit_tensor ys = fp8kit_tensor_2d(yb, FP8KIT_BF16, 64, 512, 600);
    CHECK_STATUS(fk_ep_check_combine(cc, &ht, &g, base, 5, &ys, &out), FP8KIT_ERR_UNSUPPORTED);
    const int64_t y3s[3] = {2, 32, 512};
    fp8kit_tensor y3 = fp8kit_tensor_make(yb, FP8KIT_BF16, 3, y3s);
    CHECK_STATUS(fk_ep_check_combine(cc, &ht, &g, base, 5, &y3, &out), FP8KIT_ERR_INVALID_SHAPE);
    fp8kit_tensor os = fp8kit_tensor_2d(ob, FP8KIT_BF16, 5, 512, 520);
    CHECK_STATUS(fk_ep_check_combine(cc, &ht, &g, base, 5, &y2, &os), FP8KIT_ERR_UNSUPPORTED);
    free(base), free(yb), free(ob);
}

static void api_checks(void)
{
    fp8kit_ep_config cfg = cfg_make(8, 256, 2, 16, 0, 0);
    fp8kit_ep *ep = (fp8kit_ep *)(uintptr_t)0x1234;
    void *comm = (void *)(uintptr_t)0x5678; /* never used: the checks come first */
    CHECK_STATUS(fp8kit_ep_create(NULL, comm, &cfg, &ep), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_create(cpu, NULL, &cfg, &ep), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_create(cpu, comm, NULL, &ep), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_create(cpu, comm, &cfg, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_create(cpu, comm, &cfg, &ep), FP8KIT_ERR_UNSUPPORTED);
    CHECK(strstr(fp8kit_last_error(cpu), "CUDA backend") != NULL, "create on a CPU context: '%s'",
          fp8kit_last_error(cpu));
    CHECK(ep == (fp8kit_ep *)(uintptr_t)0x1234, "create wrote *out on failure");
    fp8kit_ep_recv recv;
    CHECK_STATUS(fp8kit_ep_dispatch(NULL, NULL, NULL, NULL, 0, &recv, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_combine(NULL, NULL, NULL, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_recv_view(NULL, &recv), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fp8kit_ep_destroy(NULL), FP8KIT_OK);

    /* the per-call rules (ep_check.c) on a geometry of rank 1 of 2, with host
     * placeholders for the object's buffers and the caller's tensors */
    fk_ep_geom g;
    CHECK_STATUS(fk_ep_geometry(cpu, "test", &cfg, 2, 1, &g), FP8KIT_OK);
    CHECK(g.el == 4 && g.m == 32 && g.kp == 2 && g.nb == 2 && g.sbytes == 8 && g.mp4 == 32, "geometry");
    static unsigned char base[1 << 18];
    static uint16_t xb[64 * 256 + 8], yb[4 * 32 * 256 + 8], ob[16 * 256 + 8];
    static int32_t ids[64];
    static float w[64];
    fp8kit_tensor x = fp8kit_tensor_2d(xb, FP8KIT_BF16, 5, 256, 256);
    const fp8kit_ctx *cc = cpu;
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, w, 5), FP8KIT_OK);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, NULL, NULL, NULL, 0), FP8KIT_OK);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, w, -1), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, w, 17), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, NULL, ids, w, 5), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, NULL, w, 5), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, NULL, 5), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, w, 6), FP8KIT_ERR_INVALID_SHAPE);
    fp8kit_tensor xbad = fp8kit_tensor_2d(xb, FP8KIT_BF16, 5, 128, 128);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xbad, ids, w, 5), FP8KIT_ERR_INVALID_SHAPE);
    xbad = fp8kit_tensor_2d(xb, FP8KIT_E4M3, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xbad, ids, w, 5), FP8KIT_ERR_UNSUPPORTED);
    xbad = fp8kit_tensor_2d(xb, FP8KIT_F32, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xbad, ids, w, 5), FP8KIT_OK);
    xbad = fp8kit_tensor_2d((char *)xb + 1, FP8KIT_BF16, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xbad, ids, w, 5), FP8KIT_ERR_MISALIGNED);
    xbad = fp8kit_tensor_2d(xb, FP8KIT_BF16, 5, 256, 200);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xbad, ids, w, 5), FP8KIT_ERR_INVALID_STRIDE);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, (const int32_t *)((char *)ids + 2), w, 5),
                 FP8KIT_ERR_MISALIGNED);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, ids, (const float *)((char *)w + 1), 5),
                 FP8KIT_ERR_MISALIGNED);
    fp8kit_tensor xin = fp8kit_tensor_2d(base + 1024, FP8KIT_BF16, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &xin, ids, w, 5), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(fk_ep_check_dispatch(cc, &cfg, &g, base, &x, (const int32_t *)(base + 64), w, 5),
                 FP8KIT_ERR_INVALID_ARGUMENT);

    const int64_t ys[3] = {4, 32, 256};
    fp8kit_tensor y = fp8kit_tensor_make(yb, FP8KIT_BF16, 3, ys);
    fp8kit_tensor out = fp8kit_tensor_2d(ob, FP8KIT_BF16, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, &out), FP8KIT_OK);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, -1, &y, &out), FP8KIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(fp8kit_last_error(cpu), "no dispatch") != NULL, "combine before dispatch: '%s'",
          fp8kit_last_error(cpu));
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 0, &y, NULL), FP8KIT_OK);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, NULL), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, NULL, &out), FP8KIT_ERR_NULL_POINTER);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 4, &y, &out), FP8KIT_ERR_INVALID_SHAPE);
    fp8kit_tensor ybad = y;
    ybad.dtype = FP8KIT_F16;
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &ybad, &out), FP8KIT_ERR_UNSUPPORTED);
    ybad = y;
    ybad.shape[1] = 16;
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &ybad, &out), FP8KIT_ERR_INVALID_SHAPE);
    ybad = fp8kit_tensor_2d(yb, FP8KIT_BF16, 128, 256, 256);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &ybad, &out), FP8KIT_ERR_INVALID_SHAPE);
    fp8kit_tensor obad = out;
    obad.dtype = FP8KIT_F32;
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, &obad), FP8KIT_ERR_UNSUPPORTED);
    obad = fp8kit_tensor_2d(yb + 256, FP8KIT_BF16, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, &obad), FP8KIT_ERR_INVALID_ARGUMENT);
    obad = fp8kit_tensor_2d(base + 4096, FP8KIT_BF16, 5, 256, 256);
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, &obad), FP8KIT_ERR_INVALID_ARGUMENT);
    obad = fp8kit_tensor_2d(ob, FP8KIT_BF16, 5, 256, 300); /* a row stride above H is fine */
    CHECK_STATUS(fk_ep_check_combine(cc, &cfg, &g, base, 5, &y, &obad), FP8KIT_OK);

    /* the views a dispatch fills */
    fk_ep_views(&cfg, &g, base, &recv);
    CHECK(recv.x.ndim == 3 && recv.x.shape[0] == 4 && recv.x.shape[1] == 32 && recv.x.shape[2] == 256 &&
              recv.x.dtype == FP8KIT_E4M3 && recv.scale.dtype == FP8KIT_F32 && recv.scale.shape[2] == 2 &&
              recv.world == 2 && recv.rank == 1 && recv.local_experts == 4 && recv.first_expert == 4 &&
              recv.max_rows == 32,
          "recv views");
}

int main(void)
{
    rng = fk_rng_seeded("test_ep_ref");
    if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cpu) != FP8KIT_OK) {
        fprintf(stderr, "no CPU context\n");
        return 1;
    }
    config_checks();
    api_checks();
    layout_cases();
    for (int mode = 0; mode < 3; mode++)
        grouped_case(mode);
    fp8kit_ctx_destroy(cpu);
    return fk_test_summary("test_ep_ref");
}
