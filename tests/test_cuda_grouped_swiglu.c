/* test_cuda_grouped_swiglu.c - fp8kit_grouped_gemm's epilogues on the CUDA backend: act=swiglu
 * (the sm90_glu_grouped family: each expert's N rows of B are [gate; up] and D (T, N/2) is
 * silu(y[:, j]) * y[:, N/2 + j]) with every output stage, and output quantization (OUTQ_SCALED,
 * OUTQ_MX, OUTQ_BLOCK1X128) of the ordinary grouped GEMM (sm90_grouped, act none or elementwise).
 * Each case runs the GPU grouped call with an f32 D (the reference run R, with fast_accum: f32
 * output needs it there, and it keeps the promoting fp8 kernel the other outputs take without
 * it) and with each output stage under test (fast_accum 0), on the same operands and offsets:
 *  (1) R against the fp64 oracle (src/ref), group by group, within a per-element bound sized for
 *      the fp8 tensor cores (2^-11 of the sum of |terms| per y, carried through silu * up or the
 *      activation; MX inputs: docs/spec.md 3's relative bound), on every owned row or, for the
 *      large shapes, a sample holding each group's first and last rows; swiglu with none /
 *      tensor / row scales also fast accumulation into bf16 against that bound;
 *  (2) every other output stage (bf16 / f16 casts, OUTQ_SCALED e4m3 / e5m2 with and without
 *      amax_d, OUTQ_MX floor and rceil, OUTQ_BLOCK1X128 with and without pow2, out_hp f32 / bf16 /
 *      f16) against tests/outstage_expect.h's output stage of R's rows: codes, output scales and
 *      amax_d (max |D| over the rows groups own, 0 when none does). Swiglu (one epilogue for every
 *      output stage) and the ordinary grouped GEMM on exact inputs (small integers, powers of two:
 *      every store path's y the same) bit-exact; the ordinary grouped GEMM otherwise within a
 *      tolerance (check_tolerant: its store paths round y differently, by design), with the
 *      elements not bit-exact counted (at most 1% of a stage's) and reported in the last line;
 *  (3) rows no group owns (contiguous: from offsets[G-1]; masked: from each slab's count), D's row
 *      padding and the bytes past D and scale_d stay untouched (poison), and the status word is 0;
 *  (4) fp8kit_grouped_gemm_describe names the family (sm90_glu_grouped / sm90_grouped); swiglu with
 *      MX scales or with block scales and N/2 not a multiple of 128, an fp8 D without output
 *      quantization and OUTQ_MX over D columns not a multiple of 32 are refused, D, scale_d, amax_d
 *      and the status word untouched; invalid device offsets (decreasing, past T, negative; masked
 *      counts above M or negative) return OK, leave D and scale_d untouched and set the status
 *      word to INVALID_ARGUMENT;
 *  (5) MX inputs with output quantization: run and checked as above, or refused (UNSUPPORTED),
 *      counted in the last line.
 * Cases: random (G 1 to 9, and 64 or more; contiguous with empty, 1-row, odd, off-tile and large
 * groups and rows past the last offset, or masked with counts 0 .. M, M odd or not; N/2 from 1,
 * odd too; K multiples of 16; scale modes none / tensor / row (mixed) / block (plain and mn_major
 * A scales) / mx; per-expert bias f32 / bf16 / f16 or none; all four fp8 pairs; padded A rows, B
 * experts and D rows; NaN rows of A no group owns; exact inputs for the ordinary grouped GEMM)
 * and real MoE expert shapes (DeepSeek-V3, Qwen3-30B-A3B, Mixtral). Exits 77 without an sm_90 device.
 * Options: --small (a few random cases: for compute-sanitizer); --tuning SPEC (overrides for the
 * context); --seed N (else FK_TEST_SEED or the time). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"

#define NAME "test_cuda_grouped_swiglu"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "test_cuda_util.h"
#include "outstage_expect.h"

#define U32 (1.0 / 16777216.0)
#define GUARD 64    /* bytes past D and past scale_d that must stay poisoned */
#define MAXG 128    /* the most experts a case has */
#define JUNK 12345  /* the status word before a call */
#define POISON32 0xA5A5A5A5u

static fp8kit_ctx *g_gpu;
static fk_rng rng;
static uint8_t g_codes[2][4096]; /* fp8 codes of normal samples (e4m3, e5m2), redrawn per case */
static long g_mxq_ran, g_mxq_refused; /* MX inputs with output quantization */

static uint32_t rnd(uint32_t n) { return fk_rng_u32(&rng) % n; }
static int64_t pick(const int64_t *v, int n) { return v[rnd((uint32_t)n)]; }
#define PICK(v) pick(v, (int)(sizeof v / sizeof v[0]))

/* ------------------------------------------------------------------ cases and operands */
typedef struct gcase {
    int masked;               /* FP8KIT_GROUPED_MASKED: rows is M, each expert's slab */
    int64_t rows, g, n, k;    /* rows: T (contiguous) or M (masked); n: B's rows per expert */
    fp8kit_dtype at, bt, biast;
    fp8kit_scale_mode sa, sb;
    int mn;                   /* block: A's scales in the mn_major layout */
    int bias;                 /* per-expert column bias (G x N) */
    int garbage;              /* rows of A no group owns: NaN codes and NaN scales */
    int exact;                /* exact inputs (part (b), act none / relu): see make_ops */
    fp8kit_activation act;
    int64_t apad, bpad, dpad; /* extra bytes per row of A (16s), rows per expert of B, elements per row of D */
    int32_t off[MAXG];        /* row ends (contiguous) or counts (masked) */
} gcase;

/* One case's operands on the host (the oracle's) and on the device. */
typedef struct gops {
    int64_t T, M, G, N, K, nd, lda, ldd, brows, kb, nb;
    int64_t sa_n, sb_n, n_mn; /* scale values: A's (plain), B's, A's mn_major buffer */
    int64_t owned;            /* rows a group owns */
    int e8;                   /* MX: e8m0 scales */
    uint8_t *a, *b;
    void *sa, *sb, *bias;
    float *sa_mn;
    int32_t *off;
    int64_t *owner;           /* per row of the T-row view: its group, or -1 */
    void *da, *db, *dsa, *dsb, *dbias;
    int32_t *doff, *dstatus;
    float scale_in;           /* OUTQ_SCALED's scale_d */
    fp8kit_gemm_desc desc;    /* scale modes and layout, bias, act */
    fp8kit_grouped_gemm_args dev; /* the device call less D and its output scales */
} gops;

static void *to_dev(const void *h, size_t n)
{
    if (!h)
        return NULL;
    void *d = dmalloc(n);
    h2d(d, h, n);
    return d;
}

static fp8kit_tensor vec(void *p, fp8kit_dtype dt, int64_t n) { return fp8kit_tensor_make(p, dt, 1, &n); }

/* n codes of format e5 into p: 12 random bits per code index g_codes. */
static void fill_codes(uint8_t *p, int64_t n, int e5)
{
    for (int64_t i = 0; i < n; i += 5) {
        const uint64_t r = fk_rng_u64(&rng);
        for (int64_t j = 0; j < 5 && i + j < n; j++)
            p[i + j] = g_codes[e5][(r >> (12 * j)) & 4095];
    }
}

/* Scale values: f32 powers of two (2^-3 .. 2^1) or not (2^-1.5 .. 2^1.5); e8m0 2^-2 .. 2^1.
 * exact: 2^-2 .. 2^0 (f32 and e8m0). */
static void fill_scales(void *p, int64_t n, int e8, int exact)
{
    for (int64_t i = 0; i < n; i++) {
        if (exact && e8)
            ((uint8_t *)p)[i] = (uint8_t)(125 + rnd(3));
        else if (exact)
            ((float *)p)[i] = (float)ldexp(1.0, -(int)rnd(3));
        else if (e8)
            ((uint8_t *)p)[i] = (uint8_t)(125 + rnd(4));
        else
            ((float *)p)[i] = rnd(2) ? (float)ldexp(1.0, (int)rnd(5) - 3) : (float)exp2(3.0 * fk_rng_unif(&rng) - 1.5);
    }
}

/* Scale values of A per row (tensor: 0, one for all) and of B per expert. */
static int64_t sa_per_row(const gops *o, fp8kit_scale_mode m)
{
    return m == FP8KIT_SCALE_ROW ? 1 : m == FP8KIT_SCALE_BLOCK ? o->kb : m == FP8KIT_SCALE_MX ? o->K / 32 : 0;
}
static int64_t sb_per_expert(const gops *o, fp8kit_scale_mode m)
{
    return m == FP8KIT_SCALE_TENSOR ? 1
           : m == FP8KIT_SCALE_ROW  ? o->N
           : m == FP8KIT_SCALE_BLOCK ? o->nb * o->kb
           : m == FP8KIT_SCALE_MX   ? o->N * (o->K / 32)
                                    : 0;
}

/* Rows [*r0, *r1) of the T-row view that group g owns. */
static void group_rows(const gops *o, int64_t g, int64_t *r0, int64_t *r1)
{
    *r0 = o->M ? g * o->M : g ? o->off[g - 1] : 0;
    *r1 = o->M ? *r0 + o->off[g] : o->off[g];
}

