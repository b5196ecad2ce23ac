/* dequantize.c - CPU backend dequantization (docs/spec.md section 2): x_hat =
 * decode(q) * S in fp32, rounded (RNE) to the output dtype f32/f16/bf16, for
 * the tensor, row, block1x128, block128x128 (plain or mn_major scales) and mx
 * axis -1 (plain or blocked e8m0 scales, S = 2^(s-127)) schemes. mx axis -2
 * (transposed q) lives in dequant_mx_t.c. An infinite fp32 S marks a NaN
 * group (every element NaN, fk_deq_scale_f32). fp8 decode goes through the
 * 256-entry tables of cpu_cast.c; OpenMP over rows. Scale positions come from
 * src/format/geometry.h. */
#include <stdint.h>
#include "cpu/quant_simd.h"

#define ROW_SPLIT 16384 /* tensor scheme: elements per parallel work item */

/* y[i] = decode(q[i]) * S[(i / G) * s_stride] for n elements, rounded to yt. */
FK_CPU_CLONES static void k_deq(const uint8_t *restrict q, int64_t n, const float *lut, int64_t G,
                                const float *S, int64_t s_stride, fp8kit_dtype yt, void *y)
{
    float f[FK_CPU_CHUNK];
    const size_t es = fk_dtype_bytes(yt);
    for (int64_t i0 = 0; i0 < n; i0 += FK_CPU_CHUNK) {
        int64_t k = n - i0 < FK_CPU_CHUNK ? n - i0 : FK_CPU_CHUNK;
        for (int64_t j = 0; j < k;) {
            int64_t g = (i0 + j) / G;
            int64_t end = (g + 1) * G - i0 < k ? (g + 1) * G - i0 : k;
            const float s = fk_deq_scale_f32(S[g * s_stride]); /* an Inf S: a NaN group */
            for (; j < end; j++)
                f[j] = fk_deq_mul(lut[q[i0 + j]], s);
        }
        fkv_narrow(f, k, yt, (char *)y + i0 * (int64_t)es);
    }
}

static fp8kit_status deq_tensor(int nt, const fk_quant_job *job, const float *lut)
{
    const fk_mat *y = &job->x, *qm = &job->q;
    const float *S = (const float *)job->scale;
    const int64_t nsp = fk_ceil_div(y->C, ROW_SPLIT), items = y->E * y->R * nsp;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t it = 0; it < items; it++) {
        int64_t row = it / nsp, c0 = (it % nsp) * ROW_SPLIT;
        int64_t e = row / y->R, r = row % y->R;
        int64_t n = y->C - c0 < ROW_SPLIT ? y->C - c0 : ROW_SPLIT;
        k_deq(fk_cpu_at(qm, e, r, c0), n, lut, INT64_MAX, S, 0, y->dtype, fk_cpu_at(y, e, r, c0));
    }
    return FP8KIT_OK;
}

/* row, block1x128 and block128x128: one k_deq per row with the row's scales
 * (groups of g.gw elements, the scale of group b at se[b * g.sc]). */
static fp8kit_status deq_fp32_rows(int nt, const fk_quant_job *job, const float *lut)
{
    const fk_mat *y = &job->x, *qm = &job->q;
    const float *S = (const float *)job->scale;
    fk_scale_geom g;
    fk_quant_scale_geom(job->desc.scheme, job->desc.scale_layout, job->desc.axis, y->R, y->C, &g);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < y->E * y->R; row++) {
        int64_t e = row / y->R, r = row % y->R;
        const float *se = S + e * g.count + fk_scale_off(&g, r / g.gh, 0);
        k_deq(fk_cpu_at(qm, e, r, 0), y->C, lut, g.gw, se, g.sc, y->dtype, fk_cpu_at(y, e, r, 0));
    }
    return FP8KIT_OK;
}

static fp8kit_status deq_mx_rows(int nt, const fk_quant_job *job, const float *lut)
{
    const fk_mat *y = &job->x, *qm = &job->q;
    const uint8_t *S = (const uint8_t *)job->scale;
    fk_scale_geom g;
    fk_quant_scale_geom(job->desc.scheme, job->desc.scale_layout, job->desc.axis, y->R, y->C, &g);
    const size_t es = fk_dtype_bytes(y->dtype);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < y->E * y->R; row++) {
        int64_t e = row / y->R, r = row % y->R;
        const uint8_t *se = S + e * g.count;
        const uint8_t *qr = (const uint8_t *)fk_cpu_at(qm, e, r, 0);
        char *yr = (char *)fk_cpu_at(y, e, r, 0);
        float sf[FK_CPU_CHUNK / 32];
        for (int64_t c0 = 0; c0 < y->C; c0 += FK_CPU_CHUNK) {
            int64_t k = y->C - c0 < FK_CPU_CHUNK ? y->C - c0 : FK_CPU_CHUNK;
            for (int64_t b = 0; b < k / 32; b++) {
                int64_t cb = c0 / 32 + b;
                sf[b] = fk_e8m0_to_f32(se[fk_scale_off(&g, r, cb)]);
            }
            k_deq(qr + c0, k, lut, 32, sf, 1, y->dtype, yr + c0 * (int64_t)es);
        }
    }
    return FP8KIT_OK;
}

fp8kit_status fk_cpu_dequantize(fp8kit_ctx *ctx, const fk_quant_job *job)
{
    const int nt = fk_cpu_quant_threads(ctx);
    const float *lut = fk_cpu_fp8_lut(job->e5m2);
    switch (job->desc.scheme) {
    case FP8KIT_SCHEME_TENSOR:
        return deq_tensor(nt, job, lut);
    case FP8KIT_SCHEME_ROW:
    case FP8KIT_SCHEME_BLOCK1X128:
    case FP8KIT_SCHEME_BLOCK128X128:
        return deq_fp32_rows(nt, job, lut);
    case FP8KIT_SCHEME_MX:
        return job->desc.axis == -2 ? fk_cpu_dequant_mx_t(nt, job) : deq_mx_rows(nt, job, lut);
    }
    return fk_fail(ctx, FP8KIT_ERR_INTERNAL, "cpu dequantize: unknown scheme %d", (int)job->desc.scheme);
}
