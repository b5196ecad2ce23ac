/* test_cuda_gemm_swiglu.c - FP8KIT_ACT_SWIGLU on the CUDA backend (the sm90_glu family:
 * D (M, N/2) = silu(y[:, j]) * y[:, N/2 + j] fused in the GEMM). Each case runs the GPU
 * GEMM with an f32 D (the reference run R, fast accumulation so that it takes the same fp8
 * kernel as the fp8 outputs) and with one output stage under test, on the same operands:
 *  (1) R against the fp64 oracle (src/ref) within a per-element bound sized for the fp8
 *      tensor cores (2^-11 of the sum of |terms| per gate / up value, carried through silu);
 *  (2) every other output stage bit-exact against the output stage of R's values by the
 *      shared src/format rules (bf16 / f16 / fp8 casts, OUTQ_SCALED with amax, OUTQ_MX and
 *      OUTQ_BLOCK1X128 codes and scales, with out_hp, pow2 and rceil): the fused
 *      quantization equals quantizing the kernel's own D;
 *  (3) D's row padding (ldd > N/2) and the bytes past D and its scales stay untouched;
 *  (4) the plan is the gated family's; the combinations it refuses (MX scales, block scales
 *      with N/2 not a multiple of 128) give UNSUPPORTED and leave D untouched (the grouped
 *      GEMM's swiglu: test_cuda_grouped_swiglu.c).
 * Shapes are drawn at random (odd M, N/2 from 1, K a multiple of 16, real-model shapes);
 * every scale mode the family takes (none, tensor, row, block, both mn_major and plain block
 * layouts), both bias kinds, all fp8 pairs. Exits 77 without a usable CUDA device.
 * Options: --small (a few random cases: for compute-sanitizer); --tuning SPEC (overrides for the
 * context, e.g. gemm_cluster=2: the 2-CTA variants, whose plan the test then expects). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "test_cuda_util.h"
#include "outstage_expect.h"

#define U32 (1.0 / 16777216.0)
static fp8kit_ctx *g_gpu;
static int g_cluster; /* --tuning gemm_cluster=2: e4m3 x e4m3 plans run clusters of 2 */
static fk_rng rng;

static size_t dsize(fp8kit_dtype t) { return t == FP8KIT_F32 ? 4 : (t == FP8KIT_E4M3 || t == FP8KIT_E5M2) ? 1 : 2; }

typedef struct ccase {
    int64_t m, n, k, ldd_pad;
    fp8kit_dtype at, bt;
    fp8kit_scale_mode mode;
    fp8kit_scale_layout layout;
    fp8kit_bias_mode bias;
} ccase;

/* One output stage under test. */
typedef struct stage {
    fp8kit_dtype dt, hp;
    fp8kit_out_quant oq;
    int pow2, rceil;
    int fast; /* desc.fast_accum */
} stage;

/* Host operands and their device copies. */
typedef struct ops {
    uint8_t *a, *b;
    void *sa, *sb;
    float *bias;
    void *da, *db, *dsa, *dsb, *dbias;
    size_t sab, sbb;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args host, dev; /* the same call on host (oracle) and device pointers */
} ops;

static void *make_scale(const fp8kit_gemm_desc *d, int op, int64_t rows, int64_t k, fp8kit_tensor *t, size_t *bytes)
{
    fp8kit_dtype dt;
    int64_t sh[2];
    CHECK_STATUS(fp8kit_gemm_scale_shape(d, op, rows, k, &dt, sh), FP8KIT_OK);
    *bytes = 0;
    if (sh[0] == 0)
        return NULL;
    const int64_t n = sh[0] * sh[1];
    float *p = (float *)malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)exp2(3.0 * fk_rng_unif(&rng) - 1.5);
    *t = fp8kit_tensor_make(p, dt, 2, sh);
    *bytes = (size_t)n * 4;
    return p;
}

static void *to_dev(const void *h, size_t n)
{
    if (!h)
        return NULL;
    void *d = dmalloc(n);
    h2d(d, h, n);
    return d;
}

