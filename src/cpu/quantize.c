/* quantize.c - CPU backend quantization (docs/spec.md section 2): fp32-scale schemes
 * tensor, row, block1x128, block128x128 (plain or mn_major scales) and mx along
 * the last axis (plain or blocked e8m0 scales). mx along axis -2 lives in
 * quant_mx_t.c. Group, scale and element rules come from src/format/scale.h;
 * the loops use the branch-free codecs of quant_simd.h so they vectorize.
 * OpenMP over rows / tiles; padding of stored scale layouts is written as 0.
 * Where each scale is stored comes from src/format/geometry.h. */
#include "cpu/quant_simd.h"

#define ROW_SPLIT 16384 /* tensor scheme: elements per parallel work item */

/* ---------------------------------------------------------------- kernels */

/* amax bits of n elements of x. */
FK_CPU_CLONES static uint32_t k_amax(const void *x, fp8kit_dtype t, int64_t n)
{
    float f[FK_CPU_CHUNK];
    const size_t es = fk_dtype_bytes(t);
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i += FK_CPU_CHUNK) {
        int64_t k = n - i < FK_CPU_CHUNK ? n - i : FK_CPU_CHUNK;
        fkv_widen((const char *)x + i * es, t, k, f, NULL);
        m = fk_max_u32(m, fkv_amax(f, k));
    }
    return m;
}

/* q[i] = fp8(fl32(x[i] / s)) for n elements (docs/spec.md 2.1 element step). */
FK_CPU_CLONES static void k_quant_div(const void *x, fp8kit_dtype t, int64_t n, float s, int e5m2,
                                      uint8_t *restrict q)
{
    float f[FK_CPU_CHUNK];
    const size_t es = fk_dtype_bytes(t);
    for (int64_t i = 0; i < n; i += FK_CPU_CHUNK) {
        int64_t k = n - i < FK_CPU_CHUNK ? n - i : FK_CPU_CHUNK;
        fkv_widen((const char *)x + i * es, t, k, f, NULL);
        if (e5m2)
            for (int64_t j = 0; j < k; j++)
                q[i + j] = fkv_f32_to_fp8(f[j] / s, 1);
        else
            for (int64_t j = 0; j < k; j++)
                q[i + j] = fkv_f32_to_fp8(f[j] / s, 0);
    }
}

/* A row of up to 8 128x128 tiles (h <= 128 rows of w <= 1024 elements, row
 * strides x_sr / q_sr in elements): pass 1 takes each tile's amax row by row
 * (each row segment is read contiguously, which the prefetchers follow far
 * better than 128 short rows per tile), pass 2 divides by the tile's S with
 * S expanded per column. Scales go to S[0 .. ceil(w/128)). */
FK_CPU_CLONES static void k_tiles_128(const void *x, int64_t x_sr, fp8kit_dtype t, int64_t h, int64_t w,
                                      int e5m2, int pow2, uint8_t *q, int64_t q_sr, float *S)
{
    float f[1024], sx[1024];
    uint32_t m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const size_t es = fk_dtype_bytes(t);
    const int64_t nb = fk_ceil_div(w, 128);
    for (int64_t i = 0; i < h; i++) {
        fkv_widen((const char *)x + i * x_sr * (int64_t)es, t, w, f, NULL);
        for (int64_t b = 0; b < nb; b++) {
            int64_t k = w - b * 128 < 128 ? w - b * 128 : 128;
            m[b] = fk_max_u32(m[b], fkv_amax(f + b * 128, k));
        }
    }
    for (int64_t b = 0; b < nb; b++) {
        S[b] = fk_scale_f32(m[b], e5m2, pow2);
        for (int j = 0; j < 128; j++)
            sx[b * 128 + j] = S[b];
    }
    for (int64_t i = 0; i < h; i++) {
        uint8_t *restrict qr = q + i * q_sr;
        fkv_widen((const char *)x + i * x_sr * (int64_t)es, t, w, f, NULL);
        if (e5m2)
            for (int64_t j = 0; j < w; j++)
                qr[j] = fkv_f32_to_fp8(f[j] / sx[j], 1);
        else
            for (int64_t j = 0; j < w; j++)
                qr[j] = fkv_f32_to_fp8(f[j] / sx[j], 0);
    }
}

/* One row of block1x128: a scale per 128 elements (last block partial),
 * written to S[b * s_stride]. */
FK_CPU_CLONES static void k_row_1x128(const void *x, fp8kit_dtype t, int64_t C, int e5m2, int pow2,
                                      float *S, int64_t s_stride, uint8_t *restrict q)
{
    float f[128];
    const size_t es = fk_dtype_bytes(t);
    for (int64_t c0 = 0, b = 0; c0 < C; c0 += 128, b++) {
        int64_t k = C - c0 < 128 ? C - c0 : 128;
        fkv_widen((const char *)x + c0 * es, t, k, f, NULL);
        float s = fk_scale_f32(fkv_amax(f, k), e5m2, pow2);
        S[b * s_stride] = s;
        if (e5m2)
            for (int64_t j = 0; j < k; j++)
                q[c0 + j] = fkv_f32_to_fp8(f[j] / s, 1);
        else
            for (int64_t j = 0; j < k; j++)
                q[c0 + j] = fkv_f32_to_fp8(f[j] / s, 0);
    }
}