static void make_ops(const gcase *c, gops *o)
{
    memset(o, 0, sizeof *o);
    const int glu = c->act == FP8KIT_ACT_SWIGLU;
    const int64_t G = c->g, N = c->n, K = c->k;
    o->G = G, o->N = N, o->K = K;
    o->M = c->masked ? c->rows : 0;
    o->T = c->masked ? G * c->rows : c->rows;
    o->nd = glu ? N / 2 : N;
    o->lda = K + c->apad;
    o->ldd = o->nd + c->dpad;
    o->brows = N + c->bpad;
    o->kb = (K + 127) / 128, o->nb = (N + 127) / 128;
    o->e8 = c->sa == FP8KIT_SCALE_MX;
    const int64_t T = o->T;
    o->off = (int32_t *)malloc(sizeof(int32_t) * (size_t)G);
    memcpy(o->off, c->off, sizeof(int32_t) * (size_t)G);
    o->owner = (int64_t *)malloc(sizeof(int64_t) * (size_t)T);
    for (int64_t m = 0; m < T; m++)
        o->owner[m] = -1;
    for (int64_t g = 0; g < G; g++) {
        int64_t r0, r1;
        group_rows(o, g, &r0, &r1);
        for (int64_t m = r0; m < r1; m++)
            o->owner[m] = g, o->owned++;
    }
    /* exact inputs (c->exact, K <= 256): codes of the integers -3 .. 3 (exact in e4m3 and e5m2),
     * scales 2^-2 .. 2^0, alpha and scale_in powers of two, bias integers -4 .. 4 (exact in f32,
     * bf16, f16). Every accumulator is an integer of at most 9 * 256 = 2304 (12 bits: the tensor
     * cores' fast accumulation keeps it too) or a sum of those times 2^-4 .. 2^0 (block / MX
     * scales), alpha and the scales only shift it and the bias adds a small integer: y needs
     * at most ~20 bits, so each store path's fp32 formula (fl(acc * sa * sb) in double, alpha, then
     * the bias; or fma(acc, fl(alpha * sa * sb), bias)) gives the same y, relu keeps it, and
     * y / scale_in is exact: every output stage must match R's bit for bit */
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 4096; i++)
            g_codes[e][i] = fk_f32_to_fp8(c->exact ? (float)((int)rnd(7) - 3) : (float)fk_rng_normal(&rng), e);
    /* A: codes, its row padding NaN (never read); rows no group owns NaN with c->garbage */
    o->a = (uint8_t *)malloc((size_t)(T * o->lda) + 16);
    for (int64_t m = 0; m < T; m++) {
        uint8_t *row = o->a + m * o->lda;
        if (c->garbage && o->owner[m] < 0)
            memset(row, 0x7F, (size_t)K);
        else
            fill_codes(row, K, c->at == FP8KIT_E5M2);
        memset(row + K, 0x7F, (size_t)c->apad);
    }
    /* B: each expert's N rows, then bpad rows of NaN codes (never read) */
    o->b = (uint8_t *)malloc((size_t)(G * o->brows * K) + 16);
    for (int64_t g = 0; g < G; g++) {
        fill_codes(o->b + g * o->brows * K, N * K, c->bt == FP8KIT_E5M2);
        memset(o->b + (g * o->brows + N) * K, 0x7F, (size_t)(c->bpad * K));
    }
    const size_t ssz = o->e8 ? 1 : 4;
    if (c->sa) {
        const int64_t per = sa_per_row(o, c->sa);
        o->sa_n = c->sa == FP8KIT_SCALE_TENSOR ? 1 : T * per;
        o->sa = malloc((size_t)o->sa_n * ssz + 4);
        fill_scales(o->sa, o->sa_n, o->e8, c->exact);
        for (int64_t m = 0; m < T && c->garbage && per; m++)
            for (int64_t j = 0; j < per && o->owner[m] < 0; j++) {
                if (o->e8)
                    ((uint8_t *)o->sa)[m * per + j] = 0xFF;
                else
                    ((float *)o->sa)[m * per + j] = NAN;
            }
    }
    if (c->sb) {
        o->sb_n = G * sb_per_expert(o, c->sb);
        o->sb = malloc((size_t)o->sb_n * ssz + 4);
        fill_scales(o->sb, o->sb_n, o->e8, c->exact);
    }
    if (c->mn)
        o->sa_mn = fk_t_mn_major((const float *)o->sa, T, o->kb, c->masked ? G : 1, &o->n_mn);
    if (c->bias) {
        o->bias = malloc(4 * (size_t)(G * N));
        for (int64_t i = 0; i < G * N; i++)
            store_hp(o->bias, i, c->biast, c->exact ? (float)((int)rnd(9) - 4) : (float)(0.5 * fk_rng_normal(&rng)));
    }
    o->scale_in = c->exact ? (float)ldexp(1.0, -(int)rnd(4)) : (float)exp2(-4.0 + 3.0 * fk_rng_unif(&rng));
    /* device copies */
    o->da = to_dev(o->a, (size_t)(T * o->lda));
    o->db = to_dev(o->b, (size_t)(G * o->brows * K));
    o->dsa = c->mn ? to_dev(o->sa_mn, 4 * (size_t)o->n_mn) : to_dev(o->sa, ssz * (size_t)o->sa_n);
    o->dsb = to_dev(o->sb, ssz * (size_t)o->sb_n);
    o->dbias = to_dev(o->bias, fp8kit_dtype_size(c->biast) * (size_t)(G * N));
    o->doff = (int32_t *)to_dev(o->off, sizeof(int32_t) * (size_t)G);
    o->dstatus = (int32_t *)dmalloc(sizeof(int32_t));
    /* the call */
    fp8kit_gemm_desc *d = &o->desc;
    d->scale_a = c->sa, d->scale_b = c->sb;
    d->scale_layout = c->mn ? FP8KIT_LAYOUT_MN_MAJOR : FP8KIT_LAYOUT_PLAIN;
    d->bias = c->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d->act = c->act;
    fp8kit_grouped_gemm_args *a = &o->dev;
    if (c->masked) {
        const int64_t as[3] = {G, o->M, K};
        a->a = fp8kit_tensor_make(o->da, c->at, 3, as);
        a->a.strides[0] = o->M * o->lda, a->a.strides[1] = o->lda, a->a.strides[2] = 1;
        a->layout = FP8KIT_GROUPED_MASKED;
    } else {
        a->a = fp8kit_tensor_2d(o->da, c->at, T, K, o->lda);
    }
    const int64_t bs[3] = {G, N, K}, gn[2] = {G, N};
    a->b = fp8kit_tensor_make(o->db, c->bt, 3, bs);
    a->b.strides[0] = o->brows * K, a->b.strides[1] = K, a->b.strides[2] = 1;
    const fp8kit_dtype sdt = o->e8 ? FP8KIT_E8M0 : FP8KIT_F32;
    if (c->sa)
        a->scale_a = c->mn ? vec(o->dsa, FP8KIT_F32, o->n_mn) : vec(o->dsa, sdt, o->sa_n);
    if (c->sb)
        a->scale_b = c->sb == FP8KIT_SCALE_ROW ? fp8kit_tensor_make(o->dsb, sdt, 2, gn) : vec(o->dsb, sdt, o->sb_n);
    if (c->bias)
        a->bias = fp8kit_tensor_make(o->dbias, c->biast, 2, gn);
    a->offsets = o->doff;
    a->status = o->dstatus;
    /* y of order 1 around 0, where silu bends (exact: a power of two near 1 / sqrt(K); the
     * integers' products have mean square 16) */
    if (c->exact)
        a->alpha = (float)ldexp(1.0, -(int)floor(0.5 * log2((double)K)) - 1 - (int)rnd(2));
    else
        a->alpha = (float)(1.5 / sqrt((double)K) / (c->sa == FP8KIT_SCALE_NONE ? 1.0 : 1.3));
}

static void free_ops(gops *o)
{
    free(o->a), free(o->b), free(o->sa), free(o->sb), free(o->bias), free(o->sa_mn), free(o->off), free(o->owner);
    cudaFree(o->da), cudaFree(o->db), cudaFree(o->dsa), cudaFree(o->dsb), cudaFree(o->dbias);
    cudaFree(o->doff), cudaFree(o->dstatus);
}

/* ------------------------------------------------------------------ one GPU call */
/* One output stage. */
typedef struct stage {
    fp8kit_dtype dt, hp;
    fp8kit_out_quant oq;
    int pow2, rceil;
    int amax; /* OUTQ_SCALED: pass amax_d */
    int fast; /* desc.fast_accum */
} stage;

/* What one call did: its status and describe's, host copies of D and scale_d (GUARD bytes more,
 * poison where not written), amax_d's bits (POISON32 when not given or not written), the status
 * word (JUNK when not given or not written). */
typedef struct run {
    fp8kit_status st, dst;
    char msg[512], plan[512];
    uint8_t *d, *sd;
    size_t dbytes, sdbytes; /* without the guard */
    int64_t sd_cols;        /* output scales per row of D */
    uint32_t amax;
    int32_t status;
} run;

enum { RUN_NO_STATUS = 1 };

static void free_run(run *r) { free(r->d), free(r->sd); }

static fp8kit_gemm_desc stage_desc(const gops *o, const stage *s)
{
    fp8kit_gemm_desc d = o->desc;
    d.out_quant = s->oq;
    d.out_hp = s->hp;
    d.out_pow2 = s->pow2;
    d.out_rounding = s->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    d.fast_accum = s->fast;
    return d;
}

/* The case's grouped call with output stage s into poisoned device D, scale_d and amax_d (and the
 * status word set to JUNK), with the workspace the size query asks for; describe first. */
