/* cpu_gemm.c - CPU backend of the scaled FP8 GEMM (docs/spec.md section 3): the plan
 * (microkernel ISA and blocking per shape) and the OpenMP driver.
 *
 * For each chunk of K (all of K unless the packed panels would be huge) the
 * fp8 operands are decoded through 256-entry tables into packed fp32 panels
 * (per K block of kc: A [M/mr][k][mr], B [N/nr][k][nr], so one block's
 * micro-panels are consecutive in memory); block / mx scales are gathered into
 * matching per-panel, per-K-block arrays. Output tiles (mc x nc) are then
 * spread over the threads; each tile runs the microkernel (gemm_kernel.c)
 * over its micro-tiles, which sums every promotion block (128 of K, 32 for mx)
 * in fp32 from zero and adds it, times the block's scale, to fp32
 * accumulators; when K is done the tile goes through the epilogue
 * (cpu_epilogue.c) straight from cache (FP8KIT_ACT_SWIGLU: into a full
 * M x N fp32 y, paired row by row into D once every tile is done). When a block's combined scale would
 * overflow or underflow in fp32 although the product need not, that
 * micro-tile is promoted in double instead (slow path: the scale product is
 * exact in double, one rounding to fp32 per block). Scratch memory comes
 * from a one-block pool kept for the process (see fk_scratch_get). */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "cpu/gemm_internal.h"
#include "format/codec.h"
#include "format/geometry.h"
#include "format/scale.h"

_Static_assert(sizeof(fk_cpu_gemm_cfg) <= FK_PLAN_CONFIG_BYTES, "CPU GEMM config must fit the plan");

/* ------------------------------------------------------------ decode tables */
static float fk_tab_e4m3[256], fk_tab_e5m2[256];
static pthread_once_t fk_tab_once = PTHREAD_ONCE_INIT;

static void fk_tab_init(void)
{
    for (int c = 0; c < 256; c++) {
        fk_tab_e4m3[c] = fk_e4m3_to_f32((uint8_t)c);
        fk_tab_e5m2[c] = fk_e5m2_to_f32((uint8_t)c);
    }
}

/* --------------------------------------------------------------------- plan */
enum { FK_MODE_PLAIN = 0, FK_MODE_BLOCK = 1, FK_MODE_MX = 2 };

static int fk_gemm_mode(const fk_gemm_job *j)
{
    if (j->desc.scale_a == FP8KIT_SCALE_MX)
        return FK_MODE_MX;
    if (j->desc.scale_a == FP8KIT_SCALE_BLOCK)
        return FK_MODE_BLOCK;
    return FK_MODE_PLAIN;
}

/* Budget for the packed fp32 panels of one K chunk (A and B together).
 * tests/test_gemm.c's 800 x 800 x 16384 case exceeds it on purpose, to cover
 * K chunks with a global accumulator: keep them in step. */
#define FK_PACK_BUDGET ((int64_t)96 << 20)

/* isa_cap: the tuning's microkernel ceiling (never above what the CPU runs) */
static void fk_plan_fill(const fk_gemm_job *j, int isa_cap, fk_cpu_gemm_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->magic = FK_CPU_GEMM_MAGIC;
    c->isa = fk_gemm_cpu_isa();
    if (isa_cap < c->isa)
        c->isa = isa_cap;
    int mr = 4, nr = 8;
    fk_gemm_ukernel(c->isa, &mr, &nr);
    c->mr = mr;
    c->nr = nr;
    c->kblk = fk_gemm_mode(j) == FK_MODE_MX ? 32 : 128;
    c->kc = 256;
    /* output tile: about 16 micro-rows by 256 columns, no larger than needed */
    int64_t mc = (int64_t)mr * 16, nc = 256;
    if (mc > fk_round_up(j->m, mr))
        mc = fk_round_up(j->m > 0 ? j->m : 1, mr);
    if (nc > fk_round_up(j->n, 128))
        nc = fk_round_up(j->n > 0 ? j->n : 1, 128);
    c->mc = (int32_t)mc;
    c->nc = (int32_t)nc;
    /* K chunk: all of K when the panels fit the budget, else a multiple of 128 */
    int64_t rows = fk_round_up(j->m, mr) + fk_round_up(j->n, nr);
    int64_t kch = j->k;
    if (rows > 0 && kch * rows * (int64_t)sizeof(float) > FK_PACK_BUDGET) {
        kch = FK_PACK_BUDGET / ((int64_t)sizeof(float) * rows) / 128 * 128;
        if (kch < 128)
            kch = 128;
    }
    c->kch = kch;
}

