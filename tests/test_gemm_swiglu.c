/* test_gemm_swiglu.c - FP8KIT_ACT_SWIGLU on the CPU backend (docs/spec.md 3): D (M, N/2) =
 * silu(y[:, :N/2]) * y[:, N/2:]. Each case runs two GEMMs on the same operands: act = swiglu
 * and act = none with an f32 (M, N) D. Checks: (1) bit-exact - D equals the output stage
 * (cast, OUTQ_SCALED, OUTQ_MX, OUTQ_BLOCK1X128, with the shared src/format helpers) of
 * fk_swiglu of the act=none run's y; (2) against the fp64 oracle (src/ref/gemm_ref.h) within a
 * per-element bound for bf16/f16/f32 D; (3) bad inputs (odd N, D of N columns, beta != 0, the
 * K-grouped GEMM, scale_d shapes) give their status and leave D untouched (the grouped GEMM's
 * swiglu: tests/test_grouped_swiglu.c; here only its D-shape rule).
 * Shapes: odd M, even N from 2, K odd and not a multiple of 128; every CPU scale mode, both
 * bias modes, several thread counts. Part of CTest (tests/test_*.c). */
#include <math.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"
#include "outstage_expect.h"

#define U32 (1.0 / 16777216.0)

static fp8kit_ctx *g_ctx;

static size_t dsize(fp8kit_dtype t) { return t == FP8KIT_F32 ? 4 : (t == FP8KIT_E4M3 || t == FP8KIT_E5M2) ? 1 : 2; }
static int is_fp8(fp8kit_dtype t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }

typedef struct scase {
    int64_t m, n, k;
    fp8kit_scale_mode mode;
    fp8kit_bias_mode bias;
    fp8kit_dtype dt, hp;
    fp8kit_out_quant oq;
    int pow2, rceil, threads;
} scase;

/* The operands of one case (host memory, contiguous). */
typedef struct sops {
    uint8_t *a, *b;
    void *sa, *sb;
    float *bias;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args args;
} sops;

/* A scale tensor for operand op (0 A, 1 B) with the shape fp8kit_gemm_scale_shape gives. */
static void *make_scale(fk_rng *r, const fp8kit_gemm_desc *d, int op, int64_t rows, int64_t k, fp8kit_tensor *t)
{
    fp8kit_dtype dt;
    int64_t sh[2];
    CHECK_STATUS(fp8kit_gemm_scale_shape(d, op, rows, k, &dt, sh), FP8KIT_OK);
    if (sh[0] == 0)
        return NULL;
    const int64_t n = sh[0] * sh[1];
    void *p = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        if (dt == FP8KIT_E8M0)
            ((uint8_t *)p)[i] = (uint8_t)(124 + fk_rng_u32(r) % 7);
        else
            ((float *)p)[i] = (float)exp2(3.0 * fk_rng_unif(r) - 1.5);
    }
    *t = fp8kit_tensor_make(p, dt, 2, sh);
    return p;
}

