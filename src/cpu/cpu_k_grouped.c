/* cpu_k_grouped.c - the CPU backend's K-grouped GEMM (fp8kit_k_grouped_gemm; the
 * job is validated by src/core/k_grouped.c, offsets included). OpenMP over the
 * G x M output rows; each row decodes its group's slice of A once to fp32
 * (exact), B's codes go through a 256-entry fp32 table (exact, the codecs of
 * src/format/codec.h). Order of operations (docs/spec.md 3, "K-grouped GEMM"):
 *   for each 128-wide block kb of the group's K:
 *       s = sum of a[k] * b[k] in fp32, in k order, from zero
 *       acc = fmaf(s, sa[m][kb] * sb[n][kb], acc)      (1x128 scales)
 *       acc = acc + s                                   (NONE / TENSOR)
 *   y = (double)acc * (alpha [* sa * sb for TENSOR]) + beta * D[g][m][n]
 *       (in double; D read only when beta != 0), rounded once to fp32,
 * then to D's dtype (RNE). An empty group gives acc = 0. This file is
 * compiled without FMA contraction: every step is one IEEE operation. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "cpu/cpu.h"
#include "format/codec.h"

/* One output row m of group g. arow: scratch of the group's K floats. */
static void fk_kg_row(const fk_k_grouped_job *j, const float *tab_a, const float *tab_b, int64_t g, int64_t m,
                      float *arow)
{
    const int64_t k0 = g ? j->offsets[g - 1] : 0, k1 = j->offsets[g], kl = k1 - k0;
    const uint8_t *qa = (const uint8_t *)j->a + m * j->lda + k0;
    for (int64_t k = 0; k < kl; k++)
        arow[k] = tab_a[qa[k]];
    double f = j->alpha;
    if (!j->scales_1x128) {
        if (j->scale_a)
            f *= (double)*j->scale_a;
        if (j->scale_b)
            f *= (double)*j->scale_b;
    }
    const double beta = j->beta;
    const size_t dsz = j->d_type == FP8KIT_F32 ? 4 : 2;
    char *drow = (char *)j->d + (size_t)(g * j->sdg + m * j->ldd) * dsz;
    const float *sa = j->scales_1x128 ? j->scale_a + m * j->kb : NULL;
    for (int64_t n = 0; n < j->n; n++) {
        const uint8_t *qb = (const uint8_t *)j->b + n * j->ldb + k0;
        const float *sb = j->scales_1x128 ? j->scale_b + n * j->kb : NULL;
        float acc = 0.0f;
        for (int64_t b0 = 0; b0 < kl; b0 += 128) {
            const int64_t bl = kl - b0 < 128 ? kl - b0 : 128;
            float s = 0.0f;
            for (int64_t k = 0; k < bl; k++)
                s += arow[b0 + k] * tab_b[qb[b0 + k]];
            if (sa) {
                const int64_t kb = (k0 + b0) / 128;
                acc = fmaf(s, sa[kb] * sb[kb], acc);
            } else {
                acc += s;
            }
        }
        double yd = (double)acc * f;
        float y;
        switch (j->d_type) {
        case FP8KIT_F32:
            if (beta != 0.0)
                yd += beta * (double)((float *)drow)[n];
            ((float *)drow)[n] = (float)yd;
            break;
        case FP8KIT_BF16:
            if (beta != 0.0)
                yd += beta * (double)fk_bf16_to_f32(((uint16_t *)drow)[n]);
            y = (float)yd;
            ((uint16_t *)drow)[n] = fk_f32_to_bf16(y);
            break;
        default: /* f16 */
            if (beta != 0.0)
                yd += beta * (double)fk_f16_to_f32(((uint16_t *)drow)[n]);
            y = (float)yd;
            ((uint16_t *)drow)[n] = fk_f32_to_f16(y);
            break;
        }
    }
}

fp8kit_status fk_cpu_k_grouped(fp8kit_ctx *ctx, const fk_k_grouped_job *j)
{
    float tab_a[256], tab_b[256];
    for (int c = 0; c < 256; c++) {
        tab_a[c] = fk_fp8_to_f32((uint8_t)c, j->a_type == FP8KIT_E5M2);
        tab_b[c] = fk_fp8_to_f32((uint8_t)c, j->b_type == FP8KIT_E5M2);
    }
    int64_t kmax = 1; /* the largest group's K: each thread's A row */
    for (int64_t g = 0; g < j->groups; g++) {
        const int64_t kl = j->offsets[g] - (g ? j->offsets[g - 1] : 0);
        kmax = kl > kmax ? kl : kmax;
    }
    int nt = fk_ctx_threads(ctx) > 0 ? fk_ctx_threads(ctx) : omp_get_max_threads();
    const int64_t rows = j->groups * j->m;
    if (nt < 1 || 2.0 * (double)rows * (double)j->n * (double)kmax < 0x1p20)
        nt = 1;
    if (nt > rows)
        nt = (int)rows;
    float *scratch = (float *)malloc(sizeof(float) * (size_t)kmax * (size_t)nt);
    if (!scratch)
        return fk_fail(ctx, FP8KIT_ERR_OUT_OF_MEMORY, "fp8kit_k_grouped_gemm (cpu): out of memory (%d x %lld floats)",
                       nt, (long long)kmax);
#pragma omp parallel num_threads(nt)
    {
        float *arow = scratch + (size_t)omp_get_thread_num() * (size_t)kmax;
#pragma omp for schedule(dynamic, 1)
        for (int64_t r = 0; r < rows; r++)
            fk_kg_row(j, tab_a, tab_b, r / j->m, r % j->m, arow);
    }
    free(scratch);
    return FP8KIT_OK;
}
