/* dequant_mx_t.c - CPU mx dequantization of a transposed q (axis -2): q is
 * (E, C, R) with e8m0 scales (E, C, R/32) plain or blocked, y is written in
 * the original orientation (E, R, C): y[r][c] = decode(q[c][r]) * 2^(s-127),
 * rounded to y's dtype. Walks 64x64 tiles: the byte tile of q is transposed
 * first, then each output row segment is decoded, scaled and narrowed with
 * loops that vectorize along the columns of y. */
#include "cpu/quant_simd.h"

#define TILE 64

/* One tile: y rows r0 .. r0+th (th = 32 or 64), columns c0 .. c0+tw (tw <= 64). */
FK_CPU_CLONES static void k_deq_mx_t_tile(const uint8_t *q0, int64_t q_sr, const uint8_t *s_e,
                                          int64_t srow0, int64_t scol0, const fk_scale_geom *g,
                                          const float *lut, int th, int tw, char *y0, int64_t y_sr,
                                          fp8kit_dtype yt)
{
    uint8_t qt[TILE][TILE];
    float sf[2][TILE];
    float f[TILE];
    const size_t es = fk_dtype_bytes(yt);
    fkv_transpose_bytes(q0, q_sr, &qt[0][0], TILE, tw, th); /* q rows c -> qt columns */
    for (int i = 0; i < th; i++)
        for (int c = tw; c < TILE; c++)
            qt[i][c] = 0;
    for (int b = 0; b < th / 32; b++) {
        for (int c = 0; c < tw; c++) {
            int64_t sr = srow0 + c, sc = scol0 + b;
            sf[b][c] = fk_e8m0_to_f32(s_e[fk_scale_off(g, sr, sc)]);
        }
        for (int c = tw; c < TILE; c++)
            sf[b][c] = 1.0f;
    }
    for (int i = 0; i < th; i++) {
        const float *s = sf[i / 32];
        for (int c = 0; c < TILE; c++)
            f[c] = fk_deq_mul(lut[qt[i][c]], s[c]);
        fkv_narrow(f, tw, yt, y0 + i * y_sr * (int64_t)es);
    }
}

fp8kit_status fk_cpu_dequant_mx_t(int nt, const fk_quant_job *job)
{
    const fk_mat *y = &job->x, *qm = &job->q;
    fk_scale_geom g; /* the grid in q's orientation: C rows of R/32 */
    fk_quant_scale_geom(job->desc.scheme, job->desc.scale_layout, job->desc.axis, y->R, y->C, &g);
    const int64_t ntr = fk_ceil_div(y->R, TILE), ntc = fk_ceil_div(y->C, TILE);
    const size_t es = fk_dtype_bytes(y->dtype);
    const uint8_t *S = (const uint8_t *)job->scale;
    const float *lut = fk_cpu_fp8_lut(job->e5m2);
#pragma omp parallel for collapse(3) schedule(static) num_threads(nt)
    for (int64_t e = 0; e < y->E; e++)
        for (int64_t tc = 0; tc < ntc; tc++)
            for (int64_t tr = 0; tr < ntr; tr++) {
                int64_t r0 = tr * TILE, c0 = tc * TILE;
                int th = (int)(y->R - r0 < TILE ? y->R - r0 : TILE); /* multiple of 32 */
                int tw = (int)(y->C - c0 < TILE ? y->C - c0 : TILE);
                const uint8_t *q0 = (const uint8_t *)qm->data + e * qm->se + c0 * qm->sr + r0;
                char *y0 = (char *)y->data + (e * y->se + r0 * y->sr + c0) * (int64_t)es;
                k_deq_mx_t_tile(q0, qm->sr, S + e * g.count, c0, r0 / 32, &g, lut,
                                th, tw, y0, y->sr, y->dtype);
            }
    return FP8KIT_OK;
}