static void make_ops(const ccase *c, ops *o)
{
    memset(o, 0, sizeof *o);
    const int64_t M = c->m, N = c->n, K = c->k;
    o->a = (uint8_t *)malloc((size_t)(M * K) + 1);
    o->b = (uint8_t *)malloc((size_t)(N * K) + 1);
    for (int64_t i = 0; i < M * K; i++)
        o->a[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng), c->at == FP8KIT_E5M2);
    for (int64_t i = 0; i < N * K; i++)
        o->b[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng), c->bt == FP8KIT_E5M2);
    o->desc.scale_a = o->desc.scale_b = c->mode;
    o->desc.scale_layout = c->layout;
    o->desc.bias = c->bias;
    o->desc.act = FP8KIT_ACT_SWIGLU;
    o->host.a = fp8kit_tensor_2d(o->a, c->at, M, K, K);
    o->host.b = fp8kit_tensor_2d(o->b, c->bt, N, K, K);
    o->sa = make_scale(&o->desc, 0, M, K, &o->host.scale_a, &o->sab);
    o->sb = make_scale(&o->desc, 1, N, K, &o->host.scale_b, &o->sbb);
    o->host.alpha = (float)(1.5 / sqrt((double)K) / (c->mode == FP8KIT_SCALE_NONE ? 1.0 : 1.3));
    if (c->bias) {
        int64_t len = c->bias == FP8KIT_BIAS_COL ? N : M;
        o->bias = (float *)malloc(sizeof(float) * (size_t)len);
        for (int64_t i = 0; i < len; i++)
            o->bias[i] = (float)(0.5 * fk_rng_normal(&rng));
        o->host.bias = fp8kit_tensor_make(o->bias, FP8KIT_F32, 1, &len);
    }
    o->dev = o->host;
    o->da = to_dev(o->a, (size_t)(M * K) + 1);
    o->db = to_dev(o->b, (size_t)(N * K) + 1);
    o->dsa = to_dev(o->sa, o->sab);
    o->dsb = to_dev(o->sb, o->sbb);
    o->dev.a.data = o->da;
    o->dev.b.data = o->db;
    o->dev.scale_a.data = o->dsa;
    o->dev.scale_b.data = o->dsb;
    if (c->bias) {
        o->dbias = to_dev(o->bias, sizeof(float) * (size_t)o->host.bias.shape[0]);
        o->dev.bias.data = o->dbias;
    }
}

static void free_ops(ops *o)
{
    free(o->a), free(o->b), free(o->sa), free(o->sb), free(o->bias);
    cudaFree(o->da), cudaFree(o->db), cudaFree(o->dsa), cudaFree(o->dsb), cudaFree(o->dbias);
}

/* Runs the device GEMM with D of dtype s->dt (row stride ld) into a poisoned device buffer
 * (and scale_d); copies D and the scales back. Returns the status. */
static fp8kit_status run_dev(const ops *o, const ccase *c, const stage *s, int64_t ld, uint8_t *d, size_t dbytes,
                             uint8_t *sd, size_t sdbytes, float scale_in, float *amax)
{
    const int64_t M = c->m, h = c->n / 2;
    fp8kit_gemm_desc ds = o->desc;
    ds.out_quant = s->oq;
    ds.out_hp = s->hp;
    ds.out_pow2 = s->pow2;
    ds.out_rounding = s->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    ds.fast_accum = s->fast;
    fp8kit_gemm_args a = o->dev;
    uint8_t *dd = (uint8_t *)dmalloc(dbytes + 64), *dsd = (uint8_t *)dmalloc(sdbytes + 64);
    float *damax = (float *)dmalloc(4);
    cudaMemset(dd, FK_POISON, dbytes + 64);
    cudaMemset(dsd, FK_POISON, sdbytes + 64);
    a.d = fp8kit_tensor_2d(dd, s->dt, M, h, ld);
    if (s->oq != FP8KIT_OUTQ_NONE) {
        fp8kit_dtype sdt;
        int64_t sh[2];
        CHECK_STATUS(fp8kit_gemm_scale_shape(&ds, 2, M, c->n, &sdt, sh), FP8KIT_OK);
        if (s->oq == FP8KIT_OUTQ_SCALED)
            h2d(dsd, &scale_in, 4), a.amax_d = damax;
        a.scale_d = fp8kit_tensor_make(dsd, sdt, 2, sh);
    }
    size_t wsb = 0;
    void *ws = NULL;
    if (fp8kit_gemm_workspace_size(g_gpu, &ds, &a, &wsb) == FP8KIT_OK && wsb) {
        ws = dmalloc(wsb);
        a.workspace = ws;
        a.workspace_bytes = wsb;
    }
    fp8kit_status st = fp8kit_gemm(g_gpu, &ds, &a, NULL);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "device error after the GEMM");
    cudaFree(ws);
    d2h(d, dd, dbytes + 64);
    d2h(sd, dsd, sdbytes + 64);
    if (amax)
        d2h(amax, damax, 4);
    cudaFree(dd), cudaFree(dsd), cudaFree(damax);
    return st;
}