fp8kit_status fk_cpu_gemm_plan(fp8kit_ctx *ctx, const fk_gemm_job *job, void *config)
{
    fk_cpu_gemm_cfg c;
    fk_plan_fill(job, fk_tuned(fk_ctx_tuning(ctx)->cpu_isa, FK_ISA_AVX512), &c);
    memset(config, 0, FK_PLAN_CONFIG_BYTES);
    memcpy(config, &c, sizeof c);
    return FP8KIT_OK;
}

void fk_cpu_plan_describe(const fk_plan *plan, char *buf, size_t n)
{
    static const char *const isa[3] = {"generic", "avx2", "avx512"};
    fk_cpu_gemm_cfg c;
    memcpy(&c, plan->config, sizeof c);
    snprintf(buf, n, "cpu isa=%s mr=%d nr=%d kblk=%d kc=%d mc=%d nc=%d kch=%lld",
             c.isa >= 0 && c.isa < 3 ? isa[c.isa] : "?", c.mr, c.nr, c.kblk, c.kc, c.mc, c.nc, (long long)c.kch);
}

/* ------------------------------------------------------------- call state */
typedef struct fk_gemm_run {
    const fk_gemm_job *j;
    fk_cpu_gemm_cfg cfg;
    fk_ukernel_fn uk;
    int mode;
    int64_t kch;             /* allocated K extent of a panel */
    int64_t mp, np;          /* rows of A and B padded to mr / nr */
    int64_t nkb;             /* promotion blocks per chunk (scaled modes) */
    float *ap, *bp;          /* packed panels */
    float *as, *bs;          /* packed block scales (scaled modes) */
    float *arng, *brng;      /* per panel: min, max of the finite nonzero |scales| */
    const float *tab_a, *tab_b;
    fk_scale_geom ga, gb;    /* the operands' scales (format/geometry.h) */
} fk_gemm_run;

/* Scratch memory. One call needs one block (packed panels, scales,
 * accumulators, epilogue rows) carved into 64-byte aligned pieces. Fresh
 * pages are expensive (a 32 MiB panel is thousands of page faults plus the
 * kernel's zeroing), so one block of up to FK_POOL_MAX bytes is kept for the
 * process and reused by the next call that finds it free; concurrent or
 * larger calls allocate their own. Large blocks ask for huge pages. */
/* Under AddressSanitizer the pool is off and every piece of the block is
 * followed by a poisoned 64-byte red zone, so overruns are still caught. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define FK_REDZONE 64
#define FK_NO_POOL 1
#else
#define FK_REDZONE 0
#define FK_NO_POOL 0
#endif

#define FK_POOL_MAX ((size_t)256 << 20)
static pthread_mutex_t fk_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *fk_pool_buf;
static size_t fk_pool_size;
static int fk_pool_busy;

static void *fk_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes >= 2 * huge) {
        bytes = (bytes + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
        if (p)
            madvise(p, bytes, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
        return p;
    }
    return aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
}

static void *fk_scratch_get(size_t bytes, int *pooled)
{
    *pooled = 0;
    if (!FK_NO_POOL && bytes <= FK_POOL_MAX) {
        pthread_mutex_lock(&fk_pool_lock);
        if (!fk_pool_busy) {
            if (fk_pool_size < bytes) {
                free(fk_pool_buf);
                fk_pool_buf = fk_alloc(bytes);
                fk_pool_size = fk_pool_buf ? bytes : 0;
            }
            if (fk_pool_buf) {
                fk_pool_busy = 1;
                *pooled = 1;
                pthread_mutex_unlock(&fk_pool_lock);
                return fk_pool_buf;
            }
        }
        pthread_mutex_unlock(&fk_pool_lock);
    }
    return fk_alloc(bytes);
}

static void fk_scratch_put(void *p, size_t bytes, int pooled)
{
#if defined(__SANITIZE_ADDRESS__)
    ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
    (void)bytes;
#endif
    if (!pooled) {
        free(p);
        return;
    }
    pthread_mutex_lock(&fk_pool_lock);
    fk_pool_busy = 0;
    pthread_mutex_unlock(&fk_pool_lock);
}

typedef struct fk_carver {
    size_t off;
    int n;
    size_t piece[16][2]; /* offset, bytes */
} fk_carver;