/* Quantizes the 32-element blocks of f[0 .. 32*nb) (nb <= FK_CPU_CHUNK / 32)
 * with e8m0 scales written to sb[]: per-block amax and scale, then one long
 * element loop with the reciprocal expanded per element (vectorizes fully). */
FK_CPU_INLINE void mx_blocks(const float *restrict f, int64_t nb, int e5m2, int rceil,
                             uint8_t *restrict sb, uint8_t *restrict q)
{
    float rx[FK_CPU_CHUNK];
    for (int64_t b = 0; b < nb; b++) {
        const float *fb = f + b * 32;
        uint32_t m = 0;
        for (int j = 0; j < 32; j++)
            m = fk_max_u32(m, fk_abs_bits(fb[j]));
        uint8_t s = fk_mx_scale(m, e5m2, rceil);
        float r = fk_mx_recip(s);
        sb[b] = s;
        for (int j = 0; j < 32; j++)
            rx[b * 32 + j] = r;
    }
    const int64_t n = nb * 32;
    if (e5m2)
        for (int64_t i = 0; i < n; i++)
            q[i] = fkv_f32_to_fp8(f[i] * rx[i], 1);
    else
        for (int64_t i = 0; i < n; i++)
            q[i] = fkv_f32_to_fp8(f[i] * rx[i], 0);
}

/* One row r of mx along the last axis (C a multiple of 32). Scale bytes go
 * to sexp[fk_scale_off(g, r, b)] (one expert's buffer; plain: consecutive). */
FK_CPU_CLONES static void k_row_mx(const void *x, fp8kit_dtype t, int64_t C, int e5m2, int rceil,
                                   uint8_t *sexp, int64_t r, const fk_scale_geom *g,
                                   uint8_t *restrict q)
{
    float f[FK_CPU_CHUNK];
    uint8_t sb[FK_CPU_CHUNK / 32];
    const size_t es = fk_dtype_bytes(t);
    for (int64_t c0 = 0; c0 < C; c0 += FK_CPU_CHUNK) {
        int64_t k = C - c0 < FK_CPU_CHUNK ? C - c0 : FK_CPU_CHUNK;
        int64_t nb = k / 32, b0 = c0 / 32;
        fkv_widen((const char *)x + c0 * es, t, k, f, NULL);
        mx_blocks(f, nb, e5m2, rceil, sb, q + c0);
        if (g->blocked)
            for (int64_t b = 0; b < nb; b++)
                sexp[fk_scale_off(g, r, b0 + b)] = sb[b];
        else
            memcpy(sexp + fk_scale_off(g, r, b0), sb, (size_t)nb);
    }
}

/* ------------------------------------------------------- layout padding */

void fk_cpu_blocked_zero_pad(uint8_t *scale, int64_t E, int64_t rows, int64_t cols, int64_t rp,
                             int64_t cp, int nthreads)
{
    if (rows == rp && cols == cp)
        return;
#pragma omp parallel for collapse(2) schedule(static) num_threads(nthreads)
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < rp; r++) {
            uint8_t *s = scale + e * rp * cp;
            for (int64_t c = r < rows ? cols : 0; c < cp; c++)
                s[fk_blocked_offset(r, c, cp)] = 0;
        }
}

/* mn_major fp32 scales: E buffers of g->rows x g->ld (the grid transposed);
 * entries [g->grows, ld) of each stored row are 0. */
static void mn_major_zero_pad(float *scale, int64_t E, const fk_scale_geom *g)
{
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < g->rows; i++)
            for (int64_t j = g->grows; j < g->ld; j++)
                scale[e * g->count + i * g->ld + j] = 0.0f;
}

/* The stored scales of one expert of the job (format/geometry.h). */
static fk_scale_geom job_geom(const fk_quant_job *job)
{
    fk_scale_geom g;
    fk_quant_scale_geom(job->desc.scheme, job->desc.scale_layout, job->desc.axis, job->x.R, job->x.C, &g);
    return g;
}

/* ---------------------------------------------------------------- schemes */

static fp8kit_status quant_tensor(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const int64_t rows = x->E * x->R, nsp = fk_ceil_div(x->C, ROW_SPLIT), items = rows * nsp;
    const int e5m2 = job->e5m2;
    uint32_t amax = 0;
#pragma omp parallel for schedule(static) reduction(max : amax) num_threads(nt)
    for (int64_t it = 0; it < items; it++) {
        int64_t row = it / nsp, c0 = (it % nsp) * ROW_SPLIT;
        int64_t n = x->C - c0 < ROW_SPLIT ? x->C - c0 : ROW_SPLIT;
        uint32_t m = k_amax(fk_cpu_at(x, row / x->R, row % x->R, c0), x->dtype, n);
        amax = fk_max_u32(amax, m);
    }
    const float s = fk_scale_f32(amax, e5m2, job->desc.pow2);
    *(float *)job->scale = s;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t it = 0; it < items; it++) {
        int64_t row = it / nsp, c0 = (it % nsp) * ROW_SPLIT;
        int64_t e = row / x->R, r = row % x->R;
        int64_t n = x->C - c0 < ROW_SPLIT ? x->C - c0 : ROW_SPLIT;
        k_quant_div(fk_cpu_at(x, e, r, c0), x->dtype, n, s, e5m2, fk_cpu_at(qm, e, r, c0));
    }
    return FP8KIT_OK;
}

