/* cpu_epilogue.c - epilogue of the CPU scaled GEMM (docs/spec.md section 3), applied to
 * finished fp32 accumulator rows:
 *   y = alpha * sa[m] * sb[n] * acc + beta * C[m,n] + bias;  y = act(y);  D = out(y)
 * (the linear part in double, rounded once to fp32; tensor/row scales of A and B are applied here, block and mx scales were
 * applied in the main loop), then the output cast: bf16/f16/f32 (RNE), a
 * plain satfinite fp8 cast, fp8(y / scale_d) with amax, or fused mx /
 * block1x128 quantization of each output row on y rounded to desc.out_hp.
 * With FP8KIT_ACT_SWIGLU the tiles only store y (fk_gemm_epilogue_y) and
 * whole rows are paired and stored afterwards (fk_gemm_swiglu_rows).
 * All element math goes through the shared src/format helpers; this file is
 * compiled without FMA contraction so every step is one IEEE operation. */
#include <string.h>
#include "cpu/gemm_internal.h"
#include "format/codec.h"
#include "format/epilogue_math.h"
#include "format/geometry.h"
#include "format/scale.h"

/* y rounded to the high-precision type (RNE) and widened back. */
static inline float fk_round_hp(float y, fp8kit_dtype t)
{
    switch (t) {
    case FP8KIT_BF16:
        return fk_bf16_to_f32(fk_f32_to_bf16(y));
    case FP8KIT_F16:
        return fk_f16_to_f32(fk_f32_to_f16(y));
    default:
        return y;
    }
}

/* Steps 1-3 in double, rounded once to fp32:
 *   y = acc * rowf[m] (* colf[n]) + beta * C[m, n] + bias
 * The fp32 factors' products are exact in double, so nothing overflows or
 * underflows needlessly, and cancellation between the terms costs no
 * accuracy beyond the accumulation's own error. */
static inline __attribute__((always_inline)) void fk_epi_linear(const fk_gemm_epi *ep, double *restrict yd, float *restrict y, const float *restrict acc,
                          int64_t m, int64_t n0, int64_t w)
{
    const fk_gemm_job *j = ep->job;
    const double rf = ep->rowf[m];
    if (ep->colf) {
        const double *restrict cf = ep->colf + n0;
        for (int64_t x = 0; x < w; x++)
            yd[x] = (double)acc[x] * (rf * cf[x]);
    } else {
        for (int64_t x = 0; x < w; x++)
            yd[x] = (double)acc[x] * rf;
    }
    if (j->c) {
        const double beta = j->beta;
        const int64_t base = m * j->ldc + n0;
        if (j->c_type == FP8KIT_BF16) {
            const uint16_t *c = (const uint16_t *)j->c + base;
            for (int64_t x = 0; x < w; x++)
                yd[x] += beta * (double)fk_bf16_to_f32(c[x]);
        } else if (j->c_type == FP8KIT_F16) {
            const uint16_t *c = (const uint16_t *)j->c + base;
            for (int64_t x = 0; x < w; x++)
                yd[x] += beta * (double)fk_f16_to_f32(c[x]);
        } else {
            const float *c = (const float *)j->c + base;
            for (int64_t x = 0; x < w; x++)
                yd[x] += beta * (double)c[x];
        }
    }
    if (ep->bias) {
        if (ep->bias_row) {
            const double b = ep->bias[m];
            for (int64_t x = 0; x < w; x++)
                yd[x] += b;
        } else {
            const float *b = ep->bias + n0;
            for (int64_t x = 0; x < w; x++)
                yd[x] += (double)b[x];
        }
    }
    for (int64_t x = 0; x < w; x++)
        y[x] = (float)yd[x];
}

/* Fused output quantization of one row (OUTQ_MX / OUTQ_BLOCK1X128), docs/spec.md 2;
 * gd: D's scales (format/geometry.h). */
static inline __attribute__((always_inline)) void fk_epi_quant_row(const fk_gemm_job *j, const fk_scale_geom *gd, float *restrict y, int64_t m, int64_t n0, int64_t w,
                             uint8_t *restrict q)
{
    const int e5m2 = j->d_type == FP8KIT_E5M2;
    const fp8kit_dtype hp = j->desc.out_hp;
    if (hp != FP8KIT_F32)
        for (int64_t x = 0; x < w; x++)
            y[x] = fk_round_hp(y[x], hp);
    if (j->desc.out_quant == FP8KIT_OUTQ_MX) {
        const int rceil = j->desc.out_rounding == FP8KIT_ROUND_RCEIL;
        uint8_t *sd = (uint8_t *)j->scale_d_out + fk_scale_off_rk(gd, m, n0 / 32);
        for (int64_t g = 0; g < w; g += 32) {
            uint32_t amax = 0;
            for (int x = 0; x < 32; x++)
                amax = fk_max_u32(amax, fk_abs_bits(y[g + x]));
            uint8_t s = fk_mx_scale(amax, e5m2, rceil);
            float r = fk_mx_recip(s);
            sd[g / 32] = s;
            for (int x = 0; x < 32; x++)
                q[g + x] = fk_quant_mx_elem(y[g + x], r, e5m2);
        }
    } else {
        const int pow2 = j->desc.out_pow2 != 0;
        float *sd = (float *)j->scale_d_out + fk_scale_off_rk(gd, m, n0 / 128);
        for (int64_t g = 0; g < w; g += 128) {
            int64_t gl = w - g < 128 ? w - g : 128;
            uint32_t amax = 0;
            for (int64_t x = 0; x < gl; x++)
                amax = fk_max_u32(amax, fk_abs_bits(y[g + x]));
            float s = fk_scale_f32(amax, e5m2, pow2);
            sd[g / 128] = s;
            for (int64_t x = 0; x < gl; x++)
                q[g + x] = fk_quant_f32_elem(y[g + x], s, e5m2);
        }
    }
}