/* Reserves `bytes` (64-byte aligned) in a block being laid out; returns the offset. */
static size_t fk_carve(fk_carver *c, size_t bytes)
{
    size_t o = c->off;
    c->off += ((bytes + 63) & ~(size_t)63) + FK_REDZONE;
    if (c->n < 16)
        c->piece[c->n][0] = o, c->piece[c->n][1] = bytes, c->n++;
    return o;
}

static void fk_carve_guard(const fk_carver *c, char *base)
{
#if defined(__SANITIZE_ADDRESS__)
    ASAN_POISON_MEMORY_REGION(base, c->off);
    for (int i = 0; i < c->n; i++)
        ASAN_UNPOISON_MEMORY_REGION(base + c->piece[i][0], c->piece[i][1]);
#else
    (void)c, (void)base;
#endif
}

/* ------------------------------------------------------------------ packing */
static void fk_range_add(float v, float *mn, float *mx)
{
    float a = fabsf(v);
    if (a != 0.0f && isfinite(a)) {
        if (a < *mn)
            *mn = a;
        if (a > *mx)
            *mx = a;
    }
}

static void fk_range_close(float *rng, float mn, float mx)
{
    if (mn > mx) /* no finite nonzero scale: neutral */
        mn = mx = 1.0f;
    rng[0] = mn;
    rng[1] = mx;
}

/* Scale of operand row r (of A when is_a) at promotion block kbg, as fp32
 * (block or mx scales, indexed by format/geometry.h). */
static float fk_op_scale(const fk_gemm_run *s, int is_a, int64_t r, int64_t kbg)
{
    const fk_scale_geom *g = is_a ? &s->ga : &s->gb;
    const int64_t off = fk_scale_off_rk(g, r, kbg);
    const void *sc = is_a ? s->j->scale_a : s->j->scale_b;
    return g->e8m0 ? fk_e8m0_to_f32(((const uint8_t *)sc)[off]) : ((const float *)sc)[off];
}

/* Decodes rows [p*w, p*w + w) of an operand (rows total, K-contiguous, ld)
 * at K offset k0, kl columns, into panel p (zero rows past the end), and
 * gathers its block scales when the mode has them. Packed layout: K block b
 * (kc wide, the last one len_b = kl - b*kc) starts at b*kc*rows_pad, and
 * holds the panels one after another, each [k][w] floats (w*len_b). */