/* (1) R (f32, row stride ld) against the fp64 oracle; rr: the output rounding's relative error
 * (0 for f32). */
static void check_oracle(const ccase *c, const ops *o, const float *r, int64_t ld, double rr, const char *name)
{
    const int64_t M = c->m, N = c->n, h = N / 2;
    double *acc = (double *)malloc(sizeof(double) * (size_t)(M * N));
    double *sabs = (double *)malloc(sizeof(double) * (size_t)(M * N));
    CHECK(fk_ref_gemm_acc(&o->desc, &o->host, NULL, M, NULL, N, acc, sabs) == FK_REF_OK, "[%s] oracle acc", name);
    const double alpha = fabs((double)o->host.alpha), eps = 1.0 / 2048;
    fp8kit_gemm_desc lin = o->desc;
    lin.act = FP8KIT_ACT_NONE;
    long bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < h; j++) {
            fk_ref_parts pg, pu;
            const double g = fk_ref_epilogue(&lin, &o->host, m, j, acc[m * N + j], &pg);
            const double u = fk_ref_epilogue(&lin, &o->host, m, j + h, acc[m * N + j + h], &pu);
            const double tg = eps * alpha * sabs[m * N + j] + 8 * U32 * (fabs(pg.bias) + fabs(g));
            const double tu = eps * alpha * sabs[m * N + j + h] + 8 * U32 * (fabs(pu.bias) + fabs(u));
            const double want = fk_ref_swiglu(g, u), sg = g / (1.0 + exp(-g));
            const double tol = 1.1 * tg * (fabs(u) + tu) + fabs(sg) * tu + 64 * U32 * (fabs(g) + fabs(sg)) * fabs(u) +
                               (8 * U32 + rr) * fabs(want) + 1e-30;
            const double got = r[m * ld + j];
            if (!(fabs(got - want) <= tol) && bad++ < 3)
                fprintf(stderr, "  [%s] D[%lld,%lld] = %.9g, oracle %.9g, tol %.3g\n", name, (long long)m,
                        (long long)j, got, want, tol);
        }
    CHECK(bad == 0, "[%s] %ld elements outside the oracle's bound", name, bad);
    free(acc), free(sabs);
}

/* (2) the expected D (row stride ld, bytes) and scales of stage s from R's values (row stride
 * ldr), by the output stage of outstage_expect.h. */
static void expected(const ccase *c, const stage *s, const float *r, int64_t ldr, int64_t ld, float scale_in,
                     uint8_t *d, uint8_t *sd, float *amax)
{
    const int64_t M = c->m, h = c->n / 2;
    const fk_outstage os = {s->dt, s->hp, s->oq, s->pow2, s->rceil, scale_in};
    const int64_t ng = s->oq == FP8KIT_OUTQ_MX ? h / 32 : s->oq == FP8KIT_OUTQ_BLOCK1X128 ? (h + 127) / 128 : 0;
    const size_t es = dsize(s->dt), ss = s->oq == FP8KIT_OUTQ_MX ? 1 : 4;
    float *row = (float *)malloc(sizeof(float) * (size_t)h + 4);
    uint32_t am = 0;
    for (int64_t m = 0; m < M; m++) {
        memcpy(row, r + m * ldr, sizeof(float) * (size_t)h);
        fk_outstage_row(&os, row, h, d + es * (size_t)(m * ld), sd + ss * (size_t)(m * ng), &am);
    }
    *amax = fk_u2f(am);
    free(row);
}

static int plans_glu(const ops *o, const ccase *c)
{
    char buf[512] = "";
    fp8kit_gemm_args a = o->dev;
    const int64_t h = c->n / 2;
    a.d = fp8kit_tensor_2d((void *)(uintptr_t)256, FP8KIT_BF16, c->m, h, h);
    fp8kit_status st = fp8kit_gemm_describe(g_gpu, &o->desc, &a, buf, sizeof buf);
    CHECK(st == FP8KIT_OK && strstr(buf, "sm90_glu"), "describe: %s '%s' (%s)", fp8kit_status_string(st), buf,
          fp8kit_last_error(g_gpu));
    const int want = g_cluster && c->at == FP8KIT_E4M3 && c->bt == FP8KIT_E4M3 ? 2 : 1;
    CHECK(strstr(buf, want == 2 ? "cluster=2" : "cluster=1") != NULL, "describe: '%s', want cluster=%d", buf, want);
    return st == FP8KIT_OK;
}