static void run_stage(const gops *o, const stage *s, int flags, run *r)
{
    memset(r, 0, sizeof *r);
    const fp8kit_gemm_desc ds = stage_desc(o, s);
    fp8kit_grouped_gemm_args a = o->dev;
    const size_t es = fp8kit_dtype_size(s->dt);
    r->dbytes = es * (size_t)(o->T * o->ldd);
    uint8_t *dd = (uint8_t *)dmalloc(r->dbytes + GUARD), *dsd = NULL;
    float *dsin = NULL, *damax = NULL;
    CHECK(cudaMemset(dd, FK_POISON, r->dbytes + GUARD) == cudaSuccess, "memset");
    if (o->M) {
        const int64_t sh[3] = {o->G, o->M, o->nd};
        a.d = fp8kit_tensor_make(dd, s->dt, 3, sh);
        a.d.strides[0] = o->M * o->ldd, a.d.strides[1] = o->ldd, a.d.strides[2] = 1;
    } else {
        a.d = fp8kit_tensor_2d(dd, s->dt, o->T, o->nd, o->ldd);
    }
    if (s->oq == FP8KIT_OUTQ_MX || s->oq == FP8KIT_OUTQ_BLOCK1X128) {
        fp8kit_dtype sdt = FP8KIT_F32;
        int64_t sh[2] = {0, 0};
        if (fp8kit_gemm_scale_shape(&ds, 2, o->T, o->N, &sdt, sh) == FP8KIT_OK) {
            CHECK(sh[0] == o->T && sh[1] == (s->oq == FP8KIT_OUTQ_MX ? o->nd / 32 : (o->nd + 127) / 128),
                  "fp8kit_gemm_scale_shape: scale_d %lld x %lld for T %lld, D's %lld columns", (long long)sh[0],
                  (long long)sh[1], (long long)o->T, (long long)o->nd);
        } else { /* OUTQ_MX over D columns not a multiple of 32 (refused): one scale per row */
            sdt = FP8KIT_E8M0, sh[0] = o->T, sh[1] = 1;
        }
        r->sd_cols = sh[1];
        r->sdbytes = fp8kit_dtype_size(sdt) * (size_t)(sh[0] * sh[1]);
        dsd = (uint8_t *)dmalloc(r->sdbytes + GUARD);
        CHECK(cudaMemset(dsd, FK_POISON, r->sdbytes + GUARD) == cudaSuccess, "memset");
        a.scale_d = fp8kit_tensor_make(dsd, sdt, 2, sh);
    } else if (s->oq == FP8KIT_OUTQ_SCALED) {
        dsin = (float *)to_dev(&o->scale_in, 4);
        a.scale_d = fp8kit_tensor_make(dsin, FP8KIT_F32, 0, NULL);
        if (s->amax) {
            damax = (float *)dmalloc(4);
            CHECK(cudaMemset(damax, FK_POISON, 4) == cudaSuccess, "memset");
            a.amax_d = damax;
        }
    }
    if (flags & RUN_NO_STATUS) {
        a.status = NULL;
    } else {
        const int32_t junk = JUNK;
        h2d(o->dstatus, &junk, 4);
    }
    size_t wsb = 0;
    void *ws = NULL;
    if (fp8kit_grouped_gemm_workspace_size(g_gpu, &ds, &a, &wsb) == FP8KIT_OK && wsb) {
        ws = dmalloc(wsb);
        a.workspace = ws;
        a.workspace_bytes = wsb;
    }
    r->dst = fp8kit_grouped_gemm_describe(g_gpu, &ds, &a, r->plan, sizeof r->plan);
    r->st = fp8kit_grouped_gemm(g_gpu, &ds, &a, NULL);
    snprintf(r->msg, sizeof r->msg, "%s", r->st ? fp8kit_last_error(g_gpu) : "");
    const cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == cudaSuccess, "device error after the grouped GEMM: %s", cudaGetErrorString(e));
    r->d = (uint8_t *)malloc(r->dbytes + GUARD);
    r->sd = (uint8_t *)malloc(r->sdbytes + GUARD);
    d2h(r->d, dd, r->dbytes + GUARD);
    if (dsd)
        d2h(r->sd, dsd, r->sdbytes + GUARD);
    else
        fk_poison(r->sd, r->sdbytes + GUARD);
    r->amax = POISON32;
    if (damax)
        d2h(&r->amax, damax, 4);
    r->status = JUNK;
    if (!(flags & RUN_NO_STATUS))
        d2h(&r->status, o->dstatus, 4);
    cudaFree(dd), cudaFree(dsd), cudaFree(dsin), cudaFree(damax), cudaFree(ws);
}

/* ------------------------------------------------------------------ checks */
static void stage_name(const char *name, const stage *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s / %s %s hp %s%s%s%s%s", name, fp8kit_dtype_name(s->dt), fp8kit_out_quant_name(s->oq),
             fp8kit_dtype_name(s->hp), s->pow2 ? " pow2" : "", s->rceil ? " rceil" : "", s->amax ? " amax_d" : "",
             s->fast ? " fast_accum" : "");
}

/* (4) the plan of a call that ran names the family. */
static void check_plan(const run *x, int glu, const char *name)
{
    const char *want = glu ? "sm90_glu_grouped" : "sm90_grouped";
    const size_t n = strlen(want);
    CHECK(x->dst == FP8KIT_OK && !strncmp(x->plan, want, n) && (x->plan[n] == ' ' || x->plan[n] == 0),
          "[%s] describe: %s '%s', want the %s family", name, fp8kit_status_string(x->dst), x->plan, want);
}

/* (3) rows no group owns, D's row padding and the guard past D still poison (es: bytes per element). */
static void check_unowned(const gops *o, const run *x, size_t es, const char *name)
{
    int64_t rows = 0, pads = 0;
    for (int64_t m = 0; m < o->T; m++) {
        const uint8_t *row = x->d + es * (size_t)(m * o->ldd);
        if (o->owner[m] < 0)
            rows += !fk_is_poisoned(row, es * (size_t)o->ldd);
        else
            pads += !fk_is_poisoned(row + es * (size_t)o->nd, es * (size_t)(o->ldd - o->nd));
    }
    CHECK(rows == 0 && pads == 0 && fk_is_poisoned(x->d + x->dbytes, GUARD),
          "[%s] %lld rows no group owns written, %lld rows' padding written, guard past D %s", name, (long long)rows,
          (long long)pads, fk_is_poisoned(x->d + x->dbytes, GUARD) ? "untouched" : "written");
}

/* A refused call (or one whose offsets the kernel rejects) wrote no byte of D or scale_d. */
static void check_nothing_written(const run *x, const char *name)
{
    CHECK(fk_is_poisoned(x->d, x->dbytes + GUARD), "[%s] D was written", name);
    CHECK(fk_is_poisoned(x->sd, x->sdbytes + GUARD), "[%s] scale_d was written", name);
}

/* got against want over the valid bytes and the guard (rows of row_bytes, the first col_bytes of
 * each D's columns): the count of differing bytes, how many lie in D's columns of rows groups own,
 * and where the first is. */
static void compare(const gops *o, const char *name, const char *what, const uint8_t *got, const uint8_t *want,
                    size_t valid, size_t row_bytes, size_t col_bytes)
{
    size_t first = 0, count = 0, owned = 0;
    for (size_t x = 0; x < valid + GUARD; x++)
        if (got[x] != want[x]) {
            if (count++ == 0)
                first = x;
            owned += x < valid && row_bytes && o->owner[x / row_bytes] >= 0 && x % row_bytes < col_bytes;
        }
    if (!count) {
        fk_t_pass++;
        return;
    }
    char where[200];
    if (first >= valid || !row_bytes) {
        snprintf(where, sizeof where, "in the guard past the end");
    } else {
        const int64_t m = (int64_t)(first / row_bytes), b = (int64_t)(first % row_bytes);
        if (o->owner[m] < 0)
            snprintf(where, sizeof where, "in row %lld, which no group owns", (long long)m);
        else
            snprintf(where, sizeof where, "in row %lld (group %lld), byte %lld of the row%s", (long long)m,
                     (long long)o->owner[m], (long long)b, (size_t)b < col_bytes ? "" : " (its padding)");
    }
    CHECK(0,
          "[%s] %s differs from the output stage of the f32 run: %zu bytes (%zu in rows groups own); the first %s: "
          "%02x, want %02x",
          name, what, count, owned, where, got[first], want[first]);
}

/* (2) the bytes stage s must write into D (row stride ldd) and its output scales (sd_cols per
 * row), and amax_d's bits, from R's f32 rows by outstage_expect.h; poison elsewhere. */
static void expected(const gops *o, const stage *s, const float *r, const run *x, uint8_t *d, uint8_t *sd,
                     uint32_t *amax)
{
    const fk_outstage os = {s->dt, s->hp, s->oq, s->pow2, s->rceil, o->scale_in};
    const size_t es = fp8kit_dtype_size(s->dt), ss = s->oq == FP8KIT_OUTQ_MX ? 1 : 4;
    fk_poison(d, x->dbytes + GUARD);
    fk_poison(sd, x->sdbytes + GUARD);
    float *row = (float *)malloc(sizeof(float) * (size_t)o->nd + 4);
    uint32_t am = 0;
    for (int64_t m = 0; m < o->T; m++) {
        if (o->owner[m] < 0)
            continue;
        memcpy(row, r + m * o->ldd, sizeof(float) * (size_t)o->nd);
        fk_outstage_row(&os, row, o->nd, d + es * (size_t)(m * o->ldd), sd + ss * (size_t)(m * x->sd_cols), &am);
    }
    *amax = am;
    free(row);
}

/* Group g's rows r0 .. r0 + rows - 1 as one dense GEMM on the host copies (plain scales, act none,
 * no output stage): the oracle's view. */
static void group_view(const gcase *c, const gops *o, int64_t g, int64_t r0, int64_t rows, fp8kit_gemm_desc *d,
                       fp8kit_gemm_args *v)
{
    *d = o->desc;
    d->scale_layout = FP8KIT_LAYOUT_PLAIN;
    d->act = FP8KIT_ACT_NONE;
    d->out_quant = FP8KIT_OUTQ_NONE;
    memset(v, 0, sizeof *v);
    v->a = fp8kit_tensor_2d(o->a + r0 * o->lda, c->at, rows, o->K, o->lda);
    v->b = fp8kit_tensor_2d(o->b + g * o->brows * o->K, c->bt, o->N, o->K, o->K);
    const fp8kit_dtype sdt = o->e8 ? FP8KIT_E8M0 : FP8KIT_F32;
    const int64_t ssz = o->e8 ? 1 : 4, pa = sa_per_row(o, c->sa), pb = sb_per_expert(o, c->sb);
    if (c->sa == FP8KIT_SCALE_TENSOR)
        v->scale_a = vec(o->sa, FP8KIT_F32, 1);
    else if (c->sa)
        v->scale_a = vec((uint8_t *)o->sa + ssz * r0 * pa, sdt, rows * pa);
    if (c->sb)
        v->scale_b = vec((uint8_t *)o->sb + ssz * g * pb, sdt, pb);
    if (c->bias)
        v->bias = vec((uint8_t *)o->bias + (int64_t)fp8kit_dtype_size(c->biast) * g * o->N, c->biast, o->N);
    v->alpha = o->dev.alpha;
}

/* (1) r (f32 values of D, row stride ldd) against the fp64 oracle on the rows groups own: all of
 * them, or when rows x columns x K passes budget a sample of D's columns (with the first and the
 * last) and of each group's rows (with its first and last). rr: the output's relative rounding
 * (0 for f32). Per element: |D - oracle| within 2^-11 of the sum of |terms| (times alpha) of each
 * y it is made of, fp32 roundings of the epilogue, carried through silu * up or the activation;
 * MX inputs: the relative Frobenius bound of tests/test_cuda_grouped.c (2e-3 f32, 4e-3 bf16). */