static void make_ops(fk_rng *r, const scase *c, sops *o)
{
    memset(o, 0, sizeof *o);
    const int64_t M = c->m, N = c->n, K = c->k;
    o->a = (uint8_t *)malloc((size_t)(M * K));
    o->b = (uint8_t *)malloc((size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++)
        o->a[i] = fk_f32_to_fp8((float)fk_rng_normal(r), 0);
    for (int64_t i = 0; i < N * K; i++)
        o->b[i] = fk_f32_to_fp8((float)fk_rng_normal(r), 1);
    o->desc.scale_a = o->desc.scale_b = c->mode;
    o->desc.bias = c->bias;
    o->desc.out_quant = c->oq;
    o->desc.out_hp = c->hp;
    o->desc.out_rounding = c->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    o->desc.out_pow2 = c->pow2;
    o->args.a = fp8kit_tensor_2d(o->a, FP8KIT_E4M3, M, K, K);
    o->args.b = fp8kit_tensor_2d(o->b, FP8KIT_E5M2, N, K, K);
    o->sa = make_scale(r, &o->desc, 0, M, K, &o->args.scale_a);
    o->sb = make_scale(r, &o->desc, 1, N, K, &o->args.scale_b);
    /* y of order 1 around 0, where silu bends */
    o->args.alpha = (float)(1.5 / sqrt((double)K) / (c->mode == FP8KIT_SCALE_NONE ? 1.0 : 1.3));
    if (c->bias) {
        int64_t len = c->bias == FP8KIT_BIAS_COL ? N : M;
        o->bias = (float *)malloc(sizeof(float) * (size_t)len);
        for (int64_t i = 0; i < len; i++)
            o->bias[i] = (float)(0.5 * fk_rng_normal(r));
        o->args.bias = fp8kit_tensor_make(o->bias, FP8KIT_F32, 1, &len);
    }
}

static void free_ops(sops *o) { free(o->a), free(o->b), free(o->sa), free(o->sb), free(o->bias); }

/* Expected D (bytes, row stride h) and scale_d from the act=none run's y (M x N f32), by the
 * definition: fk_swiglu of each pair, then the output stage (outstage_expect.h). */
static void expected_out(const scase *c, const float *y, float scale_in, uint8_t *d, uint8_t *sd, float *amax)
{
    const int64_t M = c->m, N = c->n, h = N / 2;
    const fk_outstage os = {c->dt, c->hp, c->oq, c->pow2, c->rceil, scale_in};
    const int64_t ng = c->oq == FP8KIT_OUTQ_MX ? h / 32 : c->oq == FP8KIT_OUTQ_BLOCK1X128 ? (h + 127) / 128 : 0;
    const size_t es = dsize(c->dt), ss = c->oq == FP8KIT_OUTQ_MX ? 1 : 4;
    float *row = (float *)malloc(sizeof(float) * (size_t)h + 4);
    uint32_t am = 0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t j = 0; j < h; j++)
            row[j] = fk_swiglu(y[m * N + j], y[m * N + j + h]);
        fk_outstage_row(&os, row, h, d + es * (size_t)(m * h), sd + ss * (size_t)(m * ng), &am);
    }
    *amax = fk_u2f(am);
    free(row);
}

/* D (bf16/f16/f32) against the fp64 oracle: per element, the gate's and up's own bounds
 * (fp32 accumulation, sized by sum |terms|) carried through silu(g) * u, plus fp32 silu and
 * the multiply, plus the output rounding. */
static void check_oracle(const scase *c, const sops *o, const uint8_t *d, const char *name)
{
    const int64_t M = c->m, N = c->n, K = c->k, h = N / 2;
    double *acc = (double *)malloc(sizeof(double) * (size_t)(M * N));
    double *sabs = (double *)malloc(sizeof(double) * (size_t)(M * N));
    double *ref = (double *)malloc(sizeof(double) * (size_t)(M * N));
    fp8kit_gemm_args args = o->args;
    args.beta = 0.0f;
    CHECK(fk_ref_gemm_acc(&o->desc, &args, NULL, M, NULL, N, acc, sabs) == FK_REF_OK, "[%s] oracle acc", name);
    fp8kit_gemm_desc dsw = o->desc;
    dsw.act = FP8KIT_ACT_SWIGLU;
    CHECK(fk_ref_gemm(&dsw, &args, NULL, M, ref) == FK_REF_OK, "[%s] oracle refused swiglu", name);
    const int kblk = c->mode == FP8KIT_SCALE_MX ? 32 : 128;
    const double L = kblk + (K + kblk - 1) / kblk + 6, alpha = fabs((double)args.alpha);
    const double rr = c->dt == FP8KIT_F32 ? U32 : c->dt == FP8KIT_BF16 ? 1.0 / 256 : 1.0 / 1024;
    long bad = 0;
    fp8kit_gemm_desc lin = o->desc;
    lin.act = FP8KIT_ACT_NONE;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < h; j++) {
            fk_ref_parts pg, pu;
            const double g = fk_ref_epilogue(&lin, &args, m, j, acc[m * N + j], &pg);
            const double u = fk_ref_epilogue(&lin, &args, m, j + h, acc[m * N + j + h], &pu);
            const double tg = L * U32 * alpha * sabs[m * N + j] + 4 * U32 * (fabs(pg.bias) + fabs(g));
            const double tu = L * U32 * alpha * sabs[m * N + j + h] + 4 * U32 * (fabs(pu.bias) + fabs(u));
            const double sg = g / (1.0 + exp(-g)), r = ref[m * h + j];
            CHECK(fabs(r - fk_ref_swiglu(g, u)) <= 1e-15 * (fabs(r) + 1e-300), "[%s] oracle pair rule", name);
            const double tol = 1.1 * tg * (fabs(u) + tu) + fabs(sg) * tu + 16 * U32 * (fabs(g) + fabs(sg)) * fabs(u) +
                               2 * U32 * fabs(r);
            const double got = fk_ref_decode(d, c->dt, m * h + j);
            const double lim = 1.2 * tol + rr * fabs(r) + (c->dt == FP8KIT_F16 ? ldexp(1, -24) : 1e-40);
            if (!(fabs(got - r) <= lim) && bad++ < 3)
                fprintf(stderr, "  [%s] D[%lld,%lld] = %.9g, oracle %.9g, tol %.3g\n", name, (long long)m,
                        (long long)j, got, r, lim);
        }
    CHECK(bad == 0, "[%s] %ld elements outside the oracle's bound", name, bad);
    free(acc), free(sabs), free(ref);
}

