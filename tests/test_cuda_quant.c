/* test_cuda_quant.c - the CUDA quantization checks that the cross-backend
 * harness does not make. The table of CPU-vs-CUDA cases (quantize, dequantize
 * and cast, every scheme x input dtype x element format x axis x rounding x
 * pow2 x scale layout x shape class, bit for bit) lives in tests/test_xbackend.c.
 * What stays here: docs/spec.md 2.2's edge-case table checked directly on the
 * GPU, the hardware fp8 conversion against the shared codec over all 2^32
 * inputs and the kernels' group division against IEEE x / S (self-checks),
 * the internal fused kernel that writes both mx axes
 * (fk_cuda_quantize_mx_both, 3-D, every layout pair) against the CPU backend's
 * single-axis results, a caller stream, and one tensor of more than 2^31
 * elements (1 x 46368 x 46368 bf16, mx axis -1 and -2) against the CPU
 * backend when the device has the memory, and the supports queries
 * (fp8kit_quantize_supported, ...: OK at each kernel's limits, UNSUPPORTED
 * with the call's own status and message past them). Outputs are poisoned
 * first.
 * Exits 77 (skipped) without a usable CUDA device.
 * Options: --small (small shapes, no self-checks, no large case: for
 * compute-sanitizer), --no-large (skip the large case); FK_TEST_SEED=n in the
 * environment replays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fp8kit.h"
#include "format/scale.h"
#include "test_util.h"

#ifdef FP8KIT_HAVE_CUDA
#include <cuda_runtime.h>
#include "core/internal.h"
#include "cuda/quant.h"
#include "test_cuda_util.h"

/* cast.cu: the quantization kernels' group division (fk_div_q) against IEEE
 * x / S over every bf16 [0] and f16 [1] (amax, x) pair; mismatch counts and
 * the lowest differing (amax << 16 | x). Synchronous. */
fp8kit_status fk_cuda_div_selfcheck(fp8kit_ctx *ctx, unsigned long long *mismatches, unsigned int *first_pair);

static fk_rng rng;
static fp8kit_ctx *gctx, *cctx;
static cudaStream_t gstream;
static int small_mode;
static long ncases;

static void *hmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "malloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

/* ------------------------------------------------------------ input data */

enum { DIST_NORMAL = 0, DIST_HEAVY = 1, DIST_EDGE = 2 };

static float edge_value(int kind) { return fk_t_edge_value(&rng, kind); }

/* Random value of the distribution; DIST_EDGE mixes specials into runs of 32. */
static float gen_value(int dist, int64_t i, float mag, uint32_t *edge_state)
{
    if (dist == DIST_HEAVY)
        return (float)fk_rng_heavy(&rng) * mag;
    if (dist == DIST_EDGE) {
        if (i % 32 == 0)
            *edge_state = fk_rng_u32(&rng);
        uint32_t st = *edge_state;
        int mode = (int)(st % 8);
        if (mode == 0) /* a run of one special value */
            return edge_value((int)((st >> 8) % 16));
        if (mode == 1 && (int)((st >> 8) % 32) == (int)(i % 32)) /* one special in a normal run */
            return edge_value((int)((st >> 16) % 16));
        if (mode == 2) /* 1.0 with one tiny value */
            return i % 32 == (st >> 8) % 32 ? fk_t_u2f(1u) : 1.0f;
        if (mode == 3) /* tiny magnitudes */
            return (float)fk_rng_normal(&rng) * 1e-38f;
    }
    return (float)fk_rng_normal(&rng) * mag;
}

/* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */

/* Compares n bytes; reports the first mismatches. Returns 1 when equal. */
static int cmp_bytes(const char *what, const char *name, const uint8_t *got, const uint8_t *want, size_t n,
                     size_t unit)
{
    size_t bad = 0, first = (size_t)-1;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (bad < 4)
                fprintf(stderr, "  %s mismatch at byte %zu (element %zu): gpu 0x%02x cpu 0x%02x [%s]\n", what, i,
                        i / unit, got[i], want[i], name);
            if (first == (size_t)-1)
                first = i;
            bad++;
        }
    CHECK(bad == 0, "%s: %zu of %zu bytes differ (first at %zu) [%s]", what, bad, n, first, name);
    return bad == 0;
}

