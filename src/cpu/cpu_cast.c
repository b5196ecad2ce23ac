/* cpu_cast.c - CPU element-wise cast (fp8kit_cast): any of f32/f16/bf16/e4m3/e5m2
 * to any other, through an exact widening to fp32 and a rounding step (RNE;
 * fp8 satfinite with canonical NaN, docs/spec.md section 1), with no scaling. Also owns
 * the 256-entry fp8 decode tables shared by the CPU dequantize code. */
#include <pthread.h>
#include "cpu/quant_simd.h"

#define ROW_SPLIT 16384 /* elements per parallel work item */

static float lut_e4m3[256], lut_e5m2[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_init(void)
{
    for (int c = 0; c < 256; c++) {
        lut_e4m3[c] = fk_e4m3_to_f32((uint8_t)c);
        lut_e5m2[c] = fk_e5m2_to_f32((uint8_t)c);
    }
}

const float *fk_cpu_fp8_lut(int e5m2)
{
    pthread_once(&lut_once, lut_init);
    return e5m2 ? lut_e5m2 : lut_e4m3;
}

FK_CPU_CLONES static void k_cast(const void *src, fp8kit_dtype st, int64_t n, const float *lut,
                                 void *dst, fp8kit_dtype dt)
{
    float f[FK_CPU_CHUNK];
    const size_t ses = fk_dtype_bytes(st), des = fk_dtype_bytes(dt);
    for (int64_t i = 0; i < n; i += FK_CPU_CHUNK) {
        int64_t k = n - i < FK_CPU_CHUNK ? n - i : FK_CPU_CHUNK;
        fkv_widen((const char *)src + i * ses, st, k, f, lut);
        fkv_narrow(f, k, dt, (char *)dst + i * des);
    }
}

fp8kit_status fk_cpu_cast(fp8kit_ctx *ctx, const fk_cast_job *job)
{
    const fk_mat *s = &job->src, *d = &job->dst;
    const int nt = fk_cpu_quant_threads(ctx);
    const float *lut = NULL;
    if (s->dtype == FP8KIT_E4M3 || s->dtype == FP8KIT_E5M2)
        lut = fk_cpu_fp8_lut(s->dtype == FP8KIT_E5M2);
    const int64_t nsp = fk_ceil_div(s->C, ROW_SPLIT), items = s->E * s->R * nsp;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t it = 0; it < items; it++) {
        int64_t row = it / nsp, c0 = (it % nsp) * ROW_SPLIT;
        int64_t e = row / s->R, r = row % s->R;
        int64_t n = s->C - c0 < ROW_SPLIT ? s->C - c0 : ROW_SPLIT;
        k_cast(fk_cpu_at(s, e, r, c0), s->dtype, n, lut, fk_cpu_at(d, e, r, c0), d->dtype);
    }
    return FP8KIT_OK;
}
