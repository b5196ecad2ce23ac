/* quant_mx_t.c - CPU mx quantization along axis -2 (docs/spec.md 2.2, "32x1"/"dim1"):
 * x (E, R, C) is quantized in blocks of 32 consecutive rows of one column and
 * written transposed, q (E, C, R) and e8m0 scales (E, C, R/32) plain or
 * blocked: exactly the axis -1 quantization of the transpose. The input is
 * walked in 64x64 tiles: each tile is widened row by row, the per-column amax,
 * scale and element codes are computed with loops that vectorize along the
 * columns, and only the final 64x64 byte tile is transposed into q. */
#include "cpu/quant_simd.h"

#define TR 64  /* tile rows of x (two mx blocks) */
#define TC 128 /* tile columns of x = rows of q; 256 B of each bf16 row per tile */

/* One tile: rows r0 .. r0+th of x (th = 32 or 64), columns c0 .. c0+tw (tw <= TC).
 * q_e / s_e point at expert e's q matrix and scale buffer. */
FK_CPU_CLONES static void k_mx_t_tile(const char *x0, int64_t x_sr, fp8kit_dtype t, int th, int tw,
                                      int e5m2, int rceil, uint8_t *q0, int64_t q_sr,
                                      uint8_t *s_e, int64_t srow0, int64_t scol0, const fk_scale_geom *g)
{
    float f[TR][TC];
    uint8_t qt[TR][TC];
    uint8_t sb[TC];
    float rr[TC];
    uint32_t m[TC];
    const size_t es = fk_dtype_bytes(t);

    for (int i = 0; i < th; i++) {
        fkv_widen(x0 + i * x_sr * (int64_t)es, t, tw, f[i], NULL);
        for (int c = tw; c < TC; c++)
            f[i][c] = 0.0f;
    }
    for (int b = 0; b < th / 32; b++) {
        for (int c = 0; c < TC; c++)
            m[c] = 0;
        for (int i = b * 32; i < b * 32 + 32; i++)
            for (int c = 0; c < TC; c++)
                m[c] = fk_max_u32(m[c], fk_abs_bits(f[i][c]));
        for (int c = 0; c < TC; c++) {
            sb[c] = fk_mx_scale(m[c], e5m2, rceil);
            rr[c] = fk_mx_recip(sb[c]);
        }
        if (e5m2)
            for (int i = b * 32; i < b * 32 + 32; i++)
                for (int c = 0; c < TC; c++)
                    qt[i][c] = fkv_f32_to_fp8(f[i][c] * rr[c], 1);
        else
            for (int i = b * 32; i < b * 32 + 32; i++)
                for (int c = 0; c < TC; c++)
                    qt[i][c] = fkv_f32_to_fp8(f[i][c] * rr[c], 0);
        /* scale (row srow0 + c, col scol0 + b) of the transposed operand */
        for (int c = 0; c < tw; c++) {
            int64_t sr = srow0 + c, sc = scol0 + b;
            s_e[fk_scale_off(g, sr, sc)] = sb[c];
        }
    }
    fkv_transpose_bytes(&qt[0][0], TC, q0, q_sr, th, tw);
}

fp8kit_status fk_cpu_quant_mx_t(int nt, const fk_quant_job *job)
{
    const fk_mat *x = &job->x, *qm = &job->q;
    const int rceil = job->desc.rounding == FP8KIT_ROUND_RCEIL;
    fk_scale_geom g; /* the grid in q's orientation: C rows of R/32 */
    fk_quant_scale_geom(job->desc.scheme, job->desc.scale_layout, job->desc.axis, x->R, x->C, &g);
    const int64_t ntr = fk_ceil_div(x->R, TR), ntc = fk_ceil_div(x->C, TC);
    const size_t es = fk_dtype_bytes(x->dtype);
    uint8_t *S = (uint8_t *)job->scale;
    if (g.blocked)
        fk_cpu_blocked_zero_pad(S, x->E, g.grows, g.gcols, g.rows, g.cols, nt);
#pragma omp parallel for collapse(3) schedule(static) num_threads(nt)
    for (int64_t e = 0; e < x->E; e++)
        for (int64_t tr = 0; tr < ntr; tr++)
            for (int64_t tc = 0; tc < ntc; tc++) {
                int64_t r0 = tr * TR, c0 = tc * TC;
                int th = (int)(x->R - r0 < TR ? x->R - r0 : TR); /* multiple of 32 */
                int tw = (int)(x->C - c0 < TC ? x->C - c0 : TC);
                const char *x0 = (const char *)x->data + (e * x->se + r0 * x->sr + c0) * (int64_t)es;
                uint8_t *q0 = (uint8_t *)qm->data + e * qm->se + c0 * qm->sr + r0;
                k_mx_t_tile(x0, x->sr, x->dtype, th, tw, job->e5m2, rceil, q0, qm->sr, S + e * g.count,
                            c0, r0 / 32, &g);
            }
    return FP8KIT_OK;
}
