/* test_xbackend.c - one table-driven cross-backend harness: every op
 * (quantize, dequantize, quantize_mx_both, cast, gemm, grouped gemm) runs
 * through the PUBLIC API on the CPU backend (the reference side) and on the
 * CUDA backend (the test side) with the same inputs, and the results are
 * compared:
 *   - quantize, dequantize, quantize_mx_both, cast: bit for bit (codes,
 *     scales and dequantized values, the padding of blocked / mn_major scales
 *     included); bytes the call must not write (row-stride padding of q / y,
 *     guard bytes past every output, every output of a refused call, an
 *     output the call does not have, e.g. amax_d without OUTQ_SCALED) keep
 *     their poison on both sides;
 *   - gemm: each side against an fp64 reference from the dequantized operands
 *     within docs/spec.md section 3's bound for the output dtype, and the two
 *     sides against each other (test_cuda_gemm.c's rules: 2x the bound
 *     between them, fp8 codes at most one step apart where the group scales
 *     agree, fused output-quantization scales byte-equal on exact inputs and
 *     within one step in <= 1% of the groups otherwise, amax, NaN and
 *     infinities where and only where the reference has them, D's row
 *     padding untouched);
 *   - grouped gemm: the test side's fp8kit_grouped_gemm against per-group
 *     fp8kit_gemm calls on the reference side and an fp64 reference, rows past
 *     offsets[G-1] untouched, the status word.
 * The cases are data: per op an array of case structs (quantize / dequantize:
 * a scheme-and-layout table crossed with a shape-class table, each pair
 * expanded over input dtype x element format x pow2 / rounding; GEMM: one row
 * per configuration with its forced planner variants, each variant a case),
 * and one generic loop per op. Shape classes: square, tall, wide, odd, tiny
 * (1 included), 3-D experts and 4-D batches, strided, 0-D / 1-D (tensor
 * scheme, cast), empty (refused with INVALID_SHAPE by both sides), M <= 128
 * decode shapes for GEMM, more tiles than SMs; the GEMM table also holds
 * the configurations of test_cuda_gemm.c and test_cuda_gemm_mx.c that fit
 * its time budget (their line numbers noted). GEMM variants are forced on
 * the test side with fp8kit_ctx_set_tuning (gemm_small, gemm_bn,
 * gemm_cluster, gemm_ts, gemm_sk, ...; what a kernel cannot honour falls
 * back) and each case prints fp8kit_gemm_describe. A failure names the case fully (op, number, every
 * field); FK_TEST_SEED=n replays the data, --case N runs case N alone.
 * Exits 77 (skipped) without a usable CUDA device; GEMM and grouped cases
 * need an sm_90 device (else they are skipped, the quantization ops still run).
 * Options: --small (a few cases per op, for compute-sanitizer), --cpu-vs-cpu
 * (both sides on the CPU backend: two contexts with different thread counts,
 * the test side with cpu_isa=generic; runs without a GPU and checks the
 * harness itself), --case N, --verbose (a line per case). */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fp8kit.h"
#include "format/codec.h"
#include "format/scale.h"
#include "ref/gemm_ref.h"
#include "test_util.h"
#include "test_hp.h"
#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "test_cuda_util.h"
#endif

#ifdef _OPENMP
#define XB_OMP_FOR _Pragma("omp parallel for schedule(dynamic, 4)")
#else
#define XB_OMP_FOR
#endif

/* ================================================================ options, sides */

static int g_small, g_cpu_vs_cpu, g_verbose;
static long g_only = -1;   /* --case N */
static const char *g_tuning; /* --tuning SPEC: the test side's base overrides */
static uint64_t g_seed;
static fk_rng rng;         /* reseeded per case from g_seed and the case number */
static long g_id;          /* number of the case being built (every case of the full table counts) */

enum { OP_QUANT, OP_DEQUANT, OP_MXBOTH, OP_CAST, OP_GEMM, OP_GROUPED, OP_N };
static const char *const k_op_name[OP_N] = {"quantize", "dequantize", "quantize_mx_both", "cast", "gemm",
                                            "grouped_gemm"};
static long g_ncases[OP_N], g_nfailed[OP_N];
static double g_secs[OP_N];
static long g_failed_lines;

/* One backend: a context and where its buffers live. */
typedef struct side {
    const char *name;
    fp8kit_ctx *ctx;
    int dev;          /* buffers are CUDA device memory */
    void *stream;     /* cudaStream_t of the calls (NULL on the CPU) */
    char base[512];   /* the tuning overrides every call starts from */
} side;

static side g_ref = {"cpu", NULL, 0, NULL, ""}, g_test = {"cuda", NULL, 1, NULL, ""};

#define GUARD 64 /* bytes past every buffer that no call may write */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + GUARD + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "test_xbackend: malloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

static void *s_alloc(const side *s, size_t n)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev)
        return dmalloc(n + GUARD);
#endif
    (void)s;
    return xmalloc(n);
}

static void s_free(const side *s, void *p)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev) {
        cudaFree(p);
        return;
    }
#endif
    (void)s;
    free(p);
}

static void s_put(const side *s, void *d, const void *h, size_t n)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev) {
        h2d(d, h, n);
        return;
    }
#endif
    (void)s;
    memcpy(d, h, n);
}

static void s_get(const side *s, void *h, const void *d, size_t n)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev) {
        d2h(h, d, n);
        return;
    }
#endif
    (void)s;
    memcpy(h, d, n);
}

static void s_set(const side *s, void *d, int byte, size_t n)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev) {
        CHECK(cudaMemset(d, byte, n) == cudaSuccess, "cudaMemset");
        return;
    }
#endif
    (void)s;
    memset(d, byte, n);
}

/* Before a call: the legacy-stream copies and memsets are done (the side's
 * stream does not wait for them). */
static void s_ready(const side *s)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev)
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
#endif
    (void)s;
}

/* After a call: its work is done; a CUDA error is fatal (the context is unusable). */
static void s_done(const side *s, const char *name)
{
#ifdef FP8KIT_HAVE_CUDA
    if (s->dev) {
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)s->stream);
        if (e == cudaSuccess)
            e = cudaGetLastError();
        CHECK(e == cudaSuccess, "%s: CUDA error after the call: %s [%s]", s->name, cudaGetErrorString(e), name);
        if (e != cudaSuccess) {
            fprintf(stderr, "test_xbackend: stopping after a CUDA error in %s\n", name);
            exit(fk_test_summary("test_xbackend"));
        }
    }
#endif
    (void)s;
    (void)name;
}

/* The side's overrides: its base followed by keys ("" for none). */
static int s_tuning(const side *s, const char *keys)
{
    char spec[sizeof s->base + 256];
    snprintf(spec, sizeof spec, "%s%s%s", s->base, s->base[0] && keys[0] ? "," : "", keys);
    fp8kit_status st = fp8kit_ctx_set_tuning(s->ctx, spec);
    CHECK(st == FP8KIT_OK, "%s: fp8kit_ctx_set_tuning(\"%s\"): %s (%s)", s->name, spec, fp8kit_status_string(st),
          fp8kit_last_error(s->ctx));
    return st == FP8KIT_OK;
}

/* ================================================================ one call, both sides */

#define MAXB 12

/* One buffer of a call: an input (init = its n bytes) or an output (init =
 * its starting content, NULL = poison). Every buffer gets GUARD more bytes of
 * poison that must survive. An output's row padding (rows of row_bytes at
 * stride_bytes, stride_bytes > row_bytes) must survive too, and all of an
 * output the call has no business writing (keep: e.g. amax_d without
 * OUTQ_SCALED). */
typedef struct xbuf {
    const char *what;
    size_t n;
    const void *init;
    int out, keep;
    uint8_t poison;
    int64_t rows, row_bytes, stride_bytes;
} xbuf;

typedef struct xcall {
    int nb;
    xbuf b[MAXB];
} xcall;

typedef fp8kit_status (*xfn)(void *c, const side *s, void *const *p);

typedef struct xres {
    fp8kit_status st;
    char msg[320];
    uint8_t *out[MAXB]; /* host copies of the outputs: n + GUARD bytes */
} xres;

static int xadd(xcall *x, const char *what, size_t n, const void *init, int out, uint8_t poison)
{
    xbuf *b = &x->b[x->nb];
    memset(b, 0, sizeof *b);
    b->what = what;
    b->n = n ? n : 1;
    b->init = init;
    b->out = out;
    b->poison = poison;
    return x->nb++;
}

static void xpad(xcall *x, int i, int64_t rows, int64_t row_bytes, int64_t stride_bytes)
{
    x->b[i].rows = rows;
    x->b[i].row_bytes = row_bytes;
    x->b[i].stride_bytes = stride_bytes;
}

/* Runs fn on side s: buffers on s, poisoned, inputs copied in; outputs copied back. */
static void xrun(const side *s, const xcall *x, xfn fn, void *c, const char *name, xres *r)
{
    void *p[MAXB];
    for (int i = 0; i < x->nb; i++) {
        const xbuf *b = &x->b[i];
        p[i] = s_alloc(s, b->n);
        s_set(s, p[i], b->poison, b->n + GUARD);
        if (b->init)
            s_put(s, p[i], b->init, b->n);
    }
    s_ready(s);
    r->st = fn(c, s, p);
    snprintf(r->msg, sizeof r->msg, "%s", r->st ? fp8kit_last_error(s->ctx) : "");
    s_done(s, name);
    for (int i = 0; i < x->nb; i++) {
        r->out[i] = NULL;
        if (x->b[i].out) {
            r->out[i] = xmalloc(x->b[i].n);
            s_get(s, r->out[i], p[i], x->b[i].n + GUARD);
        }
        s_free(s, p[i]);
    }
}

static void xres_free(const xcall *x, xres *r)
{
    for (int i = 0; i < x->nb; i++)
        free(r->out[i]);
}

/* Both sides return want. */
static int check_status(const char *name, fp8kit_status want, const xres *r, const xres *t)
{
    CHECK(r->st == want, "%s side returned %s (%s), want %s [%s]", g_ref.name, fp8kit_status_string(r->st), r->msg,
          fp8kit_status_string(want), name);
    CHECK(t->st == want, "%s side returned %s (%s), want %s [%s]", g_test.name, fp8kit_status_string(t->st), t->msg,
          fp8kit_status_string(want), name);
    return r->st == FP8KIT_OK && t->st == FP8KIT_OK;
}

/* What the call must not have written on one side: guard bytes, row
 * padding, and (after a refused call) everything. */
static void check_untouched(const char *name, const side *s, const xcall *x, const xres *r)
{
    for (int i = 0; i < x->nb; i++) {
        const xbuf *b = &x->b[i];
        if (!b->out)
            continue;
        const uint8_t *o = r->out[i];
        long guard = 0, pad = 0, body = 0;
        for (size_t k = b->n; k < b->n + GUARD; k++)
            guard += o[k] != b->poison;
        if (b->stride_bytes > b->row_bytes)
            for (int64_t row = 0; row < b->rows; row++)
                for (int64_t k = b->row_bytes; k < b->stride_bytes; k++) {
                    const size_t at = (size_t)(row * b->stride_bytes + k);
                    if (at < b->n)
                        pad += o[at] != (b->init ? ((const uint8_t *)b->init)[at] : b->poison);
                }
        if (r->st != FP8KIT_OK || b->keep)
            for (size_t k = 0; k < b->n; k++)
                body += o[k] != (b->init ? ((const uint8_t *)b->init)[k] : b->poison);
        CHECK(guard == 0, "%s: %ld bytes written past the end of %s [%s]", s->name, guard, b->what, name);
        CHECK(pad == 0, "%s: %ld bytes of %s's row padding written [%s]", s->name, pad, b->what, name);
        CHECK(body == 0, "%s: %s wrote %ld bytes of %s [%s]", s->name,
              r->st != FP8KIT_OK ? "the refused call" : "the call (not its output)", body, b->what, name);
    }
}

/* Bit-exact comparison of every output (n bytes each). */
static void check_exact(const char *name, const xcall *x, const xres *r, const xres *t)
{
    for (int i = 0; i < x->nb; i++) {
        const xbuf *b = &x->b[i];
        if (!b->out)
            continue;
        size_t bad = 0, first = 0;
        for (size_t k = 0; k < b->n; k++)
            if (r->out[i][k] != t->out[i][k]) {
                if (bad < 3)
                    fprintf(stderr, "  %s byte %zu: %s 0x%02x, %s 0x%02x [%s]\n", b->what, k, g_ref.name,
                            r->out[i][k], g_test.name, t->out[i][k], name);
                if (!bad)
                    first = k;
                bad++;
            }
        CHECK(bad == 0, "%s: %zu of %zu bytes differ between the backends (first at byte %zu) [%s]", b->what, bad,
              b->n, first, name);
    }
}

/* Runs the call on both sides and compares: the same status, then every
 * output byte for byte, and nothing written outside the outputs. */
static void run_exact(const xcall *x, xfn fn, void *c, const char *name, int want)
{
    xres r, t;
    xrun(&g_ref, x, fn, c, name, &r);
    xrun(&g_test, x, fn, c, name, &t);
    if (check_status(name, want, &r, &t))
        check_exact(name, x, &r, &t);
    check_untouched(name, &g_ref, x, &r);
    check_untouched(name, &g_test, x, &t);
    xres_free(x, &r);
    xres_free(x, &t);
}

/* Case bookkeeping: numbering (every case of the full table, so --case N
 * and the data of a case do not depend on --small), the per-case seed, the
 * failure line. */
static int case_begin(int selected)
{
    const long id = g_id++;
    if (g_only >= 0 ? id != g_only : !selected)
        return 0;
    rng.s = g_seed + 0xD1B54A32D192ED03ull * (uint64_t)(id + 1);
    (void)fk_rng_u64(&rng);
    return 1;
}

static void case_end(int op, long fails_before, const char *name)
{
    g_ncases[op]++;
    if (fk_t_fail > fails_before) {
        g_nfailed[op]++;
        if (g_failed_lines++ < 100)
            fprintf(stderr, "FAILED %s\n", name);
    } else if (g_verbose) {
        printf("  ok %s\n", name);
    }
}

/* ================================================================ data */

static uint32_t ru(uint32_t n) { return fk_rng_u32(&rng) % n; }
static float rand_val(int heavy) { return (float)(heavy ? fk_rng_heavy(&rng) : fk_rng_normal(&rng)); }
/* positive, a power of two times a fraction, in [2^lo, 2^hi) */
static float rand_scale(int lo, int hi)
{
    return (float)ldexp(1.0 + fk_rng_unif(&rng), lo + (int)ru((uint32_t)(hi - lo)));
}
/* integers in [-r, r]: exact in every type */
static float rand_int(int r) { return (float)((int)ru((uint32_t)(2 * r + 1)) - r); }

enum { DIST_NORMAL, DIST_HEAVY, DIST_EDGE };
static const char *const k_dist_name[3] = {"normal", "heavy", "edge"};

static float edge_value(int kind) { return fk_t_edge_value(&rng, kind); }

/* test_cuda_quant.c's generator: DIST_EDGE mixes specials into runs of 32. */
static float gen_value(int dist, int64_t i, float mag, uint32_t *edge_state)
{
    if (dist == DIST_HEAVY)
        return (float)fk_rng_heavy(&rng) * mag;
    if (dist == DIST_EDGE) {
        if (i % 32 == 0)
            *edge_state = fk_rng_u32(&rng);
        const uint32_t st = *edge_state;
        const int mode = (int)(st % 8);
        if (mode == 0)
            return edge_value((int)((st >> 8) % 16));
        if (mode == 1 && (int)((st >> 8) % 32) == (int)(i % 32))
            return edge_value((int)((st >> 16) % 16));
        if (mode == 2)
            return i % 32 == (st >> 8) % 32 ? fk_t_u2f(1u) : 1.0f;
        if (mode == 3)
            return (float)fk_rng_normal(&rng) * 1e-38f;
    }
    return (float)fk_rng_normal(&rng) * mag;
}

/* rows of c values at a row stride (elements); the stride padding gets NaN (never read) */
static void fill_hp(void *buf, fp8kit_dtype t, int64_t rows, int64_t c, int64_t stride, int dist)
{
    uint32_t est = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float mag = ldexpf(1.0f, (int)ru(40) - 20);
        for (int64_t k = 0; k < stride; k++)
            store_hp(buf, r * stride + k, t, k < c ? gen_value(dist, k, mag, &est) : fk_t_u2f(0x7FC00000u));
    }
}

/* random fp8 codes (every byte value); the stride padding gets 0x7F (NaN in both formats' eyes: never read) */
static void fill_codes(uint8_t *buf, int64_t rows, int64_t c, int64_t stride)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < stride; k++)
            buf[r * stride + k] = k < c ? (uint8_t)fk_rng_u32(&rng) : 0x7F;
}

/* ================================================================ tensors */

static const char *const k_scheme_name[5] = {"tensor", "row", "block1x128", "block128x128", "mx"};
static const char *const k_layout_name[3] = {"plain", "blocked", "mn_major"};
static const char *const k_mode_name[5] = {"none", "tensor", "row", "block", "mx"};
static const char *const k_act_name[5] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu"};
static const char *const k_bias_name[3] = {"none", "col", "row"};
static const char *const k_oq_name[4] = {"none", "scaled", "mx", "block1x128"};

static int64_t numel_of(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (used < n)
        snprintf(buf + used, n - used, ")");
}

/* A view of ndim / shape whose rows (ndim >= 2) are pad elements longer
 * than the last dim; 0-D and 1-D views are contiguous. The buffer holds
 * rows * row stride elements: *rows, *rstride. */
static void make_view(fp8kit_tensor *t, void *data, fp8kit_dtype dt, int ndim, const int64_t *shape, int64_t pad,
                      int64_t *rows, int64_t *rstride)
{
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    const int64_t c = ndim ? shape[ndim - 1] : 1;
    *rows = c ? numel_of(ndim, shape) / c : 0;
    *rstride = c;
    if (ndim < 2) {
        *rows = 1;
        return;
    }
    t->strides[ndim - 1] = 1;
    t->strides[ndim - 2] = c + pad;
    for (int i = ndim - 3; i >= 0; i--)
        t->strides[i] = shape[i + 1] * t->strides[i + 1];
    *rstride = c + pad;
    if (!c)
        *rows = numel_of(ndim - 1, shape);
}

/* ================================================================ quantize / dequantize tables */

typedef struct scheme_row {
    fp8kit_scheme s;
    int axis;
    fp8kit_scale_layout lay;
} scheme_row;