static void check_oracle(const gcase *c, const gops *o, const float *r, double rr, double budget, const char *name)
{
    const int glu = c->act == FP8KIT_ACT_SWIGLU, mx = c->sa == FP8KIT_SCALE_MX;
    const int64_t h = o->nd, K = o->K, per = glu ? 2 : 1;
    int64_t nj = h;
    int64_t *js = (int64_t *)malloc(sizeof(int64_t) * (size_t)(h + 2));
    for (int64_t j = 0; j < h; j++)
        js[j] = j;
    if (h > 96 && (double)o->owned * (double)(h * per * K) > budget) {
        nj = 96;
        js[0] = 0, js[1] = h - 1;
        for (int64_t i = 2; i < nj; i++)
            js[i] = (int64_t)rnd((uint32_t)h);
    }
    const int64_t nc = nj * per;
    int64_t *cols = (int64_t *)malloc(sizeof(int64_t) * (size_t)nc);
    for (int64_t i = 0; i < nj; i++) {
        cols[i] = js[i];
        if (glu)
            cols[nj + i] = js[i] + h;
    }
    const double per_row = (double)nc * (double)K;
    const int64_t cap = (int64_t)fmax(1.0, budget / per_row), all = o->owned <= cap;
    const double alpha = fabs((double)o->dev.alpha), eps = 1.0 / 2048;
    int64_t bad = 0, checked = 0;
    fk_ref_norm norm;
    memset(&norm, 0, sizeof norm);
    for (int64_t g = 0; g < o->G; g++) {
        int64_t r0, r1;
        group_rows(o, g, &r0, &r1);
        const int64_t R = r1 - r0;
        if (R <= 0)
            continue;
        int64_t nr = all ? R : (int64_t)fmin((double)R, fmax(2.0, (double)cap * (double)R / (double)o->owned));
        int64_t *rows = (int64_t *)malloc(sizeof(int64_t) * (size_t)nr);
        for (int64_t i = 0; i < nr; i++)
            rows[i] = nr == R ? i : i == 0 ? 0 : i == 1 ? R - 1 : (int64_t)rnd((uint32_t)R);
        fp8kit_gemm_desc dl;
        fp8kit_gemm_args v;
        group_view(c, o, g, r0, R, &dl, &v);
        double *acc = (double *)malloc(sizeof(double) * (size_t)(nr * nc));
        double *sabs = (double *)malloc(sizeof(double) * (size_t)(nr * nc));
        const int rs = fk_ref_gemm_acc(&dl, &v, rows, nr, cols, nc, acc, sabs);
        CHECK(rs == FK_REF_OK, "[%s] the oracle refused group %lld (%d)", name, (long long)g, rs);
        for (int64_t i = 0; i < nr && rs == FK_REF_OK; i++) {
            const int64_t m = r0 + rows[i];
            for (int64_t jj = 0; jj < nj; jj++) {
                const int64_t j = js[jj];
                const double got = r[m * o->ldd + j];
                double want, tol;
                fk_ref_parts p, pu;
                const double y = fk_ref_epilogue(&dl, &v, rows[i], j, acc[i * nc + jj], &p);
                const double ty = eps * alpha * sabs[i * nc + jj] + 8 * U32 * (fabs(p.bias) + fabs(y));
                if (glu) {
                    const double u = fk_ref_epilogue(&dl, &v, rows[i], j + h, acc[i * nc + nj + jj], &pu);
                    const double tu = eps * alpha * sabs[i * nc + nj + jj] + 8 * U32 * (fabs(pu.bias) + fabs(u));
                    const double sg = y / (1.0 + exp(-y));
                    want = fk_ref_swiglu(y, u);
                    tol = 1.1 * ty * (fabs(u) + tu) + fabs(sg) * tu + 64 * U32 * (fabs(y) + fabs(sg)) * fabs(u) +
                          (8 * U32 + rr) * fabs(want) + 1e-30;
                } else {
                    want = fk_ref_act(y, c->act);
                    const double ta = c->act == FP8KIT_ACT_NONE || c->act == FP8KIT_ACT_RELU
                                          ? 0.0
                                          : 64 * U32 * (fabs(y) + fabs(want));
                    tol = 1.2 * ty + ta + (8 * U32 + rr) * fabs(want) + 1e-30;
                }
                checked++;
                if (mx) {
                    fk_ref_norm_add(&norm, got, want);
                } else if (!(fabs(got - want) <= tol) && bad++ < 3) {
                    fprintf(stderr, "  [%s] D[%lld, %lld] (group %lld) = %.9g, oracle %.9g, tol %.3g\n", name,
                            (long long)m, (long long)j, (long long)g, got, want, tol);
                }
            }
        }
        free(rows), free(acc), free(sabs);
    }
    if (mx) {
        const double rel = fk_ref_norm_rel(&norm), bound = rr > 0 ? 4e-3 : 2e-3;
        CHECK(rel <= bound && !norm.nan_extra && !norm.nan_missing,
              "[%s] rel %.3g to the oracle over %lld elements (bound %.3g), %lld NaN extra, %lld NaN missing", name,
              rel, (long long)checked, bound, (long long)norm.nan_extra, (long long)norm.nan_missing);
    } else {
        CHECK(bad == 0, "[%s] %lld of %lld elements outside the oracle's bound", name, (long long)bad,
              (long long)checked);
    }
    free(js), free(cols);
}

/* ------------------------------------------------------------------ a case */
static const stage k_stages[] = {
    {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0},
    {FP8KIT_F16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 1, 0},
    {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_MX, 0, 0, 0, 0},
    {FP8KIT_E5M2, FP8KIT_BF16, FP8KIT_OUTQ_MX, 0, 1, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F16, FP8KIT_OUTQ_MX, 0, 1, 0, 0},
    {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0, 0},
    {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 1, 0, 0, 0},
    {FP8KIT_E5M2, FP8KIT_F16, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0, 0},
};
#define NSTAGES ((int)(sizeof k_stages / sizeof k_stages[0]))

/* ------------------------------------------------------------------ part (b): the tolerance */
/* Part (b) outside the exact cases. R (f32 D) and an output stage of the ordinary grouped GEMM
 * may take different store paths, which form y in fp32 differently (by design): the general
 * path with a bias, an activation or OUTQ_SCALED (store_general.cuh) rounds s = acc * sa * sb
 * once from double, then alpha * s, then adds the bias; the lean general path, the bulk bf16 /
 * f16 path (store_bulk.cuh) and the fused row quantization (epilogue_quant.cuh) take
 * fma(acc, f, bias) with f = fl(alpha * sa * sb) (row scales: fl(sa * f), one more rounding).
 * With T = alpha * acc * sa * sb, each path's y before the activation lies within
 * 2u |T| + u |y| of T + bias (u = 2^-24: two roundings of the product, one of the sum), so two
 * paths differ by at most 4u |T| + 2u |y| <= 6u |y| + 4u |b| (|T| <= |y| + |b|, b the bias):
 * mostly 0 or 1 ulp of y, but many ulps where the bias cancels T. The bound delta on the paths'
 * difference in D's value (r: R's element, b: its bias):
 *  - act none or relu (1-Lipschitz; a relu zero moves only from y in (-delta, 0]):
 *    delta = 8u (|r| + |b|);
 *  - gelu_tanh, gelu_erf, silu (fk_act's formulas): slopes <= 1.13, so 10u |b| from the bias;
 *    from y, 8u |act'(y) y| = 8u |act(y)| |y act'(y) / act(y)|, with |y act'(y) / act(y)| <= 1.3
 *    for y > 0 and below 240 for y < 0 while act(y) is not 0 in fp32 (gelu_tanh's 2^z overflows
 *    past y = -10.1, silu's past y = -89, fp32's erf is -1 past y = -5.6); and the activation's
 *    own fp32 roundings at two nearby inputs (the GPU's 2^x and 1 / x estimates, erff within
 *    2 ulps): up to ~16u |r|, for y < 0 up to ~2 * 128 ln 2 u |r| more (2^z from z rounded).
 *    So r > 0: delta = 10u |b| + 48u |r|; else delta = 10u |b| + 2^-12 |r| + 2^-120 (y / (1 + 2^z)
 *    just before 2^z overflows), and for gelu_erf 2^-20 more (0.5 y (1 + erf(y / sqrt 2)) with
 *    erf near -1 moves in steps of 2^-25 |y|: five of them for |y| < 5.6 stay below 2^-20).
 * Each output stage is monotone in the value, so the stage's element must lie between the stage
 * of fl(r - delta) and that of fl(r + delta) by fk_outstage_row's rules, codes taken as ordered
 * integers (sign and magnitude, +0 and -0 alike; NaN only where R's stage has it). With delta
 * under half an output step that is R's code or, only where r lies within delta of a rounding
 * boundary, its neighbour: one bf16 / f16 ulp, one fp8 code step. More than one only where the
 * bias cancels y (f16's subnormals; bf16 where |y| < 2^-15 |b|): a plain one-step rule would
 * refuse those. Output scales (OUTQ_MX, OUTQ_BLOCK1X128): the group's amax (over the values
 * rounded to out_hp) lies between the largest lower and the largest upper end of the elements'
 * |value| ranges and the scale rules are monotone in it (1x128's amax 0 gives 1), so the GPU's
 * scale must lie between the scales of those two ends: equal, or one e8m0 step / one power of
 * two (pow2) apart only where the group's amax sits within delta of a power-of-two boundary, an
 * f32 scale a few ulps apart; the group's codes are then checked with the GPU's own scale.
 * amax_d (OUTQ_SCALED): between the largest lower and upper ends of |r| -+ delta (a few fp32
 * ulps). Besides, the owned elements of D not bit-exact to R's stage are counted: more than 1%
 * of a stage's (plus one scale group's width for MX / 1x128 and 2 otherwise, for small stages)
 * fails, as those differences are rare (about 1 in 10^4 elements on the H200) and a store path
 * drifting from the others makes many. Rows no group owns, D's padding, scale_d's rows no group
 * owns and the guards: byte-equal, as in the exact check. */
