/* fuzz_api.c - libFuzzer target for the public C API on a CPU context
 * (fp8kit_quant_shapes, fp8kit_quantize, fp8kit_dequantize,
 * fp8kit_quantize_mx_both, fp8kit_cast, fp8kit_gemm,
 * fp8kit_gemm_workspace_size), and the body of the corpus replay test.
 *
 * The input is decoded into descriptors with arbitrary (also out-of-range)
 * enums, tensors with ndim -1..6, shapes and strides from a table of edge
 * values (0, negative, huge, INT64_MAX/3, ...) or raw bytes, NULL or real data
 * pointers. Most tensors start from the shapes a valid call needs and are then
 * mutated, so both deep validation and the kernels are reached.
 *
 * Buffers: every tensor with data gets a buffer of exactly its strided extent
 * (computed here from the header's rules) plus guard bytes, filled with a
 * pattern, when that extent is at most FZ_CAP bytes; otherwise a 16-byte
 * buffer. A call is only passed to the library when either it is certain to
 * fail validation (a rule of the header rules it out; for the GEMM,
 * fp8kit_gemm_workspace_size, which validates everything without touching
 * data on the CPU, said no) or every buffer it may touch covers its extent
 * and the work is small. Invariants (a broken one aborts):
 * - the status is a member of fp8kit_status;
 * - a failing call leaves a non-empty fp8kit_last_error(), and every buffer
 *   (inputs, outputs, guards, row padding) unchanged;
 * - an OK call changes only the elements of its output tensors (guard bytes,
 *   gaps between strided rows and all inputs unchanged);
 * - a call that a header rule rules out does not return OK; fp8kit_gemm
 *   returns what fp8kit_gemm_workspace_size returned.
 * Build (clang): tests/fuzz/build.sh api; replay without libFuzzer:
 * api_fuzz_replay. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8kit.h"

#define FZ_CHECK(c)                                                                             \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "fuzz_api: invariant broken: %s (%s:%d) op %s last_error \"%s\"\n", #c, \
                    __FILE__, __LINE__, fz_op, fz_ctx ? fp8kit_last_error(fz_ctx) : "");        \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

#define FZ_CAP (4u << 20)     /* largest buffer allocated for a tensor */
#define FZ_GUARD 64           /* guard bytes after each buffer */
#define FZ_MAX_NUMEL (1 << 16) /* elements one quantize/cast may process */
#define FZ_MAX_MACS (1 << 18)  /* M*N*K of one GEMM */
#define FZ_MAX_T 12

static fp8kit_ctx *fz_ctx;
static const char *fz_op = "";

/* Per-entry-point counts, printed at exit when FUZZ_API_STATS is set (e.g.
 * fuzz_api -runs=0 CORPUS to see which share of a corpus reaches the kernels). */
enum { S_SHAPES, S_QUANT, S_DEQUANT, S_BOTH, S_CAST, S_WS, S_GEMM, S_N };
static const char *const fz_stat_name[S_N] = {"quant_shapes", "quantize", "dequantize", "quantize_mx_both",
                                              "cast", "gemm_workspace_size", "gemm"};
static long fz_calls[S_N], fz_ok[S_N], fz_skipped[S_N];
static void fz_count(int which, int called, int ok)
{
    if (!called)
        fz_skipped[which]++;
    else {
        fz_calls[which]++;
        fz_ok[which] += ok;
    }
}
static void fz_print_stats(void)
{
    for (int i = 0; i < S_N; i++)
        fprintf(stderr, "fuzz_api: %-20s calls %8ld  ok %8ld  failed %8ld  not run (buffers/work over the cap) %ld\n",
                fz_stat_name[i], fz_calls[i], fz_ok[i], fz_calls[i] - fz_ok[i], fz_skipped[i]);
}