static const scheme_row k_schemes[] = {
    {FP8KIT_SCHEME_TENSOR, -1, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_ROW, -1, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_BLOCK1X128, -1, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_BLOCK1X128, -1, FP8KIT_LAYOUT_MN_MAJOR},
    {FP8KIT_SCHEME_BLOCK128X128, -1, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_BLOCK128X128, -1, FP8KIT_LAYOUT_MN_MAJOR},
    {FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_MX, -1, FP8KIT_LAYOUT_BLOCKED},
    {FP8KIT_SCHEME_MX, -2, FP8KIT_LAYOUT_PLAIN},
    {FP8KIT_SCHEME_MX, -2, FP8KIT_LAYOUT_BLOCKED},
};
#define NSCHEMES ((int)(sizeof k_schemes / sizeof k_schemes[0]))

/* A shape class. For mx the blocked axis (the last dim for axis -1, the one
 * before it for axis -2) is rounded up to a multiple of 32; 0-D / 1-D
 * classes run the tensor scheme only; want: both sides' status. */
typedef struct shape_row {
    const char *cls;
    int ndim;
    int64_t shape[4];
    int64_t xpad, qpad; /* row-stride padding (elements) of x (y for dequantize) and q */
    fp8kit_status want;
    int small;          /* in --small */
    int one_exp;        /* large: one expansion per scheme (bf16, the rest rotating), not all of them */
} shape_row;

static const shape_row k_qshapes[] = {
    {"square", 2, {256, 256}, 0, 0, FP8KIT_OK, 0, 0},
    {"tall", 2, {1000, 40}, 0, 0, FP8KIT_OK, 0, 0},
    {"wide", 2, {12, 3000}, 0, 0, FP8KIT_OK, 0, 0},
    {"odd", 2, {77, 333}, 0, 0, FP8KIT_OK, 1, 0},
    {"tiny 1x1", 2, {1, 1}, 0, 0, FP8KIT_OK, 0, 0},
    {"tiny one row", 2, {1, 300}, 0, 0, FP8KIT_OK, 0, 0},
    {"tiny one column", 2, {129, 1}, 0, 0, FP8KIT_OK, 0, 0},
    {"3-D experts", 3, {5, 130, 200}, 0, 0, FP8KIT_OK, 1, 0},
    {"4-D batch", 4, {2, 3, 40, 160}, 0, 0, FP8KIT_OK, 0, 0},
    {"strided", 2, {100, 300}, 7, 13, FP8KIT_OK, 1, 0},
    {"strided aligned", 2, {64, 256}, 8, 16, FP8KIT_OK, 0, 0},
    {"strided 3-D", 3, {3, 50, 200}, 5, 3, FP8KIT_OK, 0, 0},
    {"scalar 0-D", 0, {0}, 0, 0, FP8KIT_OK, 0, 0},
    {"vector 1-D", 1, {1000}, 0, 0, FP8KIT_OK, 0, 0},
    {"empty rows", 2, {0, 64}, 0, 0, FP8KIT_ERR_INVALID_SHAPE, 0, 0},
    {"empty cols", 3, {2, 32, 0}, 0, 0, FP8KIT_ERR_INVALID_SHAPE, 0, 0},
    /* longer than the row kernel's register cache; several column strips / row bands per expert */
    {"long rows", 2, {37, 20000}, 0, 0, FP8KIT_OK, 0, 1},
    {"multi-tile experts", 3, {2, 416, 2336}, 0, 0, FP8KIT_OK, 0, 1},
};
#define NQSHAPES ((int)(sizeof k_qshapes / sizeof k_qshapes[0]))

static const fp8kit_dtype k_hp[3] = {FP8KIT_F32, FP8KIT_F16, FP8KIT_BF16};

typedef struct qcase {
    int op; /* OP_QUANT or OP_DEQUANT */
    fp8kit_quant_desc d;
    fp8kit_dtype xt; /* x (quantize) or y (dequantize) */
    int ndim;
    int64_t shape[4];
    int64_t xpad, qpad;
    int dist;
    fp8kit_status want;
    const char *cls;
    long id;
    char name[400];
    /* built */
    fp8kit_tensor wq, ws; /* expected q and scale (contiguous) */
} qcase;

static void qcase_name(qcase *c)
{
    char sh[64];
    shape_str(sh, sizeof sh, c->ndim, c->shape);
    const int mx = c->d.scheme == FP8KIT_SCHEME_MX;
    snprintf(c->name, sizeof c->name,
             "%s #%ld class '%s': scheme=%s axis=%d layout=%s elem=%s %s=%s %s=%d shape=%s xpad=%lld qpad=%lld "
             "data=%s",
             k_op_name[c->op], c->id, c->cls, k_scheme_name[c->d.scheme], (int)c->d.axis,
             k_layout_name[c->d.scale_layout], fp8kit_dtype_name(c->d.elem), c->op == OP_QUANT ? "x" : "y",
             fp8kit_dtype_name(c->xt), mx ? "rounding" : "pow2", mx ? (int)c->d.rounding : (int)c->d.pow2, sh,
             (long long)c->xpad, (long long)c->qpad, c->op == OP_QUANT ? k_dist_name[c->dist] : "random codes");
}

/* the q / scale tensors the call gets (from fp8kit_quant_shapes; an empty case: x's shape and one scale) */
static void qcase_shapes(qcase *c)
{
    fp8kit_tensor x;
    int64_t rows, rs;
    make_view(&x, NULL, c->xt, c->ndim, c->shape, 0, &rows, &rs);
    const fp8kit_status st = fp8kit_quant_shapes(&c->d, &x, &c->wq, &c->ws);
    CHECK(st == FP8KIT_OK || c->want != FP8KIT_OK, "fp8kit_quant_shapes: %s (%s) [%s]", fp8kit_status_string(st),
          fp8kit_last_error(NULL), c->name);
    if (st == FP8KIT_OK)
        return;
    c->wq = fp8kit_tensor_make(NULL, c->d.elem, c->ndim, c->shape);
    const int64_t one = 1;
    c->ws = fp8kit_tensor_make(NULL, c->d.scheme == FP8KIT_SCHEME_MX ? FP8KIT_E8M0 : FP8KIT_F32, 1, &one);
}

/* the plain per-expert scale matrix pr x pc and the number of experts E */
static void plain_scale_dims(const qcase *c, int64_t *E, int64_t *pr, int64_t *pc)
{
    const int nd = c->ndim;
    const int64_t R = nd >= 2 ? c->shape[nd - 2] : 1, C = nd >= 1 ? c->shape[nd - 1] : 1;
    *E = nd == 3 ? c->shape[0] : nd == 4 ? c->shape[0] * c->shape[1] : 1;
    switch (c->d.scheme) {
    case FP8KIT_SCHEME_TENSOR: *E = 1; *pr = 1; *pc = 1; break;
    case FP8KIT_SCHEME_ROW: *pr = R; *pc = 1; break;
    case FP8KIT_SCHEME_BLOCK1X128: *pr = R; *pc = (C + 127) / 128; break;
    case FP8KIT_SCHEME_BLOCK128X128: *pr = (R + 127) / 128; *pc = (C + 127) / 128; break;
    default:
        *pr = c->d.axis == -1 ? R : C;
        *pc = (c->d.axis == -1 ? C : R) / 32;
        break;
    }
}

/* where scale (e, r, c) of the plain pr x pc matrix is stored in the layout (docs/spec.md 2.3) */
static int64_t scale_offset(fp8kit_scale_layout lay, int64_t pr, int64_t pc, int64_t e, int64_t r, int64_t c)
{
    if (lay == FP8KIT_LAYOUT_BLOCKED) {
        const int64_t rp = fk_blocked_rows(pr), cp = fk_blocked_cols(pc);
        return e * rp * cp + fk_blocked_offset(r, c, cp);
    }
    if (lay == FP8KIT_LAYOUT_MN_MAJOR) {
        const int64_t ld = (pr + 3) / 4 * 4;
        return (e * pc + c) * ld + r;
    }
    return (e * pr + r) * pc + c;
}

static float deq_scale_f32(void)
{
    switch (ru(64)) {
    case 0: return fk_t_u2f(0x7FC00000u); /* NaN: a NaN group */
    case 1: return INFINITY;              /* read as a NaN group */
    case 2: return 0.0f;
    case 3: return 0x1p-149f;
    case 4: return 0x1p100f;
    default: return ldexpf(1.0f + (float)fk_rng_unif(&rng), (int)ru(41) - 30);
    }
}

static uint8_t deq_scale_e8m0(void)
{
    switch (ru(64)) {
    case 0: return 255;
    case 1: return 0;
    case 2: return 254;
    case 3: return 1;
    default: return (uint8_t)(100 + ru(50));
    }
}

enum { QB_X = 0, QB_Q = 1, QB_S = 2 };   /* quantize */
enum { DB_Q = 0, DB_S = 1, DB_Y = 2 };   /* dequantize */

static fp8kit_status quant_call(void *cv, const side *s, void *const *p)
{
    qcase *c = cv;
    fp8kit_tensor x, q, sc = c->ws;
    int64_t rows, rs;
    make_view(&x, p[QB_X], c->xt, c->ndim, c->shape, c->xpad, &rows, &rs);
    make_view(&q, p[QB_Q], c->d.elem, c->wq.ndim, c->wq.shape, c->qpad, &rows, &rs);
    sc.data = p[QB_S];
    return fp8kit_quantize(s->ctx, &c->d, &x, &q, &sc, s->stream);
}

static fp8kit_status dequant_call(void *cv, const side *s, void *const *p)
{
    qcase *c = cv;
    fp8kit_tensor y, q, sc = c->ws;
    int64_t rows, rs;
    make_view(&y, p[DB_Y], c->xt, c->ndim, c->shape, c->xpad, &rows, &rs);
    make_view(&q, p[DB_Q], c->d.elem, c->wq.ndim, c->wq.shape, c->qpad, &rows, &rs);
    sc.data = p[DB_S];
    return fp8kit_dequantize(s->ctx, &c->d, &q, &sc, &y, s->stream);
}

static void run_qcase(qcase *c)
{
    const long f0 = fk_t_fail;
    qcase_name(c);
    qcase_shapes(c);
    const size_t es = fp8kit_dtype_size(c->xt);
    fp8kit_tensor tx, tq;
    int64_t xrows, xrs, qrows, qrs;
    make_view(&tx, NULL, c->xt, c->ndim, c->shape, c->xpad, &xrows, &xrs);
    make_view(&tq, NULL, c->d.elem, c->wq.ndim, c->wq.shape, c->qpad, &qrows, &qrs);
    const int64_t xc = c->ndim ? c->shape[c->ndim - 1] : 1, qc = c->wq.ndim ? c->wq.shape[c->wq.ndim - 1] : 1;
    const size_t xbytes = (size_t)(xrows * xrs) * es, qbytes = (size_t)(qrows * qrs);
    const size_t sn = (size_t)fp8kit_tensor_numel(&c->ws), sbytes = sn * fp8kit_dtype_size(c->ws.dtype);
    xcall x;
    memset(&x, 0, sizeof x);
    void *hx = xmalloc(xbytes), *hq = xmalloc(qbytes), *hs = xmalloc(sbytes);
    if (c->op == OP_QUANT) {
        fill_hp(hx, c->xt, xrows, xc, xrs, c->dist);
        xadd(&x, "x", xbytes, hx, 0, 0);
        const int iq = xadd(&x, "q", qbytes, NULL, 1, FK_POISON);
        xpad(&x, iq, qrows, qc, qrs);
        xadd(&x, "scale", sbytes, NULL, 1, FK_POISON);
    } else {
        fill_codes(hq, qrows, qc, qrs);
        /* every stored scale NaN (f32 0xFFFFFFFF, e8m0 255): padding the call must not read */
        memset(hs, 0xFF, sbytes);
        if (c->want == FP8KIT_OK) {
            int64_t E, pr, pc;
            plain_scale_dims(c, &E, &pr, &pc);
            for (int64_t e = 0; e < E; e++)
                for (int64_t i = 0; i < pr; i++)
                    for (int64_t k = 0; k < pc; k++) {
                        const int64_t o = scale_offset(c->d.scale_layout, pr, pc, e, i, k);
                        if (o < 0 || (size_t)o >= sn) {
                            CHECK(0, "scale offset %lld outside %zu [%s]", (long long)o, sn, c->name);
                            continue;
                        }
                        if (c->ws.dtype == FP8KIT_E8M0)
                            ((uint8_t *)hs)[o] = deq_scale_e8m0();
                        else
                            ((float *)hs)[o] = deq_scale_f32();
                    }
        }
        xadd(&x, "q", qbytes, hq, 0, 0);
        xadd(&x, "scale", sbytes, hs, 0, 0);
        const int iy = xadd(&x, "y", xbytes, NULL, 1, FK_POISON);
        xpad(&x, iy, xrows, xc * (int64_t)es, xrs * (int64_t)es);
    }
    run_exact(&x, c->op == OP_QUANT ? quant_call : dequant_call, c, c->name, c->want);
    free(hx);
    free(hq);
    free(hs);
    case_end(c->op, f0, c->name);
}

/* quantize: scheme x shape class x x-dtype x elem x (pow2 | rounding);
 * dequantize: scheme x shape class x y-dtype x elem */
static void run_quant_table(int op)
{
    const int nexp = op == OP_QUANT ? 12 : 6;
    for (int ci = 0; ci < NSCHEMES; ci++)
        for (int si = 0; si < NQSHAPES; si++)
            for (int ei = 0; ei < nexp; ei++) {
                const scheme_row *sr = &k_schemes[ci];
                const shape_row *sh = &k_qshapes[si];
                if (sh->ndim < 2 && sr->s != FP8KIT_SCHEME_TENSOR)
                    continue; /* the row, block and mx schemes need 2..4 dims */
                if (sh->one_exp && ei != nexp - (op == OP_QUANT ? 4 : 2) + (ci + si) % (op == OP_QUANT ? 4 : 2))
                    continue; /* bf16 x, elem and option rotating */
                const int sel = !g_small || (sh->small && ei == (ci * 5 + si * 3) % nexp);
                if (!case_begin(sel))
                    continue;
                qcase c;
                memset(&c, 0, sizeof c);
                c.op = op;
                c.id = g_id - 1;
                c.d = fp8kit_quant_desc_default(sr->s);
                c.d.axis = sr->axis;
                c.d.scale_layout = sr->lay;
                const int xi = op == OP_QUANT ? ei / 4 : ei / 2, e5 = op == OP_QUANT ? (ei / 2) % 2 : ei % 2;
                const int opt = op == OP_QUANT ? ei % 2 : 0;
                c.d.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
                if (sr->s == FP8KIT_SCHEME_MX)
                    c.d.rounding = opt ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
                else
                    c.d.pow2 = opt;
                c.xt = k_hp[xi];
                c.ndim = sh->ndim;
                memcpy(c.shape, sh->shape, sizeof c.shape);
                if (sr->s == FP8KIT_SCHEME_MX) { /* the blocked axis: a multiple of 32 */
                    const int ax = sr->axis == -1 ? c.ndim - 1 : c.ndim - 2;
                    if (c.shape[ax] > 0)
                        c.shape[ax] = (c.shape[ax] + 31) / 32 * 32;
                }
                c.xpad = sh->xpad;
                c.qpad = sh->qpad;
                c.dist = (ci + si + ei) % 3;
                c.want = sh->want;
                c.cls = sh->cls;
                run_qcase(&c);
            }
}

/* ================================================================ quantize_mx_both */

static const shape_row k_bshapes[] = {
    {"square", 2, {256, 256}, 0, 0, FP8KIT_OK, 0, 0},
    {"tall", 2, {1024, 32}, 0, 0, FP8KIT_OK, 0, 0},
    {"wide", 2, {32, 2048}, 0, 0, FP8KIT_OK, 0, 0},
    {"odd", 2, {96, 224}, 0, 0, FP8KIT_OK, 1, 0},
    {"tiny", 2, {32, 32}, 0, 0, FP8KIT_OK, 0, 0},
    {"3-D experts", 3, {3, 64, 160}, 0, 0, FP8KIT_OK, 1, 0},
    {"4-D batch", 4, {2, 2, 32, 64}, 0, 0, FP8KIT_OK, 0, 0},
    {"strided", 2, {64, 128}, 7, 5, FP8KIT_OK, 0, 0},
    {"empty", 2, {0, 32}, 0, 0, FP8KIT_ERR_INVALID_SHAPE, 0, 0},
    {"R not a multiple of 32", 2, {48, 64}, 0, 0, FP8KIT_ERR_INVALID_SHAPE, 0, 0},
};
#define NBSHAPES ((int)(sizeof k_bshapes / sizeof k_bshapes[0]))

typedef struct bcase {
    fp8kit_quant_desc d;
    fp8kit_dtype xt;
    const shape_row *sh;
    int dist;
    long id;
    char name[400];
    fp8kit_tensor wq[2], ws[2]; /* axis -1, axis -2 */
} bcase;

enum { BB_X = 0, BB_QR, BB_SR, BB_QC, BB_SC };

static fp8kit_status mxboth_call(void *cv, const side *s, void *const *p)
{
    bcase *c = cv;
    fp8kit_tensor x, q[2], sc[2];
    int64_t rows, rs;
    make_view(&x, p[BB_X], c->xt, c->sh->ndim, c->sh->shape, c->sh->xpad, &rows, &rs);
    for (int a = 0; a < 2; a++) {
        make_view(&q[a], p[a ? BB_QC : BB_QR], c->d.elem, c->wq[a].ndim, c->wq[a].shape, c->sh->qpad, &rows, &rs);
        sc[a] = c->ws[a];
        sc[a].data = p[a ? BB_SC : BB_SR];
    }
    return fp8kit_quantize_mx_both(s->ctx, &c->d, &x, &q[0], &sc[0], &q[1], &sc[1], s->stream);
}