static void fk_pack_panel(fk_gemm_run *s, int is_a, int64_t p, int64_t k0, int64_t kl)
{
    const fk_gemm_job *j = s->j;
    const int w = is_a ? s->cfg.mr : s->cfg.nr;
    const int64_t rows = is_a ? j->m : j->n, ld = is_a ? j->lda : j->ldb;
    const uint8_t *src = (const uint8_t *)(is_a ? j->a : j->b);
    const float *tab = is_a ? s->tab_a : s->tab_b;
    const int64_t kc = s->cfg.kc, rows_pad = is_a ? s->mp : s->np;
    float *base = is_a ? s->ap : s->bp;
    /* in K slices of 64 (kc is a multiple of 64) so the destination slice stays in L1 */
    for (int64_t kb = 0; kb < kl; kb += 64) {
        int64_t ke = kl - kb < 64 ? kl - kb : 64;
        int64_t b0 = kb - kb % kc, len_b = kl - b0 < kc ? kl - b0 : kc;
        float *dst = base + b0 * rows_pad + p * w * len_b + (kb - b0) * w;
        for (int i = 0; i < w; i++) {
            int64_t r = p * w + i;
            float *d = dst + i;
            if (r < rows) {
                const uint8_t *row = src + r * ld + k0 + kb;
                for (int64_t k = 0; k < ke; k++)
                    d[k * w] = tab[row[k]];
            } else {
                for (int64_t k = 0; k < ke; k++)
                    d[k * w] = 0.0f;
            }
        }
    }
    if (s->mode == FK_MODE_PLAIN)
        return;
    const int64_t kblk = s->cfg.kblk, nb = fk_ceil_div(kl, kblk), kb0 = k0 / kblk;
    float *sd = (is_a ? s->as : s->bs) + p * w * s->nkb;
    float mn = INFINITY, mx = 0.0f;
    for (int64_t b = 0; b < nb; b++)
        for (int i = 0; i < w; i++) {
            int64_t r = p * w + i;
            float v = r < rows ? fk_op_scale(s, is_a, r, kb0 + b) : 1.0f;
            sd[b * w + i] = v;
            fk_range_add(v, &mn, &mx);
        }
    fk_range_close((is_a ? s->arng : s->brng) + 2 * p, mn, mx);
}

/* ------------------------------------------------------------------ compute */
/* Promotion in double for one micro-tile: each block's partial sums come from
 * the kernel unscaled, then acc += fl32(P * (sa * sb)) with the scale product
 * exact in double. */
static void fk_slow_tile(const fk_gemm_run *s, int64_t len, const float *pa, const float *pb, float *acc, int64_t ld,
                         const float *sa, const float *sb)
{
    const int mr = s->cfg.mr, nr = s->cfg.nr;
    const int64_t kblk = s->cfg.kblk;
    float tmp[16 * 64] __attribute__((aligned(64)));
    for (int64_t b0 = 0; b0 < len; b0 += kblk) {
        int64_t bl = len - b0 < kblk ? len - b0 : kblk;
        memset(tmp, 0, sizeof(float) * (size_t)(mr * nr));
        s->uk(bl, kblk, pa + b0 * mr, pb + b0 * nr, tmp, nr, NULL, NULL);
        for (int i = 0; i < mr; i++)
            for (int jj = 0; jj < nr; jj++)
                acc[i * ld + jj] += (float)((double)tmp[i * nr + jj] * ((double)sa[i] * (double)sb[jj]));
        sa += mr;
        sb += nr;
    }
}

/* Accumulates the current chunk (kl of K) into the tile [m0, m1) x [n0, n1)
 * whose fp32 accumulators start at acc (row stride ld, rows padded to mr). */
static void fk_tile(const fk_gemm_run *s, int64_t kl, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float *acc,
                    int64_t ld)
{
    const int mr = s->cfg.mr, nr = s->cfg.nr;
    const int64_t kc = s->cfg.kc, kblk = s->cfg.kblk;
    const int scaled = s->mode != FK_MODE_PLAIN;
    for (int64_t kk = 0; kk < kl; kk += kc) {
        int64_t len = kl - kk < kc ? kl - kk : kc;
        for (int64_t n = n0; n < n1; n += nr) {
            int64_t pn = n / nr;
            const float *pb = s->bp + kk * s->np + pn * nr * len;
            const float *sb = scaled ? s->bs + pn * nr * s->nkb + (kk / kblk) * nr : NULL;
            for (int64_t m = m0; m < m1; m += mr) {
                int64_t pm = m / mr;
                const float *pa = s->ap + kk * s->mp + pm * mr * len;
                float *c = acc + (m - m0) * ld + (n - n0);
                if (!scaled) {
                    s->uk(len, kblk, pa, pb, c, ld, NULL, NULL);
                    continue;
                }
                const float *sa = s->as + pm * mr * s->nkb + (kk / kblk) * mr;
                const float *ra = s->arng + 2 * pm, *rb = s->brng + 2 * pn;
                /* fast when every fp32 product sa * sb is normal (or 0 / Inf / NaN
                 * from such a scale, which behave alike on both paths) */
                if ((double)ra[1] * rb[1] < 0x1p127 && (double)ra[0] * rb[0] >= 0x1p-126)
                    s->uk(len, kblk, pa, pb, c, ld, sa, sb);
                else
                    fk_slow_tile(s, len, pa, pb, c, ld, sa, sb);
            }
        }
    }
}