/* Step 5: D[m, n0 .. n0 + w) from y. */
static inline __attribute__((always_inline)) void fk_epi_store(const fk_gemm_job *j, const fk_scale_geom *gd, float *restrict y, int64_t m, int64_t n0, int64_t w,
                         uint32_t *amax_bits)
{
    int64_t base = m * j->ldd + n0;
    const int e5m2 = j->d_type == FP8KIT_E5M2;
    switch (j->d_type) {
    case FP8KIT_F32:
        memcpy((float *)j->d + base, y, (size_t)w * sizeof *y);
        return;
    case FP8KIT_BF16: {
        uint16_t *d = (uint16_t *)j->d + base;
        for (int64_t x = 0; x < w; x++)
            d[x] = fk_f32_to_bf16(y[x]);
        return;
    }
    case FP8KIT_F16: {
        uint16_t *d = (uint16_t *)j->d + base;
        for (int64_t x = 0; x < w; x++)
            d[x] = fk_f32_to_f16(y[x]);
        return;
    }
    default:
        break;
    }
    uint8_t *d = (uint8_t *)j->d + base;
    switch (j->desc.out_quant) {
    case FP8KIT_OUTQ_NONE:
        for (int64_t x = 0; x < w; x++)
            d[x] = fk_f32_to_fp8(y[x], e5m2);
        break;
    case FP8KIT_OUTQ_SCALED: {
        const float s = *j->scale_d_in;
        if (j->amax_d) {
            uint32_t am = *amax_bits;
            for (int64_t x = 0; x < w; x++)
                am = fk_max_u32(am, fk_abs_bits(y[x]));
            *amax_bits = am;
        }
        for (int64_t x = 0; x < w; x++)
            d[x] = fk_quant_f32_elem(y[x], s, e5m2);
        break;
    }
    default:
        fk_epi_quant_row(j, gd, y, m, n0, w, d);
        break;
    }
}

/* Cloned per ISA (the element loops vectorize much wider with AVX-512);
 * every clone computes the same IEEE operations, never contracted. */
__attribute__((target_clones("avx512f", "avx2", "default")))
void fk_gemm_epilogue(const fk_gemm_epi *ep, const float *acc, int64_t ldacc, int64_t m0, int64_t m1, int64_t n0,
                      int64_t n1, double *dbuf, float *buf, uint32_t *amax_bits)
{
    const fk_gemm_job *j = ep->job;
    const int64_t w = n1 - n0;
    const int act = (int)j->desc.act;
    fk_scale_geom gd; /* D's scales (fused output quantization) */
    fk_gemm_out_scale_geom(j->desc.out_quant, j->m, j->n, &gd);
    for (int64_t m = m0; m < m1; m++) {
        float *restrict y = buf;
        fk_epi_linear(ep, dbuf, y, acc + (m - m0) * ldacc, m, n0, w);
        if (act != FP8KIT_ACT_NONE)
            for (int64_t x = 0; x < w; x++)
                y[x] = fk_act(y[x], act);
        fk_epi_store(j, &gd, y, m, n0, w, amax_bits);
    }
}

void fk_gemm_epilogue_y(const fk_gemm_epi *ep, const float *acc, int64_t ldacc, int64_t m0, int64_t m1, int64_t n0,
                        int64_t n1, double *dbuf)
{
    const int64_t n = ep->job->n;
    for (int64_t m = m0; m < m1; m++)
        fk_epi_linear(ep, dbuf, ep->yfull + m * n + n0, acc + (m - m0) * ldacc, m, n0, n1 - n0);
}

/* y[x] = fk_swiglu(y[x], y[x + h]) for x < h, in place (x + h >= h is never written). */
static void fk_swiglu_pair_row(float *y, int64_t h)
{
    for (int64_t x = 0; x < h; x++)
        y[x] = fk_swiglu(y[x], y[x + h]);
}

void fk_gemm_swiglu_rows(const fk_gemm_epi *ep, int64_t m0, int64_t m1, uint32_t *amax_bits)
{
    const fk_gemm_job *j = ep->job;
    const int64_t h = fk_job_d_cols(j);
    fk_scale_geom gd; /* D's scales: M x N/2 */
    fk_gemm_out_scale_geom(j->desc.out_quant, j->m, h, &gd);
    for (int64_t m = m0; m < m1; m++) {
        float *y = ep->yfull + m * j->n;
        fk_swiglu_pair_row(y, h);
        fk_epi_store(j, &gd, y, m, 0, h, amax_bits);
    }
}