/* ------------------------------------------- docs/spec.md 2.2 table on the GPU */

static void spec_table(void)
{
    /* rows: value pattern; expected (s, q) for FLOOR and RCEIL, e4m3 */
    struct { int kind; uint8_t sf, qf, sr, qr; } t[] = {
        {0, 0, 0x00, 0, 0x00},     /* zeros */
        {1, 0, 0x40, 0, 0x40},     /* 2^-126 */
        {2, 127, 0x7E, 127, 0x7E}, /* 448 */
        {3, 127, 0x7E, 128, 0x77}, /* 480 */
        {4, 127, 0xFE, 128, 0xF7}, /* -480 */
        {5, 246, 0x7E, 247, 0x78}, /* FLT_MAX */
        {6, 255, 0x7F, 255, 0x7F}, /* one NaN */
        {7, 255, 0x7F, 255, 0x7F}, /* one Inf */
        {8, 119, 0x78, 119, 0x78}, /* 1.0 x31 + 2^-149 (last element -> 0x00) */
    };
    const int n = (int)(sizeof t / sizeof t[0]);
    float hx[9 * 32];
    for (int b = 0; b < n; b++)
        for (int i = 0; i < 32; i++) {
            float v;
            switch (t[b].kind) {
            case 6: v = i == 7 ? fk_t_u2f(0x7FC00000u) : 1.0f; break;
            case 7: v = i == 3 ? fk_t_u2f(0x7F800000u) : 2.0f; break;
            case 8: v = i == 31 ? fk_t_u2f(1u) : 1.0f; break;
            default: v = edge_value(t[b].kind); break;
            }
            hx[b * 32 + i] = v;
        }
    float *dx = dmalloc(sizeof hx), *dxt = dmalloc(sizeof hx);
    uint8_t *dq = dmalloc(9 * 32), *ds = dmalloc(9);
    float hxt[32 * 9];
    for (int b = 0; b < n; b++)
        for (int i = 0; i < 32; i++)
            hxt[i * n + b] = hx[b * 32 + i];
    CUDA_OK(cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dxt, hxt, sizeof hxt, cudaMemcpyHostToDevice));
    for (int axis = -1; axis >= -2; axis--)
        for (int rc = 0; rc < 2; rc++) {
            fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
            d.rounding = rc ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
            d.axis = axis;
            int64_t xs[2] = {n, 32}, qs[2] = {n, 32}, ss[2] = {n, 1};
            if (axis == -2) { xs[0] = 32; xs[1] = n; }
            fp8kit_tensor x = fp8kit_tensor_make(axis == -1 ? (void *)dx : (void *)dxt, FP8KIT_F32, 2, xs);
            fp8kit_tensor q = fp8kit_tensor_make(dq, FP8KIT_E4M3, 2, qs);
            fp8kit_tensor s = fp8kit_tensor_make(ds, FP8KIT_E8M0, 2, ss);
            CUDA_OK(cudaMemset(dq, FK_POISON, 9 * 32));
            CUDA_OK(cudaMemset(ds, FK_POISON, 9));
            CUDA_OK(cudaDeviceSynchronize());
            CHECK_STATUS(fp8kit_quantize(gctx, &d, &x, &q, &s, NULL), FP8KIT_OK);
            uint8_t hq[9 * 32], hs[9];
            CUDA_OK(cudaMemcpy(hq, dq, sizeof hq, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost));
            for (int b = 0; b < n; b++) {
                uint8_t ws = rc ? t[b].sr : t[b].sf, wq = rc ? t[b].qr : t[b].qf;
                CHECK(hs[b] == ws, "spec table row %d axis %d %s: s = %u, want %u", b, axis, rc ? "rceil" : "floor",
                      hs[b], ws);
                for (int i = 0; i < 32; i++) {
                    uint8_t w = t[b].kind == 8 && i == 31 ? 0x00 : wq;
                    if (t[b].kind == 6 || t[b].kind == 7)
                        w = 0x7F;
                    CHECK(hq[b * 32 + i] == w, "spec table row %d elem %d axis %d %s: q = 0x%02x, want 0x%02x", b, i,
                          axis, rc ? "rceil" : "floor", hq[b * 32 + i], w);
                }
            }
        }
    cudaFree(dx); cudaFree(dxt); cudaFree(dq); cudaFree(ds);
}