static void run_case(const ccase *c, const char *name)
{
    const int64_t M = c->m, h = c->n / 2, ld = h + c->ldd_pad;
    ops o;
    make_ops(c, &o);
    plans_glu(&o, c);
    /* R: f32 D (fast_accum keeps the fp8 tensor cores: the kernel of the fp8 and 16-bit outputs
     * below, without fast_accum; precise f32 output would take the fp16 copies) */
    const stage sr = {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 1};
    const size_t rb = 4 * (size_t)(M * ld);
    uint8_t *rbuf = (uint8_t *)malloc(rb + 64), *sdum = (uint8_t *)malloc(64);
    fp8kit_status st = run_dev(&o, c, &sr, ld, rbuf, rb, sdum, 0, 0.0f, NULL);
    CHECK(st == FP8KIT_OK, "[%s] swiglu f32: %s (%s)", name, fp8kit_status_string(st), fp8kit_last_error(g_gpu));
    CHECK(fk_is_poisoned(rbuf + rb, 64), "[%s] f32: bytes past D written", name);
    long pad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = h; j < ld; j++)
            pad += !fk_is_poisoned(rbuf + 4 * (m * ld + j), 4);
    CHECK(pad == 0, "[%s] f32: %ld padding entries of D written", name, pad);
    const float *r = (const float *)rbuf;
    check_oracle(c, &o, r, ld, 0.0, name);
    if (c->mode != FP8KIT_SCALE_BLOCK && c->m * c->n <= 20000) {
        /* precise f32 output: the fp16 copies (a workspace) */
        const stage sp = {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0};
        uint8_t *pb = (uint8_t *)malloc(rb + 64);
        st = run_dev(&o, c, &sp, ld, pb, rb, sdum, 0, 0.0f, NULL);
        CHECK(st == FP8KIT_OK, "[%s] precise f32: %s (%s)", name, fp8kit_status_string(st), fp8kit_last_error(g_gpu));
        char pname[220];
        snprintf(pname, sizeof pname, "%s / precise f32", name);
        check_oracle(c, &o, (const float *)pb, ld, 0.0, pname);
        free(pb);
    }
    if (c->mode != FP8KIT_SCALE_BLOCK) {
        /* fast accumulation (no promotion), bf16 D: the oracle's bound with bf16's rounding */
        const stage sf = {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 1};
        const size_t fb = 2 * (size_t)(M * ld);
        uint8_t *f = (uint8_t *)malloc(fb + 64);
        float *fv = (float *)malloc(4 * (size_t)(M * ld) + 4);
        st = run_dev(&o, c, &sf, ld, f, fb, sdum, 0, 0.0f, NULL);
        CHECK(st == FP8KIT_OK, "[%s] fast bf16: %s (%s)", name, fp8kit_status_string(st), fp8kit_last_error(g_gpu));
        for (int64_t x = 0; x < M * ld; x++) {
            uint16_t v;
            memcpy(&v, f + 2 * x, 2);
            fv[x] = fk_bf16_to_f32(v);
        }
        char fname[220];
        snprintf(fname, sizeof fname, "%s / fast bf16", name);
        check_oracle(c, &o, fv, ld, 1.0 / 256, fname);
        free(f), free(fv);
    }

    static const stage stages[] = {
        {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},       {FP8KIT_F16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},
        {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0},       {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 0},
        {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0}, {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 1, 0, 0},
        {FP8KIT_E5M2, FP8KIT_F16, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0}, {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_MX, 0, 0, 0},
        {FP8KIT_E5M2, FP8KIT_BF16, FP8KIT_OUTQ_MX, 0, 1, 0},
    };
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        const stage *s = &stages[i];
        if (s->oq == FP8KIT_OUTQ_MX && h % 32)
            continue;
        char sname[200];
        snprintf(sname, sizeof sname, "%s / %s oq %d hp %s%s%s", name, fp8kit_dtype_name(s->dt), (int)s->oq,
                 fp8kit_dtype_name(s->hp), s->pow2 ? " pow2" : "", s->rceil ? " rceil" : "");
        const int64_t lds = (s->oq == FP8KIT_OUTQ_MX || s->oq == FP8KIT_OUTQ_BLOCK1X128) ? ld : ld;
        const size_t db = dsize(s->dt) * (size_t)(M * lds);
        const int64_t ng = s->oq == FP8KIT_OUTQ_MX ? h / 32 : (h + 127) / 128;
        const size_t sdb = s->oq == FP8KIT_OUTQ_MX ? (size_t)(M * ng) : s->oq == FP8KIT_OUTQ_BLOCK1X128 ? 4 * (size_t)(M * ng)
                                                                                                      : 4;
        uint8_t *d = (uint8_t *)malloc(db + 64), *sd = (uint8_t *)malloc(sdb + 64);
        uint8_t *want = (uint8_t *)malloc(db + 64), *sdw = (uint8_t *)malloc(sdb + 64);
        fk_poison(want, db + 64);
        fk_poison(sdw, sdb + 64);
        const float scale_in = 0.0625f;
        float amax = -1.0f, amax_want = 0.0f;
        st = run_dev(&o, c, s, lds, d, db, sd, sdb, scale_in, &amax);
        CHECK(st == FP8KIT_OK, "[%s] %s (%s)", sname, fp8kit_status_string(st), fp8kit_last_error(g_gpu));
        expected(c, s, r, ld, lds, scale_in, want, sdw, &amax_want);
        int64_t diff = -1;
        for (size_t x = 0; x < db + 64 && diff < 0; x++)
            if (d[x] != want[x])
                diff = (int64_t)x;
        CHECK(diff < 0, "[%s] D differs from the output stage of the f32 run at byte %lld (row %lld) (%02x vs %02x)",
              sname, (long long)diff, diff >= 0 ? (long long)(diff / ((int64_t)dsize(s->dt) * lds)) : 0LL,
              diff >= 0 ? d[diff] : 0, diff >= 0 ? want[diff] : 0);
        if (s->oq == FP8KIT_OUTQ_MX || s->oq == FP8KIT_OUTQ_BLOCK1X128)
            CHECK(memcmp(sd, sdw, sdb + 64) == 0, "[%s] scale_d differs from the f32 run's", sname);
        if (s->oq == FP8KIT_OUTQ_SCALED)
            CHECK(fk_t_f2u(amax) == fk_t_f2u(amax_want), "[%s] amax_d %g, want %g", sname, amax, amax_want);
        free(d), free(sd), free(want), free(sdw);
    }
    free(rbuf), free(sdum);
    free_ops(&o);
}