static struct {
    long stages, exact;            /* part (b) stages checked with the tolerance, bit-exact ones */
    int64_t elems, ne;             /* their owned elements of D; those not bit-exact */
    int64_t scales, scales_ne;     /* output scales (MX / 1x128); those not bit-exact */
    int64_t amax, amax_ne;         /* amax_d checked; not bit-exact */
    double worst;                  /* the largest share of D's elements not bit-exact in a stage */
    char worst_name[400];          /* that stage */
} g_tol;

/* delta of element (m, j) whose value in R is r (above). */
static double tol_delta(const gcase *c, const gops *o, int64_t m, int64_t j, float r)
{
    const double u = 0x1p-24, a = fabs((double)r);
    const double b = c->bias ? fabs(load_hp(o->bias, o->owner[m] * o->N + j, c->biast)) : 0.0;
    if (c->act == FP8KIT_ACT_NONE || c->act == FP8KIT_ACT_RELU)
        return 8 * u * (a + b) + 0x1p-148;
    if (r > 0.0f)
        return 10 * u * b + 48 * u * a;
    return 10 * u * b + 0x1p-12 * a + 0x1p-120 + (c->act == FP8KIT_ACT_GELU_ERF ? 0x1p-20 : 0.0);
}

/* The element (bf16 / f16 bits, fp8 code) stage s stores for value v: the cast, v / scale_in, or v
 * rounded to out_hp and quantized with the output scale mxs (e8m0) or bsc (1x128). */
static uint32_t stage_code(const stage *s, float scale_in, float v, uint8_t mxs, float bsc)
{
    const int e5 = s->dt == FP8KIT_E5M2;
    if (s->dt == FP8KIT_BF16)
        return fk_f32_to_bf16(v);
    if (s->dt == FP8KIT_F16)
        return fk_f32_to_f16(v);
    if (s->oq == FP8KIT_OUTQ_MX)
        return fk_quant_mx_elem(fk_outstage_hp(v, s->hp), fk_mx_recip(mxs), e5);
    if (s->oq == FP8KIT_OUTQ_BLOCK1X128)
        return fk_quant_f32_elem(fk_outstage_hp(v, s->hp), bsc, e5);
    return fk_quant_f32_elem(v, scale_in, e5);
}

/* An element as an ordered integer (sign and magnitude; +0 and -0 alike): neighbours differ by 1. */
static int64_t code_key(uint32_t q, fp8kit_dtype dt)
{
    const uint32_t sign = dt == FP8KIT_BF16 || dt == FP8KIT_F16 ? 0x8000u : 0x80u, mag = q & (sign - 1);
    return q & sign ? -(int64_t)mag : (int64_t)mag;
}
static int code_nan(uint32_t q, fp8kit_dtype dt)
{
    switch (dt) {
    case FP8KIT_BF16: return (q & 0x7FFFu) > 0x7F80u;
    case FP8KIT_F16: return (q & 0x7FFFu) > 0x7C00u;
    case FP8KIT_E5M2: return (q & 0x7Fu) > 0x7Cu;
    default: return (q & 0x7Fu) == 0x7Fu;
    }
}

/* The range of |v| (fp32 bits) for v in [lo, hi]. */
static void abs_range(float lo, float hi, uint32_t *amin, uint32_t *amax)
{
    const uint32_t a = fk_abs_bits(lo), b = fk_abs_bits(hi);
    if (lo >= 0.0f)
        *amin = a, *amax = b;
    else if (hi <= 0.0f)
        *amin = b, *amax = a;
    else
        *amin = 0, *amax = fk_max_u32(a, b);
}

/* (2) part (b) outside the exact cases: stage s's run x against R's values r with the tolerance
 * above; want, sdw, amax: R's stage by expected() (want and sdw are overwritten). */
static void check_tolerant(const gcase *c, const gops *o, const stage *s, const float *r, const run *x,
                           uint8_t *want, uint8_t *sdw, uint32_t amax, const char *name)
{
    const int mx = s->oq == FP8KIT_OUTQ_MX, rowq = mx || s->oq == FP8KIT_OUTQ_BLOCK1X128;
    const int e5 = s->dt == FP8KIT_E5M2;
    const size_t es = fp8kit_dtype_size(s->dt), ss = mx ? 1 : 4;
    const int64_t nd = o->nd, gs = rowq ? (mx ? 32 : 128) : nd;
    float *lo = (float *)malloc(sizeof(float) * (size_t)nd + 4);
    float *hi = (float *)malloc(sizeof(float) * (size_t)nd + 4);
    int64_t elems = 0, ne = 0, bad = 0, nsc = 0, sne = 0, sbad = 0;
    uint32_t am_lo = 0, am_hi = 0;
    for (int64_t m = 0; m < o->T; m++) {
        if (o->owner[m] < 0)
            continue;
        const float *rv = r + m * o->ldd;
        const uint8_t *gd = x->d + es * (size_t)(m * o->ldd);
        uint8_t *wd = want + es * (size_t)(m * o->ldd);
        for (int64_t j = 0; j < nd; j++) {
            const double d = tol_delta(c, o, m, j, rv[j]);
            lo[j] = (float)((double)rv[j] - d);
            hi[j] = (float)((double)rv[j] + d);
            uint32_t a0, a1;
            abs_range(lo[j], hi[j], &a0, &a1);
            am_lo = fk_max_u32(am_lo, a0), am_hi = fk_max_u32(am_hi, a1);
        }
        for (int64_t j0 = 0; j0 < nd; j0 += gs) {
            const int64_t j1 = j0 + gs < nd ? j0 + gs : nd;
            uint8_t mxs = 0;
            float bsc = 0.0f;
            int sok = 1, same = 1; /* the GPU's scale in range; equal to R's stage's */
            if (rowq) {
                uint32_t glo = 0, ghi = 0;
                for (int64_t j = j0; j < j1; j++) {
                    uint32_t a0, a1;
                    abs_range(fk_outstage_hp(lo[j], s->hp), fk_outstage_hp(hi[j], s->hp), &a0, &a1);
                    glo = fk_max_u32(glo, a0), ghi = fk_max_u32(ghi, a1);
                }
                const size_t at = ss * (size_t)(m * x->sd_cols + j0 / gs);
                same = !memcmp(x->sd + at, sdw + at, ss);
                nsc++, sne += !same;
                if (mx) {
                    mxs = x->sd[at];
                    sok = mxs >= fk_mx_scale(glo, e5, s->rceil) && mxs <= fk_mx_scale(ghi, e5, s->rceil);
                } else {
                    memcpy(&bsc, x->sd + at, 4);
                    const float shi = fk_scale_f32(ghi, e5, s->pow2);
                    /* amax 0 gives 1 (all zeros), else the scale grows with amax */
                    sok = glo ? bsc >= fk_scale_f32(glo, e5, s->pow2) && bsc <= shi
                              : bsc == 1.0f || (ghi && bsc >= fk_scale_f32(1u, e5, s->pow2) && bsc <= shi);
                }
                if (!sok && sbad++ < 3) {
                    uint32_t gb = 0, wb = 0;
                    memcpy(&gb, x->sd + at, ss), memcpy(&wb, sdw + at, ss);
                    fprintf(stderr,
                            "  [%s] scale_d[%lld, %lld] (group %lld) = %0*x, the f32 run's %0*x: outside the scales "
                            "of the group's amax range %08x .. %08x\n",
                            name, (long long)m, (long long)(j0 / gs), (long long)o->owner[m], (int)(2 * ss),
                            (unsigned)gb, (int)(2 * ss), (unsigned)wb, (unsigned)glo, (unsigned)ghi);
                }
                memcpy(sdw + at, x->sd + at, ss); /* the rest of scale_d: byte for byte below */
            }
            for (int64_t j = j0; j < j1; j++) {
                uint32_t q = 0, w = 0;
                memcpy(&q, gd + es * (size_t)j, es);
                memcpy(&w, wd + es * (size_t)j, es);
                elems++;
                ne += q != w;
                memcpy(wd + es * (size_t)j, gd + es * (size_t)j, es); /* the rest of D: byte for byte below */
                if ((q == w && same) || !sok) /* R's stage; a scale out of range is reported above */
                    continue;
                const uint32_t ql = stage_code(s, o->scale_in, lo[j], mxs, bsc);
                const uint32_t qh = stage_code(s, o->scale_in, hi[j], mxs, bsc);
                const int64_t k = code_key(q, s->dt);
                const int ok = !code_nan(q, s->dt) && !code_nan(ql, s->dt) && !code_nan(qh, s->dt) &&
                               code_key(ql, s->dt) <= k && k <= code_key(qh, s->dt);
                if (!ok && bad++ < 3)
                    fprintf(stderr,
                            "  [%s] D[%lld, %lld] (group %lld) = %0*x, the f32 run's stage %0*x (y %.9g): outside "
                            "%0*x .. %0*x (y -+ %.3g%s)\n",
                            name, (long long)m, (long long)j, (long long)o->owner[m], (int)(2 * es), (unsigned)q,
                            (int)(2 * es), (unsigned)w, (double)rv[j], (int)(2 * es), (unsigned)ql, (int)(2 * es),
                            (unsigned)qh, tol_delta(c, o, m, j, rv[j]), same ? "" : ", with the GPU's scale");
            }
        }
    }
    free(lo), free(hi);
    CHECK(bad == 0, "[%s] %lld of %lld elements of D outside the tolerance around the f32 run's output stage", name,
          (long long)bad, (long long)elems);
    if (rowq)
        CHECK(sbad == 0, "[%s] %lld of %lld output scales outside the tolerance around the f32 run's", name,
              (long long)sbad, (long long)nsc);
    const int64_t limit = elems / 100 + (rowq ? (gs < nd ? gs : nd) : 2);
    CHECK(ne <= limit,
          "[%s] %lld of %lld elements of D differ from the f32 run's output stage (at most %lld: 1%%): more than the "
          "rare 1-ulp differences of the store paths' y",
          name, (long long)ne, (long long)elems, (long long)limit);
    compare(o, name, "D", x->d, want, x->dbytes, es * (size_t)o->ldd, es * (size_t)nd);
    if (rowq)
        compare(o, name, "scale_d", x->sd, sdw, x->sdbytes, ss * (size_t)x->sd_cols, ss * (size_t)x->sd_cols);
    if (s->oq == FP8KIT_OUTQ_SCALED && s->amax) {
        CHECK(x->amax >= am_lo && x->amax <= am_hi,
              "[%s] amax_d %.9g (%08x), want %.9g (%08x) .. %.9g (%08x) around the f32 run's %.9g (%08x): max |D| over "
              "the %lld rows groups own",
              name, fk_t_u2f(x->amax), (unsigned)x->amax, fk_t_u2f(am_lo), (unsigned)am_lo, fk_t_u2f(am_hi),
              (unsigned)am_hi, fk_t_u2f(amax), (unsigned)amax, (long long)o->owned);
        g_tol.amax++, g_tol.amax_ne += x->amax != amax;
    }
    g_tol.stages++;
    g_tol.elems += elems, g_tol.ne += ne, g_tol.scales += nsc, g_tol.scales_ne += sne;
    if (elems && (double)ne / (double)elems > g_tol.worst) {
        g_tol.worst = (double)ne / (double)elems;
        snprintf(g_tol.worst_name, sizeof g_tol.worst_name, "%s", name);
    }
}