static void run_bcase(bcase *c)
{
    const long f0 = fk_t_fail;
    const shape_row *sh = c->sh;
    char shs[64];
    shape_str(shs, sizeof shs, sh->ndim, sh->shape);
    snprintf(c->name, sizeof c->name,
             "quantize_mx_both #%ld class '%s': layout=%s elem=%s x=%s rounding=%s shape=%s xpad=%lld qpad=%lld "
             "data=%s",
             c->id, sh->cls, k_layout_name[c->d.scale_layout], fp8kit_dtype_name(c->d.elem),
             fp8kit_dtype_name(c->xt), c->d.rounding ? "rceil" : "floor", shs, (long long)sh->xpad,
             (long long)sh->qpad, k_dist_name[c->dist]);
    fp8kit_tensor tx;
    int64_t xrows, xrs;
    make_view(&tx, NULL, c->xt, sh->ndim, sh->shape, 0, &xrows, &xrs);
    for (int a = 0; a < 2; a++) {
        fp8kit_quant_desc d = c->d;
        d.axis = a ? -2 : -1;
        const fp8kit_status st = fp8kit_quant_shapes(&d, &tx, &c->wq[a], &c->ws[a]);
        CHECK(st == FP8KIT_OK || sh->want != FP8KIT_OK, "fp8kit_quant_shapes: %s [%s]", fp8kit_status_string(st),
              c->name);
        if (st != FP8KIT_OK) { /* a refused shape: x's shape and one scale */
            const int64_t one = 1;
            c->wq[a] = fp8kit_tensor_make(NULL, c->d.elem, sh->ndim, sh->shape);
            c->ws[a] = fp8kit_tensor_make(NULL, FP8KIT_E8M0, 1, &one);
        }
    }
    make_view(&tx, NULL, c->xt, sh->ndim, sh->shape, sh->xpad, &xrows, &xrs);
    const size_t es = fp8kit_dtype_size(c->xt), xbytes = (size_t)(xrows * xrs) * es;
    void *hx = xmalloc(xbytes);
    fill_hp(hx, c->xt, xrows, sh->ndim ? sh->shape[sh->ndim - 1] : 1, xrs, c->dist);
    xcall x;
    memset(&x, 0, sizeof x);
    xadd(&x, "x", xbytes, hx, 0, 0);
    for (int a = 0; a < 2; a++) {
        fp8kit_tensor tq;
        int64_t qrows, qrs;
        make_view(&tq, NULL, c->d.elem, c->wq[a].ndim, c->wq[a].shape, sh->qpad, &qrows, &qrs);
        const int64_t qc = c->wq[a].shape[c->wq[a].ndim - 1];
        const int iq = xadd(&x, a ? "q_col" : "q_row", (size_t)(qrows * qrs), NULL, 1, FK_POISON);
        xpad(&x, iq, qrows, qc, qrs);
        xadd(&x, a ? "scale_col" : "scale_row", (size_t)fp8kit_tensor_numel(&c->ws[a]), NULL, 1, FK_POISON);
    }
    run_exact(&x, mxboth_call, c, c->name, sh->want);
    free(hx);
    case_end(OP_MXBOTH, f0, c->name);
}

/* shape class x x-dtype x elem x rounding x layout (plain, blocked) */
static void run_mxboth_table(void)
{
    for (int si = 0; si < NBSHAPES; si++)
        for (int ei = 0; ei < 24; ei++) {
            const shape_row *sh = &k_bshapes[si];
            if (!case_begin(!g_small || (sh->small && ei % 5 == si % 5)))
                continue;
            bcase c;
            memset(&c, 0, sizeof c);
            c.id = g_id - 1;
            c.sh = sh;
            c.d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
            c.xt = k_hp[ei / 8];
            c.d.elem = (ei / 4) % 2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
            c.d.rounding = (ei / 2) % 2 ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
            c.d.scale_layout = ei % 2 ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
            c.dist = (si + ei) % 3;
            run_bcase(&c);
        }
}

/* ================================================================ cast */

static const shape_row k_cshapes[] = {
    {"square", 2, {256, 256}, 0, 0, FP8KIT_OK, 0, 0},
    {"tall", 2, {3000, 3}, 0, 0, FP8KIT_OK, 0, 0},
    {"wide", 2, {3, 3000}, 0, 0, FP8KIT_OK, 0, 0},
    {"odd", 2, {77, 333}, 0, 0, FP8KIT_OK, 1, 0},
    {"tiny 1x1", 2, {1, 1}, 0, 0, FP8KIT_OK, 0, 0},
    {"scalar 0-D", 0, {0}, 0, 0, FP8KIT_OK, 0, 0},
    {"vector 1-D", 1, {1001}, 0, 0, FP8KIT_OK, 1, 0},
    {"3-D", 3, {4, 33, 65}, 0, 0, FP8KIT_OK, 0, 0},
    {"4-D", 4, {2, 3, 5, 7}, 0, 0, FP8KIT_OK, 0, 0},
    {"strided", 2, {100, 300}, 5, 11, FP8KIT_OK, 1, 0},
    {"empty", 2, {0, 5}, 0, 0, FP8KIT_ERR_INVALID_SHAPE, 0, 0},
};
#define NCSHAPES ((int)(sizeof k_cshapes / sizeof k_cshapes[0]))

typedef struct ccase {
    fp8kit_dtype from, to;
    const shape_row *sh;
    int dist;
    long id;
    char name[300];
} ccase;

static fp8kit_status cast_call(void *cv, const side *s, void *const *p)
{
    ccase *c = cv;
    fp8kit_tensor x, y;
    int64_t rows, rs;
    make_view(&x, p[0], c->from, c->sh->ndim, c->sh->shape, c->sh->xpad, &rows, &rs);
    make_view(&y, p[1], c->to, c->sh->ndim, c->sh->shape, c->sh->qpad, &rows, &rs);
    return fp8kit_cast(s->ctx, &x, &y, s->stream);
}

static void run_ccase(ccase *c)
{
    const long f0 = fk_t_fail;
    const shape_row *sh = c->sh;
    char shs[64];
    shape_str(shs, sizeof shs, sh->ndim, sh->shape);
    const int tofp8 = c->to == FP8KIT_E4M3 || c->to == FP8KIT_E5M2;
    snprintf(c->name, sizeof c->name, "cast #%ld class '%s': %s -> %s shape=%s xpad=%lld ypad=%lld data=%s", c->id,
             sh->cls, fp8kit_dtype_name(c->from), fp8kit_dtype_name(c->to), shs, (long long)sh->xpad,
             (long long)sh->qpad, tofp8 ? k_dist_name[c->dist] : "random codes");
    fp8kit_tensor tx, ty;
    int64_t xrows, xrs, yrows, yrs;
    make_view(&tx, NULL, c->from, sh->ndim, sh->shape, sh->xpad, &xrows, &xrs);
    make_view(&ty, NULL, c->to, sh->ndim, sh->shape, sh->qpad, &yrows, &yrs);
    const int64_t cc = sh->ndim ? sh->shape[sh->ndim - 1] : 1;
    const size_t fs = fp8kit_dtype_size(c->from), ts = fp8kit_dtype_size(c->to);
    const size_t xbytes = (size_t)(xrows * xrs) * fs, ybytes = (size_t)(yrows * yrs) * ts;
    void *hx = xmalloc(xbytes);
    if (tofp8)
        fill_hp(hx, c->from, xrows, cc, xrs, c->dist);
    else
        fill_codes(hx, xrows, cc, xrs);
    xcall x;
    memset(&x, 0, sizeof x);
    xadd(&x, "x", xbytes, hx, 0, 0);
    const int iy = xadd(&x, "y", ybytes, NULL, 1, FK_POISON);
    xpad(&x, iy, yrows, cc * (int64_t)ts, yrs * (int64_t)ts);
    run_exact(&x, cast_call, c, c->name, sh->want);
    free(hx);
    case_end(OP_CAST, f0, c->name);
}

/* shape class x (f32 / f16 / bf16 -> e4m3 / e5m2, and back) */
static void run_cast_table(void)
{
    for (int si = 0; si < NCSHAPES; si++)
        for (int ei = 0; ei < 12; ei++) {
            const shape_row *sh = &k_cshapes[si];
            if (!case_begin(!g_small || (sh->small && ei % 4 == si % 4)))
                continue;
            ccase c;
            memset(&c, 0, sizeof c);
            c.id = g_id - 1;
            c.sh = sh;
            const fp8kit_dtype hp = k_hp[(ei / 2) % 3], f8 = ei % 2 ? FP8KIT_E5M2 : FP8KIT_E4M3;
            c.from = ei < 6 ? hp : f8;
            c.to = ei < 6 ? f8 : hp;
            c.dist = (si + ei) % 3;
            run_ccase(&c);
        }
}

/* ================================================================ GEMM table */

/* output dtypes (0 = bf16, the most common) */
enum { O_BF16 = 0, O_F16, O_F32, O_E4M3, O_E5M2 };
static const fp8kit_dtype k_out[5] = {FP8KIT_BF16, FP8KIT_F16, FP8KIT_F32, FP8KIT_E4M3, FP8KIT_E5M2};

/* operand data */
enum {
    D_NORMAL = 0, /* normal fp8 values, random scales */
    D_HEAVY,      /* heavy-tailed values */
    D_EXACT,      /* small integers, power-of-two scales: y exact on both backends (fused output
                     quantization byte-equal) */
    D_MX_EDGE,    /* mx: scale bytes at the ends of the range (test_cuda_gemm_mx.c's SC_EDGE) */
    D_MX_NAN,     /* mx: one NaN scale byte in A and one in B */
    D_MX_HUGE     /* mx: every scale product 2^128 .. 2^131 (past fp32), operands scaled by 2^-11: finite results */
};
static const char *const k_data_name[6] = {"normal",      "heavy",       "exact",
                                           "mx-edge-exps", "mx-nan-exps", "mx-huge-products"};

#define S_NONE FP8KIT_SCALE_NONE
#define S_TEN FP8KIT_SCALE_TENSOR
#define S_ROW FP8KIT_SCALE_ROW
#define S_BLK FP8KIT_SCALE_BLOCK
#define S_MX FP8KIT_SCALE_MX
#define L_MN FP8KIT_LAYOUT_MN_MAJOR
#define L_BLOCKED FP8KIT_LAYOUT_BLOCKED
#define B_COL FP8KIT_BIAS_COL
#define B_ROW FP8KIT_BIAS_ROW
#define T_F32 FP8KIT_F32
#define T_F16 FP8KIT_F16
#define T_BF16 FP8KIT_BF16

/* One GEMM configuration; every variant (test-side tuning keys, ';'
 * between variants, "" = the planner's own choice) is a case. Zero is the
 * default of every field: e4m3 operands, bf16 D, no scales, alpha 1, no C,
 * f32 C / bias / out_hp dtypes, planner's choice only, status OK. */
typedef struct gemm_row {
    const char *cls;
    int64_t m, n, k;
    int e5a, e5b, out;        /* A, B e5m2; D's dtype (O_*) */
    fp8kit_scale_mode sa, sb;
    fp8kit_scale_layout layout;
    float alpha, beta;        /* alpha 0 = 1.0; beta != 0 reads C */
    fp8kit_dtype ct, biast, hp;
    fp8kit_bias_mode bias;
    fp8kit_activation act;
    fp8kit_out_quant oq;
    int rceil, pow2, fast;
    int data;                 /* D_* */
    int64_t ldd_pad;          /* extra elements in D's row stride */
    const char *variants;
    int small;                /* in --small */
    fp8kit_status want;       /* both sides */
} gemm_row;