/* (4) what the family refuses */
static void refused(const char *what, const ccase *c, const char *sub)
{
    ops o;
    make_ops(c, &o);
    const int64_t M = c->m, h = c->n / 2;
    const stage s = {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0};
    const size_t db = 2 * (size_t)(M * h);
    uint8_t *d = (uint8_t *)malloc(db + 64), *sd = (uint8_t *)malloc(64);
    fp8kit_status st = run_dev(&o, c, &s, h, d, db, sd, 0, 0.0f, NULL);
    CHECK(st == FP8KIT_ERR_UNSUPPORTED, "%s: status %s, want UNSUPPORTED", what, fp8kit_status_string(st));
    const char *msg = fp8kit_last_error(g_gpu);
    CHECK(msg && strstr(msg, sub), "%s: message '%s' does not mention '%s'", what, msg ? msg : "", sub);
    CHECK(fk_is_poisoned(d, db + 64), "%s: D was written", what);
    free(d), free(sd);
    free_ops(&o);
}

static int64_t pick(const int64_t *v, int n) { return v[fk_rng_u32(&rng) % (uint32_t)n]; }
#endif

int main(int argc, char **argv)
{
    int small = 0;
    const char *tuning = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small"))
            small = 1;
        else if (!strcmp(argv[i], "--tuning") && i + 1 < argc)
            tuning = argv[++i];
        else {
            fprintf(stderr, "usage: test_cuda_gemm_swiglu [--small] [--tuning SPEC]\n");
            return 2;
        }
    }
    const int skip = fk_test_cuda_skip("test_cuda_gemm_swiglu");
    if (skip >= 0)
        return skip;