/* One output stage of the case against R's values (r). */
static void run_one_stage(const gcase *c, const gops *o, const stage *s, const float *r, const char *name)
{
    const int glu = c->act == FP8KIT_ACT_SWIGLU, mxin = c->sa == FP8KIT_SCALE_MX;
    char sname[400];
    stage_name(name, s, sname, sizeof sname);
    run x;
    run_stage(o, s, 0, &x);
    if (s->oq == FP8KIT_OUTQ_MX && o->nd % 32) { /* host-checked: D's columns */
        CHECK(x.st == FP8KIT_ERR_INVALID_SHAPE && strstr(x.msg, "OUTQ_MX"),
              "[%s] OUTQ_MX over %lld columns: %s (%s), want INVALID_SHAPE", sname, (long long)o->nd,
              fp8kit_status_string(x.st), x.msg);
        check_nothing_written(&x, sname);
        CHECK(x.amax == POISON32 && x.status == JUNK, "[%s] refused call wrote amax_d or the status word", sname);
        free_run(&x);
        return;
    }
    if (mxin && s->oq != FP8KIT_OUTQ_NONE) { /* (5) MX inputs with output quantization: either */
        if (x.st == FP8KIT_ERR_UNSUPPORTED) {
            g_mxq_refused++;
            check_nothing_written(&x, sname);
            CHECK(x.status == JUNK, "[%s] refused call wrote the status word", sname);
            free_run(&x);
            return;
        }
        g_mxq_ran += x.st == FP8KIT_OK;
    }
    CHECK(x.st == FP8KIT_OK, "[%s] %s (%s)", sname, fp8kit_status_string(x.st), x.msg);
    if (x.st == FP8KIT_OK) {
        check_plan(&x, glu, sname);
        CHECK(x.status == FP8KIT_OK, "[%s] status word %d after valid offsets", sname, (int)x.status);
        uint8_t *want = (uint8_t *)malloc(x.dbytes + GUARD), *sdw = (uint8_t *)malloc(x.sdbytes + GUARD);
        uint32_t amax = 0;
        expected(o, s, r, &x, want, sdw, &amax);
        if (glu || c->exact) { /* part (a), and part (b) on exact inputs: bit for bit */
            const size_t es = fp8kit_dtype_size(s->dt);
            const size_t ss = (s->oq == FP8KIT_OUTQ_MX ? 1 : 4) * (size_t)x.sd_cols;
            compare(o, sname, "D", x.d, want, x.dbytes, es * (size_t)o->ldd, es * (size_t)o->nd);
            if (s->oq == FP8KIT_OUTQ_MX || s->oq == FP8KIT_OUTQ_BLOCK1X128)
                compare(o, sname, "scale_d", x.sd, sdw, x.sdbytes, ss, ss);
            if (s->oq == FP8KIT_OUTQ_SCALED && s->amax)
                CHECK(x.amax == amax,
                      "[%s] amax_d %.9g (%08x), want %.9g (%08x): max |D| over the %lld rows groups own", sname,
                      fk_t_u2f(x.amax), (unsigned)x.amax, fk_t_u2f(amax), (unsigned)amax, (long long)o->owned);
            g_tol.exact += !glu;
        } else {
            check_tolerant(c, o, s, r, &x, want, sdw, amax, sname);
        }
        free(want), free(sdw);
    }
    free_run(&x);
}

/* The whole check of one case: R, the oracle, the fast bf16 run (swiglu), every output stage. */
static void run_case(const gcase *c, const char *name, double budget)
{
    gops o;
    make_ops(c, &o);
    const int glu = c->act == FP8KIT_ACT_SWIGLU;
    const stage sr = {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 1};
    run R;
    run_stage(&o, &sr, 0, &R);
    CHECK(R.st == FP8KIT_OK, "[%s] f32 D (fast_accum): %s (%s)", name, fp8kit_status_string(R.st), R.msg);
    printf("  %s\n    %.100s\n", name, R.st == FP8KIT_OK ? R.plan : R.msg);
    if (R.st == FP8KIT_OK) {
        char fname[400];
        snprintf(fname, sizeof fname, "%s / f32", name);
        check_plan(&R, glu, fname);
        CHECK(R.status == FP8KIT_OK, "[%s] status word %d after valid offsets", fname, (int)R.status);
        check_unowned(&o, &R, 4, fname);
        const float *r = (const float *)R.d;
        check_oracle(c, &o, r, 0.0, budget, fname);
        if (glu && c->sa != FP8KIT_SCALE_BLOCK && c->sa != FP8KIT_SCALE_MX) {
            /* fast accumulation (no promotion for e4m3 x e4m3), bf16 D: the oracle's bound with bf16's rounding */
            const stage sf = {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 1};
            run f;
            run_stage(&o, &sf, 0, &f);
            snprintf(fname, sizeof fname, "%s / fast bf16", name);
            CHECK(f.st == FP8KIT_OK, "[%s] %s (%s)", fname, fp8kit_status_string(f.st), f.msg);
            if (f.st == FP8KIT_OK) {
                check_plan(&f, glu, fname);
                check_unowned(&o, &f, 2, fname);
                float *fv = (float *)malloc(sizeof(float) * (size_t)(o.T * o.ldd) + 4);
                for (int64_t x = 0; x < o.T * o.ldd; x++) {
                    uint16_t b16;
                    memcpy(&b16, f.d + 2 * x, 2);
                    fv[x] = fk_bf16_to_f32(b16);
                }
                check_oracle(c, &o, fv, 1.0 / 256, budget, fname);
                free(fv);
            }
            free_run(&f);
        }
        for (int i = 0; i < NSTAGES; i++)
            run_one_stage(c, &o, &k_stages[i], r, name);
    }
    free_run(&R);
    free_ops(&o);
}

/* ------------------------------------------------------------------ drawing cases */
/* A contiguous group's row count: empty, one row, under a 64-row tile, between 64 and 128, between
 * 128 and 256, whole 64-row tiles, odd, or large (big / 2 .. big). */
static int64_t draw_size(int64_t big)
{
    switch (rnd(9)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 2 + rnd(62);
    case 3: return 65 + rnd(63);
    case 4: return 129 + rnd(127);
    case 5: return 64 * (1 + (int64_t)rnd(3));
    case 6: return 3 + 2 * (int64_t)rnd(40);
    default: return big / 2 + (int64_t)rnd((uint32_t)(big / 2 + 1));
    }
}

/* c->off (and T for the contiguous layout; masked: c->rows is M) for c->g groups; sometimes all
 * empty (allow_empty), contiguous sometimes with rows past the last end. */
static void draw_groups(gcase *c, int64_t big, int allow_empty)
{
    const int empty = allow_empty && rnd(20) == 0;
    if (c->masked) {
        const int64_t M = c->rows;
        for (int64_t g = 0; g < c->g; g++) {
            const uint32_t k = rnd(6);
            c->off[g] = (int32_t)(empty || k == 0 ? 0 : k == 1 ? M : k == 2 ? 1 : (int64_t)rnd((uint32_t)M + 1));
        }
        return;
    }
    int64_t t = 0;
    for (int64_t g = 0; g < c->g; g++) {
        t += empty ? 0 : draw_size(big);
        c->off[g] = (int32_t)t;
    }
    int64_t trail = rnd(3) == 0 ? 1 + (int64_t)rnd(150) : 0;
    if (t + trail == 0)
        trail = 1 + (int64_t)rnd(40);
    c->rows = t + trail;
}

/* scale setups: {A, B, A's mn_major}; the last (MX) for the ordinary grouped GEMM only */
static const struct {
    fp8kit_scale_mode sa, sb;
    int mn;
} k_modes[] = {
    {FP8KIT_SCALE_NONE, FP8KIT_SCALE_NONE, 0},   {FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_TENSOR, 0},
    {FP8KIT_SCALE_ROW, FP8KIT_SCALE_ROW, 0},     {FP8KIT_SCALE_ROW, FP8KIT_SCALE_TENSOR, 0},
    {FP8KIT_SCALE_TENSOR, FP8KIT_SCALE_ROW, 0},  {FP8KIT_SCALE_NONE, FP8KIT_SCALE_ROW, 0},
    {FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 0}, {FP8KIT_SCALE_BLOCK, FP8KIT_SCALE_BLOCK, 1},
    {FP8KIT_SCALE_MX, FP8KIT_SCALE_MX, 0},
};
#define NMODES ((int)(sizeof k_modes / sizeof k_modes[0]))

static const int64_t k_ks[] = {16, 32, 48, 112, 128, 144, 256, 272, 400, 512, 640, 1056, 2048};
static const int64_t k_ms[] = {1, 5, 31, 63, 64, 65, 100, 127, 129, 200, 257};