static const gemm_row k_gemm[] = {
    /* block scales on the 256-row tile (gemm_bm=256: two waves; alone and in 2-CTA clusters): M not a
     * multiple of 256 or 128, N and K not multiples of 128, epilogues, fp32 and fused-quantized D */
    {.cls = "block 256", .m = 600, .n = 520, .k = 1008, .sa = S_BLK, .sb = S_BLK, .bias = B_COL, .biast = T_BF16,
     .act = FP8KIT_ACT_GELU_TANH, .small = 1, .variants = "gemm_bm=256;gemm_bm=256,gemm_cluster=2"},
    {.cls = "block 256", .m = 1300, .n = 1024, .k = 384, .sa = S_BLK, .sb = S_BLK, .out = O_F32, .fast = 1,
     .variants = "gemm_bm=256;gemm_bm=256,gemm_cluster=2"},
    {.cls = "block 256", .m = 257, .n = 200, .k = 272, .sa = S_BLK, .sb = S_BLK, .beta = 0.5f, .ct = T_BF16,
     .bias = B_ROW, .biast = T_F32, .act = FP8KIT_ACT_SILU, .variants = "gemm_bm=256;gemm_bm=256,gemm_cluster=2"},
    {.cls = "block 256", .m = 512, .n = 384, .k = 512, .sa = S_BLK, .sb = S_BLK, .out = O_E4M3,
     .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16, .variants = "gemm_bm=256"},
    {.cls = "block 256", .m = 100, .n = 128, .k = 128, .sa = S_BLK, .sb = S_BLK, .layout = L_MN,
     .variants = "gemm_bm=256"},
    /* square: the general kernel with forced tile widths, clusters, store paths */
    {.cls = "square", .m = 256, .n = 256, .k = 512, .sa = S_TEN, .sb = S_TEN, .small = 1,
     .variants = ";gemm_bn=128;gemm_bn=192;gemm_bn=256;gemm_cluster=2;gemm_ts=0"}, /* test_cuda_gemm.c 999 */
    {.cls = "odd", .m = 200, .n = 130, .k = 272, .sa = S_ROW, .sb = S_ROW, .out = O_F16, .alpha = 0.75f,
     .beta = 0.5f, .ct = T_F16, .bias = B_COL, .biast = T_BF16, .act = FP8KIT_ACT_GELU_TANH,
     .variants = ";gemm_bn=64;gemm_bn=128;gemm_bn=192;gemm_ts=0"},
    {.cls = "square", .m = 256, .n = 256, .k = 384, .sa = S_TEN, .sb = S_ROW, .fast = 1, .bias = B_COL,
     .act = FP8KIT_ACT_SILU, .variants = ";gemm_bn=256;gemm_bn=256,gemm_cluster=2;gemm_ts=0"},
    {.cls = "square", .m = 256, .n = 256, .k = 384, .sa = S_BLK, .sb = S_BLK, .small = 1,
     .variants = ";gemm_bn=128;gemm_cluster=2"},
    {.cls = "square", .m = 256, .n = 256, .k = 384, .sa = S_BLK, .sb = S_BLK, .layout = L_MN, .out = O_F32, .fast = 1,
     .act = FP8KIT_ACT_RELU, .variants = ";gemm_bn=64"},
    {.cls = "square", .m = 256, .n = 256, .k = 512, .sa = S_MX, .sb = S_MX, .small = 1, .variants = ";gemm_bn=128"},
    {.cls = "square", .m = 256, .n = 256, .k = 512, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .out = O_F16,
     .bias = B_COL, .biast = T_F16, .act = FP8KIT_ACT_GELU_TANH, .variants = ";gemm_bn=64"},
    {.cls = "square", .m = 384, .n = 256, .k = 512, .out = O_F32, .sa = S_ROW, .sb = S_TEN, .data = D_HEAVY},
    /* tall */
    {.cls = "tall", .m = 1000, .n = 64, .k = 128, .sa = S_ROW, .sb = S_TEN, .variants = ";gemm_bn=128"},
    {.cls = "tall", .m = 900, .n = 96, .k = 256, .e5a = 1, .sa = S_BLK, .sb = S_BLK, .out = O_F32, .fast = 1},
    {.cls = "tall", .m = 1000, .n = 64, .k = 96, .e5b = 1, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED},
    {.cls = "tall", .m = 700, .n = 40, .k = 256, .sa = S_NONE, .sb = S_ROW, .out = O_E4M3, .oq = FP8KIT_OUTQ_SCALED,
     .act = FP8KIT_ACT_RELU, .bias = B_ROW},
    /* wide */
    {.cls = "wide", .m = 160, .n = 1500, .k = 256, .sa = S_TEN, .sb = S_ROW, .out = O_F16,
     .variants = ";gemm_bn=192;gemm_cluster=2"},
    {.cls = "wide", .m = 130, .n = 1200, .k = 384, .sa = S_BLK, .sb = S_BLK, .bias = B_COL, .biast = T_BF16,
     .act = FP8KIT_ACT_GELU_ERF},
    {.cls = "wide", .m = 136, .n = 2016, .k = 256, .sa = S_TEN, .sb = S_TEN, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX,
     .hp = T_BF16, .data = D_EXACT, .variants = ";gemm_bn=256"},
    {.cls = "wide", .m = 129, .n = 1000, .k = 160, .sa = S_MX, .sb = S_MX, .out = O_F32, .fast = 1},
    /* odd M / N / K */
    {.cls = "odd", .m = 77, .n = 133, .k = 272, .e5a = 1, .sa = S_ROW, .sb = S_NONE, .out = O_F16, .beta = 0.5f,
     .ct = T_F32, .bias = B_ROW, .biast = T_F16, .act = FP8KIT_ACT_SILU, .ldd_pad = 3, .small = 1,
     .variants = ";gemm_small=0"},
    {.cls = "odd", .m = 131, .n = 201, .k = 160, .out = O_F32, .fast = 1, .sa = S_TEN, .sb = S_TEN,
     .variants = ";gemm_bn=192"},
    {.cls = "odd", .m = 199, .n = 97, .k = 48, .out = O_F32, .sa = S_NONE, .sb = S_ROW, .ldd_pad = 5},
    {.cls = "odd", .m = 255, .n = 129, .k = 272, .e5a = 1, .e5b = 1, .sa = S_BLK, .sb = S_BLK, .layout = L_MN,
     .out = O_F16, .beta = -1.0f, .ct = T_BF16, .data = D_HEAVY},
    {.cls = "odd", .m = 199, .n = 77, .k = 96, .e5a = 1, .sa = S_MX, .sb = S_MX, .act = FP8KIT_ACT_RELU,
     .bias = B_ROW, .biast = T_BF16, .alpha = 1.5f},
    {.cls = "odd", .m = 200, .n = 325, .k = 256, .sa = S_ROW, .sb = S_ROW, .alpha = 0.75f, .ldd_pad = 3,
     .variants = ";gemm_bn=128;gemm_ts=0"},
    /* tiny (1 included) */
    {.cls = "tiny", .m = 1, .n = 1, .k = 16, .out = O_F32, .sa = S_TEN, .sb = S_TEN, .small = 1},
    {.cls = "tiny", .m = 1, .n = 17, .k = 32, .sa = S_ROW, .sb = S_ROW, .variants = ";gemm_small=0;gemm_small=1"},
    {.cls = "tiny", .m = 3, .n = 5, .k = 16, .e5b = 1, .out = O_F16, .sa = S_TEN, .sb = S_NONE},
    {.cls = "tiny", .m = 1, .n = 32, .k = 32, .sa = S_MX, .sb = S_MX, .out = O_F16},
    {.cls = "tiny", .m = 2, .n = 130, .k = 128, .sa = S_BLK, .sb = S_BLK, .bias = B_COL},
    /* decode: M <= 128 (the small-M family for tensor / row scales) */
    {.cls = "decode", .m = 1, .n = 1000, .k = 512, .sa = S_TEN, .sb = S_TEN, .small = 1,
     .variants = ";gemm_small=0;gemm_small=1;gemm_small=2"}, /* test_cuda_gemm_small.c 379 */
    {.cls = "decode", .m = 8, .n = 700, .k = 384, .sa = S_ROW, .sb = S_ROW, .out = O_F16, .bias = B_COL,
     .biast = T_BF16, .act = FP8KIT_ACT_RELU, .variants = ";gemm_small=0;gemm_small=1"},
    {.cls = "decode", .m = 33, .n = 513, .k = 272, .e5a = 1, .e5b = 1, .sa = S_ROW, .sb = S_NONE, .out = O_F32,
     .fast = 1, .variants = ";gemm_small=0;gemm_small=1"},
    {.cls = "decode", .m = 64, .n = 640, .k = 256, .sa = S_TEN, .sb = S_TEN, .out = O_E5M2,
     .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_GELU_ERF, .bias = B_COL, .beta = 0.5f, .ct = T_BF16,
     .variants = ";gemm_small=0;gemm_small=1"},
    {.cls = "decode", .m = 100, .n = 700, .k = 512, .sa = S_ROW, .sb = S_ROW, .bias = B_ROW,
     .variants = ";gemm_small=0;gemm_small=1,small_mh=2;gemm_small=1,small_split=2"},
    {.cls = "decode", .m = 128, .n = 384, .k = 1024, .out = O_F32, .sa = S_TEN, .sb = S_TEN,
     .variants = ";gemm_small=1"},
    {.cls = "decode", .m = 17, .n = 1111, .k = 512, .e5b = 1, .sa = S_TEN, .sb = S_ROW, .out = O_F16,
     .act = FP8KIT_ACT_SILU, .ldd_pad = 8, .variants = ";gemm_small=1,small_split=2;gemm_small=0"},
    {.cls = "decode", .m = 5, .n = 300, .k = 128, .sa = S_BLK, .sb = S_BLK, .variants = ";gemm_small=1"},
    {.cls = "decode", .m = 32, .n = 2048, .k = 512, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .rceil = 1, .hp = T_BF16,
     .data = D_EXACT, .sa = S_TEN, .sb = S_TEN}, /* test_cuda_gemm.c 1143 */
    {.cls = "decode", .m = 64, .n = 96, .k = 64, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED},
    /* fp8 outputs and fused output quantization */
    {.cls = "square", .m = 128, .n = 128, .k = 256, .out = O_E4M3, .sa = S_TEN, .sb = S_TEN},
    {.cls = "odd", .m = 150, .n = 170, .k = 128, .e5a = 1, .out = O_E5M2, .sa = S_ROW, .sb = S_TEN, .beta = 0.5f,
     .ct = T_F16},
    {.cls = "odd", .m = 257, .n = 200, .k = 256, .out = O_E4M3, .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_SILU,
     .bias = B_ROW, .sa = S_TEN, .sb = S_TEN, .variants = ";gemm_bn=192"},
    {.cls = "odd", .m = 77, .n = 224, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .rceil = 1, .hp = T_BF16,
     .data = D_EXACT, .bias = B_COL, .act = FP8KIT_ACT_RELU, .sa = S_TEN, .sb = S_TEN, .small = 1},
    {.cls = "odd", .m = 129, .n = 288, .k = 256, .out = O_E5M2, .oq = FP8KIT_OUTQ_MX, .hp = T_F16, .data = D_EXACT,
     .sa = S_ROW, .sb = S_TEN, .bias = B_ROW, .biast = T_F16, .alpha = 0.5f, .variants = ";gemm_bn=192"},
    {.cls = "odd", .m = 201, .n = 160, .k = 512, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .hp = T_BF16, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_TANH, .sa = S_ROW, .sb = S_ROW},
    {.cls = "odd", .m = 65, .n = 200, .k = 128, .out = O_E5M2, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F32,
     .data = D_EXACT, .beta = 0.5f, .ct = T_BF16, .sa = S_TEN, .sb = S_TEN},
    {.cls = "odd", .m = 131, .n = 200, .k = 256, .out = O_E5M2, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F32,
     .pow2 = 1, .data = D_EXACT, .bias = B_COL, .biast = T_BF16, .beta = -0.5f, .ct = T_F32, .alpha = 2.0f,
     .sa = S_TEN, .sb = S_ROW, .variants = ";gemm_bn=64"},
    {.cls = "odd", .m = 200, .n = 390, .k = 512, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16,
     .pow2 = 1, .bias = B_COL, .act = FP8KIT_ACT_GELU_ERF, .sa = S_ROW, .sb = S_ROW},
    {.cls = "odd", .m = 130, .n = 260, .k = 256, .e5a = 1, .e5b = 1, .sa = S_BLK, .sb = S_BLK, .out = O_E4M3,
     .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16, .data = D_EXACT},
    {.cls = "odd", .m = 130, .n = 300, .k = 128, .e5a = 1, .sa = S_MX, .sb = S_MX, .out = O_E5M2,
     .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F32, .pow2 = 1, .data = D_EXACT},
    {.cls = "odd", .m = 77, .n = 224, .k = 256, .sa = S_MX, .sb = S_MX, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX,
     .hp = T_BF16, .data = D_EXACT, .bias = B_COL, .act = FP8KIT_ACT_RELU},
    {.cls = "odd", .m = 130, .n = 130, .k = 640, .e5a = 1, .e5b = 1, .sa = S_MX, .sb = S_MX, .data = D_MX_EDGE,
     .out = O_F16, .alpha = 0x1p-14f},
    {.cls = "odd", .m = 130, .n = 100, .k = 160, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .data = D_MX_HUGE},
    {.cls = "odd", .m = 130, .n = 100, .k = 160, .sa = S_MX, .sb = S_MX, .data = D_MX_HUGE, .out = O_F32, .fast = 1,
     .variants = "gemm_bn=64"},
    /* mx scale bytes at the ends of the range, NaN scales */
    {.cls = "odd", .m = 200, .n = 150, .k = 512, .sa = S_MX, .sb = S_MX, .data = D_MX_EDGE, .alpha = 0x1p-10f},
    {.cls = "odd", .m = 130, .n = 260, .k = 1024, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .data = D_MX_EDGE,
     .out = O_F16, .alpha = 0x1p-10f},
    {.cls = "odd", .m = 100, .n = 90, .k = 256, .sa = S_MX, .sb = S_MX, .data = D_MX_NAN},
    {.cls = "odd", .m = 140, .n = 70, .k = 96, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .data = D_MX_NAN},
    /* every fp8 pair, precise f32 */
    {.cls = "square", .m = 192, .n = 136, .k = 256, .out = O_F32, .sa = S_TEN, .sb = S_TEN},
    {.cls = "square", .m = 192, .n = 136, .k = 272, .e5b = 1, .out = O_F32, .sa = S_ROW, .sb = S_ROW,
     .act = FP8KIT_ACT_GELU_TANH, .bias = B_COL, .biast = T_BF16},
    {.cls = "square", .m = 192, .n = 136, .k = 288, .e5a = 1, .out = O_F32, .sa = S_NONE, .sb = S_TEN,
     .beta = -0.5f, .ct = T_BF16},
    {.cls = "square", .m = 192, .n = 136, .k = 304, .e5a = 1, .e5b = 1, .out = O_F32, .sa = S_ROW, .sb = S_NONE,
     .act = FP8KIT_ACT_SILU, .bias = B_ROW, .biast = T_F16, .alpha = 1.5f},
    /* test_cuda_gemm.c's configurations (its line numbers) */
    {.cls = "odd", .m = 77, .n = 130, .k = 320, .e5a = 1, .out = O_F32, .sa = S_ROW, .sb = S_ROW, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_ERF, .beta = 0.5f, .alpha = 0.75f}, /* 1011 */
    {.cls = "odd", .m = 77, .n = 96, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .rceil = 1, .hp = T_BF16,
     .data = D_EXACT, .bias = B_COL, .act = FP8KIT_ACT_RELU, .sa = S_TEN, .sb = S_TEN}, /* 1005 */
    {.cls = "odd", .m = 77, .n = 33, .k = 48, .out = O_F32, .sa = S_ROW, .sb = S_TEN}, /* 1033 */
    {.cls = "odd", .m = 130, .n = 200, .k = 256, .out = O_F32, .sa = S_NONE, .sb = S_ROW, .ldd_pad = 24}, /* 1035 */
    {.cls = "odd", .m = 300, .n = 260, .k = 640, .sa = S_BLK, .sb = S_BLK}, /* 1037 */
    {.cls = "odd", .m = 300, .n = 260, .k = 992, .sa = S_BLK, .sb = S_BLK, .out = O_F32, .fast = 1,
     .variants = "gemm_promo=4"},
    {.cls = "odd", .m = 300, .n = 260, .k = 992, .sa = S_BLK, .sb = S_BLK, .layout = L_MN, .out = O_F32, .fast = 1,
     .variants = "gemm_promo=4,gemm_bn=64"},
    {.cls = "odd", .m = 300, .n = 260, .k = 992, .sa = S_BLK, .sb = S_BLK, .layout = L_MN, .act = FP8KIT_ACT_SILU,
     .beta = -1.0f, .ct = T_BF16},
    {.cls = "odd", .m = 300, .n = 700, .k = 640, .sa = S_BLK, .sb = S_BLK}, /* 1045 */
    {.cls = "odd", .m = 300, .n = 600, .k = 640, .sa = S_BLK, .sb = S_BLK, .layout = L_MN, .out = O_F32, .fast = 1,
     .data = D_HEAVY, .variants = "gemm_promo=4"},
    {.cls = "square", .m = 256, .n = 192, .k = 384, .out = O_E4M3, .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_RELU,
     .bias = B_ROW, .sa = S_TEN, .sb = S_TEN}, /* 1057 */
    {.cls = "odd", .m = 100, .n = 90, .k = 384, .out = O_E5M2, .oq = FP8KIT_OUTQ_SCALED,
     .act = FP8KIT_ACT_GELU_ERF, .bias = B_ROW, .sa = S_TEN, .sb = S_TEN},
    {.cls = "square", .m = 256, .n = 384, .k = 1024, .fast = 1, .sa = S_TEN, .sb = S_TEN}, /* 1061 */
    {.cls = "odd", .m = 130, .n = 70, .k = 160, .fast = 1, .out = O_F32, .sa = S_TEN, .sb = S_TEN}, /* 1062 */
    {.cls = "odd", .m = 200, .n = 390, .k = 272, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=192"}, /* 1065 */
    {.cls = "odd", .m = 130, .n = 250, .k = 384, .sa = S_ROW, .sb = S_ROW, .out = O_F16, .bias = B_COL,
     .biast = T_BF16, .act = FP8KIT_ACT_GELU_TANH, .beta = 0.5f, .ct = T_BF16, .alpha = 0.75f,
     .variants = "gemm_bn=192"}, /* 1066 */
    {.cls = "odd", .m = 260, .n = 300, .k = 384, .sa = S_TEN, .sb = S_TEN, .fast = 1, .variants = "gemm_bn=256"},
    {.cls = "odd", .m = 129, .n = 520, .k = 512, .sa = S_ROW, .sb = S_ROW, .fast = 1, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_TANH, .variants = "gemm_bn=256"}, /* 1075 */
    {.cls = "odd", .m = 190, .n = 270, .k = 256, .sa = S_TEN, .sb = S_ROW, .fast = 1, .out = O_F32, .beta = -0.5f,
     .ct = T_F32, .ldd_pad = 8, .variants = "gemm_bn=256"}, /* 1078 */
    {.cls = "square", .m = 128, .n = 256, .k = 128, .sa = S_TEN, .sb = S_TEN, .fast = 1, .out = O_E5M2,
     .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_RELU, .variants = "gemm_bn=256"}, /* 1080 */
    {.cls = "odd", .m = 333, .n = 264, .k = 256, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=128"}, /* 1085 bulk */
    {.cls = "odd", .m = 201, .n = 392, .k = 272, .sa = S_TEN, .sb = S_TEN, .ldd_pad = 8, .variants = "gemm_bn=192"},
    {.cls = "odd", .m = 77, .n = 200, .k = 128, .sa = S_ROW, .sb = S_TEN, .out = O_F16, .bias = B_ROW,
     .biast = T_F16, .act = FP8KIT_ACT_SILU, .variants = "gemm_bn=192"}, /* 1087 */
    {.cls = "odd", .m = 150, .n = 264, .k = 384, .sa = S_TEN, .sb = S_TEN, .fast = 1, .bias = B_COL,
     .biast = T_BF16, .act = FP8KIT_ACT_GELU_ERF, .alpha = 1.5f, .variants = "gemm_bn=256"}, /* 1089 */
    {.cls = "odd", .m = 72, .n = 136, .k = 192, .sa = S_ROW, .sb = S_ROW, .act = FP8KIT_ACT_RELU,
     .variants = "gemm_bn=64"}, /* 1091 */
    {.cls = "square", .m = 256, .n = 320, .k = 512, .sa = S_BLK, .sb = S_BLK, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_TANH}, /* 1093 */
    {.cls = "odd", .m = 300, .n = 260, .k = 640, .e5b = 1, .sa = S_BLK, .sb = S_BLK}, /* 1103 */
    {.cls = "odd", .m = 300, .n = 260, .k = 640, .e5a = 1, .sa = S_BLK, .sb = S_BLK},
    {.cls = "odd", .m = 300, .n = 260, .k = 640, .e5a = 1, .e5b = 1, .sa = S_BLK, .sb = S_BLK, .data = D_HEAVY},
    {.cls = "odd", .m = 200, .n = 136, .k = 512, .e5a = 1, .sa = S_BLK, .sb = S_BLK, .layout = L_MN, .out = O_F32,
     .fast = 1, .variants = "gemm_promo=4,gemm_bn=64"}, /* 1109 */
    {.cls = "odd", .m = 130, .n = 390, .k = 384, .e5b = 1, .sa = S_BLK, .sb = S_BLK, .out = O_F16, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_TANH}, /* 1111 */
    {.cls = "odd", .m = 77, .n = 224, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .hp = T_BF16, .data = D_EXACT,
     .alpha = 0.5f, .bias = B_COL, .act = FP8KIT_ACT_RELU, .sa = S_TEN, .sb = S_TEN}, /* 1118: mxc[0..3] */
    {.cls = "odd", .m = 129, .n = 288, .k = 256, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .hp = T_F16, .rceil = 1,
     .data = D_EXACT, .alpha = 0.5f, .bias = B_ROW, .biast = T_F16, .act = FP8KIT_ACT_RELU, .sa = S_ROW,
     .sb = S_TEN, .variants = "gemm_bn=192"},
    {.cls = "odd", .m = 65, .n = 352, .k = 128, .out = O_E5M2, .oq = FP8KIT_OUTQ_MX, .hp = T_F32, .data = D_EXACT,
     .alpha = 0.5f, .bias = B_COL, .beta = 0.5f, .ct = T_BF16, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=128"},
    {.cls = "odd", .m = 131, .n = 544, .k = 256, .out = O_E5M2, .oq = FP8KIT_OUTQ_MX, .hp = T_BF16, .rceil = 1,
     .data = D_EXACT, .fast = 1, .alpha = 0.5f, .bias = B_ROW, .biast = T_F16, .sa = S_ROW, .sb = S_TEN,
     .variants = "gemm_bn=256"},
    {.cls = "odd", .m = 77, .n = 300, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16,
     .data = D_EXACT, .alpha = 2.0f, .bias = B_ROW, .biast = T_BF16, .sa = S_TEN, .sb = S_TEN}, /* 1146: bc[0, 2, 3] */
    {.cls = "odd", .m = 129, .n = 392, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F16,
     .data = D_EXACT, .alpha = 2.0f, .bias = B_ROW, .biast = T_BF16, .act = FP8KIT_ACT_RELU, .sa = S_TEN,
     .sb = S_TEN, .variants = "gemm_bn=192"},
    {.cls = "odd", .m = 65, .n = 520, .k = 256, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16,
     .pow2 = 1, .data = D_EXACT, .fast = 1, .alpha = 2.0f, .bias = B_COL, .biast = T_BF16, .act = FP8KIT_ACT_RELU,
     .sa = S_TEN, .sb = S_ROW, .variants = "gemm_bn=256"},
    {.cls = "odd", .m = 99, .n = 96, .k = 384, .out = O_E5M2, .oq = FP8KIT_OUTQ_MX, .hp = T_F16, .rceil = 1,
     .data = D_HEAVY, .ldd_pad = 3, .sa = S_TEN, .sb = S_TEN}, /* 1136 */
    {.cls = "odd", .m = 130, .n = 320, .k = 640, .sa = S_BLK, .sb = S_BLK, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX,
     .hp = T_BF16, .act = FP8KIT_ACT_SILU}, /* 1139 */
    {.cls = "odd", .m = 70, .n = 300, .k = 384, .out = O_E5M2, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F32,
     .data = D_HEAVY, .ldd_pad = 5, .sa = S_TEN, .sb = S_TEN}, /* 1167 */
    {.cls = "odd", .m = 200, .n = 320, .k = 512, .sa = S_MX, .sb = S_MX, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX,
     .hp = T_BF16, .rceil = 1, .act = FP8KIT_ACT_GELU_TANH}, /* 1178 */
    {.cls = "odd", .m = 67, .n = 264, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16,
     .data = D_EXACT, .alpha = 0x1p-100f, .sa = S_TEN, .sb = S_TEN}, /* 1187: register epilogue edge paths */
    {.cls = "odd", .m = 33, .n = 200, .k = 256, .out = O_E5M2, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_F32,
     .data = D_EXACT, .alpha = 0x1p100f, .pow2 = 1, .fast = 1, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=256"},
    {.cls = "odd", .m = 131, .n = 196, .k = 128, .ldd_pad = 4, .out = O_E4M3, .oq = FP8KIT_OUTQ_BLOCK1X128,
     .hp = T_BF16, .data = D_EXACT, .bias = B_COL, .act = FP8KIT_ACT_RELU, .sa = S_TEN, .sb = S_TEN},
    {.cls = "odd", .m = 45, .n = 992, .k = 256, .out = O_E5M2, .oq = FP8KIT_OUTQ_MX, .hp = T_F16,
     .act = FP8KIT_ACT_SILU, .sa = S_ROW, .sb = S_TEN, .bias = B_ROW, .biast = T_BF16, .ldd_pad = 8,
     .variants = "gemm_bn=192"},
    {.cls = "odd", .m = 255, .n = 384, .k = 512, .out = O_E5M2, .oq = FP8KIT_OUTQ_BLOCK1X128, .hp = T_BF16,
     .bias = B_COL, .act = FP8KIT_ACT_GELU_TANH, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=128"},
    {.cls = "odd", .m = 97, .n = 160, .k = 128, .out = O_E4M3, .oq = FP8KIT_OUTQ_MX, .hp = T_BF16, .beta = 0.5f,
     .ct = T_BF16, .act = FP8KIT_ACT_GELU_TANH, .bias = B_ROW, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_bn=64"},
    /* test_cuda_gemm_mx.c's configurations (its line numbers) */
    {.cls = "square", .m = 256, .n = 256, .k = 512, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED}, /* 401 */
    {.cls = "odd", .m = 130, .n = 70, .k = 32, .sa = S_MX, .sb = S_MX, .out = O_F16}, /* 402 */
    {.cls = "odd", .m = 131, .n = 77, .k = 32, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .out = O_F16},
    {.cls = "odd", .m = 333, .n = 197, .k = 96, .sa = S_MX, .sb = S_MX},
    {.cls = "odd", .m = 201, .n = 129, .k = 96, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED},
    {.cls = "odd", .m = 150, .n = 264, .k = 160, .sa = S_MX, .sb = S_MX, .bias = B_COL, .biast = T_BF16,
     .act = FP8KIT_ACT_GELU_TANH}, /* 406 */
    {.cls = "odd", .m = 77, .n = 33, .k = 256, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .out = O_F32,
     .fast = 1}, /* 416 */
    {.cls = "odd", .m = 64, .n = 96, .k = 32, .sa = S_MX, .sb = S_MX, .data = D_MX_EDGE, .alpha = 0x1p-10f}, /* 421 */
    {.cls = "square", .m = 128, .n = 128, .k = 384, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .data = D_MX_EDGE,
     .out = O_F32, .fast = 1},
    {.cls = "square", .m = 192, .n = 136, .k = 288, .e5b = 1, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED}, /* 438 */
    {.cls = "square", .m = 192, .n = 136, .k = 320, .e5a = 1, .sa = S_MX, .sb = S_MX},
    {.cls = "square", .m = 192, .n = 136, .k = 352, .e5a = 1, .e5b = 1, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED},
    {.cls = "odd", .m = 200, .n = 330, .k = 512, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED,
     .variants = "gemm_bn=64"}, /* 448 */
    {.cls = "odd", .m = 200, .n = 330, .k = 512, .sa = S_MX, .sb = S_MX, .variants = "gemm_bn=128"},
    {.cls = "odd", .m = 130, .n = 96, .k = 256, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .data = D_MX_EDGE,
     .alpha = 0x1p-10f}, /* 388: --small's */
    {.cls = "odd", .m = 130, .n = 72, .k = 160, .sa = S_MX, .sb = S_MX, .data = D_MX_HUGE},
    {.cls = "odd", .m = 200, .n = 136, .k = 256, .sa = S_MX, .sb = S_MX, .variants = "gemm_bn=64"},
    /* more tiles than SMs: CTAs run several tiles */
    {.cls = "multi-tile", .m = 1100, .n = 2048, .k = 128, .sa = S_ROW, .sb = S_ROW, .alpha = 0.5f,
     .variants = "gemm_bn=128;gemm_bn=192"},
    {.cls = "multi-tile", .m = 1100, .n = 2016, .k = 128, .sa = S_MX, .sb = S_MX, .layout = L_BLOCKED, .out = O_F16,
     .bias = B_COL, .act = FP8KIT_ACT_GELU_TANH, .variants = "gemm_bn=128"},
    {.cls = "multi-tile", .m = 1100, .n = 2048, .k = 128, .sa = S_BLK, .sb = S_BLK, .out = O_F16, .bias = B_COL,
     .act = FP8KIT_ACT_GELU_TANH},
    /* test_cuda_gemm_small.c's configurations (its line numbers), on the small-M family (gemm_small=2: the
     * family runs the call or the call fails); first every M class (398-406) */
    {.cls = "decode", .m = 1, .n = 1111, .k = 272, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 2, .n = 1113, .k = 336, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 3, .n = 1115, .k = 400, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 7, .n = 1117, .k = 464, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 8, .n = 1119, .k = 528, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 16, .n = 1121, .k = 272, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 17, .n = 1123, .k = 336, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 31, .n = 1125, .k = 400, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 32, .n = 1127, .k = 464, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 33, .n = 1129, .k = 528, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 47, .n = 1131, .k = 272, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 63, .n = 1133, .k = 336, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 64, .n = 1135, .k = 400, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 65, .n = 1137, .k = 464, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 96, .n = 1139, .k = 528, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 100, .n = 1141, .k = 272, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 127, .n = 1143, .k = 336, .sa = S_ROW, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 128, .n = 1145, .k = 400, .sa = S_TEN, .sb = S_ROW, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 40, .n = 500, .k = 128, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"}, /* 447 */
    {.cls = "decode", .m = 100, .n = 600, .k = 256, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 3, .n = 700, .k = 272, .sa = S_TEN, .sb = S_TEN, .out = O_F32, .fast = 1,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 50, .n = 777, .k = 640, .sa = S_TEN, .sb = S_TEN, .out = O_F16, .alpha = 0.75f,
     .beta = 0.5f, .ct = T_BF16, .variants = "gemm_small=2,small_split=2"}, /* 457 */
    {.cls = "decode", .m = 128, .n = 555, .k = 512, .sa = S_TEN, .sb = S_TEN, .beta = -1.0f, .ct = T_F32,
     .bias = B_ROW, .biast = T_F16, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 20, .n = 999, .k = 768, .sa = S_TEN, .sb = S_TEN, .bias = B_COL, .biast = T_BF16,
     .act = FP8KIT_ACT_RELU, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 64, .n = 1001, .k = 1024, .sa = S_ROW, .sb = S_ROW, .act = FP8KIT_ACT_GELU_TANH,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 9, .n = 1203, .k = 384, .sa = S_TEN, .sb = S_TEN, .act = FP8KIT_ACT_GELU_ERF,
     .beta = 0.25f, .ct = T_F16, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 33, .n = 800, .k = 256, .sa = S_NONE, .sb = S_NONE, .act = FP8KIT_ACT_SILU,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 77, .n = 531, .k = 1536, .sa = S_ROW, .sb = S_TEN, .out = O_F32, .fast = 1,
     .ldd_pad = 12, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 128, .n = 640, .k = 2048, .sa = S_TEN, .sb = S_TEN, .out = O_F32, .fast = 1,
     .data = D_HEAVY, .variants = "gemm_small=2,small_split=4"},
    {.cls = "decode", .m = 16, .n = 1024, .k = 512, .sa = S_TEN, .sb = S_TEN, .out = O_E4M3,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 90, .n = 700, .k = 768, .sa = S_TEN, .sb = S_TEN, .out = O_E5M2,
     .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_SILU, .bias = B_ROW, .variants = "gemm_small=2,small_split=2"},
    {.cls = "decode", .m = 3, .n = 2000, .k = 1024, .sa = S_TEN, .sb = S_TEN, .out = O_E4M3,
     .oq = FP8KIT_OUTQ_SCALED, .act = FP8KIT_ACT_RELU, .bias = B_COL, .variants = "gemm_small=2"},
    {.cls = "decode", .m = 127, .n = 301, .k = 448, .sa = S_TEN, .sb = S_TEN, .fast = 1, .ldd_pad = 8,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 24, .n = 513, .k = 256, .sa = S_TEN, .sb = S_TEN, .out = O_F32, .fast = 1,
     .variants = "gemm_small=2"}, /* 479: every fp8 pair */
    {.cls = "decode", .m = 54, .n = 513, .k = 272, .e5b = 1, .sa = S_TEN, .sb = S_TEN, .out = O_F32, .fast = 1,
     .variants = "gemm_small=2,small_split=2"},
    {.cls = "decode", .m = 84, .n = 513, .k = 288, .e5a = 1, .sa = S_TEN, .sb = S_TEN, .out = O_F32, .fast = 1,
     .variants = "gemm_small=2"},
    {.cls = "decode", .m = 114, .n = 513, .k = 304, .e5a = 1, .e5b = 1, .sa = S_TEN, .sb = S_TEN, .out = O_F32,
     .fast = 1, .variants = "gemm_small=2,small_split=2"},
    /* stream-K: the planner's tail split, and 3 parts forced */
    {.cls = "square", .m = 256, .n = 384, .k = 2048, .sa = S_TEN, .sb = S_TEN, .variants = ";gemm_sk=3"},
    {.cls = "odd", .m = 130, .n = 200, .k = 1040, .sa = S_TEN, .sb = S_TEN, .variants = "gemm_sk=3;gemm_sk=0"},
    /* empty: refused by both */
    {.cls = "empty", .m = 0, .n = 64, .k = 64, .sa = S_TEN, .sb = S_TEN, .want = FP8KIT_ERR_INVALID_SHAPE},
    {.cls = "empty", .m = 64, .n = 0, .k = 64, .sa = S_ROW, .sb = S_ROW, .want = FP8KIT_ERR_INVALID_SHAPE},
};
#define NGEMM ((int)(sizeof k_gemm / sizeof k_gemm[0]))

/* buffers of a GEMM call */
enum { GB_A = 0, GB_B, GB_SA, GB_SB, GB_C, GB_BIAS, GB_SDI, GB_D, GB_SDO, GB_AMAX, GB_N };

/* the operands of one row (host) and the fp64 reference */
typedef struct gdata {
    int64_t M, N, K, ka, kbs, nsa, nsb, sa_ld, ldd, nb, sd_cols;
    fp8kit_dtype at, bt, dt;
    int mx, rowq;
    uint8_t *A, *B, *ea, *eb;
    void *SA, *SB, *C, *BI;
    float scale_d;
    size_t dbytes, sdbytes;
    double *ref;
} gdata;

typedef struct gcase {
    const gemm_row *r;
    const gdata *g;
    const char *keys;
    long id;
    char name[600];
    char plan[400];
    fp8kit_status desc_st;
} gcase;

static int rnd(int lo, int hi) { return lo + (int)ru((uint32_t)(hi - lo + 1)); }

/* test_cuda_gemm_mx.c's scale exponents: realistic [116, 126]; edge kinds
 * per k32 block (products stay finite); NaN: one 255 in A and one in B */
static void make_exps(const gemm_row *r, uint8_t *ea, uint8_t *eb, int64_t M, int64_t N, int64_t kbs)
{
    for (int64_t kb = 0; kb < kbs; kb++) {
        const int edge = r->data == D_MX_EDGE;
        int kind = edge ? (int)(kb % 4) : 0;
        if (edge && kbs == 1)
            kind = 2;
        for (int64_t m = 0; m < M; m++)
            ea[m * kbs + kb] = (uint8_t)(r->data == D_EXACT ? rnd(125, 127)
                                         : kind == 1        ? 254
                                         : kind >= 2        ? rnd(0, 1)
                                         : edge             ? rnd(127, 131)
                                                            : rnd(116, 126));
        for (int64_t n = 0; n < N; n++)
            eb[n * kbs + kb] = (uint8_t)(r->data == D_EXACT ? rnd(125, 127)
                                         : kind == 1        ? rnd(0, 8)
                                         : kind == 2        ? rnd(250, 254)
                                         : kind == 3        ? rnd(1, 2)
                                         : edge             ? rnd(127, 131)
                                                            : rnd(116, 126));
    }
    if (r->data == D_MX_HUGE)
        for (int64_t kb = 0; kb < kbs; kb++) {
            for (int64_t m = 0; m < M; m++)
                ea[m * kbs + kb] = (uint8_t)rnd(253, 254);
            for (int64_t n = 0; n < N; n++)
                eb[n * kbs + kb] = (uint8_t)rnd(129, 131);
        }
    if (r->data == D_MX_NAN && M > 0 && N > 0) {
        ea[(M / 2) * kbs + kbs - 1] = 255; /* row M/2 of D is NaN */
        eb[(N / 3) * kbs] = 255;           /* column N/3 of D is NaN */
    }
}

static void gdata_make(const gemm_row *r, gdata *g)
{
    memset(g, 0, sizeof *g);
    const int64_t M = r->m, N = r->n, K = r->k;
    g->M = M; g->N = N; g->K = K;
    g->ka = (K + 127) / 128;
    g->kbs = K / 32;
    g->at = r->e5a ? FP8KIT_E5M2 : FP8KIT_E4M3;
    g->bt = r->e5b ? FP8KIT_E5M2 : FP8KIT_E4M3;
    g->dt = k_out[r->out];
    g->mx = r->sa == S_MX;
    g->rowq = r->oq == FP8KIT_OUTQ_MX || r->oq == FP8KIT_OUTQ_BLOCK1X128;
    g->ldd = N + r->ldd_pad;
    const int exact = r->data == D_EXACT, heavy = r->data == D_HEAVY;
    const float small = r->data == D_MX_HUGE ? 0x1p-11f : 1.0f;
    g->A = xmalloc((size_t)(M * K));
    g->B = xmalloc((size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++)
        g->A[i] = fk_f32_to_fp8(exact ? rand_int(3) : rand_val(heavy) * (r->e5a ? 64.0f : 32.0f) * small, r->e5a);
    for (int64_t i = 0; i < N * K; i++)
        g->B[i] = fk_f32_to_fp8(exact ? rand_int(3) : rand_val(heavy) * (r->e5b ? 64.0f : 32.0f) * small, r->e5b);
    /* scales: counts as fp8kit_gemm reads them */
    g->nsa = r->sa == S_ROW ? M : 1;
    g->nsb = r->sb == S_ROW ? N : 1;
    g->sa_ld = g->ka;
    if (r->sa == S_BLK) {
        g->sa_ld = r->layout == L_MN ? (M + 3) / 4 * 4 : g->ka;
        g->nsa = r->layout == L_MN ? g->ka * g->sa_ld : M * g->ka;
        g->nsb = (N + 127) / 128 * g->ka;
    }
    if (g->mx) {
        const int blk = r->layout == L_BLOCKED;
        g->nsa = blk ? fk_blocked_rows(M) * fk_blocked_cols(g->kbs) : M * g->kbs;
        g->nsb = blk ? fk_blocked_rows(N) * fk_blocked_cols(g->kbs) : N * g->kbs;
        g->ea = xmalloc((size_t)(M * g->kbs));
        g->eb = xmalloc((size_t)(N * g->kbs));
        make_exps(r, g->ea, g->eb, M, N, g->kbs);
        uint8_t *sa = xmalloc((size_t)g->nsa), *sb = xmalloc((size_t)g->nsb);
        for (int64_t i = 0; i < g->nsa; i++)
            sa[i] = (uint8_t)fk_rng_u32(&rng); /* padding: garbage, never read */
        for (int64_t i = 0; i < g->nsb; i++)
            sb[i] = (uint8_t)fk_rng_u32(&rng);
        for (int64_t m = 0; m < M; m++)
            for (int64_t c = 0; c < g->kbs; c++)
                sa[scale_offset(r->layout, M, g->kbs, 0, m, c)] = g->ea[m * g->kbs + c];
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < g->kbs; c++)
                sb[scale_offset(r->layout, N, g->kbs, 0, n, c)] = g->eb[n * g->kbs + c];
        g->SA = sa;
        g->SB = sb;
    } else {
        float *sa = xmalloc((size_t)g->nsa * 4), *sb = xmalloc((size_t)g->nsb * 4);
        for (int64_t i = 0; i < g->nsa; i++)
            sa[i] = exact ? (float)ldexp(1.0, -(int)ru(3)) : rand_scale(-9, -5);
        for (int64_t i = 0; i < g->nsb; i++)
            sb[i] = exact ? (float)ldexp(1.0, -(int)ru(3)) : rand_scale(-9, -5);
        g->SA = sa;
        g->SB = sb;
    }
    g->C = xmalloc((size_t)(M * N) * 4);
    for (int64_t i = 0; i < M * N; i++)
        store_hp(g->C, i, r->ct, exact ? rand_int(4) : rand_val(0));
    g->nb = r->bias == B_ROW ? M : N;
    g->BI = xmalloc((size_t)g->nb * 4);
    for (int64_t i = 0; i < g->nb; i++)
        store_hp(g->BI, i, r->biast, exact ? rand_int(4) : rand_val(0));
    g->scale_d = 0.25f;
    g->sd_cols = r->oq == FP8KIT_OUTQ_MX ? N / 32 : (N + 127) / 128;
    g->sdbytes = g->rowq ? (size_t)(M * g->sd_cols) * (r->oq == FP8KIT_OUTQ_MX ? 1 : 4) : 0;
    g->dbytes = (size_t)(M * g->ldd) * fp8kit_dtype_size(g->dt);
    if (r->want != FP8KIT_OK)
        return;

    /* fp64 reference y (before the output cast) from the dequantized operands */
    const float *SA = g->SA, *SB = g->SB;
    double *da = malloc((size_t)(M * K) * sizeof(double)), *db = malloc((size_t)(N * K) * sizeof(double));
    g->ref = malloc((size_t)(M * N) * sizeof(double));
    if (!da || !db || !g->ref) {
        fprintf(stderr, "test_xbackend: out of memory\n");
        exit(1);
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            double s = 1.0;
            if (r->sa == S_TEN) s = SA[0];
            else if (r->sa == S_ROW) s = SA[m];
            else if (r->sa == S_BLK)
                s = r->layout == L_MN ? SA[(k / 128) * g->sa_ld + m] : SA[m * g->ka + k / 128];
            else if (g->mx) {
                const uint8_t e = g->ea[m * g->kbs + k / 32];
                s = e == 255 ? NAN : ldexp(1.0, e - 127);
            }
            da[m * K + k] = (double)fk_fp8_to_f32(g->A[m * K + k], r->e5a) * s;
        }
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            double s = 1.0;
            if (r->sb == S_TEN) s = SB[0];
            else if (r->sb == S_ROW) s = SB[n];
            else if (r->sb == S_BLK) s = SB[(n / 128) * g->ka + k / 128];
            else if (g->mx) {
                const uint8_t e = g->eb[n * g->kbs + k / 32];
                s = e == 255 ? NAN : ldexp(1.0, e - 127);
            }
            db[n * K + k] = (double)fk_fp8_to_f32(g->B[n * K + k], r->e5b) * s;
        }
    const double alpha = r->alpha != 0.0f ? r->alpha : 1.0;
    XB_OMP_FOR
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0.0;
            const double *a = da + m * K, *b = db + n * K;
            for (int64_t k = 0; k < K; k++)
                acc += a[k] * b[k];
            double y = alpha * acc;
            if (r->beta != 0.0f) y += (double)r->beta * load_hp(g->C, m * N + n, r->ct);
            if (r->bias == B_COL) y += load_hp(g->BI, n, r->biast);
            if (r->bias == B_ROW) y += load_hp(g->BI, m, r->biast);
            g->ref[m * N + n] = fk_ref_act(y, r->act);
        }
    free(da);
    free(db);
}

static void gdata_free(gdata *g)
{
    free(g->A); free(g->B); free(g->ea); free(g->eb); free(g->SA); free(g->SB); free(g->C); free(g->BI);
    free(g->ref);
}

/* desc and args of the row over the buffers p */
static void gemm_build(const gemm_row *r, const gdata *g, void *const *p, fp8kit_gemm_desc *desc,
                       fp8kit_gemm_args *ga)
{
    memset(desc, 0, sizeof *desc);
    desc->scale_a = r->sa;
    desc->scale_b = r->sb;
    desc->scale_layout = r->layout;
    desc->bias = r->bias;
    desc->act = r->act;
    desc->out_quant = r->oq;
    desc->out_hp = r->hp;
    desc->out_rounding = r->rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
    desc->out_pow2 = r->pow2;
    desc->fast_accum = r->fast;
    memset(ga, 0, sizeof *ga);
    const int64_t one = 1, M = g->M, N = g->N;
    ga->a = fp8kit_tensor_2d(p[GB_A], g->at, M, g->K, g->K);
    ga->b = fp8kit_tensor_2d(p[GB_B], g->bt, N, g->K, g->K);
    const fp8kit_dtype st = g->mx ? FP8KIT_E8M0 : FP8KIT_F32;
    if (r->sa)
        ga->scale_a = fp8kit_tensor_make(p[GB_SA], st, 1, r->sa == S_TEN ? &one : &g->nsa);
    if (r->sb)
        ga->scale_b = fp8kit_tensor_make(p[GB_SB], st, 1, r->sb == S_TEN ? &one : &g->nsb);
    ga->alpha = r->alpha != 0.0f ? r->alpha : 1.0f;
    ga->beta = r->beta;
    if (r->beta != 0.0f)
        ga->c = fp8kit_tensor_2d(p[GB_C], r->ct, M, N, N);
    if (r->bias)
        ga->bias = fp8kit_tensor_make(p[GB_BIAS], r->biast, 1, &g->nb);
    ga->d = fp8kit_tensor_2d(p[GB_D], g->dt, M, N, g->ldd);
    if (r->oq == FP8KIT_OUTQ_SCALED) {
        ga->scale_d = fp8kit_tensor_make(p[GB_SDI], FP8KIT_F32, 1, &one);
        ga->amax_d = p[GB_AMAX];
    }
    if (g->rowq) {
        const int64_t sh[2] = {M, g->sd_cols};
        ga->scale_d = fp8kit_tensor_make(p[GB_SDO], r->oq == FP8KIT_OUTQ_MX ? FP8KIT_E8M0 : FP8KIT_F32, 2, sh);
    }
}

/* One fp8kit_gemm on side s with the workspace it asks for; the test side
 * first describes its plan. */
static fp8kit_status gemm_call(void *cv, const side *s, void *const *p)
{
    gcase *c = cv;
    fp8kit_gemm_desc desc;
    fp8kit_gemm_args ga;
    gemm_build(c->r, c->g, p, &desc, &ga);
    if (s == &g_test) {
        c->desc_st = fp8kit_gemm_describe(s->ctx, &desc, &ga, c->plan, sizeof c->plan);
        if (c->desc_st != FP8KIT_OK)
            snprintf(c->plan, sizeof c->plan, "(%s: %s)", fp8kit_status_string(c->desc_st), fp8kit_last_error(s->ctx));
    }
    size_t ws = 0;
    if (fp8kit_gemm_workspace_size(s->ctx, &desc, &ga, &ws) != FP8KIT_OK)
        ws = 0;
    void *w = ws ? s_alloc(s, ws) : NULL;
    ga.workspace = w;
    ga.workspace_bytes = ws;
    fp8kit_status st = fp8kit_gemm(s->ctx, &desc, &ga, s->stream);
    if (w) {
        s_done(s, c->name);
        s_free(s, w);
    }
    return st;
}

/* Fast-accumulation f32 paths (spec.md 3 bounds only precise f32), as the
 * GPU tests hold them: promoted every 32 of K (mx scales; test_cuda_gemm_mx.c)
 * or every 128 (block scales, the small-M family; test_cuda_gemm.c's
 * F32_PROMOTED_BOUND, test_cuda_gemm_small.c), or not promoted (the general
 * kernel with tensor / row scales: test_cuda_gemm.c's 1e-3 at K <= 256,
 * growing as sqrt(K); the grouped kernel: test_cuda_grouped.c's 2e-3). */
enum { FAST_UNPROMOTED, FAST_PROMO128, FAST_PROMO32, FAST_GROUPED };

/* docs/spec.md section 3's bound for the output dtype (f32: 1e-5 up to
 * K = 16384, sqrt(K / 16384) times that beyond; bf16 4e-3; f16 1e-3). fp8 D:
 * test_cuda_gemm.c's 0.05 (e4m3) / 0.09 (e5m2). fast: f32 with fast_accum,
 * which path (FAST_*). */
static double gemm_bound(fp8kit_dtype dt, int fast, int path, int64_t K)
{
    static const double fast_f32[4] = {1e-3, 5e-4, 2e-4, 2e-3};
    switch (dt) {
    case FP8KIT_F32:
        if (!fast)
            return 1e-5 * fmax(1.0, sqrt((double)K / 16384.0));
        return fast_f32[path] * (path == FAST_UNPROMOTED ? fmax(1.0, sqrt((double)K / 256.0)) : 1.0);
    case FP8KIT_BF16: return 4e-3;
    case FP8KIT_F16: return 1e-3;
    case FP8KIT_E4M3: return 0.05;
    default: return 0.09;
    }
}

static double clamp_ref(double y, double sat) { return isnan(y) ? y : fmax(-sat, fmin(sat, y)); }

/* the dequantization multiplier of D[m, n]'s group (fused output quantization) */
static double group_scale(const uint8_t *sd, fp8kit_out_quant oq, int64_t m, int64_t n, int64_t N)
{
    if (oq == FP8KIT_OUTQ_MX)
        return fk_e8m0_to_f32(sd[m * (N / 32) + n / 32]);
    float f;
    memcpy(&f, sd + 4 * (size_t)(m * ((N + 127) / 128) + n / 128), 4);
    return f;
}

/* test_cuda_gemm.c's checks, on both sides against the fp64 reference and
 * between the sides. */
static void gemm_compare(const gcase *c, const xres *R, const xres *T, double *rel_out, double *relc_out)
{
    const gemm_row *r = c->r;
    const gdata *g = c->g;
    const int64_t M = g->M, N = g->N, ldd = g->ldd;
    const fp8kit_dtype dt = g->dt;
    const int fp8out = dt == FP8KIT_E4M3 || dt == FP8KIT_E5M2, rowq = g->rowq, exact = r->data == D_EXACT;
    const double oscale = r->oq == FP8KIT_OUTQ_SCALED ? g->scale_d : 1.0;
    const int path = r->sa == S_MX                                                  ? FAST_PROMO32
                     : r->sa == S_BLK || strncmp(c->plan, "sm90_small", 10) == 0 ? FAST_PROMO128
                                                                                 : FAST_UNPROMOTED;
    const double bound = gemm_bound(dt, r->fast, path, g->K);
    const double sat = fp8out && !rowq ? (dt == FP8KIT_E5M2 ? 57344.0 : 448.0) * oscale : INFINITY;
    const uint8_t *D[2] = {R->out[GB_D], T->out[GB_D]}, *SD[2] = {R->out[GB_SDO], T->out[GB_SDO]};
    const side *sides[2] = {&g_ref, &g_test};
    /* per element: by output dtype, FLOOR mx output clips a block's largest values by up to 1/8 */
    double el = dt == FP8KIT_E5M2 ? 0.13 : dt == FP8KIT_E4M3 ? 0.07 : 0.02;
    if (r->oq == FP8KIT_OUTQ_MX && !r->rceil)
        el = 0.13;
    const int f16out = dt == FP8KIT_F16;
    double den = 0, ref_amax = 0;
    long nref = 0;
    for (int64_t i = 0; i < M * N; i++) {
        const double y = g->ref[i], cr = clamp_ref(y, sat);
        if (isnan(y) || isinf(cr) || (f16out && fk_t_f16_edge(y, el)))
            continue;
        den += cr * cr;
        nref++;
        ref_amax = fmax(ref_amax, fabs(y));
    }
    const double rms = sqrt(den / (double)(nref ? nref : 1));
    double num[2] = {0, 0}, numc = 0;
    long nan_bad[2] = {0, 0}, nan_miss[2] = {0, 0}, bad[2] = {0, 0}, fp8_far = 0, code_diff = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const double y = g->ref[m * N + n], rr = clamp_ref(y, sat);
            double v[2];
            for (int s = 0; s < 2; s++) {
                v[s] = out_val(D[s], m * ldd + n, dt) * (rowq ? group_scale(SD[s], r->oq, m, n, N) : oscale);
                if (f16out && fk_t_f16_edge(y, el)) { /* at or past the f16 overflow edge */
                    if (!fk_t_f16_edge_ok(y, v[s], el) && nan_miss[s]++ < 3)
                        fprintf(stderr, "  %s: (%lld, %lld) = %g, reference %g at the f16 overflow edge [%s]\n",
                                sides[s]->name, (long long)m, (long long)n, v[s], y, c->name);
                    continue;
                }
                if (isnan(y) || isinf(rr)) { /* NaN and infinities exactly where the reference has them */
                    if (!(isnan(y) ? isnan(v[s]) : v[s] == rr) && nan_miss[s]++ < 3)
                        fprintf(stderr, "  %s: (%lld, %lld) = %g, reference %g [%s]\n", sides[s]->name,
                                (long long)m, (long long)n, v[s], rr, c->name);
                    continue;
                }
                if (isnan(v[s])) {
                    if (nan_bad[s]++ < 3)
                        fprintf(stderr, "  %s: NaN at (%lld, %lld), reference %g [%s]\n", sides[s]->name,
                                (long long)m, (long long)n, rr, c->name);
                    continue;
                }
                num[s] += (v[s] - rr) * (v[s] - rr);
                if (fabs(v[s] - rr) > el * fmax(fabs(rr), rms) + 1e-30 && bad[s]++ < 3)
                    fprintf(stderr, "  %s: (%lld, %lld) = %g, reference %g [%s]\n", sides[s]->name, (long long)m,
                            (long long)n, v[s], rr, c->name);
            }
            if (isnan(y) || isinf(rr) || isnan(v[0]) || isnan(v[1]) || (f16out && fk_t_f16_edge(y, el)))
                continue;
            numc += (v[1] - v[0]) * (v[1] - v[0]);
            if (fp8out) {
                const uint8_t q0 = D[0][m * ldd + n], q1 = D[1][m * ldd + n];
                if (rowq && q0 != q1 && code_diff++ < 3 && exact)
                    fprintf(stderr, "  code 0x%02x (%s) vs 0x%02x (%s) at (%lld, %lld) [%s]\n", q1, g_test.name, q0,
                            g_ref.name, (long long)m, (long long)n, c->name);
                /* one code step apart at most where the group scales agree (f32
                 * block scales within 1e-3: a code moves by one step at most)
                 * and |y| >= 0.1 rms: the backends' y differ by up to ~1e-3 rms
                 * (accumulation, the fast activations), which is under 1% of
                 * such a y; a smaller y may move two codes within the bounds
                 * (H100: 0xa6 vs 0xa8 once, in a gelu + mx output case) */
                const double s0 = rowq ? group_scale(SD[0], r->oq, m, n, N) : 1.0;
                const double s1 = rowq ? group_scale(SD[1], r->oq, m, n, N) : 1.0;
                const int same =
                    s0 == s1 || (r->oq == FP8KIT_OUTQ_BLOCK1X128 && !r->pow2 && fabs(s0 - s1) <= 1e-3 * s0);
                if (same && fabs(rr) > 0.1 * rms) {
                    const int dq =
                        (q0 & 0x80) == (q1 & 0x80) ? abs((q0 & 0x7F) - (q1 & 0x7F)) : (q0 & 0x7F) + (q1 & 0x7F);
                    if (dq > 1 && fp8_far++ < 3)
                        fprintf(stderr, "  fp8 code 0x%02x (%s) vs 0x%02x (%s) at (%lld, %lld) [%s]\n", q1,
                                g_test.name, q0, g_ref.name, (long long)m, (long long)n, c->name);
                }
            }
        }
    double rel[2];
    for (int s = 0; s < 2; s++) {
        rel[s] = den > 0 ? sqrt(num[s] / den) : sqrt(num[s]);
        CHECK(rel[s] <= bound, "%s: rel error %.3e > %.1e [%s]", sides[s]->name, rel[s], bound, c->name);
        CHECK(nan_bad[s] == 0, "%s: %ld NaN outputs where the reference has none [%s]", sides[s]->name, nan_bad[s],
              c->name);
        CHECK(nan_miss[s] == 0, "%s: %ld outputs differ where the reference is NaN, infinite or past f16's range [%s]",
              sides[s]->name, nan_miss[s], c->name);
        CHECK(bad[s] == 0, "%s: %ld elements far from the reference [%s]", sides[s]->name, bad[s], c->name);
    }
    const double relc = den > 0 ? sqrt(numc / den) : sqrt(numc);
    CHECK(relc <= 2 * bound, "the backends differ by %.3e (> 2 x %.1e) [%s]", relc, bound, c->name);
    CHECK(fp8_far == 0, "%ld fp8 codes more than one step apart between the backends [%s]", fp8_far, c->name);
    CHECK(den > 0 || nref == 0, "degenerate reference [%s]", c->name);
    if (rowq) {
        /* the fused output quantization's scales: byte-equal on exact
         * inputs; else y rounded to out_hp may land one hp step apart, so an
         * MX scale may differ by one exponent step and a pow2 scale by 2x in
         * <= 1% of the groups, an f32 scale by the hp step */
        const size_t w = r->oq == FP8KIT_OUTQ_MX ? 1 : 4, ng = g->sdbytes / w;
        const double hp_step = r->hp == FP8KIT_BF16 ? 0x1p-7 : r->hp == FP8KIT_F16 ? 0x1p-10 : 1e-3;
        const double dmax = dt == FP8KIT_E5M2 ? 57344.0 : 448.0; /* the largest code of D's format */
        long sd_diff = 0, sd_far = 0, sd_ne = 0;
        for (size_t i = 0; i < ng; i++) {
            int diff, far;
            sd_ne += memcmp(SD[0] + w * i, SD[1] + w * i, w) != 0;
            if (w == 1) {
                diff = SD[0][i] != SD[1][i];
                far = abs((int)SD[0][i] - (int)SD[1][i]) > 1;
            } else {
                float a, b;
                memcpy(&b, SD[0] + 4 * i, 4);
                memcpy(&a, SD[1] + 4 * i, 4);
                diff = memcmp(&a, &b, 4) != 0 && (r->pow2 || exact);
                /* a group's amax is one y: the backends' y differ by up
                 * to ~1e-3 rms (the tensor cores' own accumulation inside
                 * each 128 of K keeps ~13 bits of the partial sums; see
                 * the fp8 code check above), which moves the f32 scale of
                 * a group whose largest |y| is small against rms (a
                 * cancelled sum) by more than the hp step of itself */
                const double tol = r->pow2 ? fabs((double)b) : hp_step * fabs((double)b) + 1e-3 * rms / dmax;
                far = !(fabs((double)a - (double)b) <= tol);
                if (far && sd_far < 3)
                    fprintf(stderr, "  f32 scale (%lld, %lld): %.9g (%s) vs %.9g (%s), tolerance %.3g, rms / %g %.3g\n",
                            (long long)(i / (size_t)g->sd_cols), (long long)(i % (size_t)g->sd_cols), (double)a,
                            g_test.name, (double)b, g_ref.name, tol, dmax, rms / dmax);
            }
            if (diff && (exact || far) && sd_diff < 3)
                fprintf(stderr, "  scale (%lld, %lld) differs between the backends [%s]\n",
                        (long long)(i / (size_t)g->sd_cols), (long long)(i % (size_t)g->sd_cols), c->name);
            sd_diff += diff;
            sd_far += far;
        }
        if (exact) {
            CHECK(sd_diff == 0, "%ld output scales differ between the backends (exact inputs) [%s]", sd_diff, c->name);
            CHECK(code_diff == 0, "%ld output codes differ between the backends (exact inputs) [%s]", code_diff,
                  c->name);
        } else {
            CHECK(sd_far == 0, "%ld output scales far apart between the backends [%s]", sd_far, c->name);
            CHECK(sd_diff * 100 <= (long)ng, "%ld of %zu output scales differ between the backends [%s]", sd_diff,
                  ng, c->name);
        }
        (void)sd_ne;
    }
    if (r->oq == FP8KIT_OUTQ_SCALED) {
        float am[2];
        for (int s = 0; s < 2; s++) {
            memcpy(&am[s], (s ? T : R)->out[GB_AMAX], 4);
            CHECK(fabs(am[s] - ref_amax) <= 1e-3 * ref_amax, "%s: amax %g, reference %g [%s]", sides[s]->name,
                  (double)am[s], ref_amax, c->name);
        }
        CHECK(fabs((double)am[1] - (double)am[0]) <= 1e-3 * ref_amax, "amax %g (%s) vs %g (%s) [%s]", (double)am[1],
              g_test.name, (double)am[0], g_ref.name, c->name);
    }
    *rel_out = rel[1];
    *relc_out = relc;
}

static void gemm_case_name(gcase *c)
{
    const gemm_row *r = c->r;
    const gdata *g = c->g;
    snprintf(c->name, sizeof c->name,
             "gemm #%ld class '%s': %lldx%lldx%lld a=%s b=%s d=%s scales=%s/%s layout=%s alpha=%g beta=%g c=%s "
             "bias=%s/%s act=%s outq=%s hp=%s rounding=%s pow2=%d fast=%d data=%s ldd_pad=%lld tuning='%s'",
             c->id, r->cls, (long long)g->M, (long long)g->N, (long long)g->K, fp8kit_dtype_name(g->at),
             fp8kit_dtype_name(g->bt), fp8kit_dtype_name(g->dt), k_mode_name[r->sa], k_mode_name[r->sb],
             k_layout_name[r->layout], r->alpha != 0.0f ? (double)r->alpha : 1.0, (double)r->beta,
             fp8kit_dtype_name(r->ct), k_bias_name[r->bias], fp8kit_dtype_name(r->biast), k_act_name[r->act],
             k_oq_name[r->oq], fp8kit_dtype_name(r->hp), r->rceil ? "rceil" : "floor", r->pow2, r->fast,
             k_data_name[r->data], (long long)r->ldd_pad, c->keys);
}

#define MAXV 8 /* variants per row */

/* The variants of a row: its keys split at ';' (the first max into out,
 * when given); returns how many there are, at most MAXV. */
static int split_variants(const char *v, char (*out)[128], int max)
{
    int n = 0;
    const char *p = v ? v : "";
    for (;;) {
        const char *e = strchr(p, ';');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (out && n < max)
            snprintf(out[n], 128, "%.*s", (int)len, p);
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    return n < MAXV ? n : MAXV;
}

static void run_gemm_row(const gemm_row *r)
{
    char vars[MAXV][128];
    const int nv = split_variants(r->variants, vars, MAXV);
    long ids[MAXV];
    int any = 0;
    for (int v = 0; v < nv; v++) {
        ids[v] = case_begin(!g_small || r->small) ? g_id - 1 : -1;
        any |= ids[v] >= 0;
    }
    if (!any)
        return;
    /* the data depend on the row's case numbers only */
    rng.s = g_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(g_id + 7));
    (void)fk_rng_u64(&rng);
    gdata g;
    gdata_make(r, &g);
    xcall x;
    memset(&x, 0, sizeof x);
    const size_t sab = (size_t)g.nsa * (g.mx ? 1 : 4), sbb = (size_t)g.nsb * (g.mx ? 1 : 4);
    xadd(&x, "a", (size_t)(g.M * g.K), g.A, 0, 0);
    xadd(&x, "b", (size_t)(g.N * g.K), g.B, 0, 0);
    xadd(&x, "scale_a", sab, g.SA, 0, 0);
    xadd(&x, "scale_b", sbb, g.SB, 0, 0);
    xadd(&x, "c", (size_t)(g.M * g.N) * 4, g.C, 0, 0);
    xadd(&x, "bias", (size_t)g.nb * 4, g.BI, 0, 0);
    xadd(&x, "scale_d (in)", 4, &g.scale_d, 0, 0);
    const size_t ds = fp8kit_dtype_size(g.dt);
    const int id = xadd(&x, "d", g.dbytes, NULL, 1, 0xFF); /* NaN poison */
    xpad(&x, id, g.M, g.N * (int64_t)ds, g.ldd * (int64_t)ds);
    x.b[xadd(&x, "scale_d (out)", g.sdbytes, NULL, 1, 0x5A)].keep = !g.rowq;
    x.b[xadd(&x, "amax_d", 4, NULL, 1, 0xFF)].keep = r->oq != FP8KIT_OUTQ_SCALED;
    gcase c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.g = &g;
    c.keys = "";
    c.id = ids[0] >= 0 ? ids[0] : 0;
    gemm_case_name(&c);
    xres R;
    xrun(&g_ref, &x, gemm_call, &c, c.name, &R);
    for (int v = 0; v < nv; v++) {
        if (ids[v] < 0)
            continue;
        const long f0 = fk_t_fail;
        c.keys = vars[v];
        c.id = ids[v];
        c.plan[0] = 0;
        gemm_case_name(&c);
        s_tuning(&g_test, vars[v]);
        xres T;
        xrun(&g_test, &x, gemm_call, &c, c.name, &T);
        double rel = 0, relc = 0;
        if (check_status(c.name, r->want, &R, &T)) {
            CHECK(c.desc_st == FP8KIT_OK, "fp8kit_gemm_describe: %s [%s]", c.plan, c.name);
            gemm_compare(&c, &R, &T, &rel, &relc);
            /* gemm_small=0: never the small-M family; 2: always (on the GPU) */
            if (strstr(vars[v], "gemm_small=0"))
                CHECK(strncmp(c.plan, "sm90_small", 10) != 0, "gemm_small=0 planned %s [%s]", c.plan, c.name);
            if (strstr(vars[v], "gemm_small=2") && g_test.dev)
                CHECK(strncmp(c.plan, "sm90_small", 10) == 0, "gemm_small=2 planned %s [%s]", c.plan, c.name);
        }
        check_untouched(c.name, &g_ref, &x, &R);
        check_untouched(c.name, &g_test, &x, &T);
        printf("  gemm #%-5ld %-7s %4lldx%5lldx%5lld %s x %s -> %-4s %s/%s %-10s rel %.2e (%s vs %s %.2e) [%s] %s\n",
               c.id, r->cls, (long long)g.M, (long long)g.N, (long long)g.K, fp8kit_dtype_name(g.at),
               fp8kit_dtype_name(g.bt), fp8kit_dtype_name(g.dt), k_mode_name[r->sa], k_mode_name[r->sb],
               k_oq_name[r->oq], rel, g_test.name, g_ref.name, relc, vars[v], c.plan);
        xres_free(&x, &T);
        case_end(OP_GEMM, f0, c.name);
    }
    s_tuning(&g_test, "");
    xres_free(&x, &R);
    gdata_free(&g);
}

/* ================================================================ grouped GEMM table */

/* One grouped configuration: D (T, N) = per expert g of G, rows
 * offsets[g-1] .. offsets[g] - 1: act(alpha deq(A_g) deq(B_g)^T + bias_g).
 * offs NULL: random cuts, the last at T. f32 D needs fast (the GPU's rule).
 * masked: A (G, t, K) and D (G, t, N), offs = the valid-row counts of each
 * slab (NULL: random in 0..t); T is then G x t. Block scales: A's 1x128
 * (T x ceil(K/128)), B's 128x128 per expert. */
typedef struct grouped_row {
    const char *cls;
    int64_t t, n, k, g;
    const int32_t *offs;
    int e5a, e5b, out;
    fp8kit_scale_mode sa, sb;
    int bias;
    fp8kit_dtype biast;
    fp8kit_activation act;
    int fast;
    int64_t bpad, dpad; /* extra B rows per expert, extra D columns */
    const char *variants;
    int small;
    int masked;
} grouped_row;

static const int32_t k_off_mixed[6] = {0, 37, 37, 300, 301, 700};  /* empty first, 1-row, spanning tiles */
static const int32_t k_off_short[3] = {100, 250, 400};             /* last < T: rows 400.. untouched */
static const int32_t k_off_last[4] = {0, 0, 0, 256};               /* every row in the last group */
static const int32_t k_off_none[3] = {0, 0, 0};                    /* every group empty: nothing written */
static const int32_t k_off_one[3] = {0, 1, 1};                     /* T = 1 */
static const int32_t k_off_masked[4] = {128, 0, 1, 128};           /* masked counts: full, empty, 1, full */

static const grouped_row k_grouped[] = {
    /* test_cuda_grouped.c's cases (its lines 436-470) */
    {"mixed", 700, 256, 512, 6, k_off_mixed, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_BF16, FP8KIT_ACT_GELU_TANH, 0, 0, 0,
     ";gemm_bn=128", 1, 0},
    {"short last, odd N", 520, 131, 256, 3, k_off_short, 0, 0, O_F16, S_TEN, S_TEN, 1, T_F32, FP8KIT_ACT_RELU, 0, 0,
     3, NULL, 1, 0},
    {"random", 333, 96, 192, 4, NULL, 1, 0, O_F16, S_NONE, S_NONE, 1, T_F32, FP8KIT_ACT_SILU, 0, 0, 0, NULL, 0, 0},
    {"random", 260, 72, 128, 5, NULL, 0, 1, O_BF16, S_TEN, S_ROW, 1, T_F16, FP8KIT_ACT_GELU_ERF, 0, 0, 0, NULL, 0, 0},
    {"random", 200, 64, 160, 3, NULL, 1, 1, O_BF16, S_ROW, S_TEN, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0, 0, NULL, 0, 0},
    {"all in the last", 256, 128, 256, 4, k_off_last, 0, 0, O_BF16, S_ROW, S_ROW, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0,
     0, NULL, 0, 0},
    {"padded B experts", 300, 200, 256, 3, NULL, 0, 0, O_F32, S_ROW, S_ROW, 1, T_F32, FP8KIT_ACT_NONE, 1, 24, 8,
     ";gemm_bn=256", 0, 0},
    {"precise", 600, 400, 384, 4, NULL, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_BF16, FP8KIT_ACT_GELU_TANH, 0, 0, 0,
     "gemm_bn=192", 0, 0},
    {"fast", 600, 400, 384, 4, NULL, 0, 0, O_BF16, S_TEN, S_ROW, 0, T_BF16, FP8KIT_ACT_NONE, 1, 0, 0,
     "gemm_bn=192;gemm_bn=256", 0, 0},
    {"bias silu fast", 600, 520, 384, 4, NULL, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_F32, FP8KIT_ACT_SILU, 1, 0, 0,
     "gemm_bn=256", 0, 0},
    {"fast odd N", 400, 77, 256, 6, NULL, 0, 0, O_BF16, S_ROW, S_TEN, 1, T_BF16, FP8KIT_ACT_RELU, 1, 0, 0,
     "gemm_bn=128", 0, 0},
    {"activations", 270, 136, 128, 3, NULL, 0, 0, O_BF16, S_NONE, S_TEN, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0, 0, NULL,
     0, 0},
    {"activations", 270, 136, 128, 3, NULL, 0, 0, O_BF16, S_TEN, S_ROW, 1, T_BF16, FP8KIT_ACT_RELU, 0, 0, 0, NULL,
     0, 0},
    {"activations", 270, 136, 128, 3, NULL, 0, 0, O_BF16, S_ROW, S_NONE, 0, T_BF16, FP8KIT_ACT_GELU_TANH, 0, 0, 0,
     NULL, 0, 0},
    {"activations", 270, 136, 128, 3, NULL, 0, 0, O_BF16, S_NONE, S_TEN, 1, T_BF16, FP8KIT_ACT_GELU_ERF, 0, 0, 0,
     NULL, 0, 0},
    {"activations", 270, 136, 128, 3, NULL, 0, 0, O_BF16, S_TEN, S_ROW, 0, T_BF16, FP8KIT_ACT_SILU, 0, 0, 0, NULL,
     0, 0},
    {"64 groups", 1024, 256, 256, 64, NULL, 0, 0, O_BF16, S_ROW, S_ROW, 0, T_BF16, FP8KIT_ACT_NONE, 1, 0, 0, NULL,
     0, 0},
    {"tiny", 1, 16, 16, 1, NULL, 0, 0, O_BF16, S_TEN, S_TEN, 0, T_F32, FP8KIT_ACT_NONE, 0, 0, 0, NULL, 1, 0},
    {"tiny", 1, 48, 32, 3, k_off_one, 0, 1, O_F16, S_ROW, S_ROW, 1, T_BF16, FP8KIT_ACT_RELU, 0, 0, 0, NULL, 0, 0},
    {"every group empty", 64, 64, 64, 3, k_off_none, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_F32, FP8KIT_ACT_NONE, 0, 0, 0,
     NULL, 0, 0},
    {"decode many groups", 64, 256, 256, 16, NULL, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_BF16, FP8KIT_ACT_SILU, 1, 0, 0,
     ";grouped_gm=4", 0, 0},
    {"balanced", 1024, 256, 256, 8, NULL, 0, 0, O_F16, S_ROW, S_TEN, 1, T_F16, FP8KIT_ACT_GELU_TANH, 0, 0, 0,
     ";gemm_bn=128", 0, 0},
    /* block scales (1x128 x 128x128) and the masked layout */
    {"block", 700, 256, 512, 6, k_off_mixed, 0, 0, O_BF16, S_BLK, S_BLK, 1, T_BF16, FP8KIT_ACT_GELU_TANH, 0, 0, 0,
     NULL, 1, 0},
    {"block odd N K", 333, 200, 400, 4, NULL, 0, 0, O_BF16, S_BLK, S_BLK, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0, 0, NULL,
     0, 0},
    {"block e5m2", 260, 136, 256, 5, NULL, 1, 1, O_F16, S_BLK, S_BLK, 1, T_F32, FP8KIT_ACT_SILU, 0, 16, 8, NULL, 0, 0},
    {"block f32 fast", 520, 256, 384, 3, k_off_short, 0, 1, O_F32, S_BLK, S_BLK, 0, T_F32, FP8KIT_ACT_NONE, 1, 0, 0,
     NULL, 0, 0},
    {"block 32 groups", 1024, 384, 256, 32, NULL, 0, 0, O_BF16, S_BLK, S_BLK, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0, 0,
     NULL, 0, 0},
    {"masked", 192, 256, 512, 4, NULL, 0, 0, O_BF16, S_ROW, S_ROW, 1, T_BF16, FP8KIT_ACT_SILU, 0, 0, 0, NULL, 1, 1},
    {"masked block", 256, 200, 384, 6, NULL, 0, 0, O_BF16, S_BLK, S_BLK, 0, T_BF16, FP8KIT_ACT_NONE, 0, 0, 0, NULL,
     1, 1},
    {"masked full/empty", 128, 128, 256, 4, k_off_masked, 0, 1, O_F16, S_BLK, S_BLK, 1, T_F32, FP8KIT_ACT_RELU, 0, 8,
     4, NULL, 0, 1},
    {"masked tensor fast", 300, 384, 256, 8, NULL, 0, 0, O_BF16, S_TEN, S_TEN, 0, T_BF16, FP8KIT_ACT_NONE, 1, 0, 0,
     "gemm_bn=256", 0, 1},
};
#define NGROUPED ((int)(sizeof k_grouped / sizeof k_grouped[0]))

enum { PB_A = 0, PB_B, PB_SA, PB_SB, PB_BIAS, PB_OFF, PB_D, PB_STATUS };

typedef struct pcase {
    const grouped_row *r;
    int64_t T, N, K, G, brows, ldd;
    int64_t M;           /* masked: rows per slab (T = G x M); 0: contiguous */
    int64_t kb, nb;      /* block scales: ceil(K / 128), ceil(N / 128) */
    int64_t sa_n, sb_n;  /* scale values of A (all T rows) and of B (all experts) */
    fp8kit_dtype at, bt, dt;
    uint8_t *a, *b;
    float *sa, *sb;
    void *bias;
    int32_t *off;
    double *ref; /* T x N; rows past offsets[G-1] unused */
    const char *keys;
    long id;
    char name[500];
} pcase;

static fp8kit_gemm_desc grouped_desc(const grouped_row *r)
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = r->sa;
    d.scale_b = r->sb;
    d.bias = r->bias ? FP8KIT_BIAS_COL : FP8KIT_BIAS_NONE;
    d.act = r->act;
    d.fast_accum = r->fast;
    return d;
}

/* The group owning row m of the T rows (masked: slab after slab), or -1. */
static int64_t grp_owner(const pcase *c, const int32_t *off, int64_t m)
{
    if (c->M)
        return m % c->M < off[m / c->M] ? m / c->M : -1;
    for (int64_t g = 0; g < c->G; g++)
        if (m < off[g])
            return g;
    return -1;
}

/* Group g's rows [*r0, *r1) of the T rows. */
static void grp_rows(const pcase *c, const int32_t *off, int64_t g, int64_t *r0, int64_t *r1)
{
    *r0 = c->M ? g * c->M : g ? off[g - 1] : 0;
    *r1 = c->M ? *r0 + off[g] : off[g];
}

/* the test side: one fp8kit_grouped_gemm (offsets and status in the side's memory) */
static fp8kit_status grouped_call(void *cv, const side *s, void *const *p)
{
    pcase *c = cv;
    const grouped_row *r = c->r;
    fp8kit_gemm_desc d = grouped_desc(r);
    fp8kit_grouped_gemm_args ga;
    memset(&ga, 0, sizeof ga);
    if (c->M) {
        const int64_t as[3] = {c->G, c->M, c->K}, ds[3] = {c->G, c->M, c->N};
        ga.a = fp8kit_tensor_make(p[PB_A], c->at, 3, as);
        ga.d = fp8kit_tensor_make(p[PB_D], c->dt, 3, ds);
        ga.d.strides[0] = c->M * c->ldd, ga.d.strides[1] = c->ldd, ga.d.strides[2] = 1;
        ga.layout = FP8KIT_GROUPED_MASKED;
    } else {
        ga.a = fp8kit_tensor_2d(p[PB_A], c->at, c->T, c->K, c->K);
        ga.d = fp8kit_tensor_2d(p[PB_D], c->dt, c->T, c->N, c->ldd);
    }
    const int64_t bshape[3] = {c->G, c->N, c->K}, gn[2] = {c->G, c->N}, one = 1;
    ga.b = fp8kit_tensor_make(p[PB_B], c->bt, 3, bshape);
    ga.b.strides[0] = c->brows * c->K;
    ga.b.strides[1] = c->K;
    ga.b.strides[2] = 1;
    ga.offsets = p[PB_OFF];
    if (r->sa == S_TEN) ga.scale_a = fp8kit_tensor_make(p[PB_SA], FP8KIT_F32, 1, &one);
    if (r->sa == S_ROW) ga.scale_a = fp8kit_tensor_make(p[PB_SA], FP8KIT_F32, 1, &c->T);
    if (r->sb == S_TEN) ga.scale_b = fp8kit_tensor_make(p[PB_SB], FP8KIT_F32, 1, &c->G);
    if (r->sb == S_ROW) ga.scale_b = fp8kit_tensor_make(p[PB_SB], FP8KIT_F32, 2, gn);
    if (r->sa == S_BLK) ga.scale_a = fp8kit_tensor_make(p[PB_SA], FP8KIT_F32, 1, &c->sa_n);
    if (r->sb == S_BLK) ga.scale_b = fp8kit_tensor_make(p[PB_SB], FP8KIT_F32, 1, &c->sb_n);
    if (r->bias) ga.bias = fp8kit_tensor_make(p[PB_BIAS], r->biast, 2, gn);
    ga.alpha = 0.75f;
    ga.status = p[PB_STATUS];
    return fp8kit_grouped_gemm(s->ctx, &d, &ga, s->stream);
}

/* the reference side: one fp8kit_gemm per non-empty group on views (host offsets) */
static fp8kit_status grouped_ref_call(void *cv, const side *s, void *const *p)
{
    pcase *c = cv;
    const grouped_row *r = c->r;
    fp8kit_gemm_desc d = grouped_desc(r);
    const int32_t *off = p[PB_OFF];
    const size_t dsz = fp8kit_dtype_size(c->dt), bsz = fp8kit_dtype_size(r->biast);
    for (int64_t g = 0; g < c->G; g++) {
        int64_t prev, r1;
        grp_rows(c, off, g, &prev, &r1);
        if (r1 > prev) {
            fp8kit_gemm_args v;
            memset(&v, 0, sizeof v);
            const int64_t rows = r1 - prev, one = 1, sa_rows = rows * c->kb, sb_one = c->nb * c->kb;
            v.a = fp8kit_tensor_2d((uint8_t *)p[PB_A] + prev * c->K, c->at, rows, c->K, c->K);
            v.b = fp8kit_tensor_2d((uint8_t *)p[PB_B] + g * c->brows * c->K, c->bt, c->N, c->K, c->K);
            if (r->sa == S_TEN) v.scale_a = fp8kit_tensor_make(p[PB_SA], FP8KIT_F32, 1, &one);
            if (r->sa == S_ROW) v.scale_a = fp8kit_tensor_make((float *)p[PB_SA] + prev, FP8KIT_F32, 1, &rows);
            if (r->sb == S_TEN) v.scale_b = fp8kit_tensor_make((float *)p[PB_SB] + g, FP8KIT_F32, 1, &one);
            if (r->sb == S_ROW) v.scale_b = fp8kit_tensor_make((float *)p[PB_SB] + g * c->N, FP8KIT_F32, 1, &c->N);
            if (r->sa == S_BLK)
                v.scale_a = fp8kit_tensor_make((float *)p[PB_SA] + prev * c->kb, FP8KIT_F32, 1, &sa_rows);
            if (r->sb == S_BLK)
                v.scale_b = fp8kit_tensor_make((float *)p[PB_SB] + g * sb_one, FP8KIT_F32, 1, &sb_one);
            if (r->bias)
                v.bias = fp8kit_tensor_make((char *)p[PB_BIAS] + (size_t)(g * c->N) * bsz, r->biast, 1, &c->N);
            v.alpha = 0.75f;
            v.d = fp8kit_tensor_2d((char *)p[PB_D] + (size_t)(prev * c->ldd) * dsz, c->dt, rows, c->N, c->ldd);
            fp8kit_status st = fp8kit_gemm(s->ctx, &d, &v, s->stream);
            if (st)
                return st;
        }
    }
    return FP8KIT_OK;
}

static void run_grouped_row(const grouped_row *r)
{
    char vars[MAXV][128];
    const int nv = split_variants(r->variants, vars, MAXV);
    long ids[MAXV];
    int any = 0;
    for (int v = 0; v < nv; v++) {
        ids[v] = case_begin(!g_small || r->small) ? g_id - 1 : -1;
        any |= ids[v] >= 0;
    }
    if (!any)
        return;
    rng.s = g_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(g_id + 7));
    (void)fk_rng_u64(&rng);
    pcase c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.M = r->masked ? r->t : 0;
    c.T = r->masked ? r->g * r->t : r->t; c.N = r->n; c.K = r->k; c.G = r->g;
    c.kb = (c.K + 127) / 128;
    c.nb = (c.N + 127) / 128;
    const int blk = r->sa == S_BLK;
    c.sa_n = blk ? c.T * c.kb : c.T;
    c.sb_n = blk ? c.G * c.nb * c.kb : c.G * c.N;
    c.brows = r->n + r->bpad;
    c.ldd = r->n + r->dpad;
    c.at = r->e5a ? FP8KIT_E5M2 : FP8KIT_E4M3;
    c.bt = r->e5b ? FP8KIT_E5M2 : FP8KIT_E4M3;
    c.dt = k_out[r->out];
    const int64_t T = c.T, N = c.N, K = c.K, G = c.G;
    c.a = xmalloc((size_t)(T * K));
    c.b = xmalloc((size_t)(G * c.brows * K));
    for (int64_t i = 0; i < T * K; i++)
        c.a[i] = fk_f32_to_fp8((float)fk_rng_normal(&rng), r->e5a);
    for (int64_t i = 0; i < G * c.brows * K; i++)
        c.b[i] = fk_f32_to_fp8((float)(fk_rng_normal(&rng) * 0.5), r->e5b);
    c.sa = xmalloc(sizeof(float) * (size_t)c.sa_n);
    c.sb = xmalloc(sizeof(float) * (size_t)c.sb_n);
    for (int64_t i = 0; i < c.sa_n; i++)
        c.sa[i] = (float)ldexp(1.0 + fk_rng_unif(&rng), -3 + (int)ru(4));
    for (int64_t i = 0; i < c.sb_n; i++)
        c.sb[i] = (float)(0.25 + fk_rng_unif(&rng));
    c.bias = xmalloc(4 * (size_t)(G * N));
    for (int64_t i = 0; i < G * N; i++)
        store_hp(c.bias, i, r->biast, (float)fk_rng_normal(&rng));
    c.off = xmalloc(sizeof(int32_t) * (size_t)G);
    if (r->offs) {
        memcpy(c.off, r->offs, sizeof(int32_t) * (size_t)G);
    } else if (c.M) { /* masked: random counts, one slab full */
        for (int64_t i = 0; i < G; i++)
            c.off[i] = (int32_t)ru((uint32_t)(c.M + 1));
        c.off[G - 1] = (int32_t)c.M;
    } else {
        for (int64_t i = 0; i < G; i++)
            c.off[i] = (int32_t)ru((uint32_t)(T + 1));
        for (int64_t i = 1; i < G; i++)
            for (int64_t j = i; j > 0 && c.off[j - 1] > c.off[j]; j--) {
                const int32_t tmp = c.off[j];
                c.off[j] = c.off[j - 1];
                c.off[j - 1] = tmp;
            }
        c.off[G - 1] = (int32_t)T;
    }
    int64_t used = 0;
    for (int64_t m = 0; m < T; m++)
        used += grp_owner(&c, c.off, m) >= 0;
    /* fp64 reference over the grouped rows */
    c.ref = malloc(sizeof(double) * (size_t)(T * N) + 8);
    double *da = malloc(sizeof(double) * (size_t)(T * K) + 8);
    double *db = malloc(sizeof(double) * (size_t)(G * c.brows * K) + 8);
    if (!c.ref || !da || !db) {
        fprintf(stderr, "test_xbackend: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < T * K; i++)
        da[i] = fk_fp8_to_f32(c.a[i], r->e5a);
    for (int64_t i = 0; i < G * c.brows * K; i++)
        db[i] = fk_fp8_to_f32(c.b[i], r->e5b);
    XB_OMP_FOR
    for (int64_t m = 0; m < T; m++) {
        const int64_t g = grp_owner(&c, c.off, m);
        if (g < 0)
            continue;
        for (int64_t n = 0; n < N; n++) {
            double y = 0.0;
            const double *pa = da + m * K, *pb = db + (g * c.brows + n) * K;
            if (blk) { /* per 128 of K: the A scale of (m, kb) times B's of (n / 128, kb) */
                for (int64_t kb = 0; kb < c.kb; kb++) {
                    double part = 0.0;
                    for (int64_t k = kb * 128; k < K && k < kb * 128 + 128; k++)
                        part += pa[k] * pb[k];
                    y += part * c.sa[m * c.kb + kb] * c.sb[(g * c.nb + n / 128) * c.kb + kb];
                }
            } else {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++)
                    acc += pa[k] * pb[k];
                const double s_a = r->sa == S_ROW ? c.sa[m] : r->sa == S_TEN ? c.sa[0] : 1.0;
                const double s_b = r->sb == S_ROW ? c.sb[g * N + n] : r->sb == S_TEN ? c.sb[g] : 1.0;
                y = acc * s_a * s_b;
            }
            c.ref[m * N + n] = fk_ref_act(0.75 * y + (r->bias ? load_hp(c.bias, g * N + n, r->biast) : 0.0), r->act);
        }
    }
    free(da);
    free(db);
    const size_t dsz = fp8kit_dtype_size(c.dt), dbytes = (size_t)(T * c.ldd) * dsz;
    const int32_t junk = 12345;
    xcall x;
    memset(&x, 0, sizeof x);
    xadd(&x, "a", (size_t)(T * K), c.a, 0, 0);
    xadd(&x, "b", (size_t)(G * c.brows * K), c.b, 0, 0);
    xadd(&x, "scale_a", sizeof(float) * (size_t)c.sa_n, c.sa, 0, 0);
    xadd(&x, "scale_b", sizeof(float) * (size_t)c.sb_n, c.sb, 0, 0);
    xadd(&x, "bias", fp8kit_dtype_size(r->biast) * (size_t)(G * N), c.bias, 0, 0);
    xadd(&x, "offsets", sizeof(int32_t) * (size_t)G, c.off, 0, 0);
    const int id = xadd(&x, "d", dbytes, NULL, 1, 0x5A);
    xpad(&x, id, T, N * (int64_t)dsz, c.ldd * (int64_t)dsz);
    xadd(&x, "status", 4, &junk, 1, 0x5A);
    xres R;
    c.keys = "";
    xrun(&g_ref, &x, grouped_ref_call, &c, "grouped reference", &R);
    const double bound = gemm_bound(c.dt, r->fast, FAST_GROUPED, K);
    for (int v = 0; v < nv; v++) {
        if (ids[v] < 0)
            continue;
        const long f0 = fk_t_fail;
        c.keys = vars[v];
        c.id = ids[v];
        snprintf(c.name, sizeof c.name,
                 "grouped_gemm #%ld class '%s': T=%lld N=%lld K=%lld G=%lld masked_m=%lld used=%lld a=%s b=%s d=%s scales=%s/%s "
                 "bias=%d/%s act=%s fast=%d bpad=%lld dpad=%lld tuning='%s'",
                 c.id, r->cls, (long long)T, (long long)N, (long long)K, (long long)G, (long long)c.M, (long long)used,
                 fp8kit_dtype_name(c.at), fp8kit_dtype_name(c.bt), fp8kit_dtype_name(c.dt), k_mode_name[r->sa],
                 k_mode_name[r->sb], r->bias, fp8kit_dtype_name(r->biast), k_act_name[r->act], r->fast,
                 (long long)r->bpad, (long long)r->dpad, vars[v]);
        s_tuning(&g_test, vars[v]);
        xres Tr;
        xrun(&g_test, &x, grouped_call, &c, c.name, &Tr);
        double rel[2] = {0, 0}, relc = 0;
        if (check_status(c.name, FP8KIT_OK, &R, &Tr)) {
            const uint8_t *D[2] = {R.out[PB_D], Tr.out[PB_D]};
            const side *sides[2] = {&g_ref, &g_test};
            double num[2] = {0, 0}, numc = 0, den = 0;
            long nan_bad[2] = {0, 0}, touched[2] = {0, 0};
            for (int64_t m = 0; m < T; m++)
                for (int64_t n = 0; n < N; n++) {
                    if (grp_owner(&c, c.off, m) < 0) { /* rows no group owns: untouched */
                        for (int s = 0; s < 2; s++)
                            for (size_t q = 0; q < dsz; q++)
                                touched[s] += D[s][(size_t)(m * c.ldd + n) * dsz + q] != 0x5A;
                        continue;
                    }
                    const double y = c.ref[m * N + n];
                    double v2[2];
                    for (int s = 0; s < 2; s++) {
                        v2[s] = load_hp(D[s], m * c.ldd + n, c.dt);
                        nan_bad[s] += isnan(v2[s]) && !isnan(y);
                        num[s] += (v2[s] - y) * (v2[s] - y);
                    }
                    den += y * y;
                    numc += (v2[1] - v2[0]) * (v2[1] - v2[0]);
                }
            for (int s = 0; s < 2; s++) {
                rel[s] = den > 0 ? sqrt(num[s] / den) : sqrt(num[s]);
                CHECK(rel[s] <= bound, "%s: rel error %.3e > %.1e [%s]", sides[s]->name, rel[s], bound, c.name);
                CHECK(nan_bad[s] == 0, "%s: %ld NaN outputs [%s]", sides[s]->name, nan_bad[s], c.name);
                CHECK(touched[s] == 0, "%s: %ld bytes written in rows no group owns (%lld owned) [%s]", sides[s]->name,
                      touched[s], (long long)used, c.name);
            }
            relc = den > 0 ? sqrt(numc / den) : sqrt(numc);
            CHECK(relc <= bound, "the backends differ by %.3e (> %.1e) [%s]", relc, bound, c.name);
            int32_t status;
            memcpy(&status, Tr.out[PB_STATUS], 4);
            CHECK(status == 0, "%s: status word %d after valid offsets [%s]", g_test.name, (int)status, c.name);
        }
        check_untouched(c.name, &g_ref, &x, &R);
        check_untouched(c.name, &g_test, &x, &Tr);
        printf("  grouped #%-5ld %-18s T %4lld N %4lld K %4lld G %2lld used %4lld %s x %s -> %-4s %s/%s rel %.2e "
               "(%s vs %s %.2e) [%s]\n",
               c.id, r->cls, (long long)T, (long long)N, (long long)K, (long long)G, (long long)used,
               fp8kit_dtype_name(c.at), fp8kit_dtype_name(c.bt), fp8kit_dtype_name(c.dt), k_mode_name[r->sa],
               k_mode_name[r->sb], rel[1], g_test.name, g_ref.name, relc, vars[v]);
        xres_free(&x, &Tr);
        case_end(OP_GROUPED, f0, c.name);
    }
    s_tuning(&g_test, "");
    xres_free(&x, &R);
    free(c.a); free(c.b); free(c.sa); free(c.sb); free(c.bias); free(c.off); free(c.ref);
}

/* ================================================================ main */

static int parse_args(int argc, char **argv)
{
    static const struct option opts[] = {{"small", no_argument, NULL, 's'},
                                         {"cpu-vs-cpu", no_argument, NULL, 'c'},
                                         {"case", required_argument, NULL, 'n'},
                                         {"verbose", no_argument, NULL, 'v'},
                                         {"tuning", required_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        if (o == 's') {
            g_small = 1;
        } else if (o == 'c') {
            g_cpu_vs_cpu = 1;
        } else if (o == 'v') {
            g_verbose = 1;
        } else if (o == 't' && strlen(optarg) < 240) {
            g_tuning = optarg;
        } else if (o == 'n' && (g_only = strtol(optarg, &end, 10)) >= 0 && end && !*end && end != optarg) {
            continue;
        } else {
            if (o == 'n')
                fprintf(stderr, "test_xbackend: --case wants a case number, got '%s'\n", optarg);
            fprintf(o == 'h' ? stdout : stderr,
                    "usage: test_xbackend [--small] [--cpu-vs-cpu] [--case N] [--verbose] [--tuning SPEC]\n"
                    "  --small       a few cases per op (for compute-sanitizer)\n"
                    "  --cpu-vs-cpu  both sides on the CPU backend (thread counts and cpu_isa differ): no GPU needed\n"
                    "  --case N      case N only (the number a failure names; FK_TEST_SEED=n for its data)\n"
                    "  --verbose     a line per passing case too\n"
                    "  --tuning SPEC the test side's overrides under every case's own keys (default: FP8KIT_TUNING),\n"
                    "                e.g. gemm_cluster=2: every GEMM case on the 2-CTA cluster variants\n");
            return o == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "test_xbackend: unexpected argument '%s' (--help)\n", argv[optind]);
        return 2;
    }
    return -1;
}

static int ctx_threads(const fp8kit_ctx *c)
{
    int n = 0;
    return sscanf(fp8kit_ctx_describe(c), "cpu: %d", &n) == 1 ? n : 1;
}

int main(int argc, char **argv)
{
    const int rc = parse_args(argc, argv);
    if (rc >= 0)
        return rc;
    if (!g_cpu_vs_cpu) {
#ifndef FP8KIT_HAVE_CUDA
        printf("test_xbackend: built without CUDA, skipped (--cpu-vs-cpu runs the harness on two CPU contexts)\n");
        return FK_TEST_SKIP;
#else
        if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
            printf("test_xbackend: no usable CUDA device, skipped\n");
            return FK_TEST_SKIP;
        }
#endif
    }
    const double t_start = now_s();
    g_seed = fk_rng_seeded("test_xbackend").s;
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_ref.ctx), FP8KIT_OK);
    int gemm_ok = 1;
    if (g_cpu_vs_cpu) {
        g_test.name = "cpu-b";
        g_test.dev = 0;
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &g_test.ctx), FP8KIT_OK);
        if (g_ref.ctx && g_test.ctx) {
            const int n = ctx_threads(g_ref.ctx);
            CHECK_STATUS(fp8kit_ctx_set_threads(g_test.ctx, n > 1 ? 1 : 2), FP8KIT_OK);
        }
    } else {
#ifdef FP8KIT_HAVE_CUDA
        CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &g_test.ctx), FP8KIT_OK);
        cudaStream_t st = NULL;
        CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
        g_test.stream = st;
        struct cudaDeviceProp prop;
        gemm_ok = cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9 && prop.minor == 0;
        if (!gemm_ok)
            printf("test_xbackend: GEMM and grouped GEMM cases skipped (the CUDA GEMMs need sm_90)\n");