#ifdef FP8KIT_HAVE_CUDA
    rng = fk_rng_seeded("test_cuda_gemm_swiglu");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &g_gpu), FP8KIT_OK);
    if (!g_gpu)
        return fk_test_summary("test_cuda_gemm_swiglu");
    if (tuning) {
        CHECK_STATUS(fp8kit_ctx_set_tuning(g_gpu, tuning), FP8KIT_OK);
        g_cluster = strstr(tuning, "gemm_cluster=2") != NULL;
    }
    char name[200];
    /* real-model shapes: Llama-3 8B's MLP (14336 x 2 rows of B), a DeepSeek-V3 expert's gate/up
     * (2048 x 2), Qwen3-30B-A3B's (768 x 2), at decode and prefill row counts */
    const ccase real[] = {
        {128, 2 * 14336, 4096, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_ROW, FP8KIT_LAYOUT_PLAIN, FP8KIT_BIAS_NONE},
        {300, 2 * 2048, 7168, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR, FP8KIT_BIAS_NONE},
        {77, 2 * 768, 2048, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, FP8KIT_BIAS_NONE},
        {1024, 2 * 768, 2048, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_TENSOR, FP8KIT_LAYOUT_PLAIN, FP8KIT_BIAS_COL},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0] && !small; i++) {
        snprintf(name, sizeof name, "real %lld x %lld x %lld mode %d", (long long)real[i].m, (long long)real[i].n,
                 (long long)real[i].k, (int)real[i].mode);
        run_case(&real[i], name);
    }
    /* block scales with MN-major A scales and K a multiple of 512, a partial last tile row, also in --small */
    const ccase mn = {130, 2 * 256, 512, 8, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_MN_MAJOR,
                      FP8KIT_BIAS_COL};
    run_case(&mn, "mn_major 130 x 512 x 512");
    /* the space: random shapes and modes */
    static const int64_t ms[] = {1, 5, 63, 64, 65, 127, 130, 257, 700};
    static const int64_t hs[] = {1, 3, 32, 64, 96, 100, 128, 129, 192, 256, 320, 384, 500, 640};
    static const int64_t hb[] = {128, 256, 384, 640, 1024};
    static const int64_t ks[] = {16, 48, 112, 128, 144, 256, 400, 512, 640, 1056, 1536, 2048};
    static const fp8kit_scale_mode modes[] = {FP8KIT_SCALE_NONE, FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW,
                                              FP8KIT_SCALE_BLOCK};
    const int ncase = small ? 6 : 48;
    for (int i = 0; i < ncase; i++) {
        ccase c;
        memset(&c, 0, sizeof c);
        c.mode = modes[fk_rng_u32(&rng) % 4];
        c.m = pick(ms, 9);
        c.n = 2 * (c.mode == FP8KIT_SCALE_BLOCK ? pick(hb, 5) : pick(hs, 14));
        c.k = pick(ks, 12);
        c.ldd_pad = (fk_rng_u32(&rng) % 3) * 8;
        c.at = fk_rng_u32(&rng) % 2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
        c.bt = fk_rng_u32(&rng) % 2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
        c.layout = c.mode == FP8KIT_SCALE_BLOCK && fk_rng_u32(&rng) % 2 ? FP8KIT_LAYOUT_MN_MAJOR : FP8KIT_LAYOUT_PLAIN;
        c.bias = (fp8kit_bias_mode)(fk_rng_u32(&rng) % 3);
        snprintf(name, sizeof name, "#%d %lld x %lld x %lld mode %d layout %d bias %d %s.%s pad %lld", i, (long long)c.m,
                 (long long)c.n, (long long)c.k, (int)c.mode, (int)c.layout, (int)c.bias, fp8kit_dtype_name(c.at),
                 fp8kit_dtype_name(c.bt), (long long)c.ldd_pad);
        run_case(&c, name);
    }
    /* refusals */
    ccase r = {64, 2 * 192, 256, 0, FP8KIT_E4M3, FP8KIT_E4M3, FP8KIT_SCALE_BLOCK, FP8KIT_LAYOUT_PLAIN, FP8KIT_BIAS_NONE};
    refused("block scales, N/2 = 192", &r, "multiple of 128");
    r.mode = FP8KIT_SCALE_MX;
    r.n = 2 * 256;
    refused("mx scales", &r, "mx scales");
    fp8kit_ctx_destroy(g_gpu);
#else
    (void)small;
    (void)tuning;
#endif
    return fk_test_summary("test_cuda_gemm_swiglu");
}