static void run_case(const scase *c, fk_rng *r, const char *name)
{
    const int64_t M = c->m, N = c->n, h = N / 2;
    sops o;
    make_ops(r, c, &o);
    CHECK_STATUS(fp8kit_ctx_set_threads(g_ctx, c->threads), FP8KIT_OK);

    /* the linear part alone: act none, f32 (M, N), no output quantization */
    fp8kit_gemm_desc dl = o.desc;
    dl.act = FP8KIT_ACT_NONE, dl.out_quant = FP8KIT_OUTQ_NONE;
    fp8kit_gemm_args al = o.args;
    float *y = (float *)malloc(sizeof(float) * (size_t)(M * N));
    al.d = fp8kit_tensor_2d(y, FP8KIT_F32, M, N, N);
    CHECK_STATUS(fp8kit_gemm(g_ctx, &dl, &al, NULL), FP8KIT_OK);

    /* swiglu */
    fp8kit_gemm_desc ds = o.desc;
    ds.act = FP8KIT_ACT_SWIGLU;
    fp8kit_gemm_args as = o.args;
    const size_t db = dsize(c->dt) * (size_t)(M * h);
    uint8_t *d = (uint8_t *)malloc(db + 64), *want = (uint8_t *)malloc(db + 1);
    fk_poison(d, db + 64);
    as.d = fp8kit_tensor_2d(d, c->dt, M, h, h);
    fp8kit_dtype sdt = FP8KIT_F32;
    int64_t sh[2] = {0, 0};
    CHECK_STATUS(fp8kit_gemm_scale_shape(&ds, 2, M, N, &sdt, sh), FP8KIT_OK);
    const size_t sdb = (size_t)(sh[0] * sh[1]) * (sdt == FP8KIT_E8M0 ? 1 : 4);
    uint8_t *sd = (uint8_t *)malloc(sdb + 64), *sdw = (uint8_t *)malloc(sdb + 4);
    fk_poison(sd, sdb + 64);
    float scale_in = 0.0625f, amax = -1.0f, amax_want = 0.0f;
    if (c->oq == FP8KIT_OUTQ_SCALED) {
        memcpy(sd, &scale_in, 4);
        as.scale_d = fp8kit_tensor_make(sd, FP8KIT_F32, 2, sh);
        as.amax_d = &amax;
    } else if (c->oq != FP8KIT_OUTQ_NONE) {
        CHECK(sh[0] == M && sh[1] == (c->oq == FP8KIT_OUTQ_MX ? h / 32 : (h + 127) / 128),
              "[%s] scale_d shape %lld x %lld for D of %lld columns", name, (long long)sh[0], (long long)sh[1],
              (long long)h);
        as.scale_d = fp8kit_tensor_make(sd, sdt, 2, sh);
    }
    fp8kit_status st = fp8kit_gemm(g_ctx, &ds, &as, NULL);
    CHECK(st == FP8KIT_OK, "[%s] fp8kit_gemm swiglu: %s (%s)", name, fp8kit_status_string(st), fp8kit_last_error(g_ctx));
    CHECK(fk_is_poisoned(d + db, 64), "[%s] bytes past D written", name);
    if (c->oq == FP8KIT_OUTQ_MX || c->oq == FP8KIT_OUTQ_BLOCK1X128)
        CHECK(fk_is_poisoned(sd + sdb, 64), "[%s] bytes past scale_d written", name);

    /* (1) bit-exact against the definition on the act=none y */
    expected_out(c, y, scale_in, want, sdw, &amax_want);
    int64_t diff = -1;
    for (size_t i = 0; i < db && diff < 0; i++)
        if (d[i] != want[i])
            diff = (int64_t)i;
    CHECK(diff < 0, "[%s] D differs from fk_swiglu of the linear y at byte %lld (%02x vs %02x)", name, (long long)diff,
          diff >= 0 ? d[diff] : 0, diff >= 0 ? want[diff] : 0);
    if (c->oq == FP8KIT_OUTQ_MX || c->oq == FP8KIT_OUTQ_BLOCK1X128)
        CHECK(memcmp(sd, sdw, sdb) == 0, "[%s] scale_d differs from the definition's", name);
    if (c->oq == FP8KIT_OUTQ_SCALED)
        CHECK(fk_t_f2u(amax) == fk_t_f2u(amax_want), "[%s] amax_d %g, want %g", name, amax, amax_want);

    /* (2) the fp64 oracle */
    if (!is_fp8(c->dt))
        check_oracle(c, &o, d, name);
    free(y), free(d), free(want), free(sd), free(sdw);
    free_ops(&o);
}