/* -------------------------------------------------- fused both-axes kernel */

static void job_mat(fk_mat *m, void *data, fp8kit_dtype t, int64_t E, int64_t R, int64_t C, int64_t ld)
{
    m->data = data; m->dtype = t; m->E = E; m->R = R; m->C = C; m->sr = ld; m->se = R * ld;
}

/* Runs the fused kernel and compares each output with the CPU backend's
 * single-axis result on the same input. */
static void fused_case(fp8kit_dtype xt, int64_t E, int64_t R, int64_t C, int e5, int rceil, int lay1, int lay2)
{
    char name[160];
    snprintf(name, sizeof name, "fused %s (%lld,%lld,%lld) e5m2 %d rceil %d layouts %d/%d", fp8kit_dtype_name(xt),
             (long long)E, (long long)R, (long long)C, e5, rceil, lay1, lay2);
    ncases++;
    const size_t es = fp8kit_dtype_size(xt), n = (size_t)(E * R * C);
    void *hx = hmalloc(n * es);
    uint32_t est = 0;
    for (size_t i = 0; i < n; i++)
        store_hp(hx, (int64_t)i, xt, gen_value((int)(i / 4096) % 3, (int64_t)i, 1.0f, &est));
    void *dx = dmalloc(n * es);
    CUDA_OK(cudaMemcpy(dx, hx, n * es, cudaMemcpyHostToDevice));
    fk_quant_job jb[2];
    uint8_t *dq[2], *dsc[2], *hq[2], *hs[2];
    size_t sb[2];
    for (int ax = 0; ax < 2; ax++) {
        fk_quant_job *j = &jb[ax];
        memset(j, 0, sizeof *j);
        j->desc = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        j->desc.axis = ax ? -2 : -1;
        j->desc.elem = e5 ? FP8KIT_E5M2 : FP8KIT_E4M3;
        j->desc.rounding = rceil ? FP8KIT_ROUND_RCEIL : FP8KIT_ROUND_FLOOR;
        j->desc.scale_layout = (ax ? lay2 : lay1) ? FP8KIT_LAYOUT_BLOCKED : FP8KIT_LAYOUT_PLAIN;
        j->e5m2 = e5;
        job_mat(&j->x, dx, xt, E, R, C, C);
        int64_t qr = ax ? C : R, qc = ax ? R : C;
        dq[ax] = dmalloc(n);
        job_mat(&j->q, dq[ax], j->desc.elem, E, qr, qc, qc);
        int blk = j->desc.scale_layout == FP8KIT_LAYOUT_BLOCKED;
        j->scale_rows = blk ? fk_blocked_rows(qr) : qr;
        j->scale_cols = blk ? fk_blocked_cols(qc / 32) : qc / 32;
        sb[ax] = (size_t)(E * j->scale_rows * j->scale_cols);
        dsc[ax] = dmalloc(sb[ax]);
        j->scale = dsc[ax];
        CUDA_OK(cudaMemset(dq[ax], FK_POISON, n));
        CUDA_OK(cudaMemset(dsc[ax], FK_POISON, sb[ax]));
        /* CPU oracle through the public API */
        hq[ax] = hmalloc(n);
        hs[ax] = hmalloc(sb[ax]);
        fk_poison(hq[ax], n);
        fk_poison(hs[ax], sb[ax]);
        int64_t xs3[3] = {E, R, C}, qs3[3] = {E, qr, qc};
        int64_t ss3[3] = {E, j->scale_rows, j->scale_cols};
        fp8kit_tensor tx = fp8kit_tensor_make(hx, xt, 3, xs3);
        fp8kit_tensor tq = fp8kit_tensor_make(hq[ax], j->desc.elem, 3, qs3);
        fp8kit_tensor ts = fp8kit_tensor_make(hs[ax], FP8KIT_E8M0, 3, ss3);
        fp8kit_status st = fp8kit_quantize(cctx, &j->desc, &tx, &tq, &ts, NULL);
        CHECK(st == FP8KIT_OK, "cpu quantize: %s [%s]", fp8kit_last_error(cctx), name);
    }
    CUDA_OK(cudaDeviceSynchronize());
    CHECK_STATUS(fk_cuda_quantize_mx_both(gctx, &jb[0], &jb[1], gstream), FP8KIT_OK);
    CUDA_OK(cudaStreamSynchronize(gstream));
    for (int ax = 0; ax < 2; ax++) {
        uint8_t *gq = hmalloc(n), *gs = hmalloc(sb[ax]);
        CUDA_OK(cudaMemcpy(gq, dq[ax], n, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(gs, dsc[ax], sb[ax], cudaMemcpyDeviceToHost));
        cmp_bytes(ax ? "fused q axis -2" : "fused q axis -1", name, gq, hq[ax], n, 1);
        cmp_bytes(ax ? "fused scale axis -2" : "fused scale axis -1", name, gs, hs[ax], sb[ax], 1);
        free(gq); free(gs); free(hq[ax]); free(hs[ax]);
        cudaFree(dq[ax]); cudaFree(dsc[ax]);
    }
    cudaFree(dx);
    free(hx);
}

/* cast: CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */

/* ------------------------------------------------ > 2^31 elements */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void large_case(void)
{
    const int64_t R = 46368, C = 46368, n = R * C; /* 2,150,991,424 > 2^31; R, C multiples of 32 */
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    if (fr < (size_t)(n * 4 + ((int64_t)1 << 30))) {
        printf("large case skipped: %.1f GiB free on the device\n", fr / 1073741824.0);
        return;
    }
    uint16_t *hx = hmalloc((size_t)n * 2);
    const uint64_t seed = fk_rng_u64(&rng);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = mix64(seed + (uint64_t)i);
        /* sign, exponent in [112, 143], random mantissa; every 4096th a special */
        uint16_t v = (uint16_t)(((h >> 16) & 0x8000u) | ((112u + (uint32_t)(h & 31u)) << 7) | ((h >> 8) & 0x7Fu));
        if ((h >> 40) % 4096 == 0)
            v = (h >> 52) & 1 ? 0x7FC0u : 0x0000u;
        hx[i] = v;
    }
    void *dx = dmalloc((size_t)n * 2), *dq = dmalloc((size_t)n);
    CUDA_OK(cudaMemcpy(dx, hx, (size_t)n * 2, cudaMemcpyHostToDevice));
    uint8_t *hq = hmalloc((size_t)n), *gq = hmalloc((size_t)n);
    for (int axis = -1; axis >= -2; axis--) {
        char name[64];
        snprintf(name, sizeof name, "large 1x%lldx%lld bf16 mx axis %d", (long long)R, (long long)C, axis);
        ncases++;
        fp8kit_quant_desc d = fp8kit_quant_desc_default(FP8KIT_SCHEME_MX);
        d.axis = axis;
        int64_t xs[3] = {1, R, C};
        fp8kit_tensor tx = fp8kit_tensor_make(hx, FP8KIT_BF16, 3, xs), tq, ts;
        CHECK_STATUS(fp8kit_quant_shapes(&d, &tx, &tq, &ts), FP8KIT_OK);
        const size_t sbytes = (size_t)fp8kit_tensor_numel(&ts);
        uint8_t *hs = hmalloc(sbytes), *gs = hmalloc(sbytes);
        void *ds = dmalloc(sbytes);
        tq.data = hq;
        ts.data = hs;
        CHECK_STATUS(fp8kit_quantize(cctx, &d, &tx, &tq, &ts, NULL), FP8KIT_OK);
        CUDA_OK(cudaMemset(dq, FK_POISON, (size_t)n));
        CUDA_OK(cudaMemset(ds, FK_POISON, sbytes));
        CUDA_OK(cudaDeviceSynchronize());
        tx.data = dx;
        tq.data = dq;
        ts.data = ds;
        CHECK_STATUS(fp8kit_quantize(gctx, &d, &tx, &tq, &ts, gstream), FP8KIT_OK);
        CUDA_OK(cudaStreamSynchronize(gstream));
        CUDA_OK(cudaMemcpy(gq, dq, (size_t)n, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(gs, ds, sbytes, cudaMemcpyDeviceToHost));
        cmp_bytes("large q", name, gq, hq, (size_t)n, 1);
        cmp_bytes("large scale", name, gs, hs, sbytes, 1);
        printf("%s: compared %lld q bytes and %zu scale bytes\n", name, (long long)n, sbytes);
        cudaFree(ds);
        free(hs); free(gs);
    }
    cudaFree(dx); cudaFree(dq);
    free(hx); free(hq); free(gq);
}

/* ------------------------------------------------- supports queries */
/* fp8kit_quantize_supported / _dequantize_supported / _cast_supported on the
 * CUDA context, with placeholder pointers (far apart, never dereferenced):
 * OK for ordinary shapes and at each kernel limit, UNSUPPORTED one step past
 * it with a message naming the limit. Past a limit the call itself is made
 * on the same placeholders too: it refuses before binding any pointer to a
 * launch, with the status and message the query gave. */
static void *ph(int i) { return (void *)(uintptr_t)((uint64_t)(i + 1) << 44); }

static void sup_expect(const char *what, fp8kit_status st, fp8kit_status want, const char *needle, char *msg,
                       size_t n)
{
    snprintf(msg, n, "%s", st ? fp8kit_last_error(gctx) : "");
    CHECK(st == want, "%s: supported gives %s (%s), want %s", what, fp8kit_status_string(st), msg,
          fp8kit_status_string(want));
    if (needle)
        CHECK(strstr(msg, needle) != NULL, "%s: message '%s' does not name '%s'", what, msg, needle);
    ncases++;
}

static void sup_same_call(const char *what, fp8kit_status st, fp8kit_status want, const char *msg)
{
    CHECK(st == want, "%s: the call gives %s (%s), want %s", what, fp8kit_status_string(st), fp8kit_last_error(gctx),
          fp8kit_status_string(want));
    CHECK(strcmp(fp8kit_last_error(gctx), msg) == 0, "%s: the call says '%s', supported said '%s'", what,
          fp8kit_last_error(gctx), msg);
}

/* quantize x (nd, shape) [dq = 0], or dequantize back into x's shape [dq = 1] */
static void sup_quant(const char *what, fp8kit_scheme scheme, int axis, fp8kit_dtype xt, int nd, const int64_t *shape,
                      int dq, fp8kit_status want, const char *needle)
{
    fp8kit_quant_desc d = fp8kit_quant_desc_default(scheme);
    d.axis = axis;
    fp8kit_tensor x = fp8kit_tensor_make(ph(0), xt, nd, shape), q, sc;
    CHECK_STATUS(fp8kit_quant_shapes(&d, &x, &q, &sc), FP8KIT_OK);
    q.data = ph(1);
    sc.data = ph(2);
    char msg[512], name[160];
    snprintf(name, sizeof name, "%s %s", what, dq ? "dequantize" : "quantize");
    if (!dq) {
        sup_expect(name, fp8kit_quantize_supported(gctx, &d, &x, &q, &sc), want, needle, msg, sizeof msg);
        if (want != FP8KIT_OK)
            sup_same_call(name, fp8kit_quantize(gctx, &d, &x, &q, &sc, gstream), want, msg);
    } else {
        sup_expect(name, fp8kit_dequantize_supported(gctx, &d, &q, &sc, &x), want, needle, msg, sizeof msg);
        if (want != FP8KIT_OK)
            sup_same_call(name, fp8kit_dequantize(gctx, &d, &q, &sc, &x, gstream), want, msg);
    }
}

/* both directions, the same answer */
static void sup_qdq(const char *what, fp8kit_scheme scheme, int axis, fp8kit_dtype xt, int nd, const int64_t *shape,
                    fp8kit_status want, const char *needle)
{
    sup_quant(what, scheme, axis, xt, nd, shape, 0, want, needle);
    sup_quant(what, scheme, axis, xt, nd, shape, 1, want, needle);
}

static void sup_cast(const char *what, fp8kit_dtype from, fp8kit_dtype to, int nd, const int64_t *shape,
                     fp8kit_status want, const char *needle)
{
    fp8kit_tensor x = fp8kit_tensor_make(ph(0), from, nd, shape), y = fp8kit_tensor_make(ph(1), to, nd, shape);
    char msg[512];
    sup_expect(what, fp8kit_cast_supported(gctx, &x, &y), want, needle, msg, sizeof msg);
    if (want != FP8KIT_OK)
        sup_same_call(what, fp8kit_cast(gctx, &x, &y, gstream), want, msg);
}

static void supports_cases(void)
{
    const fp8kit_status OK = FP8KIT_OK, NO = FP8KIT_ERR_UNSUPPORTED;
    const fp8kit_scheme T = FP8KIT_SCHEME_TENSOR, MX = FP8KIT_SCHEME_MX;
    const int64_t P29 = (int64_t)1 << 29, P31 = (int64_t)1 << 31, P32 = (int64_t)1 << 32;
    /* ordinary shapes, every op and scheme */
    const int64_t m[3] = {2, 256, 512};
    const fp8kit_scheme schemes[] = {T, FP8KIT_SCHEME_ROW, FP8KIT_SCHEME_BLOCK1X128, FP8KIT_SCHEME_BLOCK128X128, MX};
    for (int i = 0; i < 5; i++) {
        sup_qdq("ordinary", schemes[i], -1, FP8KIT_BF16, 3, m, OK, NULL);
        sup_qdq("ordinary", schemes[i], -1, FP8KIT_F32, 3, m, OK, NULL);
    }
    sup_qdq("ordinary mx axis -2", MX, -2, FP8KIT_F16, 3, m, OK, NULL);
    sup_cast("ordinary cast to fp8", FP8KIT_BF16, FP8KIT_E4M3, 3, m, OK, NULL);
    sup_cast("ordinary cast from fp8", FP8KIT_E5M2, FP8KIT_F32, 3, m, OK, NULL);

    /* row lengths (a 1-D tensor is one row): 2^29 f16 / bf16, 2^28 f32 */
    const int64_t n29[1] = {P29}, n29p[1] = {P29 + 8}, n28[1] = {P29 / 2}, n28p[1] = {P29 / 2 + 4};
    sup_qdq("1-D 2^29 bf16", T, -1, FP8KIT_BF16, 1, n29, OK, NULL);
    sup_qdq("1-D 2^29 + 8 bf16", T, -1, FP8KIT_BF16, 1, n29p, NO, "2^29 elements per row");
    sup_quant("1-D 2^28 f32", T, -1, FP8KIT_F32, 1, n28, 0, OK, NULL);
    sup_quant("1-D 2^28 + 4 f32", T, -1, FP8KIT_F32, 1, n28p, 0, NO, "2^28 elements per row");
    sup_quant("1-D 2^28 + 4 f32", T, -1, FP8KIT_F32, 1, n28p, 1, OK, NULL); /* chunks of 8 fp8 codes */
    sup_cast("1-D 2^29 cast", FP8KIT_F32, FP8KIT_E4M3, 1, n29, OK, NULL);
    sup_cast("1-D 2^29 + 8 cast", FP8KIT_F32, FP8KIT_E4M3, 1, n29p, NO, "2^29 elements per row");
    const int64_t w29[2] = {2, P29 + 32};
    sup_qdq("rows of 2^29 + 32", MX, -1, FP8KIT_BF16, 2, w29, NO, "2^29 elements per row");
    sup_qdq("rows of 2^29 + 32", FP8KIT_SCHEME_BLOCK1X128, -1, FP8KIT_BF16, 2, w29, NO, "2^29 elements per row");
    sup_quant("rows of 2^29 + 32", FP8KIT_SCHEME_ROW, -1, FP8KIT_BF16, 2, w29, 0, OK, NULL); /* any length */
    sup_quant("rows of 2^29 + 32", FP8KIT_SCHEME_ROW, -1, FP8KIT_BF16, 2, w29, 1, NO, "2^29 elements per row");
    sup_quant("rows of 2^29 + 32", FP8KIT_SCHEME_BLOCK128X128, -1, FP8KIT_BF16, 2, w29, 0, OK, NULL);

    /* row counts: 2^32 - 1 (row-group kernels, dequantize, cast), 2^31 - 1 (row) */
    const int64_t r32[3] = {2, P31, 32}, r32m[3] = {1, P32 - 1, 32};
    sup_qdq("2^32 rows", MX, -1, FP8KIT_BF16, 3, r32, NO, "2^32 - 1 rows");
    sup_qdq("2^32 - 1 rows", MX, -1, FP8KIT_BF16, 3, r32m, OK, NULL);
    sup_qdq("2^32 rows", FP8KIT_SCHEME_BLOCK1X128, -1, FP8KIT_BF16, 3, r32, NO, "2^32 - 1 rows");
    sup_qdq("2^32 rows", T, -1, FP8KIT_F32, 3, r32, NO, "2^32 - 1 rows");
    sup_cast("2^32 rows cast", FP8KIT_E4M3, FP8KIT_BF16, 3, r32, NO, "2^32 - 1 rows");
    sup_cast("2^32 - 1 rows cast", FP8KIT_E4M3, FP8KIT_BF16, 3, r32m, OK, NULL);
    const int64_t r31[3] = {2, P31 / 2, 1}, r31m[2] = {P31 - 1, 1};
    sup_quant("2^31 rows", FP8KIT_SCHEME_ROW, -1, FP8KIT_BF16, 3, r31, 0, NO, "2^31 - 1 rows");
    sup_quant("2^31 rows", FP8KIT_SCHEME_ROW, -1, FP8KIT_BF16, 3, r31, 1, OK, NULL);
    sup_quant("2^31 - 1 rows", FP8KIT_SCHEME_ROW, -1, FP8KIT_BF16, 2, r31m, 0, OK, NULL);

    /* grids: block128x128 tiles and mx axis -2 strips <= 2^31 - 1 */
    const int64_t t31[3] = {P31, 1, 1}, t31m[3] = {P31 - 1, 1, 1};
    sup_quant("2^31 tiles", FP8KIT_SCHEME_BLOCK128X128, -1, FP8KIT_F32, 3, t31, 0, NO, "2^31 - 1 tiles");
    sup_quant("2^31 - 1 tiles", FP8KIT_SCHEME_BLOCK128X128, -1, FP8KIT_F32, 3, t31m, 0, OK, NULL);
    const int64_t s31[3] = {P31, 32, 32}, s31m[3] = {P31 - 1, 32, 32};
    sup_quant("2^31 strips, axis -2", MX, -2, FP8KIT_BF16, 3, s31, 0, NO, "limit of 2^31 - 1");
    sup_quant("2^31 - 1 strips, axis -2", MX, -2, FP8KIT_BF16, 3, s31m, 0, OK, NULL);
    /* mx axis -2 dequantize: C <= 65535 * 64, E <= 65535 (the grid's y and z) */
    const int64_t cy[2] = {32, 65535 * 64}, cyp[2] = {32, 65535 * 64 + 1};
    sup_qdq("C = 65535 * 64, axis -2", MX, -2, FP8KIT_BF16, 2, cy, OK, NULL);
    sup_quant("C = 65535 * 64 + 1, axis -2", MX, -2, FP8KIT_BF16, 2, cyp, 0, OK, NULL);
    sup_quant("C = 65535 * 64 + 1, axis -2", MX, -2, FP8KIT_BF16, 2, cyp, 1, NO, "4194240 columns");
    const int64_t ez[3] = {65535, 32, 32}, ezp[3] = {65536, 32, 32};
    sup_qdq("E = 65535, axis -2", MX, -2, FP8KIT_BF16, 3, ez, OK, NULL);
    sup_quant("E = 65536, axis -2", MX, -2, FP8KIT_BF16, 3, ezp, 0, OK, NULL);
    sup_quant("E = 65536, axis -2", MX, -2, FP8KIT_BF16, 3, ezp, 1, NO, "65535 leading rows");
    printf("supports queries: checked\n");
}

int main(int argc, char **argv)
{
    int no_large = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0) {
            small_mode = 1;
        } else if (strcmp(argv[i], "--no-large") == 0) {
            no_large = 1;
        } else {
            fprintf(stderr, "usage: test_cuda_quant [--small] [--no-large]\n");
            return 2;
        }
    }
    if (!fp8kit_backend_available(FP8KIT_BACKEND_CUDA)) {
        printf("test_cuda_quant: no usable CUDA device, skipped\n");
        return FK_TEST_SKIP;
    }
    rng = fk_rng_seeded("test_cuda_quant");
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &gctx), FP8KIT_OK);
    CHECK_STATUS(fp8kit_ctx_create(FP8KIT_BACKEND_CPU, 0, &cctx), FP8KIT_OK);
    if (!gctx || !cctx)
        return fk_test_summary("test_cuda_quant");
    printf("test_cuda_quant: %s\n", fp8kit_ctx_describe(gctx));
    CUDA_OK(cudaStreamCreateWithFlags(&gstream, cudaStreamNonBlocking));

    if (!small_mode) { /* the hardware fp8 conversion == the shared codec, all 2^32 inputs */
        unsigned long long bad[2] = {1, 1};
        unsigned int first[2] = {0, 0};
        CHECK_STATUS(fk_cuda_cvt_selfcheck(gctx, bad, first), FP8KIT_OK);
        CHECK(bad[0] == 0, "e4m3 conversion: %llu of 2^32 inputs differ from the shared codec (first 0x%08x)", bad[0],
              first[0]);
        CHECK(bad[1] == 0, "e5m2 conversion: %llu of 2^32 inputs differ from the shared codec (first 0x%08x)", bad[1],
              first[1]);
        printf("conversion self-check: e4m3 %llu, e5m2 %llu mismatches over 2^32 inputs\n", bad[0], bad[1]);
        /* the kernels' group division (reciprocal + residual steps) == IEEE x / S */
        bad[0] = bad[1] = 1;
        CHECK_STATUS(fk_cuda_div_selfcheck(gctx, bad, first), FP8KIT_OK);
        CHECK(bad[0] == 0, "group division, bf16: %llu (amax, x) pairs differ from x / S (first 0x%08x)", bad[0],
              first[0]);
        CHECK(bad[1] == 0, "group division, f16: %llu (amax, x) pairs differ from x / S (first 0x%08x)", bad[1],
              first[1]);
        printf("division self-check: bf16 %llu, f16 %llu mismatches over all (amax, x) pairs\n", bad[0], bad[1]);
    }
    supports_cases();
    spec_table();
    /* CPU-vs-CUDA cases of every scheme and shape class: tests/test_xbackend.c */
    const fp8kit_dtype hps[] = {FP8KIT_F32, FP8KIT_F16, FP8KIT_BF16};
    for (int i = 0; i < 3; i++)
        for (int v = 0; v < 4; v++) {
            int64_t E = small_mode ? 1 : 1 + (int64_t)(fk_rng_u32(&rng) % 4);
            int64_t R = small_mode ? 160 : 32 * (1 + (int64_t)(fk_rng_u32(&rng) % 20));
            int64_t C = small_mode ? 96 : 32 * (1 + (int64_t)(fk_rng_u32(&rng) % 80));
            fused_case(hps[i], E, R, C, v & 1, (v >> 1) & 1, v == 1 || v == 2, v >= 2);
        }
    if (!small_mode && !no_large)
        large_case();
    printf("test_cuda_quant: %ld cases\n", ncases);
    cudaStreamDestroy(gstream);
    fp8kit_ctx_destroy(gctx);
    fp8kit_ctx_destroy(cctx);
    return fk_test_summary("test_cuda_quant");
}

#else /* !FP8KIT_HAVE_CUDA */
int main(void)
{
    printf("test_cuda_quant: built without CUDA, skipped\n");
    return FK_TEST_SKIP;
}
#endif