/* ------------------------------------------------------------ input reader */
typedef struct {
    const uint8_t *p;
    size_t n, i;
} rd;
static uint8_t u8(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static uint64_t u64(rd *r)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v = v << 8 | u8(r);
    return v;
}
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int64_t dimv(rd *r)
{
    static const int64_t tab[] = {0, -1, -2, -32, INT64_MIN, INT64_MAX, INT64_MAX / 3, INT64_MAX / 2,
                                  INT64_MAX / 4 + 1, INT64_MAX / 32, INT64_MAX / 128, INT64_MAX - 126,
                                  (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 62, 4096, 65536, 1 << 20,
                                  (int64_t)3037000500, 1 << 24, 127, 128, 129, 255, 256, 257, 512};
    uint8_t b = u8(r);
    if (b < 112)
        return 1 + b % 40;
    if (b < 176)
        return 32 * (1 + b % 8);
    b -= 176;
    if (b < NELEM(tab))
        return tab[b];
    if (b < 70)
        return (int64_t)u64(r);
    return 1 + b % 3;
}

static int64_t stridev(rd *r, int64_t row)
{
    static const int64_t tab[] = {0, 1, 2, 16, 31, 32, 33, 128, 300, -1, -128, INT64_MAX, INT64_MAX / 3,
                                  INT64_MAX / 2, (int64_t)1 << 40, INT64_MIN, (int64_t)1 << 20};
    uint8_t b = u8(r);
    if (b < 96)
        return row > 0 && row < INT64_MAX - 64 ? row + b % 8 : row;
    if (b < 128)
        return row > 0 ? row - 1 : 0;
    b -= 128;
    if (b < NELEM(tab))
        return tab[b];
    if (b < 40)
        return (int64_t)u64(r);
    return 1 + b % 64;
}

/* an enum value: usually in range, sometimes just outside or wild */
static int en(rd *r, int count)
{
    uint8_t b = u8(r);
    if (b < 224)
        return b % count;
    switch (b % 8) {
    case 0: return -1;
    case 1: return count;
    case 2: return count + 1;
    case 3: return INT32_MIN;
    case 4: return INT32_MAX;
    case 5: return 255;
    case 6: return (int)(uint32_t)u64(r);
    default: return 1000;
    }
}

/* -------------------------------------------------- saturating arithmetic */
static int64_t smul(int64_t a, int64_t b)
{
    int64_t v;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &v))
        return -1;
    return v;
}
static int64_t cdiv(int64_t a, int64_t b) { return a <= 0 ? a / b : a / b + (a % b != 0); }
static int64_t rup(int64_t a, int64_t b) { return a <= 0 ? a : smul(cdiv(a, b), b); }

/* ------------------------------------------------- header rules, mirrored */
static size_t dsize(int dt) { return (unsigned)dt < FP8KIT_DTYPE_COUNT ? fp8kit_dtype_size((fp8kit_dtype)dt) : 0; }
static int is_hp(int t) { return t == FP8KIT_F32 || t == FP8KIT_F16 || t == FP8KIT_BF16; }
static int is_fp8(int t) { return t == FP8KIT_E4M3 || t == FP8KIT_E5M2; }

static int all_zero_strides(const fp8kit_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i])
            return 0;
    return 1;
}

/* Effective strides of a tensor that passed t_valid. */
static void eff_strides(const fp8kit_tensor *t, int64_t *st)
{
    if (!all_zero_strides(t)) {
        for (int i = 0; i < t->ndim; i++)
            st[i] = t->strides[i];
        return;
    }
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        st[i] = s;
        s *= t->shape[i];
    }
}

/* 1 when the header allows this dtype/ndim/shape/strides (fp8kit_tensor rules
 * and "every entry point validates": shape >= 1, no overflow); then *extent is
 * the number of elements it spans. */
static int t_valid(const fp8kit_tensor *t, int64_t *extent)
{
    if (dsize(t->dtype) == 0 || t->ndim < 0 || t->ndim > FP8KIT_MAX_DIMS)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] <= 0)
            return 0;
        if ((n = smul(n, t->shape[i])) < 0)
            return 0;
    }
    if (smul(n, (int64_t)dsize(t->dtype)) < 0)
        return 0;
    if (all_zero_strides(t)) {
        *extent = n;
        return 1;
    }
    if (t->ndim > 0 && t->strides[t->ndim - 1] != 1)
        return 0;
    int64_t ext = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (i < t->ndim - 1 && t->strides[i] < ext)
            return 0;
        int64_t span = smul(t->strides[i], t->shape[i] - 1);
        if (span < 0 || span > INT64_MAX - ext)
            return 0;
        ext += span;
    }
    if (smul(ext, (int64_t)dsize(t->dtype)) < 0)
        return 0;
    *extent = ext;
    return 1;
}

static int64_t numel_of(const fp8kit_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < FP8KIT_MAX_DIMS; i++)
        n = smul(n, t->shape[i]);
    return n;
}