static fp8kit_status quant_row(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const fk_scale_geom g = job_geom(job);
    float *S = (float *)job->scale;
    const int e5m2 = job->e5m2, pow2 = job->desc.pow2;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < x->E * x->R; row++) {
        int64_t e = row / x->R, r = row % x->R;
        const void *xr = fk_cpu_at(x, e, r, 0);
        float s = fk_scale_f32(k_amax(xr, x->dtype, x->C), e5m2, pow2);
        S[e * g.count + fk_scale_off(&g, r, 0)] = s;
        k_quant_div(xr, x->dtype, x->C, s, e5m2, fk_cpu_at(qm, e, r, 0));
    }
    return FP8KIT_OK;
}

static fp8kit_status quant_1x128(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const fk_scale_geom g = job_geom(job);
    float *S = (float *)job->scale;
    if (job->desc.scale_layout == FP8KIT_LAYOUT_MN_MAJOR)
        mn_major_zero_pad(S, x->E, &g);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < x->E * x->R; row++) {
        int64_t e = row / x->R, r = row % x->R;
        float *se = S + e * g.count + fk_scale_off(&g, r, 0); /* block b at se[b * g.sc] */
        k_row_1x128(fk_cpu_at(x, e, r, 0), x->dtype, x->C, job->e5m2, job->desc.pow2, se, g.sc,
                    fk_cpu_at(qm, e, r, 0));
    }
    return FP8KIT_OK;
}

static fp8kit_status quant_128x128(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const fk_scale_geom g = job_geom(job);
    const int64_t nrb = g.grows, ncb = g.gcols;
    const int64_t ncg = fk_ceil_div(ncb, 8); /* groups of 8 tiles along a row */
    const int e5m2 = job->e5m2, pow2 = job->desc.pow2;
    float *S = (float *)job->scale;
    if (job->desc.scale_layout == FP8KIT_LAYOUT_MN_MAJOR)
        mn_major_zero_pad(S, x->E, &g);
#pragma omp parallel for collapse(3) schedule(static) num_threads(nt)
    for (int64_t e = 0; e < x->E; e++)
        for (int64_t rb = 0; rb < nrb; rb++)
            for (int64_t cg = 0; cg < ncg; cg++) {
                int64_t r0 = rb * 128, c0 = cg * 1024;
                int64_t h = x->R - r0 < 128 ? x->R - r0 : 128;
                int64_t w = x->C - c0 < 1024 ? x->C - c0 : 1024;
                float s[8];
                k_tiles_128(fk_cpu_at(x, e, r0, c0), x->sr, x->dtype, h, w, e5m2, pow2,
                            fk_cpu_at(qm, e, r0, c0), qm->sr, s);
                for (int64_t b = 0, cb = cg * 8; b < fk_ceil_div(w, 128); b++, cb++)
                    S[e * g.count + fk_scale_off(&g, rb, cb)] = s[b];
            }
    return FP8KIT_OK;
}

static fp8kit_status quant_mx_rows(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const fk_scale_geom g = job_geom(job);
    const int rceil = job->desc.rounding == FP8KIT_ROUND_RCEIL;
    uint8_t *S = (uint8_t *)job->scale;
    if (g.blocked)
        fk_cpu_blocked_zero_pad(S, x->E, g.grows, g.gcols, g.rows, g.cols, nt);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < x->E * x->R; row++) {
        int64_t e = row / x->R, r = row % x->R;
        k_row_mx(fk_cpu_at(x, e, r, 0), x->dtype, x->C, job->e5m2, rceil, S + e * g.count, r, &g,
                 fk_cpu_at(qm, e, r, 0));
    }
    return FP8KIT_OK;
}

fp8kit_status fk_cpu_quantize(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    const int nt = fk_cpu_quant_threads(ctx);
    switch (job->desc.scheme) {
    case FP8KIT_SCHEME_TENSOR:
        return quant_tensor(nt, job);
    case FP8KIT_SCHEME_ROW:
        return quant_row(nt, job);
    case FP8KIT_SCHEME_BLOCK1X128:
        return quant_1x128(nt, job);
    case FP8KIT_SCHEME_BLOCK128X128:
        return quant_128x128(nt, job);
    case FP8KIT_SCHEME_MX:
        return job->desc.axis == -2 ? fk_cpu_quant_mx_t(nt, job) : quant_mx_rows(nt, job);
    }
    return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cpu quantize: unknown scheme %d", (int)job->desc.scheme);
}