/* Widens a 1-D f32/bf16/f16 vector to f32. */
static void fk_widen(float *dst, const void *src, fp8kit_dtype t, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = t == FP8KIT_BF16 ? fk_bf16_to_f32(((const uint16_t *)src)[i])
                 : t == FP8KIT_F16 ? fk_f16_to_f32(((const uint16_t *)src)[i])
                                   : ((const float *)src)[i];
}

/* Tiles shrunk until every thread has work, nc kept a multiple of 128. */
static void fk_shrink_tiles(int64_t M, int64_t N, int nt, int mr, int64_t *mc, int64_t *nc)
{
    while (fk_ceil_div(M, *mc) * fk_ceil_div(N, *nc) < 2 * nt) {
        if (*nc > 128)
            *nc = fk_round_up(*nc / 2, 128);
        else if (*mc > mr)
            *mc = fk_round_up(*mc / 2, mr);
        else
            break;
    }
}

/* The epilogue's factors, in double: alpha times the tensor / row scales
 * per row of D (rowf), B's row scales per column (colf, or NULL), and the
 * bias widened to f32 (or NULL). */
static void fk_epi_factors(const fk_gemm_job *j, double *rowf, double *colf, float *bias, int64_t blen,
                           fk_gemm_epi *ep)
{
    const double sbt = j->desc.scale_b == FP8KIT_SCALE_TENSOR ? (double)*(const float *)j->scale_b : 1.0;
    const float *sa = (const float *)j->scale_a;
    for (int64_t m = 0; m < j->m; m++) {
        double f = (double)j->alpha * sbt;
        if (j->desc.scale_a == FP8KIT_SCALE_TENSOR)
            f *= sa[0];
        else if (j->desc.scale_a == FP8KIT_SCALE_ROW)
            f *= sa[m];
        rowf[m] = f;
    }
    if (colf)
        for (int64_t n = 0; n < j->n; n++)
            colf[n] = ((const float *)j->scale_b)[n];
    if (bias)
        fk_widen(bias, j->bias, j->bias_type, blen);
    ep->rowf = rowf;
    ep->colf = colf;
    ep->bias = bias;
    ep->bias_row = j->desc.bias == FP8KIT_BIAS_ROW;
}