/* A random case: layout, act, scale setup mi, shapes, dtypes, padding, groups. */
static void draw_case(gcase *c, int masked, fp8kit_activation act, int mi)
{
    static const int64_t hs[] = {1, 3, 17, 32, 64, 96, 100, 128, 129, 192, 250, 256, 320, 500};
    static const int64_t ns[] = {1, 3, 16, 32, 40, 64, 96, 100, 128, 160, 200, 256, 264, 384, 500, 640};
    static const int64_t mxk[] = {32, 64, 96, 128, 160, 256, 544, 1024};
    static const int64_t dpads[] = {0, 0, 0, 8, 16, 3};
    static const fp8kit_dtype biasts[] = {FP8KIT_F32, FP8KIT_F32, FP8KIT_BF16, FP8KIT_F16};
    memset(c, 0, sizeof *c);
    c->masked = masked;
    c->act = act;
    c->sa = k_modes[mi].sa, c->sb = k_modes[mi].sb, c->mn = k_modes[mi].mn;
    c->at = rnd(2) ? FP8KIT_E5M2 : FP8KIT_E4M3;
    c->bt = rnd(2) ? FP8KIT_E5M2 : FP8KIT_E4M3;
    c->bias = (int)rnd(2);
    c->biast = biasts[rnd(4)];
    c->apad = rnd(4) ? 0 : 16 * (1 + (int64_t)rnd(2));
    c->bpad = rnd(4) ? 0 : rnd(2) ? 7 : 16;
    c->dpad = PICK(dpads);
    c->garbage = rnd(3) == 0;
    c->g = 1 + (int64_t)rnd(9);
    if (act == FP8KIT_ACT_SWIGLU)
        c->n = 2 * (c->sa == FP8KIT_SCALE_BLOCK ? 128 * (1 + (int64_t)rnd(4)) : PICK(hs));
    else
        c->n = PICK(ns);
    c->k = c->sa == FP8KIT_SCALE_MX ? PICK(mxk) : PICK(k_ks);
    if (masked)
        c->rows = PICK(k_ms);
    draw_groups(c, 400, 1);
}

static void case_name(const gcase *c, const char *tag, char *buf, size_t n)
{
    const int64_t T = c->masked ? c->g * c->rows : c->rows;
    snprintf(buf, n, "%s: %s %s T %lld%s%lld G %lld N %lld K %lld scales %s/%s%s %s x %s bias %s pad a%lld b%lld d%lld%s%s",
             tag, fp8kit_activation_name(c->act), c->masked ? "masked" : "contiguous", (long long)T,
             c->masked ? " M " : " used ", (long long)(c->masked ? c->rows : c->off[c->g - 1]), (long long)c->g,
             (long long)c->n, (long long)c->k, fp8kit_scale_mode_name(c->sa), fp8kit_scale_mode_name(c->sb),
             c->mn ? " mn_major" : "", fp8kit_dtype_name(c->at), fp8kit_dtype_name(c->bt),
             c->bias ? fp8kit_dtype_name(c->biast) : "none", (long long)c->apad, (long long)c->bpad,
             (long long)c->dpad, c->garbage ? " nan-rows" : "", c->exact ? " exact" : "");
}

/* ------------------------------------------------------------------ refusals, bad offsets */
/* A fixed small case: T rows (masked: M), G experts with offsets off, N, K, scales mode. */
static void fixed_case(gcase *c, int masked, fp8kit_activation act, int64_t rows, int64_t g, const int32_t *off,
                       int64_t n, int64_t k, fp8kit_scale_mode mode)
{
    memset(c, 0, sizeof *c);
    c->masked = masked, c->act = act, c->rows = rows, c->g = g, c->n = n, c->k = k;
    c->sa = c->sb = mode;
    c->at = c->bt = FP8KIT_E4M3;
    c->bias = 1, c->biast = FP8KIT_F32;
    memcpy(c->off, off, sizeof(int32_t) * (size_t)g);
}

/* (4) a call the library refuses with status want (message naming sub): nothing written. */
static void expect_refused(const gcase *c, const stage *s, fp8kit_status want, const char *sub, const char *what)
{
    gops o;
    make_ops(c, &o);
    char name[400];
    stage_name(what, s, name, sizeof name);
    run x;
    run_stage(&o, s, 0, &x);
    CHECK(x.st == want, "[%s] %s (%s), want %s", name, fp8kit_status_string(x.st), x.msg, fp8kit_status_string(want));
    CHECK(strstr(x.msg, sub) != NULL, "[%s] message '%s' does not mention '%s'", name, x.msg, sub);
    check_nothing_written(&x, name);
    CHECK(x.amax == POISON32 && x.status == JUNK, "[%s] refused call wrote amax_d or the status word", name);
    free_run(&x);
    free_ops(&o);
}