#endif
    }
    if (!g_ref.ctx || !g_test.ctx)
        return fk_test_summary("test_xbackend");
    /* the overrides each context starts with (FP8KIT_TUNING), kept as the base of every case's keys */
    CHECK_STATUS(fp8kit_ctx_get_tuning(g_ref.ctx, g_ref.base, 256), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_get_tuning(g_test.ctx, g_test.base, 256), FP8KIT_OK);
    if (g_tuning)
        snprintf(g_test.base, sizeof g_test.base, "%s", g_tuning);
    if (g_cpu_vs_cpu) /* the other CPU GEMM microkernel on the test side */
        snprintf(g_test.base + strlen(g_test.base), sizeof g_test.base - strlen(g_test.base), "%scpu_isa=generic",
                 g_test.base[0] ? "," : "");
    if (!s_tuning(&g_ref, "") || !s_tuning(&g_test, ""))
        return fk_test_summary("test_xbackend");
    printf("test_xbackend: reference side %s: %s; test side %s: %s (tuning '%s')%s\n", g_ref.name,
           fp8kit_ctx_describe(g_ref.ctx), g_test.name, fp8kit_ctx_describe(g_test.ctx), g_test.base,
           g_small ? "; --small" : "");

    for (int op = 0; op < OP_N; op++) {
        const double t0 = now_s();
        switch (op) {
        case OP_QUANT:
        case OP_DEQUANT: run_quant_table(op); break;
        case OP_MXBOTH: run_mxboth_table(); break;
        case OP_CAST: run_cast_table(); break;
        case OP_GEMM:
            for (int i = 0; i < NGEMM; i++)
                if (gemm_ok)
                    run_gemm_row(&k_gemm[i]);
                else
                    for (int v = split_variants(k_gemm[i].variants, (char (*)[128])NULL, 0); v > 0; v--)
                        g_id++; /* keep the numbering */
            break;
        case OP_GROUPED:
            for (int i = 0; i < NGROUPED; i++)
                if (gemm_ok)
                    run_grouped_row(&k_grouped[i]);
                else
                    for (int v = split_variants(k_grouped[i].variants, (char (*)[128])NULL, 0); v > 0; v--)
                        g_id++;
            break;
        }
        g_secs[op] = now_s() - t0;
    }

    printf("test_xbackend: %-18s %7s %7s %8s\n", "op", "cases", "failed", "seconds");
    long total = 0;
    for (int op = 0; op < OP_N; op++) {
        printf("test_xbackend: %-18s %7ld %7ld %8.2f\n", k_op_name[op], g_ncases[op], g_nfailed[op], g_secs[op]);
        total += g_ncases[op];
    }
    printf("test_xbackend: %ld cases (of %ld in the table) in %.1f s\n", total, g_id, now_s() - t_start);
#ifdef FP8KIT_HAVE_CUDA
    if (g_test.stream)
        cudaStreamDestroy((cudaStream_t)g_test.stream);
#endif
    fp8kit_ctx_destroy(g_test.ctx);
    fp8kit_ctx_destroy(g_ref.ctx);
    return fk_test_summary("test_xbackend");
}