/* ------------------------------------------------------------- bad inputs */
static void check_refused(const char *what, fp8kit_status want, const char *sub, const fp8kit_gemm_desc *d,
                          const fp8kit_gemm_args *a, const uint8_t *dbuf, size_t dbytes)
{
    fp8kit_status st = fp8kit_gemm(g_ctx, d, a, NULL);
    CHECK(st == want, "%s: status %s, want %s", what, fp8kit_status_string(st), fp8kit_status_string(want));
    const char *msg = fp8kit_last_error(g_ctx);
    CHECK(msg && strstr(msg, sub), "%s: message '%s' does not mention '%s'", what, msg ? msg : "", sub);
    CHECK(fk_is_poisoned(dbuf, dbytes), "%s: D was written", what);
    CHECK_STATUS(fp8kit_gemm_supported(g_ctx, d, a), want);
}

static void bad_inputs(fk_rng *r)
{
    scase c = {9, 66, 40, FP8KIT_SCALE_ROW, FP8KIT_BIAS_COL, FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 1};
    sops o;
    make_ops(r, &c, &o);
    fp8kit_gemm_desc ds = o.desc;
    ds.act = FP8KIT_ACT_SWIGLU;
    const size_t dbytes = 2 * 9 * 66;
    uint8_t *d = (uint8_t *)malloc(dbytes), *cbuf = (uint8_t *)malloc(dbytes);
    fk_poison(d, dbytes);
    memset(cbuf, 0, dbytes);
    fp8kit_gemm_args a = o.args;

    /* D of N columns instead of N/2 */
    a.d = fp8kit_tensor_2d(d, FP8KIT_BF16, 9, 66, 66);
    check_refused("D (M, N)", FP8KIT_ERR_INVALID_SHAPE, "expected 9 x 33", &ds, &a, d, dbytes);
    /* odd N: B with 65 rows (its first 65 of 66) */
    fp8kit_gemm_args odd = o.args;
    odd.b = fp8kit_tensor_2d(o.b, FP8KIT_E5M2, 65, 40, 40);
    int64_t sh[2] = {65, 1};
    odd.scale_b = fp8kit_tensor_make(o.sb, FP8KIT_F32, 1, sh);
    int64_t blen = 65;
    odd.bias = fp8kit_tensor_make(o.bias, FP8KIT_F32, 1, &blen);
    odd.d = fp8kit_tensor_2d(d, FP8KIT_BF16, 9, 32, 32);
    check_refused("odd N", FP8KIT_ERR_INVALID_SHAPE, "swiglu", &ds, &odd, d, dbytes);
    /* beta != 0 */
    a.d = fp8kit_tensor_2d(d, FP8KIT_BF16, 9, 33, 33);
    a.beta = 0.5f;
    a.c = fp8kit_tensor_2d(cbuf, FP8KIT_BF16, 9, 33, 33);
    check_refused("beta != 0", FP8KIT_ERR_UNSUPPORTED, "beta", &ds, &a, d, dbytes);
    a.c = fp8kit_tensor_2d(cbuf, FP8KIT_BF16, 9, 66, 66);
    check_refused("beta != 0, C (M, N)", FP8KIT_ERR_UNSUPPORTED, "swiglu", &ds, &a, d, dbytes);
    a.beta = 0.0f, a.c = (fp8kit_tensor){0};
    /* OUTQ_MX: D's N/2 = 33 columns are not a multiple of 32 */
    fp8kit_gemm_desc dq = ds;
    dq.out_quant = FP8KIT_OUTQ_MX, dq.out_hp = FP8KIT_BF16;
    a.d = fp8kit_tensor_2d(d, FP8KIT_E4M3, 9, 33, 33);
    int64_t one = 9;
    a.scale_d = fp8kit_tensor_make(cbuf, FP8KIT_E8M0, 1, &one);
    check_refused("OUTQ_MX with N/2 % 32", FP8KIT_ERR_INVALID_SHAPE, "N/2", &dq, &a, d, dbytes);

    /* fp8kit_gemm_scale_shape: k = N, halved for swiglu */
    fp8kit_dtype dt;
    int64_t s2[2] = {-1, -1};
    dq.out_quant = FP8KIT_OUTQ_BLOCK1X128;
    CHECK_STATUS(fp8kit_gemm_scale_shape(&dq, 2, 7, 512, &dt, s2), FP8KIT_OK);
    CHECK(s2[0] == 7 && s2[1] == 2 && dt == FP8KIT_F32, "block1x128 scale_d of swiglu N = 512: %lld x %lld",
          (long long)s2[0], (long long)s2[1]);
    dq.out_quant = FP8KIT_OUTQ_MX;
    CHECK_STATUS(fp8kit_gemm_scale_shape(&dq, 2, 7, 128, &dt, s2), FP8KIT_OK);
    CHECK(s2[0] == 7 && s2[1] == 2 && dt == FP8KIT_E8M0, "mx scale_d of swiglu N = 128: %lld x %lld", (long long)s2[0],
          (long long)s2[1]);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&dq, 2, 7, 96, &dt, s2), FP8KIT_ERR_INVALID_SHAPE);
    CHECK_STATUS(fp8kit_gemm_scale_shape(&dq, 2, 7, 129, &dt, s2), FP8KIT_ERR_INVALID_SHAPE);
    CHECK(strstr(fp8kit_last_error(NULL), "swiglu") != NULL, "scale_shape odd N: '%s'", fp8kit_last_error(NULL));
    CHECK_STATUS(fp8kit_gemm_scale_shape(&dq, 1, 129, 64, &dt, s2), FP8KIT_OK); /* B's: not D's */

    /* the grouped GEMM (contiguous: A (T, K), B (G, N, K)): D must be (T, N/2) */
    {
        fp8kit_gemm_desc gd;
        memset(&gd, 0, sizeof gd);
        gd.act = FP8KIT_ACT_SWIGLU;
        fp8kit_grouped_gemm_args ga;
        memset(&ga, 0, sizeof ga);
        int32_t offs[1] = {9};
        int64_t bsh[3] = {1, 66, 40};
        ga.a = fp8kit_tensor_2d(o.a, FP8KIT_E4M3, 9, 40, 40);
        ga.b = fp8kit_tensor_make(o.b, FP8KIT_E5M2, 3, bsh);
        ga.offsets = offs;
        ga.alpha = 1.0f;
        ga.d = fp8kit_tensor_2d(d, FP8KIT_BF16, 9, 66, 66);
        fp8kit_status st = fp8kit_grouped_gemm(g_ctx, &gd, &ga, NULL);
        CHECK(st == FP8KIT_ERR_INVALID_SHAPE, "grouped swiglu, D (T, N): %s", fp8kit_status_string(st));
        CHECK(strstr(fp8kit_last_error(g_ctx), "N/2") != NULL, "grouped: '%s'", fp8kit_last_error(g_ctx));
        CHECK(fk_is_poisoned(d, dbytes), "grouped swiglu wrote D");
        ga.d = fp8kit_tensor_2d(d, FP8KIT_BF16, 9, 33, 33);
        CHECK_STATUS(fp8kit_grouped_gemm(g_ctx, &gd, &ga, NULL), FP8KIT_OK);
        fk_poison(d, dbytes);
    }
    /* the K-grouped GEMM */
    {
        fp8kit_gemm_desc kd;
        memset(&kd, 0, sizeof kd);
        kd.act = FP8KIT_ACT_SWIGLU;
        fp8kit_k_grouped_gemm_args ka;
        memset(&ka, 0, sizeof ka);
        int32_t offs[1] = {0};
        int64_t dsh[3] = {1, 9, 33};
        ka.a = fp8kit_tensor_2d(o.a, FP8KIT_E4M3, 9, 40, 40);
        ka.b = fp8kit_tensor_2d(o.b, FP8KIT_E5M2, 33, 40, 40);
        ka.offsets = offs;
        ka.alpha = 1.0f;
        ka.d = fp8kit_tensor_make(d, FP8KIT_BF16, 3, dsh);
        fp8kit_status st = fp8kit_k_grouped_gemm(g_ctx, &kd, &ka, NULL);
        CHECK(st == FP8KIT_ERR_UNSUPPORTED, "k-grouped swiglu: %s", fp8kit_status_string(st));
        CHECK(fk_is_poisoned(d, dbytes), "k-grouped swiglu wrote D");
    }
    free(d), free(cbuf);
    free_ops(&o);
}