fp8kit_status fk_cpu_gemm(fp8kit_ctx *ctx, const fk_gemm_job *job, const fk_plan *plan)
{
    const fk_gemm_job *j = job;
    fk_gemm_run s;
    memset(&s, 0, sizeof s);
    s.j = j;
    if (plan && plan->valid)
        memcpy(&s.cfg, plan->config, sizeof s.cfg);
    if (s.cfg.magic != FK_CPU_GEMM_MAGIC)
        fk_plan_fill(j, FK_ISA_AVX512, &s.cfg);
    int mr = 0, nr = 0;
    s.uk = fk_gemm_ukernel(s.cfg.isa, &mr, &nr);
    if (!s.uk || mr != s.cfg.mr || nr != s.cfg.nr || 128 % nr || s.cfg.kc % s.cfg.kblk || s.cfg.kc % 64 || s.cfg.nc % 128 ||
        s.cfg.mc % mr || mr * nr > 16 * 64)
        return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "fp8kit_gemm (cpu): inconsistent plan");
    const int64_t M = j->m, N = j->n, K = j->k;
    if (M == 0 || N == 0) {
        if (j->amax_d)
            *j->amax_d = 0.0f;
        return FP8KIT_OK;
    }
    pthread_once(&fk_tab_once, fk_tab_init);
    s.tab_a = j->a_type == FP8KIT_E5M2 ? fk_tab_e5m2 : fk_tab_e4m3;
    s.tab_b = j->b_type == FP8KIT_E5M2 ? fk_tab_e5m2 : fk_tab_e4m3;
    s.mode = fk_gemm_mode(j);
    fk_gemm_scale_geom(j->desc.scale_a, j->desc.scale_layout, 0, M, K, &s.ga);
    fk_gemm_scale_geom(j->desc.scale_b, j->desc.scale_layout, 1, N, K, &s.gb);
    int nt = fk_ctx_threads(ctx) > 0 ? fk_ctx_threads(ctx) : omp_get_max_threads();
    if (nt < 1 || 2.0 * (double)M * (double)N * (double)K < 0x1p23)
        nt = 1; /* below ~8 MFLOP a fork/join costs more than it saves */

    const int64_t Mp = fk_round_up(M, mr), Np = fk_round_up(N, nr);
    const int64_t kch = s.cfg.kch >= K ? K : s.cfg.kch;
    const int64_t nchunk = K > 0 ? fk_ceil_div(K, kch) : 1;
    s.kch = kch;
    s.mp = Mp;
    s.np = Np;
    s.nkb = s.mode == FK_MODE_PLAIN ? 0 : fk_ceil_div(kch, s.cfg.kblk);

    int64_t mc = s.cfg.mc, nc = s.cfg.nc;
    fk_shrink_tiles(M, N, nt, mr, &mc, &nc);
    const int64_t tm = fk_ceil_div(M, mc), tn = fk_ceil_div(N, nc), ntile = tm * tn;
    const int global_acc = nchunk > 1;
    const int64_t tile_ld = fk_round_up(nc, nr);

    /* every allocation before anything is written */
    fk_gemm_epi ep;
    memset(&ep, 0, sizeof ep);
    ep.job = j;
    const int scaled = s.mode != FK_MODE_PLAIN;
    const int64_t blen = j->desc.bias == FP8KIT_BIAS_ROW ? M : N;
    fk_carver cv = {0, 0, {{0, 0}}};
    const size_t o_rowf = fk_carve(&cv, sizeof(double) * (size_t)M);
    const size_t o_colf = fk_carve(&cv, j->desc.scale_b == FP8KIT_SCALE_ROW ? sizeof(double) * (size_t)N : 0);
    const size_t o_bias = fk_carve(&cv, j->bias ? sizeof(float) * (size_t)blen : 0);
    const size_t o_ap = fk_carve(&cv, sizeof(float) * (size_t)(Mp * kch));
    const size_t o_bp = fk_carve(&cv, sizeof(float) * (size_t)(Np * kch));
    const size_t o_as = fk_carve(&cv, scaled ? sizeof(float) * (size_t)(Mp * s.nkb) : 0);
    const size_t o_bs = fk_carve(&cv, scaled ? sizeof(float) * (size_t)(Np * s.nkb) : 0);
    const size_t o_arng = fk_carve(&cv, scaled ? sizeof(float) * (size_t)(2 * (Mp / mr)) : 0);
    const size_t o_brng = fk_carve(&cv, scaled ? sizeof(float) * (size_t)(2 * (Np / nr)) : 0);
    const size_t o_acc = fk_carve(&cv, sizeof(float) * (global_acc ? (size_t)(Mp * Np) : (size_t)nt * (size_t)(mc * tile_ld)));
    /* per thread: tile_ld doubles then tile_ld floats for the epilogue */
    const size_t o_row = fk_carve(&cv, 12 * (size_t)nt * (size_t)tile_ld);
    const int swiglu = j->desc.act == FP8KIT_ACT_SWIGLU;
    const size_t o_y = fk_carve(&cv, swiglu ? sizeof(float) * (size_t)M * (size_t)N : 0);
    int pooled = 0;
    char *scratch = (char *)fk_scratch_get(cv.off, &pooled);
    if (!scratch)
        return fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "fp8kit_gemm (cpu): out of memory (%zu bytes of scratch for %lld x %lld x %lld)",
                       cv.off, (long long)M, (long long)N, (long long)K);
    fk_carve_guard(&cv, scratch);
    double *rowf = (double *)(scratch + o_rowf);
    double *colf = j->desc.scale_b == FP8KIT_SCALE_ROW ? (double *)(scratch + o_colf) : NULL;
    float *bias = j->bias ? (float *)(scratch + o_bias) : NULL;
    s.ap = (float *)(scratch + o_ap);
    s.bp = (float *)(scratch + o_bp);
    if (scaled) {
        s.as = (float *)(scratch + o_as);
        s.bs = (float *)(scratch + o_bs);
        s.arng = (float *)(scratch + o_arng);
        s.brng = (float *)(scratch + o_brng);
    }
    float *accbuf = (float *)(scratch + o_acc);
    double *rowbuf = (double *)(scratch + o_row);
    ep.yfull = swiglu ? (float *)(scratch + o_y) : NULL;

    fk_epi_factors(j, rowf, colf, bias, blen, &ep);

    uint32_t amax = 0;