static void refusals(void)
{
    static const int32_t off[4] = {40, 40, 200, 300};
    static const stage bf = {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0};
    static const stage q1 = {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 0, 0, 0, 0};
    static const stage qmx = {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_MX, 0, 0, 0, 0};
    static const stage fp8 = {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0};
    gcase c;
    /* swiglu with block scales: N/2 a multiple of 128 (the up rows start a 128x128 scale block) */
    fixed_case(&c, 0, FP8KIT_ACT_SWIGLU, 300, 4, off, 2 * 192, 256, FP8KIT_SCALE_BLOCK);
    expect_refused(&c, &bf, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu block N/2 = 192");
    expect_refused(&c, &q1, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu block N/2 = 192");
    c.n = 2 * 64, c.mn = 1;
    expect_refused(&c, &q1, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu block mn_major N/2 = 64");
    /* swiglu with MX scales */
    fixed_case(&c, 0, FP8KIT_ACT_SWIGLU, 300, 4, off, 2 * 256, 256, FP8KIT_SCALE_MX);
    expect_refused(&c, &bf, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu mx");
    expect_refused(&c, &qmx, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu mx");
    static const int32_t cnt[4] = {0, 75, 3, 40};
    fixed_case(&c, 1, FP8KIT_ACT_SWIGLU, 75, 4, cnt, 2 * 256, 256, FP8KIT_SCALE_MX);
    expect_refused(&c, &q1, FP8KIT_ERR_UNSUPPORTED, "swiglu", "swiglu mx masked");
    /* an fp8 D needs output quantization (the grouped GEMM has no plain fp8 cast) */
    fixed_case(&c, 0, FP8KIT_ACT_SWIGLU, 300, 4, off, 2 * 128, 256, FP8KIT_SCALE_ROW);
    expect_refused(&c, &fp8, FP8KIT_ERR_UNSUPPORTED, "output quantization", "swiglu fp8 D, no output quantization");
    c.act = FP8KIT_ACT_NONE;
    expect_refused(&c, &fp8, FP8KIT_ERR_UNSUPPORTED, "output quantization", "fp8 D, no output quantization");
}

/* (4) invalid device offsets: the call returns OK, the kernel writes neither D nor scale_d and
 * sets the status word (amax_d is not looked at). */
static void bad_offsets(fp8kit_activation act, fp8kit_scale_mode mode, const stage *s)
{
    static const int32_t good[4] = {40, 40, 200, 300}, goodm[4] = {0, 75, 3, 3};
    static const int32_t bad[4][4] = {{40, 39, 200, 300}, {40, 40, 200, 301}, {-1, 40, 200, 300}, {40, 40, 300, 200}};
    static const char *names[4] = {"decreasing", "past T", "negative", "last below previous"};
    static const int32_t badm[2][4] = {{0, 76, 3, 3}, {5, 5, -1, 75}};
    static const char *namesm[2] = {"count M + 1", "count -1"};
    char what[400], label[200];
    for (int masked = 0; masked < 2; masked++) {
        gcase c;
        fixed_case(&c, masked, act, masked ? 75 : 300, 4, masked ? goodm : good, 256, 256, mode);
        gops o;
        make_ops(&c, &o);
        for (int i = 0; i < (masked ? 3 : 5); i++) {
            const int nostatus = i == (masked ? 2 : 4); /* the first bad set again, without a status word */
            const int32_t *b = masked ? badm[nostatus ? 0 : i] : bad[nostatus ? 0 : i];
            h2d(o.doff, b, sizeof bad[0]);
            snprintf(label, sizeof label, "bad offsets %s %s%s, %s", masked ? "masked" : "contiguous",
                     masked ? namesm[nostatus ? 0 : i] : names[nostatus ? 0 : i], nostatus ? " (no status)" : "",
                     fp8kit_activation_name(act));
            stage_name(label, s, what, sizeof what);
            run x;
            run_stage(&o, s, nostatus ? RUN_NO_STATUS : 0, &x);
            CHECK(x.st == FP8KIT_OK, "[%s] %s (%s): device offsets are the kernel's to check", what,
                  fp8kit_status_string(x.st), x.msg);
            if (!nostatus)
                CHECK(x.status == FP8KIT_ERR_INVALID_ARGUMENT, "[%s] status word %d, want %d", what, (int)x.status,
                      (int)FP8KIT_ERR_INVALID_ARGUMENT);
            check_nothing_written(&x, what);
            free_run(&x);
        }
        free_ops(&o);
    }
}

/* Precise f32 output (fast_accum 0) of the grouped swiglu: the grouped GEMM's f32 output needs
 * fast_accum on the GPU (docs/spec.md 3), so UNSUPPORTED with nothing written; a kernel that
 * takes it must meet the oracle. */
static void precise_f32(void)
{
    static const int32_t off[3] = {1, 130, 190};
    gcase c;
    fixed_case(&c, 0, FP8KIT_ACT_SWIGLU, 200, 3, off, 2 * 96, 256, FP8KIT_SCALE_ROW);
    gops o;
    make_ops(&c, &o);
    const stage sp = {FP8KIT_F32, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0};
    run x;
    run_stage(&o, &sp, 0, &x);
    if (x.st == FP8KIT_ERR_UNSUPPORTED) {
        check_nothing_written(&x, "swiglu precise f32 (refused)");
        printf("  swiglu precise f32 output: refused (%s)\n", x.msg);
    } else {
        CHECK(x.st == FP8KIT_OK, "[swiglu precise f32] %s (%s)", fp8kit_status_string(x.st), x.msg);
        if (x.st == FP8KIT_OK) {
            check_unowned(&o, &x, 4, "swiglu precise f32");
            check_oracle(&c, &o, (const float *)x.d, 0.0, 1e9, "swiglu precise f32");
        }
        printf("  swiglu precise f32 output: ran\n");
    }
    free_run(&x);
    free_ops(&o);
}

/* ------------------------------------------------------------------ real shapes */
/* A real shape: g experts of a routed batch, avg rows per expert on average (masked: slabs of avg
 * rows); some experts get no token or one, the others avg / 2 .. 2 avg (not tile multiples as a
 * rule); sometimes rows past the last end. */
static void real_case(const char *tag, int masked, fp8kit_activation act, int64_t g, int64_t avg, int64_t n, int64_t k,
                      fp8kit_scale_mode mode, int mn)
{
    gcase c;
    memset(&c, 0, sizeof c);
    c.masked = masked, c.act = act, c.g = g, c.n = n, c.k = k;
    c.sa = c.sb = mode, c.mn = mn;
    c.at = c.bt = FP8KIT_E4M3;
    c.garbage = 1;
    if (masked) {
        c.rows = avg;
        draw_groups(&c, 0, 0);
    } else {
        int64_t t = 0;
        for (int64_t i = 0; i < g; i++) {
            const uint32_t kind = rnd(8);
            t += kind == 0 ? 0 : kind == 1 ? 1 : avg / 2 + (int64_t)rnd((uint32_t)(3 * avg / 2 + 1));
            c.off[i] = (int32_t)t;
        }
        c.rows = t + (rnd(3) == 0 ? 1 + (int64_t)rnd(100) : 0) + (t == 0);
    }
    char name[400];
    case_name(&c, tag, name, sizeof name);
    run_case(&c, name, 2e9);
}

static void real_cases(void)
{
    /* DeepSeek-V3: routed experts' gate/up (2 x 2048 rows, K 7168), 128x128 block scales with
     * DeepGEMM's mn_major A scales; 16 experts of a prefill batch, then 8 masked decode slabs */
    real_case("DeepSeek-V3 gate/up prefill", 0, FP8KIT_ACT_SWIGLU, 16, 128, 2 * 2048, 7168, FP8KIT_SCALE_BLOCK, 1);
    real_case("DeepSeek-V3 gate/up decode", 1, FP8KIT_ACT_SWIGLU, 8, 129, 2 * 2048, 7168, FP8KIT_SCALE_BLOCK, 0);
    /* Qwen3-30B-A3B: experts of 2 x 768 rows, K 2048; 64 of them, per-token / per-channel scales */
    real_case("Qwen3-30B-A3B gate/up", 0, FP8KIT_ACT_SWIGLU, 64, 48, 2 * 768, 2048, FP8KIT_SCALE_ROW, 0);
    /* Mixtral 8x7B: 8 experts w1 / w3 of 2 x 14336 rows, K 4096; a small batch, tensor scales */
    real_case("Mixtral-8x7B w1/w3", 0, FP8KIT_ACT_SWIGLU, 8, 48, 2 * 14336, 4096, FP8KIT_SCALE_TENSOR, 0);
    /* (b) DeepSeek-V3's down projection (N 7168, K 2048) into the output stages */
    real_case("DeepSeek-V3 down", 0, FP8KIT_ACT_NONE, 16, 96, 7168, 2048, FP8KIT_SCALE_BLOCK, 1);
}

/* ------------------------------------------------------------------ the sweep */
static void random_cases(int small)
{
    static const fp8kit_activation elementwise[] = {FP8KIT_ACT_NONE, FP8KIT_ACT_NONE, FP8KIT_ACT_RELU,
                                                    FP8KIT_ACT_GELU_TANH, FP8KIT_ACT_GELU_ERF, FP8KIT_ACT_SILU};
    char tag[64], name[400];
    gcase c;
    /* (a) swiglu: every scale setup but MX, both layouts */
    const int na = small ? 3 : 36, nb = small ? 2 : 24;
    for (int i = 0; i < na; i++) {
        draw_case(&c, (int)rnd(2), FP8KIT_ACT_SWIGLU, (int)rnd(NMODES - 1));
        snprintf(tag, sizeof tag, "#%d", i);
        case_name(&c, tag, name, sizeof name);
        run_case(&c, name, 3e8);
    }
    /* (b) the ordinary grouped GEMM's output quantization: act none or elementwise, MX too */
    for (int i = 0; i < nb; i++) {
        draw_case(&c, (int)rnd(2), elementwise[rnd(6)], (int)rnd(NMODES));
        snprintf(tag, sizeof tag, "#%d", na + i);
        case_name(&c, tag, name, sizeof name);
        run_case(&c, name, 3e8);
    }
    /* (b) on exact inputs (make_ops): act none or relu, K <= 256, every scale setup; bit for bit */
    static const int64_t exact_ks[] = {16, 32, 48, 112, 128, 144, 256};
    const int nx = small ? 2 : 16;
    for (int i = 0; i < nx; i++) {
        draw_case(&c, (int)rnd(2), rnd(2) ? FP8KIT_ACT_RELU : FP8KIT_ACT_NONE, (int)rnd(NMODES));
        c.exact = 1;
        c.k = c.sa == FP8KIT_SCALE_MX ? 32 * (1 + (int64_t)rnd(8)) : PICK(exact_ks);
        snprintf(tag, sizeof tag, "#%d", na + nb + i);
        case_name(&c, tag, name, sizeof name);
        run_case(&c, name, 3e8);
    }
    if (small)
        return;
    /* 64 or more experts: many empty and 1-row groups */
    draw_case(&c, 0, FP8KIT_ACT_SWIGLU, 2);
    c.g = 72, c.n = 2 * 96, c.k = 256;
    draw_groups(&c, 40, 0);
    case_name(&c, "many experts", name, sizeof name);
    run_case(&c, name, 3e8);
    draw_case(&c, 1, FP8KIT_ACT_SWIGLU, 7);
    c.g = 64, c.rows = 33, c.n = 2 * 128, c.k = 384;
    draw_groups(&c, 0, 0);
    case_name(&c, "many experts", name, sizeof name);
    run_case(&c, name, 3e8);
    draw_case(&c, 0, FP8KIT_ACT_GELU_TANH, 3);
    c.g = 96, c.n = 160, c.k = 128;
    draw_groups(&c, 24, 0);
    case_name(&c, "many experts", name, sizeof name);
    run_case(&c, name, 3e8);
}
#endif

/* 1 when s is a whole unsigned number (strtoull's bases). */
static int is_number(const char *s)
{
    char *end = NULL;
    (void)strtoull(s, &end, 0);
    return *s && end && *end == 0;
}

int main(int argc, char **argv)
{
    int small = 0;
    const char *tuning = NULL, *seed = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) {
            small = 1;
        } else if (!strcmp(argv[i], "--tuning") && i + 1 < argc) {
            tuning = argv[++i];
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc && is_number(argv[i + 1])) {
            seed = argv[++i];
        } else {
            fprintf(stderr, "usage: " NAME " [--small] [--tuning SPEC] [--seed N]\n");
            return 2;
        }
    }
    const int skip = fk_test_cuda_skip(NAME);
    if (skip >= 0)
        return skip;
#ifdef FP8KIT_HAVE_CUDA
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9 || prop.minor != 0) {
        printf(NAME ": no sm_90 CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    if (seed) {
        rng.s = strtoull(seed, NULL, 0);
        printf(NAME ": seed %llu (--seed)\n", (unsigned long long)rng.s);
    } else {
        rng = fk_rng_seeded(NAME);
    }
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &g_gpu), FP8KIT_OK);
    if (!g_gpu)
        return fk_test_summary(NAME);
    if (tuning)
        CHECK_STATUS(fp8kit_ctx_set_tuning(g_gpu, tuning), FP8KIT_OK);
    printf("  %s%s%s\n", fp8kit_ctx_describe(g_gpu), tuning ? ", tuning " : "", tuning ? tuning : "");
    refusals();
    {
        static const stage bf = {FP8KIT_BF16, FP8KIT_F32, FP8KIT_OUTQ_NONE, 0, 0, 0, 0};
        static const stage q1 = {FP8KIT_E4M3, FP8KIT_BF16, FP8KIT_OUTQ_BLOCK1X128, 1, 0, 0, 0};
        static const stage qmx = {FP8KIT_E5M2, FP8KIT_F32, FP8KIT_OUTQ_MX, 0, 1, 0, 0};
        static const stage qs = {FP8KIT_E4M3, FP8KIT_F32, FP8KIT_OUTQ_SCALED, 0, 0, 1, 0};
        bad_offsets(FP8KIT_ACT_SWIGLU, FP8KIT_SCALE_ROW, &bf);
        bad_offsets(FP8KIT_ACT_SWIGLU, FP8KIT_SCALE_BLOCK, &q1);
        bad_offsets(FP8KIT_ACT_NONE, FP8KIT_SCALE_ROW, &qmx);
        bad_offsets(FP8KIT_ACT_SILU, FP8KIT_SCALE_TENSOR, &qs);
    }
    precise_f32();
    random_cases(small);
    if (!small)
        real_cases();
    printf("  MX inputs with output quantization: %ld stages ran and matched the f32 run's, %ld refused (UNSUPPORTED)\n",
           g_mxq_ran, g_mxq_refused);
    printf("  output quantization / casts of the ordinary grouped GEMM: %ld stages on exact inputs bit for bit; "
           "%ld stages within the tolerance, not bit-exact to the f32 run's output stage: %lld of %lld owned "
           "elements of D, %lld of %lld output scales, %lld of %lld amax_d\n",
           g_tol.exact, g_tol.stages, (long long)g_tol.ne, (long long)g_tol.elems, (long long)g_tol.scales_ne,
           (long long)g_tol.scales, (long long)g_tol.amax_ne, (long long)g_tol.amax);
    if (g_tol.worst > 0)
        printf("    the most elements of D not bit-exact in one stage: %.3g%% [%.300s]\n", 100.0 * g_tol.worst,
               g_tol.worst_name);
    fp8kit_ctx_destroy(g_gpu);
#else
    (void)small;
    (void)tuning;
    (void)seed;
#endif
    return fk_test_summary(NAME);
}