int main(void)
{
    fk_rng rng = fk_rng_seeded("test_gemm_swiglu");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_ctx), FP8KIT_OK);
    if (!g_ctx)
        return fk_test_summary("test_gemm_swiglu");
    CHECK_STATUS(fp8kit_activation_parse("SwiGLU", &(fp8kit_activation){0}), FP8KIT_OK);

    static const fp8kit_scale_mode modes[] = {FP8KIT_SCALE_NONE, FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW,
                                              FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_MX};
    static const int64_t Ms[] = {1, 7, 33, 129}, Ns[] = {2, 4, 18, 66, 258, 514}, Ks[] = {1, 17, 131, 300};
    static const int64_t Kmx[] = {32, 96, 160};
    /* outputs: f32, bf16, f16, plain e4m3, scaled e5m2 + amax, mx (needs N/2 % 32), block1x128 */
    static const struct { fp8kit_dtype dt, hp; fp8kit_out_quant oq; int pow2, rceil; } outs[] = {
        {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0},      {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0},
        {FP8KIT_F16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0},      {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0},
        {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0},   {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_MX, 0, 1},
        {FP8KIT_E5M2, FP8KIT_F16, FP8KIT_OUTQ_MX, 0, 0},       {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 1, 0},
        {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_BLOCK1X128, 0, 0},
    };
    const int nouts = (int)(sizeof outs / sizeof outs[0]);
    char name[128];
    int idx = 0;
    for (int mi = 0; mi < 5; mi++)
        for (int oi = 0; oi < nouts; oi++)
            for (int rep = 0; rep < 3; rep++, idx++) {
                scase c;
                memset(&c, 0, sizeof c);
                c.mode = modes[mi];
                c.dt = outs[oi].dt, c.hp = outs[oi].hp, c.oq = outs[oi].oq;
                c.pow2 = outs[oi].pow2, c.rceil = outs[oi].rceil;
                c.m = Ms[(idx + rep) % 4];
                c.n = c.oq == FP8KIT_OUTQ_MX ? 64 * (1 + (idx + rep) % 5) : Ns[(idx * 5 + rep) % 6];
                c.k = c.mode == FP8KIT_SCALE_MX ? Kmx[(idx + rep) % 3] : Ks[(idx * 3 + rep) % 4];
                c.bias = (fp8kit_bias_mode)((idx + rep) % 3);
                c.threads = (idx % 3);
                snprintf(name, sizeof name, "mode %d out %d: %lld x %lld x %lld bias %d", (int)c.mode, oi,
                         (long long)c.m, (long long)c.n, (long long)c.k, (int)c.bias);
                run_case(&c, &rng, name);
            }
    /* large: several N tiles and threads (gate and up in different tiles) */
    {
        scase c = {67, 1030, 257, FP8KIT_SCALE_BLOCK, FP8KIT_BIAS_COL, FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 2};
        run_case(&c, &rng, "67 x 1030 x 257 block bf16 threads 2");
        c.dt = FP8KIT_E4M3, c.oq = FP8KIT_OUTQ_BLOCK1X128, c.hp = FP8KIT_BF16, c.bias = FP8KIT_BIAS_ROW, c.threads = 0;
        run_case(&c, &rng, "67 x 1030 x 257 block -> block1x128");
    }
    bad_inputs(&rng);
    fp8kit_ctx_destroy(g_ctx);
    return fk_test_summary("test_gemm_swiglu");
}