static int contiguous(const fp8kit_tensor *t)
{
    int64_t st[FP8KIT_MAX_DIMS], s = 1;
    eff_strides(t, st);
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (st[i] != s && t->shape[i] != 1)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

static int same_shape(const fp8kit_tensor *a, const fp8kit_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim && i < FP8KIT_MAX_DIMS; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

/* ---------------------------------------------------------------- buffers */
typedef struct {
    fp8kit_tensor *t;  /* the tensor whose data this is (NULL: raw buffer, e.g. amax_d) */
    int is_out;        /* the call may write its elements */
    int relevant;      /* the call may touch it */
    int covered;       /* buffer holds the tensor's whole extent */
    uint8_t *p, *orig;
    size_t bytes;      /* allocated, guard included */
} fzbuf;

typedef struct {
    fzbuf b[FZ_MAX_T];
    int n;
    uint64_t seed;
} fzset;

static uint64_t fz_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Allocates the data of t (unless want_null) and fills it with pattern bytes. */
static void attach(fzset *fs, fp8kit_tensor *t, int want_null, int is_out, int relevant)
{
    fzbuf *b = &fs->b[fs->n++];
    memset(b, 0, sizeof *b);
    b->t = t;
    b->is_out = is_out;
    b->relevant = relevant;
    if (want_null) {
        t->data = NULL;
        b->covered = 0;
        return;
    }
    int64_t ext;
    size_t need = 16;
    if (t_valid(t, &ext)) {
        int64_t by = smul(ext, (int64_t)dsize(t->dtype));
        if (by >= 0 && by <= (int64_t)FZ_CAP) {
            need = (size_t)by;
            b->covered = 1;
        }
    }
    b->bytes = need + FZ_GUARD;
    b->p = malloc(b->bytes);
    b->orig = malloc(b->bytes);
    FZ_CHECK(b->p && b->orig);
    for (size_t i = 0; i < b->bytes; i += 8) {
        uint64_t v = fz_rand(&fs->seed);
        memcpy(b->p + i, &v, b->bytes - i < 8 ? b->bytes - i : 8);
    }
    /* outputs: a recognisable poison pattern */
    if (is_out)
        memset(b->p, 0xA5, b->bytes);
    memcpy(b->orig, b->p, b->bytes);
    t->data = b->p;
}

static void attach_raw(fzset *fs, size_t bytes, int is_out, void **where)
{
    fzbuf *b = &fs->b[fs->n++];
    memset(b, 0, sizeof *b);
    b->is_out = is_out;
    b->relevant = 1;
    b->covered = 1;
    b->bytes = bytes + FZ_GUARD;
    b->p = malloc(b->bytes);
    b->orig = malloc(b->bytes);
    FZ_CHECK(b->p && b->orig);
    memset(b->p, 0xA5, b->bytes);
    memcpy(b->orig, b->p, b->bytes);
    *where = b->p;
}

static int all_covered(const fzset *fs)
{
    for (int i = 0; i < fs->n; i++)
        if (fs->b[i].relevant && !fs->b[i].covered && fs->b[i].p)
            return 0;
    return 1;
}

/* After the call: failing -> every byte unchanged; OK -> only output elements. */
static void verify(fzset *fs, fp8kit_status st)
{
    for (int i = 0; i < fs->n; i++) {
        fzbuf *b = &fs->b[i];
        if (!b->p)
            continue;
        if (st != FP8KIT_OK || !b->is_out) {
            FZ_CHECK(memcmp(b->p, b->orig, b->bytes) == 0);
            continue;
        }
        if (!b->t) { /* raw output (amax_d): 4 bytes, then guard */
            FZ_CHECK(memcmp(b->p + 4, b->orig + 4, b->bytes - 4) == 0);
            continue;
        }
        FZ_CHECK(b->covered);
        /* copy the tensor's elements over the original, then compare all */
        fp8kit_tensor *t = b->t;
        size_t es = dsize(t->dtype);
        int64_t st_[FP8KIT_MAX_DIMS], idx[FP8KIT_MAX_DIMS] = {0};
        eff_strides(t, st_);
        int64_t n = numel_of(t);
        uint8_t *tmp = malloc(b->bytes);
        FZ_CHECK(tmp);
        memcpy(tmp, b->orig, b->bytes);
        for (int64_t e = 0; e < n; e++) {
            int64_t off = 0;
            for (int d = 0; d < t->ndim; d++)
                off += idx[d] * st_[d];
            memcpy(tmp + off * es, b->p + off * es, es);
            for (int d = t->ndim - 1; d >= 0; d--) {
                if (++idx[d] < t->shape[d])
                    break;
                idx[d] = 0;
            }
        }
        FZ_CHECK(memcmp(tmp, b->p, b->bytes) == 0);
        free(tmp);
    }
}

static void release(fzset *fs)
{
    for (int i = 0; i < fs->n; i++) {
        free(fs->b[i].p);
        free(fs->b[i].orig);
    }
    fs->n = 0;
}

/* -------------------------------------------------------------- tensors */
static void set_shape(fp8kit_tensor *t, int dtype, int ndim, const int64_t *shape)
{
    int nd = ndim < 0 ? 0 : ndim > FP8KIT_MAX_DIMS ? FP8KIT_MAX_DIMS : ndim;
    *t = fp8kit_tensor_make(NULL, (fp8kit_dtype)dtype, nd, shape);
    t->ndim = ndim;
}

/* Stride mode and a few field mutations; returns 1 when data is to be NULL. */
static int mutate(rd *r, fp8kit_tensor *t, int rate)
{
    uint8_t m = u8(r);
    int nd = t->ndim < 0 ? 0 : t->ndim > FP8KIT_MAX_DIMS ? FP8KIT_MAX_DIMS : t->ndim;
    switch (m & 3) {
    case 0: break; /* explicit contiguous strides from fp8kit_tensor_make */
    case 1: memset(t->strides, 0, sizeof t->strides); break;
    case 2: /* padded rows */
        if (nd >= 2 && t->shape[nd - 1] > 0) {
            int64_t s = stridev(r, t->shape[nd - 1]);
            t->strides[nd - 1] = 1;
            for (int i = nd - 2; i >= 0; i--) {
                t->strides[i] = s;
                s = smul(s, t->shape[i] > 0 ? t->shape[i] : 1);
                if (s < 0)
                    s = INT64_MAX;
            }
        }
        break;
    case 3:
        for (int i = 0; i < nd; i++)
            t->strides[i] = i == nd - 1 && (u8(r) & 1) ? 1 : stridev(r, i + 1 < nd ? t->shape[i + 1] : 1);
        break;
    }
    int want_null = 0;
    int nmut = (m >> 2) & 7;
    if (nmut > rate)
        nmut = 0;
    for (int k = 0; k < nmut; k++) {
        uint8_t w = u8(r);
        switch (w % 7) {
        case 0: t->dtype = (fp8kit_dtype)en(r, FP8KIT_DTYPE_COUNT); break;
        case 1: t->ndim = -1 + u8(r) % 8; break;
        case 2: t->shape[u8(r) % FP8KIT_MAX_DIMS] = dimv(r); break;
        case 3: t->strides[u8(r) % FP8KIT_MAX_DIMS] = stridev(r, 1); break;
        case 4: want_null = 1; break;
        case 5: { /* flatten to 1-D of the same count */
            int64_t n = numel_of(t);
            if (n > 0) {
                memset(t->strides, 0, sizeof t->strides);
                t->shape[0] = n;
                t->ndim = 1;
            }
            break;
        }
        case 6: { /* off by one */
            int64_t *v = &t->shape[u8(r) % FP8KIT_MAX_DIMS];
            int dv = (int)(u8(r) % 3) - 1;
            if ((dv > 0 && *v < INT64_MAX) || (dv < 0 && *v > INT64_MIN))
                *v += dv;
            break;
        }
        }
    }
    return want_null;
}

static void rand_tensor(rd *r, fp8kit_tensor *t, int dtype_hint)
{
    int64_t shape[FP8KIT_MAX_DIMS];
    int nd = -1 + u8(r) % 8;
    for (int i = 0; i < FP8KIT_MAX_DIMS; i++)
        shape[i] = dimv(r);
    int dt = (u8(r) & 3) ? dtype_hint : en(r, FP8KIT_DTYPE_COUNT);
    set_shape(t, dt, nd, shape);
}

static int status_ok_enum(fp8kit_status st) { return (unsigned)st <= FP8KIT_ERR_INTERNAL; }

/* Marks the last error of ctx with a message no fuzzed call produces. */
static const char *fz_mark(fp8kit_ctx *ctx)
{
    static char buf[256];
    fp8kit_gemm_workspace_size(ctx, NULL, NULL, NULL);
    snprintf(buf, sizeof buf, "%s", fp8kit_last_error(ctx));
    return buf;
}

static void check_status(fp8kit_ctx *ctx, fp8kit_status st, const char *marker)
{
    FZ_CHECK(status_ok_enum(st));
    if (st != FP8KIT_OK) {
        const char *msg = fp8kit_last_error(ctx);
        FZ_CHECK(msg && msg[0]);
        FZ_CHECK(!marker || strcmp(msg, marker) != 0);
    }
}

/* ------------------------------------------------------------ quantization */
static void gen_desc(rd *r, fp8kit_quant_desc *d)
{
    memset(d, 0, sizeof *d);
    d->scheme = (fp8kit_scheme)en(r, 5);
    uint8_t b = u8(r);
    d->elem = b < 110 ? FP8KIT_E4M3 : b < 220 ? FP8KIT_E5M2 : (fp8kit_dtype)en(r, FP8KIT_DTYPE_COUNT);
    b = u8(r);
    static const int32_t axes[] = {-1, -2, -1, -2, -1, 0, 1, -3, INT32_MIN, 2};
    d->axis = axes[b % NELEM(axes)];
    d->rounding = (fp8kit_rounding)en(r, 2);
    b = u8(r);
    d->pow2 = b < 200 ? b & 1 : (int32_t)b;
    b = u8(r);
    if (b < 200)
        d->scale_layout = d->scheme == FP8KIT_SCHEME_MX ? (fp8kit_scale_layout)(b & 1)
                          : (d->scheme == FP8KIT_SCHEME_BLOCK1X128 || d->scheme == FP8KIT_SCHEME_BLOCK128X128)
                              ? (fp8kit_scale_layout)((b & 1) * 2) : FP8KIT_LAYOUT_PLAIN;
    else
        d->scale_layout = (fp8kit_scale_layout)en(r, 3);
}

static void gen_hp(rd *r, fp8kit_tensor *x)
{
    int64_t shape[FP8KIT_MAX_DIMS];
    static const int nds[] = {2, 2, 2, 3, 4, 1, 0, 2, 3, -1, 5, 6};
    int nd = nds[u8(r) % NELEM(nds)];
    for (int i = 0; i < FP8KIT_MAX_DIMS; i++)
        shape[i] = dimv(r);
    /* leading dims stay small most of the time */
    for (int i = 0; i + 2 < nd && i < FP8KIT_MAX_DIMS; i++)
        if (u8(r) & 1)
            shape[i] = 1 + shape[i] % 3;
    uint8_t b = u8(r);
    int dt = b < 230 ? b % 3 : en(r, FP8KIT_DTYPE_COUNT);
    set_shape(x, dt, nd, shape);
}

/* 1 when a header rule rules out quantize/dequantize with (desc, hp, q, scale). */
static int quant_must_fail(const fp8kit_quant_desc *d, const fp8kit_tensor *x, const fp8kit_tensor *q,
                           const fp8kit_tensor *s)
{
    fp8kit_tensor wq, ws;
    int64_t ext;
    if (!d || !x || !q || !s)
        return 1;
    if (fp8kit_quant_shapes(d, x, &wq, &ws) != FP8KIT_OK)
        return 1;
    if (!x->data || !q->data || !s->data || !t_valid(q, &ext) || !t_valid(s, &ext))
        return 1;
    if (q->dtype != wq.dtype || !same_shape(q, &wq) || s->dtype != ws.dtype)
        return 1;
    if (numel_of(s) != numel_of(&ws) || !contiguous(s))
        return 1;
    return 0;
}

/* hp x with d (valid or not): q and scale as quant_shapes says, then mutated */
static void gen_q_scale(rd *r, const fp8kit_quant_desc *d, const fp8kit_tensor *x, fp8kit_tensor *q,
                        fp8kit_tensor *s, int *qnull, int *snull)
{
    fp8kit_quant_desc dd;
    if (d)
        dd = *d;
    else
        dd = fp8kit_quant_desc_default(FP8KIT_SCHEME_TENSOR);
    fp8kit_tensor x0 = *x;
    x0.data = NULL;
    if ((u8(r) % 8) && fp8kit_quant_shapes(&dd, &x0, q, s) == FP8KIT_OK) {
    } else {
        rand_tensor(r, q, FP8KIT_E4M3);
        rand_tensor(r, s, FP8KIT_F32);
    }
    *qnull = mutate(r, q, 2);
    *snull = mutate(r, s, 2);
}

static void run_quant(rd *r, int op)
{
    fp8kit_quant_desc d;
    gen_desc(r, &d);
    const fp8kit_quant_desc *dp = (u8(r) % 32) ? &d : NULL;
    if (op == 3 && (u8(r) % 4))
        d.scheme = FP8KIT_SCHEME_MX;
    fp8kit_tensor x, q, s, q2, s2;
    gen_hp(r, &x);
    int xnull = mutate(r, &x, 2);
    int qnull, snull, q2null = 0, s2null = 0;
    fp8kit_quant_desc dr = d, dc = d;
    dr.axis = -1;
    dc.axis = -2;
    gen_q_scale(r, op == 3 ? &dr : dp, &x, &q, &s, &qnull, &snull);
    if (op == 3)
        gen_q_scale(r, &dc, &x, &q2, &s2, &q2null, &s2null);
    fp8kit_ctx *ctx = (u8(r) % 64) ? fz_ctx : NULL;
    uint8_t nulls = u8(r);
    fp8kit_tensor *xp = nulls == 1 ? NULL : &x, *qp = nulls == 2 ? NULL : &q, *sp = nulls == 3 ? NULL : &s;
    fp8kit_tensor *q2p = nulls == 4 ? NULL : &q2, *s2p = nulls == 5 ? NULL : &s2;

    fzset fs = {.n = 0, .seed = 0x9E3779B97F4A7C15ull ^ r->i};
    int deq = op == 2;
    attach(&fs, &x, xnull, deq, 1);
    attach(&fs, &q, qnull, !deq, 1);
    attach(&fs, &s, snull, !deq, 1);
    if (op == 3) {
        attach(&fs, &q2, q2null, 1, 1);
        attach(&fs, &s2, s2null, 1, 1);
    }

    if (op == 0) { /* quant_shapes: metadata only; outputs are structs */
        fz_op = "fp8kit_quant_shapes";
        fp8kit_tensor oq, os;
        memset(&oq, 0x5A, sizeof oq);
        memset(&os, 0x5A, sizeof os);
        fp8kit_tensor oq0 = oq, os0 = os;
        const char *marker = fz_mark(NULL);
        fp8kit_status st = fp8kit_quant_shapes(dp, xp, (u8(r) % 32) ? &oq : NULL, &os);
        check_status(NULL, st, marker);
        fz_count(S_SHAPES, 1, st == FP8KIT_OK);
        if (st) {
            FZ_CHECK(!memcmp(&oq, &oq0, sizeof oq) && !memcmp(&os, &os0, sizeof os));
        } else {
            int64_t e;
            FZ_CHECK(oq.data == NULL && os.data == NULL && t_valid(&oq, &e) && t_valid(&os, &e));
            FZ_CHECK(oq.dtype == dp->elem);
        }
        release(&fs);
        return;
    }

    int must_fail;
    int64_t work = numel_of(&x);
    if (op == 3) {
        must_fail = !ctx || !dp || d.scheme != FP8KIT_SCHEME_MX || !xp || !qp || !sp || !q2p || !s2p ||
                    quant_must_fail(&dr, &x, &q, &s) || quant_must_fail(&dc, &x, &q2, &s2);
    } else {
        must_fail = !ctx || !xp || !qp || !sp || quant_must_fail(dp, &x, &q, &s);
    }
    int run = must_fail || (all_covered(&fs) && work > 0 && work <= FZ_MAX_NUMEL);
    if (run) {
        const char *marker = fz_mark(ctx);
        fp8kit_status st;
        if (op == 1) {
            fz_op = "fp8kit_quantize";
            st = fp8kit_quantize(ctx, dp, xp, qp, sp, NULL);
        } else if (op == 2) {
            fz_op = "fp8kit_dequantize";
            st = fp8kit_dequantize(ctx, dp, qp, sp, xp, NULL);
        } else {
            fz_op = "fp8kit_quantize_mx_both";
            st = fp8kit_quantize_mx_both(ctx, dp, xp, qp, sp, q2p, s2p, NULL);
        }
        check_status(ctx, st, marker);
        if (must_fail)
            FZ_CHECK(st != FP8KIT_OK);
        verify(&fs, st);
        fz_count(op == 1 ? S_QUANT : op == 2 ? S_DEQUANT : S_BOTH, 1, st == FP8KIT_OK);
    } else {
        fz_count(op == 1 ? S_QUANT : op == 2 ? S_DEQUANT : S_BOTH, 0, 0);
    }
    release(&fs);
}

static void run_cast(rd *r)
{
    fp8kit_tensor x, y;
    int dir = u8(r) & 1;
    gen_hp(r, &x);
    y = x;
    uint8_t b = u8(r);
    y.dtype = b < 200 ? (fp8kit_dtype)(3 + (b & 1)) : (fp8kit_dtype)en(r, FP8KIT_DTYPE_COUNT);
    if (dir) {
        fp8kit_tensor t = x;
        x = y;
        y = t;
    }
    int xnull = mutate(r, &x, 2), ynull = mutate(r, &y, 2);
    fp8kit_ctx *ctx = (u8(r) % 64) ? fz_ctx : NULL;
    uint8_t nulls = u8(r);
    fp8kit_tensor *xp = nulls == 1 ? NULL : &x, *yp = nulls == 2 ? NULL : &y;
    fzset fs = {.n = 0, .seed = 0x243F6A8885A308D3ull ^ r->i};
    attach(&fs, &x, xnull, 0, 1);
    attach(&fs, &y, ynull, 1, 1);
    int64_t e;
    int must_fail = !ctx || !xp || !yp || !x.data || !y.data || !t_valid(&x, &e) || !t_valid(&y, &e) ||
                    !((is_hp(x.dtype) && is_fp8(y.dtype)) || (is_fp8(x.dtype) && is_hp(y.dtype))) ||
                    !same_shape(&x, &y);
    int64_t work = numel_of(&x);
    if (must_fail || (all_covered(&fs) && work > 0 && work <= FZ_MAX_NUMEL)) {
        fz_op = "fp8kit_cast";
        const char *marker = fz_mark(ctx);
        fp8kit_status st = fp8kit_cast(ctx, xp, yp, NULL);
        check_status(ctx, st, marker);
        if (must_fail)
            FZ_CHECK(st != FP8KIT_OK);
        verify(&fs, st);
        fz_count(S_CAST, 1, st == FP8KIT_OK);
    } else {
        fz_count(S_CAST, 0, 0);
    }
    release(&fs);
}

/* -------------------------------------------------------------------- GEMM */
static float fz_float(rd *r)
{
    static const float tab[] = {0.0f, 1.0f, 0.5f, -1.0f, 2.0f, -0.0f, 1e-30f, 1e30f};
    uint8_t b = u8(r);
    if (b < 200)
        return tab[b % NELEM(tab)];
    if (b < 230)
        return b & 1 ? INFINITY : NAN;
    uint32_t v = (uint32_t)u64(r);
    float f;
    memcpy(&f, &v, 4);
    return f;
}

static void vec(fp8kit_tensor *t, int dtype, int64_t n, int as_scalar)
{
    int64_t sh[1] = {n};
    set_shape(t, dtype, as_scalar && n == 1 ? 0 : 1, sh);
}

static int scale_tensor(rd *r, fp8kit_tensor *t, int mode, int layout, int is_a, int64_t rows, int64_t k)
{
    memset(t, 0, sizeof *t);
    int64_t ka = cdiv(k, 128);
    int64_t sh[2];
    switch (mode) {
    case FP8KIT_SCALE_TENSOR: vec(t, FP8KIT_F32, 1, u8(r) & 1); return 1;
    case FP8KIT_SCALE_ROW: vec(t, FP8KIT_F32, rows, 0); return 1;
    case FP8KIT_SCALE_BLOCK:
        if (!is_a) { sh[0] = cdiv(rows, 128); sh[1] = ka; }
        else if (layout == FP8KIT_LAYOUT_MN_MAJOR) { sh[0] = ka; sh[1] = rup(rows, 4); }
        else { sh[0] = rows; sh[1] = ka; }
        set_shape(t, FP8KIT_F32, 2, sh);
        return 1;
    case FP8KIT_SCALE_MX:
        if (layout == FP8KIT_LAYOUT_BLOCKED) { sh[0] = rup(rows, 128); sh[1] = rup(k / 32, 4); }
        else { sh[0] = rows; sh[1] = k / 32; }
        set_shape(t, FP8KIT_E8M0, 2, sh);
        return 1;
    default:
        if (u8(r) & 1) {
            rand_tensor(r, t, FP8KIT_F32);
            return 1;
        }
        return 0;
    }
}

static void run_gemm(rd *r, int ws_only)
{
    fp8kit_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.scale_a = (fp8kit_scale_mode)en(r, 5);
    d.scale_b = (u8(r) % 4) ? d.scale_a : (fp8kit_scale_mode)en(r, 5);
    uint8_t b = u8(r);
    if (b < 200)
        d.scale_layout = d.scale_a == FP8KIT_SCALE_MX ? (fp8kit_scale_layout)(b & 1)
                         : d.scale_a == FP8KIT_SCALE_BLOCK ? (fp8kit_scale_layout)((b & 1) * 2) : FP8KIT_LAYOUT_PLAIN;
    else
        d.scale_layout = (fp8kit_scale_layout)en(r, 3);
    d.bias = (fp8kit_bias_mode)en(r, 3);
    d.act = (fp8kit_activation)en(r, 5);
    d.out_quant = (fp8kit_out_quant)en(r, 4);
    b = u8(r);
    d.out_hp = b < 230 ? (fp8kit_dtype)(b % 3) : (fp8kit_dtype)en(r, FP8KIT_DTYPE_COUNT);
    d.out_rounding = (fp8kit_rounding)en(r, 2);
    d.out_pow2 = u8(r) & 1;
    d.fast_accum = u8(r) & 1;

    int64_t M = dimv(r), N = dimv(r), K = dimv(r);
    fp8kit_gemm_args a;
    memset(&a, 0, sizeof a);
    int64_t sh[2];
    sh[0] = M; sh[1] = K;
    set_shape(&a.a, (u8(r) & 1) ? FP8KIT_E5M2 : FP8KIT_E4M3, 2, sh);
    sh[0] = N;
    set_shape(&a.b, (u8(r) & 1) ? FP8KIT_E5M2 : FP8KIT_E4M3, 2, sh);
    int used[8] = {1, 1, 0, 0, 0, 0, 1, 0};
    used[2] = scale_tensor(r, &a.scale_a, d.scale_a, d.scale_layout, 1, M, K);
    used[3] = scale_tensor(r, &a.scale_b, d.scale_b, d.scale_layout, 0, N, K);
    a.alpha = fz_float(r);
    a.beta = fz_float(r);
    sh[0] = M; sh[1] = N;
    b = u8(r);
    if ((used[4] = a.beta != 0.0f || (b & 1)))
        set_shape(&a.c, b < 200 ? (b >> 1) % 3 : en(r, FP8KIT_DTYPE_COUNT), 2, sh);
    b = u8(r);
    if ((used[5] = d.bias == FP8KIT_BIAS_COL || d.bias == FP8KIT_BIAS_ROW || (b & 1)))
        vec(&a.bias, b < 200 ? (b >> 1) % 3 : en(r, FP8KIT_DTYPE_COUNT), d.bias == FP8KIT_BIAS_ROW ? M : N, 0);
    b = u8(r);
    int ddt = d.out_quant != FP8KIT_OUTQ_NONE ? 3 + (b & 1) : b < 230 ? b % 5 : en(r, FP8KIT_DTYPE_COUNT);
    set_shape(&a.d, ddt, 2, sh);
    int want_amax = 0;
    switch (d.out_quant) {
    case FP8KIT_OUTQ_SCALED: vec(&a.scale_d, FP8KIT_F32, 1, u8(r) & 1); want_amax = u8(r) & 1; used[7] = 1; break;
    case FP8KIT_OUTQ_MX: sh[1] = N / 32; set_shape(&a.scale_d, FP8KIT_E8M0, 2, sh); used[7] = 1; break;
    case FP8KIT_OUTQ_BLOCK1X128: sh[1] = cdiv(N, 128); set_shape(&a.scale_d, FP8KIT_F32, 2, sh); used[7] = 1; break;
    default: break;
    }
    if ((u8(r) % 16) == 0)
        want_amax = !want_amax;

    fp8kit_tensor *ts[8] = {&a.a, &a.b, &a.scale_a, &a.scale_b, &a.c, &a.bias, &a.d, &a.scale_d};
    int nul[8];
    uint8_t rate = u8(r) % 4;
    for (int i = 0; i < 8; i++) /* unused (zeroed) tensors keep data NULL */
        nul[i] = !used[i] ? 1 : mutate(r, ts[i], rate);
    /* which operands the call may touch (per the header); scales of mode NONE,
     * C with beta 0, bias NONE, scale_d with OUTQ_NONE are ignored */
    int sa = d.scale_a != FP8KIT_SCALE_NONE, sb = d.scale_b != FP8KIT_SCALE_NONE;
    int rel[8] = {1, 1, sa, sb, a.beta != 0.0f, d.bias != FP8KIT_BIAS_NONE, 1, d.out_quant != FP8KIT_OUTQ_NONE};
    int out[8] = {0, 0, 0, 0, 0, 0, 1,
                  d.out_quant == FP8KIT_OUTQ_MX || d.out_quant == FP8KIT_OUTQ_BLOCK1X128};
    fzset fs = {.n = 0, .seed = 0x13198A2E03707344ull ^ r->i};
    for (int i = 0; i < 8; i++)
        attach(&fs, ts[i], nul[i], out[i], rel[i]);
    if (want_amax)
        attach_raw(&fs, 4, 1, (void **)&a.amax_d);
    else
        a.amax_d = NULL;
    if (u8(r) % 8 == 0) {
        a.workspace = (void *)&a; /* never used on the CPU */
        a.workspace_bytes = u8(r);
    }
    fp8kit_ctx *ctx = (u8(r) % 64) ? fz_ctx : NULL;
    b = u8(r);
    const fp8kit_gemm_desc *dp = b == 1 ? NULL : &d;
    const fp8kit_gemm_args *ap = b == 2 ? NULL : &a;

    fz_op = "fp8kit_gemm_workspace_size";
    size_t bytes = 0x5A5A5A5A, *bp = b == 3 ? NULL : &bytes;
    const char *marker = ctx ? fz_mark(ctx) : NULL;
    fp8kit_status ws = fp8kit_gemm_workspace_size(ctx, dp, ap, bp);
    check_status(ctx, ws, b == 3 ? NULL : marker);
    if (ws)
        FZ_CHECK(bytes == 0x5A5A5A5A);
    else
        FZ_CHECK(bytes == 0); /* CPU */
    verify(&fs, FP8KIT_ERR_INTERNAL); /* nothing may be written */
    fz_count(S_WS, 1, ws == FP8KIT_OK);
    if (!ws_only && bp) {
        int64_t macs = smul(smul(M, N), K);
        int run = ws != FP8KIT_OK || (all_covered(&fs) && macs > 0 && macs <= FZ_MAX_MACS);
        if (run) {
            fz_op = "fp8kit_gemm";
            marker = ctx ? fz_mark(ctx) : NULL;
            fp8kit_status st = fp8kit_gemm(ctx, dp, ap, NULL);
            check_status(ctx, st, marker);
            FZ_CHECK(st == ws);
            verify(&fs, st);
        }
        fz_count(S_GEMM, run, run && ws == FP8KIT_OK);
    }
    release(&fs);
}

/* ------------------------------------------------------------- entry point */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fz_ctx) {
        if (fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &fz_ctx) != FP8KIT_OK)
            abort();
        fp8kit_ctx_set_threads(fz_ctx, 1);
        if (getenv("FUZZ_API_STATS"))
            atexit(fz_print_stats);
    }
    rd r = {data, size, 0};
    for (int k = 0; k < 4 && (k == 0 || r.i < r.n); k++) {
        uint8_t op = u8(&r) % 8;
        switch (op) {
        case 0: case 1: case 2: case 3: run_quant(&r, op); break;
        case 4: run_cast(&r); break;
        case 5: run_gemm(&r, 0); break;
        case 6: run_gemm(&r, 1); break;
        case 7: {
            fz_op = "fp8kit_ctx_set_threads";
            static const int tv[] = {-1, 0, 1, 2, INT32_MIN, 1};
            int v = tv[u8(&r) % NELEM(tv)];
            fp8kit_status st = fp8kit_ctx_set_threads(fz_ctx, v);
            FZ_CHECK(status_ok_enum(st));
            FZ_CHECK(v >= 0 ? st == FP8KIT_OK : st != FP8KIT_OK);
            fp8kit_ctx_set_threads(fz_ctx, 1);
            break;
        }
        }
    }
    return 0;
}