#pragma omp parallel num_threads(nt) reduction(max : amax)
    {
        const int tid = omp_get_thread_num();
        float *tacc = accbuf + (global_acc ? 0 : (size_t)tid * (size_t)(mc * tile_ld));
        double *dbuf = (double *)((char *)rowbuf + 12 * (size_t)tid * (size_t)tile_ld);
        float *buf = (float *)(dbuf + tile_ld);
        uint32_t my_amax = 0;
        for (int64_t ch = 0; ch < nchunk; ch++) {
            const int64_t k0 = ch * kch, kl = K - k0 < kch ? K - k0 : kch;
            const int last = ch == nchunk - 1;
            if (kl > 0) {
#pragma omp for schedule(dynamic, 1) nowait
                for (int64_t p = 0; p < Mp / mr; p++)
                    fk_pack_panel(&s, 1, p, k0, kl);
#pragma omp for schedule(dynamic, 1)
                for (int64_t p = 0; p < Np / nr; p++)
                    fk_pack_panel(&s, 0, p, k0, kl);
            }
            /* no barrier after the tiles: the next chunk's packing waits
             * explicitly below, the last chunk ends at the region's join */
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t t = 0; t < ntile; t++) {
                const int64_t m0 = (t / tn) * mc, n0 = (t % tn) * nc;
                const int64_t m1 = m0 + mc < M ? m0 + mc : M, n1 = n0 + nc < N ? n0 + nc : N;
                float *acc;
                int64_t ld;
                if (global_acc) {
                    acc = tacc + m0 * Np + n0;
                    ld = Np;
                } else {
                    acc = tacc;
                    ld = tile_ld;
                }
                const int64_t rows = fk_round_up(m1 - m0, mr), cols = fk_round_up(n1 - n0, nr);
                if (ch == 0)
                    for (int64_t r = 0; r < rows; r++)
                        memset(acc + r * ld, 0, sizeof(float) * (size_t)cols);
                if (kl > 0)
                    fk_tile(&s, kl, m0, m1, n0, n1, acc, ld);
                if (last && swiglu)
                    fk_gemm_epilogue_y(&ep, acc, ld, m0, m1, n0, n1, dbuf);
                else if (last)
                    fk_gemm_epilogue(&ep, acc, ld, m0, m1, n0, n1, dbuf, buf, &my_amax);
            }
            if (!last) {
#pragma omp barrier
            }
        }
        if (swiglu) { /* every tile's y is stored: pair whole rows into D */
#pragma omp barrier
#pragma omp for schedule(static)
            for (int64_t m = 0; m < M; m++)
                fk_gemm_swiglu_rows(&ep, m, m + 1, &my_amax);
        }
        amax = my_amax;
    }
    if (j->amax_d)
        *j->amax_d = fk_u2f(amax);

    fk_scratch_put(scratch, cv.off, pooled);
    return FP8KIT_OK;
}
